// bandwidthTest, in the style of CUDA's sample: pinned host <-> device and
// device <-> device copies timed with events, data checked.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "check.h"

static float timeCopies(void *dst, const void *src, size_t n, cudaMemcpyKind kind, int reps)
{
	cudaEvent_t start, stop;
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	CHECK(cudaEventRecord(start, 0));
	for (int i = 0; i < reps; i++)
		CHECK(cudaMemcpyAsync(dst, src, n, kind, 0));
	CHECK(cudaEventRecord(stop, 0));
	CHECK(cudaEventSynchronize(stop));
	float ms = 0;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	return ms;
}

int main()
{
	const size_t n = 4 << 20;
	const int reps = 4;
	unsigned char *h = nullptr, *back = nullptr, *d = nullptr, *d2 = nullptr;
	CHECK(cudaMallocHost((void **)&h, n));
	CHECK(cudaHostAlloc((void **)&back, n, cudaHostAllocDefault));
	CHECK(cudaMalloc((void **)&d, n));
	CHECK(cudaMalloc((void **)&d2, n));
	for (size_t i = 0; i < n; i++)
		h[i] = (unsigned char)(i * 7 + 1);
	const struct {
		const char *what;
		void *dst;
		const void *src;
		cudaMemcpyKind kind;
	} runs[] = {{"Host to Device", d, h, cudaMemcpyHostToDevice},
	            {"Device to Device", d2, d, cudaMemcpyDeviceToDevice},
	            {"Device to Host", back, d2, cudaMemcpyDeviceToHost}};
	for (const auto &r : runs) {
		float ms = timeCopies(r.dst, r.src, n, r.kind, reps);
		EXPECT(ms > 0);
		std::printf("  %-18s %8.3f GB/s\n", r.what, (double)n * reps / (ms * 1e6));
	}
	EXPECT(std::memcmp(h, back, n) == 0);
	CHECK(cudaFree(d));
	CHECK(cudaFree(d2));
	CHECK(cudaFreeHost(h));
	CHECK(cudaFreeHost(back));
	std::printf("Result = PASS\n");
	return 0;
}

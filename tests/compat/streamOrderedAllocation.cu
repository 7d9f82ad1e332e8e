// streamOrderedAllocation, in the style of CUDA's sample: a vector add on
// memory from cudaMallocAsync freed with cudaFreeAsync, then the same in a
// loop with the default pool's release threshold raised so memory stays
// cached across synchronisations, then a pool of its own shared by two
// streams ordered by an event, then a fork/join across three streams.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}
__global__ void scale(float *out, const float *in, float alpha, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = alpha * in[i];
}
#endif

namespace {

const int n = 1 << 16;
const size_t bytes = n * sizeof(float);

// c = a + b on the stream, every buffer from cudaMallocAsync; checked.
void addOnce(cudaStream_t s, const std::vector<float> &a, const std::vector<float> &b)
{
	float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
	CHECK(cudaMallocAsync((void **)&d_a, bytes, s));
	CHECK(cudaMallocAsync((void **)&d_b, bytes, s));
	CHECK(cudaMallocAsync((void **)&d_c, bytes, s));
	CHECK(cudaMemcpyAsync(d_a, a.data(), bytes, cudaMemcpyHostToDevice, s));
	CHECK(cudaMemcpyAsync(d_b, b.data(), bytes, cudaMemcpyHostToDevice, s));
	vectorAdd<<<n / 256, 256, 0, s>>>(d_a, d_b, d_c, n); // npurt: CHECK(opAdd(d_c, d_a, d_b, n, s));
	CHECK(cudaFreeAsync(d_a, s));
	CHECK(cudaFreeAsync(d_b, s));
	std::vector<float> c(n);
	CHECK(cudaMemcpyAsync(c.data(), d_c, bytes, cudaMemcpyDeviceToHost, s));
	CHECK(cudaFreeAsync(d_c, s));
	CHECK(cudaStreamSynchronize(s));
	for (int i = 0; i < n; i++)
		EXPECT(c[i] == a[i] + b[i]);
}

}  // namespace

int main()
{
	int dev = 0, supported = 0;
	CHECK(cudaSetDevice(dev));
	CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev));
	EXPECT(supported == 1);
	std::vector<float> a(n), b(n);
	for (int i = 0; i < n; i++) {
		a[i] = (float)(i % 100);
		b[i] = (float)(i % 7);
	}
	cudaStream_t s;
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	// Basic: allocate, use, free, all in stream order.
	addOnce(s, a, b);
	std::printf("basic stream-ordered allocation: ok\n");

	// Post-sync: with the threshold at UINT64_MAX the pool keeps its
	// memory across synchronisations, so the loop reuses it.
	cudaMemPool_t memPool;
	CHECK(cudaDeviceGetDefaultMemPool(&memPool, dev));
	uint64_t threshold = UINT64_MAX;
	CHECK(cudaMemPoolSetAttribute(memPool, cudaMemPoolAttrReleaseThreshold, &threshold));
	uint64_t reservedAfterFirst = 0, reserved = 0;
	for (int i = 0; i < 20; i++) {
		addOnce(s, a, b);
		CHECK(cudaMemPoolGetAttribute(memPool, cudaMemPoolAttrReservedMemCurrent, &reserved));
		if (i == 0)
			reservedAfterFirst = reserved;
		EXPECT(reserved == reservedAfterFirst);
	}
	std::printf("20 iterations after sync: %llu bytes reserved throughout\n",
	            (unsigned long long)reserved);

	// A pool of its own: memory freed on s1 is reused on s2 once s2
	// waited for an event recorded after the free.
	cudaMemPoolProps props = {};
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = dev;
	cudaMemPool_t pool;
	CHECK(cudaMemPoolCreate(&pool, &props));
	cudaStream_t s1, s2, s3;
	CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
	cudaEvent_t freed, forked, joined2, joined3;
	CHECK(cudaEventCreateWithFlags(&freed, cudaEventDisableTiming));
	CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
	CHECK(cudaEventCreateWithFlags(&joined2, cudaEventDisableTiming));
	CHECK(cudaEventCreateWithFlags(&joined3, cudaEventDisableTiming));
	float *x = nullptr, *y = nullptr;
	CHECK(cudaMallocFromPoolAsync((void **)&x, bytes, pool, s1));
	CHECK(cudaMemsetAsync(x, 0, bytes, s1));
	CHECK(cudaFreeAsync(x, s1));
	CHECK(cudaEventRecord(freed, s1));
	CHECK(cudaStreamWaitEvent(s2, freed, 0));
	CHECK(cudaMallocFromPoolAsync((void **)&y, bytes, pool, s2));
	EXPECT(y == x);
	CHECK(cudaFreeAsync(y, s2));
	CHECK(cudaStreamSynchronize(s2));
	std::printf("reuse across streams ordered by an event: ok\n");

	// Fork/join: s1 fills in, s2 and s3 scale halves of it into out,
	// each with a scratch buffer allocated and freed on its own stream.
	float *in = nullptr, *out = nullptr;
	CHECK(cudaMallocFromPoolAsync((void **)&in, bytes, pool, s1));
	CHECK(cudaMallocFromPoolAsync((void **)&out, bytes, pool, s1));
	CHECK(cudaMemcpyAsync(in, a.data(), bytes, cudaMemcpyHostToDevice, s1));
	CHECK(cudaEventRecord(forked, s1));
	cudaStream_t side[2] = {s2, s3};
	cudaEvent_t joined[2] = {joined2, joined3};
	for (int k = 0; k < 2; k++) {
		cudaStream_t t = side[k];
		const int half = n / 2;
		float *tmp = nullptr;
		CHECK(cudaStreamWaitEvent(t, forked, 0));
		CHECK(cudaMallocAsync((void **)&tmp, half * sizeof(float), t));
		scale<<<half / 256, 256, 0, t>>>(tmp, in + k * half, 2.0f, half); // npurt: CHECK(opScale(tmp, in + k * half, 2.0f, half, t));
		scale<<<half / 256, 256, 0, t>>>(out + k * half, tmp, 0.5f + k, half); // npurt: CHECK(opScale(out + k * half, tmp, 0.5f + k, half, t));
		CHECK(cudaFreeAsync(tmp, t));
		CHECK(cudaEventRecord(joined[k], t));
		CHECK(cudaStreamWaitEvent(s1, joined[k], 0));
	}
	std::vector<float> result(n);
	CHECK(cudaMemcpyAsync(result.data(), out, bytes, cudaMemcpyDeviceToHost, s1));
	CHECK(cudaFreeAsync(in, s1));
	CHECK(cudaFreeAsync(out, s1));
	CHECK(cudaStreamSynchronize(s1));
	for (int i = 0; i < n; i++)
		EXPECT(result[i] == a[i] * 2.0f * (i < n / 2 ? 0.5f : 1.5f));
	std::printf("fork/join across three streams: ok\n");

	CHECK(cudaMemPoolDestroy(pool));
	for (cudaEvent_t e : {freed, forked, joined2, joined3})
		CHECK(cudaEventDestroy(e));
	for (cudaStream_t t : {s, s1, s2, s3})
		CHECK(cudaStreamDestroy(t));
	std::printf("streamOrderedAllocation: PASSED\n");
	return 0;
}

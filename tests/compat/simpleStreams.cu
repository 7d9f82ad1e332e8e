// simpleStreams, in the style of CUDA's sample: work split over streams,
// timed by events on the NULL stream, whose legacy semantics make the stop
// event wait for every stream's work.
#include <cuda_runtime.h>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void init_array(float *g_data, float factor, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		g_data[i] *= factor;
}
#endif

int main()
{
	const int nstreams = 4, n = 1 << 20, chunk = n / nstreams;
	const float factor = 2.0f;
	float *a = nullptr, *d_a = nullptr;
	CHECK(cudaSetDeviceFlags(cudaDeviceBlockingSync));
	CHECK(cudaMallocHost((void **)&a, n * sizeof(float)));
	CHECK(cudaMalloc((void **)&d_a, n * sizeof(float)));
	for (int i = 0; i < n; i++)
		a[i] = 1.0f + (float)(i % 7);
	cudaStream_t streams[nstreams];
	for (auto &s : streams)
		CHECK(cudaStreamCreate(&s));
	cudaEvent_t start, stop;
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	dim3 threads(512), blocks(chunk / 512);

	CHECK(cudaEventRecord(start, 0));
	for (int i = 0; i < nstreams; i++) {
		float *part = d_a + i * chunk;
		CHECK(cudaMemcpyAsync(part, a + i * chunk, chunk * sizeof(float),
		                      cudaMemcpyHostToDevice, streams[i]));
		init_array<<<blocks, threads, 0, streams[i]>>>(part, factor, chunk); // npurt: CHECK(opScale(part, part, factor, chunk, streams[i]));
		CHECK(cudaMemcpyAsync(a + i * chunk, part, chunk * sizeof(float),
		                      cudaMemcpyDeviceToHost, streams[i]));
	}
	// The NULL stream's event is recorded after the streams' work: it
	// completes only once all of it has.
	CHECK(cudaEventRecord(stop, 0));
	CHECK(cudaEventSynchronize(stop));
	for (auto &s : streams)
		EXPECT(cudaStreamQuery(s) == cudaSuccess);
	float ms = 0;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	std::printf("%d streams: %.2f ms\n", nstreams, ms);
	for (int i = 0; i < n; i++)
		EXPECT(a[i] == (1.0f + (float)(i % 7)) * factor);
	for (auto &s : streams)
		CHECK(cudaStreamDestroy(s));
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	CHECK(cudaFreeHost(a));
	CHECK(cudaFree(d_a));
	CHECK(cudaDeviceReset());
	std::printf("Result = PASS\n");
	return 0;
}

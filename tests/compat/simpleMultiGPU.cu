// simpleMultiGPU, in the style of CUDA's sample: each device sums its part
// of the data on its own stream; the host adds the partial sums.
#include <cuda_runtime.h>

#include <vector>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void reduceKernel(float *d_Result, float *d_Input, int n)
{
	/* one block sums its part (a tree reduction in the sample) */
}
#endif

int main()
{
	int count = 0;
	CHECK(cudaGetDeviceCount(&count));
	const int n = 1 << 18;
	std::printf("%d device(s)\n", count);
	std::vector<float *> h(count), d(count), dsum(count), hsum(count);
	std::vector<cudaStream_t> streams(count);
	double want = 0;
	for (int i = 0; i < count; i++) {
		CHECK(cudaSetDevice(i));
		CHECK(cudaStreamCreate(&streams[i]));
		CHECK(cudaMallocHost((void **)&h[i], n * sizeof(float)));
		CHECK(cudaMallocHost((void **)&hsum[i], sizeof(float)));
		CHECK(cudaMalloc((void **)&d[i], n * sizeof(float)));
		CHECK(cudaMalloc((void **)&dsum[i], sizeof(float)));
		for (int k = 0; k < n; k++) {
			h[i][k] = (float)((k + i) % 8);
			want += h[i][k];
		}
	}
	for (int i = 0; i < count; i++) {
		CHECK(cudaSetDevice(i));
		float *in = d[i], *out = dsum[i];
		CHECK(cudaMemcpyAsync(in, h[i], n * sizeof(float), cudaMemcpyHostToDevice,
		                      streams[i]));
		reduceKernel<<<1, 256, 0, streams[i]>>>(out, in, n); // npurt: CHECK(opSum(out, in, n, streams[i]));
		CHECK(cudaMemcpyAsync(hsum[i], out, sizeof(float), cudaMemcpyDeviceToHost,
		                      streams[i]));
	}
	double got = 0;
	for (int i = 0; i < count; i++) {
		CHECK(cudaSetDevice(i));
		CHECK(cudaStreamSynchronize(streams[i]));
		got += *hsum[i];
		CHECK(cudaFreeHost(h[i]));
		CHECK(cudaFreeHost(hsum[i]));
		CHECK(cudaFree(d[i]));
		CHECK(cudaFree(dsum[i]));
		CHECK(cudaStreamDestroy(streams[i]));
	}
	std::printf("GPU sum %.0f, CPU sum %.0f\n", got, want);
	EXPECT(got == want);
	std::printf("Result = PASS\n");
	return 0;
}

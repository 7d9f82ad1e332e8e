// simpleMultiCopy, in the style of CUDA's sample: copies in, kernels and
// copies out of independent chunks on two streams, so that one stream's
// copies overlap the other's kernels; events order the chunks' reuse.
#include <cuda_runtime.h>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void incKernel(float *g_out, float *g_in, int n, int inner_reps)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		g_out[i] = g_in[i] * 2.0f;
}
#endif

int main()
{
	const int nstreams = 2, nreps = 6, n = 1 << 18;
	const size_t bytes = n * sizeof(float);
	float *h_in[nstreams], *h_out[nstreams], *d_in[nstreams], *d_out[nstreams];
	cudaStream_t stream[nstreams];
	cudaEvent_t cycleDone[nstreams];
	for (int i = 0; i < nstreams; i++) {
		CHECK(cudaHostAlloc((void **)&h_in[i], bytes, 0));
		CHECK(cudaHostAlloc((void **)&h_out[i], bytes, 0));
		CHECK(cudaMalloc((void **)&d_in[i], bytes));
		CHECK(cudaMalloc((void **)&d_out[i], bytes));
		CHECK(cudaStreamCreate(&stream[i]));
		CHECK(cudaEventCreateWithFlags(&cycleDone[i], cudaEventDisableTiming));
	}
	for (int rep = 0; rep < nreps; rep++) {
		int k = rep % nstreams;
		// The chunk's buffers are reused once its previous cycle is done.
		CHECK(cudaEventSynchronize(cycleDone[k]));
		if (rep >= nstreams)
			for (int i = 0; i < n; i++)
				EXPECT(h_out[k][i] == (float)(i % 13 + rep - nstreams) * 2.0f);
		for (int i = 0; i < n; i++)
			h_in[k][i] = (float)(i % 13 + rep);
		float *in = d_in[k], *out = d_out[k];
		CHECK(cudaMemcpyAsync(in, h_in[k], bytes, cudaMemcpyHostToDevice, stream[k]));
		incKernel<<<n / 512, 512, 0, stream[k]>>>(out, in, n, 1); // npurt: CHECK(opScale(out, in, 2.0f, n, stream[k]));
		CHECK(cudaMemcpyAsync(h_out[k], out, bytes, cudaMemcpyDeviceToHost, stream[k]));
		CHECK(cudaEventRecord(cycleDone[k], stream[k]));
	}
	CHECK(cudaDeviceSynchronize());
	for (int k = 0; k < nstreams; k++) {
		int rep = nreps - nstreams + k;
		for (int i = 0; i < n; i++)
			EXPECT(h_out[k][i] == (float)(i % 13 + rep) * 2.0f);
		CHECK(cudaFreeHost(h_in[k]));
		CHECK(cudaFreeHost(h_out[k]));
		CHECK(cudaFree(d_in[k]));
		CHECK(cudaFree(d_out[k]));
		CHECK(cudaStreamDestroy(stream[k]));
		CHECK(cudaEventDestroy(cycleDone[k]));
	}
	std::printf("Result = PASS\n");
	return 0;
}

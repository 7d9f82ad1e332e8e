// Stream priorities, in the style of CUDA's sample: streams of the greatest
// and least priority run the same work; each keeps its priority.
#include <cuda_runtime.h>

#include <initializer_list>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void memcpy_kernel(float *dst, float *src, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = src[i];
}
#endif

int main()
{
	int least = 0, greatest = 0;
	CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	std::printf("priorities: least %d, greatest %d\n", least, greatest);
	EXPECT(greatest <= least);
	cudaStream_t high, low;
	CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, greatest));
	CHECK(cudaStreamCreateWithPriority(&low, cudaStreamNonBlocking, least));
	int p = 99;
	unsigned int f = 0;
	CHECK(cudaStreamGetPriority(high, &p));
	EXPECT(p == greatest);
	CHECK(cudaStreamGetPriority(low, &p));
	EXPECT(p == least);
	CHECK(cudaStreamGetFlags(high, &f));
	EXPECT(f == cudaStreamNonBlocking);
	const int n = 1 << 20;
	float *src, *dh, *dl, *out;
	CHECK(cudaMalloc((void **)&src, n * sizeof(float)));
	CHECK(cudaMalloc((void **)&dh, n * sizeof(float)));
	CHECK(cudaMalloc((void **)&dl, n * sizeof(float)));
	CHECK(cudaMallocHost((void **)&out, n * sizeof(float)));
	for (int i = 0; i < n; i++)
		out[i] = (float)(i % 11);
	CHECK(cudaMemcpy(src, out, n * sizeof(float), cudaMemcpyHostToDevice));
	memcpy_kernel<<<n / 256, 256, 0, low>>>(dl, src, n); // npurt: CHECK(opScale(dl, src, 1.0f, n, low));
	memcpy_kernel<<<n / 256, 256, 0, high>>>(dh, src, n); // npurt: CHECK(opScale(dh, src, 1.0f, n, high));
	CHECK(cudaStreamSynchronize(low));
	CHECK(cudaStreamSynchronize(high));
	for (float *d : {dh, dl}) {
		CHECK(cudaMemcpy(out, d, n * sizeof(float), cudaMemcpyDeviceToHost));
		for (int i = 0; i < n; i++)
			EXPECT(out[i] == (float)(i % 11));
	}
	CHECK(cudaStreamDestroy(high));
	CHECK(cudaStreamDestroy(low));
	CHECK(cudaFree(src));
	CHECK(cudaFree(dh));
	CHECK(cudaFree(dl));
	CHECK(cudaFreeHost(out));
	std::printf("Result = PASS\n");
	return 0;
}

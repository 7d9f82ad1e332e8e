// simpleZeroCopy, in the style of CUDA's sample: a kernel reads and writes
// mapped host memory through its device pointers.
#include <cuda_runtime.h>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void vectorAddGPU(float *a, float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}
#endif

int main()
{
	const int n = 1 << 20;
	cudaDeviceProp p;
	CHECK(cudaGetDeviceProperties(&p, 0));
	EXPECT(p.canMapHostMemory);
	CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
	unsigned int flags = 0;
	CHECK(cudaGetDeviceFlags(&flags));
	EXPECT(flags & cudaDeviceMapHost);
	float *a, *b, *c, *d_a, *d_b, *d_c;
	CHECK(cudaHostAlloc((void **)&a, n * sizeof(float), cudaHostAllocMapped));
	CHECK(cudaHostAlloc((void **)&b, n * sizeof(float), cudaHostAllocMapped));
	CHECK(cudaHostAlloc((void **)&c, n * sizeof(float),
	                    cudaHostAllocMapped | cudaHostAllocWriteCombined));
	for (int i = 0; i < n; i++) {
		a[i] = (float)(i % 100);
		b[i] = (float)(i % 17) * 0.5f;
	}
	CHECK(cudaHostGetDevicePointer((void **)&d_a, (void *)a, 0));
	CHECK(cudaHostGetDevicePointer((void **)&d_b, (void *)b, 0));
	CHECK(cudaHostGetDevicePointer((void **)&d_c, (void *)c, 0));
	vectorAddGPU<<<n / 256, 256>>>(d_a, d_b, d_c, n); // npurt: CHECK(opAdd(d_c, d_a, d_b, n, 0));
	CHECK(cudaDeviceSynchronize());
	for (int i = 0; i < n; i++)
		EXPECT(c[i] == a[i] + b[i]);
	unsigned int hf = 0;
	CHECK(cudaHostGetFlags(&hf, c));
	EXPECT(hf & cudaHostAllocMapped);
	CHECK(cudaFreeHost(a));
	CHECK(cudaFreeHost(b));
	CHECK(cudaFreeHost(c));
	std::printf("Result = PASS\n");
	return 0;
}

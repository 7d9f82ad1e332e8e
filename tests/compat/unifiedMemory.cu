// unifiedMemory, in the style of CUDA's "An Even Easier Introduction to
// CUDA" and its prefetch follow-up: one managed pointer used by host code
// and the kernel, prefetched to the device and back, with advice.
#include <cuda_runtime.h>

#include <cmath>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void add(int n, float *x, float *y)
{
	int index = blockIdx.x * blockDim.x + threadIdx.x;
	int stride = blockDim.x * gridDim.x;
	for (int i = index; i < n; i += stride)
		y[i] = x[i] + y[i];
}
#endif

int main()
{
	const int N = 1 << 20;
	int device = -1;
	CHECK(cudaGetDevice(&device));
	int managed = 0, concurrent = 0;
	CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device));
	CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
	EXPECT(managed == 1);

	float *x, *y;
	CHECK(cudaMallocManaged(&x, N * sizeof(float)));
	CHECK(cudaMallocManaged(&y, N * sizeof(float)));
	for (int i = 0; i < N; i++) {
		x[i] = 1.0f;
		y[i] = 2.0f;
	}
	cudaPointerAttributes attr;
	CHECK(cudaPointerGetAttributes(&attr, y));
	EXPECT(attr.type == cudaMemoryTypeManaged);

	if (concurrent) {
		CHECK(cudaMemAdvise(x, N * sizeof(float), cudaMemAdviseSetReadMostly, device));
		CHECK(cudaMemPrefetchAsync(x, N * sizeof(float), device, 0));
		CHECK(cudaMemPrefetchAsync(y, N * sizeof(float), device, 0));
	}
	add<<<(N + 255) / 256, 256>>>(N, x, y); // npurt: CHECK(opAdd(y, x, y, N, 0));
	if (concurrent)
		CHECK(cudaMemPrefetchAsync(y, N * sizeof(float), cudaCpuDeviceId, 0));
	CHECK(cudaDeviceSynchronize());

	float maxError = 0.0f;
	for (int i = 0; i < N; i++)
		maxError = std::fmax(maxError, std::fabs(y[i] - 3.0f));
	std::printf("Max error: %g\n", maxError);
	EXPECT(maxError == 0.0f);

	CHECK(cudaFree(x));
	CHECK(cudaFree(y));
	std::printf("Result = PASS\n");
	return 0;
}

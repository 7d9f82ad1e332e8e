// asyncAPI, in the style of CUDA's sample: a copy in, a kernel and a copy
// out, all asynchronous; the CPU counts while it polls the stop event.
#include <cuda_runtime.h>

#include <vector>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void scale_kernel(float *g_data, float value, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		g_data[i] *= value;
}
#endif

int main()
{
	const int n = 1 << 20;
	const float value = 3.0f;
	float *a = nullptr, *d_a = nullptr;
	CHECK(cudaMallocHost((void **)&a, n * sizeof(float)));
	CHECK(cudaMalloc((void **)&d_a, n * sizeof(float)));
	for (int i = 0; i < n; i++)
		a[i] = (float)(i % 1000);
	cudaEvent_t start, stop;
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	dim3 threads(512), blocks(n / 512);

	CHECK(cudaEventRecord(start, 0));
	CHECK(cudaMemcpyAsync(d_a, a, n * sizeof(float), cudaMemcpyHostToDevice, 0));
	scale_kernel<<<blocks, threads, 0, 0>>>(d_a, value, n); // npurt: CHECK(opScale(d_a, d_a, value, n, 0));
	CHECK(cudaMemcpyAsync(a, d_a, n * sizeof(float), cudaMemcpyDeviceToHost, 0));
	CHECK(cudaEventRecord(stop, 0));

	unsigned long counter = 0;
	while (cudaEventQuery(stop) == cudaErrorNotReady)
		counter++;
	CHECK(cudaGetLastError());  // NotReady is a status, never the last error
	float ms = 0;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	std::printf("time spent executing by the device: %.2f ms\n", ms);
	std::printf("CPU executed %lu iterations while waiting for the device\n", counter);
	for (int i = 0; i < n; i++)
		EXPECT(a[i] == (float)(i % 1000) * value);
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	CHECK(cudaFreeHost(a));
	CHECK(cudaFree(d_a));
	std::printf("Result = PASS\n");
	return 0;
}

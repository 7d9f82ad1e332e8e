// simpleP2P, in the style of CUDA's sample: peer access enabled both ways,
// a timed copy between the two devices, then a kernel on each device that
// reads the other's memory and writes its own.
#include <cuda_runtime.h>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void SimpleKernel(float *src, float *dst)
{
	const int idx = blockIdx.x * blockDim.x + threadIdx.x;
	dst[idx] = src[idx] * 2.0f;
}
#endif

int main()
{
	int count = 0;
	CHECK(cudaGetDeviceCount(&count));
	if (count < 2) {
		std::printf("Two or more devices are required; found %d. Result = WAIVED\n", count);
		return 0;
	}
	int can01 = 0, can10 = 0;
	CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
	CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
	std::printf("> Peer access from GPU0 -> GPU1: %s\n", can01 ? "Yes" : "No");
	std::printf("> Peer access from GPU1 -> GPU0: %s\n", can10 ? "Yes" : "No");
	EXPECT(can01 && can10);
	int access = 0;
	CHECK(cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, 0, 1));
	EXPECT(access == 1);
	CHECK(cudaSetDevice(0));
	CHECK(cudaDeviceEnablePeerAccess(1, 0));
	CHECK(cudaSetDevice(1));
	CHECK(cudaDeviceEnablePeerAccess(0, 0));
	EXPECT(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorPeerAccessAlreadyEnabled);
	cudaGetLastError();

	const size_t n = 1024 * 1024 * 4;
	const size_t bytes = n * sizeof(float);
	float *g0, *g1, *h0;
	CHECK(cudaSetDevice(0));
	CHECK(cudaMalloc((void **)&g0, bytes));
	CHECK(cudaSetDevice(1));
	CHECK(cudaMalloc((void **)&g1, bytes));
	CHECK(cudaMallocHost((void **)&h0, bytes));

	cudaEvent_t start, stop;
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	CHECK(cudaEventRecord(start, 0));
	for (int i = 0; i < 10; i++) {
		// Ping-pong between the devices; the current device (1) copies.
		if (i % 2 == 0)
			CHECK(cudaMemcpy(g1, g0, bytes, cudaMemcpyDefault));
		else
			CHECK(cudaMemcpy(g0, g1, bytes, cudaMemcpyDefault));
	}
	CHECK(cudaEventRecord(stop, 0));
	CHECK(cudaEventSynchronize(stop));
	float ms = 0;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	std::printf("cudaMemcpyPeer / cudaMemcpy between GPU0 and GPU1: %.2fGB/s\n",
	            (1.0f / (ms / 1000.0f)) * ((10.0f * bytes)) / 1024.0f / 1024.0f / 1024.0f);

	for (size_t i = 0; i < n; i++)
		h0[i] = float(i % 4096);
	CHECK(cudaSetDevice(0));
	CHECK(cudaMemcpy(g0, h0, bytes, cudaMemcpyDefault));
	// GPU1 reads GPU0's memory and writes its own.
	CHECK(cudaSetDevice(1));
	SimpleKernel<<<n / 512, 512>>>(g0, g1);  // npurt: CHECK(opScale(g1, g0, 2.0f, n, 0));
	CHECK(cudaDeviceSynchronize());
	// GPU0 reads GPU1's memory and writes its own.
	CHECK(cudaSetDevice(0));
	SimpleKernel<<<n / 512, 512>>>(g1, g0);  // npurt: CHECK(opScale(g0, g1, 2.0f, n, 0));
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(h0, g0, bytes, cudaMemcpyDefault));
	int errors = 0;
	for (size_t i = 0; i < n; i++)
		if (h0[i] != float(i % 4096) * 2.0f * 2.0f && errors++ < 10)
			std::printf("Verification error @ element %zu: val = %f, ref = %f\n", i,
			            h0[i], float(i % 4096) * 4.0f);

	CHECK(cudaFreeHost(h0));
	CHECK(cudaSetDevice(0));
	CHECK(cudaDeviceDisablePeerAccess(1));
	CHECK(cudaFree(g0));
	CHECK(cudaSetDevice(1));
	CHECK(cudaDeviceDisablePeerAccess(0));
	EXPECT(cudaDeviceDisablePeerAccess(0) == cudaErrorPeerAccessNotEnabled);
	cudaGetLastError();
	CHECK(cudaFree(g1));
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	std::printf("%s\n", errors ? "Test failed!" : "Test passed");
	std::printf("Result = %s\n", errors ? "FAIL" : "PASS");
	return errors ? 1 : 0;
}

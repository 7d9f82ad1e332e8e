// deviceQuery, in the style of CUDA's sample: every device's properties and
// attributes, which must agree.
#include <cuda_runtime.h>

#include "check.h"

int main()
{
	int count = 0, driver = 0, runtime = 0;
	CHECK(cudaGetDeviceCount(&count));
	CHECK(cudaDriverGetVersion(&driver));
	CHECK(cudaRuntimeGetVersion(&runtime));
	std::printf("Detected %d device(s); driver %d, runtime %d\n", count, driver, runtime);
	EXPECT(count > 0 && driver > 0 && runtime == CUDART_VERSION);
	for (int dev = 0; dev < count; dev++) {
		cudaDeviceProp p;
		CHECK(cudaGetDeviceProperties(&p, dev));
		int sms = 0, major = 0, engines = 0, unified = 0, mapHost = 0, clock = 0;
		CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
		CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
		CHECK(cudaDeviceGetAttribute(&engines, cudaDevAttrAsyncEngineCount, dev));
		CHECK(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, dev));
		CHECK(cudaDeviceGetAttribute(&mapHost, cudaDevAttrCanMapHostMemory, dev));
		CHECK(cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, dev));
		std::printf("Device %d: \"%s\"\n", dev, p.name);
		std::printf("  Capability %d.%d, %d multiprocessors, %d copy engines\n", p.major,
		            p.minor, p.multiProcessorCount, p.asyncEngineCount);
		std::printf("  Global memory %zu MiB, clock %d kHz, PCI %d:%d:%d\n",
		            p.totalGlobalMem >> 20, p.clockRate, p.pciDomainID, p.pciBusID,
		            p.pciDeviceID);
		std::printf("  Unified addressing %d, maps host memory %d, concurrent kernels %d\n",
		            p.unifiedAddressing, p.canMapHostMemory, p.concurrentKernels);
		EXPECT(sms == p.multiProcessorCount && sms > 0);
		EXPECT(major == p.major && engines == p.asyncEngineCount && clock == p.clockRate);
		EXPECT(unified == 1 && mapHost == 1 && p.totalGlobalMem > 0);
	}
	int bad = 0;
	EXPECT(cudaDeviceGetAttribute(&bad, cudaDevAttrClockRate, count) == cudaErrorInvalidDevice);
	cudaGetLastError();
	std::printf("Result = PASS\n");
	return 0;
}

// npurt-demo: the tour of the runtime that `make demo` runs in the VM.
//
// Today: device discovery, properties and per-thread device selection.
#include <cstdio>
#include <thread>
#include <vector>

#include "npurt/npurt.hpp"

int main()
{
	try {
		int runtimeVersion = 0;
		int driverVersion = 0;
		npurt::check(npurtRuntimeGetVersion(&runtimeVersion));
		npurt::check(npurtDriverGetVersion(&driverVersion));
		std::printf("libnpurt %d, npu driver uAPI %d\n", runtimeVersion, driverVersion);

		int n = npurt::deviceCount();
		std::printf("%d NPU(s) found\n", n);
		for (int d = 0; d < n; d++) {
			npurtDeviceProp p = npurt::deviceProperties(d);
			std::printf("  NPU %d: %s (%s)%s\n"
			            "         memory %zu MiB, engines %d copy + %d compute, "
			            "clock %llu MHz\n",
			            d, p.name, p.devicePath, p.emulated ? ", emulated" : "",
			            p.totalGlobalMem >> 20, p.copyEngineCount, p.computeEngineCount,
			            static_cast<unsigned long long>(p.clockRateHz / 1000000));
		}

		// The current device is per thread, as in CUDA.
		std::vector<std::thread> threads;
		std::vector<int> seen(n, -1);
		for (int d = 0; d < n; d++) {
			threads.emplace_back([d, &seen] {
				npurt::DeviceGuard guard(d);
				seen[d] = npurt::currentDevice();
			});
		}
		for (auto &t : threads)
			t.join();
		for (int d = 0; d < n; d++)
			std::printf("  thread %d selected NPU %d\n", d, seen[d]);
		std::printf("main thread's device is still %d\n", npurt::currentDevice());

		// Errors name their cause.
		npurtError_t err = npurtSetDevice(n);
		std::printf("npurtSetDevice(%d) -> %s: %s\n", n, npurtGetErrorName(err),
		            npurtGetLastErrorMessage());
		npurtGetLastError();
		return n > 0 ? 0 : 1;
	} catch (const npurt::Error &e) {
		std::fprintf(stderr, "npurt-demo: %s\n", e.what());
		return 1;
	}
}

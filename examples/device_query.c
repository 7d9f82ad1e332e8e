/*
 * device_query: list the NPUs through the C API (C99).
 */
#include <stdio.h>

#include "npurt/npurt.h"

#define CHECK(call)                                                                            \
	do {                                                                                   \
		npurtError_t err_ = (call);                                                    \
		if (err_ != npurtSuccess) {                                                    \
			fprintf(stderr, "%s failed: %s: %s\n", #call, npurtGetErrorName(err_), \
			        npurtGetLastErrorMessage());                                   \
			return 1;                                                              \
		}                                                                              \
	} while (0)

int main(void)
{
	int count = 0;
	int dev;

	CHECK(npurtGetDeviceCount(&count));
	printf("%d NPU(s)\n", count);
	for (dev = 0; dev < count; dev++) {
		npurtDeviceProp prop;

		CHECK(npurtGetDeviceProperties(&prop, dev));
		printf("NPU %d: %s at %s, %zu MiB, %d copy + %d compute engines\n", dev, prop.name,
		       prop.devicePath, prop.totalGlobalMem >> 20, prop.copyEngineCount,
		       prop.computeEngineCount);
	}
	return 0;
}

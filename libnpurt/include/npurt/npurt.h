/*
 * npurt.h - C API of libnpurt, the NPU runtime.
 *
 * Names and semantics follow the CUDA runtime with the "npurt" prefix, so a
 * framework's CUDA backend ports mechanically. C99, no exceptions cross it;
 * every function returns an npurtError_t.
 *
 * Thread safety: every function may be called from any thread at any time.
 * The current device and the last error are per thread.
 */
#ifndef NPURT_H
#define NPURT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NPURT_API __attribute__((visibility("default")))
#else
#define NPURT_API
#endif

/* Runtime version: major * 1000 + minor * 10, as CUDA encodes it. */
#define NPURT_VERSION_MAJOR 0
#define NPURT_VERSION_MINOR 1
#define NPURT_VERSION (NPURT_VERSION_MAJOR * 1000 + NPURT_VERSION_MINOR * 10)

/*
 * Error codes. Values are ABI: never renumbered, only added. "Not ready" is
 * a status, not a failure: it never becomes the thread's last error.
 */
typedef enum npurtError {
	npurtSuccess = 0,
	npurtErrorInvalidValue = 1, /* a bad argument */
	npurtErrorMemoryAllocation = 2, /* device memory exhausted */
	npurtErrorInitializationError = 3, /* the runtime could not start */
	npurtErrorNoDevice = 4, /* no usable NPU */
	npurtErrorInvalidDevice = 5, /* device ordinal out of range */
	npurtErrorInsufficientDriver = 6, /* kernel uAPI too old or new */
	npurtErrorNotReady = 7, /* work still pending (a status) */
	npurtErrorTimeout = 8, /* a wait ran past its timeout */
	npurtErrorNotSupported = 9, /* not available on this device */
	npurtErrorInvalidHandle = 10, /* null, freed or foreign handle */
	npurtErrorDeviceFault = 11, /* device memory fault */
	npurtErrorLaunchFailure = 12, /* an op failed on the device */
	npurtErrorLaunchTimeout = 13, /* work hung and was reset */
	npurtErrorHostMemoryAllocation = 14, /* host memory exhausted */
	npurtErrorPermission = 15, /* the OS refused access */
	npurtErrorOperatingSystem = 16, /* an unexpected OS error */
	npurtErrorUnknown = 999
} npurtError_t;

/* Properties of one NPU (npurtGetDeviceProperties). */
typedef struct npurtDeviceProp {
	char name[64]; /* model name, e.g. "npu-emu" */
	char devicePath[64]; /* its render node, /dev/dri/renderD* */
	int deviceIndex; /* the driver's index of this NPU */
	int engineCount; /* copy + compute engines */
	int copyEngineCount; /* DMA engines */
	int computeEngineCount; /* compute units running ops */
	size_t totalGlobalMem; /* device memory in bytes */
	uint64_t clockRateHz; /* device timestamp clock */
	uint64_t capabilities; /* npurtDeviceCap* bits */
	uint64_t vaStart; /* device address range */
	uint64_t vaEnd;
	int driverApiVersion; /* uAPI version, major * 1000 + minor * 10 */
	int emulated; /* 1 for the in-kernel emulated NPU */
	unsigned char reserved[256]; /* zero; room to grow the ABI */
} npurtDeviceProp;

#define npurtDeviceCapEmulated (1ULL << 0)

/* Errors. */
NPURT_API const char *npurtGetErrorName(npurtError_t error);
NPURT_API const char *npurtGetErrorString(npurtError_t error);
/* Returns this thread's last error and resets it to npurtSuccess. */
NPURT_API npurtError_t npurtGetLastError(void);
/* Returns this thread's last error without resetting it. */
NPURT_API npurtError_t npurtPeekAtLastError(void);
/*
 * What went wrong in this thread's last failed call, naming the cause
 * ("device 3 requested, 2 NPUs present", "open /dev/dri/renderD128:
 * Permission denied"). "" once npurtGetLastError() has reset the error.
 * Valid until the thread's next runtime call.
 */
NPURT_API const char *npurtGetLastErrorMessage(void);

/* Versions. */
NPURT_API npurtError_t npurtRuntimeGetVersion(int *version);
/* The kernel driver's uAPI version, or 0 when no NPU is present. */
NPURT_API npurtError_t npurtDriverGetVersion(int *version);

/*
 * Devices. Ordinals are 0..count-1 in the driver's device order, filtered by
 * the NPURT_VISIBLE_DEVICES environment variable (a comma-separated list of
 * driver indices) when it is set. With no NPU, count is 0 and the call
 * returns npurtErrorNoDevice.
 */
NPURT_API npurtError_t npurtGetDeviceCount(int *count);
NPURT_API npurtError_t npurtGetDeviceProperties(npurtDeviceProp *prop, int device);
/* The calling thread's current device; 0 until the thread sets one. */
NPURT_API npurtError_t npurtSetDevice(int device);
NPURT_API npurtError_t npurtGetDevice(int *device);

#ifdef __cplusplus
}
#endif

#endif /* NPURT_H */

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
	npurtErrorHostMemoryAlreadyRegistered = 17, /* range overlaps a registration */
	npurtErrorHostMemoryNotRegistered = 18, /* not a registered pointer */
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

/*
 * Contexts. A context is one open file of an NPU: its own device address
 * space and memory, isolated from every other context. Each device has a
 * primary context, created on first use; it is what a thread uses unless it
 * made another context current. npurtSetDevice selects the primary context
 * of that device for the calling thread (clearing a current explicit
 * context), as in the CUDA runtime.
 *
 * Destroying a context frees everything allocated in it. Destroying a
 * context while another thread uses it is undefined; a destroyed or foreign
 * handle is reported as npurtErrorInvalidHandle.
 */
typedef struct npurtContext_st *npurtContext_t;

NPURT_API npurtError_t npurtCtxCreate(npurtContext_t *ctx, unsigned int flags, int device);
NPURT_API npurtError_t npurtCtxDestroy(npurtContext_t ctx);
/* NULL makes the current device's primary context current again. */
NPURT_API npurtError_t npurtCtxSetCurrent(npurtContext_t ctx);
/* The context calls on this thread use (the primary one unless set). */
NPURT_API npurtError_t npurtCtxGetCurrent(npurtContext_t *ctx);
/* The device ordinal of the current context. */
NPURT_API npurtError_t npurtCtxGetDevice(int *device);

/*
 * Memory. Addressing is unified: device pointers are unique in the process
 * (they lie in a host address range the runtime reserves, which the host
 * must not dereference), and pinned or registered host memory is seen by
 * the device at its host address, so npurtMemcpyDefault infers directions.
 */
typedef enum npurtMemcpyKind {
	npurtMemcpyHostToHost = 0,
	npurtMemcpyHostToDevice = 1,
	npurtMemcpyDeviceToHost = 2,
	npurtMemcpyDeviceToDevice = 3,
	npurtMemcpyDefault = 4 /* inferred from the pointers */
} npurtMemcpyKind;

typedef enum npurtMemoryType {
	npurtMemoryTypeUnregistered = 0, /* ordinary host memory */
	npurtMemoryTypeHost = 1, /* pinned (MallocHost) or registered */
	npurtMemoryTypeDevice = 2 /* device memory (Malloc, IPC) */
} npurtMemoryType;

typedef struct npurtPointerAttributes {
	npurtMemoryType type;
	int device; /* ordinal of the device, -1 if unregistered */
	void *devicePointer; /* the address the device uses (same as ptr) */
	void *hostPointer; /* host address, NULL for device memory */
	void *base; /* start of the allocation containing ptr */
	size_t size; /* its size in bytes */
	unsigned char reserved[64];
} npurtPointerAttributes;

/*
 * Device memory comes from a caching pool per context: Free keeps memory
 * for reuse, npurtMemEmptyCache gives cached memory back to the device.
 * A failed Malloc first empties the cache and retries; the out-of-memory
 * message then says what was requested, allocated, reserved and free.
 * Malloc of 0 bytes returns NULL with success; Free(NULL) is a no-op.
 */
NPURT_API npurtError_t npurtMalloc(void **devPtr, size_t size);
NPURT_API npurtError_t npurtFree(void *devPtr);
/* Device memory free and total on the current device (all processes). */
NPURT_API npurtError_t npurtMemGetInfo(size_t *freeBytes, size_t *totalBytes);

typedef struct npurtMemStats {
	/* Current and peak values since creation or npurtMemResetPeakStats. */
	uint64_t allocatedBytes, allocatedBytesPeak; /* live allocations */
	uint64_t reservedBytes, reservedBytesPeak; /* held from the device */
	uint64_t activeBlocks, activeBlocksPeak; /* live blocks */
	uint64_t inactiveSplitBytes, inactiveSplitBytesPeak; /* free but split */
	uint64_t deviceAllocs; /* allocations of device memory */
	uint64_t deviceFrees; /* releases of device memory */
	uint64_t ooms; /* out-of-memory failures */
	uint64_t cacheFlushes; /* retries after emptying the cache */
	uint64_t allocCalls, freeCalls;
	uint64_t reserved[8];
} npurtMemStats;

/* Statistics of the current context's pool. */
NPURT_API npurtError_t npurtMemGetStats(npurtMemStats *stats);
NPURT_API npurtError_t npurtMemResetPeakStats(void);
NPURT_API npurtError_t npurtMemEmptyCache(void);

/* Pinned host memory, mapped in the current context's device. */
NPURT_API npurtError_t npurtMallocHost(void **ptr, size_t size);
NPURT_API npurtError_t npurtFreeHost(void *ptr);

#define npurtHostRegisterDefault 0x00
#define npurtHostRegisterReadOnly 0x08 /* the device only reads it */
/*
 * Pins an existing host range (rounded out to whole pages) for the current
 * context's device. The pages count against RLIMIT_MEMLOCK.
 */
NPURT_API npurtError_t npurtHostRegister(void *ptr, size_t size, unsigned int flags);
NPURT_API npurtError_t npurtHostUnregister(void *ptr);

NPURT_API npurtError_t npurtPointerGetAttributes(npurtPointerAttributes *attr, const void *ptr);

/*
 * Synchronous copies and fills. Device ranges are checked against their
 * allocation before anything is copied. Until the copy engines arrive these
 * go through the driver's MMU access path.
 */
NPURT_API npurtError_t npurtMemcpy(void *dst, const void *src, size_t count, npurtMemcpyKind kind);
NPURT_API npurtError_t npurtMemset(void *devPtr, int value, size_t count);

/*
 * Inter-process memory. npurtIpcGetMemHandle exports the device memory
 * behind devPtr as a dma-buf: handle->fd is a new descriptor the caller owns
 * (send it over a Unix socket with SCM_RIGHTS, then close it). The whole
 * pool segment holding devPtr is shared; offset says where devPtr lies.
 * npurtIpcOpenMemHandle imports it into the current context (any process,
 * any NPU) and returns the address of devPtr's memory there; it does not
 * take ownership of handle.fd.
 */
typedef struct npurtIpcMemHandle {
	int fd;
	int deviceIndex;
	uint64_t offset;
	uint64_t size;
	unsigned char reserved[40];
} npurtIpcMemHandle_t;

NPURT_API npurtError_t npurtIpcGetMemHandle(npurtIpcMemHandle_t *handle, void *devPtr);
NPURT_API npurtError_t npurtIpcOpenMemHandle(void **devPtr, npurtIpcMemHandle_t handle,
                                             unsigned int flags);
NPURT_API npurtError_t npurtIpcCloseMemHandle(void *devPtr);

#ifdef __cplusplus
}
#endif

#endif /* NPURT_H */

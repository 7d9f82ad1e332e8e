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

/* C++ callers get CUDA's default arguments (C callers pass every one). */
#ifdef __cplusplus
#define NPURT_DEFAULT(v) = v
#else
#define NPURT_DEFAULT(v)
#endif

/*
 * libnpurt's version (also npurtRuntimeGetVersion): major * 1000 + minor * 10,
 * as CUDA encodes CUDART_VERSION, so the same comparisons work. It is
 * libnpurt's own number, not a CUDA version: a ported check such as
 * "#if CUDART_VERSION >= 11020" becomes a check against libnpurt's version
 * and must be reviewed (the README lists which CUDA names exist here).
 */
#define NPURT_VERSION_MAJOR 0
#define NPURT_VERSION_MINOR 2
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
	npurtErrorPeerAccessUnsupported = 19, /* no direct access between the NPUs */
	npurtErrorPeerAccessNotEnabled = 20, /* peer access was not enabled */
	npurtErrorPeerAccessAlreadyEnabled = 21, /* peer access is enabled already */
	/* Stream capture and graphs: CUDA's numbers. */
	npurtErrorIllegalState = 401, /* not in this state (e.g. not capturing) */
	npurtErrorStreamCaptureUnsupported = 900, /* not allowed while capturing */
	npurtErrorStreamCaptureInvalidated = 901, /* the capture was invalidated */
	npurtErrorStreamCaptureMerge = 902, /* would merge two captures */
	npurtErrorStreamCaptureUnmatched = 903, /* not the capture's origin stream */
	npurtErrorStreamCaptureUnjoined = 904, /* a forked stream did not join */
	npurtErrorStreamCaptureIsolation = 905, /* depends on work outside the capture */
	npurtErrorStreamCaptureImplicit = 906, /* legacy-stream sync with a capture */
	npurtErrorCapturedEvent = 907, /* the event was recorded in a capture */
	npurtErrorStreamCaptureWrongThread = 908, /* ended by another thread */
	npurtErrorGraphExecUpdateFailure = 910, /* the update is not possible */
	npurtErrorUnknown = 999
} npurtError_t;

/* Properties of one NPU (npurtGetDeviceProperties). */
typedef struct npurtDeviceProp {
	char name[64]; /* model name, e.g. "npu-emu" */
	char devicePath[64]; /* its node: /dev/accel/accel* or /dev/dri/renderD* */
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
	/* The fields below have CUDA's names and meanings (cudaDeviceProp). */
	int major, minor; /* NPU architecture version (the uAPI's major.minor) */
	int multiProcessorCount; /* compute engines */
	int asyncEngineCount; /* copy engines: copies overlap ops */
	int deviceOverlap; /* 1: copies run while ops do */
	int concurrentKernels; /* 1 with more than one compute engine */
	int clockRate; /* device clock in kHz */
	int unifiedAddressing; /* 1: one address space with the host */
	int canMapHostMemory; /* 1: pinned host memory is device-visible */
	int integrated; /* 0: device memory is its own */
	int pciDomainID, pciBusID, pciDeviceID; /* 0, 0, the driver's index */
	int computeMode; /* npurtComputeModeDefault: shared by processes */
	int kernelExecTimeoutEnabled; /* 1: a job timeout applies */
	int streamPrioritiesSupported; /* 1 */
	int ECCEnabled; /* 0 */
	int managedMemory; /* 1: npurtMallocManaged */
	int isMultiGpuBoard; /* 0 */
	int memoryPoolsSupported; /* 1: npurtMallocAsync and memory pools */
	int hostRegisterSupported; /* 1 */
	/* The driver's debugfs folder for this NPU (counters, fault injection),
	 * "" when this process cannot see it (debugfs not mounted, not root). */
	char debugfsPath[64];
	int concurrentManagedAccess; /* 1: host and NPU may use managed memory at once */
	/* npurtMemHandleTypePosixFileDescriptor: pools may be shared between
	 * processes (npurtMemPoolExportToShareableHandle) */
	unsigned int memoryPoolSupportedHandleTypes;
	unsigned char reserved[100]; /* zero; room to grow the ABI */
} npurtDeviceProp;

#define npurtComputeModeDefault 0

/* npurtDeviceGetAttribute: the values of the npurtDeviceProp fields named
 * alike; the numbers are CUDA's cudaDeviceAttr. */
typedef enum npurtDeviceAttr {
	npurtDevAttrClockRate = 13,
	npurtDevAttrGpuOverlap = 15,
	npurtDevAttrMultiProcessorCount = 16,
	npurtDevAttrKernelExecTimeout = 17,
	npurtDevAttrIntegrated = 18,
	npurtDevAttrCanMapHostMemory = 19,
	npurtDevAttrComputeMode = 20,
	npurtDevAttrConcurrentKernels = 31,
	npurtDevAttrEccEnabled = 32,
	npurtDevAttrPciBusId = 33,
	npurtDevAttrPciDeviceId = 34,
	npurtDevAttrAsyncEngineCount = 40,
	npurtDevAttrUnifiedAddressing = 41,
	npurtDevAttrPciDomainId = 50,
	npurtDevAttrComputeCapabilityMajor = 75,
	npurtDevAttrComputeCapabilityMinor = 76,
	npurtDevAttrStreamPrioritiesSupported = 78,
	npurtDevAttrManagedMemory = 83,
	npurtDevAttrIsMultiGpuBoard = 84,
	npurtDevAttrConcurrentManagedAccess = 89,
	npurtDevAttrHostRegisterSupported = 99,
	npurtDevAttrMemoryPoolsSupported = 115,
	npurtDevAttrMemoryPoolSupportedHandleTypes = 119
} npurtDeviceAttr;

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
 * driver indices; empty: none) when it is set, else by CANN's
 * ASCEND_RT_VISIBLE_DEVICES. With no NPU, count is 0 and the call returns
 * npurtErrorNoDevice.
 */
NPURT_API npurtError_t npurtGetDeviceCount(int *count);
NPURT_API npurtError_t npurtGetDeviceProperties(npurtDeviceProp *prop, int device);
/* The calling thread's current device; 0 until the thread sets one. */
NPURT_API npurtError_t npurtSetDevice(int device);
NPURT_API npurtError_t npurtGetDevice(int *device);
/* An attribute of a device; an attribute without a meaning here is
 * npurtErrorInvalidValue. */
NPURT_API npurtError_t npurtDeviceGetAttribute(int *value, npurtDeviceAttr attr, int device);
/*
 * A device's PCI-style bus id (cudaDeviceGetPCIBusId): "DDDD:BB:DD.0" in
 * hex from the pciDomainID, pciBusID and pciDeviceID properties (the
 * emulated NPU has no PCI function of its own: 0000:00:<driver index>.0).
 * len counts the terminating NUL; a shorter buffer gets a truncated id and
 * npurtErrorInvalidValue. npurtDeviceGetByPCIBusId takes that form, or
 * "BB:DD.F" without the domain, in either case of hex.
 */
NPURT_API npurtError_t npurtDeviceGetPCIBusId(char *pciBusId, int len, int device);
NPURT_API npurtError_t npurtDeviceGetByPCIBusId(int *device, const char *pciBusId);
/*
 * The device that best matches prop (cudaChooseDevice). A field of prop
 * that is zero (an empty name) asks nothing; the others ask for a device
 * whose name starts with prop->name, whose (major, minor) is at least
 * prop's, and whose totalGlobalMem, multiProcessorCount and
 * asyncEngineCount are at least prop's. The lowest ordinal meeting every
 * request is chosen; if none does, the lowest meeting the most.
 */
NPURT_API npurtError_t npurtChooseDevice(int *device, const npurtDeviceProp *prop);

/*
 * How host threads wait for the current device's work (synchronize calls
 * and blocking copies), as CUDA's cudaSetDeviceFlags: at most one schedule
 * flag. Auto (the default) polls briefly (NPURT_SPIN_US, 200 us) and then
 * sleeps in the kernel; Spin polls until done, holding a CPU; Yield polls,
 * giving the CPU away between looks; BlockingSync sleeps at once (the
 * cheapest for the CPU, a wake-up later). MapHost and LmemResizeToMax are
 * accepted: host memory is always mapped, and there is no local memory.
 * The flags apply to every wait for the device's work from then on.
 */
#define npurtDeviceScheduleAuto 0x00
#define npurtDeviceScheduleSpin 0x01
#define npurtDeviceScheduleYield 0x02
#define npurtDeviceScheduleBlockingSync 0x04
#define npurtDeviceBlockingSync npurtDeviceScheduleBlockingSync
#define npurtDeviceScheduleMask 0x07
#define npurtDeviceMapHost 0x08
#define npurtDeviceLmemResizeToMax 0x10
#define npurtDeviceMask 0x1f
NPURT_API npurtError_t npurtSetDeviceFlags(unsigned int flags);
/* The flags set (with npurtDeviceMapHost, which always holds). */
NPURT_API npurtError_t npurtGetDeviceFlags(unsigned int *flags);

/*
 * Per-device limits, with CUDA's names and defaults (cudaDeviceSetLimit).
 * The NPU runs ops, not user kernels: there is no device-side stack,
 * printf FIFO, malloc heap, nested launch or L2 residency to size, so a
 * value set is kept (and read back) for the current device and changes
 * nothing, as CUDA code that sizes them before launching expects. An
 * unknown limit is npurtErrorInvalidValue.
 */
typedef enum npurtLimit {
	npurtLimitStackSize = 0x00, /* default 1024 */
	npurtLimitPrintfFifoSize = 0x01, /* default 1 MiB */
	npurtLimitMallocHeapSize = 0x02, /* default 8 MiB */
	npurtLimitDevRuntimeSyncDepth = 0x03, /* default 2 */
	npurtLimitDevRuntimePendingLaunchCount = 0x04, /* default 2048 */
	npurtLimitMaxL2FetchGranularity = 0x05, /* default 64, at most 128 */
	npurtLimitPersistingL2CacheSize = 0x06 /* 0 only: no L2 to set aside */
} npurtLimit;
NPURT_API npurtError_t npurtDeviceSetLimit(npurtLimit limit, size_t value);
NPURT_API npurtError_t npurtDeviceGetLimit(size_t *pValue, npurtLimit limit);

/*
 * Monitoring, as NVML's utilisation rates and running processes (what
 * torch.cuda.utilization and list_gpu_processes read).
 *
 * npurtDeviceGetUtilization: the share of time a device's engines spent
 * running jobs, of any process, over a window that ends now and starts at
 * the previous call for the device in this process (the first call: at the
 * runtime's start). Each figure is the mean over the engines of its class.
 * A job's time is counted when it ends, so a window that ends inside a
 * long job leaves it to the next window (figures are capped at 100). The
 * busy times since the driver loaded and the reading's CLOCK_MONOTONIC
 * time are given too, for callers that keep windows of their own.
 * Thread-safe; concurrent callers share one window per device.
 */
typedef struct npurtUtilization {
	unsigned int compute; /* percent (0-100) busy, compute engines */
	unsigned int copy; /* percent (0-100) busy, copy engines */
	uint64_t windowNs; /* the window's length */
	uint64_t computeBusyNs; /* busy time since load, summed over the engines */
	uint64_t copyBusyNs;
	uint64_t sampleNs; /* CLOCK_MONOTONIC time of the reading */
	uint32_t computeEngines, copyEngines;
	uint64_t reserved[4];
} npurtUtilization;
NPURT_API npurtError_t npurtDeviceGetUtilization(int device, npurtUtilization *util);

/*
 * npurtDeviceGetProcesses: the processes that have the device open (this
 * one included), from the driver's usage statistics in /proc/PID/fdinfo,
 * one entry per process in pid order. Only root sees other users'
 * processes. Two calls, as npurtMemGetSnapshot: with *count 0 (procs may
 * be NULL) it sets *count to the number of processes; with an array of
 * *count entries it fills them and sets *count to how many it filled, or,
 * when more processes have the device open by then, sets *count to that
 * number and fails with npurtErrorInvalidValue. Thread-safe.
 */
typedef struct npurtProcessInfo {
	int pid;
	unsigned int contexts; /* its open files of the device */
	char name[32]; /* its command name (/proc/PID/comm) */
	uint64_t deviceBytes; /* device memory the driver charges to it */
	uint64_t hostBytes; /* pinned host memory it bound for the device */
	uint64_t computeBusyNs; /* time its jobs took on compute engines */
	uint64_t copyBusyNs; /* and on copy engines */
	unsigned int queues; /* its queues on the device */
	unsigned int pad;
	uint64_t reserved[4];
} npurtProcessInfo;
NPURT_API npurtError_t npurtDeviceGetProcesses(int device, npurtProcessInfo *procs,
                                               unsigned int *count);

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
	npurtMemoryTypeDevice = 2, /* device memory (Malloc, IPC) */
	npurtMemoryTypeManaged = 3 /* npurtMallocManaged */
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
/*
 * Pitched memory for 2-D arrays (cudaMallocPitch): height rows of width
 * bytes, each starting *pitch bytes after the previous; the pitch is width
 * rounded up to NPURT_PITCH_ALIGNMENT. Freed by npurtFree. A width or
 * height of 0 gives NULL and a pitch of 0 with success.
 */
#define NPURT_PITCH_ALIGNMENT 256
NPURT_API npurtError_t npurtMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height);

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

/*
 * The pools' settings, process-wide, in the syntax of PyTorch's
 * PYTORCH_CUDA_ALLOC_CONF: comma-separated key:value pairs.
 *   expandable_segments:True   a segment is a large range of device
 *       addresses with memory mapped into it in 2 MiB pages as blocks need
 *       it: a pool holds about what its live blocks take, whatever the
 *       order of sizes (default False: segments of fixed size)
 *   max_split_size_mb:N        blocks of N MiB or more (N > 20) are not
 *       split (default 64)
 *   garbage_collection_threshold:F  (0 < F < 1) before the pool grows past
 *       F of what it may hold (the limit, else the device's memory), cached
 *       segments go back, least recently freed first (default off)
 *   roundup_power2_divisions:N or [SIZE_MB:N,...,>:N]  requests round up to
 *       one of N steps between two powers of two (N a power of two; per
 *       size range in the list form, SIZE_MB powers of two; default off)
 * NPURT_ALLOC_CONF in the environment is read when the runtime starts (a
 * bad one makes every call fail with npurtErrorInvalidValue and its
 * message); npurtMemSetAllocatorConfig replaces the settings later, whole
 * (keys not named go back to their defaults), or changes nothing and
 * returns npurtErrorInvalidValue naming the bad key or value. New settings
 * apply to the next allocations; segments keep the kind they were made as.
 * npurtMemGetAllocatorConfig writes the settings in force as a string
 * npurtMemSetAllocatorConfig takes (expandable_segments and
 * max_split_size_mb always, the others when set) of at most len bytes with
 * its NUL (npurtErrorInvalidValue if that is too short). Thread-safe.
 */
NPURT_API npurtError_t npurtMemSetAllocatorConfig(const char *config);
NPURT_API npurtError_t npurtMemGetAllocatorConfig(char *config, size_t len);
NPURT_API npurtError_t npurtMemResetPeakStats(void);
/* Zeroes the counters of npurtMemGetStats and npurtHostMemGetStats
 * (allocations, frees, segments, OOMs, retries, cache hits) of the
 * current context's pools; current and peak values stay. */
NPURT_API npurtError_t npurtMemResetAccumulatedStats(void);
NPURT_API npurtError_t npurtMemEmptyCache(void);

/*
 * This process's device memory on a device, beside the device's own
 * figures (every process), for frameworks' accounting (torch's
 * mem_get_info, memory_reserved across contexts) and a per-process limit.
 */
typedef struct npurtMemUsage {
	uint64_t freeBytes, totalBytes; /* the device's, all processes */
	/* Device memory this process's pools hold on the device, every
	 * context's, and its npurtMemCreate allocations: what the limit
	 * bounds. */
	uint64_t processReservedBytes;
	uint64_t processAllocatedBytes; /* of which live allocations */
	/* What the driver charges to this process's contexts on the device
	 * (npu-smi's per-process figure): the pools' memory, the runtime's own
	 * buffers, and memory imported from other processes or NPUs (IPC, peer
	 * access), which the exporter holds too. */
	uint64_t processDeviceBytes;
	uint64_t limitBytes; /* npurtSetMemoryLimit's; 0: none */
	uint32_t contexts; /* this process's contexts on the device */
	uint32_t pad;
	uint64_t reserved[6];
} npurtMemUsage;
NPURT_API npurtError_t npurtDeviceGetMemUsage(int device, npurtMemUsage *usage);

/*
 * A per-process limit on the device memory this process's pools hold on a
 * device (all its contexts; as torch's set_per_process_memory_fraction).
 * An allocation that would take more first empties the pools' caches, then
 * fails with npurtErrorMemoryAllocation and a message saying the limit was
 * hit. Memory held already stays (a limit below it only stops growth).
 * bytes 0 removes the limit. npurtSetMemoryFraction sets it to a fraction
 * (0 < fraction <= 1) of the device's memory. Thread-safe.
 */
NPURT_API npurtError_t npurtSetMemoryLimit(int device, size_t bytes);
NPURT_API npurtError_t npurtSetMemoryFraction(int device, double fraction);
NPURT_API npurtError_t npurtGetMemoryLimit(int device, size_t *bytes);

/*
 * A snapshot of the current context's pool, as torch.cuda.memory_snapshot()
 * shows it: its segments (device memory held from the driver) and, in
 * address order, the blocks each is cut into. Two calls: with null arrays
 * (or counts of 0) it sets *segmentCount and *blockCount to what the
 * snapshot holds; with arrays of those many entries it fills them. Arrays
 * too small for the pool as it is now (it may have grown between the
 * calls) are npurtErrorInvalidValue with the counts set to the sizes needed.
 */
typedef enum npurtMemBlockState {
	npurtMemBlockFree = 0, /* cached, ready for reuse */
	npurtMemBlockAllocated = 1, /* live */
	npurtMemBlockPendingFree = 2 /* freed, waiting for queued work that uses it */
} npurtMemBlockState;

typedef struct npurtMemBlockInfo {
	uint64_t address, size; /* the block (requests round up to 512 bytes) */
	uint64_t requestedSize; /* bytes asked for, while allocated */
	uint32_t segment; /* index into the segment array */
	uint32_t state; /* npurtMemBlockState */
	/* Where it was allocated, while allocated: the call site set with
	 * npurtSetCallSite (text that lives as long as the process), else
	 * null and the caller's return address. */
	const char *callSite;
	const void *returnAddress;
	uint64_t reserved[4];
} npurtMemBlockInfo;

typedef struct npurtMemSegmentInfo {
	uint64_t address, size; /* an expandable segment's: its address range */
	uint64_t allocatedBytes; /* in allocated blocks */
	uint64_t pendingFreeBytes; /* in blocks waiting for queued work */
	uint32_t firstBlock, blocks; /* its blocks in the block array */
	uint32_t small; /* 1: the small-request pool (2 MiB segments) */
	uint32_t expandable; /* 1: memory mapped into it page by page */
	uint64_t mappedBytes; /* with memory behind it (size, unless expandable) */
	uint64_t reserved[3];
} npurtMemSegmentInfo;

NPURT_API npurtError_t npurtMemGetSnapshot(npurtMemSegmentInfo *segments, size_t *segmentCount,
                                           npurtMemBlockInfo *blocks, size_t *blockCount);

/*
 * Out-of-memory observer (as torch's _cuda_attach_out_of_memory_observer):
 * called on the allocating thread when an allocation from a pool fails for
 * lack of device memory or the limit, after the error and its message are
 * set and before the call returns, with the device, the bytes asked for,
 * and the message. It is called with no lock of the runtime held, so it
 * may call npurtMemGetSnapshot, npurtDeviceGetMemUsage or free memory; an
 * allocation failing inside it does not call it again. One observer per
 * process; null removes it. Thread-safe.
 */
typedef void (*npurtOomObserver)(int device, size_t requestedBytes, const char *message,
                                 void *userData);
NPURT_API npurtError_t npurtMemSetOomObserver(npurtOomObserver observer, void *userData);

/*
 * The pools' history, as torch.cuda.memory._record_memory_history() keeps
 * it for https://pytorch.org/memory_viz's timelines. With maxEntries > 0
 * every pool of the process (those made later included) keeps its last
 * maxEntries events; 0 stops recording. Each call empties the histories
 * kept so far. The ring grows as events come, so a large maxEntries costs
 * only what is recorded. Off, the cost is one atomic load per allocation
 * and free. Thread-safe.
 */
typedef enum npurtMemTraceAction {
	npurtMemTraceAlloc = 0, /* a block handed out */
	npurtMemTraceFreeRequested = 1, /* freed; queued work may still use it */
	npurtMemTraceFreeCompleted = 2, /* reusable: the work that could use it is done */
	npurtMemTraceSegmentAlloc = 3, /* a segment of device memory got from the driver */
	npurtMemTraceSegmentFree = 4, /* a segment given back */
	npurtMemTraceSegmentMap = 5, /* a page mapped into an expandable segment */
	npurtMemTraceSegmentUnmap = 6, /* a page of one given back */
	npurtMemTraceOom = 7 /* a request failed for lack of device memory or address space */
} npurtMemTraceAction;

typedef struct npurtMemTraceEntry {
	uint32_t action; /* npurtMemTraceAction */
	uint32_t reserved0;
	uint64_t address; /* npurtMemTraceOom: the device's free bytes then */
	uint64_t size; /* npurtMemTraceOom: the bytes asked for */
	/* The stream the block belongs to or was freed on: null for the
	 * default stream and for a stream destroyed since. */
	struct npurtStream_st *stream; /* npurtStream_t */
	int64_t timeNs; /* CLOCK_REALTIME */
	/* Alloc and FreeRequested: where the block was allocated, as
	 * npurtMemBlockInfo's; null otherwise. */
	const char *callSite;
	const void *returnAddress;
	uint64_t reserved[4];
} npurtMemTraceEntry;

NPURT_API npurtError_t npurtMemRecordHistory(size_t maxEntries);
/*
 * The current context's pool's history, oldest first. Two calls, as
 * npurtMemGetSnapshot: with *count 0 (entries may be null) it sets *count
 * to the events kept; with an array of that many it fills it and sets
 * *count to those written. An array too small for the history as it is
 * now is npurtErrorInvalidValue with *count set to what is needed.
 */
NPURT_API npurtError_t npurtMemGetHistory(npurtMemTraceEntry *entries, size_t *count);

/*
 * Pinned host memory, mapped in the current context's device, from a
 * caching pool per context: FreeHost keeps the block pinned for the next
 * MallocHost (requests round up to a power of two up to 2 MiB, then to
 * 2 MiB), and does not wait for the device: a block that copies queued
 * before the free (on any stream of the context) still use is reused only
 * after they have run. npurtMemEmptyCache gives cached blocks back too; a
 * MallocHost the OS refuses does so and retries.
 */
NPURT_API npurtError_t npurtMallocHost(void **ptr, size_t size);
NPURT_API npurtError_t npurtFreeHost(void *ptr);

/*
 * npurtHostAlloc: npurtMallocHost with CUDA's flags. Pinned memory is always
 * mapped (the device reaches it at its host address: npurtHostGetDevicePointer
 * returns the pointer itself) and write-combining makes no difference to
 * the emulated NPU, so Mapped and WriteCombined are accepted as given.
 * Portable is accepted: the memory is pinned in the current context;
 * copies of other contexts read and write it as pageable memory (correct,
 * staged). npurtHostGetFlags returns the flags given, with Mapped.
 */
#define npurtHostAllocDefault 0x00
#define npurtHostAllocPortable 0x01
#define npurtHostAllocMapped 0x02
#define npurtHostAllocWriteCombined 0x04
NPURT_API npurtError_t npurtHostAlloc(void **ptr, size_t size, unsigned int flags);
/* The device address of pinned or registered host memory of the current
 * context (the same pointer); flags must be 0. */
NPURT_API npurtError_t npurtHostGetDevicePointer(void **devPtr, void *hostPtr, unsigned int flags);
NPURT_API npurtError_t npurtHostGetFlags(unsigned int *flags, void *hostPtr);

typedef struct npurtHostMemStats {
	/* Current and peak values since creation or npurtMemResetPeakStats. */
	uint64_t allocatedBytes, allocatedBytesPeak; /* live blocks (rounded) */
	uint64_t reservedBytes, reservedBytesPeak; /* pinned: live, parked, cached */
	uint64_t parkedBlocks; /* freed, waiting for queued copies that use them */
	uint64_t cachedBlocks; /* freed, ready for reuse */
	uint64_t hostAllocs; /* blocks pinned from the OS */
	uint64_t hostFrees; /* blocks given back to the OS */
	uint64_t allocCalls, freeCalls;
	uint64_t cacheHits; /* MallocHost calls served from the cache */
	uint64_t reserved[8];
} npurtHostMemStats;

/* Statistics of the current context's pinned-memory pool. */
NPURT_API npurtError_t npurtHostMemGetStats(npurtHostMemStats *stats);

#define npurtHostRegisterDefault 0x00
#define npurtHostRegisterPortable 0x01 /* accepted, as npurtHostAllocPortable */
#define npurtHostRegisterMapped 0x02 /* accepted: registered memory is mapped */
#define npurtHostRegisterIoMemory 0x04 /* npurtErrorNotSupported */
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
 * Inter-process memory, as CUDA's: a handle is 64 bytes that may be copied
 * to another process of the same user any way (shared memory, a pipe, a
 * file) and opened there with nothing else. npurtIpcGetMemHandle exports
 * the pool segment holding devPtr (offset says where devPtr lies in it);
 * the exporting process keeps the export (fd, its own close-on-exec
 * descriptor: do not close it) until the segment goes back to the device.
 * npurtIpcOpenMemHandle imports it into the current context (any NPU) by
 * taking a duplicate of that descriptor from the exporter (pidfd_getfd),
 * which the kernel allows only to a process that may ptrace the exporter:
 * the same user (and, under Yama ptrace_scope 1, an ancestor of the
 * exporter), or one with CAP_SYS_PTRACE. Another user's process gets npurtErrorPermission; a
 * handle whose exporter exited or freed the memory, npurtErrorInvalidHandle.
 * A descriptor received over a Unix socket (SCM_RIGHTS) opens too: put it
 * in fd and set pid to 0. Memory of an expandable segment that spans more
 * than one of its 2 MiB pages is npurtErrorNotSupported: each page is its
 * own device memory object. Opening memory of the calling process itself
 * is npurtErrorInvalidValue (use the pointer). A segment opened twice in
 * one process is mapped once: each open returns it and needs its own
 * close. npurtIpcCloseMemHandle waits for the work queued before it that
 * may use the memory (the exporter may reuse it once every opener closed).
 */
#define NPURT_IPC_HANDLE_MAGIC 0x4e504948u /* "NPIH" */
typedef struct npurtIpcMemHandle {
	int fd; /* the exporter's descriptor of the memory (a dma-buf) */
	int deviceIndex;
	uint64_t offset;
	uint64_t size;
	int pid; /* the exporting process; 0: fd is the opener's own */
	unsigned int magic; /* NPURT_IPC_HANDLE_MAGIC */
	uint64_t inode; /* the dma-buf's inode and file system: checks fd still names it */
	unsigned char reserved[24];
} npurtIpcMemHandle_t;

NPURT_API npurtError_t npurtIpcGetMemHandle(npurtIpcMemHandle_t *handle, void *devPtr);
NPURT_API npurtError_t npurtIpcOpenMemHandle(void **devPtr, npurtIpcMemHandle_t handle,
                                             unsigned int flags);
NPURT_API npurtError_t npurtIpcCloseMemHandle(void *devPtr);
/* npurtIpcOpenMemHandle's flag, accepted (CUDA's; no peer setup needed). */
#define npurtIpcMemLazyEnablePeerAccess 0x01

/*
 * Virtual memory management, with the names of CUDA's driver API (cuMem*,
 * as CANN's aclrtReserveMemAddress / aclrtMallocPhysical / aclrtMapMem):
 * reserve a range of device addresses, create physical allocations and map
 * them into it, then grant the device access. A range grows without moving
 * by mapping more allocations behind it (what expandable segments build
 * on). Addresses are npurtDeviceptr, an integer as CUdeviceptr is.
 *
 * - Sizes, offsets and alignments are multiples of the granularity
 *   (npurtMemGetAllocationGranularity: 2 MiB); anything else is
 *   npurtErrorInvalidValue with a message, as are unknown flags.
 * - npurtMemCreate makes device memory of prop->location.id (a device,
 *   npurtMemAllocationTypePinned), charged to the process as npurtMalloc's
 *   is (its limit, npurtDeviceGetMemUsage); it belongs to the current
 *   context. Released (npurtMemRelease) it lives on while mapped.
 * - npurtMemAddressReserve reserves on the current device; addr is a hint
 *   taken when that range is free. npurtMemAddressFree takes a whole
 *   reservation with nothing mapped in it.
 * - npurtMemMap maps [offset, offset + size) of an allocation at ptr inside
 *   a reservation of the allocation's device, where nothing is mapped yet,
 *   with no access: npurtMemSetAccess grants it (ProtRead, ProtReadWrite;
 *   ProtNone takes it away) for the allocation's own device. Other devices
 *   (peer access to mapped memory) are npurtErrorNotSupported.
 * - npurtMemUnmap takes whole mappings that cover [ptr, ptr + size); it and
 *   a narrowing npurtMemSetAccess first wait (up to 60 s) for the work
 *   queued on the context's streams, which may use the memory.
 * - Mapped memory with access is device memory for copies, fills and ops
 *   of its context; a range of adjacent mappings is one buffer. A context
 *   destroyed (or reset) takes its allocations and their mappings with it.
 * - Thread-safe; the calls that change mappings are serialised.
 */
typedef unsigned long long npurtDeviceptr;
typedef unsigned long long npurtMemGenericAllocationHandle_t;

typedef enum npurtMemAllocationType {
	npurtMemAllocationTypeInvalid = 0,
	npurtMemAllocationTypePinned = 1 /* device memory, never migrated */
} npurtMemAllocationType;

typedef enum npurtMemLocationType {
	npurtMemLocationTypeInvalid = 0,
	npurtMemLocationTypeDevice = 1 /* id: a device ordinal */
} npurtMemLocationType;

typedef struct npurtMemLocation {
	npurtMemLocationType type;
	int id;
} npurtMemLocation;

/* requestedHandleTypes: None, or a POSIX file descriptor (below). */
typedef enum npurtMemAllocationHandleType {
	npurtMemHandleTypeNone = 0,
	npurtMemHandleTypePosixFileDescriptor = 1
} npurtMemAllocationHandleType;

typedef struct npurtMemAllocationProp {
	npurtMemAllocationType type;
	npurtMemAllocationHandleType requestedHandleTypes;
	npurtMemLocation location;
	unsigned char reserved[32]; /* zero */
} npurtMemAllocationProp;

typedef enum npurtMemAllocationGranularityFlags {
	npurtMemAllocationGranularityMinimum = 0,
	npurtMemAllocationGranularityRecommended = 1
} npurtMemAllocationGranularityFlags;

typedef enum npurtMemAccessFlags {
	npurtMemAccessFlagsProtNone = 0,
	npurtMemAccessFlagsProtRead = 1,
	npurtMemAccessFlagsProtReadWrite = 3
} npurtMemAccessFlags;

typedef struct npurtMemAccessDesc {
	npurtMemLocation location;
	npurtMemAccessFlags flags;
} npurtMemAccessDesc;

NPURT_API npurtError_t npurtMemGetAllocationGranularity(size_t *granularity,
                                                        const npurtMemAllocationProp *prop,
                                                        npurtMemAllocationGranularityFlags option);
NPURT_API npurtError_t npurtMemCreate(npurtMemGenericAllocationHandle_t *handle, size_t size,
                                      const npurtMemAllocationProp *prop, unsigned long long flags);
NPURT_API npurtError_t npurtMemRelease(npurtMemGenericAllocationHandle_t handle);
NPURT_API npurtError_t npurtMemAddressReserve(npurtDeviceptr *ptr, size_t size, size_t alignment,
                                              npurtDeviceptr addr, unsigned long long flags);
NPURT_API npurtError_t npurtMemAddressFree(npurtDeviceptr ptr, size_t size);
NPURT_API npurtError_t npurtMemMap(npurtDeviceptr ptr, size_t size, size_t offset,
                                   npurtMemGenericAllocationHandle_t handle,
                                   unsigned long long flags);
NPURT_API npurtError_t npurtMemUnmap(npurtDeviceptr ptr, size_t size);
NPURT_API npurtError_t npurtMemSetAccess(npurtDeviceptr ptr, size_t size,
                                         const npurtMemAccessDesc *desc, size_t count);
NPURT_API npurtError_t npurtMemGetAccess(unsigned long long *flags,
                                         const npurtMemLocation *location, npurtDeviceptr ptr);
NPURT_API npurtError_t npurtMemGetAllocationPropertiesFromHandle(
        npurtMemAllocationProp *prop, npurtMemGenericAllocationHandle_t handle);
/* The allocation mapped at addr (any address of the mapping), with one more
 * reference: npurtMemRelease it. */
NPURT_API npurtError_t npurtMemRetainAllocationHandle(npurtMemGenericAllocationHandle_t *handle,
                                                      void *addr);

/*
 * Shareable allocations (CUDA's cuMemExportToShareableHandle with
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR). An allocation created with
 * requestedHandleTypes npurtMemHandleTypePosixFileDescriptor exports as a
 * new file descriptor (a dma-buf, close-on-exec) written to
 * *(int *)shareableHandle, which the caller owns and closes. Passed to
 * another process (SCM_RIGHTS over a Unix socket, or inherited), it is the
 * capability: npurtMemImportFromShareableHandle there, with the descriptor
 * as osHandle ((void *)(intptr_t)fd), gives an allocation handle of the
 * same memory on the current device, mapped with npurtMemMap as any other
 * and released with npurtMemRelease; the importer may close the descriptor
 * after the import. The memory lives until every process released it and
 * unmapped it. Importing memory this process already holds returns its
 * allocation handle with one more reference. Other handle types, flags, an
 * allocation not created shareable, or a descriptor that is not such memory
 * are npurtErrorInvalidValue (npurtErrorNotSupported for a type not made).
 */
NPURT_API npurtError_t npurtMemExportToShareableHandle(void *shareableHandle,
                                                       npurtMemGenericAllocationHandle_t handle,
                                                       npurtMemAllocationHandleType handleType,
                                                       unsigned long long flags);
NPURT_API npurtError_t npurtMemImportFromShareableHandle(npurtMemGenericAllocationHandle_t *handle,
                                                         void *osHandle,
                                                         npurtMemAllocationHandleType shHandleType);

/*
 * Streams: ordered queues of device work. Work on one stream runs in
 * submission order; work on different streams may overlap. Copies run on
 * the device's copy engines and ops on its compute engines, in stream order.
 *
 * The default stream (NULL, also npurtStreamLegacy) belongs to the current
 * context and has CUDA's legacy semantics (see npurtStreamNonBlocking).
 * npurtMemcpy and npurtMemset run on it and wait for it.
 * npurtStreamPerThread names the calling thread's own default stream of
 * the current context (created on first use, destroyed when the thread
 * exits): a blocking stream that does not order against other streams of
 * its thread or of other threads. Compiling with
 * NPURT_API_PER_THREAD_DEFAULT_STREAM defined (as CUDA's
 * --default-stream per-thread) makes NULL mean npurtStreamPerThread in
 * that translation unit, for the stream arguments of the calls below and
 * for npurtMemcpy, npurtMemcpy2D and npurtMemset.
 *
 * Destroying a stream with device work in flight returns at once; the work
 * still completes and its memory is released when it has. So it does with
 * host functions queued or running (they may wait for the caller): they
 * still run, in order, and the stream goes after them; npurtDeviceSynchronize
 * and the context's end wait for them. npurtEventDestroy of an event whose
 * record is queued behind a host function returns at once too (the event
 * goes after the record).
 */
typedef struct npurtStream_st *npurtStream_t;
typedef struct npurtEvent_st *npurtEvent_t;

#define npurtStreamLegacy ((npurtStream_t)0x1)
#define npurtStreamPerThread ((npurtStream_t)0x2)

/*
 * Stream-ordered memory (CUDA's cudaMallocAsync family).
 *
 * npurtMallocAsync allocates from the current pool of the stream's device
 * (npurtDeviceGetMemPool: the default pool unless npurtDeviceSetMemPool
 * chose another; a stream of a context made with npurtCtxCreate uses that
 * context's default pool). The memory may be used by work enqueued after the
 * call on that stream, or on streams ordered after it. npurtFreeAsync frees
 * in stream order: every use must be ordered before it on that stream, as in
 * CUDA. Neither waits for the device; both are npurtErrorNotReady-free
 * (host-side bookkeeping only).
 *
 * Reuse: memory freed on a stream serves later requests on that stream at
 * once; a request on another stream takes it when that stream waited for an
 * event recorded on the freeing stream after the free
 * (npurtMemPoolReuseFollowEventDependencies, direct waits only), or once the
 * free has completed on the device (npurtMemPoolReuseAllowOpportunistic);
 * never earlier. The runtime does not insert dependencies of its own
 * (npurtMemPoolReuseAllowInternalDependencies reads 0; setting 1 is
 * npurtErrorNotSupported).
 *
 * A context's default pool is also its npurtMalloc pool (one cache, the
 * statistics of npurtMemGetStats); its release threshold starts at
 * UINT64_MAX, so it keeps its cache as PyTorch's allocator does. A pool made
 * by npurtMemPoolCreate belongs to the device's primary context, is charged
 * like npurtMalloc memory (the per-process limit), is capped at maxSize
 * (0: no cap; over it, npurtErrorMemoryAllocation naming the cap) and starts
 * with release threshold 0, as CUDA's: at npurtStreamSynchronize and
 * npurtDeviceSynchronize the context's pools give back the cached memory
 * above their thresholds (npurtEventSynchronize does not trim here). npurtFree frees memory of any
 * pool. npurtMemPoolDestroy of a pool with allocations left returns at once; the memory stays valid
 * and the pool goes after the last is freed (CUDA's rule). Thread-safe; a pool may be used from any
 * thread and stream of its context.
 */
typedef struct npurtMemPool_st *npurtMemPool_t;

typedef enum npurtMemPoolAttr {
	npurtMemPoolReuseFollowEventDependencies = 1, /* int 0/1, default 1 */
	npurtMemPoolReuseAllowOpportunistic = 2, /* int 0/1, default 1 */
	npurtMemPoolReuseAllowInternalDependencies = 3, /* int, 0 only */
	npurtMemPoolAttrReleaseThreshold = 4, /* uint64_t bytes */
	npurtMemPoolAttrReservedMemCurrent = 5, /* uint64_t, read-only */
	npurtMemPoolAttrReservedMemHigh = 6, /* uint64_t; set 0 to reset */
	npurtMemPoolAttrUsedMemCurrent = 7, /* uint64_t, read-only */
	npurtMemPoolAttrUsedMemHigh = 8 /* uint64_t; set 0 to reset */
} npurtMemPoolAttr;

typedef struct npurtMemPoolProps {
	npurtMemAllocationType allocType; /* npurtMemAllocationTypePinned */
	/* npurtMemHandleTypeNone, or npurtMemHandleTypePosixFileDescriptor
	 * for a pool shared between processes (below) */
	npurtMemAllocationHandleType handleTypes;
	npurtMemLocation location; /* npurtMemLocationTypeDevice, its ordinal */
	void *win32SecurityAttributes; /* NULL */
	size_t maxSize; /* 0: no cap */
	unsigned short usage; /* 0 */
	unsigned char reserved[54]; /* zero */
} npurtMemPoolProps;

NPURT_API npurtError_t npurtMallocAsync(void **devPtr, size_t size, npurtStream_t stream);
NPURT_API npurtError_t npurtFreeAsync(void *devPtr, npurtStream_t stream);
NPURT_API npurtError_t npurtMallocFromPoolAsync(void **ptr, size_t size, npurtMemPool_t memPool,
                                                npurtStream_t stream);
NPURT_API npurtError_t npurtMemPoolCreate(npurtMemPool_t *memPool, const npurtMemPoolProps *props);
NPURT_API npurtError_t npurtMemPoolDestroy(npurtMemPool_t memPool);
NPURT_API npurtError_t npurtDeviceGetDefaultMemPool(npurtMemPool_t *memPool, int device);
NPURT_API npurtError_t npurtDeviceGetMemPool(npurtMemPool_t *memPool, int device);
NPURT_API npurtError_t npurtDeviceSetMemPool(int device, npurtMemPool_t memPool);
NPURT_API npurtError_t npurtMemPoolSetAttribute(npurtMemPool_t memPool, npurtMemPoolAttr attr,
                                                void *value);
NPURT_API npurtError_t npurtMemPoolGetAttribute(npurtMemPool_t memPool, npurtMemPoolAttr attr,
                                                void *value);
/* Gives back cached memory until at most minBytesToKeep stay reserved. */
NPURT_API npurtError_t npurtMemPoolTrimTo(npurtMemPool_t memPool, size_t minBytesToKeep);
/* A pool's memory is read-write on its own device and reachable from no
 * other: setting that is accepted, anything else is npurtErrorNotSupported
 * (copy between devices with npurtMemcpyPeer). GetAccess says so per
 * device. */
NPURT_API npurtError_t npurtMemPoolSetAccess(npurtMemPool_t memPool,
                                             const npurtMemAccessDesc *descList, size_t count);
NPURT_API npurtError_t npurtMemPoolGetAccess(npurtMemAccessFlags *flags, npurtMemPool_t memPool,
                                             npurtMemLocation *location);

/*
 * Pools shared between processes (CUDA's cudaMemPoolExportToShareableHandle
 * family). A pool created with handleTypes
 * npurtMemHandleTypePosixFileDescriptor exports as a new descriptor (a Unix
 * socket to the exporting process, close-on-exec), written to
 * *(int *)shareableHandle; the caller owns it and passes it to another
 * process (SCM_RIGHTS, or inherited). It is the capability: whoever holds it
 * may map any allocation of the pool. npurtMemPoolImportFromShareableHandle
 * there, with the descriptor as (void *)(intptr_t)fd, gives an imported
 * pool on the current device (the descriptor may be closed after). An
 * imported pool only imports pointers and answers npurtMemPoolSetAccess and
 * npurtMemPoolGetAccess; npurtMemPoolDestroy lets it go.
 *
 * npurtMemPoolExportPointer describes an allocation of a shareable pool (its
 * start) in 64 bytes of plain data, sent by any channel;
 * npurtMemPoolImportPointer maps it in the importing process, asking the
 * exporter over the pool's socket for the memory (no ptrace rights needed,
 * unlike npurtIpcOpenMemHandle). The imported pointer is freed with
 * npurtFree or npurtFreeAsync (which waits for the context's queued work
 * that may use it). As in CUDA, importers free their pointers before the
 * exporter frees the allocation: the exporter's free does not wait for
 * them, and the pool may then give the memory to another allocation. An
 * allocation freed (or a pool destroyed) before the import is
 * npurtErrorInvalidValue; a handle whose exporter exited,
 * npurtErrorInvalidHandle. Memory of an expandable segment spanning more
 * than one of its 2 MiB pages cannot be exported (npurtErrorNotSupported).
 * Thread-safe.
 */
typedef struct npurtMemPoolPtrExportData {
	unsigned char reserved[64];
} npurtMemPoolPtrExportData;

NPURT_API npurtError_t npurtMemPoolExportToShareableHandle(void *shareableHandle,
                                                           npurtMemPool_t memPool,
                                                           npurtMemAllocationHandleType handleType,
                                                           unsigned int flags);
NPURT_API npurtError_t
npurtMemPoolImportFromShareableHandle(npurtMemPool_t *memPool, void *shareableHandle,
                                      npurtMemAllocationHandleType handleType, unsigned int flags);
NPURT_API npurtError_t npurtMemPoolExportPointer(npurtMemPoolPtrExportData *exportData, void *ptr);
NPURT_API npurtError_t npurtMemPoolImportPointer(void **ptr, npurtMemPool_t memPool,
                                                 npurtMemPoolPtrExportData *exportData);

#define npurtStreamDefault 0x00
/* Without npurtStreamNonBlocking a stream is blocking, as in CUDA: work on
 * the default (NULL) stream waits for the work enqueued before it on every
 * blocking stream of its context, and work on a blocking stream waits for
 * the default stream's (CUDA's legacy default stream). Non-blocking streams
 * order only against what they are told to wait for. */
#define npurtStreamNonBlocking 0x01

/* Priorities: lower numbers are higher priority, as in CUDA. A priority is
 * a hint: the high one needs CAP_SYS_NICE from the driver, and a process
 * without it gets normal-priority queues (npurtStreamGetPriority still
 * says what was asked for). */
NPURT_API npurtError_t npurtDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
NPURT_API npurtError_t npurtStreamCreate(npurtStream_t *stream);
NPURT_API npurtError_t npurtStreamCreateWithFlags(npurtStream_t *stream, unsigned int flags);
NPURT_API npurtError_t npurtStreamCreateWithPriority(npurtStream_t *stream, unsigned int flags,
                                                     int priority);
NPURT_API npurtError_t npurtStreamDestroy(npurtStream_t stream);
/* npurtSuccess when all work is done, npurtErrorNotReady if not. */
NPURT_API npurtError_t npurtStreamQuery(npurtStream_t stream);
NPURT_API npurtError_t npurtStreamSynchronize(npurtStream_t stream);
/* As npurtStreamSynchronize, giving up with npurtErrorTimeout after
 * timeoutMs milliseconds (-1: no limit). */
NPURT_API npurtError_t npurtStreamSynchronizeTimeout(npurtStream_t stream, int64_t timeoutMs);
NPURT_API npurtError_t npurtStreamGetPriority(npurtStream_t stream, int *priority);
NPURT_API npurtError_t npurtStreamGetFlags(npurtStream_t stream, unsigned int *flags);
/* The ordinal of the device whose context the stream belongs to
 * (cudaStreamGetDevice); NULL and npurtStreamPerThread name the current
 * context's. */
NPURT_API npurtError_t npurtStreamGetDevice(npurtStream_t stream, int *device);
/* A number no other stream of the process has had (cudaStreamGetId); NULL
 * and npurtStreamPerThread name the current context's. */
NPURT_API npurtError_t npurtStreamGetId(npurtStream_t stream, unsigned long long *streamId);
/* Later work on stream waits for the event's work (any stream, context or
 * device). flags: 0, or npurtEventWaitExternal, which in a capture makes an
 * event wait node (each launch of the graph waits for the event's latest
 * record then); outside a capture it changes nothing. An event never
 * recorded is complete. The call
 * never blocks: if the event's record is itself queued behind a host
 * function, later work on stream waits for that record and then for its
 * work. */
NPURT_API npurtError_t npurtStreamWaitEvent(npurtStream_t stream, npurtEvent_t event,
                                            unsigned int flags);
/* Waits for every stream of the current context. */
NPURT_API npurtError_t npurtDeviceSynchronize(void);
/*
 * Peer NPUs and contexts. Contexts are isolated: a copy, fill or op on a
 * stream naming device memory of another context fails with
 * npurtErrorInvalidValue, unless the stream's context was given access to
 * it. npurtDeviceEnablePeerAccess(peer) gives the current context access
 * to the memory of peer's primary context (all of it, allocated before or
 * after), npurtCtxEnablePeerAccess to that of any other context (of any
 * device, the same one included): the peer's memory is mapped into the
 * context's address space at its own addresses, so the context's copy
 * engines and compute units read and write it in stream order. Enabling
 * twice is npurtErrorPeerAccessAlreadyEnabled, disabling what was not
 * enabled npurtErrorPeerAccessNotEnabled; disabling waits for the
 * context's queued work first. Access is one way, as in CUDA.
 * npurtMemcpyPeer(Async) copy between NPUs without it (dst must be memory
 * of dstDevice, src of srcDevice), on the stream's engine, asynchronously.
 * Freed memory is not reused before the work queued on streams of the
 * contexts that reach it has completed. IPC-opened memory is not shared
 * with peers.
 */
NPURT_API npurtError_t npurtDeviceCanAccessPeer(int *canAccess, int device, int peerDevice);
NPURT_API npurtError_t npurtDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
NPURT_API npurtError_t npurtDeviceDisablePeerAccess(int peerDevice);
NPURT_API npurtError_t npurtMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                       size_t count);
NPURT_API npurtError_t npurtMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
                                            int srcDevice, size_t count, npurtStream_t stream);
NPURT_API npurtError_t npurtCtxEnablePeerAccess(npurtContext_t peerContext, unsigned int flags);
NPURT_API npurtError_t npurtCtxDisablePeerAccess(npurtContext_t peerContext);
/* CUDA's cudaDeviceP2PAttr (values as CUDA's). */
typedef enum npurtDeviceP2PAttr {
	npurtDevP2PAttrPerformanceRank = 1, /* 0: every pair has the same link */
	npurtDevP2PAttrAccessSupported = 2, /* 1 */
	npurtDevP2PAttrNativeAtomicSupported = 3, /* 0: no atomics */
	npurtDevP2PAttrNpurtArrayAccessSupported = 4 /* 0: no arrays */
} npurtDeviceP2PAttr;
NPURT_API npurtError_t npurtDeviceGetP2PAttribute(int *value, npurtDeviceP2PAttr attr,
                                                  int srcDevice, int dstDevice);

/* As CUDA's cudaDeviceReset: waits for the current device's work, then
 * destroys its primary context in this process (memory, streams, events'
 * slots); the next call that needs it makes a new one. Contexts made with
 * npurtCtxCreate stay. */
NPURT_API npurtError_t npurtDeviceReset(void);
NPURT_API npurtError_t npurtDeviceSynchronizeTimeout(int64_t timeoutMs);

/*
 * A device fault or timeout on a stream makes the stream fail: the call
 * that observes it (synchronize, query, the next enqueue) returns
 * npurtErrorDeviceFault, npurtErrorLaunchFailure or npurtErrorLaunchTimeout
 * with a message naming the stream, the task, the op and the API call that
 * enqueued it (and where from). Work enqueued after the failing task is
 * cancelled. npurtStreamRecover clears the failure so the stream runs again.
 */
NPURT_API npurtError_t npurtStreamRecover(npurtStream_t stream);

/* Called (from a runtime thread) when a stream fails, with the same
 * message the failing call reports. NULL removes it. */
typedef void (*npurtErrorCallback_t)(npurtStream_t stream, npurtError_t error, const char *message,
                                     void *userData);
NPURT_API npurtError_t npurtSetErrorCallback(npurtErrorCallback_t callback, void *userData);

/*
 * Where the next enqueue on this thread comes from, for fault reports
 * (the C++ layer passes it for you). Without it the report gives the
 * caller's return address.
 */
NPURT_API npurtError_t npurtSetCallSite(const char *file, int line, const char *function);
/* The same for a call site named often (a framework's per-op locations):
 * register it once for an id (the same site always gets the same id), then
 * name it per enqueue with no text compared and no lock taken. At most
 * 65536 distinct sites; an id never handed out is npurtErrorInvalidValue. */
NPURT_API npurtError_t npurtCallSiteRegister(const char *file, int line, const char *function,
                                             uint64_t *id);
NPURT_API npurtError_t npurtSetCallSiteId(uint64_t id);

/* Events. As in CUDA, an event times by default: recording it enqueues a
 * device timestamp (one small task on the stream, batched with its other
 * work). npurtEventDisableTiming makes the cheap kind, whose record
 * enqueues nothing: use it for pure synchronisation. npurtEventTiming, from
 * earlier releases where timing was opt-in, is accepted and means the
 * default. */
#define npurtEventDefault 0x00
#define npurtEventBlockingSync 0x01 /* its synchronize sleeps at once */
#define npurtEventDisableTiming 0x02
#define npurtEventTiming 0x10 /* the default: record device timestamps */
/* Shareable with other processes (npurtIpcGetEventHandle); needs
 * npurtEventDisableTiming, as in CUDA. Bound to the current context. */
#define npurtEventInterprocess 0x04

NPURT_API npurtError_t npurtEventCreate(npurtEvent_t *event);
NPURT_API npurtError_t npurtEventCreateWithFlags(npurtEvent_t *event, unsigned int flags);
NPURT_API npurtError_t npurtEventDestroy(npurtEvent_t event);
NPURT_API npurtError_t npurtEventRecord(npurtEvent_t event, npurtStream_t stream);
/* flags: npurtEventRecordDefault, or npurtEventRecordExternal, which in a
 * capture makes an event record node (each launch of the graph records the
 * event), besides the ordering a capture's record gives; outside a capture
 * it is npurtEventRecord. */
#define npurtEventRecordDefault 0x00
#define npurtEventRecordExternal 0x01
#define npurtEventWaitDefault 0x00
#define npurtEventWaitExternal 0x01
NPURT_API npurtError_t npurtEventRecordWithFlags(npurtEvent_t event, npurtStream_t stream,
                                                 unsigned int flags);
/* npurtSuccess if the recorded work is done (or nothing was recorded),
 * npurtErrorNotReady if not. */
NPURT_API npurtError_t npurtEventQuery(npurtEvent_t event);
NPURT_API npurtError_t npurtEventSynchronize(npurtEvent_t event);
NPURT_API npurtError_t npurtEventSynchronizeTimeout(npurtEvent_t event, int64_t timeoutMs);
/* Milliseconds between two completed timing events (device clock). */
NPURT_API npurtError_t npurtEventElapsedTime(float *ms, npurtEvent_t start, npurtEvent_t end);

/*
 * Inter-process events, as CUDA's: the handle of an npurtEventInterprocess
 * event is 64 bytes that open in another process of the same user, as a
 * memory handle does (the same threat model). Either side records it;
 * query, synchronize and npurtStreamWaitEvent see the latest record of
 * either process. The exporter keeps the export until it destroys the
 * event; an opened event is destroyed with npurtEventDestroy.
 */
typedef struct npurtIpcEventHandle {
	int fd; /* the exporter's descriptor of the event's fence (a syncobj) */
	int pid; /* the exporting process; 0: fd is the opener's own */
	unsigned int magic; /* NPURT_IPC_EVENT_MAGIC */
	unsigned int pad;
	uint64_t inode;
	unsigned char reserved[40];
} npurtIpcEventHandle_t;
#define NPURT_IPC_EVENT_MAGIC 0x4e504945u /* "NPIE" */
NPURT_API npurtError_t npurtIpcGetEventHandle(npurtIpcEventHandle_t *handle, npurtEvent_t event);
NPURT_API npurtError_t npurtIpcOpenEventHandle(npurtEvent_t *event, npurtIpcEventHandle_t handle);

/*
 * Asynchronous copies and fills. With pinned or registered host memory the
 * copy engine reads or writes the host buffer directly. With pageable host
 * memory the copy goes through pinned staging buffers in chunks, the CPU
 * copying one chunk while the engine moves the previous one: a host-to-
 * device copy returns once the source has been staged (the buffer may be
 * reused), a device-to-host copy returns when the data has arrived, as in
 * CUDA. Device ranges are checked against their allocations first.
 */
NPURT_API npurtError_t npurtMemcpyAsync(void *dst, const void *src, size_t count,
                                        npurtMemcpyKind kind, npurtStream_t stream);
NPURT_API npurtError_t npurtMemsetAsync(void *devPtr, int value, size_t count,
                                        npurtStream_t stream);
/* Fills of 16- and 32-bit values, as CUDA's driver API (cuMemsetD16/D32):
 * count elements (not bytes) from devPtr, which must be aligned to the
 * element (else npurtErrorInvalidValue). One engine task, as npurtMemset:
 * what fills a tensor of halves, floats or ints with one value. */
NPURT_API npurtError_t npurtMemsetD16Async(void *devPtr, unsigned short value, size_t count,
                                           npurtStream_t stream);
NPURT_API npurtError_t npurtMemsetD32Async(void *devPtr, unsigned int value, size_t count,
                                           npurtStream_t stream);
NPURT_API npurtError_t npurtMemsetD16(void *devPtr, unsigned short value, size_t count);
NPURT_API npurtError_t npurtMemsetD32(void *devPtr, unsigned int value, size_t count);

/*
 * Managed memory (cudaMallocManaged): one pointer for host code and NPU
 * work. It is pinned host memory mapped for the current NPU at its host
 * address, so nothing ever migrates: the NPU reads and writes it in place,
 * coherently with the CPU (concurrentManagedAccess is 1; a race between
 * host code and queued work is the caller's to avoid, as in CUDA).
 * npurtMemPrefetchAsync, npurtMemAdvise and npurtStreamAttachMemAsync check
 * their arguments as CUDA does and have nothing to move. Freed with
 * npurtFree (safe free: kept until the work queued before the free has
 * run); npurtFreeHost and npurtHostGetFlags refuse it. Other NPUs reach it
 * through copies. flags: npurtMemAttachGlobal (the default) or
 * npurtMemAttachHost. A size of 0 is npurtErrorInvalidValue, as in CUDA.
 */
#define npurtMemAttachGlobal 0x01
#define npurtMemAttachHost 0x02
#define npurtMemAttachSingle 0x04
#define npurtCpuDeviceId ((int)-1) /* the host, as a prefetch or advice target */
typedef enum npurtMemoryAdvise {
	npurtMemAdviseSetReadMostly = 1,
	npurtMemAdviseUnsetReadMostly = 2,
	npurtMemAdviseSetPreferredLocation = 3,
	npurtMemAdviseUnsetPreferredLocation = 4,
	npurtMemAdviseSetAccessedBy = 5,
	npurtMemAdviseUnsetAccessedBy = 6
} npurtMemoryAdvise;
NPURT_API npurtError_t npurtMallocManaged(void **devPtr, size_t size,
                                          unsigned int flags NPURT_DEFAULT(npurtMemAttachGlobal));
/* [devPtr, devPtr + count) lies in one managed allocation; dstDevice is an
 * NPU's ordinal or npurtCpuDeviceId; the stream is checked. */
NPURT_API npurtError_t npurtMemPrefetchAsync(const void *devPtr, size_t count, int dstDevice,
                                             npurtStream_t stream NPURT_DEFAULT(nullptr));
/* The range as for npurtMemPrefetchAsync; device: an ordinal or
 * npurtCpuDeviceId where the advice names a location or an accessor
 * (ignored by the ReadMostly advice, as in CUDA). */
NPURT_API npurtError_t npurtMemAdvise(const void *devPtr, size_t count, npurtMemoryAdvise advice,
                                      int device);
/* devPtr: the start of a managed allocation; length 0 or its whole size;
 * flags one of npurtMemAttachGlobal, Host, Single. */
NPURT_API npurtError_t
npurtStreamAttachMemAsync(npurtStream_t stream, void *devPtr, size_t length NPURT_DEFAULT(0),
                          unsigned int flags NPURT_DEFAULT(npurtMemAttachSingle));

/*
 * 2-D copies, as CUDA's: height rows of width bytes, row starts dpitch and
 * spitch bytes apart (width must not exceed either pitch). Device memory
 * and pinned or registered host memory of the stream's context are copied
 * by the engine in one task; with pageable memory each row is one
 * npurtMemcpyAsync (a pitch equal to width makes it one copy).
 */
NPURT_API npurtError_t npurtMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                          size_t width, size_t height, npurtMemcpyKind kind,
                                          npurtStream_t stream);
NPURT_API npurtError_t npurtMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, npurtMemcpyKind kind);
/*
 * 2-D fills (cudaMemset2D): width bytes of each of height rows, row starts
 * pitch bytes apart (pitch at least width), set to value. Device memory
 * only; bounds are checked over the whole extent. Two tasks on the engine
 * whatever the height (the first row is filled, then copied to the rest).
 */
NPURT_API npurtError_t npurtMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                          size_t height, npurtStream_t stream);
NPURT_API npurtError_t npurtMemset2D(void *devPtr, size_t pitch, int value, size_t width,
                                     size_t height);

/*
 * 3-D linear memory, as CUDA's cudaMalloc3D, cudaMemcpy3D and cudaMemset3D:
 * a pitched pointer is rows of `pitch` bytes (xsize of them used), ysize
 * rows to a slice; an extent is width bytes by height rows by depth
 * slices, a position x bytes, y rows and z slices into a pitched pointer.
 * There are no CUDA arrays: srcArray and dstArray must be NULL.
 *
 * npurtMalloc3D: height * depth rows of width bytes, the pitch as
 * npurtMallocPitch's, xsize = width, ysize = height; freed by npurtFree.
 * npurtMemcpy3D(Async): the box of `extent` at srcPos in srcPtr to dstPos
 * in dstPtr, one strided copy (as npurtMemcpyStridedAsync: device, pinned
 * and pageable memory, bounds checked over each side's extent). A box must
 * fit its rows (x + width <= pitch) and, deeper than one slice, its slices
 * (y + height <= ysize). npurtMemset3D(Async): width bytes of height rows
 * of depth slices set to value; device memory only, at most three tasks.
 */
typedef struct npurtPitchedPtr {
	void *ptr;
	size_t pitch; /* bytes from one row to the next */
	size_t xsize; /* bytes used in a row */
	size_t ysize; /* rows in a slice */
} npurtPitchedPtr;
typedef struct npurtExtent {
	size_t width; /* bytes */
	size_t height; /* rows */
	size_t depth; /* slices */
} npurtExtent;
typedef struct npurtPos {
	size_t x, y, z; /* bytes, rows, slices */
} npurtPos;
typedef struct npurtMemcpy3DParms {
	void *srcArray; /* NULL: no arrays */
	npurtPos srcPos;
	npurtPitchedPtr srcPtr;
	void *dstArray; /* NULL */
	npurtPos dstPos;
	npurtPitchedPtr dstPtr;
	npurtExtent extent;
	npurtMemcpyKind kind;
} npurtMemcpy3DParms;
static inline npurtPitchedPtr make_npurtPitchedPtr(void *d, size_t p, size_t xsz, size_t ysz)
{
	npurtPitchedPtr r;
	r.ptr = d;
	r.pitch = p;
	r.xsize = xsz;
	r.ysize = ysz;
	return r;
}
static inline npurtExtent make_npurtExtent(size_t w, size_t h, size_t d)
{
	npurtExtent e;
	e.width = w;
	e.height = h;
	e.depth = d;
	return e;
}
static inline npurtPos make_npurtPos(size_t x, size_t y, size_t z)
{
	npurtPos p;
	p.x = x;
	p.y = y;
	p.z = z;
	return p;
}
NPURT_API npurtError_t npurtMalloc3D(npurtPitchedPtr *pitchedDevPtr, npurtExtent extent);
NPURT_API npurtError_t npurtMemcpy3DAsync(const npurtMemcpy3DParms *p, npurtStream_t stream);
NPURT_API npurtError_t npurtMemcpy3D(const npurtMemcpy3DParms *p);
NPURT_API npurtError_t npurtMemset3DAsync(npurtPitchedPtr pitchedDevPtr, int value,
                                          npurtExtent extent, npurtStream_t stream);
NPURT_API npurtError_t npurtMemset3D(npurtPitchedPtr pitchedDevPtr, int value, npurtExtent extent);

/*
 * Strided copies, for views of tensors (transposes, permutes, slices,
 * broadcasts): element (i0, ..., i[ndim-1]) of elemSize bytes goes from
 * src + sum(i_d * srcStrides[d]) to dst + sum(i_d * dstStrides[d]);
 * sizes in elements, strides in bytes, outermost dimension first, up to
 * NPURT_MAX_COPY_DIMS dimensions, any element size. A source stride of 0
 * repeats an element (a broadcast). Elements are written in row-major
 * order of their indices, so where destination elements coincide the last
 * one stays. Source and destination may overlap (the runtime then gathers
 * the source into device memory first). Bounds are checked as for
 * npurtMemcpyAsync, over each side's whole extent. Device and pinned
 * memory of the stream's context copy on the engine; pageable memory or
 * memory of another context one run (a dense innermost row, or an
 * element) per npurtMemcpyAsync.
 */
#define NPURT_MAX_COPY_DIMS 8
NPURT_API npurtError_t npurtMemcpyStridedAsync(void *dst, const size_t *dstStrides, const void *src,
                                               const size_t *srcStrides, const size_t *sizes,
                                               int ndim, size_t elemSize, npurtMemcpyKind kind,
                                               npurtStream_t stream);

/* A host function run in stream order: after earlier work, before later.
 * It does not run once the stream has failed. */
typedef void (*npurtHostFn_t)(void *userData);
NPURT_API npurtError_t npurtLaunchHostFunc(npurtStream_t stream, npurtHostFn_t fn, void *userData);
/* As CUDA's cudaStreamAddCallback: run in stream order like a host
 * function, and also after a failure, which status then gives; stream is
 * the handle given here. flags must be 0. Not captured (as in CUDA): on a
 * capturing stream it fails with npurtErrorStreamCaptureUnsupported and
 * invalidates the capture; capture npurtLaunchHostFunc instead. */
typedef void (*npurtStreamCallback_t)(npurtStream_t stream, npurtError_t status, void *userData);
NPURT_API npurtError_t npurtStreamAddCallback(npurtStream_t stream, npurtStreamCallback_t callback,
                                              void *userData, unsigned int flags);

/* Op launch: one descriptor for the device's op set. */
typedef enum npurtOpKind {
	npurtOpAdd = 0,
	npurtOpSub = 1,
	npurtOpMul = 2,
	npurtOpDiv = 3,
	npurtOpMax = 4,
	npurtOpMin = 5,
	npurtOpScale = 6, /* out = alpha * a */
	npurtOpAxpy = 7, /* out = alpha * a + b */
	npurtOpRelu = 8,
	npurtOpGelu = 9,
	npurtOpExp = 10,
	npurtOpCast = 11,
	npurtOpReduceSum = 12,
	npurtOpReduceMax = 13,
	npurtOpTranspose = 14,
	npurtOpGemm = 15
} npurtOpKind;

typedef enum npurtDataType {
	npurtFloat32 = 0,
	npurtFloat16 = 1,
	npurtBFloat16 = 2,
	npurtInt32 = 3
} npurtDataType;

#define npurtOpTransA 0x1
#define npurtOpTransB 0x2

/*
 * Elementwise ops: n elements of a (and b). Reduce: a is m x n, axis 0
 * gives n results, axis 1 gives m. Transpose: a is m x n. GEMM: out (m x n,
 * float32) = alpha * op(a) op(b) + beta * c with op(a) m x k, op(b) k x n;
 * a, b float32 or float16.
 */
typedef struct npurtOpDesc {
	npurtOpKind op;
	npurtDataType dtype; /* of the inputs */
	npurtDataType outDtype; /* of the output (cast: target; GEMM: float32) */
	unsigned int flags; /* npurtOpTrans* for GEMM */
	const void *a, *b, *c;
	void *out;
	uint64_t m, n, k;
	int axis;
	float alpha, beta;
	unsigned char reserved[32];
} npurtOpDesc;

NPURT_API npurtError_t npurtLaunchOp(const npurtOpDesc *desc, npurtStream_t stream);

/*
 * Profiling: per-task records (queued, start and end times on the device
 * clock, stream, op, bytes) while enabled, exported as a Chrome/Perfetto
 * trace (JSON) and summarised per op kind, per stream and per engine.
 */
NPURT_API npurtError_t npurtProfilerStart(void);
NPURT_API npurtError_t npurtProfilerStop(void);
/* Writes the records so far as a trace file for chrome://tracing or
 * ui.perfetto.dev. */
NPURT_API npurtError_t npurtProfilerExportTrace(const char *path);
/* Writes a summary table (time per op kind, per stream, engine use) into
 * buf (NUL-terminated, cut to size); *needed gets the full length. */
NPURT_API npurtError_t npurtProfilerSummary(char *buf, size_t size, size_t *needed);

/*
 * Graphs (CUDA graphs): work recorded once, as nodes and dependencies, and
 * launched many times. A graph comes from stream capture (the enqueue calls
 * on a capturing stream record nodes instead of running) or is built node
 * by node. npurtGraphInstantiate turns it into an executable graph, whose
 * launch submits all its device work at once: consecutive nodes of one
 * engine class go to the device as one job, so a launch of a 100-op graph
 * costs one submission, not 100. Small copies and memsets between ops run
 * in the ops' job (on the compute engine), large ones on a copy engine.
 *
 * Ops take the place of CUDA's kernels: an op node (npurtGraphNodeTypeKernel)
 * holds an npurtOpDesc. Memory of an alloc node (a captured npurtMallocAsync)
 * is the graph's: its address stays the same for every launch, free nodes
 * and frees outside the graph end its use, and it is released when the
 * graph, its clones and its executable graphs are all destroyed.
 *
 * A child graph node embeds a copy of another graph, whose work runs in the
 * node's place (a fault names the child node); npurtGraphLaunch on a
 * capturing stream adds the executable graph as one. As in CUDA, a graph
 * with memory alloc or free nodes cannot be a child.
 *
 * Thread safety: a graph or executable graph may be used by one thread at a
 * time (the caller serialises calls on the same one, as in CUDA); different
 * graphs, and launches of an executable graph on any streams, may go on in
 * parallel. Launches of one executable graph run in launch order.
 */
typedef struct npurtGraph_st *npurtGraph_t;
typedef struct npurtGraphNode_st *npurtGraphNode_t;
typedef struct npurtGraphExec_st *npurtGraphExec_t;

typedef enum npurtStreamCaptureStatus {
	npurtStreamCaptureStatusNone = 0,
	npurtStreamCaptureStatusActive = 1,
	npurtStreamCaptureStatusInvalidated = 2
} npurtStreamCaptureStatus;

/*
 * Which calls a capture forbids ("unsafe" ones: those that allocate or
 * wait synchronously, such as npurtMalloc, npurtMemcpy, npurtStreamSynchronize
 * or npurtDeviceSynchronize). Global: in the capturing thread, and in every
 * thread whose own mode is global; ThreadLocal: in the capturing thread;
 * Relaxed: nowhere. A forbidden call fails with
 * npurtErrorStreamCaptureUnsupported and invalidates the captures it would
 * have broken.
 */
typedef enum npurtStreamCaptureMode {
	npurtStreamCaptureModeGlobal = 0,
	npurtStreamCaptureModeThreadLocal = 1,
	npurtStreamCaptureModeRelaxed = 2
} npurtStreamCaptureMode;

typedef enum npurtGraphNodeType {
	npurtGraphNodeTypeKernel = 0, /* an op (npurtOpDesc) */
	npurtGraphNodeTypeMemcpy = 1,
	npurtGraphNodeTypeMemset = 2,
	npurtGraphNodeTypeHost = 3,
	npurtGraphNodeTypeGraph = 4, /* a child graph */
	npurtGraphNodeTypeEmpty = 5,
	npurtGraphNodeTypeWaitEvent = 6,
	npurtGraphNodeTypeEventRecord = 7,
	npurtGraphNodeTypeMemAlloc = 10,
	npurtGraphNodeTypeMemFree = 11
} npurtGraphNodeType;

typedef struct npurtHostNodeParams {
	npurtHostFn_t fn;
	void *userData;
} npurtHostNodeParams;

/* elementSize 1, 2 or 4; height rows of width elements, pitch bytes apart. */
typedef struct npurtMemsetParams {
	void *dst;
	size_t pitch;
	unsigned int value;
	unsigned int elementSize;
	size_t width;
	size_t height;
} npurtMemsetParams;

/* poolProps: allocType pinned, location the graph's device; dptr: out. */
typedef struct npurtMemAllocNodeParams {
	npurtMemPoolProps poolProps;
	const npurtMemAccessDesc *accessDescs; /* may be NULL */
	size_t accessDescCount;
	size_t bytesize;
	void *dptr;
} npurtMemAllocNodeParams;

typedef enum npurtGraphExecUpdateResult {
	npurtGraphExecUpdateSuccess = 0,
	npurtGraphExecUpdateError = 1,
	npurtGraphExecUpdateErrorTopologyChanged = 2,
	npurtGraphExecUpdateErrorNodeTypeChanged = 3,
	npurtGraphExecUpdateErrorFunctionChanged = 4,
	npurtGraphExecUpdateErrorParametersChanged = 5,
	npurtGraphExecUpdateErrorNotSupported = 6
} npurtGraphExecUpdateResult;

typedef struct npurtGraphExecUpdateResultInfo {
	npurtGraphExecUpdateResult result;
	npurtGraphNode_t errorNode; /* the node of the new graph that failed */
	npurtGraphNode_t errorFromNode; /* topology: the edge's other end */
} npurtGraphExecUpdateResultInfo;

/* npurtGraphInstantiate flags (CUDA's values). */
#define npurtGraphInstantiateFlagAutoFreeOnLaunch 1 /* accepted: graph memory persists */
#define npurtGraphInstantiateFlagUpload 2 /* accepted: nothing to upload */
#define npurtGraphInstantiateFlagDeviceLaunch 4 /* not supported */
#define npurtGraphInstantiateFlagUseNodePriority 8 /* accepted: the stream's priority */

/* npurtGraphDebugDotPrint flags: every node is printed with its parameters. */
#define npurtGraphDebugDotFlagsVerbose (1 << 0)

/* Stream capture. The legacy default stream cannot capture; a stream that
 * waits for an event recorded in a capture joins it (fork), and the origin
 * stream must wait for every joined stream's last work before
 * npurtStreamEndCapture (join), else npurtErrorStreamCaptureUnjoined. */
NPURT_API npurtError_t npurtStreamBeginCapture(npurtStream_t stream, npurtStreamCaptureMode mode);
NPURT_API npurtError_t npurtStreamEndCapture(npurtStream_t stream, npurtGraph_t *pGraph);
NPURT_API npurtError_t npurtStreamIsCapturing(npurtStream_t stream,
                                              npurtStreamCaptureStatus *pCaptureStatus);
/* Any output may be NULL. *dependencies_out: the nodes the stream's next
 * captured work will depend on, valid until the next call on the stream.
 * *graph_out is the graph being captured: until the capture ends the
 * capturing thread may read it and add nodes and edges to it (then make
 * the stream depend on them, npurtStreamUpdateCaptureDependencies), not
 * destroy it or its nodes or instantiate it (npurtErrorIllegalState); it
 * is not thread-safe against captures into it on other threads. */
NPURT_API npurtError_t
npurtStreamGetCaptureInfo(npurtStream_t stream, npurtStreamCaptureStatus *captureStatus_out,
                          unsigned long long *id_out NPURT_DEFAULT(nullptr),
                          npurtGraph_t *graph_out NPURT_DEFAULT(nullptr),
                          const npurtGraphNode_t **dependencies_out NPURT_DEFAULT(nullptr),
                          size_t *numDependencies_out NPURT_DEFAULT(nullptr));
/* npurtStreamUpdateCaptureDependencies flags: add the nodes to the stream's
 * capture dependencies, or replace them with the nodes. */
#define npurtStreamAddCaptureDependencies 0x0
#define npurtStreamSetCaptureDependencies 0x1
/* The nodes (of the graph being captured) the capturing stream's next work
 * depends on: npurtErrorIllegalState if the stream is not capturing. */
NPURT_API npurtError_t npurtStreamUpdateCaptureDependencies(npurtStream_t stream,
                                                            const npurtGraphNode_t *dependencies,
                                                            size_t numDependencies,
                                                            unsigned int flags);
/* Swaps the calling thread's capture mode with *mode. */
NPURT_API npurtError_t npurtThreadExchangeStreamCaptureMode(npurtStreamCaptureMode *mode);

/* Graphs and nodes. flags must be 0. Nodes take the current device's
 * context; their operands are checked as the enqueue calls check them. */
NPURT_API npurtError_t npurtGraphCreate(npurtGraph_t *pGraph, unsigned int flags);
NPURT_API npurtError_t npurtGraphDestroy(npurtGraph_t graph);
NPURT_API npurtError_t npurtGraphClone(npurtGraph_t *pGraphClone, npurtGraph_t originalGraph);
NPURT_API npurtError_t npurtGraphNodeFindInClone(npurtGraphNode_t *pNode,
                                                 npurtGraphNode_t originalNode,
                                                 npurtGraph_t clonedGraph);
NPURT_API npurtError_t npurtGraphAddKernelNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                               const npurtGraphNode_t *pDependencies,
                                               size_t numDependencies,
                                               const npurtOpDesc *pNodeParams);
NPURT_API npurtError_t npurtGraphKernelNodeGetParams(npurtGraphNode_t node,
                                                     npurtOpDesc *pNodeParams);
NPURT_API npurtError_t npurtGraphKernelNodeSetParams(npurtGraphNode_t node,
                                                     const npurtOpDesc *pNodeParams);
NPURT_API npurtError_t npurtGraphAddMemcpyNode1D(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                                 const npurtGraphNode_t *pDependencies,
                                                 size_t numDependencies, void *dst, const void *src,
                                                 size_t count, npurtMemcpyKind kind);
NPURT_API npurtError_t npurtGraphMemcpyNodeSetParams1D(npurtGraphNode_t node, void *dst,
                                                       const void *src, size_t count,
                                                       npurtMemcpyKind kind);
NPURT_API npurtError_t npurtGraphAddMemsetNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                               const npurtGraphNode_t *pDependencies,
                                               size_t numDependencies,
                                               const npurtMemsetParams *pMemsetParams);
NPURT_API npurtError_t npurtGraphMemsetNodeGetParams(npurtGraphNode_t node,
                                                     npurtMemsetParams *pNodeParams);
NPURT_API npurtError_t npurtGraphMemsetNodeSetParams(npurtGraphNode_t node,
                                                     const npurtMemsetParams *pNodeParams);
NPURT_API npurtError_t npurtGraphAddHostNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                             const npurtGraphNode_t *pDependencies,
                                             size_t numDependencies,
                                             const npurtHostNodeParams *pNodeParams);
NPURT_API npurtError_t npurtGraphHostNodeGetParams(npurtGraphNode_t node,
                                                   npurtHostNodeParams *pNodeParams);
NPURT_API npurtError_t npurtGraphHostNodeSetParams(npurtGraphNode_t node,
                                                   const npurtHostNodeParams *pNodeParams);
NPURT_API npurtError_t npurtGraphAddEmptyNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                              const npurtGraphNode_t *pDependencies,
                                              size_t numDependencies);
NPURT_API npurtError_t npurtGraphAddEventRecordNode(npurtGraphNode_t *pGraphNode,
                                                    npurtGraph_t graph,
                                                    const npurtGraphNode_t *pDependencies,
                                                    size_t numDependencies, npurtEvent_t event);
NPURT_API npurtError_t npurtGraphAddEventWaitNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                                  const npurtGraphNode_t *pDependencies,
                                                  size_t numDependencies, npurtEvent_t event);
NPURT_API npurtError_t npurtGraphEventRecordNodeGetEvent(npurtGraphNode_t node,
                                                         npurtEvent_t *event_out);
NPURT_API npurtError_t npurtGraphEventRecordNodeSetEvent(npurtGraphNode_t node, npurtEvent_t event);
NPURT_API npurtError_t npurtGraphEventWaitNodeGetEvent(npurtGraphNode_t node,
                                                       npurtEvent_t *event_out);
NPURT_API npurtError_t npurtGraphEventWaitNodeSetEvent(npurtGraphNode_t node, npurtEvent_t event);
/* Allocates at once (from the graph's device): nodeParams->dptr gets the
 * address every launch uses. */
NPURT_API npurtError_t npurtGraphAddMemAllocNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                                 const npurtGraphNode_t *pDependencies,
                                                 size_t numDependencies,
                                                 npurtMemAllocNodeParams *nodeParams);
NPURT_API npurtError_t npurtGraphMemAllocNodeGetParams(npurtGraphNode_t node,
                                                       npurtMemAllocNodeParams *params_out);
/* dptr: memory of an alloc node of the same graph. */
NPURT_API npurtError_t npurtGraphAddMemFreeNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                                const npurtGraphNode_t *pDependencies,
                                                size_t numDependencies, void *dptr);
NPURT_API npurtError_t npurtGraphMemFreeNodeGetParams(npurtGraphNode_t node, void *dptr_out);
/* childGraph is copied (later changes to it do not reach the node). A graph
 * with memory nodes is npurtErrorNotSupported. */
NPURT_API npurtError_t npurtGraphAddChildGraphNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                                   const npurtGraphNode_t *pDependencies,
                                                   size_t numDependencies, npurtGraph_t childGraph);
/* The node's own graph (not a copy): it may be queried and changed, as in
 * CUDA, but not destroyed (it goes with the node) nor given memory nodes. */
NPURT_API npurtError_t npurtGraphChildGraphNodeGetGraph(npurtGraphNode_t node,
                                                        npurtGraph_t *pGraph);
NPURT_API npurtError_t npurtGraphNodeGetType(npurtGraphNode_t node, npurtGraphNodeType *pType);
/*
 * Graph memory (alloc nodes' memory) of a device, in bytes (value: a
 * uint64_t): in use now and at most since the last reset; reserved is the
 * same, since graph memory is allocated when its node is made and given
 * back with the last graph that holds it. Set resets a High attribute to
 * the current figure; its value must be 0. Trim has nothing cached to give
 * back.
 */
typedef enum npurtGraphMemAttributeType {
	npurtGraphMemAttrUsedMemCurrent = 0,
	npurtGraphMemAttrUsedMemHigh = 1,
	npurtGraphMemAttrReservedMemCurrent = 2,
	npurtGraphMemAttrReservedMemHigh = 3
} npurtGraphMemAttributeType;
NPURT_API npurtError_t npurtDeviceGetGraphMemAttribute(int device, npurtGraphMemAttributeType attr,
                                                       void *value);
NPURT_API npurtError_t npurtDeviceSetGraphMemAttribute(int device, npurtGraphMemAttributeType attr,
                                                       void *value);
NPURT_API npurtError_t npurtDeviceGraphMemTrim(int device);
/* The node lists: with a NULL array, *num gets the count; else up to *num
 * are written and *num gets how many. */
NPURT_API npurtError_t npurtGraphGetNodes(npurtGraph_t graph, npurtGraphNode_t *nodes,
                                          size_t *numNodes);
NPURT_API npurtError_t npurtGraphGetRootNodes(npurtGraph_t graph, npurtGraphNode_t *pRootNodes,
                                              size_t *pNumRootNodes);
NPURT_API npurtError_t npurtGraphGetEdges(npurtGraph_t graph, npurtGraphNode_t *from,
                                          npurtGraphNode_t *to, size_t *numEdges);
NPURT_API npurtError_t npurtGraphNodeGetDependencies(npurtGraphNode_t node,
                                                     npurtGraphNode_t *pDependencies,
                                                     size_t *pNumDependencies);
NPURT_API npurtError_t npurtGraphNodeGetDependentNodes(npurtGraphNode_t node,
                                                       npurtGraphNode_t *pDependentNodes,
                                                       size_t *pNumDependentNodes);
/* Edges from[i] -> to[i]; an edge that would close a cycle is refused. */
NPURT_API npurtError_t npurtGraphAddDependencies(npurtGraph_t graph, const npurtGraphNode_t *from,
                                                 const npurtGraphNode_t *to,
                                                 size_t numDependencies);
NPURT_API npurtError_t npurtGraphRemoveDependencies(npurtGraph_t graph,
                                                    const npurtGraphNode_t *from,
                                                    const npurtGraphNode_t *to,
                                                    size_t numDependencies);
NPURT_API npurtError_t npurtGraphDestroyNode(npurtGraphNode_t node);
/* Graphviz text of the graph: nodes with their parameters, and edges. */
NPURT_API npurtError_t npurtGraphDebugDotPrint(npurtGraph_t graph, const char *path,
                                               unsigned int flags);

/* Executable graphs. */
NPURT_API npurtError_t npurtGraphInstantiate(npurtGraphExec_t *pGraphExec, npurtGraph_t graph,
                                             unsigned long long flags NPURT_DEFAULT(0));
NPURT_API npurtError_t npurtGraphInstantiateWithFlags(npurtGraphExec_t *pGraphExec,
                                                      npurtGraph_t graph,
                                                      unsigned long long flags NPURT_DEFAULT(0));
/* Runs the graph on the stream, after the stream's earlier work and the
 * executable graph's earlier launches. A node that faults fails the stream
 * like any task; the report names the graph node and the call that made it. */
NPURT_API npurtError_t npurtGraphLaunch(npurtGraphExec_t graphExec, npurtStream_t stream);
NPURT_API npurtError_t npurtGraphUpload(npurtGraphExec_t graphExec, npurtStream_t stream);
NPURT_API npurtError_t npurtGraphExecDestroy(npurtGraphExec_t graphExec);
/* Takes the parameters of hGraph's nodes, if hGraph has the topology and
 * node types of the graph graphExec was made from (else
 * npurtErrorGraphExecUpdateFailure and resultInfo says why). */
NPURT_API npurtError_t npurtGraphExecUpdate(npurtGraphExec_t graphExec, npurtGraph_t hGraph,
                                            npurtGraphExecUpdateResultInfo *resultInfo);
/* One node's parameters in an executable graph (node: of the graph it was
 * made from); later launches use them. */
NPURT_API npurtError_t npurtGraphExecKernelNodeSetParams(npurtGraphExec_t hGraphExec,
                                                         npurtGraphNode_t node,
                                                         const npurtOpDesc *pNodeParams);
NPURT_API npurtError_t npurtGraphExecMemcpyNodeSetParams1D(npurtGraphExec_t hGraphExec,
                                                           npurtGraphNode_t node, void *dst,
                                                           const void *src, size_t count,
                                                           npurtMemcpyKind kind);
NPURT_API npurtError_t npurtGraphExecMemsetNodeSetParams(npurtGraphExec_t hGraphExec,
                                                         npurtGraphNode_t node,
                                                         const npurtMemsetParams *pNodeParams);
NPURT_API npurtError_t npurtGraphExecHostNodeSetParams(npurtGraphExec_t hGraphExec,
                                                       npurtGraphNode_t node,
                                                       const npurtHostNodeParams *pNodeParams);
NPURT_API npurtError_t npurtGraphExecEventRecordNodeSetEvent(npurtGraphExec_t hGraphExec,
                                                             npurtGraphNode_t hNode,
                                                             npurtEvent_t event);
NPURT_API npurtError_t npurtGraphExecEventWaitNodeSetEvent(npurtGraphExec_t hGraphExec,
                                                           npurtGraphNode_t hNode,
                                                           npurtEvent_t event);
/* The parameters of childGraph's nodes, which must pair with the child
 * graph's as npurtGraphExecUpdate pairs a graph's (npurtErrorInvalidValue
 * if not). */
NPURT_API npurtError_t npurtGraphExecChildGraphNodeSetParams(npurtGraphExec_t hGraphExec,
                                                             npurtGraphNode_t node,
                                                             npurtGraph_t childGraph);
/* Disables (isEnabled 0) or enables again a kernel, memcpy or memset node
 * of an executable graph (hNode: of the graph it was made from): a disabled
 * node runs as an empty node (its edges still order the others) until it
 * is enabled; its parameters stay and may still be set. Other node types
 * are npurtErrorInvalidValue. Nodes start enabled. */
NPURT_API npurtError_t npurtGraphNodeSetEnabled(npurtGraphExec_t hGraphExec, npurtGraphNode_t hNode,
                                                unsigned int isEnabled);
NPURT_API npurtError_t npurtGraphNodeGetEnabled(npurtGraphExec_t hGraphExec, npurtGraphNode_t hNode,
                                                unsigned int *isEnabled);

/* The synchronous calls on the calling thread's per-thread default stream,
 * which NPURT_API_PER_THREAD_DEFAULT_STREAM makes npurtMemcpy, npurtMemcpy2D,
 * npurtMemcpy3D, npurtMemset, npurtMemset2D, npurtMemset3D, npurtMemsetD16
 * and npurtMemsetD32. */
NPURT_API npurtError_t npurtMemcpy_ptds(void *dst, const void *src, size_t count,
                                        npurtMemcpyKind kind);
NPURT_API npurtError_t npurtMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                          size_t width, size_t height, npurtMemcpyKind kind);
NPURT_API npurtError_t npurtMemset_ptds(void *devPtr, int value, size_t count);
NPURT_API npurtError_t npurtMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width,
                                          size_t height);
NPURT_API npurtError_t npurtMemcpy3D_ptds(const npurtMemcpy3DParms *p);
NPURT_API npurtError_t npurtMemset3D_ptds(npurtPitchedPtr pitchedDevPtr, int value,
                                          npurtExtent extent);
NPURT_API npurtError_t npurtMemsetD16_ptds(void *devPtr, unsigned short value, size_t count);
NPURT_API npurtError_t npurtMemsetD32_ptds(void *devPtr, unsigned int value, size_t count);

#ifdef __cplusplus
}

/* The C++ overloads CUDA's header gives C++ callers. */
template <class T> static inline npurtError_t npurtMalloc(T **devPtr, size_t size)
{
	return npurtMalloc(reinterpret_cast<void **>(devPtr), size);
}
template <class T> static inline npurtError_t npurtMallocHost(T **ptr, size_t size)
{
	return npurtMallocHost(reinterpret_cast<void **>(ptr), size);
}
static inline npurtError_t npurtMallocHost(void **ptr, size_t size, unsigned int flags)
{
	return npurtHostAlloc(ptr, size, flags);
}
template <class T>
static inline npurtError_t npurtMallocHost(T **ptr, size_t size, unsigned int flags)
{
	return npurtHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}
template <class T>
static inline npurtError_t npurtHostAlloc(T **ptr, size_t size, unsigned int flags)
{
	return npurtHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}
template <class T>
static inline npurtError_t npurtMallocPitch(T **devPtr, size_t *pitch, size_t width, size_t height)
{
	return npurtMallocPitch(reinterpret_cast<void **>(devPtr), pitch, width, height);
}
template <class T>
static inline npurtError_t npurtMallocManaged(T **devPtr, size_t size,
                                              unsigned int flags = npurtMemAttachGlobal)
{
	return npurtMallocManaged(reinterpret_cast<void **>(devPtr), size, flags);
}
template <class T>
static inline npurtError_t npurtHostGetDevicePointer(T **devPtr, void *hostPtr, unsigned int flags)
{
	return npurtHostGetDevicePointer(reinterpret_cast<void **>(devPtr), hostPtr, flags);
}
static inline npurtError_t npurtEventCreate(npurtEvent_t *event, unsigned int flags)
{
	return npurtEventCreateWithFlags(event, flags);
}
#endif

#if defined(NPURT_API_PER_THREAD_DEFAULT_STREAM)
/* NULL is the per-thread default stream in this translation unit. */
static inline npurtStream_t npurtPerThreadStream_(npurtStream_t s)
{
	return s ? s : npurtStreamPerThread;
}
#define npurtMemcpy npurtMemcpy_ptds
#define npurtMemcpy2D npurtMemcpy2D_ptds
#define npurtMemset npurtMemset_ptds
#define npurtMemset2D npurtMemset2D_ptds
#define npurtMemcpy3D npurtMemcpy3D_ptds
#define npurtMemset3D npurtMemset3D_ptds
#define npurtMemsetD16 npurtMemsetD16_ptds
#define npurtMemsetD32 npurtMemsetD32_ptds
#define npurtMemcpyAsync(d, s, n, k, st) npurtMemcpyAsync(d, s, n, k, npurtPerThreadStream_(st))
#define npurtMemsetAsync(d, v, n, st) npurtMemsetAsync(d, v, n, npurtPerThreadStream_(st))
#define npurtMemsetD16Async(d, v, n, st) npurtMemsetD16Async(d, v, n, npurtPerThreadStream_(st))
#define npurtMemsetD32Async(d, v, n, st) npurtMemsetD32Async(d, v, n, npurtPerThreadStream_(st))
#define npurtMemcpy2DAsync(d, dp, s, sp, w, h, k, st) \
	npurtMemcpy2DAsync(d, dp, s, sp, w, h, k, npurtPerThreadStream_(st))
#define npurtMemset2DAsync(d, p, v, w, h, st) \
	npurtMemset2DAsync(d, p, v, w, h, npurtPerThreadStream_(st))
#define npurtMemcpy3DAsync(p, st) npurtMemcpy3DAsync(p, npurtPerThreadStream_(st))
#define npurtMemset3DAsync(p, v, e, st) npurtMemset3DAsync(p, v, e, npurtPerThreadStream_(st))
#define npurtMemcpyStridedAsync(d, ds, s, ss, sz, nd, es, k, st) \
	npurtMemcpyStridedAsync(d, ds, s, ss, sz, nd, es, k, npurtPerThreadStream_(st))
#define npurtMallocAsync(p, n, st) npurtMallocAsync(p, n, npurtPerThreadStream_(st))
#define npurtFreeAsync(p, st) npurtFreeAsync(p, npurtPerThreadStream_(st))
#define npurtMallocFromPoolAsync(p, n, mp, st) \
	npurtMallocFromPoolAsync(p, n, mp, npurtPerThreadStream_(st))
#define npurtStreamQuery(st) npurtStreamQuery(npurtPerThreadStream_(st))
#define npurtStreamSynchronize(st) npurtStreamSynchronize(npurtPerThreadStream_(st))
#define npurtStreamSynchronizeTimeout(st, ms) \
	npurtStreamSynchronizeTimeout(npurtPerThreadStream_(st), ms)
#define npurtStreamGetPriority(st, p) npurtStreamGetPriority(npurtPerThreadStream_(st), p)
#define npurtStreamGetFlags(st, f) npurtStreamGetFlags(npurtPerThreadStream_(st), f)
#define npurtStreamGetDevice(st, d) npurtStreamGetDevice(npurtPerThreadStream_(st), d)
#define npurtStreamWaitEvent(st, e, f) npurtStreamWaitEvent(npurtPerThreadStream_(st), e, f)
#define npurtStreamRecover(st) npurtStreamRecover(npurtPerThreadStream_(st))
#define npurtEventRecord(e, st) npurtEventRecord(e, npurtPerThreadStream_(st))
#define npurtEventRecordWithFlags(e, st, f) \
	npurtEventRecordWithFlags(e, npurtPerThreadStream_(st), f)
#define npurtStreamGetId(st, id) npurtStreamGetId(npurtPerThreadStream_(st), id)
#define npurtLaunchHostFunc(st, fn, u) npurtLaunchHostFunc(npurtPerThreadStream_(st), fn, u)
#define npurtStreamAddCallback(st, cb, u, f) \
	npurtStreamAddCallback(npurtPerThreadStream_(st), cb, u, f)
#define npurtLaunchOp(desc, st) npurtLaunchOp(desc, npurtPerThreadStream_(st))
#define npurtMemPrefetchAsync(p, n, d, st) npurtMemPrefetchAsync(p, n, d, npurtPerThreadStream_(st))
#define npurtStreamAttachMemAsync(st, ...) \
	npurtStreamAttachMemAsync(npurtPerThreadStream_(st), __VA_ARGS__)
#define npurtStreamBeginCapture(st, m) npurtStreamBeginCapture(npurtPerThreadStream_(st), m)
#define npurtStreamEndCapture(st, g) npurtStreamEndCapture(npurtPerThreadStream_(st), g)
#define npurtStreamIsCapturing(st, s) npurtStreamIsCapturing(npurtPerThreadStream_(st), s)
#define npurtStreamGetCaptureInfo(st, ...) \
	npurtStreamGetCaptureInfo(npurtPerThreadStream_(st), __VA_ARGS__)
#define npurtStreamUpdateCaptureDependencies(st, ...) \
	npurtStreamUpdateCaptureDependencies(npurtPerThreadStream_(st), __VA_ARGS__)
#define npurtGraphLaunch(e, st) npurtGraphLaunch(e, npurtPerThreadStream_(st))
#define npurtGraphUpload(e, st) npurtGraphUpload(e, npurtPerThreadStream_(st))
#endif

#endif /* NPURT_H */

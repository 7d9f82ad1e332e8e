// npu_runtime.h - the torch_npurt backend's view of libnpurt: errors,
// devices, streams (c10::Stream <-> npurtStream_t), the allocator and the
// fallback bookkeeping shared by the kernel files.
//
// Only libnpurt's public C API is used (npurt.h); npurt.hpp needs C++20
// (std::source_location) and libtorch 1.13 builds as C++17.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <npurt/npurt.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace torch_npurt {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

// libtorch API differences the backend meets (1.13 on Debian 12, 2.6 on
// Debian 13), decided by libtorch's own version macros.
#define NPU_TORCH_AT_LEAST(major, minor)  \
	(TORCH_VERSION_MAJOR > (major) || \
	 (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
// c10::Allocator::allocate() lost its const in 2.3, which also made
// copy_data() (a plain copy between two blocks of this allocator) pure.
#if NPU_TORCH_AT_LEAST(2, 3)
#define NPU_ALLOCATE_CONST
#define NPU_ALLOCATOR_COPY_DATA(copy)                                                 \
	void copy_data(void *dest, const void *src, std::size_t count) const override \
	{                                                                             \
		copy(dest, src, count);                                               \
	}
#else
#define NPU_ALLOCATE_CONST const
#define NPU_ALLOCATOR_COPY_DATA(copy)
#endif

// Throws c10::Error (a Python RuntimeError) naming the call and libnpurt's
// message for this thread's last failure.
[[noreturn]] void throwError(npurtError_t err, const char *what);

inline void check(npurtError_t err, const char *what)
{
	if (err != npurtSuccess)
		throwError(err, what);
}

// Number of NPUs; 0 when none (or the runtime cannot start). Never throws.
int deviceCount();
// Whether libnpurt was started in this process (deviceCount() ran): a
// child forked after that cannot use the NPUs (its DRM files and the
// runtime's threads are the parent's).
bool runtimeStarted();
// Why there is no NPU ("" if there is one): libnpurt's message.
std::string noDeviceReason();
// Checks a device index (-1 = current) and returns it.
int checkedDevice(int64_t index);
int currentDevice();
// Sets the calling thread's device if it differs (npurtSetDevice is cheap,
// but it also drops an explicit context, so only call it on a change).
void setDevice(int device);

// Makes a device current for a scope.
class DeviceScope {
public:
	explicit DeviceScope(int device);
	~DeviceScope();
	DeviceScope(const DeviceScope &) = delete;
	DeviceScope &operator=(const DeviceScope &) = delete;

private:
	int previous_;
};

// Streams. c10::Stream ids are 0 for a device's default (NULL) stream and
// 1 + an index into the device's stream table otherwise. Streams live until
// the process exits, as in PyTorch's CUDA stream pools.
npurtStream_t nativeStream(const c10::Stream &stream);
c10::Stream currentStream(int device);
c10::Stream defaultStream(int device);
// The stream a (device, id) pair from Python names; the device is checked.
c10::Stream streamFromIds(int64_t device, int64_t id);
// The libnpurt stream of such a pair as an integer (0: the default
// stream), for Python (Stream.npu_stream) and for C++ extensions
// (torch.ops.torch_npurt._stream_handle, npu_extension.cpp).
int64_t streamHandle(int64_t device, int64_t id);
// torch.npu.ExternalStream: the id of a libnpurt stream made outside torch
// (registered once; its owner keeps it alive while torch uses it).
int64_t externalStream(int device, npurtStream_t s);
// Sets the thread's current stream of stream.device(); returns the old one.
c10::Stream exchangeStream(const c10::Stream &stream);
// A stream of this priority from the device's pool (round robin over a
// few streams per priority, created on first use), as CUDA's pools.
c10::Stream poolStream(int device, int priority);
int streamPriority(const c10::Stream &stream);

// The libnpurt stream that work on `device` goes to now.
inline npurtStream_t currentNative(int device)
{
	return nativeStream(currentStream(device));
}

// Device memory: the c10::Allocator for PrivateUse1.
c10::Allocator *allocator();
// Throws torch's out-of-memory error for a request of n bytes, with the
// pool's figures and libnpurt's message.
[[noreturn]] void throwOutOfMemory(int device, size_t n);
// npurtFree, reporting (once) a failure: deleters cannot throw.
void freeToRuntime(void *p);
// caching_allocator_delete: as the allocator's deleter, but a pointer that
// is not a live block raises (npurtFree's error) instead of being logged.
void rawDelete(void *p);

// Tensors shared with other processes (npu_ipc.cpp): frees the blocks of
// dead shared storages that no other process uses any more; how many.
size_t ipcCollect();

// Graph capture (npu_graph.cpp). Memory for a capture of an NPUGraph comes
// from its private pool: capturePoolAllocate returns a block of it when the
// current stream of `device` captures for an NPUGraph (nullptr otherwise);
// capturePoolFree takes back a block of a pool (false: not one).
void *capturePoolAllocate(int device, size_t n);
bool capturePoolFree(void *p);
// record_stream(): a pool block used by another stream is not reused
// before the capture ends.
void capturePoolRecordStream(void *p, npurtStream_t stream);
// Whether a capture for an NPUGraph is underway in any thread.
bool captureUnderway();
// While any capture is underway, this thread's capture mode is relaxed for
// the scope: the allocator's npurtMalloc and npurtFree do not wait for the
// device, so a capture need not forbid them.
class RelaxedCaptureMode {
public:
	RelaxedCaptureMode();
	~RelaxedCaptureMode();
	RelaxedCaptureMode(const RelaxedCaptureMode &) = delete;
	RelaxedCaptureMode &operator=(const RelaxedCaptureMode &) = delete;

private:
	bool active_;
	npurtStreamCaptureMode mode_ = npurtStreamCaptureModeRelaxed;
};

// Call sites for fault reports and the profiler. An OpScope names the ATen
// op a kernel runs for; the outermost scope of a thread wins, so helper
// launches (a fill inside add, a copy inside mm) carry the op's name. Each
// enqueue calls enqueueSite() first: it gives libnpurt the Python file and
// line that called the op (captured once per scope through the hook
// npu_python.cpp installs, when call sites are on) and the op's name, as
// a call-site id registered once per site and name (npurtSetCallSiteId:
// no text compared, no lock taken).
class OpScope {
public:
	explicit OpScope(const char *op);
	~OpScope();
	OpScope(const OpScope &) = delete;
	OpScope &operator=(const OpScope &) = delete;
};
void enqueueSite(const char *what);
// A Python caller's file and line. The hook that finds them keeps each
// for the life of the process, so its address names it.
struct PythonSite {
	std::string file;
	int line = 0;
};
// The Python caller of the current op; nullptr if the thread runs no
// Python code (or too many sites were seen).
using PythonSiteHook = const PythonSite *(*)();
void setPythonSiteHook(PythonSiteHook hook);
void setCallSitesEnabled(bool on);
bool callSitesEnabled();

// torch.cuda.set_sync_debug_mode's setting for the NPU: 0 off, 1 warn,
// 2 error. checkSync() comes before a wait the caller did not ask for by
// name (a blocking copy, a stream synchronize; not torch.npu.synchronize
// or an event's, as CUDA's): it warns, or throws before the work is
// enqueued. syncMessage() is its text, for callers that warn themselves.
void setSyncDebugMode(int mode);
int syncDebugMode();
std::string syncMessage(const char *what);
void checkSync(const char *what);

// Autograd: 1.13's engine runs an NPU backward on the device's default
// stream and synchronises only CUDA streams. Before a backward the default
// stream of every NPU waits for the work queued on all its streams (the
// forward may have run on any); after it, the caller's current streams
// wait for the default streams (where the gradients were written). Between
// the two the calling thread's current streams are the default streams
// (the implicit gradients are made there); the prologue returns the
// caller's, which the epilogue restores.
std::vector<int64_t> syncStreamsBeforeBackward();
void syncStreamsAfterBackward(const std::vector<int64_t> &saved);

// A stream's handle by its native pointer, for messages ("" if unknown).
std::string describeNativeStream(const void *stream);
// A libnpurt message with "on stream 0x..." followed by torch's name of it.
std::string nameStreams(std::string msg);

// Ops run through the CPU fallback (and device copies that had to go
// through the host), counted for NPURT_TORCH_FALLBACK_REPORT.
void countFallback(const std::string &name);
std::map<std::string, uint64_t> fallbackCounts();

// Whether torch.autocast("npu") has its cast policies (torch >= 2.3).
bool autocastRegistered();

}  // namespace torch_npurt

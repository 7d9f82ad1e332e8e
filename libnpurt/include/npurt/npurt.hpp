// npurt.hpp - header-only C++ layer over the C API of libnpurt.
//
// Errors become npurt::Error exceptions (which carry the code and the
// runtime's message), unless exceptions are disabled, in which case a failed
// call prints its error and aborts. Handles are RAII and move-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "npurt/npurt.h"

// std::source_location where the library has it: <source_location> exists
// in libstdc++ 12 whatever the compiler, but Clang before 15 lacks the
// builtin it needs, and only the feature macro says so.
#if __has_include(<version>)
#include <version>
#endif
#if defined(__cpp_lib_source_location)
#include <source_location>
namespace npurt {
using SourceLocation = std::source_location;
}  // namespace npurt
#else
namespace npurt {
// C++17 (a PyTorch extension, say), or a compiler without it: the
// builtins that SourceLocation is made of, in GCC and Clang.
class SourceLocation {
public:
	static constexpr SourceLocation
	current(const char *file = __builtin_FILE(), unsigned line = __builtin_LINE(),
	        const char *function = __builtin_FUNCTION()) noexcept
	{
		SourceLocation l;
		l.file_ = file;
		l.line_ = line;
		l.function_ = function;
		return l;
	}
	constexpr const char *file_name() const noexcept { return file_; }
	constexpr unsigned line() const noexcept { return line_; }
	constexpr unsigned column() const noexcept { return 0; }
	constexpr const char *function_name() const noexcept { return function_; }

private:
	const char *file_ = "";
	unsigned line_ = 0;
	const char *function_ = "";
};
}  // namespace npurt
#endif

namespace npurt {

class Error : public std::runtime_error {
public:
	Error(npurtError_t code, const std::string &what) : std::runtime_error(what), code_(code) {}
	npurtError_t code() const noexcept { return code_; }

private:
	npurtError_t code_;
};

// Throws npurt::Error(err, what), or prints it and aborts without exceptions.
[[noreturn]] inline void fail(npurtError_t err, const std::string &what)
{
#if defined(__cpp_exceptions)
	throw Error(err, what);
#else
	std::fprintf(stderr, "npurt: %s\n", what.c_str());
	std::abort();
#endif
}

// Throws (or aborts) on a failed call, with the error's name and message.
inline void check(npurtError_t err)
{
	if (err == npurtSuccess)
		return;
	std::string what = std::string(npurtGetErrorName(err)) + ": ";
	const char *msg = npurtGetLastErrorMessage();
	what += (msg && *msg) ? msg : npurtGetErrorString(err);
	npurtGetLastError();
	fail(err, what);
}

// Number of NPUs; 0 (not an error) when there are none.
inline int deviceCount()
{
	int n = 0;
	npurtError_t err = npurtGetDeviceCount(&n);
	if (err == npurtErrorNoDevice) {
		npurtGetLastError();
		return 0;
	}
	check(err);
	return n;
}

inline npurtDeviceProp deviceProperties(int device)
{
	npurtDeviceProp prop{};
	check(npurtGetDeviceProperties(&prop, device));
	return prop;
}

inline int currentDevice()
{
	int dev = 0;
	check(npurtGetDevice(&dev));
	return dev;
}

inline void setDevice(int device)
{
	check(npurtSetDevice(device));
}

// Engine utilisation of a device over the window since the previous call.
inline npurtUtilization utilization(int device)
{
	npurtUtilization u{};
	check(npurtDeviceGetUtilization(device, &u));
	return u;
}

// The processes that have a device open (this one included).
inline std::vector<npurtProcessInfo> processes(int device)
{
	std::vector<npurtProcessInfo> out;
	for (;;) {
		unsigned n = 0;
		check(npurtDeviceGetProcesses(device, nullptr, &n));
		// Room for processes that open the device between the calls.
		out.resize(n + 4);
		n = static_cast<unsigned>(out.size());
		npurtError_t err = npurtDeviceGetProcesses(device, out.data(), &n);
		if (err == npurtErrorInvalidValue && n > out.size()) {
			npurtGetLastError();
			continue;
		}
		check(err);
		out.resize(n);
		return out;
	}
}

// Makes `device` current for a scope and restores the previous one.
class DeviceGuard {
public:
	explicit DeviceGuard(int device) : previous_(currentDevice()) { setDevice(device); }
	~DeviceGuard() { npurtSetDevice(previous_); }
	DeviceGuard(const DeviceGuard &) = delete;
	DeviceGuard &operator=(const DeviceGuard &) = delete;

private:
	int previous_;
};

// Records where the next enqueue comes from, for fault reports.
inline void callSite(const SourceLocation &loc)
{
	npurtSetCallSite(loc.file_name(), static_cast<int>(loc.line()), loc.function_name());
}

// A stream (RAII, move-only). A default-constructed Stream is the current
// context's default stream.
class Stream {
public:
	Stream() = default;
	explicit Stream(int priority, unsigned flags = npurtStreamNonBlocking)
	{
		check(npurtStreamCreateWithPriority(&s_, flags, priority));
	}
	~Stream()
	{
		if (s_)
			npurtStreamDestroy(s_);
	}
	Stream(Stream &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
	Stream &operator=(Stream &&o) noexcept
	{
		if (this != &o) {
			if (s_)
				npurtStreamDestroy(s_);
			s_ = std::exchange(o.s_, nullptr);
		}
		return *this;
	}
	Stream(const Stream &) = delete;
	Stream &operator=(const Stream &) = delete;

	npurtStream_t get() const { return s_; }
	void synchronize() const { check(npurtStreamSynchronize(s_)); }
	// False when the timeout passed first.
	bool synchronize(int64_t timeoutMs) const
	{
		npurtError_t err = npurtStreamSynchronizeTimeout(s_, timeoutMs);
		if (err == npurtErrorTimeout) {
			npurtGetLastError();
			return false;
		}
		check(err);
		return true;
	}
	bool ready() const
	{
		npurtError_t err = npurtStreamQuery(s_);
		if (err == npurtErrorNotReady)
			return false;
		check(err);
		return true;
	}
	void recover() const { check(npurtStreamRecover(s_)); }

private:
	npurtStream_t s_ = nullptr;
};

// An event (RAII, move-only); it times unless timing is false (as CUDA's
// events do unless created with cudaEventDisableTiming).
class Event {
public:
	explicit Event(bool timing = true)
	{
		check(npurtEventCreateWithFlags(&e_, timing ? npurtEventDefault
		                                            : npurtEventDisableTiming));
	}
	~Event()
	{
		if (e_)
			npurtEventDestroy(e_);
	}
	Event(Event &&o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
	Event &operator=(Event &&o) noexcept
	{
		if (this != &o) {
			if (e_)
				npurtEventDestroy(e_);
			e_ = std::exchange(o.e_, nullptr);
		}
		return *this;
	}
	Event(const Event &) = delete;
	Event &operator=(const Event &) = delete;

	npurtEvent_t get() const { return e_; }
	void record(const Stream &s = {}) const { check(npurtEventRecord(e_, s.get())); }
	void synchronize() const { check(npurtEventSynchronize(e_)); }
	bool ready() const
	{
		npurtError_t err = npurtEventQuery(e_);
		if (err == npurtErrorNotReady)
			return false;
		check(err);
		return true;
	}
	// Milliseconds from `start` to this event.
	float since(const Event &start) const
	{
		float ms = 0;
		check(npurtEventElapsedTime(&ms, start.e_, e_));
		return ms;
	}
	void waitOn(const Stream &s) const { check(npurtStreamWaitEvent(s.get(), e_, 0)); }

private:
	npurtEvent_t e_ = nullptr;
};

// Device memory for n elements of T (RAII, move-only).
template <typename T> class DeviceBuffer {
public:
	DeviceBuffer() = default;
	explicit DeviceBuffer(size_t n) : n_(n)
	{
		void *p = nullptr;
		check(npurtMalloc(&p, n * sizeof(T)));
		p_ = static_cast<T *>(p);
	}
	~DeviceBuffer() { npurtFree(p_); }
	DeviceBuffer(DeviceBuffer &&o) noexcept
	    : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0))
	{}
	DeviceBuffer &operator=(DeviceBuffer &&o) noexcept
	{
		if (this != &o) {
			npurtFree(p_);
			p_ = std::exchange(o.p_, nullptr);
			n_ = std::exchange(o.n_, 0);
		}
		return *this;
	}
	DeviceBuffer(const DeviceBuffer &) = delete;
	DeviceBuffer &operator=(const DeviceBuffer &) = delete;

	T *data() const { return p_; }
	size_t size() const { return n_; }
	size_t bytes() const { return n_ * sizeof(T); }

private:
	T *p_ = nullptr;
	size_t n_ = 0;
};

// Device memory at one address that grows in place (RAII, move-only): a
// reservation of `capacity` bytes on the current device, into which
// grow() maps more allocations behind what is there (npurtMem*, 2 MiB
// granules). What was written stays where it was; data() never changes.
class GrowableBuffer {
public:
	GrowableBuffer() = default;
	explicit GrowableBuffer(size_t capacity)
	{
		int dev = 0;
		check(npurtGetDevice(&dev));
		prop_.type = npurtMemAllocationTypePinned;
		prop_.location.type = npurtMemLocationTypeDevice;
		prop_.location.id = dev;
		check(npurtMemGetAllocationGranularity(&granule_, &prop_,
		                                       npurtMemAllocationGranularityMinimum));
		capacity_ = roundUp(capacity);
		check(npurtMemAddressReserve(&base_, capacity_, 0, 0, 0));
	}
	~GrowableBuffer() { reset(); }
	GrowableBuffer(GrowableBuffer &&o) noexcept { *this = std::move(o); }
	GrowableBuffer &operator=(GrowableBuffer &&o) noexcept
	{
		if (this != &o) {
			reset();
			prop_ = o.prop_;
			granule_ = o.granule_;
			base_ = std::exchange(o.base_, 0);
			capacity_ = std::exchange(o.capacity_, 0);
			mapped_ = std::exchange(o.mapped_, 0);
			handles_ = std::move(o.handles_);
			o.handles_.clear();
		}
		return *this;
	}
	GrowableBuffer(const GrowableBuffer &) = delete;
	GrowableBuffer &operator=(const GrowableBuffer &) = delete;

	// At least `bytes` usable from data(); past the capacity is an error
	// (npurtErrorInvalidValue, nothing changed).
	void grow(size_t bytes)
	{
		if (bytes <= mapped_)
			return;
		if (bytes > capacity_)
			fail(npurtErrorInvalidValue,
			     "npurtErrorInvalidValue: GrowableBuffer::grow: " +
			             std::to_string(bytes) + " bytes past its capacity of " +
			             std::to_string(capacity_));
		const size_t add = roundUp(bytes) - mapped_;
		npurtMemGenericAllocationHandle_t h = 0;
		check(npurtMemCreate(&h, add, &prop_, 0));
		npurtError_t err = npurtMemMap(base_ + mapped_, add, 0, h, 0);
		npurtMemAccessDesc rw{};
		rw.location = prop_.location;
		rw.flags = npurtMemAccessFlagsProtReadWrite;
		if (err == npurtSuccess) {
			err = npurtMemSetAccess(base_ + mapped_, add, &rw, 1);
			if (err != npurtSuccess)
				npurtMemUnmap(base_ + mapped_, add);
		}
		if (err != npurtSuccess) {
			npurtMemRelease(h);  // succeeds: the failure's message stays
			check(err);
		}
		handles_.push_back({mapped_, add, h});
		mapped_ += add;
	}

	void *data() const { return reinterpret_cast<void *>(base_); }
	size_t size() const { return mapped_; }  // usable bytes
	size_t capacity() const { return capacity_; }

private:
	struct Piece {
		size_t offset, size;
		npurtMemGenericAllocationHandle_t handle;
	};
	size_t roundUp(size_t n) const { return (n + granule_ - 1) / granule_ * granule_; }
	void reset() noexcept
	{
		for (auto it = handles_.rbegin(); it != handles_.rend(); ++it) {
			npurtMemUnmap(base_ + it->offset, it->size);
			npurtMemRelease(it->handle);
		}
		handles_.clear();
		if (base_)
			npurtMemAddressFree(base_, capacity_);
		base_ = 0;
		capacity_ = mapped_ = 0;
	}

	npurtMemAllocationProp prop_{};
	size_t granule_ = 1;
	npurtDeviceptr base_ = 0;
	size_t capacity_ = 0, mapped_ = 0;
	std::vector<Piece> handles_;
};

// Pinned host memory for n elements of T (RAII, move-only).
template <typename T> class HostBuffer {
public:
	HostBuffer() = default;
	explicit HostBuffer(size_t n) : n_(n)
	{
		void *p = nullptr;
		check(npurtMallocHost(&p, n * sizeof(T)));
		p_ = static_cast<T *>(p);
	}
	~HostBuffer() { npurtFreeHost(p_); }
	HostBuffer(HostBuffer &&o) noexcept
	    : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0))
	{}
	HostBuffer &operator=(HostBuffer &&o) noexcept
	{
		if (this != &o) {
			npurtFreeHost(p_);
			p_ = std::exchange(o.p_, nullptr);
			n_ = std::exchange(o.n_, 0);
		}
		return *this;
	}
	HostBuffer(const HostBuffer &) = delete;
	HostBuffer &operator=(const HostBuffer &) = delete;

	T *data() const { return p_; }
	size_t size() const { return n_; }
	T &operator[](size_t i) const { return p_[i]; }

private:
	T *p_ = nullptr;
	size_t n_ = 0;
};

// Copies with the call site recorded for fault reports.
inline void copyAsync(void *dst, const void *src, size_t bytes, const Stream &s = {},
                      SourceLocation loc = SourceLocation::current())
{
	callSite(loc);
	check(npurtMemcpyAsync(dst, src, bytes, npurtMemcpyDefault, s.get()));
}

inline void fillAsync(void *dst, int value, size_t bytes, const Stream &s = {},
                      SourceLocation loc = SourceLocation::current())
{
	callSite(loc);
	check(npurtMemsetAsync(dst, value, bytes, s.get()));
}

inline void launch(const npurtOpDesc &d, const Stream &s = {},
                   SourceLocation loc = SourceLocation::current())
{
	callSite(loc);
	check(npurtLaunchOp(&d, s.get()));
}

// Typed op helpers.
template <typename T> constexpr npurtDataType dataType();
template <> constexpr npurtDataType dataType<float>()
{
	return npurtFloat32;
}
template <> constexpr npurtDataType dataType<int32_t>()
{
	return npurtInt32;
}

// out = a op b, elementwise (op: npurtOpAdd ... npurtOpMin).
template <typename T>
void elementwise(npurtOpKind op, const DeviceBuffer<T> &a, const DeviceBuffer<T> &b,
                 DeviceBuffer<T> &out, const Stream &s = {},
                 SourceLocation loc = SourceLocation::current())
{
	npurtOpDesc d{};
	d.op = op;
	d.dtype = d.outDtype = dataType<T>();
	d.a = a.data();
	d.b = b.data();
	d.out = out.data();
	d.n = out.size();
	launch(d, s, loc);
}

// out = f(a) for npurtOpRelu, npurtOpGelu, npurtOpExp.
inline void activation(npurtOpKind op, const DeviceBuffer<float> &a, DeviceBuffer<float> &out,
                       const Stream &s = {}, SourceLocation loc = SourceLocation::current())
{
	npurtOpDesc d{};
	d.op = op;
	d.dtype = d.outDtype = npurtFloat32;
	d.a = a.data();
	d.out = out.data();
	d.n = out.size();
	launch(d, s, loc);
}

// out (m x n) = alpha * a (m x k) * b (k x n) + beta * out, float32.
inline void gemm(const DeviceBuffer<float> &a, const DeviceBuffer<float> &b,
                 DeviceBuffer<float> &out, uint64_t m, uint64_t n, uint64_t k, float alpha = 1.0f,
                 float beta = 0.0f, const Stream &s = {},
                 SourceLocation loc = SourceLocation::current())
{
	npurtOpDesc d{};
	d.op = npurtOpGemm;
	d.dtype = d.outDtype = npurtFloat32;
	d.a = a.data();
	d.b = b.data();
	d.c = beta != 0.0f ? out.data() : nullptr;
	d.out = out.data();
	d.m = m;
	d.n = n;
	d.k = k;
	d.alpha = alpha;
	d.beta = beta;
	launch(d, s, loc);
}

// Runs fn(data) on the host in stream order.
inline void hostFunc(const Stream &s, npurtHostFn_t fn, void *data)
{
	check(npurtLaunchHostFunc(s.get(), fn, data));
}

}  // namespace npurt

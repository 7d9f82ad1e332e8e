// C API: contexts, memory, copies and IPC.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "context.h"
#include "error.h"
#include "npu_drm.h"
#include "runtime.h"
#include "stream.h"

using npurt::Context;
using npurt::Runtime;
using npurt::setError;

namespace {

constexpr uint64_t kPage = 4096;
// The driver's limit for one VM_ACCESS.
constexpr uint64_t kAccessChunk = 64ull << 20;

std::string hex(uint64_t v)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

uint64_t addrOf(const void *p)
{
	return reinterpret_cast<uint64_t>(p);
}

npurtError_t nullArgument(const char *api, const char *arg)
{
	return setError(npurtErrorInvalidValue, std::string(api) + ": " + arg + " is NULL");
}

// A device-side range of a copy: which context holds it, and its
// allocation's bounds.
struct DeviceSide {
	Context *ctx = nullptr;
	uint64_t base = 0;
	size_t size = 0;
};

// Resolves p as device memory; false if it is not. An address inside the
// device window that is not live memory is an error (freed, or bogus).
npurtError_t resolveDevice(const char *api, const char *what, const void *p, Context *hint,
                           DeviceSide *out, bool *isDevice)
{
	Runtime &rt = Runtime::instance();
	*isDevice = false;
	out->ctx = rt.findDeviceMemory(addrOf(p), hint, &out->base, &out->size);
	if (out->ctx) {
		*isDevice = true;
		return npurtSuccess;
	}
	if (rt.deviceOfAddress(addrOf(p)) >= 0)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + what + " " + hex(addrOf(p)) +
		                        " is a device address but not live device memory "
		                        "(freed, or never allocated)");
	return npurtSuccess;
}

npurtError_t checkBounds(const char *api, const char *what, const void *p, size_t count,
                         const DeviceSide &d)
{
	uint64_t off = addrOf(p) - d.base;
	if (count <= d.size && off <= d.size - count)
		return npurtSuccess;
	return setError(npurtErrorInvalidValue,
	                std::string(api) + ": " + std::to_string(count) + " bytes at " + what +
	                        " " + hex(addrOf(p)) + " overrun its allocation of " +
	                        std::to_string(d.size) + " bytes at " + hex(d.base));
}

// One VM_ACCESS, chunked to the driver's limit.
npurtError_t vmAccess(const char *api, Context *ctx, uint64_t devAddr, void *host, size_t count,
                      bool write)
{
	while (count) {
		size_t n = std::min<uint64_t>(count, kAccessChunk);
		drm_npu_vm_access a{};
		a.addr = devAddr;
		a.size = n;
		a.user_ptr = addrOf(host);
		a.flags = write ? DRM_NPU_VM_ACCESS_WRITE : 0;
		int ret = ctx->node().ioctl(DRM_IOCTL_NPU_VM_ACCESS, &a);
		if (ret == -ENXIO || ret == -EACCES)
			return setError(npurtErrorDeviceFault,
			                std::string(api) + ": device fault at " +
			                        hex(a.fault_addr) +
			                        (ret == -EACCES ? " (write to read-only memory)"
			                                        : " (unmapped)"));
		if (ret == -EFAULT)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": the host buffer at " +
			                        hex(addrOf(host)) + " is not accessible");
		if (ret)
			return setError(
			        npurt::errorFromErrno(ret),
			        npurt::osMessage(std::string(api) + ": device access", ret));
		devAddr += n;
		host = static_cast<char *>(host) + n;
		count -= n;
	}
	return npurtSuccess;
}

const char *kindName(npurtMemcpyKind k)
{
	switch (k) {
	case npurtMemcpyHostToHost:
		return "npurtMemcpyHostToHost";
	case npurtMemcpyHostToDevice:
		return "npurtMemcpyHostToDevice";
	case npurtMemcpyDeviceToHost:
		return "npurtMemcpyDeviceToHost";
	case npurtMemcpyDeviceToDevice:
		return "npurtMemcpyDeviceToDevice";
	default:
		return "npurtMemcpyDefault";
	}
}

npurtError_t current(Context **ctx, const char *api)
{
	return Runtime::instance().currentContext(ctx, api);
}

// Where a copy operand lives, from the stream's point of view.
enum class Side { Device, Direct, Pageable };

struct Operand {
	Side side = Side::Pageable;
	DeviceSide dev;
};

npurtError_t classify(const char *api, const char *what, const void *p, npurt::Stream *s,
                      Operand *out)
{
	bool isDevice = false;
	if (npurtError_t err = resolveDevice(api, what, p, &s->ctx(), &out->dev, &isDevice))
		return err;
	if (isDevice) {
		out->side = Side::Device;
		return npurtSuccess;
	}
	uint64_t base = 0;
	Runtime::HostRange r{};
	// Pinned or registered memory mapped in the stream's context is read
	// and written by the copy engine at its host address.
	if (Runtime::instance().findHostRange(addrOf(p), &base, &r) && r.ctx == &s->ctx())
		out->side = Side::Direct;
	else
		out->side = Side::Pageable;
	return npurtSuccess;
}

npurt::TaskInfo task(const char *api, const char *label, int op, uint64_t bytes,
                     const npurt::CallSite &site)
{
	npurt::TaskInfo t;
	t.api = api;
	t.label = label;
	t.op = op;
	t.bytes = bytes;
	t.site = site;
	return t;
}

// callerWaits: the caller waits for the copy right after (see Stream::submit).
npurtError_t submitCopy(npurt::Stream *s, uint64_t dst, uint64_t src, uint64_t n, const char *api,
                        const char *label, const npurt::CallSite &site, bool callerWaits = false)
{
	drm_npu_pkt_copy c{};
	c.hdr = {DRM_NPU_PKT_COPY, sizeof(c)};
	c.src = src;
	c.dst = dst;
	c.size = n;
	return s->submit(DRM_NPU_ENGINE_COPY, &c, sizeof(c), task(api, label, -1, n, site),
	                 callerWaits);
}

// Pageable copies of at least this size pin the host range for the copy
// and the engine moves the bytes directly: one pass over them instead of
// the CPU's memcpy into a staging buffer plus the engine's.
constexpr size_t kZeroCopyMin = 1u << 20;

// A pageable copy through a pin of its host range (Context::pinHost, which
// reuses the pin of an earlier copy of the range while the range has not
// changed), waited for before the pin is given back. False if the range cannot be pinned
// (or the copy would be deferred behind a host function): the caller
// stages it instead. Else *err is the copy's result.
bool zeroCopy(npurt::Stream *s, uint64_t devAddr, void *host, size_t count, bool toDevice,
              const char *api, const npurt::CallSite &site, npurtError_t *err)
{
	if (count < kZeroCopyMin || s->busy())
		return false;
	Context &c = s->ctx();
	Context::HostPin pin;
	if (!c.pinHost(host, count, toDevice, &pin))
		return false;
	uint64_t h = pin.deviceAddr(host);
	*err = submitCopy(s, toDevice ? devAddr : h, toDevice ? h : devAddr, count, api,
	                  toDevice ? "copy host (pageable, direct) -> device"
	                           : "copy device -> host (pageable, direct)",
	                  site, true);
	// The engine must be done with the pages before they are unpinned;
	// synchronize also waits for the copy should it have been deferred
	// behind a host function another thread enqueued meanwhile.
	if (!*err)
		*err = s->synchronize(-1, api);
	c.unpinHost(pin);
	return true;
}

// The chunk a pageable copy of count bytes moves through a staging buffer
// of bufSize bytes: the whole copy if it fits (copies in a row overlap
// through the buffers taken in turn), else half a buffer, so that the
// CPU's memcpy of one chunk overlaps the engine's of another. Smaller
// chunks lose more to each job's submission and wakeups than they gain.
size_t stagingChunk(size_t count, size_t bufSize)
{
	return count <= bufSize ? count : bufSize / 2;
}

// memcpy in 8 KiB pieces, for the staging copies. glibc moves blocks from
// about 16 KiB up to its non-temporal threshold with `rep movsb`, which an
// emulated CPU (QEMU TCG, where the tests and benchmarks run) executes a
// byte at a time: 0.47 GB/s there against 3.3 GB/s for its vector loop.
// Natively the pieces cost nothing measurable.
void stagingCopy(void *dst, const void *src, size_t n)
{
	constexpr size_t kPiece = 8u << 10;
	auto *d = static_cast<char *>(dst);
	const auto *s = static_cast<const char *>(src);
	for (size_t off = 0; off < n; off += kPiece)
		std::memcpy(d + off, s + off, std::min(kPiece, n - off));
}

// Pageable host to device: the CPU fills one pinned staging buffer while
// the copy engine drains those filled before (Stream::Staging).
// sync: the caller waits for the copy (npurtMemcpy).
npurtError_t stageIn(npurt::Stream *s, uint64_t dst, const void *src, size_t count, const char *api,
                     const npurt::CallSite &site, bool sync)
{
	// Behind a host function: keep a copy of the source (it may be reused
	// once this returns) and stage it when the stream gets there.
	if (!npurt::Stream::onWorker() && s->busy()) {
		auto copy = std::make_shared<std::vector<char>>(
		        static_cast<const char *>(src), static_cast<const char *>(src) + count);
		if (s->deferIfBusy([s, dst, copy, count, api, where = site] {
			    if (stageIn(s, dst, copy->data(), count, api, where, false))
				    npurtGetLastError();
		    }))
			return npurtSuccess;
	}
	auto lock = s->stagingLock();
	npurt::Stream::Staging *st = nullptr;
	if (npurtError_t err = s->staging(&st, api))
		return err;
	for (size_t off = 0; off < count; st->advance()) {
		int i = st->next;
		size_t n = std::min(count - off, stagingChunk(count, st->buf[i].size));
		if (npurt::waitPoint(st->use[i], INT64_MAX))
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": staging wait failed");
		stagingCopy(st->buf[i].ptr, static_cast<const char *>(src) + off, n);
		// The last chunk of a synchronous copy is waited for at once.
		if (npurtError_t err = submitCopy(s, dst + off, addrOf(st->buf[i].ptr), n, api,
		                                  "copy host (pageable) -> device", site,
		                                  sync && off + n == count))
			return err;
		st->use[i] = s->tail();
		off += n;
	}
	return npurtSuccess;
}

// Device to pageable host: the engine fills one buffer while the CPU
// empties the other; returns when the data has arrived.
npurtError_t stageOut(npurt::Stream *s, void *dst, uint64_t src, size_t count, const char *api,
                      const npurt::CallSite &site)
{
	// The staging buffers are reused as soon as the engine is done with
	// them, which a copy deferred behind a host function would not be.
	if (npurtError_t err = s->drainHostWork(api))
		return err;
	auto lock = s->stagingLock();
	npurt::Stream::Staging *st = nullptr;
	if (npurtError_t err = s->staging(&st, api))
		return err;
	npurt::PinnedBuffer *bufs = st->buf;
	npurt::Point *use = st->use;
	struct Pending {
		size_t off = 0, n = 0;
		int buf = -1;
	} prev;
	auto drain = [&](const Pending &p) -> npurtError_t {
		if (p.buf < 0)
			return npurtSuccess;
		if (npurt::waitPoint(use[p.buf], INT64_MAX))
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": staging wait failed");
		if (npurtError_t err = s->checkFailureLocked(api))
			return err;
		stagingCopy(static_cast<char *>(dst) + p.off, bufs[p.buf].ptr, p.n);
		return npurtSuccess;
	};
	for (size_t off = 0; off < count; st->advance()) {
		int i = st->next;
		size_t n = std::min(count - off, stagingChunk(count, bufs[i].size));
		if (npurt::waitPoint(use[i], INT64_MAX))
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": staging wait failed");
		// A copy in one chunk is waited for at once: the driver may run it
		// in this thread.
		if (npurtError_t err =
		            submitCopy(s, addrOf(bufs[i].ptr), src + off, n, api,
		                       "copy device -> host (pageable)", site, n == count))
			return err;
		use[i] = s->tail();
		if (npurtError_t err = drain(prev))
			return err;
		prev = {off, n, i};
		off += n;
	}
	return drain(prev);
}

npurtError_t copy(const char *api, void *dst, const void *src, size_t count, npurtMemcpyKind kind,
                  npurtStream_t stream, bool sync, void *ra)
{
	npurt::CallSite site = npurt::takeCallSite(ra);
	if (!count)
		return npurtSuccess;
	if (!dst || !src)
		return nullArgument(api, !dst ? "dst" : "src");
	if (kind < npurtMemcpyHostToHost || kind > npurtMemcpyDefault)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown kind " + std::to_string(kind));
	npurt::Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, api))
		return err;
	Operand d, o;
	if (npurtError_t err = classify(api, "dst", dst, s, &d))
		return err;
	if (npurtError_t err = classify(api, "src", src, s, &o))
		return err;
	bool dstDev = d.side == Side::Device, srcDev = o.side == Side::Device;
	if (kind != npurtMemcpyDefault) {
		bool wantDst = kind == npurtMemcpyHostToDevice || kind == npurtMemcpyDeviceToDevice;
		bool wantSrc = kind == npurtMemcpyDeviceToHost || kind == npurtMemcpyDeviceToDevice;
		if (wantDst != dstDev || wantSrc != srcDev)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + kindName(kind) + " but dst " +
			                        hex(addrOf(dst)) + " is " +
			                        (dstDev ? "device" : "host") + " memory and src " +
			                        hex(addrOf(src)) + " is " +
			                        (srcDev ? "device" : "host") + " memory");
	}
	if (dstDev)
		if (npurtError_t err = checkBounds(api, "dst", dst, count, d.dev))
			return err;
	if (srcDev)
		if (npurtError_t err = checkBounds(api, "src", src, count, o.dev))
			return err;

	Context *sc = &s->ctx();
	bool dstHere = d.side == Side::Direct || (dstDev && d.dev.ctx == sc);
	bool srcHere = o.side == Side::Direct || (srcDev && o.dev.ctx == sc);
	npurtError_t err = npurtSuccess;
	if (!dstDev && !srcDev && !(dstHere && srcHere)) {
		// Host to host, in stream order.
		if ((err = s->synchronize(-1, api)))
			return err;
		std::memmove(dst, src, count);
		return npurtSuccess;
	}
	if (dstHere && srcHere) {
		static const char *const labels[2][2] = {
		        {"copy host (pinned) -> host (pinned)", "copy host (pinned) -> device"},
		        {"copy device -> host (pinned)", "copy device -> device"}};
		// The engine refuses overlapping ranges (the result would depend
		// on the order it moves bytes in).
		if (addrOf(src) < addrOf(dst) + count && addrOf(dst) < addrOf(src) + count)
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) + ": the source and destination ranges of " +
			                std::to_string(count) + " bytes at " + hex(addrOf(src)) +
			                " and " + hex(addrOf(dst)) + " overlap");
		err = submitCopy(s, addrOf(dst), addrOf(src), count, api, labels[srcDev][dstDev],
		                 site, sync);
	} else if (dstDev && d.dev.ctx == sc && o.side == Side::Pageable) {
		// An asynchronous copy behind queued work is staged, so that the
		// call returns without waiting for that work.
		if (!((sync || s->idle()) && zeroCopy(s, addrOf(dst), const_cast<void *>(src),
		                                      count, true, api, site, &err)))
			err = stageIn(s, addrOf(dst), src, count, api, site, sync);
	} else if (srcDev && o.dev.ctx == sc && d.side == Side::Pageable) {
		if (zeroCopy(s, addrOf(src), dst, count, false, api, site, &err))
			return err;
		return stageOut(s, dst, addrOf(src), count, api, site);
	} else {
		// Memory of another context or NPU: in host order, through the
		// driver's MMU path, after the stream's earlier work.
		if ((err = s->synchronize(-1, api)))
			return err;
		if (!srcDev)
			return vmAccess(api, d.dev.ctx, addrOf(dst), const_cast<void *>(src), count,
			                true);
		if (!dstDev)
			return vmAccess(api, o.dev.ctx, addrOf(src), dst, count, false);
		std::vector<char> bounce(std::min<size_t>(count, 4u << 20));
		for (size_t done = 0; done < count;) {
			size_t n = std::min(bounce.size(), count - done);
			if ((err = vmAccess(api, o.dev.ctx, addrOf(src) + done, bounce.data(), n,
			                    false)))
				return err;
			if ((err = vmAccess(api, d.dev.ctx, addrOf(dst) + done, bounce.data(), n,
			                    true)))
				return err;
			done += n;
		}
		return npurtSuccess;
	}
	if (!err && sync)
		err = s->synchronize(-1, api);
	return err;
}

npurtError_t fill(const char *api, void *devPtr, int value, size_t count, npurtStream_t stream,
                  bool sync, void *ra)
{
	npurt::CallSite site = npurt::takeCallSite(ra);
	if (!count)
		return npurtSuccess;
	if (!devPtr)
		return nullArgument(api, "devPtr");
	npurt::Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, api))
		return err;
	Operand d;
	if (npurtError_t err = classify(api, "devPtr", devPtr, s, &d))
		return err;
	if (d.side != Side::Device)
		return setError(npurtErrorInvalidValue, std::string(api) + ": " +
		                                                hex(addrOf(devPtr)) +
		                                                " is not device memory");
	if (npurtError_t err = checkBounds(api, "devPtr", devPtr, count, d.dev))
		return err;
	npurtError_t err;
	if (d.dev.ctx != &s->ctx()) {
		if ((err = s->synchronize(-1, api)))
			return err;
		std::vector<unsigned char> pattern(std::min<size_t>(count, 4u << 20),
		                                   static_cast<unsigned char>(value));
		for (size_t done = 0; done < count;) {
			size_t n = std::min(pattern.size(), count - done);
			if ((err = vmAccess(api, d.dev.ctx, addrOf(devPtr) + done, pattern.data(),
			                    n, true)))
				return err;
			done += n;
		}
		return npurtSuccess;
	}
	drm_npu_pkt_fill f{};
	f.hdr = {DRM_NPU_PKT_FILL, sizeof(f)};
	f.dst = addrOf(devPtr);
	f.size = count;
	f.value = static_cast<unsigned char>(value);
	f.width = 1;
	npurt::TaskInfo t = task(api, "fill", -2, count, site);
	t.value = f.value;
	err = s->submit(DRM_NPU_ENGINE_COPY, &f, sizeof(f), t, sync);
	if (!err && sync)
		err = s->synchronize(-1, api);
	return err;
}

}  // namespace

extern "C" {

npurtError_t npurtCtxCreate(npurtContext_t *ctx, unsigned int flags, int device)
{
	try {
		if (!ctx)
			return nullArgument("npurtCtxCreate", "ctx");
		if (flags)
			return setError(npurtErrorInvalidValue,
			                "npurtCtxCreate: flags must be 0, not " + hex(flags));
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, "npurtCtxCreate"))
			return err;
		Context *c = nullptr;
		if (npurtError_t err = rt.createContext(device, &c, "npurtCtxCreate"))
			return err;
		npurt::setThreadContext(c);
		npurt::threadDevice() = device;
		*ctx = c;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtCtxCreate");
	}
}

npurtError_t npurtCtxDestroy(npurtContext_t ctx)
{
	try {
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (!ctx)
			return nullArgument("npurtCtxDestroy", "ctx");
		return rt.destroyContext(static_cast<Context *>(ctx));
	} catch (...) {
		return npurt::errorFromException("npurtCtxDestroy");
	}
}

npurtError_t npurtCtxSetCurrent(npurtContext_t ctx)
{
	try {
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (ctx && !rt.isContext(ctx))
			return setError(npurtErrorInvalidHandle,
			                "npurtCtxSetCurrent: not a live context (destroyed, or not "
			                "made by npurtCtxCreate)");
		auto *c = static_cast<Context *>(ctx);
		npurt::setThreadContext(c);
		if (c)
			npurt::threadDevice() = c->ordinal();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtCtxSetCurrent");
	}
}

npurtError_t npurtCtxGetCurrent(npurtContext_t *ctx)
{
	try {
		if (!ctx)
			return nullArgument("npurtCtxGetCurrent", "ctx");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtCtxGetCurrent"))
			return err;
		*ctx = c;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtCtxGetCurrent");
	}
}

npurtError_t npurtCtxGetDevice(int *device)
{
	try {
		if (!device)
			return nullArgument("npurtCtxGetDevice", "device");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtCtxGetDevice"))
			return err;
		*device = c->ordinal();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtCtxGetDevice");
	}
}

npurtError_t npurtMalloc(void **devPtr, size_t size)
{
	try {
		if (!devPtr)
			return nullArgument("npurtMalloc", "devPtr");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMalloc"))
			return err;
		uint64_t addr = 0;
		npurtError_t err = c->pool().allocate(size, 0, &addr);
		if (err)
			return err;
		*devPtr = reinterpret_cast<void *>(addr);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMalloc");
	}
}

npurtError_t npurtFree(void *devPtr)
{
	try {
		if (!devPtr)
			return npurtSuccess;
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtFree"))
			return err;
		uint64_t base = 0;
		size_t size = 0;
		Context *owner =
		        Runtime::instance().findDeviceMemory(addrOf(devPtr), c, &base, &size);
		if (!owner)
			return setError(
			        npurtErrorInvalidValue,
			        "npurtFree: " + hex(addrOf(devPtr)) +
			                " is not device memory from npurtMalloc (freed already, "
			                "host memory, or a bad pointer)");
		uint64_t b2 = 0;
		size_t s2 = 0;
		if (!owner->pool().lookup(addrOf(devPtr), &b2, &s2))
			return setError(
			        npurtErrorInvalidValue,
			        "npurtFree: " + hex(addrOf(devPtr)) +
			                " was opened with npurtIpcOpenMemHandle; close it with "
			                "npurtIpcCloseMemHandle");
		return owner->pool().deallocate(addrOf(devPtr));
	} catch (...) {
		return npurt::errorFromException("npurtFree");
	}
}

npurtError_t npurtMemGetInfo(size_t *freeBytes, size_t *totalBytes)
{
	try {
		if (!freeBytes || !totalBytes)
			return nullArgument("npurtMemGetInfo",
			                    !freeBytes ? "freeBytes" : "totalBytes");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMemGetInfo"))
			return err;
		uint64_t f = 0, t = 0;
		if (npurtError_t err = c->queryMemory(&f, &t))
			return err;
		*freeBytes = f;
		*totalBytes = t;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemGetInfo");
	}
}

npurtError_t npurtMemGetStats(npurtMemStats *stats)
{
	try {
		if (!stats)
			return nullArgument("npurtMemGetStats", "stats");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMemGetStats"))
			return err;
		npurt::AllocatorStats s = c->pool().stats();
		*stats = npurtMemStats{};
		stats->allocatedBytes = s.allocatedBytes.current;
		stats->allocatedBytesPeak = s.allocatedBytes.peak;
		stats->reservedBytes = s.reservedBytes.current;
		stats->reservedBytesPeak = s.reservedBytes.peak;
		stats->activeBlocks = s.activeBlocks.current;
		stats->activeBlocksPeak = s.activeBlocks.peak;
		stats->inactiveSplitBytes = s.inactiveSplitBytes.current;
		stats->inactiveSplitBytesPeak = s.inactiveSplitBytes.peak;
		stats->deviceAllocs = s.segmentAllocs;
		stats->deviceFrees = s.segmentFrees;
		stats->ooms = s.ooms;
		stats->cacheFlushes = s.cacheFlushRetries;
		stats->allocCalls = s.allocCalls;
		stats->freeCalls = s.freeCalls;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemGetStats");
	}
}

npurtError_t npurtMemResetPeakStats(void)
{
	try {
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMemResetPeakStats"))
			return err;
		c->pool().resetPeakStats();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemResetPeakStats");
	}
}

npurtError_t npurtMemEmptyCache(void)
{
	try {
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMemEmptyCache"))
			return err;
		c->pool().emptyCache();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemEmptyCache");
	}
}

npurtError_t npurtMallocHost(void **ptr, size_t size)
{
	try {
		if (!ptr)
			return nullArgument("npurtMallocHost", "ptr");
		if (!size) {
			*ptr = nullptr;
			return npurtSuccess;
		}
		if (size > (1ull << 40))
			return setError(npurtErrorInvalidValue,
			                "npurtMallocHost: " + std::to_string(size) +
			                        " bytes is too large");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMallocHost"))
			return err;
		uint64_t bytes = (size + kPage - 1) & ~(kPage - 1);
		drm_npu_bo_create bc{};
		bc.size = bytes;
		bc.kind = DRM_NPU_BO_HOST;
		int ret = c->node().ioctl(DRM_IOCTL_NPU_BO_CREATE, &bc);
		if (ret)
			return setError(ret == -ENOMEM ? npurtErrorHostMemoryAllocation
			                               : npurt::errorFromErrno(ret),
			                npurt::osMessage("npurtMallocHost: pinning " +
			                                         std::to_string(bytes) + " bytes",
			                                 ret));
		drm_npu_bo_info info{};
		info.handle = bc.handle;
		ret = c->node().ioctl(DRM_IOCTL_NPU_BO_INFO, &info);
		void *p = ret ? nullptr : c->node().mmap(bytes, info.mmap_offset);
		if (!p) {
			int e = ret ? -ret : errno;
			c->closeBo(bc.handle);
			return setError(
			        npurtErrorHostMemoryAllocation,
			        npurt::osMessage("npurtMallocHost: mapping pinned memory", e));
		}
		ret = c->bind(bc.handle, addrOf(p), bytes, false);
		Runtime::HostRange r{bytes, addrOf(p), size, c, bc.handle, true};
		if (ret || !Runtime::instance().addHostRange(addrOf(p), r)) {
			if (!ret)
				c->unbind(addrOf(p), bytes);
			c->node().munmap(p, bytes);
			c->closeBo(bc.handle);
			return setError(
			        npurtErrorOperatingSystem,
			        npurt::osMessage("npurtMallocHost: making pinned memory visible to "
			                         "the device",
			                         ret ? ret : -EEXIST));
		}
		*ptr = p;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMallocHost");
	}
}

npurtError_t npurtFreeHost(void *ptr)
{
	try {
		if (!ptr)
			return npurtSuccess;
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		uint64_t base = 0;
		Runtime::HostRange r{};
		if (!rt.takeHostRange(addrOf(ptr), true, &base, &r))
			return setError(
			        npurtErrorInvalidValue,
			        "npurtFreeHost: " + hex(addrOf(ptr)) +
			                " is not memory from npurtMallocHost (freed already?)");
		r.ctx->unbind(base, r.size);
		r.ctx->node().munmap(ptr, r.size);
		r.ctx->closeBo(r.handle);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtFreeHost");
	}
}

npurtError_t npurtHostRegister(void *ptr, size_t size, unsigned int flags)
{
	try {
		if (!ptr)
			return nullArgument("npurtHostRegister", "ptr");
		if (!size)
			return setError(npurtErrorInvalidValue, "npurtHostRegister: size is 0");
		if (flags & ~static_cast<unsigned int>(npurtHostRegisterReadOnly))
			return setError(npurtErrorInvalidValue,
			                "npurtHostRegister: unknown flags " + hex(flags));
		uint64_t start = addrOf(ptr) & ~(kPage - 1);
		uint64_t end = addrOf(ptr) + size;
		if (end < addrOf(ptr) || end > UINT64_MAX - kPage)
			return setError(npurtErrorInvalidValue,
			                "npurtHostRegister: the range overflows");
		end = (end + kPage - 1) & ~(kPage - 1);
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtHostRegister"))
			return err;
		Runtime &rt = Runtime::instance();
		uint64_t ob = 0;
		Runtime::HostRange other{};
		if (rt.findHostRange(start, &ob, &other) || rt.findHostRange(end - 1, &ob, &other))
			return setError(npurtErrorHostMemoryAlreadyRegistered,
			                "npurtHostRegister: " + hex(start) + "-" + hex(end) +
			                        " overlaps the registered or pinned range at " +
			                        hex(ob));
		if (rt.deviceOfAddress(start) >= 0)
			return setError(npurtErrorInvalidValue,
			                "npurtHostRegister: " + hex(addrOf(ptr)) +
			                        " is device memory");
		bool readonly = flags & npurtHostRegisterReadOnly;
		uint32_t handle = 0;
		int ret = c->userptrBo(start, end - start, readonly, &handle);
		if (ret == -ENOMEM)
			return setError(
			        npurtErrorHostMemoryAllocation,
			        "npurtHostRegister: pinning " + std::to_string(end - start) +
			                " bytes exceeds the locked-memory limit (RLIMIT_MEMLOCK, "
			                "ulimit -l) or host memory");
		if (ret == -EFAULT)
			return setError(
			        npurtErrorInvalidValue,
			        "npurtHostRegister: " + hex(start) + "-" + hex(end) +
			                " is not entirely mapped" +
			                (readonly ? ""
			                          : " writable (use npurtHostRegisterReadOnly "
			                            "for read-only memory)"));
		if (ret)
			return setError(npurt::errorFromErrno(ret),
			                npurt::osMessage("npurtHostRegister: pinning", ret));
		ret = c->bind(handle, start, end - start, readonly);
		Runtime::HostRange r{end - start, addrOf(ptr), size, c, handle, false};
		if (ret || !rt.addHostRange(start, r)) {
			if (!ret)
				c->unbind(start, end - start);
			c->closeBo(handle);
			return setError(npurtErrorHostMemoryAlreadyRegistered,
			                "npurtHostRegister: " + hex(start) + "-" + hex(end) +
			                        " overlaps a registered or pinned range");
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtHostRegister");
	}
}

npurtError_t npurtHostUnregister(void *ptr)
{
	try {
		if (!ptr)
			return nullArgument("npurtHostUnregister", "ptr");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		uint64_t base = 0;
		Runtime::HostRange r{};
		if (!rt.takeHostRange(addrOf(ptr), false, &base, &r))
			return setError(npurtErrorHostMemoryNotRegistered,
			                "npurtHostUnregister: " + hex(addrOf(ptr)) +
			                        " is not a pointer given to npurtHostRegister");
		r.ctx->unbind(base, r.size);
		r.ctx->closeBo(r.handle);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtHostUnregister");
	}
}

npurtError_t npurtPointerGetAttributes(npurtPointerAttributes *attr, const void *ptr)
{
	try {
		if (!attr)
			return nullArgument("npurtPointerGetAttributes", "attr");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtPointerGetAttributes"))
			return err;
		*attr = npurtPointerAttributes{};
		attr->device = -1;
		DeviceSide d;
		bool isDevice = false;
		if (npurtError_t err = resolveDevice("npurtPointerGetAttributes", "pointer", ptr, c,
		                                     &d, &isDevice))
			return err;
		if (isDevice) {
			attr->type = npurtMemoryTypeDevice;
			attr->device = d.ctx->ordinal();
			attr->devicePointer = const_cast<void *>(ptr);
			attr->base = reinterpret_cast<void *>(d.base);
			attr->size = d.size;
			return npurtSuccess;
		}
		uint64_t base = 0;
		Runtime::HostRange r{};
		if (Runtime::instance().findHostRange(addrOf(ptr), &base, &r)) {
			attr->type = npurtMemoryTypeHost;
			attr->device = r.ctx->ordinal();
			attr->devicePointer = attr->hostPointer = const_cast<void *>(ptr);
			attr->base = reinterpret_cast<void *>(r.userBase);
			attr->size = r.userSize;
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtPointerGetAttributes");
	}
}

npurtError_t npurtMemcpyAsync(void *dst, const void *src, size_t count, npurtMemcpyKind kind,
                              npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy("npurtMemcpyAsync", dst, src, count, kind, stream, false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpyAsync");
	}
}

npurtError_t npurtMemcpy(void *dst, const void *src, size_t count, npurtMemcpyKind kind)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy("npurtMemcpy", dst, src, count, kind, nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy");
	}
}

npurtError_t npurtMemsetAsync(void *devPtr, int value, size_t count, npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return fill("npurtMemsetAsync", devPtr, value, count, stream, false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemsetAsync");
	}
}

npurtError_t npurtMemset(void *devPtr, int value, size_t count)
{
	void *ra = __builtin_return_address(0);
	try {
		return fill("npurtMemset", devPtr, value, count, nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset");
	}
}

npurtError_t npurtIpcGetMemHandle(npurtIpcMemHandle_t *handle, void *devPtr)
{
	try {
		const char *api = "npurtIpcGetMemHandle";
		if (!handle)
			return nullArgument(api, "handle");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		uint64_t base = 0;
		size_t size = 0;
		Context *owner =
		        Runtime::instance().findDeviceMemory(addrOf(devPtr), c, &base, &size);
		uint64_t segBase = 0, segSize = 0;
		uint32_t bo = 0;
		if (!owner || !owner->findSegment(addrOf(devPtr), &segBase, &segSize, &bo))
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + hex(addrOf(devPtr)) +
			                        " is not live memory from npurtMalloc");
		drm_prime_handle p{};
		p.handle = bo;
		p.flags = DRM_CLOEXEC | DRM_RDWR;
		int ret = owner->node().ioctl(DRM_IOCTL_PRIME_HANDLE_TO_FD, &p);
		if (ret)
			return setError(npurt::errorFromErrno(ret),
			                npurt::osMessage(std::string(api) + ": exporting", ret));
		*handle = npurtIpcMemHandle_t{};
		handle->fd = p.fd;
		handle->deviceIndex =
		        Runtime::instance().device(owner->ordinal()).prop().deviceIndex;
		handle->offset = addrOf(devPtr) - segBase;
		handle->size = segSize;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtIpcGetMemHandle");
	}
}

npurtError_t npurtIpcOpenMemHandle(void **devPtr, npurtIpcMemHandle_t handle, unsigned int flags)
{
	try {
		const char *api = "npurtIpcOpenMemHandle";
		if (!devPtr)
			return nullArgument(api, "devPtr");
		// 1 is CUDA's cudaIpcMemLazyEnablePeerAccess: accepted, nothing to do.
		if (flags & ~1u)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": unknown flags " + hex(flags));
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		return c->ipcOpen(handle, devPtr);
	} catch (...) {
		return npurt::errorFromException("npurtIpcOpenMemHandle");
	}
}

npurtError_t npurtIpcCloseMemHandle(void *devPtr)
{
	try {
		const char *api = "npurtIpcCloseMemHandle";
		if (!devPtr)
			return nullArgument(api, "devPtr");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		uint64_t base = 0;
		size_t size = 0;
		Context *owner =
		        Runtime::instance().findDeviceMemory(addrOf(devPtr), c, &base, &size);
		if (!owner)
			owner = c;
		return owner->ipcClose(addrOf(devPtr));
	} catch (...) {
		return npurt::errorFromException("npurtIpcCloseMemHandle");
	}
}

}  // extern "C"

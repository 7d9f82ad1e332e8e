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
#include "copy.h"
#include "error.h"
#include "graph.h"
#include "mem_pool.h"
#include "mem_usage.h"
#include "npu_drm.h"
#include "pool_ipc.h"
#include "runtime.h"
#include "stream.h"
#include "vmm.h"

using npurt::addrOf;
using npurt::Context;
using npurt::hexAddr;
using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;

namespace {

constexpr uint64_t kPage = 4096;

npurtError_t current(Context **ctx, const char *api)
{
	return Runtime::instance().currentContext(ctx, api);
}

bool isManaged(const void *p, Runtime::HostRange *r)
{
	return Runtime::instance().findManagedRange(addrOf(p), r);
}

npurtError_t copy2D(const char *api, void *dst, size_t dpitch, const void *src, size_t spitch,
                    size_t width, size_t height, npurtMemcpyKind kind, npurtStream_t stream,
                    bool sync, void *ra)
{
	if (width > dpitch || width > spitch)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": width " + std::to_string(width) +
		                        " is larger than dpitch " + std::to_string(dpitch) +
		                        " or spitch " + std::to_string(spitch));
	const size_t sizes[2] = {height, width}, dstStrides[2] = {dpitch, 1},
	             srcStrides[2] = {spitch, 1};
	npurt::StridedView v;
	v.ndim = 2;
	v.elemSize = 1;
	v.sizes = sizes;
	v.dstStrides = dstStrides;
	v.srcStrides = srcStrides;
	return npurt::planCopyStrided(api, dst, src, v, kind, stream, sync, ra);
}

npurt::PitchedBox box2D(size_t pitch, size_t width, size_t height)
{
	npurt::PitchedBox b;
	b.pitch = pitch;
	b.width = width;
	b.height = height;
	return b;
}

// The box of a pitched pointer at pos, of extent's size, as a strided
// side: its first byte and its strides (slice, row, byte); an error when
// the box leaves its rows or slices or overflows.
npurtError_t pitchedSide(const char *api, const char *what, const npurtPitchedPtr &p,
                         const npurtPos &pos, const npurtExtent &e, char **first, size_t strides[3])
{
	size_t end = 0, rowEnd = 0, slice = 0, off = 0, tmp = 0;
	if (__builtin_add_overflow(pos.x, e.width, &end) || end > p.pitch)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + what + "'s rows of pitch " +
		                        std::to_string(p.pitch) + " do not hold " +
		                        std::to_string(e.width) + " bytes at x " +
		                        std::to_string(pos.x));
	const bool slices = e.depth > 1 || pos.z > 0;
	if (slices && (__builtin_add_overflow(pos.y, e.height, &rowEnd) || rowEnd > p.ysize))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + what + "'s slices of " +
		                        std::to_string(p.ysize) + " rows do not hold " +
		                        std::to_string(e.height) + " rows at y " +
		                        std::to_string(pos.y));
	if (__builtin_mul_overflow(p.pitch, slices ? p.ysize : 0, &slice) ||
	    __builtin_mul_overflow(pos.z, slice, &off) ||
	    __builtin_mul_overflow(pos.y, p.pitch, &tmp) ||
	    __builtin_add_overflow(off, tmp, &off) || __builtin_add_overflow(off, pos.x, &off) ||
	    __builtin_add_overflow(reinterpret_cast<uintptr_t>(p.ptr), off, &tmp))
		return setError(npurtErrorInvalidValue, std::string(api) + ": " + what +
		                                                "'s position overflows an address");
	*first = static_cast<char *>(p.ptr) + off;
	strides[0] = slice;
	strides[1] = p.pitch;
	strides[2] = 1;
	return npurtSuccess;
}

npurtError_t copy3D(const char *api, const npurtMemcpy3DParms *p, npurtStream_t stream, bool sync,
                    void *ra)
{
	if (!p)
		return nullArgument(api, "p");
	if (p->srcArray || p->dstArray)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": there are no NPU arrays; srcArray and "
		                                   "dstArray must be NULL (use pitched pointers)");
	const npurtExtent &e = p->extent;
	if (!e.width || !e.height || !e.depth)
		return npurtSuccess;
	char *dst = nullptr, *src = nullptr;
	size_t dstStrides[3], srcStrides[3];
	if (!p->dstPtr.ptr || !p->srcPtr.ptr)
		return nullArgument(api, !p->dstPtr.ptr ? "dstPtr.ptr" : "srcPtr.ptr");
	if (npurtError_t err =
	            pitchedSide(api, "dstPtr", p->dstPtr, p->dstPos, e, &dst, dstStrides))
		return err;
	if (npurtError_t err =
	            pitchedSide(api, "srcPtr", p->srcPtr, p->srcPos, e, &src, srcStrides))
		return err;
	const size_t sizes[3] = {e.depth, e.height, e.width};
	npurt::StridedView v;
	v.ndim = 3;
	v.elemSize = 1;
	v.sizes = sizes;
	v.dstStrides = dstStrides;
	v.srcStrides = srcStrides;
	return npurt::planCopyStrided(api, dst, src, v, p->kind, stream, sync, ra);
}

npurtError_t fill3D(const char *api, const npurtPitchedPtr &p, int value, const npurtExtent &e,
                    npurtStream_t stream, bool sync, void *ra)
{
	npurt::PitchedBox b = box2D(p.pitch, e.width, e.height);
	b.depth = e.depth;
	if (__builtin_mul_overflow(p.pitch, p.ysize, &b.slicePitch))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": a slice of " + std::to_string(p.ysize) +
		                        " rows of pitch " + std::to_string(p.pitch) +
		                        " overflows a size");
	return npurt::planFillPitched(api, p.ptr, b, static_cast<unsigned char>(value), stream,
	                              sync, ra);
}

// npurtMalloc and npurtMallocPitch: size bytes from the current context's
// pool, charged to the call site at ra.
npurtError_t allocate(const char *api, void **devPtr, size_t size, void *ra)
{
	if (npurtError_t err = npurt::captureForbids(api))
		return err;
	Context *c = nullptr;
	if (npurtError_t err = current(&c, api))
		return err;
	uint64_t addr = 0;
	npurt::CallSite cs = npurt::peekCallSite(ra);
	npurtError_t err = c->pool().allocate(
	        size, 0, &addr, {cs.text ? cs.text->c_str() : nullptr, cs.returnAddress});
	if (err == npurtErrorMemoryAllocation)
		npurt::notifyOutOfMemory(c->ordinal(), size);
	if (err)
		return err;
	*devPtr = reinterpret_cast<void *>(addr);
	return npurtSuccess;
}

// npurtMallocPitch and npurtMalloc3D: height rows of width bytes, each
// row rounded up to NPURT_PITCH_ALIGNMENT; none for an empty request.
npurtError_t allocatePitched(const char *api, void **devPtr, size_t *pitch, size_t width,
                             size_t height, void *ra)
{
	if (!width || !height) {
		*devPtr = nullptr;
		*pitch = 0;
		return npurtSuccess;
	}
	size_t p = 0, bytes = 0;
	if (__builtin_add_overflow(width, size_t{NPURT_PITCH_ALIGNMENT - 1}, &p) ||
	    __builtin_mul_overflow(p / NPURT_PITCH_ALIGNMENT * NPURT_PITCH_ALIGNMENT, height,
	                           &bytes))
		return setError(npurtErrorMemoryAllocation,
		                std::string(api) + ": " + std::to_string(height) + " rows of " +
		                        std::to_string(width) + " bytes overflow a size");
	if (npurtError_t err = allocate(api, devPtr, bytes, ra))
		return err;
	*pitch = p / NPURT_PITCH_ALIGNMENT * NPURT_PITCH_ALIGNMENT;
	return npurtSuccess;
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
			                "npurtCtxCreate: flags must be 0, not " + hexAddr(flags));
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
		return allocate("npurtMalloc", devPtr, size, __builtin_return_address(0));
	} catch (...) {
		return npurt::errorFromException("npurtMalloc");
	}
}

npurtError_t npurtMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	try {
		const char *api = "npurtMallocPitch";
		if (!devPtr)
			return nullArgument(api, "devPtr");
		if (!pitch)
			return nullArgument(api, "pitch");
		return allocatePitched(api, devPtr, pitch, width, height,
		                       __builtin_return_address(0));
	} catch (...) {
		return npurt::errorFromException("npurtMallocPitch");
	}
}

npurtError_t npurtMalloc3D(npurtPitchedPtr *pitchedDevPtr, npurtExtent extent)
{
	try {
		const char *api = "npurtMalloc3D";
		if (!pitchedDevPtr)
			return nullArgument(api, "pitchedDevPtr");
		size_t rows = 0;
		if (__builtin_mul_overflow(extent.height, extent.depth, &rows))
			return setError(npurtErrorMemoryAllocation,
			                std::string(api) + ": " + std::to_string(extent.height) +
			                        " rows by " + std::to_string(extent.depth) +
			                        " slices overflow a size");
		npurtPitchedPtr p{};
		if (npurtError_t err = allocatePitched(api, &p.ptr, &p.pitch, extent.width, rows,
		                                       __builtin_return_address(0)))
			return err;
		p.xsize = extent.width;
		p.ysize = extent.height;
		*pitchedDevPtr = p;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMalloc3D");
	}
}

npurtError_t npurtFree(void *devPtr)
{
	try {
		if (!devPtr)
			return npurtSuccess;
		if (npurtError_t err = npurt::captureForbids("npurtFree"))
			return err;
		// A graph's memory lives as long as the graph: freeing it outside
		// the graph ends its use, as in CUDA, but keeps it for relaunches.
		if (npurt::isGraphMemory(devPtr))
			return npurtSuccess;
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtFree"))
			return err;
		uint64_t base = 0;
		size_t size = 0;
		Context *owner =
		        Runtime::instance().findDeviceMemory(addrOf(devPtr), c, &base, &size);
		Runtime::HostRange r{};
		if (!owner && isManaged(devPtr, &r)) {
			if (r.userBase == addrOf(devPtr) && r.ctx->hostPool().deallocate(devPtr))
				return npurtSuccess;
			return setError(npurtErrorInvalidValue,
			                "npurtFree: " + hexAddr(addrOf(devPtr)) +
			                        " is inside managed memory, not its start");
		}
		if (!owner)
			return setError(
			        npurtErrorInvalidValue,
			        "npurtFree: " + hexAddr(addrOf(devPtr)) +
			                " is not device memory from npurtMalloc (freed already, "
			                "host memory, or a bad pointer)");
		uint64_t b2 = 0;
		size_t s2 = 0;
		if (npurt::MemPool *pool =
		            npurt::findPoolMemory(*owner, addrOf(devPtr), &b2, &s2)) {
			// npurtMemPoolCreate's memory: a safe free in its pool.
			npurtError_t err = pool->allocator().deallocate(addrOf(devPtr));
			if (!err)
				npurt::memPoolFreed(pool);
			return err;
		}
		npurtError_t importErr = npurtSuccess;
		if (npurt::freeImportedPointer(addrOf(devPtr), &importErr))
			return importErr;  // npurtMemPoolImportPointer's
		if (!owner->pool().lookup(addrOf(devPtr), &b2, &s2))
			return setError(
			        npurtErrorInvalidValue,
			        "npurtFree: " + hexAddr(addrOf(devPtr)) +
			                (npurt::VirtualMemory::instance().findRange(
			                         *owner, addrOf(devPtr), &b2, &s2)
			                         ? " is mapped with npurtMemMap; npurtMemUnmap it"
			                         : " was opened with npurtIpcOpenMemHandle; close "
			                           "it "
			                           "with npurtIpcCloseMemHandle"));
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

npurtError_t npurtMemResetAccumulatedStats(void)
{
	try {
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMemResetAccumulatedStats"))
			return err;
		c->pool().resetAccumulatedStats();
		c->hostPool().resetAccumulatedStats();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemResetAccumulatedStats");
	}
}

npurtError_t npurtMemResetPeakStats(void)
{
	try {
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtMemResetPeakStats"))
			return err;
		c->pool().resetPeakStats();
		c->hostPool().resetPeakStats();
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
		c->hostPool().emptyCache();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemEmptyCache");
	}
}

namespace {

// internal: Runtime::kHostManaged for npurtMallocManaged, else 0.
npurtError_t hostAlloc(const char *api, void **ptr, size_t size, unsigned flags,
                       unsigned internal = 0)
{
	if (!ptr)
		return nullArgument(api, "ptr");
	constexpr unsigned kKnown =
	        npurtHostAllocPortable | npurtHostAllocMapped | npurtHostAllocWriteCombined;
	if (flags & ~kKnown)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown flags " + hexAddr(flags & ~kKnown));
	if (!size) {
		*ptr = nullptr;
		return npurtSuccess;
	}
	if (size > (1ull << 40))
		return setError(npurtErrorInvalidValue, std::string(api) + ": " +
		                                                std::to_string(size) +
		                                                " bytes is too large");
	Context *c = nullptr;
	if (npurtError_t err = npurt::captureForbids(api))
		return err;
	if (npurtError_t err = current(&c, api))
		return err;
	// Pinned memory is always mapped (unified addressing).
	return c->hostPool().allocate(size, flags | npurtHostAllocMapped | internal, ptr, api);
}

}  // namespace

npurtError_t npurtMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	try {
		const char *api = "npurtMallocManaged";
		if (flags != npurtMemAttachGlobal && flags != npurtMemAttachHost)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": flags must be npurtMemAttachGlobal or "
			                        "npurtMemAttachHost, not " +
			                        hexAddr(flags));
		if (devPtr && !size)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": size is 0 (CUDA refuses it too)");
		return hostAlloc(api, devPtr, size, npurtHostAllocDefault, Runtime::kHostManaged);
	} catch (...) {
		return npurt::errorFromException("npurtMallocManaged");
	}
}

npurtError_t npurtMallocHost(void **ptr, size_t size)
{
	try {
		return hostAlloc("npurtMallocHost", ptr, size, npurtHostAllocDefault);
	} catch (...) {
		return npurt::errorFromException("npurtMallocHost");
	}
}

npurtError_t npurtHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	try {
		return hostAlloc("npurtHostAlloc", ptr, size, flags);
	} catch (...) {
		return npurt::errorFromException("npurtHostAlloc");
	}
}

npurtError_t npurtHostGetDevicePointer(void **devPtr, void *hostPtr, unsigned int flags)
{
	try {
		const char *api = "npurtHostGetDevicePointer";
		if (!devPtr)
			return nullArgument(api, "devPtr");
		if (flags)
			return setError(npurtErrorInvalidValue, std::string(api) +
			                                                ": flags must be 0, not " +
			                                                std::to_string(flags));
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		uint64_t base = 0;
		Runtime::HostRange r{};
		if (!Runtime::instance().findHostRange(addrOf(hostPtr), &base, &r) ||
		    addrOf(hostPtr) < r.userBase || addrOf(hostPtr) - r.userBase >= r.userSize)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + hexAddr(addrOf(hostPtr)) +
			                        " is not pinned or registered host memory");
		if (r.ctx != c)
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) + ": " + hexAddr(addrOf(hostPtr)) +
			                " is mapped in another context than the current one");
		// Unified addressing: the device sees host memory at its address.
		*devPtr = hostPtr;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtHostGetDevicePointer");
	}
}

npurtError_t npurtHostGetFlags(unsigned int *flags, void *hostPtr)
{
	try {
		const char *api = "npurtHostGetFlags";
		if (!flags)
			return nullArgument(api, "flags");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		uint64_t base = 0;
		Runtime::HostRange r{};
		if (!rt.findHostRange(addrOf(hostPtr), &base, &r) || !r.pinned ||
		    (r.flags & Runtime::kHostManaged) || addrOf(hostPtr) < r.userBase ||
		    addrOf(hostPtr) - r.userBase >= r.userSize)
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) + ": " + hexAddr(addrOf(hostPtr)) +
			                " is not memory from npurtHostAlloc or npurtMallocHost");
		*flags = r.flags;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtHostGetFlags");
	}
}

npurtError_t npurtFreeHost(void *ptr)
{
	try {
		if (!ptr)
			return npurtSuccess;
		if (npurtError_t err = npurt::captureForbids("npurtFreeHost"))
			return err;
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		uint64_t base = 0;
		Runtime::HostRange r{};
		const bool found = rt.findHostRange(addrOf(ptr), &base, &r) && r.pinned;
		if (found && (r.flags & Runtime::kHostManaged))
			return setError(npurtErrorInvalidValue,
			                "npurtFreeHost: " + hexAddr(addrOf(ptr)) +
			                        " is managed memory (npurtMallocManaged), which "
			                        "npurtFree frees");
		if (!found || r.userBase != addrOf(ptr) || !r.ctx->hostPool().deallocate(ptr))
			return setError(
			        npurtErrorInvalidValue,
			        "npurtFreeHost: " + hexAddr(addrOf(ptr)) +
			                " is not memory from npurtMallocHost (freed already?)");
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtFreeHost");
	}
}

npurtError_t npurtHostMemGetStats(npurtHostMemStats *stats)
{
	try {
		if (!stats)
			return nullArgument("npurtHostMemGetStats", "stats");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, "npurtHostMemGetStats"))
			return err;
		*stats = c->hostPool().stats();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtHostMemGetStats");
	}
}

npurtError_t npurtHostRegister(void *ptr, size_t size, unsigned int flags)
{
	try {
		if (!ptr)
			return nullArgument("npurtHostRegister", "ptr");
		if (!size)
			return setError(npurtErrorInvalidValue, "npurtHostRegister: size is 0");
		if (flags & npurtHostRegisterIoMemory)
			return setError(npurtErrorNotSupported,
			                "npurtHostRegister: npurtHostRegisterIoMemory: the NPU "
			                "cannot map I/O memory");
		constexpr unsigned kKnown = npurtHostRegisterPortable | npurtHostRegisterMapped |
		                            npurtHostRegisterReadOnly;
		if (flags & ~kKnown)
			return setError(npurtErrorInvalidValue,
			                "npurtHostRegister: unknown flags " + hexAddr(flags));
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
			                "npurtHostRegister: " + hexAddr(start) + "-" +
			                        hexAddr(end) +
			                        " overlaps the registered or pinned range at " +
			                        hexAddr(ob));
		if (rt.deviceOfAddress(start) >= 0)
			return setError(npurtErrorInvalidValue,
			                "npurtHostRegister: " + hexAddr(addrOf(ptr)) +
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
		if (ret == -EOPNOTSUPP)
			return setError(npurtErrorNotSupported,
			                "npurtHostRegister: " + hexAddr(start) + "-" +
			                        hexAddr(end) +
			                        " maps a file shared, on a file system that "
			                        "writes it back: the NPU cannot write it behind "
			                        "the file system's dirty tracking (use "
			                        "npurtHostRegisterReadOnly, MAP_PRIVATE, or copy "
			                        "it into npurtMallocHost memory)");
		if (ret == -EFAULT)
			return setError(
			        npurtErrorInvalidValue,
			        "npurtHostRegister: " + hexAddr(start) + "-" + hexAddr(end) +
			                " is not entirely mapped" +
			                (readonly ? ""
			                          : " writable (use npurtHostRegisterReadOnly "
			                            "for read-only memory)"));
		if (ret)
			return setError(npurt::errorFromErrno(ret),
			                npurt::osMessage("npurtHostRegister: pinning", ret));
		ret = c->bind(handle, start, end - start, readonly);
		Runtime::HostRange r{end - start,
		                     addrOf(ptr),
		                     size,
		                     c,
		                     handle,
		                     false,
		                     flags | npurtHostRegisterMapped};
		if (ret || !rt.addHostRange(start, r)) {
			if (!ret)
				c->unbind(start, end - start);
			c->closeBo(handle);
			return setError(npurtErrorHostMemoryAlreadyRegistered,
			                "npurtHostRegister: " + hexAddr(start) + "-" +
			                        hexAddr(end) +
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
			                "npurtHostUnregister: " + hexAddr(addrOf(ptr)) +
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
		npurt::DeviceSide d;
		bool isDevice = false;
		if (npurtError_t err = npurt::resolveDevice("npurtPointerGetAttributes", "pointer",
		                                            ptr, c, &d, &isDevice))
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
			attr->type = r.flags & Runtime::kHostManaged ? npurtMemoryTypeManaged
			                                             : npurtMemoryTypeHost;
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
		return npurt::planCopy("npurtMemcpyAsync", dst, src, count, kind, stream, false,
		                       ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpyAsync");
	}
}

npurtError_t npurtMemcpy(void *dst, const void *src, size_t count, npurtMemcpyKind kind)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planCopy("npurtMemcpy", dst, src, count, kind, nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy");
	}
}

npurtError_t npurtMemcpy_ptds(void *dst, const void *src, size_t count, npurtMemcpyKind kind)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planCopy("npurtMemcpy", dst, src, count, kind, npurtStreamPerThread,
		                       true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy");
	}
}

npurtError_t npurtMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t height, npurtMemcpyKind kind,
                                npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy2D("npurtMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind,
		              stream, false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy2DAsync");
	}
}

npurtError_t npurtMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, npurtMemcpyKind kind)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy2D("npurtMemcpy2D", dst, dpitch, src, spitch, width, height, kind,
		              nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy2D");
	}
}

npurtError_t npurtMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t height, npurtMemcpyKind kind)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy2D("npurtMemcpy2D", dst, dpitch, src, spitch, width, height, kind,
		              npurtStreamPerThread, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy2D");
	}
}

npurtError_t npurtMemcpyStridedAsync(void *dst, const size_t *dstStrides, const void *src,
                                     const size_t *srcStrides, const size_t *sizes, int ndim,
                                     size_t elemSize, npurtMemcpyKind kind, npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		npurt::StridedView v;
		v.ndim = ndim;
		v.elemSize = elemSize;
		v.sizes = sizes;
		v.dstStrides = dstStrides;
		v.srcStrides = srcStrides;
		return npurt::planCopyStrided("npurtMemcpyStridedAsync", dst, src, v, kind, stream,
		                              false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpyStridedAsync");
	}
}

npurtError_t npurtMemsetAsync(void *devPtr, int value, size_t count, npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planFill("npurtMemsetAsync", devPtr,
		                       static_cast<unsigned char>(value), 1, count, stream, false,
		                       ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemsetAsync");
	}
}

npurtError_t npurtMemset(void *devPtr, int value, size_t count)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planFill("npurtMemset", devPtr, static_cast<unsigned char>(value), 1,
		                       count, nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset");
	}
}

namespace {

// The driver API's wider fills (cuMemsetD16/D32): count elements, devPtr
// aligned to the element.
npurtError_t memsetWide(const char *api, void *devPtr, uint32_t value, unsigned width, size_t count,
                        npurtStream_t stream, bool sync, void *ra)
{
	try {
		return npurt::planFill(api, devPtr, value, width, count, stream, sync, ra);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

}  // namespace

npurtError_t npurtMemsetD16Async(void *devPtr, unsigned short value, size_t count,
                                 npurtStream_t stream)
{
	return memsetWide("npurtMemsetD16Async", devPtr, value, 2, count, stream, false,
	                  __builtin_return_address(0));
}

npurtError_t npurtMemsetD32Async(void *devPtr, unsigned int value, size_t count,
                                 npurtStream_t stream)
{
	return memsetWide("npurtMemsetD32Async", devPtr, value, 4, count, stream, false,
	                  __builtin_return_address(0));
}

npurtError_t npurtMemsetD16(void *devPtr, unsigned short value, size_t count)
{
	return memsetWide("npurtMemsetD16", devPtr, value, 2, count, nullptr, true,
	                  __builtin_return_address(0));
}

npurtError_t npurtMemsetD32(void *devPtr, unsigned int value, size_t count)
{
	return memsetWide("npurtMemsetD32", devPtr, value, 4, count, nullptr, true,
	                  __builtin_return_address(0));
}

npurtError_t npurtMemsetD16_ptds(void *devPtr, unsigned short value, size_t count)
{
	return memsetWide("npurtMemsetD16", devPtr, value, 2, count, npurtStreamPerThread, true,
	                  __builtin_return_address(0));
}

npurtError_t npurtMemsetD32_ptds(void *devPtr, unsigned int value, size_t count)
{
	return memsetWide("npurtMemsetD32", devPtr, value, 4, count, npurtStreamPerThread, true,
	                  __builtin_return_address(0));
}

namespace {

// npurtMemcpyPeer(Async): both devices exist, dst and src are memory of
// them; then a device-to-device copy on the stream's engine, which is
// given access to the other NPU's memory if it has none (CUDA copies
// between peers without peer access enabled).
npurtError_t copyPeer(const char *api, void *dst, int dstDevice, const void *src, int srcDevice,
                      size_t count, npurtStream_t stream, bool sync, void *ra)
{
	Runtime &rt = Runtime::instance();
	if (npurtError_t err = rt.checkPair(dstDevice, srcDevice, api))
		return err;
	if (rt.deviceOfAddress(addrOf(dst)) != dstDevice)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": dst " + hexAddr(addrOf(dst)) +
		                        " is not memory of NPU " + std::to_string(dstDevice));
	if (rt.deviceOfAddress(addrOf(src)) != srcDevice)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": src " + hexAddr(addrOf(src)) +
		                        " is not memory of NPU " + std::to_string(srcDevice));
	return npurt::planCopy(api, dst, src, count, npurtMemcpyDeviceToDevice, stream, sync, ra,
	                       true);
}

}  // namespace

npurtError_t npurtMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	void *ra = __builtin_return_address(0);
	try {
		return copyPeer("npurtMemcpyPeer", dst, dstDevice, src, srcDevice, count, nullptr,
		                true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpyPeer");
	}
}

npurtError_t npurtMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                  size_t count, npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return copyPeer("npurtMemcpyPeerAsync", dst, dstDevice, src, srcDevice, count,
		                stream, false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpyPeerAsync");
	}
}

npurtError_t npurtMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                                npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planFillPitched("npurtMemset2DAsync", devPtr,
		                              box2D(pitch, width, height),
		                              static_cast<unsigned char>(value), stream, false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset2DAsync");
	}
}

npurtError_t npurtMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planFillPitched("npurtMemset2D", devPtr, box2D(pitch, width, height),
		                              static_cast<unsigned char>(value), nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset2D");
	}
}

npurtError_t npurtMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planFillPitched("npurtMemset2D", devPtr, box2D(pitch, width, height),
		                              static_cast<unsigned char>(value),
		                              npurtStreamPerThread, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset2D");
	}
}

npurtError_t npurtMemcpy3DAsync(const npurtMemcpy3DParms *p, npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy3D("npurtMemcpy3DAsync", p, stream, false, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy3DAsync");
	}
}

npurtError_t npurtMemcpy3D(const npurtMemcpy3DParms *p)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy3D("npurtMemcpy3D", p, nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy3D");
	}
}

npurtError_t npurtMemcpy3D_ptds(const npurtMemcpy3DParms *p)
{
	void *ra = __builtin_return_address(0);
	try {
		return copy3D("npurtMemcpy3D", p, npurtStreamPerThread, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemcpy3D");
	}
}

npurtError_t npurtMemset3DAsync(npurtPitchedPtr pitchedDevPtr, int value, npurtExtent extent,
                                npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return fill3D("npurtMemset3DAsync", pitchedDevPtr, value, extent, stream, false,
		              ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset3DAsync");
	}
}

npurtError_t npurtMemset3D(npurtPitchedPtr pitchedDevPtr, int value, npurtExtent extent)
{
	void *ra = __builtin_return_address(0);
	try {
		return fill3D("npurtMemset3D", pitchedDevPtr, value, extent, nullptr, true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset3D");
	}
}

npurtError_t npurtMemset3D_ptds(npurtPitchedPtr pitchedDevPtr, int value, npurtExtent extent)
{
	void *ra = __builtin_return_address(0);
	try {
		return fill3D("npurtMemset3D", pitchedDevPtr, value, extent, npurtStreamPerThread,
		              true, ra);
	} catch (...) {
		return npurt::errorFromException("npurtMemset3D");
	}
}

npurtError_t npurtMemset_ptds(void *devPtr, int value, size_t count)
{
	void *ra = __builtin_return_address(0);
	try {
		return npurt::planFill("npurtMemset", devPtr, static_cast<unsigned char>(value), 1,
		                       count, npurtStreamPerThread, true, ra);
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
		if (!owner)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + hexAddr(addrOf(devPtr)) +
			                        " is not live memory from npurtMalloc");
		uint64_t segBase = 0, segSize = 0, inode = 0;
		int fd = -1;
		if (npurtError_t err = owner->exportAllocation(base, size, &segBase, &segSize, &fd,
		                                               &inode, api))
			return err;
		*handle = npurtIpcMemHandle_t{};
		handle->fd = fd;
		handle->deviceIndex =
		        Runtime::instance().device(owner->ordinal()).prop().deviceIndex;
		handle->offset = addrOf(devPtr) - segBase;
		handle->size = segSize;
		handle->pid = getpid();
		handle->magic = NPURT_IPC_HANDLE_MAGIC;
		handle->inode = inode;
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
			                std::string(api) + ": unknown flags " + hexAddr(flags));
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

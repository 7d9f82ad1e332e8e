// C API: stream-ordered allocation and memory pools (npurtMallocAsync,
// npurtFreeAsync, npurtMemPool*). Checks the arguments and finds the pool;
// mem_pool.cpp and the caching allocator do the rest.
#include <string>

#include "context.h"
#include "error.h"
#include "graph.h"
#include "ipc.h"
#include "mem_pool.h"
#include "mem_usage.h"
#include "pool_ipc.h"
#include "runtime.h"
#include "stream.h"

using npurt::addrOf;
using npurt::Context;
using npurt::hexAddr;
using npurt::MemPool;
using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;
using npurt::Stream;

namespace {

npurtError_t mallocOn(const char *api, void **ptr, size_t size, MemPool *pool, Stream &s,
                      void *returnAddress)
{
	if (&pool->ctx() != &s.ctx())
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the stream (NPU " +
		                        std::to_string(s.ctx().ordinal()) +
		                        ") is not of the pool's context, the primary context "
		                        "of NPU " +
		                        std::to_string(pool->device()) +
		                        ": use a stream of that context");
	npurt::CallSite cs = npurt::peekCallSite(returnAddress);
	if (s.capturing()) {
		// An alloc node: the graph's memory (whatever the pool).
		npurtError_t err = npurtSuccess;
		if (npurt::captureMalloc(s, size, ptr, npurt::takeCallSite(returnAddress), api,
		                         &err))
			return err;
	}
	uint64_t addr = 0;
	npurtError_t err = pool->allocator().allocateOrdered(
	        size, s.serial(), &addr, {cs.text ? cs.text->c_str() : nullptr, cs.returnAddress});
	if (err == npurtErrorMemoryAllocation)
		npurt::notifyOutOfMemory(s.ctx().ordinal(), size);
	if (err)
		return err;
	*ptr = reinterpret_cast<void *>(addr);
	return npurtSuccess;
}

npurtError_t primaryOf(int device, Context **ctx, const char *api)
{
	return Runtime::instance().primaryContext(device, ctx, api);
}

}  // namespace

npurtError_t npurtMallocAsync(void **devPtr, size_t size, npurtStream_t stream)
{
	const char *api = "npurtMallocAsync";
	try {
		if (!devPtr)
			return nullArgument(api, "devPtr");
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		return mallocOn(api, devPtr, size, npurt::currentMemPool(s->ctx()), *s,
		                __builtin_return_address(0));
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMallocFromPoolAsync(void **ptr, size_t size, npurtMemPool_t memPool,
                                      npurtStream_t stream)
{
	const char *api = "npurtMallocFromPoolAsync";
	try {
		if (!ptr)
			return nullArgument(api, "ptr");
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		return mallocOn(api, ptr, size, pool, *s, __builtin_return_address(0));
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtFreeAsync(void *devPtr, npurtStream_t stream)
{
	const char *api = "npurtFreeAsync";
	try {
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		if (!devPtr)
			return npurtSuccess;
		if (s->capturing()) {
			npurtError_t err = npurtSuccess;
			if (npurt::captureFree(*s, devPtr,
			                       npurt::takeCallSite(__builtin_return_address(0)),
			                       api, &err))
				return err;
		}
		if (npurt::isGraphMemory(devPtr))
			return npurtSuccess;  // lives as long as its graph (see npurtFree)
		Context &ctx = s->ctx();
		const uint64_t addr = addrOf(devPtr);
		uint64_t base = 0;
		size_t size = 0;
		MemPool *pool = nullptr;
		npurt::CachingAllocator *alloc = nullptr;
		if (ctx.pool().lookup(addr, &base, &size))
			alloc = &ctx.pool();
		else if ((pool = npurt::findPoolMemory(ctx, addr, &base, &size)))
			alloc = &pool->allocator();
		npurtError_t importErr = npurtSuccess;
		if (!alloc && npurt::freeImportedPointer(addr, &importErr))
			return importErr;  // waits for the context's queued work
		if (!alloc) {
			Context *owner =
			        Runtime::instance().findDeviceMemory(addr, &ctx, &base, &size);
			std::string why =
			        owner && owner != &ctx
			                ? " is memory of another context (NPU " +
			                          std::to_string(owner->ordinal()) +
			                          "): free it on a stream of that context, or with "
			                          "npurtFree"
			                : " is not memory from npurtMallocAsync or npurtMalloc "
			                  "(freed "
			                  "already, mapped, opened by IPC, host memory, or a bad "
			                  "pointer)";
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + hexAddr(addr) + why);
		}
		if (base != addr)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + hexAddr(addr) +
			                        " is inside the allocation at " + hexAddr(base) +
			                        ", not its start");
		// The free completes after what the stream waited for.
		if (npurtError_t err = s->settleWaits(api))
			return err;
		if (npurtError_t err = alloc->deallocateOrdered(addr, s->serial()))
			return err;
		if (pool)
			npurt::memPoolFreed(pool);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolCreate(npurtMemPool_t *memPool, const npurtMemPoolProps *props)
{
	const char *api = "npurtMemPoolCreate";
	try {
		if (!memPool)
			return nullArgument(api, "memPool");
		if (!props)
			return nullArgument(api, "props");
		auto bad = [api](const std::string &what) {
			return setError(npurtErrorInvalidValue, std::string(api) + ": " + what);
		};
		if (props->allocType != npurtMemAllocationTypePinned)
			return bad("allocType " +
			           std::to_string(static_cast<int>(props->allocType)) +
			           " (only npurtMemAllocationTypePinned)");
		if (props->handleTypes != npurtMemHandleTypeNone &&
		    props->handleTypes != npurtMemHandleTypePosixFileDescriptor)
			return bad("handleTypes " +
			           std::to_string(static_cast<int>(props->handleTypes)) +
			           " (npurtMemHandleTypeNone, or "
			           "npurtMemHandleTypePosixFileDescriptor for a shareable pool)");
		if (props->location.type != npurtMemLocationTypeDevice)
			return bad("location type " +
			           std::to_string(static_cast<int>(props->location.type)) +
			           " (only npurtMemLocationTypeDevice)");
		if (props->win32SecurityAttributes || props->usage)
			return bad("win32SecurityAttributes and usage must be 0");
		for (unsigned char r : props->reserved)
			if (r)
				return bad("reserved bytes must be zero");
		Context *primary = nullptr;
		if (npurtError_t err = primaryOf(props->location.id, &primary, api))
			return err;
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::createMemPool(
		            *primary, props->maxSize,
		            props->handleTypes == npurtMemHandleTypePosixFileDescriptor, &pool))
			return err;
		*memPool = pool;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolDestroy(npurtMemPool_t memPool)
{
	const char *api = "npurtMemPoolDestroy";
	try {
		if (npurt::isImportedPool(memPool))
			return npurt::destroyImportedPool(memPool, api);
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		return npurt::destroyMemPool(pool, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

namespace {

// The device's default or current pool (pick), for the two getters.
npurtError_t devicePool(const char *api, npurtMemPool_t *memPool, int device,
                        MemPool *(*pick)(Context &))
{
	try {
		if (!memPool)
			return nullArgument(api, "memPool");
		Context *primary = nullptr;
		if (npurtError_t err = primaryOf(device, &primary, api))
			return err;
		*memPool = pick(*primary);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

}  // namespace

npurtError_t npurtDeviceGetDefaultMemPool(npurtMemPool_t *memPool, int device)
{
	return devicePool("npurtDeviceGetDefaultMemPool", memPool, device, npurt::defaultMemPool);
}

npurtError_t npurtDeviceGetMemPool(npurtMemPool_t *memPool, int device)
{
	return devicePool("npurtDeviceGetMemPool", memPool, device, npurt::currentMemPool);
}

npurtError_t npurtDeviceSetMemPool(int device, npurtMemPool_t memPool)
{
	const char *api = "npurtDeviceSetMemPool";
	try {
		Context *primary = nullptr;
		if (npurtError_t err = primaryOf(device, &primary, api))
			return err;
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		return npurt::setCurrentMemPool(device, pool, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolSetAttribute(npurtMemPool_t memPool, npurtMemPoolAttr attr, void *value)
{
	const char *api = "npurtMemPoolSetAttribute";
	try {
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		if (!value)
			return nullArgument(api, "value");
		return pool->setAttribute(attr, value, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolGetAttribute(npurtMemPool_t memPool, npurtMemPoolAttr attr, void *value)
{
	const char *api = "npurtMemPoolGetAttribute";
	try {
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		if (!value)
			return nullArgument(api, "value");
		return pool->getAttribute(attr, value, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolSetAccess(npurtMemPool_t memPool, const npurtMemAccessDesc *descList,
                                   size_t count)
{
	const char *api = "npurtMemPoolSetAccess";
	try {
		int device = 0;
		if (npurtError_t err = npurt::poolDevice(memPool, &device, api))
			return err;
		if (count && !descList)
			return nullArgument(api, "descList");
		// All checked before anything is taken, as CUDA's.
		for (size_t i = 0; i < count; i++) {
			const npurtMemAccessDesc &d = descList[i];
			const std::string which = std::string(api) + ": entry " + std::to_string(i);
			if (d.location.type != npurtMemLocationTypeDevice)
				return setError(npurtErrorInvalidValue,
				                which + ": the location must be a device");
			if (npurtError_t err = Runtime::instance().checkOrdinal(d.location.id, api))
				return err;
			if (d.flags != npurtMemAccessFlagsProtNone &&
			    d.flags != npurtMemAccessFlagsProtRead &&
			    d.flags != npurtMemAccessFlagsProtReadWrite)
				return setError(npurtErrorInvalidValue,
				                which + ": unknown access flags " +
				                        std::to_string(static_cast<int>(d.flags)));
			const bool own = d.location.id == device;
			if (own && d.flags != npurtMemAccessFlagsProtReadWrite)
				return setError(
				        npurtErrorNotSupported,
				        which +
				                ": a pool's memory is always read-write on its "
				                "own device (NPU " +
				                std::to_string(device) + ")");
			if (!own && d.flags != npurtMemAccessFlagsProtNone)
				return setError(npurtErrorNotSupported,
				                which + ": NPU " + std::to_string(d.location.id) +
				                        " cannot map the memory of a pool of NPU " +
				                        std::to_string(device) +
				                        " (copy it with npurtMemcpyPeer)");
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolGetAccess(npurtMemAccessFlags *flags, npurtMemPool_t memPool,
                                   npurtMemLocation *location)
{
	const char *api = "npurtMemPoolGetAccess";
	try {
		if (!flags)
			return nullArgument(api, "flags");
		if (!location)
			return nullArgument(api, "location");
		int device = 0;
		if (npurtError_t err = npurt::poolDevice(memPool, &device, api))
			return err;
		if (location->type != npurtMemLocationTypeDevice)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": the location must be a device");
		if (npurtError_t err = Runtime::instance().checkOrdinal(location->id, api))
			return err;
		*flags = location->id == device ? npurtMemAccessFlagsProtReadWrite
		                                : npurtMemAccessFlagsProtNone;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolTrimTo(npurtMemPool_t memPool, size_t minBytesToKeep)
{
	const char *api = "npurtMemPoolTrimTo";
	try {
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		pool->allocator().trimTo(minBytesToKeep);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolExportToShareableHandle(void *shareableHandle, npurtMemPool_t memPool,
                                                 npurtMemAllocationHandleType handleType,
                                                 unsigned int flags)
{
	const char *api = "npurtMemPoolExportToShareableHandle";
	try {
		if (!shareableHandle)
			return nullArgument(api, "shareableHandle");
		if (npurtError_t err = npurt::checkShareableType(api, handleType))
			return err;
		if (flags)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": flags must be 0");
		if (npurt::isImportedPool(memPool))
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": the pool was imported; export it "
			                                   "from the process that created it");
		MemPool *pool = nullptr;
		if (npurtError_t err = npurt::resolveMemPool(memPool, &pool, api))
			return err;
		int fd = -1;
		if (npurtError_t err = npurt::exportMemPool(*pool, &fd, api))
			return err;
		*static_cast<int *>(shareableHandle) = fd;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolImportFromShareableHandle(npurtMemPool_t *memPool, void *shareableHandle,
                                                   npurtMemAllocationHandleType handleType,
                                                   unsigned int flags)
{
	const char *api = "npurtMemPoolImportFromShareableHandle";
	try {
		if (!memPool)
			return nullArgument(api, "memPool");
		if (npurtError_t err = npurt::checkShareableType(api, handleType))
			return err;
		if (flags)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": flags must be 0");
		const intptr_t fd = reinterpret_cast<intptr_t>(shareableHandle);
		if (fd < 0 || fd > INT32_MAX)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + std::to_string(fd) +
			                        " is not a descriptor (pass it as "
			                        "(void *)(intptr_t)fd)");
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		return npurt::importMemPool(static_cast<int>(fd), c->ordinal(), memPool, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolExportPointer(npurtMemPoolPtrExportData *exportData, void *ptr)
{
	const char *api = "npurtMemPoolExportPointer";
	try {
		if (!exportData)
			return nullArgument(api, "exportData");
		if (!ptr)
			return nullArgument(api, "ptr");
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		return npurt::exportPoolPointer(*c, addrOf(ptr), exportData, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t npurtMemPoolImportPointer(void **ptr, npurtMemPool_t memPool,
                                       npurtMemPoolPtrExportData *exportData)
{
	const char *api = "npurtMemPoolImportPointer";
	try {
		if (!ptr)
			return nullArgument(api, "ptr");
		if (!exportData)
			return nullArgument(api, "exportData");
		return npurt::importPoolPointer(memPool, *exportData, ptr, api);
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

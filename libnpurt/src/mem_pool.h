// Memory pools for stream-ordered allocation (npurtMallocAsync and
// friends): the planning of which pool serves a request, the pools'
// attributes and their life. The reuse rules themselves are the caching
// allocator's (allocator.h: allocateOrdered, deallocateOrdered).
//
// A context's default pool is its caching pool (Context::pool(), the one
// npurtMalloc uses). A pool made with npurtMemPoolCreate has an allocator
// of its own over the device's primary context (its address space, its
// charges), optionally capped at maxSize.
//
// Thread safety: every function may be called from any thread. One mutex
// guards the registry (pools, devices' current pools); it is never held
// around a pool's allocator calls that may wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "allocator.h"
#include "npurt/npurt.h"

struct npurtMemPool_st {};

namespace npurt {

class Context;
class Stream;

class MemPool : public npurtMemPool_st {
public:
	// A context's default pool (its caching pool), or a created one.
	MemPool(Context &ctx, CachingAllocator &alloc);
	MemPool(Context &ctx, size_t maxSize, bool shareable);
	~MemPool();
	MemPool(const MemPool &) = delete;
	MemPool &operator=(const MemPool &) = delete;

	Context &ctx() { return ctx_; }
	CachingAllocator &allocator() { return *alloc_; }
	bool isDefault() const { return owned_ == nullptr; }
	// Made with npurtMemHandleTypePosixFileDescriptor (pool_ipc.cpp).
	bool shareable() const { return shareable_; }
	// Unique in the process, never reused (names the pool to importers).
	uint64_t id() const { return id_; }
	int device() const;

	npurtError_t setAttribute(npurtMemPoolAttr attr, const void *value, const char *api);
	npurtError_t getAttribute(npurtMemPoolAttr attr, void *value, const char *api);
	// After a synchronisation: cached memory above the release threshold
	// goes back.
	void trimToThreshold();

private:
	class Backend;
	Context &ctx_;
	std::unique_ptr<Backend> backend_;  // created pools: maxSize over ctx
	std::unique_ptr<CachingAllocator> owned_;
	CachingAllocator *alloc_;
	std::atomic<bool> followEvents_{true}, opportunistic_{true};
	std::atomic<uint64_t> releaseThreshold_;
	const bool shareable_ = false;
	const uint64_t id_;
};

// The pool handle's object, or npurtErrorInvalidValue (a destroyed or
// unknown pool).
npurtError_t resolveMemPool(npurtMemPool_t handle, MemPool **out, const char *api);
// ctx's default pool's object (made on first use).
MemPool *defaultMemPool(Context &ctx);
// The pool npurtMallocAsync on a stream of ctx takes: the device's current
// pool when it belongs to ctx, else ctx's default pool.
MemPool *currentMemPool(Context &ctx);
npurtError_t setCurrentMemPool(int device, MemPool *pool, const char *api);
npurtError_t createMemPool(Context &primary, size_t maxSize, bool shareable, MemPool **out);
// Destroys a created pool now, or, with allocations left or frees still
// queued, unlists it and lets it go at a later sync once they are gone
// (its cache goes back as they are freed).
npurtError_t destroyMemPool(MemPool *pool, const char *api);
// The created pool of ctx whose allocation holds addr (its base and size);
// null if none. Costs one atomic load while no pool has been created.
MemPool *findPoolMemory(Context &ctx, uint64_t addr, uint64_t *base, size_t *size);
// Whether addr is the start of a live allocation of ctx's created pool
// poolId (checked under the registry's lock: the pool may be going).
bool isPoolAllocation(Context &ctx, uint64_t poolId, uint64_t addr, size_t *size);
// Pools of ctx (and the default pool's object) go with the context.
void forgetContextInMemPools(Context &ctx);
// Pools of ctx with a release threshold trim to it (after a sync), and
// destroyed pools give back what they can (and go once empty).
void trimMemPools(Context &ctx);
// An allocation of pool was freed: a destroyed pool gives its cache back
// (pool may be gone already: it is only compared until found retired).
void memPoolFreed(MemPool *pool);

}  // namespace npurt

#include "mem_pool.h"
#include "pool_ipc.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "context.h"
#include "error.h"

namespace npurt {

// A created pool's segments: the context's, within maxSize.
class MemPool::Backend : public SegmentBackend {
public:
	Backend(SegmentBackend &inner, size_t maxSize) : inner_(inner), maxSize_(maxSize) {}

	npurtError_t allocSegment(size_t size, uint64_t *addr) override
	{
		return charged(size, [&] { return inner_.allocSegment(size, addr); });
	}
	void freeSegment(uint64_t addr, size_t size) override
	{
		inner_.freeSegment(addr, size);
		held_ -= size;
	}
	void memInfo(size_t *freeBytes, size_t *totalBytes) override
	{
		inner_.memInfo(freeBytes, totalBytes);
	}
	std::string oomDetail(size_t segmentSize) override
	{
		if (!fits(segmentSize))
			return "; the pool's maxSize (" + formatBytes(maxSize_) + ", " +
			       formatBytes(held_) + " held) was hit";
		return inner_.oomDetail(segmentSize);
	}
	size_t capacity() override
	{
		return maxSize_ ? std::min(maxSize_, inner_.capacity()) : inner_.capacity();
	}
	npurtError_t reserveRange(size_t size, uint64_t *addr) override
	{
		return inner_.reserveRange(size, addr);
	}
	void releaseRange(uint64_t addr, size_t size) override { inner_.releaseRange(addr, size); }
	npurtError_t mapPage(uint64_t addr, size_t size) override
	{
		return charged(size, [&] { return inner_.mapPage(addr, size); });
	}
	void unmapPage(uint64_t addr, size_t size) override
	{
		inner_.unmapPage(addr, size);
		held_ -= size;
	}

private:
	// Called with the pool's allocator lock held, which also guards held_.
	bool fits(size_t size) const { return !maxSize_ || size <= maxSize_ - held_; }
	// `size` more bytes from the context, if they fit under maxSize.
	template <typename Get> npurtError_t charged(size_t size, Get get)
	{
		if (!fits(size))
			return npurtErrorMemoryAllocation;
		npurtError_t err = get();
		if (!err)
			held_ += size;
		return err;
	}
	SegmentBackend &inner_;
	const size_t maxSize_;
	size_t held_ = 0;
};

namespace {

struct Registry {
	std::mutex mutex;  // guards everything below
	std::vector<MemPool *> pools;  // live handles
	std::vector<MemPool *> retired;  // destroyed with allocations left
	std::map<Context *, MemPool *> defaults;
	std::map<int, MemPool *> current;  // by device
};

Registry &registry()
{
	static auto *r = new Registry;  // outlives every static destructor
	return *r;
}

// Created pools alive (handles and retired): lookups skip the registry
// while there are none.
std::atomic<int> gCreated{0};
// Pools with a finite release threshold.
std::atomic<int> gThresholds{0};

}  // namespace

namespace {

uint64_t nextPoolId()
{
	static std::atomic<uint64_t> next{1};
	return next.fetch_add(1);
}

}  // namespace

MemPool::MemPool(Context &ctx, CachingAllocator &alloc)
    : ctx_(ctx), alloc_(&alloc), releaseThreshold_(UINT64_MAX), id_(nextPoolId())
{}

MemPool::MemPool(Context &ctx, size_t maxSize, bool shareable)
    : ctx_(ctx), backend_(std::make_unique<Backend>(ctx.segmentBackend(), maxSize)),
      owned_(std::make_unique<CachingAllocator>(*backend_, &ctx.streamTracker())),
      alloc_(owned_.get()), releaseThreshold_(0), shareable_(shareable), id_(nextPoolId())
{
	gThresholds.fetch_add(1);
}

MemPool::~MemPool()
{
	if (releaseThreshold_.load() != UINT64_MAX)
		gThresholds.fetch_sub(1);
}

int MemPool::device() const
{
	return ctx_.ordinal();
}

npurtError_t MemPool::setAttribute(npurtMemPoolAttr attr, const void *value, const char *api)
{
	auto flag = [&](std::atomic<bool> &f) {
		int v = *static_cast<const int *>(value);
		if (v != 0 && v != 1)
			return setError(npurtErrorInvalidValue, std::string(api) + ": the value " +
			                                                std::to_string(v) +
			                                                " is not 0 or 1");
		f = v != 0;
		alloc_->setReusePolicy(followEvents_, opportunistic_);
		return npurtSuccess;
	};
	auto resetOnly = [&]() {
		if (*static_cast<const uint64_t *>(value) != 0)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": a high watermark can only be reset (0)");
		alloc_->resetPeakStats();
		return npurtSuccess;
	};
	switch (attr) {
	case npurtMemPoolReuseFollowEventDependencies:
		return flag(followEvents_);
	case npurtMemPoolReuseAllowOpportunistic:
		return flag(opportunistic_);
	case npurtMemPoolReuseAllowInternalDependencies:
		if (*static_cast<const int *>(value) == 0)
			return npurtSuccess;
		return setError(
		        npurtErrorNotSupported,
		        std::string(api) +
		                ": the runtime does not insert stream dependencies to reuse "
		                "memory (npurtMemPoolReuseAllowInternalDependencies is 0); "
		                "order the streams with events");
	case npurtMemPoolAttrReleaseThreshold: {
		uint64_t v = *static_cast<const uint64_t *>(value);
		uint64_t old = releaseThreshold_.exchange(v);
		if ((old == UINT64_MAX) != (v == UINT64_MAX))
			gThresholds.fetch_add(v == UINT64_MAX ? -1 : 1);
		return npurtSuccess;
	}
	case npurtMemPoolAttrReservedMemHigh:
	case npurtMemPoolAttrUsedMemHigh:
		return resetOnly();
	case npurtMemPoolAttrReservedMemCurrent:
	case npurtMemPoolAttrUsedMemCurrent:
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": attribute " +
		                        std::to_string(static_cast<int>(attr)) + " is read-only");
	}
	return setError(npurtErrorInvalidValue, std::string(api) + ": unknown attribute " +
	                                                std::to_string(static_cast<int>(attr)));
}

npurtError_t MemPool::getAttribute(npurtMemPoolAttr attr, void *value, const char *api)
{
	AllocatorStats s = alloc_->stats();
	auto *u64 = static_cast<uint64_t *>(value);
	switch (attr) {
	case npurtMemPoolReuseFollowEventDependencies:
		*static_cast<int *>(value) = followEvents_ ? 1 : 0;
		return npurtSuccess;
	case npurtMemPoolReuseAllowOpportunistic:
		*static_cast<int *>(value) = opportunistic_ ? 1 : 0;
		return npurtSuccess;
	case npurtMemPoolReuseAllowInternalDependencies:
		*static_cast<int *>(value) = 0;
		return npurtSuccess;
	case npurtMemPoolAttrReleaseThreshold:
		*u64 = releaseThreshold_;
		return npurtSuccess;
	case npurtMemPoolAttrReservedMemCurrent:
		*u64 = s.reservedBytes.current;
		return npurtSuccess;
	case npurtMemPoolAttrReservedMemHigh:
		*u64 = s.reservedBytes.peak;
		return npurtSuccess;
	case npurtMemPoolAttrUsedMemCurrent:
		*u64 = s.allocatedBytes.current;
		return npurtSuccess;
	case npurtMemPoolAttrUsedMemHigh:
		*u64 = s.allocatedBytes.peak;
		return npurtSuccess;
	}
	return setError(npurtErrorInvalidValue, std::string(api) + ": unknown attribute " +
	                                                std::to_string(static_cast<int>(attr)));
}

void MemPool::trimToThreshold()
{
	uint64_t keep = releaseThreshold_;
	if (keep != UINT64_MAX && alloc_->stats().reservedBytes.current > keep)
		alloc_->trimTo(static_cast<size_t>(keep));
}

npurtError_t resolveMemPool(npurtMemPool_t handle, MemPool **out, const char *api)
{
	if (!handle)
		return nullArgument(api, "memPool");
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	auto *p = static_cast<MemPool *>(handle);
	bool known = std::ranges::find(r.pools, p) != r.pools.end();
	for (const auto &[ctx, d] : r.defaults)
		known = known || d == p;
	if (!known)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " +
		                        hexAddr(reinterpret_cast<uint64_t>(handle)) +
		                        (isImportedPool(handle)
		                                 ? " is a pool imported from another process: "
		                                   "it only imports pointers "
		                                   "(npurtMemPoolImportPointer)"
		                                 : " is not a memory pool (destroyed, or never "
		                                   "created)"));
	*out = p;
	return npurtSuccess;
}

MemPool *defaultMemPool(Context &ctx)
{
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	MemPool *&d = r.defaults[&ctx];
	if (!d)
		d = new MemPool(ctx, ctx.pool());
	return d;
}

MemPool *currentMemPool(Context &ctx)
{
	{
		Registry &r = registry();
		std::lock_guard<std::mutex> lock(r.mutex);
		auto it = r.current.find(ctx.ordinal());
		if (it != r.current.end() && &it->second->ctx() == &ctx)
			return it->second;
	}
	return defaultMemPool(ctx);
}

npurtError_t setCurrentMemPool(int device, MemPool *pool, const char *api)
{
	if (pool->device() != device)
		return setError(npurtErrorInvalidDevice,
		                std::string(api) + ": the pool is of NPU " +
		                        std::to_string(pool->device()) + ", not of NPU " +
		                        std::to_string(device));
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	r.current[device] = pool;
	return npurtSuccess;
}

npurtError_t createMemPool(Context &primary, size_t maxSize, bool shareable, MemPool **out)
{
	auto p = std::make_unique<MemPool>(primary, maxSize, shareable);
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	r.pools.push_back(p.get());
	gCreated.fetch_add(1);
	*out = p.release();
	return npurtSuccess;
}

npurtError_t destroyMemPool(MemPool *pool, const char *api)
{
	if (pool->isDefault())
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": a device's default pool cannot be destroyed");
	Registry &r = registry();
	{
		std::lock_guard<std::mutex> lock(r.mutex);
		std::erase(r.pools, pool);
		for (auto it = r.current.begin(); it != r.current.end();)
			it = it->second == pool ? r.current.erase(it) : std::next(it);
		// Live allocations, or frees whose work is still queued (active
		// blocks): CUDA's rule, the pool goes once they are gone, and
		// its memory stays valid until then (see trimMemPools).
		if (pool->allocator().stats().activeBlocks.current) {
			r.retired.push_back(pool);
			return npurtSuccess;
		}
		gCreated.fetch_sub(1);
	}
	delete pool;
	return npurtSuccess;
}

MemPool *findPoolMemory(Context &ctx, uint64_t addr, uint64_t *base, size_t *size)
{
	if (gCreated.load(std::memory_order_acquire) == 0)
		return nullptr;
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	for (const auto *list : {&r.pools, &r.retired})
		for (MemPool *p : *list)
			if (&p->ctx() == &ctx && p->allocator().lookup(addr, base, size))
				return p;
	return nullptr;
}

bool isPoolAllocation(Context &ctx, uint64_t poolId, uint64_t addr, size_t *size)
{
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	uint64_t base = 0;
	for (MemPool *p : r.pools)
		if (p->id() == poolId && &p->ctx() == &ctx)
			return p->allocator().lookup(addr, &base, size) && base == addr;
	return false;
}

void forgetContextInMemPools(Context &ctx)
{
	std::vector<MemPool *> gone;
	{
		Registry &r = registry();
		std::lock_guard<std::mutex> lock(r.mutex);
		for (auto *list : {&r.pools, &r.retired})
			std::erase_if(*list, [&](MemPool *p) {
				if (&p->ctx() != &ctx)
					return false;
				gone.push_back(p);
				gCreated.fetch_sub(1);
				return true;
			});
		for (auto it = r.current.begin(); it != r.current.end();)
			it = &it->second->ctx() == &ctx ? r.current.erase(it) : std::next(it);
		if (auto it = r.defaults.find(&ctx); it != r.defaults.end()) {
			gone.push_back(it->second);
			r.defaults.erase(it);
		}
	}
	for (MemPool *p : gone)
		delete p;
}

void trimMemPools(Context &ctx)
{
	if (gThresholds.load(std::memory_order_acquire) == 0)
		return;
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	// Under the registry's lock so no destroy frees one meanwhile; a trim
	// does not wait for the device.
	for (MemPool *p : r.pools)
		if (&p->ctx() == &ctx)
			p->trimToThreshold();
	if (auto it = r.defaults.find(&ctx); it != r.defaults.end())
		it->second->trimToThreshold();
	// Destroyed pools give everything back, and go with their last block.
	std::erase_if(r.retired, [&ctx](MemPool *p) {
		if (&p->ctx() != &ctx)
			return false;
		p->allocator().emptyCache();
		if (p->allocator().stats().activeBlocks.current)
			return false;
		gCreated.fetch_sub(1);
		delete p;
		return true;
	});
}

void memPoolFreed(MemPool *pool)
{
	Registry &r = registry();
	std::lock_guard<std::mutex> lock(r.mutex);
	// Looked up before it is used: once its last block was freed, a
	// retired pool may be deleted (trimMemPools) before this runs.
	if (std::ranges::find(r.retired, pool) != r.retired.end())
		pool->allocator().emptyCache();
}

}  // namespace npurt

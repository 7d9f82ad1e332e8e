// The caching pool of pinned host memory; see host_pool.h.
#include "host_pool.h"

#include "context.h"
#include "error.h"
#include "runtime.h"

namespace npurt {

namespace {

constexpr uint64_t kPageSize = 4096;
constexpr uint64_t kRoundPow2Below = 2ull << 20;
constexpr uint64_t kLargeRound = 2ull << 20;
// A request takes a cached block of at most this many times its size.
constexpr uint64_t kMaxWaste = 2;

void gauge(uint64_t &current, uint64_t &peak, int64_t delta)
{
	current += static_cast<uint64_t>(delta);
	peak = std::max(peak, current);
}

}  // namespace

HostPool::~HostPool()
{
	std::lock_guard<std::mutex> lock(mutex_);
	for (auto &p : parked_) {
		for (uint64_t m : p.markers)
			tracker_.release(m);
		release(p.block);
	}
	parked_.clear();
	for (auto &[addr, b] : live_)
		release(b);
	live_.clear();
	releaseCached();
}

uint64_t HostPool::roundSize(uint64_t size)
{
	if (size <= kPageSize)
		return kPageSize;
	if (size <= kRoundPow2Below) {
		uint64_t r = kPageSize;
		while (r < size)
			r <<= 1;
		return r;
	}
	return (size + kLargeRound - 1) & ~(kLargeRound - 1);
}

PinnedBuffer *HostPool::takeCached(uint64_t rounded)
{
	auto it = cached_.lower_bound(rounded);
	if (it == cached_.end() || it->first / kMaxWaste > rounded)
		return nullptr;
	PinnedBuffer *b = it->second;
	cached_.erase(it);
	stats_.cachedBlocks--;
	return b;
}

npurtError_t HostPool::pinBlock(uint64_t rounded, PinnedBuffer **out, const char *api)
{
	auto b = std::make_unique<PinnedBuffer>();
	npurtError_t err = ctx_.allocPinned(rounded, b.get(), api);
	if (err == npurtErrorHostMemoryAllocation && (!cached_.empty() || !parked_.empty())) {
		// Pinned memory held for reuse goes back first, then what
		// queued copies still hold once they have run.
		npurtGetLastError();
		releaseCached();
		err = ctx_.allocPinned(rounded, b.get(), api);
		if (err == npurtErrorHostMemoryAllocation && !parked_.empty()) {
			npurtGetLastError();
			waitParked();
			if ((*out = takeCached(rounded)))
				return npurtSuccess;
			releaseCached();
			err = ctx_.allocPinned(rounded, b.get(), api);
		}
	}
	if (err)
		return err;
	stats_.hostAllocs++;
	gauge(stats_.reservedBytes, stats_.reservedBytesPeak, static_cast<int64_t>(b->size));
	*out = b.release();
	return npurtSuccess;
}

npurtError_t HostPool::allocate(size_t size, unsigned flags, void **ptr, const char *api)
{
	const uint64_t rounded = roundSize(size);
	std::lock_guard<std::mutex> lock(mutex_);
	pollParked();
	PinnedBuffer *b = takeCached(rounded);
	if (b) {
		stats_.cacheHits++;
	} else if (npurtError_t err = pinBlock(rounded, &b, api)) {
		return err;
	}
	const uint64_t addr = reinterpret_cast<uint64_t>(b->ptr);
	Runtime::HostRange r{b->size, addr, size, &ctx_, b->handle, true, flags};
	if (!Runtime::instance().addHostRange(addr, r)) {
		// Cannot happen (the range is this process's fresh mapping).
		cached_.emplace(b->size, b);
		stats_.cachedBlocks++;
		return setError(npurtErrorOperatingSystem,
		                std::string(api) + ": pinned memory at " + hexAddr(addr) +
		                        " overlaps a registered range");
	}
	live_[addr] = b;
	stats_.allocCalls++;
	gauge(stats_.allocatedBytes, stats_.allocatedBytesPeak, static_cast<int64_t>(b->size));
	*ptr = b->ptr;
	return npurtSuccess;
}

bool HostPool::deallocate(void *ptr)
{
	const uint64_t addr = reinterpret_cast<uint64_t>(ptr);
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = live_.find(addr);
	if (it == live_.end())
		return false;
	uint64_t base = 0;
	Runtime::HostRange r{};
	Runtime::instance().takeHostRange(addr, true, &base, &r);
	PinnedBuffer *b = it->second;
	live_.erase(it);
	stats_.freeCalls++;
	stats_.allocatedBytes -= b->size;
	Parked p{b, {}};
	tracker_.markPending(&p.markers);
	if (p.markers.empty()) {
		cached_.emplace(b->size, b);
		stats_.cachedBlocks++;
	} else {
		parked_.push_back(std::move(p));
		stats_.parkedBlocks++;
	}
	pollParked();
	return true;
}

void HostPool::pollParked()
{
	reuseDoneParked(
	        parked_, tracker_,
	        [this](PinnedBuffer *b) {
		        cached_.emplace(b->size, b);
		        stats_.parkedBlocks--;
		        stats_.cachedBlocks++;
	        },
	        [](const Parked &) { return false; });
}

void HostPool::waitParked()
{
	waitParkedWork(parked_, tracker_);
	pollParked();
}

void HostPool::release(PinnedBuffer *b)
{
	stats_.reservedBytes -= b->size;
	stats_.hostFrees++;
	ctx_.freePinned(*b);
	delete b;
}

void HostPool::releaseCached()
{
	for (auto &[size, b] : cached_)
		release(b);
	cached_.clear();
	stats_.cachedBlocks = 0;
}

void HostPool::emptyCache()
{
	std::lock_guard<std::mutex> lock(mutex_);
	pollParked();
	releaseCached();
}

npurtHostMemStats HostPool::stats()
{
	std::lock_guard<std::mutex> lock(mutex_);
	pollParked();
	return stats_;
}

void HostPool::resetAccumulatedStats()
{
	std::lock_guard<std::mutex> lock(mutex_);
	stats_.hostAllocs = stats_.hostFrees = 0;
	stats_.allocCalls = stats_.freeCalls = stats_.cacheHits = 0;
}

void HostPool::resetPeakStats()
{
	std::lock_guard<std::mutex> lock(mutex_);
	stats_.allocatedBytesPeak = stats_.allocatedBytes;
	stats_.reservedBytesPeak = stats_.reservedBytes;
}

}  // namespace npurt

#include "allocator.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <limits>
#include <tuple>

#include "error.h"

namespace npurt {

std::atomic<uint64_t> gMemoryGeneration{0};

// One range of a segment. The blocks of a segment form a list in address
// order through prev/next; a whole unsplit segment is one block with neither.
struct CachingAllocator::Block {
	enum class State { Free, Live, Parked };

	uint64_t addr = 0;
	size_t size = 0;  // bytes of the block, a multiple of kMinBlockSize
	size_t requested = 0;  // bytes asked for, while live
	StreamId stream = 0;  // the stream the segment was allocated for
	bool small = false;  // in the small pool
	State state = State::Free;
	Block *prev = nullptr;
	Block *next = nullptr;
	std::vector<StreamId> uses;  // other streams recorded while live
	AllocSite site;  // while live

	bool split() const { return prev || next; }
};

namespace {

void add(AllocatorStat &s, uint64_t n)
{
	s.current += n;
	s.peak = std::max(s.peak, s.current);
}

void sub(AllocatorStat &s, uint64_t n)
{
	s.current -= n;
}

size_t roundUp(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

}  // namespace

std::string formatBytes(uint64_t n)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	char buf[32];
	if (n < 1024) {
		std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", n);
		return buf;
	}
	double v = static_cast<double>(n) / 1024;
	size_t u = 0;
	while (v >= 1024 && u + 1 < std::size(units)) {
		v /= 1024;
		u++;
	}
	std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
	return buf;
}

namespace {

// The segment a request of `size` (rounded) needs when no cached block fits.
size_t segmentSizeFor(size_t size)
{
	if (size <= CachingAllocator::kSmallSize)
		return CachingAllocator::kSmallSegment;
	if (size < CachingAllocator::kMinLargeAlloc)
		return CachingAllocator::kLargeSegment;
	return roundUp(size, CachingAllocator::kLargeRound);
}

}  // namespace

bool CachingAllocator::FreeOrder::operator()(const Block *a, const Block *b) const
{
	return std::tie(a->stream, a->size, a->addr) < std::tie(b->stream, b->size, b->addr);
}

bool CachingAllocator::FreeOrder::operator()(const Block *a, const FreeKey &b) const
{
	return std::tie(a->stream, a->size, a->addr) < std::tie(b.stream, b.size, b.addr);
}

bool CachingAllocator::FreeOrder::operator()(const FreeKey &a, const Block *b) const
{
	return std::tie(a.stream, a.size, a.addr) < std::tie(b->stream, b->size, b->addr);
}

CachingAllocator::CachingAllocator(SegmentBackend &backend, StreamTracker *tracker)
    : backend_(backend), tracker_(tracker)
{}

CachingAllocator::~CachingAllocator()
{
	std::vector<Block *> all;
	for (const auto &[addr, b] : live_)
		all.push_back(b);
	for (const auto &p : parked_) {
		all.push_back(p.block);
		for (uint64_t m : p.markers)
			tracker_->release(m);
	}
	all.insert(all.end(), smallFree_.begin(), smallFree_.end());
	all.insert(all.end(), largeFree_.begin(), largeFree_.end());
	// Every block is in exactly one of those; the first of each segment
	// gives the segment's base and, walking on, its size.
	for (Block *b : all) {
		if (b->prev)
			continue;
		size_t size = 0;
		for (Block *n = b; n; n = n->next)
			size += n->size;
		backend_.freeSegment(b->addr, size);
	}
	for (Block *b : all)
		delete b;
}

CachingAllocator::FreeSet &CachingAllocator::poolOf(const Block *b)
{
	return b->small ? smallFree_ : largeFree_;
}

void CachingAllocator::insertFree(Block *b)
{
	b->state = Block::State::Free;
	poolOf(b).insert(b);
	if (b->split())
		add(stats_.inactiveSplitBytes, b->size);
}

// A free block's neighbours are never free (they would have merged), so
// whether it is split cannot change while it sits in its pool.
void CachingAllocator::eraseFree(Block *b)
{
	poolOf(b).erase(b);
	if (b->split())
		sub(stats_.inactiveSplitBytes, b->size);
}

CachingAllocator::Block *CachingAllocator::findFree(bool small, StreamId stream, size_t size)
{
	FreeSet &pool = small ? smallFree_ : largeFree_;
	auto it = pool.lower_bound(FreeKey{stream, size, 0});
	if (it == pool.end() || (*it)->stream != stream)
		return nullptr;
	Block *b = *it;
	// An oversize block is not cut down for a smaller request, nor used
	// for an oversize one that would leave kLargeSegment or more of it
	// idle. Larger blocks on this stream are no better, so stop here.
	if (size < kMaxSplitSize && b->size >= kMaxSplitSize)
		return nullptr;
	if (size >= kMaxSplitSize && b->size - size >= kLargeSegment)
		return nullptr;
	return b;
}

npurtError_t CachingAllocator::newSegment(size_t size, size_t segmentSize, bool small,
                                          StreamId stream, Block **out, bool final)
{
	uint64_t base = 0;
	npurtError_t err = backend_.allocSegment(segmentSize, &base);
	if (err == npurtErrorMemoryAllocation && releaseCachedSegments() > 0) {
		stats_.cacheFlushRetries++;
		err = backend_.allocSegment(segmentSize, &base);
	}
	if (err == npurtErrorMemoryAllocation) {
		if (!final)
			return err;
		stats_.ooms++;
		return setError(err, oomMessage(size, segmentSize));
	}
	if (err != npurtSuccess)
		return err;

	stats_.segmentAllocs++;
	add(stats_.segments, 1);
	add(stats_.reservedBytes, segmentSize);
	auto *b = new Block;
	b->addr = base;
	b->size = segmentSize;
	b->stream = stream;
	b->small = small;
	*out = b;
	return npurtSuccess;
}

std::string CachingAllocator::oomMessage(size_t size, size_t segmentSize)
{
	size_t freeBytes = 0, totalBytes = 0;
	backend_.memInfo(&freeBytes, &totalBytes);
	uint64_t allocated = stats_.allocatedBytes.current;
	uint64_t unused = stats_.reservedBytes.current - allocated;
	std::string msg = "out of device memory: tried to allocate " + formatBytes(size);
	if (segmentSize != size)
		msg += " (in a new segment of " + formatBytes(segmentSize) + ")";
	msg += "; this process has " + formatBytes(allocated) + " allocated, " +
	       formatBytes(unused) + " reserved but unused; the device has " +
	       formatBytes(freeBytes) + " free of " + formatBytes(totalBytes);
	return msg + backend_.oomDetail(segmentSize);
}

npurtError_t CachingAllocator::allocate(size_t size, StreamId stream, uint64_t *addr,
                                        AllocSite site)
{
	if (!addr)
		return setError(npurtErrorInvalidValue, "allocate: the address pointer is null");
	*addr = 0;
	if (size == 0)
		return npurtSuccess;
	// Anything rounding up to a 2 MiB segment without overflow is a size
	// the backend can judge.
	if (size > std::numeric_limits<size_t>::max() - (kLargeRound - 1))
		return setError(npurtErrorInvalidValue,
		                "allocate: " + std::to_string(size) +
		                        " bytes overflows when rounded up to a segment");

	std::lock_guard<std::mutex> lock(mutex_);
	pollParked();
	size_t rounded = roundUp(size, kMinBlockSize);
	bool small = rounded <= kSmallSize;
	Block *b = findFree(small, stream, rounded);
	if (b) {
		eraseFree(b);
	} else {
		const size_t segment = segmentSizeFor(rounded);
		npurtError_t err = newSegment(size, segment, small, stream, &b, parked_.empty());
		// Freed memory still in reach of queued work comes back once that
		// work is done: wait for it rather than fail.
		if (err == npurtErrorMemoryAllocation && waitParked()) {
			b = findFree(small, stream, rounded);
			if (b) {
				eraseFree(b);
				err = npurtSuccess;
			} else {
				err = newSegment(size, segment, small, stream, &b, true);
			}
		}
		if (err != npurtSuccess)
			return err;
	}

	size_t rest = b->size - rounded;
	bool keepRest = small ? rest >= kMinBlockSize : rest > kSmallSize;
	if (keepRest && b->size < kMaxSplitSize) {
		auto *r = new Block;
		r->addr = b->addr + rounded;
		r->size = rest;
		r->stream = stream;
		r->small = small;
		r->prev = b;
		r->next = b->next;
		if (r->next)
			r->next->prev = r;
		b->next = r;
		b->size = rounded;
		insertFree(r);
	}

	b->state = Block::State::Live;
	b->requested = size;
	b->site = site;
	live_.emplace(b->addr, b);
	stats_.allocCalls++;
	add(stats_.allocatedBytes, b->size);
	add(stats_.requestedBytes, size);
	add(stats_.activeBlocks, 1);
	*addr = b->addr;
	return npurtSuccess;
}

// Returns a block that is neither live nor parked to its pool, merged with
// free neighbours.
void CachingAllocator::freeBlock(Block *b)
{
	sub(stats_.activeBlocks, 1);
	if (Block *p = b->prev; p && p->state == Block::State::Free) {
		eraseFree(p);
		b->addr = p->addr;
		b->size += p->size;
		b->prev = p->prev;
		if (b->prev)
			b->prev->next = b;
		delete p;
	}
	if (Block *n = b->next; n && n->state == Block::State::Free) {
		eraseFree(n);
		b->size += n->size;
		b->next = n->next;
		if (b->next)
			b->next->prev = b;
		delete n;
	}
	insertFree(b);
}

npurtError_t CachingAllocator::deallocate(uint64_t addr)
{
	if (addr == 0)
		return npurtSuccess;
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = live_.find(addr);
	if (it == live_.end()) {
		if (const Block *b = findLive(addr))
			return setError(npurtErrorInvalidValue,
			                "free: " + hexAddr(addr) + " is inside the allocation at " +
			                        hexAddr(b->addr) + ", not its start");
		return setError(npurtErrorInvalidValue,
		                "free: " + hexAddr(addr) +
		                        " is not a live allocation (never allocated, or "
		                        "already freed)");
	}
	Block *b = it->second;
	live_.erase(it);
	memoryRetired();
	stats_.freeCalls++;
	sub(stats_.allocatedBytes, b->size);
	sub(stats_.requestedBytes, b->requested);
	b->requested = 0;
	b->site = {};

	if (tracker_) {
		Parked p{b, {}};
		tracker_->markPending(&p.markers);
		for (StreamId s : b->uses)
			p.markers.push_back(tracker_->mark(s));
		b->uses.clear();
		if (!p.markers.empty()) {
			b->state = Block::State::Parked;
			parked_.push_back(std::move(p));
			return npurtSuccess;
		}
	}
	b->uses.clear();
	freeBlock(b);
	return npurtSuccess;
}

void CachingAllocator::pollParked()
{
	if (parked_.empty())
		return;  // also without a tracker
	reuseDoneParked(parked_, *tracker_, [this](Block *b) { freeBlock(b); });
}

bool CachingAllocator::waitParked()
{
	if (!tracker_ || parked_.empty())
		return false;
	waitParkedWork(parked_, *tracker_);
	pollParked();
	return true;
}

npurtError_t CachingAllocator::recordStream(uint64_t addr, StreamId stream)
{
	if (addr == 0)
		return npurtSuccess;
	std::lock_guard<std::mutex> lock(mutex_);
	Block *b = findLive(addr);
	if (!b)
		return setError(npurtErrorInvalidValue, "recordStream: " + hexAddr(addr) +
		                                                " is not inside a live allocation");
	if (stream != b->stream &&
	    std::find(b->uses.begin(), b->uses.end(), stream) == b->uses.end())
		b->uses.push_back(stream);
	return npurtSuccess;
}

// Returns how many segments went back to the backend.
size_t CachingAllocator::releaseCachedSegments()
{
	size_t released = 0;
	for (FreeSet *pool : {&smallFree_, &largeFree_}) {
		for (auto it = pool->begin(); it != pool->end();) {
			Block *b = *it;
			if (b->split()) {
				++it;
				continue;
			}
			it = pool->erase(it);
			backend_.freeSegment(b->addr, b->size);
			stats_.segmentFrees++;
			sub(stats_.segments, 1);
			sub(stats_.reservedBytes, b->size);
			delete b;
			released++;
		}
	}
	return released;
}

void CachingAllocator::emptyCache()
{
	std::lock_guard<std::mutex> lock(mutex_);
	pollParked();
	releaseCachedSegments();
}

CachingAllocator::Block *CachingAllocator::findLive(uint64_t addr) const
{
	auto it = live_.upper_bound(addr);
	if (it == live_.begin())
		return nullptr;
	Block *b = std::prev(it)->second;
	return addr - b->addr < b->requested ? b : nullptr;
}

AllocatorStats CachingAllocator::stats() const
{
	std::lock_guard<std::mutex> lock(mutex_);
	return stats_;
}

PoolSnapshot CachingAllocator::snapshot() const
{
	std::lock_guard<std::mutex> lock(mutex_);
	// Every block is live, parked or in a free set; a segment is the list
	// from a block with no predecessor.
	std::vector<const Block *> heads;
	auto note = [&heads](const Block *b) {
		if (!b->prev)
			heads.push_back(b);
	};
	for (const auto &[addr, b] : live_)
		note(b);
	for (const auto &p : parked_)
		note(p.block);
	for (const FreeSet *pool : {&smallFree_, &largeFree_})
		for (const Block *b : *pool)
			note(b);
	std::sort(heads.begin(), heads.end(),
	          [](const Block *a, const Block *b) { return a->addr < b->addr; });
	PoolSnapshot snap;
	snap.segments.reserve(heads.size());
	for (const Block *h : heads) {
		PoolSnapshot::Segment seg;
		seg.addr = h->addr;
		seg.small = h->small;
		seg.firstBlock = static_cast<uint32_t>(snap.blocks.size());
		for (const Block *b = h; b; b = b->next) {
			PoolSnapshot::Block out;
			out.addr = b->addr;
			out.size = b->size;
			out.segment = static_cast<uint32_t>(snap.segments.size());
			switch (b->state) {
			case Block::State::Live:
				out.state = PoolSnapshot::State::Allocated;
				out.requested = b->requested;
				out.site = b->site;
				seg.allocated += b->size;
				break;
			case Block::State::Parked:
				out.state = PoolSnapshot::State::PendingFree;
				seg.pendingFree += b->size;
				break;
			case Block::State::Free:
				break;
			}
			seg.size += b->size;
			snap.blocks.push_back(out);
		}
		seg.blocks = static_cast<uint32_t>(snap.blocks.size()) - seg.firstBlock;
		snap.segments.push_back(seg);
	}
	return snap;
}

void CachingAllocator::resetPeakStats()
{
	std::lock_guard<std::mutex> lock(mutex_);
	for (AllocatorStat *s :
	     {&stats_.allocatedBytes, &stats_.requestedBytes, &stats_.reservedBytes,
	      &stats_.segments, &stats_.activeBlocks, &stats_.inactiveSplitBytes})
		s->peak = s->current;
}

bool CachingAllocator::lookup(uint64_t addr, uint64_t *base, size_t *size) const
{
	std::lock_guard<std::mutex> lock(mutex_);
	const Block *b = findLive(addr);
	if (!b)
		return false;
	if (base)
		*base = b->addr;
	if (size)
		*size = b->requested;
	return true;
}

}  // namespace npurt

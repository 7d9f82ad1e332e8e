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
	ExpSegment *exp = nullptr;  // its expandable segment, if in one
	uint64_t freedAt = 0;  // when it last became free (freeTick_)

	bool split() const { return prev || next; }
};

// Address space with memory mapped into it page by page.
struct CachingAllocator::ExpSegment {
	uint64_t base = 0;
	size_t size = 0;
	std::vector<bool> mapped;  // per kPageSize page
	size_t mappedPages = 0;
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
		if (b->prev || b->exp)
			continue;
		size_t size = 0;
		for (Block *n = b; n; n = n->next)
			size += n->size;
		backend_.freeSegment(b->addr, size);
	}
	for (Block *b : all)
		delete b;
	for (auto &[base, seg] : expSegments_) {
		for (size_t p = 0; p < seg->mapped.size(); p++)
			if (seg->mapped[p])
				backend_.unmapPage(base + p * kPageSize, kPageSize);
		backend_.releaseRange(base, seg->size);
		delete seg;
	}
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
	const size_t maxSplit = cfg_.maxSplitSize;
	for (auto it = pool.lower_bound(FreeKey{stream, size, 0});
	     it != pool.end() && (*it)->stream == stream; ++it) {
		Block *b = *it;
		// An oversize block is not cut down for a smaller request, nor
		// used for an oversize one that would leave kLargeSegment or more
		// of it idle. An expandable one pins no memory where it is free.
		if (b->exp)
			return b;
		if (size < maxSplit ? b->size < maxSplit : b->size - size < kLargeSegment)
			return b;
		// Larger ordinary blocks on this stream are no better; only an
		// expandable segment's can be.
		if (expSegments_.empty())
			return nullptr;
	}
	return nullptr;
}

npurtError_t CachingAllocator::newSegment(size_t size, size_t segmentSize, bool small,
                                          StreamId stream, Block **out, bool final)
{
	uint64_t base = 0;
	npurtError_t err =
	        withCacheRetry([&] { return backend_.allocSegment(segmentSize, &base); });
	if (err == npurtErrorMemoryAllocation) {
		if (!final)
			return err;
		stats_.ooms++;
		noteOom(size);
		return setError(err, oomMessage(size, segmentSize, false));
	}
	if (err != npurtSuccess)
		return err;

	note(TraceEvent::Action::SegmentAlloc, base, segmentSize, stream);
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

std::string CachingAllocator::oomMessage(size_t size, size_t segmentSize, bool expandable)
{
	size_t freeBytes = 0, totalBytes = 0;
	backend_.memInfo(&freeBytes, &totalBytes);
	uint64_t allocated = stats_.allocatedBytes.current;
	uint64_t unused = stats_.reservedBytes.current - allocated;
	std::string msg = "out of device memory: tried to allocate " + formatBytes(size);
	if (expandable)
		msg += " (mapping " + formatBytes(segmentSize) +
		       " more into an expandable segment)";
	else if (segmentSize != size)
		msg += " (in a new segment of " + formatBytes(segmentSize) + ")";
	msg += "; this process has " + formatBytes(allocated) + " allocated, " +
	       formatBytes(unused) + " reserved but unused; the device has " +
	       formatBytes(freeBytes) + " free of " + formatBytes(totalBytes);
	return msg + backend_.oomDetail(segmentSize);
}

void CachingAllocator::refreshConfig()
{
	if (cfgGeneration_ != allocatorConfigGeneration())
		cfg_ = allocatorConfig(&cfgGeneration_);
}

npurtError_t CachingAllocator::newExpSegment(size_t size, size_t rounded, bool small,
                                             StreamId stream, Block **out)
{
	// A large range per pool: a segment grows into it, and pages move
	// between segments, so more address space costs no memory. The
	// runtime's window is four times the device's memory.
	if (!deviceBytes_) {
		size_t freeBytes = 0;
		backend_.memInfo(&freeBytes, &deviceBytes_);
	}
	const size_t chunk = small ? std::max(roundUp(deviceBytes_ / 64, kPageSize), kPageSize)
	                           : std::max(roundUp(deviceBytes_ / 4, kPageSize), kLargeSegment);
	const size_t vsize = std::max(roundUp(rounded, kPageSize), chunk);
	uint64_t base = 0;
	npurtError_t err = withCacheRetry([&] { return backend_.reserveRange(vsize, &base); });
	if (err == npurtErrorMemoryAllocation) {
		stats_.ooms++;
		noteOom(size);
		return setError(err, "out of device address space: tried to allocate " +
		                             formatBytes(size) +
		                             " in a new expandable segment of " +
		                             formatBytes(vsize) + "; this process's pool has " +
		                             std::to_string(expSegments_.size()) +
		                             " expandable segments (npurtMemEmptyCache gives "
		                             "unused ones back)");
	}
	if (err != npurtSuccess)
		return err;
	auto *seg = new ExpSegment;
	seg->base = base;
	seg->size = vsize;
	seg->mapped.assign(vsize / kPageSize, false);
	expSegments_.emplace(base, seg);
	add(stats_.segments, 1);
	auto *b = new Block;
	b->addr = base;
	b->size = vsize;
	b->stream = stream;
	b->small = small;
	b->exp = seg;
	*out = b;
	return npurtSuccess;
}

size_t CachingAllocator::releaseIdlePages(size_t limit)
{
	size_t n = 0;
	for (FreeSet *pool : {&smallFree_, &largeFree_}) {
		for (Block *b : *pool) {
			if (!b->exp)
				continue;
			ExpSegment &seg = *b->exp;
			const uint64_t off = b->addr - seg.base;
			const uint64_t end = off + b->size;
			for (uint64_t p = (off + kPageSize - 1) / kPageSize;
			     (p + 1) * kPageSize <= end && n < limit; p++) {
				if (!seg.mapped[p])
					continue;
				backend_.unmapPage(seg.base + p * kPageSize, kPageSize);
				note(TraceEvent::Action::SegmentUnmap, seg.base + p * kPageSize,
				     kPageSize, b->stream);
				seg.mapped[p] = false;
				seg.mappedPages--;
				stats_.segmentFrees++;
				sub(stats_.reservedBytes, kPageSize);
				n++;
			}
			if (n >= limit)
				return n;
		}
	}
	return n;
}

npurtError_t CachingAllocator::mapBlock(Block *b, size_t size, bool final)
{
	ExpSegment &seg = *b->exp;
	const uint64_t first = (b->addr - seg.base) / kPageSize;
	const uint64_t last = (b->addr + b->size - 1 - seg.base) / kPageSize;
	size_t need = 0;
	for (uint64_t p = first; p <= last; p++)
		need += seg.mapped[p] ? 0 : 1;
	if (!need)
		return npurtSuccess;
	// Idle pages go back before new ones come, so the pool holds what its
	// blocks in use need. Only with a tracker: without one a free block's
	// memory may still be in use by queued work, and unmapping is not
	// ordered behind that work as reuse on its stream is.
	if (tracker_)
		releaseIdlePages(need);
	collectGarbage(need * kPageSize);
	for (uint64_t p = first; p <= last; p++) {
		if (seg.mapped[p])
			continue;
		const uint64_t addr = seg.base + p * kPageSize;
		npurtError_t err =
		        withCacheRetry([&] { return backend_.mapPage(addr, kPageSize); });
		if (err == npurtErrorMemoryAllocation) {
			if (!final)
				return err;
			stats_.ooms++;
			noteOom(size);
			return setError(err, oomMessage(size, need * kPageSize, true));
		}
		if (err != npurtSuccess)
			return err;
		note(TraceEvent::Action::SegmentMap, addr, kPageSize, b->stream);
		seg.mapped[p] = true;
		seg.mappedPages++;
		need--;
		stats_.segmentAllocs++;
		add(stats_.reservedBytes, kPageSize);
	}
	return npurtSuccess;
}

void CachingAllocator::releaseSegment(Block *b)
{
	if (b->exp) {
		backend_.releaseRange(b->exp->base, b->exp->size);
		expSegments_.erase(b->exp->base);
		delete b->exp;
	} else {
		backend_.freeSegment(b->addr, b->size);
		note(TraceEvent::Action::SegmentFree, b->addr, b->size, b->stream);
		stats_.segmentFrees++;
		sub(stats_.reservedBytes, b->size);
	}
	sub(stats_.segments, 1);
	delete b;
}

void CachingAllocator::collectGarbage(size_t growth)
{
	if (cfg_.gcThreshold <= 0)
		return;
	const double target = cfg_.gcThreshold * static_cast<double>(backend_.capacity());
	auto over = [&] {
		return static_cast<double>(stats_.reservedBytes.current + growth) > target;
	};
	if (!over())
		return;
	std::vector<Block *> cached;
	for (FreeSet *pool : {&smallFree_, &largeFree_})
		for (Block *b : *pool)
			if (!b->split() && !b->exp)
				cached.push_back(b);
	std::sort(cached.begin(), cached.end(),
	          [](const Block *a, const Block *b) { return a->freedAt < b->freedAt; });
	for (Block *b : cached) {
		if (!over())
			return;
		poolOf(b).erase(b);
		releaseSegment(b);
	}
	if (over() && tracker_)
		releaseIdlePages(SIZE_MAX);
}

npurtError_t CachingAllocator::obtain(size_t size, size_t rounded, bool small, StreamId stream,
                                      bool final, Block **out)
{
	if (Block *b = findFree(small, stream, rounded)) {
		eraseFree(b);
		*out = b;
		return npurtSuccess;
	}
	if (cfg_.expandableSegments)
		return newExpSegment(size, rounded, small, stream, out);
	const size_t segment = segmentSizeFor(rounded);
	collectGarbage(segment);
	return newSegment(size, segment, small, stream, out, final);
}

npurtError_t CachingAllocator::take(size_t size, size_t rounded, bool small, StreamId stream,
                                    bool final, Block **out)
{
	Block *b = nullptr;
	if (npurtError_t err = obtain(size, rounded, small, stream, final, &b))
		return err;
	size_t rest = b->size - rounded;
	// In an expandable segment a rest left in the block would have memory
	// mapped for it.
	bool keepRest = small || b->exp ? rest >= kMinBlockSize : rest > kSmallSize;
	if (keepRest && (b->exp || b->size < cfg_.maxSplitSize)) {
		auto *r = new Block;
		r->addr = b->addr + rounded;
		r->size = rest;
		r->stream = stream;
		r->small = small;
		r->exp = b->exp;
		r->prev = b;
		r->next = b->next;
		if (r->next)
			r->next->prev = r;
		b->next = r;
		b->size = rounded;
		insertFree(r);
	}
	if (b->exp) {
		if (npurtError_t err = mapBlock(b, size, final)) {
			mergeFree(b);
			// Out of memory: the pages mapped for the request are idle
			// now and go back with the others.
			if (final)
				releaseIdlePages(SIZE_MAX);
			return err;
		}
	}
	*out = b;
	return npurtSuccess;
}

npurtError_t CachingAllocator::allocate(size_t size, StreamId stream, uint64_t *addr,
                                        AllocSite site)
{
	return allocateIn(size, stream, 0, addr, site);
}

npurtError_t CachingAllocator::allocateOrdered(size_t size, StreamId stream, uint64_t *addr,
                                               AllocSite site)
{
	return allocateIn(size, 0, stream, addr, site);
}

npurtError_t CachingAllocator::allocateIn(size_t size, StreamId key, StreamId orderedOn,
                                          uint64_t *addr, AllocSite site)
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
	refreshConfig();
	pollParked();
	const size_t rounded = cfg_.roundSize(size);
	const bool small = rounded <= kSmallSize;
	// A stream-ordered request first takes what was freed in its order.
	Block *b = orderedOn ? takeParked(orderedOn, rounded, small) : nullptr;
	npurtError_t err = npurtSuccess;
	if (!b) {
		// Freed memory still in reach of queued work comes back once
		// that work is done: wait for it rather than fail.
		const bool final = parked_.empty();
		err = take(size, rounded, small, key, final, &b);
		if (err == npurtErrorMemoryAllocation && !final) {
			waitParked();
			err = take(size, rounded, small, key, true, &b);
		}
	}
	if (err != npurtSuccess)
		return err;

	b->state = Block::State::Live;
	b->requested = size;
	b->site = site;
	live_.emplace(b->addr, b);
	note(TraceEvent::Action::Alloc, b->addr, b->size, orderedOn ? orderedOn : key, site);
	stats_.allocCalls++;
	add(stats_.allocatedBytes, b->size);
	add(stats_.requestedBytes, size);
	add(stats_.activeBlocks, 1);
	*addr = b->addr;
	return npurtSuccess;
}

void CachingAllocator::freeBlock(Block *b)
{
	note(TraceEvent::Action::FreeCompleted, b->addr, b->size, b->stream);
	sub(stats_.activeBlocks, 1);
	mergeFree(b);
}

void CachingAllocator::mergeFree(Block *b)
{
	b->freedAt = ++freeTick_;
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

npurtError_t CachingAllocator::unlive(uint64_t addr, const char *what, Block **out)
{
	auto it = live_.find(addr);
	if (it == live_.end()) {
		std::string msg = std::string(what) + ": " + hexAddr(addr);
		if (const Block *b = findLive(addr))
			msg += " is inside the allocation at " + hexAddr(b->addr) +
			       ", not its start";
		else
			msg += " is not a live allocation (never allocated, or already freed)";
		return setError(npurtErrorInvalidValue, msg);
	}
	Block *b = it->second;
	live_.erase(it);
	memoryRetired();
	stats_.freeCalls++;
	sub(stats_.allocatedBytes, b->size);
	sub(stats_.requestedBytes, b->requested);
	b->requested = 0;
	*out = b;
	return npurtSuccess;
}

npurtError_t CachingAllocator::deallocate(uint64_t addr)
{
	return release(addr, 0);
}

npurtError_t CachingAllocator::deallocateOrdered(uint64_t addr, StreamId stream)
{
	return release(addr, stream);
}

npurtError_t CachingAllocator::release(uint64_t addr, StreamId freedOn)
{
	if (addr == 0)
		return npurtSuccess;
	std::lock_guard<std::mutex> lock(mutex_);
	Block *b = nullptr;
	if (npurtError_t err = unlive(addr, "free", &b))
		return err;
	note(TraceEvent::Action::FreeRequested, b->addr, b->size, freedOn ? freedOn : b->stream,
	     b->site);
	b->site = {};
	if (tracker_) {
		// Freed on a stream: the caller ordered every use before the free
		// there. Otherwise every stream with work may still use it.
		Parked p{b, {}, freedOn};
		if (freedOn)
			p.markers.push_back(tracker_->mark(freedOn));
		else
			tracker_->markPending(&p.markers);
		// Streams recorded with recordStream are waited for either way.
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

CachingAllocator::Block *CachingAllocator::takeParked(StreamId stream, size_t rounded, bool small)
{
	Parked *best = nullptr;
	for (auto &p : parked_) {
		// Only a free on this stream alone: recorded streams are not
		// ordered before the request.
		const bool ordered =
		        p.freedOn && p.markers.size() == 1 &&
		        (p.freedOn == stream ||
		         (followEvents_ && tracker_->orderedAfter(stream, p.markers[0])));
		if (!ordered || p.block->small != small || p.block->size < rounded)
			continue;
		if (!best || p.block->size < best->block->size)
			best = &p;
	}
	if (!best)
		return nullptr;
	Block *b = best->block;
	const size_t rest = b->size - rounded;
	const bool keepRest = small || b->exp ? rest >= kMinBlockSize : rest > kSmallSize;
	if (keepRest && (b->exp || b->size < cfg_.maxSplitSize)) {
		// The front is taken; the rest stays parked behind the marker.
		auto *r = new Block;
		r->addr = b->addr + rounded;
		r->size = rest;
		r->stream = b->stream;
		r->small = small;
		r->exp = b->exp;
		r->state = Block::State::Parked;
		r->prev = b;
		r->next = b->next;
		if (r->next)
			r->next->prev = r;
		b->next = r;
		b->size = rounded;
		best->block = r;
		add(stats_.activeBlocks, 1);  // r, parked
	} else {
		tracker_->release(best->markers[0]);
		parked_.erase(parked_.begin() + (best - parked_.data()));
	}
	sub(stats_.activeBlocks, 1);  // allocate() counts it again
	note(TraceEvent::Action::FreeCompleted, b->addr, b->size, stream);
	return b;
}

void CachingAllocator::setReusePolicy(bool followEvents, bool opportunistic)
{
	std::lock_guard<std::mutex> lock(mutex_);
	followEvents_ = followEvents;
	opportunistic_ = opportunistic;
}

void CachingAllocator::pollParked(bool all)
{
	if (parked_.empty())
		return;  // also without a tracker
	const bool hold = !all && !opportunistic_;
	reuseDoneParked(
	        parked_, *tracker_, [this](Block *b) { freeBlock(b); },
	        [hold](const Parked &p) { return hold && p.freedOn != 0; });
}

bool CachingAllocator::waitParked()
{
	if (!tracker_ || parked_.empty())
		return false;
	waitParkedWork(parked_, *tracker_);
	pollParked(true);
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

// Returns how many segments and idle pages went back to the backend.
size_t CachingAllocator::releaseCachedSegments(size_t keep)
{
	// keep 0: everything, address space of expandable segments included.
	auto over = [this, keep] { return keep == 0 || stats_.reservedBytes.current > keep; };
	size_t pages = SIZE_MAX;
	if (keep)
		pages = over() ? (stats_.reservedBytes.current - keep + kPageSize - 1) / kPageSize
		               : 0;
	size_t released = pages ? releaseIdlePages(pages) : 0;
	for (FreeSet *pool : {&smallFree_, &largeFree_}) {
		for (auto it = pool->begin(); it != pool->end() && over();) {
			Block *b = *it;
			if (b->split() || (b->exp && b->exp->mappedPages)) {
				++it;
				continue;
			}
			it = pool->erase(it);
			releaseSegment(b);
			released++;
		}
	}
	return released;
}

void CachingAllocator::emptyCache()
{
	trimTo(0);
}

void CachingAllocator::trimTo(size_t keep)
{
	std::lock_guard<std::mutex> lock(mutex_);
	pollParked(true);
	releaseCachedSegments(keep);
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
		seg.expandable = h->exp != nullptr;
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
		seg.mapped = h->exp ? h->exp->mappedPages * kPageSize : seg.size;
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

void CachingAllocator::resetAccumulatedStats()
{
	std::lock_guard<std::mutex> lock(mutex_);
	stats_.segmentAllocs = stats_.segmentFrees = stats_.ooms = 0;
	stats_.cacheFlushRetries = stats_.allocCalls = stats_.freeCalls = 0;
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

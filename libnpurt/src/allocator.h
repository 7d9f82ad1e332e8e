// The caching device-memory allocator.
//
// Device memory comes from a backend in whole segments (a GEM object bound
// into the context's address space, say), which is slow to get and to give
// back. The allocator cuts allocations out of segments and, on free, keeps
// the range cached for the next request instead of returning it, in the
// spirit of PyTorch's CUDA caching allocator. It only ever handles device
// address ranges, never the memory behind them, so it is pure host logic.
//
// Policy:
// - Requests are rounded up to 512 bytes (kMinBlockSize), or to a step
//   between powers of two with roundup_power2_divisions (alloc_config.h).
// - Small requests (<= 1 MiB) share 2 MiB segments of the small pool. Large
//   requests use the large pool: under 10 MiB they come from a 20 MiB
//   segment split among several of them, from 10 MiB up each gets a segment
//   of its size rounded up to 2 MiB.
// - A request takes the best fit (smallest, then lowest address) among the
//   free blocks of its pool that were allocated on the same stream. The
//   block is split when the rest is worth keeping: >= 512 bytes in the small
//   pool, > 1 MiB in the large pool.
// - Oversize blocks (>= max_split_size_mb, 64 MiB) are whole segments and are
//   never split: a free oversize block serves only oversize requests that
//   leave less than 20 MiB of it unused, so a huge cached block is neither
//   chopped into pieces nor pinned by a much smaller request.
// - A freed block coalesces with free neighbours in its segment. Fully free
//   segments stay cached until emptyCache(), an out-of-memory retry or the
//   garbage_collection_threshold (least recently freed first).
// - Expandable segments (expandable_segments:True): a new segment is device
//   address space only, a large range per pool and stream, and device memory
//   is mapped into it in 2 MiB pages (kPageSize) as blocks need them, so a
//   segment grows instead of another being allocated. Pages a block in use
//   touches stay mapped; a page wholly inside a free block is idle, and is
//   given back before any new page is mapped, so the pool holds about what
//   its live blocks need whatever their order of sizes and frees (the
//   fragmentation bench's goal). Oversize rules do not apply: splitting a
//   free range pins no memory. Memory in such a segment may span several
//   device memory objects, one per page: an IPC handle of it is refused.
// - Stream-ordered reuse: a block is reused only by requests on the stream it
//   was allocated on, since work on that stream is ordered after any earlier
//   use. When recordStream() adds other streams, the freed block is parked
//   until a StreamTracker marker taken at free time on each of those streams
//   is done; parked blocks are polled at every allocate() and emptyCache().
//   Without a tracker, recordStream() only checks its address.
// - Safe free: with a tracker, a freed block is also parked until the work
//   enqueued before the free on every stream that still has work
//   (markPending()) has completed, so queued work never sees the block
//   reused; the free itself does not wait. A request that finds no memory
//   waits for the parked blocks (bounded) before it fails.
// - Stream-ordered allocation (npurtMallocAsync/npurtFreeAsync): a block
//   freed on a stream (deallocateOrdered) is parked behind a marker of that
//   stream only, as the caller ordered every use of it before the free on
//   that stream. Until the marker is done, it serves requests made on the
//   same stream (stream order puts them after the free) and, when the pool
//   follows event dependencies, on streams that waited for an event
//   recorded on it after the free; once done, any request (the
//   opportunistic policy; without it, only those streams and the cache
//   trims). A parked block a request takes is split like a free one, the
//   rest staying parked behind the same marker.
//
// Thread safety: every public method may be called from any thread. One
// mutex serialises them all, including the calls into the backend and the
// tracker, which therefore need no locking of their own against this
// allocator (and must not call back into it).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "alloc_config.h"
#include "npurt/npurt.h"

namespace npurt {

// Bumped whenever device memory stops being live (a free, a closed IPC
// mapping, a destroyed context), before its range can be handed out again:
// per-thread caches of address lookups are valid while it is unchanged.
extern std::atomic<uint64_t> gMemoryGeneration;
inline void memoryRetired()
{
	gMemoryGeneration.fetch_add(1, std::memory_order_acq_rel);
}

// What the allocator needs from a device: whole segments of device address
// space backed by device memory.
class SegmentBackend {
public:
	virtual ~SegmentBackend() = default;
	// Allocate a segment of exactly `size` bytes; on success set *addr
	// (nonzero device address, unique in the process). Returns
	// npurtErrorMemoryAllocation when the device is out of memory; any
	// other error is passed through unchanged by the allocator, so the
	// backend records its message with setError() itself.
	virtual npurtError_t allocSegment(size_t size, uint64_t *addr) = 0;
	virtual void freeSegment(uint64_t addr, size_t size) = 0;
	// Device-wide free and total bytes, for OOM messages and MemGetInfo.
	virtual void memInfo(size_t *freeBytes, size_t *totalBytes) = 0;
	// More for the out-of-memory message of a failed segment of
	// segmentSize bytes ("; the per-process limit ... was hit"), or "".
	virtual std::string oomDetail(size_t segmentSize)
	{
		(void)segmentSize;
		return {};
	}
	// What the pool may hold at most: the per-process limit, else the
	// device's memory (garbage_collection_threshold is a fraction of it).
	virtual size_t capacity() = 0;
	// Expandable segments. Device address space without memory behind it
	// (npurtErrorMemoryAllocation when none is left), given back whole.
	virtual npurtError_t reserveRange(size_t size, uint64_t *addr) = 0;
	virtual void releaseRange(uint64_t addr, size_t size) = 0;
	// Backs [addr, addr + size) of a reserved range with new device memory,
	// as allocSegment's errors; unmapPage gives it back.
	virtual npurtError_t mapPage(uint64_t addr, size_t size) = 0;
	virtual void unmapPage(uint64_t addr, size_t size) = 0;
};

// "3.00 GiB", "512 bytes".
std::string formatBytes(uint64_t n);

// Where an allocation was made: interned call-site text (lives as long as
// the process) or, without one, the caller's return address.
struct AllocSite {
	const char *text = nullptr;
	const void *returnAddress = nullptr;
};

// The pool as it is: segments in address order, each with its blocks.
struct PoolSnapshot {
	enum class State { Free, Allocated, PendingFree };
	struct Segment {
		uint64_t addr = 0, size = 0;
		uint64_t allocated = 0, pendingFree = 0;
		uint64_t mapped = 0;  // bytes with memory behind them (size, unless expandable)
		uint32_t firstBlock = 0, blocks = 0;
		bool small = false;
		bool expandable = false;
	};
	struct Block {
		uint64_t addr = 0, size = 0, requested = 0;
		uint32_t segment = 0;
		State state = State::Free;
		AllocSite site;
	};
	std::vector<Segment> segments;
	std::vector<Block> blocks;
};

using StreamId = uint64_t;  // 0 is the default stream

// One event of a pool's history (npurtMemRecordHistory), as torch's
// allocator trace: what happened to which range, on which stream, when.
struct TraceEvent {
	enum class Action {
		Alloc,
		FreeRequested,
		FreeCompleted,
		SegmentAlloc,
		SegmentFree,
		SegmentMap,
		SegmentUnmap,
		Oom
	};
	Action action = Action::Alloc;
	uint64_t addr = 0;  // Oom: the device's free bytes
	uint64_t size = 0;  // Oom: the bytes asked for
	StreamId stream = 0;
	int64_t timeNs = 0;  // CLOCK_REALTIME
	AllocSite site;  // Alloc and FreeRequested: where the block was allocated
};

// The process's pools keep their last maxEntries events each, 0 none (the
// start). Every call empties the histories kept so far. Thread-safe.
void setHistoryLimit(size_t maxEntries);

// What one pass over parked blocks learnt: per stream, the fewest tasks
// found not yet done. A stream's tasks complete in order, so a marker of
// at least as many is not done either, and the pass need not take the
// stream's lock again: a poll asks each busy stream once, however many
// blocks are parked behind it.
class DoneMemo {
public:
	// Whether `tasks` of `stream` are known not to be done.
	bool notDone(const void *stream, uint64_t tasks) const
	{
		for (int i = 0; i < n_; i++)
			if (stream_[i] == stream && tasks >= tasks_[i])
				return true;
		return false;
	}
	void noteNotDone(const void *stream, uint64_t tasks)
	{
		for (int i = 0; i < n_; i++)
			if (stream_[i] == stream) {
				tasks_[i] = std::min(tasks_[i], tasks);
				return;
			}
		if (n_ < kStreams) {  // more busy streams: those are asked again
			stream_[n_] = stream;
			tasks_[n_++] = tasks;
		}
	}

private:
	static constexpr int kStreams = 8;
	const void *stream_[kStreams] = {};
	uint64_t tasks_[kStreams] = {};
	int n_ = 0;
};

// Stream-ordered reuse needs to know when work enqueued so far on a stream
// has finished.
class StreamTracker {
public:
	virtual ~StreamTracker() = default;
	// A marker for "all work enqueued on `stream` until now"; an opaque
	// nonzero token.
	virtual uint64_t mark(StreamId stream) = 0;
	// Whether the work behind a marker has completed.
	virtual bool done(uint64_t marker) = 0;
	// The same within one pass over parked blocks, which can skip asking a
	// stream again (see DoneMemo).
	virtual bool doneInPass(uint64_t marker, DoneMemo &memo)
	{
		(void)memo;
		return done(marker);
	}
	// The allocator is finished with a marker (done or not).
	virtual void release(uint64_t marker) = 0;
	// Markers of the work enqueued so far on every stream that may still
	// use a block being freed, appended to *out; none when no stream has
	// work still to run. Memory from npurtMalloc is not stream-ordered:
	// any stream may have used it.
	virtual void markPending(std::vector<uint64_t> *out) = 0;
	// Waits until the work behind a marker has completed or deadlineNs
	// (CLOCK_MONOTONIC) has passed; whether it completed.
	virtual bool wait(uint64_t marker, int64_t deadlineNs) = 0;
	// Whether work enqueued on `stream` from now on runs after the work
	// behind `marker` (the stream waited for an event recorded after it).
	virtual bool orderedAfter(StreamId stream, uint64_t marker)
	{
		(void)stream;
		(void)marker;
		return false;
	}
};

// Freed blocks parked until the work behind their markers is done (both
// pools): those done have their markers released and go to reuse(block),
// the others stay, in order.
template <typename Parked, typename Reuse, typename Hold>
void reuseDoneParked(std::vector<Parked> &parked, StreamTracker &tracker, Reuse reuse, Hold hold)
{
	auto keep = parked.begin();
	DoneMemo memo;
	for (auto &p : parked) {
		bool done = !hold(p);
		for (uint64_t m : p.markers)
			done = done && tracker.doneInPass(m, memo);
		if (!done) {
			if (&*keep != &p)
				*keep = std::move(p);
			++keep;
			continue;
		}
		for (uint64_t m : p.markers)
			tracker.release(m);
		reuse(p.block);
	}
	parked.erase(keep, parked.end());
}

// Waits for the work behind every parked block's markers, bounded: queued
// work ends by the job timeout or fails, but a stream may hold a long
// queue of it.
template <typename Parked>
void waitParkedWork(const std::vector<Parked> &parked, StreamTracker &tracker)
{
	constexpr int64_t kLimitS = 60;
	timespec now{};
	clock_gettime(CLOCK_MONOTONIC, &now);
	const int64_t deadline =
	        (static_cast<int64_t>(now.tv_sec) + kLimitS) * 1000000000 + now.tv_nsec;
	for (const auto &p : parked)
		for (uint64_t m : p.markers)
			tracker.wait(m, deadline);
}

// A gauge: its value now and its highest value since creation or the last
// resetPeakStats().
struct AllocatorStat {
	uint64_t current = 0;
	uint64_t peak = 0;
};

struct AllocatorStats {
	// Block bytes (requests rounded up to 512) of live allocations.
	AllocatorStat allocatedBytes;
	// Bytes asked for by live allocations, before rounding.
	AllocatorStat requestedBytes;
	// Bytes of the segments held from the backend.
	AllocatorStat reservedBytes;
	// Segments held from the backend.
	AllocatorStat segments;
	// Blocks in use: live allocations, and freed blocks parked until the
	// streams recorded on them are done.
	AllocatorStat activeBlocks;
	// Free bytes in segments that are split into several blocks: cached
	// memory that only requests fitting between live blocks can use.
	AllocatorStat inactiveSplitBytes;
	uint64_t segmentAllocs = 0;  // successful backend allocSegment() and mapPage() calls
	uint64_t segmentFrees = 0;  // backend freeSegment() and unmapPage() calls
	uint64_t ooms = 0;  // allocate() calls failed for lack of device memory
	uint64_t cacheFlushRetries = 0;  // backend retries after freeing cached segments
	uint64_t allocCalls = 0;  // allocate() calls that handed out a block
	uint64_t freeCalls = 0;  // deallocate() calls that took one back
};

class CachingAllocator {
public:
	static constexpr size_t kMinBlockSize = 512;  // request rounding, smallest block
	static constexpr size_t kSmallSize = 1ull << 20;  // largest small request
	static constexpr size_t kSmallSegment = 2ull << 20;  // segments of the small pool
	static constexpr size_t kMinLargeAlloc = 10ull << 20;  // smaller: shared 20 MiB segment
	static constexpr size_t kLargeSegment = 20ull << 20;  // shared large segment
	static constexpr size_t kLargeRound = 2ull << 20;  // rounding of other large segments
	static constexpr size_t kPageSize = 2ull << 20;  // expandable segments' mapping unit

	// The backend, and the tracker if there is one, must outlive the
	// allocator.
	CachingAllocator(SegmentBackend &backend, StreamTracker *tracker);
	// Frees every segment back to the backend, live allocations included,
	// and releases every outstanding marker.
	~CachingAllocator();
	CachingAllocator(const CachingAllocator &) = delete;
	CachingAllocator &operator=(const CachingAllocator &) = delete;

	// Settings (alloc_config.h) are the process's, refreshed at each
	// allocate() when they changed.
	//
	// Size 0 sets *addr to 0 and succeeds, as cudaMalloc does. A size that
	// overflows when rounded is npurtErrorInvalidValue; no device memory
	// left, even after freeing the cache, is npurtErrorMemoryAllocation
	// with a message giving the figures.
	npurtError_t allocate(size_t size, StreamId stream, uint64_t *addr,
	                      AllocSite site = AllocSite{});
	// A stream-ordered request (npurtMallocAsync) on `stream` (nonzero):
	// blocks freed on it, or on streams it is ordered after, first (see
	// the policy above), then the free blocks of stream 0's pool.
	npurtError_t allocateOrdered(size_t size, StreamId stream, uint64_t *addr,
	                             AllocSite site = AllocSite{});
	// 0 is a no-op. An address that is not the start of a live allocation
	// (unknown, already freed, or inside one) is npurtErrorInvalidValue
	// with a message naming it.
	npurtError_t deallocate(uint64_t addr);
	// The allocation containing addr is also used on `stream`: once freed,
	// it is not reused until the work enqueued on `stream` before the free
	// has finished (PyTorch's recordStream). 0 is a no-op; an address
	// outside every live allocation is npurtErrorInvalidValue.
	npurtError_t recordStream(uint64_t addr, StreamId stream);
	// Stream-ordered free (npurtFreeAsync): the allocation at addr is free
	// as of the work enqueued so far on `stream` (see the policy above).
	// Errors as deallocate().
	npurtError_t deallocateOrdered(uint64_t addr, StreamId stream);
	// The stream-ordered reuse policies (npurtMemPoolReuse*): whether a
	// request on another stream takes a block freed on a stream it waited
	// for, and one whose free has completed.
	void setReusePolicy(bool followEvents, bool opportunistic);
	// Returns every fully free segment to the backend.
	void emptyCache();
	// Returns fully free segments and idle pages, blocks freed on streams
	// included once their work is done, until at most `keep` bytes stay
	// reserved (npurtMemPoolTrimTo; emptyCache is trimTo(0)).
	void trimTo(size_t keep);
	AllocatorStats stats() const;
	PoolSnapshot snapshot() const;
	// The pool's history, oldest first (setHistoryLimit).
	std::vector<TraceEvent> history();
	void resetPeakStats();
	// Zeroes the counters (allocations, frees, segments, OOMs, retries).
	void resetAccumulatedStats();
	// The live allocation containing addr: its base and requested size.
	// False if addr is not inside a live allocation.
	bool lookup(uint64_t addr, uint64_t *base, size_t *size) const;

private:
	struct Block;
	struct ExpSegment;
	// Free blocks of a pool ordered by (stream, size, address): a
	// lower_bound is the best fit on a stream.
	struct FreeKey {
		StreamId stream;
		size_t size;
		uint64_t addr;
	};
	struct FreeOrder {
		using is_transparent = void;
		bool operator()(const Block *a, const Block *b) const;
		bool operator()(const Block *a, const FreeKey &b) const;
		bool operator()(const FreeKey &a, const Block *b) const;
	};
	using FreeSet = std::set<Block *, FreeOrder>;
	// A freed block waiting for the work of other streams. Freed on a
	// stream (deallocateOrdered): that stream's id, whose requests may
	// take it at once.
	struct Parked {
		Block *block;
		std::vector<uint64_t> markers;
		StreamId freedOn = 0;
	};

	// key: the free blocks' stream; orderedOn: a stream-ordered request's.
	npurtError_t allocateIn(size_t size, StreamId key, StreamId orderedOn, uint64_t *addr,
	                        AllocSite site);
	// All of these are called with mutex_ held.
	FreeSet &poolOf(const Block *b);
	Block *findFree(bool small, StreamId stream, size_t size);
	// final: an out-of-memory failure is reported (else it is only
	// returned, for the caller to wait for parked blocks and retry).
	npurtError_t newSegment(size_t size, size_t segmentSize, bool small, StreamId stream,
	                        Block **out, bool final);
	// A block found or cut for a request of `size` (rounded) bytes: from
	// the cache, else a new segment, waiting for parked blocks before
	// failing.
	npurtError_t obtain(size_t size, size_t rounded, bool small, StreamId stream, bool final,
	                    Block **out);
	// obtain(), then the block split to `rounded` and, in an expandable
	// segment, its pages mapped.
	npurtError_t take(size_t size, size_t rounded, bool small, StreamId stream, bool final,
	                  Block **out);
	// An expandable segment of address space holding `rounded` bytes, as
	// one free block (not in a free set yet).
	npurtError_t newExpSegment(size_t size, size_t rounded, bool small, StreamId stream,
	                           Block **out);
	// Maps the pages of b's range that have no memory, giving idle pages
	// back first. On failure the pages mapped so far stay (idle once b is
	// free again).
	npurtError_t mapBlock(Block *b, size_t size, bool final);
	// Unmaps up to `limit` idle pages (wholly inside free blocks of
	// expandable segments); how many.
	size_t releaseIdlePages(size_t limit);
	// Gives a fully free segment (out of its free set) back.
	void releaseSegment(Block *b);
	// garbage_collection_threshold: cached memory goes back, least recently
	// freed first, until `growth` more bytes fit under the threshold.
	void collectGarbage(size_t growth);
	// Returns a block that is neither live nor parked to its pool, merged
	// with free neighbours.
	void mergeFree(Block *b);
	// Waits for the markers of every parked block, then polls them;
	// whether there were any.
	bool waitParked();
	void insertFree(Block *b);
	void eraseFree(Block *b);
	void freeBlock(Block *b);
	// Parked blocks whose work is done go back to their pool; blocks freed
	// on a stream only under the opportunistic policy, or `all`.
	void pollParked(bool all = false);
	// A parked block a stream-ordered request on `stream` may take now
	// (best fit), split to `rounded`; null if there is none.
	Block *takeParked(StreamId stream, size_t rounded, bool small);
	// Common part of deallocate and deallocateOrdered: the live block at
	// addr taken out of live_ and its statistics, or an error.
	npurtError_t unlive(uint64_t addr, const char *what, Block **out);
	// deallocate (freedOn 0) and deallocateOrdered.
	npurtError_t release(uint64_t addr, StreamId freedOn);
	size_t releaseCachedSegments(size_t keep = 0);
	// get() from the backend, again once after the cache went back when
	// the device was full.
	template <typename Get> npurtError_t withCacheRetry(Get get)
	{
		npurtError_t err = get();
		if (err == npurtErrorMemoryAllocation && releaseCachedSegments() > 0) {
			stats_.cacheFlushRetries++;
			err = get();
		}
		return err;
	}
	Block *findLive(uint64_t addr) const;
	std::string oomMessage(size_t size, size_t segmentSize, bool expandable);
	void refreshConfig();
	// Records an event while the history is on (mutex_ held); noteOom
	// records a failed request of `size` bytes.
	void note(TraceEvent::Action action, uint64_t addr, uint64_t size, StreamId stream,
	          AllocSite site = AllocSite{});
	void noteOom(size_t size);
	// Applies a new setHistoryLimit (mutex_ held).
	void refreshHistory();

	mutable std::mutex mutex_;
	SegmentBackend &backend_;
	StreamTracker *tracker_;
	FreeSet smallFree_;
	FreeSet largeFree_;
	std::map<uint64_t, Block *> live_;  // live allocations by address
	std::vector<Parked> parked_;
	std::map<uint64_t, ExpSegment *> expSegments_;  // by base address
	AllocatorStats stats_;
	AllocatorConfig cfg_;
	uint64_t cfgGeneration_ = 0;
	// The history: a ring of at most historyLimit_ events, the oldest at
	// historyNext_ once full.
	std::vector<TraceEvent> history_;
	size_t historyNext_ = 0;
	size_t historyLimit_ = 0;
	uint64_t historyGeneration_ = 0;
	uint64_t freeTick_ = 0;  // orders frees, for garbage collection
	size_t deviceBytes_ = 0;  // the device's memory, once asked
	bool followEvents_ = true;  // the stream-ordered reuse policies
	bool opportunistic_ = true;
};

}  // namespace npurt

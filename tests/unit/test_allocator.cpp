// The caching device-memory allocator against a fake segment backend and a
// fake stream tracker: pure host logic, no device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "allocator.h"
#include "error.h"
#include "npurt/npurt.h"

using npurt::AllocatorStats;
using npurt::CachingAllocator;
using npurt::StreamId;

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t GiB = 1024 * MiB;

// Hands out segments from an address counter (with a gap, so segments are
// never adjacent) up to a capacity, and records every call.
class FakeBackend : public npurt::SegmentBackend {
public:
	explicit FakeBackend(size_t capacity = 1ull << 40) : capacity_(capacity) {}

	npurtError_t allocSegment(size_t size, uint64_t *addr) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		allocCalls++;
		if (failWith != npurtSuccess) {
			npurtError_t err = failWith;
			failWith = npurtSuccess;
			return npurt::setError(err, "fake backend: injected failure");
		}
		if (size > capacity_ - used_)
			return npurtErrorMemoryAllocation;
		*addr = next_;
		next_ += size + 64 * MiB;
		used_ += size;
		live_[*addr] = size;
		allocs.push_back(size);
		return npurtSuccess;
	}

	void freeSegment(uint64_t addr, size_t size) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = live_.find(addr);
		EXPECT_NE(it, live_.end()) << "freeing unknown segment " << addr;
		if (it == live_.end())
			return;
		EXPECT_EQ(it->second, size) << "segment freed with the wrong size";
		live_.erase(it);
		used_ -= size;
		frees.emplace_back(addr, size);
	}

	void memInfo(size_t *freeBytes, size_t *totalBytes) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		*freeBytes = capacity_ - used_;
		*totalBytes = capacity_;
	}

	size_t capacity() override { return capacity_; }

	// Address space comes from its own counter, memory from the capacity.
	npurtError_t reserveRange(size_t size, uint64_t *addr) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		if (size > rangeRoom)
			return npurtErrorMemoryAllocation;
		rangeRoom -= size;
		*addr = nextRange_;
		nextRange_ += size + 64 * MiB;
		ranges_[*addr] = size;
		return npurtSuccess;
	}
	void releaseRange(uint64_t addr, size_t size) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = ranges_.find(addr);
		EXPECT_NE(it, ranges_.end()) << "releasing unknown range " << addr;
		if (it == ranges_.end())
			return;
		EXPECT_EQ(it->second, size);
		for (const auto &[page, psize] : pages_)
			EXPECT_FALSE(page >= addr && page - addr < size)
			        << "range released with page " << page << " still mapped";
		ranges_.erase(it);
		rangeRoom += size;
	}
	npurtError_t mapPage(uint64_t addr, size_t size) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto r = ranges_.upper_bound(addr);
		EXPECT_TRUE(r != ranges_.begin() &&
		            addr + size <= std::prev(r)->first + std::prev(r)->second)
		        << "page " << addr << " outside every range";
		EXPECT_EQ(pages_.count(addr), 0u) << "page " << addr << " mapped twice";
		mapCalls++;
		if (size > capacity_ - used_)
			return npurtErrorMemoryAllocation;
		used_ += size;
		pages_[addr] = size;
		return npurtSuccess;
	}
	void unmapPage(uint64_t addr, size_t size) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = pages_.find(addr);
		EXPECT_NE(it, pages_.end()) << "unmapping unknown page " << addr;
		if (it == pages_.end())
			return;
		EXPECT_EQ(it->second, size);
		pages_.erase(it);
		used_ -= size;
		unmapCalls++;
	}
	size_t livePages()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return pages_.size();
	}
	size_t liveRanges()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return ranges_.size();
	}
	bool pageMapped(uint64_t addr)
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = pages_.upper_bound(addr);
		return it != pages_.begin() && addr - std::prev(it)->first < std::prev(it)->second;
	}
	size_t rangeRoom = 1ull << 40;  // address space left
	int mapCalls = 0, unmapCalls = 0;

	size_t liveSegments()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return live_.size();
	}
	size_t used()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return used_;
	}

	// The next allocSegment() fails with this (and records a message).
	npurtError_t failWith = npurtSuccess;
	int allocCalls = 0;  // including failed ones
	std::vector<size_t> allocs;  // sizes of the segments handed out
	std::vector<std::pair<uint64_t, size_t>> frees;

private:
	std::mutex mutex_;
	size_t capacity_;
	size_t used_ = 0;
	uint64_t next_ = 0x100000000ull;
	uint64_t nextRange_ = 0x800000000000ull;
	std::map<uint64_t, size_t> live_;
	std::map<uint64_t, size_t> ranges_;  // reserved address space
	std::map<uint64_t, size_t> pages_;  // mapped memory
};

// Markers complete when the test says so (or at once with autoComplete).
class FakeTracker : public npurt::StreamTracker {
public:
	uint64_t mark(StreamId stream) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		uint64_t id = ++next_;
		markers_[id] = Marker{stream, false, false};
		return id;
	}
	bool done(uint64_t marker) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		const Marker &m = markers_.at(marker);
		EXPECT_FALSE(m.released) << "polling a released marker";
		return autoComplete || m.done;
	}
	void release(uint64_t marker) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		Marker &m = markers_.at(marker);
		EXPECT_FALSE(m.released) << "marker released twice";
		m.released = true;
	}
	// Streams in `pending` have work in flight at every free.
	void markPending(std::vector<uint64_t> *out) override
	{
		std::vector<StreamId> streams;
		{
			std::lock_guard<std::mutex> lock(mutex_);
			streams = pending;
		}
		for (StreamId s : streams)
			out->push_back(mark(s));
	}
	// The work completes during the wait when completeOnWait is set.
	bool wait(uint64_t marker, int64_t) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		waits++;
		Marker &m = markers_.at(marker);
		EXPECT_FALSE(m.released) << "waiting on a released marker";
		if (completeOnWait)
			m.done = true;
		return autoComplete || m.done;
	}
	// Stream-ordered reuse: (waiter, freeing stream) pairs where the
	// waiter waited for an event recorded after every marker taken so far.
	bool orderedAfter(StreamId stream, uint64_t marker) override
	{
		std::lock_guard<std::mutex> lock(mutex_);
		const Marker &m = markers_.at(marker);
		for (const auto &[w, f] : ordered)
			if (w == stream && f == m.stream)
				return true;
		return false;
	}
	std::vector<std::pair<StreamId, StreamId>> ordered;
	std::vector<StreamId> pending;
	bool completeOnWait = false;
	int waits = 0;

	// Completes every marker taken so far on `stream`.
	void complete(StreamId stream)
	{
		std::lock_guard<std::mutex> lock(mutex_);
		for (auto &[id, m] : markers_)
			if (m.stream == stream)
				m.done = true;
	}
	size_t marked(StreamId stream)
	{
		std::lock_guard<std::mutex> lock(mutex_);
		size_t n = 0;
		for (const auto &[id, m] : markers_)
			n += m.stream == stream;
		return n;
	}
	size_t unreleased()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		size_t n = 0;
		for (const auto &[id, m] : markers_)
			n += !m.released;
		return n;
	}

	std::atomic<bool> autoComplete{false};

private:
	struct Marker {
		StreamId stream;
		bool done;
		bool released;
	};
	std::mutex mutex_;
	uint64_t next_ = 0;
	std::map<uint64_t, Marker> markers_;
};

std::string hex(uint64_t addr)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%" PRIx64, addr);
	return buf;
}

bool contains(const std::string &haystack, const std::string &needle)
{
	return haystack.find(needle) != std::string::npos;
}

class Allocator : public ::testing::Test {
protected:
	// The pools' settings are the process's: each test starts from the
	// defaults and leaves them so.
	void SetUp() override
	{
		npurtGetLastError();
		npurt::setAllocatorConfig(npurt::AllocatorConfig{});
	}
	void TearDown() override
	{
		npurtGetLastError();
		npurt::setAllocatorConfig(npurt::AllocatorConfig{});
		npurt::setHistoryLimit(0);
	}

	// Allocates or fails the test.
	static uint64_t alloc(CachingAllocator &a, size_t size, StreamId stream = 0)
	{
		uint64_t addr = 0;
		npurtError_t err = a.allocate(size, stream, &addr);
		EXPECT_EQ(err, npurtSuccess) << npurtGetLastErrorMessage();
		EXPECT_NE(addr, 0u);
		return addr;
	}
	static void release(CachingAllocator &a, uint64_t addr)
	{
		EXPECT_EQ(a.deallocate(addr), npurtSuccess) << npurtGetLastErrorMessage();
	}
};

TEST_F(Allocator, ZeroSizeIsNullAndSucceeds)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t addr = 1234;
	EXPECT_EQ(a.allocate(0, 0, &addr), npurtSuccess);
	EXPECT_EQ(addr, 0u);
	EXPECT_EQ(a.deallocate(0), npurtSuccess);
	EXPECT_EQ(a.recordStream(0, 3), npurtSuccess);
	EXPECT_FALSE(a.lookup(0, nullptr, nullptr));
	EXPECT_EQ(be.allocCalls, 0);
	EXPECT_EQ(a.stats().allocCalls, 0u);
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess);

	EXPECT_EQ(a.allocate(16, 0, nullptr), npurtErrorInvalidValue);
}

TEST_F(Allocator, SizesAreRoundedTo512)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 1);
	uint64_t y = alloc(a, 513);
	uint64_t z = alloc(a, 512);
	EXPECT_EQ(y, x + 512);
	EXPECT_EQ(z, y + 1024);
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.allocatedBytes.current, 512u + 1024 + 512);
	EXPECT_EQ(s.requestedBytes.current, 1u + 513 + 512);
	EXPECT_EQ(be.allocs, std::vector<size_t>{2 * MiB});
}

TEST_F(Allocator, FreedBlockIsReusedWithoutNewSegment)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 4096);
	release(a, x);
	EXPECT_EQ(alloc(a, 4096), x);
	release(a, x);
	EXPECT_EQ(alloc(a, 3000), x);  // best fit: the lowest free block that fits
	uint64_t big = alloc(a, 30 * MiB);
	release(a, big);
	EXPECT_EQ(alloc(a, 30 * MiB), big);
	EXPECT_EQ(be.allocs, (std::vector<size_t>{2 * MiB, 30 * MiB}));
	EXPECT_EQ(a.stats().segmentAllocs, 2u);
}

TEST_F(Allocator, SplitsAndCoalesces)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 64 * KiB);
	uint64_t y = alloc(a, 64 * KiB);
	uint64_t z = alloc(a, 64 * KiB);
	EXPECT_EQ(y, x + 64 * KiB);
	EXPECT_EQ(z, y + 64 * KiB);
	EXPECT_EQ(a.stats().segments.current, 1u);
	EXPECT_EQ(a.stats().inactiveSplitBytes.current, 2 * MiB - 192 * KiB);

	release(a, y);  // neighbours live: stays a block of its own
	EXPECT_EQ(a.stats().inactiveSplitBytes.current, 2 * MiB - 128 * KiB);
	release(a, x);  // merges with y
	EXPECT_EQ(alloc(a, 128 * KiB), x);  // best fit is the merged x+y, not the tail
	release(a, x);
	release(a, z);  // x+y, z and the tail: the whole segment again
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.inactiveSplitBytes.current, 0u);
	EXPECT_EQ(s.segments.current, 1u);
	a.emptyCache();  // only possible for an unsplit segment
	ASSERT_EQ(be.frees.size(), 1u);
	EXPECT_EQ(be.frees[0], std::make_pair(x, 2 * MiB));
	EXPECT_EQ(be.liveSegments(), 0u);
}

TEST_F(Allocator, LargeRequestsShareA20MiBSegment)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 3 * MiB);
	uint64_t y = alloc(a, 5 * MiB);
	EXPECT_EQ(y, x + 3 * MiB);
	EXPECT_EQ(be.allocs, std::vector<size_t>{20 * MiB});
	// 12 MiB are left; taking 11 would leave 1 MiB, too little to split
	// off in the large pool, so the request gets all 12.
	uint64_t z = alloc(a, 11 * MiB);
	EXPECT_EQ(z, y + 5 * MiB);
	EXPECT_EQ(a.stats().allocatedBytes.current, 20 * MiB);
	uint64_t base = 0;
	size_t size = 0;
	ASSERT_TRUE(a.lookup(z, &base, &size));
	EXPECT_EQ(size, 11 * MiB);
	// Requests of 10 MiB and up get a segment of their own, 2 MiB rounded.
	alloc(a, 10 * MiB + 1);
	EXPECT_EQ(be.allocs, (std::vector<size_t>{20 * MiB, 12 * MiB}));
}

TEST_F(Allocator, SmallAndLargePoolsAreSeparate)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t s = alloc(a, 1 * MiB);  // the largest small request
	release(a, s);
	uint64_t l = alloc(a, 1 * MiB + 1);  // the smallest large one
	EXPECT_NE(l, s);
	release(a, l);
	EXPECT_EQ(alloc(a, 512 * KiB), s);
	EXPECT_EQ(alloc(a, 2 * MiB), l);
	EXPECT_EQ(be.allocs, (std::vector<size_t>{2 * MiB, 20 * MiB}));
}

TEST_F(Allocator, OversizeBlocksAreNeverSplit)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 100 * MiB);
	release(a, x);
	uint64_t y = alloc(a, 30 * MiB);  // would chop up the 100 MiB block
	EXPECT_NE(y, x);
	EXPECT_EQ(alloc(a, 90 * MiB), x);  // leaves 10 MiB idle: fine, but unsplit
	EXPECT_EQ(a.stats().allocatedBytes.current, 130 * MiB);
	EXPECT_EQ(a.stats().inactiveSplitBytes.current, 0u);
	release(a, x);
	EXPECT_NE(alloc(a, 70 * MiB), x);  // would leave 30 MiB idle
	EXPECT_EQ(be.allocs, (std::vector<size_t>{100 * MiB, 30 * MiB, 70 * MiB}));
}

TEST_F(Allocator, StatsTrackCurrentAndPeak)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.allocatedBytes.peak, 0u);
	EXPECT_EQ(s.reservedBytes.peak, 0u);

	uint64_t x = alloc(a, 1000);
	uint64_t y = alloc(a, 3 * MiB);
	s = a.stats();
	EXPECT_EQ(s.allocatedBytes.current, 1024 + 3 * MiB);
	EXPECT_EQ(s.requestedBytes.current, 1000 + 3 * MiB);
	EXPECT_EQ(s.reservedBytes.current, 22 * MiB);
	EXPECT_EQ(s.segments.current, 2u);
	EXPECT_EQ(s.activeBlocks.current, 2u);
	EXPECT_EQ(s.inactiveSplitBytes.current, (2 * MiB - 1024) + 17 * MiB);
	EXPECT_EQ(s.allocCalls, 2u);

	release(a, y);
	s = a.stats();
	EXPECT_EQ(s.allocatedBytes.current, 1024u);
	EXPECT_EQ(s.allocatedBytes.peak, 1024 + 3 * MiB);
	EXPECT_EQ(s.activeBlocks.current, 1u);
	EXPECT_EQ(s.activeBlocks.peak, 2u);
	EXPECT_EQ(s.reservedBytes.current, 22 * MiB);  // cached
	EXPECT_EQ(s.inactiveSplitBytes.current, 2 * MiB - 1024);  // 20 MiB one is whole
	EXPECT_EQ(s.inactiveSplitBytes.peak, (2 * MiB - 1024) + 17 * MiB);
	EXPECT_EQ(s.freeCalls, 1u);

	a.resetPeakStats();
	s = a.stats();
	EXPECT_EQ(s.allocatedBytes.peak, 1024u);
	EXPECT_EQ(s.activeBlocks.peak, 1u);
	EXPECT_EQ(s.reservedBytes.peak, 22 * MiB);
	a.emptyCache();
	s = a.stats();
	EXPECT_EQ(s.reservedBytes.current, 2 * MiB);
	EXPECT_EQ(s.reservedBytes.peak, 22 * MiB);
	EXPECT_EQ(s.segments.current, 1u);
	EXPECT_EQ(s.segmentAllocs, 2u);
	EXPECT_EQ(s.segmentFrees, 1u);
	release(a, x);
	EXPECT_EQ(a.stats().allocatedBytes.current, 0u);
	EXPECT_EQ(a.stats().requestedBytes.current, 0u);
}

TEST_F(Allocator, EmptyCacheReturnsFreeSegmentsToTheBackend)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t s1 = alloc(a, 4096);
	uint64_t s2 = alloc(a, 4096);  // same small segment as s1
	uint64_t l = alloc(a, 3 * MiB);
	uint64_t o = alloc(a, 80 * MiB);
	release(a, s2);
	release(a, l);
	release(a, o);
	a.emptyCache();
	EXPECT_EQ(be.frees,
	          (std::vector<std::pair<uint64_t, size_t>>{{l, 20 * MiB}, {o, 80 * MiB}}));
	EXPECT_EQ(be.liveSegments(), 1u);  // s1 keeps its segment
	EXPECT_EQ(a.stats().reservedBytes.current, 2 * MiB);
	uint64_t base = 0;
	EXPECT_TRUE(a.lookup(s1, &base, nullptr));
	release(a, s1);
	a.emptyCache();
	EXPECT_EQ(be.liveSegments(), 0u);
	EXPECT_EQ(a.stats().reservedBytes.current, 0u);
	EXPECT_EQ(a.stats().segmentFrees, 3u);
}

TEST_F(Allocator, OutOfMemoryRetriesAfterFreeingTheCache)
{
	FakeBackend be(64 * MiB);
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 40 * MiB);
	release(a, x);  // cached, not enough left beside it for 50 MiB
	uint64_t y = alloc(a, 50 * MiB);
	EXPECT_NE(y, 0u);
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.cacheFlushRetries, 1u);
	EXPECT_EQ(s.ooms, 0u);
	EXPECT_EQ(s.segmentFrees, 1u);
	EXPECT_EQ(s.reservedBytes.current, 50 * MiB);
	EXPECT_EQ(be.frees, (std::vector<std::pair<uint64_t, size_t>>{{x, 40 * MiB}}));
	EXPECT_EQ(be.allocCalls, 3);
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess);
}

TEST_F(Allocator, OutOfMemoryMessageGivesTheFigures)
{
	FakeBackend be(4 * GiB);
	CachingAllocator a(be, nullptr);
	alloc(a, 1536 * MiB);
	alloc(a, 5 * MiB);  // a 20 MiB segment: 15 MiB reserved but unused
	uint64_t addr = 77;
	EXPECT_EQ(a.allocate(3 * GiB, 0, &addr), npurtErrorMemoryAllocation);
	EXPECT_EQ(addr, 0u);
	std::string msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, "out of device memory: tried to allocate 3.00 GiB;")) << msg;
	EXPECT_TRUE(contains(msg, "this process has 1.50 GiB allocated")) << msg;
	EXPECT_TRUE(contains(msg, "15.00 MiB reserved but unused")) << msg;
	EXPECT_TRUE(contains(msg, "the device has 2.48 GiB free of 4.00 GiB")) << msg;
	EXPECT_EQ(npurtPeekAtLastError(), npurtErrorMemoryAllocation);
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.ooms, 1u);
	EXPECT_EQ(s.cacheFlushRetries, 0u);  // nothing cached to free
	EXPECT_EQ(s.allocCalls, 2u);

	// A small request needs a whole small segment; the message says so.
	FakeBackend tiny(1 * MiB);
	CachingAllocator b(tiny, nullptr);
	EXPECT_EQ(b.allocate(1000, 0, &addr), npurtErrorMemoryAllocation);
	msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, "tried to allocate 1000 bytes (in a new segment of 2.00 MiB)"))
	        << msg;
	EXPECT_TRUE(contains(msg, "0 bytes allocated, 0 bytes reserved but unused")) << msg;
	EXPECT_TRUE(contains(msg, "1.00 MiB free of 1.00 MiB")) << msg;
}

TEST_F(Allocator, OtherBackendErrorsPassThrough)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	be.failWith = npurtErrorOperatingSystem;
	uint64_t addr = 0;
	EXPECT_EQ(a.allocate(4096, 0, &addr), npurtErrorOperatingSystem);
	EXPECT_STREQ(npurtGetLastErrorMessage(), "fake backend: injected failure");
	EXPECT_EQ(be.allocCalls, 1);  // no retry
	EXPECT_EQ(a.stats().ooms, 0u);
	EXPECT_NE(alloc(a, 4096), 0u);  // and the next call works
}

TEST_F(Allocator, DoubleFreeAndUnknownAddressesAreNamed)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 4096);
	uint64_t y = alloc(a, 4096);
	release(a, x);
	EXPECT_EQ(a.deallocate(x), npurtErrorInvalidValue);
	std::string msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, hex(x))) << msg;
	EXPECT_TRUE(contains(msg, "already freed")) << msg;

	EXPECT_EQ(a.deallocate(0xdeadbeef000ull), npurtErrorInvalidValue);
	msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, "0xdeadbeef000")) << msg;

	EXPECT_EQ(a.deallocate(y + 16), npurtErrorInvalidValue);
	msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, hex(y + 16))) << msg;
	EXPECT_TRUE(contains(msg, "inside the allocation at " + hex(y))) << msg;

	EXPECT_EQ(a.recordStream(0xdeadbeef000ull, 1), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "0xdeadbeef000"));

	// None of that disturbed the books.
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.freeCalls, 1u);
	EXPECT_EQ(s.allocatedBytes.current, 4096u);
	release(a, y);
}

TEST_F(Allocator, OverflowingSizesAreInvalid)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	const size_t max = std::numeric_limits<size_t>::max();
	for (size_t size : {max, max - 511, max - (2 * MiB - 2)}) {
		uint64_t addr = 5;
		EXPECT_EQ(a.allocate(size, 0, &addr), npurtErrorInvalidValue) << size;
		EXPECT_EQ(addr, 0u);
		std::string msg = npurtGetLastErrorMessage();
		EXPECT_TRUE(contains(msg, std::to_string(size))) << msg;
		EXPECT_TRUE(contains(msg, "overflows")) << msg;
	}
	EXPECT_EQ(be.allocCalls, 0);
	// The largest size that rounds is the backend's to refuse.
	uint64_t addr = 5;
	EXPECT_EQ(a.allocate(max - (2 * MiB - 1), 0, &addr), npurtErrorMemoryAllocation);
	EXPECT_EQ(be.allocCalls, 1);
}

TEST_F(Allocator, FreedBlocksAreReusedOnlyOnTheirStream)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 4096, 1);
	release(a, x);
	uint64_t y = alloc(a, 4096, 2);
	EXPECT_NE(y, x);
	EXPECT_EQ(a.stats().segmentAllocs, 2u);
	EXPECT_EQ(alloc(a, 4096, 1), x);
	uint64_t l = alloc(a, 12 * MiB, 2);
	release(a, l);
	EXPECT_NE(alloc(a, 12 * MiB, 0), l);
	EXPECT_EQ(alloc(a, 12 * MiB, 2), l);
	EXPECT_EQ(a.stats().segmentAllocs, 4u);
}

TEST_F(Allocator, RecordStreamParksTheFreedBlockUntilTheMarkerIsDone)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 4096, 1);
	EXPECT_EQ(a.recordStream(x + 100, 2), npurtSuccess);  // any address inside
	EXPECT_EQ(a.recordStream(x, 2), npurtSuccess);  // once is enough
	EXPECT_EQ(a.recordStream(x, 1), npurtSuccess);  // its own stream: nothing to do
	EXPECT_EQ(tr.marked(2), 0u);  // markers are taken at free time
	release(a, x);
	EXPECT_EQ(tr.marked(2), 1u);
	EXPECT_EQ(tr.marked(1), 0u);
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.allocatedBytes.current, 0u);
	EXPECT_EQ(s.activeBlocks.current, 1u);  // parked
	EXPECT_FALSE(a.lookup(x, nullptr, nullptr));
	EXPECT_EQ(a.deallocate(x), npurtErrorInvalidValue);

	uint64_t y = alloc(a, 4096, 1);
	EXPECT_NE(y, x);
	tr.complete(2);
	EXPECT_EQ(alloc(a, 4096, 1), x);
	EXPECT_EQ(tr.unreleased(), 0u);
	EXPECT_EQ(a.stats().activeBlocks.current, 2u);
}

TEST_F(Allocator, EmptyCacheKeepsParkedBlocksAndPollsThem)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 3 * MiB, 1);
	EXPECT_EQ(a.recordStream(x, 3), npurtSuccess);
	EXPECT_EQ(a.recordStream(x, 4), npurtSuccess);
	release(a, x);
	a.emptyCache();
	EXPECT_TRUE(be.frees.empty());
	tr.complete(3);
	a.emptyCache();  // still waiting on stream 4
	EXPECT_TRUE(be.frees.empty());
	EXPECT_EQ(tr.unreleased(), 2u);
	tr.complete(4);
	a.emptyCache();
	EXPECT_EQ(be.frees, (std::vector<std::pair<uint64_t, size_t>>{{x, 20 * MiB}}));
	EXPECT_EQ(tr.unreleased(), 0u);
	EXPECT_EQ(a.stats().activeBlocks.current, 0u);
}

TEST_F(Allocator, FreeParksTheBlockWhileAnyStreamHasWorkAndDoesNotWait)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 4096);
	tr.pending = {7, 9};  // two streams with queued work
	release(a, x);
	EXPECT_EQ(tr.marked(7), 1u);
	EXPECT_EQ(tr.marked(9), 1u);
	EXPECT_EQ(tr.waits, 0) << "a free must not wait for the device";
	EXPECT_EQ(a.stats().activeBlocks.current, 1u);  // parked
	EXPECT_EQ(a.deallocate(x), npurtErrorInvalidValue) << "freed is freed";
	tr.pending.clear();
	uint64_t y = alloc(a, 4096);
	EXPECT_NE(y, x) << "reused while queued work may still read it";
	tr.complete(7);
	EXPECT_NE(alloc(a, 4096), x) << "stream 9 has not finished";
	tr.complete(9);
	EXPECT_EQ(alloc(a, 4096), x);
	EXPECT_EQ(tr.unreleased(), 0u);
}

TEST_F(Allocator, FreeWithNothingPendingReusesAtOnce)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 4096);
	release(a, x);
	EXPECT_EQ(a.stats().activeBlocks.current, 0u);
	EXPECT_EQ(alloc(a, 4096), x);
	EXPECT_EQ(tr.unreleased(), 0u);
}

TEST_F(Allocator, OutOfMemoryWaitsForParkedBlocks)
{
	FakeBackend be(20 * MiB);
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 16 * MiB);
	tr.pending = {3};
	release(a, x);
	tr.pending.clear();
	tr.completeOnWait = true;
	uint64_t y = 0;
	ASSERT_EQ(a.allocate(16 * MiB, 0, &y), npurtSuccess) << npurtGetLastErrorMessage();
	EXPECT_EQ(y, x) << "the parked block, once its work is done";
	EXPECT_EQ(tr.waits, 1);
	EXPECT_EQ(a.stats().ooms, 0u);
	EXPECT_EQ(tr.unreleased(), 0u);
}

TEST_F(Allocator, OutOfMemoryAfterParkedWorkDoesNotEndIsReported)
{
	FakeBackend be(20 * MiB);
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 16 * MiB);
	tr.pending = {3};
	release(a, x);
	tr.pending.clear();
	uint64_t y = 0;
	EXPECT_EQ(a.allocate(16 * MiB, 0, &y), npurtErrorMemoryAllocation);
	EXPECT_EQ(y, 0u);
	EXPECT_EQ(tr.waits, 1);
	EXPECT_EQ(a.stats().ooms, 1u);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "out of device memory"))
	        << npurtGetLastErrorMessage();
	tr.complete(3);
	EXPECT_EQ(alloc(a, 16 * MiB), x);
}

TEST_F(Allocator, RecordStreamWithoutATrackerDoesNotPark)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 4096, 1);
	EXPECT_EQ(a.recordStream(x, 2), npurtSuccess);
	release(a, x);
	EXPECT_EQ(alloc(a, 4096, 1), x);
}

TEST_F(Allocator, LookupFindsTheLiveAllocationContainingAnAddress)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 1000);
	uint64_t y = alloc(a, 4096);
	uint64_t base = 0;
	size_t size = 0;
	EXPECT_TRUE(a.lookup(x, &base, &size));
	EXPECT_EQ(base, x);
	EXPECT_EQ(size, 1000u);
	base = 0;
	EXPECT_TRUE(a.lookup(x + 999, &base, &size));
	EXPECT_EQ(base, x);
	EXPECT_FALSE(a.lookup(x + 1000, &base, &size));  // past the end (rounding slack)
	EXPECT_FALSE(a.lookup(x - 1, &base, &size));
	EXPECT_TRUE(a.lookup(y + 4095, &base, &size));
	EXPECT_EQ(base, y);
	EXPECT_EQ(size, 4096u);
	EXPECT_FALSE(a.lookup(y + 4096, &base, &size));
	release(a, x);
	EXPECT_FALSE(a.lookup(x, &base, &size));
	EXPECT_TRUE(a.lookup(y, &base, &size));
}

TEST_F(Allocator, ConcurrentUseNeverHandsOutOverlappingRanges)
{
	FakeBackend be;
	FakeTracker tr;
	tr.autoComplete = true;
	CachingAllocator a(be, &tr);
	std::mutex mutex;
	std::map<uint64_t, uint64_t> ranges;  // live ranges: start -> end
	std::atomic<int> overlaps{0}, failures{0};

	auto worker = [&](unsigned id) {
		std::mt19937_64 rng(id);
		std::vector<std::pair<uint64_t, size_t>> mine;
		const StreamId stream = id % 3;
		for (int i = 0; i < 3000; i++) {
			if (mine.size() < 24 && (mine.empty() || rng() % 2)) {
				size_t size = rng() % 4 == 0 ? 1 + rng() % (12 * MiB)
				                             : 1 + rng() % (64 * KiB);
				uint64_t addr = 0;
				if (a.allocate(size, stream, &addr) != npurtSuccess) {
					failures++;
					continue;
				}
				{
					std::lock_guard<std::mutex> lock(mutex);
					auto next = ranges.lower_bound(addr);
					if (next != ranges.end() && next->first < addr + size)
						overlaps++;
					if (next != ranges.begin() &&
					    std::prev(next)->second > addr)
						overlaps++;
					ranges[addr] = addr + size;
				}
				mine.emplace_back(addr, size);
				if (rng() % 8 == 0)
					a.recordStream(addr, (stream + 1) % 3);
			} else {
				size_t k = rng() % mine.size();
				auto [addr, size] = mine[k];
				mine[k] = mine.back();
				mine.pop_back();
				uint64_t base = 0;
				size_t got = 0;
				if (!a.lookup(addr + size - 1, &base, &got) || base != addr ||
				    got != size)
					failures++;
				{
					std::lock_guard<std::mutex> lock(mutex);
					ranges.erase(addr);
				}
				if (a.deallocate(addr) != npurtSuccess)
					failures++;
			}
			if (i % 500 == 499)
				a.emptyCache();
		}
		for (auto [addr, size] : mine) {
			{
				std::lock_guard<std::mutex> lock(mutex);
				ranges.erase(addr);
			}
			if (a.deallocate(addr) != npurtSuccess)
				failures++;
		}
	};
	std::vector<std::thread> threads;
	for (unsigned t = 0; t < 8; t++)
		threads.emplace_back(worker, t);
	for (auto &t : threads)
		t.join();

	EXPECT_EQ(overlaps.load(), 0);
	EXPECT_EQ(failures.load(), 0);
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.allocatedBytes.current, 0u);
	EXPECT_EQ(s.allocCalls, s.freeCalls);
	EXPECT_EQ(s.reservedBytes.current, be.used());
	a.emptyCache();
	EXPECT_EQ(be.liveSegments(), 0u);
	EXPECT_EQ(a.stats().activeBlocks.current, 0u);
	EXPECT_EQ(tr.unreleased(), 0u);
}

TEST_F(Allocator, DestructorFreesEverySegment)
{
	FakeBackend be;
	FakeTracker tr;
	{
		CachingAllocator a(be, &tr);
		alloc(a, 4096);  // live, small
		uint64_t l = alloc(a, 3 * MiB);
		alloc(a, 4 * MiB);  // live, in the same segment as l
		alloc(a, 100 * MiB);  // live, oversize
		release(a, alloc(a, 30 * MiB));  // cached
		uint64_t p = alloc(a, 4096, 5);
		a.recordStream(p, 6);
		release(a, p);  // parked
		release(a, l);
		EXPECT_EQ(be.liveSegments(), 5u);
	}
	EXPECT_EQ(be.liveSegments(), 0u);
	EXPECT_EQ(be.frees.size(), be.allocs.size());
	EXPECT_EQ(be.used(), 0u);
	EXPECT_EQ(tr.unreleased(), 0u);
}

// Random sizes from 1 KiB to 32 MiB, spread evenly over the powers of two so
// both pools and the oversize-free large range are exercised, allocated and
// freed in random order. Reports peak reserved / peak allocated.
TEST_F(Allocator, FragmentationOfARandomWorkloadStaysLow)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	std::mt19937_64 rng(20240601);
	std::vector<uint64_t> live;
	uint64_t peakRequested = 0, requested = 0;
	std::map<uint64_t, size_t> sizes;
	for (int op = 0; op < 6000; op++) {
		if (live.empty() || rng() % 2) {
			unsigned shift = 10 + rng() % 15;  // sizes in (2^shift, 2^(shift+1)]
			size_t size = (size_t{1} << shift) + rng() % (size_t{1} << shift) + 1;
			uint64_t addr = alloc(a, size);
			live.push_back(addr);
			sizes[addr] = size;
			requested += size;
			peakRequested = std::max(peakRequested, requested);
		} else {
			size_t k = rng() % live.size();
			uint64_t addr = live[k];
			live[k] = live.back();
			live.pop_back();
			requested -= sizes[addr];
			sizes.erase(addr);
			release(a, addr);
		}
	}
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.reservedBytes.current, be.used());
	double ratio = static_cast<double>(s.reservedBytes.peak) / s.allocatedBytes.peak;
	std::printf("[ fragmentation ] peak reserved %.1f MiB / peak allocated %.1f MiB = %.3f "
	            "(peak requested %.1f MiB); %" PRIu64 " segment allocations\n",
	            s.reservedBytes.peak / double(MiB), s.allocatedBytes.peak / double(MiB), ratio,
	            peakRequested / double(MiB), s.segmentAllocs);
	EXPECT_LE(ratio, 2.0);

	for (uint64_t addr : live)
		release(a, addr);
	a.emptyCache();
	s = a.stats();
	EXPECT_EQ(s.inactiveSplitBytes.current, 0u);
	EXPECT_EQ(s.reservedBytes.current, 0u);
	EXPECT_EQ(be.liveSegments(), 0u);
}

void configure(const std::string &text)
{
	npurt::AllocatorConfig cfg;
	std::string why;
	ASSERT_TRUE(npurt::parseAllocatorConfig(text, &cfg, &why)) << why;
	npurt::setAllocatorConfig(cfg);
}

// One segment of address space grows: allocations follow each other and
// memory is mapped page by page as they need it.
TEST_F(Allocator, ExpandableSegmentGrowsPageByPage)
{
	configure("expandable_segments:True");
	FakeBackend be(1 * GiB);
	FakeTracker tr;
	tr.autoComplete = true;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 3 * MiB);
	uint64_t y = alloc(a, 3 * MiB);
	EXPECT_EQ(y, x + 3 * MiB);  // packed, no new segment
	EXPECT_EQ(be.allocCalls, 0);  // no fixed-size segment
	EXPECT_EQ(be.liveRanges(), 1u);
	EXPECT_EQ(be.livePages(), 3u);  // 6 MiB: three 2 MiB pages
	AllocatorStats s = a.stats();
	EXPECT_EQ(s.reservedBytes.current, 6 * MiB);
	EXPECT_EQ(s.segments.current, 1u);
	EXPECT_EQ(s.allocatedBytes.current, 6 * MiB);
	EXPECT_TRUE(be.pageMapped(x) && be.pageMapped(y + 3 * MiB - 1));

	// The snapshot shows the range and what is mapped of it.
	npurt::PoolSnapshot snap = a.snapshot();
	ASSERT_EQ(snap.segments.size(), 1u);
	EXPECT_TRUE(snap.segments[0].expandable);
	EXPECT_EQ(snap.segments[0].mapped, 6 * MiB);
	EXPECT_GT(snap.segments[0].size, 6 * MiB);
	EXPECT_EQ(snap.segments[0].allocated, 6 * MiB);

	// Freed, the pages stay for reuse in place; emptyCache unmaps them
	// and gives the range back.
	release(a, x);
	release(a, y);
	EXPECT_EQ(alloc(a, 5 * MiB), x);
	EXPECT_EQ(be.livePages(), 3u);
	release(a, x);
	a.emptyCache();
	EXPECT_EQ(be.livePages(), 0u);
	EXPECT_EQ(be.liveRanges(), 0u);
	EXPECT_EQ(a.stats().reservedBytes.current, 0u);
	EXPECT_EQ(a.stats().segments.current, 0u);
	EXPECT_EQ(be.used(), 0u);
}

// Idle pages (wholly inside free blocks) go back before new ones are
// mapped: the pool holds what its live blocks touch.
TEST_F(Allocator, ExpandableSegmentGivesIdlePagesBackBeforeGrowing)
{
	configure("expandable_segments:True");
	FakeBackend be(1 * GiB);
	FakeTracker tr;
	tr.autoComplete = true;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 8 * MiB);
	uint64_t y = alloc(a, 2 * MiB);
	release(a, x);  // 8 MiB hole before y, four idle pages
	EXPECT_EQ(be.livePages(), 5u);
	uint64_t z = alloc(a, 10 * MiB);  // does not fit the hole
	EXPECT_EQ(z, y + 2 * MiB);
	// Four idle pages unmapped, five mapped: 12 MiB reserved, not 20.
	EXPECT_EQ(be.livePages(), 6u);
	EXPECT_EQ(a.stats().reservedBytes.current, 12 * MiB);
	EXPECT_EQ(be.unmapCalls, 4);
	EXPECT_FALSE(be.pageMapped(x));
	// The hole is reused, its pages mapped again.
	EXPECT_EQ(alloc(a, 4 * MiB), x);
	EXPECT_TRUE(be.pageMapped(x));
	EXPECT_EQ(a.stats().reservedBytes.current, 16 * MiB);
}

// Without a tracker a free block may still be read by queued work: its
// pages are not taken for another block.
TEST_F(Allocator, ExpandableSegmentWithoutATrackerKeepsIdlePages)
{
	configure("expandable_segments:True");
	FakeBackend be(1 * GiB);
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 8 * MiB);
	alloc(a, 2 * MiB);
	release(a, x);
	alloc(a, 10 * MiB);
	EXPECT_EQ(be.unmapCalls, 0);
	EXPECT_TRUE(be.pageMapped(x));
	EXPECT_EQ(a.stats().reservedBytes.current, 20 * MiB);
}

TEST_F(Allocator, ExpandableSegmentOutOfMemoryIsReportedAndKeepsNothing)
{
	configure("expandable_segments:True");
	FakeBackend be(16 * MiB);
	FakeTracker tr;
	tr.autoComplete = true;
	CachingAllocator a(be, &tr);
	uint64_t x = alloc(a, 10 * MiB);
	uint64_t addr = 0;
	EXPECT_EQ(a.allocate(8 * MiB, 0, &addr), npurtErrorMemoryAllocation);
	EXPECT_EQ(addr, 0u);
	std::string msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, "tried to allocate 8.00 MiB")) << msg;
	EXPECT_TRUE(contains(msg, "expandable segment")) << msg;
	EXPECT_EQ(a.stats().ooms, 1u);
	// The pages mapped for the failed request went back.
	EXPECT_EQ(a.stats().reservedBytes.current, 10 * MiB);
	EXPECT_EQ(be.used(), 10 * MiB);
	EXPECT_EQ(alloc(a, 6 * MiB), x + 10 * MiB);
	release(a, x);
}

TEST_F(Allocator, ExpandableSegmentsRunningOutOfAddressSpaceSayWhat)
{
	configure("expandable_segments:True");
	FakeBackend be(1 * GiB);
	be.rangeRoom = 300 * MiB;  // one large range (a quarter of 1 GiB)
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 200 * MiB);
	uint64_t addr = 0;
	EXPECT_EQ(a.allocate(100 * MiB, 0, &addr), npurtErrorMemoryAllocation);
	std::string msg = npurtGetLastErrorMessage();
	EXPECT_TRUE(contains(msg, "out of device address space")) << msg;
	release(a, x);
	// Freed and emptied, the range goes back and the request fits.
	a.emptyCache();
	EXPECT_EQ(be.liveRanges(), 0u);
	release(a, alloc(a, 100 * MiB));
}

// Settings change the next segments; those made before keep their kind.
TEST_F(Allocator, ExpandableAndFixedSegmentsLiveSideBySide)
{
	FakeBackend be(1 * GiB);
	FakeTracker tr;
	tr.autoComplete = true;
	CachingAllocator a(be, &tr);
	uint64_t fixed = alloc(a, 3 * MiB);  // a 20 MiB fixed segment
	configure("expandable_segments:True");
	uint64_t reused = alloc(a, 3 * MiB);  // still fits the fixed one
	EXPECT_EQ(reused, fixed + 3 * MiB);
	uint64_t big = alloc(a, 30 * MiB);  // a new, expandable segment
	EXPECT_EQ(be.allocs, (std::vector<size_t>{20 * MiB}));
	EXPECT_EQ(be.livePages(), 15u);
	npurt::PoolSnapshot snap = a.snapshot();
	ASSERT_EQ(snap.segments.size(), 2u);
	EXPECT_NE(snap.segments[0].expandable, snap.segments[1].expandable);
	for (uint64_t p : {fixed, reused, big})
		release(a, p);
	a.emptyCache();
	EXPECT_EQ(be.used(), 0u);
	EXPECT_EQ(be.liveSegments(), 0u);
	EXPECT_EQ(be.liveRanges(), 0u);
}

TEST_F(Allocator, DestructorGivesExpandableSegmentsBack)
{
	configure("expandable_segments:True");
	FakeBackend be(1 * GiB);
	FakeTracker tr;
	{
		CachingAllocator a(be, &tr);
		alloc(a, 4096);
		alloc(a, 5 * MiB);
		uint64_t p = alloc(a, 3 * MiB, 7);
		tr.pending = {7};
		release(a, p);  // parked
		EXPECT_GT(be.livePages(), 0u);
	}
	EXPECT_EQ(be.livePages(), 0u);
	EXPECT_EQ(be.liveRanges(), 0u);
	EXPECT_EQ(be.used(), 0u);
	EXPECT_EQ(tr.unreleased(), 0u);
}

TEST_F(Allocator, MaxSplitSizeIsTheOversizeLimit)
{
	configure("max_split_size_mb:32");
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 40 * MiB);
	release(a, x);
	EXPECT_NE(alloc(a, 12 * MiB), x);  // 40 MiB is oversize now: not cut
	EXPECT_EQ(alloc(a, 36 * MiB), x);
	EXPECT_EQ(a.stats().inactiveSplitBytes.current, 0u);
}

TEST_F(Allocator, RoundupPower2DivisionsRoundsBlocks)
{
	configure("roundup_power2_divisions:4");
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	uint64_t x = alloc(a, 1200 * KiB);
	EXPECT_EQ(a.stats().allocatedBytes.current, 1280 * KiB);
	EXPECT_EQ(a.stats().requestedBytes.current, 1200 * KiB);
	release(a, x);
}

// Before the pool grows past the threshold of its capacity, cached
// segments go back, least recently freed first.
TEST_F(Allocator, GarbageCollectionFreesTheOldestCachedSegmentsFirst)
{
	configure("garbage_collection_threshold:0.5");
	FakeBackend be(200 * MiB);
	CachingAllocator a(be, nullptr);
	uint64_t p = alloc(a, 30 * MiB);
	uint64_t q = alloc(a, 30 * MiB);
	uint64_t r = alloc(a, 30 * MiB);
	release(a, q);  // freed first: the oldest
	release(a, p);
	release(a, r);
	EXPECT_EQ(a.stats().reservedBytes.current, 90 * MiB);
	// 40 MiB more would make 130 MiB, past 100: one segment goes, q's.
	alloc(a, 40 * MiB);
	ASSERT_EQ(be.frees.size(), 1u);
	EXPECT_EQ(be.frees[0].first, q);
	EXPECT_EQ(a.stats().reservedBytes.current, 100 * MiB);
}

// The bench's workload (tools/bench/alloc.cpp) under expandable segments:
// the pool holds little more than its live blocks.
TEST_F(Allocator, ExpandableSegmentsKeepFragmentationNearOne)
{
	for (bool expandable : {false, true}) {
		configure(expandable ? "expandable_segments:True" : "");
		FakeBackend be(4 * GiB);
		FakeTracker tr;
		tr.autoComplete = true;
		CachingAllocator a(be, &tr);
		std::mt19937_64 rng(12345);
		std::vector<uint64_t> live;
		for (int i = 0; i < 4000; i++) {
			bool more = live.size() < 8 || (live.size() < 64 && rng() % 2);
			if (more) {
				double e = 10 + static_cast<double>(rng() % 1000) / 1000.0 * 15;
				live.push_back(alloc(a, static_cast<size_t>(std::pow(2.0, e))));
			} else {
				size_t k = rng() % live.size();
				release(a, live[k]);
				live[k] = live.back();
				live.pop_back();
			}
		}
		AllocatorStats s = a.stats();
		EXPECT_EQ(s.reservedBytes.current, be.used());
		double ratio = static_cast<double>(s.reservedBytes.peak) / s.allocatedBytes.peak;
		std::printf("[ fragmentation ] expandable %d: peak reserved / peak allocated = "
		            "%.3f\n",
		            expandable, ratio);
		if (expandable) {
			EXPECT_LE(ratio, 1.05);
		}
		for (uint64_t p : live)
			release(a, p);
		a.emptyCache();
		EXPECT_EQ(be.used(), 0u);
	}
}

}  // namespace

// A pass over parked blocks asks a busy stream once: a marker of at least
// the tasks found not done is not done either; other streams are asked.
TEST(DoneMemo, RemembersTheFewestTasksNotDonePerStream)
{
	npurt::DoneMemo memo;
	int a = 0, b = 0;
	EXPECT_FALSE(memo.notDone(&a, 5));
	memo.noteNotDone(&a, 7);
	EXPECT_TRUE(memo.notDone(&a, 7));
	EXPECT_TRUE(memo.notDone(&a, 100));
	EXPECT_FALSE(memo.notDone(&a, 6)) << "fewer tasks may be done";
	EXPECT_FALSE(memo.notDone(&b, 100)) << "another stream is asked";
	memo.noteNotDone(&a, 4);
	EXPECT_TRUE(memo.notDone(&a, 4));
	memo.noteNotDone(&a, 9);
	EXPECT_TRUE(memo.notDone(&a, 4)) << "keeps the fewest";
	// Past its capacity it forgets nothing it knew; new streams are asked.
	int many[16];
	for (int &s : many)
		memo.noteNotDone(&s, 1);
	EXPECT_TRUE(memo.notDone(&a, 4));
	EXPECT_FALSE(memo.notDone(&many[15], 1));
}

// Stream-ordered allocation (npurtMallocAsync / npurtFreeAsync).
namespace {

uint64_t allocOn(CachingAllocator &a, size_t size, StreamId stream)
{
	uint64_t addr = 0;
	EXPECT_EQ(a.allocateOrdered(size, stream, &addr), npurtSuccess)
	        << npurtGetLastErrorMessage();
	EXPECT_NE(addr, 0u);
	return addr;
}

}  // namespace

TEST_F(Allocator, OrderedFreeIsReusedAtOnceOnItsStreamOnly)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = allocOn(a, 4096, 1);
	EXPECT_EQ(a.deallocateOrdered(x, 1), npurtSuccess);
	EXPECT_EQ(tr.marked(1), 1u);
	EXPECT_EQ(tr.waits, 0) << "a stream-ordered free never waits";
	// Stream 2 is not ordered after the free: not the same memory.
	uint64_t y = allocOn(a, 4096, 2);
	EXPECT_NE(y, x);
	// Stream 1 is: the same block, though the device has not run the free.
	EXPECT_EQ(allocOn(a, 4096, 1), x);
	EXPECT_EQ(tr.unreleased(), 0u) << "the marker goes with the block";
	EXPECT_EQ(a.stats().activeBlocks.current, 2u);
}

TEST_F(Allocator, OrderedFreeFollowsEventDependencies)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = allocOn(a, 1 * MiB, 1);
	EXPECT_EQ(a.deallocateOrdered(x, 1), npurtSuccess);
	tr.ordered = {{2, 1}};  // stream 2 waited for an event of stream 1
	EXPECT_EQ(allocOn(a, 1 * MiB, 2), x);
	uint64_t z = allocOn(a, 1 * MiB, 3);
	EXPECT_NE(z, x);

	// With the policy off, only the freeing stream reuses it early.
	a.setReusePolicy(false, true);
	EXPECT_EQ(a.deallocateOrdered(z, 3), npurtSuccess);
	tr.ordered = {{2, 3}};
	EXPECT_NE(allocOn(a, 1 * MiB, 2), z);
	EXPECT_EQ(allocOn(a, 1 * MiB, 3), z);
}

TEST_F(Allocator, OrderedFreeGoesToEveryStreamOnceDoneUnlessNotOpportunistic)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = allocOn(a, 4096, 1);
	EXPECT_EQ(a.deallocateOrdered(x, 1), npurtSuccess);
	tr.complete(1);
	EXPECT_EQ(allocOn(a, 4096, 2), x) << "the free completed: anyone";

	a.setReusePolicy(true, false);
	uint64_t y = allocOn(a, 4096, 1);
	EXPECT_EQ(a.deallocateOrdered(y, 1), npurtSuccess);
	tr.complete(1);
	EXPECT_NE(allocOn(a, 4096, 2), y) << "not opportunistic: only stream 1";
	EXPECT_EQ(allocOn(a, 4096, 1), y);
}

TEST_F(Allocator, OrderedFreeSplitsAParkedBlockAndKeepsTheRestParked)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = allocOn(a, 1 * MiB, 1);
	EXPECT_EQ(a.deallocateOrdered(x, 1), npurtSuccess);
	// A smaller request on stream 1 takes the front; the rest stays
	// parked behind the free's marker: stream 2 may not have it.
	EXPECT_EQ(allocOn(a, 4096, 1), x);
	EXPECT_EQ(allocOn(a, 4096, 1), x + 4096);
	uint64_t other = allocOn(a, 4096, 2);
	EXPECT_TRUE(other < x || other >= x + 1 * MiB) << "stream 2 took parked memory";
	EXPECT_EQ(a.stats().activeBlocks.current, 4u);  // 3 live, the rest parked
	// Nothing of the segment goes back while its free is pending.
	a.emptyCache();
	EXPECT_TRUE(be.frees.empty());
	tr.complete(1);
	a.trimTo(0);
	EXPECT_TRUE(be.frees.empty()) << "live blocks hold the segment";
	EXPECT_EQ(tr.unreleased(), 0u);
}

TEST_F(Allocator, TrimToKeepsTheAskedBytes)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	std::vector<uint64_t> xs;
	for (int i = 0; i < 4; i++)
		xs.push_back(allocOn(a, 20 * MiB, 1));
	for (uint64_t x : xs)
		EXPECT_EQ(a.deallocateOrdered(x, 1), npurtSuccess);
	EXPECT_EQ(a.stats().reservedBytes.current, 80 * MiB);
	a.trimTo(0);
	EXPECT_EQ(a.stats().reservedBytes.current, 80 * MiB) << "frees still queued";
	tr.complete(1);
	a.trimTo(50 * MiB);
	EXPECT_EQ(a.stats().reservedBytes.current, 40 * MiB);
	a.trimTo(0);
	EXPECT_EQ(a.stats().reservedBytes.current, 0u);
}

TEST_F(Allocator, OrderedFreeOfABadAddressSaysWhy)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = allocOn(a, 8192, 1);
	EXPECT_EQ(a.deallocateOrdered(x + 512, 1), npurtErrorInvalidValue);
	EXPECT_NE(std::string(npurtGetLastErrorMessage()).find("not its start"), std::string::npos);
	EXPECT_EQ(a.deallocateOrdered(x, 1), npurtSuccess);
	EXPECT_EQ(a.deallocateOrdered(x, 1), npurtErrorInvalidValue);
	EXPECT_NE(std::string(npurtGetLastErrorMessage()).find("already freed"), std::string::npos);
	EXPECT_EQ(a.deallocateOrdered(0, 1), npurtSuccess);
}

// --- history (npurtMemRecordHistory) ---------------------------------------

using Action = npurt::TraceEvent::Action;

std::vector<Action> actions(const std::vector<npurt::TraceEvent> &h)
{
	std::vector<Action> out;
	for (const auto &e : h)
		out.push_back(e.action);
	return out;
}

// Off by default; on, each step of a block's life is an event with its
// range, stream, time and call site, in order.
TEST_F(Allocator, HistoryRecordsEachStepOfABlocksLife)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	release(a, alloc(a, 4 * KiB));
	EXPECT_TRUE(a.history().empty());
	tr.pending = {7};  // work in flight at the frees from now: blocks park

	npurt::setHistoryLimit(100);
	const npurt::AllocSite site{"train.py:12 in aten::empty()", nullptr};
	uint64_t x = 0;
	ASSERT_EQ(a.allocate(1 * MiB, 3, &x, site), npurtSuccess);
	release(a, x);
	tr.complete(7);
	alloc(a, 4 * KiB);  // polls the parked block back
	a.emptyCache();

	std::vector<npurt::TraceEvent> h = a.history();
	ASSERT_EQ(actions(h),
	          (std::vector<Action>{Action::SegmentAlloc, Action::Alloc, Action::FreeRequested,
	                               Action::FreeCompleted, Action::Alloc, Action::SegmentFree}));
	EXPECT_EQ(h[0].size, CachingAllocator::kSmallSegment);
	EXPECT_EQ(h[0].stream, 3u);
	EXPECT_EQ(h[1].addr, x);
	EXPECT_EQ(h[1].size, 1 * MiB);
	EXPECT_EQ(h[1].stream, 3u);
	EXPECT_STREQ(h[1].site.text, site.text);
	EXPECT_EQ(h[2].addr, x);
	EXPECT_STREQ(h[2].site.text, site.text);  // a free names where it was made
	EXPECT_EQ(h[3].addr, x);
	EXPECT_EQ(h[3].site.text, nullptr);
	EXPECT_EQ(h[5].addr, h[0].addr);
	for (size_t i = 1; i < h.size(); i++)
		EXPECT_GE(h[i].timeNs, h[i - 1].timeNs);
	EXPECT_GT(h[0].timeNs, 1600000000ll * 1000000000);  // the wall clock

	// Off again: nothing kept, nothing recorded.
	npurt::setHistoryLimit(0);
	release(a, alloc(a, 4 * KiB));
	EXPECT_TRUE(a.history().empty());
}

// A full ring keeps the newest events, oldest first; a new limit empties it.
TEST_F(Allocator, HistoryKeepsTheLastEventsOnly)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	npurt::setHistoryLimit(3);
	std::vector<uint64_t> addrs;
	for (int i = 0; i < 5; i++)
		addrs.push_back(alloc(a, 4 * KiB));
	std::vector<npurt::TraceEvent> h = a.history();
	ASSERT_EQ(h.size(), 3u);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(h[i].action, Action::Alloc);
		EXPECT_EQ(h[i].addr, addrs[i + 2]);
	}
	release(a, addrs[4]);  // no tracker: requested and completed at once
	h = a.history();
	ASSERT_EQ(actions(h), (std::vector<Action>{Action::Alloc, Action::FreeRequested,
	                                           Action::FreeCompleted}));
	EXPECT_EQ(h[0].addr, addrs[4]);

	npurt::setHistoryLimit(10);
	EXPECT_TRUE(a.history().empty());
	release(a, addrs[0]);
	EXPECT_EQ(a.history().size(), 2u);
}

// A request that fails for lack of memory is an event: the bytes asked for
// and the device's free bytes, as torch's "oom" entry.
TEST_F(Allocator, HistoryRecordsOutOfMemory)
{
	FakeBackend be(32 * MiB);
	CachingAllocator a(be, nullptr);
	uint64_t keep = alloc(a, 1 * MiB);
	npurt::setHistoryLimit(100);
	uint64_t addr = 0;
	EXPECT_EQ(a.allocate(40 * MiB, 0, &addr), npurtErrorMemoryAllocation);
	npurtGetLastError();
	std::vector<npurt::TraceEvent> h = a.history();
	ASSERT_EQ(actions(h), (std::vector<Action>{Action::Oom}));
	EXPECT_EQ(h[0].size, 40 * MiB);
	size_t freeBytes = 0, total = 0;
	be.memInfo(&freeBytes, &total);
	EXPECT_EQ(h[0].addr, freeBytes);
	release(a, keep);
}

// Expandable segments: pages mapped and given back are events.
TEST_F(Allocator, HistoryRecordsPagesOfExpandableSegments)
{
	configure("expandable_segments:True");
	FakeBackend be(1 * GiB);
	FakeTracker tr;
	tr.autoComplete = true;
	CachingAllocator a(be, &tr);
	npurt::setHistoryLimit(100);
	uint64_t x = alloc(a, 3 * MiB);
	release(a, x);
	a.emptyCache();
	std::vector<npurt::TraceEvent> h = a.history();
	ASSERT_EQ(actions(h),
	          (std::vector<Action>{Action::SegmentMap, Action::SegmentMap, Action::Alloc,
	                               Action::FreeRequested, Action::FreeCompleted,
	                               Action::SegmentUnmap, Action::SegmentUnmap}));
	EXPECT_EQ(h[0].addr, x);
	EXPECT_EQ(h[0].size, CachingAllocator::kPageSize);
	EXPECT_EQ(h[1].addr, x + CachingAllocator::kPageSize);
}

// Stream-ordered memory: the streams of the request and of the free, and a
// block reused in stream order completes its free when it is taken.
TEST_F(Allocator, HistoryNamesTheStreamsOfOrderedMemory)
{
	FakeBackend be;
	FakeTracker tr;
	CachingAllocator a(be, &tr);
	uint64_t x = 0, y = 0;
	ASSERT_EQ(a.allocateOrdered(64 * KiB, 5, &x), npurtSuccess);
	npurt::setHistoryLimit(100);
	ASSERT_EQ(a.deallocateOrdered(x, 5), npurtSuccess);
	ASSERT_EQ(a.allocateOrdered(64 * KiB, 5, &y), npurtSuccess);
	EXPECT_EQ(y, x);  // same stream: reused before the free's work is done
	std::vector<npurt::TraceEvent> h = a.history();
	ASSERT_EQ(actions(h), (std::vector<Action>{Action::FreeRequested, Action::FreeCompleted,
	                                           Action::Alloc}));
	for (const auto &e : h) {
		EXPECT_EQ(e.stream, 5u);
		EXPECT_EQ(e.addr, x);
	}
	EXPECT_EQ(a.deallocateOrdered(y, 5), npurtSuccess);
}

// Threads allocate and free while another switches the history on and off
// and reads it: every history read is in time order and whole (each event
// of a block that the reader sees allocated has its range), and nothing
// leaks.
TEST_F(Allocator, HistoryUnderThreads)
{
	FakeBackend be;
	CachingAllocator a(be, nullptr);
	std::atomic<bool> stop{false};
	std::vector<std::thread> workers;
	std::atomic<int> failures{0};
	for (int t = 0; t < 4; t++)
		workers.emplace_back([&, t] {
			std::mt19937 rng(static_cast<unsigned>(t));
			while (!stop.load()) {
				uint64_t addr = 0;
				if (a.allocate((rng() % 64 + 1) * KiB, static_cast<StreamId>(t),
				               &addr) != npurtSuccess) {
					failures++;
					continue;
				}
				if (a.deallocate(addr) != npurtSuccess)
					failures++;
			}
		});
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	for (int round = 0; round < 50; round++) {
		// On: the workers' events come (waited for, bounded).
		npurt::setHistoryLimit(64);
		std::vector<npurt::TraceEvent> h;
		while (h.empty() && std::chrono::steady_clock::now() < deadline) {
			std::this_thread::yield();
			h = a.history();
		}
		if (h.empty()) {  // not ASSERT: the workers must be joined
			ADD_FAILURE() << "no event recorded in round " << round;
			break;
		}
		EXPECT_LE(h.size(), 64u);
		for (size_t i = 1; i < h.size(); i++)
			EXPECT_GE(h[i].timeNs, h[i - 1].timeNs);
		for (const auto &e : h)
			EXPECT_NE(e.size, 0u);
		// Off: emptied at once, whatever the workers do.
		npurt::setHistoryLimit(0);
		EXPECT_TRUE(a.history().empty());
	}
	stop = true;
	for (auto &w : workers)
		w.join();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_EQ(a.stats().allocatedBytes.current, 0u);
}

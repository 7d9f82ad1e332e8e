// Memory accounting for frameworks against the real module (run in the
// VM): this process's usage of a device, the per-process limit (also
// across two processes), the pool's snapshot and the OOM observer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "child.h"
#include "npurt/npurt.h"

namespace {

constexpr size_t kMiB = 1 << 20;

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

npurtMemUsage usage(int device = 0)
{
	npurtMemUsage u{};
	EXPECT_EQ(npurtDeviceGetMemUsage(device, &u), npurtSuccess) << lastMessage();
	return u;
}

class MemUsage : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
		npurtMemEmptyCache();
	}
	void TearDown() override
	{
		npurtMemRecordHistory(0);
		npurtSetMemoryLimit(0, 0);
		npurtMemSetOomObserver(nullptr, nullptr);
		npurtMemEmptyCache();
		npurtGetLastError();
	}
};

TEST_F(MemUsage, CountsEveryContextOfTheProcess)
{
	npurtMemUsage before = usage();
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	// What earlier tests left cached on NPU 1 stays as it is.
	size_t otherBefore = n > 1 ? usage(1).processReservedBytes : 0;
	EXPECT_GT(before.totalBytes, 0u);
	EXPECT_LE(before.freeBytes, before.totalBytes);
	EXPECT_GE(before.contexts, 1u);
	void *a = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 24 * kMiB), npurtSuccess) << lastMessage();
	npurtMemUsage one = usage();
	EXPECT_GE(one.processReservedBytes, before.processReservedBytes + 24 * kMiB);
	EXPECT_GE(one.processAllocatedBytes, before.processAllocatedBytes + 24 * kMiB);
	// The driver charges the pool's memory to the process too.
	EXPECT_GE(one.processDeviceBytes, one.processReservedBytes);
	EXPECT_LE(one.freeBytes, before.freeBytes - 24 * kMiB);

	// Another context of the same NPU: its memory is this process's too.
	npurtContext_t ctx = nullptr;
	ASSERT_EQ(npurtCtxCreate(&ctx, 0, 0), npurtSuccess) << lastMessage();
	void *b = nullptr;
	ASSERT_EQ(npurtMalloc(&b, 12 * kMiB), npurtSuccess) << lastMessage();
	npurtMemUsage two = usage();
	EXPECT_EQ(two.contexts, one.contexts + 1);
	EXPECT_GE(two.processReservedBytes, one.processReservedBytes + 12 * kMiB);
	EXPECT_GE(two.processAllocatedBytes, one.processAllocatedBytes + 12 * kMiB);
	// NPU 1 is not charged for NPU 0's memory.
	if (n > 1) {
		EXPECT_EQ(usage(1).processReservedBytes, otherBefore);
	}
	ASSERT_EQ(npurtCtxDestroy(ctx), npurtSuccess) << lastMessage();
	npurtMemUsage after = usage();
	EXPECT_EQ(after.contexts, one.contexts);
	EXPECT_EQ(after.processReservedBytes, one.processReservedBytes)
	        << "the destroyed context's memory went back";
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	npurtMemEmptyCache();
	EXPECT_EQ(usage().processReservedBytes, before.processReservedBytes);
}

TEST_F(MemUsage, BadArguments)
{
	npurtMemUsage u{};
	EXPECT_EQ(npurtDeviceGetMemUsage(0, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetMemUsage(-1, &u), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetMemUsage(64, &u), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtSetMemoryLimit(64, 1), npurtErrorInvalidDevice);
	size_t lim = 0;
	EXPECT_EQ(npurtGetMemoryLimit(0, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGetMemoryLimit(-3, &lim), npurtErrorInvalidDevice);
	for (double f : {0.0, -0.5, 1.5, std::nan("")}) {
		EXPECT_EQ(npurtSetMemoryFraction(0, f), npurtErrorInvalidValue) << f;
		EXPECT_TRUE(contains(lastMessage(), "must be in (0, 1]")) << lastMessage();
	}
	ASSERT_EQ(npurtGetMemoryLimit(0, &lim), npurtSuccess);
	EXPECT_EQ(lim, 0u) << "a refused fraction changed the limit";
	npurtGetLastError();
}

TEST_F(MemUsage, FractionOfTheDevice)
{
	npurtMemUsage u = usage();
	ASSERT_EQ(npurtSetMemoryFraction(0, 0.5), npurtSuccess) << lastMessage();
	size_t lim = 0;
	ASSERT_EQ(npurtGetMemoryLimit(0, &lim), npurtSuccess);
	EXPECT_EQ(lim, u.totalBytes / 2);
	EXPECT_EQ(usage().limitBytes, u.totalBytes / 2);
	ASSERT_EQ(npurtSetMemoryFraction(0, 1.0), npurtSuccess);
	ASSERT_EQ(npurtGetMemoryLimit(0, &lim), npurtSuccess);
	EXPECT_EQ(lim, u.totalBytes);
	ASSERT_EQ(npurtSetMemoryLimit(0, 0), npurtSuccess);
	EXPECT_EQ(usage().limitBytes, 0u);
}

TEST_F(MemUsage, LimitRefusesGrowthAndSaysSo)
{
	npurtMemUsage u = usage();
	// Room for one more 20 MiB segment, not for two.
	const size_t limit = u.processReservedBytes + 30 * kMiB;
	ASSERT_EQ(npurtSetMemoryLimit(0, limit), npurtSuccess);
	npurtMemStats st0{};
	npurtMemGetStats(&st0);
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 20 * kMiB), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMalloc(&b, 20 * kMiB), npurtErrorMemoryAllocation);
	EXPECT_EQ(b, nullptr);
	std::string msg = lastMessage();
	EXPECT_TRUE(contains(msg, "out of device memory")) << msg;
	EXPECT_TRUE(contains(msg, "per-process limit")) << msg;
	EXPECT_TRUE(contains(msg, "set_per_process_memory_fraction")) << msg;
	npurtMemStats st1{};
	npurtMemGetStats(&st1);
	EXPECT_EQ(st1.ooms, st0.ooms + 1);
	EXPECT_LE(usage().processReservedBytes, limit);
	// A request whose segment fits beside it still works (a small one: a
	// 2 MiB segment); the device is not full, so this was the limit's doing.
	void *c = nullptr;
	ASSERT_EQ(npurtMalloc(&c, 1 * kMiB), npurtSuccess) << lastMessage();
	EXPECT_GT(usage().freeBytes, 40 * kMiB);
	// The limit lifted, the same request succeeds.
	ASSERT_EQ(npurtSetMemoryLimit(0, 0), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&b, 20 * kMiB), npurtSuccess) << lastMessage();
	for (void *p : {a, b, c})
		EXPECT_EQ(npurtFree(p), npurtSuccess);
}

TEST_F(MemUsage, LimitFirstEmptiesTheCache)
{
	// A cached 40 MiB segment, then a limit that leaves no room beside it:
	// a request the cached block cannot serve (a small one, from the other
	// pool) gives the cache back and fits.
	void *a = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 40 * kMiB), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	npurtMemUsage u = usage();
	ASSERT_EQ(npurtSetMemoryLimit(0, u.processReservedBytes), npurtSuccess);
	npurtMemStats st0{};
	npurtMemGetStats(&st0);
	void *b = nullptr;
	ASSERT_EQ(npurtMalloc(&b, 4096), npurtSuccess) << lastMessage();
	npurtMemStats st1{};
	npurtMemGetStats(&st1);
	EXPECT_EQ(st1.cacheFlushes, st0.cacheFlushes + 1);
	EXPECT_LE(usage().processReservedBytes, u.processReservedBytes);
	EXPECT_EQ(npurtFree(b), npurtSuccess);
}

TEST_F(MemUsage, LimitHoldsUnderThreads)
{
	npurtMemUsage u = usage();
	const size_t limit = u.processReservedBytes + 64 * kMiB;
	ASSERT_EQ(npurtSetMemoryLimit(0, limit), npurtSuccess);
	std::vector<std::vector<void *>> got(4);
	std::vector<std::thread> threads;
	for (auto &mine : got)
		threads.emplace_back([&mine] {
			npurtSetDevice(0);
			for (int i = 0; i < 16; i++) {
				void *p = nullptr;
				if (npurtMalloc(&p, 12 * kMiB) == npurtSuccess)
					mine.push_back(p);
				else
					npurtGetLastError();
			}
		});
	for (auto &t : threads)
		t.join();
	size_t n = 0;
	for (auto &mine : got)
		n += mine.size();
	EXPECT_GE(n, 4u) << "the limit left room for more";
	EXPECT_LE(usage().processReservedBytes, limit);
	for (auto &mine : got)
		for (void *p : mine)
			EXPECT_EQ(npurtFree(p), npurtSuccess);
}

// The other process of LimitIsPerProcess: holds the limit's worth and more
// with no limit of its own, while the parent has one.
TEST(MemUsageChild, AllocatesPastTheParentsLimit)
{
	const char *want = std::getenv("NPURT_TEST_MEM_CHILD_MB");
	if (!want)
		GTEST_SKIP() << "run by MemUsage.LimitIsPerProcess";
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	npurtMemUsage u = usage();
	EXPECT_EQ(u.limitBytes, 0u) << "the parent's limit reached this process";
	void *p = nullptr;
	ASSERT_EQ(npurtMalloc(&p, std::strtoull(want, nullptr, 10) * kMiB), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(npurtFree(p), npurtSuccess);
}

// npurtMemResetPeakStats brings peaks down to the current values;
// npurtMemResetAccumulatedStats zeroes the counters and keeps the gauges.
TEST_F(MemUsage, PeakAndAccumulatedResets)
{
	void *a = nullptr, *h = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 8 * kMiB), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocHost(&h, 4096), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	ASSERT_EQ(npurtFreeHost(h), npurtSuccess);
	npurtMemStats st{};
	npurtHostMemStats hs{};
	ASSERT_EQ(npurtMemGetStats(&st), npurtSuccess);
	ASSERT_EQ(npurtHostMemGetStats(&hs), npurtSuccess);
	EXPECT_GT(st.allocCalls, 0u);
	EXPECT_GT(st.freeCalls, 0u);
	EXPECT_GT(hs.allocCalls, 0u);
	EXPECT_GE(st.allocatedBytesPeak, st.allocatedBytes + 8 * kMiB);
	const uint64_t reserved = st.reservedBytes, peak = st.allocatedBytesPeak;

	ASSERT_EQ(npurtMemResetAccumulatedStats(), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemGetStats(&st), npurtSuccess);
	ASSERT_EQ(npurtHostMemGetStats(&hs), npurtSuccess);
	EXPECT_EQ(st.allocCalls, 0u);
	EXPECT_EQ(st.freeCalls, 0u);
	EXPECT_EQ(st.deviceAllocs, 0u);
	EXPECT_EQ(st.deviceFrees, 0u);
	EXPECT_EQ(st.ooms, 0u);
	EXPECT_EQ(st.cacheFlushes, 0u);
	EXPECT_EQ(hs.allocCalls, 0u);
	EXPECT_EQ(hs.freeCalls, 0u);
	EXPECT_EQ(hs.cacheHits, 0u);
	EXPECT_EQ(st.reservedBytes, reserved) << "gauges stay";
	EXPECT_EQ(st.allocatedBytesPeak, peak) << "peaks stay";

	ASSERT_EQ(npurtMemResetPeakStats(), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemGetStats(&st), npurtSuccess);
	EXPECT_EQ(st.allocatedBytesPeak, st.allocatedBytes);
	EXPECT_EQ(st.reservedBytesPeak, st.reservedBytes);
	ASSERT_EQ(npurtMalloc(&a, 4096), npurtSuccess);
	ASSERT_EQ(npurtMemGetStats(&st), npurtSuccess);
	EXPECT_EQ(st.allocCalls, 1u);
	EXPECT_EQ(npurtFree(a), npurtSuccess);
}

TEST_F(MemUsage, LimitIsPerProcess)
{
	npurtMemUsage u = usage();
	ASSERT_EQ(npurtSetMemoryLimit(0, u.processReservedBytes + 16 * kMiB), npurtSuccess);
	void *p = nullptr;
	EXPECT_EQ(npurtMalloc(&p, 64 * kMiB), npurtErrorMemoryAllocation);
	npurtGetLastError();
	npurt_test::ChildResult r =
	        npurt_test::runChild("MemUsageChild.*", {"NPURT_TEST_MEM_CHILD_MB=64"});
	ASSERT_FALSE(r.timedOut) << npurt_test::indented(r.output);
	ASSERT_TRUE(WIFEXITED(r.status)) << npurt_test::indented(r.output);
	EXPECT_EQ(WEXITSTATUS(r.status), 0) << npurt_test::indented(r.output);
	EXPECT_TRUE(contains(r.output, "[  PASSED  ] 1 test.")) << npurt_test::indented(r.output);
}

struct Snapshot {
	std::vector<npurtMemSegmentInfo> segments;
	std::vector<npurtMemBlockInfo> blocks;
	const npurtMemBlockInfo *block(const void *p) const
	{
		for (const auto &b : blocks)
			if (b.address == reinterpret_cast<uint64_t>(p))
				return &b;
		return nullptr;
	}
};

Snapshot snapshot()
{
	Snapshot s;
	size_t ns = 0, nb = 0;
	EXPECT_EQ(npurtMemGetSnapshot(nullptr, &ns, nullptr, &nb), npurtSuccess) << lastMessage();
	s.segments.resize(ns);
	s.blocks.resize(nb);
	EXPECT_EQ(npurtMemGetSnapshot(s.segments.data(), &ns, s.blocks.data(), &nb), npurtSuccess)
	        << lastMessage();
	s.segments.resize(ns);
	s.blocks.resize(nb);
	return s;
}

TEST_F(MemUsage, SnapshotShowsSegmentsAndBlocks)
{
	void *a = nullptr, *b = nullptr, *big = nullptr;
	ASSERT_EQ(npurtSetCallSite("train.py", 42, "step"), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&a, 1000), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMalloc(&b, 3000), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMalloc(&big, 12 * kMiB), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(b), npurtSuccess);
	Snapshot s = snapshot();
	ASSERT_FALSE(s.segments.empty());
	// Segments in address order, their blocks tiling them exactly.
	uint64_t lastEnd = 0;
	for (const auto &seg : s.segments) {
		EXPECT_GE(seg.address, lastEnd);
		lastEnd = seg.address + seg.size;
		ASSERT_LE(seg.firstBlock + seg.blocks, s.blocks.size());
		uint64_t at = seg.address, allocated = 0;
		for (uint32_t i = seg.firstBlock; i < seg.firstBlock + seg.blocks; i++) {
			EXPECT_EQ(s.blocks[i].address, at);
			at += s.blocks[i].size;
			if (s.blocks[i].state == npurtMemBlockAllocated)
				allocated += s.blocks[i].size;
		}
		EXPECT_EQ(at, seg.address + seg.size);
		EXPECT_EQ(allocated, seg.allocatedBytes);
	}
	const npurtMemBlockInfo *ba = s.block(a);
	ASSERT_NE(ba, nullptr);
	EXPECT_EQ(ba->state, npurtMemBlockAllocated);
	EXPECT_EQ(ba->requestedSize, 1000u);
	EXPECT_EQ(ba->size, 1024u);
	EXPECT_EQ(s.segments[ba->segment].small, 1u);
	// The call site set for the next enqueue names the allocation too (and
	// is not used up by it).
	ASSERT_NE(ba->callSite, nullptr);
	EXPECT_TRUE(contains(ba->callSite, "train.py:42")) << ba->callSite;
	const npurtMemBlockInfo *bb = s.block(b);
	ASSERT_NE(bb, nullptr);
	EXPECT_NE(bb->state, npurtMemBlockAllocated);
	EXPECT_EQ(bb->requestedSize, 0u);
	EXPECT_EQ(bb->callSite, nullptr);
	const npurtMemBlockInfo *bg = s.block(big);
	ASSERT_NE(bg, nullptr);
	EXPECT_EQ(bg->requestedSize, 12 * kMiB);
	EXPECT_EQ(s.segments[bg->segment].small, 0u);
	npurtMemStats st{};
	npurtMemGetStats(&st);
	uint64_t reserved = 0;
	for (const auto &seg : s.segments)
		reserved += seg.size;
	EXPECT_EQ(reserved, st.reservedBytes);
	EXPECT_EQ(npurtFree(a), npurtSuccess);
	EXPECT_EQ(npurtFree(big), npurtSuccess);
	// Without a call site: the caller's return address. An enqueue uses
	// the pending site up.
	ASSERT_EQ(npurtMalloc(&b, 512), npurtSuccess);
	ASSERT_EQ(npurtMemset(b, 0, 512), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMalloc(&a, 512), npurtSuccess);
	const npurtMemBlockInfo *plain = snapshot().block(a);
	ASSERT_NE(plain, nullptr);
	EXPECT_EQ(plain->callSite, nullptr);
	EXPECT_NE(plain->returnAddress, nullptr);
	EXPECT_EQ(npurtFree(a), npurtSuccess);
	EXPECT_EQ(npurtFree(b), npurtSuccess);
}

TEST_F(MemUsage, SnapshotArraysTooSmall)
{
	void *a = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 4096), npurtSuccess);
	size_t ns = 0, nb = 0;
	EXPECT_EQ(npurtMemGetSnapshot(nullptr, nullptr, nullptr, &nb), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemGetSnapshot(nullptr, &ns, nullptr, nullptr), npurtErrorInvalidValue);
	ns = 1;
	EXPECT_EQ(npurtMemGetSnapshot(nullptr, &ns, nullptr, &nb), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "non-zero count with a null array")) << lastMessage();
	ns = nb = 0;
	ASSERT_EQ(npurtMemGetSnapshot(nullptr, &ns, nullptr, &nb), npurtSuccess);
	ASSERT_GE(nb, 2u);  // a's block and the rest of its segment
	std::vector<npurtMemSegmentInfo> segs(ns);
	std::vector<npurtMemBlockInfo> blocks(nb - 1);
	size_t ns2 = ns, nb2 = nb - 1;
	EXPECT_EQ(npurtMemGetSnapshot(segs.data(), &ns2, blocks.data(), &nb2),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "the counts now say what is needed")) << lastMessage();
	EXPECT_EQ(ns2, ns);
	EXPECT_EQ(nb2, nb);
	EXPECT_EQ(npurtFree(a), npurtSuccess);
	npurtGetLastError();
}

struct Observed {
	int calls = 0;
	int device = -1;
	size_t requested = 0;
	std::string message;
	bool allocateInside = false;
	npurtError_t inside = npurtSuccess;
};

void observe(int device, size_t requested, const char *message, void *user)
{
	auto *o = static_cast<Observed *>(user);
	o->calls++;
	o->device = device;
	o->requested = requested;
	o->message = message;
	// What a framework's observer does: look at the pool.
	size_t ns = 0, nb = 0;
	npurtMemGetSnapshot(nullptr, &ns, nullptr, &nb);
	if (o->allocateInside) {
		void *p = nullptr;
		o->inside = npurtMalloc(&p, requested);  // fails again: no second call
	}
}

TEST_F(MemUsage, OomObserverSeesTheFailure)
{
	Observed o;
	o.allocateInside = true;
	ASSERT_EQ(npurtMemSetOomObserver(&observe, &o), npurtSuccess);
	ASSERT_EQ(npurtSetMemoryLimit(0, usage().processReservedBytes + 8 * kMiB), npurtSuccess);
	void *p = nullptr;
	EXPECT_EQ(npurtMalloc(&p, 32 * kMiB), npurtErrorMemoryAllocation);
	// The caller's message survives what the observer did.
	EXPECT_TRUE(contains(lastMessage(), "per-process limit")) << lastMessage();
	EXPECT_EQ(o.calls, 1);
	EXPECT_EQ(o.device, 0);
	EXPECT_EQ(o.requested, 32 * kMiB);
	EXPECT_TRUE(contains(o.message, "per-process limit")) << o.message;
	EXPECT_EQ(o.inside, npurtErrorMemoryAllocation);
	// Success is not observed; removed, it is not called.
	ASSERT_EQ(npurtMalloc(&p, 1 * kMiB), npurtSuccess);
	EXPECT_EQ(npurtFree(p), npurtSuccess);
	ASSERT_EQ(npurtMemSetOomObserver(nullptr, nullptr), npurtSuccess);
	EXPECT_EQ(npurtMalloc(&p, 32 * kMiB), npurtErrorMemoryAllocation);
	EXPECT_EQ(o.calls, 1);
	npurtGetLastError();
}

std::vector<npurtMemTraceEntry> history()
{
	size_t n = 0;
	EXPECT_EQ(npurtMemGetHistory(nullptr, &n), npurtSuccess) << lastMessage();
	std::vector<npurtMemTraceEntry> h(n);
	EXPECT_EQ(npurtMemGetHistory(h.data(), &n), npurtSuccess) << lastMessage();
	h.resize(n);
	return h;
}

// The events of one address, oldest first.
std::vector<npurtMemTraceEntry> eventsOf(const std::vector<npurtMemTraceEntry> &h, void *p)
{
	std::vector<npurtMemTraceEntry> out;
	for (const auto &e : h)
		if (e.address == reinterpret_cast<uint64_t>(p) &&
		    e.action != npurtMemTraceSegmentAlloc && e.action != npurtMemTraceSegmentFree)
			out.push_back(e);
	return out;
}

TEST_F(MemUsage, HistoryRecordsAllocationsFreesAndStreams)
{
	size_t n = 5;
	EXPECT_EQ(npurtMemGetHistory(nullptr, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemGetHistory(nullptr, &n), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "non-zero count with a null array")) << lastMessage();
	EXPECT_TRUE(history().empty());  // off by default

	ASSERT_EQ(npurtMemRecordHistory(1000), npurtSuccess);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking), npurtSuccess);
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtSetCallSite("train.py", 7, "step"), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&a, 4096), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocAsync(&b, 8192, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(b, 1, 8192, s), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(b, s), npurtSuccess);
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess);
	npurtMemEmptyCache();  // polls the parked blocks back, gives segments back

	std::vector<npurtMemTraceEntry> h = history();
	for (size_t i = 1; i < h.size(); i++)
		EXPECT_GE(h[i].timeNs, h[i - 1].timeNs);
	std::vector<npurtMemTraceEntry> ea = eventsOf(h, a);
	ASSERT_EQ(ea.size(), 3u);
	EXPECT_EQ(ea[0].action, npurtMemTraceAlloc);
	EXPECT_EQ(ea[0].size, 4096u);
	ASSERT_NE(ea[0].callSite, nullptr);
	EXPECT_TRUE(contains(ea[0].callSite, "train.py:7")) << ea[0].callSite;
	EXPECT_EQ(ea[1].action, npurtMemTraceFreeRequested);
	EXPECT_EQ(ea[2].action, npurtMemTraceFreeCompleted);
	std::vector<npurtMemTraceEntry> eb = eventsOf(h, b);
	ASSERT_EQ(eb.size(), 3u);
	EXPECT_EQ(eb[0].action, npurtMemTraceAlloc);
	EXPECT_EQ(eb[0].stream, s);
	EXPECT_EQ(eb[1].action, npurtMemTraceFreeRequested);
	EXPECT_EQ(eb[1].stream, s);
	EXPECT_EQ(eb[2].action, npurtMemTraceFreeCompleted);
	bool segmentFreed = false;
	for (const auto &e : h)
		segmentFreed = segmentFreed || e.action == npurtMemTraceSegmentFree;
	EXPECT_TRUE(segmentFreed);

	// Too small an array: the count says what is needed, nothing else moves.
	n = h.size() - 1;
	std::vector<npurtMemTraceEntry> small(n);
	EXPECT_EQ(npurtMemGetHistory(small.data(), &n), npurtErrorInvalidValue);
	EXPECT_EQ(n, h.size());
	EXPECT_TRUE(contains(lastMessage(), "the count now says what is needed")) << lastMessage();

	// A destroyed stream is no longer named.
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess);
	eb = eventsOf(history(), b);
	ASSERT_FALSE(eb.empty());
	EXPECT_EQ(eb[0].stream, nullptr);

	// Failures are events: the bytes asked for, the device's free bytes.
	ASSERT_EQ(npurtSetMemoryLimit(0, usage().processReservedBytes + 8 * kMiB), npurtSuccess);
	void *p = nullptr;
	EXPECT_EQ(npurtMalloc(&p, 32 * kMiB), npurtErrorMemoryAllocation);
	npurtGetLastError();
	h = history();
	ASSERT_FALSE(h.empty());
	EXPECT_EQ(h.back().action, npurtMemTraceOom);
	EXPECT_EQ(h.back().size, 32 * kMiB);
	size_t freeB = 0, total = 0;
	ASSERT_EQ(npurtMemGetInfo(&freeB, &total), npurtSuccess);
	EXPECT_GT(h.back().address, 0u);
	EXPECT_LE(h.back().address, total);

	// Off: emptied, and nothing more is kept.
	ASSERT_EQ(npurtMemRecordHistory(0), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&p, 4096), npurtSuccess);
	EXPECT_EQ(npurtFree(p), npurtSuccess);
	EXPECT_TRUE(history().empty());
}

}  // namespace

// Stream-ordered allocation and memory pools against the real module (run
// in the VM): reuse on the freeing stream, across streams with and without
// event ordering (never early), the policies, pools' attributes, release
// threshold, maxSize, destroy with allocations left, errors, threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gate.h"
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

uint64_t addr(const void *p)
{
	return reinterpret_cast<uint64_t>(p);
}

bool disjoint(const void *a, const void *b, size_t n)
{
	return addr(a) + n <= addr(b) || addr(b) + n <= addr(a);
}

npurtMemPoolProps propsOf(int device)
{
	npurtMemPoolProps p{};
	p.allocType = npurtMemAllocationTypePinned;
	p.handleTypes = npurtMemHandleTypeNone;
	p.location.type = npurtMemLocationTypeDevice;
	p.location.id = device;
	return p;
}

// Every byte of n at device pointer p is v.
bool holds(const void *p, int v, size_t n)
{
	std::vector<unsigned char> h(n);
	if (npurtMemcpy(h.data(), p, n, npurtMemcpyDeviceToHost) != npurtSuccess)
		return false;
	for (unsigned char c : h)
		if (c != static_cast<unsigned char>(v))
			return false;
	return true;
}

class MemPools : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtStreamCreateWithFlags(&a_, npurtStreamNonBlocking), npurtSuccess);
		ASSERT_EQ(npurtStreamCreateWithFlags(&b_, npurtStreamNonBlocking), npurtSuccess);
	}
	void TearDown() override
	{
		if (gateHeld_)
			gate_.open();
		EXPECT_EQ(npurtStreamSynchronize(a_), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtStreamSynchronize(b_), npurtSuccess) << lastMessage();
		npurtStreamDestroy(a_);
		npurtStreamDestroy(b_);
		for (npurtMemPool_t p : pools_)
			npurtMemPoolDestroy(p);
		npurtGetLastError();
	}
	// Holds stream a_ until release(): work enqueued on it waits.
	void hold()
	{
		ASSERT_EQ(npurtLaunchHostFunc(a_, Gate::hostFn, &gate_), npurtSuccess);
		gateHeld_ = true;
	}
	void release()
	{
		gate_.open();
		gateHeld_ = false;
	}
	npurtMemPool_t newPool()
	{
		npurtMemPool_t p = nullptr;
		npurtMemPoolProps props = propsOf(0);
		EXPECT_EQ(npurtMemPoolCreate(&p, &props), npurtSuccess) << lastMessage();
		pools_.push_back(p);
		return p;
	}
	npurtStream_t a_ = nullptr, b_ = nullptr;
	Gate gate_;
	bool gateHeld_ = false;
	std::vector<npurtMemPool_t> pools_;
};

TEST_F(MemPools, TheFreeingStreamReusesAtOnceWithoutWaiting)
{
	hold();
	void *x = nullptr, *y = nullptr;
	ASSERT_EQ(npurtMallocAsync(&x, 64 * 1024, a_), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(x, 0x11, 64 * 1024, a_), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocAsync(&y, 64 * 1024, a_), npurtSuccess);
	EXPECT_EQ(y, x) << "stream order makes the freed block the stream's at once";
	EXPECT_FALSE(gate_.isOpen()) << "nothing waited for the held stream";
	ASSERT_EQ(npurtMemsetAsync(y, 0x22, 64 * 1024, a_), npurtSuccess);
	release();
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	EXPECT_TRUE(holds(y, 0x22, 64 * 1024));
	EXPECT_EQ(npurtFreeAsync(y, a_), npurtSuccess);
}

TEST_F(MemPools, AnUnorderedStreamNeverReusesEarly)
{
	hold();
	void *x = nullptr, *y = nullptr;
	const size_t n = 256 * 1024;
	ASSERT_EQ(npurtMallocAsync(&x, n, a_), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(x, 0x11, n, a_), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	// b_ has no ordering with a_, whose memset has not run yet.
	ASSERT_EQ(npurtMallocAsync(&y, n, b_), npurtSuccess) << lastMessage();
	EXPECT_TRUE(disjoint(x, y, n)) << "reused memory the held stream still writes";
	ASSERT_EQ(npurtMemsetAsync(y, 0x22, n, b_), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(b_), npurtSuccess);
	release();
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	EXPECT_TRUE(holds(y, 0x22, n)) << "the held stream's memset reached b's memory";
	EXPECT_EQ(npurtFreeAsync(y, b_), npurtSuccess);
}

TEST_F(MemPools, AStreamThatWaitedForAnEventAfterTheFreeReuses)
{
	hold();
	void *x = nullptr, *y = nullptr;
	const size_t n = 128 * 1024;
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventDisableTiming), npurtSuccess);
	ASSERT_EQ(npurtMallocAsync(&x, n, a_), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(x, 0x11, n, a_), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(ev, a_), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(b_, ev, 0), npurtSuccess);
	ASSERT_EQ(npurtMallocAsync(&y, n, b_), npurtSuccess);
	EXPECT_EQ(y, x) << "b waited for the free: the block is its";
	// b's memset runs after a's (the event), so it is what stays.
	ASSERT_EQ(npurtMemsetAsync(y, 0x33, n, b_), npurtSuccess);
	release();
	ASSERT_EQ(npurtStreamSynchronize(b_), npurtSuccess);
	EXPECT_TRUE(holds(y, 0x33, n));
	EXPECT_EQ(npurtFreeAsync(y, b_), npurtSuccess);
	EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
}

TEST_F(MemPools, AnEventRecordedBeforeTheFreeOrdersNothing)
{
	hold();
	void *x = nullptr, *y = nullptr;
	const size_t n = 128 * 1024;
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventDisableTiming), npurtSuccess);
	ASSERT_EQ(npurtMallocAsync(&x, n, a_), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(ev, a_), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(x, 0x11, n, a_), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(b_, ev, 0), npurtSuccess);
	ASSERT_EQ(npurtMallocAsync(&y, n, b_), npurtSuccess);
	EXPECT_TRUE(disjoint(x, y, n)) << "the event came before the free";
	release();
	EXPECT_EQ(npurtFreeAsync(y, b_), npurtSuccess);
	EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
}

TEST_F(MemPools, OpportunisticReuseOnlyOnceTheFreeCompletedAndOnlyIfAllowed)
{
	npurtMemPool_t pool = newPool();
	int v = -1;
	ASSERT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolReuseAllowOpportunistic, &v),
	          npurtSuccess);
	EXPECT_EQ(v, 1);
	uint64_t keep = UINT64_MAX;  // no trim at the syncs below
	ASSERT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolAttrReleaseThreshold, &keep),
	          npurtSuccess);
	void *x = nullptr, *y = nullptr;
	ASSERT_EQ(npurtMallocFromPoolAsync(&x, 4096, pool, a_), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	ASSERT_EQ(npurtMallocFromPoolAsync(&y, 4096, pool, b_), npurtSuccess);
	EXPECT_EQ(y, x) << "the free completed: any stream may have it";
	ASSERT_EQ(npurtFreeAsync(y, b_), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(b_), npurtSuccess);

	v = 0;
	ASSERT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolReuseAllowOpportunistic, &v),
	          npurtSuccess);
	void *z = nullptr;
	ASSERT_EQ(npurtMallocFromPoolAsync(&z, 4096, pool, a_), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(z, a_), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	void *w = nullptr;
	ASSERT_EQ(npurtMallocFromPoolAsync(&w, 4096, pool, b_), npurtSuccess);
	EXPECT_NE(w, z) << "not opportunistic: b is not ordered after a's free";
	void *u = nullptr;
	ASSERT_EQ(npurtMallocFromPoolAsync(&u, 4096, pool, a_), npurtSuccess);
	EXPECT_EQ(u, z);
	EXPECT_EQ(npurtFreeAsync(w, b_), npurtSuccess);
	EXPECT_EQ(npurtFreeAsync(u, a_), npurtSuccess);
}

TEST_F(MemPools, AttributesAndTheReleaseThreshold)
{
	npurtMemPool_t pool = newPool();
	int v = -1;
	uint64_t u = 1;
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolReuseFollowEventDependencies, &v),
	          npurtSuccess);
	EXPECT_EQ(v, 1);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolReuseAllowInternalDependencies, &v),
	          npurtSuccess);
	EXPECT_EQ(v, 0);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReleaseThreshold, &u),
	          npurtSuccess);
	EXPECT_EQ(u, 0u) << "CUDA's default for a new pool";
	v = 1;
	EXPECT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolReuseAllowInternalDependencies, &v),
	          npurtErrorNotSupported);
	EXPECT_TRUE(contains(lastMessage(), "events"));
	v = 2;
	EXPECT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolReuseAllowOpportunistic, &v),
	          npurtErrorInvalidValue);
	u = 5;
	EXPECT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolAttrReservedMemHigh, &u),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolAttrUsedMemCurrent, &u),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolSetAttribute(pool, static_cast<npurtMemPoolAttr>(99), &u),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrUsedMemCurrent, nullptr),
	          npurtErrorInvalidValue);

	void *x = nullptr;
	ASSERT_EQ(npurtMallocFromPoolAsync(&x, 3 * kMiB, pool, a_), npurtSuccess);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrUsedMemCurrent, &u), npurtSuccess);
	EXPECT_EQ(u, 3 * kMiB);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReservedMemCurrent, &u),
	          npurtSuccess);
	EXPECT_GE(u, 3 * kMiB);
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	// Threshold 0: the synchronisation gives the cache back.
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReservedMemCurrent, &u),
	          npurtSuccess);
	EXPECT_EQ(u, 0u);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReservedMemHigh, &u),
	          npurtSuccess);
	EXPECT_GE(u, 3 * kMiB);
	u = 0;
	EXPECT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolAttrReservedMemHigh, &u),
	          npurtSuccess);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReservedMemHigh, &u),
	          npurtSuccess);
	EXPECT_EQ(u, 0u);

	// A high threshold keeps it until TrimTo.
	u = 1ull << 40;
	ASSERT_EQ(npurtMemPoolSetAttribute(pool, npurtMemPoolAttrReleaseThreshold, &u),
	          npurtSuccess);
	ASSERT_EQ(npurtMallocFromPoolAsync(&x, 3 * kMiB, pool, a_), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReservedMemCurrent, &u),
	          npurtSuccess);
	EXPECT_GE(u, 3 * kMiB);
	EXPECT_EQ(npurtMemPoolTrimTo(pool, 0), npurtSuccess);
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrReservedMemCurrent, &u),
	          npurtSuccess);
	EXPECT_EQ(u, 0u);
}

TEST_F(MemPools, MaxSizeCapsThePoolAndSaysSo)
{
	npurtMemPoolProps props = propsOf(0);
	props.maxSize = 4 * kMiB;
	npurtMemPool_t pool = nullptr;
	ASSERT_EQ(npurtMemPoolCreate(&pool, &props), npurtSuccess);
	pools_.push_back(pool);
	void *x = nullptr, *y = nullptr;
	ASSERT_EQ(npurtMallocFromPoolAsync(&x, 512 * 1024, pool, a_), npurtSuccess);
	EXPECT_EQ(npurtMallocFromPoolAsync(&y, 16 * kMiB, pool, a_), npurtErrorMemoryAllocation);
	EXPECT_TRUE(contains(lastMessage(), "maxSize")) << lastMessage();
	EXPECT_EQ(y, nullptr);
	EXPECT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
}

TEST_F(MemPools, TheDevicesCurrentPoolServesMallocAsync)
{
	npurtMemPool_t def = nullptr, cur = nullptr;
	ASSERT_EQ(npurtDeviceGetDefaultMemPool(&def, 0), npurtSuccess);
	ASSERT_EQ(npurtDeviceGetMemPool(&cur, 0), npurtSuccess);
	EXPECT_EQ(cur, def);
	EXPECT_EQ(npurtMemPoolDestroy(def), npurtErrorInvalidValue) << "the default pool stays";
	uint64_t keep = UINT64_MAX;
	EXPECT_EQ(npurtMemPoolGetAttribute(def, npurtMemPoolAttrReleaseThreshold, &keep),
	          npurtSuccess);
	EXPECT_EQ(keep, UINT64_MAX) << "the default pool keeps npurtMalloc's cache";

	npurtMemPool_t pool = newPool();
	ASSERT_EQ(npurtDeviceSetMemPool(0, pool), npurtSuccess);
	ASSERT_EQ(npurtDeviceGetMemPool(&cur, 0), npurtSuccess);
	EXPECT_EQ(cur, pool);
	void *x = nullptr;
	ASSERT_EQ(npurtMallocAsync(&x, 1 * kMiB, a_), npurtSuccess);
	uint64_t used = 0;
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrUsedMemCurrent, &used),
	          npurtSuccess);
	EXPECT_EQ(used, 1 * kMiB);
	// npurtFree takes memory of any pool.
	EXPECT_EQ(npurtFree(x), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolAttrUsedMemCurrent, &used),
	          npurtSuccess);
	EXPECT_EQ(used, 0u);
	int count = 0;
	ASSERT_EQ(npurtGetDeviceCount(&count), npurtSuccess);
	if (count > 1) {
		EXPECT_EQ(npurtDeviceSetMemPool(1, pool), npurtErrorInvalidDevice);
	}
	EXPECT_EQ(npurtDeviceSetMemPool(count, pool), npurtErrorInvalidDevice);
	// Destroying the current pool gives the device its default back.
	EXPECT_EQ(npurtMemPoolDestroy(pool), npurtSuccess);
	pools_.clear();
	ASSERT_EQ(npurtDeviceGetMemPool(&cur, 0), npurtSuccess);
	EXPECT_EQ(cur, def);
}

TEST_F(MemPools, DestroyWithAllocationsLeftKeepsThemValid)
{
	npurtMemPool_t pool = newPool();
	pools_.clear();
	void *x = nullptr;
	const size_t n = 64 * 1024;
	ASSERT_EQ(npurtMallocFromPoolAsync(&x, n, pool, a_), npurtSuccess);
	EXPECT_EQ(npurtMemPoolDestroy(pool), npurtSuccess);
	int v = 0;
	EXPECT_EQ(npurtMemPoolGetAttribute(pool, npurtMemPoolReuseAllowOpportunistic, &v),
	          npurtErrorInvalidValue)
	        << "a destroyed pool is no handle";
	EXPECT_TRUE(contains(lastMessage(), "not a memory pool"));
	ASSERT_EQ(npurtMemsetAsync(x, 0x44, n, a_), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
	EXPECT_TRUE(holds(x, 0x44, n));
	EXPECT_EQ(npurtFreeAsync(x, a_), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamSynchronize(a_), npurtSuccess);
}

TEST_F(MemPools, BadArgumentsSayWhy)
{
	void *x = nullptr;
	EXPECT_EQ(npurtMallocAsync(nullptr, 16, a_), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMallocAsync(&x, 0, a_), npurtSuccess);
	EXPECT_EQ(x, nullptr);
	EXPECT_EQ(npurtFreeAsync(nullptr, a_), npurtSuccess);
	EXPECT_EQ(npurtMallocFromPoolAsync(&x, 16, nullptr, a_), npurtErrorInvalidValue);
	int local = 0;
	EXPECT_EQ(npurtFreeAsync(&local, a_), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not memory from npurtMallocAsync"));
	ASSERT_EQ(npurtMallocAsync(&x, 8192, a_), npurtSuccess);
	EXPECT_EQ(npurtFreeAsync(static_cast<char *>(x) + 512, a_), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not its start"));
	EXPECT_EQ(npurtFreeAsync(x, a_), npurtSuccess);
	EXPECT_EQ(npurtFreeAsync(x, a_), npurtErrorInvalidValue) << "freed is freed";
	EXPECT_EQ(npurtMallocAsync(&x, 16, reinterpret_cast<npurtStream_t>(0x1234)),
	          npurtErrorInvalidHandle);

	npurtMemPool_t pool = nullptr;
	npurtMemPoolProps p = propsOf(0);
	EXPECT_EQ(npurtMemPoolCreate(nullptr, &p), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolCreate(&pool, nullptr), npurtErrorInvalidValue);
	p.allocType = npurtMemAllocationTypeInvalid;
	EXPECT_EQ(npurtMemPoolCreate(&pool, &p), npurtErrorInvalidValue);
	p = propsOf(0);
	p.handleTypes = static_cast<npurtMemAllocationHandleType>(2);  // Win32
	EXPECT_EQ(npurtMemPoolCreate(&pool, &p), npurtErrorInvalidValue);
	p = propsOf(0);
	p.location.type = npurtMemLocationTypeInvalid;
	EXPECT_EQ(npurtMemPoolCreate(&pool, &p), npurtErrorInvalidValue);
	p = propsOf(0);
	p.reserved[53] = 1;
	EXPECT_EQ(npurtMemPoolCreate(&pool, &p), npurtErrorInvalidValue);
	p = propsOf(0);
	p.usage = 1;
	EXPECT_EQ(npurtMemPoolCreate(&pool, &p), npurtErrorInvalidValue);
	p = propsOf(-1);
	EXPECT_EQ(npurtMemPoolCreate(&pool, &p), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetDefaultMemPool(nullptr, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetDefaultMemPool(&pool, 99), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtMemPoolTrimTo(nullptr, 0), npurtErrorInvalidValue);
}

TEST_F(MemPools, ThreadsEachOnTheirStream)
{
	constexpr int kThreads = 4, kRounds = 40;
	std::vector<std::thread> threads;
	std::vector<int> bad(kThreads, 0);
	for (int t = 0; t < kThreads; t++) {
		threads.emplace_back([t, &bad] {
			npurtSetDevice(0);
			npurtStream_t s = nullptr;
			if (npurtStreamCreate(&s) != npurtSuccess) {
				bad[t]++;
				return;
			}
			for (int r = 0; r < kRounds; r++) {
				const size_t n = 4096u << (r % 6);
				void *x = nullptr;
				if (npurtMallocAsync(&x, n, s) != npurtSuccess ||
				    npurtMemsetAsync(x, t * 16 + r % 16, n, s) != npurtSuccess) {
					bad[t]++;
					continue;
				}
				std::vector<unsigned char> h(n);
				npurtMemcpyAsync(h.data(), x, n, npurtMemcpyDeviceToHost, s);
				npurtFreeAsync(x, s);
				npurtStreamSynchronize(s);
				for (unsigned char c : h)
					if (c != static_cast<unsigned char>(t * 16 + r % 16)) {
						bad[t]++;
						break;
					}
			}
			npurtStreamDestroy(s);
		});
	}
	for (auto &th : threads)
		th.join();
	for (int t = 0; t < kThreads; t++)
		EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST_F(MemPools, AccessIsReadWriteOnItsOwnDeviceOnly)
{
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	for (npurtMemPool_t pool : {newPool(), static_cast<npurtMemPool_t>(nullptr)}) {
		if (!pool) {
			ASSERT_EQ(npurtDeviceGetDefaultMemPool(&pool, 0), npurtSuccess);
		}
		npurtMemAccessDesc own{{npurtMemLocationTypeDevice, 0},
		                       npurtMemAccessFlagsProtReadWrite};
		EXPECT_EQ(npurtMemPoolSetAccess(pool, &own, 1), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtMemPoolSetAccess(pool, nullptr, 0), npurtSuccess);
		EXPECT_EQ(npurtMemPoolSetAccess(pool, nullptr, 1), npurtErrorInvalidValue);
		npurtMemAccessDesc bad = own;
		bad.flags = npurtMemAccessFlagsProtRead;
		EXPECT_EQ(npurtMemPoolSetAccess(pool, &bad, 1), npurtErrorNotSupported);
		EXPECT_TRUE(contains(lastMessage(), "always read-write on its own device"))
		        << lastMessage();
		bad.flags = static_cast<npurtMemAccessFlags>(2);
		EXPECT_EQ(npurtMemPoolSetAccess(pool, &bad, 1), npurtErrorInvalidValue);
		bad = own;
		bad.location.type = npurtMemLocationTypeInvalid;
		EXPECT_EQ(npurtMemPoolSetAccess(pool, &bad, 1), npurtErrorInvalidValue);
		bad = own;
		bad.location.id = n;
		EXPECT_EQ(npurtMemPoolSetAccess(pool, &bad, 1), npurtErrorInvalidDevice);

		npurtMemAccessFlags flags = npurtMemAccessFlagsProtNone;
		npurtMemLocation loc{npurtMemLocationTypeDevice, 0};
		ASSERT_EQ(npurtMemPoolGetAccess(&flags, pool, &loc), npurtSuccess);
		EXPECT_EQ(flags, npurtMemAccessFlagsProtReadWrite);
		EXPECT_EQ(npurtMemPoolGetAccess(nullptr, pool, &loc), npurtErrorInvalidValue);
		EXPECT_EQ(npurtMemPoolGetAccess(&flags, pool, nullptr), npurtErrorInvalidValue);
		loc.id = n;
		EXPECT_EQ(npurtMemPoolGetAccess(&flags, pool, &loc), npurtErrorInvalidDevice);
		if (n > 1) {
			// Another NPU: no access, and none can be given.
			loc.id = 1;
			ASSERT_EQ(npurtMemPoolGetAccess(&flags, pool, &loc), npurtSuccess);
			EXPECT_EQ(flags, npurtMemAccessFlagsProtNone);
			npurtMemAccessDesc peer{{npurtMemLocationTypeDevice, 1},
			                        npurtMemAccessFlagsProtReadWrite};
			EXPECT_EQ(npurtMemPoolSetAccess(pool, &peer, 1), npurtErrorNotSupported);
			EXPECT_TRUE(contains(lastMessage(), "npurtMemcpyPeer")) << lastMessage();
			peer.flags = npurtMemAccessFlagsProtNone;
			EXPECT_EQ(npurtMemPoolSetAccess(pool, &peer, 1), npurtSuccess);
		}
	}
	npurtGetLastError();
}

}  // namespace

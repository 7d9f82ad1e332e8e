// Context isolation and peer access (run in the VM): copies, fills and ops
// naming memory of another context fail until access is given; with it,
// the stream's own engines read and write the peer's memory in stream
// order; freed peer memory waits for the peers' queued work.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gate.h"
#include "npurt/npurt.h"

namespace {

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const char *what)
{
	return s.find(what) != std::string::npos;
}

std::vector<unsigned char> pattern(size_t n, unsigned mul, unsigned add)
{
	std::vector<unsigned char> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = static_cast<unsigned char>(i * mul + add);
	return v;
}

class Peer : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtGetDeviceCount(&count_), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
	void TearDown() override
	{
		// Whatever a test enabled goes, so that the next starts isolated.
		for (int d = 0; d < count_; d++) {
			npurtSetDevice(d);
			for (int p = 0; p < count_; p++)
				if (p != d)
					npurtDeviceDisablePeerAccess(p);
		}
		npurtSetDevice(0);
		npurtGetLastError();
	}
	// n bytes on the current device holding `bytes`.
	void *alloc(const std::vector<unsigned char> &bytes)
	{
		void *p = nullptr;
		EXPECT_EQ(npurtMalloc(&p, bytes.size()), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtMemcpy(p, bytes.data(), bytes.size(), npurtMemcpyHostToDevice),
		          npurtSuccess)
		        << lastMessage();
		return p;
	}
	// n bytes of device memory, read through its own context.
	std::vector<unsigned char> read(const void *p, size_t n)
	{
		std::vector<unsigned char> v(n);
		EXPECT_EQ(npurtMemcpy(v.data(), p, n, npurtMemcpyDeviceToHost), npurtSuccess)
		        << lastMessage();
		return v;
	}
	int count_ = 0;
};

// Two contexts of one device: nothing of one reaches the other's memory,
// until npurtCtxEnablePeerAccess.
TEST_F(Peer, ContextsOfOneDeviceAreIsolatedUntilAccessIsEnabled)
{
	const size_t n = 64 << 10;
	npurtContext_t primary = nullptr, other = nullptr;
	ASSERT_EQ(npurtCtxGetCurrent(&primary), npurtSuccess);
	void *mine = alloc(pattern(n, 3, 1));
	ASSERT_EQ(npurtCtxCreate(&other, 0, 0), npurtSuccess) << lastMessage();
	const auto theirs_bytes = pattern(n, 5, 2);
	void *theirs = alloc(theirs_bytes);
	npurtStream_t os = nullptr;
	ASSERT_EQ(npurtStreamCreate(&os), npurtSuccess);
	ASSERT_EQ(npurtCtxSetCurrent(primary), npurtSuccess);
	npurtStream_t ps = nullptr;
	ASSERT_EQ(npurtStreamCreate(&ps), npurtSuccess);

	std::vector<unsigned char> host(n);
	EXPECT_EQ(npurtMemcpy(mine, theirs, n, npurtMemcpyDeviceToDevice), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "another context of NPU 0")) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), "npurtCtxEnablePeerAccess")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(theirs, mine, n, npurtMemcpyDefault, ps),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy(host.data(), theirs, n, npurtMemcpyDeviceToHost),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy(theirs, host.data(), n, npurtMemcpyHostToDevice),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemsetAsync(theirs, 0, n, ps), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemsetD32(theirs, 7, n / 4), npurtErrorInvalidValue);
	size_t sizes[2] = {16, 64}, strides[2] = {128, 2};
	EXPECT_EQ(npurtMemcpyStridedAsync(mine, strides, theirs, strides, sizes, 2, 2,
	                                  npurtMemcpyDeviceToDevice, ps),
	          npurtErrorInvalidValue);
	npurtGetLastError();
	// Nothing was written on either side.
	ASSERT_EQ(npurtCtxSetCurrent(other), npurtSuccess);
	EXPECT_EQ(read(theirs, n), theirs_bytes);
	// The other way round, from the other context's stream.
	EXPECT_EQ(npurtMemcpyAsync(theirs, mine, n, npurtMemcpyDeviceToDevice, os),
	          npurtErrorInvalidValue);
	npurtGetLastError();

	// Access is one way: the primary context reaches the other's memory.
	ASSERT_EQ(npurtCtxSetCurrent(primary), npurtSuccess);
	ASSERT_EQ(npurtCtxEnablePeerAccess(other, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtCtxEnablePeerAccess(other, 0), npurtErrorPeerAccessAlreadyEnabled);
	EXPECT_EQ(npurtCtxEnablePeerAccess(primary, 0), npurtErrorInvalidValue)
	        << "a context is not its own peer";
	EXPECT_EQ(npurtCtxEnablePeerAccess(other, 1), npurtErrorInvalidValue);
	npurtGetLastError();
	ASSERT_EQ(npurtMemcpyAsync(mine, theirs, n, npurtMemcpyDeviceToDevice, ps), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(ps), npurtSuccess) << lastMessage();
	EXPECT_EQ(read(mine, n), theirs_bytes);
	ASSERT_EQ(npurtMemsetAsync(theirs, 0x42, n, ps), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(ps), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtCtxSetCurrent(other), npurtSuccess);
	EXPECT_EQ(read(theirs, n), std::vector<unsigned char>(n, 0x42));
	EXPECT_EQ(npurtMemcpyAsync(theirs, mine, n, npurtMemcpyDeviceToDevice, os),
	          npurtErrorInvalidValue)
	        << "the other context was given no access";
	npurtGetLastError();

	// Disabled, it is isolated again; disabling twice says so.
	ASSERT_EQ(npurtCtxSetCurrent(primary), npurtSuccess);
	ASSERT_EQ(npurtCtxDisablePeerAccess(other), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtCtxDisablePeerAccess(other), npurtErrorPeerAccessNotEnabled);
	EXPECT_EQ(npurtMemcpy(mine, theirs, n, npurtMemcpyDeviceToDevice), npurtErrorInvalidValue);
	EXPECT_EQ(npurtCtxEnablePeerAccess(nullptr, 0), npurtErrorInvalidHandle);
	npurtGetLastError();

	// A destroyed peer's memory is no memory at all.
	ASSERT_EQ(npurtCtxEnablePeerAccess(other, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtCtxDestroy(other), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtCtxSetCurrent(primary), npurtSuccess);
	EXPECT_EQ(npurtMemcpy(mine, theirs, n, npurtMemcpyDeviceToDevice), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live device memory")) << lastMessage();
	EXPECT_EQ(npurtCtxDisablePeerAccess(other), npurtErrorInvalidHandle);
	npurtGetLastError();
	EXPECT_EQ(npurtStreamDestroy(ps), npurtSuccess);
	EXPECT_EQ(npurtFree(mine), npurtSuccess);
}

// Two NPUs with peer access: copies, fills and ops of one NPU's streams
// name the other's memory, including memory allocated after enabling, and
// run on the stream's own engines.
TEST_F(Peer, PeerAccessBetweenNpusReachesAllOfThePeersMemory)
{
	if (count_ < 2)
		GTEST_SKIP() << "needs two NPUs";
	int can = -1, v = -1;
	ASSERT_EQ(npurtDeviceCanAccessPeer(&can, 0, 1), npurtSuccess);
	EXPECT_EQ(can, 1);
	ASSERT_EQ(npurtDeviceCanAccessPeer(&can, 1, 1), npurtSuccess);
	EXPECT_EQ(can, 0) << "a device is not its own peer";
	ASSERT_EQ(npurtDeviceGetP2PAttribute(&v, npurtDevP2PAttrAccessSupported, 0, 1),
	          npurtSuccess);
	EXPECT_EQ(v, 1);
	ASSERT_EQ(npurtDeviceGetP2PAttribute(&v, npurtDevP2PAttrNativeAtomicSupported, 0, 1),
	          npurtSuccess);
	EXPECT_EQ(v, 0);
	EXPECT_EQ(npurtDeviceGetP2PAttribute(&v, static_cast<npurtDeviceP2PAttr>(99), 0, 1),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetP2PAttribute(&v, npurtDevP2PAttrAccessSupported, 0, 0),
	          npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetP2PAttribute(nullptr, npurtDevP2PAttrAccessSupported, 0, 1),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceEnablePeerAccess(0, 0), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceEnablePeerAccess(count_, 0), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceEnablePeerAccess(1, 2), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceDisablePeerAccess(1), npurtErrorPeerAccessNotEnabled);
	npurtGetLastError();

	const size_t n = 1 << 20;
	const auto a_bytes = pattern(n, 7, 3);
	void *a = alloc(a_bytes);  // NPU 0's
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	const auto b_bytes = pattern(n, 11, 5);
	void *b = alloc(b_bytes);  // NPU 1's
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	EXPECT_EQ(npurtMemcpyAsync(a, b, n, npurtMemcpyDeviceToDevice, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "memory of NPU 1")) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), "npurtDeviceEnablePeerAccess")) << lastMessage();
	npurtGetLastError();

	ASSERT_EQ(npurtDeviceEnablePeerAccess(1, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtDeviceEnablePeerAccess(1, 0), npurtErrorPeerAccessAlreadyEnabled);
	npurtGetLastError();
	// Device to device, both ways, on NPU 0's engine.
	void *a2 = nullptr;
	ASSERT_EQ(npurtMalloc(&a2, n), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(a2, b, n, npurtMemcpyDefault, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(read(a2, n), b_bytes);
	// Memory NPU 1 allocates after access was enabled is reached too.
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	void *late = nullptr;
	ASSERT_EQ(npurtMalloc(&late, 32 << 20), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(late, a, n, npurtMemcpyDeviceToDevice, s), npurtSuccess)
	        << lastMessage();
	// Pageable host memory to and from the peer, through this stream.
	std::vector<unsigned char> host = pattern(n, 13, 9), back(n);
	ASSERT_EQ(npurtMemcpyAsync(static_cast<char *>(late) + n, host.data(), n,
	                           npurtMemcpyHostToDevice, s),
	          npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(
	        npurtMemcpy(back.data(), static_cast<char *>(late) + n, n, npurtMemcpyDeviceToHost),
	        npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(back, host);
	// A fill and an op of NPU 0 on NPU 1's memory: out = a + b in float32.
	ASSERT_EQ(npurtMemsetD32Async(static_cast<char *>(late) + 2 * n, 0x3f800000u, n / 4, s),
	          npurtSuccess)
	        << lastMessage();
	npurtOpDesc d{};
	d.op = npurtOpAdd;
	d.dtype = d.outDtype = npurtFloat32;
	d.a = static_cast<char *>(late) + 2 * n;  // 1.0f each
	d.b = static_cast<char *>(late) + 2 * n;
	d.out = a2;
	d.n = n / 4;
	ASSERT_EQ(npurtLaunchOp(&d, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	std::vector<float> sums(n / 4);
	ASSERT_EQ(npurtMemcpy(sums.data(), a2, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(sums, std::vector<float>(n / 4, 2.0f));
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	EXPECT_EQ(read(late, n), a_bytes) << "NPU 0's engine wrote NPU 1's memory";
	// NPU 1 was given no access to NPU 0's memory.
	EXPECT_EQ(npurtMemcpy(b, a, n, npurtMemcpyDeviceToDevice), npurtErrorInvalidValue);
	npurtGetLastError();
	EXPECT_EQ(npurtFree(late), npurtSuccess);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);

	ASSERT_EQ(npurtDeviceDisablePeerAccess(1), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(a2, b, n, npurtMemcpyDeviceToDevice, s), npurtErrorInvalidValue);
	d.a = d.b = b;
	EXPECT_EQ(npurtLaunchOp(&d, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "operand a")) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), "has no access to: enable peer access"))
	        << lastMessage();
	npurtGetLastError();
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	npurtFree(a);
	npurtFree(a2);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	npurtFree(b);
}

// npurtMemcpyPeer(Async) need no enabling, as CUDA's; the asynchronous one
// returns before the stream reaches it (no host bounce in the caller).
TEST_F(Peer, PeerCopiesNeedNoAccessAndAreAsynchronous)
{
	if (count_ < 2)
		GTEST_SKIP() << "needs two NPUs";
	const size_t n = 4 << 20;
	const auto a_bytes = pattern(n, 3, 7);
	void *a = alloc(a_bytes);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	void *b = nullptr;
	ASSERT_EQ(npurtMalloc(&b, n), npurtSuccess);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s, Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtMemcpyPeerAsync(b, 1, a, 0, n, s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(s), npurtErrorNotReady) << "the copy waits behind the gate";
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(read(b, n), a_bytes);
	// Enabling access after a peer copy is still the user's first enable.
	ASSERT_EQ(npurtDeviceEnablePeerAccess(0, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtDeviceDisablePeerAccess(0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(b, 0, n, s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyPeer(b, 1, a, 0, n), npurtSuccess) << lastMessage();
	EXPECT_EQ(read(b, n), a_bytes);
	// A plain copy from the peer is still refused: only peer copies were
	// given access.
	EXPECT_EQ(npurtMemcpy(b, a, n, npurtMemcpyDeviceToDevice), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyPeer(b, 0, a, 0, n), npurtErrorInvalidValue) << "b is NPU 1's";
	EXPECT_EQ(npurtMemcpyPeer(b, 1, a, count_, n), npurtErrorInvalidDevice);
	npurtGetLastError();
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	npurtFree(b);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	npurtFree(a);
}

// Freed memory a peer's queued copy still reads is not reused under it:
// the copy on NPU 1's stream, held by a host function, reads NPU 0's X;
// X is freed and its size allocated and cleared on NPU 0.
TEST_F(Peer, FreedMemoryWaitsForThePeersQueuedWork)
{
	if (count_ < 2)
		GTEST_SKIP() << "needs two NPUs";
	const size_t n = 1 << 20;
	const auto x_bytes = pattern(n, 9, 1);
	void *x = alloc(x_bytes);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	void *y = nullptr;
	ASSERT_EQ(npurtMalloc(&y, n), npurtSuccess);
	ASSERT_EQ(npurtDeviceEnablePeerAccess(0, 0), npurtSuccess) << lastMessage();
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s, Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyDeviceToDevice, s), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_EQ(npurtFree(x), npurtSuccess) << lastMessage();
	void *x2 = nullptr;
	ASSERT_EQ(npurtMalloc(&x2, n), npurtSuccess) << lastMessage();
	EXPECT_NE(x2, x) << "X was handed out again under the peer's queued copy";
	ASSERT_EQ(npurtMemset(x2, 0, n), npurtSuccess) << lastMessage();
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	EXPECT_EQ(read(y, n), x_bytes) << "the peer's queued copy read reused memory";
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	npurtFree(y);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	npurtFree(x2);
}

// Links made and dropped while the owner's pool makes and releases
// segments: a segment is mapped into a new link exactly once (listed by the
// link or added by the pool, never both), and a released one leaves every
// link before its address is handed out again, so no allocation fails
// and no stale mapping survives.
TEST_F(Peer, LinksChangeWhileThePeerAllocates)
{
	if (count_ < 2)
		GTEST_SKIP() << "needs two NPUs";
	std::atomic<bool> stop{false};
	std::atomic<int> failures{0};
	std::string why;
	std::thread owner([&] {
		npurtSetDevice(1);
		for (int i = 0; i < 60 && !stop; i++) {
			void *p = nullptr;
			// Above the pool's large-block rounding: a segment each.
			if (npurtMalloc(&p, (24u + i % 8) << 20) != npurtSuccess) {
				why = lastMessage();
				failures++;
				break;
			}
			npurtFree(p);
			npurtMemEmptyCache();
		}
		stop = true;
	});
	int links = 0;
	while (!stop) {
		if (npurtDeviceEnablePeerAccess(1, 0) != npurtSuccess) {
			why = lastMessage();
			failures++;
			break;
		}
		links++;
		if (npurtDeviceDisablePeerAccess(1) != npurtSuccess) {
			why = lastMessage();
			failures++;
			break;
		}
	}
	stop = true;
	owner.join();
	EXPECT_EQ(failures.load(), 0) << why;
	EXPECT_GT(links, 0);
	// The link still works after all that: a copy from fresh peer memory.
	const size_t n = 1 << 20;
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	const auto b_bytes = pattern(n, 5, 9);
	void *b = alloc(b_bytes);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_EQ(npurtDeviceEnablePeerAccess(1, 0), npurtSuccess) << lastMessage();
	void *a = nullptr;
	ASSERT_EQ(npurtMalloc(&a, n), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(a, b, n, npurtMemcpyDeviceToDevice), npurtSuccess) << lastMessage();
	EXPECT_EQ(read(a, n), b_bytes);
	npurtFree(a);
	npurtFree(b);
}

}  // namespace

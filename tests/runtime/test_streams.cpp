// Streams, events, host functions, asynchronous copies, threads and the
// profiler through libnpurt against the real module (run in the VM).
//
// No test orders work with a sleep. A host function that blocks on a Gate
// holds a stream back for as long as a test needs; the job latency debugfs
// injects (root only) makes device work take a known minimum time, so that
// "still running" is a fact and not a race.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "child.h"
#include "gate.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"
#include "vm_knobs.h"

extern char **environ;

namespace {

using Clock = std::chrono::steady_clock;

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

std::string readFile(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

std::vector<unsigned char> pattern(size_t n, unsigned seed)
{
	std::vector<unsigned char> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = static_cast<unsigned char>((i * 131 + seed + (i >> 12) * 7) & 0xff);
	return v;
}

// Index of the first byte where a and b differ, n if none.
size_t firstDiff(const unsigned char *a, const unsigned char *b, size_t n)
{
	if (std::memcmp(a, b, n) == 0)
		return n;
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return i;
	return n;
}

// Index of the first byte of p[0, n) that is not v, n if none.
size_t firstNot(const unsigned char *p, unsigned char v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return i;
	return n;
}

double msSince(Clock::time_point t0)
{
	return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string ptrText(const void *p)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "%p", p);
	return buf;
}

using vmknobs::debugfsDir;
using vmknobs::JobLatency;
using vmknobs::latencyUs;
using vmknobs::moduleParam;
using vmknobs::writeKnob;

// One big job: 16 MiB, or 4 MiB under a short job timeout (job_timeout_ms
// below a second), where an emulated engine on a loaded host can take that
// long over 16 MiB and the job would be cut off.
size_t bigJob()
{
	return moduleParam("job_timeout_ms") >= 1000 ? 16 << 20 : 4 << 20;
}

// A flag a thread waits for with a timeout.
class Signal {
public:
	void set()
	{
		{
			std::lock_guard<std::mutex> lock(mutex_);
			set_ = true;
		}
		cv_.notify_all();
	}
	bool wait(int timeoutMs)
	{
		std::unique_lock<std::mutex> lock(mutex_);
		return cv_.wait_for(lock, std::chrono::milliseconds(timeoutMs),
		                    [this] { return set_; });
	}

private:
	std::mutex mutex_;
	std::condition_variable cv_;
	bool set_ = false;
};

using npurt_test::ChildResult;
using npurt_test::indented;
using npurt_test::runChild;

// Host memory of the three kinds an asynchronous copy distinguishes.
enum class HostKind { Pinned, Registered, Pageable };

const char *kindName(HostKind k)
{
	return k == HostKind::Pinned       ? "Pinned"
	       : k == HostKind::Registered ? "Registered"
	                                   : "Pageable";
}

class HostBuffer {
public:
	HostBuffer(HostKind kind, size_t size) : kind_(kind), size_(size)
	{
		if (kind == HostKind::Pinned) {
			void *p = nullptr;
			if (npurtMallocHost(&p, size) == npurtSuccess)
				p_ = static_cast<unsigned char *>(p);
			return;
		}
		// Whole pages of their own: a registration never shares a page.
		mapped_ = (size + 4095) & ~static_cast<size_t>(4095);
		void *p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return;
		p_ = static_cast<unsigned char *>(p);
		if (kind == HostKind::Registered &&
		    npurtHostRegister(p_, size, npurtHostRegisterDefault) != npurtSuccess) {
			munmap(p_, mapped_);
			p_ = nullptr;
		}
	}
	~HostBuffer()
	{
		if (!p_)
			return;
		if (kind_ == HostKind::Pinned) {
			npurtFreeHost(p_);
			return;
		}
		if (kind_ == HostKind::Registered)
			npurtHostUnregister(p_);
		munmap(p_, mapped_);
	}
	HostBuffer(const HostBuffer &) = delete;
	HostBuffer &operator=(const HostBuffer &) = delete;

	unsigned char *data() { return p_; }
	size_t size() const { return size_; }

private:
	HostKind kind_;
	size_t size_;
	size_t mapped_ = 0;
	unsigned char *p_ = nullptr;
};

// Streams, events, memory and gates a test makes; all released after it,
// gates first so that no stream stays blocked.
class StreamTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
	void TearDown() override
	{
		for (auto &g : gates_)
			g.open();
		for (npurtStream_t s : streams_) {
			npurtStreamSynchronize(s);
			npurtStreamDestroy(s);
		}
		npurtDeviceSynchronize();
		for (npurtEvent_t e : events_)
			npurtEventDestroy(e);
		for (void *d : device_)
			npurtFree(d);
		for (void *h : pinned_)
			npurtFreeHost(h);
		npurtGetLastError();
		npurtSetDevice(0);
	}

	npurtStream_t stream(unsigned flags = npurtStreamDefault, int priority = 0)
	{
		npurtStream_t s = nullptr;
		EXPECT_EQ(npurtStreamCreateWithPriority(&s, flags, priority), npurtSuccess)
		        << lastMessage();
		if (s)
			streams_.push_back(s);
		return s;
	}
	// The test destroys s itself.
	void forget(npurtStream_t s)
	{
		streams_.erase(std::remove(streams_.begin(), streams_.end(), s), streams_.end());
	}

	npurtEvent_t event(unsigned flags = npurtEventDefault)
	{
		npurtEvent_t e = nullptr;
		EXPECT_EQ(npurtEventCreateWithFlags(&e, flags), npurtSuccess) << lastMessage();
		if (e)
			events_.push_back(e);
		return e;
	}
	void forget(npurtEvent_t e)
	{
		events_.erase(std::remove(events_.begin(), events_.end(), e), events_.end());
	}

	unsigned char *deviceAlloc(size_t n)
	{
		void *d = nullptr;
		EXPECT_EQ(npurtMalloc(&d, n), npurtSuccess) << lastMessage();
		if (d)
			device_.push_back(d);
		return static_cast<unsigned char *>(d);
	}
	void deviceFree(void *d)
	{
		device_.erase(std::remove(device_.begin(), device_.end(), d), device_.end());
		EXPECT_EQ(npurtFree(d), npurtSuccess) << lastMessage();
	}
	unsigned char *pinnedAlloc(size_t n)
	{
		void *h = nullptr;
		EXPECT_EQ(npurtMallocHost(&h, n), npurtSuccess) << lastMessage();
		if (h)
			pinned_.push_back(h);
		return static_cast<unsigned char *>(h);
	}

	// Holds stream s at this point until the returned gate opens.
	Gate &block(npurtStream_t s)
	{
		gates_.emplace_back();
		Gate &g = gates_.back();
		EXPECT_EQ(npurtLaunchHostFunc(s, Gate::hostFn, &g), npurtSuccess) << lastMessage();
		return g;
	}

	// Synchronous reads and writes through the default stream.
	static std::vector<unsigned char> download(const void *d, size_t n)
	{
		std::vector<unsigned char> out(n);
		EXPECT_EQ(npurtMemcpy(out.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess)
		        << lastMessage();
		return out;
	}
	static void upload(void *d, const std::vector<unsigned char> &in)
	{
		EXPECT_EQ(npurtMemcpy(d, in.data(), in.size(), npurtMemcpyHostToDevice),
		          npurtSuccess)
		        << lastMessage();
	}

	std::deque<Gate> gates_;
	std::vector<npurtStream_t> streams_;
	std::vector<npurtEvent_t> events_;
	std::vector<void *> device_;
	std::vector<void *> pinned_;
};

class Streams : public StreamTest {};
class Events : public StreamTest {};
class HostFuncs : public StreamTest {};
class AsyncCopies : public StreamTest {};
class StreamThreads : public StreamTest {};
class Profiler : public StreamTest {};

// ---------------------------------------------------------------------------
// Streams: creation, handles, query, synchronisation.

TEST_F(Streams, PriorityRangeFlagsAndClamping)
{
	int least = 99, greatest = 99;
	ASSERT_EQ(npurtDeviceGetStreamPriorityRange(&least, &greatest), npurtSuccess);
	EXPECT_EQ(least, 1);
	EXPECT_EQ(greatest, -1);
	EXPECT_LE(greatest, least) << "lower numbers are higher priority";
	EXPECT_EQ(npurtDeviceGetStreamPriorityRange(nullptr, &greatest), npurtSuccess);
	EXPECT_EQ(npurtDeviceGetStreamPriorityRange(&least, nullptr), npurtSuccess);

	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
	streams_.push_back(s);
	int prio = 42;
	unsigned flags = 42;
	EXPECT_EQ(npurtStreamGetPriority(s, &prio), npurtSuccess);
	EXPECT_EQ(prio, 0);
	EXPECT_EQ(npurtStreamGetFlags(s, &flags), npurtSuccess);
	EXPECT_EQ(flags, 0u);

	npurtStream_t nb = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&nb, npurtStreamNonBlocking), npurtSuccess);
	streams_.push_back(nb);
	EXPECT_EQ(npurtStreamGetFlags(nb, &flags), npurtSuccess);
	EXPECT_EQ(flags, static_cast<unsigned>(npurtStreamNonBlocking));

	// In range, at both ends, and clamped beyond them.
	const int asked[] = {greatest, least, 0, least + 100, greatest - 100, 1 << 30, -(1 << 30)};
	const int want[] = {greatest, least, 0, least, greatest, least, greatest};
	for (size_t i = 0; i < std::size(asked); i++) {
		npurtStream_t p = nullptr;
		ASSERT_EQ(npurtStreamCreateWithPriority(&p, npurtStreamNonBlocking, asked[i]),
		          npurtSuccess)
		        << lastMessage();
		streams_.push_back(p);
		EXPECT_EQ(npurtStreamGetPriority(p, &prio), npurtSuccess);
		EXPECT_EQ(prio, want[i]) << "asked for " << asked[i];
	}

	// Every priority runs work.
	unsigned char *d = deviceAlloc(4096);
	ASSERT_NE(d, nullptr);
	for (size_t i = 0; i < streams_.size(); i++)
		ASSERT_EQ(npurtMemsetAsync(d + i, static_cast<int>(i + 1), 1, streams_[i]),
		          npurtSuccess)
		        << lastMessage();
	for (npurtStream_t x : streams_)
		ASSERT_EQ(npurtStreamSynchronize(x), npurtSuccess) << lastMessage();
	auto out = download(d, streams_.size());
	for (size_t i = 0; i < streams_.size(); i++)
		EXPECT_EQ(out[i], i + 1);

	// The default stream: priority 0, no flags.
	EXPECT_EQ(npurtStreamGetPriority(nullptr, &prio), npurtSuccess);
	EXPECT_EQ(prio, 0);
	EXPECT_EQ(npurtStreamGetFlags(nullptr, &flags), npurtSuccess);
	EXPECT_EQ(flags, 0u);

	EXPECT_EQ(npurtStreamCreateWithFlags(&s, 0x4), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown flags")) << lastMessage();
	EXPECT_EQ(npurtStreamCreateWithPriority(&s, 0x100, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamCreate(nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamGetPriority(nb, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamGetFlags(nb, nullptr), npurtErrorInvalidValue);
}

// The other process of HighPriorityWithoutCapSysNiceRunsAtNormal: without
// CAP_SYS_NICE the driver refuses high-priority queues; the stream's work
// runs on normal ones.
TEST(StreamPriorityChild, HighPriorityStreamWorks)
{
	if (!std::getenv("NPURT_TEST_NO_NICE_CHILD"))
		GTEST_SKIP() << "run by Streams.HighPriorityWithoutCapSysNiceRunsAtNormal";
	__user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
	ASSERT_EQ(syscall(SYS_capget, &hdr, data), 0);
	for (auto &d : data)
		d.effective = d.permitted = d.inheritable = 0;
	ASSERT_EQ(syscall(SYS_capset, &hdr, data), 0);
	int least = 0, greatest = 0;
	ASSERT_EQ(npurtDeviceGetStreamPriorityRange(&least, &greatest), npurtSuccess);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreateWithPriority(&s, npurtStreamNonBlocking, greatest),
	          npurtSuccess);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess) << npurtGetLastErrorMessage();
	ASSERT_EQ(npurtMemsetAsync(d, 0x5a, 4096, s), npurtSuccess) << npurtGetLastErrorMessage();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << npurtGetLastErrorMessage();
	unsigned char back[4096] = {};
	ASSERT_EQ(npurtMemcpy(back, d, sizeof(back), npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_TRUE(
	        std::all_of(back, back + sizeof(back), [](unsigned char b) { return b == 0x5a; }));
	int prio = 0;
	EXPECT_EQ(npurtStreamGetPriority(s, &prio), npurtSuccess);
	EXPECT_EQ(prio, greatest) << "the priority asked for, as CUDA reports it";
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_EQ(npurtFree(d), npurtSuccess);
	std::printf("high-priority stream without CAP_SYS_NICE: ok\n");
}

TEST_F(Streams, HighPriorityWithoutCapSysNiceRunsAtNormal)
{
	if (geteuid())
		GTEST_SKIP() << "needs root to drop the capability in a child";
	npurt_test::ChildResult r =
	        npurt_test::runChild("StreamPriorityChild.*", {"NPURT_TEST_NO_NICE_CHILD=1"});
	ASSERT_FALSE(r.timedOut) << npurt_test::indented(r.output);
	EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
	        << npurt_test::indented(r.output);
	EXPECT_TRUE(contains(r.output, "high-priority stream without CAP_SYS_NICE: ok"))
	        << npurt_test::indented(r.output);
}

// More waits than the driver takes in one job (DRM_NPU_MAX_IN_FENCES):
// a stream waiting for the events of 100 streams, and the legacy default
// stream's implicit wait for as many busy streams, still run (SUBMIT
// refused them with EINVAL once PyTorch's backward waited for its 32 pool
// streams and more).
TEST_F(Streams, WaitsForMoreStreamsThanAJobTakesFences)
{
	constexpr int kStreams = 100;
	constexpr size_t kBytes = 4096;
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, kStreams * kBytes), npurtSuccess);
	std::vector<npurtStream_t> streams(kStreams);
	std::vector<npurtEvent_t> events(kStreams);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking), npurtSuccess);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < kStreams; i++) {
			if (!round) {
				ASSERT_EQ(npurtStreamCreate(&streams[i]), npurtSuccess);
				ASSERT_EQ(npurtEventCreateWithFlags(&events[i],
				                                    npurtEventDisableTiming),
				          npurtSuccess);
			}
			ASSERT_EQ(npurtMemsetAsync(static_cast<char *>(d) + i * kBytes, i + round,
			                           kBytes, streams[i]),
			          npurtSuccess)
			        << npurtGetLastErrorMessage();
			ASSERT_EQ(npurtEventRecord(events[i], streams[i]), npurtSuccess);
			ASSERT_EQ(npurtStreamWaitEvent(s, events[i], 0), npurtSuccess)
			        << npurtGetLastErrorMessage();
		}
		std::vector<unsigned char> h(kStreams * kBytes);
		if (round == 0) {
			// The waits, then a copy on s.
			ASSERT_EQ(
			        npurtMemcpyAsync(h.data(), d, h.size(), npurtMemcpyDeviceToHost, s),
			        npurtSuccess)
			        << npurtGetLastErrorMessage();
			ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess)
			        << npurtGetLastErrorMessage();
		} else {
			// The legacy default stream waits for all 100 (blocking) streams.
			ASSERT_EQ(npurtMemcpy(h.data(), d, h.size(), npurtMemcpyDeviceToHost),
			          npurtSuccess)
			        << npurtGetLastErrorMessage();
		}
		for (int i = 0; i < kStreams; i++)
			ASSERT_EQ(h[static_cast<size_t>(i) * kBytes + kBytes - 1],
			          static_cast<unsigned char>(i + round))
			        << "stream " << i << ", round " << round;
	}
	ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess);
	for (int i = 0; i < kStreams; i++) {
		EXPECT_EQ(npurtEventDestroy(events[i]), npurtSuccess);
		EXPECT_EQ(npurtStreamDestroy(streams[i]), npurtSuccess);
	}
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_EQ(npurtFree(d), npurtSuccess);
}

TEST_F(Streams, BadHandlesAreInvalidHandle)
{
	EXPECT_EQ(npurtStreamDestroy(nullptr), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "default stream")) << lastMessage();

	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamDestroy(s), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "not a live stream")) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), ptrText(s))) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(s), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamSynchronize(s), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamSynchronizeTimeout(s, 10), npurtErrorInvalidHandle);
	int prio = 0;
	EXPECT_EQ(npurtStreamGetPriority(s, &prio), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamRecover(s), npurtErrorInvalidHandle);

	unsigned char *d = deviceAlloc(64);
	ASSERT_NE(d, nullptr);
	std::vector<unsigned char> h(64);
	EXPECT_EQ(npurtMemsetAsync(d, 1, 64, s), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtMemcpyAsync(d, h.data(), 64, npurtMemcpyHostToDevice, s),
	          npurtErrorInvalidHandle);
	EXPECT_EQ(npurtLaunchHostFunc(s, Gate::hostFn, nullptr), npurtErrorInvalidHandle);
	npurtEvent_t e = event();
	EXPECT_EQ(npurtEventRecord(e, s), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamWaitEvent(s, e, 0), npurtErrorInvalidHandle);

	// Not made by npurtStreamCreate.
	int bogus = 0;
	auto foreign = reinterpret_cast<npurtStream_t>(&bogus);
	EXPECT_EQ(npurtStreamDestroy(foreign), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamQuery(foreign), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamSynchronize(foreign), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtMemsetAsync(d, 1, 64, foreign), npurtErrorInvalidHandle);

	// A stream of a destroyed context went with it.
	npurtContext_t ctx = nullptr;
	ASSERT_EQ(npurtCtxCreate(&ctx, 0, 0), npurtSuccess) << lastMessage();
	npurtStream_t cs = nullptr;
	ASSERT_EQ(npurtStreamCreate(&cs), npurtSuccess);
	void *cd = nullptr;
	ASSERT_EQ(npurtMalloc(&cd, 4096), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(cd, 7, 4096, cs), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(cs), npurtSuccess);
	ASSERT_EQ(npurtCtxDestroy(ctx), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(cs), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamDestroy(cs), npurtErrorInvalidHandle);
}

// Launches in a burst are batched; the batch must reach the device without
// any later call into the runtime (a program may poll host memory).
TEST_F(Streams, BatchedLaunchesRunWithoutAnotherCall)
{
	const size_t n = 4096;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n), *p = pinnedAlloc(n);
	ASSERT_TRUE(s && d && p);
	std::memset(p, 0, n);
	// The first is submitted at once, the others follow it in a batch.
	ASSERT_EQ(npurtMemsetAsync(d, 0x5a, n, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(d, 0x5b, n, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpyAsync(p, d, n, npurtMemcpyDeviceToHost, s), npurtSuccess)
	        << lastMessage();
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (__atomic_load_n(&p[n - 1], __ATOMIC_ACQUIRE) != 0x5b &&
	       std::chrono::steady_clock::now() < deadline)
		std::this_thread::yield();
	EXPECT_EQ(__atomic_load_n(&p[n - 1], __ATOMIC_ACQUIRE), 0x5b)
	        << "the batched copy did not run";
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(firstNot(p, 0x5b, n), n);
}

// The runtime remembers the last stream and buffer a thread named; that
// must not outlive the stream or the allocation.
TEST_F(Streams, DestroyedStreamsAndFreedMemoryStayInvalidAfterUse)
{
	npurtStream_t s = nullptr, other = stream();
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "not a live stream")) << lastMessage();

	// Destroyed by another thread after this one used it.
	npurtStream_t t = nullptr;
	ASSERT_EQ(npurtStreamCreate(&t), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(d, 2, 4096, t), npurtSuccess) << lastMessage();
	std::thread([t] {
		EXPECT_EQ(npurtStreamDestroy(t), npurtSuccess) << lastMessage();
	}).join();
	EXPECT_EQ(npurtMemsetAsync(d, 2, 4096, t), npurtErrorInvalidHandle);

	// Freed memory, and a smaller block made where it was.
	ASSERT_EQ(npurtMemsetAsync(d, 3, 4096, other), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(other), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(d), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemsetAsync(d, 3, 16, other), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live device memory")) << lastMessage();
	unsigned char *e = deviceAlloc(512);
	ASSERT_EQ(e, d) << "the pool hands the freed block out again (split)";
	EXPECT_EQ(npurtMemsetAsync(e, 3, 4096, other), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overrun its allocation of 512 bytes"))
	        << lastMessage();
	EXPECT_EQ(npurtMemsetAsync(e, 4, 512, other), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamSynchronize(other), npurtSuccess) << lastMessage();
	EXPECT_EQ(firstNot(download(e, 512).data(), 4, 512), 512u);
}

TEST_F(Streams, DestroyWithWorkInFlightStillCompletes)
{
	const size_t n = bigJob();
	auto in = pattern(n, 5);
	unsigned char *src = pinnedAlloc(n), *dst = pinnedAlloc(n);
	unsigned char *a = deviceAlloc(n), *b = deviceAlloc(n), *c = deviceAlloc(9 << 20);
	ASSERT_TRUE(src && dst && a && b && c);
	std::memcpy(src, in.data(), n);
	npurtEvent_t done = event();
	{
		// With a job latency the work is certainly still running when
		// the destroy returns.
		JobLatency slow(0, latencyUs());
		npurtStream_t s = nullptr;
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(a, src, n, npurtMemcpyHostToDevice, s), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(done, s), npurtSuccess);
		auto t0 = Clock::now();
		ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess) << lastMessage();
		double took = msSince(t0);
		if (slow.on()) {
			EXPECT_EQ(npurtEventQuery(done), npurtErrorNotReady)
			        << "the work was done before the destroy returned (it took " << took
			        << " ms)";
		}
		EXPECT_EQ(npurtStreamQuery(s), npurtErrorInvalidHandle);

		// Another stream takes the results once the destroyed stream's
		// event completes.
		npurtStream_t s2 = stream();
		ASSERT_EQ(npurtStreamWaitEvent(s2, done, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(dst, b, n, npurtMemcpyDeviceToHost, s2), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(s2), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtEventQuery(done), npurtSuccess);
		EXPECT_EQ(firstDiff(dst, in.data(), n), n);
	}
	// No event keeps the stream's queues alive: the destroy still returns
	// before the work is done, and the work completes.
	{
		JobLatency slow(0, latencyUs());
		npurtStream_t s = nullptr;
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
		ASSERT_EQ(npurtMemsetAsync(b, 0x3d, n, s), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(a, b, n, npurtMemcpyDeviceToDevice, s), npurtSuccess);
		auto t0 = Clock::now();
		ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess) << lastMessage();
		double took = msSince(t0);
		if (slow.on()) {
			EXPECT_LT(took, latencyUs() / 1000.0)
			        << "the destroy waited for the work (two jobs of at least "
			        << latencyUs() / 1000 << " ms each)";
		}
	}
	{
		// Nothing is left to wait on: look until the data is there.
		auto deadline = Clock::now() + std::chrono::seconds(20);
		std::vector<unsigned char> got;
		do {
			got = download(a, n);
		} while (firstNot(got.data(), 0x3d, n) != n && Clock::now() < deadline);
		EXPECT_EQ(firstNot(got.data(), 0x3d, n), n)
		        << "the destroyed stream's copy never ran";
	}

	// A pageable copy: its staging buffers outlive the stream too.
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	auto page = pattern(9 << 20, 77);
	ASSERT_EQ(npurtMemcpyAsync(c, page.data(), page.size(), npurtMemcpyHostToDevice, s),
	          npurtSuccess);
	ASSERT_EQ(npurtEventRecord(done, s), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventSynchronize(done), npurtSuccess) << lastMessage();
	EXPECT_EQ(download(c, page.size()), page);
}

TEST_F(Streams, DestroyWithPendingHostFunctionReturnsAtOnce)
{
	const size_t n = 1 << 20;
	unsigned char *d = deviceAlloc(n);
	ASSERT_NE(d, nullptr);
	npurtEvent_t done = event();
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(d, 0x11, n, s), npurtSuccess);
	Gate &g = block(s);
	ASSERT_EQ(npurtMemsetAsync(d, 0x22, n, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(done, s), npurtSuccess);
	ASSERT_TRUE(g.waitReached(10000)) << "the host function never ran";

	Signal returned;
	npurtError_t destroyErr = npurtErrorUnknown;
	std::thread t([&] {
		destroyErr = npurtStreamDestroy(s);
		returned.set();
	});
	bool early = returned.wait(3000);
	g.open();
	t.join();
	EXPECT_EQ(destroyErr, npurtSuccess);
	// Work after the host function still ran.
	ASSERT_EQ(npurtEventSynchronize(done), npurtSuccess) << lastMessage();
	auto out = download(d, n);
	EXPECT_EQ(firstNot(out.data(), 0x22, n), n);
	EXPECT_TRUE(early) << "npurtStreamDestroy blocked while a host function of the stream "
	                      "was waiting; npurt.h says it returns at once";
	// The handle went at once: a second destroy is refused.
	EXPECT_EQ(npurtStreamDestroy(s), npurtErrorInvalidHandle);
	npurtGetLastError();
}

TEST_F(Streams, QueryIsNotReadyWhileWorkIsPending)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(1 << 20);
	ASSERT_TRUE(s && d);
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess) << "a new stream has no work";
	Gate &g = block(s);
	ASSERT_EQ(npurtMemsetAsync(d, 0x5a, 1 << 20, s), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(s), npurtErrorNotReady);
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess) << "not ready is a status, not an error";
	EXPECT_EQ(npurtGetLastError(), npurtSuccess);
	EXPECT_EQ(g.passed(), 0);
	g.open();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess);
	EXPECT_EQ(g.passed(), 1);
	auto out = download(d, 1 << 20);
	EXPECT_EQ(firstNot(out.data(), 0x5a, out.size()), out.size());

	// The default stream too.
	EXPECT_EQ(npurtStreamSynchronize(nullptr), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(nullptr), npurtSuccess);
}

TEST_F(Streams, QueryAndTimeoutWithDeviceWork)
{
	JobLatency slow(0, latencyUs());
	if (!slow.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4 << 20);
	ASSERT_TRUE(s && d);
	auto t0 = Clock::now();
	ASSERT_EQ(npurtMemsetAsync(d, 0x3c, 4 << 20, s), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(s), npurtErrorNotReady);
	auto t1 = Clock::now();
	EXPECT_EQ(npurtStreamSynchronizeTimeout(s, 20), npurtErrorTimeout);
	double waited = msSince(t1);
	EXPECT_GE(waited, 15.0);
	EXPECT_LT(waited, 2000.0);
	EXPECT_TRUE(contains(lastMessage(), "did not finish within 20 ms")) << lastMessage();
	EXPECT_EQ(npurtGetLastError(), npurtErrorTimeout);
	ASSERT_EQ(npurtStreamSynchronizeTimeout(s, -1), npurtSuccess) << lastMessage();
	EXPECT_GE(msSince(t0), latencyUs() / 1000.0 * 0.9) << "the job latency was not applied";
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess);
	EXPECT_EQ(npurtStreamSynchronizeTimeout(s, 0), npurtSuccess) << "idle: no wait needed";
}

TEST_F(Streams, SynchronizeTimeoutWithBlockedHostFunction)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	Gate &g = block(s);
	auto t0 = Clock::now();
	EXPECT_EQ(npurtStreamSynchronizeTimeout(s, 200), npurtErrorTimeout);
	double waited = msSince(t0);
	EXPECT_GE(waited, 190.0);
	EXPECT_LT(waited, 3000.0);
	EXPECT_TRUE(contains(lastMessage(), "npurtStreamSynchronize")) << lastMessage();
	EXPECT_EQ(npurtGetLastError(), npurtErrorTimeout);
	EXPECT_EQ(npurtStreamSynchronizeTimeout(s, 0), npurtErrorTimeout);
	g.open();
	EXPECT_EQ(npurtStreamSynchronizeTimeout(s, 10000), npurtSuccess) << lastMessage();
	EXPECT_EQ(g.passed(), 1);
}

TEST_F(Streams, DeviceSynchronizeWaitsForEveryStream)
{
	const size_t n = 8 << 20;
	npurtStream_t a = stream(), b = stream();
	unsigned char *x = deviceAlloc(n), *y = deviceAlloc(n), *z = deviceAlloc(n);
	ASSERT_TRUE(a && b && x && y && z);
	Gate &ga = block(a);
	Gate &gb = block(b);
	ASSERT_EQ(npurtMemsetAsync(x, 1, n, a), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(y, 2, n, b), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(z, 3, n, nullptr), npurtSuccess);
	auto t0 = Clock::now();
	EXPECT_EQ(npurtDeviceSynchronizeTimeout(100), npurtErrorTimeout);
	double waited = msSince(t0);
	EXPECT_GE(waited, 90.0);
	EXPECT_LT(waited, 3000.0);
	EXPECT_EQ(npurtGetLastError(), npurtErrorTimeout);
	ga.open();
	EXPECT_EQ(npurtDeviceSynchronizeTimeout(100), npurtErrorTimeout) << "b is still held";
	gb.open();
	ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess) << lastMessage();
	// Everything is done now: no query has to wait.
	EXPECT_EQ(npurtStreamQuery(a), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(b), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(nullptr), npurtSuccess);
	for (auto [p, v] : {std::pair<unsigned char *, int>{x, 1}, {y, 2}, {z, 3}}) {
		auto out = download(p, n);
		EXPECT_EQ(firstNot(out.data(), static_cast<unsigned char>(v), n), n) << v;
	}

	// Device work alone, no host functions.
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyDeviceToDevice, a), npurtSuccess);
		ASSERT_EQ(npurtMemsetAsync(z, 9 + i, n, b), npurtSuccess);
	}
	ASSERT_EQ(npurtDeviceSynchronizeTimeout(60000), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(a), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(b), npurtSuccess);
}

TEST_F(Streams, StreamsBelongToTheirDevice)
{
	if (npurt::deviceCount() < 2)
		GTEST_SKIP() << "needs two NPUs";
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	npurtStream_t s1 = stream();
	unsigned char *d1 = deviceAlloc(1 << 20);
	ASSERT_TRUE(s1 && d1);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	// Used from a thread whose current device is 0, s1 still runs on NPU 1.
	ASSERT_EQ(npurtMemsetAsync(d1, 0x21, 1 << 20, s1), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s1), npurtSuccess) << lastMessage();
	// Read back through NPU 1's context: NPU 0's has no access to it.
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	auto out = download(d1, 1 << 20);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	EXPECT_EQ(firstNot(out.data(), 0x21, out.size()), out.size());
	npurtPointerAttributes attr{};
	ASSERT_EQ(npurtPointerGetAttributes(&attr, d1), npurtSuccess);
	EXPECT_EQ(attr.device, 1);
}

// ---------------------------------------------------------------------------
// Ordering within a stream: a random chain of fills and copies in every
// direction runs against a host model of the memory; the device must end
// where running the chain in order ends.

struct Model {
	std::vector<unsigned char> dev[2];
	std::vector<unsigned char> pinned;
};

struct ChainBuffers {
	unsigned char *dev[2];
	unsigned char *pinned;  // read and written by the device in stream order
	const unsigned char *pageableIn;  // never changes
	unsigned char *pageableOut;  // D2H pageable lands here before the call returns
	size_t size;
};

// Runs `ops` random operations on s; returns the number of pageable
// device-to-host results that were wrong on return (checked at once).
size_t runChain(npurtStream_t s, ChainBuffers &b, Model &m, int ops, size_t maxLen,
                bool withPageableOut, unsigned seed)
{
	std::mt19937 rng(seed);
	auto pick = [&](size_t lo, size_t hi) {
		return lo + static_cast<size_t>(rng() % (hi - lo + 1));
	};
	size_t wrong = 0;
	for (int i = 0; i < ops; i++) {
		int kind = static_cast<int>(rng() % (withPageableOut ? 6 : 5));
		size_t len = pick(1, std::min(maxLen, b.size));
		if (rng() % 16 == 0)
			len = pick(1, b.size);
		size_t off = pick(0, b.size - len), off2 = pick(0, b.size - len);
		int buf = static_cast<int>(rng() % 2), buf2 = static_cast<int>(rng() % 2);
		bool def = rng() % 2;
		switch (kind) {
		case 0: {
			int v = static_cast<int>(rng() % 256);
			EXPECT_EQ(npurtMemsetAsync(b.dev[buf] + off, v, len, s), npurtSuccess)
			        << lastMessage();
			std::fill_n(m.dev[buf].begin() + static_cast<long>(off), len,
			            static_cast<unsigned char>(v));
			break;
		}
		case 1: {
			// Copies may not overlap: one buffer to the other.
			buf2 = 1 - buf;
			EXPECT_EQ(npurtMemcpyAsync(
			                  b.dev[buf2] + off2, b.dev[buf] + off, len,
			                  def ? npurtMemcpyDefault : npurtMemcpyDeviceToDevice, s),
			          npurtSuccess)
			        << lastMessage();
			std::copy_n(m.dev[buf].begin() + static_cast<long>(off), len,
			            m.dev[buf2].begin() + static_cast<long>(off2));
			break;
		}
		case 2:
			EXPECT_EQ(npurtMemcpyAsync(
			                  b.dev[buf] + off, b.pinned + off2, len,
			                  def ? npurtMemcpyDefault : npurtMemcpyHostToDevice, s),
			          npurtSuccess)
			        << lastMessage();
			std::copy_n(m.pinned.begin() + static_cast<long>(off2), len,
			            m.dev[buf].begin() + static_cast<long>(off));
			break;
		case 3:
			EXPECT_EQ(npurtMemcpyAsync(
			                  b.pinned + off2, b.dev[buf] + off, len,
			                  def ? npurtMemcpyDefault : npurtMemcpyDeviceToHost, s),
			          npurtSuccess)
			        << lastMessage();
			std::copy_n(m.dev[buf].begin() + static_cast<long>(off), len,
			            m.pinned.begin() + static_cast<long>(off2));
			break;
		case 4:
			EXPECT_EQ(npurtMemcpyAsync(
			                  b.dev[buf] + off, b.pageableIn + off2, len,
			                  def ? npurtMemcpyDefault : npurtMemcpyHostToDevice, s),
			          npurtSuccess)
			        << lastMessage();
			std::copy_n(b.pageableIn + off2, len,
			            m.dev[buf].begin() + static_cast<long>(off));
			break;
		default:
			EXPECT_EQ(npurtMemcpyAsync(
			                  b.pageableOut + off2, b.dev[buf] + off, len,
			                  def ? npurtMemcpyDefault : npurtMemcpyDeviceToHost, s),
			          npurtSuccess)
			        << lastMessage();
			if (std::memcmp(b.pageableOut + off2, m.dev[buf].data() + off, len) != 0)
				wrong++;
			break;
		}
	}
	return wrong;
}

void chainTest(npurtStream_t s, size_t size, int ops, size_t maxLen, bool withPageableOut,
               unsigned seed)
{
	ChainBuffers b{};
	Model m;
	b.size = size;
	void *d0 = nullptr, *d1 = nullptr, *p = nullptr;
	ASSERT_EQ(npurtMalloc(&d0, size), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&d1, size), npurtSuccess);
	ASSERT_EQ(npurtMallocHost(&p, size), npurtSuccess);
	b.dev[0] = static_cast<unsigned char *>(d0);
	b.dev[1] = static_cast<unsigned char *>(d1);
	b.pinned = static_cast<unsigned char *>(p);
	auto in = pattern(size, seed);
	std::vector<unsigned char> out(size);
	b.pageableIn = in.data();
	b.pageableOut = out.data();
	m.dev[0] = pattern(size, seed + 1);
	m.dev[1] = pattern(size, seed + 2);
	m.pinned = pattern(size, seed + 3);
	ASSERT_EQ(npurtMemcpy(d0, m.dev[0].data(), size, npurtMemcpyHostToDevice), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(d1, m.dev[1].data(), size, npurtMemcpyHostToDevice), npurtSuccess);
	std::memcpy(p, m.pinned.data(), size);

	size_t wrong = runChain(s, b, m, ops, maxLen, withPageableOut, seed);
	EXPECT_EQ(wrong, 0u) << "pageable device-to-host copies returned before their data";
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess);
	for (int i = 0; i < 2; i++) {
		std::vector<unsigned char> got(size);
		ASSERT_EQ(npurtMemcpy(got.data(), b.dev[i], size, npurtMemcpyDeviceToHost),
		          npurtSuccess);
		EXPECT_EQ(firstDiff(got.data(), m.dev[i].data(), size), size)
		        << "device buffer " << i;
	}
	EXPECT_EQ(firstDiff(b.pinned, m.pinned.data(), size), size) << "pinned buffer";
	npurtFree(d0);
	npurtFree(d1);
	npurtFreeHost(p);
}

TEST_F(Streams, ChainOfCopiesAndFillsRunsInOrder)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	chainTest(s, (256 << 10) + 13, 300, 64 << 10, true, 1);
}

TEST_F(Streams, ThousandSmallOpsThenOneSync)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	// No pageable device-to-host copy here: they wait. Everything else is
	// enqueued without a wait and synchronised once.
	chainTest(s, 64 << 10, 1000, 512, false, 2);
}

TEST_F(Streams, OverlappingStreamsStayCorrect)
{
	const size_t n = bigJob();
	npurtStream_t s1 = stream(), s2 = stream();
	unsigned char *a = deviceAlloc(n), *b = deviceAlloc(n), *c = deviceAlloc(n),
	              *d = deviceAlloc(n);
	unsigned char *in = pinnedAlloc(n), *out1 = pinnedAlloc(n), *out2 = pinnedAlloc(n);
	ASSERT_TRUE(s1 && s2 && a && b && c && d && in && out1 && out2);
	for (int round = 0; round < 3; round++) {
		auto want = pattern(n, static_cast<unsigned>(round * 17 + 3));
		std::memcpy(in, want.data(), n);
		unsigned char v = static_cast<unsigned char>(0x40 + round);
		// Interleaved: each stream's work is independent of the other's.
		ASSERT_EQ(npurtMemcpyAsync(a, in, n, npurtMemcpyHostToDevice, s1), npurtSuccess);
		ASSERT_EQ(npurtMemsetAsync(c, v, n, s2), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s1), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(d, c, n, npurtMemcpyDeviceToDevice, s2), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(out1, b, n, npurtMemcpyDeviceToHost, s1), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(out2, d, n, npurtMemcpyDeviceToHost, s2), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(s2), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(s1), npurtSuccess) << lastMessage();
		EXPECT_EQ(firstDiff(out1, want.data(), n), n) << "round " << round;
		EXPECT_EQ(firstNot(out2, v, n), n) << "round " << round;
	}
}

// ---------------------------------------------------------------------------
// Asynchronous copies: every host memory kind, sizes around the 4 MiB
// staging chunks, offsets, and every direction.

class AsyncCopyMatrix : public StreamTest,
                        public ::testing::WithParamInterface<std::tuple<HostKind, size_t, size_t>> {
};

TEST_P(AsyncCopyMatrix, RoundTrip)
{
	auto [kind, size, offset] = GetParam();
	if (kind != HostKind::Pageable && size > (8u << 20) + 1 && bigJob() < (16u << 20))
		GTEST_SKIP() << "one job of " << size << " bytes may outlast job_timeout_ms="
		             << moduleParam("job_timeout_ms")
		             << " under emulation (covered with the default timeout)";
	const size_t total = size + 2 * offset;
	npurtStream_t s = stream();
	HostBuffer src(kind, total), dst(kind, total);
	ASSERT_TRUE(src.data() && dst.data()) << lastMessage();
	unsigned char *d1 = deviceAlloc(total), *d2 = deviceAlloc(total);
	ASSERT_TRUE(s && d1 && d2);
	auto in = pattern(size, static_cast<unsigned>(size + offset));
	for (int pass = 0; pass < 2; pass++) {
		// Explicit kinds first, then npurtMemcpyDefault inferring them.
		bool def = pass == 1;
		std::memcpy(src.data() + offset, in.data(), size);
		std::memset(dst.data(), 0xee, total);
		ASSERT_EQ(npurtMemsetAsync(d2, 0xc3, total, s), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(d1 + offset, src.data() + offset, size,
		                           def ? npurtMemcpyDefault : npurtMemcpyHostToDevice, s),
		          npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(d2 + offset, d1 + offset, size,
		                           def ? npurtMemcpyDefault : npurtMemcpyDeviceToDevice, s),
		          npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(dst.data() + offset, d2 + offset, size,
		                           def ? npurtMemcpyDefault : npurtMemcpyDeviceToHost, s),
		          npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
		EXPECT_EQ(firstDiff(dst.data() + offset, in.data(), size), size) << "pass " << pass;
		EXPECT_EQ(firstNot(dst.data(), 0xee, offset), offset) << "wrote before the range";
		EXPECT_EQ(firstNot(dst.data() + offset + size, 0xee, offset), offset)
		        << "wrote past the range";
		if (offset) {
			auto head = download(d2, offset);
			auto tail = download(d2 + offset + size, offset);
			EXPECT_EQ(firstNot(head.data(), 0xc3, offset), offset);
			EXPECT_EQ(firstNot(tail.data(), 0xc3, offset), offset);
		}
	}
}

INSTANTIATE_TEST_SUITE_P(
        AsyncCopies, AsyncCopyMatrix,
        ::testing::Combine(
                ::testing::Values(HostKind::Pinned, HostKind::Registered, HostKind::Pageable),
                ::testing::Values(size_t{1}, size_t{4097}, size_t{(4 << 20) - 1}, size_t{4 << 20},
                                  size_t{(4 << 20) + 1}, size_t{(8 << 20) + 1}, size_t{20 << 20}),
                ::testing::Values(size_t{0}, size_t{3})),
        [](const ::testing::TestParamInfo<AsyncCopyMatrix::ParamType> &info) {
	        return std::string(kindName(std::get<0>(info.param))) + "_" +
	               std::to_string(std::get<1>(info.param)) + "_off" +
	               std::to_string(std::get<2>(info.param));
        });

TEST_F(AsyncCopies, PageableSourceMayBeReusedAtOnce)
{
	const size_t n = (12 << 20) + 5;  // four staging chunks
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n), *d2 = deviceAlloc(n);
	ASSERT_TRUE(s && d && d2);
	auto first = pattern(n, 1), second = pattern(n, 2);
	std::vector<unsigned char> buf = first;
	ASSERT_EQ(npurtMemcpyAsync(d, buf.data(), n, npurtMemcpyHostToDevice, s), npurtSuccess);
	// The call returned: the source is staged and may be overwritten.
	buf = second;
	ASSERT_EQ(npurtMemcpyAsync(d2, buf.data(), n, npurtMemcpyHostToDevice, s), npurtSuccess);
	std::fill(buf.begin(), buf.end(), 0);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	auto got = download(d, n), got2 = download(d2, n);
	EXPECT_EQ(firstDiff(got.data(), first.data(), n), n);
	EXPECT_EQ(firstDiff(got2.data(), second.data(), n), n);
}

TEST_F(AsyncCopies, PageableCopiesBehindAHostFunction)
{
	// The stream is held by a host function: the staged copies wait in the
	// runtime, and their sources are reused meanwhile.
	const size_t n = (12 << 20) + 5;
	const size_t small = 1 << 20;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n);
	unsigned char *e[3] = {deviceAlloc(small), deviceAlloc(small), deviceAlloc(small)};
	ASSERT_TRUE(s && d && e[0] && e[1] && e[2]);
	Gate &g = block(s);
	auto big = pattern(n, 11);
	std::vector<unsigned char> buf = big;
	ASSERT_EQ(npurtMemcpyAsync(d, buf.data(), n, npurtMemcpyHostToDevice, s), npurtSuccess);
	std::fill(buf.begin(), buf.end(), 0xff);
	std::vector<std::vector<unsigned char>> smalls;
	for (int i = 0; i < 3; i++) {
		smalls.push_back(pattern(small, 20u + static_cast<unsigned>(i)));
		std::vector<unsigned char> tmp = smalls.back();
		ASSERT_EQ(npurtMemcpyAsync(e[i], tmp.data(), small, npurtMemcpyHostToDevice, s),
		          npurtSuccess);
	}
	g.open();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	auto got = download(d, n);
	size_t bad = firstDiff(got.data(), big.data(), n);
	bool ok = bad == n;
	for (int i = 0; i < 3; i++)
		ok = ok && download(e[i], small) == smalls[i];
	if (!ok)
		FAIL() << "BUG: pageable host-to-device copies enqueued behind a host function "
		          "deliver wrong data (12 MiB copy: first wrong byte at "
		       << bad
		       << "): stageIn() reuses a staging buffer after waiting for "
		          "Stream::tail(), which does not cover submissions still deferred "
		          "behind the host function";
}

TEST_F(AsyncCopies, PageableDeviceToHostBehindAHostFunctionWaits)
{
	const size_t n = (5 << 20) + 7;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n);
	ASSERT_TRUE(s && d);
	ASSERT_EQ(npurtMemset(d, 0x01, n), npurtSuccess);
	Gate &g = block(s);
	ASSERT_EQ(npurtMemsetAsync(d, 0x77, n, s), npurtSuccess);
	// The copy must not return while the host function holds the stream:
	// it runs in a thread, and the gate opens when it returned or after a
	// second, whichever comes first.
	std::vector<unsigned char> out(n, 0);
	Signal returned;
	npurtError_t err = npurtErrorUnknown;
	std::thread t([&] {
		err = npurtMemcpyAsync(out.data(), d, n, npurtMemcpyDeviceToHost, s);
		returned.set();
	});
	bool early = returned.wait(1000);
	g.open();
	t.join();
	ASSERT_EQ(err, npurtSuccess) << lastMessage();
	size_t bad = firstNot(out.data(), 0x77, n);
	if (early || bad != n)
		FAIL() << "BUG: a pageable device-to-host npurtMemcpyAsync behind a host "
		          "function returned before the host function finished (returned "
		          "while the gate was closed: "
		       << early << "), with wrong data from byte " << bad << " (first byte "
		       << int(out[0])
		       << ", want 0x77): stageOut() waits on Stream::tail(), which misses "
		          "the deferred submissions";
	EXPECT_EQ(bad, n);
}

TEST_F(AsyncCopies, PageableDeviceToHostHasTheDataOnReturn)
{
	for (size_t n : {size_t{1}, size_t{1 << 20}, size_t{(9 << 20) + 3}}) {
		npurtStream_t s = stream();
		unsigned char *d = deviceAlloc(n), *p = pinnedAlloc(n);
		ASSERT_TRUE(s && d && p);
		auto want = pattern(n, static_cast<unsigned>(n));
		std::memcpy(p, want.data(), n);
		// Only enqueued: the fill and the pinned copy are not waited for.
		ASSERT_EQ(npurtMemsetAsync(d, 0, n, s), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(d, p, n, npurtMemcpyHostToDevice, s), npurtSuccess);
		std::vector<unsigned char> out(n, 0xaa);
		ASSERT_EQ(npurtMemcpyAsync(out.data(), d, n, npurtMemcpyDeviceToHost, s),
		          npurtSuccess)
		        << lastMessage();
		EXPECT_EQ(firstDiff(out.data(), want.data(), n), n) << n << " bytes";
	}
}

TEST_F(AsyncCopies, MemsetAsyncSizesOffsetsAndValues)
{
	const size_t n = (8 << 20) + 64;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n);
	ASSERT_TRUE(s && d);
	std::vector<unsigned char> model(n, 0x10);
	ASSERT_EQ(npurtMemsetAsync(d, 0x10, n, s), npurtSuccess);
	struct Fill {
		size_t off, len;
		int value;
	};
	const Fill fills[] = {{0, 1, 0x01},
	                      {3, 5, 0x02},
	                      {4095, 2, 0x03},
	                      {100, 4 << 20, 0x04},
	                      {1, (8 << 20) + 1, 0x1ab},  // only the low byte counts
	                      {n - 1, 1, -1},
	                      {(4 << 20) - 3, 7, 0x80}};
	for (const Fill &f : fills) {
		ASSERT_EQ(npurtMemsetAsync(d + f.off, f.value, f.len, s), npurtSuccess)
		        << lastMessage();
		std::fill_n(model.begin() + static_cast<long>(f.off), f.len,
		            static_cast<unsigned char>(f.value));
	}
	EXPECT_EQ(npurtMemsetAsync(d, 0x99, 0, s), npurtSuccess) << "0 bytes is nothing to do";
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	auto got = download(d, n);
	EXPECT_EQ(firstDiff(got.data(), model.data(), n), n);
}

// 16- and 32-bit fills (torch's fill_ of halves, floats and ints): count
// in elements, each element little-endian, neighbours untouched; a 64 MiB
// fill is one task well inside the job timeout (a strided broadcast of
// one element, what the backend did before, timed out).
TEST_F(AsyncCopies, MemsetD16AndD32FillElements)
{
	const size_t n = 64 << 20;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n + 16);
	ASSERT_TRUE(s && d);
	ASSERT_EQ(npurtMemsetAsync(d, 0xee, n + 16, s), npurtSuccess);
	ASSERT_EQ(npurtMemsetD32Async(d + 4, 0x3f800000u, n / 4, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetD16Async(d + 2, 0xbeef, 1, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetD16Async(d + n, 0x1234, 3, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	auto got = download(d, n + 16);
	std::vector<unsigned char> want(n + 16, 0xee);
	for (size_t i = 4; i < n + 4; i += 4) {
		want[i] = 0x00;
		want[i + 1] = 0x00;
		want[i + 2] = 0x80;
		want[i + 3] = 0x3f;
	}
	want[2] = 0xef;
	want[3] = 0xbe;
	for (size_t i = n; i < n + 6; i += 2) {
		want[i] = 0x34;
		want[i + 1] = 0x12;
	}
	EXPECT_EQ(firstDiff(got.data(), want.data(), n + 16), n + 16);

	// The synchronous forms wait for the fill.
	ASSERT_EQ(npurtMemsetD32(d, 0x01020304u, 2), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetD16(d + 8, 0xa0b0, 2), npurtSuccess) << lastMessage();
	auto head = download(d, 12);
	const unsigned char wantHead[12] = {4, 3, 2, 1, 4, 3, 2, 1, 0xb0, 0xa0, 0xb0, 0xa0};
	EXPECT_EQ(firstDiff(head.data(), wantHead, 12), 12u);
}

TEST_F(AsyncCopies, MemsetD16AndD32RejectBadArguments)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096);
	ASSERT_TRUE(s && d);
	ASSERT_EQ(npurtMemsetAsync(d, 0x5a, 4096, s), npurtSuccess);
	EXPECT_EQ(npurtMemsetD32Async(d + 2, 1, 4, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "is not 4-byte aligned")) << lastMessage();
	EXPECT_EQ(npurtMemsetD16Async(d + 1, 1, 4, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "is not 2-byte aligned")) << lastMessage();
	EXPECT_EQ(npurtMemsetD32Async(d, 1, 1025, s), npurtErrorInvalidValue)
	        << "4100 bytes overrun 4096";
	EXPECT_TRUE(contains(lastMessage(), "npurtMemsetD32Async")) << lastMessage();
	EXPECT_EQ(npurtMemsetD32Async(d, 1, SIZE_MAX / 2, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overflow")) << lastMessage();
	EXPECT_EQ(npurtMemsetD16Async(nullptr, 1, 1, s), npurtErrorInvalidValue);
	std::vector<uint32_t> host(4);
	EXPECT_EQ(npurtMemsetD32Async(host.data(), 1, 4, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "is not device memory")) << lastMessage();
	EXPECT_EQ(npurtMemsetD32Async(d, 7, 0, s), npurtSuccess) << "0 elements is nothing to do";
	EXPECT_EQ(npurtMemsetD16(d + 3, 1, 1), npurtErrorInvalidValue);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	auto got = download(d, 4096);
	std::vector<unsigned char> want(4096, 0x5a);
	EXPECT_EQ(firstDiff(got.data(), want.data(), 4096), 4096u) << "nothing was written";
}

TEST_F(AsyncCopies, OverrunsFailBeforeSubmission)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096), *d2 = deviceAlloc(4096);
	ASSERT_TRUE(s && d && d2);
	auto before = pattern(4096, 3);
	upload(d, before);
	upload(d2, before);
	std::vector<unsigned char> h(2 << 20, 0x55);
	EXPECT_EQ(npurtMemcpyAsync(d, h.data(), 4097, npurtMemcpyHostToDevice, s),
	          npurtErrorInvalidValue);
	std::string msg = lastMessage();
	EXPECT_TRUE(contains(msg, "npurtMemcpyAsync")) << msg;
	EXPECT_TRUE(contains(msg, "overrun its allocation of 4096 bytes")) << msg;
	// Pageable sources bigger than a staging chunk: nothing staged either.
	EXPECT_EQ(npurtMemcpyAsync(d + 1, h.data(), h.size(), npurtMemcpyHostToDevice, s),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyAsync(h.data(), d + 4000, 97, npurtMemcpyDeviceToHost, s),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "src")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(d2 + 1, d, 4096, npurtMemcpyDeviceToDevice, s),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "dst")) << lastMessage();
	EXPECT_EQ(npurtMemsetAsync(d + 10, 0, 4087, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemsetAsync")) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), "overrun")) << lastMessage();
	// The stream did not fail and nothing was written.
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(download(d, 4096), before);
	EXPECT_EQ(download(d2, 4096), before);
	EXPECT_EQ(npurtMemsetAsync(d, 0x31, 4096, s), npurtSuccess);
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess);
}

// Pageable copies of 1 MiB and more move through their own pinned pages
// (no staging): synchronous, asynchronous on an idle stream, unaligned,
// and from memory the process may only read.
// The kB of pinned memory /proc/self/status reports (VmPin), or -1.
long vmPinKiB()
{
	std::ifstream f("/proc/self/status");
	std::string line;
	while (std::getline(f, line))
		if (line.rfind("VmPin:", 0) == 0)
			return std::strtol(line.c_str() + 6, nullptr, 10);
	return -1;
}

// Large pageable copies keep their pin for the next copy of the range; a
// range unmapped and mapped again, wholly or in part, must be copied
// from and to its new pages, never the pinned old ones.
TEST_F(AsyncCopies, PageableCopiesFollowMemoryRemappedAtTheSameAddress)
{
	const size_t n = 2 << 20, page = 4096;
	unsigned char *d = deviceAlloc(n);
	auto *m = static_cast<unsigned char *>(
	        mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	ASSERT_TRUE(d && m != MAP_FAILED);
	auto remap = [&](unsigned char *at, size_t len, unsigned char fill) {
		void *r = mmap(at, len, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		ASSERT_EQ(r, static_cast<void *>(at));
		std::memset(at, fill, len);
	};
	auto upload = [&](unsigned char want) {
		ASSERT_EQ(npurtMemcpy(d, m, n, npurtMemcpyHostToDevice), npurtSuccess)
		        << lastMessage();
		std::vector<unsigned char> v(n);
		ASSERT_EQ(npurtMemcpy(v.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess);
		EXPECT_EQ(firstNot(v.data(), want, n), n) << "value " << int(want);
	};

	std::memset(m, 0x11, n);
	upload(0x11);
	std::memset(m, 0x22, n);  // through the same pages: the pin stays good
	upload(0x22);
	remap(m, n, 0x33);
	upload(0x33);
	// One page replaced in the middle.
	std::memset(m, 0x44, n);
	upload(0x44);
	remap(m + 5 * page, page, 0x55);
	ASSERT_EQ(npurtMemcpy(d, m, n, npurtMemcpyHostToDevice), npurtSuccess) << lastMessage();
	std::vector<unsigned char> v(n);
	ASSERT_EQ(npurtMemcpy(v.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(firstNot(v.data(), 0x44, 5 * page), 5 * page);
	EXPECT_EQ(firstNot(v.data() + 5 * page, 0x55, page), page);
	EXPECT_EQ(firstNot(v.data() + 6 * page, 0x44, n - 6 * page), n - 6 * page);

	// Device to host, into memory mapped anew after a copy into it.
	ASSERT_EQ(npurtMemset(d, 0x66, n), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(m, d, n, npurtMemcpyDeviceToHost), npurtSuccess) << lastMessage();
	EXPECT_EQ(firstNot(m, 0x66, n), n);
	remap(m, n, 0);
	ASSERT_EQ(npurtMemset(d, 0x77, n), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(m, d, n, npurtMemcpyDeviceToHost), npurtSuccess) << lastMessage();
	EXPECT_EQ(firstNot(m, 0x77, n), n);
	munmap(m, n);
}

// The pins kept between copies stay within a bound (64 MiB, or a quarter
// of RLIMIT_MEMLOCK), however many ranges were copied.
TEST_F(AsyncCopies, PageablePinsKeptBetweenCopiesAreBounded)
{
	const size_t n = 4 << 20;
	const int buffers = 24;  // 96 MiB in all
	unsigned char *d = deviceAlloc(n);
	ASSERT_TRUE(d);
	long before = vmPinKiB();
	ASSERT_LE(0, before);
	std::vector<void *> maps;
	for (int i = 0; i < buffers; i++) {
		void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		               0);
		ASSERT_NE(m, MAP_FAILED);
		maps.push_back(m);
		std::memset(m, i, n);
		ASSERT_EQ(npurtMemcpy(d, m, n, npurtMemcpyHostToDevice), npurtSuccess)
		        << lastMessage();
		EXPECT_LE(vmPinKiB() - before, 64 << 10) << "after " << i + 1 << " ranges";
	}
	for (void *m : maps)
		munmap(m, n);
}

TEST_F(AsyncCopies, LargePageableCopiesFromTheirOwnPages)
{
	const size_t n = (1 << 20) + 5, off = 3;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n + 2 * off);
	ASSERT_TRUE(s && d);
	std::vector<unsigned char> src = pattern(n, 77), back(n + 2 * off, 0xee);

	ASSERT_EQ(npurtMemset(d, 0xc3, n + 2 * off), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(d + off, src.data(), n, npurtMemcpyHostToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(back.data() + off, d + off, n, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtProfilerStop(), npurtSuccess);
	std::string path = "/tmp/npurt_test_direct_" + std::to_string(getpid()) + ".json";
	ASSERT_EQ(npurtProfilerExportTrace(path.c_str()), npurtSuccess) << lastMessage();
	std::string trace = readFile(path);
	unlink(path.c_str());
	EXPECT_TRUE(contains(trace, "copy host (pageable, direct) -> device 1048581 bytes"))
	        << trace;
	EXPECT_TRUE(contains(trace, "copy device -> host (pageable, direct) 1048581 bytes"))
	        << trace;
	EXPECT_EQ(firstDiff(back.data() + off, src.data(), n), n);
	EXPECT_EQ(firstNot(back.data(), 0xee, off), off);
	EXPECT_EQ(firstNot(back.data() + off + n, 0xee, off), off);
	auto dev = download(d, n + 2 * off);
	EXPECT_EQ(firstNot(dev.data(), 0xc3, off), off) << "wrote before the range";
	EXPECT_EQ(firstNot(dev.data() + off + n, 0xc3, off), off) << "wrote past the range";

	// Asynchronous, on an idle stream, from read-only memory.
	size_t map = (n + 4095) & ~size_t(4095);
	void *ro = mmap(nullptr, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(ro, MAP_FAILED);
	std::vector<unsigned char> other = pattern(n, 78);
	std::memcpy(ro, other.data(), n);
	ASSERT_EQ(mprotect(ro, map, PROT_READ), 0);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(d, ro, n, npurtMemcpyHostToDevice, s), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpyAsync(back.data(), d, n, npurtMemcpyDeviceToHost, s), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(firstDiff(back.data(), other.data(), n), n);
	munmap(ro, map);
}

TEST_F(AsyncCopies, FreedAndBadPointersAreErrors)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 8192), npurtSuccess);
	ASSERT_EQ(npurtFree(d), npurtSuccess);
	std::vector<unsigned char> h(8192);
	EXPECT_EQ(npurtMemcpyAsync(h.data(), d, 16, npurtMemcpyDeviceToHost, s),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live device memory")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(d, h.data(), 16, npurtMemcpyDefault, s), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemsetAsync(d, 0, 16, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live device memory")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(nullptr, h.data(), 16, npurtMemcpyDefault, s),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyAsync(h.data(), nullptr, 16, npurtMemcpyDefault, s),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemsetAsync(nullptr, 0, 16, s), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyAsync(nullptr, nullptr, 0, npurtMemcpyDefault, s), npurtSuccess)
	        << "0 bytes is nothing to do";
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess);
}

TEST_F(AsyncCopies, KindMismatchesAreErrors)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096), *p = pinnedAlloc(4096);
	ASSERT_TRUE(s && d && p);
	std::vector<unsigned char> h(4096, 1), h2(4096, 2);
	EXPECT_EQ(npurtMemcpyAsync(h.data(), d, 16, npurtMemcpyHostToDevice, s),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemcpyHostToDevice but dst")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(d, h.data(), 16, npurtMemcpyDeviceToHost, s),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemcpyDeviceToHost")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(d, h.data(), 16, npurtMemcpyDeviceToDevice, s),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyAsync(d, d + 100, 16, npurtMemcpyHostToHost, s),
	          npurtErrorInvalidValue);
	// Pinned memory is host memory, whatever the device can see.
	EXPECT_EQ(npurtMemcpyAsync(d, p, 16, npurtMemcpyDeviceToDevice, s), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyAsync(p, d, 16, npurtMemcpyHostToDevice, s), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpyAsync(d, h.data(), 16, static_cast<npurtMemcpyKind>(7), s),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown kind")) << lastMessage();
	EXPECT_EQ(npurtMemsetAsync(h.data(), 0, 16, s), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not device memory")) << lastMessage();
	EXPECT_EQ(npurtMemsetAsync(p, 0, 16, s), npurtErrorInvalidValue);

	// Host to host is allowed, in stream order, pageable and pinned.
	Gate &g = block(s);
	ASSERT_EQ(npurtMemsetAsync(d, 0x44, 4096, s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(p, d, 4096, npurtMemcpyDeviceToHost, s), npurtSuccess);
	g.open();
	ASSERT_EQ(npurtMemcpyAsync(h.data(), p, 4096, npurtMemcpyHostToHost, s), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpyAsync(h2.data(), h.data(), 4096, npurtMemcpyDefault, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_EQ(firstNot(h.data(), 0x44, 4096), 4096u) << "host to host ran in stream order";
	EXPECT_EQ(firstNot(h2.data(), 0x44, 4096), 4096u);
}

TEST_F(AsyncCopies, DeviceToDeviceAcrossNpus)
{
	if (npurt::deviceCount() < 2)
		GTEST_SKIP() << "needs two NPUs";
	const size_t n = (5 << 20) + 9;
	npurtStream_t s0 = stream();
	unsigned char *a = deviceAlloc(n);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	npurtStream_t s1 = stream();
	unsigned char *b = deviceAlloc(n), *c = deviceAlloc(n);
	unsigned char *p1 = pinnedAlloc(n);  // pinned for NPU 1, pageable to NPU 0
	// Each NPU's context reaches the other's memory (contexts are
	// isolated without).
	ASSERT_EQ(npurtDeviceEnablePeerAccess(0, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_EQ(npurtDeviceEnablePeerAccess(1, 0), npurtSuccess) << lastMessage();
	struct Disable {
		~Disable()
		{
			npurtDeviceDisablePeerAccess(1);
			npurtSetDevice(1);
			npurtDeviceDisablePeerAccess(0);
			npurtSetDevice(0);
		}
	} disable;
	ASSERT_TRUE(s0 && s1 && a && b && c && p1);

	auto in = pattern(n, 99);
	// NPU 0's stream: fill a, then copy it to NPU 1 in stream order.
	ASSERT_EQ(npurtMemcpyAsync(a, in.data(), n, npurtMemcpyHostToDevice, s0), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s0), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s0), npurtSuccess);
	EXPECT_EQ(download(b, n), in);

	// NPU 1's stream the other way, after its own fill, with Default.
	ASSERT_EQ(npurtMemsetAsync(c, 0x6b, n, s1), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(a, c, n, npurtMemcpyDefault, s1), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s1), npurtSuccess);
	auto got = download(a, n);
	EXPECT_EQ(firstNot(got.data(), 0x6b, n), n);

	// A fill of NPU 1 memory on NPU 0's stream, and NPU 1's pinned memory
	// used by NPU 0's stream.
	ASSERT_EQ(npurtMemsetAsync(b, 0x2e, n, s0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpyAsync(p1, b, n, npurtMemcpyDeviceToHost, s0), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s0), npurtSuccess);
	EXPECT_EQ(firstNot(p1, 0x2e, n), n);
	std::memcpy(p1, in.data(), n);
	ASSERT_EQ(npurtMemcpyAsync(a, p1, n, npurtMemcpyHostToDevice, s0), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s0), npurtSuccess);
	EXPECT_EQ(download(a, n), in);
}

// ---------------------------------------------------------------------------
// Events.

TEST_F(Events, CreateFlags)
{
	for (unsigned f : {unsigned{npurtEventDefault}, unsigned{npurtEventBlockingSync},
	                   unsigned{npurtEventDisableTiming}, unsigned{npurtEventTiming},
	                   unsigned{npurtEventTiming | npurtEventBlockingSync},
	                   unsigned{npurtEventDisableTiming | npurtEventBlockingSync}}) {
		npurtEvent_t e = nullptr;
		EXPECT_EQ(npurtEventCreateWithFlags(&e, f), npurtSuccess)
		        << f << ": " << lastMessage();
		EXPECT_EQ(npurtEventDestroy(e), npurtSuccess);
	}
	npurtEvent_t e = nullptr;
	EXPECT_EQ(npurtEventCreate(&e), npurtSuccess);
	EXPECT_EQ(npurtEventDestroy(e), npurtSuccess);
	for (unsigned f : {0x8u, 0x20u, 0x100u, 0x80000000u}) {
		EXPECT_EQ(npurtEventCreateWithFlags(&e, f), npurtErrorInvalidValue) << f;
		EXPECT_TRUE(contains(lastMessage(), "unknown flags")) << lastMessage();
	}
	EXPECT_EQ(npurtEventCreateWithFlags(&e, npurtEventTiming | npurtEventDisableTiming),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "contradict")) << lastMessage();
	EXPECT_EQ(npurtEventCreate(nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtEventCreateWithFlags(nullptr, 0), npurtErrorInvalidValue);
}

TEST_F(Events, NeverRecordedIsComplete)
{
	npurtEvent_t e = event(), t = event(npurtEventTiming);
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096);
	ASSERT_TRUE(e && t && s && d);
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess);
	EXPECT_EQ(npurtEventQuery(t), npurtSuccess);
	EXPECT_EQ(npurtEventSynchronize(e), npurtSuccess);
	EXPECT_EQ(npurtEventSynchronizeTimeout(t, 0), npurtSuccess);
	EXPECT_EQ(npurtStreamWaitEvent(s, e, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	// Recorded on a stream with no work: complete at once.
	npurtStream_t idle = stream();
	ASSERT_EQ(npurtEventRecord(e, idle), npurtSuccess);
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(t, idle), npurtSuccess);
	EXPECT_EQ(npurtEventSynchronize(t), npurtSuccess);
}

TEST_F(Events, RecordQuerySynchronize)
{
	const size_t n = 2 << 20;
	npurtStream_t s = stream();
	npurtEvent_t e = event();
	unsigned char *d = deviceAlloc(n);
	ASSERT_TRUE(s && e && d);
	Gate &g = block(s);
	ASSERT_EQ(npurtMemsetAsync(d, 0x61, n, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtErrorNotReady);
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess) << "not ready is a status";
	auto t0 = Clock::now();
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 100), npurtErrorTimeout);
	double waited = msSince(t0);
	EXPECT_GE(waited, 90.0);
	EXPECT_LT(waited, 3000.0);
	EXPECT_TRUE(contains(lastMessage(), "npurtEventSynchronize")) << lastMessage();
	npurtGetLastError();
	g.open();
	ASSERT_EQ(npurtEventSynchronize(e), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess);
	// The event covered the fill: its data is there.
	auto out = download(d, n);
	EXPECT_EQ(firstNot(out.data(), 0x61, n), n);

	// Re-recording moves the event to the new point; the default stream
	// records too.
	ASSERT_EQ(npurtMemsetAsync(d, 0x62, n, nullptr), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, nullptr), npurtSuccess);
	ASSERT_EQ(npurtEventSynchronize(e), npurtSuccess);
	out = download(d, n);
	EXPECT_EQ(firstNot(out.data(), 0x62, n), n);
}

TEST_F(Events, QueryAndTimeoutWithDeviceWork)
{
	JobLatency slow(0, latencyUs());
	if (!slow.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	npurtStream_t s = stream();
	npurtEvent_t e = event();
	unsigned char *d = deviceAlloc(1 << 20);
	ASSERT_TRUE(s && e && d);
	ASSERT_EQ(npurtMemsetAsync(d, 0x12, 1 << 20, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, s), npurtSuccess);
	EXPECT_EQ(npurtEventQuery(e), npurtErrorNotReady);
	auto t0 = Clock::now();
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 20), npurtErrorTimeout);
	EXPECT_GE(msSince(t0), 15.0);
	EXPECT_TRUE(contains(lastMessage(), "did not complete within 20 ms")) << lastMessage();
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 60000), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess);
}

TEST_F(Events, ElapsedTimeIsOrderedAndPlausible)
{
	const size_t n = bigJob();
	npurtStream_t s = stream();
	unsigned char *a = deviceAlloc(n), *b = deviceAlloc(n);
	npurtEvent_t e[4] = {event(npurtEventTiming), event(npurtEventTiming),
	                     event(npurtEventTiming), event(npurtEventTiming)};
	ASSERT_TRUE(s && a && b && e[0] && e[1] && e[2] && e[3]);
	auto t0 = Clock::now();
	ASSERT_EQ(npurtEventRecord(e[0], s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e[1], s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(a, b, n, npurtMemcpyDeviceToDevice, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e[2], s), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(a, 0, n, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e[3], s), npurtSuccess);
	ASSERT_EQ(npurtEventSynchronize(e[3]), npurtSuccess) << lastMessage();
	double hostMs = msSince(t0);

	float t[4][4] = {};
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			ASSERT_EQ(npurtEventElapsedTime(&t[i][j], e[i], e[j]), npurtSuccess)
			        << i << "," << j << ": " << lastMessage();
	EXPECT_GT(t[0][1], 0.0f) << "a copy of " << (n >> 20) << " MiB takes time";
	EXPECT_GT(t[1][2], 0.0f);
	EXPECT_GT(t[2][3], 0.0f);
	EXPECT_EQ(t[1][1], 0.0f);
	// Nested intervals: the outer one is the longer.
	EXPECT_GE(t[0][3], t[1][2]);
	EXPECT_GE(t[0][3], t[0][2]);
	EXPECT_GE(t[0][2], t[0][1]);
	EXPECT_NEAR(t[0][1] + t[1][2] + t[2][3], t[0][3], 0.01 + 1e-4 * t[0][3]);
	EXPECT_NEAR(t[3][0], -t[0][3], 1e-3) << "end before start is negative";
	// The device cannot have taken longer than the host waited for it.
	EXPECT_LE(t[0][3], hostMs + 1.0);
}

// Ported CUDA code times with plain cudaEventCreate events.
TEST_F(Events, DefaultEventsTimeAsInCuda)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(1 << 20);
	npurtEvent_t a = nullptr, b = nullptr;
	ASSERT_EQ(npurtEventCreate(&a), npurtSuccess) << lastMessage();
	events_.push_back(a);
	b = event(npurtEventDefault);
	ASSERT_TRUE(s && d && a && b);
	ASSERT_EQ(npurtEventRecord(a, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(d, 1, 1 << 20, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventRecord(b, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventSynchronize(b), npurtSuccess) << lastMessage();
	float ms = -1;
	ASSERT_EQ(npurtEventElapsedTime(&ms, a, b), npurtSuccess) << lastMessage();
	EXPECT_GT(ms, 0.0f) << "a 1 MiB fill takes time on the device";
	// The old opt-in flag means the same.
	npurtEvent_t t = event(npurtEventTiming);
	ASSERT_EQ(npurtEventRecord(t, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventSynchronize(t), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventElapsedTime(&ms, b, t), npurtSuccess) << lastMessage();
	EXPECT_GE(ms, 0.0f);
}

TEST_F(Events, ElapsedTimeErrors)
{
	npurtStream_t s = stream();
	npurtEvent_t plain = event(npurtEventDisableTiming | npurtEventBlockingSync),
	             disabled = event(npurtEventDisableTiming), t1 = event(),
	             t2 = event(npurtEventTiming);
	ASSERT_TRUE(s && plain && disabled && t1 && t2);
	float ms = -1;
	EXPECT_EQ(npurtEventElapsedTime(&ms, t1, t2), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "never recorded")) << lastMessage();
	ASSERT_EQ(npurtEventRecord(plain, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(disabled, s), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(t1, s), npurtSuccess);
	EXPECT_EQ(npurtEventElapsedTime(&ms, plain, t1), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "npurtEventDisableTiming")) << lastMessage();
	EXPECT_EQ(npurtEventElapsedTime(&ms, t1, disabled), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventElapsedTime(&ms, plain, plain), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventElapsedTime(&ms, t1, t2), npurtErrorInvalidValue) << "t2 not recorded";
	EXPECT_EQ(npurtEventElapsedTime(nullptr, t1, t1), npurtErrorInvalidValue);
	EXPECT_EQ(npurtEventElapsedTime(&ms, nullptr, t1), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventElapsedTime(&ms, t1, nullptr), npurtErrorInvalidHandle);

	// Not complete yet: a host function holds the end.
	Gate &g = block(s);
	ASSERT_EQ(npurtEventRecord(t2, s), npurtSuccess);
	npurtGetLastError();
	EXPECT_EQ(npurtEventElapsedTime(&ms, t1, t2), npurtErrorNotReady);
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess);
	g.open();
	ASSERT_EQ(npurtEventSynchronize(t2), npurtSuccess);
	EXPECT_EQ(npurtEventElapsedTime(&ms, t1, t2), npurtSuccess) << lastMessage();
	EXPECT_GE(ms, 0.0f);

	if (npurt::deviceCount() >= 2) {
		ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
		npurtStream_t s1 = stream();
		npurtEvent_t other = event(npurtEventTiming);
		ASSERT_EQ(npurtEventRecord(other, s1), npurtSuccess);
		ASSERT_EQ(npurtEventSynchronize(other), npurtSuccess);
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
		EXPECT_EQ(npurtEventElapsedTime(&ms, t1, other), npurtErrorInvalidValue);
		EXPECT_TRUE(contains(lastMessage(), "different NPUs")) << lastMessage();
	}
}

TEST_F(Events, StreamWaitEventOrdersStreamsOfOneDevice)
{
	// A writes X in several steps; B copies X after waiting for A's event.
	// With the job latency A's chain certainly outlasts B's copy.
	const size_t n = 4 << 20;
	JobLatency slow(0, latencyUs() / 3);
	npurtStream_t a = stream(), b = stream();
	npurtEvent_t e = event();
	unsigned char *x = deviceAlloc(n), *y = deviceAlloc(n), *src = pinnedAlloc(n);
	ASSERT_TRUE(a && b && e && x && y && src);
	ASSERT_EQ(npurtMemset(x, 0, n), npurtSuccess);
	ASSERT_EQ(npurtMemset(y, 0, n), npurtSuccess);
	auto want = pattern(n, 8);
	std::memcpy(src, want.data(), n);
	for (int round = 0; round < 2; round++) {
		ASSERT_EQ(npurtMemsetAsync(x, 0x11, n, a), npurtSuccess);
		ASSERT_EQ(npurtMemsetAsync(x, 0x22, n, a), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(x, src, n, npurtMemcpyHostToDevice, a), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
		ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyDeviceToDevice, b), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
		auto got = download(y, n);
		EXPECT_EQ(firstDiff(got.data(), want.data(), n), n) << "round " << round;
		ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess);
		ASSERT_EQ(npurtMemset(y, 0, n), npurtSuccess);
		std::memset(src, 0x5c, n);
		std::fill(want.begin(), want.end(), 0x5c);
	}
	EXPECT_EQ(npurtStreamWaitEvent(b, e, 2), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown flags 0x2")) << lastMessage();
	// External matters only in a capture (test_graph.cpp).
	EXPECT_EQ(npurtStreamWaitEvent(b, e, npurtEventWaitExternal), npurtSuccess);
	EXPECT_EQ(npurtStreamWaitEvent(b, nullptr, 0), npurtErrorInvalidHandle);
}

// A host function that notes what npurtEventQuery(e) said when it ran.
struct QueryProbe {
	npurtEvent_t e;
	npurtError_t q = npurtErrorUnknown;
	static void fn(void *p)
	{
		auto *s = static_cast<QueryProbe *>(p);
		s->q = npurtEventQuery(s->e);
	}
};

TEST_F(Events, StreamWaitEventOnAPendingRecordDoesNotBlockTheHost)
{
	// The record is deferred behind a host function; waiting for it is
	// still an enqueue, and the data shows the order.
	const size_t n = 1 << 20;
	npurtStream_t a = stream(), b = stream();
	npurtEvent_t e = event();
	unsigned char *x = deviceAlloc(n), *y = deviceAlloc(n);
	ASSERT_TRUE(a && b && e && x && y);
	ASSERT_EQ(npurtMemset(x, 0, n), npurtSuccess);
	Gate &g = block(a);
	ASSERT_EQ(npurtMemsetAsync(x, 0x44, n, a), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
	Signal returned;
	npurtError_t waitErr = npurtErrorUnknown;
	std::thread t([&] {
		waitErr = npurtStreamWaitEvent(b, e, 0);
		returned.set();
	});
	// Bounded so that a regression fails instead of hanging: the call
	// must return while the gate is still closed.
	bool early = returned.wait(30000);
	EXPECT_TRUE(early) << "npurtStreamWaitEvent blocked the calling thread until a host "
	                      "function on the recording stream finished";
	// Work enqueued on b meanwhile is ordered after the record and its
	// work, whatever kind: a copy, a host function, a record.
	ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyDeviceToDevice, b), npurtSuccess);
	QueryProbe seen{e};
	ASSERT_EQ(npurtLaunchHostFunc(b, QueryProbe::fn, &seen), npurtSuccess);
	npurtEvent_t after = event();
	ASSERT_EQ(npurtEventRecord(after, b), npurtSuccess);
	EXPECT_EQ(npurtEventQuery(after), npurtErrorNotReady);
	g.open();
	t.join();
	ASSERT_EQ(waitErr, npurtSuccess);
	ASSERT_EQ(npurtEventSynchronize(after), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
	EXPECT_EQ(seen.q, npurtSuccess) << "the host function ran before the event's work";
	auto got = download(y, n);
	EXPECT_EQ(firstNot(got.data(), 0x44, n), n);
}

// An event destroyed right after a stream was told to wait for its
// deferred record: the wait still happens (the record's outcome outlives
// the event).
TEST_F(Events, DestroyAfterWaitingForAPendingRecord)
{
	const size_t n = 1 << 20;
	npurtStream_t a = stream(), b = stream();
	unsigned char *x = deviceAlloc(n), *y = deviceAlloc(n);
	ASSERT_TRUE(a && b && x && y);
	ASSERT_EQ(npurtMemset(x, 0, n), npurtSuccess);
	npurtEvent_t e = nullptr;
	ASSERT_EQ(npurtEventCreate(&e), npurtSuccess);
	Gate &g = block(a);
	ASSERT_EQ(npurtMemsetAsync(x, 0x55, n, a), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyDeviceToDevice, b), npurtSuccess);
	std::thread destroyer([&] { EXPECT_EQ(npurtEventDestroy(e), npurtSuccess); });
	g.open();
	destroyer.join();
	ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
	auto got = download(y, n);
	EXPECT_EQ(firstNot(got.data(), 0x55, n), n);
}

TEST_F(Events, WorkAfterAWaitIncludesTheEvent)
{
	// After npurtStreamWaitEvent(b, e), b's host functions, records and
	// synchronisation come after e's work, as in CUDA.
	JobLatency slow(0, latencyUs());
	if (!slow.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	const size_t n = 1 << 20;
	npurtStream_t a = stream(), b = stream();
	unsigned char *x = deviceAlloc(n);
	ASSERT_TRUE(a && b && x);
	std::vector<std::string> bugs;

	{
		npurtEvent_t e = event();
		ASSERT_EQ(npurtMemsetAsync(x, 1, n, a), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
		ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess);
		QueryProbe seen{e};
		ASSERT_EQ(npurtLaunchHostFunc(b, QueryProbe::fn, &seen), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess);
		if (seen.q != npurtSuccess)
			bugs.push_back(
			        "a host function enqueued after npurtStreamWaitEvent ran before "
			        "the event completed (npurtEventQuery in it: " +
			        std::string(npurtGetErrorName(seen.q)) + ")");
		ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess);
	}
	{
		npurtEvent_t e = event(), after = event();
		ASSERT_EQ(npurtMemsetAsync(x, 2, n, a), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
		ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(after, b), npurtSuccess);
		ASSERT_EQ(npurtEventSynchronize(after), npurtSuccess);
		npurtError_t q = npurtEventQuery(e);
		if (q != npurtSuccess)
			bugs.push_back("an event recorded on b after npurtStreamWaitEvent(b, e) "
			               "completed before e (npurtEventQuery(e): " +
			               std::string(npurtGetErrorName(q)) + ")");
		ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess);
	}
	{
		npurtEvent_t e = event();
		ASSERT_EQ(npurtMemsetAsync(x, 3, n, a), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
		ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess);
		npurtError_t q = npurtEventQuery(e);
		if (q != npurtSuccess)
			bugs.push_back(
			        "npurtStreamSynchronize(b) returned before the event b waits "
			        "for (npurtEventQuery(e): " +
			        std::string(npurtGetErrorName(q)) + ")");
		ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess);
	}
	{
		// Host to host copies on b are in b's order too.
		npurtEvent_t e = event();
		unsigned char *p = pinnedAlloc(n);
		ASSERT_NE(p, nullptr);
		std::memset(p, 0, n);
		std::vector<unsigned char> h(n, 0xee);
		ASSERT_EQ(npurtMemsetAsync(x, 4, n, a), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(p, x, n, npurtMemcpyDeviceToHost, a), npurtSuccess);
		ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
		ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess);
		ASSERT_EQ(npurtMemcpyAsync(h.data(), p, n, npurtMemcpyHostToHost, b), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess);
		if (firstNot(h.data(), 4, n) != n)
			bugs.push_back("a host-to-host npurtMemcpyAsync on b after "
			               "npurtStreamWaitEvent(b, e) copied before e's work was done "
			               "(first byte " +
			               std::to_string(h[0]) + ", want 4)");
		ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess);
	}
	if (!bugs.empty()) {
		std::string all;
		for (auto &b2 : bugs)
			all += "\n  - " + b2;
		FAIL() << "BUG: npurtStreamWaitEvent only gates the next device job of "
		          "the stream (Stream::wait keeps the fence for submitNow):"
		       << all;
	}
}

TEST_F(Events, StreamWaitEventAcrossDevices)
{
	if (npurt::deviceCount() < 2)
		GTEST_SKIP() << "needs two NPUs";
	const size_t n = 2 << 20;
	JobLatency slow(0, latencyUs());  // NPU 0 only: its work is the slow one
	npurtStream_t a = stream();
	npurtEvent_t e = event();
	unsigned char *x = deviceAlloc(n), *src = pinnedAlloc(n);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	npurtStream_t b = stream();
	npurtEvent_t after = event();
	unsigned char *y = deviceAlloc(n);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_TRUE(a && e && x && src && b && after && y);
	auto want = pattern(n, 31);
	std::memcpy(src, want.data(), n);

	// b's fill on NPU 1 waits for a's copy on NPU 0.
	ASSERT_EQ(npurtMemcpyAsync(x, src, n, npurtMemcpyHostToDevice, a), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(y, 0x19, n, b), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventRecord(after, b), npurtSuccess);
	ASSERT_EQ(npurtEventSynchronize(after), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess) << "NPU 1's work finished before NPU 0's";
	ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();

	// The data way: b copies what a wrote, after waiting for it.
	ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess);
	want = pattern(n, 32);
	std::memcpy(src, want.data(), n);
	ASSERT_EQ(npurtMemsetAsync(x, 0x00, n, a), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(x, src, n, npurtMemcpyHostToDevice, a), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, a), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(b, e, 0), npurtSuccess);
	ASSERT_EQ(npurtMemcpyPeerAsync(y, 1, x, 0, n, b), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	auto got = download(y, n);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	size_t bad = firstDiff(got.data(), want.data(), n);
	if (bad != n)
		FAIL() << "BUG: npurtMemcpyPeerAsync from NPU 0 memory on an NPU 1 stream after "
		          "npurtStreamWaitEvent copied before the event's work was done "
		          "(first wrong byte "
		       << bad
		       << "): the cross-device path synchronises the stream's own "
		          "work but not the event waits pending on it";
}

TEST_F(Events, SynchronizeTimeoutOnAPendingRecord)
{
	npurtStream_t s = stream();
	npurtEvent_t e = event();
	ASSERT_TRUE(s && e);
	Gate &g = block(s);
	ASSERT_EQ(npurtEventRecord(e, s), npurtSuccess);
	auto t0 = Clock::now();
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 150), npurtErrorTimeout);
	EXPECT_GE(msSince(t0), 140.0);
	EXPECT_EQ(npurtEventQuery(e), npurtErrorNotReady);
	g.open();
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 10000), npurtSuccess) << lastMessage();
}

TEST_F(Events, DestroyTwiceAndNullAreInvalidHandle)
{
	npurtEvent_t e = nullptr;
	ASSERT_EQ(npurtEventCreate(&e), npurtSuccess);
	ASSERT_EQ(npurtEventDestroy(e), npurtSuccess);
	EXPECT_EQ(npurtEventDestroy(e), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "not a live event")) << lastMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventRecord(e, nullptr), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventSynchronize(e), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamWaitEvent(nullptr, e, 0), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventDestroy(nullptr), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventQuery(nullptr), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventRecord(nullptr, nullptr), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventSynchronize(nullptr), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtEventSynchronizeTimeout(nullptr, 10), npurtErrorInvalidHandle);
	int bogus = 0;
	EXPECT_EQ(npurtEventDestroy(reinterpret_cast<npurtEvent_t>(&bogus)),
	          npurtErrorInvalidHandle);
	// Recording a live event on a dead stream.
	npurtEvent_t live = event();
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_EQ(npurtEventRecord(live, s), npurtErrorInvalidHandle);
}

TEST_F(Events, DestroyWhileARecordIsPending)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	npurtEvent_t e = nullptr;
	ASSERT_EQ(npurtEventCreate(&e), npurtSuccess);
	Gate &g = block(s);
	ASSERT_EQ(npurtEventRecord(e, s), npurtSuccess);
	Signal returned;
	npurtError_t err = npurtErrorUnknown;
	std::thread t([&] {
		err = npurtEventDestroy(e);
		returned.set();
	});
	bool early = returned.wait(2000);
	g.open();
	t.join();
	EXPECT_EQ(err, npurtSuccess);
	EXPECT_EQ(npurtEventQuery(e), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess) << "the deferred record did no harm";
	EXPECT_TRUE(early) << "npurtEventDestroy blocked until the host function ahead of the "
	                      "event's record finished (CUDA's cudaEventDestroy returns at once)";
}

// ---------------------------------------------------------------------------
// Host functions.

TEST_F(HostFuncs, RunInStreamOrder)
{
	const size_t n = 3 << 20;
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(n), *d2 = deviceAlloc(n);
	unsigned char *seen = pinnedAlloc(n), *sent = pinnedAlloc(n);
	ASSERT_TRUE(s && d && d2 && seen && sent);
	std::memset(seen, 0, n);
	std::memset(sent, 0, n);
	struct Ctx {
		unsigned char *seen, *sent;
		size_t n;
		size_t firstWrong = 0;
		bool ran = false;
	} c{seen, sent, n};
	ASSERT_EQ(npurtMemsetAsync(d, 0x31, n, s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(seen, d, n, npurtMemcpyDeviceToHost, s), npurtSuccess);
	ASSERT_EQ(npurtLaunchHostFunc(
	                  s,
	                  [](void *p) {
		                  auto *c2 = static_cast<Ctx *>(p);
		                  // Device work before it is done: its data is here.
		                  c2->firstWrong = firstNot(c2->seen, 0x31, c2->n);
		                  // What it writes, the copy after it sends.
		                  std::memset(c2->sent, 0x32, c2->n);
		                  c2->ran = true;
	                  },
	                  &c),
	          npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(d2, sent, n, npurtMemcpyHostToDevice, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_TRUE(c.ran);
	EXPECT_EQ(c.firstWrong, n) << "the host function ran before the copy ahead of it";
	auto got = download(d2, n);
	EXPECT_EQ(firstNot(got.data(), 0x32, n), n) << "the copy after it ran first";
}

TEST_F(HostFuncs, ManyRunInOrder)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096);
	ASSERT_TRUE(s && d);
	struct Log {
		std::mutex m;
		std::vector<int> order;
	} log;
	struct Item {
		Log *log;
		int i;
	};
	std::vector<Item> items;
	for (int i = 0; i < 500; i++)
		items.push_back({&log, i});
	for (int i = 0; i < 500; i++) {
		ASSERT_EQ(npurtLaunchHostFunc(
		                  s,
		                  [](void *p) {
			                  auto *it = static_cast<Item *>(p);
			                  std::lock_guard<std::mutex> lock(it->log->m);
			                  it->log->order.push_back(it->i);
		                  },
		                  &items[static_cast<size_t>(i)]),
		          npurtSuccess);
		if (i % 10 == 0) {
			ASSERT_EQ(npurtMemsetAsync(d, i & 0xff, 4096, s), npurtSuccess);
		}
	}
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	std::vector<int> want(500);
	for (int i = 0; i < 500; i++)
		want[static_cast<size_t>(i)] = i;
	EXPECT_EQ(log.order, want);
	auto out = download(d, 1);
	EXPECT_EQ(out[0], 490 & 0xff);
}

TEST_F(HostFuncs, AHostFunctionThatEnqueuesNothing)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	std::atomic<int> calls{0};
	ASSERT_EQ(npurtLaunchHostFunc(
	                  s, [](void *p) { static_cast<std::atomic<int> *>(p)->fetch_add(1); },
	                  &calls),
	          npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_EQ(calls.load(), 1);
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess);
	// On the default stream too.
	ASSERT_EQ(npurtLaunchHostFunc(
	                  nullptr,
	                  [](void *p) { static_cast<std::atomic<int> *>(p)->fetch_add(1); },
	                  &calls),
	          npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(nullptr), npurtSuccess);
	EXPECT_EQ(calls.load(), 2);
	EXPECT_EQ(npurtLaunchHostFunc(s, nullptr, nullptr), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "fn is NULL")) << lastMessage();
}

// ---------------------------------------------------------------------------
// Threads.

// Round trips of varied sizes and host memory kinds on stream s.
int roundTrips(npurtStream_t s, int thread, int iterations, bool syncWithEvent)
{
	int failures = 0;
	npurtEvent_t ev = nullptr;
	if (syncWithEvent && npurtEventCreate(&ev) != npurtSuccess)
		return iterations;
	for (int i = 0; i < iterations; i++) {
		size_t n = 1 + static_cast<size_t>((thread * 7919 + i * 104729) % 300000);
		if (i % 8 == 7)
			n = (4 << 20) + 17 + static_cast<size_t>(thread);  // two staging chunks
		HostKind kind = static_cast<HostKind>((thread + i) % 3);
		HostBuffer in(kind, n), out(kind, n);
		void *d = nullptr;
		if (!in.data() || !out.data() || npurtMalloc(&d, n) != npurtSuccess) {
			failures++;
			continue;
		}
		auto want = pattern(n, static_cast<unsigned>(thread * 1000 + i));
		std::memcpy(in.data(), want.data(), n);
		std::memset(out.data(), 0, n);
		bool ok = npurtMemcpyAsync(d, in.data(), n, npurtMemcpyHostToDevice, s) ==
		                  npurtSuccess &&
		          npurtMemcpyAsync(out.data(), d, n, npurtMemcpyDeviceToHost, s) ==
		                  npurtSuccess;
		if (ok && syncWithEvent)
			ok = npurtEventRecord(ev, s) == npurtSuccess &&
			     npurtEventSynchronize(ev) == npurtSuccess;
		else if (ok)
			ok = npurtStreamSynchronize(s) == npurtSuccess;
		if (!ok || std::memcmp(out.data(), want.data(), n) != 0)
			failures++;
		npurtFree(d);
	}
	if (ev)
		npurtEventDestroy(ev);
	return failures;
}

TEST_F(StreamThreads, FourThreadsShareOneStream)
{
	npurtStream_t s = stream();
	ASSERT_NE(s, nullptr);
	std::vector<int> failures(4, -1);
	std::vector<std::thread> threads;
	for (int t = 0; t < 4; t++)
		threads.emplace_back([&, t] {
			npurtSetDevice(0);
			failures[static_cast<size_t>(t)] = roundTrips(s, t, 24, false);
		});
	for (auto &t : threads)
		t.join();
	for (int t = 0; t < 4; t++)
		EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess);
}

TEST_F(StreamThreads, FourThreadsFourStreams)
{
	std::vector<int> failures(4, -1);
	std::vector<std::thread> threads;
	for (int t = 0; t < 4; t++)
		threads.emplace_back([&, t] {
			npurtSetDevice(0);
			npurtStream_t s = nullptr;
			if (npurtStreamCreate(&s) != npurtSuccess)
				return;
			failures[static_cast<size_t>(t)] = roundTrips(s, t, 24, true);
			npurtStreamDestroy(s);
		});
	for (auto &t : threads)
		t.join();
	for (int t = 0; t < 4; t++)
		EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
}

// npurtDeviceSynchronize waits for each stream of the device while other
// threads destroy theirs: a stream is kept until the wait for it ends (the
// wait used to go on in a destroyed stream).
TEST_F(StreamThreads, DeviceSynchronizeWhileOtherThreadsDestroyStreams)
{
	std::atomic<int> running{2}, failures{0}, hostCalls{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < 2; t++)
		threads.emplace_back([&] {
			npurtSetDevice(0);
			void *d = nullptr;
			if (npurtMalloc(&d, 1 << 16) != npurtSuccess)
				failures++;
			for (int i = 0; d && i < 40; i++) {
				npurtStream_t s = nullptr;
				if (npurtStreamCreate(&s) || npurtMemsetAsync(d, i, 1 << 16, s) ||
				    npurtLaunchHostFunc(
				            s,
				            [](void *p) {
					            (*static_cast<std::atomic<int> *>(p))++;
				            },
				            &hostCalls) ||
				    npurtMemsetAsync(d, i + 1, 1 << 16, s))
					failures++;
				if (npurtStreamDestroy(s))
					failures++;
			}
			npurtFree(d);
			running--;
		});
	int syncs = 0;
	while (running.load() > 0) {
		ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess) << npurtGetLastErrorMessage();
		syncs++;
	}
	for (auto &t : threads)
		t.join();
	// A destroyed stream's host functions may still be running (its end
	// goes on in a thread of its own): the device's synchronization waits
	// for them, as cudaDeviceSynchronize does.
	ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess) << npurtGetLastErrorMessage();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_EQ(hostCalls.load(), 80) << "every host function ran, destroyed stream or not";
	EXPECT_GT(syncs, 0);
}

// A stream destroyed while its host function runs stays the device's until
// the function returns: npurtDeviceSynchronize does not return before it
// (it did, once the destruction's thread had taken the stream off the
// context's list; the test above saw 79 of 80 host functions done).
TEST_F(StreamThreads, DeviceSynchronizeWaitsForADestroyedStreamsHostFunction)
{
	Gate gate;
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtLaunchHostFunc(s, &Gate::hostFn, &gate), npurtSuccess);
	ASSERT_TRUE(gate.waitReached(60000)) << "the host function did not start";
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess) << npurtGetLastErrorMessage();
	for (int i = 0; i < 3; i++) {  // whenever the destruction's thread runs
		EXPECT_EQ(npurtDeviceSynchronizeTimeout(100), npurtErrorTimeout)
		        << "returned while the destroyed stream's host function ran";
		npurtGetLastError();
	}
	EXPECT_EQ(gate.passed(), 0);
	gate.open();
	ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess) << npurtGetLastErrorMessage();
	EXPECT_EQ(gate.passed(), 1);
}

TEST_F(StreamThreads, CreateAndDestroyFromManyThreads)
{
	std::vector<int> failures(4, 0);
	std::vector<std::thread> threads;
	for (int t = 0; t < 4; t++)
		threads.emplace_back([&, t] {
			npurtSetDevice(0);
			void *d = nullptr;
			if (npurtMalloc(&d, 4096) != npurtSuccess) {
				failures[static_cast<size_t>(t)]++;
				return;
			}
			for (int i = 0; i < 15; i++) {
				npurtStream_t s = nullptr;
				npurtEvent_t e = nullptr;
				unsigned char v = static_cast<unsigned char>(t * 40 + i);
				unsigned char got = 0;
				if (npurtStreamCreate(&s) || npurtEventCreate(&e) ||
				    npurtMemsetAsync(d, v, 4096, s) || npurtEventRecord(e, s) ||
				    npurtEventSynchronize(e) ||
				    npurtMemcpyAsync(&got, d, 1, npurtMemcpyDeviceToHost, s) ||
				    got != v)
					failures[static_cast<size_t>(t)]++;
				npurtEventDestroy(e);
				npurtStreamDestroy(s);
			}
			npurtFree(d);
		});
	for (auto &t : threads)
		t.join();
	for (int t = 0; t < 4; t++)
		EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
}

// ---------------------------------------------------------------------------
// Profiler.

// Just enough JSON to check a trace's shape.
struct Json {
	enum Type { Null, Bool, Number, String, Array, Object } type = Null;
	double num = 0;
	bool boolean = false;
	std::string str;
	std::vector<Json> arr;
	std::vector<std::pair<std::string, Json>> obj;

	const Json *get(const std::string &key) const
	{
		for (auto &[k, v] : obj)
			if (k == key)
				return &v;
		return nullptr;
	}
};

class JsonParser {
public:
	explicit JsonParser(const std::string &s) : s_(s) {}
	bool parse(Json *out)
	{
		if (!value(out, 0))
			return false;
		ws();
		return i_ == s_.size();
	}

private:
	void ws()
	{
		while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
			i_++;
	}
	bool lit(const char *w)
	{
		size_t n = std::strlen(w);
		if (s_.compare(i_, n, w) != 0)
			return false;
		i_ += n;
		return true;
	}
	bool string(std::string *out)
	{
		if (s_[i_] != '"')
			return false;
		for (i_++; i_ < s_.size(); i_++) {
			char c = s_[i_];
			if (c == '"') {
				i_++;
				return true;
			}
			if (static_cast<unsigned char>(c) < 0x20)
				return false;
			if (c == '\\') {
				if (++i_ >= s_.size())
					return false;
				c = s_[i_];
				if (c == 'u') {
					if (i_ + 4 >= s_.size())
						return false;
					i_ += 4;
					c = '?';
				} else if (!std::strchr("\"\\/bfnrt", c)) {
					return false;
				}
			}
			out->push_back(c);
		}
		return false;
	}
	bool value(Json *out, int depth)
	{
		ws();
		if (i_ >= s_.size() || depth > 64)
			return false;
		char c = s_[i_];
		if (c == '{') {
			out->type = Json::Object;
			i_++;
			ws();
			if (i_ < s_.size() && s_[i_] == '}') {
				i_++;
				return true;
			}
			for (;;) {
				ws();
				std::string key;
				if (i_ >= s_.size() || !string(&key))
					return false;
				ws();
				if (i_ >= s_.size() || s_[i_++] != ':')
					return false;
				Json v;
				if (!value(&v, depth + 1))
					return false;
				out->obj.emplace_back(std::move(key), std::move(v));
				ws();
				if (i_ >= s_.size())
					return false;
				if (s_[i_] == ',') {
					i_++;
					continue;
				}
				return s_[i_++] == '}';
			}
		}
		if (c == '[') {
			out->type = Json::Array;
			i_++;
			ws();
			if (i_ < s_.size() && s_[i_] == ']') {
				i_++;
				return true;
			}
			for (;;) {
				Json v;
				if (!value(&v, depth + 1))
					return false;
				out->arr.push_back(std::move(v));
				ws();
				if (i_ >= s_.size())
					return false;
				if (s_[i_] == ',') {
					i_++;
					continue;
				}
				return s_[i_++] == ']';
			}
		}
		if (c == '"') {
			out->type = Json::String;
			return string(&out->str);
		}
		if (lit("true") || lit("false")) {
			out->type = Json::Bool;
			out->boolean = s_[i_ - 1] == 'e' && s_[i_ - 2] == 'u';
			return true;
		}
		if (lit("null"))
			return true;
		const char *start = s_.c_str() + i_;
		char *end = nullptr;
		out->num = std::strtod(start, &end);
		if (end == start)
			return false;
		out->type = Json::Number;
		i_ += static_cast<size_t>(end - start);
		return true;
	}

	const std::string &s_;
	size_t i_ = 0;
};

std::string summary()
{
	size_t needed = 0;
	EXPECT_EQ(npurtProfilerSummary(nullptr, 0, &needed), npurtSuccess);
	std::string buf(needed, '\0');
	EXPECT_EQ(npurtProfilerSummary(buf.data(), buf.size(), &needed), npurtSuccess);
	buf.resize(std::strlen(buf.c_str()));
	return buf;
}

// The task count of the summary row `name` ("  copy   12 tasks ...").
long summaryTasks(const std::string &sum, const std::string &name)
{
	std::istringstream in(sum);
	std::string line;
	while (std::getline(in, line)) {
		std::istringstream words(line);
		std::string first;
		long count = -1;
		std::string unit;
		if (words >> first && first == name && words >> count >> unit && unit == "tasks")
			return count;
	}
	return -1;
}

TEST_F(Profiler, TraceAndSummaryOfTwoStreams)
{
	const size_t n = 1 << 20;
	npurtStream_t s1 = stream(), s2 = stream();
	unsigned char *a = deviceAlloc(n), *b = deviceAlloc(n), *c = deviceAlloc(9 << 20),
	              *p = pinnedAlloc(n);
	ASSERT_TRUE(s1 && s2 && a && b && c && p);
	auto page = pattern(9 << 20, 4);

	ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
	// s1: 3 copies and 2 fills; s2: 2 fills, 1 pinned copy and a 9 MiB
	// pageable copy: in staging chunks while work is queued ahead of it,
	// else in one copy from its pinned pages.
	ASSERT_EQ(npurtMemsetAsync(a, 1, n, s1), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(c, 2, 9 << 20, s2), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s1), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(p, c, n, npurtMemcpyDeviceToHost, s2), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(a, b, n, npurtMemcpyDeviceToDevice, s1), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(b, 3, n, s1), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(c, 4, n, s2), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s1), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(c, page.data(), page.size(), npurtMemcpyHostToDevice, s2),
	          npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s1), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s2), npurtSuccess);
	ASSERT_EQ(npurtProfilerStop(), npurtSuccess);
	// Not profiled.
	ASSERT_EQ(npurtMemsetAsync(a, 5, n, s1), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s1), npurtSuccess);

	const int fills = 2 + 2;
	std::string path = "/tmp/npurt_test_trace_" + std::to_string(getpid()) + ".json";
	ASSERT_EQ(npurtProfilerExportTrace(path.c_str()), npurtSuccess) << lastMessage();
	std::string text = readFile(path);
	unlink(path.c_str());
	Json root;
	ASSERT_TRUE(JsonParser(text).parse(&root)) << "not JSON:\n" << text;
	ASSERT_EQ(root.type, Json::Object);
	const Json *events = root.get("traceEvents");
	ASSERT_NE(events, nullptr) << text;
	ASSERT_EQ(events->type, Json::Array);

	struct Task {
		double ts, dur;
		uint64_t seq;
	};
	std::map<std::string, std::vector<Task>> byStream;
	int copyEvents = 0, fillEvents = 0, stagedChunks = 0;
	double stagedBytes = 0;
	for (const Json &ev : events->arr) {
		ASSERT_EQ(ev.type, Json::Object);
		const Json *ph = ev.get("ph");
		ASSERT_TRUE(ph && ph->type == Json::String);
		const Json *pid = ev.get("pid");
		ASSERT_TRUE(pid && pid->type == Json::Number);
		if (ph->str != "X")
			continue;
		const Json *name = ev.get("name"), *cat = ev.get("cat"), *tid = ev.get("tid"),
		           *ts = ev.get("ts"), *dur = ev.get("dur"), *args = ev.get("args");
		ASSERT_TRUE(name && name->type == Json::String && !name->str.empty());
		ASSERT_TRUE(cat && cat->type == Json::String);
		ASSERT_TRUE(tid && tid->type == Json::Number);
		ASSERT_TRUE(ts && ts->type == Json::Number);
		ASSERT_TRUE(dur && dur->type == Json::Number);
		EXPECT_GE(dur->num, 0.0);
		ASSERT_TRUE(args && args->type == Json::Object);
		const Json *st = args->get("stream"), *task = args->get("task"),
		           *api = args->get("api"), *bytes = args->get("bytes");
		ASSERT_TRUE(st && st->type == Json::String);
		ASSERT_TRUE(task && task->type == Json::Number);
		ASSERT_TRUE(api && api->type == Json::String);
		ASSERT_TRUE(bytes && bytes->type == Json::Number);
		EXPECT_EQ(pid->num, 0.0) << "NPU 0";
		if (cat->str == "copy") {
			copyEvents++;
			EXPECT_TRUE(contains(name->str, "copy")) << name->str;
			EXPECT_EQ(api->str, "npurtMemcpyAsync");
		} else if (cat->str == "fill") {
			fillEvents++;
			EXPECT_TRUE(contains(name->str, "fill")) << name->str;
			EXPECT_EQ(api->str, "npurtMemsetAsync");
		} else {
			ADD_FAILURE() << "unexpected task " << name->str;
		}
		if (contains(name->str, "pageable")) {
			stagedChunks++;
			stagedBytes += bytes->num;
			EXPECT_EQ(st->str, ptrText(s2));
		}
		byStream[st->str].push_back({ts->num, dur->num, static_cast<uint64_t>(task->num)});
	}
	EXPECT_GE(stagedChunks, 1);
	const int copies = 3 + 1 + stagedChunks;
	EXPECT_EQ(copyEvents, copies);
	EXPECT_EQ(fillEvents, fills);
	EXPECT_EQ(stagedBytes, double(9 << 20));
	ASSERT_EQ(byStream.size(), 2u);
	EXPECT_EQ(byStream.count(ptrText(s1)), 1u);
	EXPECT_EQ(byStream.count(ptrText(s2)), 1u);
	// A stream's tasks ran one after the other, in task order.
	for (auto &[st, tasks] : byStream) {
		std::sort(tasks.begin(), tasks.end(),
		          [](const Task &x, const Task &y) { return x.seq < y.seq; });
		for (size_t i = 1; i < tasks.size(); i++) {
			EXPECT_GT(tasks[i].seq, tasks[i - 1].seq);
			EXPECT_GE(tasks[i].ts + 0.002, tasks[i - 1].ts + tasks[i - 1].dur)
			        << "stream " << st << " task " << tasks[i].seq
			        << " started before the one ahead of it ended";
		}
	}

	std::string sum = summary();
	EXPECT_TRUE(contains(sum, "time per op kind")) << sum;
	EXPECT_TRUE(contains(sum, "time per stream")) << sum;
	EXPECT_TRUE(contains(sum, "engine utilisation")) << sum;
	EXPECT_EQ(summaryTasks(sum, "copy"), copies) << sum;
	EXPECT_EQ(summaryTasks(sum, "fill"), fills) << sum;
	EXPECT_EQ(summaryTasks(sum, ptrText(s1)), 5) << sum;
	EXPECT_EQ(summaryTasks(sum, ptrText(s2)), 3 + stagedChunks) << sum;
}

TEST_F(Profiler, SummaryTruncatesAndReportsTheSize)
{
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096);
	ASSERT_TRUE(s && d);
	ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	ASSERT_EQ(npurtProfilerStop(), npurtSuccess);

	size_t needed = 0;
	ASSERT_EQ(npurtProfilerSummary(nullptr, 0, &needed), npurtSuccess);
	ASSERT_GT(needed, 17u);
	std::string full(needed, 'x');
	size_t again = 0;
	ASSERT_EQ(npurtProfilerSummary(full.data(), full.size(), &again), npurtSuccess);
	EXPECT_EQ(again, needed);
	EXPECT_EQ(full[needed - 1], '\0');
	EXPECT_EQ(std::strlen(full.c_str()), needed - 1) << "needed counts the NUL";
	EXPECT_TRUE(contains(full, "fill")) << full;

	char small[17];
	std::memset(small, 'x', sizeof(small));
	size_t smallNeeded = 0;
	ASSERT_EQ(npurtProfilerSummary(small, 16, &smallNeeded), npurtSuccess);
	EXPECT_EQ(smallNeeded, needed);
	EXPECT_EQ(small[15], '\0');
	EXPECT_EQ(std::strlen(small), 15u);
	EXPECT_EQ(std::string(small), full.substr(0, 15));
	EXPECT_EQ(small[16], 'x') << "wrote past the size given";
	char one = 'x';
	ASSERT_EQ(npurtProfilerSummary(&one, 1, nullptr), npurtSuccess);
	EXPECT_EQ(one, '\0');
	EXPECT_EQ(npurtProfilerSummary(nullptr, 0, nullptr), npurtSuccess);
}

TEST_F(Profiler, ExportErrors)
{
	ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
	ASSERT_EQ(npurtProfilerStop(), npurtSuccess);
	const char *bad = "/nonexistent-npurt-dir/trace.json";
	EXPECT_EQ(npurtProfilerExportTrace(bad), npurtErrorOperatingSystem);
	EXPECT_TRUE(contains(lastMessage(), bad)) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), "No such file or directory")) << lastMessage();
	EXPECT_EQ(npurtGetLastError(), npurtErrorOperatingSystem);
	EXPECT_EQ(npurtProfilerExportTrace("/proc/npurt-trace.json"), npurtErrorOperatingSystem);
	EXPECT_EQ(npurtProfilerExportTrace(nullptr), npurtErrorInvalidValue);
	// With no records the trace is still valid JSON.
	std::string path = "/tmp/npurt_test_empty_" + std::to_string(getpid()) + ".json";
	ASSERT_EQ(npurtProfilerExportTrace(path.c_str()), npurtSuccess) << lastMessage();
	std::string text = readFile(path);
	unlink(path.c_str());
	Json root;
	ASSERT_TRUE(JsonParser(text).parse(&root)) << text;
	const Json *events = root.get("traceEvents");
	ASSERT_TRUE(events && events->type == Json::Array);
	EXPECT_TRUE(events->arr.empty());
}

// Timestamp slots of dropped records: pinned memory chunks per context.
long clientBos()
{
	std::string dir = debugfsDir(0);
	if (dir.empty())
		return -1;
	std::ifstream f(dir + "/npu_clients");
	std::string line, me = "context pid " + std::to_string(getpid()) + " ";
	long total = 0;
	while (std::getline(f, line)) {
		if (line.rfind(me, 0) != 0)
			continue;
		size_t at = line.find(": bos ");
		if (at != std::string::npos)
			total += std::atol(line.c_str() + at + 6);
	}
	return total;
}

TEST_F(Profiler, RestartReusesTimestampMemory)
{
	if (clientBos() < 0)
		GTEST_SKIP() << "needs root: counts this process's buffers in debugfs";
	npurtStream_t s = stream();
	unsigned char *d = deviceAlloc(4096);
	ASSERT_TRUE(s && d);
	// One 64 KiB chunk of slots holds 4096 tasks' timestamps.
	auto session = [&] {
		ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
		for (int i = 0; i < 4200; i++)
			ASSERT_EQ(npurtMemsetAsync(d, i & 0xff, 8, s), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
		ASSERT_EQ(npurtProfilerStop(), npurtSuccess);
	};
	session();
	ASSERT_FALSE(HasFatalFailure());
	long first = clientBos();
	session();  // drops the first session's records
	ASSERT_FALSE(HasFatalFailure());
	long second = clientBos();
	session();
	ASSERT_FALSE(HasFatalFailure());
	long third = clientBos();
	if (second != first || third != first)
		FAIL() << "BUG: every profiling session takes new pinned timestamp memory "
		          "(buffers of this process after sessions 1, 2, 3: "
		       << first << ", " << second << ", " << third
		       << "): npurtProfilerStart drops the records without giving their "
		          "timestamp slots back";
}

// The profiler's records outlive the contexts that made them.
TEST(ProfilerChild, ExportAfterTheContextIsDestroyed)
{
	if (!std::getenv("NPURT_TEST_PROFILER_CHILD"))
		GTEST_SKIP() << "runs only as the child of Profiler.RecordsOfADestroyedContext";
	ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
	npurtContext_t ctx = nullptr;
	ASSERT_EQ(npurtCtxCreate(&ctx, 0, 0), npurtSuccess);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	ASSERT_EQ(npurtCtxDestroy(ctx), npurtSuccess);
	ASSERT_EQ(npurtProfilerStop(), npurtSuccess);
	std::string path = "/tmp/npurt_test_child_" + std::to_string(getpid()) + ".json";
	EXPECT_EQ(npurtProfilerExportTrace(path.c_str()), npurtSuccess);
	unlink(path.c_str());
	size_t needed = 0;
	EXPECT_EQ(npurtProfilerSummary(nullptr, 0, &needed), npurtSuccess);
}

TEST_F(Profiler, RecordsOfADestroyedContext)
{
	ChildResult r = runChild("ProfilerChild.*", {"NPURT_TEST_PROFILER_CHILD=1"});
	if (WIFSIGNALED(r.status))
		FAIL() << "BUG: npurtProfilerExportTrace/npurtProfilerSummary after "
		          "npurtCtxDestroy of a profiled context killed the process with "
		          "signal "
		       << WTERMSIG(r.status)
		       << ": the records keep the addresses of the context's timestamp "
		          "slots, which the destroy unmapped. Child output:\n"
		       << indented(r.output);
	ASSERT_TRUE(WIFEXITED(r.status)) << indented(r.output);
	EXPECT_EQ(WEXITSTATUS(r.status), 0) << indented(r.output);
	EXPECT_TRUE(contains(r.output, "[  PASSED  ] 1 test")) << indented(r.output);
}

}  // namespace

// Freeing memory that queued work still uses (CUDA's cudaFree waits for the
// device; npurtFree does not, and nothing reuses the block before the work
// that used it, on any stream, has run).
class SafeFree : public StreamTest {
protected:
	// Opens a gate after timeoutMs unless cancelled first: a call that
	// wrongly waits for the gate ends, and the test says so.
	class Watchdog {
	public:
		Watchdog(Gate &g, int timeoutMs)
		    : thread_([this, &g, timeoutMs] {
			      std::unique_lock<std::mutex> lock(mutex_);
			      if (!cv_.wait_for(lock, std::chrono::milliseconds(timeoutMs),
			                        [this] { return cancelled_; })) {
				      fired_ = true;
				      g.open();
			      }
		      })
		{}
		~Watchdog() { cancel(); }
		// Whether it had fired.
		bool cancel()
		{
			{
				std::lock_guard<std::mutex> lock(mutex_);
				cancelled_ = true;
			}
			cv_.notify_all();
			if (thread_.joinable())
				thread_.join();
			return fired_;
		}

	private:
		std::mutex mutex_;
		std::condition_variable cv_;
		bool cancelled_ = false, fired_ = false;
		std::thread thread_;
	};

	// A copy of X into Y queued on stream b and held there (by a host
	// function when hold, else by slow device work), X freed, the same
	// size allocated and cleared on stream a: the held copy must still
	// read X's bytes.
	void freeUnderQueuedCopy(npurtStream_t a, npurtStream_t b, bool hold)
	{
		const size_t n = 1 << 20;
		std::vector<unsigned char> pattern(n);
		for (size_t i = 0; i < n; i++)
			pattern[i] = static_cast<unsigned char>(i * 7 + 3);
		void *x = nullptr, *y = deviceAlloc(n);
		ASSERT_EQ(npurtMalloc(&x, n), npurtSuccess) << lastMessage();
		upload(x, pattern);
		Gate *gate = hold ? &block(b) : nullptr;
		ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyDeviceToDevice, b), npurtSuccess)
		        << lastMessage();
		{
			std::optional<Watchdog> dog;
			if (gate)
				dog.emplace(*gate, 20000);
			ASSERT_EQ(npurtFree(x), npurtSuccess) << lastMessage();
			if (dog) {
				EXPECT_FALSE(dog->cancel())
				        << "npurtFree waited for the queued copy";
			}
		}
		void *x2 = nullptr;
		ASSERT_EQ(npurtMalloc(&x2, n), npurtSuccess) << lastMessage();
		device_.push_back(x2);
		ASSERT_EQ(npurtMemsetAsync(x2, 0, n, a), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(a), npurtSuccess) << lastMessage();
		if (gate)
			gate->open();
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
		EXPECT_EQ(download(y, n) == pattern, true) << "the queued copy read reused memory";
		EXPECT_EQ(firstNot(download(x2, n).data(), 0, n), n);
		// Once the copy has run the block is cached again: the next
		// allocation of its size may have it.
		deviceFree(x2);
		void *x3 = deviceAlloc(n);
		EXPECT_TRUE(x3 == x || x3 == x2) << "freed blocks stay parked after their work";
	}
	// The same for pinned host memory, both ways: a held copy from
	// pinned X to the device and one from the device into pinned W; X and
	// W freed, their size allocated again and written by the CPU. The
	// held copies must read X's bytes and leave the new blocks alone.
	void freePinnedUnderQueuedCopy(npurtStream_t b, bool hold)
	{
		const size_t n = 1 << 20;
		std::vector<unsigned char> pattern(n);
		for (size_t i = 0; i < n; i++)
			pattern[i] = static_cast<unsigned char>(i * 5 + 1);
		unsigned char *y = deviceAlloc(n), *z = deviceAlloc(n);
		upload(z, pattern);
		void *x = nullptr, *w = nullptr;
		ASSERT_EQ(npurtMallocHost(&x, n), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMallocHost(&w, n), npurtSuccess) << lastMessage();
		std::memcpy(x, pattern.data(), n);
		std::memset(w, 0, n);
		npurtHostMemStats before{}, after{};
		ASSERT_EQ(npurtHostMemGetStats(&before), npurtSuccess) << lastMessage();
		Gate *gate = hold ? &block(b) : nullptr;
		ASSERT_EQ(npurtMemcpyAsync(y, x, n, npurtMemcpyHostToDevice, b), npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(w, z, n, npurtMemcpyDeviceToHost, b), npurtSuccess)
		        << lastMessage();
		{
			std::optional<Watchdog> dog;
			if (gate)
				dog.emplace(*gate, 20000);
			ASSERT_EQ(npurtFreeHost(x), npurtSuccess) << lastMessage();
			ASSERT_EQ(npurtFreeHost(w), npurtSuccess) << lastMessage();
			if (dog) {
				EXPECT_FALSE(dog->cancel())
				        << "npurtFreeHost waited for the queued copies";
			}
		}
		ASSERT_EQ(npurtHostMemGetStats(&after), npurtSuccess) << lastMessage();
		if (hold) {
			EXPECT_EQ(after.parkedBlocks, before.parkedBlocks + 2);
		}
		unsigned char *x2 = pinnedAlloc(n), *w2 = pinnedAlloc(n);
		ASSERT_TRUE(x2 && w2);
		std::memset(x2, 0xee, n);
		std::memset(w2, 0xdd, n);
		if (gate)
			gate->open();
		ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
		EXPECT_EQ(download(y, n) == pattern, true) << "the queued copy read reused memory";
		EXPECT_EQ(firstNot(x2, 0xee, n), n);
		EXPECT_EQ(firstNot(w2, 0xdd, n), n) << "the queued copy wrote reused memory";
		ASSERT_EQ(npurtHostMemGetStats(&after), npurtSuccess) << lastMessage();
		EXPECT_EQ(after.parkedBlocks, before.parkedBlocks)
		        << "parked after their copies ran";
	}
};

TEST_F(SafeFree, PinnedBlockHeldByAHostFunctionIsNotReused)
{
	npurtStream_t b = stream();
	ASSERT_TRUE(b);
	freePinnedUnderQueuedCopy(b, true);
}

TEST_F(SafeFree, PinnedBlockInUseOnTheDeviceIsNotReused)
{
	JobLatency slow(0, latencyUs());
	if (!slow.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	npurtStream_t b = stream();
	ASSERT_TRUE(b);
	freePinnedUnderQueuedCopy(b, false);
}

TEST_F(SafeFree, BlockHeldByAHostFunctionIsNotReused)
{
	npurtStream_t a = stream(), b = stream();
	ASSERT_TRUE(a && b);
	freeUnderQueuedCopy(a, b, true);
}

TEST_F(SafeFree, BlockInUseOnTheDeviceIsNotReused)
{
	JobLatency slow(0, latencyUs());
	if (!slow.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	npurtStream_t a = stream(), b = stream();
	ASSERT_TRUE(a && b);
	freeUnderQueuedCopy(a, b, false);
}

// Device memory freed under queued work comes back when the device needs
// it: an allocation that finds none waits for that work instead of failing.
TEST_F(SafeFree, AllocationWaitsForParkedBlocksRatherThanFailing)
{
	size_t freeBytes = 0, total = 0;
	ASSERT_EQ(npurtMemGetInfo(&freeBytes, &total), npurtSuccess) << lastMessage();
	if (total > (512ull << 20))
		GTEST_SKIP() << "runs with mem_size_mb=128 (the VM suites' small device)";
	npurtStream_t b = stream();
	ASSERT_TRUE(b);
	ASSERT_EQ(npurtMemEmptyCache(), npurtSuccess);
	ASSERT_EQ(npurtMemGetInfo(&freeBytes, &total), npurtSuccess) << lastMessage();
	// Most of what is free, in one block, read by a held copy, then freed.
	const size_t n = (freeBytes - (16u << 20)) & ~size_t{(2u << 20) - 1};
	void *x = nullptr, *y = deviceAlloc(4096);
	ASSERT_EQ(npurtMalloc(&x, n), npurtSuccess) << lastMessage();
	Gate &g = block(b);
	ASSERT_EQ(npurtMemcpyAsync(y, x, 4096, npurtMemcpyDeviceToDevice, b), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtFree(x), npurtSuccess) << lastMessage();
	// The gate opens a little later, while (or, on a slow machine, before)
	// the allocation below waits: either way it must succeed, and without
	// the wait it fails at once.
	Watchdog opener(g, 200);
	void *z = nullptr;
	EXPECT_EQ(npurtMalloc(&z, n), npurtSuccess) << lastMessage();
	opener.cancel();
	if (z)
		device_.push_back(z);
	ASSERT_EQ(npurtStreamSynchronize(b), npurtSuccess) << lastMessage();
}

// CUDA's legacy default stream: the NULL stream and blocking streams wait for
// each other's earlier work; non-blocking streams opt out.
class NullStream : public StreamTest {
protected:
	// A long fill on `slow` (hundreds of ms, on a copy engine), then a
	// small op reading its first bytes on `fast` (on a compute engine, so
	// the two can overlap whichever engines the streams' queues got) and
	// a wait for `fast` (well under a ms alone): whether `slow` still ran
	// when `fast` was done.
	bool slowStillRunsAfter(npurtStream_t slow, npurtStream_t fast)
	{
		const size_t big = 256 << 20, n = 64 << 10;
		unsigned char *x = deviceAlloc(big), *y = deviceAlloc(n);
		EXPECT_TRUE(x && y);
		EXPECT_EQ(npurtMemsetAsync(x, 7, big, slow), npurtSuccess) << lastMessage();
		// y = 1.0f * x: the same bytes (0x07070707 is a normal float).
		npurtOpDesc d{};
		d.op = npurtOpScale;
		d.dtype = d.outDtype = npurtFloat32;
		d.a = x;
		d.out = y;
		d.n = n / 4;
		d.alpha = 1.0f;
		EXPECT_EQ(npurtLaunchOp(&d, fast), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtStreamSynchronize(fast), npurtSuccess) << lastMessage();
		bool running = npurtStreamQuery(slow) == npurtErrorNotReady;
		EXPECT_EQ(npurtStreamSynchronize(slow), npurtSuccess) << lastMessage();
		// Ordered, the copy read the fill's bytes.
		if (!running) {
			EXPECT_EQ(firstNot(download(y, n).data(), 7, n), n);
		}
		deviceFree(x);
		deviceFree(y);
		return running;
	}
};

TEST_F(NullStream, WaitsForBlockingStreams)
{
	npurtStream_t b = stream();
	ASSERT_TRUE(b);
	EXPECT_FALSE(slowStillRunsAfter(b, nullptr));
}

TEST_F(NullStream, BlockingStreamsWaitForIt)
{
	npurtStream_t b = stream();
	ASSERT_TRUE(b);
	EXPECT_FALSE(slowStillRunsAfter(nullptr, b));
}

TEST_F(NullStream, NonBlockingStreamsDoNotWait)
{
	npurtStream_t nb = stream(npurtStreamNonBlocking), b = stream(), b2 = stream();
	ASSERT_TRUE(nb && b && b2);
	EXPECT_TRUE(slowStillRunsAfter(nb, nullptr))
	        << "the NULL stream waited for a non-blocking one";
	EXPECT_TRUE(slowStillRunsAfter(nullptr, nb)) << "a non-blocking stream waited for NULL";
	EXPECT_TRUE(slowStillRunsAfter(b, b2)) << "two blocking streams waited for each other";
}

// A thread's npurtStreamPerThread stream dies with its context
// (npurtDeviceReset). The streams made next may live at its address (and
// the next context at the old one's): the thread must get a new per-thread
// stream, not the next context's legacy stream (which cannot capture) or
// one of the user's, and a thread's exit must not destroy a stream at that
// address. Found when a run's order put a reset between two per-thread
// uses; each round makes a different number of streams before the use, so
// that one of them lands on the freed address.
TEST_F(StreamTest, PerThreadStreamOutlivesAResetOfItsContext)
{
	for (int round = 0; round < 24; round++) {
		std::atomic<int> phase{0};
		std::thread user([&phase] {
			npurtSetDevice(0);
			EXPECT_EQ(npurtStreamQuery(npurtStreamPerThread), npurtSuccess)
			        << lastMessage();
			phase = 1;
			while (phase.load() != 2)
				std::this_thread::yield();
		});
		EXPECT_EQ(npurtStreamQuery(npurtStreamPerThread), npurtSuccess) << lastMessage();
		while (phase.load() != 1)
			std::this_thread::yield();
		ASSERT_EQ(npurtDeviceReset(), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
		// The next context's legacy stream, then new streams.
		EXPECT_EQ(npurtStreamQuery(nullptr), npurtSuccess) << lastMessage();
		std::vector<npurtStream_t> mine(round % 12);
		for (auto &s : mine)
			ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
		// The other thread exits: its per-thread stream is gone already.
		phase = 2;
		user.join();
		for (auto &s : mine)
			EXPECT_EQ(npurtStreamQuery(s), npurtSuccess)
			        << "round " << round << ": " << lastMessage();
		npurtGraph_t g = nullptr;
		ASSERT_EQ(
		        npurtStreamBeginCapture(npurtStreamPerThread, npurtStreamCaptureModeGlobal),
		        npurtSuccess)
		        << "round " << round << ": " << lastMessage();
		for (auto &s : mine) {
			npurtStreamCaptureStatus st = npurtStreamCaptureStatusActive;
			EXPECT_EQ(npurtStreamIsCapturing(s, &st), npurtSuccess);
			EXPECT_EQ(st, npurtStreamCaptureStatusNone)
			        << "round " << round << ": a stream of the user's was taken as the "
			        << "thread's";
		}
		ASSERT_EQ(npurtStreamEndCapture(npurtStreamPerThread, &g), npurtSuccess);
		EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
		for (auto &s : mine)
			EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess) << lastMessage();
	}
}

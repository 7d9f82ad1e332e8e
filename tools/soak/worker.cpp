// npu-soak: a worker process. M threads run randomly chosen workloads on
// libnpurt's public C API (copies of every kind, ops, events across streams
// and NPUs, allocation churn, host functions, contexts, the legacy default
// stream), each result checked against the CPU; one more thread passes
// device memory and an event to (or takes them from) the partner process.
//
// The rule every check follows: a result whose calls all succeeded must be
// right. A failure the runtime reports (a fault or hang the injector caused
// on this process's work, or on work it depended on) is counted, the
// streams are recovered and the result is not checked; a wrong result
// without a reported failure is what the soak exists to find.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "shared.h"

namespace soak {
namespace {

// A copy that the compiler makes once, where it is written: the source is
// shared memory another process may rewrite.
void volatileCopy(void *dst, const void *src, size_t n)
{
	auto *d = static_cast<unsigned char *>(dst);
	const auto *v = static_cast<const volatile unsigned char *>(src);
	for (size_t i = 0; i < n; i++)
		d[i] = v[i];
}

constexpr int kScenarioCount = 13;
const char *const kScenarioNames[kScenarioCount + 1] = {
        "copy",          "copy-events", "op",     "op-chain",     "cross-device", "alloc-churn",
        "host-func",     "context",     "legacy", "stream-churn", "copy-2d",      "copy-strided",
        "peer-contexts", "ipc"};
constexpr uint32_t kIpcScenario = kScenarioCount;

uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

// The bytes of pattern `seed`: position i of every buffer made from it.
void fillBytes(unsigned char *p, size_t n, uint64_t seed)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = mix(seed + i);
		std::memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = static_cast<unsigned char>(mix(seed + (i & ~size_t{7})) >> (8 * (i & 7)));
}

// Small integers, so that every op of the set is exact in float32 (sums
// and products stay far below 2^24) and results compare bit for bit.
int smallInt(uint64_t seed, size_t i, int range)
{
	return static_cast<int>(mix(seed * 0x9e3779b97f4a7c15ull + i) %
	                        static_cast<uint64_t>(2 * range + 1)) -
	       range;
}

// float16 bits of an integer of magnitude at most 2048 (exact).
uint16_t halfOf(int v)
{
	if (v == 0)
		return 0;
	uint16_t sign = v < 0 ? 0x8000 : 0;
	unsigned a = static_cast<unsigned>(v < 0 ? -v : v);
	int e = 31 - __builtin_clz(a);
	unsigned mant = (a << (10 - e)) & 0x3ff;
	return static_cast<uint16_t>(sign | ((e + 15) << 10) | mant);
}

class Rng {
public:
	explicit Rng(uint64_t seed) : g_(seed) {}
	uint64_t below(uint64_t n) { return n ? g_() % n : 0; }
	uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
	bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g_) < p; }
	// Log-uniform in [lo, hi]: as many small sizes as large ones.
	size_t size(size_t lo, size_t hi)
	{
		double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
		double x = std::exp(std::uniform_real_distribution<double>(l, h)(g_));
		return std::clamp(static_cast<size_t>(x), lo, hi);
	}
	uint64_t next() { return g_(); }

private:
	std::mt19937_64 g_;
};

// Work on the legacy default stream is serialised in the process: a
// thread that recovers it must not clear a failure that another thread's
// work on it has not observed yet.
std::mutex legacyMutex;

bool verbose()
{
	static const bool v = std::getenv("NPU_SOAK_VERBOSE") != nullptr;
	return v;
}

// One worker thread's state.
class Thread {
public:
	Thread(Shared *sh, Slot *slot, int tid, uint64_t seed)
	    : sh_(sh), slot_(slot), ts_(&slot->threads[tid]), tid_(tid), rng_(seed),
	      ndev_(static_cast<int>(sh->devices))
	{}
	Thread(const Thread &) = delete;
	Thread &operator=(const Thread &) = delete;
	~Thread() { destroyStreams(); }

	void run();
	void runIpc(bool exporter);

private:
	// -- bookkeeping ----------------------------------------------------
	void phase(Phase p)
	{
		ts_->phase.store(p, std::memory_order_relaxed);
		ts_->heartbeatNs.store(nowNs(), std::memory_order_relaxed);
	}
	bool stopping() const { return sh_->stop.load(std::memory_order_relaxed) != 0; }
	int64_t waitMs() const
	{
		// Long enough for hangs queued ahead (each ends at the job
		// timeout), short of the watchdog.
		return std::max<int64_t>(20000, 10 * static_cast<int64_t>(sh_->jobTimeoutMs));
	}
	void failure(const char *what, const std::string &detail)
	{
		char text[512];
		std::snprintf(text, sizeof(text), "pid %d thread %d %s: %s: %s", getpid(), tid_,
		              kScenarioNames[scenario_], what, detail.c_str());
		std::fprintf(stderr, "npu-soak: %s\n", text);
		setFailureText(*slot_, text);
	}

	// The first error of a scenario decides its outcome; every later
	// call is skipped (ok() is false from then on).
	bool ok(npurtError_t e, const char *call)
	{
		if (error_ != npurtSuccess)
			return false;
		if (e == npurtSuccess)
			return true;
		error_ = e;
		std::string msg = npurtGetLastErrorMessage();
		npurtGetLastError();
		Counters &c = slot_->c;
		switch (e) {
		case npurtErrorDeviceFault:
			c.deviceFaults++;
			break;
		case npurtErrorLaunchFailure:
			c.launchFailures++;
			break;
		case npurtErrorLaunchTimeout:
			c.launchTimeouts++;
			break;
		case npurtErrorMemoryAllocation:
		case npurtErrorHostMemoryAllocation:
			c.ooms++;
			break;
		case npurtErrorTimeout:
			c.waitTimeouts++;
			failure("wait timed out", std::string(call) + ": " + msg);
			break;
		default:
			c.unexpected++;
			failure("unexpected error",
			        std::string(call) + ": " + npurtGetErrorName(e) + ": " + msg);
			break;
		}
		if (verbose())
			std::fprintf(stderr, "npu-soak: pid %d thread %d %s: %s: %s\n", getpid(),
			             tid_, kScenarioNames[scenario_], call, msg.c_str());
		return false;
	}
	bool failed() const { return error_ != npurtSuccess; }

	// A result that must be right: false (and counted) if it is not.
	bool expectBytes(const unsigned char *got, const unsigned char *want, size_t n,
	                 const std::string &what)
	{
		phase(PhaseVerify);
		if (std::memcmp(got, want, n) == 0) {
			slot_->c.verified++;
			slot_->c.bytesMoved += n;
			return true;
		}
		size_t i = 0;
		while (i < n && got[i] == want[i])
			i++;
		char detail[256];
		std::snprintf(
		        detail, sizeof(detail),
		        "%s: %zu bytes, first difference at byte %zu: got 0x%02x, want 0x%02x",
		        what.c_str(), n, i, got[i], want[i]);
		slot_->c.wrong++;
		failure("WRONG RESULT", detail);
		return false;
	}
	bool expectFloats(const float *got, const std::vector<float> &want, const std::string &what)
	{
		phase(PhaseVerify);
		for (size_t i = 0; i < want.size(); i++) {
			// Value equality: -0 and 0 are both right (a one-element
			// sum may keep the sign of its zero); the NaNs outputs start
			// as never equal anything.
			if (got[i] == want[i])
				continue;
			char detail[256];
			std::snprintf(detail, sizeof(detail),
			              "%s: %zu elements, first difference at %zu: got %g, want %g",
			              what.c_str(), want.size(), i, static_cast<double>(got[i]),
			              static_cast<double>(want[i]));
			slot_->c.wrong++;
			failure("WRONG RESULT", detail);
			return false;
		}
		slot_->c.verified++;
		slot_->c.opsVerified++;
		slot_->c.bytesMoved += want.size() * 4;
		return true;
	}

	// -- resources ------------------------------------------------------
	npurtStream_t stream(int dev, int which)
	{
		npurtStream_t &s = streams_[dev][which];
		if (!s) {
			phase(PhaseSetup);
			int least = 0, greatest = 0;
			npurtDeviceGetStreamPriorityRange(&least, &greatest);
			unsigned flags =
			        rng_.chance(0.5) ? npurtStreamNonBlocking : npurtStreamDefault;
			int prio =
			        static_cast<int>(rng_.range(
			                0, static_cast<uint64_t>(std::max(0, least - greatest)))) +
			        greatest;
			if (!ok(npurtSetDevice(dev), "npurtSetDevice") ||
			    !ok(npurtStreamCreateWithPriority(&s, flags, prio),
			        "npurtStreamCreateWithPriority"))
				s = nullptr;
		}
		return s;
	}
	void destroyStreams()
	{
		for (auto &dev : streams_)
			for (npurtStream_t &s : dev)
				if (s) {
					npurtStreamSynchronizeTimeout(s, waitMs());
					npurtStreamRecover(s);
					npurtStreamDestroy(s);
					s = nullptr;
				}
		npurtGetLastError();
	}
	// After a reported failure: every stream of the thread takes work
	// again (a stream that did not fail recovers at no cost).
	void recover()
	{
		phase(PhaseRecover);
		for (auto &dev : streams_)
			for (npurtStream_t s : dev)
				if (s) {
					// Drains first: recovery resets the queues.
					npurtStreamSynchronizeTimeout(s, waitMs());
					npurtGetLastError();
					if (npurtStreamRecover(s) != npurtSuccess) {
						slot_->c.unexpected++;
						failure("unexpected error",
						        std::string("npurtStreamRecover: ") +
						                npurtGetLastErrorMessage());
						npurtGetLastError();
					}
				}
		slot_->c.recoveries++;
	}
	void *devAlloc(size_t n)
	{
		void *p = nullptr;
		phase(PhaseSetup);
		if (!ok(npurtMalloc(&p, n), "npurtMalloc"))
			return nullptr;
		dev_.push_back(p);
		return p;
	}
	void *pinnedAlloc(size_t n)
	{
		void *p = nullptr;
		phase(PhaseSetup);
		if (!ok(npurtMallocHost(&p, n), "npurtMallocHost"))
			return nullptr;
		pinned_.push_back(p);
		return p;
	}
	// Host memory of one of three kinds: pinned, registered pages, or
	// pageable (0, 1, 2).
	unsigned char *hostAlloc(size_t n, int kind)
	{
		if (kind == 0)
			return static_cast<unsigned char *>(pinnedAlloc(n));
		size_t len = (n + 4095) & ~size_t{4095};
		void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		               -1, 0);
		if (p == MAP_FAILED) {
			error_ = npurtErrorHostMemoryAllocation;
			slot_->c.ooms++;
			return nullptr;
		}
		maps_.push_back({p, len, false});
		if (kind == 1) {
			phase(PhaseSetup);
			if (!ok(npurtHostRegister(p, len, npurtHostRegisterDefault),
			        "npurtHostRegister"))
				return nullptr;
			maps_.back().registered = true;
		}
		return static_cast<unsigned char *>(p);
	}
	// Frees what the scenario allocated (safe free: no wait for the device).
	void release()
	{
		phase(PhaseTeardown);
		for (void *p : dev_)
			npurtFree(p);
		for (void *p : pinned_)
			npurtFreeHost(p);
		for (const Map &m : maps_) {
			if (m.registered)
				npurtHostUnregister(m.ptr);
			munmap(m.ptr, m.len);
		}
		for (npurtEvent_t e : events_)
			npurtEventDestroy(e);
		dev_.clear();
		pinned_.clear();
		maps_.clear();
		events_.clear();
		npurtGetLastError();
	}
	npurtEvent_t event(unsigned flags)
	{
		npurtEvent_t e = nullptr;
		if (!ok(npurtEventCreateWithFlags(&e, flags), "npurtEventCreateWithFlags"))
			return nullptr;
		events_.push_back(e);
		return e;
	}
	// Synchronises, or now and then polls with npurtStreamQuery (within
	// the same time limit).
	bool sync(npurtStream_t s)
	{
		phase(PhaseWait);
		if (rng_.chance(0.7))
			return ok(npurtStreamSynchronizeTimeout(s, waitMs()),
			          "npurtStreamSynchronizeTimeout");
		const uint64_t deadline = nowNs() + static_cast<uint64_t>(waitMs()) * 1000000ull;
		for (;;) {
			npurtError_t e = npurtStreamQuery(s);
			if (e != npurtErrorNotReady)
				return ok(e, "npurtStreamQuery");
			if (nowNs() > deadline)
				return ok(npurtErrorTimeout, "npurtStreamQuery (polled)");
			phase(PhaseWait);
			sched_yield();
		}
	}
	int pickDevice() { return static_cast<int>(rng_.below(static_cast<uint64_t>(ndev_))); }

	// -- scenarios ------------------------------------------------------
	void copy(bool withEvents);
	void op(bool chain);
	void crossDevice();
	void allocChurn();
	void hostFunc();
	void context();
	void legacy();
	void streamChurn();
	void copy2D();
	void copyStrided();
	void peerContexts();
	bool launch(const npurtOpDesc &d, npurtStream_t s)
	{
		phase(PhaseEnqueue);
		return ok(npurtLaunchOp(&d, s), "npurtLaunchOp");
	}
	bool copyAsync(void *dst, const void *src, size_t n, npurtStream_t s)
	{
		phase(PhaseEnqueue);
		return ok(npurtMemcpyAsync(dst, src, n, npurtMemcpyDefault, s), "npurtMemcpyAsync");
	}

	struct Map {
		void *ptr;
		size_t len;
		bool registered;
	};

	Shared *sh_;
	Slot *slot_;
	ThreadState *ts_;
	int tid_;
	Rng rng_;
	int ndev_;
	uint32_t scenario_ = 0;
	npurtError_t error_ = npurtSuccess;
	npurtStream_t streams_[kMaxDevices][2] = {};
	std::vector<void *> dev_, pinned_;
	std::vector<Map> maps_;
	std::vector<npurtEvent_t> events_;
};

void Thread::run()
{
	static const int weights[kScenarioCount] = {16, 10, 16, 8, 8, 8, 6, 3, 4, 4, 6, 6, 3};
	int total = 0;
	for (int w : weights)
		total += w;
	if (tid_ == 0 && slot_ == &sh_->slots[0] && slot_->generation.load() == 1 &&
	    std::getenv("NPU_SOAK_TEST_WEDGE")) {
		// The watchdog's own test: this thread stops making progress.
		std::atomic<uint32_t> never{0};
		phase(PhaseWait);
		for (;;)
			futexWait(&never, 0, 1000000000ull);
	}
	while (!stopping()) {
		int pick = static_cast<int>(rng_.below(static_cast<uint64_t>(total)));
		uint32_t sc = 0;
		while (pick >= weights[sc])
			pick -= weights[sc++];
		if (sc == 4 && ndev_ < 2)
			sc = 0;
		scenario_ = sc;
		ts_->scenario.store(sc, std::memory_order_relaxed);
		error_ = npurtSuccess;
		switch (sc) {
		case 0:
			copy(false);
			break;
		case 1:
			copy(true);
			break;
		case 2:
			op(false);
			break;
		case 3:
			op(true);
			break;
		case 4:
			crossDevice();
			break;
		case 5:
			allocChurn();
			break;
		case 6:
			hostFunc();
			break;
		case 7:
			context();
			break;
		case 8:
			legacy();
			break;
		case 9:
			streamChurn();
			break;
		case 10:
			copy2D();
			break;
		case 11:
			copyStrided();
			break;
		default:
			peerContexts();
			break;
		}
		if (failed())
			recover();
		release();
		// Now and then give cached memory back, so that device memory
		// and pinned pages really come and go.
		if (rng_.chance(0.05)) {
			npurtSetDevice(pickDevice());
			npurtMemEmptyCache();
		}
		slot_->c.scenarios++;
		phase(PhaseIdle);
	}
	phase(PhaseTeardown);
	destroyStreams();
	release();
}

// H2D from host memory of a random kind, D2D inside the device (through a
// second stream behind an event, with events), a fill over part of it,
// D2H into host memory of a random kind.
void Thread::copy(bool withEvents)
{
	const int dev = pickDevice();
	const size_t n = rng_.size(1, sh_->maxBytes);
	const size_t offA = rng_.below(64), offB = rng_.below(64);
	const uint64_t seed = rng_.next();
	npurtStream_t s1 = stream(dev, 0), s2 = withEvents ? stream(dev, 1) : s1;
	if (!s1 || !s2 || !ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	unsigned char *a = static_cast<unsigned char *>(devAlloc(n + offA));
	unsigned char *b = static_cast<unsigned char *>(devAlloc(n + offB));
	unsigned char *src = hostAlloc(n, static_cast<int>(rng_.below(3)));
	unsigned char *dst = hostAlloc(n, rng_.chance(0.5) ? 0 : 2);
	if (failed())
		return;
	std::vector<unsigned char> want(n);
	fillBytes(want.data(), n, seed);
	std::memcpy(src, want.data(), n);
	std::memset(dst, 0, n);
	if (!copyAsync(a + offA, src, n, s1))
		return;
	npurtEvent_t start = nullptr, stop = nullptr;
	if (withEvents) {
		start = event(rng_.chance(0.5) ? npurtEventDefault : npurtEventDisableTiming);
		stop = event(npurtEventDefault);
		if (!start || !stop || !ok(npurtEventRecord(start, s1), "npurtEventRecord") ||
		    !ok(npurtStreamWaitEvent(s2, start, 0), "npurtStreamWaitEvent"))
			return;
	}
	if (!copyAsync(b + offB, a + offA, n, s2))
		return;
	// A fill over a random part, then the bytes after it come from a
	// again: every task's effect shows in the result.
	size_t f0 = rng_.below(n), f1 = f0 + rng_.below(n - f0 + 1);
	int value = static_cast<int>(rng_.below(256));
	phase(PhaseEnqueue);
	if (!ok(npurtMemsetAsync(b + offB + f0, value, f1 - f0, s2), "npurtMemsetAsync"))
		return;
	std::memset(want.data() + f0, value, f1 - f0);
	if (!copyAsync(dst, b + offB, n, s2))
		return;
	if (withEvents && !ok(npurtEventRecord(stop, s2), "npurtEventRecord"))
		return;
	if (!sync(s2) || (withEvents && !sync(s1)))
		return;
	std::string what = "copy of " + std::to_string(n) + " bytes on NPU " + std::to_string(dev);
	if (!expectBytes(dst, want.data(), n, what))
		return;
	if (withEvents) {
		phase(PhaseWait);
		if (!ok(npurtEventSynchronizeTimeout(stop, waitMs()),
		        "npurtEventSynchronizeTimeout"))
			return;
		float ms = -1;
		npurtError_t e = npurtEventElapsedTime(&ms, start, stop);
		if (e == npurtSuccess && !(ms >= 0)) {
			slot_->c.wrong++;
			failure("WRONG RESULT", "npurtEventElapsedTime gave " + std::to_string(ms));
		} else if (e != npurtSuccess && e != npurtErrorInvalidHandle) {
			// A start event without timing is npurtErrorInvalidHandle.
			ok(e, "npurtEventElapsedTime");
		}
		npurtGetLastError();
	}
}

// One op (or a chain of three) of the device's set against the CPU.
void Thread::op(bool chain)
{
	const int dev = pickDevice();
	npurtStream_t s = stream(dev, static_cast<int>(rng_.below(2)));
	if (!s || !ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	const uint64_t seed = rng_.next();
	const size_t maxElems = std::max<size_t>(16, sh_->maxBytes / 16);
	auto upload = [&](const std::vector<float> &v) -> float * {
		auto *d = static_cast<float *>(devAlloc(v.size() * 4));
		auto *h = static_cast<float *>(pinnedAlloc(v.size() * 4));
		if (!d || !h)
			return nullptr;
		std::memcpy(h, v.data(), v.size() * 4);
		return copyAsync(d, h, v.size() * 4, s) ? d : nullptr;
	};
	auto values = [&](size_t n, uint64_t sd, int range) {
		std::vector<float> v(n);
		for (size_t i = 0; i < n; i++)
			v[i] = static_cast<float>(smallInt(sd, i, range));
		return v;
	};
	npurtOpDesc d{};
	d.dtype = npurtFloat32;
	d.outDtype = npurtFloat32;
	std::vector<float> want;
	float *out = nullptr;
	std::string what;
	if (chain) {
		// t = a + b; u = t * b; r = reduce-sum of u (m x n, one axis).
		size_t m = rng_.range(1, 64), n = rng_.range(1, 256);
		int axis = static_cast<int>(rng_.below(2));
		auto A = values(m * n, seed, 8), B = values(m * n, seed + 1, 8);
		float *da = upload(A), *db = upload(B);
		auto *dt = static_cast<float *>(devAlloc(m * n * 4));
		auto *du = static_cast<float *>(devAlloc(m * n * 4));
		size_t outN = axis == 0 ? n : m;
		out = static_cast<float *>(devAlloc(outN * 4));
		if (failed())
			return;
		d.n = m * n;
		d.op = npurtOpAdd, d.a = da, d.b = db, d.out = dt;
		if (!launch(d, s))
			return;
		d.op = npurtOpMul, d.a = dt, d.b = db, d.out = du;
		if (!launch(d, s))
			return;
		npurtOpDesc r{};
		r.op = npurtOpReduceSum, r.dtype = npurtFloat32, r.outDtype = npurtFloat32;
		r.a = du, r.out = out, r.m = m, r.n = n, r.axis = axis;
		if (!launch(r, s))
			return;
		want.assign(outN, 0.0f);
		for (size_t i = 0; i < m; i++)
			for (size_t j = 0; j < n; j++) {
				float u = (A[i * n + j] + B[i * n + j]) * B[i * n + j];
				want[axis == 0 ? j : i] += u;
			}
		what = "add, mul, reduce-sum axis " + std::to_string(axis) + " of " +
		       std::to_string(m) + "x" + std::to_string(n);
	} else {
		static const npurtOpKind kinds[] = {
		        npurtOpAdd,       npurtOpSub,       npurtOpMul,       npurtOpMax,
		        npurtOpMin,       npurtOpScale,     npurtOpAxpy,      npurtOpRelu,
		        npurtOpReduceSum, npurtOpReduceMax, npurtOpTranspose, npurtOpGemm,
		        npurtOpCast};
		const npurtOpKind k = kinds[rng_.below(std::size(kinds))];
		d.op = k;
		if (k == npurtOpCast) {
			// float32 -> float16, bit for bit (integers up to 2048).
			size_t n = rng_.size(1, maxElems);
			auto A = values(n, seed, 2048);
			float *da = upload(A);
			auto *dout = static_cast<uint16_t *>(devAlloc(n * 2));
			auto *h = static_cast<uint16_t *>(pinnedAlloc(n * 2));
			if (failed())
				return;
			d.outDtype = npurtFloat16, d.a = da, d.out = dout, d.n = n;
			std::vector<uint16_t> bits(n);
			for (size_t i = 0; i < n; i++)
				bits[i] = halfOf(static_cast<int>(A[i]));
			std::memset(h, 0xff, n * 2);
			if (launch(d, s) && copyAsync(h, dout, n * 2, s) && sync(s) &&
			    expectBytes(reinterpret_cast<unsigned char *>(h),
			                reinterpret_cast<unsigned char *>(bits.data()), n * 2,
			                "cast of " + std::to_string(n) +
			                        " floats to float16 on NPU " + std::to_string(dev)))
				slot_->c.opsVerified++;
			return;
		}
		switch (k) {
		case npurtOpReduceSum:
		case npurtOpReduceMax:
		case npurtOpTranspose: {
			size_t m = rng_.range(1, 128), n = rng_.range(1, 256);
			auto A = values(m * n, seed, 8);
			int axis = static_cast<int>(rng_.below(2));
			size_t outN = k == npurtOpTranspose ? m * n : (axis == 0 ? n : m);
			float *da = upload(A);
			out = static_cast<float *>(devAlloc(outN * 4));
			if (failed())
				return;
			d.a = da, d.out = out, d.m = m, d.n = n;
			d.axis = k == npurtOpTranspose ? 0 : axis;
			want.assign(outN, k == npurtOpReduceMax ? -INFINITY : 0.0f);
			for (size_t i = 0; i < m; i++)
				for (size_t j = 0; j < n; j++) {
					float x = A[i * n + j];
					if (k == npurtOpTranspose)
						want[j * m + i] = x;
					else if (k == npurtOpReduceSum)
						want[axis == 0 ? j : i] += x;
					else
						want[axis == 0 ? j : i] =
						        std::max(want[axis == 0 ? j : i], x);
				}
			what = std::string(k == npurtOpTranspose   ? "transpose"
			                   : k == npurtOpReduceSum ? "reduce-sum"
			                                           : "reduce-max") +
			       " of " + std::to_string(m) + "x" + std::to_string(n);
			break;
		}
		case npurtOpGemm: {
			size_t m = rng_.range(1, 48), n = rng_.range(1, 48), kk = rng_.range(1, 64);
			unsigned flags = static_cast<unsigned>(rng_.below(4));
			bool ta = flags & npurtOpTransA, tb = flags & npurtOpTransB;
			auto A = values(m * kk, seed, 4), B = values(kk * n, seed + 1, 4);
			auto C = values(m * n, seed + 2, 16);
			bool withC = rng_.chance(0.5);
			float alpha = rng_.chance(0.5) ? 1.0f : 2.0f, beta = withC ? 1.0f : 0.0f;
			float *da = upload(A), *db = upload(B), *dc = withC ? upload(C) : nullptr;
			out = static_cast<float *>(devAlloc(m * n * 4));
			if (failed())
				return;
			d.flags = flags, d.a = da, d.b = db, d.c = dc, d.out = out;
			d.m = m, d.n = n, d.k = kk, d.alpha = alpha, d.beta = beta;
			want.assign(m * n, 0.0f);
			for (size_t i = 0; i < m; i++)
				for (size_t j = 0; j < n; j++) {
					float acc = 0;
					for (size_t p = 0; p < kk; p++)
						acc += (ta ? A[p * m + i] : A[i * kk + p]) *
						       (tb ? B[j * kk + p] : B[p * n + j]);
					want[i * n + j] =
					        alpha * acc + (withC ? C[i * n + j] : 0.0f);
				}
			what = "gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" +
			       std::to_string(kk) + " flags " + std::to_string(flags);
			break;
		}
		default: {
			size_t n = rng_.size(1, maxElems);
			auto A = values(n, seed, 64), B = values(n, seed + 1, 64);
			bool binary = k != npurtOpScale && k != npurtOpRelu;
			float alpha = rng_.chance(0.5) ? 0.5f : -2.0f;
			float *da = upload(A), *db = binary ? upload(B) : nullptr;
			out = static_cast<float *>(devAlloc(n * 4));
			if (failed())
				return;
			d.a = da, d.b = db, d.out = out, d.n = n;
			// The op set refuses an alpha where it means nothing.
			d.alpha = k == npurtOpScale || k == npurtOpAxpy ? alpha : 0.0f;
			want.resize(n);
			for (size_t i = 0; i < n; i++) {
				float a = A[i], b = B[i];
				switch (k) {
				case npurtOpAdd:
					want[i] = a + b;
					break;
				case npurtOpSub:
					want[i] = a - b;
					break;
				case npurtOpMul:
					want[i] = a * b;
					break;
				case npurtOpMax:
					want[i] = std::max(a, b);
					break;
				case npurtOpMin:
					want[i] = std::min(a, b);
					break;
				case npurtOpScale:
					want[i] = alpha * a;
					break;
				case npurtOpAxpy:
					want[i] = alpha * a + b;
					break;
				default:
					want[i] = std::max(a, 0.0f);
					break;
				}
			}
			what = "elementwise op " + std::to_string(k) + " of " + std::to_string(n);
			break;
		}
		}
		if (!launch(d, s))
			return;
	}
	auto *h = static_cast<float *>(pinnedAlloc(want.size() * 4));
	if (!h)
		return;
	std::memset(h, 0xff, want.size() * 4);
	if (!copyAsync(h, out, want.size() * 4, s) || !sync(s))
		return;
	expectFloats(h, want, what + " on NPU " + std::to_string(dev));
}

// A stream of one NPU makes data, another NPU's stream waits for its event
// and copies it over (peer copy), scales it with an op and brings it back.
void Thread::crossDevice()
{
	const int d0 = pickDevice();
	const int d1 =
	        (d0 + 1 + static_cast<int>(rng_.below(static_cast<uint64_t>(ndev_ - 1)))) % ndev_;
	npurtStream_t s0 = stream(d0, 0), s1 = stream(d1, 1);
	if (!s0 || !s1)
		return;
	const size_t n = rng_.size(1, sh_->maxBytes / 4);
	const uint64_t seed = rng_.next();
	std::vector<float> src(n), want(n);
	for (size_t i = 0; i < n; i++) {
		src[i] = static_cast<float>(smallInt(seed, i, 1000));
		want[i] = 2.0f * src[i];
	}
	if (!ok(npurtSetDevice(d0), "npurtSetDevice"))
		return;
	auto *x = static_cast<float *>(devAlloc(n * 4));
	auto *hx = static_cast<float *>(pinnedAlloc(n * 4));
	npurtEvent_t e = event(rng_.chance(0.5) ? npurtEventDisableTiming : npurtEventDefault);
	if (failed())
		return;
	std::memcpy(hx, src.data(), n * 4);
	if (!copyAsync(x, hx, n * 4, s0) || !ok(npurtEventRecord(e, s0), "npurtEventRecord"))
		return;
	if (!ok(npurtSetDevice(d1), "npurtSetDevice"))
		return;
	auto *y = static_cast<float *>(devAlloc(n * 4));
	auto *z = static_cast<float *>(devAlloc(n * 4));
	auto *hz = static_cast<float *>(pinnedAlloc(n * 4));
	if (failed())
		return;
	std::memset(hz, 0, n * 4);
	phase(PhaseEnqueue);
	if (!ok(npurtStreamWaitEvent(s1, e, 0), "npurtStreamWaitEvent") ||
	    !ok(npurtMemcpyPeerAsync(y, d1, x, d0, n * 4, s1), "npurtMemcpyPeerAsync"))
		return;
	npurtOpDesc d{};
	d.op = npurtOpScale, d.dtype = npurtFloat32, d.outDtype = npurtFloat32;
	d.a = y, d.out = z, d.n = n, d.alpha = 2.0f;
	if (!launch(d, s1) || !copyAsync(hz, z, n * 4, s1) || !sync(s1) || !sync(s0))
		return;
	expectFloats(hz, want,
	             "NPU " + std::to_string(d0) + " -> NPU " + std::to_string(d1) +
	                     " through an "
	                     "event, " +
	                     std::to_string(n) + " floats");
}

// Allocations of random sizes come and go; each live one holds its own
// tag, checked at its ends when it is freed: blocks that overlap, or a
// block handed out while a fill of its last owner still runs, show.
void Thread::allocChurn()
{
	const int dev = pickDevice();
	npurtStream_t s = stream(dev, 0);
	if (!s || !ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	struct Live {
		unsigned char *p;
		size_t n;  // multiple of 4
		uint32_t tag;
	};
	std::vector<Live> live;
	auto *probe = static_cast<uint32_t *>(pinnedAlloc(16));
	if (!probe)
		return;
	auto freeOne = [&](size_t i, bool check) {
		Live l = live[i];
		live.erase(live.begin() + static_cast<long>(i));
		if (check) {
			std::memset(probe, 0, 16);
			if (!copyAsync(probe, l.p, 8, s) ||
			    !copyAsync(probe + 2, l.p + l.n - 8, 8, s) || !sync(s))
				return false;
			uint32_t want[4] = {l.tag, l.tag, l.tag, l.tag};
			if (!expectBytes(reinterpret_cast<unsigned char *>(probe),
			                 reinterpret_cast<unsigned char *>(want), 16,
			                 "tag of a block of " + std::to_string(l.n) + " bytes"))
				return false;
		}
		phase(PhaseTeardown);
		dev_.erase(std::find(dev_.begin(), dev_.end(), l.p));
		return ok(npurtFree(l.p), "npurtFree");
	};
	const int rounds = static_cast<int>(rng_.range(8, 32));
	for (int r = 0; r < rounds && !failed() && !stopping(); r++) {
		if (live.empty() || (live.size() < 12 && rng_.chance(0.6))) {
			size_t n = (rng_.size(8, sh_->maxBytes) + 3) & ~size_t{3};
			auto *p = static_cast<unsigned char *>(devAlloc(n));
			if (!p)
				break;
			uint32_t tag = static_cast<uint32_t>(rng_.next()) | 1;
			phase(PhaseEnqueue);
			if (!ok(npurtMemsetD32Async(p, tag, n / 4, s), "npurtMemsetD32Async"))
				break;
			live.push_back({p, n, tag});
		} else {
			// Freed right after its fill was queued or checked.
			if (!freeOne(rng_.below(live.size()), rng_.chance(0.7)))
				break;
		}
	}
	while (!live.empty() && !failed())
		freeOne(live.size() - 1, true);
}

// A host function in stream order sees the data the device wrote before
// it, and never runs behind a failure.
void Thread::hostFunc()
{
	const int dev = pickDevice();
	npurtStream_t s = stream(dev, 0);
	if (!s || !ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	const size_t n = rng_.size(1, sh_->maxBytes / 4);
	const uint64_t seed = rng_.next();
	auto *a = static_cast<unsigned char *>(devAlloc(n));
	auto *b = static_cast<unsigned char *>(devAlloc(n));
	auto *h = static_cast<unsigned char *>(pinnedAlloc(n));
	auto *back = static_cast<unsigned char *>(pinnedAlloc(n));
	if (failed())
		return;
	std::vector<unsigned char> want(n);
	fillBytes(want.data(), n, seed);
	struct Seen {
		const unsigned char *src = nullptr;
		size_t n = 0;
		std::vector<unsigned char> copy;
		std::atomic<int> ran{0};
	};
	// On the heap: kept (leaked) if the stream never ends, for the
	// function might still run.
	auto *seen = new Seen;
	seen->src = back;
	seen->n = n;
	std::memcpy(h, want.data(), n);
	std::memset(back, 0, n);
	phase(PhaseEnqueue);
	if (!copyAsync(a, h, n, s) || !ok(npurtMemsetAsync(b, 0, n, s), "npurtMemsetAsync") ||
	    !copyAsync(b, a, n, s) || !copyAsync(back, b, n, s)) {
		delete seen;
		return;
	}
	auto fn = [](void *p) {
		auto *sn = static_cast<Seen *>(p);
		sn->copy.assign(sn->src, sn->src + sn->n);
		sn->ran.store(1);
	};
	phase(PhaseEnqueue);
	if (!ok(npurtLaunchHostFunc(s, fn, seen), "npurtLaunchHostFunc")) {
		delete seen;
		return;
	}
	bool synced = sync(s);
	bool done = synced;
	if (!synced) {
		// The stream failed (or the wait ran out): the function must
		// be done with `seen` before it is freed.
		npurtError_t e = npurtStreamSynchronizeTimeout(s, waitMs());
		done = e != npurtErrorTimeout && e != npurtErrorNotReady;
		npurtGetLastError();
	}
	// Whether or not a failure came after, the function saw finished data.
	if (seen->ran.load()) {
		expectBytes(seen->copy.data(), want.data(), n, "data a host function saw");
	} else if (synced) {
		slot_->c.wrong++;
		failure("WRONG RESULT", "a host function did not run, yet its stream synchronised");
	}
	if (done)
		delete seen;
}

void Thread::context()
{
	const int dev = pickDevice();
	npurtContext_t ctx = nullptr;
	phase(PhaseSetup);
	if (!ok(npurtCtxCreate(&ctx, 0, dev), "npurtCtxCreate"))
		return;
	const size_t n = rng_.size(1, sh_->maxBytes / 4);
	std::vector<unsigned char> want(n), got(n, 0);
	fillBytes(want.data(), n, rng_.next());
	void *a = nullptr, *b = nullptr;
	if (ok(npurtCtxSetCurrent(ctx), "npurtCtxSetCurrent") &&
	    ok(npurtMalloc(&a, n), "npurtMalloc") && ok(npurtMalloc(&b, n), "npurtMalloc")) {
		phase(PhaseEnqueue);
		if (ok(npurtMemcpy(a, want.data(), n, npurtMemcpyHostToDevice), "npurtMemcpy") &&
		    ok(npurtMemcpy(b, a, n, npurtMemcpyDeviceToDevice), "npurtMemcpy") &&
		    ok(npurtMemcpy(got.data(), b, n, npurtMemcpyDeviceToHost), "npurtMemcpy"))
			expectBytes(got.data(), want.data(), n, "copies in a context of its own");
	}
	phase(PhaseTeardown);
	// Leaves b allocated: the context's end frees it.
	if (a)
		npurtFree(a);
	npurtCtxSetCurrent(nullptr);
	if (npurtCtxDestroy(ctx) != npurtSuccess) {
		slot_->c.unexpected++;
		failure("unexpected error",
		        std::string("npurtCtxDestroy: ") + npurtGetLastErrorMessage());
	}
	npurtGetLastError();
	npurtSetDevice(dev);
	// A failure here was on the context's own default stream, gone now:
	// nothing of the thread's to recover.
	if (failed())
		slot_->c.recoveries++;
	error_ = npurtSuccess;
}

// The legacy default stream (NULL) of the primary context, synchronous
// calls, and the per-thread default stream.
void Thread::legacy()
{
	const int dev = pickDevice();
	if (!ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	const size_t n = rng_.size(1, sh_->maxBytes / 4);
	std::vector<unsigned char> want(n), got(n, 0);
	fillBytes(want.data(), n, rng_.next());
	auto *a = static_cast<unsigned char *>(devAlloc(n));
	auto *b = static_cast<unsigned char *>(devAlloc(n));
	if (failed())
		return;
	if (rng_.chance(0.5)) {
		std::lock_guard<std::mutex> lock(legacyMutex);
		phase(PhaseEnqueue);
		size_t f = rng_.below(n);
		if (ok(npurtMemcpy(a, want.data(), n, npurtMemcpyHostToDevice), "npurtMemcpy") &&
		    ok(npurtMemcpy(b, a, n, npurtMemcpyDeviceToDevice), "npurtMemcpy") &&
		    ok(npurtMemset(b + f, 0x5a, n - f), "npurtMemset") &&
		    ok(npurtMemcpy(got.data(), b, n, npurtMemcpyDeviceToHost), "npurtMemcpy")) {
			std::memset(want.data() + f, 0x5a, n - f);
			expectBytes(got.data(), want.data(), n, "synchronous copies on NULL");
		}
		if (failed()) {
			phase(PhaseRecover);
			npurtStreamSynchronizeTimeout(nullptr, waitMs());
			npurtGetLastError();
			npurtStreamRecover(nullptr);
			npurtGetLastError();
		}
		return;
	}
	npurtStream_t s = npurtStreamPerThread;
	if (copyAsync(a, want.data(), n, s) && copyAsync(b, a, n, s) &&
	    copyAsync(got.data(), b, n, s) && sync(s))
		expectBytes(got.data(), want.data(), n, "copies on the per-thread stream");
	if (failed()) {
		phase(PhaseRecover);
		npurtStreamSynchronizeTimeout(s, waitMs());
		npurtGetLastError();
		npurtStreamRecover(s);
		npurtGetLastError();
	}
}

// A stream destroyed with its work in flight: the work completes, and an
// event recorded before the destroy says when.
void Thread::streamChurn()
{
	const int dev = pickDevice();
	if (!ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	npurtStream_t s = nullptr;
	phase(PhaseSetup);
	if (!ok(npurtStreamCreateWithFlags(&s, rng_.chance(0.5) ? npurtStreamNonBlocking : 0),
	        "npurtStreamCreateWithFlags"))
		return;
	const size_t n = rng_.size(1, sh_->maxBytes);
	std::vector<unsigned char> want(n);
	fillBytes(want.data(), n, rng_.next());
	auto *a = static_cast<unsigned char *>(devAlloc(n));
	auto *h = static_cast<unsigned char *>(pinnedAlloc(n));
	auto *back = static_cast<unsigned char *>(pinnedAlloc(n));
	npurtEvent_t e = event(npurtEventDisableTiming);
	if (!failed()) {
		std::memcpy(h, want.data(), n);
		std::memset(back, 0, n);
		if (copyAsync(a, h, n, s) && copyAsync(back, a, n, s))
			ok(npurtEventRecord(e, s), "npurtEventRecord");
	}
	phase(PhaseTeardown);
	// Destroyed at once, the copies probably still queued.
	if (npurtStreamDestroy(s) != npurtSuccess) {
		slot_->c.unexpected++;
		failure("unexpected error",
		        std::string("npurtStreamDestroy: ") + npurtGetLastErrorMessage());
		npurtGetLastError();
	}
	if (failed())
		return;
	phase(PhaseWait);
	if (ok(npurtEventSynchronizeTimeout(e, waitMs()), "npurtEventSynchronizeTimeout"))
		expectBytes(back, want.data(), n, "copies of a stream destroyed with them queued");
	// The destroyed stream's failure has no stream left to recover.
	if (failed() && error_ != npurtErrorTimeout)
		error_ = npurtSuccess;
}

// Rows of a pitched host buffer into a pitched device buffer and back into
// another pitch: the bytes between the rows stay untouched.
void Thread::copy2D()
{
	const int dev = pickDevice();
	npurtStream_t s = stream(dev, static_cast<int>(rng_.below(2)));
	if (!s || !ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	const size_t width = rng_.size(1, 4096), height = rng_.range(1, 256);
	const size_t sp = width + rng_.below(64), dp = width + rng_.below(64),
	             hp = width + rng_.below(64);
	const uint64_t seed = rng_.next();
	auto *src = hostAlloc(sp * height, static_cast<int>(rng_.below(3)));
	auto *dst = hostAlloc(hp * height, rng_.chance(0.5) ? 0 : 2);
	auto *d = static_cast<unsigned char *>(devAlloc(dp * height));
	if (failed())
		return;
	fillBytes(src, sp * height, seed);
	std::memset(dst, 0xee, hp * height);
	std::vector<unsigned char> want(hp * height, 0xee);
	for (size_t r = 0; r < height; r++)
		std::memcpy(want.data() + r * hp, src + r * sp, width);
	phase(PhaseEnqueue);
	if (!ok(npurtMemcpy2DAsync(d, dp, src, sp, width, height, npurtMemcpyHostToDevice, s),
	        "npurtMemcpy2DAsync") ||
	    !ok(npurtMemcpy2DAsync(dst, hp, d, dp, width, height, npurtMemcpyDeviceToHost, s),
	        "npurtMemcpy2DAsync") ||
	    !sync(s))
		return;
	expectBytes(dst, want.data(), hp * height,
	            "2-D copy of " + std::to_string(height) + " rows of " + std::to_string(width) +
	                    " bytes on NPU " + std::to_string(dev));
}

// A transpose and a broadcast by strides, on the device.
void Thread::copyStrided()
{
	const int dev = pickDevice();
	npurtStream_t s = stream(dev, static_cast<int>(rng_.below(2)));
	if (!s || !ok(npurtSetDevice(dev), "npurtSetDevice"))
		return;
	const size_t m = rng_.range(1, 256), n = rng_.range(1, 256);
	const size_t es = size_t{1} << rng_.below(4);  // 1, 2, 4 or 8 bytes
	const bool broadcast = rng_.chance(0.3);
	const uint64_t seed = rng_.next();
	auto *h = hostAlloc(m * n * es, 0);
	auto *back = hostAlloc(m * n * es, rng_.chance(0.5) ? 0 : 2);
	auto *a = static_cast<unsigned char *>(devAlloc(m * n * es));
	auto *t = static_cast<unsigned char *>(devAlloc(m * n * es));
	if (failed())
		return;
	fillBytes(h, m * n * es, seed);
	std::memset(back, 0, m * n * es);
	// Transpose: (i, j) of the m x n source to (j, i) of the n x m
	// result. Broadcast: row 0 of the source to every row.
	const size_t sizes[2] = {m, n};
	const size_t srcStrides[2] = {broadcast ? 0 : n * es, es};
	const size_t dstStrides[2] = {broadcast ? n * es : es, broadcast ? es : m * es};
	std::vector<unsigned char> want(m * n * es);
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++)
			std::memcpy(want.data() + i * dstStrides[0] + j * dstStrides[1],
			            h + i * srcStrides[0] + j * srcStrides[1], es);
	if (!copyAsync(a, h, m * n * es, s))
		return;
	phase(PhaseEnqueue);
	if (!ok(npurtMemcpyStridedAsync(t, dstStrides, a, srcStrides, sizes, 2, es,
	                                npurtMemcpyDeviceToDevice, s),
	        "npurtMemcpyStridedAsync") ||
	    !copyAsync(back, t, m * n * es, s) || !sync(s))
		return;
	expectBytes(back, want.data(), m * n * es,
	            std::string(broadcast ? "broadcast" : "transpose") + " by strides of " +
	                    std::to_string(m) + "x" + std::to_string(n) + " elements of " +
	                    std::to_string(es) + " bytes on NPU " + std::to_string(dev));
}

// Two contexts of their own (of two NPUs, or both of one), one given peer
// access to the other's memory: an op of the accessor reads the owner's
// memory on the accessor's engine; the link is undone and both contexts
// destroyed.
void Thread::peerContexts()
{
	const int d0 = pickDevice(), d1 = pickDevice();
	npurtContext_t owner = nullptr, accessor = nullptr;
	npurtStream_t s = nullptr;
	bool linked = false;
	const size_t n = rng_.size(1, sh_->maxBytes / 8);
	const uint64_t seed = rng_.next();
	std::vector<float> src(n), want(n), got(n, 0.0f);
	for (size_t i = 0; i < n; i++) {
		src[i] = static_cast<float>(smallInt(seed, i, 1000));
		want[i] = -2.0f * src[i];
	}
	void *x = nullptr, *y = nullptr;
	phase(PhaseSetup);
	if (ok(npurtCtxCreate(&owner, 0, d0), "npurtCtxCreate") &&
	    ok(npurtCtxCreate(&accessor, 0, d1), "npurtCtxCreate") &&
	    ok(npurtCtxSetCurrent(owner), "npurtCtxSetCurrent") &&
	    ok(npurtMalloc(&x, n * 4), "npurtMalloc") &&
	    ok(npurtMemcpy(x, src.data(), n * 4, npurtMemcpyHostToDevice), "npurtMemcpy") &&
	    ok(npurtCtxSetCurrent(accessor), "npurtCtxSetCurrent") &&
	    ok(npurtCtxEnablePeerAccess(owner, 0), "npurtCtxEnablePeerAccess")) {
		linked = true;
		npurtOpDesc d{};
		d.op = npurtOpScale, d.dtype = npurtFloat32, d.outDtype = npurtFloat32;
		d.n = n, d.alpha = -2.0f;
		if (ok(npurtMalloc(&y, n * 4), "npurtMalloc") &&
		    ok(npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking),
		       "npurtStreamCreateWithFlags")) {
			d.a = x, d.out = y;
			if (launch(d, s) && copyAsync(got.data(), y, n * 4, s) && sync(s))
				expectFloats(got.data(), want,
				             "an op of NPU " + std::to_string(d1) +
				                     " on peer memory of NPU " +
				                     std::to_string(d0));
		}
	}
	phase(PhaseTeardown);
	if (s) {
		npurtStreamSynchronizeTimeout(s, waitMs());
		npurtStreamRecover(s);
		npurtStreamDestroy(s);
	}
	if (linked && npurtCtxDisablePeerAccess(owner) != npurtSuccess) {
		slot_->c.unexpected++;
		failure("unexpected error",
		        std::string("npurtCtxDisablePeerAccess: ") + npurtGetLastErrorMessage());
	}
	npurtCtxSetCurrent(nullptr);
	for (npurtContext_t c : {accessor, owner})
		if (c && npurtCtxDestroy(c) != npurtSuccess) {
			slot_->c.unexpected++;
			failure("unexpected error",
			        std::string("npurtCtxDestroy: ") + npurtGetLastErrorMessage());
		}
	npurtGetLastError();
	// The failures were on the contexts' streams, gone now.
	if (failed())
		slot_->c.recoveries++;
	error_ = npurtSuccess;
}

// -- IPC between the processes of a pair ---------------------------------

// The even slot: device memory made by an op behind an IPC event, offered
// before the op has run; the memory is reused only when the importer is
// done (or gone, or never claimed it).
void Thread::runIpc(bool exporter)
{
	scenario_ = kIpcScenario;
	ts_->scenario.store(kIpcScenario, std::memory_order_relaxed);
	Slot &peer = sh_->slots[slot_ - sh_->slots + (exporter ? 1 : -1)];
	IpcMailbox &box = exporter ? slot_->box : peer.box;
	const uint64_t sliceNs = 500000000ull;
	uint32_t lastSeen = 0;
	while (!stopping()) {
		error_ = npurtSuccess;
		phase(PhaseIpc);
		if (exporter) {
			const int dev = pickDevice();
			npurtStream_t s = stream(dev, 0);
			if (!s || !ok(npurtSetDevice(dev), "npurtSetDevice")) {
				recover();
				release();
				continue;
			}
			const size_t n = rng_.size(1, sh_->maxBytes / 4);
			const uint32_t seed = static_cast<uint32_t>(rng_.next());
			auto *x = static_cast<float *>(devAlloc(n * 4));
			auto *z = static_cast<float *>(devAlloc(n * 4));
			auto *hx = static_cast<float *>(pinnedAlloc(n * 4));
			npurtEvent_t e = event(npurtEventInterprocess | npurtEventDisableTiming);
			npurtIpcMemHandle_t mh{};
			npurtIpcEventHandle_t eh{};
			bool offered = false;
			if (!failed()) {
				for (size_t i = 0; i < n; i++)
					hx[i] = static_cast<float>(smallInt(seed, i, 1000));
				// z holds NaNs until the op: a reader not ordered
				// behind the event sees them.
				phase(PhaseEnqueue);
				npurtOpDesc d{};
				d.op = npurtOpScale, d.dtype = npurtFloat32,
				d.outDtype = npurtFloat32;
				d.a = x, d.out = z, d.n = n, d.alpha = 2.0f;
				if (ok(npurtMemsetD32Async(z, 0xffffffffu, n, s),
				       "npurtMemsetD32Async") &&
				    copyAsync(x, hx, n * 4, s) && launch(d, s) &&
				    ok(npurtEventRecord(e, s), "npurtEventRecord") &&
				    ok(npurtIpcGetMemHandle(&mh, z), "npurtIpcGetMemHandle") &&
				    ok(npurtIpcGetEventHandle(&eh, e), "npurtIpcGetEventHandle"))
					offered = true;
			}
			if (offered) {
				uint32_t g = box.offer.load() / 2 + 1;
				// A seqlock: odd while the fields change. The
				// fence keeps their writes after the odd mark.
				box.offer.store(2 * g - 1);
				std::atomic_thread_fence(std::memory_order_release);
				box.mem = mh;
				box.event = eh;
				box.elements.store(n, std::memory_order_relaxed);
				box.seed.store(seed, std::memory_order_relaxed);
				box.device.store(dev, std::memory_order_relaxed);
				box.exporterGeneration.store(slot_->generation.load(),
				                             std::memory_order_relaxed);
				box.offer.store(2 * g);
				futexWakeAll(&box.offer);
				// Claimed within a while, or withdrawn.
				uint64_t deadline = nowNs() + 5000000000ull;
				uint32_t c = box.claim.load();
				while (c != g && nowNs() < deadline && !stopping()) {
					phase(PhaseIpc);
					futexWait(&box.claim, c, sliceNs);
					c = box.claim.load();
				}
				uint32_t expected = c;
				if (c == g || !box.claim.compare_exchange_strong(
				                      expected, g | IpcMailbox::kWithdrawn)) {
					// Claimed: done when acknowledged, or when
					// the importer's incarnation is gone.
					uint32_t gen = box.claimerGeneration.load();
					uint64_t limit =
					        nowNs() +
					        4ull * static_cast<uint64_t>(waitMs()) * 1000000ull;
					for (;;) {
						uint32_t a = box.ack.load();
						if (a == g || peer.generation.load() != gen ||
						    peer.pid.load() == 0)
							break;
						if (nowNs() > limit) {
							slot_->c.waitTimeouts++;
							failure("wait timed out",
							        "the IPC partner claimed an offer "
							        "and never "
							        "finished with it");
							break;
						}
						phase(PhaseIpc);
						futexWait(&box.ack, a, sliceNs);
					}
				}
				sync(s);
			}
			if (failed())
				recover();
			release();
			slot_->c.scenarios++;
			continue;
		}
		// Importer: the next offer.
		uint32_t o = box.offer.load();
		if (o == 0 || (o & 1) || o / 2 == lastSeen) {
			futexWait(&box.offer, o, sliceNs);
			continue;
		}
		const uint32_t g = o / 2;
		lastSeen = g;
		npurtIpcMemHandle_t mh;
		npurtIpcEventHandle_t eh;
		volatileCopy(&mh, &box.mem, sizeof(mh));
		volatileCopy(&eh, &box.event, sizeof(eh));
		const size_t n = box.elements.load(std::memory_order_relaxed);
		const uint32_t seed = box.seed.load(std::memory_order_relaxed);
		const int32_t exporterDev = box.device.load(std::memory_order_relaxed);
		const uint32_t exporterGen = box.exporterGeneration.load(std::memory_order_relaxed);
		// The fields' reads stay before the second look at the mark: a
		// handle of one incarnation read with the generation of the
		// next would take a dead exporter's refusal for a live one's.
		std::atomic_thread_fence(std::memory_order_acquire);
		if (box.offer.load() != o)
			continue;  // rewritten while read
		box.claimerGeneration.store(slot_->generation.load());
		uint32_t expected = box.claim.load();
		if ((expected & ~IpcMailbox::kWithdrawn) >= g ||
		    !box.claim.compare_exchange_strong(expected, g))
			continue;  // withdrawn first
		futexWakeAll(&box.claim);
		auto exporterGone = [&] {
			return peer.generation.load() != exporterGen || peer.pid.load() == 0;
		};
		const int dev = pickDevice();
		npurtStream_t s = stream(dev, 0);
		void *z = nullptr;
		npurtEvent_t e = nullptr;
		bool opened = false;
		if (s && ok(npurtSetDevice(dev), "npurtSetDevice")) {
			// A handle of an exporter that died is refused with
			// npurtErrorInvalidHandle (npurt.h): not a failure of the
			// runtime. The exporter keeps its handles valid while it
			// waits for the ack, so a refusal while it lives is one.
			npurtError_t r1 =
			        npurtIpcOpenMemHandle(&z, mh, npurtIpcMemLazyEnablePeerAccess);
			npurtError_t r2 = r1 == npurtSuccess ? npurtIpcOpenEventHandle(&e, eh) : r1;
			if (r1 == npurtSuccess && r2 == npurtSuccess) {
				opened = true;
			} else {
				const std::string why = npurtGetLastErrorMessage();
				npurtGetLastError();
				if (r1 == npurtSuccess)
					npurtIpcCloseMemHandle(z);
				// A dead exporter is reaped (its slot's pid cleared,
				// the mailbox woken) within the supervisor's loop.
				const uint64_t until = nowNs() + 5000000000ull;
				while (!exporterGone() && nowNs() < until) {
					phase(PhaseIpc);
					futexWait(&box.offer, box.offer.load(), 100000000ull);
				}
				if (exporterGone() && r2 == npurtErrorInvalidHandle) {
					slot_->c.ipcPeerGone++;
				} else {
					error_ = r2;
					slot_->c.unexpected++;
					failure("unexpected error",
					        std::string(npurtGetErrorName(r2)) + ": " + why +
					                (exporterGone() ? " (the exporter is gone)"
					                                : " (the exporter lives)"));
				}
			}
		}
		if (opened) {
			auto *h = static_cast<float *>(pinnedAlloc(n * 4));
			if (h) {
				std::memset(h, 0, n * 4);
				phase(PhaseEnqueue);
				if (ok(npurtStreamWaitEvent(s, e, 0), "npurtStreamWaitEvent") &&
				    copyAsync(h, z, n * 4, s) && sync(s)) {
					std::vector<float> want(n);
					for (size_t i = 0; i < n; i++)
						want[i] = 2.0f * static_cast<float>(
						                         smallInt(seed, i, 1000));
					if (expectFloats(h, want,
					                 "IPC memory of NPU " +
					                         std::to_string(exporterDev) +
					                         " behind an IPC event"))
						slot_->c.ipcVerified++;
				}
			}
			npurtEventDestroy(e);
			npurtIpcCloseMemHandle(z);
			npurtGetLastError();
		}
		if (failed())
			recover();
		release();
		box.ack.store(g);
		futexWakeAll(&box.ack);
		slot_->c.scenarios++;
	}
	phase(PhaseTeardown);
	destroyStreams();
	release();
}

}  // namespace

int runWorker(Shared *sh, int slot, uint32_t generation)
{
	Slot &me = sh->slots[slot];
	int count = 0;
	if (npurtGetDeviceCount(&count) != npurtSuccess || count != static_cast<int>(sh->devices)) {
		char text[256];
		std::snprintf(text, sizeof(text),
		              "worker %d: npurtGetDeviceCount gave %d NPUs (%s)", slot, count,
		              npurtGetLastErrorMessage());
		setFailureText(me, text);
		me.c.unexpected++;
		return 1;
	}
	// Reports without a call too (the runtime's monitor thread polls the
	// live streams): counted.
	npurtSetErrorCallback([](npurtStream_t, npurtError_t, const char *,
	                         void *user) { static_cast<Slot *>(user)->c.callbacks++; },
	                      &me);
	const uint64_t seed = mix(sh->seed ^ (static_cast<uint64_t>(slot) << 32) ^ generation);
	const int threads = static_cast<int>(sh->threads);
	const bool paired = (slot ^ 1) < static_cast<int>(sh->procs);
	std::vector<std::thread> pool;
	pool.reserve(static_cast<size_t>(threads) + 1);
	for (int t = 0; t < threads + (paired ? 1 : 0); t++)
		pool.emplace_back([sh, &me, t, threads, seed, slot] {
			Thread th(sh, &me, t, mix(seed + static_cast<uint64_t>(t)));
			if (t < threads)
				th.run();
			else
				th.runIpc((slot & 1) == 0);
		});
	me.ready.store(1);
	for (std::thread &t : pool)
		t.join();
	return 0;
}

const char *scenarioName(uint32_t i)
{
	return i <= kScenarioCount ? kScenarioNames[i] : "?";
}

}  // namespace soak

// Async launch rate and idle latency, against the null ioctl; and the same
// work submitted straight to the kernel on the bench's own file, which
// splits the runtime's figures into runtime, kernel submit and device parts.
//
// Every figure's null-ioctl limit is sampled right before the figure's own
// sample in the same run, so that both see the same load on the machine.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "bench.h"
#include "npu_drm.h"
#include "raw.h"

namespace bench {
namespace {

constexpr size_t kTiny = 256;  // bytes of a tiny memset
constexpr uint64_t kTinyAdd = 64;  // floats of a tiny add

// Device buffers and streams the tiny ops use.
struct Tiny {
	void *fill = nullptr;
	float *a = nullptr, *b = nullptr, *out = nullptr;
	npurtStream_t streams[4] = {};

	Tiny()
	{
		check(npurtMalloc(&fill, kTiny), "malloc");
		void *p = nullptr;
		check(npurtMalloc(&p, kTinyAdd * 4), "malloc");
		a = static_cast<float *>(p);
		check(npurtMalloc(&p, kTinyAdd * 4), "malloc");
		b = static_cast<float *>(p);
		check(npurtMalloc(&p, kTinyAdd * 4), "malloc");
		out = static_cast<float *>(p);
		check(npurtMemset(a, 0, kTinyAdd * 4), "memset");
		check(npurtMemset(b, 0, kTinyAdd * 4), "memset");
		for (auto &s : streams) {
			check(npurtStreamCreate(&s), "stream create");
			// First use creates the stream's kernel queues.
			memset(s);
			add(s);
			check(npurtStreamSynchronize(s), "stream synchronize");
		}
	}
	~Tiny()
	{
		for (auto &s : streams)
			check(npurtStreamDestroy(s), "stream destroy");
		check(npurtFree(fill), "free");
		check(npurtFree(a), "free");
		check(npurtFree(b), "free");
		check(npurtFree(out), "free");
	}
	Tiny(const Tiny &) = delete;
	Tiny &operator=(const Tiny &) = delete;

	void memset(npurtStream_t s) { check(npurtMemsetAsync(fill, 0, kTiny, s), "memset async"); }
	void add(npurtStream_t s)
	{
		npurtOpDesc d{};
		d.op = npurtOpAdd;
		d.dtype = npurtFloat32;
		d.outDtype = npurtFloat32;
		d.a = a;
		d.b = b;
		d.out = out;
		d.n = kTinyAdd;
		check(npurtLaunchOp(&d, s), "launch op");
	}
};

// The bench's own queue on the copy engines, with a pinned page the device
// fills and timestamps.
struct RawQueue {
	RawDevice dev;
	RawDevice::Queue q;
	volatile uint64_t *slots = nullptr;  // [0], [1]: timestamps
	uint64_t fillAt = 0;  // device address of kTiny bytes to fill

	RawQueue()
	{
		q = dev.createQueue(DRM_NPU_ENGINE_COPY);
		void *p = dev.mapHost(4096);
		slots = static_cast<volatile uint64_t *>(p);
		fillAt = reinterpret_cast<uintptr_t>(p) + 2048;
	}
	drm_npu_pkt_fill fillPacket() const
	{
		drm_npu_pkt_fill f{};
		f.hdr = {DRM_NPU_PKT_FILL, sizeof(f)};
		f.dst = fillAt;
		f.size = kTiny;
		f.width = 1;
		return f;
	}
	uint64_t submitFill()
	{
		drm_npu_pkt_fill f = fillPacket();
		return dev.submit(q, &f, sizeof(f));
	}
	drm_npu_pkt_timestamp stamp(int slot) const
	{
		drm_npu_pkt_timestamp t{};
		t.hdr = {DRM_NPU_PKT_TIMESTAMP, sizeof(t)};
		t.dst = reinterpret_cast<uintptr_t>(&slots[slot]);
		return t;
	}
	double nullUs(int n) { return dev.nullUs(n); }
};

}  // namespace

void benchLaunch(const Options &o)
{
	nullIoctl(o);
	const int n = o.quick ? 500 : 2000;
	const int nNull = o.quick ? 1000 : 4000;
	Tiny tiny;
	RawQueue raw;

	struct Kind {
		const char *name;
		bool add;
	};
	std::vector<double> enqueueMemset1, null1;
	for (Kind k : {Kind{"memset 256 B", false}, Kind{"add f32 x64", true}}) {
		for (int ns : {1, 4}) {
			std::vector<double> rate, enqueue, nullUs, nullRate;
			for (int r = 0; r < o.runs; r++) {
				double nu = raw.nullUs(nNull);
				nullUs.push_back(nu);
				nullRate.push_back(1e6 / nu);
				double t0 = now();
				for (int i = 0; i < n; i++) {
					npurtStream_t s = tiny.streams[i % ns];
					if (k.add)
						tiny.add(s);
					else
						tiny.memset(s);
				}
				double t1 = now();
				for (int i = 0; i < ns; i++)
					check(npurtStreamSynchronize(tiny.streams[i]),
					      "stream synchronize");
				double t2 = now();
				rate.push_back(n / (t2 - t0));
				enqueue.push_back((t1 - t0) / n * 1e6);
			}
			std::string what = std::string(k.name) + ", " + std::to_string(ns) +
			                   (ns == 1 ? " stream" : " streams");
			addFigure("launch", what + ": ops/s (enqueue N, sync)", "ops/s", rate,
			          "null ioctls/s", "1/s", nullRate);
			addFigure("launch", what + ": enqueue per op", "us", enqueue, "null ioctl",
			          "us", nullUs, "time in the enqueue calls / N");
			if (!k.add && ns == 1) {
				enqueueMemset1 = enqueue;
				null1 = nullUs;
			}
		}
	}

	// The same with the call site given (npurtSetCallSite, as the C++ layer
	// does): the runtime then skips looking up the caller's return address.
	std::vector<double> sited, sitedNull;
	for (int r = 0; r < o.runs; r++) {
		sitedNull.push_back(raw.nullUs(nNull));
		double t0 = now();
		for (int i = 0; i < n; i++) {
			check(npurtSetCallSite(__FILE__, __LINE__, __func__), "set call site");
			tiny.memset(tiny.streams[0]);
		}
		double t1 = now();
		check(npurtStreamSynchronize(tiny.streams[0]), "stream synchronize");
		sited.push_back((t1 - t0) / n * 1e6);
	}
	addFigure("launch", "memset 256 B, 1 stream, call site set: enqueue per op", "us", sited,
	          "null ioctl", "us", sitedNull, "npurtSetCallSite before each");

	// The kernel alone: the same fill submitted on the bench's own queue;
	// N submits then one wait (amortised, as above), and one submit at a
	// time on an idle engine (each call timed less one clock read; the
	// median of the calls).
	double clkUs = stats(repeat(3, clockUs)).median;
	std::vector<double> submitUs, nullA, idleUs, nullB;
	const int nIdle = o.quick ? 50 : 300;
	for (int r = 0; r < o.runs; r++) {
		nullA.push_back(raw.nullUs(nNull));
		double t0 = now();
		uint64_t last = 0;
		for (int i = 0; i < n; i++)
			last = raw.submitFill();
		double t1 = now();
		raw.dev.wait(raw.q, last);
		submitUs.push_back((t1 - t0) / n * 1e6);

		nullB.push_back(raw.nullUs(nNull));
		std::vector<double> one;
		for (int i = 0; i < nIdle; i++) {
			t0 = now();
			last = raw.submitFill();
			t1 = now();
			raw.dev.wait(raw.q, last);
			one.push_back((t1 - t0) * 1e6 - clkUs);
		}
		idleUs.push_back(stats(one).median);
	}
	addFigure("launch", "raw SUBMIT (fill 256 B), amortised", "us", submitUs, "null ioctl",
	          "us", nullA, "bench's own queue, no runtime; N submits, one wait");
	addFigure("launch", "raw SUBMIT (fill 256 B), one on an idle engine", "us", idleUs,
	          "null ioctl", "us", nullB, "median of calls, less one clock read");

	Goal g;
	g.text = "amortised enqueue per async op <= 1 null ioctl (memset 256 B, 1 stream)";
	g.value = ratioStats(enqueueMemset1, null1);
	g.measured = "enqueue / null ioctl";
	g.atLeast = false;
	g.target = 1.0;
	g.bound = "one SUBMIT ioctl alone costs " + fmt(stats(idleUs).median) +
	          " us = " + fmt(ratioStats(idleUs, nullB).median) +
	          " null ioctls on an idle engine, " + fmt(stats(submitUs).median) +
	          " us = " + fmt(ratioStats(submitUs, nullA).median) +
	          " null ioctls amortised over N; the runtime's enqueue is " +
	          fmt(ratioStats(enqueueMemset1, submitUs).median) + "x the bare SUBMIT (" +
	          fmt(stats(sited).median) + " us with the call site given)";
	addGoal(g);
}

void benchLatency(const Options &o)
{
	nullIoctl(o);
	const int k = o.quick ? 50 : 300;
	const int nNull = o.quick ? 1000 : 4000;
	Tiny tiny;
	RawQueue raw;
	npurtStream_t s = tiny.streams[0];

	std::vector<double> clk = repeat(o.runs, clockUs);
	std::string clocksource = "?";
	if (FILE *f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource",
	                         "r")) {
		char buf[64] = "";
		if (std::fgets(buf, sizeof(buf), f))
			clocksource = std::string(buf, std::strcspn(buf, "\n"));
		std::fclose(f);
	}
	addFigure("limits", "clock_gettime(CLOCK_MONOTONIC)", "us", clk,
	          "clocksource " + clocksource + "; subtracted from per-call timings");
	double clkUs = stats(clk).median;

	// Latencies are timed per call (less one clock read) and each run
	// gives the median of its k calls: the host's scheduler delays a few
	// wakeups by milliseconds, which a mean would let dominate.
	auto median = [](std::vector<double> &v) { return stats(v).median; };
	// Per run: a null-ioctl sample, then `body` k times.
	auto perIter = [&](const std::function<void()> &body, std::vector<double> *nullUs) {
		nullUs->clear();
		return repeat(o.runs, [&] {
			nullUs->push_back(raw.nullUs(nNull));
			std::vector<double> t(static_cast<size_t>(k));
			for (auto &x : t) {
				double t0 = now();
				body();
				x = (now() - t0) * 1e6 - clkUs;
			}
			return median(t);
		});
	};
	// Launch to completion: the enqueue call and the sync call.
	struct Split {
		std::vector<double> total, enqueue, sync, nullUs;
	};
	auto launch = [&](bool add) {
		Split sp;
		for (int r = 0; r < o.runs; r++) {
			sp.nullUs.push_back(raw.nullUs(nNull));
			std::vector<double> e, w, t;
			for (int i = 0; i < k; i++) {
				double t0 = now();
				if (add)
					tiny.add(s);
				else
					tiny.memset(s);
				double t1 = now();
				check(npurtStreamSynchronize(s), "stream synchronize");
				double t2 = now();
				e.push_back((t1 - t0) * 1e6 - clkUs);
				w.push_back((t2 - t1) * 1e6 - clkUs);
				t.push_back((t2 - t0) * 1e6 - clkUs);
			}
			sp.total.push_back(median(t));
			sp.enqueue.push_back(median(e));
			sp.sync.push_back(median(w));
		}
		return sp;
	};
	Split ms = launch(false);
	size_t li = addFigure("latency", "memset 256 B launch->completion (idle)", "us", ms.total,
	                      "null ioctl", "us", ms.nullUs,
	                      "enqueue + npurtStreamSynchronize; median of calls");
	addFigure("latency", "  of which the enqueue call", "us", ms.enqueue, "null ioctl", "us",
	          ms.nullUs);
	addFigure("latency", "  of which npurtStreamSynchronize", "us", ms.sync, "null ioctl", "us",
	          ms.nullUs);
	// The same with every guest CPU kept out of its idle loop by a
	// SCHED_IDLE spinner (which yields to any other thread): shows how much
	// of the latency is waking idle CPUs.
	Split busy;
	{
		std::atomic<bool> stop{false};
		std::vector<std::thread> spinners;
		long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
		for (long i = 0; i < cpus; i++)
			spinners.emplace_back([&stop] {
				sched_param p{};
				pthread_setschedparam(pthread_self(), SCHED_IDLE, &p);
				while (!stop.load(std::memory_order_relaxed))
					;
			});
		busy = launch(false);
		stop = true;
		for (auto &t : spinners)
			t.join();
	}
	addFigure("latency", "memset 256 B launch->completion, CPUs kept busy", "us", busy.total,
	          "null ioctl", "us", busy.nullUs, "SCHED_IDLE spinner on every guest CPU");
	Split as = launch(true);
	addFigure("latency", "add f32 x64 launch->completion (idle)", "us", as.total, "null ioctl",
	          "us", as.nullUs, "compute engine");

	npurtEvent_t ev = nullptr, evt = nullptr;
	check(npurtEventCreate(&ev), "event create");
	check(npurtEventCreateWithFlags(&evt, npurtEventTiming), "event create");
	std::vector<double> nu;
	std::vector<double> v = perIter(
	        [&] {
		        check(npurtEventRecord(ev, s), "event record");
		        check(npurtEventSynchronize(ev), "event synchronize");
	        },
	        &nu);
	addFigure("latency", "event record + synchronize (idle stream)", "us", v, "null ioctl",
	          "us", nu, "no device work");
	v = perIter(
	        [&] {
		        check(npurtEventRecord(evt, s), "event record");
		        check(npurtEventSynchronize(evt), "event synchronize");
	        },
	        &nu);
	addFigure("latency", "timing event record + synchronize (idle)", "us", v, "null ioctl",
	          "us", nu, "one timestamp job");
	v = perIter([&] { check(npurtStreamSynchronize(s), "stream synchronize"); }, &nu);
	addFigure("latency", "stream synchronize (idle stream)", "us", v, "null ioctl", "us", nu);
	check(npurtEventDestroy(ev), "event destroy");
	check(npurtEventDestroy(evt), "event destroy");

	// The kernel alone: submit the same fill on the bench's own queue and
	// wait for its point.
	Split rs;
	for (int r = 0; r < o.runs; r++) {
		rs.nullUs.push_back(raw.nullUs(nNull));
		std::vector<double> a, b, t;
		for (int i = 0; i < k; i++) {
			double t0 = now();
			uint64_t p = raw.submitFill();
			double t1 = now();
			raw.dev.wait(raw.q, p);
			double t2 = now();
			a.push_back((t1 - t0) * 1e6 - clkUs);
			b.push_back((t2 - t1) * 1e6 - clkUs);
			t.push_back((t2 - t0) * 1e6 - clkUs);
		}
		rs.total.push_back(median(t));
		rs.enqueue.push_back(median(a));
		rs.sync.push_back(median(b));
	}
	addFigure("latency", "raw fill 256 B submit+wait (own queue)", "us", rs.total, "null ioctl",
	          "us", rs.nullUs, "the kernel's floor, no runtime");
	addFigure("latency", "  of which DRM_IOCTL_NPU_SUBMIT", "us", rs.enqueue, "null ioctl",
	          "us", rs.nullUs);
	addFigure("latency", "  of which DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT", "us", rs.sync,
	          "null ioctl", "us", rs.nullUs);

	// Where the kernel's time goes: a job [timestamp, fill, timestamp]. The
	// device clock is CLOCK_MONOTONIC_RAW from an unknown base; the base is
	// found by spinning on the timestamp until it lands (the smallest
	// host-time-seen minus device-time, over many tries).
	auto stampedJob = [&] {
		struct {
			drm_npu_pkt_timestamp t0;
			drm_npu_pkt_fill f;
			drm_npu_pkt_timestamp t1;
		} job{raw.stamp(0), raw.fillPacket(), raw.stamp(1)};
		raw.slots[0] = 0;
		raw.slots[1] = 0;
		return raw.dev.submit(raw.q, &job, sizeof(job));
	};
	int64_t base = INT64_MAX;
	for (int i = 0; i < (o.quick ? 50 : 200); i++) {
		uint64_t p = stampedJob();
		uint64_t give = rawClockNs() + 5000000000ull;
		while (!raw.slots[1] && rawClockNs() < give)
			;
		if (!raw.slots[1])
			fail("a timestamp job did not run within 5 s");
		uint64_t seen = rawClockNs();
		base = std::min(base, static_cast<int64_t>(seen - raw.slots[1]));
		raw.dev.wait(raw.q, p);
	}
	Split ks;
	std::vector<double> run;
	for (int r = 0; r < o.runs; r++) {
		ks.nullUs.push_back(raw.nullUs(nNull));
		std::vector<double> a, b, c, t;
		for (int i = 0; i < k; i++) {
			auto h0 = static_cast<int64_t>(rawClockNs());
			uint64_t p = stampedJob();
			raw.dev.wait(raw.q, p);
			auto h2 = static_cast<int64_t>(rawClockNs());
			int64_t s0 = static_cast<int64_t>(raw.slots[0]) + base;
			int64_t s1 = static_cast<int64_t>(raw.slots[1]) + base;
			a.push_back(static_cast<double>(s0 - h0) * 1e-3);
			b.push_back(static_cast<double>(s1 - s0) * 1e-3);
			c.push_back(static_cast<double>(h2 - s1) * 1e-3);
			t.push_back(static_cast<double>(h2 - h0) * 1e-3);
		}
		ks.enqueue.push_back(median(a));
		run.push_back(median(b));
		ks.sync.push_back(median(c));
		ks.total.push_back(median(t));
	}
	addFigure("latency", "raw job [stamp, fill, stamp] submit+wait", "us", ks.total,
	          "null ioctl", "us", ks.nullUs, "split below by device timestamps");
	addFigure("latency", "raw job: submit call -> job starts on engine", "us", ks.enqueue,
	          "null ioctl", "us", ks.nullUs, "SUBMIT + scheduler + workqueue dispatch");
	addFigure("latency", "raw job: job runs (fill 256 B)", "us", run, "null ioctl", "us",
	          ks.nullUs, "device timestamps");
	addFigure("latency", "raw job: job ends -> waiter returns", "us", ks.sync, "null ioctl",
	          "us", ks.nullUs, "fence signal + wakeup + return");

	Goal g;
	g.text = "idle launch->completion <= 10 null ioctls (memset 256 B)";
	g.value = figures()[li].ratio;
	g.measured = "launch->completion / null ioctl";
	g.atLeast = false;
	g.target = 10;
	g.bound = "kernel alone (raw stamped job, submit+wait) " + fmt(stats(ks.total).median) +
	          " us = " + fmt(ratioStats(ks.total, ks.nullUs).median) +
	          " null ioctls: submit call->job start " + fmt(stats(ks.enqueue).median) +
	          " us, job " + fmt(stats(run).median) + " us, job end->waiter back " +
	          fmt(stats(ks.sync).median) + " us. Runtime vs kernel: enqueue " +
	          fmt(stats(ms.enqueue).median) + " vs SUBMIT " + fmt(stats(rs.enqueue).median) +
	          " us, synchronize " + fmt(stats(ms.sync).median) + " vs wait " +
	          fmt(stats(rs.sync).median) + " us. A clock read costs " + fmt(clkUs) + " us (" +
	          clocksource + ")";
	addGoal(g);
}

}  // namespace bench

// Graphs (stream capture, npurtGraphLaunch): the amortised launch cost of a
// replayed 100-op graph against the null ioctl and against the same ops
// launched one by one, and a graph's idle launch to completion against 10
// ops launched separately.
//
// Two graphs of 100 tiny ops captured on one stream: adds only (one engine
// class: one job per launch), and memsets and adds alternating (a change of
// engine class at every op).
//
// The emulated device runs on the guest's CPUs, so while it executes the
// replayed graphs it takes CPU time from the launching thread: the launch
// cost is also measured with the device held (the driver's injected job
// latency keeps the first job asleep until the launches are queued), which
// is what the launching thread costs on a device of its own.
//
// Every figure's null-ioctl limit is sampled right before the figure's own
// sample in the same run, so that both see the same load on the machine.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "bench.h"
#include "raw.h"

namespace bench {
namespace {

constexpr size_t kTiny = 256;  // bytes of a tiny memset
constexpr uint64_t kTinyAdd = 64;  // floats of a tiny add
constexpr int kGraphOps = 100;  // ops of a graph
constexpr int kSeparateOps = 10;  // ops of the launch->completion reference

// Device buffers and the stream the tiny ops use.
struct Tiny {
	void *fill = nullptr;
	float *a = nullptr, *b = nullptr, *out = nullptr;
	npurtStream_t stream = nullptr;

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
		check(npurtStreamCreate(&stream), "stream create");
		// First use creates the stream's kernel queues.
		memset();
		add();
		check(npurtStreamSynchronize(stream), "stream synchronize");
	}
	~Tiny()
	{
		check(npurtStreamDestroy(stream), "stream destroy");
		check(npurtFree(fill), "free");
		check(npurtFree(a), "free");
		check(npurtFree(b), "free");
		check(npurtFree(out), "free");
	}
	Tiny(const Tiny &) = delete;
	Tiny &operator=(const Tiny &) = delete;

	void memset() { check(npurtMemsetAsync(fill, 0, kTiny, stream), "memset async"); }
	void add()
	{
		npurtOpDesc d{};
		d.op = npurtOpAdd;
		d.dtype = npurtFloat32;
		d.outDtype = npurtFloat32;
		d.a = a;
		d.b = b;
		d.out = out;
		d.n = kTinyAdd;
		check(npurtLaunchOp(&d, stream), "launch op");
	}
	// Op i of a graph's sequence: an add, or memsets and adds alternating.
	void op(bool mixed, int i)
	{
		if (mixed && i % 2 == 0)
			memset();
		else
			add();
	}
	void sync() { check(npurtStreamSynchronize(stream), "stream synchronize"); }
};

// An executable graph of kGraphOps ops captured on the tiny ops' stream.
struct Graph {
	npurtGraphExec_t exec = nullptr;

	Graph(Tiny &tiny, bool mixed)
	{
		npurtGraph_t g = nullptr;
		check(npurtStreamBeginCapture(tiny.stream, npurtStreamCaptureModeGlobal),
		      "stream begin capture");
		for (int i = 0; i < kGraphOps; i++)
			tiny.op(mixed, i);
		check(npurtStreamEndCapture(tiny.stream, &g), "stream end capture");
		size_t nodes = 0;
		check(npurtGraphGetNodes(g, nullptr, &nodes), "graph get nodes");
		if (nodes != kGraphOps)
			fail("the captured graph has " + std::to_string(nodes) + " nodes, not " +
			     std::to_string(kGraphOps));
		check(npurtGraphInstantiate(&exec, g, 0), "graph instantiate");
		check(npurtGraphDestroy(g), "graph destroy");
		// The first launch, untimed.
		launch(tiny.stream);
		tiny.sync();
	}
	~Graph() { check(npurtGraphExecDestroy(exec), "graph exec destroy"); }
	Graph(const Graph &) = delete;
	Graph &operator=(const Graph &) = delete;

	void launch(npurtStream_t s) { check(npurtGraphLaunch(exec, s), "graph launch"); }
};

// Holds the device's jobs (inject_latency_us, needs root and debugfs):
// false if it cannot.
bool holdDevice(unsigned long us)
{
	npurtDeviceProp p{};
	if (npurtGetDeviceProperties(&p, 0) != npurtSuccess) {
		npurtGetLastError();
		return false;
	}
	std::string knob = std::string(p.debugfsPath) + "/inject_latency_us";
	if (!p.debugfsPath[0] || access(knob.c_str(), W_OK))
		return false;
	std::ofstream f(knob);
	f << us << "\n";
	f.flush();
	return f.good();
}

// The profiled tasks of the kinds: their device time summed, and their span
// (first start to last end), microseconds.
struct DeviceTime {
	double busy = 0, span = 0;
};
DeviceTime deviceTime(std::initializer_list<const char *> kinds)
{
	DeviceTime t;
	double first = INFINITY, last = -INFINITY;
	for (const char *kind : kinds)
		for (const Span &s : profiledSpans(kind)) {
			t.busy += s.dur;
			first = std::min(first, s.start);
			last = std::max(last, s.start + s.dur);
		}
	t.span = last >= first ? last - first : std::nan("");
	return t;
}

}  // namespace

void benchGraph(const Options &o)
{
	nullIoctl(o);
	const int launches = o.quick ? 20 : 100;  // replays of a graph per run
	const int k = o.quick ? 50 : 300;  // launch->completion calls per run
	const int nNull = o.quick ? 1000 : 4000;
	Tiny tiny;
	RawDevice dev;
	const double clkUs = stats(repeat(3, clockUs)).median;
	auto median = [](std::vector<double> &v) { return stats(v).median; };

	struct Kind {
		const char *name;  // of the ops
		const char *tag;  // of the goals
		bool mixed;
	};
	for (Kind kind : {Kind{"add f32 x64", "adds", false},
	                  Kind{"memset/add alternating", "memsets and adds alternating", true}}) {
		Graph graph(tiny, kind.mixed);
		// A launch of the alternating graph is 100 jobs: more than the
		// queue holds (2048) would block the launches until the held
		// device had run jobs, each 200 ms late while the knob is set.
		const int heldLaunches = kind.mixed ? std::min(launches, 10) : launches;
		const std::string what =
		        std::to_string(kGraphOps) + "-op graph (" + kind.name + ")";
		const std::string one = std::to_string(kGraphOps) + " ops (" + kind.name + ")";

		// Replays: `launches` launches back to back, then one wait; the
		// same ops launched one by one as many times.
		std::vector<double> replay, replayNull, replayCall, replaySlow, separate,
		        separateNull, held, heldNull;
		for (int r = 0; r < o.runs; r++) {
			// The device held: the first job sleeps 200 ms (the knob is
			// read when a job starts), the launches queue behind it.
			heldNull.push_back(dev.nullUs(nNull));
			if (holdDevice(200000)) {
				double t0 = now();
				for (int i = 0; i < heldLaunches; i++)
					graph.launch(tiny.stream);
				double t1 = now();
				holdDevice(0);
				tiny.sync();
				held.push_back((t1 - t0) / (heldLaunches * kGraphOps) * 1e6);
			}

			replayNull.push_back(dev.nullUs(nNull));
			std::vector<double> calls(static_cast<size_t>(launches));
			double total = 0;
			for (auto &c : calls) {
				double t0 = now();
				graph.launch(tiny.stream);
				c = now() - t0;
				total += c;
			}
			tiny.sync();
			replay.push_back(total / (launches * kGraphOps) * 1e6);
			std::sort(calls.begin(), calls.end());
			replayCall.push_back((median(calls) * 1e6 - clkUs) / kGraphOps);
			// The share of the time the slowest tenth of the calls take.
			double slow = 0;
			for (size_t i = calls.size() - calls.size() / 10; i < calls.size(); i++)
				slow += calls[i];
			replaySlow.push_back(slow / total * 100);

			separateNull.push_back(dev.nullUs(nNull));
			double t0 = now();
			for (int i = 0; i < launches; i++)
				for (int j = 0; j < kGraphOps; j++)
					tiny.op(kind.mixed, j);
			double t1 = now();
			tiny.sync();
			separate.push_back((t1 - t0) / (launches * kGraphOps) * 1e6);
		}
		size_t ri = addFigure("graph", what + ": launch per op, replayed", "us", replay,
		                      "null ioctl", "us", replayNull,
		                      "time in npurtGraphLaunch / (launches x " +
		                              std::to_string(kGraphOps) +
		                              "); the device runs meanwhile");
		size_t hi = held.empty()
		                    ? ri
		                    : addFigure("graph",
		                                what + ": launch per op, replayed, device held",
		                                "us", held, "null ioctl", "us", heldNull,
		                                "the same while the device is held (its emulation "
		                                "does not take the launching thread's CPU)");
		addFigure("graph", "  median launch call, replayed, per op", "us", replayCall,
		          "null ioctl", "us", replayNull,
		          "median of the calls / " + std::to_string(kGraphOps));
		addFigure("graph", "  slowest tenth of the launch calls, replayed", "%", replaySlow,
		          "their share of the time in npurtGraphLaunch");
		addFigure("graph", one + " one by one: enqueue per op", "us", separate,
		          "null ioctl", "us", separateNull, "time in the enqueue calls / N");
		addFigure("graph", what + ": launch per op / one by one", "us", replay,
		          "one by one, per op", "us", separate);

		// Launch to completion on an idle device: the graph, and 10 ops
		// launched separately, one after the other in each run; each
		// call timed less one clock read, the median of the calls.
		struct Split {
			std::vector<double> total, launch, sync, nullUs;
		};
		Split gs, ss;
		std::vector<double> graphBusy, graphSpan, separateBusy;
		for (int r = 0; r < o.runs; r++) {
			double nu = dev.nullUs(nNull);
			gs.nullUs.push_back(nu);
			ss.nullUs.push_back(nu);
			std::vector<double> gl, gw, gt, sl, sw, st;
			for (int i = 0; i < k; i++) {
				double t0 = now();
				graph.launch(tiny.stream);
				double t1 = now();
				tiny.sync();
				double t2 = now();
				gl.push_back((t1 - t0) * 1e6 - clkUs);
				gw.push_back((t2 - t1) * 1e6 - clkUs);
				gt.push_back((t2 - t0) * 1e6 - clkUs);

				t0 = now();
				for (int j = 0; j < kSeparateOps; j++)
					tiny.op(kind.mixed, j);
				t1 = now();
				tiny.sync();
				t2 = now();
				sl.push_back((t1 - t0) * 1e6 - clkUs);
				sw.push_back((t2 - t1) * 1e6 - clkUs);
				st.push_back((t2 - t0) * 1e6 - clkUs);
			}
			gs.total.push_back(median(gt));
			gs.launch.push_back(median(gl));
			gs.sync.push_back(median(gw));
			ss.total.push_back(median(st));
			ss.launch.push_back(median(sl));
			ss.sync.push_back(median(sw));

			// Where the device's time goes: the tasks' timestamps,
			// profiled (each task then carries two timestamp packets).
			check(npurtProfilerStart(), "profiler start");
			graph.launch(tiny.stream);
			tiny.sync();
			DeviceTime dt =
			        kind.mixed ? deviceTime({"fill", "add"}) : deviceTime({"add"});
			graphBusy.push_back(dt.busy);
			graphSpan.push_back(dt.span);
			check(npurtProfilerStart(), "profiler start");
			for (int j = 0; j < kSeparateOps; j++)
				tiny.op(kind.mixed, j);
			tiny.sync();
			dt = kind.mixed ? deviceTime({"fill", "add"}) : deviceTime({"add"});
			separateBusy.push_back(dt.busy);
			check(npurtProfilerStop(), "profiler stop");
		}
		const std::string ten = std::to_string(kSeparateOps) + " ops (" + kind.name + ")";
		addFigure("graph", what + " launch->completion (idle)", "us", gs.total,
		          "null ioctl", "us", gs.nullUs,
		          "npurtGraphLaunch + npurtStreamSynchronize; median of calls");
		addFigure("graph", "  of which npurtGraphLaunch", "us", gs.launch, "null ioctl",
		          "us", gs.nullUs);
		addFigure("graph", "  of which npurtStreamSynchronize", "us", gs.sync, "null ioctl",
		          "us", gs.nullUs);
		addFigure("graph", ten + " launched separately ->completion", "us", ss.total,
		          "null ioctl", "us", ss.nullUs,
		          std::to_string(kSeparateOps) + " enqueues + npurtStreamSynchronize");
		addFigure("graph", "  of which the enqueue calls", "us", ss.launch, "null ioctl",
		          "us", ss.nullUs);
		addFigure("graph", "  of which npurtStreamSynchronize", "us", ss.sync, "null ioctl",
		          "us", ss.nullUs);
		size_t li = addFigure("graph",
		                      what + " / " + std::to_string(kSeparateOps) +
		                              " separate ops, launch->completion",
		                      "us", gs.total, "separate ops ->completion", "us", ss.total);
		addFigure("graph", what + ": device time of its tasks", "us", graphBusy,
		          "separate ops ->completion", "us", ss.total,
		          "profiled, summed: the floor of the ratio above");
		addFigure("graph", what + ": device span of its tasks", "us", graphSpan,
		          "null ioctl", "us", gs.nullUs,
		          "profiled, first task start -> last task end");
		addFigure("graph", ten + ": device time of the tasks", "us", separateBusy,
		          "null ioctl", "us", ss.nullUs, "profiled, summed");

		// The goals are for the graph of one engine class; the alternating
		// one shows what a change of engine class at every op costs.
		if (kind.mixed)
			continue;
		Goal g;
		g.text = "amortised graph launch per op <= 0.05 null ioctls (" +
		         std::to_string(kGraphOps) + " tiny " + kind.tag + ", replayed" +
		         (held.empty() ? ")" : ", device held)");
		g.value = figures()[hi].ratio;
		g.measured = "launch per op / null ioctl";
		g.atLeast = false;
		g.target = 0.05;
		g.bound = "one npurtGraphLaunch costs " +
		          (held.empty() ? std::string("")
		                        : fmt(stats(held).median * kGraphOps) +
		                                  " us with the device held, ") +
		          fmt(stats(replay).median * kGraphOps) +
		          " us replayed as it runs (median call " +
		          fmt(stats(replayCall).median * kGraphOps) +
		          " us; the slowest tenth of the calls take " +
		          fmt(stats(replaySlow).median) + "% of the time), " +
		          fmt(stats(gs.launch).median) +
		          " us on an idle device; the ops one by one cost " +
		          fmt(stats(separate).median) +
		          " us = " + fmt(ratioStats(separate, separateNull).median) +
		          " null ioctls per op; the graph is " +
		          fmt(ratioStats(replay, separate).median) + "x that per op";
		addGoal(g);

		g = Goal{};
		g.text = "idle graph launch->completion <= " + std::to_string(kSeparateOps) +
		         " separate launches' (" + std::to_string(kGraphOps) + " against " +
		         std::to_string(kSeparateOps) + " tiny " + kind.tag + ")";
		g.value = figures()[li].ratio;
		g.measured = "graph / separate ops, launch->completion";
		g.atLeast = false;
		g.target = 1;
		g.bound = "graph: npurtGraphLaunch " + fmt(stats(gs.launch).median) +
		          " us, synchronize " + fmt(stats(gs.sync).median) + " us; its tasks run " +
		          fmt(stats(graphBusy).median) + " us on the device (profiled) = " +
		          fmt(ratioStats(graphBusy, ss.total).median) + "x the separate ops' " +
		          "launch->completion; " + std::to_string(kSeparateOps) +
		          " separate ops: enqueues " + fmt(stats(ss.launch).median) +
		          " us, synchronize " + fmt(stats(ss.sync).median) + " us, tasks " +
		          fmt(stats(separateBusy).median) + " us; launch->completion " +
		          fmt(stats(gs.total).median) + " against " + fmt(stats(ss.total).median) +
		          " us";
		addGoal(g);
	}
}

}  // namespace bench

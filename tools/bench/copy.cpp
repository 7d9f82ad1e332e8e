// Copy bandwidth: host to device and device to host, from pageable,
// pinned and registered memory, synchronous and asynchronous, each against
// the guest's memcpy of the same size measured in the same runs.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "bench.h"

namespace bench {
namespace {

enum class Mem { Pageable, Pinned, Registered };

const char *memName(Mem m)
{
	switch (m) {
	case Mem::Pageable:
		return "pageable";
	case Mem::Pinned:
		return "pinned";
	default:
		return "registered";
	}
}

struct Variant {
	Mem mem;
	bool h2d;
	bool async;
	std::string label() const
	{
		return std::string(memName(mem)) + (async ? " async" : " sync");
	}
	std::string key() const { return std::string(h2d ? "H2D " : "D2H ") + label(); }
};

// A page-aligned, page-rounded malloc'd buffer, touched so that every
// page is present.
struct HostBuffer {
	char *p = nullptr;
	explicit HostBuffer(size_t size)
	{
		size_t bytes = (size + 4095) & ~static_cast<size_t>(4095);
		p = static_cast<char *>(std::aligned_alloc(4096, bytes));
		if (!p)
			fail("out of host memory for a " + sizeName(size) + " buffer");
		std::memset(p, 0x5a, bytes);
	}
	~HostBuffer() { std::free(p); }
	HostBuffer(const HostBuffer &) = delete;
	HostBuffer &operator=(const HostBuffer &) = delete;
};

// Keeps the compiler from dropping or merging copies.
inline void clobber()
{
	asm volatile("" ::: "memory");
}

struct Sample {
	double seconds = 0;  // per copy
	double cpu = 0;  // process CPU seconds per copy
};

// Repetitions that make one sample last about `target` seconds, from one
// timed call of `once` after a warm-up call.
int calibrate(const std::function<void()> &once, double target, int cap)
{
	once();
	double t0 = now();
	once();
	double t = std::max(now() - t0, 1e-7);
	return static_cast<int>(std::clamp(std::ceil(target / t), 1.0, static_cast<double>(cap)));
}

}  // namespace

void benchCopy(const Options &o)
{
	std::vector<size_t> sizes;
	for (size_t s = 4 * KiB; s <= o.maxSize; s *= 4)
		sizes.push_back(s);
	const double target = o.quick ? 0.01 : 0.04;
	const int cap = o.quick ? 2000 : 20000;

	npurtStream_t stream = nullptr;
	check(npurtStreamCreate(&stream), "stream create");

	std::vector<Variant> variants;
	for (Mem m : {Mem::Pageable, Mem::Pinned, Mem::Registered})
		for (bool h2d : {true, false})
			for (bool async : {true, false})
				variants.push_back({m, h2d, async});

	// For the goals: worst pinned/memcpy and pageable/pinned at >= 1 MiB.
	struct Worst {
		double value = 1e300;
		Stats stats;
		std::string where;
	} worstPinned, worstPageable;
	size_t largest = sizes.empty() ? 0 : sizes.back();
	// Profiled splits per direction and size (key "H2D 1 MiB").
	struct Split {
		Stats engineRatio, pinWall, pinEngine, pinGap, wall, engine, stage;
		size_t chunk = 0, chunks = 0;
	};
	std::map<std::string, Split> splits;

	for (size_t size : sizes) {
		void *dev = nullptr, *pinned = nullptr;
		check(npurtMalloc(&dev, size), "malloc");
		check(npurtMallocHost(&pinned, size), "malloc host");
		std::memset(pinned, 0x5a, size);
		HostBuffer page(size), ref(size);
		check(npurtMemset(dev, 0, size), "memset");

		auto copyOnce = [&](void *host, bool h2d, bool async) {
			void *dst = h2d ? dev : host;
			const void *src = h2d ? host : dev;
			npurtMemcpyKind kind =
			        h2d ? npurtMemcpyHostToDevice : npurtMemcpyDeviceToHost;
			if (async)
				check(npurtMemcpyAsync(dst, src, size, kind, stream),
				      "memcpy async");
			else
				check(npurtMemcpy(dst, src, size, kind), "memcpy");
		};
		auto hostOf = [&](Mem m) -> void * { return m == Mem::Pinned ? pinned : page.p; };
		auto run = [&](const Variant &v, int reps) {
			void *host = hostOf(v.mem);
			double c0 = cpuSeconds(), t0 = now();
			for (int i = 0; i < reps; i++)
				copyOnce(host, v.h2d, v.async);
			if (v.async)
				check(npurtStreamSynchronize(stream), "stream synchronize");
			double t = now() - t0, c = cpuSeconds() - c0;
			return Sample{t / reps, c / reps};
		};
		auto memcpyRun = [&](int reps) {
			double c0 = cpuSeconds(), t0 = now();
			for (int i = 0; i < reps; i++) {
				std::memcpy(ref.p, page.p, size);
				clobber();
			}
			double t = now() - t0, c = cpuSeconds() - c0;
			return Sample{t / reps, c / reps};
		};

		// Repetitions per variant, calibrated once per size.
		int memcpyReps = calibrate([&] { memcpyRun(1); }, target, cap * 10);
		std::map<std::string, int> reps;
		auto registered = [&](bool on) {
			if (on)
				check(npurtHostRegister(page.p, size, npurtHostRegisterDefault),
				      "host register");
			else
				check(npurtHostUnregister(page.p), "host unregister");
		};
		// Asynchronous copies of 1 MiB and more move at least 32 MiB per
		// sample, so that the launch latency of the first copy and the
		// wakeup after the last do not hide the engine's bandwidth.
		const int minAsync = size >= MiB ? static_cast<int>(32 * MiB / size) : 1;
		for (const auto &v : variants) {
			if (v.mem == Mem::Registered)
				registered(true);
			reps[v.key()] = calibrate([&] { run(v, 1); }, target, cap);
			if (v.async)
				reps[v.key()] = std::max(reps[v.key()], minAsync);
			if (v.mem == Mem::Registered)
				registered(false);
		}

		// Each copy sample comes right after a memcpy sample of its own (the
		// pair sees the same load on the machine); the memcpy figure is the
		// first sample of each run.
		std::vector<double> memcpyGbps, memcpyCpu;
		std::map<std::string, std::vector<double>> gbps, cpuPerGiB, cpuPct, limit;
		const int pairReps = std::max(1, memcpyReps / 2);
		for (int r = 0; r < o.runs; r++) {
			Sample m = memcpyRun(memcpyReps);
			memcpyGbps.push_back(size / m.seconds * 1e-9);
			memcpyCpu.push_back(m.cpu / (static_cast<double>(size) / GiB) * 1e3);
			bool isRegistered = false;
			for (const auto &v : variants) {
				if ((v.mem == Mem::Registered) != isRegistered) {
					isRegistered = !isRegistered;
					registered(isRegistered);
				}
				limit[v.key()].push_back(size / memcpyRun(pairReps).seconds * 1e-9);
				Sample s = run(v, reps[v.key()]);
				gbps[v.key()].push_back(size / s.seconds * 1e-9);
				cpuPerGiB[v.key()].push_back(
				        s.cpu / (static_cast<double>(size) / GiB) * 1e3);
				cpuPct[v.key()].push_back(100.0 * s.cpu / s.seconds);
			}
			if (isRegistered)
				registered(false);
		}

		std::string sz = sizeName(size);
		addFigure("copy", "memcpy (guest) " + sz, "GB/s", memcpyGbps,
		          "the limit of the copies of this size");
		for (bool h2d : {true, false})
			addPlotPoint({h2d, "memcpy", size, stats(memcpyGbps)});
		for (const auto &v : variants) {
			const auto &g = gbps[v.key()];
			addFigure("copy", v.key() + " " + sz, "GB/s", g, "memcpy " + sz, "GB/s",
			          limit[v.key()]);
			addPlotPoint({v.h2d, v.label(), size, stats(g)});
		}
		// Pageable against pinned, and the goals' worst cases (async: the
		// measure of engine bandwidth).
		for (bool h2d : {true, false}) {
			std::string dir = h2d ? "H2D " : "D2H ";
			const auto &pin = gbps[dir + "pinned async"];
			const auto &pag = gbps[dir + "pageable async"];
			if (size >= MiB) {
				size_t i =
				        addFigure("copy", join({dir, "pageable/pinned async ", sz}),
				                  "GB/s", pag, "pinned async " + sz, "GB/s", pin);
				Stats r = figures()[i].ratio;
				if (r.median < worstPageable.value)
					worstPageable = {r.median, r, dir + sz};
				Stats p = ratioStats(pin, limit[dir + "pinned async"]);
				if (p.median < worstPinned.value)
					worstPinned = {p.median, p, dir + sz};
			}
		}
		// CPU time the host spends per copied GiB (against memcpy's own),
		// and CPU use during the transfer, at the largest size.
		if (size == largest) {
			addFigure("copy", "memcpy CPU time per GiB " + sz, "ms", memcpyCpu);
			for (const auto &v : variants) {
				if (!v.async)
					continue;
				addFigure("copy", v.key() + " CPU time per GiB " + sz, "ms",
				          cpuPerGiB[v.key()], "memcpy CPU per GiB", "ms",
				          memcpyCpu);
				addFigure("copy", v.key() + " CPU use " + sz, "%", cpuPct[v.key()]);
			}
		}

		// Profiled runs (device timestamps around every job) at sizes from
		// 1 MiB: how much of a pinned copy is engine time, and how a
		// pageable copy (from 1 MiB the runtime pins its pages for the copy
		// and the engine moves them directly) splits between pinning the
		// pages and the engine's copy. Shown at 1 MiB and the largest size,
		// kept for the goals' worst cases.
		if (size >= MiB) {
			for (bool h2d : {true, false}) {
				std::string dir = h2d ? "H2D " : "D2H ";
				Variant pinV{Mem::Pinned, h2d, true},
				        pagV{Mem::Pageable, h2d, true};
				std::vector<double> engineGbps, engineLimit, pinWall, pinEngine,
				        pinGap, wallChunk, engineChunk, stageChunk;
				size_t chunk = 0;
				for (int r = 0; r < o.runs; r++) {
					engineLimit.push_back(size / memcpyRun(pairReps).seconds *
					                      1e-9);
					check(npurtProfilerStart(), "profiler start");
					int n = std::max(reps[pinV.key()], 4);
					Sample ps = run(pinV, n);
					EngineTime e = profiledKind("copy");
					if (!e.tasks)
						fail("the profiler saw no copies");
					engineGbps.push_back(static_cast<double>(e.bytes) /
					                     e.seconds * 1e-9);
					pinWall.push_back(ps.seconds * 1e3);
					pinEngine.push_back(e.seconds /
					                    static_cast<double>(e.tasks) * 1e3);
					pinGap.push_back(medianGap(profiledSpans("copy")) * 1e-3);

					check(npurtProfilerStart(), "profiler start");
					Sample s = run(pagV, reps[pagV.key()]);
					s.seconds *= reps[pagV.key()];
					e = profiledKind("copy");
					check(npurtProfilerStop(), "profiler stop");
					if (!e.tasks)
						fail("the profiler saw no copies");
					chunk = e.bytes / e.tasks;
					// Pinning the pages of one chunk and unpinning them:
					// host registration does the same kernel work.
					const int k = 4;
					double t0 = now();
					for (int i = 0; i < k; i++) {
						check(npurtHostRegister(
						              page.p, chunk,
						              h2d ? npurtHostRegisterReadOnly
						                  : npurtHostRegisterDefault),
						      "host register");
						check(npurtHostUnregister(page.p),
						      "host unregister");
					}
					double stage = (now() - t0) / k;
					double eng = e.seconds / static_cast<double>(e.tasks);
					wallChunk.push_back(s.seconds /
					                    static_cast<double>(e.tasks) * 1e3);
					engineChunk.push_back(eng * 1e3);
					stageChunk.push_back(stage * 1e3);
				}
				Split sp;
				sp.engineRatio = ratioStats(engineGbps, engineLimit);
				sp.pinWall = stats(pinWall);
				sp.pinEngine = stats(pinEngine);
				sp.pinGap = stats(pinGap);
				sp.wall = stats(wallChunk);
				sp.engine = stats(engineChunk);
				sp.stage = stats(stageChunk);
				sp.chunk = chunk;
				sp.chunks = (size + chunk - 1) / chunk;
				splits[dir + sz] = sp;
				addFigure("copy", join({dir, "pinned async engine-only ", sz}),
				          "GB/s", engineGbps, "memcpy " + sz, "GB/s", engineLimit,
				          "bytes / device busy time (profiler timestamps)");
				if (size != MiB && size != largest)
					continue;
				addFigure("copy",
				          join({dir, "pinned async ", sz,
				                ": engine idle between copies"}),
				          "ms", pinGap, "engine time per copy", "ms", pinEngine,
				          "profiler trace: next start - previous end");
				std::string c = sizeName(chunk) + " chunk";
				addFigure("copy", join({dir, "pageable ", sz, ": wall per ", c}),
				          "ms", wallChunk, "engine copy", "ms", engineChunk,
				          "later copies of a range reuse its cached pin");
				addFigure("copy",
				          join({dir, "pageable ", sz, ": engine copy per ", c}),
				          "ms", engineChunk, "profiler: device time per copy job");
				addFigure(
				        "copy",
				        join({dir, "pageable ", sz, ": first pin + unpin per ", c}),
				        "ms", stageChunk,
				        "npurtHostRegister + npurtHostUnregister: what a range not "
				        "in the pin cache adds");
			}
		}

		check(npurtFreeHost(pinned), "free host");
		check(npurtFree(dev), "free");
	}
	check(npurtMemEmptyCache(), "empty cache");
	check(npurtStreamDestroy(stream), "stream destroy");

	if (worstPinned.stats.valid) {
		Goal g;
		g.text = "pinned copies >= 1 MiB >= 0.9 of guest memcpy (async, worst size)";
		g.value = worstPinned.stats;
		g.measured = "pinned/memcpy at " + worstPinned.where;
		g.atLeast = true;
		g.target = 0.9;
		auto it = splits.find(worstPinned.where);
		if (it != splits.end()) {
			const Split &sp = it->second;
			g.bound = "at " + worstPinned.where +
			          " the engine alone (device timestamps) runs at " +
			          fmt(sp.engineRatio.median) + " of memcpy; per copy " +
			          fmt(sp.pinWall.median) + " ms wall of which " +
			          fmt(sp.pinEngine.median) + " ms on the engine, which idles " +
			          fmt(sp.pinGap.median) +
			          " ms between consecutive copies (the next job's dispatch)";
		}
		addGoal(g);
	}
	if (worstPageable.stats.valid) {
		Goal g;
		g.text = "pageable >= 0.8 of pinned (async, >= 1 MiB, worst size)";
		g.value = worstPageable.stats;
		g.measured = "pageable/pinned at " + worstPageable.where;
		g.atLeast = true;
		g.target = 0.8;
		auto it = splits.find(worstPageable.where);
		if (it != splits.end()) {
			const Split &sp = it->second;
			g.bound = "at " + worstPageable.where + " (" + std::to_string(sp.chunks) +
			          " x " + sizeName(sp.chunk) + " jobs) each takes " +
			          fmt(sp.wall.median) + " ms: engine copy " +
			          fmt(sp.engine.median) + " ms + " +
			          fmt(sp.wall.median - sp.engine.median) +
			          " ms of submit, wait and pin-cache check (a range not in the "
			          "pin cache adds " +
			          fmt(sp.stage.median) + " ms of pinning and unpinning)";
		}
		addGoal(g);
	}
}

}  // namespace bench

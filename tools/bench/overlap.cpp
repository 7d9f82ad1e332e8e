// Overlap: big pinned host-to-device copies on one stream and GEMMs on
// another, each alone and then both at once. Then the same with the GEMMs
// in a second context (its own device address space), and the same
// experiment on the guest's CPUs, to show what bounds the overlap.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "bench.h"

namespace bench {
namespace {

// GEMM operands and a stream in the context current at construction.
struct Compute {
	void *a = nullptr, *b = nullptr, *c = nullptr;
	npurtStream_t stream = nullptr;
	npurtOpDesc gemm{};

	explicit Compute(uint64_t dim)
	{
		const size_t mat = dim * dim * 4;
		check(npurtMalloc(&a, mat), "malloc");
		check(npurtMalloc(&b, mat), "malloc");
		check(npurtMalloc(&c, mat), "malloc");
		check(npurtMemset(a, 0, mat), "memset");
		check(npurtMemset(b, 0, mat), "memset");
		check(npurtStreamCreate(&stream), "stream create");
		gemm.op = npurtOpGemm;
		gemm.dtype = npurtFloat32;
		gemm.outDtype = npurtFloat32;
		gemm.a = a;
		gemm.b = b;
		gemm.out = c;
		gemm.m = gemm.n = gemm.k = dim;
		gemm.alpha = 1.0f;
		gemm.beta = 0.0f;
	}
	// Call with the same context current as at construction.
	void release()
	{
		check(npurtStreamDestroy(stream), "stream destroy");
		check(npurtFree(a), "free");
		check(npurtFree(b), "free");
		check(npurtFree(c), "free");
	}
	void enqueue() const { check(npurtLaunchOp(&gemm, stream), "launch op"); }
};

double timed(const std::function<void()> &f)
{
	double t0 = now();
	f();
	return now() - t0;
}

}  // namespace

void benchOverlap(const Options &o)
{
	const size_t chunk = o.quick ? 4 * MiB : 16 * MiB;
	const int copies = 4;
	const uint64_t dim = 64;  // GEMM dim^3, f32: small, so that the count can match

	void *pinned = nullptr, *dev = nullptr;
	check(npurtMallocHost(&pinned, chunk), "malloc host");
	std::memset(pinned, 1, chunk);
	check(npurtMalloc(&dev, chunk * copies), "malloc");
	npurtStream_t copyStream = nullptr;
	check(npurtStreamCreate(&copyStream), "stream create");
	Compute same(dim);
	// The second context: created current, then the primary one again.
	npurtContext_t ctx2 = nullptr;
	check(npurtCtxCreate(&ctx2, 0, 0), "context create");
	Compute other(dim);
	check(npurtCtxSetCurrent(nullptr), "context set current");

	auto enqueueCopy = [&](int i) {
		check(npurtMemcpyAsync(static_cast<char *>(dev) + chunk * i, pinned, chunk,
		                       npurtMemcpyHostToDevice, copyStream),
		      "memcpy async");
	};
	auto copyAlone = [&] {
		return timed([&] {
			for (int i = 0; i < copies; i++)
				enqueueCopy(i);
			check(npurtStreamSynchronize(copyStream), "stream synchronize");
		});
	};
	auto computeAlone = [&](const Compute &k, int ops) {
		return timed([&] {
			for (int i = 0; i < ops; i++)
				k.enqueue();
			check(npurtStreamSynchronize(k.stream), "stream synchronize");
		});
	};
	// Both at once: the copies and the ops enqueued interleaved (the ops
	// spread evenly between the copies), then both streams synchronised.
	auto both = [&](const Compute &k, int ops) {
		return timed([&] {
			for (int i = 0, j = 0; i < copies || j < ops;) {
				if (i < copies && (j * copies >= i * ops || j >= ops)) {
					enqueueCopy(i++);
				} else {
					k.enqueue();
					j++;
				}
			}
			check(npurtStreamSynchronize(copyStream), "stream synchronize");
			check(npurtStreamSynchronize(k.stream), "stream synchronize");
		});
	};

	// Size the compute side to take about as long as the copies.
	copyAlone();
	computeAlone(same, 1);
	computeAlone(other, 1);
	double tCopy = copyAlone();
	double tOp = computeAlone(same, 3) / 3;
	int ops = std::max(2, static_cast<int>(std::lround(tCopy / tOp)));

	std::vector<double> copyT, computeT, bothT, serialT, floorT, otherT, otherSerialT;
	for (int r = 0; r < o.runs; r++) {
		double tc = copyAlone(), tk = computeAlone(same, ops), tb = both(same, ops);
		copyT.push_back(tc * 1e3);
		computeT.push_back(tk * 1e3);
		bothT.push_back(tb * 1e3);
		serialT.push_back((tc + tk) * 1e3);
		floorT.push_back(std::max(tc, tk) / (tc + tk));
		double tk2 = computeAlone(other, ops), tb2 = both(other, ops);
		otherT.push_back(tb2 * 1e3);
		otherSerialT.push_back((tc + tk2) * 1e3);
	}

	// With device timestamps: does an engine's own time grow when the other
	// class of engine runs at the same time?
	std::vector<double> copyDevAlone, copyDevBoth, opDevAlone, opDevBoth;
	for (int r = 0; r < o.runs; r++) {
		check(npurtProfilerStart(), "profiler start");
		copyAlone();
		computeAlone(same, ops);
		EngineTime ca = profiledKind("copy"), ga = profiledKind("gemm");
		check(npurtProfilerStart(), "profiler start");
		both(same, ops);
		EngineTime cb = profiledKind("copy"), gb = profiledKind("gemm");
		check(npurtProfilerStop(), "profiler stop");
		copyDevAlone.push_back(ca.seconds * 1e3);
		copyDevBoth.push_back(cb.seconds * 1e3);
		opDevAlone.push_back(ga.seconds * 1e3);
		opDevBoth.push_back(gb.seconds * 1e3);
	}

	// The same experiment on the guest's CPUs: a memcpy loop and a float
	// loop, each alone and then on two threads at once. The emulated
	// engines are guest kernel threads, so this bounds what they can
	// overlap.
	std::vector<char> src(chunk, 1), dst(chunk);
	std::vector<float> fa(1 << 18, 1.0f), fb(1 << 18, 2.0f), fc(1 << 18);
	auto cpuCopy = [&](int n) {
		for (int i = 0; i < n; i++) {
			std::memcpy(dst.data(), src.data(), chunk);
			asm volatile("" ::: "memory");
		}
	};
	auto cpuMath = [&](int n) {
		for (int i = 0; i < n; i++) {
			for (size_t j = 0; j < fa.size(); j++)
				fc[j] = fa[j] * fb[j] + fc[j];
			asm volatile("" ::: "memory");
		}
	};
	double c1 = std::max(timed([&] { cpuCopy(1); }), 1e-6);
	double m1 = std::max(timed([&] { cpuMath(1); }), 1e-6);
	int nc = std::max(1, static_cast<int>(std::lround(tCopy / c1)));
	int nm = std::max(1, static_cast<int>(std::lround(tCopy / m1)));
	std::vector<double> cpuRatio;
	for (int r = 0; r < o.runs; r++) {
		double ta = timed([&] { cpuCopy(nc); });
		double tb = timed([&] { cpuMath(nm); });
		double tab = timed([&] {
			std::thread t([&] { cpuMath(nm); });
			cpuCopy(nc);
			t.join();
		});
		cpuRatio.push_back(tab / (ta + tb));
	}

	std::string cw = std::to_string(copies) + " x " + sizeName(chunk) + " H2D pinned";
	std::string ow = std::to_string(ops) + " x GEMM f32 " + std::to_string(dim) + "^3";
	addFigure("overlap", "copy stream alone (" + cw + ")", "ms", copyT);
	addFigure("overlap", "compute stream alone (" + ow + ")", "ms", computeT);
	size_t bi = addFigure("overlap", "both streams concurrently", "ms", bothT,
	                      "copy alone + compute alone", "ms", serialT,
	                      "goal <= 0.6; perfect overlap = max/sum");
	addFigure("overlap", "perfect overlap: max(copy, compute) / sum", "ratio", floorT);
	addFigure("overlap", "copy engine time, concurrent", "ms", copyDevBoth, "alone", "ms",
	          copyDevAlone, "profiler: device busy time");
	addFigure("overlap", "compute engine time, concurrent", "ms", opDevBoth, "alone", "ms",
	          opDevAlone, "profiler: device busy time");
	size_t oi = addFigure("overlap", "both concurrently, GEMMs in a 2nd context", "ms", otherT,
	                      "copy alone + compute alone", "ms", otherSerialT,
	                      "own address space: no MMU lock shared with the copies");
	addFigure("overlap", "guest CPUs: memcpy + float loop on 2 threads", "ratio", cpuRatio,
	          "together / (alone + alone): what the guest's CPUs allow");

	Goal g;
	g.text = "overlap: concurrent total <= 0.6 of the serial sum";
	g.value = figures()[bi].ratio;
	g.measured = "concurrent / (copy alone + compute alone)";
	g.atLeast = false;
	g.target = 0.6;
	g.bound = "perfect overlap would give " + fmt(stats(floorT).median) +
	          "; concurrently the copy engine's own time is " +
	          fmt(ratioStats(copyDevBoth, copyDevAlone).median) +
	          "x and the compute engine's " + fmt(ratioStats(opDevBoth, opDevAlone).median) +
	          "x their time alone; with the GEMMs in a second context the ratio is " +
	          fmt(figures()[oi].ratio.median) +
	          "; a memcpy and a float loop on the guest's CPUs " + "overlap to " +
	          fmt(stats(cpuRatio).median);
	addGoal(g);

	check(npurtStreamDestroy(copyStream), "stream destroy");
	same.release();
	check(npurtCtxSetCurrent(ctx2), "context set current");
	other.release();
	check(npurtCtxSetCurrent(nullptr), "context set current");
	check(npurtCtxDestroy(ctx2), "context destroy");
	check(npurtFree(dev), "free");
	check(npurtFreeHost(pinned), "free host");
	check(npurtMemEmptyCache(), "empty cache");
}

}  // namespace bench

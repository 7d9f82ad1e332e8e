// Allocation: the caching pool against allocating from the device every
// time, and fragmentation under a random workload.
#include <cmath>
#include <random>

#include "bench.h"

namespace bench {

void benchAlloc(const Options &o)
{
	const size_t size = 1 << 20;
	void *p = nullptr;
	// Warm the pool.
	check(npurtMalloc(&p, size), "malloc");
	check(npurtFree(p), "free");

	const int nCached = o.quick ? 2000 : 20000;
	const int nUncached = o.quick ? 20 : 200;
	std::vector<double> cached = repeat(o.runs, [&] {
		double t0 = now();
		for (int i = 0; i < nCached; i++) {
			check(npurtMalloc(&p, size), "malloc");
			check(npurtFree(p), "free");
		}
		return (now() - t0) / nCached * 1e6;
	});
	std::vector<double> uncached = repeat(o.runs, [&] {
		double t0 = now();
		for (int i = 0; i < nUncached; i++) {
			check(npurtMalloc(&p, size), "malloc");
			check(npurtFree(p), "free");
			check(npurtMemEmptyCache(), "empty cache");
		}
		return (now() - t0) / nUncached * 1e6;
	});
	addFigure("alloc", "cached Malloc+Free (1 MiB)", "us", cached);
	size_t u = addFigure("alloc", "uncached Malloc+Free+EmptyCache (1 MiB)", "us", uncached,
	                     "cached Malloc+Free", "us", cached, "ratio: times slower");

	// Fragmentation: random sizes, a bounded live set, seeded (the same
	// workload every run; --quick runs it once), with fixed-size segments
	// (the default) and with expandable ones.
	auto fragmentation = [&] {
		check(npurtMemEmptyCache(), "empty cache");
		check(npurtMemResetPeakStats(), "reset stats");
		std::mt19937_64 rng(12345);
		std::vector<void *> live;
		for (int i = 0; i < 4000; i++) {
			bool alloc = live.size() < 8 || (live.size() < 64 && rng() % 2);
			if (alloc) {
				// Log-uniform between 1 KiB and 32 MiB.
				double e = 10 + static_cast<double>(rng() % 1000) / 1000.0 * 15;
				auto s = static_cast<size_t>(std::pow(2.0, e));
				void *q = nullptr;
				check(npurtMalloc(&q, s), "malloc");
				live.push_back(q);
			} else {
				size_t k = rng() % live.size();
				check(npurtFree(live[k]), "free");
				live[k] = live.back();
				live.pop_back();
			}
		}
		for (void *q : live)
			check(npurtFree(q), "free");
		npurtMemStats s{};
		check(npurtMemGetStats(&s), "stats");
		check(npurtMemEmptyCache(), "empty cache");
		return static_cast<double>(s.reservedBytesPeak) /
		       static_cast<double>(s.allocatedBytesPeak);
	};
	std::vector<double> frag = repeat(o.quick ? 1 : o.runs, fragmentation);
	size_t f = addFigure("alloc", "fragmentation: peak reserved / peak allocated", "ratio",
	                     frag, "4000 random Malloc/Free, 1 KiB-32 MiB, <= 64 live");
	check(npurtMemSetAllocatorConfig("expandable_segments:True"), "allocator config");
	std::vector<double> fragExp = repeat(o.quick ? 1 : o.runs, fragmentation);
	check(npurtMemSetAllocatorConfig(""), "allocator config");
	size_t fe = addFigure("alloc",
	                      "fragmentation, expandable segments: peak reserved / peak allocated",
	                      "ratio", fragExp,
	                      "the same workload, NPURT_ALLOC_CONF="
	                      "expandable_segments:True");

	Goal g;
	g.text = "cached Malloc/Free >= 50x faster than uncached";
	g.value = figures()[u].ratio;
	g.measured = "uncached / cached time";
	g.atLeast = true;
	g.target = 50;
	addGoal(g);
	g = Goal{};
	g.text = "fragmentation peak reserved/allocated <= 1.3";
	g.value = figures()[f].value;
	g.measured = "peak reserved / peak allocated";
	g.atLeast = false;
	g.target = 1.3;
	addGoal(g);
	g = Goal{};
	g.text = "fragmentation with expandable segments <= 1.05";
	g.value = figures()[fe].value;
	g.measured = "peak reserved / peak allocated";
	g.atLeast = false;
	g.target = 1.05;
	addGoal(g);
}

}  // namespace bench

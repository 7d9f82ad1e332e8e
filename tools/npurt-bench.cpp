// npurt-bench: performance of the runtime, each figure next to the limit
// it is measured against in the same run (absolute numbers in an emulator
// mean little; ratios do).
//
//   npurt-bench [--only SECTION] [--runs N] [--json FILE]
//
// Sections: alloc (cached vs uncached Malloc/Free, fragmentation).
// Every figure is the median of --runs runs (default 5), with min and max.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "npurt/npurt.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Figure {
	std::string section, name, unit;
	double median = 0, min = 0, max = 0;
	std::string note;
};

std::vector<Figure> gFigures;

double seconds(Clock::time_point a, Clock::time_point b)
{
	return std::chrono::duration<double>(b - a).count();
}

void check(npurtError_t err, const char *what)
{
	if (err == npurtSuccess)
		return;
	std::fprintf(stderr, "npurt-bench: %s: %s: %s\n", what, npurtGetErrorName(err),
	             npurtGetLastErrorMessage());
	std::exit(1);
}

// Runs `sample` `runs` times and records the median, min and max.
Figure measure(const std::string &section, const std::string &name, const std::string &unit,
               int runs, const std::function<double()> &sample)
{
	std::vector<double> v;
	v.reserve(static_cast<size_t>(runs));
	for (int i = 0; i < runs; i++)
		v.push_back(sample());
	std::sort(v.begin(), v.end());
	Figure f{section, name, unit, v[v.size() / 2], v.front(), v.back(), ""};
	gFigures.push_back(f);
	return f;
}

void ratio(const std::string &section, const std::string &name, const Figure &num,
           const Figure &den, const std::string &note)
{
	Figure f{section,           name, "ratio", num.median / den.median, num.min / den.max,
	         num.max / den.min, note};
	gFigures.push_back(f);
}

void benchAlloc(int runs)
{
	const size_t size = 1 << 20;
	void *p = nullptr;
	// Warm the pool.
	check(npurtMalloc(&p, size), "malloc");
	check(npurtFree(p), "free");

	Figure cached = measure("alloc", "cached Malloc+Free (1 MiB)", "us", runs, [&] {
		const int n = 20000;
		auto t0 = Clock::now();
		for (int i = 0; i < n; i++) {
			check(npurtMalloc(&p, size), "malloc");
			check(npurtFree(p), "free");
		}
		return seconds(t0, Clock::now()) / n * 1e6;
	});
	Figure uncached = measure("alloc", "uncached Malloc+Free (1 MiB)", "us", runs, [&] {
		const int n = 200;
		auto t0 = Clock::now();
		for (int i = 0; i < n; i++) {
			check(npurtMalloc(&p, size), "malloc");
			check(npurtFree(p), "free");
			check(npurtMemEmptyCache(), "empty cache");
		}
		return seconds(t0, Clock::now()) / n * 1e6;
	});
	ratio("alloc", "uncached / cached", uncached, cached, "goal >= 50");

	// Fragmentation: random sizes, a bounded live set, seeded.
	Figure frag = measure(
	        "alloc", "fragmentation: peak reserved / peak allocated", "ratio", runs, [&] {
		        check(npurtMemEmptyCache(), "empty cache");
		        check(npurtMemResetPeakStats(), "reset stats");
		        std::mt19937_64 rng(12345);
		        std::vector<void *> live;
		        for (int i = 0; i < 4000; i++) {
			        bool alloc = live.size() < 8 || (live.size() < 64 && rng() % 2);
			        if (alloc) {
				        // Log-uniform between 1 KiB and 32 MiB.
				        double e = 10 + (rng() % 1000) / 1000.0 * 15;
				        size_t s = static_cast<size_t>(std::pow(2.0, e));
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
	        });
	gFigures.back().note = "goal <= 1.3";
	(void)frag;
}

void printTable()
{
	std::printf("%-8s %-48s %12s %12s %12s %-6s %s\n", "section", "figure", "median", "min",
	            "max", "unit", "note");
	for (const auto &f : gFigures)
		std::printf("%-8s %-48s %12.3f %12.3f %12.3f %-6s %s\n", f.section.c_str(),
		            f.name.c_str(), f.median, f.min, f.max, f.unit.c_str(), f.note.c_str());
}

bool writeJson(const char *path)
{
	FILE *f = std::fopen(path, "w");
	if (!f)
		return false;
	std::fprintf(f, "[\n");
	for (size_t i = 0; i < gFigures.size(); i++) {
		const auto &g = gFigures[i];
		std::fprintf(
		        f,
		        "  {\"section\": \"%s\", \"figure\": \"%s\", \"unit\": \"%s\", "
		        "\"median\": %.6g, \"min\": %.6g, \"max\": %.6g, \"note\": \"%s\"}%s\n",
		        g.section.c_str(), g.name.c_str(), g.unit.c_str(), g.median, g.min, g.max,
		        g.note.c_str(), i + 1 < gFigures.size() ? "," : "");
	}
	std::fprintf(f, "]\n");
	return std::fclose(f) == 0;
}

}  // namespace

int main(int argc, char **argv)
{
	std::string only;
	const char *json = nullptr;
	int runs = 5;
	for (int i = 1; i < argc; i++) {
		if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = std::atoi(argv[++i]);
		} else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
			json = argv[++i];
		} else {
			std::fprintf(
			        stderr,
			        "usage: npurt-bench [--only alloc] [--runs N] [--json FILE]\n");
			return 2;
		}
	}
	if (runs < 1) {
		std::fprintf(stderr, "npurt-bench: --runs must be at least 1\n");
		return 2;
	}
	check(npurtSetDevice(0), "set device");
	if (only.empty() || only == "alloc")
		benchAlloc(runs);
	printTable();
	if (json && !writeJson(json)) {
		std::perror(json);
		return 1;
	}
	return 0;
}

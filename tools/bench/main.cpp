// npurt-bench: performance of the runtime, each figure next to the limit
// it is measured against in the same run (absolute numbers in an emulator
// mean little; ratios do).
//
//   npurt-bench [--only SECTION[,SECTION]] [--runs N] [--max-size BYTES]
//               [--out DIR] [--quick]
//
// Sections: copy (bandwidth against guest memcpy), launch (async tiny ops
// against the null ioctl), latency (idle launch to completion, events,
// synchronize), graph (replayed graph launches against the null ioctl, and
// idle launch to completion against ops launched separately), alloc
// (caching pool, fragmentation), overlap (copy and compute streams at
// once), ops (GEMM and add against the host CPU), peer (copies from another
// NPU's memory against same-device copies).
// Every figure is the median of --runs runs, with min and max.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bench.h"

namespace {

using namespace bench;

const char *const kSections[] = {"copy",  "launch",  "latency", "graph",
                                 "alloc", "overlap", "ops",     "peer"};

void usage(FILE *to)
{
	std::fprintf(
	        to,
	        "usage: npurt-bench [--only SECTION[,SECTION...]] [--runs N] [--max-size BYTES]\n"
	        "                   [--out DIR] [--quick]\n"
	        "  --only LIST       sections to run: copy, launch, latency, graph, alloc,\n"
	        "                    overlap, ops, peer\n"
	        "                    (default: all)\n"
	        "  --runs N          runs per figure; figures are the median, min and max\n"
	        "                    (default 5, --quick 3)\n"
	        "  --max-size BYTES  largest copy size, K/M/G suffixes allowed; sizes are\n"
	        "                    4 KiB times powers of 4 (default 256M, --quick 4M)\n"
	        "  --out DIR         write bench.json, bench.csv and bandwidth.png into DIR\n"
	        "  --quick           small sizes and few runs: a smoke test\n");
}

[[noreturn]] void badUsage(const std::string &why)
{
	std::fprintf(stderr, "npurt-bench: %s\n", why.c_str());
	usage(stderr);
	std::exit(2);
}

bool parseSize(const std::string &s, size_t *out)
{
	if (s.empty() || s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(s.c_str(), &end, 10);
	if (errno)
		return false;
	std::string suffix = end;
	unsigned long long mult = 1;
	if (suffix == "K" || suffix == "k" || suffix == "KiB")
		mult = KiB;
	else if (suffix == "M" || suffix == "m" || suffix == "MiB")
		mult = MiB;
	else if (suffix == "G" || suffix == "g" || suffix == "GiB")
		mult = GiB;
	else if (!suffix.empty())
		return false;
	if (v > SIZE_MAX / mult)
		return false;
	*out = static_cast<size_t>(v * mult);
	return true;
}

Options parseOptions(int argc, char **argv)
{
	Options o;
	bool runsSet = false, sizeSet = false;
	for (int i = 1; i < argc; i++) {
		std::string arg = argv[i], value;
		size_t eq = arg.find('=');
		bool inlineValue = arg.rfind("--", 0) == 0 && eq != std::string::npos;
		if (inlineValue) {
			value = arg.substr(eq + 1);
			arg = arg.substr(0, eq);
		}
		auto takeValue = [&]() {
			if (inlineValue)
				return value;
			if (i + 1 >= argc)
				badUsage(arg + " needs a value");
			return std::string(argv[++i]);
		};
		if (arg == "-h" || arg == "--help") {
			usage(stdout);
			std::exit(0);
		} else if (arg == "--only") {
			std::string list = takeValue();
			size_t pos = 0;
			for (;;) {
				size_t comma = list.find(',', pos);
				std::string name = list.substr(pos, comma == std::string::npos
				                                            ? std::string::npos
				                                            : comma - pos);
				bool known = false;
				for (const char *s : kSections)
					known = known || name == s;
				if (!known)
					badUsage("unknown section '" + name + "'");
				o.only.push_back(name);
				if (comma == std::string::npos)
					break;
				pos = comma + 1;
			}
		} else if (arg == "--runs") {
			std::string v = takeValue();
			char *end = nullptr;
			errno = 0;
			long n = std::strtol(v.c_str(), &end, 10);
			if (v.empty() || *end || errno || n < 1 || n > 1000)
				badUsage("--runs takes a whole number from 1 to 1000, not '" + v +
				         "'");
			o.runs = static_cast<int>(n);
			runsSet = true;
		} else if (arg == "--max-size") {
			std::string v = takeValue();
			if (!parseSize(v, &o.maxSize) || o.maxSize < 4 * KiB)
				badUsage("--max-size takes a size of at least 4096 bytes (K, M, G "
				         "suffixes), not '" +
				         v + "'");
			sizeSet = true;
		} else if (arg == "--out") {
			o.out = takeValue();
			if (o.out.empty())
				badUsage("--out needs a folder");
		} else if (arg == "--quick" && !inlineValue) {
			o.quick = true;
		} else {
			badUsage("unknown option '" + std::string(argv[i]) + "'");
		}
	}
	if (o.quick) {
		if (!runsSet)
			o.runs = 3;
		if (!sizeSet)
			o.maxSize = 4 * MiB;
	}
	return o;
}

const Figure *figure(const std::string &section, const std::string &name)
{
	return findFigure(section, name);
}

// The seed documentation's table (runtime-overview) beside our figures.
void seedTable(const Options &o)
{
	size_t largest = 4 * KiB;
	while (largest * 4 <= o.maxSize)
		largest *= 4;
	std::string sz = sizeName(largest);
	std::printf("\n[seed docs' table beside ours] (seed: CANN runtime overview, before -> "
	            "after optimisation)\n");
	std::printf("%-34s %-12s %-12s %-6s | %s\n", "metric", "seed before", "seed after", "gain",
	            "ours (this run, medians)");
	// Printed, and kept as notes for the JSON.
	auto line = [](const char *metric, const char *before, const char *after, const char *gain,
	               const std::string &ours) {
		std::printf("%-34s %-12s %-12s %-6s | %s\n", metric, before, after, gain,
		            ours.c_str());
		addNote(join({"seed table: ", metric, ": ", before, " -> ", after, " (", gain,
		              "); ours: ", ours}));
	};
	std::string ours = "not measured (copy section)";
	const Figure *h = figure("copy", "H2D pageable/pinned async " + sz);
	const Figure *d = figure("copy", "D2H pageable/pinned async " + sz);
	if (h && d)
		ours = "pinned/pageable " + fmt(1 / h->ratio.median) + "x H2D (" +
		       fmt(h->value.median) + " -> " + fmt(h->limit.median) + " GB/s), " +
		       fmt(1 / d->ratio.median) + "x D2H, async " + sz;
	line("H2D copy: default -> pinned", "~8 GB/s", "~12 GB/s", "1.5x", ours);

	ours = "not measured (launch section)";
	const Figure *a1 = figure("launch", "memset 256 B, 1 stream: ops/s (enqueue N, sync)");
	const Figure *a4 = figure("launch", "memset 256 B, 4 streams: ops/s (enqueue N, sync)");
	if (a1 && a4)
		ours = fmt(a1->value.median) + " ops/s on 1 stream, " + fmt(a4->value.median) +
		       " on 4 (memset 256 B, end to end)";
	line("async task throughput", "~50/s", "~500/s", "10x", ours);

	ours = "not measured (latency section)";
	const Figure *l = figure("latency", "memset 256 B launch->completion (idle)");
	if (l)
		ours = fmt(l->value.median) + " us idle launch->completion (" +
		       fmt(l->ratio.median) + " null ioctls)";
	line("scheduling latency", "~50 us", "~10 us", "5x", ours);

	ours = "not measured (copy section)";
	const Figure *cp = figure("copy", "H2D pageable async CPU use " + sz);
	const Figure *cn = figure("copy", "H2D pinned async CPU use " + sz);
	const Figure *gp = figure("copy", "H2D pageable async CPU time per GiB " + sz);
	const Figure *gn = figure("copy", "H2D pinned async CPU time per GiB " + sz);
	if (cp && cn && gp && gn)
		ours = "pageable " + fmt(cp->value.median) + "% -> pinned " +
		       fmt(cn->value.median) + "% of a CPU (" + fmt(gp->value.median) + " -> " +
		       fmt(gn->value.median) + " ms CPU per GiB), H2D async " + sz;
	line("CPU use during transfer", "~30%", "~5%", "", ours);
	std::printf("CPU is the benchmark process's user+system time (getrusage RUSAGE_SELF, all "
	            "its threads) over the copy's wall time;\nthe emulated copy engine runs in a "
	            "guest kernel worker and is not counted.\n");
}

}  // namespace

int main(int argc, char **argv)
{
	Options o = parseOptions(argc, argv);
	if (!o.out.empty()) {
		std::error_code ec;
		std::filesystem::create_directories(o.out, ec);
		if (ec) {
			std::fprintf(stderr, "npurt-bench: %s: %s\n", o.out.c_str(),
			             ec.message().c_str());
			return 1;
		}
	}
	check(npurtSetDevice(0), "set device");
	npurtDeviceProp prop{};
	check(npurtGetDeviceProperties(&prop, 0), "device properties");
	std::printf("npurt-bench: NPU 0 %s (%s)%s, %d copy + %d compute engines; %ld CPUs; "
	            "%d runs per figure%s\n",
	            prop.name, prop.devicePath, prop.emulated ? " emulated" : "",
	            prop.copyEngineCount, prop.computeEngineCount, sysconf(_SC_NPROCESSORS_ONLN),
	            o.runs, o.quick ? " (quick)" : "");
	std::fflush(stdout);

	double t0 = now();
	// How much the guest's two CPUs really run at once (the emulated
	// engines are guest kernel threads; the host may be busy).
	addFigure("limits", "guest CPUs: 2 memcpy threads together / serial", "ratio",
	          repeat(o.runs, [&] { return cpuParallelSample(o.quick ? 0.05 : 0.2); }),
	          "0.5 = two CPUs in parallel, 1 = one");
	struct Section {
		const char *name;
		void (*run)(const Options &);
	};
	const Section sections[] = {{"copy", benchCopy},       {"launch", benchLaunch},
	                            {"latency", benchLatency}, {"graph", benchGraph},
	                            {"alloc", benchAlloc},     {"overlap", benchOverlap},
	                            {"ops", benchOps},         {"peer", benchPeer}};
	for (const auto &s : sections) {
		if (!o.want(s.name))
			continue;
		double ts = now();
		s.run(o);
		std::fprintf(stderr, "npurt-bench: %s done in %.1f s\n", s.name, now() - ts);
	}

	printTable();
	printGoals();
	if (o.want("copy") || o.want("launch") || o.want("latency"))
		seedTable(o);
	std::printf("\nhost references: memcpy = glibc memcpy between two malloc'd buffers of the "
	            "copy's size; GEMM = i-k-j loop, add = plain loop, one thread, -O2.\n");
	std::printf("total %.1f s\n", now() - t0);

	if (!o.out.empty()) {
		std::string base = o.out + "/";
		if (!writeJson(base + "bench.json") || !writeCsv(base + "bench.csv") ||
		    !writePlot(base + "bandwidth.png")) {
			std::fprintf(stderr, "npurt-bench: writing into %s: %s\n", o.out.c_str(),
			             std::strerror(errno));
			return 1;
		}
		std::string wrote = base + "bench.json, " + base + "bench.csv";
		if (!plotPoints().empty())
			wrote += ", " + base + "bandwidth.png";
		std::printf("wrote %s\n", wrote.c_str());
	}
	return 0;
}

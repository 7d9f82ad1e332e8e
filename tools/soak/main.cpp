// npu-soak: a multi-process soak of libnpurt and npu.ko with faults, hangs,
// latency and kills injected. `npu-soak --help` says how to use it.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shared.h"

namespace {

void usage(FILE *f)
{
	std::fprintf(
	        f,
	        "usage: npu-soak [options]\n"
	        "\n"
	        "N worker processes x M threads run realistic libnpurt workloads (allocations and\n"
	        "frees of random sizes; pinned, registered and pageable H2D, D2H and D2D copies;\n"
	        "fills; ops and op chains checked bit for bit against the CPU; events across\n"
	        "streams and NPUs; peer copies; host functions; contexts made and destroyed; the\n"
	        "legacy and per-thread default streams; streams destroyed with work queued; IPC\n"
	        "memory and IPC events between the processes of a pair) while an injector arms\n"
	        "faults and hangs and turns on job latency on random NPUs through debugfs, and\n"
	        "kills random workers with SIGKILL (preferably inside a submitting call), which\n"
	        "are restarted. A failure the runtime reports is counted and its streams are\n"
	        "recovered; a result reported as good must be right (a wrong one fails the soak).\n"
	        "At the end every worker must have exited on its own, the driver's debugfs\n"
	        "counters (memory used, BOs, contexts, queues, clients) must be back to where\n"
	        "they were, every engine reset must be an injected fault or hang, and the kernel\n"
	        "log must have no report. A watchdog reports (with kernel stacks) and kills a\n"
	        "worker thread that makes no progress, so the soak ends on time.\n"
	        "\n"
	        "Injection, the counter checks and the unload check need root and debugfs (the\n"
	        "VM guest of tools/vmrun). Prints one summary line; exit 0 when it passed.\n"
	        "\n"
	        "  --seconds S        how long the workload runs (default 60)\n"
	        "  --procs N          worker processes (default 4, at most %d)\n"
	        "  --threads M        workload threads per process (default 3, at most %d);\n"
	        "                     each process of a pair has one more, for IPC\n"
	        "  --seed X           random seed (default: from the clock; printed)\n"
	        "  --max-bytes B      largest buffer (default 4194304)\n"
	        "  --inject-every S   mean seconds between injections (default 0.4)\n"
	        "  --kill-every S     mean seconds between kills (default 2)\n"
	        "  --no-inject        no fault, hang or latency injection\n"
	        "  --no-kill          no kills\n"
	        "  --wedge S          a thread without progress for S seconds is wedged (default:\n"
	        "                     60, or 10 job timeouts + 40 s if longer)\n"
	        "  --drain S          seconds workers get to exit after the end (default: 60, or\n"
	        "                     20 job timeouts if longer)\n"
	        "  --settle S         seconds the driver's counters get to come back (30)\n"
	        "  --json FILE        write the figures as JSON\n"
	        "  --unload-check KO  after the soak, unload npu (it must unload and print no\n"
	        "                     leak) and load KO again with the parameters it had\n"
	        "  --verbose          log injections, kills and every reported failure\n"
	        "  -h, --help         this text\n"
	        "\n"
	        "make soak SOAK_SECONDS=3600 runs it in the VM; tools/soak/run-bounded.sh OUT_DIR\n"
	        "is the bounded run of make test.\n",
	        soak::kMaxProcs, soak::kMaxThreads - 1);
}

bool number(const char *s, double *out)
{
	char *end = nullptr;
	double v = std::strtod(s, &end);
	if (!s[0] || *end || !(v >= 0))
		return false;
	*out = v;
	return true;
}

}  // namespace

int main(int argc, char **argv)
{
	const char *self = "/proc/self/exe";
	if (argc >= 2 && std::strcmp(argv[1], "--probe") == 0)
		return soak::runProbe();
	if (argc == 5 && std::strcmp(argv[1], "--worker") == 0) {
		int slot = std::atoi(argv[2]);
		auto gen = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
		int fd = std::atoi(argv[4]);
		void *mem = mmap(nullptr, sizeof(soak::Shared), PROT_READ | PROT_WRITE, MAP_SHARED,
		                 fd, 0);
		if (mem == MAP_FAILED || slot < 0 || slot >= soak::kMaxProcs) {
			std::perror("npu-soak --worker");
			return 1;
		}
		return soak::runWorker(static_cast<soak::Shared *>(mem), slot, gen);
	}
	soak::Options o;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
		double x = 0;
		auto num = [&](double *dst) {
			if (!v || !number(v, &x)) {
				std::fprintf(stderr, "npu-soak: %s needs a number\n", a.c_str());
				std::exit(2);
			}
			*dst = x;
			i++;
		};
		double d = 0;
		if (a == "-h" || a == "--help") {
			usage(stdout);
			return 0;
		} else if (a == "--seconds") {
			num(&o.seconds);
		} else if (a == "--procs") {
			num(&d);
			o.procs = static_cast<int>(d);
		} else if (a == "--threads") {
			num(&d);
			o.threads = static_cast<int>(d);
		} else if (a == "--seed") {
			num(&d);
			o.seed = static_cast<uint64_t>(d);
		} else if (a == "--max-bytes") {
			num(&d);
			o.maxBytes = static_cast<uint32_t>(d);
		} else if (a == "--inject-every") {
			num(&o.injectEveryS);
		} else if (a == "--kill-every") {
			num(&o.killEveryS);
		} else if (a == "--wedge") {
			num(&o.wedgeS);
		} else if (a == "--drain") {
			num(&o.drainS);
		} else if (a == "--settle") {
			num(&o.settleS);
		} else if (a == "--no-inject") {
			o.inject = false;
		} else if (a == "--no-kill") {
			o.kill = false;
		} else if (a == "--verbose") {
			o.verbose = true;
		} else if (a == "--json" && v) {
			o.json = v;
			i++;
		} else if (a == "--unload-check" && v) {
			o.unloadCheck = v;
			i++;
		} else {
			std::fprintf(stderr, "npu-soak: unknown or incomplete option '%s'\n",
			             a.c_str());
			usage(stderr);
			return 2;
		}
	}
	if (o.procs < 1 || o.procs > soak::kMaxProcs || o.threads < 1 ||
	    o.threads > soak::kMaxThreads - 1 || o.maxBytes < 64 || o.injectEveryS <= 0 ||
	    o.killEveryS <= 0 || (o.wedgeS > 0 && o.wedgeS < 1)) {
		std::fprintf(stderr, "npu-soak: an option is out of range\n");
		usage(stderr);
		return 2;
	}
	if (o.verbose)
		setenv("NPU_SOAK_VERBOSE", "1", 1);
	// Workers and the probe are this program again: by its path, since
	// /proc/self/exe in a child names the child's own image (the same).
	return soak::runSupervisor(o, self);
}

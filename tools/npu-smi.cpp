// npu-smi: status of the NPUs and the processes using them, like nvidia-smi.
//
//   npu-smi [-i N] [-q] [--json] [-l SECONDS]
//   npu-smi dmon [-i N] [-d SECONDS] [-c COUNT]
//
// Devices come from libnpurt (their nodes and properties); the counters
// from the driver's own queries on each node (DRM_NPU_QUERY_MEMORY,
// _ENGINE_STATS, _DEVICE_STATS: no root needed); processes from
// libnpurt's npurtDeviceGetProcesses, which reads the DRM usage statistics
// in /proc/PID/fdinfo (other users' only for root).
// Utilisation is engine busy time over an interval: the refresh interval,
// or 200 ms for one report.

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "npu_drm.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

// How long after an engine reset the device reads "reset" instead of OK.
constexpr uint64_t kRecentResetNs = 60ull * 1000000000;

// One read of a device's counters.
struct Sample {
	drm_npu_memory_info mem{};
	drm_npu_device_stats dev{};
	std::vector<drm_npu_engine_info> engines;
	std::vector<drm_npu_engine_stats> stats;
};

struct Npu {
	int ordinal = 0;
	npurtDeviceProp prop{};
	int fd = -1;
	Sample prev, cur;
	bool havePrev = false;
	std::vector<npurtProcessInfo> processes;
};

struct Options {
	int only = -1;
	bool json = false, full = false, dmon = false;
	double interval = 0;  // -l / -d seconds; 0: one report
	long count = -1;  // dmon -c
};

volatile std::sig_atomic_t gStop = 0;

void usage(FILE *f)
{
	std::fprintf(f, "usage: npu-smi [-i DEVICE] [-q] [--json] [-l SECONDS]\n"
	                "       npu-smi dmon [-i DEVICE] [-d SECONDS] [-c COUNT]\n");
}

std::string mib(uint64_t bytes)
{
	return std::to_string(bytes >> 20) + " MiB";
}

// JSON string contents (names come from /proc and the driver).
std::string jsonEscape(const std::string &s)
{
	std::string out;
	for (char c : s) {
		if (c == '"' || c == '\\')
			out += '\\';
		if (static_cast<unsigned char>(c) >= 0x20)
			out += c;
	}
	return out;
}

int query(int fd, uint32_t id, void *data, uint32_t size, uint32_t *full = nullptr)
{
	drm_npu_query q{};
	q.query = id;
	q.data_ptr = reinterpret_cast<uintptr_t>(data);
	q.size = size;
	if (ioctl(fd, DRM_IOCTL_NPU_QUERY, &q))
		return -errno;
	if (full)
		*full = q.size;
	return 0;
}

// The counters of the device behind fd, or -errno.
int readSample(int fd, Sample *s)
{
	uint32_t size = 0;
	if (int ret = query(fd, DRM_NPU_QUERY_MEMORY, &s->mem, sizeof(s->mem)))
		return ret;
	if (int ret = query(fd, DRM_NPU_QUERY_DEVICE_STATS, &s->dev, sizeof(s->dev)))
		return ret;
	if (int ret = query(fd, DRM_NPU_QUERY_ENGINES, nullptr, 0, &size))
		return ret;
	s->engines.resize(size / sizeof(drm_npu_engine_info));
	s->stats.resize(s->engines.size());
	if (s->engines.empty())
		return 0;
	if (int ret = query(fd, DRM_NPU_QUERY_ENGINES, s->engines.data(), size))
		return ret;
	return query(fd, DRM_NPU_QUERY_ENGINE_STATS, s->stats.data(),
	             static_cast<uint32_t>(s->stats.size() * sizeof(drm_npu_engine_stats)));
}

// Busy percentage of engine i between the two samples.
double engineUtil(const Npu &n, size_t i)
{
	if (!n.havePrev || i >= n.prev.stats.size())
		return 0;
	const auto &a = n.prev.stats[i], &b = n.cur.stats[i];
	double dt = static_cast<double>(b.sample_ns - a.sample_ns);
	return dt > 0 ? std::min(100.0, 100.0 * static_cast<double>(b.busy_ns - a.busy_ns) / dt)
	              : 0;
}

// Mean busy percentage of the engines of one class.
double classUtil(const Npu &n, uint32_t cls)
{
	double sum = 0;
	int engines = 0;
	for (size_t i = 0; i < n.cur.engines.size(); i++) {
		if (n.cur.engines[i].engine_class != cls)
			continue;
		sum += engineUtil(n, i);
		engines++;
	}
	return engines ? sum / engines : 0;
}

std::string health(const Npu &n)
{
	const auto &d = n.cur.dev;
	if (d.queues_in_error)
		return "queue error (" + std::to_string(d.queues_in_error) + ")";
	if (d.last_reset_ns && d.sample_ns - d.last_reset_ns < kRecentResetNs)
		return "reset " + std::to_string((d.sample_ns - d.last_reset_ns) / 1000000000) +
		       " s ago";
	return "OK";
}

// Processes using each device (libnpurt reads the driver's fdinfo), this
// one left out: its own opens of the nodes are not a user's.
int readProcesses(std::vector<Npu> &npus)
{
	const long self = getpid();
	for (auto &n : npus) {
		try {
			n.processes = npurt::processes(n.ordinal);
		} catch (const npurt::Error &e) {
			std::fprintf(stderr, "npu-smi: processes of NPU %d: %s\n", n.ordinal,
			             e.what());
			return 1;
		}
		std::erase_if(n.processes,
		              [self](const npurtProcessInfo &p) { return p.pid == self; });
	}
	return 0;
}

void printTable(const std::vector<Npu> &npus, int driverVersion)
{
	std::printf("npu-smi  runtime %d.%d  driver uAPI %d.%d\n", NPURT_VERSION_MAJOR,
	            NPURT_VERSION_MINOR, driverVersion / 1000, driverVersion % 1000 / 10);
	std::printf("%-4s %-10s %-20s %21s %6s %8s %10s %7s %7s %s\n", "NPU", "Name", "Node",
	            "Memory used / total", "Copy%", "Compute%", "Jobs", "Faults", "Resets",
	            "Health");
	for (const auto &n : npus) {
		const auto &d = n.cur.dev;
		std::string mem = mib(n.cur.mem.used) + " / " + mib(n.cur.mem.capacity);
		std::printf("%-4d %-10s %-20s %21s %5.0f%% %7.0f%% %10llu %7llu %7llu %s\n",
		            n.ordinal, n.prop.name, n.prop.devicePath, mem.c_str(),
		            classUtil(n, DRM_NPU_ENGINE_COPY), classUtil(n, DRM_NPU_ENGINE_COMPUTE),
		            static_cast<unsigned long long>(d.jobs_completed),
		            static_cast<unsigned long long>(d.faults + d.timeouts),
		            static_cast<unsigned long long>(d.resets), health(n).c_str());
	}
	std::printf("\nProcesses%s:\n%-4s %8s %-16s %14s %14s %7s\n",
	            geteuid() ? " (of this user; root sees all)" : "", "NPU", "PID", "Name",
	            "Device memory", "Pinned host", "Queues");
	bool any = false;
	for (const auto &n : npus)
		for (const auto &p : n.processes) {
			std::printf("%-4d %8d %-16s %14s %14s %7llu\n", n.ordinal, p.pid, p.name,
			            mib(p.deviceBytes).c_str(), mib(p.hostBytes).c_str(),
			            static_cast<unsigned long long>(p.queues));
			any = true;
		}
	if (!any)
		std::printf("(none)\n");
}

void printFull(const std::vector<Npu> &npus, int driverVersion)
{
	for (const auto &n : npus) {
		const auto &p = n.prop;
		const auto &d = n.cur.dev;
		std::printf("NPU %d\n", n.ordinal);
		std::printf("    Name                    : %s%s\n", p.name,
		            p.emulated ? " (emulated)" : "");
		std::printf("    Node                    : %s\n", p.devicePath);
		std::printf("    Driver index            : %d\n", p.deviceIndex);
		std::printf("    Driver uAPI             : %d.%d\n", driverVersion / 1000,
		            driverVersion % 1000 / 10);
		std::printf("    Runtime                 : %d.%d\n", NPURT_VERSION_MAJOR,
		            NPURT_VERSION_MINOR);
		std::printf("    Memory total / used     : %s / %s (%llu objects)\n",
		            mib(n.cur.mem.capacity).c_str(), mib(n.cur.mem.used).c_str(),
		            static_cast<unsigned long long>(n.cur.mem.bo_count));
		std::printf("    Contexts / queues       : %u / %u (%u in error)\n", d.contexts,
		            d.queues, d.queues_in_error);
		std::printf("    Jobs completed          : %llu\n",
		            static_cast<unsigned long long>(d.jobs_completed));
		std::printf("    Faults / timeouts       : %llu / %llu\n",
		            static_cast<unsigned long long>(d.faults),
		            static_cast<unsigned long long>(d.timeouts));
		std::printf("    Resets                  : %llu\n",
		            static_cast<unsigned long long>(d.resets));
		std::printf("    Health                  : %s\n", health(n).c_str());
		for (size_t i = 0; i < n.cur.engines.size(); i++) {
			const auto &e = n.cur.engines[i];
			const auto &s = n.cur.stats[i];
			std::printf(
			        "    Engine %-2u %-7s %u   : %5.1f%% busy, %llu jobs, %llu faults, "
			        "%llu timeouts, %llu resets, %u queues\n",
			        e.engine_id,
			        e.engine_class == DRM_NPU_ENGINE_COPY ? "copy" : "compute",
			        e.instance, engineUtil(n, i),
			        static_cast<unsigned long long>(s.jobs_completed),
			        static_cast<unsigned long long>(s.faults),
			        static_cast<unsigned long long>(s.timeouts),
			        static_cast<unsigned long long>(s.resets), s.queues);
		}
		for (const auto &pr : n.processes)
			std::printf(
			        "    Process %-8d %-16s: %s device, %s pinned host, %llu queues, "
			        "%llu contexts\n",
			        pr.pid, pr.name, mib(pr.deviceBytes).c_str(),
			        mib(pr.hostBytes).c_str(),
			        static_cast<unsigned long long>(pr.queues),
			        static_cast<unsigned long long>(pr.contexts));
		std::printf("\n");
	}
}

void printJson(const std::vector<Npu> &npus, int driverVersion)
{
	std::printf("{\"runtime_version\": %d, \"driver_version\": %d, \"devices\": [",
	            NPURT_VERSION, driverVersion);
	const char *sep = "";
	for (const auto &n : npus) {
		const auto &p = n.prop;
		const auto &d = n.cur.dev;
		std::printf("%s\n  {\"ordinal\": %d, \"index\": %d, \"name\": \"%s\", "
		            "\"node\": \"%s\", \"emulated\": %s, \"memory_total\": %llu, "
		            "\"memory_used\": %llu, \"copy_engines\": %d, \"compute_engines\": %d, "
		            "\"clock_hz\": %llu, \"copy_util\": %.1f, \"compute_util\": %.1f, "
		            "\"jobs_completed\": %llu, \"faults\": %llu, \"timeouts\": %llu, "
		            "\"resets\": %llu, \"contexts\": %u, \"queues\": %u, "
		            "\"queues_in_error\": %u, \"health\": \"%s\", \"engines\": [",
		            sep, n.ordinal, p.deviceIndex, jsonEscape(p.name).c_str(),
		            jsonEscape(p.devicePath).c_str(), p.emulated ? "true" : "false",
		            static_cast<unsigned long long>(n.cur.mem.capacity),
		            static_cast<unsigned long long>(n.cur.mem.used), p.copyEngineCount,
		            p.computeEngineCount, static_cast<unsigned long long>(p.clockRateHz),
		            classUtil(n, DRM_NPU_ENGINE_COPY), classUtil(n, DRM_NPU_ENGINE_COMPUTE),
		            static_cast<unsigned long long>(d.jobs_completed),
		            static_cast<unsigned long long>(d.faults),
		            static_cast<unsigned long long>(d.timeouts),
		            static_cast<unsigned long long>(d.resets), d.contexts, d.queues,
		            d.queues_in_error, health(n).c_str());
		for (size_t i = 0; i < n.cur.engines.size(); i++) {
			const auto &s = n.cur.stats[i];
			std::printf("%s{\"id\": %u, \"class\": \"%s\", \"util\": %.1f, "
			            "\"busy_ns\": %llu, \"jobs\": %llu, \"faults\": %llu, "
			            "\"timeouts\": %llu, \"resets\": %llu, \"queues\": %u}",
			            i ? ", " : "", s.engine_id,
			            n.cur.engines[i].engine_class == DRM_NPU_ENGINE_COPY
			                    ? "copy"
			                    : "compute",
			            engineUtil(n, i), static_cast<unsigned long long>(s.busy_ns),
			            static_cast<unsigned long long>(s.jobs_completed),
			            static_cast<unsigned long long>(s.faults),
			            static_cast<unsigned long long>(s.timeouts),
			            static_cast<unsigned long long>(s.resets), s.queues);
		}
		std::printf("], \"processes\": [");
		const char *psep = "";
		for (const auto &pr : n.processes) {
			std::printf("%s{\"pid\": %d, \"name\": \"%s\", \"device_memory\": %llu, "
			            "\"pinned_host\": %llu, \"queues\": %llu, \"contexts\": %llu, "
			            "\"copy_busy_ns\": %llu, \"compute_busy_ns\": %llu}",
			            psep, pr.pid, jsonEscape(pr.name).c_str(),
			            static_cast<unsigned long long>(pr.deviceBytes),
			            static_cast<unsigned long long>(pr.hostBytes),
			            static_cast<unsigned long long>(pr.queues),
			            static_cast<unsigned long long>(pr.contexts),
			            static_cast<unsigned long long>(pr.copyBusyNs),
			            static_cast<unsigned long long>(pr.computeBusyNs));
			psep = ", ";
		}
		std::printf("]}");
		sep = ",";
	}
	std::printf("\n]}\n");
}

void printDmonHeader()
{
	std::printf("# %-4s %10s %6s %8s %9s %7s %7s  %s\n", "npu", "mem(MiB)", "copy%", "compute%",
	            "jobs/s", "faults", "resets", "health");
}

void printDmon(const std::vector<Npu> &npus)
{
	for (const auto &n : npus) {
		const auto &a = n.prev.dev, &b = n.cur.dev;
		double dt = static_cast<double>(b.sample_ns - a.sample_ns) / 1e9;
		double jobs =
		        dt > 0 ? static_cast<double>(b.jobs_completed - a.jobs_completed) / dt : 0;
		std::printf("  %-4d %10llu %6.0f %8.0f %9.1f %7llu %7llu  %s\n", n.ordinal,
		            static_cast<unsigned long long>(n.cur.mem.used >> 20),
		            classUtil(n, DRM_NPU_ENGINE_COPY), classUtil(n, DRM_NPU_ENGINE_COMPUTE),
		            jobs,
		            static_cast<unsigned long long>(b.faults + b.timeouts - a.faults -
		                                            a.timeouts),
		            static_cast<unsigned long long>(b.resets - a.resets),
		            health(n).c_str());
	}
	std::fflush(stdout);
}

bool parseSeconds(const char *s, double *out)
{
	char *end = nullptr;
	double v = std::strtod(s, &end);
	if (*end || !(v > 0) || v > 86400)
		return false;
	*out = v;
	return true;
}

// Returns 0 and fills o, or the exit status for bad usage (2) or help (0
// with help set).
int parseArgs(int argc, char **argv, Options *o, bool *help)
{
	int i = 1;
	if (i < argc && !std::strcmp(argv[i], "dmon")) {
		o->dmon = true;
		o->interval = 1;
		i++;
	}
	for (; i < argc; i++) {
		const char *a = argv[i];
		const bool hasValue = i + 1 < argc;
		if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
			*help = true;
			return 0;
		} else if (!std::strcmp(a, "--json") && !o->dmon) {
			o->json = true;
		} else if (!std::strcmp(a, "-q") && !o->dmon) {
			o->full = true;
		} else if (!std::strcmp(a, "-i") && hasValue) {
			char *end = nullptr;
			long v = std::strtol(argv[++i], &end, 10);
			if (*end || v < 0 || v > 1000) {
				std::fprintf(stderr,
				             "npu-smi: -i takes a device number, not '%s'\n",
				             argv[i]);
				return 2;
			}
			o->only = static_cast<int>(v);
		} else if ((!std::strcmp(a, "-l") && !o->dmon) ||
		           (!std::strcmp(a, "-d") && o->dmon)) {
			if (!hasValue || !parseSeconds(argv[++i], &o->interval)) {
				std::fprintf(stderr, "npu-smi: %s takes seconds (0 < s <= 86400)\n",
				             a);
				return 2;
			}
		} else if (!std::strcmp(a, "-c") && o->dmon && hasValue) {
			char *end = nullptr;
			o->count = std::strtol(argv[++i], &end, 10);
			if (*end || o->count <= 0) {
				std::fprintf(stderr, "npu-smi: -c takes a positive count\n");
				return 2;
			}
		} else {
			std::fprintf(stderr, "npu-smi: unknown argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (o->json && o->full) {
		std::fprintf(stderr, "npu-smi: -q and --json do not combine\n");
		return 2;
	}
	return 0;
}

int fail(const char *what, int device, npurtError_t err)
{
	std::fprintf(stderr, "npu-smi: %s", what);
	if (device >= 0)
		std::fprintf(stderr, " (device %d)", device);
	std::fprintf(stderr, ": %s: %s\n", npurtGetErrorName(err), npurtGetLastErrorMessage());
	return 1;
}

// Samples every device (the current sample becomes the previous one).
int sampleAll(std::vector<Npu> &npus)
{
	for (auto &n : npus) {
		n.prev = std::move(n.cur);
		n.havePrev = !n.prev.stats.empty();
		n.cur = Sample{};
		if (int ret = readSample(n.fd, &n.cur)) {
			std::fprintf(stderr, "npu-smi: reading the counters of NPU %d (%s): %s%s\n",
			             n.ordinal, n.prop.devicePath, std::strerror(-ret),
			             ret == -EINVAL ? " (the driver predates uAPI 1.2?)" : "");
			return 1;
		}
	}
	return 0;
}

void sleepFor(double seconds)
{
	auto until = std::chrono::steady_clock::now() +
	             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
	                     std::chrono::duration<double>(seconds));
	while (!gStop && std::chrono::steady_clock::now() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

int main(int argc, char **argv)
{
	Options o;
	bool help = false;
	if (int rc = parseArgs(argc, argv, &o, &help))
		return rc;
	if (help) {
		usage(stdout);
		return 0;
	}
	std::signal(SIGINT, [](int) { gStop = 1; });
	std::signal(SIGTERM, [](int) { gStop = 1; });

	int count = 0;
	npurtError_t err = npurtGetDeviceCount(&count);
	if (err != npurtSuccess)
		return fail("no devices", -1, err);
	if (o.only >= count) {
		std::fprintf(stderr, "npu-smi: no device %d (%d present)\n", o.only, count);
		return 1;
	}
	int driverVersion = 0;
	npurtDriverGetVersion(&driverVersion);

	std::vector<Npu> npus;
	for (int d = 0; d < count; d++) {
		if (o.only >= 0 && d != o.only)
			continue;
		Npu n;
		n.ordinal = d;
		if ((err = npurtGetDeviceProperties(&n.prop, d)))
			return fail("properties", d, err);
		n.fd = open(n.prop.devicePath, O_RDWR | O_CLOEXEC);
		if (n.fd < 0) {
			std::fprintf(stderr, "npu-smi: open %s: %s\n", n.prop.devicePath,
			             std::strerror(errno));
			return 1;
		}
		npus.push_back(std::move(n));
	}
	if (int rc = sampleAll(npus))
		return rc;
	if (o.dmon)
		printDmonHeader();
	for (long round = 0; !gStop; round++) {
		// One report: utilisation over a short first interval.
		sleepFor(o.interval > 0 ? o.interval : 0.2);
		if (gStop)
			break;
		if (int rc = sampleAll(npus))
			return rc;
		if (int rc = readProcesses(npus))
			return rc;
		if (o.dmon)
			printDmon(npus);
		else if (o.json)
			printJson(npus, driverVersion);
		else if (o.full)
			printFull(npus, driverVersion);
		else
			printTable(npus, driverVersion);
		if (o.interval <= 0 || (o.dmon && o.count > 0 && round + 1 >= o.count))
			break;
		if (!o.dmon)
			std::printf("\n");
		std::fflush(stdout);
	}
	for (auto &n : npus)
		close(n.fd);
	return 0;
}

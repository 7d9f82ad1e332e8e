// npu-smi: status of the NPUs, like nvidia-smi.
//
//   npu-smi            a table of every NPU and the processes using them
//   npu-smi -i N       only device N
//   npu-smi --json     the same as JSON, for scripts
//
// Per-process figures come from the driver's debugfs (root only); without
// it the process table says so.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "npurt/npurt.h"

namespace {

struct Process {
	long pid = 0;
	std::string name;
	unsigned long long bos = 0, deviceBytes = 0, pinnedBytes = 0, mappings = 0;
};

struct Npu {
	int ordinal = 0;
	npurtDeviceProp prop{};
	size_t freeBytes = 0, totalBytes = 0;
	bool clientsKnown = false;
	std::vector<Process> processes;
};

void usage(FILE *f)
{
	std::fprintf(f, "usage: npu-smi [-i DEVICE] [--json]\n");
}

std::string mib(unsigned long long bytes)
{
	return std::to_string(bytes >> 20) + " MiB";
}

// Field "key N" from a debugfs client line.
unsigned long long field(const std::string &line, const std::string &key)
{
	size_t at = line.find(" " + key + " ");
	return at == std::string::npos
	               ? 0
	               : std::strtoull(line.c_str() + at + key.size() + 2, nullptr, 10);
}

// Reads npu_clients in the driver's debugfs folder: one line per
// context ("context pid P (comm): bos ... device ... pinned ... mappings ..."),
// summed per process.
bool readClients(const npurtDeviceProp &p, std::vector<Process> *out)
{
	if (!p.debugfsPath[0])
		return false;
	std::ifstream f(std::string(p.debugfsPath) + "/npu_clients");
	if (!f)
		return false;
	std::map<long, Process> byPid;
	std::string line;
	while (std::getline(f, line)) {
		if (line.rfind("context pid ", 0) != 0)
			continue;
		Process pr;
		pr.pid = std::strtol(line.c_str() + 12, nullptr, 10);
		size_t open = line.find('('), close = line.find("):");
		if (open != std::string::npos && close != std::string::npos)
			pr.name = line.substr(open + 1, close - open - 1);
		Process &acc = byPid[pr.pid];
		acc.pid = pr.pid;
		acc.name = pr.name;
		acc.bos += field(line, "bos");
		acc.deviceBytes += field(line, "device");
		acc.pinnedBytes += field(line, "pinned");
		acc.mappings += field(line, "mappings");
	}
	for (auto &[pid, pr] : byPid)
		if (pr.bos || pr.mappings)
			out->push_back(pr);
	return true;
}

void printTable(const std::vector<Npu> &npus, int driverVersion)
{
	std::printf("npu-smi  runtime %d.%d  driver uAPI %d.%d\n", NPURT_VERSION_MAJOR,
	            NPURT_VERSION_MINOR, driverVersion / 1000, driverVersion % 1000 / 10);
	std::printf("%-4s %-10s %-20s %21s %6s %8s %11s %s\n", "NPU", "Name", "Node",
	            "Memory used / total", "Copy", "Compute", "Clock", "Flags");
	for (const auto &n : npus) {
		const auto &p = n.prop;
		std::string mem = mib(n.totalBytes - n.freeBytes) + " / " + mib(n.totalBytes);
		std::printf("%-4d %-10s %-20s %21s %6d %8d %7llu MHz %s\n", n.ordinal, p.name,
		            p.devicePath, mem.c_str(), p.copyEngineCount, p.computeEngineCount,
		            static_cast<unsigned long long>(p.clockRateHz / 1000000),
		            p.emulated ? "emulated" : "-");
	}
	std::printf("\nProcesses:\n%-4s %8s %-16s %14s %14s %6s %9s\n", "NPU", "PID", "Name",
	            "Device memory", "Pinned host", "BOs", "Mappings");
	for (const auto &n : npus) {
		if (!n.clientsKnown) {
			std::printf("%-4d (per-process use needs read access to debugfs: run as "
			            "root)\n",
			            n.ordinal);
			continue;
		}
		for (const auto &pr : n.processes)
			std::printf("%-4d %8ld %-16s %14s %14s %6llu %9llu\n", n.ordinal, pr.pid,
			            pr.name.c_str(), mib(pr.deviceBytes).c_str(),
			            mib(pr.pinnedBytes).c_str(), pr.bos, pr.mappings);
	}
}

void printJson(const std::vector<Npu> &npus, int driverVersion)
{
	std::printf("{\"runtime_version\": %d, \"driver_version\": %d, \"devices\": [",
	            NPURT_VERSION, driverVersion);
	const char *sep = "";
	for (const auto &n : npus) {
		const auto &p = n.prop;
		std::printf("%s\n  {\"ordinal\": %d, \"index\": %d, \"name\": \"%s\", "
		            "\"node\": \"%s\", \"memory_total\": %zu, \"memory_used\": %zu, "
		            "\"copy_engines\": %d, \"compute_engines\": %d, \"clock_hz\": %llu, "
		            "\"emulated\": %s, \"processes\": ",
		            sep, n.ordinal, p.deviceIndex, p.name, p.devicePath, n.totalBytes,
		            n.totalBytes - n.freeBytes, p.copyEngineCount, p.computeEngineCount,
		            static_cast<unsigned long long>(p.clockRateHz),
		            p.emulated ? "true" : "false");
		if (!n.clientsKnown) {
			std::printf("null}");
		} else {
			std::printf("[");
			const char *psep = "";
			for (const auto &pr : n.processes) {
				std::printf("%s{\"pid\": %ld, \"name\": \"%s\", "
				            "\"device_memory\": %llu, \"pinned_host\": %llu, "
				            "\"bos\": %llu, \"mappings\": %llu}",
				            psep, pr.pid, pr.name.c_str(), pr.deviceBytes,
				            pr.pinnedBytes, pr.bos, pr.mappings);
				psep = ", ";
			}
			std::printf("]}");
		}
		sep = ",";
	}
	std::printf("\n]}\n");
}

int fail(const char *what, int device, npurtError_t err)
{
	std::fprintf(stderr, "npu-smi: %s", what);
	if (device >= 0)
		std::fprintf(stderr, " (device %d)", device);
	std::fprintf(stderr, ": %s: %s\n", npurtGetErrorName(err), npurtGetLastErrorMessage());
	return 1;
}

}  // namespace

int main(int argc, char **argv)
{
	int only = -1;
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (!std::strcmp(argv[i], "--json")) {
			json = true;
		} else if (!std::strcmp(argv[i], "-i") && i + 1 < argc) {
			char *end = nullptr;
			only = static_cast<int>(std::strtol(argv[++i], &end, 10));
			if (*end || only < 0) {
				std::fprintf(stderr, "npu-smi: -i takes a device number\n");
				return 2;
			}
		} else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}

	int count = 0;
	npurtError_t err = npurtGetDeviceCount(&count);
	if (err != npurtSuccess)
		return fail("no devices", -1, err);
	if (only >= count) {
		std::fprintf(stderr, "npu-smi: no device %d (%d present)\n", only, count);
		return 1;
	}
	int driverVersion = 0;
	npurtDriverGetVersion(&driverVersion);

	std::vector<Npu> npus;
	for (int d = 0; d < count; d++) {
		if (only >= 0 && d != only)
			continue;
		Npu n;
		n.ordinal = d;
		if ((err = npurtGetDeviceProperties(&n.prop, d)))
			return fail("properties", d, err);
		if ((err = npurtSetDevice(d)) ||
		    (err = npurtMemGetInfo(&n.freeBytes, &n.totalBytes)))
			return fail("memory", d, err);
		n.clientsKnown = readClients(n.prop, &n.processes);
		npus.push_back(std::move(n));
	}
	if (json)
		printJson(npus, driverVersion);
	else
		printTable(npus, driverVersion);
	return 0;
}

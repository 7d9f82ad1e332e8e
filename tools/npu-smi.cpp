// npu-smi: status of the NPUs, like nvidia-smi.
//
//   npu-smi            a table of every NPU
//   npu-smi -i N       only device N
//   npu-smi --json     the same as JSON, for scripts
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "npurt/npurt.h"

namespace {

void usage(FILE *f)
{
	std::fprintf(f, "usage: npu-smi [-i DEVICE] [--json]\n");
}

std::string mib(size_t bytes)
{
	return std::to_string(bytes >> 20) + " MiB";
}

void printTable(const std::vector<std::pair<int, npurtDeviceProp>> &devs, int driverVersion)
{
	std::printf("npu-smi  runtime %d.%d  driver uAPI %d.%d\n", NPURT_VERSION_MAJOR,
	            NPURT_VERSION_MINOR, driverVersion / 1000, driverVersion % 1000 / 10);
	std::printf("%-4s %-10s %-20s %12s %6s %8s %11s %s\n", "NPU", "Name", "Node", "Memory",
	            "Copy", "Compute", "Clock", "Flags");
	for (const auto &[ord, p] : devs) {
		std::printf("%-4d %-10s %-20s %12s %6d %8d %7llu MHz %s\n", ord, p.name,
		            p.devicePath, mib(p.totalGlobalMem).c_str(), p.copyEngineCount,
		            p.computeEngineCount,
		            static_cast<unsigned long long>(p.clockRateHz / 1000000),
		            p.emulated ? "emulated" : "-");
	}
}

void printJson(const std::vector<std::pair<int, npurtDeviceProp>> &devs, int driverVersion)
{
	std::printf("{\"runtime_version\": %d, \"driver_version\": %d, \"devices\": [",
	            NPURT_VERSION, driverVersion);
	const char *sep = "";
	for (const auto &[ord, p] : devs) {
		std::printf("%s\n  {\"ordinal\": %d, \"index\": %d, \"name\": \"%s\", "
		            "\"node\": \"%s\", \"memory_bytes\": %zu, \"copy_engines\": %d, "
		            "\"compute_engines\": %d, \"clock_hz\": %llu, \"emulated\": %s}",
		            sep, ord, p.deviceIndex, p.name, p.devicePath, p.totalGlobalMem,
		            p.copyEngineCount, p.computeEngineCount,
		            static_cast<unsigned long long>(p.clockRateHz),
		            p.emulated ? "true" : "false");
		sep = ",";
	}
	std::printf("\n]}\n");
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
	if (err != npurtSuccess) {
		std::fprintf(stderr, "npu-smi: %s: %s\n", npurtGetErrorName(err),
		             npurtGetLastErrorMessage());
		return 1;
	}
	int driverVersion = 0;
	npurtDriverGetVersion(&driverVersion);

	std::vector<std::pair<int, npurtDeviceProp>> devs;
	for (int d = 0; d < count; d++) {
		if (only >= 0 && d != only)
			continue;
		npurtDeviceProp p{};
		err = npurtGetDeviceProperties(&p, d);
		if (err != npurtSuccess) {
			std::fprintf(stderr, "npu-smi: device %d: %s: %s\n", d,
			             npurtGetErrorName(err), npurtGetLastErrorMessage());
			return 1;
		}
		devs.emplace_back(d, p);
	}
	if (only >= count) {
		std::fprintf(stderr, "npu-smi: no device %d (%d present)\n", only, count);
		return 1;
	}
	if (json)
		printJson(devs, driverVersion);
	else
		printTable(devs, driverVersion);
	return 0;
}

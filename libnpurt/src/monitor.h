// Device monitoring: engine utilisation over windows, and the processes
// using a device (npurtDeviceGetUtilization, npurtDeviceGetProcesses).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "npurt/npurt.h"
#include "os_interface.h"

namespace npurt {

// One reading of a device's engine counters, summed per engine class
// (index: enum drm_npu_engine_class).
struct EngineSample {
	uint64_t sampleNs = 0;  // CLOCK_MONOTONIC of the reading
	uint64_t busyNs[2] = {};
	uint32_t engines[2] = {};
};

// Reads the counters through the device's node: 0 or -errno (nothing
// recorded, so the runtime's start may take a baseline quietly).
int readEngineSample(os::Device &node, EngineSample *out);

// The utilisation over the window from prev to cur.
npurtUtilization utilizationBetween(const EngineSample &prev, const EngineSample &cur);

// The processes among clients with the NPU of driver index `index` open,
// one per pid in pid order; name gives a pid's command name.
std::vector<npurtProcessInfo> processesOf(const std::vector<os::ClientUsage> &clients,
                                          uint32_t index,
                                          const std::function<std::string(long)> &name);

}  // namespace npurt

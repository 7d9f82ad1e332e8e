// A fake kernel driver behind the runtime's OS interface, for host tests.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "npu_drm.h"
#include "os_interface.h"

namespace npurt::testing {

struct FakeNode {
	std::string path;
	drm_npu_device_info info{};
	int queryErrno = 0;  // non-zero: the query ioctl fails with it
};

FakeNode makeNode(uint32_t index, uint32_t apiVersion = DRM_NPU_API_VERSION);

struct FakeSystem {
	std::vector<FakeNode> nodes;
	std::vector<std::string> failures;
	int firstError = 0;
	// What /proc would show: open files of the driver, command names.
	std::vector<os::ClientUsage> clients;
	std::map<long, std::string> names;
};

// Replaces the runtime's OS interface with one serving `sys`.
void installFake(const FakeSystem &sys);

// How often the runtime asked the fake to open its devices since installFake.
int openCount();

}  // namespace npurt::testing

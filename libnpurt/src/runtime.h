// The process-wide runtime: discovered devices and their properties.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "npurt/npurt.h"
#include "os_interface.h"

namespace npurt {

class Device {
public:
	Device(std::unique_ptr<os::Device> node, const npurtDeviceProp &prop)
	    : node_(std::move(node)), prop_(prop)
	{}

	// Immutable after discovery: safe to read from any thread.
	const npurtDeviceProp &prop() const { return prop_; }
	os::Device &node() { return *node_; }

private:
	std::unique_ptr<os::Device> node_;
	npurtDeviceProp prop_;
};

class Runtime {
public:
	static Runtime &instance();

	// Discovers devices on first use. Returns npurtSuccess, or the
	// sticky error of a failed start (also recorded as the thread's last
	// error, with its message, unless `record` is false).
	npurtError_t start(bool record = true);

	// Valid after start() succeeded; the device list never changes after.
	int deviceCount() const { return static_cast<int>(devices_.size()); }
	Device &device(int ordinal) { return *devices_[ordinal]; }

	// Checks an ordinal against the device list, recording the error.
	npurtError_t checkOrdinal(int ordinal, const char *api) const;

	// Host-only tests: forget every device and start again on the next
	// call, through `os`. Not for use while other threads use the runtime.
	static void resetForTesting(std::unique_ptr<os::Interface> os);

private:
	npurtError_t discover();

	std::mutex mutex_;  // serialises start() and resetForTesting()
	bool started_ = false;
	npurtError_t startStatus_ = npurtSuccess;
	std::string startMessage_;
	std::unique_ptr<os::Interface> os_;
	std::vector<std::unique_ptr<Device>> devices_;
};

// The calling thread's current device ordinal.
int &threadDevice();

}  // namespace npurt

// The seam between the runtime and the kernel driver. Everything the
// runtime asks of the OS goes through these two interfaces, so host-only
// unit tests run the runtime against a fake driver.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace npurt::os {

// One opened NPU node.
class Device {
public:
	virtual ~Device() = default;
	// The node's path, for messages.
	virtual const std::string &path() const = 0;
	// ioctl on the node, restarted on EINTR/EAGAIN; 0 or -errno.
	virtual int ioctl(unsigned long request, void *arg) = 0;
};

// What opening the NPU nodes found.
struct Discovery {
	std::vector<std::unique_ptr<Device>> devices;
	// Nodes of the npu driver that could not be opened, with why.
	std::vector<std::string> failures;
	// First errno among the failures, 0 if none.
	int firstError = 0;
};

class Interface {
public:
	virtual ~Interface() = default;
	// Opens every render node whose kernel driver is "npu".
	virtual Discovery openDevices() = 0;
};

// The real thing: libdrm and ioctl(2).
std::unique_ptr<Interface> makeDrmInterface();

}  // namespace npurt::os

// The seam between the runtime and the kernel driver. Everything the
// runtime asks of the OS goes through these two interfaces, so host-only
// unit tests run the runtime against a fake driver.
#pragma once

#include <cstddef>
#include <cstdint>
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
	// The driver's debugfs folder for this node, "" where there is none
	// to be seen (debugfs not mounted, or not readable by this process).
	virtual std::string debugfsPath() const { return ""; }
	// ioctl on the node, restarted on EINTR/EAGAIN; 0 or -errno.
	virtual int ioctl(unsigned long request, void *arg) = 0;
	// The file descriptor, for PRIME; -1 if there is none.
	virtual int fd() const = 0;
	// mmap `size` bytes of the node at `offset`, shared and read-write;
	// nullptr with errno set on failure.
	virtual void *mmap(size_t size, uint64_t offset) = 0;
	virtual void munmap(void *addr, size_t size) = 0;
	// Opens the same node again: a new file, hence a new context.
	virtual std::unique_ptr<Device> reopen(int *err) = 0;
};

// What opening the NPU nodes found.
struct Discovery {
	std::vector<std::unique_ptr<Device>> devices;
	// Nodes of the npu driver that could not be opened, with why.
	std::vector<std::string> failures;
	// First errno among the failures, 0 if none.
	int firstError = 0;
};

// One open file of an NPU node in some process, as the driver's DRM usage
// statistics (/proc/PID/fdinfo/FD) describe it.
struct ClientUsage {
	long pid = 0;
	uint64_t clientId = 0;  // the DRM file's id: one per file, not per fd
	uint32_t deviceIndex = 0;  // the driver's index of the NPU
	uint32_t queues = 0;
	uint64_t deviceBytes = 0, hostBytes = 0;
	uint64_t computeBusyNs = 0, copyBusyNs = 0;
};

// Parses one fdinfo text; false if it is not a file of the npu driver.
bool parseFdinfo(const std::string &text, ClientUsage *out);

class Interface {
public:
	virtual ~Interface() = default;
	// Opens every render node whose kernel driver is "npu".
	virtual Discovery openDevices() = 0;
	// Every open file of the npu driver in the processes this one may
	// inspect, each file once however many descriptors share it.
	virtual std::vector<ClientUsage> clients() { return {}; }
	// A process's command name; "" if it is gone or hidden.
	virtual std::string processName(long /*pid*/) { return ""; }
};

// /proc's view, for the real interface (os_fdinfo.cpp).
std::vector<ClientUsage> scanClients();
std::string commandName(long pid);

// The real thing: libdrm and ioctl(2).
std::unique_ptr<Interface> makeDrmInterface();

}  // namespace npurt::os

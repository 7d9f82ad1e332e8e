// The bench's own file of the render node, for the limits the runtime is
// measured against: the null ioctl, and the kernel's submit and completion
// path without the runtime in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bench {

class RawDevice {
public:
	// Opens the render node of the current device (npurtDeviceProp.devicePath).
	RawDevice();
	~RawDevice();
	RawDevice(const RawDevice &) = delete;
	RawDevice &operator=(const RawDevice &) = delete;

	// DRM_IOCTL_NPU_QUERY with size 0: the cheapest ioctl of the driver.
	void nullIoctl();
	// One sample of it: microseconds per call over n calls.
	double nullUs(int n);

	// A queue on an engine class of this file; its timeline syncobj.
	struct Queue {
		uint32_t id = 0, syncobj = 0;
	};
	Queue createQueue(uint32_t engineClass);
	// Queues one job; returns its timeline point.
	uint64_t submit(const Queue &q, const void *cmds, uint32_t size);
	// Waits (sleeping) for a point of the queue's timeline.
	void wait(const Queue &q, uint64_t point);

	// Pinned host memory mapped for the CPU and, at the same address, for
	// the device in this file's address space (zeroed, page-rounded).
	void *mapHost(size_t bytes);

	const std::string &path() const { return path_; }

private:
	int ioctl(unsigned long request, void *arg, const char *what);

	int fd_ = -1;
	std::string path_;
};

// CLOCK_MONOTONIC_RAW in ns: the clock the emulated device's timestamps
// count (from an unknown base).
uint64_t rawClockNs();

}  // namespace bench

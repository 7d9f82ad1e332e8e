// The process-wide runtime: discovered devices and their properties.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <atomic>
#include <map>
#include <set>

#include "context.h"
#include "monitor.h"
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
	// npurtSetDeviceFlags: how waits for the device's work behave.
	unsigned flags() const { return flags_.load(std::memory_order_relaxed); }
	void setFlags(unsigned f) { flags_.store(f, std::memory_order_relaxed); }

	// The device memory this process's pools hold on the device (every
	// context's segments) and the per-process limit on it (0: none).
	// A segment is charged before the driver is asked for it and
	// uncharged once it is given back. Lock-free: any thread.
	bool charge(uint64_t bytes)
	{
		uint64_t cur = reserved_.load(std::memory_order_relaxed);
		do {
			uint64_t lim = limit_.load(std::memory_order_relaxed);
			if (lim && (bytes > lim || cur > lim - bytes))
				return false;
		} while (!reserved_.compare_exchange_weak(cur, cur + bytes,
		                                          std::memory_order_relaxed));
		return true;
	}
	void uncharge(uint64_t bytes) { reserved_.fetch_sub(bytes, std::memory_order_relaxed); }
	uint64_t reservedBytes() const { return reserved_.load(std::memory_order_relaxed); }
	uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
	void setLimit(uint64_t bytes) { limit_.store(bytes, std::memory_order_relaxed); }

	// npurtDeviceSetLimit's values (npurtLimit indexes them): kept, used
	// by nothing on an NPU. Any thread.
	static constexpr int kLimits = 7;
	size_t deviceLimit(int which) const
	{
		return limits_[which].load(std::memory_order_relaxed);
	}
	void setDeviceLimit(int which, size_t v)
	{
		limits_[which].store(v, std::memory_order_relaxed);
	}

	// npurtDeviceGetUtilization's window: stores the reading that ends
	// one window and starts the next; returns the one before (a
	// sampleNs of 0: there was none). Any thread.
	EngineSample swapSample(const EngineSample &cur)
	{
		std::lock_guard<std::mutex> lock(sampleMutex_);
		return std::exchange(lastSample_, cur);
	}

private:
	std::unique_ptr<os::Device> node_;
	npurtDeviceProp prop_;
	std::atomic<unsigned> flags_{0};
	std::atomic<uint64_t> reserved_{0};
	std::atomic<uint64_t> limit_{0};
	std::atomic<size_t> limits_[kLimits] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0};
	std::mutex sampleMutex_;  // guards lastSample_
	EngineSample lastSample_;
};

// This process's figures on one device, over its contexts there.
struct ProcessMemory {
	uint64_t allocated = 0;  // live allocations of the pools
	uint64_t deviceBytes = 0;  // what the driver charges the contexts
	uint32_t contexts = 0;
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
	// Starts the runtime and checks an ordinal.
	npurtError_t startAndCheck(int ordinal, const char *api);
	// Starts the runtime and checks two ordinals (a device and its peer).
	npurtError_t checkPair(int device, int peer, const char *api);

	// Host-only tests: forget every device and start again on the next
	// call, through `os`. Not for use while other threads use the runtime.
	static void resetForTesting(std::unique_ptr<os::Interface> os);

	// The context this thread's calls use: the one it made current, else
	// the primary context of its current device (created on first use).
	// Records and returns an error if there is none.
	npurtError_t currentContext(Context **ctx, const char *api);
	// The primary context of a device (created on first use).
	npurtError_t primaryContext(int ordinal, Context **ctx, const char *api);
	npurtError_t createContext(int ordinal, Context **ctx, const char *api);
	npurtError_t destroyContext(Context *ctx);
	// Whether ctx is a live context (not destroyed, not foreign).
	bool isContext(const npurtContext_st *ctx);
	// npurtDeviceReset: waits for the primary context of the device, if
	// it exists, and destroys it.
	npurtError_t resetPrimary(int ordinal);
	// This process's memory on a device, over its live contexts there.
	npurtError_t processMemory(int ordinal, ProcessMemory *out);
	// The npu driver's open files in the processes this one may see,
	// and a process's command name (npurtDeviceGetProcesses). After start().
	std::vector<os::ClientUsage> clients() { return os_->clients(); }
	std::string processName(long pid) { return os_->processName(pid); }
	// The device whose address slice holds addr, or -1.
	int deviceOfAddress(uint64_t addr) const;
	// The context holding device memory at addr, preferring `hint`; with
	// the range's base and size. Null if addr is not device memory.
	Context *findDeviceMemory(uint64_t addr, Context *hint, uint64_t *base, size_t *size);
	Context *findDeviceMemorySlow(uint64_t addr, Context *hint, uint64_t *base, size_t *size);

	// Pinned and registered host ranges.
	struct HostRange {
		uint64_t size;  // bytes bound (whole pages)
		uint64_t userBase;  // registered: the pointer the user gave
		uint64_t userSize;  //   and its size; pinned: base and size
		Context *ctx;
		uint32_t handle;
		bool pinned;  // MallocHost (else HostRegister)
		unsigned flags = 0;  // npurtHostAlloc* or npurtHostRegister* given
	};
	// HostRange::flags of npurtMallocManaged's memory (pinned), beside
	// npurtHostAllocMapped.
	static constexpr unsigned kHostManaged = 0x80000000u;
	// Adds a range unless it overlaps one; false if it does.
	bool addHostRange(uint64_t base, const HostRange &r);
	// Removes the range starting at base (user's pointer) and returns it.
	bool takeHostRange(uint64_t userBase, bool pinned, uint64_t *base, HostRange *r);
	// The host range containing addr.
	bool findHostRange(uint64_t addr, uint64_t *base, HostRange *r);
	// The range of npurtMallocManaged's memory whose user part holds addr.
	bool findManagedRange(uint64_t addr, HostRange *r);

private:
	npurtError_t discover();
	npurtError_t reserveAddressSpace();
	// NPURT_ALLOC_CONF, if set, into the pools' settings.
	npurtError_t readAllocatorConfig();
	void releaseContextLocked(Context *ctx);
	Context *primaryLocked(int ordinal);  // with ctxMutex_ held

	std::mutex mutex_;  // serialises start() and resetForTesting()
	bool started_ = false;
	npurtError_t startStatus_ = npurtSuccess;
	std::string startMessage_;
	std::unique_ptr<os::Interface> os_;
	std::vector<std::unique_ptr<Device>> devices_;

	// Device address slices, one per device, inside one reserved window.
	void *window_ = nullptr;
	size_t windowSize_ = 0;
	std::vector<std::unique_ptr<AddressSpace>> spaces_;

	std::mutex ctxMutex_;  // guards contexts_, primaries_, hostRanges_
	std::set<const npurtContext_st *> contexts_;
	std::vector<Context *> primaries_;
	std::map<uint64_t, HostRange> hostRanges_;
};

// The calling thread's current device ordinal.
int &threadDevice();
// Makes ctx (or, with null, the current device's primary) this thread's
// current context.
void setThreadContext(Context *ctx);

}  // namespace npurt

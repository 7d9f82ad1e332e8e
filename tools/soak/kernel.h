// npu-soak: what the supervisor reads and writes of the kernel side, without
// opening an NPU (an open file would be a context of its own in the
// counters it checks): debugfs counters and injection knobs, the kernel
// log, and the module's unload and reload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace soak {

// One NPU's live counters (debugfs npu_memory, npu_engines, npu_clients).
struct DeviceCounters {
	bool ok = false;
	int64_t used = 0;  // device memory in use, bytes
	int64_t bos = 0;
	int64_t contexts = 0;
	int64_t queues = 0;  // summed over the engines
	int64_t jobs = 0;  // jobs the engines finished
	int64_t resets = 0;  // engine resets (faults and timeouts)
	int64_t clientLines = 0;  // contexts listed in npu_clients
};

DeviceCounters readCounters(const std::string &dir);
// The live counters that must come back to their value before the soak.
bool sameLive(const DeviceCounters &a, const DeviceCounters &b);
std::string describeLive(const DeviceCounters &c);

bool readKnob(const std::string &dir, const char *knob, long *value);
bool writeKnob(const std::string &dir, const char *knob, long value);

// Records the kernel log gets from now on (/dev/kmsg, root only).
class KernelLog {
public:
	KernelLog();
	~KernelLog();
	KernelLog(const KernelLog &) = delete;
	KernelLog &operator=(const KernelLog &) = delete;
	bool available() const { return fd_ >= 0; }
	// Reads what arrived; returns the lines that are reports (the
	// patterns tools/vm-logcheck fails a run on) and appends every line
	// to all when given.
	std::vector<std::string> reports(std::vector<std::string> *all = nullptr);

private:
	int fd_ = -1;
};

// Unloads npu (it must not be in use), checks the kernel log for the
// module's leak report, and loads `ko` again with the parameters it had.
struct UnloadResult {
	bool unloaded = false;
	bool reloaded = false;
	int leakReports = 0;  // "npu: leak:" lines at the unload
	std::string message;
};
UnloadResult unloadAndReload(const char *ko, double waitS);

}  // namespace soak

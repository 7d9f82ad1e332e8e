// The module's parameters and debugfs knobs (fault injection, job latency),
// for the VM tests of the runtime. Writing knobs needs root; a test that
// needs one skips without it.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "npurt/npurt.h"

namespace vmknobs {

inline unsigned long moduleParam(const char *name)
{
	std::ifstream f(std::string("/sys/module/npu/parameters/") + name);
	unsigned long v = 0;
	f >> v;
	return v;
}

// debugfs of NPU `ordinal` (npurtDeviceProp.debugfsPath), or "" when its
// knobs cannot be written (not root, no debugfs).
inline std::string debugfsDir(int ordinal)
{
	npurtDeviceProp p{};
	if (npurtGetDeviceProperties(&p, ordinal) != npurtSuccess) {
		npurtGetLastError();
		return "";
	}
	std::string dir = p.debugfsPath;
	if (dir.empty() || access((dir + "/inject_latency_us").c_str(), W_OK))
		return "";
	return dir;
}

inline bool writeKnob(int ordinal, const char *knob, unsigned long value)
{
	std::string dir = debugfsDir(ordinal);
	if (dir.empty())
		return false;
	std::ofstream f(dir + "/" + knob);
	f << value << "\n";
	f.flush();
	return f.good();
}

// A job latency that keeps device work busy well inside the job timeout.
inline unsigned long latencyUs()
{
	return std::min<unsigned long>(150000, moduleParam("job_timeout_ms") * 1000 / 3);
}

// Every job of NPU `ordinal` starts `us` microseconds late while this lives
// (root only: on() says whether it took).
class JobLatency {
public:
	JobLatency(int ordinal, unsigned long us)
	    : ordinal_(ordinal), on_(writeKnob(ordinal, "inject_latency_us", us))
	{}
	~JobLatency()
	{
		if (on_)
			writeKnob(ordinal_, "inject_latency_us", 0);
	}
	JobLatency(const JobLatency &) = delete;
	JobLatency &operator=(const JobLatency &) = delete;
	bool on() const { return on_; }

private:
	int ordinal_;
	bool on_;
};

}  // namespace vmknobs

// C API: device monitoring (utilisation, the processes using a device).
#include <string>
#include <vector>

#include "error.h"
#include "monitor.h"
#include "runtime.h"

using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;

extern "C" {

npurtError_t npurtDeviceGetUtilization(int device, npurtUtilization *util)
{
	try {
		const char *api = "npurtDeviceGetUtilization";
		if (!util)
			return nullArgument(api, "util");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, api))
			return err;
		npurt::Device &d = rt.device(device);
		npurt::EngineSample cur;
		if (int ret = npurt::readEngineSample(d.node(), &cur))
			return setError(npurt::errorFromErrno(ret),
			                npurt::osMessage(std::string(api) + ": engine query on " +
			                                         d.node().path(),
			                                 ret));
		npurt::EngineSample prev = d.swapSample(cur);
		// No earlier reading: an empty window, not the time since boot.
		*util = npurt::utilizationBetween(prev.sampleNs ? prev : cur, cur);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetUtilization");
	}
}

npurtError_t npurtDeviceGetProcesses(int device, npurtProcessInfo *procs, unsigned int *count)
{
	try {
		const char *api = "npurtDeviceGetProcesses";
		if (!count)
			return nullArgument(api, "count");
		if (*count && !procs)
			return setError(npurtErrorInvalidValue, std::string(api) + ": a count of " +
			                                                std::to_string(*count) +
			                                                " with a null array");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, api))
			return err;
		std::vector<npurtProcessInfo> found = npurt::processesOf(
		        rt.clients(), static_cast<uint32_t>(rt.device(device).prop().deviceIndex),
		        [&rt](long pid) { return rt.processName(pid); });
		const unsigned have = *count;
		*count = static_cast<unsigned>(found.size());
		if (!have)
			return npurtSuccess;  // the sizing call
		if (have < found.size())
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + std::to_string(found.size()) +
			                        " processes have NPU " + std::to_string(device) +
			                        " open, the array holds " + std::to_string(have) +
			                        " (the count now says what is needed)");
		for (size_t i = 0; i < found.size(); i++)
			procs[i] = found[i];
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetProcesses");
	}
}

}  // extern "C"

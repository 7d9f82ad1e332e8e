// C API: the calls about managed memory (npurtMallocManaged, which is in
// api_memory.cpp with the other pinned allocations, makes it). Managed
// memory never moves (npurt.h), so these check their arguments as CUDA
// does and have nothing else to do.
#include <string>

#include "error.h"
#include "runtime.h"
#include "stream.h"

using npurt::addrOf;
using npurt::hexAddr;
using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;

namespace {

// [p, p + count) inside one managed allocation; its range in *r.
npurtError_t checkManagedRange(const char *api, const void *p, size_t count, Runtime::HostRange *r)
{
	if (!p)
		return nullArgument(api, "devPtr");
	Runtime &rt = Runtime::instance();
	if (npurtError_t err = rt.start())
		return err;
	if (!rt.findManagedRange(addrOf(p), r))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + hexAddr(addrOf(p)) +
		                        " is not managed memory (npurtMallocManaged)");
	if (count > r->userBase + r->userSize - addrOf(p))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + std::to_string(count) + " bytes from " +
		                        hexAddr(addrOf(p)) +
		                        " run past the end of its managed allocation (" +
		                        std::to_string(r->userSize) + " bytes from " +
		                        hexAddr(r->userBase) + ")");
	return npurtSuccess;
}

// An NPU's ordinal or npurtCpuDeviceId.
npurtError_t checkLocation(const char *api, int device)
{
	int n = Runtime::instance().deviceCount();
	if (device == npurtCpuDeviceId || (device >= 0 && device < n))
		return npurtSuccess;
	return setError(npurtErrorInvalidDevice,
	                std::string(api) + ": device " + std::to_string(device) +
	                        " is neither an NPU (0.." + std::to_string(n - 1) +
	                        ") nor npurtCpuDeviceId");
}

}  // namespace

npurtError_t npurtMemPrefetchAsync(const void *devPtr, size_t count, int dstDevice,
                                   npurtStream_t stream)
{
	try {
		const char *api = "npurtMemPrefetchAsync";
		Runtime::HostRange r{};
		if (npurtError_t err = checkManagedRange(api, devPtr, count, &r))
			return err;
		if (npurtError_t err = checkLocation(api, dstDevice))
			return err;
		npurt::Stream *s = nullptr;
		return npurt::resolveStream(stream, &s, api);
	} catch (...) {
		return npurt::errorFromException("npurtMemPrefetchAsync");
	}
}

npurtError_t npurtMemAdvise(const void *devPtr, size_t count, npurtMemoryAdvise advice, int device)
{
	try {
		const char *api = "npurtMemAdvise";
		Runtime::HostRange r{};
		if (npurtError_t err = checkManagedRange(api, devPtr, count, &r))
			return err;
		switch (advice) {
		case npurtMemAdviseSetReadMostly:
		case npurtMemAdviseUnsetReadMostly:
			return npurtSuccess;  // the device is ignored, as in CUDA
		case npurtMemAdviseSetPreferredLocation:
		case npurtMemAdviseUnsetPreferredLocation:
		case npurtMemAdviseSetAccessedBy:
		case npurtMemAdviseUnsetAccessedBy:
			return checkLocation(api, device);
		}
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown advice " +
		                        std::to_string(static_cast<int>(advice)));
	} catch (...) {
		return npurt::errorFromException("npurtMemAdvise");
	}
}

npurtError_t npurtStreamAttachMemAsync(npurtStream_t stream, void *devPtr, size_t length,
                                       unsigned int flags)
{
	try {
		const char *api = "npurtStreamAttachMemAsync";
		if (flags != npurtMemAttachGlobal && flags != npurtMemAttachHost &&
		    flags != npurtMemAttachSingle)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": flags must be one of npurtMemAttachGlobal, Host "
			                        "or Single, not " +
			                        hexAddr(flags));
		Runtime::HostRange r{};
		if (npurtError_t err = checkManagedRange(api, devPtr, length, &r))
			return err;
		if (addrOf(devPtr) != r.userBase || (length && length != r.userSize))
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": attaches a whole managed allocation (its start, "
			                        "length 0 or its size " +
			                        std::to_string(r.userSize) + ")");
		npurt::Stream *s = nullptr;
		return npurt::resolveStream(stream, &s, api);
	} catch (...) {
		return npurt::errorFromException("npurtStreamAttachMemAsync");
	}
}

// C API: versions and devices.
#include <string>

#include "error.h"
#include "runtime.h"

using npurt::Runtime;
using npurt::setError;

namespace {

npurtError_t nullArgument(const char *api, const char *arg)
{
	return setError(npurtErrorInvalidValue, std::string(api) + ": " + arg + " is NULL");
}

}  // namespace

extern "C" {

npurtError_t npurtRuntimeGetVersion(int *version)
{
	if (!version)
		return nullArgument("npurtRuntimeGetVersion", "version");
	*version = NPURT_VERSION;
	return npurtSuccess;
}

npurtError_t npurtDriverGetVersion(int *version)
{
	if (!version)
		return nullArgument("npurtDriverGetVersion", "version");
	Runtime &rt = Runtime::instance();
	// Like CUDA: no driver is version 0, not an error.
	*version = rt.start(false) == npurtSuccess ? rt.device(0).prop().driverApiVersion : 0;
	return npurtSuccess;
}

npurtError_t npurtGetDeviceCount(int *count)
{
	if (!count)
		return nullArgument("npurtGetDeviceCount", "count");
	Runtime &rt = Runtime::instance();
	npurtError_t err = rt.start();
	*count = err == npurtSuccess ? rt.deviceCount() : 0;
	return err;
}

npurtError_t npurtGetDeviceProperties(npurtDeviceProp *prop, int device)
{
	if (!prop)
		return nullArgument("npurtGetDeviceProperties", "prop");
	Runtime &rt = Runtime::instance();
	if (npurtError_t err = rt.start())
		return err;
	if (npurtError_t err = rt.checkOrdinal(device, "npurtGetDeviceProperties"))
		return err;
	*prop = rt.device(device).prop();
	return npurtSuccess;
}

npurtError_t npurtSetDevice(int device)
{
	Runtime &rt = Runtime::instance();
	if (npurtError_t err = rt.start())
		return err;
	if (npurtError_t err = rt.checkOrdinal(device, "npurtSetDevice"))
		return err;
	// As in CUDA: the device's primary context becomes current.
	npurt::setThreadContext(nullptr);
	npurt::threadDevice() = device;
	return npurtSuccess;
}

npurtError_t npurtGetDevice(int *device)
{
	if (!device)
		return nullArgument("npurtGetDevice", "device");
	Runtime &rt = Runtime::instance();
	if (npurtError_t err = rt.start())
		return err;
	*device = npurt::threadDevice();
	return npurtSuccess;
}

}  // extern "C"

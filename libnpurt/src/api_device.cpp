// C API: versions and devices.
#include <string>

#include "error.h"
#include "runtime.h"

using npurt::Runtime;

using npurt::nullArgument;

extern "C" {

npurtError_t npurtRuntimeGetVersion(int *version)
{
	try {
		if (!version)
			return nullArgument("npurtRuntimeGetVersion", "version");
		*version = NPURT_VERSION;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtRuntimeGetVersion");
	}
}

npurtError_t npurtDriverGetVersion(int *version)
{
	try {
		if (!version)
			return nullArgument("npurtDriverGetVersion", "version");
		Runtime &rt = Runtime::instance();
		// Like CUDA: no driver is version 0, not an error.
		*version =
		        rt.start(false) == npurtSuccess ? rt.device(0).prop().driverApiVersion : 0;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDriverGetVersion");
	}
}

npurtError_t npurtGetDeviceCount(int *count)
{
	try {
		if (!count)
			return nullArgument("npurtGetDeviceCount", "count");
		Runtime &rt = Runtime::instance();
		npurtError_t err = rt.start();
		*count = err == npurtSuccess ? rt.deviceCount() : 0;
		return err;
	} catch (...) {
		return npurt::errorFromException("npurtGetDeviceCount");
	}
}

npurtError_t npurtGetDeviceProperties(npurtDeviceProp *prop, int device)
{
	try {
		if (!prop)
			return nullArgument("npurtGetDeviceProperties", "prop");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, "npurtGetDeviceProperties"))
			return err;
		*prop = rt.device(device).prop();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtGetDeviceProperties");
	}
}

npurtError_t npurtSetDevice(int device)
{
	try {
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, "npurtSetDevice"))
			return err;
		// As in CUDA: the device's primary context becomes current.
		npurt::setThreadContext(nullptr);
		npurt::threadDevice() = device;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtSetDevice");
	}
}

npurtError_t npurtGetDevice(int *device)
{
	try {
		if (!device)
			return nullArgument("npurtGetDevice", "device");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		*device = npurt::threadDevice();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtGetDevice");
	}
}

}  // extern "C"

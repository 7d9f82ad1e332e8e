// npurt.hpp - header-only C++ layer over the C API of libnpurt.
//
// Errors become npurt::Error exceptions (which carry the code and the
// runtime's message), unless exceptions are disabled, in which case a failed
// call prints its error and aborts. Handles are RAII and move-only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "npurt/npurt.h"

namespace npurt {

class Error : public std::runtime_error {
public:
	Error(npurtError_t code, const std::string &what) : std::runtime_error(what), code_(code) {}
	npurtError_t code() const noexcept { return code_; }

private:
	npurtError_t code_;
};

// Throws (or aborts) on a failed call, with the error's name and message.
inline void check(npurtError_t err)
{
	if (err == npurtSuccess)
		return;
	std::string what = std::string(npurtGetErrorName(err)) + ": ";
	const char *msg = npurtGetLastErrorMessage();
	what += (msg && *msg) ? msg : npurtGetErrorString(err);
	npurtGetLastError();
#if defined(__cpp_exceptions)
	throw Error(err, what);
#else
	std::fprintf(stderr, "npurt: %s\n", what.c_str());
	std::abort();
#endif
}

// Number of NPUs; 0 (not an error) when there are none.
inline int deviceCount()
{
	int n = 0;
	npurtError_t err = npurtGetDeviceCount(&n);
	if (err == npurtErrorNoDevice) {
		npurtGetLastError();
		return 0;
	}
	check(err);
	return n;
}

inline npurtDeviceProp deviceProperties(int device)
{
	npurtDeviceProp prop{};
	check(npurtGetDeviceProperties(&prop, device));
	return prop;
}

inline int currentDevice()
{
	int dev = 0;
	check(npurtGetDevice(&dev));
	return dev;
}

inline void setDevice(int device)
{
	check(npurtSetDevice(device));
}

// Makes `device` current for a scope and restores the previous one.
class DeviceGuard {
public:
	explicit DeviceGuard(int device) : previous_(currentDevice()) { setDevice(device); }
	~DeviceGuard() { npurtSetDevice(previous_); }
	DeviceGuard(const DeviceGuard &) = delete;
	DeviceGuard &operator=(const DeviceGuard &) = delete;

private:
	int previous_;
};

}  // namespace npurt

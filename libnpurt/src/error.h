// Error recording: each C API call returns its code and records failures as
// the calling thread's last error, with a message naming the cause.
#pragma once

#include <cstdint>
#include <string>

#include "npurt/npurt.h"

namespace npurt {

// Records `code` with `message` as this thread's last error; returns code.
// npurtSuccess and npurtErrorNotReady are statuses and are not recorded.
npurtError_t setError(npurtError_t code, std::string message);

// Maps a negative errno from the kernel to the closest runtime error.
npurtError_t errorFromErrno(int err);

// For a catch (...) in a C API function: records the exception in flight
// (std::bad_alloc: npurtErrorHostMemoryAllocation) and returns its code, so
// no exception crosses the C ABI.
npurtError_t errorFromException(const char *api);

// Returns "what: strerror(err)" for OS failures.
std::string osMessage(const std::string &what, int err);

// npurtErrorInvalidValue with "api: arg is NULL".
npurtError_t nullArgument(const char *api, const char *arg);

// "0x1f000", for addresses in messages.
std::string hexAddr(uint64_t addr);

// A pointer as the address the device and the registries use.
inline uint64_t addrOf(const void *p)
{
	return reinterpret_cast<uint64_t>(p);
}

}  // namespace npurt

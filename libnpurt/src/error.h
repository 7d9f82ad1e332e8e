// Error recording: each C API call returns its code and records failures as
// the calling thread's last error, with a message naming the cause.
#pragma once

#include <string>

#include "npurt/npurt.h"

namespace npurt {

// Records `code` with `message` as this thread's last error; returns code.
// npurtSuccess and npurtErrorNotReady are statuses and are not recorded.
npurtError_t setError(npurtError_t code, std::string message);

// Maps a negative errno from the kernel to the closest runtime error.
npurtError_t errorFromErrno(int err);

// Returns "what: strerror(err)" for OS failures.
std::string osMessage(const std::string &what, int err);

}  // namespace npurt

#include "error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

namespace npurt {
namespace {

struct ThreadError {
	npurtError_t code = npurtSuccess;
	std::string message;
};

ThreadError &threadError()
{
	thread_local ThreadError err;
	return err;
}

struct ErrorInfo {
	npurtError_t code;
	const char *name;
	const char *text;
};

constexpr ErrorInfo kErrors[] = {
        {npurtSuccess, "npurtSuccess", "no error"},
        {npurtErrorInvalidValue, "npurtErrorInvalidValue", "invalid argument"},
        {npurtErrorMemoryAllocation, "npurtErrorMemoryAllocation", "out of device memory"},
        {npurtErrorInitializationError, "npurtErrorInitializationError",
         "the runtime failed to initialise"},
        {npurtErrorNoDevice, "npurtErrorNoDevice", "no NPU is available"},
        {npurtErrorInvalidDevice, "npurtErrorInvalidDevice", "invalid device ordinal"},
        {npurtErrorInsufficientDriver, "npurtErrorInsufficientDriver",
         "the NPU kernel driver's interface version is not supported by this runtime"},
        {npurtErrorNotReady, "npurtErrorNotReady", "work is still pending"},
        {npurtErrorTimeout, "npurtErrorTimeout", "the wait timed out"},
        {npurtErrorNotSupported, "npurtErrorNotSupported", "operation not supported"},
        {npurtErrorInvalidHandle, "npurtErrorInvalidHandle", "invalid or foreign handle"},
        {npurtErrorDeviceFault, "npurtErrorDeviceFault", "the device faulted on a memory access"},
        {npurtErrorLaunchFailure, "npurtErrorLaunchFailure", "an operation failed on the device"},
        {npurtErrorLaunchTimeout, "npurtErrorLaunchTimeout",
         "device work timed out and the engine was reset"},
        {npurtErrorHostMemoryAllocation, "npurtErrorHostMemoryAllocation", "out of host memory"},
        {npurtErrorPermission, "npurtErrorPermission", "permission denied"},
        {npurtErrorOperatingSystem, "npurtErrorOperatingSystem", "operating system call failed"},
        {npurtErrorHostMemoryAlreadyRegistered, "npurtErrorHostMemoryAlreadyRegistered",
         "the host range overlaps a registered or pinned one"},
        {npurtErrorHostMemoryNotRegistered, "npurtErrorHostMemoryNotRegistered",
         "the pointer is not registered host memory"},
        {npurtErrorPeerAccessUnsupported, "npurtErrorPeerAccessUnsupported",
         "direct access between these NPUs is not supported"},
        {npurtErrorPeerAccessNotEnabled, "npurtErrorPeerAccessNotEnabled",
         "peer access was not enabled"},
        {npurtErrorPeerAccessAlreadyEnabled, "npurtErrorPeerAccessAlreadyEnabled",
         "peer access is already enabled"},
        {npurtErrorIllegalState, "npurtErrorIllegalState",
         "the resource is not in a valid state to perform the operation"},
        {npurtErrorStreamCaptureUnsupported, "npurtErrorStreamCaptureUnsupported",
         "operation not permitted when stream is capturing"},
        {npurtErrorStreamCaptureInvalidated, "npurtErrorStreamCaptureInvalidated",
         "operation failed due to a previous error during capture"},
        {npurtErrorStreamCaptureMerge, "npurtErrorStreamCaptureMerge",
         "operation would result in a merge of separate capture sequences"},
        {npurtErrorStreamCaptureUnmatched, "npurtErrorStreamCaptureUnmatched",
         "capture was not ended in the same stream as it began"},
        {npurtErrorStreamCaptureUnjoined, "npurtErrorStreamCaptureUnjoined",
         "capturing stream has unjoined work"},
        {npurtErrorStreamCaptureIsolation, "npurtErrorStreamCaptureIsolation",
         "dependency created on uncaptured work in another stream"},
        {npurtErrorStreamCaptureImplicit, "npurtErrorStreamCaptureImplicit",
         "operation would make the legacy stream depend on a capturing blocking stream"},
        {npurtErrorCapturedEvent, "npurtErrorCapturedEvent",
         "operation not permitted on an event last recorded in a capturing stream"},
        {npurtErrorStreamCaptureWrongThread, "npurtErrorStreamCaptureWrongThread",
         "attempt to terminate a thread-local capture sequence from another thread"},
        {npurtErrorGraphExecUpdateFailure, "npurtErrorGraphExecUpdateFailure",
         "the graph update was not performed because it included changes which violated "
         "constraints specific to instantiated graph update"},
        {npurtErrorUnknown, "npurtErrorUnknown", "unknown error"},
};

const ErrorInfo *findError(npurtError_t code)
{
	for (const auto &e : kErrors)
		if (e.code == code)
			return &e;
	return nullptr;
}

}  // namespace

npurtError_t setError(npurtError_t code, std::string message)
{
	if (code == npurtSuccess || code == npurtErrorNotReady)
		return code;
	auto &err = threadError();
	err.code = code;
	err.message = std::move(message);
	return code;
}

npurtError_t errorFromErrno(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return npurtSuccess;
	case EINVAL:
	case EFAULT:
	case EOVERFLOW:
	case ERANGE:
		return npurtErrorInvalidValue;
	case ENOMEM:
	// A driver limit on what one context holds (VM_BIND past
	// DRM_NPU_MAX_MAPPINGS); the message names the call and strerror.
	case ENOSPC:
		return npurtErrorMemoryAllocation;
	case ENOENT:
	case ENODEV:
	case ENXIO:
		return npurtErrorNoDevice;
	case EACCES:
	case EPERM:
		return npurtErrorPermission;
	case ETIME:
	case ETIMEDOUT:
		return npurtErrorTimeout;
	case EBUSY:
	case EAGAIN:
		return npurtErrorNotReady;
	case ENOTTY:
	case EOPNOTSUPP:
		return npurtErrorNotSupported;
	default:
		return npurtErrorOperatingSystem;
	}
}

npurtError_t errorFromException(const char *api)
{
	try {
		throw;
	} catch (const std::bad_alloc &) {
		return setError(npurtErrorHostMemoryAllocation,
		                std::string(api) + ": out of host memory");
	} catch (const std::exception &e) {
		return setError(npurtErrorUnknown, std::string(api) + ": " + e.what());
	} catch (...) {
		return setError(npurtErrorUnknown, std::string(api) + ": unexpected exception");
	}
}

std::string osMessage(const std::string &what, int err)
{
	return what + ": " + std::strerror(err < 0 ? -err : err);
}

npurtError_t nullArgument(const char *api, const char *arg)
{
	return setError(npurtErrorInvalidValue, std::string(api) + ": " + arg + " is NULL");
}

std::string hexAddr(uint64_t addr)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(addr));
	return buf;
}

}  // namespace npurt

extern "C" {

const char *npurtGetErrorName(npurtError_t error)
{
	const auto *e = npurt::findError(error);
	return e ? e->name : "npurtErrorUnrecognized";
}

const char *npurtGetErrorString(npurtError_t error)
{
	const auto *e = npurt::findError(error);
	return e ? e->text : "unrecognized error code";
}

npurtError_t npurtGetLastError(void)
{
	auto &err = npurt::threadError();
	npurtError_t code = err.code;
	err.code = npurtSuccess;
	err.message.clear();
	return code;
}

npurtError_t npurtPeekAtLastError(void)
{
	return npurt::threadError().code;
}

const char *npurtGetLastErrorMessage(void)
{
	return npurt::threadError().message.c_str();
}

}  // extern "C"

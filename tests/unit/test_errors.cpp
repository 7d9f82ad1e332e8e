// Error names, strings and the per-thread last error.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "error.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

const npurtError_t kAllErrors[] = {
        npurtSuccess,
        npurtErrorInvalidValue,
        npurtErrorMemoryAllocation,
        npurtErrorInitializationError,
        npurtErrorNoDevice,
        npurtErrorInvalidDevice,
        npurtErrorInsufficientDriver,
        npurtErrorNotReady,
        npurtErrorTimeout,
        npurtErrorNotSupported,
        npurtErrorInvalidHandle,
        npurtErrorDeviceFault,
        npurtErrorLaunchFailure,
        npurtErrorLaunchTimeout,
        npurtErrorHostMemoryAllocation,
        npurtErrorPermission,
        npurtErrorOperatingSystem,
        npurtErrorHostMemoryAlreadyRegistered,
        npurtErrorHostMemoryNotRegistered,
        npurtErrorPeerAccessUnsupported,
        npurtErrorPeerAccessNotEnabled,
        npurtErrorPeerAccessAlreadyEnabled,
        npurtErrorIllegalState,
        npurtErrorStreamCaptureUnsupported,
        npurtErrorStreamCaptureInvalidated,
        npurtErrorStreamCaptureMerge,
        npurtErrorStreamCaptureUnmatched,
        npurtErrorStreamCaptureUnjoined,
        npurtErrorStreamCaptureIsolation,
        npurtErrorStreamCaptureImplicit,
        npurtErrorCapturedEvent,
        npurtErrorStreamCaptureWrongThread,
        npurtErrorGraphExecUpdateFailure,
        npurtErrorUnknown,
};

// Codes are numbered without gaps up to the last general one, and the
// state and capture codes take CUDA's numbers (401, 900-910) (only added, never renumbered):
// every one of them has a name (17 and 18 once had none).
TEST(Errors, CodesAreContiguousAndAllNamed)
{
	for (int c = npurtSuccess; c <= npurtErrorPeerAccessAlreadyEnabled; c++)
		EXPECT_STRNE(npurtGetErrorName(static_cast<npurtError_t>(c)),
		             "npurtErrorUnrecognized")
		        << c;
	EXPECT_STREQ(npurtGetErrorName(npurtErrorIllegalState), "npurtErrorIllegalState");
	for (int c = npurtErrorStreamCaptureUnsupported; c <= npurtErrorGraphExecUpdateFailure; c++)
		if (c != 909) {  // CUDA's cudaErrorTimeout: npurtErrorTimeout is 8
			EXPECT_STRNE(npurtGetErrorName(static_cast<npurtError_t>(c)),
			             "npurtErrorUnrecognized")
			        << c;
		}
	EXPECT_EQ(std::size(kAllErrors),
	          static_cast<size_t>(npurtErrorPeerAccessAlreadyEnabled) + 2 + 11);
}

TEST(Errors, EveryCodeHasADistinctNameAndString)
{
	std::set<std::string> names, strings;
	for (npurtError_t e : kAllErrors) {
		std::string name = npurtGetErrorName(e);
		std::string text = npurtGetErrorString(e);
		EXPECT_EQ(name.rfind("npurt", 0), 0u) << name;
		EXPECT_NE(name, "npurtErrorUnrecognized");
		EXPECT_FALSE(text.empty());
		names.insert(name);
		strings.insert(text);
	}
	EXPECT_EQ(names.size(), std::size(kAllErrors));
	EXPECT_EQ(strings.size(), std::size(kAllErrors));
	EXPECT_STREQ(npurtGetErrorName(npurtSuccess), "npurtSuccess");
}

TEST(Errors, UnknownCodeIsNamedAsSuch)
{
	auto bogus = static_cast<npurtError_t>(12345);
	EXPECT_STREQ(npurtGetErrorName(bogus), "npurtErrorUnrecognized");
	EXPECT_STREQ(npurtGetErrorString(bogus), "unrecognized error code");
}

TEST(Errors, LastErrorIsStickyUntilRead)
{
	npurtGetLastError();
	EXPECT_EQ(npurt::setError(npurtErrorInvalidValue, "first"), npurtErrorInvalidValue);
	EXPECT_EQ(npurtPeekAtLastError(), npurtErrorInvalidValue);
	EXPECT_STREQ(npurtGetLastErrorMessage(), "first");
	EXPECT_EQ(npurtPeekAtLastError(), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGetLastError(), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGetLastError(), npurtSuccess);
	EXPECT_STREQ(npurtGetLastErrorMessage(), "");
}

TEST(Errors, NotReadyIsAStatusNotAnError)
{
	npurtGetLastError();
	EXPECT_EQ(npurt::setError(npurtErrorNotReady, "pending"), npurtErrorNotReady);
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess);
}

TEST(Errors, LastErrorIsPerThread)
{
	npurtGetLastError();
	npurt::setError(npurtErrorTimeout, "main thread");
	npurtError_t other = npurtErrorUnknown;
	std::string otherMsg = "unset";
	std::thread t([&] {
		other = npurtPeekAtLastError();
		npurt::setError(npurtErrorInvalidDevice, "worker");
		otherMsg = npurtGetLastErrorMessage();
	});
	t.join();
	EXPECT_EQ(other, npurtSuccess);
	EXPECT_EQ(otherMsg, "worker");
	EXPECT_EQ(npurtPeekAtLastError(), npurtErrorTimeout);
	EXPECT_STREQ(npurtGetLastErrorMessage(), "main thread");
	npurtGetLastError();
}

TEST(Errors, ErrnoMapping)
{
	EXPECT_EQ(npurt::errorFromErrno(0), npurtSuccess);
	EXPECT_EQ(npurt::errorFromErrno(-EINVAL), npurtErrorInvalidValue);
	EXPECT_EQ(npurt::errorFromErrno(-ENOMEM), npurtErrorMemoryAllocation);
	EXPECT_EQ(npurt::errorFromErrno(-EACCES), npurtErrorPermission);
	EXPECT_EQ(npurt::errorFromErrno(-ETIME), npurtErrorTimeout);
	EXPECT_EQ(npurt::errorFromErrno(-ENODEV), npurtErrorNoDevice);
	EXPECT_EQ(npurt::errorFromErrno(-EIO), npurtErrorOperatingSystem);
}

TEST(Errors, CppCheckThrowsWithCodeAndMessage)
{
	npurt::setError(npurtErrorInvalidDevice, "device 9 requested");
	try {
		npurt::check(npurtErrorInvalidDevice);
		FAIL() << "check() did not throw";
	} catch (const npurt::Error &e) {
		EXPECT_EQ(e.code(), npurtErrorInvalidDevice);
		EXPECT_NE(std::string(e.what()).find("npurtErrorInvalidDevice"), std::string::npos);
		EXPECT_NE(std::string(e.what()).find("device 9 requested"), std::string::npos);
	}
	// check() consumed the error.
	EXPECT_EQ(npurtPeekAtLastError(), npurtSuccess);
	EXPECT_NO_THROW(npurt::check(npurtSuccess));
}

TEST(Errors, RuntimeVersion)
{
	int v = -1;
	EXPECT_EQ(npurtRuntimeGetVersion(&v), npurtSuccess);
	EXPECT_EQ(v, NPURT_VERSION);
	EXPECT_EQ(npurtRuntimeGetVersion(nullptr), npurtErrorInvalidValue);
	EXPECT_NE(std::string(npurtGetLastErrorMessage()).find("version is NULL"),
	          std::string::npos);
	npurtGetLastError();
}

}  // namespace

// Device discovery and selection against a fake driver.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"
#include "runtime.h"

using npurt::testing::FakeSystem;
using npurt::testing::installFake;
using npurt::testing::makeNode;

namespace {

class Discovery : public ::testing::Test {
protected:
	void SetUp() override
	{
		unsetenv("NPURT_VISIBLE_DEVICES");
		unsetenv("ASCEND_RT_VISIBLE_DEVICES");
		npurtGetLastError();
		npurtSetDevice(0);
	}
	void TearDown() override
	{
		unsetenv("NPURT_VISIBLE_DEVICES");
		unsetenv("ASCEND_RT_VISIBLE_DEVICES");
		npurtGetLastError();
		npurt::Runtime::resetForTesting(nullptr);
	}
	static bool contains(const char *haystack, const std::string &needle)
	{
		return std::string(haystack).find(needle) != std::string::npos;
	}
};

TEST_F(Discovery, NoDeviceIsReportedWithAHint)
{
	installFake({});
	int n = -1;
	EXPECT_EQ(npurtGetDeviceCount(&n), npurtErrorNoDevice);
	EXPECT_EQ(n, 0);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "npu.ko")) << npurtGetLastErrorMessage();
	// Sticky: later calls say the same.
	EXPECT_EQ(npurtSetDevice(0), npurtErrorNoDevice);
	npurtDeviceProp p;
	EXPECT_EQ(npurtGetDeviceProperties(&p, 0), npurtErrorNoDevice);
	EXPECT_EQ(npurt::deviceCount(), 0);
	int v = -1;
	EXPECT_EQ(npurtDriverGetVersion(&v), npurtSuccess);
	EXPECT_EQ(v, 0);
}

TEST_F(Discovery, PermissionProblemsAreNamed)
{
	FakeSystem sys;
	sys.failures = {"open /dev/dri/renderD128: Permission denied"};
	sys.firstError = EACCES;
	installFake(sys);
	int n = -1;
	EXPECT_EQ(npurtGetDeviceCount(&n), npurtErrorNoDevice);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "renderD128: Permission denied"));
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "render"));
}

TEST_F(Discovery, DevicesAreOrderedByDriverIndex)
{
	FakeSystem sys;
	sys.nodes = {makeNode(2), makeNode(0), makeNode(1)};
	installFake(sys);
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	ASSERT_EQ(n, 3);
	for (int d = 0; d < n; d++) {
		npurtDeviceProp p{};
		ASSERT_EQ(npurtGetDeviceProperties(&p, d), npurtSuccess);
		EXPECT_EQ(p.deviceIndex, d);
		EXPECT_EQ(p.totalGlobalMem, (1ULL << 30) * (d + 1));
		EXPECT_EQ(p.engineCount, 4);
		EXPECT_EQ(p.copyEngineCount, 2);
		EXPECT_EQ(p.computeEngineCount, 2);
		EXPECT_EQ(p.emulated, 1);
		EXPECT_STREQ(p.name, "fake-npu");
		EXPECT_EQ(std::string(p.devicePath), "/dev/dri/renderD" + std::to_string(128 + d));
		EXPECT_EQ(p.driverApiVersion,
		          DRM_NPU_API_VERSION_MAJOR * 1000 + DRM_NPU_API_VERSION_MINOR * 10);
	}
}

TEST_F(Discovery, UnterminatedNameIsCutSafely)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0)};
	std::memset(sys.nodes[0].info.name, 'x', sizeof(sys.nodes[0].info.name));
	installFake(sys);
	npurtDeviceProp p{};
	ASSERT_EQ(npurtGetDeviceProperties(&p, 0), npurtSuccess);
	EXPECT_EQ(std::string(p.name), std::string(32, 'x'));
}

TEST_F(Discovery, IncompatibleDriverIsRejected)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0, (DRM_NPU_API_VERSION_MAJOR + 1) << 16)};
	installFake(sys);
	int n = -1;
	EXPECT_EQ(npurtGetDeviceCount(&n), npurtErrorInsufficientDriver);
	EXPECT_EQ(n, 0);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "uAPI")) << npurtGetLastErrorMessage();
}

TEST_F(Discovery, FailedQuerySkipsOnlyThatDevice)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1)};
	sys.nodes[0].queryErrno = EIO;
	installFake(sys);
	int n = -1;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	EXPECT_EQ(n, 1);
	npurtDeviceProp p{};
	ASSERT_EQ(npurtGetDeviceProperties(&p, 0), npurtSuccess);
	EXPECT_EQ(p.deviceIndex, 1);
}

TEST_F(Discovery, InvalidOrdinalsAndNullArguments)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1)};
	installFake(sys);
	npurtDeviceProp p{};
	EXPECT_EQ(npurtGetDeviceProperties(&p, 2), npurtErrorInvalidDevice);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "device 2 requested, 2 NPU(s) present"))
	        << npurtGetLastErrorMessage();
	EXPECT_EQ(npurtGetDeviceProperties(&p, -1), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtSetDevice(2), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtSetDevice(-5), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtGetDeviceProperties(nullptr, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGetDeviceCount(nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGetDevice(nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDriverGetVersion(nullptr), npurtErrorInvalidValue);
	// A failed SetDevice leaves the current device alone.
	int cur = -1;
	ASSERT_EQ(npurtGetDevice(&cur), npurtSuccess);
	EXPECT_EQ(cur, 0);
}

TEST_F(Discovery, CurrentDeviceIsPerThread)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1), makeNode(2), makeNode(3)};
	installFake(sys);
	ASSERT_EQ(npurtSetDevice(3), npurtSuccess);
	std::vector<int> before(4, -1), after(4, -1);
	std::vector<std::thread> threads;
	for (int i = 0; i < 4; i++) {
		threads.emplace_back([i, &before, &after] {
			npurtGetDevice(&before[i]);
			npurtSetDevice(i);
			npurtGetDevice(&after[i]);
		});
	}
	for (auto &t : threads)
		t.join();
	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(before[i], 0) << "a new thread starts on device 0";
		EXPECT_EQ(after[i], i);
	}
	int cur = -1;
	npurtGetDevice(&cur);
	EXPECT_EQ(cur, 3);
	{
		npurt::DeviceGuard g(1);
		EXPECT_EQ(npurt::currentDevice(), 1);
	}
	EXPECT_EQ(npurt::currentDevice(), 3);
}

TEST_F(Discovery, ConcurrentFirstCallsDiscoverOnce)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1)};
	installFake(sys);
	std::vector<int> counts(8, -1);
	std::vector<std::thread> threads;
	for (int i = 0; i < 8; i++)
		threads.emplace_back([i, &counts] { npurtGetDeviceCount(&counts[i]); });
	for (auto &t : threads)
		t.join();
	for (int c : counts)
		EXPECT_EQ(c, 2);
	EXPECT_EQ(npurt::testing::openCount(), 1);
}

TEST_F(Discovery, VisibleDevicesSelectsAndReorders)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1), makeNode(2)};
	installFake(sys);
	setenv("NPURT_VISIBLE_DEVICES", "2,0", 1);
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	ASSERT_EQ(n, 2);
	npurtDeviceProp p{};
	npurtGetDeviceProperties(&p, 0);
	EXPECT_EQ(p.deviceIndex, 2);
	npurtGetDeviceProperties(&p, 1);
	EXPECT_EQ(p.deviceIndex, 0);
}

// CANN's name, for programs written for Ascend NPUs; ours wins. Empty hides
// every NPU, as CUDA_VISIBLE_DEVICES="" does.
TEST_F(Discovery, VisibleDevicesUnderCannsNameAndEmpty)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1), makeNode(2)};
	installFake(sys);
	setenv("ASCEND_RT_VISIBLE_DEVICES", "1", 1);
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	ASSERT_EQ(n, 1);
	npurtDeviceProp p{};
	npurtGetDeviceProperties(&p, 0);
	EXPECT_EQ(p.deviceIndex, 1);

	FakeSystem both;
	both.nodes = {makeNode(0), makeNode(1), makeNode(2)};
	installFake(both);
	setenv("NPURT_VISIBLE_DEVICES", "2,0", 1);
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	EXPECT_EQ(n, 2) << "NPURT_VISIBLE_DEVICES wins";

	for (const char *name : {"NPURT_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"}) {
		FakeSystem none;
		none.nodes = {makeNode(0), makeNode(1)};
		installFake(none);
		unsetenv("NPURT_VISIBLE_DEVICES");
		setenv(name, "", 1);
		n = -1;
		EXPECT_EQ(npurtGetDeviceCount(&n), npurtErrorNoDevice) << name;
		EXPECT_EQ(n, 0);
		EXPECT_TRUE(contains(npurtGetLastErrorMessage(),
		                     std::string(name) + " is set but empty"))
		        << npurtGetLastErrorMessage();
		npurtGetLastError();
	}

	FakeSystem bad;
	bad.nodes = {makeNode(0)};
	installFake(bad);
	setenv("ASCEND_RT_VISIBLE_DEVICES", "0,x", 1);
	EXPECT_EQ(npurtGetDeviceCount(&n), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(npurtGetLastErrorMessage(), "ASCEND_RT_VISIBLE_DEVICES='0,x'"))
	        << npurtGetLastErrorMessage();
	npurtGetLastError();
}

TEST_F(Discovery, VisibleDevicesRejectsBadLists)
{
	const struct {
		const char *value;
		npurtError_t code;
		const char *says;
	} cases[] = {
	        {"0,x", npurtErrorInvalidValue, "'x' is not a device index"},
	        {"0,,1", npurtErrorInvalidValue, "is not a device index"},
	        {"-1", npurtErrorInvalidValue, "is not a device index"},
	        {"1,1", npurtErrorInvalidValue, "twice"},
	        {"7", npurtErrorInvalidDevice, "device 7, which does not exist"},
	};
	for (const auto &c : cases) {
		FakeSystem sys;
		sys.nodes = {makeNode(0), makeNode(1)};
		installFake(sys);
		setenv("NPURT_VISIBLE_DEVICES", c.value, 1);
		int n = -1;
		EXPECT_EQ(npurtGetDeviceCount(&n), c.code) << c.value;
		EXPECT_EQ(n, 0) << c.value;
		EXPECT_TRUE(contains(npurtGetLastErrorMessage(), c.says))
		        << c.value << ": " << npurtGetLastErrorMessage();
		npurtGetLastError();
	}
}

}  // namespace

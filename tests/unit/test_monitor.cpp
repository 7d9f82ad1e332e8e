// Device monitoring against a fake driver: the fdinfo parser, utilisation
// arithmetic, and npurtDeviceGetProcesses over what /proc would show.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_driver.h"
#include "monitor.h"
#include "npurt/npurt.h"
#include "runtime.h"

using npurt::testing::FakeSystem;
using npurt::testing::installFake;
using npurt::testing::makeNode;

namespace {

// What kernel/npu_fdinfo.c prints for one file.
const char *kFdinfo = "pos:\t0\n"
                      "flags:\t02100002\n"
                      "mnt_id:\t25\n"
                      "ino:\t1051\n"
                      "drm-driver:\tnpu\n"
                      "drm-client-id:\t17\n"
                      "drm-engine-copy:\t1500 ns\n"
                      "drm-engine-capacity-copy:\t2\n"
                      "drm-engine-compute:\t900000 ns\n"
                      "drm-engine-capacity-compute:\t2\n"
                      "drm-total-device:\t4096 KiB\n"
                      "drm-total-host:\t8 KiB\n"
                      "npu-device:\t1\n"
                      "npu-queues:\t3\n";

TEST(Fdinfo, ParsesTheDriversKeys)
{
	npurt::os::ClientUsage c;
	c.pid = 42;
	ASSERT_TRUE(npurt::os::parseFdinfo(kFdinfo, &c));
	EXPECT_EQ(c.pid, 42);
	EXPECT_EQ(c.clientId, 17u);
	EXPECT_EQ(c.deviceIndex, 1u);
	EXPECT_EQ(c.queues, 3u);
	EXPECT_EQ(c.deviceBytes, 4096u << 10);
	EXPECT_EQ(c.hostBytes, 8u << 10);
	EXPECT_EQ(c.copyBusyNs, 1500u);
	EXPECT_EQ(c.computeBusyNs, 900000u);
}

TEST(Fdinfo, OtherDriversAndPartialTextsAreNotOurs)
{
	npurt::os::ClientUsage c;
	c.pid = 7;
	std::string other(kFdinfo);
	other.replace(other.find("\tnpu\n"), 5, "\ti915\n");
	EXPECT_FALSE(npurt::os::parseFdinfo(other, &c));
	EXPECT_FALSE(npurt::os::parseFdinfo("pos:\t0\nflags:\t02\n", &c));
	// No device index: a file of an older driver, or a cut text.
	std::string cut(kFdinfo);
	cut.erase(cut.find("npu-device"));
	EXPECT_FALSE(npurt::os::parseFdinfo(cut, &c));
	EXPECT_EQ(c.pid, 7) << "left as it was";
	EXPECT_EQ(c.clientId, 0u);
}

npurt::EngineSample sample(uint64_t at, uint64_t copyBusy, uint64_t computeBusy)
{
	npurt::EngineSample s;
	s.sampleNs = at;
	s.busyNs[DRM_NPU_ENGINE_COPY] = copyBusy;
	s.busyNs[DRM_NPU_ENGINE_COMPUTE] = computeBusy;
	s.engines[DRM_NPU_ENGINE_COPY] = 2;
	s.engines[DRM_NPU_ENGINE_COMPUTE] = 4;
	return s;
}

TEST(Utilization, IsTheMeanBusyShareOfEachClass)
{
	// 1 s window: compute engines busy 2 s of 4 engine-seconds, copy 0.5 of 2.
	npurtUtilization u = npurt::utilizationBetween(sample(1000000000, 100, 5000),
	                                               sample(2000000000, 500000100, 2000005000));
	EXPECT_EQ(u.windowNs, 1000000000u);
	EXPECT_EQ(u.compute, 50u);
	EXPECT_EQ(u.copy, 25u);
	EXPECT_EQ(u.computeEngines, 4u);
	EXPECT_EQ(u.copyEngines, 2u);
	EXPECT_EQ(u.computeBusyNs, 2000005000u);
	EXPECT_EQ(u.sampleNs, 2000000000u);
}

TEST(Utilization, IsCappedEmptyWindowsAreIdleAndResetsReadIdle)
{
	// A long job ending inside a short window counts whole: capped.
	npurtUtilization u = npurt::utilizationBetween(sample(0, 0, 0), sample(1000, 0, 900000));
	EXPECT_EQ(u.compute, 100u);
	u = npurt::utilizationBetween(sample(5000, 0, 0), sample(5000, 0, 900000));
	EXPECT_EQ(u.windowNs, 0u);
	EXPECT_EQ(u.compute, 0u);
	// Counters that went back (the driver reloaded): idle, not huge.
	u = npurt::utilizationBetween(sample(1000, 9000, 9000), sample(2000, 10, 10));
	EXPECT_EQ(u.compute, 0u);
	EXPECT_EQ(u.copy, 0u);
	// Hours of busy time do not overflow the arithmetic.
	const uint64_t hour = 3600ull * 1000000000;
	u = npurt::utilizationBetween(sample(0, 0, 0), sample(10 * hour, 0, 30 * hour));
	EXPECT_EQ(u.compute, 75u);
}

class Processes : public ::testing::Test {
protected:
	void TearDown() override
	{
		npurtGetLastError();
		npurt::Runtime::resetForTesting(nullptr);
	}
	static npurt::os::ClientUsage client(long pid, uint64_t id, uint32_t device, uint64_t bytes)
	{
		npurt::os::ClientUsage c;
		c.pid = pid;
		c.clientId = id;
		c.deviceIndex = device;
		c.deviceBytes = bytes;
		c.queues = 1;
		c.computeBusyNs = 10;
		return c;
	}
};

TEST_F(Processes, OneEntryPerProcessOfThatDeviceInPidOrder)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0), makeNode(1)};
	sys.clients = {client(300, 1, 0, 100), client(200, 2, 0, 50), client(300, 3, 0, 20),
	               client(400, 4, 1, 70)};
	sys.names = {{200, "python3"}, {300, "a-name-longer-than-thirty-two-characters"}};
	installFake(sys);
	unsigned n = 0;
	ASSERT_EQ(npurtDeviceGetProcesses(0, nullptr, &n), npurtSuccess)
	        << npurtGetLastErrorMessage();
	ASSERT_EQ(n, 2u);
	std::vector<npurtProcessInfo> ps(n);
	ASSERT_EQ(npurtDeviceGetProcesses(0, ps.data(), &n), npurtSuccess);
	EXPECT_EQ(ps[0].pid, 200);
	EXPECT_STREQ(ps[0].name, "python3");
	EXPECT_EQ(ps[0].contexts, 1u);
	EXPECT_EQ(ps[1].pid, 300);
	EXPECT_EQ(ps[1].contexts, 2u);
	EXPECT_EQ(ps[1].deviceBytes, 120u);
	EXPECT_EQ(ps[1].queues, 2u);
	EXPECT_EQ(ps[1].computeBusyNs, 20u);
	EXPECT_EQ(std::string(ps[1].name), std::string("a-name-longer-than-thirty-two-characters")
	                                           .substr(0, sizeof(ps[1].name) - 1));
	// Device 1 has its own process only.
	n = 4;
	ps.assign(4, npurtProcessInfo{});
	ASSERT_EQ(npurtDeviceGetProcesses(1, ps.data(), &n), npurtSuccess);
	ASSERT_EQ(n, 1u);
	EXPECT_EQ(ps[0].pid, 400);
	EXPECT_STREQ(ps[0].name, "") << "a name /proc did not give";
}

TEST_F(Processes, ASmallArrayIsAnErrorThatGivesTheCount)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0)};
	sys.clients = {client(1, 1, 0, 0), client(2, 2, 0, 0), client(3, 3, 0, 0)};
	installFake(sys);
	npurtProcessInfo two[2] = {};
	two[1].pid = -5;
	unsigned n = 2;
	EXPECT_EQ(npurtDeviceGetProcesses(0, two, &n), npurtErrorInvalidValue);
	EXPECT_EQ(n, 3u);
	EXPECT_NE(std::string(npurtGetLastErrorMessage()).find("3 processes"), std::string::npos)
	        << npurtGetLastErrorMessage();
	EXPECT_EQ(two[1].pid, -5) << "nothing written";
}

TEST_F(Processes, UtilizationReportsADriverThatCannotBeRead)
{
	FakeSystem sys;
	sys.nodes = {makeNode(0)};
	installFake(sys);
	// The fake answers only the device-info query.
	npurtUtilization u{};
	EXPECT_EQ(npurtDeviceGetUtilization(0, &u), npurtErrorInvalidValue);
	EXPECT_NE(
	        std::string(npurtGetLastErrorMessage()).find("engine query on /dev/dri/renderD128"),
	        std::string::npos)
	        << npurtGetLastErrorMessage();
}

}  // namespace

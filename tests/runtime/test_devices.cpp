// Device discovery against the real module (run in the VM). The expected
// shape comes from the module's parameters in sysfs, so the same suite runs
// with any num_devices.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

unsigned long moduleParam(const char *name)
{
	std::ifstream f(std::string("/sys/module/npu/parameters/") + name);
	unsigned long v = 0;
	f >> v;
	return v;
}

class Devices : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_TRUE(std::ifstream("/sys/module/npu/parameters/num_devices").good())
		        << "npu.ko is not loaded";
		npurtGetLastError();
	}
};

TEST_F(Devices, CountMatchesModuleParameter)
{
	int n = -1;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess) << npurtGetLastErrorMessage();
	EXPECT_EQ(n, static_cast<int>(moduleParam("num_devices")));
	if (const char *want = std::getenv("NPU_EXPECT_DEVICES")) {
		EXPECT_EQ(n, std::atoi(want));
	}
}

TEST_F(Devices, PropertiesMatchModuleParameters)
{
	int n = npurt::deviceCount();
	ASSERT_GT(n, 0);
	std::set<std::string> paths;
	for (int d = 0; d < n; d++) {
		npurtDeviceProp p = npurt::deviceProperties(d);
		EXPECT_EQ(p.deviceIndex, d);
		EXPECT_STREQ(p.name, "npu-emu");
		EXPECT_EQ(p.totalGlobalMem, moduleParam("mem_size_mb") << 20);
		EXPECT_EQ(p.copyEngineCount, static_cast<int>(moduleParam("copy_engines")));
		EXPECT_EQ(p.computeEngineCount, static_cast<int>(moduleParam("compute_engines")));
		EXPECT_EQ(p.engineCount, p.copyEngineCount + p.computeEngineCount);
		EXPECT_EQ(p.emulated, 1);
		EXPECT_TRUE(p.capabilities & npurtDeviceCapEmulated);
		EXPECT_EQ(p.clockRateHz, 1000000000u);
		EXPECT_LT(p.vaStart, p.vaEnd);
		EXPECT_EQ(p.driverApiVersion, 1020);  // uAPI 1.2
		struct stat st;
		EXPECT_EQ(stat(p.devicePath, &st), 0) << p.devicePath;
		EXPECT_TRUE(S_ISCHR(st.st_mode));
		paths.insert(p.devicePath);
		for (unsigned char b : p.reserved)
			ASSERT_EQ(b, 0);
	}
	EXPECT_EQ(paths.size(), static_cast<size_t>(n)) << "each NPU has its own node";
}

// The node is an accel node on kernels with drivers/accel (6.2+, the
// Debian 13 lane), a render node before; the debugfs folder is each
// NPU's own (the one whose npu_memory names its capacity), and "" for a
// process that cannot see debugfs.
TEST_F(Devices, NodeKindAndDebugfsFolderMatchTheKernel)
{
	struct stat st {};
	const bool accel = stat("/sys/class/accel", &st) == 0;
	const bool seesDebugfs = geteuid() == 0 && access("/sys/kernel/debug/dri", R_OK) == 0;
	std::set<std::string> dirs;
	for (int d = 0; d < npurt::deviceCount(); d++) {
		npurtDeviceProp p = npurt::deviceProperties(d);
		const std::string node = p.devicePath, dir = p.debugfsPath;
		EXPECT_EQ(node.rfind(accel ? "/dev/accel/accel" : "/dev/dri/renderD", 0), 0u)
		        << node;
		if (!seesDebugfs) {
			EXPECT_EQ(dir, "");
			continue;
		}
		EXPECT_EQ(
		        dir.rfind(accel ? "/sys/kernel/debug/accel/" : "/sys/kernel/debug/dri/", 0),
		        0u)
		        << dir;
		std::ifstream f(dir + "/npu_memory");
		std::string key;
		unsigned long long capacity = 0;
		ASSERT_TRUE(f >> key >> capacity) << dir << "/npu_memory";
		EXPECT_EQ(key, "capacity:");
		EXPECT_EQ(capacity, p.totalGlobalMem) << dir;
		dirs.insert(dir);
	}
	if (seesDebugfs) {
		EXPECT_EQ(dirs.size(), static_cast<size_t>(npurt::deviceCount()));
	}
}

TEST_F(Devices, DriverVersion)
{
	int v = 0;
	ASSERT_EQ(npurtDriverGetVersion(&v), npurtSuccess);
	EXPECT_EQ(v, 1020);  // uAPI 1.2: the driver's statistics queries
}

TEST_F(Devices, InvalidOrdinalNamesTheCount)
{
	int n = npurt::deviceCount();
	npurtDeviceProp p{};
	EXPECT_EQ(npurtGetDeviceProperties(&p, n), npurtErrorInvalidDevice);
	std::string msg = npurtGetLastErrorMessage();
	EXPECT_NE(msg.find(std::to_string(n) + " NPU(s) present"), std::string::npos) << msg;
	EXPECT_EQ(npurtGetLastError(), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtSetDevice(n), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtSetDevice(-1), npurtErrorInvalidDevice);
	npurtGetLastError();
}

TEST_F(Devices, EveryThreadSelectsItsOwnDevice)
{
	int n = npurt::deviceCount();
	std::vector<int> got(static_cast<size_t>(n) * 4, -1);
	std::vector<std::thread> threads;
	for (int i = 0; i < n * 4; i++) {
		threads.emplace_back([i, n, &got] {
			if (npurtSetDevice(i % n) == npurtSuccess)
				npurtGetDevice(&got[i]);
		});
	}
	for (auto &t : threads)
		t.join();
	for (int i = 0; i < n * 4; i++)
		EXPECT_EQ(got[i], i % n);
	EXPECT_EQ(npurt::currentDevice(), 0);
}

}  // namespace

// Device monitoring against the real module (run in the VM): utilisation
// windows over the engines' busy time, the processes using a device, the
// PCI-style bus ids and npurtChooseDevice.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "child.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

constexpr size_t kMiB = 1 << 20;

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

class Monitor : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
};

npurtUtilization utilization()
{
	npurtUtilization u{};
	EXPECT_EQ(npurtDeviceGetUtilization(0, &u), npurtSuccess) << lastMessage();
	return u;
}

// GEMMs on every compute engine (one stream each) until the engines'
// busy time grew by at least `ns`; how long that takes on the emulator
// varies, so the work is sized by the counter, not by a clock.
void keepComputeBusy(uint64_t ns)
{
	const uint64_t n = 96;
	npurt::DeviceBuffer<float> a(n * n), b(n * n), c(n * n);
	npurt::fillAsync(a.data(), 0, a.bytes());
	npurt::fillAsync(b.data(), 0, b.bytes());
	std::vector<npurt::Stream> streams;
	streams.emplace_back(0);
	streams.emplace_back(0);
	uint64_t start = utilization().computeBusyNs;
	npurtUtilization u{};
	do {
		for (auto &s : streams)
			for (int i = 0; i < 4; i++)
				npurt::gemm(a, b, c, n, n, n, 1.0f, 0.0f, s);
		for (auto &s : streams)
			s.synchronize();
		ASSERT_EQ(npurtDeviceGetUtilization(0, &u), npurtSuccess) << lastMessage();
	} while (u.computeBusyNs - start < ns);
}

TEST_F(Monitor, UtilizationWindowsFollowEachOther)
{
	npurtUtilization a = utilization();
	npurtUtilization b = utilization();
	npurtDeviceProp p = npurt::deviceProperties(0);
	EXPECT_GT(b.sampleNs, a.sampleNs);
	// Each call's window starts where the previous one ended.
	EXPECT_EQ(b.windowNs, b.sampleNs - a.sampleNs);
	EXPECT_EQ(b.computeEngines, static_cast<uint32_t>(p.computeEngineCount));
	EXPECT_EQ(b.copyEngines, static_cast<uint32_t>(p.copyEngineCount));
	EXPECT_GE(b.computeBusyNs, a.computeBusyNs);
	EXPECT_GE(b.copyBusyNs, a.copyBusyNs);
	EXPECT_LE(b.compute, 100u);
	EXPECT_LE(b.copy, 100u);
}

TEST_F(Monitor, ComputeWorkShowsAsComputeUtilization)
{
	npurtUtilization before = utilization();
	keepComputeBusy(20 * 1000 * 1000);
	npurtUtilization after = utilization();
	EXPECT_GE(after.computeBusyNs - before.computeBusyNs, 20u * 1000 * 1000);
	// keepComputeBusy's own calls ended windows; the last one holds no
	// work, so the figure over all of it is computed from the counters.
	double busy = static_cast<double>(after.computeBusyNs - before.computeBusyNs);
	double window = static_cast<double>(after.sampleNs - before.sampleNs) *
	                static_cast<double>(after.computeEngines);
	EXPECT_GT(busy / window, 0.0);
	EXPECT_LE(busy / window, 1.0 + 1e-3);
}

TEST_F(Monitor, UtilizationOfAWindowFullOfWorkIsNotZero)
{
	const uint64_t n = 96;
	npurt::DeviceBuffer<float> a(n * n), b(n * n), c(n * n);
	npurt::Stream s(0);
	npurtUtilization start = utilization();
	for (int i = 0; i < 8; i++)
		npurt::gemm(a, b, c, n, n, n, 1.0f, 0.0f, s);
	s.synchronize();
	npurtUtilization w = utilization();
	EXPECT_GT(w.computeBusyNs, start.computeBusyNs);
	EXPECT_GT(w.compute, 0u) << "busy " << w.computeBusyNs - start.computeBusyNs
	                         << " ns over a window of " << w.windowNs << " ns";
	EXPECT_LE(w.compute, 100u);
}

TEST_F(Monitor, CopiesShowAsCopyUtilization)
{
	npurtUtilization start = utilization();
	npurt::DeviceBuffer<char> a(8 * kMiB), b(8 * kMiB);
	for (int i = 0; i < 4; i++)
		npurt::copyAsync(b.data(), a.data(), a.bytes());
	ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess) << lastMessage();
	npurtUtilization w = utilization();
	EXPECT_GT(w.copyBusyNs, start.copyBusyNs);
	EXPECT_GT(w.copy, 0u);
	EXPECT_LE(w.copy, 100u);
}

TEST_F(Monitor, UtilizationRefusesBadArguments)
{
	EXPECT_EQ(npurtDeviceGetUtilization(0, nullptr), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("util"), std::string::npos) << lastMessage();
	npurtGetLastError();
	npurtUtilization u{};
	EXPECT_EQ(npurtDeviceGetUtilization(npurt::deviceCount(), &u), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetUtilization(-1, &u), npurtErrorInvalidDevice);
	npurtGetLastError();
}

std::vector<npurtProcessInfo> processes(int device = 0)
{
	return npurt::processes(device);
}

const npurtProcessInfo *find(const std::vector<npurtProcessInfo> &ps, long pid)
{
	for (const auto &p : ps)
		if (p.pid == pid)
			return &p;
	return nullptr;
}

std::string commOf(long pid)
{
	std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
	std::string s;
	std::getline(f, s);
	return s;
}

TEST_F(Monitor, ThisProcessIsListedWithItsMemory)
{
	npurt::DeviceBuffer<char> buf(16 * kMiB);
	std::vector<npurtProcessInfo> ps = processes();
	const npurtProcessInfo *self = find(ps, getpid());
	ASSERT_NE(self, nullptr) << ps.size() << " processes listed, not this one";
	EXPECT_GE(self->contexts, 1u);
	EXPECT_GE(self->deviceBytes, 16 * kMiB);
	EXPECT_GE(self->queues, 1u);
	EXPECT_EQ(std::string(self->name), commOf(getpid()));
	npurtMemUsage mu{};
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &mu), npurtSuccess) << lastMessage();
	// The same figure the driver charges (fdinfo counts KiB).
	EXPECT_EQ(self->deviceBytes >> 10, mu.processDeviceBytes >> 10);
	EXPECT_TRUE(std::is_sorted(ps.begin(), ps.end(),
	                           [](const auto &x, const auto &y) { return x.pid < y.pid; }));
}

// A second process of this binary holding NPU 0 until told to go (the
// pipes' descriptors come in the environment).
TEST(MonitorChild, HoldsTheDeviceUntilToldToGo)
{
	const char *ready = std::getenv("NPURT_TEST_MONITOR_READY_FD");
	const char *go = std::getenv("NPURT_TEST_MONITOR_GO_FD");
	if (!ready || !go)
		GTEST_SKIP() << "run by Monitor.OtherProcessesAreListedWhileTheyHoldTheDevice";
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	void *p = nullptr;
	ASSERT_EQ(npurtMalloc(&p, 8 * kMiB), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemset(p, 1, 8 * kMiB), npurtSuccess) << lastMessage();
	int pid = getpid();
	ASSERT_EQ(write(std::atoi(ready), &pid, sizeof(pid)), static_cast<ssize_t>(sizeof(pid)));
	char c = 0;
	pollfd pfd{std::atoi(go), POLLIN, 0};
	ASSERT_EQ(poll(&pfd, 1, 120000), 1) << "the parent never said go";
	ASSERT_EQ(read(std::atoi(go), &c, 1), 1);
	EXPECT_EQ(npurtFree(p), npurtSuccess);
}

TEST_F(Monitor, OtherProcessesAreListedWhileTheyHoldTheDevice)
{
	int ready[2], go[2];
	ASSERT_EQ(pipe(ready), 0);
	ASSERT_EQ(pipe(go), 0);
	npurt_test::ChildResult r;
	std::thread child([&] {
		r = npurt_test::runChild("MonitorChild.*",
		                         {"NPURT_TEST_MONITOR_READY_FD=" + std::to_string(ready[1]),
		                          "NPURT_TEST_MONITOR_GO_FD=" + std::to_string(go[0])});
	});
	int pid = 0;
	pollfd pfd{ready[0], POLLIN, 0};
	bool started = poll(&pfd, 1, 120000) == 1 &&
	               read(ready[0], &pid, sizeof(pid)) == static_cast<ssize_t>(sizeof(pid));
	std::vector<npurtProcessInfo> during;
	unsigned one = 1;
	npurtProcessInfo single{};
	npurtError_t tooSmall = npurtErrorUnknown;
	if (started) {
		during = processes();
		// An array too small for both processes: the count says so.
		tooSmall = npurtDeviceGetProcesses(0, &single, &one);
	}
	ASSERT_EQ(write(go[1], "g", 1), 1);
	child.join();
	for (int fd : {ready[0], ready[1], go[0], go[1]})
		close(fd);
	ASSERT_TRUE(started) << npurt_test::indented(r.output);
	ASSERT_FALSE(r.timedOut) << npurt_test::indented(r.output);
	EXPECT_EQ(WEXITSTATUS(r.status), 0) << npurt_test::indented(r.output);

	const npurtProcessInfo *c = find(during, pid);
	ASSERT_NE(c, nullptr) << "child " << pid << " not among " << during.size();
	EXPECT_EQ(c->contexts, 1u);
	EXPECT_GE(c->deviceBytes, 8 * kMiB);
	EXPECT_GT(c->copyBusyNs, 0u) << "its memset ran on a copy engine";
	EXPECT_NE(find(during, getpid()), nullptr);
	EXPECT_EQ(tooSmall, npurtErrorInvalidValue);
	EXPECT_GE(one, 2u);
	EXPECT_NE(lastMessage().find("the count now says"), std::string::npos) << lastMessage();
	npurtGetLastError();
	// Gone once it exited.
	EXPECT_EQ(find(processes(), pid), nullptr);
}

TEST_F(Monitor, ProcessesRefusesBadArguments)
{
	EXPECT_EQ(npurtDeviceGetProcesses(0, nullptr, nullptr), npurtErrorInvalidValue);
	unsigned n = 3;
	EXPECT_EQ(npurtDeviceGetProcesses(0, nullptr, &n), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("null array"), std::string::npos) << lastMessage();
	n = 0;
	EXPECT_EQ(npurtDeviceGetProcesses(npurt::deviceCount(), nullptr, &n),
	          npurtErrorInvalidDevice);
	npurtGetLastError();
	// The sizing call counts this process at least.
	ASSERT_EQ(npurtDeviceGetProcesses(0, nullptr, &n), npurtSuccess) << lastMessage();
	EXPECT_GE(n, 1u);
}

TEST_F(Monitor, ProcessesOfADeviceAreOnlyThatDevices)
{
	int count = npurt::deviceCount();
	if (count < 2)
		GTEST_SKIP() << "one NPU";
	// This process opened NPU 0 only (a context on another NPU would
	// list it there); each listing names the NPU's own clients.
	for (int d = 0; d < count; d++)
		for (const auto &p : processes(d))
			EXPECT_GE(p.contexts, 1u);
}

TEST_F(Monitor, BusIdsRoundTrip)
{
	for (int d = 0; d < npurt::deviceCount(); d++) {
		npurtDeviceProp p = npurt::deviceProperties(d);
		char id[16] = {};
		ASSERT_EQ(npurtDeviceGetPCIBusId(id, sizeof(id), d), npurtSuccess) << lastMessage();
		char want[16];
		std::snprintf(want, sizeof(want), "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
		              p.pciDeviceID);
		EXPECT_STREQ(id, want);
		int back = -1;
		ASSERT_EQ(npurtDeviceGetByPCIBusId(&back, id), npurtSuccess) << lastMessage();
		EXPECT_EQ(back, d);
		// Without the domain, and in capitals.
		std::string shortId = id + 5;
		std::transform(shortId.begin(), shortId.end(), shortId.begin(), ::toupper);
		back = -1;
		ASSERT_EQ(npurtDeviceGetByPCIBusId(&back, shortId.c_str()), npurtSuccess)
		        << shortId << ": " << lastMessage();
		EXPECT_EQ(back, d);
	}
}

TEST_F(Monitor, BusIdsRefuseBadInput)
{
	char id[16];
	std::memset(id, 'x', sizeof(id));
	EXPECT_EQ(npurtDeviceGetPCIBusId(id, 5, 0), npurtErrorInvalidValue);
	EXPECT_STREQ(id, "0000") << "truncated, still terminated";
	EXPECT_NE(lastMessage().find("13 bytes"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtDeviceGetPCIBusId(id, 0, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetPCIBusId(nullptr, 16, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetPCIBusId(id, 16, npurt::deviceCount()), npurtErrorInvalidDevice);
	int d = 7;
	for (const char *bad : {"", "zz", "0000:00:00", "0000:00:00.0 ", " 0000:00:00.0", "-1:00.0",
	                        "0000:00:00.0:1", "00000000000000000:00.0"}) {
		EXPECT_EQ(npurtDeviceGetByPCIBusId(&d, bad), npurtErrorInvalidValue) << bad;
		EXPECT_EQ(d, 7) << bad;
	}
	EXPECT_NE(lastMessage().find("DDDD:BB:DD.F"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtDeviceGetByPCIBusId(&d, "0000:ff:1f.0"), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetByPCIBusId(&d, "0000:00:00.1"), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetByPCIBusId(nullptr, "0000:00:00.0"), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetByPCIBusId(&d, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(d, 7);
	npurtGetLastError();
}

TEST_F(Monitor, ChooseDeviceMatchesTheRequest)
{
	npurtDeviceProp want{};
	int d = -1;
	ASSERT_EQ(npurtChooseDevice(&d, &want), npurtSuccess) << lastMessage();
	EXPECT_EQ(d, 0) << "an empty request is met by the first NPU";
	npurtDeviceProp p = npurt::deviceProperties(0);
	std::strcpy(want.name, "npu");
	want.major = p.major;
	want.totalGlobalMem = p.totalGlobalMem;
	want.multiProcessorCount = p.multiProcessorCount;
	d = -1;
	ASSERT_EQ(npurtChooseDevice(&d, &want), npurtSuccess) << lastMessage();
	EXPECT_EQ(d, 0);
	// Nothing meets a request for more memory than any NPU has: the
	// best match is still an NPU, not an error.
	want.totalGlobalMem = ~size_t{0};
	d = -1;
	ASSERT_EQ(npurtChooseDevice(&d, &want), npurtSuccess) << lastMessage();
	EXPECT_GE(d, 0);
	EXPECT_LT(d, npurt::deviceCount());
	EXPECT_EQ(npurtChooseDevice(nullptr, &want), npurtErrorInvalidValue);
	EXPECT_EQ(npurtChooseDevice(&d, nullptr), npurtErrorInvalidValue);
	npurtGetLastError();
}

}  // namespace

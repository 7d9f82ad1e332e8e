// The pools' settings against the real module (run in the VM):
// npurtMemSetAllocatorConfig / NPURT_ALLOC_CONF, and expandable segments
// holding data that crosses their pages, under copies, fills, peers and IPC.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "child.h"
#include "npurt/npurt.h"

namespace {

constexpr size_t kMiB = 1 << 20;

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

std::string currentConfig()
{
	char buf[512];
	EXPECT_EQ(npurtMemGetAllocatorConfig(buf, sizeof(buf)), npurtSuccess) << lastMessage();
	return buf;
}

class AllocConf : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
		ASSERT_EQ(npurtMemSetAllocatorConfig(""), npurtSuccess);
		npurtMemEmptyCache();
	}
	void TearDown() override
	{
		npurtMemSetAllocatorConfig("");
		npurtSetDevice(0);
		npurtMemEmptyCache();
		npurtGetLastError();
	}
};

TEST_F(AllocConf, BadSettingsAreRefusedAndChangeNothing)
{
	ASSERT_EQ(npurtMemSetAllocatorConfig("max_split_size_mb:128"), npurtSuccess);
	const std::string before = currentConfig();
	EXPECT_EQ(before, "expandable_segments:False,max_split_size_mb:128");
	EXPECT_EQ(npurtMemSetAllocatorConfig(nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemSetAllocatorConfig("expandable_segments:True,colour:blue"),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown key 'colour'")) << lastMessage();
	EXPECT_EQ(npurtMemSetAllocatorConfig("max_split_size_mb:10"), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "max_split_size_mb")) << lastMessage();
	EXPECT_EQ(currentConfig(), before);

	char small[8];
	EXPECT_EQ(npurtMemGetAllocatorConfig(small, sizeof(small)), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "bytes")) << lastMessage();
	EXPECT_EQ(npurtMemGetAllocatorConfig(nullptr, 100), npurtErrorInvalidValue);
	npurtGetLastError();
}

// Data written across an expandable segment's 2 MiB pages reads back, by
// copies both ways, device to device and a fill.
TEST_F(AllocConf, ExpandableSegmentsHoldDataAcrossPages)
{
	ASSERT_EQ(npurtMemSetAllocatorConfig("expandable_segments:True"), npurtSuccess);
	const size_t n = 5 * kMiB + 4096;  // three pages, unaligned end
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtMalloc(&a, n), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMalloc(&b, n), npurtSuccess) << lastMessage();
	std::vector<unsigned char> host(n), back(n);
	for (size_t i = 0; i < n; i++)
		host[i] = static_cast<unsigned char>(i * 7 + (i >> 20));
	ASSERT_EQ(npurtMemcpy(a, host.data(), n, npurtMemcpyHostToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(b, a, n, npurtMemcpyDeviceToDevice), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpy(back.data(), b, n, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(std::memcmp(back.data(), host.data(), n), 0);
	// A fill across the page boundary inside b.
	const size_t at = 2 * kMiB - 100;
	ASSERT_EQ(npurtMemset(static_cast<char *>(b) + at, 0x5a, 200), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(back.data(), b, n, npurtMemcpyDeviceToHost), npurtSuccess);
	for (size_t i = at; i < at + 200; i++)
		host[i] = 0x5a;
	EXPECT_EQ(std::memcmp(back.data(), host.data(), n), 0);

	// The snapshot shows an expandable segment with memory for both.
	size_t ns = 0, nb = 0;
	ASSERT_EQ(npurtMemGetSnapshot(nullptr, &ns, nullptr, &nb), npurtSuccess);
	std::vector<npurtMemSegmentInfo> segs(ns);
	std::vector<npurtMemBlockInfo> blocks(nb);
	ASSERT_EQ(npurtMemGetSnapshot(segs.data(), &ns, blocks.data(), &nb), npurtSuccess);
	bool found = false;
	for (size_t i = 0; i < ns; i++) {
		const auto &s = segs[i];
		uint64_t pa = reinterpret_cast<uint64_t>(a);
		if (pa < s.address || pa - s.address >= s.size)
			continue;
		found = true;
		EXPECT_EQ(s.expandable, 1u);
		EXPECT_GE(s.mappedBytes, 2 * n);
		EXPECT_LT(s.mappedBytes, s.size);
	}
	EXPECT_TRUE(found);
	npurtMemStats st{};
	ASSERT_EQ(npurtMemGetStats(&st), npurtSuccess);
	EXPECT_LE(st.reservedBytes, 2 * n + 4 * kMiB);
	EXPECT_EQ(npurtFree(a), npurtSuccess);
	EXPECT_EQ(npurtFree(b), npurtSuccess);
}

// An IPC handle names one device memory object: an allocation across an
// expandable segment's pages is refused, one inside a page is shared.
TEST_F(AllocConf, IpcOfExpandableMemory)
{
	ASSERT_EQ(npurtMemSetAllocatorConfig("expandable_segments:True"), npurtSuccess);
	void *big = nullptr, *small = nullptr;
	ASSERT_EQ(npurtMalloc(&big, 6 * kMiB), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMalloc(&small, 4096), npurtSuccess) << lastMessage();
	npurtIpcMemHandle_t h{};
	EXPECT_EQ(npurtIpcGetMemHandle(&h, big), npurtErrorNotSupported);
	EXPECT_TRUE(contains(lastMessage(), "expandable_segments:False")) << lastMessage();
	EXPECT_EQ(npurtIpcGetMemHandle(&h, small), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtFree(big), npurtSuccess);
	EXPECT_EQ(npurtFree(small), npurtSuccess);
}

// Memory mapped into a segment after peer access was enabled is reached
// by the peer as well as memory mapped before.
TEST_F(AllocConf, ExpandableMemoryReachesPeers)
{
	int count = 0, can = 0;
	ASSERT_EQ(npurtGetDeviceCount(&count), npurtSuccess);
	if (count < 2)
		GTEST_SKIP() << "one NPU";
	ASSERT_EQ(npurtDeviceCanAccessPeer(&can, 1, 0), npurtSuccess);
	if (!can)
		GTEST_SKIP() << "no peer access between NPU 0 and 1";
	ASSERT_EQ(npurtMemSetAllocatorConfig("expandable_segments:True"), npurtSuccess);
	const size_t n = 3 * kMiB;
	void *before = nullptr;
	ASSERT_EQ(npurtMalloc(&before, n), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	npurtError_t e = npurtDeviceEnablePeerAccess(0, 0);
	ASSERT_TRUE(e == npurtSuccess || e == npurtErrorPeerAccessAlreadyEnabled) << lastMessage();
	npurtGetLastError();
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	void *after = nullptr;
	ASSERT_EQ(npurtMalloc(&after, n), npurtSuccess) << lastMessage();

	std::vector<unsigned char> host(n), back(n);
	for (size_t i = 0; i < n; i++)
		host[i] = static_cast<unsigned char>(i ^ (i >> 9));
	ASSERT_EQ(npurtMemcpy(before, host.data(), n, npurtMemcpyHostToDevice), npurtSuccess);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	void *remote = nullptr;
	ASSERT_EQ(npurtMalloc(&remote, n), npurtSuccess) << lastMessage();
	// NPU 1 copies out of NPU 0's segment, then into it.
	ASSERT_EQ(npurtMemcpy(remote, before, n, npurtMemcpyDeviceToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(after, remote, n, npurtMemcpyDeviceToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(back.data(), after, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(std::memcmp(back.data(), host.data(), n), 0);
	EXPECT_EQ(npurtFree(remote), npurtSuccess);
	EXPECT_EQ(npurtDeviceDisablePeerAccess(0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	EXPECT_EQ(npurtFree(before), npurtSuccess);
	EXPECT_EQ(npurtFree(after), npurtSuccess);
}

// The other process of EnvironmentIsReadAtStart: whatever NPURT_ALLOC_CONF
// says, as the first call sees it.
TEST(AllocConfChild, ReportsTheSettings)
{
	if (!std::getenv("NPURT_TEST_ALLOC_CONF_CHILD"))
		GTEST_SKIP() << "run by AllocConf.EnvironmentIsReadAtStart";
	int n = 0;
	npurtError_t err = npurtGetDeviceCount(&n);
	std::printf("start: %d %s\n", static_cast<int>(err), npurtGetLastErrorMessage());
	if (err == npurtSuccess)
		std::printf("settings: %s\n", currentConfig().c_str());
}

TEST_F(AllocConf, EnvironmentIsReadAtStart)
{
	npurt_test::ChildResult r = npurt_test::runChild(
	        "AllocConfChild.*",
	        {"NPURT_TEST_ALLOC_CONF_CHILD=1", "NPURT_ALLOC_CONF=expandable_segments:True,"
	                                          "roundup_power2_divisions:4"});
	ASSERT_FALSE(r.timedOut) << npurt_test::indented(r.output);
	EXPECT_TRUE(contains(r.output, "settings: expandable_segments:True,max_split_size_mb:64,"
	                               "roundup_power2_divisions:4"))
	        << npurt_test::indented(r.output);

	r = npurt_test::runChild("AllocConfChild.*", {"NPURT_TEST_ALLOC_CONF_CHILD=1",
	                                              "NPURT_ALLOC_CONF=expandable:True"});
	ASSERT_FALSE(r.timedOut) << npurt_test::indented(r.output);
	EXPECT_TRUE(contains(r.output, "start: 1 NPURT_ALLOC_CONF: unknown key 'expandable'"))
	        << npurt_test::indented(r.output);
}

}  // namespace

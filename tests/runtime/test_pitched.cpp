// Pitched 2-D memory against the real module (run in the VM):
// npurtMallocPitch and npurtMemset2D(Async), as CUDA's cudaMallocPitch and
// cudaMemset2D, with npurtMemcpy2D to read rows back.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

class Pitched : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
	void TearDown() override
	{
		npurtFree(mem_);
		npurtGetLastError();
	}

	// A pitched array of height rows of width bytes, every byte 0x11.
	void allocate(size_t width, size_t height)
	{
		width_ = width;
		height_ = height;
		ASSERT_EQ(npurtMallocPitch(&mem_, &pitch_, width, height), npurtSuccess)
		        << lastMessage();
		ASSERT_NE(mem_, nullptr);
		ASSERT_EQ(npurtMemset(mem_, 0x11, pitch_ * height), npurtSuccess) << lastMessage();
	}
	// The whole allocation, pitch padding included.
	std::vector<unsigned char> contents()
	{
		std::vector<unsigned char> host(pitch_ * height_);
		EXPECT_EQ(npurtMemcpy(host.data(), mem_, host.size(), npurtMemcpyDeviceToHost),
		          npurtSuccess)
		        << lastMessage();
		return host;
	}
	// Whether bytes [0, set) of the first `rows` rows are `value` and
	// every other byte is still 0x11.
	::testing::AssertionResult filled(size_t set, size_t rows, unsigned char value)
	{
		std::vector<unsigned char> h = contents();
		for (size_t r = 0; r < height_; r++)
			for (size_t x = 0; x < pitch_; x++) {
				unsigned char want = r < rows && x < set ? value : 0x11;
				if (h[r * pitch_ + x] != want)
					return ::testing::AssertionFailure()
					       << "row " << r << " byte " << x << " is "
					       << int{h[r * pitch_ + x]} << ", not " << int{want};
			}
		return ::testing::AssertionSuccess();
	}

	void *mem_ = nullptr;
	size_t pitch_ = 0, width_ = 0, height_ = 0;
};

TEST_F(Pitched, MallocPitchRoundsRowsUpToTheAlignment)
{
	allocate(100, 7);
	EXPECT_EQ(pitch_, size_t{NPURT_PITCH_ALIGNMENT});
	EXPECT_EQ(reinterpret_cast<uintptr_t>(mem_) % NPURT_PITCH_ALIGNMENT, 0u);
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, static_cast<char *>(mem_) + pitch_ * 7 - 1),
	          npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(a.type, npurtMemoryTypeDevice);
	void *p = nullptr;
	size_t pitch = 0;
	ASSERT_EQ(npurtMallocPitch(&p, &pitch, 2 * NPURT_PITCH_ALIGNMENT, 3), npurtSuccess);
	EXPECT_EQ(pitch, 2u * NPURT_PITCH_ALIGNMENT) << "an aligned width is its own pitch";
	EXPECT_EQ(npurtFree(p), npurtSuccess);
}

TEST_F(Pitched, Memset2DSetsEachRowAndLeavesThePadding)
{
	allocate(100, 7);
	ASSERT_EQ(npurtMemset2D(mem_, pitch_, 0xab, 100, 7), npurtSuccess) << lastMessage();
	EXPECT_TRUE(filled(100, 7, 0xab));
	// A narrower fill of the first rows only.
	ASSERT_EQ(npurtMemset2D(mem_, pitch_, 0x5c, 3, 2), npurtSuccess) << lastMessage();
	std::vector<unsigned char> h = contents();
	EXPECT_EQ(h[0], 0x5c);
	EXPECT_EQ(h[pitch_ + 2], 0x5c);
	EXPECT_EQ(h[pitch_ + 3], 0xab);
	EXPECT_EQ(h[2 * pitch_], 0xab);
}

TEST_F(Pitched, Memset2DAsyncRunsInStreamOrder)
{
	allocate(300, 9);
	npurt::Stream s(0);
	ASSERT_EQ(npurtMemset2DAsync(mem_, pitch_, 0x7e, 300, 9, s.get()), npurtSuccess)
	        << lastMessage();
	std::vector<unsigned char> rows(300 * 9);
	ASSERT_EQ(npurtMemcpy2DAsync(rows.data(), 300, mem_, pitch_, 300, 9,
	                             npurtMemcpyDeviceToHost, s.get()),
	          npurtSuccess)
	        << lastMessage();
	s.synchronize();
	for (size_t i = 0; i < rows.size(); i++)
		ASSERT_EQ(rows[i], 0x7e) << "byte " << i;
	EXPECT_TRUE(filled(300, 9, 0x7e));
}

TEST_F(Pitched, DenseAndSingleRowFillsAreOneFill)
{
	allocate(NPURT_PITCH_ALIGNMENT, 5);
	ASSERT_EQ(npurtMemset2D(mem_, pitch_, 0x42, pitch_, 5), npurtSuccess) << lastMessage();
	EXPECT_TRUE(filled(pitch_, 5, 0x42));
	ASSERT_EQ(npurtMemset2D(mem_, pitch_, 0x43, 10, 1), npurtSuccess) << lastMessage();
	std::vector<unsigned char> h = contents();
	EXPECT_EQ(h[9], 0x43);
	EXPECT_EQ(h[10], 0x42);
	EXPECT_EQ(h[pitch_], 0x42);
}

TEST_F(Pitched, Memset2DInAGraphReplays)
{
	allocate(64, 6);
	npurt::Stream s(0);
	ASSERT_EQ(npurtStreamBeginCapture(s.get(), npurtStreamCaptureModeGlobal), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemset2DAsync(mem_, pitch_, 0x21, 64, 6, s.get()), npurtSuccess)
	        << lastMessage();
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s.get(), &g), npurtSuccess) << lastMessage();
	EXPECT_TRUE(filled(0, 0, 0)) << "captured, not run";
	npurtGraphExec_t e = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&e, g, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtGraphLaunch(e, s.get()), npurtSuccess) << lastMessage();
	s.synchronize();
	EXPECT_TRUE(filled(64, 6, 0x21));
	EXPECT_EQ(npurtGraphExecDestroy(e), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
}

TEST_F(Pitched, EmptyFillsAndAllocationsDoNothing)
{
	allocate(10, 2);
	EXPECT_EQ(npurtMemset2D(mem_, pitch_, 0, 0, 2), npurtSuccess);
	EXPECT_EQ(npurtMemset2D(mem_, pitch_, 0, 10, 0), npurtSuccess);
	EXPECT_EQ(npurtMemset2D(nullptr, 0, 0, 0, 0), npurtSuccess);
	EXPECT_TRUE(filled(0, 0, 0));
	void *p = reinterpret_cast<void *>(0x1);
	size_t pitch = 99;
	EXPECT_EQ(npurtMallocPitch(&p, &pitch, 0, 5), npurtSuccess);
	EXPECT_EQ(p, nullptr);
	EXPECT_EQ(pitch, 0u);
	p = reinterpret_cast<void *>(0x1);
	EXPECT_EQ(npurtMallocPitch(&p, &pitch, 5, 0), npurtSuccess);
	EXPECT_EQ(p, nullptr);
}

TEST_F(Pitched, BadFillsAreRefusedBeforeAnyRowIsTouched)
{
	allocate(100, 4);
	// One row more than the allocation holds: nothing is written.
	EXPECT_EQ(npurtMemset2D(mem_, pitch_, 0x99, 100, 5), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("overrun"), std::string::npos) << lastMessage();
	EXPECT_TRUE(filled(0, 0, 0));
	EXPECT_EQ(npurtMemset2D(mem_, 50, 0x99, 100, 2), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("pitch 50 is less than width 100"), std::string::npos)
	        << lastMessage();
	EXPECT_EQ(npurtMemset2D(mem_, 2, 0x99, 1, SIZE_MAX), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("overflow"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtMemset2D(nullptr, pitch_, 0x99, 100, 2), npurtErrorInvalidValue);
	std::vector<unsigned char> host(1024);
	EXPECT_EQ(npurtMemset2D(host.data(), 512, 0x99, 100, 2), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("not device memory"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtMemset2DAsync(mem_, pitch_, 0x99, 100, 2,
	                             reinterpret_cast<npurtStream_t>(0x1234)),
	          npurtErrorInvalidHandle);
	EXPECT_TRUE(filled(0, 0, 0));
	npurtGetLastError();
}

TEST_F(Pitched, MallocPitchRefusesBadArguments)
{
	size_t pitch = 0;
	void *p = nullptr;
	EXPECT_EQ(npurtMallocPitch(nullptr, &pitch, 10, 10), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMallocPitch(&p, nullptr, 10, 10), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMallocPitch(&p, &pitch, SIZE_MAX, 1), npurtErrorMemoryAllocation);
	EXPECT_NE(lastMessage().find("overflow"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtMallocPitch(&p, &pitch, 1024, SIZE_MAX / 512), npurtErrorMemoryAllocation);
	// More than the device has: the pool's out-of-memory message.
	npurtDeviceProp prop = npurt::deviceProperties(0);
	EXPECT_EQ(npurtMallocPitch(&p, &pitch, 1 << 20, prop.totalGlobalMem >> 19),
	          npurtErrorMemoryAllocation);
	EXPECT_EQ(p, nullptr);
	npurtGetLastError();
}

}  // namespace

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

// A 3-D volume of w x h x d bytes in pitched memory, for the 3-D calls.
class Volume : public ::testing::Test {
protected:
	static constexpr size_t w = 70, h = 5, d = 4;
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMalloc3D(&vol_, make_npurtExtent(w, h, d)), npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurtMemset(vol_.ptr, 0x11, bytes()), npurtSuccess) << lastMessage();
	}
	void TearDown() override
	{
		npurtFree(vol_.ptr);
		npurtGetLastError();
	}
	size_t bytes() const { return vol_.pitch * vol_.ysize * d; }
	std::vector<unsigned char> contents()
	{
		std::vector<unsigned char> host(bytes());
		EXPECT_EQ(npurtMemcpy(host.data(), vol_.ptr, host.size(), npurtMemcpyDeviceToHost),
		          npurtSuccess)
		        << lastMessage();
		return host;
	}
	unsigned char at(const std::vector<unsigned char> &v, size_t x, size_t y, size_t z) const
	{
		return v[(z * vol_.ysize + y) * vol_.pitch + x];
	}

	npurtPitchedPtr vol_{};
};

TEST_F(Volume, Malloc3DDescribesItsRowsAndSlices)
{
	EXPECT_EQ(vol_.pitch, size_t{NPURT_PITCH_ALIGNMENT});
	EXPECT_EQ(vol_.xsize, w);
	EXPECT_EQ(vol_.ysize, h);
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, static_cast<char *>(vol_.ptr) + bytes() - 1),
	          npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(a.type, npurtMemoryTypeDevice);
	npurtPitchedPtr empty{};
	empty.ptr = &empty;
	EXPECT_EQ(npurtMalloc3D(&empty, make_npurtExtent(8, 8, 0)), npurtSuccess);
	EXPECT_EQ(empty.ptr, nullptr);
	EXPECT_EQ(npurtMalloc3D(nullptr, make_npurtExtent(8, 8, 8)), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMalloc3D(&empty, make_npurtExtent(8, SIZE_MAX, 2)),
	          npurtErrorMemoryAllocation);
	npurtGetLastError();
}

TEST_F(Volume, Memset3DSetsTheBoxOnly)
{
	ASSERT_EQ(npurtMemset3D(vol_, 0x3c, make_npurtExtent(w, h, d)), npurtSuccess)
	        << lastMessage();
	std::vector<unsigned char> v = contents();
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++) {
			ASSERT_EQ(at(v, 0, y, z), 0x3c) << y << "," << z;
			ASSERT_EQ(at(v, w - 1, y, z), 0x3c) << y << "," << z;
			ASSERT_EQ(at(v, w, y, z), 0x11) << "padding at " << y << "," << z;
		}
	// A smaller box (2 x 3 x 2) at (1, 1, 1): the pointer moved there.
	npurtPitchedPtr inner = vol_;
	inner.ptr = static_cast<char *>(vol_.ptr) + (vol_.ysize + 1) * vol_.pitch + 1;
	npurt::Stream s(0);
	ASSERT_EQ(npurtMemset3DAsync(inner, 0x77, make_npurtExtent(2, 3, 2), s.get()), npurtSuccess)
	        << lastMessage();
	s.synchronize();
	v = contents();
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++)
			for (size_t x = 0; x < 4; x++) {
				bool in = z >= 1 && z < 3 && y >= 1 && y < 4 && x >= 1 && x < 3;
				ASSERT_EQ(at(v, x, y, z), in ? 0x77 : 0x3c)
				        << x << "," << y << "," << z;
			}
}

TEST_F(Volume, Memcpy3DMovesBoxesBetweenHostAndDevice)
{
	// A dense host volume in, a box of it out.
	std::vector<unsigned char> host(w * h * d);
	for (size_t i = 0; i < host.size(); i++)
		host[i] = static_cast<unsigned char>(i * 7 + 1);
	npurtMemcpy3DParms in = {};
	in.srcPtr = make_npurtPitchedPtr(host.data(), w, w, h);
	in.dstPtr = vol_;
	in.extent = make_npurtExtent(w, h, d);
	in.kind = npurtMemcpyHostToDevice;
	ASSERT_EQ(npurtMemcpy3D(&in), npurtSuccess) << lastMessage();
	std::vector<unsigned char> v = contents();
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++)
			for (size_t x = 0; x < w; x++)
				ASSERT_EQ(at(v, x, y, z), host[(z * h + y) * w + x]);

	// The 3 x 2 x 2 box at (5, 2, 1) into (0, 1, 1) of a small host volume.
	std::vector<unsigned char> box(4 * 3 * 3, 0);
	npurtMemcpy3DParms out = {};
	out.srcPtr = vol_;
	out.srcPos = make_npurtPos(5, 2, 1);
	out.dstPtr = make_npurtPitchedPtr(box.data(), 4, 4, 3);
	out.dstPos = make_npurtPos(0, 1, 1);
	out.extent = make_npurtExtent(3, 2, 2);
	out.kind = npurtMemcpyDefault;
	npurt::Stream s(0);
	ASSERT_EQ(npurtMemcpy3DAsync(&out, s.get()), npurtSuccess) << lastMessage();
	s.synchronize();
	for (size_t z = 0; z < 3; z++)
		for (size_t y = 0; y < 3; y++)
			for (size_t x = 0; x < 4; x++) {
				bool in3 = z >= 1 && y >= 1 && x < 3;
				unsigned char want =
				        in3 ? host[((z - 1 + 1) * h + (y - 1 + 2)) * w + x + 5] : 0;
				ASSERT_EQ(box[(z * 3 + y) * 4 + x], want)
				        << x << "," << y << "," << z;
			}
}

TEST_F(Volume, Memcpy3DBetweenDeviceVolumes)
{
	ASSERT_EQ(npurtMemset3D(vol_, 0x5a, make_npurtExtent(w, h, d)), npurtSuccess);
	npurtPitchedPtr other{};
	ASSERT_EQ(npurtMalloc3D(&other, make_npurtExtent(w, h, d)), npurtSuccess);
	ASSERT_EQ(npurtMemset3D(other, 0, make_npurtExtent(w, h, d)), npurtSuccess);
	npurtMemcpy3DParms p = {};
	p.srcPtr = vol_;
	p.dstPtr = other;
	p.dstPos = make_npurtPos(10, 0, 2);
	p.extent = make_npurtExtent(20, h, 2);
	p.kind = npurtMemcpyDeviceToDevice;
	ASSERT_EQ(npurtMemcpy3D(&p), npurtSuccess) << lastMessage();
	std::vector<unsigned char> v(other.pitch * other.ysize * d);
	ASSERT_EQ(npurtMemcpy(v.data(), other.ptr, v.size(), npurtMemcpyDeviceToHost),
	          npurtSuccess);
	for (size_t z = 0; z < d; z++)
		for (size_t x = 0; x < w; x++) {
			bool in = z >= 2 && x >= 10 && x < 30;
			ASSERT_EQ(v[(z * other.ysize + h - 1) * other.pitch + x], in ? 0x5a : 0)
			        << x << "," << z;
		}
	EXPECT_EQ(npurtFree(other.ptr), npurtSuccess);
}

TEST_F(Volume, BadBoxesAreRefusedBeforeAnythingMoves)
{
	npurtMemcpy3DParms p = {};
	std::vector<unsigned char> host(w * h * d, 0xee);
	p.srcPtr = make_npurtPitchedPtr(host.data(), w, w, h);
	p.dstPtr = vol_;
	p.extent = make_npurtExtent(w, h, d);
	p.kind = npurtMemcpyHostToDevice;
	p.dstPos = make_npurtPos(vol_.pitch - w + 1, 0, 0);
	EXPECT_EQ(npurtMemcpy3D(&p), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("dstPtr's rows of pitch"), std::string::npos) << lastMessage();
	p.dstPos = make_npurtPos(0, 1, 0);
	EXPECT_EQ(npurtMemcpy3D(&p), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("slices of 5 rows do not hold 5 rows at y 1"),
	          std::string::npos)
	        << lastMessage();
	p.dstPos = make_npurtPos(0, 0, 1);
	EXPECT_EQ(npurtMemcpy3D(&p), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("overrun"), std::string::npos) << lastMessage();
	p.dstPos = make_npurtPos(0, 0, 0);
	p.dstArray = &p;
	EXPECT_EQ(npurtMemcpy3D(&p), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("no NPU arrays"), std::string::npos) << lastMessage();
	p.dstArray = nullptr;
	p.srcPos = make_npurtPos(0, SIZE_MAX / 2, SIZE_MAX / 2);
	p.srcPtr.ysize = SIZE_MAX;
	EXPECT_EQ(npurtMemcpy3D(&p), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy3D(nullptr), npurtErrorInvalidValue);
	// Slices too short for the rows, a box past the end: no byte changes.
	npurtPitchedPtr shortSlices = vol_;
	shortSlices.ysize = h - 1;
	EXPECT_EQ(npurtMemset3D(shortSlices, 0x99, make_npurtExtent(w, h, 2)),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemset3D(vol_, 0x99, make_npurtExtent(w, h, d + 1)), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("overrun"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtMemset3D(vol_, 0x99, make_npurtExtent(w + 1000, h, d)),
	          npurtErrorInvalidValue);
	npurtGetLastError();
	std::vector<unsigned char> v = contents();
	for (unsigned char c : v)
		ASSERT_EQ(c, 0x11);
	// Empty boxes are no-ops.
	p.extent = make_npurtExtent(0, h, d);
	EXPECT_EQ(npurtMemcpy3D(&p), npurtSuccess);
	EXPECT_EQ(npurtMemset3D(vol_, 0x99, make_npurtExtent(w, 0, d)), npurtSuccess);
}

}  // namespace

// Strided and 2-D copies (npurtMemcpyStridedAsync, npurtMemcpy2D*) against
// the real module: every view is compared with the same copy done on the
// CPU, bytes between the elements included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "npurt/npurt.h"

namespace {

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

constexpr unsigned char kPoison = 0xa5;

struct View {
	std::vector<size_t> sizes, dst, src;  // elements; byte strides
	size_t elem;
	size_t srcOff = 0, dstOff = 0;  // bytes into the buffers
	const char *what;
};

// The copy on the CPU, in row-major order of the indices.
void onCpu(const View &v, unsigned char *dst, const unsigned char *src)
{
	std::vector<size_t> idx(v.sizes.size(), 0);
	for (;;) {
		size_t so = v.srcOff, dso = v.dstOff;
		for (size_t d = 0; d < idx.size(); d++) {
			so += idx[d] * v.src[d];
			dso += idx[d] * v.dst[d];
		}
		std::memcpy(dst + dso, src + so, v.elem);
		size_t d = idx.size();
		while (d > 0) {
			if (++idx[d - 1] < v.sizes[d - 1])
				break;
			idx[d - 1] = 0;
			d--;
		}
		if (d == 0)
			return;
	}
}

std::vector<unsigned char> pattern(size_t n)
{
	std::vector<unsigned char> p(n);
	for (size_t i = 0; i < n; i++)
		p[i] = static_cast<unsigned char>((i * 151 + i / 251) & 0xff);
	return p;
}

npurtError_t copyView(void *dst, const void *src, const View &v, npurtMemcpyKind kind,
                      npurtStream_t s)
{
	return npurtMemcpyStridedAsync(static_cast<char *>(dst) + v.dstOff, v.dst.data(),
	                               static_cast<const char *>(src) + v.srcOff, v.src.data(),
	                               v.sizes.data(), static_cast<int>(v.sizes.size()), v.elem,
	                               kind, s);
}

// Views as the PyTorch backend makes them, and the shapes the planner
// treats apart (more than six dimensions, elements above 16 bytes).
std::vector<View> views()
{
	return {
	        {{48, 64}, {64 * 4, 4}, {4, 48 * 4}, 4, 0, 0, "transpose of a 64x48 f32 matrix"},
	        {{5, 7, 9}, {504, 72, 8}, {72, 360, 8}, 8, 8, 0, "permute (1, 0, 2) of int64"},
	        {{33, 100}, {200, 2}, {0, 2}, 2, 6, 0, "broadcast of a row"},
	        {{100, 33}, {66, 2}, {2, 0}, 2, 6, 0, "broadcast of a column"},
	        {{300, 17}, {17, 1}, {1, 300}, 1, 4093, 3, "byte transpose across pages"},
	        {{1000}, {3}, {5}, 3, 1, 0, "3-byte elements"},
	        {{2, 3, 4}, {384, 128, 32}, {32, 256, 64}, 32, 0, 0, "32-byte elements"},
	        {{2, 2, 2, 2, 2, 2, 2, 3},
	         {384, 192, 96, 48, 24, 12, 6, 2},
	         {2, 4, 8, 16, 32, 64, 128, 256},
	         2,
	         0,
	         0,
	         "eight dimensions"},
	        {{64, 256}, {1024, 4}, {2048, 4}, 4, 16, 0, "rows of a wider matrix"},
	};
}

class StridedCopies : public ::testing::Test {
protected:
	static constexpr size_t kBuf = 1u << 20;
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtStreamCreate(&s_), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMalloc(&src_, kBuf), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMalloc(&dst_, kBuf), npurtSuccess) << lastMessage();
		in_ = pattern(kBuf);
		ASSERT_EQ(npurtMemcpy(src_, in_.data(), kBuf, npurtMemcpyHostToDevice),
		          npurtSuccess);
	}
	void TearDown() override
	{
		npurtFree(src_);
		npurtFree(dst_);
		if (s_)
			npurtStreamDestroy(s_);
		npurtGetLastError();
	}
	void poisonDst()
	{
		ASSERT_EQ(npurtMemset(dst_, kPoison, kBuf), npurtSuccess) << lastMessage();
	}
	std::vector<unsigned char> dstBytes()
	{
		std::vector<unsigned char> out(kBuf);
		EXPECT_EQ(npurtMemcpy(out.data(), dst_, kBuf, npurtMemcpyDeviceToHost),
		          npurtSuccess);
		return out;
	}
	npurtStream_t s_ = nullptr;
	void *src_ = nullptr, *dst_ = nullptr;
	std::vector<unsigned char> in_;
};

TEST_F(StridedCopies, DeviceViewsMatchTheCpu)
{
	for (const View &v : views()) {
		poisonDst();
		ASSERT_EQ(copyView(dst_, src_, v, npurtMemcpyDeviceToDevice, s_), npurtSuccess)
		        << v.what << ": " << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess)
		        << v.what << ": " << lastMessage();
		std::vector<unsigned char> want(kBuf, kPoison);
		onCpu(v, want.data(), in_.data());
		EXPECT_TRUE(dstBytes() == want) << v.what;
	}
}

// Views of millions of runs are cut into packets the engine finishes well
// inside the job timeout: one float broadcast into 16M (64 MiB, what
// torch's fill_ did) as one packet timed out and reset the engine. The cut
// views (a 2048x2048 transpose, a 3-D view cut in its middle dimension)
// give the CPU's result.
TEST_F(StridedCopies, ViewsOfMillionsOfRunsFinishInsideTheJobTimeout)
{
	const size_t bytes = 64u << 20, count = bytes / 4;
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 16u << 20), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMalloc(&b, bytes), npurtSuccess) << lastMessage();
	const std::vector<unsigned char> in = pattern(16u << 20);
	ASSERT_EQ(npurtMemcpy(a, in.data(), in.size(), npurtMemcpyHostToDevice), npurtSuccess);

	const View broadcast{{count}, {4}, {0}, 4, 0, 0, "one float broadcast into 16M"};
	ASSERT_EQ(copyView(b, a, broadcast, npurtMemcpyDeviceToDevice, s_), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
	std::vector<uint32_t> out(count);
	ASSERT_EQ(npurtMemcpy(out.data(), b, bytes, npurtMemcpyDeviceToHost), npurtSuccess);
	uint32_t first = 0;
	std::memcpy(&first, in.data(), 4);
	EXPECT_EQ(std::count(out.begin(), out.end(), first), static_cast<long>(count));

	const size_t n = 2048;
	const View cut[] = {
	        {{n, n}, {n * 4, 4}, {4, n * 4}, 4, 0, 0, "transpose of 2048x2048 floats"},
	        {{3, 300, 300}, {360000, 1200, 4}, {4, 12, 3600}, 4, 0, 0, "3-D permutation"},
	};
	for (const View &v : cut) {
		const size_t size = n * n * 4;
		ASSERT_EQ(npurtMemset(b, kPoison, size), npurtSuccess) << lastMessage();
		ASSERT_EQ(copyView(b, a, v, npurtMemcpyDeviceToDevice, s_), npurtSuccess)
		        << v.what << ": " << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess)
		        << v.what << ": " << lastMessage();
		std::vector<unsigned char> want(size, kPoison), got(size);
		onCpu(v, want.data(), in.data());
		ASSERT_EQ(npurtMemcpy(got.data(), b, size, npurtMemcpyDeviceToHost), npurtSuccess);
		EXPECT_TRUE(got == want) << v.what;
	}
	npurtFree(a);
	npurtFree(b);
}

// Host sides: pinned memory goes through the engine like device memory;
// pageable memory one run at a time. Both give the CPU's result.
TEST_F(StridedCopies, PinnedAndPageableHostSides)
{
	void *pinned = nullptr;
	ASSERT_EQ(npurtMallocHost(&pinned, kBuf), npurtSuccess) << lastMessage();
	std::vector<unsigned char> pageable(kBuf);
	for (int pass = 0; pass < 2; pass++) {
		unsigned char *host = pass ? pageable.data() : static_cast<unsigned char *>(pinned);
		const char *what = pass ? "pageable" : "pinned";
		// Pageable memory moves a run per copy: rows, not elements.
		const View v = views()[pass ? 8 : 0];
		// Host to device.
		std::memcpy(host, in_.data(), kBuf);
		poisonDst();
		ASSERT_EQ(copyView(dst_, host, v, npurtMemcpyHostToDevice, s_), npurtSuccess)
		        << what << ": " << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
		std::vector<unsigned char> want(kBuf, kPoison);
		onCpu(v, want.data(), in_.data());
		EXPECT_TRUE(dstBytes() == want) << what << " to device";
		// Device to host.
		std::memset(host, kPoison, kBuf);
		ASSERT_EQ(copyView(host, src_, v, npurtMemcpyDefault, s_), npurtSuccess)
		        << what << ": " << lastMessage();
		ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
		EXPECT_EQ(std::memcmp(host, want.data(), kBuf), 0) << what << " from device";
	}
	npurtFreeHost(pinned);
}

// x[:, 1::2] = x[:, 0::2] within one allocation: the extents overlap, so
// the runtime gathers the source first; the result is as if the source
// had been read whole before any write.
TEST_F(StridedCopies, OverlappingViewsOfOneAllocation)
{
	const size_t rows = 64, cols = 128;
	View v{{rows, cols / 2}, {cols * 4, 8}, {cols * 4, 8}, 4, 0, 4, "odd columns := even ones"};
	ASSERT_EQ(copyView(src_, src_, v, npurtMemcpyDeviceToDevice, s_), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
	std::vector<unsigned char> want = in_;
	onCpu(v, want.data(), in_.data());
	std::vector<unsigned char> got(kBuf);
	ASSERT_EQ(npurtMemcpy(got.data(), src_, kBuf, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_TRUE(got == want);
}

TEST_F(StridedCopies, Copy2DAsCuda)
{
	const size_t width = 100, height = 37, spitch = 128, dpitch = 112;
	std::vector<unsigned char> host = pattern(spitch * height);
	poisonDst();
	ASSERT_EQ(npurtMemcpy2D(dst_, dpitch, host.data(), spitch, width, height,
	                        npurtMemcpyHostToDevice),
	          npurtSuccess)
	        << lastMessage();
	std::vector<unsigned char> want(kBuf, kPoison);
	for (size_t r = 0; r < height; r++)
		std::memcpy(&want[r * dpitch], &host[r * spitch], width);
	EXPECT_TRUE(dstBytes() == want);

	// Device to device, then back to a tightly packed host buffer.
	ASSERT_EQ(npurtMemcpy2DAsync(src_, width, dst_, dpitch, width, height,
	                             npurtMemcpyDeviceToDevice, s_),
	          npurtSuccess)
	        << lastMessage();
	std::vector<unsigned char> packed(width * height);
	ASSERT_EQ(npurtMemcpy2DAsync(packed.data(), width, src_, width, width, height,
	                             npurtMemcpyDeviceToHost, s_),
	          npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
	for (size_t r = 0; r < height; r++)
		EXPECT_EQ(std::memcmp(&packed[r * width], &host[r * spitch], width), 0)
		        << "row " << r;

	EXPECT_EQ(npurtMemcpy2D(dst_, 64, host.data(), spitch, width, height,
	                        npurtMemcpyHostToDevice),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "larger than dpitch")) << lastMessage();
	EXPECT_EQ(
	        npurtMemcpy2D(dst_, dpitch, host.data(), spitch, width, 0, npurtMemcpyHostToDevice),
	        npurtSuccess);
	// 12000 rows of 112 bytes do not fit in 1 MiB: nothing is copied.
	EXPECT_EQ(npurtMemcpy2D(dst_, dpitch, src_, 1, 1, 12000, npurtMemcpyDeviceToDevice),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overrun its allocation")) << lastMessage();
}

TEST_F(StridedCopies, BadArgumentsAreRefused)
{
	const size_t sizes[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
	const size_t strides[9] = {4, 4, 4, 4, 4, 4, 4, 4, 4};
	auto call = [&](void *d, const void *s, const size_t *sz, int nd, size_t es,
	                npurtMemcpyKind k) {
		return npurtMemcpyStridedAsync(d, strides, s, strides, sz, nd, es, k, s_);
	};
	EXPECT_EQ(call(dst_, src_, sizes, 0, 4, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_EQ(call(dst_, src_, sizes, 9, 4, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "ndim 9")) << lastMessage();
	EXPECT_EQ(call(dst_, src_, sizes, 2, 0, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_EQ(call(nullptr, src_, sizes, 2, 4, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_EQ(call(dst_, src_, nullptr, 2, 4, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "sizes is NULL")) << lastMessage();
	EXPECT_EQ(call(dst_, src_, sizes, 2, 4, static_cast<npurtMemcpyKind>(7)),
	          npurtErrorInvalidValue);
	EXPECT_EQ(call(dst_, src_, sizes, 2, 4, npurtMemcpyHostToDevice), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemcpyHostToDevice but dst")) << lastMessage();
	// A size of 0 copies nothing, whatever the rest says.
	const size_t empty[2] = {0, 5};
	EXPECT_EQ(call(nullptr, nullptr, empty, 2, 4, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_EQ(call(dst_, src_, empty, 2, 4, npurtMemcpyDefault), npurtSuccess);
	// The extent, not the element count, is what must fit.
	const size_t one[1] = {2};
	const size_t far[1] = {kBuf};
	EXPECT_EQ(npurtMemcpyStridedAsync(dst_, far, src_, strides, one, 1, 4, npurtMemcpyDefault,
	                                  s_),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overrun its allocation")) << lastMessage();
	const size_t huge[1] = {SIZE_MAX / 2};
	EXPECT_EQ(npurtMemcpyStridedAsync(dst_, huge, src_, strides, sizes, 1, 4,
	                                  npurtMemcpyDefault, s_),
	          npurtErrorInvalidValue);
	const size_t many[2] = {SIZE_MAX / 2, 4};
	EXPECT_EQ(call(dst_, src_, many, 2, 4, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
}

// Host ranges are bounds-checked like device memory: a copy running past
// a pinned allocation is refused before it reaches the engine (it would
// write whatever lies next to it), and no count larger than an address
// space is accepted for any kind.
TEST_F(StridedCopies, HostRangesAreBoundsChecked)
{
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtMallocHost(&a, 8192), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocHost(&b, 8192), npurtSuccess) << lastMessage();
	std::memset(b, 0x11, 8192);
	EXPECT_EQ(npurtMemcpy(a, src_, 3 * 4096, npurtMemcpyDeviceToHost), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overrun its allocation of 8192 bytes"))
	        << lastMessage();
	EXPECT_EQ(npurtMemcpy(dst_, static_cast<char *>(a) + 4096, 4097, npurtMemcpyHostToDevice),
	          npurtErrorInvalidValue);
	for (size_t i = 0; i < 8192; i++)
		ASSERT_EQ(static_cast<unsigned char *>(b)[i], 0x11) << "byte " << i;
	std::vector<char> h(16);
	EXPECT_EQ(npurtMemcpy(h.data(), h.data() + 8, SIZE_MAX, npurtMemcpyHostToHost),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "do not fit in an address space")) << lastMessage();
	EXPECT_EQ(npurtMemcpyAsync(dst_, h.data(), SIZE_MAX, npurtMemcpyDefault, s_),
	          npurtErrorInvalidValue);
	npurtFreeHost(a);
	npurtFreeHost(b);
}

}  // namespace

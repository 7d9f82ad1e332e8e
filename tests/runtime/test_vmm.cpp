// Virtual memory management (npurtMem*) against the real module (run in
// the VM): reservations, allocations, mappings and access, a range grown
// in place, what unmapping waits for, the limit, the errors, and threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "npurt/npurt.h"
#include "npurt/npurt.hpp"

namespace {

constexpr size_t kMiB = 1 << 20;
constexpr size_t kG = 2 * kMiB;  // the granularity

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

npurtMemAllocationProp propOf(int device)
{
	npurtMemAllocationProp p{};
	p.type = npurtMemAllocationTypePinned;
	p.location.type = npurtMemLocationTypeDevice;
	p.location.id = device;
	return p;
}

npurtMemAccessDesc accessOf(int device, npurtMemAccessFlags flags)
{
	npurtMemAccessDesc d{};
	d.location.type = npurtMemLocationTypeDevice;
	d.location.id = device;
	d.flags = flags;
	return d;
}

void *ptrOf(npurtDeviceptr p)
{
	return reinterpret_cast<void *>(p);
}

// Fills with v + index (as floats' bytes don't matter: 32-bit words).
std::vector<uint32_t> pattern(size_t words, uint32_t v)
{
	std::vector<uint32_t> w(words);
	for (size_t i = 0; i < words; i++)
		w[i] = v + static_cast<uint32_t>(i);
	return w;
}

class Vmm : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
		prop_ = propOf(0);
	}
	void TearDown() override
	{
		npurtSetMemoryLimit(0, 0);
		npurtGetLastError();
	}
	// A reservation with `n` allocations of `each` bytes mapped one after
	// another and made read-write.
	void mapped(size_t n, size_t each, npurtDeviceptr *base,
	            std::vector<npurtMemGenericAllocationHandle_t> *handles)
	{
		ASSERT_EQ(npurtMemAddressReserve(base, n * each, 0, 0, 0), npurtSuccess)
		        << lastMessage();
		for (size_t i = 0; i < n; i++) {
			npurtMemGenericAllocationHandle_t h = 0;
			ASSERT_EQ(npurtMemCreate(&h, each, &prop_, 0), npurtSuccess)
			        << lastMessage();
			ASSERT_EQ(npurtMemMap(*base + i * each, each, 0, h, 0), npurtSuccess)
			        << lastMessage();
			handles->push_back(h);
		}
		npurtMemAccessDesc rw = accessOf(0, npurtMemAccessFlagsProtReadWrite);
		ASSERT_EQ(npurtMemSetAccess(*base, n * each, &rw, 1), npurtSuccess)
		        << lastMessage();
	}
	void unmapped(npurtDeviceptr base, size_t size,
	              const std::vector<npurtMemGenericAllocationHandle_t> &handles)
	{
		ASSERT_EQ(npurtMemUnmap(base, size), npurtSuccess) << lastMessage();
		for (auto h : handles)
			ASSERT_EQ(npurtMemRelease(h), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemAddressFree(base, size), npurtSuccess) << lastMessage();
	}
	npurtMemAllocationProp prop_{};
};

TEST_F(Vmm, GranularityAndProperties)
{
	size_t g = 0;
	ASSERT_EQ(
	        npurtMemGetAllocationGranularity(&g, &prop_, npurtMemAllocationGranularityMinimum),
	        npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(g, kG);
	ASSERT_EQ(npurtMemGetAllocationGranularity(&g, &prop_,
	                                           npurtMemAllocationGranularityRecommended),
	          npurtSuccess);
	EXPECT_EQ(g, kG);
	npurtMemGenericAllocationHandle_t h = 0;
	ASSERT_EQ(npurtMemCreate(&h, kG, &prop_, 0), npurtSuccess) << lastMessage();
	npurtMemAllocationProp got{};
	got.location.id = 7;
	ASSERT_EQ(npurtMemGetAllocationPropertiesFromHandle(&got, h), npurtSuccess);
	EXPECT_EQ(got.type, npurtMemAllocationTypePinned);
	EXPECT_EQ(got.location.type, npurtMemLocationTypeDevice);
	EXPECT_EQ(got.location.id, 0);
	EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
}

TEST_F(Vmm, BadPropertiesAreRefused)
{
	size_t g = 0;
	npurtMemGenericAllocationHandle_t h = 0;
	npurtMemAllocationProp p = prop_;
	p.type = npurtMemAllocationTypeInvalid;
	EXPECT_EQ(npurtMemCreate(&h, kG, &p, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "allocation type")) << lastMessage();
	p = prop_;
	p.location.type = npurtMemLocationTypeInvalid;
	EXPECT_EQ(npurtMemGetAllocationGranularity(&g, &p, npurtMemAllocationGranularityMinimum),
	          npurtErrorInvalidValue);
	p = prop_;
	p.location.id = 99;
	EXPECT_EQ(npurtMemCreate(&h, kG, &p, 0), npurtErrorInvalidDevice);
	p = prop_;
	p.reserved[3] = 1;
	EXPECT_EQ(npurtMemCreate(&h, kG, &p, 0), npurtErrorInvalidValue);
	p = prop_;
	p.requestedHandleTypes = static_cast<npurtMemAllocationHandleType>(2);  // CUDA's Win32
	EXPECT_EQ(npurtMemCreate(&h, kG, &p, 0), npurtErrorNotSupported);
	EXPECT_EQ(npurtMemCreate(&h, kG, nullptr, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemCreate(nullptr, kG, &prop_, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemCreate(&h, kG, &prop_, 1), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown flags")) << lastMessage();
	EXPECT_EQ(npurtMemCreate(&h, kG + 4096, &prop_, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "granularity")) << lastMessage();
	EXPECT_EQ(npurtMemCreate(&h, 0, &prop_, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemGetAllocationGranularity(
	                  &g, &prop_, static_cast<npurtMemAllocationGranularityFlags>(5)),
	          npurtErrorInvalidValue);
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	if (n > 1) {
		p = propOf(1);
		EXPECT_EQ(npurtMemCreate(&h, kG, &p, 0), npurtErrorNotSupported);
		EXPECT_TRUE(contains(lastMessage(), "npurtSetDevice")) << lastMessage();
	}
	npurtGetLastError();
}

// Two allocations mapped side by side are one buffer: a copy and an op
// cross the seam, and the data is what was written.
// A shareable allocation's descriptor: in this process it imports as the
// same allocation (one more reference); what is not such memory is refused.
TEST_F(Vmm, ShareableHandlesInOneProcess)
{
	npurtMemAllocationProp p = prop_;
	p.requestedHandleTypes = npurtMemHandleTypePosixFileDescriptor;
	npurtMemGenericAllocationHandle_t h = 0, plain = 0, again = 0;
	ASSERT_EQ(npurtMemCreate(&h, kG, &p, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemCreate(&plain, kG, &prop_, 0), npurtSuccess) << lastMessage();
	npurtMemAllocationProp got{};
	ASSERT_EQ(npurtMemGetAllocationPropertiesFromHandle(&got, h), npurtSuccess);
	EXPECT_EQ(got.requestedHandleTypes, npurtMemHandleTypePosixFileDescriptor);
	int fd = -1;
	EXPECT_EQ(npurtMemExportToShareableHandle(&fd, plain, npurtMemHandleTypePosixFileDescriptor,
	                                          0),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "requestedHandleTypes")) << lastMessage();
	EXPECT_EQ(npurtMemExportToShareableHandle(&fd, h, npurtMemHandleTypeNone, 0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemExportToShareableHandle(&fd, h, npurtMemHandleTypePosixFileDescriptor, 1),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemExportToShareableHandle(nullptr, h, npurtMemHandleTypePosixFileDescriptor,
	                                          0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(fd, -1) << "a failed export wrote a descriptor";
	ASSERT_EQ(npurtMemExportToShareableHandle(&fd, h, npurtMemHandleTypePosixFileDescriptor, 0),
	          npurtSuccess)
	        << lastMessage();
	ASSERT_GE(fd, 0);
	void *os = reinterpret_cast<void *>(static_cast<intptr_t>(fd));
	ASSERT_EQ(npurtMemImportFromShareableHandle(&again, os,
	                                            npurtMemHandleTypePosixFileDescriptor),
	          npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(again, h) << "memory this process holds comes back as its allocation";
	EXPECT_EQ(npurtMemImportFromShareableHandle(&again, os, npurtMemHandleTypeNone),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemImportFromShareableHandle(nullptr, os,
	                                            npurtMemHandleTypePosixFileDescriptor),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemImportFromShareableHandle(
	                  &again, reinterpret_cast<void *>(static_cast<intptr_t>(-1)),
	                  npurtMemHandleTypePosixFileDescriptor),
	          npurtErrorInvalidValue);
	int pipeFds[2];
	ASSERT_EQ(pipe(pipeFds), 0);
	EXPECT_EQ(npurtMemImportFromShareableHandle(
	                  &again, reinterpret_cast<void *>(static_cast<intptr_t>(pipeFds[0])),
	                  npurtMemHandleTypePosixFileDescriptor),
	          npurtErrorInvalidValue)
	        << "a pipe is not device memory";
	EXPECT_TRUE(contains(lastMessage(), "not shareable device memory")) << lastMessage();
	close(pipeFds[0]);
	close(pipeFds[1]);
	close(fd);
	// Two references (the create's, the import's): the memory stays
	// mapped-able after the first release.
	EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
	npurtDeviceptr base = 0;
	ASSERT_EQ(npurtMemAddressReserve(&base, kG, 0, 0, 0), npurtSuccess);
	EXPECT_EQ(npurtMemMap(base, kG, 0, h, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemUnmap(base, kG), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(base, kG), npurtSuccess);
	EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
	EXPECT_EQ(npurtMemRelease(h), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtMemRelease(plain), npurtSuccess);
}

TEST_F(Vmm, AdjacentMappingsAreOneBuffer)
{
	npurtDeviceptr base = 0;
	std::vector<npurtMemGenericAllocationHandle_t> hs;
	ASSERT_NO_FATAL_FAILURE(mapped(3, kG, &base, &hs));
	const size_t bytes = 3 * kG, words = bytes / 4;
	std::vector<uint32_t> in = pattern(words, 11), out(words, 0);
	ASSERT_EQ(npurtMemcpy(ptrOf(base), in.data(), bytes, npurtMemcpyHostToDevice), npurtSuccess)
	        << lastMessage();
	npurtPointerAttributes attr{};
	ASSERT_EQ(npurtPointerGetAttributes(&attr, ptrOf(base + kG + 64)), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(attr.type, npurtMemoryTypeDevice);
	EXPECT_EQ(attr.device, 0);
	// Pool memory to mapped memory and back, across the seams.
	void *pool = nullptr;
	ASSERT_EQ(npurtMalloc(&pool, bytes), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(pool, ptrOf(base), bytes, npurtMemcpyDeviceToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemsetD32(ptrOf(base + kG - 8), 0xabcdu, 4), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpy(out.data(), ptrOf(base), bytes, npurtMemcpyDeviceToHost),
	          npurtSuccess)
	        << lastMessage();
	for (size_t i = 0; i < words; i++) {
		const bool filled = i >= kG / 4 - 2 && i < kG / 4 + 2;
		ASSERT_EQ(out[i], filled ? 0xabcdu : in[i]) << "word " << i;
	}
	ASSERT_EQ(npurtMemcpy(out.data(), pool, bytes, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(out, in);
	// An op reads and writes mapped memory.
	npurtOpDesc d{};
	d.op = npurtOpScale;
	d.dtype = npurtFloat32;
	d.outDtype = npurtFloat32;
	std::vector<float> f(words);
	for (size_t i = 0; i < words; i++)
		f[i] = static_cast<float>(i % 1000);
	ASSERT_EQ(npurtMemcpy(ptrOf(base), f.data(), bytes, npurtMemcpyHostToDevice), npurtSuccess);
	d.a = ptrOf(base);
	d.out = ptrOf(base);
	d.n = words;
	d.alpha = 2.0f;
	ASSERT_EQ(npurtLaunchOp(&d, nullptr), npurtSuccess) << lastMessage();
	std::vector<float> g(words);
	ASSERT_EQ(npurtMemcpy(g.data(), ptrOf(base), bytes, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	for (size_t i = 0; i < words; i++)
		ASSERT_EQ(g[i], 2.0f * f[i]) << "element " << i;
	EXPECT_EQ(npurtFree(pool), npurtSuccess);
	ASSERT_NO_FATAL_FAILURE(unmapped(base, bytes, hs));
}

// Expandable segments' move: the range grows by mapping more behind it;
// what was written stays where it was.
TEST_F(Vmm, RangeGrowsInPlace)
{
	npurtDeviceptr base = 0;
	ASSERT_EQ(npurtMemAddressReserve(&base, 4 * kG, 0, 0, 0), npurtSuccess) << lastMessage();
	npurtMemAccessDesc rw = accessOf(0, npurtMemAccessFlagsProtReadWrite);
	std::vector<npurtMemGenericAllocationHandle_t> hs;
	std::vector<uint32_t> in = pattern(4 * kG / 4, 5), out(4 * kG / 4);
	for (size_t i = 0; i < 4; i++) {
		npurtMemGenericAllocationHandle_t h = 0;
		ASSERT_EQ(npurtMemCreate(&h, kG, &prop_, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemMap(base + i * kG, kG, 0, h, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemSetAccess(base + i * kG, kG, &rw, 1), npurtSuccess)
		        << lastMessage();
		hs.push_back(h);
		ASSERT_EQ(npurtMemcpy(ptrOf(base + i * kG), in.data() + i * kG / 4, kG,
		                      npurtMemcpyHostToDevice),
		          npurtSuccess)
		        << lastMessage();
		// The whole range so far, in one copy.
		ASSERT_EQ(
		        npurtMemcpy(out.data(), ptrOf(base), (i + 1) * kG, npurtMemcpyDeviceToHost),
		        npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(0, std::memcmp(out.data(), in.data(), (i + 1) * kG)) << "after " << i + 1;
	}
	// Past the mapped part: not device memory.
	ASSERT_NO_FATAL_FAILURE(unmapped(base, 4 * kG, hs));
	EXPECT_EQ(npurtMemcpy(out.data(), ptrOf(base), kG, npurtMemcpyDeviceToHost),
	          npurtErrorInvalidValue);
	npurtGetLastError();
}

TEST_F(Vmm, AccessIsWhatWasGranted)
{
	npurtDeviceptr base = 0;
	ASSERT_EQ(npurtMemAddressReserve(&base, kG, 0, 0, 0), npurtSuccess);
	npurtMemGenericAllocationHandle_t h = 0;
	ASSERT_EQ(npurtMemCreate(&h, kG, &prop_, 0), npurtSuccess);
	ASSERT_EQ(npurtMemMap(base, kG, 0, h, 0), npurtSuccess);
	npurtMemLocation loc{npurtMemLocationTypeDevice, 0};
	unsigned long long flags = 99;
	ASSERT_EQ(npurtMemGetAccess(&flags, &loc, base + 4096), npurtSuccess) << lastMessage();
	EXPECT_EQ(flags, npurtMemAccessFlagsProtNone);
	// Mapped without access: not usable memory yet.
	std::vector<uint32_t> in = pattern(kG / 4, 1), out(kG / 4);
	EXPECT_EQ(npurtMemcpy(ptrOf(base), in.data(), kG, npurtMemcpyHostToDevice),
	          npurtErrorInvalidValue);
	npurtGetLastError();
	npurtMemAccessDesc rw = accessOf(0, npurtMemAccessFlagsProtReadWrite);
	ASSERT_EQ(npurtMemSetAccess(base, kG, &rw, 1), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(ptrOf(base), in.data(), kG, npurtMemcpyHostToDevice), npurtSuccess);
	// Read-only: the device reads it; a write faults.
	npurtMemAccessDesc ro = accessOf(0, npurtMemAccessFlagsProtRead);
	ASSERT_EQ(npurtMemSetAccess(base, kG, &ro, 1), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemGetAccess(&flags, &loc, base), npurtSuccess);
	EXPECT_EQ(flags, npurtMemAccessFlagsProtRead);
	ASSERT_EQ(npurtMemcpy(out.data(), ptrOf(base), kG, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(out, in);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(ptrOf(base), 0, 4096, s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamSynchronize(s), npurtErrorDeviceFault);
	EXPECT_TRUE(contains(lastMessage(), "fault")) << lastMessage();
	EXPECT_EQ(npurtStreamRecover(s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpy(out.data(), ptrOf(base), kG, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(out, in);  // the write did not happen
	// None takes it away again.
	npurtMemAccessDesc none = accessOf(0, npurtMemAccessFlagsProtNone);
	ASSERT_EQ(npurtMemSetAccess(base, kG, &none, 1), npurtSuccess);
	EXPECT_EQ(npurtMemcpy(out.data(), ptrOf(base), kG, npurtMemcpyDeviceToHost),
	          npurtErrorInvalidValue);
	npurtGetLastError();
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	ASSERT_EQ(npurtMemUnmap(base, kG), npurtSuccess);
	EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(base, kG), npurtSuccess);
}

// An unmap with a copy of the memory still queued waits for it: the copy
// reads what was there, it does not fault.
TEST_F(Vmm, UnmapWaitsForQueuedWork)
{
	npurtDeviceptr base = 0;
	std::vector<npurtMemGenericAllocationHandle_t> hs;
	const size_t bytes = 8 * kG;
	ASSERT_NO_FATAL_FAILURE(mapped(1, bytes, &base, &hs));
	std::vector<uint32_t> in = pattern(bytes / 4, 77), out(bytes / 4);
	ASSERT_EQ(npurtMemcpy(ptrOf(base), in.data(), bytes, npurtMemcpyHostToDevice),
	          npurtSuccess);
	void *dst = nullptr;
	ASSERT_EQ(npurtMalloc(&dst, bytes), npurtSuccess);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking), npurtSuccess);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(npurtMemcpyAsync(dst, ptrOf(base), bytes, npurtMemcpyDeviceToDevice, s),
		          npurtSuccess)
		        << lastMessage();
	ASSERT_EQ(npurtMemUnmap(base, bytes), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtStreamQuery(s), npurtSuccess) << "unmap returned before the copies ended";
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpy(out.data(), dst, bytes, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(out, in);
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_EQ(npurtFree(dst), npurtSuccess);
	for (auto h : hs)
		EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(base, bytes), npurtSuccess);
}

// Released while mapped, the memory lives on until the unmap; then it goes
// back to the device (the driver's figure for this process drops).
TEST_F(Vmm, ReleasedMemoryLivesWhileMapped)
{
	npurtMemUsage before{}, during{}, after{};
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &before), npurtSuccess);
	npurtDeviceptr base = 0;
	std::vector<npurtMemGenericAllocationHandle_t> hs;
	const size_t bytes = 16 * kG;
	ASSERT_NO_FATAL_FAILURE(mapped(1, bytes, &base, &hs));
	ASSERT_EQ(npurtMemRelease(hs[0]), npurtSuccess);
	EXPECT_EQ(npurtMemRelease(hs[0]), npurtErrorInvalidHandle);
	npurtGetLastError();
	std::vector<uint32_t> in = pattern(bytes / 4, 3), out(bytes / 4);
	ASSERT_EQ(npurtMemcpy(ptrOf(base), in.data(), bytes, npurtMemcpyHostToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(out.data(), ptrOf(base), bytes, npurtMemcpyDeviceToHost),
	          npurtSuccess);
	EXPECT_EQ(out, in);
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &during), npurtSuccess);
	EXPECT_GE(during.processDeviceBytes, before.processDeviceBytes + bytes);
	EXPECT_GE(during.processReservedBytes, before.processReservedBytes + bytes);
	// Retain gives the handle back from any address of the mapping.
	npurtMemGenericAllocationHandle_t again = 0;
	ASSERT_EQ(npurtMemRetainAllocationHandle(&again, ptrOf(base + bytes / 2)), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(again, hs[0]);
	EXPECT_EQ(npurtMemRelease(again), npurtSuccess);
	ASSERT_EQ(npurtMemUnmap(base, bytes), npurtSuccess);
	EXPECT_EQ(npurtMemRetainAllocationHandle(&again, ptrOf(base)), npurtErrorInvalidValue);
	npurtGetLastError();
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &after), npurtSuccess);
	EXPECT_EQ(after.processReservedBytes, before.processReservedBytes);
	EXPECT_LE(after.processDeviceBytes, during.processDeviceBytes - bytes);
	EXPECT_EQ(npurtMemAddressFree(base, bytes), npurtSuccess);
}

TEST_F(Vmm, WrongRangesAreRefused)
{
	npurtDeviceptr base = 0;
	ASSERT_EQ(npurtMemAddressReserve(&base, 4 * kG, 0, 0, 0), npurtSuccess);
	npurtMemGenericAllocationHandle_t h = 0, small = 0;
	ASSERT_EQ(npurtMemCreate(&h, 2 * kG, &prop_, 0), npurtSuccess);
	ASSERT_EQ(npurtMemCreate(&small, kG, &prop_, 0), npurtSuccess);
	// Outside the reservation, past the allocation, misaligned, flags.
	EXPECT_EQ(npurtMemMap(base + 3 * kG, 2 * kG, 0, h, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "reservation")) << lastMessage();
	EXPECT_EQ(npurtMemMap(base, 2 * kG, kG, h, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "outside the allocation")) << lastMessage();
	EXPECT_EQ(npurtMemMap(base + 4096, kG, 0, h, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemMap(base, kG, 0, h, 4), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemMap(base, kG, 0, 0xdeadull, 0), npurtErrorInvalidHandle);
	// A part of an allocation, then an overlap.
	ASSERT_EQ(npurtMemMap(base + kG, kG, kG, h, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemMap(base, 2 * kG, 0, h, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overlaps")) << lastMessage();
	// Access and unmap take whole mappings only.
	npurtMemAccessDesc rw = accessOf(0, npurtMemAccessFlagsProtReadWrite);
	EXPECT_EQ(npurtMemSetAccess(base, 2 * kG, &rw, 1), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "whole mappings")) << lastMessage();
	EXPECT_EQ(npurtMemUnmap(base, 2 * kG), npurtErrorInvalidValue);
	npurtMemAccessDesc bad = accessOf(0, static_cast<npurtMemAccessFlags>(2));
	EXPECT_EQ(npurtMemSetAccess(base + kG, kG, &bad, 1), npurtErrorInvalidValue);
	npurtMemAccessDesc two[2] = {rw, accessOf(0, npurtMemAccessFlagsProtRead)};
	EXPECT_EQ(npurtMemSetAccess(base + kG, kG, two, 2), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemSetAccess(base + kG, kG, nullptr, 1), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemSetAccess(base + kG, kG, &rw, 0), npurtErrorInvalidValue);
	ASSERT_EQ(npurtMemSetAccess(base + kG, kG, &rw, 1), npurtSuccess) << lastMessage();
	int n = 0;
	ASSERT_EQ(npurtGetDeviceCount(&n), npurtSuccess);
	if (n > 1) {
		npurtMemAccessDesc peer = accessOf(1, npurtMemAccessFlagsProtReadWrite);
		EXPECT_EQ(npurtMemSetAccess(base + kG, kG, &peer, 1), npurtErrorNotSupported);
		EXPECT_TRUE(contains(lastMessage(), "peer")) << lastMessage();
		npurtMemAccessDesc none1 = accessOf(1, npurtMemAccessFlagsProtNone);
		EXPECT_EQ(npurtMemSetAccess(base + kG, kG, &none1, 1), npurtSuccess);
	}
	// Pool and IPC calls know mapped memory is not theirs.
	EXPECT_EQ(npurtFree(ptrOf(base + kG)), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemUnmap")) << lastMessage();
	npurtIpcMemHandle_t ih{};
	EXPECT_EQ(npurtIpcGetMemHandle(&ih, ptrOf(base + kG)), npurtErrorInvalidValue);
	// A reservation is freed whole and empty only.
	EXPECT_EQ(npurtMemAddressFree(base, 4 * kG), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "mapping")) << lastMessage();
	EXPECT_EQ(npurtMemAddressFree(base, 2 * kG), npurtErrorInvalidValue);
	ASSERT_EQ(npurtMemUnmap(base + kG, kG), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemUnmap(base + kG, kG), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
	EXPECT_EQ(npurtMemRelease(small), npurtSuccess);
	EXPECT_EQ(npurtMemMap(base, kG, 0, small, 0), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtMemAddressFree(base, 4 * kG), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(base, 4 * kG), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemAddressReserve(&base, kG, 3, 0, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemAddressReserve(&base, kG, 0, 0, 1), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemAddressReserve(nullptr, kG, 0, 0, 0), npurtErrorInvalidValue);
	npurtGetLastError();
}

TEST_F(Vmm, HintedReservation)
{
	npurtDeviceptr a = 0, b = 0;
	ASSERT_EQ(npurtMemAddressReserve(&a, 4 * kG, 0, 0, 0), npurtSuccess);
	ASSERT_EQ(npurtMemAddressFree(a, 4 * kG), npurtSuccess);
	// The freed range, asked for by address, is given.
	ASSERT_EQ(npurtMemAddressReserve(&b, 2 * kG, 0, a + 2 * kG, 0), npurtSuccess);
	EXPECT_EQ(b, a + 2 * kG);
	// Taken already: another range.
	npurtDeviceptr c = 0;
	ASSERT_EQ(npurtMemAddressReserve(&c, 2 * kG, 0, b, 0), npurtSuccess);
	EXPECT_NE(c, b);
	// A large alignment is honoured.
	npurtDeviceptr d = 0;
	ASSERT_EQ(npurtMemAddressReserve(&d, kG, 64 * kMiB, 0, 0), npurtSuccess);
	EXPECT_EQ(d % (64 * kMiB), 0u);
	EXPECT_EQ(npurtMemAddressFree(b, 2 * kG), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(c, 2 * kG), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(d, kG), npurtSuccess);
}

TEST_F(Vmm, LimitAndDeviceMemoryRunOut)
{
	npurtMemUsage u{};
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &u), npurtSuccess);
	ASSERT_EQ(npurtSetMemoryLimit(0, u.processReservedBytes + 4 * kG), npurtSuccess);
	npurtMemGenericAllocationHandle_t h = 0, h2 = 0;
	ASSERT_EQ(npurtMemCreate(&h, 4 * kG, &prop_, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemCreate(&h2, kG, &prop_, 0), npurtErrorMemoryAllocation);
	EXPECT_TRUE(contains(lastMessage(), "limit")) << lastMessage();
	ASSERT_EQ(npurtSetMemoryLimit(0, 0), npurtSuccess);
	EXPECT_EQ(npurtMemRelease(h), npurtSuccess);
	// More than the device has.
	EXPECT_EQ(npurtMemCreate(&h2, u.totalBytes + kG - u.totalBytes % kG, &prop_, 0),
	          npurtErrorMemoryAllocation);
	EXPECT_TRUE(contains(lastMessage(), "out of device memory")) << lastMessage();
	npurtGetLastError();
	// Nothing stays charged (the failed create gave the pool's cache
	// back to the device before it gave up).
	npurtMemUsage after{};
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &after), npurtSuccess);
	EXPECT_LE(after.processReservedBytes, u.processReservedBytes);
}

// Threads each build, use and tear down their own mapped ranges at once.
TEST_F(Vmm, ThreadsMapAtOnce)
{
	constexpr int kThreads = 4, kRounds = 8;
	std::atomic<int> failures{0};
	std::vector<std::string> why(kThreads);
	std::vector<std::thread> ts;
	for (int t = 0; t < kThreads; t++)
		ts.emplace_back([&, t] {
			auto fail = [&](const std::string &w) {
				why[t] = w + ": " + npurtGetLastErrorMessage();
				failures++;
			};
			if (npurtSetDevice(0) != npurtSuccess)
				return fail("npurtSetDevice");
			npurtMemAllocationProp p = propOf(0);
			npurtMemAccessDesc rw = accessOf(0, npurtMemAccessFlagsProtReadWrite);
			std::vector<uint32_t> out(2 * kG / 4);
			for (int r = 0; r < kRounds; r++) {
				npurtDeviceptr base = 0;
				npurtMemGenericAllocationHandle_t h[2] = {};
				if (npurtMemAddressReserve(&base, 2 * kG, 0, 0, 0))
					return fail("reserve");
				for (int i = 0; i < 2; i++)
					if (npurtMemCreate(&h[i], kG, &p, 0) ||
					    npurtMemMap(base + i * kG, kG, 0, h[i], 0) ||
					    npurtMemRelease(h[i]))
						return fail("create/map/release");
				if (npurtMemSetAccess(base, 2 * kG, &rw, 1))
					return fail("access");
				const uint32_t v = static_cast<uint32_t>(t * 1000 + r);
				if (npurtMemsetD32(ptrOf(base), v, 2 * kG / 4) ||
				    npurtMemcpy(out.data(), ptrOf(base), 2 * kG,
				                npurtMemcpyDeviceToHost))
					return fail("use");
				for (uint32_t w : out)
					if (w != v)
						return fail("wrong data " + std::to_string(w));
				if (npurtMemUnmap(base, 2 * kG) ||
				    npurtMemAddressFree(base, 2 * kG))
					return fail("unmap/free");
			}
		});
	for (auto &th : ts)
		th.join();
	for (int t = 0; t < kThreads; t++)
		EXPECT_TRUE(why[t].empty()) << "thread " << t << ": " << why[t];
	EXPECT_EQ(failures.load(), 0);
}

// A device reset takes the context's allocations and mappings; the
// reservation stays the process's until freed.
TEST_F(Vmm, DeviceResetTakesTheAllocations)
{
	npurtDeviceptr base = 0;
	std::vector<npurtMemGenericAllocationHandle_t> hs;
	ASSERT_NO_FATAL_FAILURE(mapped(2, kG, &base, &hs));
	ASSERT_EQ(npurtDeviceReset(), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	std::vector<uint32_t> out(kG / 4);
	EXPECT_EQ(npurtMemcpy(out.data(), ptrOf(base), kG, npurtMemcpyDeviceToHost),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemRelease(hs[0]), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtMemAddressFree(base, 2 * kG), npurtSuccess) << lastMessage();
	npurtGetLastError();
}

// The C++ layer's GrowableBuffer: the address stays, the data stays, and
// growing past the capacity throws without changing anything.
TEST_F(Vmm, GrowableBufferKeepsItsAddressAndData)
{
	npurtMemUsage before{};
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &before), npurtSuccess);
	{
		npurt::GrowableBuffer b(64 * kMiB);
		EXPECT_EQ(b.capacity(), 64 * kMiB);
		EXPECT_EQ(b.size(), 0u);
		void *at = b.data();
		std::vector<uint32_t> in = pattern(10 * kMiB / 4, 9), out(10 * kMiB / 4);
		b.grow(1);
		EXPECT_EQ(b.size(), kG);
		npurt::check(npurtMemcpy(b.data(), in.data(), kG, npurtMemcpyHostToDevice));
		b.grow(10 * kMiB);
		EXPECT_EQ(b.data(), at);
		EXPECT_EQ(b.size(), 10 * kMiB);
		npurt::check(npurtMemcpy(static_cast<char *>(b.data()) + kG, in.data() + kG / 4,
		                         10 * kMiB - kG, npurtMemcpyHostToDevice));
		npurt::check(npurtMemcpy(out.data(), b.data(), 10 * kMiB, npurtMemcpyDeviceToHost));
		EXPECT_EQ(out, in);
		try {
			b.grow(65 * kMiB);
			ADD_FAILURE() << "grow past the capacity did not throw";
		} catch (const npurt::Error &e) {
			EXPECT_EQ(e.code(), npurtErrorInvalidValue);
			EXPECT_TRUE(contains(e.what(), "capacity")) << e.what();
		}
		EXPECT_EQ(b.size(), 10 * kMiB);
		npurt::GrowableBuffer moved = std::move(b);
		EXPECT_EQ(moved.data(), at);
		EXPECT_EQ(b.data(), nullptr);
	}
	// Everything went back.
	npurtMemUsage after{};
	ASSERT_EQ(npurtDeviceGetMemUsage(0, &after), npurtSuccess);
	EXPECT_EQ(after.processReservedBytes, before.processReservedBytes);
}

}  // namespace

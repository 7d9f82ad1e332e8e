// Managed memory (npurtMallocManaged) against the real module, in the VM:
// one pointer for host code, ops and copies; its safe free; the calls
// about it (prefetch, advice, stream attach) and every error they give.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "npurt/npurt.h"
#include "vm_knobs.h"

namespace {

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

class Managed : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
	void TearDown() override
	{
		npurtGetLastError();
		npurtSetDevice(0);
	}
};

npurtError_t launchAdd(float *out, const float *a, const float *b, size_t n, npurtStream_t s)
{
	npurtOpDesc d{};
	d.op = npurtOpAdd;
	d.dtype = npurtFloat32;
	d.outDtype = npurtFloat32;
	d.a = a;
	d.b = b;
	d.out = out;
	d.n = n;
	return npurtLaunchOp(&d, s);
}

TEST_F(Managed, HostOpsAndCopiesShareOnePointer)
{
	int v = 0;
	ASSERT_EQ(npurtDeviceGetAttribute(&v, npurtDevAttrManagedMemory, 0), npurtSuccess);
	EXPECT_EQ(v, 1);
	ASSERT_EQ(npurtDeviceGetAttribute(&v, npurtDevAttrConcurrentManagedAccess, 0),
	          npurtSuccess);
	EXPECT_EQ(v, 1);
	npurtDeviceProp p{};
	ASSERT_EQ(npurtGetDeviceProperties(&p, 0), npurtSuccess);
	EXPECT_EQ(p.managedMemory, 1);
	EXPECT_EQ(p.concurrentManagedAccess, 1);

	const size_t n = 1 << 16;
	float *a = nullptr, *b = nullptr, *out = nullptr;
	ASSERT_EQ(npurtMallocManaged(&a, n * sizeof(float)), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocManaged(&b, n * sizeof(float), npurtMemAttachHost), npurtSuccess);
	ASSERT_EQ(npurtMallocManaged(&out, n * sizeof(float)), npurtSuccess);
	for (size_t i = 0; i < n; i++) {
		a[i] = static_cast<float>(i % 1000);
		b[i] = 0.5f * static_cast<float>(i % 7);
	}
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtStreamAttachMemAsync(s, out), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemPrefetchAsync(a, n * sizeof(float), 0, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(launchAdd(out, a, b, n, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemPrefetchAsync(out, n * sizeof(float), npurtCpuDeviceId, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(out[i], a[i] + b[i]) << i;

	// Copies: to and from device memory, the direction inferred.
	float *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, n * sizeof(float)), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(d, out, n * sizeof(float), npurtMemcpyDefault), npurtSuccess);
	std::memset(a, 0, n * sizeof(float));
	ASSERT_EQ(npurtMemcpy(a, d, n * sizeof(float), npurtMemcpyDefault), npurtSuccess);
	EXPECT_EQ(std::memcmp(a, out, n * sizeof(float)), 0);

	npurtPointerAttributes attr{};
	ASSERT_EQ(npurtPointerGetAttributes(&attr, out + 10), npurtSuccess);
	EXPECT_EQ(attr.type, npurtMemoryTypeManaged);
	EXPECT_EQ(attr.device, 0);
	EXPECT_EQ(attr.devicePointer, out + 10);
	EXPECT_EQ(attr.hostPointer, out + 10);
	EXPECT_EQ(attr.base, out);
	EXPECT_EQ(attr.size, n * sizeof(float));

	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_EQ(npurtFree(d), npurtSuccess);
	EXPECT_EQ(npurtFree(a), npurtSuccess);
	EXPECT_EQ(npurtFree(b), npurtSuccess);
	EXPECT_EQ(npurtFree(out), npurtSuccess);
}

TEST_F(Managed, BadAllocationsAndFrees)
{
	void *p = reinterpret_cast<void *>(0x1234);
	EXPECT_EQ(npurtMallocManaged(&p, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "size is 0")) << lastMessage();
	EXPECT_EQ(p, reinterpret_cast<void *>(0x1234)) << "nothing written on an error";
	for (unsigned flags : {0u, 3u, unsigned(npurtMemAttachSingle), 0x100u}) {
		EXPECT_EQ(npurtMallocManaged(&p, 64, flags), npurtErrorInvalidValue) << flags;
		EXPECT_TRUE(contains(lastMessage(), "flags")) << lastMessage();
	}
	EXPECT_EQ(npurtMallocManaged(nullptr, 64), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMallocManaged(&p, size_t(1) << 50), npurtErrorInvalidValue);

	char *m = nullptr;
	ASSERT_EQ(npurtMallocManaged(reinterpret_cast<void **>(&m), 10000), npurtSuccess);
	EXPECT_EQ(npurtFree(m + 8), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "inside managed memory")) << lastMessage();
	EXPECT_EQ(npurtFreeHost(m), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "which npurtFree frees")) << lastMessage();
	unsigned flags = 0;
	EXPECT_EQ(npurtHostGetFlags(&flags, m), npurtErrorInvalidValue);
	npurtIpcMemHandle_t ih{};
	EXPECT_EQ(npurtIpcGetMemHandle(&ih, m), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live memory from npurtMalloc")) << lastMessage();
	// The refused calls lost nothing: the memory still works and frees once.
	std::memset(m, 7, 10000);
	EXPECT_EQ(m[9999], 7);
	EXPECT_EQ(npurtFree(m), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtFree(m), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGetLastError(), npurtErrorInvalidValue);
}

TEST_F(Managed, PrefetchAdviseAndAttachCheckTheirArguments)
{
	const size_t n = 8192;
	char *m = nullptr, *d = nullptr, *h = nullptr;
	ASSERT_EQ(npurtMallocManaged(reinterpret_cast<void **>(&m), n), npurtSuccess);
	ASSERT_EQ(npurtMalloc(reinterpret_cast<void **>(&d), n), npurtSuccess);
	ASSERT_EQ(npurtMallocHost(reinterpret_cast<void **>(&h), n), npurtSuccess);
	int ndev = 0;
	ASSERT_EQ(npurtGetDeviceCount(&ndev), npurtSuccess);
	int local = 0;

	// Good calls, on the legacy default stream and to each place.
	EXPECT_EQ(npurtMemPrefetchAsync(m, n, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemPrefetchAsync(m + 100, n - 100, npurtCpuDeviceId, nullptr), npurtSuccess);
	EXPECT_EQ(npurtMemPrefetchAsync(m, 0, ndev - 1, npurtStreamPerThread), npurtSuccess);
	EXPECT_EQ(npurtMemAdvise(m, n, npurtMemAdviseSetReadMostly, 12345), npurtSuccess)
	        << "ReadMostly ignores the device";
	EXPECT_EQ(npurtMemAdvise(m, n, npurtMemAdviseSetPreferredLocation, npurtCpuDeviceId),
	          npurtSuccess);
	EXPECT_EQ(npurtMemAdvise(m, 16, npurtMemAdviseSetAccessedBy, 0), npurtSuccess);
	EXPECT_EQ(npurtMemAdvise(m, 16, npurtMemAdviseUnsetAccessedBy, 0), npurtSuccess);
	EXPECT_EQ(npurtStreamAttachMemAsync(nullptr, m, n, npurtMemAttachGlobal), npurtSuccess);

	// Not managed memory, or past its end.
	for (const void *p : {static_cast<const void *>(d), static_cast<const void *>(h),
	                      static_cast<const void *>(&local)}) {
		EXPECT_EQ(npurtMemPrefetchAsync(p, 16, 0), npurtErrorInvalidValue);
		EXPECT_TRUE(contains(lastMessage(), "is not managed memory")) << lastMessage();
		EXPECT_EQ(npurtMemAdvise(p, 16, npurtMemAdviseSetReadMostly, 0),
		          npurtErrorInvalidValue);
	}
	EXPECT_EQ(npurtMemPrefetchAsync(nullptr, 16, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPrefetchAsync(m + 1, n, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "run past the end")) << lastMessage();
	EXPECT_EQ(npurtMemAdvise(m, n + 1, npurtMemAdviseSetReadMostly, 0), npurtErrorInvalidValue);

	// Bad devices and advice.
	for (int dev : {ndev, -2, 1000}) {
		EXPECT_EQ(npurtMemPrefetchAsync(m, n, dev), npurtErrorInvalidDevice) << dev;
		EXPECT_TRUE(contains(lastMessage(), "nor npurtCpuDeviceId")) << lastMessage();
		EXPECT_EQ(npurtMemAdvise(m, n, npurtMemAdviseSetPreferredLocation, dev),
		          npurtErrorInvalidDevice);
	}
	EXPECT_EQ(npurtMemAdvise(m, n, static_cast<npurtMemoryAdvise>(0), 0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemAdvise(m, n, static_cast<npurtMemoryAdvise>(7), 0),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown advice 7")) << lastMessage();

	// Attach takes a whole allocation.
	EXPECT_EQ(npurtStreamAttachMemAsync(nullptr, m + 8, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "whole managed allocation")) << lastMessage();
	EXPECT_EQ(npurtStreamAttachMemAsync(nullptr, m, n - 1), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamAttachMemAsync(nullptr, m, 0, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamAttachMemAsync(nullptr, d, 0), npurtErrorInvalidValue);

	// A destroyed stream is refused too.
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_NE(npurtMemPrefetchAsync(m, n, 0, s), npurtSuccess);
	EXPECT_NE(npurtStreamAttachMemAsync(s, m), npurtSuccess);
	npurtGetLastError();

	EXPECT_EQ(npurtFree(m), npurtSuccess);
	EXPECT_EQ(npurtMemPrefetchAsync(m, 16, 0), npurtErrorInvalidValue) << "freed";
	EXPECT_EQ(npurtFree(d), npurtSuccess);
	EXPECT_EQ(npurtFreeHost(h), npurtSuccess);
}

// npurtFree of managed memory that queued work still reads keeps it until
// the work has run (safe free, as npurtFree of device memory): the next
// allocation, written at once, must not be the same block.
TEST_F(Managed, FreeWhileWorkIsQueuedIsSafe)
{
	vmknobs::JobLatency slow(0, vmknobs::latencyUs());
	if (!slow.on())
		GTEST_SKIP() << "needs root for the job latency knob";
	const size_t n = 4096;
	float *a = nullptr, *out = nullptr;
	ASSERT_EQ(npurtMallocManaged(&a, n * sizeof(float)), npurtSuccess);
	ASSERT_EQ(npurtMallocManaged(&out, n * sizeof(float)), npurtSuccess);
	for (size_t i = 0; i < n; i++)
		a[i] = static_cast<float>(i);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(launchAdd(out, a, a, n, s), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	float *again = nullptr;
	ASSERT_EQ(npurtMallocManaged(&again, n * sizeof(float)), npurtSuccess);
	EXPECT_NE(again, a) << "reused while the op still reads it";
	for (size_t i = 0; i < n; i++)
		again[i] = -1.0f;
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(out[i], 2.0f * static_cast<float>(i)) << i;
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
	EXPECT_EQ(npurtFree(again), npurtSuccess);
	EXPECT_EQ(npurtFree(out), npurtSuccess);
}

// Managed memory is mapped for the NPU current at allocation; another NPU
// refuses it as an op operand and reaches it through copies.
TEST_F(Managed, OtherNpusReachItThroughCopies)
{
	int ndev = 0;
	ASSERT_EQ(npurtGetDeviceCount(&ndev), npurtSuccess);
	if (ndev < 2)
		GTEST_SKIP() << "one NPU";
	const size_t n = 1024;
	float *m = nullptr;
	ASSERT_EQ(npurtMallocManaged(&m, n * sizeof(float)), npurtSuccess);
	for (size_t i = 0; i < n; i++)
		m[i] = static_cast<float>(i) * 0.25f;
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	float *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, n * sizeof(float)), npurtSuccess);
	EXPECT_EQ(launchAdd(d, m, m, n, nullptr), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "mapped for NPU 0")) << lastMessage();
	ASSERT_EQ(npurtMemcpy(d, m, n * sizeof(float), npurtMemcpyDefault), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(launchAdd(d, d, d, n, nullptr), npurtSuccess) << lastMessage();
	std::vector<float> back(n);
	ASSERT_EQ(npurtMemcpy(back.data(), d, n * sizeof(float), npurtMemcpyDeviceToHost),
	          npurtSuccess);
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(back[i], 2.0f * m[i]) << i;
	EXPECT_EQ(npurtFree(d), npurtSuccess);
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	EXPECT_EQ(npurtFree(m), npurtSuccess);
}

TEST_F(Managed, ThreadsAllocateUseAndFree)
{
	std::vector<int> failures(4, 0);
	std::vector<std::thread> threads;
	for (int t = 0; t < 4; t++) {
		threads.emplace_back([t, &failures] {
			npurtSetDevice(0);
			npurtStream_t s = nullptr;
			if (npurtStreamCreate(&s) != npurtSuccess) {
				failures[t]++;
				return;
			}
			for (int i = 0; i < 25; i++) {
				const size_t n = 256u << ((t + i) % 5);
				float *a = nullptr, *out = nullptr;
				bool ok =
				        npurtMallocManaged(&a, n * sizeof(float)) == npurtSuccess &&
				        npurtMallocManaged(&out, n * sizeof(float)) == npurtSuccess;
				if (ok) {
					for (size_t k = 0; k < n; k++)
						a[k] = static_cast<float>(t * 1000 + i + k);
					ok = launchAdd(out, a, a, n, s) == npurtSuccess &&
					     npurtStreamSynchronize(s) == npurtSuccess;
					for (size_t k = 0; ok && k < n; k++)
						ok = out[k] == 2.0f * a[k];
				}
				failures[t] += !ok;
				npurtFree(a);
				npurtFree(out);
			}
			npurtStreamDestroy(s);
		});
	}
	for (auto &t : threads)
		t.join();
	for (int f : failures)
		EXPECT_EQ(f, 0);
}

}  // namespace

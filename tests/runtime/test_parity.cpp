// CUDA parity of the names ported programs call (run in the VM): device
// attributes and flags, host allocation flags, stream callbacks, the
// per-thread default stream and the C++ overloads.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gate.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"
#include "npurt_profiler_api.h"
#include "ptds_unit.h"
#include "vm_knobs.h"

namespace {

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

class Parity : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
	void TearDown() override
	{
		npurtSetDeviceFlags(npurtDeviceScheduleAuto);
		npurtGetLastError();
	}
};

TEST_F(Parity, DeviceAttributesMatchTheProperties)
{
	npurtDeviceProp p{};
	ASSERT_EQ(npurtGetDeviceProperties(&p, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(p.major * 1000 + p.minor * 10, p.driverApiVersion);
	EXPECT_EQ(p.multiProcessorCount, p.computeEngineCount);
	EXPECT_EQ(p.asyncEngineCount, p.copyEngineCount);
	EXPECT_EQ(static_cast<uint64_t>(p.clockRate), p.clockRateHz / 1000);
	EXPECT_EQ(p.unifiedAddressing, 1);
	EXPECT_EQ(p.canMapHostMemory, 1);
	EXPECT_EQ(p.pciDeviceID, p.deviceIndex);
	const struct {
		npurtDeviceAttr attr;
		int want;
	} attrs[] = {
	        {npurtDevAttrComputeCapabilityMajor, p.major},
	        {npurtDevAttrComputeCapabilityMinor, p.minor},
	        {npurtDevAttrMultiProcessorCount, p.multiProcessorCount},
	        {npurtDevAttrAsyncEngineCount, p.asyncEngineCount},
	        {npurtDevAttrClockRate, p.clockRate},
	        {npurtDevAttrUnifiedAddressing, 1},
	        {npurtDevAttrCanMapHostMemory, 1},
	        {npurtDevAttrConcurrentKernels, p.computeEngineCount > 1},
	        {npurtDevAttrGpuOverlap, p.copyEngineCount > 0},
	        {npurtDevAttrKernelExecTimeout, 1},
	        {npurtDevAttrComputeMode, npurtComputeModeDefault},
	        {npurtDevAttrPciDeviceId, p.deviceIndex},
	        {npurtDevAttrPciBusId, 0},
	        {npurtDevAttrStreamPrioritiesSupported, 1},
	        {npurtDevAttrHostRegisterSupported, 1},
	        {npurtDevAttrManagedMemory, 1},
	        {npurtDevAttrConcurrentManagedAccess, 1},
	        {npurtDevAttrMemoryPoolsSupported, 1},
	        {npurtDevAttrMemoryPoolSupportedHandleTypes, npurtMemHandleTypePosixFileDescriptor},
	};
	for (const auto &a : attrs) {
		int v = -7;
		ASSERT_EQ(npurtDeviceGetAttribute(&v, a.attr, 0), npurtSuccess) << lastMessage();
		EXPECT_EQ(v, a.want) << "attribute " << a.attr;
	}
}

TEST_F(Parity, DeviceAttributeBadInput)
{
	int v = 0, count = 0;
	ASSERT_EQ(npurtGetDeviceCount(&count), npurtSuccess);
	EXPECT_EQ(npurtDeviceGetAttribute(&v, static_cast<npurtDeviceAttr>(1), 0),
	          npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("no meaning"), std::string::npos) << lastMessage();
	npurtGetLastError();
	EXPECT_EQ(npurtDeviceGetAttribute(&v, npurtDevAttrClockRate, count),
	          npurtErrorInvalidDevice);
	npurtGetLastError();
	EXPECT_EQ(npurtDeviceGetAttribute(&v, npurtDevAttrClockRate, -1), npurtErrorInvalidDevice);
	npurtGetLastError();
	EXPECT_EQ(npurtDeviceGetAttribute(nullptr, npurtDevAttrClockRate, 0),
	          npurtErrorInvalidValue);
	npurtGetLastError();
}

TEST_F(Parity, DeviceFlagsAreValidatedAndKept)
{
	unsigned f = 99;
	ASSERT_EQ(npurtGetDeviceFlags(&f), npurtSuccess) << lastMessage();
	EXPECT_EQ(f, static_cast<unsigned>(npurtDeviceMapHost)) << "the default: auto, mapped";
	EXPECT_EQ(npurtSetDeviceFlags(npurtDeviceScheduleSpin | npurtDeviceScheduleYield),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtSetDeviceFlags(0x100), npurtErrorInvalidValue);
	npurtGetLastError();
	ASSERT_EQ(npurtGetDeviceFlags(&f), npurtSuccess);
	EXPECT_EQ(f, static_cast<unsigned>(npurtDeviceMapHost)) << "a refused call changes nothing";
	ASSERT_EQ(npurtSetDeviceFlags(npurtDeviceScheduleYield | npurtDeviceMapHost), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtGetDeviceFlags(&f), npurtSuccess);
	EXPECT_EQ(f, static_cast<unsigned>(npurtDeviceScheduleYield | npurtDeviceMapHost));
	EXPECT_EQ(npurtGetDeviceFlags(nullptr), npurtErrorInvalidValue);
	npurtGetLastError();
}

double threadCpuSeconds()
{
	timespec ts{};
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The CPU the waiting thread spends on one synchronize of slow device work
// (each job starts latencyUs() late), as a share of the wait; the copy's
// bytes are checked too.
double waitCpuShare(unsigned flags, unsigned eventFlags = npurtEventDisableTiming)
{
	EXPECT_EQ(npurtSetDeviceFlags(flags), npurtSuccess) << lastMessage();
	const size_t n = 4096;
	void *d = nullptr;
	std::vector<unsigned char> in(n, 0x3c), out(n, 0);
	EXPECT_EQ(npurtMalloc(&d, n), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemcpy(d, in.data(), n, npurtMemcpyHostToDevice), npurtSuccess);
	npurtStream_t s = nullptr;
	npurtEvent_t e = nullptr;
	EXPECT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventCreateWithFlags(&e, eventFlags), npurtSuccess) << lastMessage();
	double share = -1;
	{
		vmknobs::JobLatency slow(0, vmknobs::latencyUs());
		EXPECT_EQ(npurtMemsetAsync(d, 0x5a, n, s), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtEventRecord(e, s), npurtSuccess) << lastMessage();
		auto t0 = std::chrono::steady_clock::now();
		double c0 = threadCpuSeconds();
		EXPECT_EQ(npurtEventSynchronize(e), npurtSuccess) << lastMessage();
		double cpu = threadCpuSeconds() - c0;
		double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
		                      .count();
		share = wall > 0 ? cpu / wall : -1;
	}
	EXPECT_EQ(npurtMemcpy(out.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(out, std::vector<unsigned char>(n, 0x5a));
	npurtEventDestroy(e);
	npurtStreamDestroy(s);
	npurtFree(d);
	return share;
}

// Spin holds the CPU for the whole wait; blocking sync sleeps at once,
// whether asked of the device or of the event.
TEST_F(Parity, DeviceFlagsChangeHowWaitsBehave)
{
	if (vmknobs::debugfsDir(0).empty())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	const double spin = waitCpuShare(npurtDeviceScheduleSpin);
	const double blocking = waitCpuShare(npurtDeviceScheduleBlockingSync);
	const double eventBlocking = waitCpuShare(npurtDeviceScheduleSpin,
	                                          npurtEventDisableTiming | npurtEventBlockingSync);
	const double yield = waitCpuShare(npurtDeviceScheduleYield);
	std::printf("CPU share of a wait: spin %.2f, yield %.2f, blocking sync %.2f, blocking "
	            "event %.2f\n",
	            spin, yield, blocking, eventBlocking);
	EXPECT_GT(spin, 0.5);
	EXPECT_LT(blocking, 0.25);
	EXPECT_LT(eventBlocking, 0.25);
}

TEST_F(Parity, HostAllocFlags)
{
	void *h = nullptr, *dev = nullptr;
	unsigned f = 0;
	ASSERT_EQ(npurtHostAlloc(&h, 10000, npurtHostAllocMapped | npurtHostAllocWriteCombined),
	          npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtHostGetDevicePointer(&dev, h, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(dev, h) << "unified addressing";
	ASSERT_EQ(npurtHostGetDevicePointer(&dev, static_cast<char *>(h) + 9999, 0), npurtSuccess);
	EXPECT_EQ(npurtHostGetDevicePointer(&dev, static_cast<char *>(h) + 10000, 0),
	          npurtErrorInvalidValue)
	        << "past the allocation";
	EXPECT_EQ(npurtHostGetDevicePointer(&dev, h, 1), npurtErrorInvalidValue);
	ASSERT_EQ(npurtHostGetFlags(&f, h), npurtSuccess) << lastMessage();
	EXPECT_EQ(f, static_cast<unsigned>(npurtHostAllocMapped | npurtHostAllocWriteCombined));
	EXPECT_EQ(npurtFreeHost(h), npurtSuccess);
	EXPECT_EQ(npurtHostGetFlags(&f, h), npurtErrorInvalidValue) << "freed";

	ASSERT_EQ(npurtMallocHost(&h, 4096), npurtSuccess);
	ASSERT_EQ(npurtHostGetFlags(&f, h), npurtSuccess);
	EXPECT_EQ(f, static_cast<unsigned>(npurtHostAllocMapped)) << "pinned memory is mapped";
	EXPECT_EQ(npurtFreeHost(h), npurtSuccess);

	EXPECT_EQ(npurtHostAlloc(&h, 4096, 0x40), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("unknown flags"), std::string::npos) << lastMessage();
	npurtGetLastError();
	EXPECT_EQ(npurtHostAlloc(nullptr, 4096, 0), npurtErrorInvalidValue);
	npurtGetLastError();
	std::vector<char> pageable(4096);
	EXPECT_EQ(npurtHostGetDevicePointer(&dev, pageable.data(), 0), npurtErrorInvalidValue);
	npurtGetLastError();
}

TEST_F(Parity, HostRegisterFlags)
{
	std::vector<char> buf(3 * 4096);
	void *dev = nullptr;
	unsigned f = 0;
	ASSERT_EQ(npurtHostRegister(buf.data(), buf.size(),
	                            npurtHostRegisterMapped | npurtHostRegisterPortable),
	          npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtHostGetDevicePointer(&dev, buf.data() + 5, 0), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(dev, buf.data() + 5);
	EXPECT_EQ(npurtHostGetFlags(&f, buf.data()), npurtErrorInvalidValue)
	        << "registered memory is not npurtHostAlloc's";
	npurtGetLastError();
	EXPECT_EQ(npurtHostUnregister(buf.data()), npurtSuccess);
	EXPECT_EQ(npurtHostRegister(buf.data(), buf.size(), npurtHostRegisterIoMemory),
	          npurtErrorNotSupported);
	npurtGetLastError();
}

struct CallbackLog {
	std::mutex mutex;
	std::vector<std::pair<npurtStream_t, npurtError_t>> calls;
	std::vector<unsigned char> seen;
	const void *device = nullptr;
	size_t n = 0;
};

void logCallback(npurtStream_t s, npurtError_t status, void *data)
{
	auto *log = static_cast<CallbackLog *>(data);
	std::lock_guard<std::mutex> lock(log->mutex);
	log->calls.emplace_back(s, status);
}

// A callback runs after the work ahead of it, with the stream handle it
// was given and the stream's status.
TEST_F(Parity, StreamCallbackRunsInOrder)
{
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
	const size_t n = 1 << 20;
	void *h = nullptr, *d = nullptr;
	ASSERT_EQ(npurtMallocHost(&h, n), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&d, n), npurtSuccess);
	std::memset(h, 0, n);
	CallbackLog log;
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s, Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(d, 0x11, n, s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(h, d, n, npurtMemcpyDeviceToHost, s), npurtSuccess);
	ASSERT_EQ(npurtStreamAddCallback(s, logCallback, &log, 0), npurtSuccess) << lastMessage();
	{
		std::lock_guard<std::mutex> lock(log.mutex);
		EXPECT_TRUE(log.calls.empty()) << "ran before the work ahead";
	}
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	ASSERT_EQ(log.calls.size(), 1u);
	EXPECT_EQ(log.calls[0].first, s);
	EXPECT_EQ(log.calls[0].second, npurtSuccess);
	EXPECT_EQ(static_cast<unsigned char *>(h)[n - 1], 0x11) << "the copy ahead had run";
	// The handle given: NULL for the default stream.
	ASSERT_EQ(npurtStreamAddCallback(nullptr, logCallback, &log, 0), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(nullptr), npurtSuccess) << lastMessage();
	ASSERT_EQ(log.calls.size(), 2u);
	EXPECT_EQ(log.calls[1].first, nullptr);
	EXPECT_EQ(log.calls[1].second, npurtSuccess);
	EXPECT_EQ(npurtStreamAddCallback(s, nullptr, &log, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamAddCallback(s, logCallback, &log, 1), npurtErrorInvalidValue);
	npurtGetLastError();
	npurtFreeHost(h);
	npurtFree(d);
	npurtStreamDestroy(s);
}

// After a fault a host function no longer runs, but a callback does and is
// told the failure.
TEST_F(Parity, StreamCallbackSeesAFailure)
{
	if (vmknobs::debugfsDir(0).empty())
		GTEST_SKIP() << "needs root: injects a fault through debugfs";
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	CallbackLog log;
	Gate gate;
	bool ran = false;
	ASSERT_EQ(npurtLaunchHostFunc(s, Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtSuccess);
	ASSERT_EQ(npurtLaunchHostFunc(
	                  s, [](void *p) { *static_cast<bool *>(p) = true; }, &ran),
	          npurtSuccess);
	ASSERT_EQ(npurtStreamAddCallback(s, logCallback, &log, 0), npurtSuccess);
	ASSERT_TRUE(vmknobs::writeKnob(0, "inject_fault", 1));
	gate.open();
	EXPECT_EQ(npurtStreamSynchronize(s), npurtErrorDeviceFault);
	npurtGetLastError();
	vmknobs::writeKnob(0, "inject_fault", 0);
	EXPECT_FALSE(ran);
	ASSERT_EQ(log.calls.size(), 1u);
	EXPECT_EQ(log.calls[0].second, npurtErrorDeviceFault);
	EXPECT_EQ(npurtStreamRecover(s), npurtSuccess) << lastMessage();
	npurtFree(d);
	npurtStreamDestroy(s);
}

// npurtStreamPerThread is each thread's own stream, blocking towards the
// legacy default stream and not the user's to destroy.
TEST_F(Parity, PerThreadDefaultStream)
{
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(npurtStreamPerThread, Gate::hostFn, &gate), npurtSuccess)
	        << lastMessage();
	ASSERT_TRUE(gate.waitReached(20000));
	EXPECT_EQ(npurtStreamQuery(npurtStreamPerThread), npurtErrorNotReady);
	// Another thread's per-thread stream is not held by this one's.
	npurtError_t other = npurtErrorUnknown;
	std::thread t([&other] {
		npurtSetDevice(0);
		void *d = nullptr;
		if (npurtMalloc(&d, 4096) == npurtSuccess &&
		    npurtMemsetAsync(d, 7, 4096, npurtStreamPerThread) == npurtSuccess)
			other = npurtStreamSynchronize(npurtStreamPerThread);
		npurtFree(d);
	});
	t.join();
	EXPECT_EQ(other, npurtSuccess) << "one thread's stream waited for another's";
	unsigned flags = 99;
	ASSERT_EQ(npurtStreamGetFlags(npurtStreamPerThread, &flags), npurtSuccess);
	EXPECT_EQ(flags, static_cast<unsigned>(npurtStreamDefault)) << "a blocking stream";
	EXPECT_EQ(npurtStreamDestroy(npurtStreamPerThread), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamDestroy(npurtStreamLegacy), npurtErrorInvalidHandle);
	npurtGetLastError();
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(npurtStreamPerThread), npurtSuccess) << lastMessage();
}

// Built with NPURT_API_PER_THREAD_DEFAULT_STREAM, a unit's NULL stream is
// the per-thread one: what it enqueues on NULL is on npurtStreamPerThread,
// not on the legacy default stream.
TEST_F(Parity, PerThreadDefaultStreamAtCompileTime)
{
	Gate gate;
	ASSERT_EQ(ptdsLaunchHostFunc(Gate::hostFn, &gate), npurtSuccess) << lastMessage();
	ASSERT_TRUE(gate.waitReached(20000));
	EXPECT_EQ(npurtStreamQuery(npurtStreamPerThread), npurtErrorNotReady);
	EXPECT_EQ(ptdsStreamQuery(), npurtErrorNotReady);
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(npurtStreamPerThread), npurtSuccess) << lastMessage();
	void *d = nullptr;
	std::vector<unsigned char> out(4096);
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	ASSERT_EQ(ptdsMemsetAsync(d, 0x42, 4096), npurtSuccess) << lastMessage();
	ASSERT_EQ(ptdsMemcpy(out.data(), d, 4096, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(out, std::vector<unsigned char>(4096, 0x42));
	// The 2-D and 3-D calls' per-thread forms: a 16 x 4 x 2 volume.
	npurtPitchedPtr v = make_npurtPitchedPtr(d, 512, 16, 4);
	ASSERT_EQ(ptdsMemset3DAsync(v, 0x24, make_npurtExtent(16, 4, 2)), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(ptdsMemset2D(d, 512, 0x25, 8, 4), npurtSuccess) << lastMessage();
	std::vector<unsigned char> box(16 * 4 * 2);
	npurtMemcpy3DParms p = {};
	p.srcPtr = v;
	p.dstPtr = make_npurtPitchedPtr(box.data(), 16, 16, 4);
	p.extent = make_npurtExtent(16, 4, 2);
	p.kind = npurtMemcpyDeviceToHost;
	ASSERT_EQ(ptdsMemcpy3D(&p), npurtSuccess) << lastMessage();
	for (size_t i = 0; i < box.size(); i++)
		ASSERT_EQ(box[i], i < 64 && i % 16 < 8 ? 0x25 : 0x24) << i;
	npurtFree(d);
}

// cudaDeviceSetLimit/GetLimit: CUDA's defaults; a value set is read back
// on the device it was set for; unknown limits and impossible values are
// refused.
TEST_F(Parity, DeviceLimitsKeepWhatWasSet)
{
	size_t v = 0;
	ASSERT_EQ(npurtDeviceGetLimit(&v, npurtLimitMallocHeapSize), npurtSuccess);
	EXPECT_EQ(v, size_t{8} << 20);
	ASSERT_EQ(npurtDeviceGetLimit(&v, npurtLimitStackSize), npurtSuccess);
	EXPECT_EQ(v, 1024u);
	ASSERT_EQ(npurtDeviceSetLimit(npurtLimitMallocHeapSize, 128 << 20), npurtSuccess);
	ASSERT_EQ(npurtDeviceGetLimit(&v, npurtLimitMallocHeapSize), npurtSuccess);
	EXPECT_EQ(v, size_t{128} << 20);
	if (npurt::deviceCount() > 1) {
		ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
		ASSERT_EQ(npurtDeviceGetLimit(&v, npurtLimitMallocHeapSize), npurtSuccess);
		EXPECT_EQ(v, size_t{8} << 20) << "another device's limit";
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	}
	EXPECT_EQ(npurtDeviceSetLimit(npurtLimitMallocHeapSize, 8 << 20), npurtSuccess);
	EXPECT_EQ(npurtDeviceSetLimit(static_cast<npurtLimit>(7), 1), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("limit 7 does not exist"), std::string::npos) << lastMessage();
	EXPECT_EQ(npurtDeviceSetLimit(static_cast<npurtLimit>(-1), 1), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetLimit(&v, static_cast<npurtLimit>(99)), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetLimit(nullptr, npurtLimitStackSize), npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceSetLimit(npurtLimitMaxL2FetchGranularity, 256),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceSetLimit(npurtLimitPersistingL2CacheSize, 1 << 20),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceSetLimit(npurtLimitPersistingL2CacheSize, 0), npurtSuccess);
	npurtGetLastError();
}

// cudaStreamGetDevice: the device of the stream's context.
TEST_F(Parity, StreamGetDevice)
{
	for (int d = 0; d < npurt::deviceCount(); d++) {
		ASSERT_EQ(npurtSetDevice(d), npurtSuccess);
		npurtStream_t s = nullptr;
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
		int dev = -1;
		ASSERT_EQ(npurtStreamGetDevice(s, &dev), npurtSuccess) << lastMessage();
		EXPECT_EQ(dev, d);
		dev = -1;
		ASSERT_EQ(npurtStreamGetDevice(nullptr, &dev), npurtSuccess);
		EXPECT_EQ(dev, 0) << "NULL is the current device's";
		EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
		EXPECT_EQ(npurtStreamGetDevice(s, &dev), npurtErrorInvalidHandle);
	}
	int dev = 0;
	EXPECT_EQ(npurtStreamGetDevice(reinterpret_cast<npurtStream_t>(0xdead0000), &dev),
	          npurtErrorInvalidHandle);
	EXPECT_EQ(npurtStreamGetDevice(nullptr, nullptr), npurtErrorInvalidValue);
	npurtGetLastError();
}

// <cuda_profiler_api.h> ports to <npurt_profiler_api.h>.
TEST_F(Parity, ProfilerApiHeader)
{
	ASSERT_EQ(npurtProfilerStart(), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtProfilerStop(), npurtSuccess) << lastMessage();
}

// The overloads CUDA's header gives C++ callers compile and work.
TEST_F(Parity, CxxOverloads)
{
	float *d = nullptr;
	double *h = nullptr, *m = nullptr;
	int *w = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 64 * sizeof(float)), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocHost(&h, 64 * sizeof(double)), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocHost(&m, 64, npurtHostAllocMapped), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtHostAlloc(&w, 64, npurtHostAllocDefault), npurtSuccess) << lastMessage();
	int *wd = nullptr;
	ASSERT_EQ(npurtHostGetDevicePointer(&wd, w, 0), npurtSuccess);
	EXPECT_EQ(wd, w);
	npurtEvent_t e = nullptr;
	ASSERT_EQ(npurtEventCreate(&e, npurtEventDisableTiming), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventDestroy(e), npurtSuccess);
	EXPECT_EQ(npurtFree(d), npurtSuccess);
	EXPECT_EQ(npurtFreeHost(h), npurtSuccess);
	EXPECT_EQ(npurtFreeHost(m), npurtSuccess);
	EXPECT_EQ(npurtFreeHost(w), npurtSuccess);
}

// An event recorded on the legacy default stream covers the work of the
// blocking streams enqueued before it (CUDA's simpleStreams times all its
// streams with a stop event on NULL).
TEST_F(Parity, NullStreamEventCoversBlockingStreams)
{
	vmknobs::JobLatency probe(0, 0);
	if (!probe.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	npurtStream_t s = nullptr, quiet = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtStreamCreateWithFlags(&quiet, npurtStreamNonBlocking), npurtSuccess);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	for (unsigned flags : {unsigned{npurtEventDefault}, unsigned{npurtEventDisableTiming}}) {
		npurtEvent_t e = nullptr;
		ASSERT_EQ(npurtEventCreateWithFlags(&e, flags), npurtSuccess);
		{
			vmknobs::JobLatency slow(0, vmknobs::latencyUs());
			ASSERT_EQ(npurtMemsetAsync(d, 1, 1 << 20, s), npurtSuccess);
			ASSERT_EQ(npurtEventRecord(e, nullptr), npurtSuccess) << lastMessage();
			ASSERT_EQ(npurtEventSynchronize(e), npurtSuccess) << lastMessage();
			EXPECT_EQ(npurtStreamQuery(s), npurtSuccess)
			        << "flags " << flags << ": the NULL stream's event completed first";
		}
		ASSERT_EQ(npurtEventDestroy(e), npurtSuccess);
	}
	// A non-blocking stream's work is not covered: the event completes
	// without it.
	npurtEvent_t e = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&e, npurtEventDisableTiming), npurtSuccess);
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(quiet, Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, nullptr), npurtSuccess);
	EXPECT_EQ(npurtEventSynchronize(e), npurtSuccess);
	EXPECT_EQ(npurtStreamQuery(quiet), npurtErrorNotReady);
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(quiet), npurtSuccess);
	npurtEventDestroy(e);
	npurtFree(d);
	npurtStreamDestroy(s);
	npurtStreamDestroy(quiet);
}

// A registered call site names the next enqueue by its id, as
// npurtSetCallSite does by its text.
TEST_F(Parity, RegisteredCallSiteNamesTheFaultingTask)
{
	uint64_t id = 0, again = 0, other = 0;
	ASSERT_EQ(npurtCallSiteRegister("model.py", 42, "forward", &id), npurtSuccess);
	ASSERT_EQ(npurtCallSiteRegister("model.py", 42, "forward", &again), npurtSuccess);
	ASSERT_EQ(npurtCallSiteRegister("model.py", 43, "forward", &other), npurtSuccess);
	EXPECT_NE(id, 0u);
	EXPECT_EQ(again, id) << "the same site, the same id";
	EXPECT_NE(other, id);
	EXPECT_EQ(npurtSetCallSiteId(0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtSetCallSiteId(other + 1000000), npurtErrorInvalidValue);
	EXPECT_EQ(npurtCallSiteRegister("x", 1, "f", nullptr), npurtErrorInvalidValue);
	npurtGetLastError();
	if (vmknobs::debugfsDir(0).empty())
		GTEST_SKIP() << "needs root: injects a fault through debugfs";
	npurtStream_t s = nullptr;
	void *d = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	ASSERT_TRUE(vmknobs::writeKnob(0, "inject_fault", 1));
	ASSERT_EQ(npurtSetCallSiteId(id), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, s), npurtSuccess);
	EXPECT_EQ(npurtStreamSynchronize(s), npurtErrorDeviceFault);
	std::string msg = lastMessage();
	npurtGetLastError();
	vmknobs::writeKnob(0, "inject_fault", 0);
	EXPECT_NE(msg.find("model.py:42 in forward()"), std::string::npos) << msg;
	EXPECT_EQ(npurtStreamRecover(s), npurtSuccess);
	npurtFree(d);
	npurtStreamDestroy(s);
}

// More streams than the driver gives a context queues (256): streams share
// queues, and work on each still runs in its order, also after the streams
// that created the shared queues are gone.
TEST_F(Parity, MoreStreamsThanDeviceQueues)
{
	constexpr int kStreams = 300;
	constexpr size_t n = 4096;
	std::vector<npurtStream_t> streams(kStreams, nullptr);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, n * kStreams), npurtSuccess) << lastMessage();
	auto *bytes = static_cast<unsigned char *>(d);
	auto fillAll = [&](int from, unsigned char salt) {
		for (int i = from; i < kStreams; i++)
			ASSERT_EQ(npurtMemsetAsync(bytes + i * n, (i + salt) & 0xff, n, streams[i]),
			          npurtSuccess)
			        << "stream " << i << ": " << lastMessage();
		for (int i = from; i < kStreams; i++)
			ASSERT_EQ(npurtStreamSynchronize(streams[i]), npurtSuccess)
			        << lastMessage();
		std::vector<unsigned char> out(n * kStreams);
		ASSERT_EQ(npurtMemcpy(out.data(), d, out.size(), npurtMemcpyDeviceToHost),
		          npurtSuccess);
		for (int i = from; i < kStreams; i++)
			ASSERT_EQ(out[i * n + n - 1], (i + salt) & 0xff) << "stream " << i;
	};
	for (auto &s : streams)
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess) << lastMessage();
	fillAll(0, 1);
	// The first streams created the queues the last ones share.
	for (int i = 0; i < 200; i++)
		ASSERT_EQ(npurtStreamDestroy(streams[i]), npurtSuccess);
	fillAll(200, 2);
	for (int i = 200; i < kStreams; i++)
		ASSERT_EQ(npurtStreamDestroy(streams[i]), npurtSuccess);
	npurtFree(d);
}

}  // namespace

// An event whose recorded work failed says so: npurtEventSynchronize and
// npurtEventQuery return the failure, also once the stream that did the
// work is gone (then nothing else can report it).
//
// Found by tools/soak (npu-soak): a stream destroyed with its copies queued
// behind an event recorded after them; a fault the injector armed hit one
// of the copies, and npurtEventSynchronize returned npurtSuccess over data
// that was never copied. A timeline point's fence does not carry its
// job's error; the event now asks the queue's status.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "npurt/npurt.h"

namespace {

std::string knobPath(const char *knob)
{
	npurtDeviceProp p{};
	if (npurtGetDeviceProperties(&p, 0) != npurtSuccess || !p.debugfsPath[0])
		return "";
	std::string path = std::string(p.debugfsPath) + "/" + knob;
	return access(path.c_str(), W_OK) ? "" : path;
}

bool writeKnob(const char *knob, long value)
{
	std::ofstream f(knobPath(knob));
	f << value << "\n";
	f.flush();
	return f.good();
}

// A host function that holds its stream until the test lets it go (or 20 s
// passed): the work behind it cannot fail before the event is recorded.
void gate(void *arg)
{
	auto *open = static_cast<std::atomic<bool> *>(arg);
	auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (!open->load() && std::chrono::steady_clock::now() < until)
		std::this_thread::yield();
}

class EventFaults : public ::testing::TestWithParam<unsigned> {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
		if (knobPath("inject_fault").empty())
			GTEST_SKIP() << "needs root and debugfs to inject a fault";
		ASSERT_EQ(npurtDeviceSynchronize(), npurtSuccess);
		ASSERT_EQ(npurtMalloc(&d_, kBytes), npurtSuccess);
		ASSERT_EQ(npurtMallocHost(&h_, kBytes), npurtSuccess);
	}
	void TearDown() override
	{
		writeKnob("inject_fault", 0);
		npurtFree(d_);
		npurtFreeHost(h_);
		npurtGetLastError();
	}
	// A copy in, a copy out and an event after them on a new stream;
	// the stream is destroyed (at once, or not) before the event is
	// looked at. Returns the event (the caller destroys it).
	npurtEvent_t run(bool fault, bool destroy, npurtStream_t *kept)
	{
		npurtStream_t s = nullptr;
		npurtEvent_t e = nullptr;
		EXPECT_EQ(npurtStreamCreate(&s), npurtSuccess);
		EXPECT_EQ(npurtEventCreateWithFlags(&e, GetParam()), npurtSuccess);
		std::memset(h_, 0x5a, kBytes);
		open_ = false;
		EXPECT_EQ(npurtLaunchHostFunc(s, gate, &open_), npurtSuccess);
		EXPECT_EQ(npurtMemcpyAsync(d_, h_, kBytes, npurtMemcpyHostToDevice, s),
		          npurtSuccess);
		EXPECT_EQ(npurtMemcpyAsync(h_, d_, kBytes, npurtMemcpyDeviceToHost, s),
		          npurtSuccess);
		EXPECT_EQ(npurtEventRecord(e, s), npurtSuccess) << npurtGetLastErrorMessage();
		// Armed once everything is enqueued behind the gate, so that the
		// device's next job is the first copy (a timing event's record
		// sets up its timestamp on the device first).
		if (fault) {
			EXPECT_TRUE(writeKnob("inject_fault", 1));
		}
		open_ = true;
		if (destroy) {
			EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
		} else {
			*kept = s;
		}
		return e;
	}

	static constexpr size_t kBytes = 1 << 20;
	std::atomic<bool> open_{false};
	void *d_ = nullptr;
	void *h_ = nullptr;
};

TEST_P(EventFaults, SynchronizeAndQueryReportTheFailureOfADestroyedStream)
{
	npurtEvent_t e = run(true, true, nullptr);
	npurtError_t sync = npurtEventSynchronizeTimeout(e, 20000);
	std::string msg = npurtGetLastErrorMessage();
	EXPECT_EQ(sync, npurtErrorDeviceFault)
	        << "npurtEventSynchronize over work that faulted on a destroyed stream: "
	        << npurtGetErrorName(sync) << " " << msg;
	EXPECT_NE(msg.find("the work the event recorded failed: device memory fault"),
	          std::string::npos)
	        << msg;
	npurtGetLastError();
	EXPECT_EQ(npurtEventQuery(e), npurtErrorDeviceFault);
	npurtGetLastError();
	EXPECT_EQ(npurtEventDestroy(e), npurtSuccess);
}

TEST_P(EventFaults, SynchronizeReportsTheFailureOfALiveStream)
{
	npurtStream_t s = nullptr;
	npurtEvent_t e = run(true, false, &s);
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 20000), npurtErrorDeviceFault);
	npurtGetLastError();
	// The stream reports it too; recovered, the queue takes work again
	// and later records of the event succeed.
	EXPECT_EQ(npurtStreamSynchronize(s), npurtErrorDeviceFault);
	npurtGetLastError();
	EXPECT_EQ(npurtStreamRecover(s), npurtSuccess);
	EXPECT_EQ(npurtMemsetAsync(d_, 1, kBytes, s), npurtSuccess);
	EXPECT_EQ(npurtEventRecord(e, s), npurtSuccess);
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 20000), npurtSuccess)
	        << npurtGetLastErrorMessage();
	EXPECT_EQ(npurtEventDestroy(e), npurtSuccess);
	EXPECT_EQ(npurtStreamDestroy(s), npurtSuccess);
}

TEST_P(EventFaults, WorkThatSucceededIsSuccess)
{
	npurtEvent_t e = run(false, true, nullptr);
	EXPECT_EQ(npurtEventSynchronizeTimeout(e, 20000), npurtSuccess)
	        << npurtGetLastErrorMessage();
	EXPECT_EQ(npurtEventQuery(e), npurtSuccess);
	std::vector<unsigned char> want(kBytes, 0x5a);
	EXPECT_EQ(std::memcmp(h_, want.data(), kBytes), 0);
	EXPECT_EQ(npurtEventDestroy(e), npurtSuccess);
}

INSTANTIATE_TEST_SUITE_P(Events, EventFaults,
                         ::testing::Values(unsigned{npurtEventDisableTiming},
                                           unsigned{npurtEventDefault}),
                         [](const ::testing::TestParamInfo<unsigned> &info) {
	                         return info.param == npurtEventDisableTiming ? "plain" : "timing";
                         });

}  // namespace

// Processes that end while others or the runtime's own threads still use
// what they leave: the fault monitor must not touch the runtime's globals
// after static destructors have run, and the IPC handles of an exporter
// that exits while they are taken are reported as such. Both were found
// by tools/soak (npu-soak).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "child.h"
#include "npurt/npurt.h"

namespace {

constexpr const char *kChildEnv = "NPURT_TEST_EXIT_CHILD";

struct Child {
	int status = -1;
	bool timedOut = false;
	std::string output;
};

// This binary again with one test selected and kChildEnv set.
// With a marker: when the output shows it, stop reading for pauseMs.
Child runChild(const char *filter, int timeoutMs, const char *marker = nullptr, int pauseMs = 0,
               const std::vector<std::string> &extraEnv = {})
{
	std::string arg = std::string("--gtest_filter=") + filter;
	// Freed memory is overwritten at once (no thread cache keeps it
	// intact): a use after free reads garbage and crashes.
	std::vector<std::string> vars{std::string(kChildEnv) + "=1", "MALLOC_PERTURB_=165",
	                              "GLIBC_TUNABLES=glibc.malloc.tcache_count=0"};
	vars.insert(vars.end(), extraEnv.begin(), extraEnv.end());
	for (char **e = environ; *e; e++)
		vars.emplace_back(*e);
	std::vector<char *> envp;
	envp.reserve(vars.size() + 1);
	for (auto &v : vars)
		envp.push_back(v.data());
	envp.push_back(nullptr);
	char name[] = "npurt_vm_tests";
	char *argv[] = {name, arg.data(), nullptr};
	Child r;
	int fds[2];
	if (pipe(fds))
		return r;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execve("/proc/self/exe", argv, envp.data());
		_exit(127);
	}
	close(fds[1]);
	auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
	for (;;) {
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
		        deadline - std::chrono::steady_clock::now());
		pollfd pfd{fds[0], POLLIN, 0};
		if (left.count() <= 0 || poll(&pfd, 1, static_cast<int>(left.count())) == 0) {
			r.timedOut = true;
			kill(pid, SIGKILL);
			break;
		}
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		r.output.append(buf, static_cast<size_t>(n));
		if (marker && r.output.find(marker) != std::string::npos) {
			// Holds the child in its exit (holdTheExit): a delay
			// on purpose, not a wait for anything.
			std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs));
			marker = nullptr;
		}
	}
	// The filler that held the child is not output to show.
	size_t x = r.output.find(std::string(64, 'x'));
	if (x != std::string::npos) {
		size_t end = r.output.find_first_not_of('x', x);
		r.output.erase(x, end == std::string::npos ? std::string::npos : end - x);
	}
	close(fds[0]);
	waitpid(pid, &r.status, 0);
	return r;
}

using npurt_test::indented;

constexpr const char *kExitMarker = "NPURT-EXIT-CHILD-IS-EXITING";

// Run by exit() before the runtime's static destructors: fills the output
// pipe and leaves one byte in a buffered stream, so that the flush at the
// very end of exit (after every destructor) blocks until the parent reads
// again. The parent stops reading for a while when it sees the marker:
// the process then stays in its exit, the runtime's globals destroyed,
// long enough for the runtime's threads to show what they touch.
void holdTheExit()
{
	std::fflush(stdout);
	int flags = fcntl(1, F_GETFL);
	fcntl(1, F_SETFL, flags | O_NONBLOCK);
	std::string fill = std::string(kExitMarker) + "\n" + std::string(4096, 'x');
	while (write(1, fill.data(), fill.size()) > 0)
		fill.assign(4096, 'x');
	fcntl(1, F_SETFL, flags);
	// A stream of its own, fully buffered whatever stdout is, left
	// unflushed: exit flushes it last.
	FILE *late = fdopen(dup(1), "w");
	if (late) {
		setvbuf(late, nullptr, _IOFBF, 1 << 16);
		std::fputc('\n', late);
	}
}

std::atomic<int> gInCallback{0};

// The child: a stream's fault is being reported to the error callback (on
// the runtime's monitor thread, which the callback keeps busy for a while)
// when the process exits; a few streams are alive.
TEST(ExitChild, ExitWhileTheMonitorReports)
{
	if (!std::getenv(kChildEnv))
		GTEST_SKIP() << "runs only as the child of Exit.*";
	npurtDeviceProp p{};
	ASSERT_EQ(npurtGetDeviceProperties(&p, 0), npurtSuccess);
	const std::string knob = std::string(p.debugfsPath) + "/inject_fault";
	ASSERT_EQ(npurtSetErrorCallback(
	                  [](npurtStream_t, npurtError_t, const char *, void *) {
		                  gInCallback.store(1);
		                  // Busy past the exit's destructors.
		                  auto until = std::chrono::steady_clock::now() +
		                               std::chrono::milliseconds(1000);
		                  while (std::chrono::steady_clock::now() < until)
			                  gInCallback.fetch_add(0);
	                  },
	                  nullptr),
	          npurtSuccess);
	std::vector<npurtStream_t> streams(3);
	for (npurtStream_t &s : streams)
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	{
		std::ofstream f(knob);
		f << "1\n";
		ASSERT_TRUE(f.good()) << knob;
	}
	ASSERT_EQ(npurtMemsetAsync(d, 1, 4096, streams[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(streams[0]), npurtErrorDeviceFault);
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (!gInCallback.load() && std::chrono::steady_clock::now() < deadline)
		std::this_thread::yield();
	ASSERT_TRUE(gInCallback.load()) << "the error callback was not called";
	// The callback runs; streams, memory and the callback are left.
	ASSERT_EQ(std::atexit(holdTheExit), 0);
}

TEST(Exit, WhileTheFaultMonitorReports)
{
	npurtDeviceProp p{};
	ASSERT_EQ(npurtGetDeviceProperties(&p, 0), npurtSuccess);
	if (!p.debugfsPath[0] ||
	    access((std::string(p.debugfsPath) + "/inject_fault").c_str(), W_OK))
		GTEST_SKIP() << "needs root and debugfs to inject a fault";
	int crashed = 0;
	std::string last;
	for (int i = 0; i < 3; i++) {
		// The exit is held 300 ms after the destructors; the
		// callback returns to the monitor within them.
		Child r = runChild("ExitChild.*", 60000, kExitMarker, 2000);
		ASSERT_FALSE(r.timedOut) << "the child did not end:\n" << indented(r.output);
		ASSERT_NE(r.output.find("[  PASSED  ] 1 test."), std::string::npos)
		        << indented(r.output);
		ASSERT_NE(r.output.find(kExitMarker), std::string::npos) << indented(r.output);
		if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
			crashed++;
			last = WIFSIGNALED(r.status)
			               ? std::string("signal ") + strsignal(WTERMSIG(r.status))
			               : "status " + std::to_string(WEXITSTATUS(r.status));
		}
	}
	EXPECT_EQ(crashed, 0) << crashed
	                      << " of 3 processes died in their exit while the fault monitor "
	                         "reported a fault (last: "
	                      << last
	                      << "): the fault monitor's pass used the runtime's globals after "
	                         "static destructors had destroyed them";
}

// IPC handles of an exporter that exits while they are taken: the runtime
// takes the exporter's descriptor with pidfd_open, then pidfd_getfd; an
// exporter reaped between the two makes pidfd_getfd fail with ESRCH. That
// is "the exporter exited" (npurtErrorInvalidHandle, as npurt.h says of
// such a handle), not an operating-system failure: the soak's IPC pairs
// saw npurtErrorOperatingSystem ("taking it from process N: No such
// process") when the injector killed an exporter just then.

constexpr const char *kHandlesEnv = "NPURT_TEST_EXIT_HANDLES";

std::string toHex(const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	std::string out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = static_cast<const unsigned char *>(p)[i];
		out += digits[c >> 4];
		out += digits[c & 15];
	}
	return out;
}

bool fromHex(const std::string &hex, void *p, size_t n)
{
	if (hex.size() != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++)
		static_cast<unsigned char *>(p)[i] =
		        static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
	return true;
}

// The child: pidfd_getfd fails with ESRCH (a seccomp filter stands in for
// the exporter being reaped between the runtime's two calls).
TEST(ExitChild, ExporterGoneWhileTaken)
{
	const char *env = std::getenv(kHandlesEnv);
	if (!std::getenv(kChildEnv) || !env)
		GTEST_SKIP()
		        << "runs only as the child of Exit.IpcHandlesOfAnExporterGoneWhileTaken";
	npurtIpcMemHandle_t mh{};
	npurtIpcEventHandle_t eh{};
	const std::string hex = env;
	ASSERT_EQ(hex.size(), 2 * (sizeof(mh) + sizeof(eh)));
	ASSERT_TRUE(fromHex(hex.substr(0, 2 * sizeof(mh)), &mh, sizeof(mh)));
	ASSERT_TRUE(fromHex(hex.substr(2 * sizeof(mh)), &eh, sizeof(eh)));
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_EQ(npurtFree(nullptr), npurtSuccess);  // the runtime is up
	ASSERT_TRUE(npurt_test::refuseSyscall(SYS_pidfd_getfd, ESRCH));
	void *d = nullptr;
	EXPECT_EQ(npurtIpcOpenMemHandle(&d, mh, 0), npurtErrorInvalidHandle)
	        << npurtGetLastErrorMessage();
	EXPECT_NE(std::string(npurtGetLastErrorMessage()).find("has exited"), std::string::npos)
	        << npurtGetLastErrorMessage();
	npurtGetLastError();
	npurtEvent_t e = nullptr;
	EXPECT_EQ(npurtIpcOpenEventHandle(&e, eh), npurtErrorInvalidHandle)
	        << npurtGetLastErrorMessage();
	EXPECT_NE(std::string(npurtGetLastErrorMessage()).find("has exited"), std::string::npos)
	        << npurtGetLastErrorMessage();
	npurtGetLastError();
}

TEST(Exit, IpcHandlesOfAnExporterGoneWhileTaken)
{
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventInterprocess | npurtEventDisableTiming),
	          npurtSuccess);
	npurtIpcMemHandle_t mh{};
	npurtIpcEventHandle_t eh{};
	ASSERT_EQ(npurtIpcGetMemHandle(&mh, d), npurtSuccess) << npurtGetLastErrorMessage();
	ASSERT_EQ(npurtIpcGetEventHandle(&eh, ev), npurtSuccess) << npurtGetLastErrorMessage();
	Child r = runChild(
	        "ExitChild.ExporterGoneWhileTaken", 60000, nullptr, 0,
	        {std::string(kHandlesEnv) + "=" + toHex(&mh, sizeof(mh)) + toHex(&eh, sizeof(eh))});
	EXPECT_FALSE(r.timedOut) << indented(r.output);
	EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << indented(r.output);
	EXPECT_NE(r.output.find("[  PASSED  ] 1 test."), std::string::npos) << indented(r.output);
	EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
	EXPECT_EQ(npurtFree(d), npurtSuccess);
}

}  // namespace

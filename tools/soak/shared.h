// npu-soak: what the supervisor and its worker processes share.
//
// One memfd mapping, made by the supervisor before it starts any worker and
// inherited by each (its descriptor number is on the worker's command
// line): per worker slot its counters (kept across the worker's restarts,
// so a killed worker's results still count), a heartbeat and phase per
// thread (the watchdog and the injector read them), its last failure text,
// and an IPC mailbox through which the even slot of a pair hands device
// memory and an event to the odd one.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "npurt/npurt.h"

namespace soak {

constexpr int kMaxProcs = 32;
constexpr int kMaxThreads = 16;
constexpr int kMaxDevices = 16;

// CLOCK_MONOTONIC in nanoseconds: one clock for every process.
inline uint64_t nowNs()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Waits (shared between processes: no FUTEX_PRIVATE_FLAG) while *word is
// `expected`, at most timeoutNs; false on timeout. Spurious wakes return
// true: callers loop on their own condition and deadline.
inline bool futexWait(std::atomic<uint32_t> *word, uint32_t expected, uint64_t timeoutNs)
{
	timespec ts{static_cast<time_t>(timeoutNs / 1000000000ull),
	            static_cast<long>(timeoutNs % 1000000000ull)};
	long r = syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, expected, &ts,
	                 nullptr, 0);
	return !(r == -1 && errno == ETIMEDOUT);
}

inline void futexWakeAll(std::atomic<uint32_t> *word)
{
	syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, 0x7fffffff, nullptr,
	        nullptr, 0);
}

// What a worker thread is doing (the injector prefers to kill a process
// while one of its threads is inside an enqueue call).
enum Phase : uint32_t {
	PhaseIdle = 0,
	PhaseSetup,
	PhaseEnqueue,  // inside a call that submits work
	PhaseWait,  // synchronising
	PhaseVerify,  // comparing on the CPU
	PhaseRecover,  // after a reported failure
	PhaseIpc,  // waiting for the partner process
	PhaseTeardown,
	PhaseCount
};

inline const char *phaseName(uint32_t p)
{
	static const char *const names[] = {"idle",   "setup",   "enqueue", "wait",
	                                    "verify", "recover", "ipc",     "teardown"};
	return p < PhaseCount ? names[p] : "?";
}

// Results of a worker slot, summed over its incarnations.
struct Counters {
	std::atomic<uint64_t> scenarios{0};  // workload iterations finished
	std::atomic<uint64_t> verified{0};  // results checked against the CPU and right
	std::atomic<uint64_t> wrong{0};  // results that were wrong without an error
	std::atomic<uint64_t> deviceFaults{0};  // npurtErrorDeviceFault seen
	std::atomic<uint64_t> launchFailures{0};  // npurtErrorLaunchFailure seen
	std::atomic<uint64_t> launchTimeouts{0};  // npurtErrorLaunchTimeout seen
	std::atomic<uint64_t> recoveries{0};  // streams recovered after a failure
	std::atomic<uint64_t> ooms{0};  // device or pinned memory exhausted
	std::atomic<uint64_t> ipcVerified{0};  // IPC transfers checked in the importer
	std::atomic<uint64_t> ipcPeerGone{0};  // IPC steps that failed because the peer died
	std::atomic<uint64_t> unexpected{0};  // errors no injection explains
	std::atomic<uint64_t> waitTimeouts{0};  // our own waits that ran out
	std::atomic<uint64_t> bytesMoved{0};  // bytes copied by verified work
	std::atomic<uint64_t> opsVerified{0};  // device ops among the verified results
	std::atomic<uint64_t> callbacks{0};  // error callbacks the runtime made
};

struct ThreadState {
	std::atomic<uint64_t> heartbeatNs{0};  // last progress (0: not started)
	std::atomic<uint32_t> phase{PhaseIdle};
	std::atomic<uint32_t> scenario{0};  // index into the worker's scenario names
};

// The even slot's offer to the odd slot of its pair. Sequence numbers:
// offer is odd while the exporter writes the fields, even (2g) when offer g
// is readable. The importer claims g (claim = g) before it opens anything;
// the exporter withdraws (claim = g | kWithdrawn) when the importer did not
// claim it in time. Whoever moves claim first decides; a claimed offer's
// memory is not reused before ack = g or the importer's restart.
struct IpcMailbox {
	static constexpr uint32_t kWithdrawn = 0x80000000u;
	std::atomic<uint32_t> offer{0};
	std::atomic<uint32_t> claim{0};
	std::atomic<uint32_t> ack{0};
	std::atomic<uint32_t> claimerGeneration{0};
	// Written between an odd and an even offer (a seqlock). The reader
	// copies the handles with volatile reads and the rest atomically: a
	// plain read may be made again later by the compiler, after the next
	// offer changed it: the likeliest reading of a soak that took a dead
	// exporter's refusal for a live one's (a handle of one incarnation
	// judged by the generation of the next).
	npurtIpcMemHandle_t mem{};
	npurtIpcEventHandle_t event{};
	std::atomic<uint64_t> elements{0};  // float32 elements at the handle's offset
	std::atomic<uint32_t> seed{0};  // what the exporter's pattern is made from
	std::atomic<int32_t> device{0};  // the exporter's NPU
	std::atomic<uint32_t> exporterGeneration{0};
};

struct Slot {
	std::atomic<int32_t> pid{0};  // 0 while not running
	std::atomic<uint32_t> generation{0};  // incarnations started
	std::atomic<uint32_t> ready{0};  // the incarnation's threads are running
	Counters c;
	ThreadState threads[kMaxThreads];
	IpcMailbox box;
	// The last failure (wrong result, unexpected error), for the report.
	std::atomic<uint32_t> textLock{0};
	char lastFailure[512] = {};
};

struct Shared {
	std::atomic<uint32_t> stop{0};  // 1: finish the scenario, tear down, exit 0
	uint32_t procs = 0;
	uint32_t threads = 0;
	uint32_t devices = 0;
	uint64_t seed = 0;
	uint32_t jobTimeoutMs = 2000;
	uint32_t maxBytes = 0;  // largest buffer a scenario uses
	Slot slots[kMaxProcs];
};

inline void setFailureText(Slot &s, const char *text)
{
	uint32_t expected = 0;
	// A short critical section; the holder never blocks inside it.
	while (!s.textLock.compare_exchange_weak(expected, 1, std::memory_order_acquire))
		expected = 0;
	std::strncpy(s.lastFailure, text, sizeof(s.lastFailure) - 1);
	s.lastFailure[sizeof(s.lastFailure) - 1] = '\0';
	s.textLock.store(0, std::memory_order_release);
}

// The supervisor reads it only once the slot's process has been reaped
// (a writer killed inside the section cannot hold it any more): it takes
// the text and frees the lock.
inline void takeFailureText(Slot &s, char *out, size_t n)
{
	std::strncpy(out, s.lastFailure, n - 1);
	out[n - 1] = '\0';
	s.lastFailure[0] = '\0';
	s.textLock.store(0, std::memory_order_release);
}

struct Options {
	double seconds = 60;  // how long the workload runs
	int procs = 4;
	int threads = 3;  // workload threads per process (an IPC thread comes on top)
	uint64_t seed = 0;  // 0: from the clock
	bool inject = true;  // faults, hangs and latency through debugfs
	bool kill = true;  // SIGKILL random workers and restart them
	double injectEveryS = 0.4;  // mean time between injector actions
	double killEveryS = 2.0;  // mean time between kills
	// 0: from the job timeout (a worker's waits are bounded by 10 job
	// timeouts, at least 20 s; the watchdog and the drain allow more).
	double wedgeS = 0;  // a thread without progress this long is wedged
	double drainS = 0;  // time workers get to finish after the end
	double settleS = 30;  // time the driver's counters get to come back
	uint32_t maxBytes = 4u << 20;
	const char *json = nullptr;  // the report's JSON file
	const char *unloadCheck = nullptr;  // npu.ko to reload after the unload check
	bool verbose = false;
};

// Entry points (main.cpp dispatches on the command line).
int runSupervisor(const Options &o, const char *self);
int runWorker(Shared *sh, int slot, uint32_t generation);
int runProbe();

}  // namespace soak

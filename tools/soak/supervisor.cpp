// npu-soak: the supervisor. It never opens an NPU itself (its own context
// would be in the counters it checks): a probe process finds the NPUs, the
// workers do the work, and the supervisor's injector thread writes the
// debugfs knobs and kills workers. Kills come from the supervisor because
// only a parent can kill a process safely by pid (it cannot be reaped, so
// its pid cannot be reused, until the parent waits for it).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernel.h"
#include "shared.h"

namespace soak {

const char *scenarioName(uint32_t i);

namespace {

double secondsSince(uint64_t t0)
{
	return static_cast<double>(nowNs() - t0) / 1e9;
}

std::string jsonString(const std::string &s)
{
	std::string out = "\"";
	for (char c : s) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += c;
		} else if (static_cast<unsigned char>(c) < 0x20) {
			char buf[8];
			std::snprintf(buf, sizeof(buf), "\\u%04x", c);
			out += buf;
		} else {
			out += c;
		}
	}
	return out + "\"";
}

unsigned long moduleParam(const char *name, unsigned long fallback)
{
	std::ifstream f(std::string("/sys/module/npu/parameters/") + name);
	unsigned long v = 0;
	return (f >> v) ? v : fallback;
}

// The NPUs and their debugfs folders, from a process of its own.
bool probeDevices(const char *self, std::vector<std::string> *dirs, std::string *why)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC)) {
		*why = std::string("pipe: ") + std::strerror(errno);
		return false;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execl(self, self, "--probe", static_cast<char *>(nullptr));
		_exit(127);
	}
	close(fds[1]);
	std::string out;
	char buf[512];
	ssize_t n = 0;
	while ((n = read(fds[0], buf, sizeof(buf))) > 0)
		out.append(buf, static_cast<size_t>(n));
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	std::istringstream in(out);
	std::string word;
	int count = -1;
	while (in >> word) {
		if (word == "devices")
			in >> count;
		else if (word == "dir") {
			std::string d;
			std::getline(in, d);
			dirs->push_back(d.empty() ? d : d.substr(1));
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || count <= 0 ||
	    static_cast<int>(dirs->size()) != count) {
		*why = "no NPU found (npu-soak --probe: " + out + ")";
		return false;
	}
	return true;
}

// Kernel stacks of a process's threads (root only), for a wedge report.
std::string kernelStacks(pid_t pid)
{
	std::string out;
	std::string dir = "/proc/" + std::to_string(pid) + "/task";
	DIR *d = opendir(dir.c_str());
	if (!d)
		return out;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		std::ifstream comm(dir + "/" + e->d_name + "/comm"),
		        st(dir + "/" + e->d_name + "/stack");
		std::string name, line, stack;
		std::getline(comm, name);
		while (std::getline(st, line))
			stack += "      " + line + "\n";
		out.append("    task ").append(e->d_name).append(" (").append(name).append(")\n");
		out += stack;
	}
	closedir(d);
	return out;
}

struct Proc {
	pid_t pid = 0;
	int pidfd = -1;
	uint64_t startNs = 0;
	bool killedByUs = false;
	bool wedged = false;
};

class Supervisor {
public:
	Supervisor(const Options &o, const char *self) : o_(o), self_(self), rng_(0) {}
	int run();

private:
	bool start(int slot);
	void reap(int slot, int status);
	void reapAll();
	void watchdog();
	void injector();
	void injectOnce(std::mt19937_64 &g);
	void killOne(std::mt19937_64 &g);
	void reportWedged(int slot, const std::string &why);
	void fail(const std::string &why)
	{
		std::fprintf(stderr, "npu-soak: FAILURE: %s\n", why.c_str());
		std::lock_guard<std::mutex> lock(failMutex_);
		failures_.push_back(why);
	}
	int threadsOf(int slot) const { return o_.threads + (((slot ^ 1) < o_.procs) ? 1 : 0); }
	void progress(bool final);
	int report();

	const Options &o_;
	const char *self_;
	std::mt19937_64 rng_;
	Shared *sh_ = nullptr;
	double wedgeS_ = 60, drainS_ = 60;
	std::vector<std::string> dirs_;
	std::vector<Proc> procs_;
	std::mutex procMutex_;  // procs_ and the pids: reaping and killing
	std::mutex failMutex_;
	std::vector<std::string> failures_;
	std::vector<std::string> workerFailures_;  // the workers' last failure texts
	// Injector.
	std::mutex injMutex_;
	std::condition_variable injCv_;
	std::vector<long> faults_, hangs_, latencies_;
	std::vector<long> faultsLeft_, hangsLeft_;
	long kills_ = 0;
	long killsMidSubmit_ = 0;
	// Figures.
	uint64_t t0_ = 0, tEnd_ = 0;
	double procSeconds_ = 0;
	double lastProgress_ = 0;
	long started_ = 0, crashed_ = 0, wedged_ = 0, exitedEarly_ = 0, stragglers_ = 0;
	long resetsDelta_ = 0, consumed_ = 0;
	std::vector<DeviceCounters> base_, end_;
	std::vector<std::string> kernelReports_;
	UnloadResult unload_;
	int shmFd_ = -1;
	int leaksAtEnd_ = 0;
	bool knobs_ = false;
	bool injecting_ = false;
	bool injStop_ = false;
	bool kernelLogRead_ = false;
	bool unloadTried_ = false;
};

bool Supervisor::start(int slot)
{
	Slot &s = sh_->slots[slot];
	uint32_t gen = s.generation.load() + 1;
	s.ready.store(0);
	for (ThreadState &t : s.threads) {
		t.heartbeatNs.store(0);
		t.phase.store(PhaseIdle);
	}
	s.generation.store(gen);
	std::string a1 = std::to_string(slot), a2 = std::to_string(gen),
	            a3 = std::to_string(shmFd_);
	pid_t pid = fork();
	if (pid < 0) {
		fail(std::string("fork: ") + std::strerror(errno));
		return false;
	}
	if (pid == 0) {
		execl(self_, self_, "--worker", a1.c_str(), a2.c_str(), a3.c_str(),
		      static_cast<char *>(nullptr));
		_exit(127);
	}
	Proc &p = procs_[slot];
	p = Proc{};
	p.pid = pid;
	p.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
	p.startNs = nowNs();
	s.pid.store(pid);
	started_++;
	return true;
}

// With procMutex_ held.
void Supervisor::reap(int slot, int status)
{
	Proc &p = procs_[slot];
	Slot &s = sh_->slots[slot];
	procSeconds_ += secondsSince(p.startNs);
	char text[512];
	takeFailureText(s, text, sizeof(text));
	bool stopping = sh_->stop.load() != 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && (p.killedByUs || p.wedged)) {
		// Ours.
	} else if (WIFSIGNALED(status)) {
		crashed_++;
		fail("worker " + std::to_string(slot) + " (pid " + std::to_string(p.pid) +
		     ") died of signal " + std::to_string(WTERMSIG(status)) + " (" +
		     strsignal(WTERMSIG(status)) + ")" + (text[0] ? std::string(": ") + text : ""));
	} else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
		crashed_++;
		fail("worker " + std::to_string(slot) + " (pid " + std::to_string(p.pid) +
		     ") exited with status " + std::to_string(WEXITSTATUS(status)) +
		     (text[0] ? std::string(": ") + text : ""));
	} else if (!stopping) {
		exitedEarly_++;
		fail("worker " + std::to_string(slot) + " exited before the end");
	} else if (text[0]) {
		workerFailures_.push_back("worker " + std::to_string(slot) + ": " + text);
	}
	if (text[0] && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		workerFailures_.push_back("worker " + std::to_string(slot) + ": " + text);
	s.pid.store(0);
	// The partner may wait for this incarnation.
	futexWakeAll(&s.box.ack);
	futexWakeAll(&s.box.claim);
	futexWakeAll(&s.box.offer);
	if (p.pidfd >= 0)
		close(p.pidfd);
	p = Proc{};
}

void Supervisor::reapAll()
{
	std::lock_guard<std::mutex> lock(procMutex_);
	for (;;) {
		int status = 0;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			break;
		for (int i = 0; i < o_.procs; i++)
			if (procs_[i].pid == pid) {
				reap(i, status);
				if (!sh_->stop.load())
					start(i);
				break;
			}
	}
}

void Supervisor::reportWedged(int slot, const std::string &why)
{
	Proc &p = procs_[slot];
	Slot &s = sh_->slots[slot];
	std::ostringstream msg;
	msg << "worker " << slot << " (pid " << p.pid << ") is wedged: " << why << "\n";
	const uint64_t now = nowNs();
	for (int t = 0; t < threadsOf(slot); t++) {
		ThreadState &ts = s.threads[t];
		uint64_t hb = ts.heartbeatNs.load();
		msg << "  thread " << t << ": " << scenarioName(ts.scenario.load()) << ", "
		    << phaseName(ts.phase.load()) << ", last progress "
		    << (hb ? static_cast<double>(now - hb) / 1e9 : -1.0) << " s ago\n";
	}
	msg << "  kernel stacks:\n" << kernelStacks(p.pid);
	wedged_++;
	p.wedged = true;
	fail(msg.str());
	kill(p.pid, SIGKILL);
}

void Supervisor::watchdog()
{
	std::lock_guard<std::mutex> lock(procMutex_);
	const uint64_t now = nowNs();
	const uint64_t limit = static_cast<uint64_t>(wedgeS_ * 1e9);
	for (int i = 0; i < o_.procs; i++) {
		Proc &p = procs_[i];
		if (!p.pid || p.wedged || p.killedByUs)
			continue;
		Slot &s = sh_->slots[i];
		if (!s.ready.load()) {
			if (now - p.startNs > limit)
				reportWedged(i, "it did not start its threads");
			continue;
		}
		for (int t = 0; t < threadsOf(i); t++) {
			uint64_t hb = s.threads[t].heartbeatNs.load();
			if (hb && now > hb && now - hb > limit) {
				reportWedged(i, "thread " + std::to_string(t) +
				                        " made no progress for " +
				                        std::to_string(static_cast<int>(wedgeS_)) +
				                        " s");
				break;
			}
		}
	}
}

void Supervisor::killOne(std::mt19937_64 &g)
{
	std::lock_guard<std::mutex> lock(procMutex_);
	std::vector<int> alive;
	for (int i = 0; i < o_.procs; i++)
		if (procs_[i].pid && !procs_[i].killedByUs && !procs_[i].wedged &&
		    sh_->slots[i].ready.load())
			alive.push_back(i);
	if (alive.empty())
		return;
	int victim = alive[g() % alive.size()];
	Slot &s = sh_->slots[victim];
	// Mid-submission if it can be had within 50 ms: a thread inside a
	// call that submits work.
	bool mid = false;
	const uint64_t until = nowNs() + 50000000ull;
	while (!mid && nowNs() < until) {
		for (int t = 0; t < threadsOf(victim) && !mid; t++)
			mid = s.threads[t].phase.load(std::memory_order_relaxed) == PhaseEnqueue;
		if (!mid)
			sched_yield();
	}
	procs_[victim].killedByUs = true;
	kill(procs_[victim].pid, SIGKILL);
	kills_++;
	killsMidSubmit_ += mid ? 1 : 0;
	if (o_.verbose)
		std::fprintf(stderr, "npu-soak: killed worker %d (pid %d)%s\n", victim,
		             procs_[victim].pid, mid ? " mid-submission" : "");
}

void Supervisor::injectOnce(std::mt19937_64 &g)
{
	const size_t dev = g() % dirs_.size();
	const std::string &dir = dirs_[dev];
	const unsigned pick = static_cast<unsigned>(g() % 100);
	const char *knob = pick < 45 ? "inject_fault" : pick < 60 ? "inject_hang" : nullptr;
	if (knob) {
		// Armed only when disarmed: the driver only counts down, so
		// what was written is what will be consumed (or left at the end).
		long v = -1;
		if (!readKnob(dir, knob, &v) || v != 0)
			return;
		if (!writeKnob(dir, knob, 1)) {
			fail(std::string("writing ") + dir + "/" + knob);
			return;
		}
		(knob[7] == 'f' ? faults_ : hangs_)[dev]++;
		if (o_.verbose)
			std::fprintf(stderr, "npu-soak: %s on NPU %zu\n", knob, dev);
		return;
	}
	// Latency on every job of the NPU for a while, well inside the job
	// timeout (it counts against a job's time).
	const long maxUs = std::min<long>(150000, static_cast<long>(sh_->jobTimeoutMs) * 1000 / 4);
	const long us = 1000 + static_cast<long>(g() % static_cast<uint64_t>(std::max(1L, maxUs)));
	if (!writeKnob(dir, "inject_latency_us", us)) {
		fail("writing " + dir + "/inject_latency_us");
		return;
	}
	latencies_[dev]++;
	const auto hold = std::chrono::milliseconds(200 + g() % 1300);
	{
		std::unique_lock<std::mutex> lock(injMutex_);
		injCv_.wait_for(lock, hold, [this] { return injStop_; });
	}
	writeKnob(dir, "inject_latency_us", 0);
}

void Supervisor::injector()
{
	std::mt19937_64 g(rng_());
	std::exponential_distribution<double> injGap(1.0 / o_.injectEveryS);
	std::exponential_distribution<double> killGap(1.0 / o_.killEveryS);
	const uint64_t t0 = nowNs();
	double nextInject = injGap(g), nextKill = killGap(g);
	for (;;) {
		double now = secondsSince(t0);
		double next = std::min(injecting_ ? nextInject : 1e18, o_.kill ? nextKill : 1e18);
		{
			std::unique_lock<std::mutex> lock(injMutex_);
			auto wait = std::chrono::duration<double>(
			        std::max(0.0, std::min(next - now, 1.0)));
			if (injCv_.wait_for(lock, wait, [this] { return injStop_; }))
				break;
		}
		now = secondsSince(t0);
		if (injecting_ && now >= nextInject) {
			injectOnce(g);
			nextInject = secondsSince(t0) + injGap(g);
		}
		if (o_.kill && now >= nextKill) {
			killOne(g);
			nextKill = secondsSince(t0) + killGap(g);
		}
	}
	for (const std::string &dir : dirs_)
		writeKnob(dir, "inject_latency_us", 0);
}

void Supervisor::progress(bool final)
{
	uint64_t verified = 0, wrong = 0, reported = 0;
	for (int i = 0; i < o_.procs; i++) {
		Counters &c = sh_->slots[i].c;
		verified += c.verified.load();
		wrong += c.wrong.load();
		reported +=
		        c.deviceFaults.load() + c.launchFailures.load() + c.launchTimeouts.load();
	}
	long f = 0, h = 0, l = 0;
	for (size_t d = 0; d < dirs_.size(); d++)
		f += faults_[d], h += hangs_[d], l += latencies_[d];
	std::fprintf(stderr,
	             "npu-soak: %s%.0f s: %llu verified, %llu wrong, %llu failures reported; "
	             "injected %ld faults, %ld hangs, %ld latencies; %ld killed\n",
	             final ? "end " : "", secondsSince(t0_),
	             static_cast<unsigned long long>(verified),
	             static_cast<unsigned long long>(wrong),
	             static_cast<unsigned long long>(reported), f, h, l, kills_);
}

int Supervisor::run()
{
	std::string why;
	if (!probeDevices(self_, &dirs_, &why)) {
		std::fprintf(stderr, "npu-soak: %s\n", why.c_str());
		return 2;
	}
	const size_t nd = dirs_.size();
	knobs_ = true;
	for (const std::string &d : dirs_)
		if (d.empty() || access((d + "/inject_fault").c_str(), W_OK))
			knobs_ = false;
	if (!knobs_)
		std::fprintf(stderr,
		             "npu-soak: debugfs knobs not writable (needs root and debugfs): "
		             "no injection, no counter checks\n");
	faults_.assign(nd, 0), hangs_.assign(nd, 0), latencies_.assign(nd, 0);
	faultsLeft_.assign(nd, 0), hangsLeft_.assign(nd, 0);
	for (const std::string &d : dirs_) {
		base_.push_back(knobs_ ? readCounters(d) : DeviceCounters{});
		if (knobs_) {
			// Left over from someone else: not ours to count.
			writeKnob(d, "inject_fault", 0);
			writeKnob(d, "inject_hang", 0);
			writeKnob(d, "inject_latency_us", 0);
		}
	}
	KernelLog klog;

	shmFd_ = static_cast<int>(syscall(SYS_memfd_create, "npu-soak", 0));
	if (shmFd_ < 0 || ftruncate(shmFd_, sizeof(Shared))) {
		std::fprintf(stderr, "npu-soak: memfd: %s\n", std::strerror(errno));
		return 2;
	}
	void *mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, shmFd_, 0);
	if (mem == MAP_FAILED) {
		std::fprintf(stderr, "npu-soak: mmap: %s\n", std::strerror(errno));
		return 2;
	}
	sh_ = new (mem) Shared;
	uint64_t seed = o_.seed ? o_.seed : nowNs();
	rng_.seed(seed);
	sh_->procs = static_cast<uint32_t>(o_.procs);
	sh_->threads = static_cast<uint32_t>(o_.threads);
	sh_->devices = static_cast<uint32_t>(nd);
	sh_->seed = seed;
	sh_->jobTimeoutMs = static_cast<uint32_t>(moduleParam("job_timeout_ms", 2000));
	sh_->maxBytes = o_.maxBytes;
	// A worker's longest wait (its waitMs()) is 10 job timeouts, at least
	// 20 s: a thread is wedged only well past it.
	const double waitS = std::max(20.0, 10.0 * sh_->jobTimeoutMs / 1000.0);
	wedgeS_ = o_.wedgeS > 0 ? o_.wedgeS : std::max(60.0, waitS + 40.0);
	drainS_ = o_.drainS > 0 ? o_.drainS : std::max(60.0, 2 * waitS);
	std::fprintf(stderr,
	             "npu-soak: %d processes x %d threads on %zu NPUs for %.0f s, seed %llu%s%s\n",
	             o_.procs, o_.threads, nd, o_.seconds, static_cast<unsigned long long>(seed),
	             o_.inject && knobs_ ? ", injecting faults, hangs and latency" : "",
	             o_.kill ? ", killing workers" : "");

	t0_ = nowNs();
	procs_.assign(static_cast<size_t>(o_.procs), Proc{});
	{
		std::lock_guard<std::mutex> lock(procMutex_);
		for (int i = 0; i < o_.procs; i++)
			start(i);
	}
	std::thread injThread;
	injecting_ = o_.inject && knobs_;
	if (injecting_ || o_.kill)
		injThread = std::thread([this] { injector(); });
	const uint64_t endNs = t0_ + static_cast<uint64_t>(o_.seconds * 1e9);
	const double every = std::max(10.0, o_.seconds / 20);
	while (nowNs() < endNs) {
		std::vector<pollfd> pfds;
		{
			std::lock_guard<std::mutex> lock(procMutex_);
			for (const Proc &p : procs_)
				if (p.pidfd >= 0)
					pfds.push_back({p.pidfd, POLLIN, 0});
		}
		int ms = static_cast<int>(std::min<uint64_t>(200, (endNs - nowNs()) / 1000000 + 1));
		poll(pfds.data(), pfds.size(), ms);
		reapAll();
		watchdog();
		if (secondsSince(t0_) - lastProgress_ >= every) {
			lastProgress_ = secondsSince(t0_);
			progress(false);
		}
	}
	// The end: no more injections or kills; the workers finish what
	// they do, tear down and exit.
	{
		std::lock_guard<std::mutex> lock(injMutex_);
		injStop_ = true;
	}
	injCv_.notify_all();
	if (injThread.joinable())
		injThread.join();
	sh_->stop.store(1);
	const uint64_t drainEnd = nowNs() + static_cast<uint64_t>(drainS_ * 1e9);
	for (;;) {
		reapAll();
		watchdog();
		std::vector<pollfd> pfds;
		{
			std::lock_guard<std::mutex> lock(procMutex_);
			for (const Proc &p : procs_)
				if (p.pidfd >= 0)
					pfds.push_back({p.pidfd, POLLIN, 0});
		}
		if (pfds.empty())
			break;
		if (nowNs() > drainEnd) {
			std::lock_guard<std::mutex> lock(procMutex_);
			for (int i = 0; i < o_.procs; i++)
				if (procs_[i].pid && !procs_[i].wedged) {
					stragglers_++;
					reportWedged(i, "it did not finish within " +
					                        std::to_string(
					                                static_cast<int>(drainS_)) +
					                        " s of the end");
				}
			// Killed: they go within a moment, unless a thread is
			// stuck in the kernel (then it is left behind, reported).
			const uint64_t killEnd = nowNs() + 10000000000ull;
			for (int i = 0; i < o_.procs; i++) {
				while (procs_[i].pid) {
					int status = 0;
					pid_t r = waitpid(procs_[i].pid, &status, WNOHANG);
					if (r == procs_[i].pid) {
						reap(i, status);
					} else if (nowNs() > killEnd) {
						fail("worker " + std::to_string(i) + " (pid " +
						     std::to_string(procs_[i].pid) +
						     ") did not die of SIGKILL within 10 s: stuck "
						     "in the "
						     "kernel\n" +
						     kernelStacks(procs_[i].pid));
						procs_[i] = Proc{};
					} else {
						pollfd pfd{procs_[i].pidfd, POLLIN, 0};
						poll(&pfd, 1, 100);
					}
				}
			}
			break;
		}
		poll(pfds.data(), pfds.size(), 200);
	}
	tEnd_ = nowNs();

	if (knobs_) {
		// Every process is gone: no job runs, nothing counts down.
		for (size_t d = 0; d < nd; d++) {
			readKnob(dirs_[d], "inject_fault", &faultsLeft_[d]);
			readKnob(dirs_[d], "inject_hang", &hangsLeft_[d]);
			writeKnob(dirs_[d], "inject_fault", 0);
			writeKnob(dirs_[d], "inject_hang", 0);
			writeKnob(dirs_[d], "inject_latency_us", 0);
		}
		// The last files and jobs go as the exits finish.
		const uint64_t settleEnd = nowNs() + static_cast<uint64_t>(o_.settleS * 1e9);
		for (;;) {
			end_.clear();
			bool same = true;
			for (size_t d = 0; d < nd; d++) {
				end_.push_back(readCounters(dirs_[d]));
				same = same && sameLive(base_[d], end_[d]);
			}
			if (same || nowNs() > settleEnd)
				break;
			// The counters have nothing to wait on: look again.
			std::this_thread::sleep_for(std::chrono::milliseconds(100));
		}
		for (size_t d = 0; d < nd; d++) {
			if (!sameLive(base_[d], end_[d])) {
				leaksAtEnd_++;
				fail("NPU " + std::to_string(d) +
				     "'s counters did not come back: before " +
				     describeLive(base_[d]) + ", after " + describeLive(end_[d]));
			}
			long consumed = faults_[d] - faultsLeft_[d] + hangs_[d] - hangsLeft_[d];
			long resets = end_[d].resets - base_[d].resets;
			consumed_ += consumed;
			resetsDelta_ += resets;
			if (resets != consumed)
				fail("NPU " + std::to_string(d) + ": " + std::to_string(resets) +
				     " engine resets, but " + std::to_string(consumed) +
				     " injected faults and hangs were consumed (a reset nobody "
				     "injected "
				     "is a fault of valid work)");
		}
	}
	if (klog.available()) {
		kernelLogRead_ = true;
		kernelReports_ = klog.reports();
		for (const std::string &l : kernelReports_)
			fail("kernel log: " + l);
	}
	if (o_.unloadCheck) {
		unloadTried_ = true;
		unload_ = unloadAndReload(o_.unloadCheck, o_.settleS);
		if (!unload_.unloaded || !unload_.reloaded || unload_.leakReports)
			fail("module unload check: " + unload_.message);
	}
	return report();
}

int Supervisor::report()
{
	Counters t;
	for (int i = 0; i < o_.procs; i++) {
		Counters &c = sh_->slots[i].c;
		t.scenarios += c.scenarios.load();
		t.verified += c.verified.load();
		t.wrong += c.wrong.load();
		t.deviceFaults += c.deviceFaults.load();
		t.launchFailures += c.launchFailures.load();
		t.launchTimeouts += c.launchTimeouts.load();
		t.recoveries += c.recoveries.load();
		t.ooms += c.ooms.load();
		t.ipcVerified += c.ipcVerified.load();
		t.ipcPeerGone += c.ipcPeerGone.load();
		t.unexpected += c.unexpected.load();
		t.waitTimeouts += c.waitTimeouts.load();
		t.bytesMoved += c.bytesMoved.load();
		t.opsVerified += c.opsVerified.load();
		t.callbacks += c.callbacks.load();
	}
	if (t.verified.load() == 0)
		fail("no result was verified");
	if (t.wrong.load())
		fail(std::to_string(t.wrong.load()) + " wrong results");
	if (t.unexpected.load())
		fail(std::to_string(t.unexpected.load()) + " unexpected errors");
	if (t.waitTimeouts.load())
		fail(std::to_string(t.waitTimeouts.load()) + " waits timed out");
	long f = 0, h = 0, l = 0;
	for (size_t d = 0; d < dirs_.size(); d++)
		f += faults_[d], h += hangs_[d], l += latencies_[d];
	const bool pass = failures_.empty();
	const double hours = procSeconds_ / 3600;
	const uint64_t reported = t.deviceFaults + t.launchFailures + t.launchTimeouts;
	const int unloadLeaks = unloadTried_ ? unload_.leakReports : 0;
	progress(true);
	if (o_.json) {
		std::ofstream j(o_.json);
		j << "{\n";
		j << "  \"result\": " << (pass ? "\"pass\"" : "\"fail\"") << ",\n";
		j << "  \"seed\": " << sh_->seed << ",\n";
		j << "  \"seconds\": " << o_.seconds << ",\n";
		j << "  \"elapsed_s\": " << static_cast<double>(tEnd_ - t0_) / 1e9 << ",\n";
		j << "  \"processes\": " << o_.procs << ",\n";
		j << "  \"threads_per_process\": " << o_.threads << ",\n";
		j << "  \"devices\": " << dirs_.size() << ",\n";
		j << "  \"process_hours\": " << hours << ",\n";
		j << "  \"workers_started\": " << started_ << ",\n";
		j << "  \"processes_killed\": " << kills_ << ",\n";
		j << "  \"processes_killed_mid_submission\": " << killsMidSubmit_ << ",\n";
		j << "  \"workers_crashed\": " << crashed_ << ",\n";
		j << "  \"workers_wedged\": " << wedged_ << ",\n";
		j << "  \"injections\": {\"faults\": " << f << ", \"hangs\": " << h
		  << ", \"latency\": " << l << ", \"faults_and_hangs_consumed\": " << consumed_
		  << "},\n";
		j << "  \"engine_resets\": " << resetsDelta_ << ",\n";
		j << "  \"scenarios\": " << t.scenarios << ",\n";
		j << "  \"results_verified\": " << t.verified << ",\n";
		j << "  \"ops_verified\": " << t.opsVerified << ",\n";
		j << "  \"ipc_transfers_verified\": " << t.ipcVerified << ",\n";
		j << "  \"bytes_verified\": " << t.bytesMoved << ",\n";
		j << "  \"wrong_results\": " << t.wrong << ",\n";
		j << "  \"failures_reported\": {\"device_fault\": " << t.deviceFaults
		  << ", \"launch_failure\": " << t.launchFailures
		  << ", \"launch_timeout\": " << t.launchTimeouts
		  << ", \"out_of_memory\": " << t.ooms << ", \"ipc_peer_gone\": " << t.ipcPeerGone
		  << ", \"recoveries\": " << t.recoveries
		  << ", \"error_callbacks\": " << t.callbacks << "},\n";
		j << "  \"unexpected_errors\": " << t.unexpected << ",\n";
		j << "  \"wait_timeouts\": " << t.waitTimeouts << ",\n";
		j << "  \"leaks_at_end\": " << leaksAtEnd_ << ",\n";
		j << "  \"counters\": [";
		for (size_t d = 0; d < dirs_.size(); d++)
			j << (d ? ", " : "") << "{\"before\": "
			  << jsonString(d < base_.size() ? describeLive(base_[d]) : "")
			  << ", \"after\": "
			  << jsonString(d < end_.size() ? describeLive(end_[d]) : "") << "}";
		j << "],\n";
		j << "  \"kernel_reports\": "
		  << (kernelLogRead_ ? std::to_string(kernelReports_.size()) : "null") << ",\n";
		j << "  \"module_unloaded\": "
		  << (unloadTried_ ? (unload_.unloaded ? "true" : "false") : "null") << ",\n";
		j << "  \"leaks_at_unload\": "
		  << (unloadTried_ ? std::to_string(unloadLeaks) : "null") << ",\n";
		j << "  \"worker_failures\": [";
		for (size_t i = 0; i < workerFailures_.size() && i < 50; i++)
			j << (i ? ", " : "") << jsonString(workerFailures_[i]);
		j << "],\n";
		j << "  \"failures\": [";
		for (size_t i = 0; i < failures_.size(); i++)
			j << (i ? ", " : "") << jsonString(failures_[i]);
		j << "]\n}\n";
	}
	std::printf(
	        "npu-soak: %s: %.4f process-hours (%d processes x %d threads, %zu NPUs, %.1f s), "
	        "injected %ld faults, %ld hangs, %ld latencies, %ld processes killed, "
	        "%llu results verified, %llu wrong, %llu failures reported, "
	        "%d leaks at end, %s at unload\n",
	        pass ? "PASS" : "FAIL", hours, o_.procs, o_.threads, dirs_.size(),
	        static_cast<double>(tEnd_ - t0_) / 1e9, f, h, l, kills_,
	        static_cast<unsigned long long>(t.verified.load()),
	        static_cast<unsigned long long>(t.wrong.load()),
	        static_cast<unsigned long long>(reported), leaksAtEnd_,
	        unloadTried_ ? (std::to_string(unloadLeaks) + " leaks").c_str() : "not checked");
	std::fflush(stdout);
	return pass ? 0 : 1;
}

}  // namespace

int runSupervisor(const Options &o, const char *self)
{
	Supervisor s(o, self);
	return s.run();
}

int runProbe()
{
	int count = 0;
	if (npurtGetDeviceCount(&count) != npurtSuccess || count <= 0) {
		std::printf("devices 0 %s\n", npurtGetLastErrorMessage());
		return 1;
	}
	std::printf("devices %d\n", count);
	for (int d = 0; d < count; d++) {
		npurtDeviceProp p{};
		npurtGetDeviceProperties(&p, d);
		std::printf("dir %s\n", p.debugfsPath);
	}
	return 0;
}

}  // namespace soak

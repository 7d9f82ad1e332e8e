// npu-soak: debugfs, the kernel log and the module, from the supervisor.
#include "kernel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace soak {

DeviceCounters readCounters(const std::string &dir)
{
	DeviceCounters c;
	std::ifstream mem(dir + "/npu_memory");
	std::string line;
	int fields = 0;
	while (std::getline(mem, line)) {
		long long v = 0;
		if (std::sscanf(line.c_str(), "used: %lld", &v) == 1)
			c.used = v, fields++;
		else if (std::sscanf(line.c_str(), "bos: %lld", &v) == 1)
			c.bos = v, fields++;
		else if (std::sscanf(line.c_str(), "contexts: %lld", &v) == 1)
			c.contexts = v, fields++;
	}
	std::ifstream eng(dir + "/npu_engines");
	int engines = 0;
	while (std::getline(eng, line)) {
		unsigned id = 0;
		char name[48] = "";
		long long queues = 0, jobs = 0, busy = 0, resets = 0;
		if (std::sscanf(line.c_str(),
		                "engine %u %47s queues %lld jobs %lld busy_ns %lld resets %lld",
		                &id, name, &queues, &jobs, &busy, &resets) == 6) {
			c.queues += queues;
			c.jobs += jobs;
			c.resets += resets;
			engines++;
		}
	}
	std::ifstream clients(dir + "/npu_clients");
	while (std::getline(clients, line))
		if (line.rfind("context ", 0) == 0)
			c.clientLines++;
	c.ok = fields == 3 && engines > 0;
	return c;
}

bool sameLive(const DeviceCounters &a, const DeviceCounters &b)
{
	return a.ok && b.ok && a.used == b.used && a.bos == b.bos && a.contexts == b.contexts &&
	       a.queues == b.queues && a.clientLines == b.clientLines;
}

std::string describeLive(const DeviceCounters &c)
{
	if (!c.ok)
		return "unreadable";
	std::ostringstream s;
	s << "used " << c.used << " bos " << c.bos << " contexts " << c.contexts << " queues "
	  << c.queues << " clients " << c.clientLines;
	return s.str();
}

bool readKnob(const std::string &dir, const char *knob, long *value)
{
	std::ifstream f(dir + "/" + knob);
	long v = 0;
	if (!(f >> v))
		return false;
	*value = v;
	return true;
}

bool writeKnob(const std::string &dir, const char *knob, long value)
{
	std::ofstream f(dir + "/" + knob);
	f << value << "\n";
	f.flush();
	return f.good();
}

KernelLog::KernelLog()
{
	fd_ = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd_ >= 0 && lseek(fd_, 0, SEEK_END) < 0) {
		close(fd_);
		fd_ = -1;
	}
}

KernelLog::~KernelLog()
{
	if (fd_ >= 0)
		close(fd_);
}

std::vector<std::string> KernelLog::reports(std::vector<std::string> *all)
{
	// tools/vm-logcheck's patterns and its benign start-up banners.
	static const std::regex pattern(
	        "WARNING:|BUG:|BUG |Oops|general protection fault|Call Trace|kernel BUG|"
	        "possible recursive locking|possible circular locking|inconsistent lock state|"
	        "lockdep|INFO: rcu|rcu_sched self-detected|rcu: INFO|stall on CPU|hung_task|"
	        "blocked for more than|UBSAN|KASAN|kmemleak|npu: leak");
	static const std::regex benign("kmemleak: Kernel memory leak detector initialized "
	                               "\\(mem pool available: [0-9]+\\)|"
	                               "rcu:[[:space:]]+RCU lockdep checking is enabled\\.");
	std::vector<std::string> out;
	if (fd_ < 0)
		return out;
	char buf[8192];
	for (;;) {
		ssize_t n = read(fd_, buf, sizeof(buf) - 1);
		if (n < 0 && errno == EPIPE)
			continue;  // records were overwritten: go on with the next
		if (n <= 0)
			break;
		buf[n] = '\0';
		// "prio,seq,time,flags;message\n" then continuation lines.
		const char *semi = std::strchr(buf, ';');
		std::string msg = semi ? semi + 1 : buf;
		while (!msg.empty() && msg.back() == '\n')
			msg.pop_back();
		std::string first = msg.substr(0, msg.find('\n'));
		if (all)
			all->push_back(first);
		if (std::regex_search(first, pattern) && !std::regex_match(first, benign))
			out.push_back(first);
	}
	return out;
}

namespace {

// The module's current parameters, as insmod wants them.
std::string currentParams()
{
	std::string params;
	DIR *d = opendir("/sys/module/npu/parameters");
	if (!d)
		return params;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		std::ifstream f(std::string("/sys/module/npu/parameters/") + e->d_name);
		std::string v;
		if (f >> v)
			params += std::string(params.empty() ? "" : " ") + e->d_name + "=" + v;
	}
	closedir(d);
	return params;
}

bool moduleLoaded()
{
	std::ifstream f("/proc/modules");
	std::string line;
	while (std::getline(f, line))
		if (line.rfind("npu ", 0) == 0)
			return true;
	return false;
}

}  // namespace

UnloadResult unloadAndReload(const char *ko, double waitS)
{
	UnloadResult r;
	const std::string params = currentParams();
	KernelLog log;
	// The last files close as the workers' exits finish: retry while
	// the module is busy, within waitS.
	auto deadline = std::chrono::steady_clock::now() +
	                std::chrono::milliseconds(static_cast<long>(waitS * 1000));
	int err = 0;
	for (;;) {
		if (syscall(SYS_delete_module, "npu", O_NONBLOCK) == 0) {
			r.unloaded = true;
			break;
		}
		err = errno;
		if (err != EAGAIN && err != EBUSY)
			break;
		if (std::chrono::steady_clock::now() > deadline)
			break;
		// The module's use count has no event to wait for.
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
	if (!r.unloaded) {
		r.message = std::string("rmmod npu: ") + std::strerror(err);
		return r;
	}
	std::vector<std::string> all;
	for (const std::string &l : log.reports(&all))
		if (l.find("npu: leak") != std::string::npos) {
			r.leakReports++;
			r.message += l + "\n";
		}
	int fd = open(ko, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r.message += std::string("open ") + ko + ": " + std::strerror(errno);
		return r;
	}
	if (syscall(SYS_finit_module, fd, params.c_str(), 0) == 0)
		r.reloaded = true;
	else
		r.message +=
		        std::string("insmod ") + ko + " " + params + ": " + std::strerror(errno);
	close(fd);
	if (r.reloaded && !moduleLoaded())
		r.reloaded = false;
	return r;
}

}  // namespace soak

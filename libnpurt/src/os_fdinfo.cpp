// The processes using NPUs, from the DRM usage statistics the driver
// publishes in /proc/PID/fdinfo (kernel/npu_fdinfo.c): what
// npurtDeviceGetProcesses and npu-smi show.
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "os_interface.h"

namespace npurt::os {

namespace {

// Whether fd N of a process is a DRM node; a cheap readlink that spares
// reading the fdinfo of every other descriptor.
bool isDrmNode(const std::string &fdPath)
{
	char target[64];
	ssize_t n = ::readlink(fdPath.c_str(), target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	return !std::strncmp(target, "/dev/dri/", 9) || !std::strncmp(target, "/dev/accel/", 11);
}

}  // namespace

bool parseFdinfo(const std::string &text, ClientUsage *out)
{
	std::istringstream in(text);
	std::string line;
	bool ours = false, hasDevice = false;
	ClientUsage c = *out;
	while (std::getline(in, line)) {
		size_t colon = line.find(':');
		if (colon == std::string::npos)
			continue;
		std::string key = line.substr(0, colon);
		const char *val = line.c_str() + colon + 1;
		val += std::strspn(val, "\t ");
		uint64_t num = std::strtoull(val, nullptr, 10);
		if (key == "drm-driver")
			ours = !std::strcmp(val, "npu");
		else if (key == "drm-client-id")
			c.clientId = num;
		else if (key == "npu-device") {
			c.deviceIndex = static_cast<uint32_t>(num);
			hasDevice = true;
		} else if (key == "npu-queues")
			c.queues = static_cast<uint32_t>(num);
		else if (key == "drm-total-device")
			c.deviceBytes = num << 10;  // KiB
		else if (key == "drm-total-host")
			c.hostBytes = num << 10;
		else if (key == "drm-engine-compute")
			c.computeBusyNs = num;
		else if (key == "drm-engine-copy")
			c.copyBusyNs = num;
	}
	if (!ours || !hasDevice)
		return false;
	*out = c;
	return true;
}

std::vector<ClientUsage> scanClients()
{
	std::vector<ClientUsage> out;
	std::set<std::pair<long, uint64_t>> seen;  // (pid, client id)
	DIR *proc = ::opendir("/proc");
	if (!proc)
		return out;
	while (dirent *pe = ::readdir(proc)) {
		char *end = nullptr;
		long pid = std::strtol(pe->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		std::string base = std::string("/proc/") + pe->d_name;
		DIR *fds = ::opendir((base + "/fd").c_str());
		if (!fds)
			continue;  // another user's process, or gone
		while (dirent *fe = ::readdir(fds)) {
			if (fe->d_name[0] == '.' || !isDrmNode(base + "/fd/" + fe->d_name))
				continue;
			std::ifstream f(base + "/fdinfo/" + fe->d_name);
			std::stringstream text;
			text << f.rdbuf();
			ClientUsage c;
			c.pid = pid;
			if (parseFdinfo(text.str(), &c) && seen.insert({pid, c.clientId}).second)
				out.push_back(c);
		}
		::closedir(fds);
	}
	::closedir(proc);
	return out;
}

std::string commandName(long pid)
{
	std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
	std::string name;
	std::getline(comm, name);
	return name;
}

}  // namespace npurt::os

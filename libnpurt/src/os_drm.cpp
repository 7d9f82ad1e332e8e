// The OS interface over DRM render nodes, through libdrm.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <xf86drm.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "error.h"
#include "os_interface.h"

namespace npurt::os {
namespace {

constexpr const char *kDriverName = "npu";

class DrmDevice final : public Device {
public:
	DrmDevice(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
	~DrmDevice() override { ::close(fd_); }
	DrmDevice(const DrmDevice &) = delete;
	DrmDevice &operator=(const DrmDevice &) = delete;

	const std::string &path() const override { return path_; }
	std::string debugfsPath() const override;

	int ioctl(unsigned long request, void *arg) override
	{
		// drmIoctl restarts on EINTR and EAGAIN.
		return drmIoctl(fd_, request, arg) == 0 ? 0 : -errno;
	}

	int fd() const override { return fd_; }

	void *mmap(size_t size, uint64_t offset) override
	{
		void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
		                 static_cast<off_t>(offset));
		return p == MAP_FAILED ? nullptr : p;
	}

	void munmap(void *addr, size_t size) override { ::munmap(addr, size); }

	std::unique_ptr<Device> reopen(int *err) override
	{
		int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			*err = errno;
			return nullptr;
		}
		return std::make_unique<DrmDevice>(fd, path_);
	}

private:
	int fd_;
	std::string path_;
};

bool isNpuNode(int fd)
{
	drmVersionPtr v = drmGetVersion(fd);
	if (!v)
		return false;
	bool match = v->name && std::strcmp(v->name, kDriverName) == 0;
	drmFreeVersion(v);
	return match;
}

// The nodes an NPU may be behind, by minor number: compute accelerator
// nodes (/dev/accel/accelN, kernels with drivers/accel) and render nodes
// (/dev/dri/renderDN, before). drmGetDevices2() is not used: it skips
// platform devices without a device-tree node, which is what the emulated
// NPUs are, and it knows no accel nodes.
std::vector<std::string> deviceNodes()
{
	static constexpr struct {
		const char *dir;
		const char *pattern;
	} kKinds[] = {{"/dev/accel", "accel%d"}, {"/dev/dri", "renderD%d"}};
	std::vector<std::string> paths;
	for (const auto &kind : kKinds) {
		std::vector<std::pair<int, std::string>> found;
		DIR *dir = ::opendir(kind.dir);
		if (!dir)
			continue;
		while (struct dirent *e = ::readdir(dir)) {
			int minor = 0;
			if (std::sscanf(e->d_name, kind.pattern, &minor) == 1)
				found.emplace_back(minor, std::string(kind.dir) + "/" + e->d_name);
		}
		::closedir(dir);
		std::sort(found.begin(), found.end());
		for (auto &f : found)
			paths.push_back(std::move(f.second));
	}
	return paths;
}

// The DRM core names a render node's debugfs folder by its minor number
// (dri/128), an accel node's by the device's name (accel/npu-emu.0, 6.12),
// so both are tried; the folder that holds the driver's npu_engines is it.
std::string DrmDevice::debugfsPath() const
{
	namespace fs = std::filesystem;
	struct stat st {};
	if (::fstat(fd_, &st) || !S_ISCHR(st.st_mode))
		return "";
	const bool accel = path_.rfind("/dev/accel/", 0) == 0;
	const fs::path root = accel ? "/sys/kernel/debug/accel" : "/sys/kernel/debug/dri";
	std::error_code ec;
	const fs::path dev =
	        fs::read_symlink("/sys/dev/char/" + std::to_string(major(st.st_rdev)) + ":" +
	                                 std::to_string(minor(st.st_rdev)) + "/device",
	                         ec);
	for (const fs::path &d :
	     {root / std::to_string(minor(st.st_rdev)), ec ? fs::path() : root / dev.filename()}) {
		if (!d.empty() && ::access((d / "npu_engines").c_str(), R_OK) == 0)
			return d.string();
	}
	return "";
}

class DrmInterface final : public Interface {
public:
	Discovery openDevices() override
	{
		Discovery d;
		for (const auto &path : deviceNodes()) {
			int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
			if (fd < 0) {
				// A node we cannot open we cannot identify either:
				// report it, it may be an NPU.
				int err = errno;
				d.failures.push_back(osMessage("open " + path, err));
				if (!d.firstError)
					d.firstError = err;
				continue;
			}
			if (!isNpuNode(fd)) {
				::close(fd);
				continue;
			}
			d.devices.push_back(std::make_unique<DrmDevice>(fd, path));
		}
		return d;
	}
	std::vector<ClientUsage> clients() override { return scanClients(); }
	std::string processName(long pid) override { return commandName(pid); }
};

}  // namespace

std::unique_ptr<Interface> makeDrmInterface()
{
	return std::make_unique<DrmInterface>();
}

}  // namespace npurt::os

// The OS interface over DRM render nodes, through libdrm.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xf86drm.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

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

// Render node paths under /dev/dri, by minor number. drmGetDevices2() is not
// used: it skips platform devices without a device-tree node, which is what
// the emulated NPUs are.
std::vector<std::string> renderNodes()
{
	std::vector<std::pair<int, std::string>> found;
	DIR *dir = ::opendir("/dev/dri");
	if (!dir)
		return {};
	while (struct dirent *e = ::readdir(dir)) {
		int minor = 0;
		if (std::sscanf(e->d_name, "renderD%d", &minor) == 1)
			found.emplace_back(minor, std::string("/dev/dri/") + e->d_name);
	}
	::closedir(dir);
	std::sort(found.begin(), found.end());
	std::vector<std::string> paths;
	paths.reserve(found.size());
	for (auto &f : found)
		paths.push_back(std::move(f.second));
	return paths;
}

class DrmInterface final : public Interface {
public:
	Discovery openDevices() override
	{
		Discovery d;
		for (const auto &path : renderNodes()) {
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
};

}  // namespace

std::unique_ptr<Interface> makeDrmInterface()
{
	return std::make_unique<DrmInterface>();
}

}  // namespace npurt::os

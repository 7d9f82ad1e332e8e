// The bench's own file of the render node (see raw.h).
#include "raw.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "bench.h"
#include "npu_drm.h"

namespace bench {

uint64_t rawClockNs()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

RawDevice::RawDevice()
{
	int dev = 0;
	check(npurtGetDevice(&dev), "get device");
	npurtDeviceProp prop{};
	check(npurtGetDeviceProperties(&prop, dev), "device properties");
	path_ = prop.devicePath;
	fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
	if (fd_ < 0)
		fail("open " + path_ + ": " + std::strerror(errno));
}

RawDevice::~RawDevice()
{
	if (fd_ >= 0)
		::close(fd_);
}

int RawDevice::ioctl(unsigned long request, void *arg, const char *what)
{
	int ret;
	do {
		ret = ::ioctl(fd_, request, arg);
	} while (ret == -1 && (errno == EINTR || errno == EAGAIN));
	if (ret == -1)
		fail(std::string(what) + " on " + path_ + ": " + std::strerror(errno));
	return ret;
}

double RawDevice::nullUs(int n)
{
	double t0 = now();
	for (int i = 0; i < n; i++)
		nullIoctl();
	return (now() - t0) / n * 1e6;
}

void RawDevice::nullIoctl()
{
	drm_npu_query q{};
	q.query = DRM_NPU_QUERY_DEVICE_INFO;
	q.size = 0;
	if (::ioctl(fd_, DRM_IOCTL_NPU_QUERY, &q) != 0)
		fail("DRM_IOCTL_NPU_QUERY on " + path_ + ": " + std::strerror(errno));
}

RawDevice::Queue RawDevice::createQueue(uint32_t engineClass)
{
	drm_npu_queue_create qc{};
	qc.engine_class = engineClass;
	qc.priority = DRM_NPU_PRIORITY_NORMAL;
	ioctl(DRM_IOCTL_NPU_QUEUE_CREATE, &qc, "DRM_IOCTL_NPU_QUEUE_CREATE");
	return {qc.queue_id, qc.syncobj_handle};
}

uint64_t RawDevice::submit(const Queue &q, const void *cmds, uint32_t size)
{
	drm_npu_submit s{};
	s.queue_id = q.id;
	s.cmds_ptr = reinterpret_cast<uintptr_t>(cmds);
	s.cmds_size = size;
	ioctl(DRM_IOCTL_NPU_SUBMIT, &s, "DRM_IOCTL_NPU_SUBMIT");
	return s.point;
}

void RawDevice::wait(const Queue &q, uint64_t point)
{
	drm_syncobj_timeline_wait w{};
	uint32_t handle = q.syncobj;
	w.handles = reinterpret_cast<uintptr_t>(&handle);
	w.points = reinterpret_cast<uintptr_t>(&point);
	w.count_handles = 1;
	w.timeout_nsec = INT64_MAX;
	ioctl(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w, "DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT");
}

void *RawDevice::mapHost(size_t bytes)
{
	bytes = (bytes + 4095) & ~static_cast<size_t>(4095);
	drm_npu_bo_create bc{};
	bc.size = bytes;
	bc.kind = DRM_NPU_BO_HOST;
	ioctl(DRM_IOCTL_NPU_BO_CREATE, &bc, "DRM_IOCTL_NPU_BO_CREATE");
	drm_npu_bo_info info{};
	info.handle = bc.handle;
	ioctl(DRM_IOCTL_NPU_BO_INFO, &info, "DRM_IOCTL_NPU_BO_INFO");
	void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
	                 static_cast<off_t>(info.mmap_offset));
	if (p == MAP_FAILED)
		fail("mmap of a host BO of " + path_ + ": " + std::strerror(errno));
	drm_npu_vm_bind b{};
	b.op = DRM_NPU_VM_MAP;
	b.handle = bc.handle;
	b.addr = reinterpret_cast<uintptr_t>(p);
	b.size = bytes;
	ioctl(DRM_IOCTL_NPU_VM_BIND, &b, "DRM_IOCTL_NPU_VM_BIND");
	// The mapping holds the BO; the memory lives as long as the file.
	return p;
}

}  // namespace bench

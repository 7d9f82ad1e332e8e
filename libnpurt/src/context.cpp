#include "context.h"

#include "mem_pool.h"
#include "pool_ipc.h"
#include "runtime.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <thread>

#include "error.h"
#include "ipc.h"
#include "npu_drm.h"
#include "stream.h"
#include "vmm.h"

namespace npurt {
namespace {

// Pool segments are 2 MiB multiples: keep them 2 MiB aligned.
constexpr uint64_t kSegmentAlign = 2ull << 20;

std::string hex(uint64_t v)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

}  // namespace

AddressSpace::AddressSpace(uint64_t base, uint64_t size) : base_(base), size_(size)
{
	free_[base] = size;
}

uint64_t AddressSpace::allocate(uint64_t size, uint64_t align)
{
	std::lock_guard<std::mutex> lock(mutex_);
	for (auto it = free_.begin(); it != free_.end(); ++it) {
		uint64_t start = (it->first + align - 1) & ~(align - 1);
		uint64_t end = it->first + it->second;
		if (start < it->first || start > end || end - start < size)
			continue;
		uint64_t headStart = it->first, headSize = start - it->first;
		uint64_t tailStart = start + size, tailSize = end - tailStart;
		free_.erase(it);
		if (headSize)
			free_[headStart] = headSize;
		if (tailSize)
			free_[tailStart] = tailSize;
		return start;
	}
	return 0;
}

bool AddressSpace::allocateAt(uint64_t addr, uint64_t size)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = free_.upper_bound(addr);
	if (it == free_.begin())
		return false;
	--it;
	const uint64_t start = it->first, end = it->first + it->second;
	if (addr + size < addr || addr + size > end)
		return false;
	free_.erase(it);
	if (addr > start)
		free_[start] = addr - start;
	if (end > addr + size)
		free_[addr + size] = end - (addr + size);
	return true;
}

void AddressSpace::release(uint64_t addr, uint64_t size)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto next = free_.lower_bound(addr);
	if (next != free_.end() && addr + size == next->first) {
		size += next->second;
		next = free_.erase(next);
	}
	if (next != free_.begin()) {
		auto prev = std::prev(next);
		if (prev->first + prev->second == addr) {
			prev->second += size;
			return;
		}
	}
	free_[addr] = size;
}

namespace {

// Bytes of pageable memory the pin cache keeps pinned between copies:
// 64 MiB, or a quarter of the locked-memory limit when that applies (it
// does not with CAP_IPC_LOCK).
uint64_t pinCacheCap()
{
	constexpr uint64_t kMax = 64u << 20;
	__user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3]{};
	if (!syscall(SYS_capget, &hdr, caps) &&
	    (caps[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))))
		return kMax;
	rlimit rl{};
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return kMax;
	return std::min<uint64_t>(kMax, rl.rlim_cur / 4);
}

}  // namespace

Context::Context(int ordinal, os::Device &node, std::unique_ptr<os::Device> owned,
                 AddressSpace &space)
    : pinCap_(pinCacheCap()), ordinal_(ordinal), node_(node),
      // A primary context borrows the device's file, which lives forever.
      file_(owned ? std::shared_ptr<os::Device>(std::move(owned))
                  : std::shared_ptr<os::Device>(&node, [](os::Device *) {})),
      space_(space), hostPool_(*this, *this), pool_(*this, this)
{}

Context::~Context()
{
	// Streams destroyed while their host functions ran end first: they
	// are still on the list.
	{
		std::unique_lock<std::mutex> lock(reapMutex_);
		reaped_.wait(lock, [this] { return reaping_ == 0; });
	}
	// Streams first: they hold staging buffers and timestamp slots.
	for (Stream *st : streams())
		destroyStreamForContext(st);
	// Then the peer links both ways: no stream here uses a peer's memory
	// any more, and no peer reaches this context's memory once it goes.
	dropPeers();
	forgetContextInEvents(this);
	forgetContextInProfiler(this);
	// Jobs of destroyed streams may still write their completion words.
	for (auto &r : retired_)
		waitPoint(Point{r.tl, r.point}, INT64_MAX);
	retired_.clear();
	// Mapped memory (npurtMemMap) of this context: no work uses it now.
	VirtualMemory::instance().forgetContext(*this);
	for (auto &chunk : slotChunks_)
		freePinned(chunk);
	{
		std::lock_guard<std::mutex> lock(pinMutex_);
		for (auto &e : pins_)
			releasePin(e.pin);
		pins_.clear();
	}
	// Other processes stop reaching this context's pools first (the
	// exporter's thread may be reading them).
	forgetContextInPoolIpc(*this);
	// The pools return their segments through freeSegment() as they go;
	// release them first, then the IPC imports.
	forgetContextInMemPools(*this);
	pool_.emptyCache();
	std::map<uint64_t, Range> imports;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		imports.swap(imports_);
	}
	for (auto &[addr, r] : imports) {
		unbind(addr, r.size);
		closeBo(r.handle);
		space_.release(addr, r.size);
	}
}

int Context::bind(uint32_t handle, uint64_t addr, uint64_t size, bool readonly, uint64_t offset)
{
	drm_npu_vm_bind b{};
	b.op = DRM_NPU_VM_MAP;
	b.flags = readonly ? DRM_NPU_VM_READONLY : 0;
	b.handle = handle;
	b.addr = addr;
	b.size = size;
	b.bo_offset = offset;
	return node_.ioctl(DRM_IOCTL_NPU_VM_BIND, &b);
}

int Context::unbind(uint64_t addr, uint64_t size)
{
	drm_npu_vm_bind b{};
	b.op = DRM_NPU_VM_UNMAP;
	b.addr = addr;
	b.size = size;
	return node_.ioctl(DRM_IOCTL_NPU_VM_BIND, &b);
}

void Context::closeBo(uint32_t handle)
{
	drm_gem_close c{};
	c.handle = handle;
	node_.ioctl(DRM_IOCTL_GEM_CLOSE, &c);
}

npurtError_t Context::allocSegment(size_t size, uint64_t *addr)
{
	uint64_t va = space_.allocate(size, kSegmentAlign);
	if (!va)
		return npurtErrorMemoryAllocation;
	if (npurtError_t err = backRange(va, size)) {
		space_.release(va, size);
		return err;
	}
	*addr = va;
	return npurtSuccess;
}

npurtError_t Context::backRange(uint64_t va, size_t size)
{
	// The per-process limit first: past it the driver is not asked.
	Device &dev = Runtime::instance().device(ordinal_);
	if (!dev.charge(size))
		return npurtErrorMemoryAllocation;
	npurtError_t err = backCharged(va, size);
	if (err != npurtSuccess)
		dev.uncharge(size);
	return err;
}

npurtError_t Context::backCharged(uint64_t va, size_t size)
{
	drm_npu_bo_create c{};
	c.size = size;
	c.kind = DRM_NPU_BO_DEVICE;
	int ret = node_.ioctl(DRM_IOCTL_NPU_BO_CREATE, &c);
	if (ret) {
		if (ret == -ENOMEM)
			return npurtErrorMemoryAllocation;
		return setError(errorFromErrno(ret),
		                osMessage("creating a device memory object of " +
		                                  std::to_string(size) + " bytes on " +
		                                  node_.path(),
		                          ret));
	}
	ret = bind(c.handle, va, size, false);
	if (ret) {
		closeBo(c.handle);
		return setError(errorFromErrno(ret),
		                osMessage("binding device memory at " + hex(va), ret));
	}
	{
		std::lock_guard<std::mutex> lock(mutex_);
		segments_[va] = {size, c.handle};
	}
	if (npurtError_t err = peerSegmentAdded(va, size, c.handle)) {
		{
			std::lock_guard<std::mutex> lock(mutex_);
			segments_.erase(va);
		}
		unbind(va, size);
		closeBo(c.handle);
		return err;
	}
	return npurtSuccess;
}

bool Context::dropSegment(uint64_t addr, size_t size)
{
	uint32_t handle;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = segments_.find(addr);
		if (it == segments_.end())
			return false;
		handle = it->second.handle;
		// Handles of it no longer open (importers keep their own
		// references to the memory).
		if (it->second.exportFd >= 0)
			close(it->second.exportFd);
		segments_.erase(it);
	}
	// Off the list first, so that no new peer link maps it; then out of
	// every peer before the address can be handed out again.
	peerSegmentRemoved(addr);
	unbind(addr, size);
	closeBo(handle);
	Runtime::instance().device(ordinal_).uncharge(size);
	return true;
}

void Context::freeSegment(uint64_t addr, size_t size)
{
	if (dropSegment(addr, size))
		space_.release(addr, size);
}

size_t Context::capacity()
{
	uint64_t lim = Runtime::instance().device(ordinal_).limit();
	if (lim)
		return lim;
	size_t freeBytes = 0, totalBytes = 0;
	memInfo(&freeBytes, &totalBytes);
	return totalBytes;
}

npurtError_t Context::reserveRange(size_t size, uint64_t *addr)
{
	uint64_t va = space_.allocate(size, kSegmentAlign);
	if (!va)
		return npurtErrorMemoryAllocation;
	*addr = va;
	return npurtSuccess;
}

void Context::releaseRange(uint64_t addr, size_t size)
{
	space_.release(addr, size);
}

npurtError_t Context::mapPage(uint64_t addr, size_t size)
{
	return backRange(addr, size);
}

void Context::unmapPage(uint64_t addr, size_t size)
{
	dropSegment(addr, size);
}

std::string Context::oomDetail(size_t segmentSize)
{
	const Device &dev = Runtime::instance().device(ordinal_);
	uint64_t lim = dev.limit();
	uint64_t held = dev.reservedBytes();
	if (!lim || (segmentSize <= lim && held <= lim - segmentSize))
		return {};
	return "; the per-process limit of " + formatBytes(lim) + " on NPU " +
	       std::to_string(ordinal_) +
	       " was hit (npurtSetMemoryLimit, npurtSetMemoryFraction; torch's "
	       "set_per_process_memory_fraction): this process's pools hold " +
	       formatBytes(held) + " there";
}

npurtError_t Context::driverDeviceBytes(uint64_t *bytes)
{
	drm_npu_context_info info{};
	int ret = node_.ioctl(DRM_IOCTL_NPU_CONTEXT_INFO, &info);
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage("context query on " + node_.path(), ret));
	*bytes = info.device_bytes;
	return npurtSuccess;
}

npurtError_t Context::queryMemory(uint64_t *freeBytes, uint64_t *totalBytes)
{
	drm_npu_memory_info info{};
	drm_npu_query q{};
	q.query = DRM_NPU_QUERY_MEMORY;
	q.data_ptr = reinterpret_cast<uintptr_t>(&info);
	q.size = sizeof(info);
	int ret = node_.ioctl(DRM_IOCTL_NPU_QUERY, &q);
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage("memory query on " + node_.path(), ret));
	*totalBytes = info.capacity;
	*freeBytes = info.used < info.capacity ? info.capacity - info.used : 0;
	return npurtSuccess;
}

void Context::memInfo(size_t *freeBytes, size_t *totalBytes)
{
	uint64_t f = 0, t = 0;
	if (queryMemory(&f, &t) != npurtSuccess)
		npurtGetLastError();
	*freeBytes = f;
	*totalBytes = t;
}

bool Context::findSegment(uint64_t addr, uint64_t *base, uint64_t *size, uint32_t *handle)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = segments_.upper_bound(addr);
	if (it == segments_.begin())
		return false;
	--it;
	if (addr - it->first >= it->second.size)
		return false;
	*base = it->first;
	*size = it->second.size;
	*handle = it->second.handle;
	return true;
}

bool Context::findDeviceRange(uint64_t addr, uint64_t *base, size_t *size)
{
	if (pool_.lookup(addr, base, size) || findPoolMemory(*this, addr, base, size))
		return true;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = imports_.upper_bound(addr);
		if (it != imports_.begin()) {
			--it;
			if (addr - it->first < it->second.size) {
				*base = it->first;
				*size = it->second.size;
				return true;
			}
		}
	}
	return VirtualMemory::instance().findRange(*this, addr, base, size);
}

npurtError_t Context::exportSegment(uint64_t addr, uint64_t *segBase, uint64_t *segSize, int *fd,
                                    uint64_t *inode, const char *api, bool copy)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = segments_.upper_bound(addr);
	if (it == segments_.begin() || addr - std::prev(it)->first >= std::prev(it)->second.size)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + hex(addr) +
		                        " is not live memory from npurtMalloc");
	--it;
	Range &r = it->second;
	if (r.exportFd < 0) {
		drm_prime_handle p{};
		p.handle = r.handle;
		p.flags = DRM_CLOEXEC | DRM_RDWR;
		if (int ret = node_.ioctl(DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
			return setError(errorFromErrno(ret),
			                osMessage(std::string(api) + ": exporting", ret));
		r.exportFd = p.fd;
		r.inode = descriptorInode(p.fd);
	}
	*fd = copy ? fcntl(r.exportFd, F_DUPFD_CLOEXEC, 0) : r.exportFd;
	if (*fd < 0)
		return setError(errorFromErrno(-errno),
		                osMessage(std::string(api) + ": duplicating the export", errno));
	*segBase = it->first;
	*segSize = r.size;
	*inode = r.inode;
	return npurtSuccess;
}

npurtError_t Context::exportAllocation(uint64_t base, uint64_t size, uint64_t *segBase,
                                       uint64_t *segSize, int *fd, uint64_t *inode, const char *api)
{
	if (npurtError_t err = exportSegment(base, segBase, segSize, fd, inode, api))
		return err;
	if (base < *segBase || base - *segBase + size > *segSize)
		return setError(npurtErrorNotSupported,
		                std::string(api) + ": the allocation at " + hex(base) +
		                        " spans several device memory objects (an expandable "
		                        "segment's pages); allocate memory to share with "
		                        "expandable_segments:False");
	return npurtSuccess;
}

npurtError_t Context::ipcOpen(const npurtIpcMemHandle_t &h, void **devPtr, const char *api)
{
	if (h.magic != NPURT_IPC_HANDLE_MAGIC || h.fd < 0 || !h.size || h.offset >= h.size)
		return setError(npurtErrorInvalidValue,
		                std::string(api) +
		                        ": the handle is not one npurtIpcGetMemHandle made");
	std::lock_guard<std::mutex> serial(ipcMutex_);
	int fd = -1;
	bool owned = false;
	if (npurtError_t err = takeIpcDescriptor(h.pid, h.fd, h.inode, api, &fd, &owned))
		return err;
	// Live memory of this process (a stale handle said so above), or (a
	// descriptor of its own) one of this context's segments, whose GEM
	// handle PRIME gives back: the close would close it.
	auto ownMemory = [api] {
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the handle names memory of this process; "
		                                   "use the pointer it was made from");
	};
	if (h.pid == getpid())
		return ownMemory();
	drm_prime_handle p{};
	p.fd = fd;
	int ret = node_.ioctl(DRM_IOCTL_PRIME_FD_TO_HANDLE, &p);
	if (owned)
		close(fd);
	if (ret)
		return setError(
		        ret == -EBADF || ret == -EINVAL || ret == -EOPNOTSUPP
		                ? npurtErrorInvalidHandle
		                : errorFromErrno(ret),
		        osMessage(std::string(api) + ": importing fd " + std::to_string(h.fd),
		                  ret));
	if (ownsSegmentBo(p.handle))
		return ownMemory();
	{
		std::lock_guard<std::mutex> lock(mutex_);
		// PRIME gives back the handle this file already has for the
		// buffer: an open import's shares its mapping.
		for (auto &[addr, imp] : imports_) {
			if (imp.handle != p.handle)
				continue;
			if (imp.size != h.size)  // its handle is live: not closed here
				return setError(npurtErrorInvalidHandle,
				                std::string(api) + ": fd " + std::to_string(h.fd) +
				                        " is not the memory the handle describes");
			imp.opens++;
			*devPtr = reinterpret_cast<void *>(addr + h.offset);
			return npurtSuccess;
		}
	}
	drm_npu_bo_info info{};
	info.handle = p.handle;
	ret = node_.ioctl(DRM_IOCTL_NPU_BO_INFO, &info);
	if (ret || info.size != h.size) {
		closeBo(p.handle);
		return setError(npurtErrorInvalidHandle,
		                std::string(api) + ": fd " + std::to_string(h.fd) +
		                        " is not the memory the handle describes");
	}
	uint64_t va = space_.allocate(info.size, kSegmentAlign);
	if (!va) {
		closeBo(p.handle);
		return setError(npurtErrorMemoryAllocation,
		                std::string(api) + ": device address space exhausted");
	}
	ret = bind(p.handle, va, info.size, false);
	if (ret) {
		closeBo(p.handle);
		space_.release(va, info.size);
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": binding", ret));
	}
	{
		std::lock_guard<std::mutex> lock(mutex_);
		imports_[va] = {info.size, p.handle};
	}
	*devPtr = reinterpret_cast<void *>(va + h.offset);
	return npurtSuccess;
}

namespace {

template <typename Ranges> bool holdsBo(const Ranges &ranges, uint32_t h)
{
	for (const auto &[addr, r] : ranges)
		if (r.handle == h)
			return true;
	return false;
}

}  // namespace

bool Context::ownsSegmentBo(uint32_t h)
{
	std::lock_guard<std::mutex> lock(mutex_);
	return holdsBo(segments_, h);
}

bool Context::ownsBo(uint32_t h)
{
	std::lock_guard<std::mutex> lock(mutex_);
	return holdsBo(segments_, h) || holdsBo(imports_, h);
}

npurtError_t Context::ipcClose(uint64_t addr)
{
	std::lock_guard<std::mutex> serial(ipcMutex_);
	Range r{};
	uint64_t base = 0;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = imports_.upper_bound(addr);
		if (it == imports_.begin() ||
		    addr - std::prev(it)->first >= std::prev(it)->second.size)
			return setError(npurtErrorInvalidValue,
			                "npurtIpcCloseMemHandle: " + hex(addr) +
			                        " is not memory opened with npurtIpcOpenMemHandle");
		--it;
		if (--it->second.opens > 0)
			return npurtSuccess;
		base = it->first;
		r = it->second;
		imports_.erase(it);
		memoryRetired();
	}
	// Work queued before the close may still use the memory: unbound
	// under it, the task would fault. Unlisted now, no new work names it.
	waitQueuedWork(monotonicNs() + kQueuedWorkLimitNs);
	unbind(base, r.size);
	closeBo(r.handle);
	space_.release(base, r.size);
	return npurtSuccess;
}

int Context::userptrBo(uint64_t start, uint64_t size, bool readonly, uint32_t *handle)
{
	drm_npu_bo_userptr u{};
	u.user_ptr = start;
	u.size = size;
	u.flags = readonly ? DRM_NPU_BO_USERPTR_READONLY : 0;
	int ret = node_.ioctl(DRM_IOCTL_NPU_BO_FROM_USERPTR, &u);
	if (ret == -ENOMEM) {
		// The pin cache may hold the locked memory this needs.
		dropPins();
		ret = node_.ioctl(DRM_IOCTL_NPU_BO_FROM_USERPTR, &u);
	}
	*handle = u.handle;
	return ret;
}

bool Context::pinStale(uint32_t handle)
{
	drm_npu_bo_info info{};
	info.handle = handle;
	return node_.ioctl(DRM_IOCTL_NPU_BO_INFO, &info) || (info.status & DRM_NPU_BO_STATUS_STALE);
}

void Context::releasePin(const HostPin &pin)
{
	unbind(pin.va, pin.size);
	space_.release(pin.va, pin.size);
	closeBo(pin.handle);
}

void Context::erasePin(size_t i)
{
	releasePin(pins_[i].pin);
	pinBytes_ -= pins_[i].pin.size;
	pins_.erase(pins_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Context::trimPins(uint64_t cap)
{
	while (pinBytes_ > cap) {
		size_t lru = pins_.size();
		for (size_t i = 0; i < pins_.size(); i++)
			if (!pins_[i].users &&
			    (lru == pins_.size() || pins_[i].lastUse < pins_[lru].lastUse))
				lru = i;
		if (lru == pins_.size())
			return;  // all in use
		erasePin(lru);
	}
}

void Context::dropPins()
{
	std::lock_guard<std::mutex> lock(pinMutex_);
	trimPins(0);
}

bool Context::pinHost(const void *ptr, size_t size, bool readonly, HostPin *out)
{
	constexpr uint64_t kPage = 4096;
	uint64_t start = reinterpret_cast<uint64_t>(ptr) & ~(kPage - 1);
	uint64_t end = reinterpret_cast<uint64_t>(ptr) + size;
	if (!size || end < start || end > UINT64_MAX - kPage)
		return false;
	end = (end + kPage - 1) & ~(kPage - 1);
	{
		std::lock_guard<std::mutex> lock(pinMutex_);
		for (size_t i = 0; i < pins_.size(); i++) {
			CachedPin &e = pins_[i];
			if (e.dead || e.pin.hostStart > start ||
			    e.pin.hostStart + e.pin.size < end || (e.readonly && !readonly))
				continue;
			if (pinStale(e.pin.handle)) {
				e.dead = true;
				if (!e.users)
					erasePin(i);
				break;
			}
			e.users++;
			e.lastUse = ++pinClock_;
			*out = e.pin;
			return true;
		}
	}
	uint32_t handle = 0;
	if (userptrBo(start, end - start, readonly, &handle))
		return false;
	uint64_t va = space_.allocate(end - start, kPage);
	if (!va || bind(handle, va, end - start, readonly)) {
		if (va)
			space_.release(va, end - start);
		closeBo(handle);
		return false;
	}
	*out = {start, va, end - start, handle};
	std::lock_guard<std::mutex> lock(pinMutex_);
	// The new pin supersedes cached ones that overlap its range.
	for (size_t i = pins_.size(); i-- > 0;) {
		CachedPin &e = pins_[i];
		if (e.pin.hostStart < end && start < e.pin.hostStart + e.pin.size) {
			e.dead = true;
			if (!e.users)
				erasePin(i);
		}
	}
	pins_.push_back({*out, readonly, 1, false, ++pinClock_});
	pinBytes_ += end - start;
	return true;
}

void Context::unpinHost(const HostPin &pin)
{
	std::lock_guard<std::mutex> lock(pinMutex_);
	for (size_t i = 0; i < pins_.size(); i++) {
		if (pins_[i].pin.handle != pin.handle)
			continue;
		if (--pins_[i].users == 0 && pins_[i].dead)
			erasePin(i);
		break;
	}
	trimPins(pinCap_);
}

npurtError_t Context::allocPinned(size_t size, PinnedBuffer *out, const char *api)
{
	uint64_t bytes = (size + 4095) & ~uint64_t(4095);
	drm_npu_bo_create bc{};
	bc.size = bytes;
	bc.kind = DRM_NPU_BO_HOST;
	int ret = node_.ioctl(DRM_IOCTL_NPU_BO_CREATE, &bc);
	if (ret)
		return setError(ret == -ENOMEM ? npurtErrorHostMemoryAllocation
		                               : errorFromErrno(ret),
		                osMessage(std::string(api) + ": pinning " + std::to_string(bytes) +
		                                  " bytes",
		                          ret));
	drm_npu_bo_info info{};
	info.handle = bc.handle;
	ret = node_.ioctl(DRM_IOCTL_NPU_BO_INFO, &info);
	void *p = ret ? nullptr : node_.mmap(bytes, info.mmap_offset);
	if (!p) {
		int e = ret ? -ret : errno;
		closeBo(bc.handle);
		return setError(npurtErrorHostMemoryAllocation,
		                osMessage(std::string(api) + ": mapping pinned memory", e));
	}
	ret = bind(bc.handle, reinterpret_cast<uint64_t>(p), bytes, false);
	if (ret) {
		node_.munmap(p, bytes);
		closeBo(bc.handle);
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": binding pinned memory", ret));
	}
	out->ptr = p;
	out->size = bytes;
	out->handle = bc.handle;
	return npurtSuccess;
}

void Context::freePinned(PinnedBuffer &buf)
{
	if (!buf.ptr)
		return;
	unbind(reinterpret_cast<uint64_t>(buf.ptr), buf.size);
	node_.munmap(buf.ptr, buf.size);
	closeBo(buf.handle);
	buf = PinnedBuffer{};
}

uint64_t Context::allocTimestampSlot()
{
	std::lock_guard<std::mutex> lock(streamMutex_);
	if (slots_.empty()) {
		// Slots of destroyed streams whose last jobs have ended.
		std::erase_if(retired_, [this](const Retired &r) {
			if (waitPoint(Point{r.tl, r.point}, 0) != 0)
				return false;
			slots_.push_back(r.addr);
			return true;
		});
	}
	if (slots_.empty()) {
		PinnedBuffer chunk;
		if (allocPinned(64 << 10, &chunk, "timestamps") != npurtSuccess) {
			npurtGetLastError();
			return 0;
		}
		uint64_t base = reinterpret_cast<uint64_t>(chunk.ptr);
		for (uint64_t off = chunk.size; off >= 16; off -= 16)
			slots_.push_back(base + off - 16);
		slotChunks_.push_back(chunk);
	}
	uint64_t slot = slots_.back();
	slots_.pop_back();
	reinterpret_cast<volatile uint64_t *>(slot)[0] = 0;
	reinterpret_cast<volatile uint64_t *>(slot)[1] = 0;
	return slot;
}

void Context::freeTimestampSlot(uint64_t addr)
{
	if (!addr)
		return;
	std::lock_guard<std::mutex> lock(streamMutex_);
	slots_.push_back(addr);
}

void Context::retireTimestampSlot(uint64_t addr, const Point &until)
{
	if (!until || waitPoint(until, 0) == 0) {
		freeTimestampSlot(addr);
		return;
	}
	std::lock_guard<std::mutex> lock(streamMutex_);
	retired_.push_back({addr, until.tl, until.value});
}

void Context::addStream(Stream *s)
{
	std::lock_guard<std::mutex> lock(streamMutex_);
	streams_.push_back(s);
}

void Context::removeStream(Stream *s)
{
	{
		std::unique_lock<std::shared_mutex> life(streamLife_);
		std::lock_guard<std::mutex> lock(streamMutex_);
		std::erase(streams_, s);
	}
	// Without streamLife_: a pinned stream's synchronize may look at the
	// other streams (forEachStream).
	std::unique_lock<std::mutex> lock(streamMutex_);
	unpinned_.wait(lock, [this, s] { return !streamPins_.count(s); });
}

void Context::reap(const std::function<void()> &f)
{
	{
		std::lock_guard<std::mutex> lock(reapMutex_);
		reaping_++;
	}
	auto done = [this] {
		// Notified under the lock: ~Context may go as soon as it is free.
		std::lock_guard<std::mutex> lock(reapMutex_);
		reaping_--;
		reaped_.notify_all();
	};
	try {
		std::thread([f, done] {
			f();
			done();
		}).detach();
	} catch (const std::system_error &) {
		// No thread to be had: the caller waits, as it did before.
		f();
		done();
	}
}

void Context::forEachStreamPinned(const std::function<void(Stream *)> &f)
{
	struct Pin {
		Context &c;
		Stream *s;
		~Pin()
		{
			{
				std::lock_guard<std::mutex> lock(c.streamMutex_);
				if (--c.streamPins_[s] == 0)
					c.streamPins_.erase(s);
			}
			c.unpinned_.notify_all();
		}
	};
	for (Stream *s : streams()) {
		{
			std::lock_guard<std::mutex> lock(streamMutex_);
			if (std::ranges::find(streams_, s) == streams_.end())
				continue;  // destroyed since the list was taken
			++streamPins_[s];
		}
		Pin pin{*this, s};
		f(s);
	}
}

std::vector<Stream *> Context::streams()
{
	std::lock_guard<std::mutex> lock(streamMutex_);
	return streams_;
}

void Context::streamEnded(Stream *s, const Point &last)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	for (auto &[id, m] : markers_) {
		if (m.stream != s)
			continue;
		m.stream = nullptr;
		m.tl = last.tl;
		m.point = last.value;
	}
}

uint64_t Context::mark(StreamId stream)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	// The stream's own lock is taken after streamMutex_ is released (a
	// stream holding its lock takes streamMutex_ for timestamp slots). A
	// stream being destroyed lives on until its destructor's
	// streamEnded(), which waits for markMutex_. A stream already gone
	// has no work of its own left to order after: the marker is done.
	const std::vector<Stream *> all = streams();
	auto it = std::ranges::find_if(all, [stream](Stream *s) { return s->serial() == stream; });
	Marker m;
	m.serial = stream;
	if (it != all.end()) {
		m.order = (*it)->enqueuedTasks();
		if (uint64_t tasks = (*it)->pendingMark()) {
			m.stream = *it;
			m.tasks = tasks;
		}
	}
	markers_[++nextMarker_] = std::move(m);
	return nextMarker_;
}

bool Context::orderedAfter(StreamId stream, uint64_t marker)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	const Marker &m = markers_.at(marker);
	if (!m.serial)
		return false;
	for (Stream *s : streams())
		if (s->serial() == stream)
			return s->orderedAfter(m.serial, m.order);
	return false;
}

bool Context::waitQueuedWork(int64_t deadlineNs)
{
	std::vector<uint64_t> markers;
	markPending(&markers);
	bool done = true;
	for (uint64_t m : markers) {
		done = wait(m, deadlineNs) && done;
		release(m);
	}
	return done;
}

void Context::markPending(std::vector<uint64_t> *out)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	// As in mark(): the streams' locks after streamMutex_ is released.
	for (Stream *s : streams()) {
		uint64_t tasks = s->pendingMark();
		if (!tasks)
			continue;
		markers_[++nextMarker_] = {s, tasks, 0, 0, nullptr, 0, nullptr};
		out->push_back(nextMarker_);
	}
	markAccessors(out);
}

bool Context::done(uint64_t marker)
{
	return markerDone(marker, nullptr);
}

// A pass over parked blocks: each busy stream asked once, and without
// waiting for its locks.
bool Context::doneInPass(uint64_t marker, DoneMemo &memo)
{
	return markerDone(marker, &memo);
}

bool Context::tasksDone(Stream *s, uint64_t tasks, DoneMemo *memo)
{
	if (!memo)
		return s->tasksDone(tasks);
	if (memo->notDone(s, tasks))
		return false;
	const bool finished = s->tasksDone(tasks, false);
	if (!finished)
		memo->noteNotDone(s, tasks);
	return finished;
}

bool Context::markerDone(uint64_t marker, DoneMemo *memo)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	const Marker &m = markers_.at(marker);
	if (m.life) {
		std::lock_guard<std::mutex> life(m.life->mutex);
		if (m.life->stream)
			return tasksDone(m.life->stream, m.tasks, memo);
		return !m.life->last || waitPoint(m.life->last, 0, false) == 0;
	}
	if (!m.stream)
		return !m.tl || waitPoint(Point{m.tl, m.point}, 0, false) == 0;
	return tasksDone(m.stream, m.tasks, memo);
}

void Context::release(uint64_t marker)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	markers_.erase(marker);
}

bool Context::wait(uint64_t marker, int64_t deadlineNs)
{
	std::lock_guard<std::mutex> lock(markMutex_);
	const Marker &m = markers_.at(marker);
	if (m.life) {
		std::lock_guard<std::mutex> life(m.life->mutex);
		if (m.life->stream)
			return m.life->stream->waitTasks(m.tasks, deadlineNs);
		return !m.life->last || waitPoint(m.life->last, deadlineNs, false) == 0;
	}
	if (m.stream)
		return m.stream->waitTasks(m.tasks, deadlineNs);
	return !m.tl || waitPoint(Point{m.tl, m.point}, deadlineNs, false) == 0;
}

void Context::addQueue(const std::shared_ptr<Timeline> &tl)
{
	std::lock_guard<std::mutex> lock(queueMutex_);
	std::erase_if(queues_, [](const std::weak_ptr<Timeline> &w) { return w.expired(); });
	queues_.push_back(tl);
}

std::shared_ptr<Timeline> Context::shareQueue(uint32_t engineClass, uint32_t priority)
{
	std::lock_guard<std::mutex> lock(queueMutex_);
	std::shared_ptr<Timeline> best;
	for (const auto &w : queues_) {
		auto tl = w.lock();
		if (!tl || tl->closed || tl->engineClass != engineClass)
			continue;
		const bool better = !best ||
		                    (tl->priority == priority) > (best->priority == priority) ||
		                    ((tl->priority == priority) == (best->priority == priority) &&
		                     tl.use_count() < best.use_count());
		if (better)
			best = std::move(tl);
	}
	if (best)
		best->sharers++;
	return best;
}

bool Context::closeQueue(Timeline &tl)
{
	std::lock_guard<std::mutex> lock(queueMutex_);
	tl.closed = true;
	return tl.sharers == 0;
}

Stream *Context::defaultStream(npurtError_t *err)
{
	std::lock_guard<std::mutex> lock(defaultMutex_);
	if (!default_)
		default_ = createStreamForContext(*this, 0, 0, true);
	*err = npurtSuccess;
	return default_;
}

}  // namespace npurt

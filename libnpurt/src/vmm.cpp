// Virtual memory management; see vmm.h.
#include "vmm.h"

#include <fcntl.h>

#include <cerrno>
#include <ctime>
#include <vector>

#include "allocator.h"
#include "context.h"
#include "error.h"
#include "npu_drm.h"
#include "runtime.h"

namespace npurt {

namespace {

int64_t nowNs()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string range(uint64_t addr, uint64_t size)
{
	return "[" + hexAddr(addr) + ", " + hexAddr(addr + size) + ")";
}

std::string handleName(npurtMemGenericAllocationHandle_t h)
{
	return "allocation handle " + std::to_string(h);
}

}  // namespace

VirtualMemory &VirtualMemory::instance()
{
	// Leaked on purpose: contexts destroyed by static destructors still
	// call forgetContext.
	static auto *vm = new VirtualMemory;
	return *vm;
}

npurtError_t VirtualMemory::create(Context &ctx, uint64_t size, bool shareable,
                                   npurtMemGenericAllocationHandle_t *out)
{
	const char *api = "npurtMemCreate";
	Device &dev = Runtime::instance().device(ctx.ordinal());
	auto oom = [&](const std::string &why) {
		uint64_t freeBytes = 0, totalBytes = 0;
		if (ctx.queryMemory(&freeBytes, &totalBytes) != npurtSuccess)
			npurtGetLastError();
		return setError(npurtErrorMemoryAllocation,
		                std::string(api) + ": out of device memory: tried to create " +
		                        formatBytes(size) + why + "; the device has " +
		                        formatBytes(freeBytes) + " free of " +
		                        formatBytes(totalBytes) + ctx.limitDetail(size));
	};
	if (!dev.charge(size))
		return oom(" past this process's limit");
	drm_npu_bo_create c{};
	c.size = size;
	c.kind = DRM_NPU_BO_DEVICE;
	int ret = ctx.node().ioctl(DRM_IOCTL_NPU_BO_CREATE, &c);
	if (ret == -ENOMEM) {
		// Memory the caching pool holds unused is this process's own:
		// given back, as the pool itself does before it fails.
		ctx.pool().emptyCache();
		ret = ctx.node().ioctl(DRM_IOCTL_NPU_BO_CREATE, &c);
	}
	if (ret) {
		dev.uncharge(size);
		if (ret == -ENOMEM)
			return oom("");
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": creating " + formatBytes(size) +
		                                  " of device memory on " + ctx.node().path(),
		                          ret));
	}
	std::lock_guard<std::mutex> lock(mutex_);
	Allocation a;
	a.ctx = &ctx;
	a.bo = c.handle;
	a.size = size;
	a.device = ctx.ordinal();
	a.shareable = shareable;
	*out = ++nextHandle_;
	allocs_.emplace(*out, a);
	return npurtSuccess;
}

npurtError_t VirtualMemory::exportFd(npurtMemGenericAllocationHandle_t handle, int *fd)
{
	const char *api = "npurtMemExportToShareableHandle";
	Context *ctx = nullptr;
	drm_prime_handle p{};
	{
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = allocs_.find(handle);
		if (it == allocs_.end() || it->second.handleRefs == 0)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + handleName(handle) +
			                        " is not a live allocation");
		if (!it->second.shareable)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + handleName(handle) +
			                        " was not created with requestedHandleTypes "
			                        "npurtMemHandleTypePosixFileDescriptor");
		ctx = it->second.ctx;
		p.handle = it->second.bo;
	}
	// The handle stays live while the caller holds it (a release racing
	// with the export is the caller's own bug, as CUDA's).
	p.flags = DRM_CLOEXEC | DRM_RDWR;
	if (int ret = ctx->node().ioctl(DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": exporting", ret));
	*fd = p.fd;
	return npurtSuccess;
}

npurtError_t VirtualMemory::importFd(Context &ctx, int fd, npurtMemGenericAllocationHandle_t *out)
{
	const char *api = "npurtMemImportFromShareableHandle";
	drm_prime_handle p{};
	p.fd = fd;
	if (int ret = ctx.node().ioctl(DRM_IOCTL_PRIME_FD_TO_HANDLE, &p))
		return setError(ret == -EBADF || ret == -EINVAL || ret == -EOPNOTSUPP
		                        ? npurtErrorInvalidValue
		                        : errorFromErrno(ret),
		                osMessage(std::string(api) + ": fd " + std::to_string(fd) +
		                                  " is not shareable device memory",
		                          ret));
	drm_npu_bo_info info{};
	info.handle = p.handle;
	int ret = ctx.node().ioctl(DRM_IOCTL_NPU_BO_INFO, &info);
	const bool pools = ctx.ownsBo(p.handle);  // before mutex_ (the lock order)
	std::lock_guard<std::mutex> lock(mutex_);
	// PRIME hands back the handle this file already has for the buffer:
	// an allocation of this process (one more reference), or memory the
	// caching pool or an IPC import owns (which a release would close).
	for (auto &[h, a] : allocs_)
		if (a.ctx == &ctx && a.bo == p.handle && a.handleRefs > 0) {
			a.handleRefs++;
			*out = h;
			return npurtSuccess;
		}
	if (pools)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": fd " + std::to_string(fd) +
		                        " is memory of this process's pool (use its pointer)");
	if (ret || !info.size || info.size % kGranularity) {
		ctx.closeBo(p.handle);
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": fd " + std::to_string(fd) +
		                        " is not memory made by npurtMemCreate");
	}
	Allocation a;
	a.ctx = &ctx;
	a.bo = p.handle;
	a.size = info.size;
	a.device = ctx.ordinal();
	a.shareable = true;
	a.imported = true;
	*out = ++nextHandle_;
	allocs_.emplace(*out, a);
	return npurtSuccess;
}

void VirtualMemory::unref(std::map<npurtMemGenericAllocationHandle_t, Allocation>::iterator it)
{
	Allocation &a = it->second;
	if (a.handleRefs > 0 || a.mappings > 0)
		return;
	a.ctx->closeBo(a.bo);
	if (!a.imported)
		Runtime::instance().device(a.device).uncharge(a.size);
	allocs_.erase(it);
}

npurtError_t VirtualMemory::release(npurtMemGenericAllocationHandle_t handle)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = allocs_.find(handle);
	if (it == allocs_.end() || it->second.handleRefs == 0)
		return setError(npurtErrorInvalidHandle,
		                "npurtMemRelease: " + handleName(handle) +
		                        " is not a live allocation (never created, released "
		                        "already, or its context was destroyed)");
	it->second.handleRefs--;
	unref(it);
	return npurtSuccess;
}

npurtError_t VirtualMemory::properties(npurtMemGenericAllocationHandle_t handle,
                                       npurtMemAllocationProp *prop)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = allocs_.find(handle);
	if (it == allocs_.end() || it->second.handleRefs == 0)
		return setError(npurtErrorInvalidHandle,
		                "npurtMemGetAllocationPropertiesFromHandle: " + handleName(handle) +
		                        " is not a live allocation");
	*prop = npurtMemAllocationProp{};
	prop->type = npurtMemAllocationTypePinned;
	prop->requestedHandleTypes = it->second.shareable ? npurtMemHandleTypePosixFileDescriptor
	                                                  : npurtMemHandleTypeNone;
	prop->location.type = npurtMemLocationTypeDevice;
	prop->location.id = it->second.device;
	return npurtSuccess;
}

npurtError_t VirtualMemory::retain(uint64_t addr, npurtMemGenericAllocationHandle_t *out)
{
	std::lock_guard<std::mutex> lock(mutex_);
	auto r = reservations_.upper_bound(addr);
	if (r != reservations_.begin()) {
		--r;
		auto &maps = r->second.maps;
		auto m = maps.upper_bound(addr);
		if (m != maps.begin() && addr - std::prev(m)->first < std::prev(m)->second.size) {
			auto it = allocs_.find(std::prev(m)->second.alloc);
			it->second.handleRefs++;
			*out = it->first;
			return npurtSuccess;
		}
	}
	return setError(npurtErrorInvalidValue, "npurtMemRetainAllocationHandle: " + hexAddr(addr) +
	                                                " is not in a mapping");
}

npurtError_t VirtualMemory::reserve(Context &ctx, AddressSpace &space, uint64_t size,
                                    uint64_t align, uint64_t hint, uint64_t *out)
{
	uint64_t addr = hint && hint % align == 0 && space.allocateAt(hint, size) ? hint : 0;
	if (!addr)
		addr = space.allocate(size, align);
	if (!addr)
		return setError(npurtErrorMemoryAllocation,
		                "npurtMemAddressReserve: no free range of " + formatBytes(size) +
		                        " (aligned to " + formatBytes(align) + ") in NPU " +
		                        std::to_string(ctx.ordinal()) + "'s device address space");
	std::lock_guard<std::mutex> lock(mutex_);
	Reservation r;
	r.size = size;
	r.device = ctx.ordinal();
	r.space = &space;
	reservations_.emplace(addr, std::move(r));
	*out = addr;
	return npurtSuccess;
}

npurtError_t VirtualMemory::freeReservation(uint64_t addr, uint64_t size)
{
	std::lock_guard<std::mutex> op(opMutex_);
	std::lock_guard<std::mutex> lock(mutex_);
	auto it = reservations_.find(addr);
	if (it == reservations_.end() || it->second.size != size)
		return setError(npurtErrorInvalidValue,
		                "npurtMemAddressFree: " + range(addr, size) +
		                        " is not a reservation (npurtMemAddressReserve's whole "
		                        "range)");
	if (!it->second.maps.empty())
		return setError(npurtErrorInvalidValue,
		                "npurtMemAddressFree: " + range(addr, size) + " still has " +
		                        std::to_string(it->second.maps.size()) +
		                        " mapping(s): npurtMemUnmap them first");
	it->second.space->release(addr, size);
	reservations_.erase(it);
	return npurtSuccess;
}

VirtualMemory::Reservation *VirtualMemory::reservationOf(uint64_t addr, uint64_t size,
                                                         const char *api)
{
	auto it = reservations_.upper_bound(addr);
	if (it != reservations_.begin()) {
		--it;
		if (addr - it->first < it->second.size &&
		    size <= it->second.size - (addr - it->first))
			return &it->second;
	}
	setError(npurtErrorInvalidValue,
	         std::string(api) + ": " + range(addr, size) +
	                 " is not inside one reservation (npurtMemAddressReserve)");
	return nullptr;
}

bool VirtualMemory::wholeMappings(Reservation &r, uint64_t addr, uint64_t size, const char *api)
{
	uint64_t at = addr;
	for (auto m = r.maps.find(addr); m != r.maps.end() && m->first == at && at < addr + size;
	     ++m)
		at += m->second.size;
	if (at == addr + size)
		return true;
	setError(npurtErrorInvalidValue, std::string(api) + ": " + range(addr, size) +
	                                         " is not whole mappings (npurtMemMap's ranges, "
	                                         "adjacent, with nothing unmapped between)");
	return false;
}

npurtError_t VirtualMemory::map(uint64_t addr, uint64_t size, uint64_t offset,
                                npurtMemGenericAllocationHandle_t handle)
{
	const char *api = "npurtMemMap";
	std::lock_guard<std::mutex> op(opMutex_);
	std::lock_guard<std::mutex> lock(mutex_);
	auto a = allocs_.find(handle);
	if (a == allocs_.end() || a->second.handleRefs == 0)
		return setError(npurtErrorInvalidHandle, std::string(api) + ": " +
		                                                 handleName(handle) +
		                                                 " is not a live allocation");
	if (offset > a->second.size || size > a->second.size - offset)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": [" + std::to_string(offset) + ", +" +
		                        std::to_string(size) + ") is outside the allocation of " +
		                        formatBytes(a->second.size));
	Reservation *r = reservationOf(addr, size, api);
	if (!r)
		return npurtErrorInvalidValue;
	if (r->device != a->second.device)
		return setError(npurtErrorNotSupported,
		                std::string(api) + ": memory of NPU " +
		                        std::to_string(a->second.device) +
		                        " in a reservation of NPU " + std::to_string(r->device) +
		                        " (mapping another device's memory is not supported)");
	auto next = r->maps.lower_bound(addr);
	bool overlaps = next != r->maps.end() && next->first < addr + size;
	if (next != r->maps.begin()) {
		auto prev = std::prev(next);
		overlaps = overlaps || prev->first + prev->second.size > addr;
	}
	if (overlaps)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + range(addr, size) +
		                        " overlaps a mapping already there");
	Mapping m;
	m.size = size;
	m.offset = offset;
	m.alloc = handle;
	r->maps.emplace(addr, m);
	a->second.mappings++;
	anyMapping_.store(true, std::memory_order_release);
	return npurtSuccess;
}

npurtError_t VirtualMemory::rebind(uint64_t addr, Mapping &m, int access, const char *api)
{
	Allocation &a = allocs_.at(m.alloc);
	if (m.access != npurtMemAccessFlagsProtNone) {
		if (int ret = a.ctx->unbind(addr, m.size))
			return setError(
			        errorFromErrno(ret),
			        osMessage(std::string(api) + ": unmapping " + range(addr, m.size),
			                  ret));
		m.access = npurtMemAccessFlagsProtNone;
		memoryRetired();
	}
	if (access == npurtMemAccessFlagsProtNone)
		return npurtSuccess;
	if (int ret = a.ctx->bind(a.bo, addr, m.size, access == npurtMemAccessFlagsProtRead,
	                          m.offset)) {
		if (ret == -ENOSPC)
			return setError(npurtErrorMemoryAllocation,
			                std::string(api) + ": the context's address space holds " +
			                        std::to_string(DRM_NPU_MAX_MAPPINGS) +
			                        " mappings already");
		return setError(
		        errorFromErrno(ret),
		        osMessage(std::string(api) + ": mapping " + range(addr, m.size), ret));
	}
	m.access = access;
	return npurtSuccess;
}

npurtError_t VirtualMemory::quiesce(uint64_t addr, uint64_t size, int access, const char *api)
{
	std::vector<Context *> users;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		Reservation *r = reservationOf(addr, size, api);
		if (!r)
			return npurtErrorInvalidValue;
		if (!wholeMappings(*r, addr, size, api))
			return npurtErrorInvalidValue;
		for (auto m = r->maps.find(addr); m != r->maps.end() && m->first < addr + size; ++m)
			if (m->second.access != npurtMemAccessFlagsProtNone &&
			    m->second.access != access)
				users.push_back(allocs_.at(m->second.alloc).ctx);
	}
	const int64_t deadline = nowNs() + Context::kQueuedWorkLimitNs;
	for (Context *c : users)
		c->waitQueuedWork(deadline);
	return npurtSuccess;
}

npurtError_t VirtualMemory::unmap(uint64_t addr, uint64_t size)
{
	const char *api = "npurtMemUnmap";
	std::lock_guard<std::mutex> op(opMutex_);
	// Work already queued may use the memory: the unmap waits for it, as
	// CUDA's does. The mappings stay while it runs.
	if (npurtError_t err = quiesce(addr, size, npurtMemAccessFlagsProtNone, api))
		return err;
	std::lock_guard<std::mutex> lock(mutex_);
	Reservation *r = reservationOf(addr, size, api);
	for (auto m = r->maps.find(addr); m != r->maps.end() && m->first < addr + size;) {
		if (npurtError_t err =
		            rebind(m->first, m->second, npurtMemAccessFlagsProtNone, api))
			return err;
		auto a = allocs_.find(m->second.alloc);
		a->second.mappings--;
		m = r->maps.erase(m);
		unref(a);
	}
	memoryRetired();
	return npurtSuccess;
}

npurtError_t VirtualMemory::setAccess(uint64_t addr, uint64_t size, const int *flagsOfDevice,
                                      int devices)
{
	const char *api = "npurtMemSetAccess";
	std::lock_guard<std::mutex> op(opMutex_);
	int want = -1;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		Reservation *r = reservationOf(addr, size, api);
		if (!r)
			return npurtErrorInvalidValue;
		if (!wholeMappings(*r, addr, size, api))
			return npurtErrorInvalidValue;
		for (int d = 0; d < devices; d++) {
			if (flagsOfDevice[d] < 0)
				continue;
			if (d == r->device) {
				want = flagsOfDevice[d];
			} else if (flagsOfDevice[d] != npurtMemAccessFlagsProtNone) {
				return setError(npurtErrorNotSupported,
				                std::string(api) + ": access for NPU " +
				                        std::to_string(d) + " to memory of NPU " +
				                        std::to_string(r->device) +
				                        " (peer access to mapped memory is not "
				                        "supported)");
			}
		}
		if (want < 0)
			return npurtSuccess;  // only other devices, none granted
	}
	// Narrowing access with work queued that may use it: wait first.
	if (npurtError_t err = quiesce(addr, size, want, api))
		return err;
	std::lock_guard<std::mutex> lock(mutex_);
	Reservation *r = reservationOf(addr, size, api);
	for (auto m = r->maps.find(addr); m != r->maps.end() && m->first < addr + size; ++m)
		if (m->second.access != want)
			if (npurtError_t err = rebind(m->first, m->second, want, api))
				return err;
	memoryRetired();
	return npurtSuccess;
}

npurtError_t VirtualMemory::getAccess(uint64_t addr, int device, unsigned long long *flags)
{
	std::lock_guard<std::mutex> lock(mutex_);
	Reservation *r = reservationOf(addr, 1, "npurtMemGetAccess");
	if (!r)
		return npurtErrorInvalidValue;
	auto m = r->maps.upper_bound(addr);
	if (m == r->maps.begin() || addr - std::prev(m)->first >= std::prev(m)->second.size)
		return setError(npurtErrorInvalidValue,
		                "npurtMemGetAccess: " + hexAddr(addr) + " is not in a mapping");
	--m;
	*flags = device == r->device ? static_cast<unsigned long long>(m->second.access) : 0ull;
	return npurtSuccess;
}

bool VirtualMemory::findRange(const Context &ctx, uint64_t addr, uint64_t *base, size_t *size)
{
	if (!anyMapping_.load(std::memory_order_acquire))
		return false;
	std::lock_guard<std::mutex> lock(mutex_);
	auto r = reservations_.upper_bound(addr);
	if (r == reservations_.begin())
		return false;
	--r;
	auto &maps = r->second.maps;
	auto m = maps.upper_bound(addr);
	if (m == maps.begin())
		return false;
	--m;
	auto usable = [&](const std::pair<const uint64_t, Mapping> &e) {
		return e.second.access != npurtMemAccessFlagsProtNone &&
		       allocs_.at(e.second.alloc).ctx == &ctx;
	};
	if (addr - m->first >= m->second.size || !usable(*m))
		return false;
	// The run of adjacent usable mappings around it is one buffer.
	auto first = m;
	while (first != maps.begin()) {
		auto p = std::prev(first);
		if (p->first + p->second.size != first->first || !usable(*p))
			break;
		first = p;
	}
	uint64_t end = m->first + m->second.size;
	for (auto n = std::next(m); n != maps.end() && n->first == end && usable(*n); ++n)
		end += n->second.size;
	*base = first->first;
	*size = end - first->first;
	return true;
}

void VirtualMemory::forgetContext(Context &ctx)
{
	std::lock_guard<std::mutex> op(opMutex_);
	std::lock_guard<std::mutex> lock(mutex_);
	for (auto &[addr, r] : reservations_)
		for (auto m = r.maps.begin(); m != r.maps.end();) {
			if (allocs_.at(m->second.alloc).ctx != &ctx) {
				++m;
				continue;
			}
			if (m->second.access != npurtMemAccessFlagsProtNone)
				ctx.unbind(m->first, m->second.size);
			m = r.maps.erase(m);
		}
	for (auto it = allocs_.begin(); it != allocs_.end();) {
		if (it->second.ctx != &ctx) {
			++it;
			continue;
		}
		ctx.closeBo(it->second.bo);
		Runtime::instance().device(it->second.device).uncharge(it->second.size);
		it = allocs_.erase(it);
	}
	memoryRetired();
}

}  // namespace npurt

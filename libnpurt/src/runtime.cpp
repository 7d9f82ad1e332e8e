#include "runtime.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "alloc_config.h"
#include "error.h"
#include "npu_drm.h"
#include "stream.h"

namespace npurt {
namespace {

int encodeVersion(uint32_t api)
{
	return static_cast<int>((api >> 16) * 1000 + (api & 0xffff) * 10);
}

struct Found {
	uint32_t index;
	std::unique_ptr<Device> device;
};

// Parses the visible-devices variable `name` ("0,2"): the driver indices to
// expose, in that order. Returns false with a message on a malformed list.
bool parseVisible(const char *name, const char *env, std::vector<uint32_t> &out, std::string &msg)
{
	std::stringstream ss(env);
	std::string tok;
	std::set<uint32_t> seen;
	while (std::getline(ss, tok, ',')) {
		char *end = nullptr;
		errno = 0;
		unsigned long v = std::strtoul(tok.c_str(), &end, 10);
		if (tok.empty() || *end || errno || v > 0xffff || tok[0] == '-') {
			msg = std::string(name) + "='" + env + "': '" + tok +
			      "' is not a device index";
			return false;
		}
		if (!seen.insert(static_cast<uint32_t>(v)).second) {
			msg = std::string(name) + "='" + env + "' lists device " + tok + " twice";
			return false;
		}
		out.push_back(static_cast<uint32_t>(v));
	}
	return true;
}

}  // namespace

Runtime &Runtime::instance()
{
	// Leaked on purpose: threads and atexit handlers may still call in
	// while static destructors run.
	static Runtime *rt = new Runtime();
	return *rt;
}

int &threadDevice()
{
	thread_local int device = 0;
	return device;
}

namespace {

// The context a thread made current with npurtCtxSetCurrent, if any.
Context *&threadContext()
{
	thread_local Context *ctx = nullptr;
	return ctx;
}

}  // namespace

npurtError_t Runtime::start(bool record)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (!started_) {
		if (!os_)
			os_ = os::makeDrmInterface();
		startStatus_ = discover();
		if (startStatus_ == npurtSuccess)
			startStatus_ = reserveAddressSpace();
		if (startStatus_ == npurtSuccess)
			startStatus_ = readAllocatorConfig();
		started_ = true;
	}
	return record ? setError(startStatus_, startMessage_) : startStatus_;
}

npurtError_t Runtime::readAllocatorConfig()
{
	const char *env = std::getenv("NPURT_ALLOC_CONF");
	if (!env)
		return npurtSuccess;
	AllocatorConfig cfg;
	std::string why;
	if (!parseAllocatorConfig(env, &cfg, &why)) {
		startMessage_ = "NPURT_ALLOC_CONF: " + why;
		return npurtErrorInvalidValue;
	}
	setAllocatorConfig(cfg);
	return npurtSuccess;
}

npurtError_t Runtime::discover()
{
	os::Discovery found = os_->openDevices();
	std::vector<Found> devices;
	std::string mismatch;

	for (auto &node : found.devices) {
		drm_npu_device_info info{};
		drm_npu_query q{};
		q.query = DRM_NPU_QUERY_DEVICE_INFO;
		q.data_ptr = reinterpret_cast<uintptr_t>(&info);
		q.size = sizeof(info);
		int ret = node->ioctl(DRM_IOCTL_NPU_QUERY, &q);
		if (ret) {
			found.failures.push_back(osMessage("query " + node->path(), ret));
			continue;
		}
		if ((info.api_version >> 16) != DRM_NPU_API_VERSION_MAJOR) {
			mismatch = node->path() + " speaks uAPI " +
			           std::to_string(info.api_version >> 16) + "." +
			           std::to_string(info.api_version & 0xffff) +
			           ", this runtime needs " +
			           std::to_string(DRM_NPU_API_VERSION_MAJOR) + ".x";
			continue;
		}
		npurtDeviceProp p{};
		std::snprintf(p.name, sizeof(p.name), "%.*s", static_cast<int>(sizeof(info.name)),
		              info.name);
		std::snprintf(p.devicePath, sizeof(p.devicePath), "%s", node->path().c_str());
		std::snprintf(p.debugfsPath, sizeof(p.debugfsPath), "%s",
		              node->debugfsPath().c_str());
		p.deviceIndex = static_cast<int>(info.device_index);
		p.engineCount = static_cast<int>(info.num_engines);
		p.copyEngineCount = static_cast<int>(info.num_copy_engines);
		p.computeEngineCount = static_cast<int>(info.num_compute_engines);
		p.totalGlobalMem = info.mem_capacity;
		p.clockRateHz = info.clock_hz;
		p.capabilities = info.capabilities;
		p.vaStart = info.va_start;
		p.vaEnd = info.va_end;
		p.driverApiVersion = encodeVersion(info.api_version);
		p.emulated = (info.capabilities & DRM_NPU_CAP_EMULATED) ? 1 : 0;
		p.major = static_cast<int>(info.api_version >> 16);
		p.minor = static_cast<int>(info.api_version & 0xffff);
		p.multiProcessorCount = p.computeEngineCount;
		p.asyncEngineCount = p.copyEngineCount;
		p.deviceOverlap = p.copyEngineCount > 0 ? 1 : 0;
		p.concurrentKernels = p.computeEngineCount > 1 ? 1 : 0;
		p.clockRate = static_cast<int>(std::min<uint64_t>(info.clock_hz / 1000, INT32_MAX));
		p.unifiedAddressing = 1;
		p.canMapHostMemory = 1;
		p.pciDeviceID = static_cast<int>(info.device_index);
		p.computeMode = npurtComputeModeDefault;
		p.kernelExecTimeoutEnabled = 1;
		p.streamPrioritiesSupported = 1;
		p.hostRegisterSupported = 1;
		p.memoryPoolsSupported = 1;  // npurtMallocAsync, npurtMemPool*
		p.memoryPoolSupportedHandleTypes = npurtMemHandleTypePosixFileDescriptor;
		// Managed memory is host memory the NPU uses in place, coherently.
		p.managedMemory = 1;
		p.concurrentManagedAccess = 1;
		devices.push_back(
		        {info.device_index, std::make_unique<Device>(std::move(node), p)});
	}
	std::sort(devices.begin(), devices.end(),
	          [](const Found &a, const Found &b) { return a.index < b.index; });

	// CANN's name too, for programs and launchers written for Ascend NPUs
	// (ours wins). Set but empty hides every NPU, as CUDA_VISIBLE_DEVICES.
	const char *visibleName = "NPURT_VISIBLE_DEVICES";
	const char *env = std::getenv(visibleName);
	if (!env) {
		visibleName = "ASCEND_RT_VISIBLE_DEVICES";
		env = std::getenv(visibleName);
	}
	if (env && !*env) {
		startMessage_ = std::string(visibleName) + " is set but empty: no NPU is visible";
		return npurtErrorNoDevice;
	}
	if (env) {
		std::vector<uint32_t> visible;
		if (!parseVisible(visibleName, env, visible, startMessage_))
			return npurtErrorInvalidValue;
		std::vector<Found> kept;
		for (uint32_t idx : visible) {
			auto it =
			        std::find_if(devices.begin(), devices.end(), [idx](const Found &f) {
				        return f.index == idx && f.device;
			        });
			if (it == devices.end()) {
				startMessage_ = std::string(visibleName) + " names device " +
				                std::to_string(idx) + ", which does not exist";
				return npurtErrorInvalidDevice;
			}
			kept.push_back(std::move(*it));
		}
		devices = std::move(kept);
	}

	for (auto &f : devices) {
		// The first utilisation window starts here; a driver that
		// cannot be read now is asked again at the first call.
		EngineSample baseline;
		if (!readEngineSample(f.device->node(), &baseline))
			f.device->swapSample(baseline);
		devices_.push_back(std::move(f.device));
	}
	if (!devices_.empty())
		return npurtSuccess;

	if (!mismatch.empty()) {
		startMessage_ = mismatch;
		return npurtErrorInsufficientDriver;
	}
	startMessage_ = "no NPU found: no /dev/accel/accel* or /dev/dri/renderD* node belongs to "
	                "the npu driver "
	                "(is npu.ko loaded?)";
	for (const auto &f : found.failures)
		startMessage_ += "; " + f;
	if (found.firstError == EACCES || found.firstError == EPERM)
		startMessage_ +=
		        " (add the user to the group that owns the node, usually 'render')";
	return npurtErrorNoDevice;
}

npurtError_t Runtime::checkOrdinal(int ordinal, const char *api) const
{
	if (ordinal >= 0 && ordinal < deviceCount())
		return npurtSuccess;
	return setError(npurtErrorInvalidDevice,
	                std::string(api) + ": device " + std::to_string(ordinal) + " requested, " +
	                        std::to_string(deviceCount()) + " NPU(s) present (valid: 0.." +
	                        std::to_string(deviceCount() - 1) + ")");
}

npurtError_t Runtime::startAndCheck(int ordinal, const char *api)
{
	if (npurtError_t err = start())
		return err;
	return checkOrdinal(ordinal, api);
}

npurtError_t Runtime::checkPair(int device, int peer, const char *api)
{
	if (npurtError_t err = start())
		return err;
	if (npurtError_t err = checkOrdinal(device, api))
		return err;
	return checkOrdinal(peer, api);
}

void Runtime::resetForTesting(std::unique_ptr<os::Interface> os)
{
	Runtime &rt = instance();
	std::lock_guard<std::mutex> lock(rt.mutex_);
	{
		std::lock_guard<std::mutex> clock(rt.ctxMutex_);
		for (const npurtContext_st *c : rt.contexts_)
			delete static_cast<const Context *>(c);
		rt.contexts_.clear();
		rt.primaries_.clear();
		rt.hostRanges_.clear();
	}
	threadContext() = nullptr;
	rt.spaces_.clear();
	if (rt.window_)
		munmap(rt.window_, rt.windowSize_);
	rt.window_ = nullptr;
	rt.devices_.clear();
	rt.started_ = false;
	rt.startStatus_ = npurtSuccess;
	rt.startMessage_.clear();
	rt.os_ = std::move(os);
}

// Device pointers live in a window of host address space reserved with no
// access, one slice per device, so they are unique in the process and
// never collide with host memory the device sees at its host address.
npurtError_t Runtime::reserveAddressSpace()
{
	constexpr uint64_t kGiB = 1ull << 30;
	std::vector<uint64_t> sizes;
	uint64_t total = 0;
	for (auto &d : devices_) {
		// Four times the memory: room for fragmentation and IPC imports.
		uint64_t s = (d->prop().totalGlobalMem * 4 + kGiB - 1) & ~(kGiB - 1);
		sizes.push_back(s);
		total += s;
	}
	void *w = mmap(nullptr, total + kGiB, PROT_NONE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (w == MAP_FAILED) {
		startMessage_ = osMessage("reserving " + std::to_string(total >> 30) +
		                                  " GiB of address space for device memory",
		                          errno);
		return npurtErrorInitializationError;
	}
	window_ = w;
	windowSize_ = total + kGiB;
	// Slices start on a GiB boundary inside the window.
	uint64_t base = (reinterpret_cast<uint64_t>(w) + kGiB - 1) & ~(kGiB - 1);
	for (size_t i = 0; i < devices_.size(); i++) {
		const auto &p = devices_[i]->prop();
		if (base < p.vaStart || base + sizes[i] > p.vaEnd) {
			startMessage_ = "the reserved device address window is outside " +
			                std::string(p.devicePath) + "'s device address range";
			return npurtErrorInitializationError;
		}
		spaces_.push_back(std::make_unique<AddressSpace>(base, sizes[i]));
		base += sizes[i];
	}
	primaries_.assign(devices_.size(), nullptr);
	return npurtSuccess;
}

int Runtime::deviceOfAddress(uint64_t addr) const
{
	for (size_t i = 0; i < spaces_.size(); i++)
		if (spaces_[i]->contains(addr))
			return static_cast<int>(i);
	return -1;
}

npurtError_t Runtime::createContext(int ordinal, Context **out, const char *api)
{
	int err = 0;
	Device &dev = device(ordinal);
	std::unique_ptr<os::Device> node = dev.node().reopen(&err);
	if (!node)
		return setError(errorFromErrno(err),
		                std::string(api) + ": " +
		                        osMessage("opening " + dev.node().path(), err));
	os::Device &file = *node;  // before the move below: argument order is unspecified
	auto *ctx = new Context(ordinal, file, std::move(node), *spaces_[ordinal]);
	std::lock_guard<std::mutex> lock(ctxMutex_);
	contexts_.insert(ctx);
	*out = ctx;
	return npurtSuccess;
}

npurtError_t Runtime::currentContext(Context **out, const char *api)
{
	if (npurtError_t err = start())
		return err;
	Context *&tls = threadContext();
	std::lock_guard<std::mutex> lock(ctxMutex_);
	if (tls) {
		if (contexts_.count(tls)) {
			*out = tls;
			return npurtSuccess;
		}
		// Destroyed by another thread: fall back to the primary.
		tls = nullptr;
	}
	int ordinal = threadDevice();
	if (ordinal < 0 || ordinal >= deviceCount())
		return setError(npurtErrorInvalidDevice,
		                std::string(api) + ": the current device " +
		                        std::to_string(ordinal) + " does not exist");
	*out = primaryLocked(ordinal);
	return npurtSuccess;
}

Context *Runtime::primaryLocked(int ordinal)
{
	if (!primaries_[ordinal]) {
		Device &dev = device(ordinal);
		auto *ctx = new Context(ordinal, dev.node(), nullptr, *spaces_[ordinal]);
		primaries_[ordinal] = ctx;
		contexts_.insert(ctx);
	}
	return primaries_[ordinal];
}

npurtError_t Runtime::primaryContext(int ordinal, Context **out, const char *api)
{
	if (npurtError_t err = start())
		return err;
	if (npurtError_t err = checkOrdinal(ordinal, api))
		return err;
	std::lock_guard<std::mutex> lock(ctxMutex_);
	*out = primaryLocked(ordinal);
	return npurtSuccess;
}

npurtError_t Runtime::resetPrimary(int ordinal)
{
	Context *ctx = nullptr;
	{
		std::lock_guard<std::mutex> lock(ctxMutex_);
		if (ordinal >= 0 && static_cast<size_t>(ordinal) < primaries_.size())
			ctx = primaries_[ordinal];
	}
	if (!ctx)
		return npurtSuccess;
	// Its work ends first (bounded: by the job timeout, or failed).
	ctx->forEachStreamPinned([](Stream *s) {
		if (s->synchronize(-1, "npurtDeviceReset"))
			npurtGetLastError();
	});
	return destroyContext(ctx);
}

bool Runtime::isContext(const npurtContext_st *ctx)
{
	std::lock_guard<std::mutex> lock(ctxMutex_);
	return ctx && contexts_.count(ctx);
}

npurtError_t Runtime::destroyContext(Context *ctx)
{
	{
		std::lock_guard<std::mutex> lock(ctxMutex_);
		if (!contexts_.count(ctx))
			return setError(
			        npurtErrorInvalidHandle,
			        "npurtCtxDestroy: not a live context (destroyed already, or "
			        "not made by npurtCtxCreate)");
		for (auto &p : primaries_)
			if (p == ctx)
				p = nullptr;
		contexts_.erase(ctx);
		memoryRetired();
		// Host ranges of the context die with it.
		for (auto it = hostRanges_.begin(); it != hostRanges_.end();) {
			if (it->second.ctx != ctx) {
				++it;
				continue;
			}
			// Pinned blocks belong to the context's pool, which
			// gives them back when the context goes.
			if (!it->second.pinned) {
				ctx->unbind(it->first, it->second.size);
				ctx->closeBo(it->second.handle);
			}
			it = hostRanges_.erase(it);
		}
	}
	if (threadContext() == ctx)
		threadContext() = nullptr;
	delete ctx;
	return npurtSuccess;
}

Context *Runtime::findDeviceMemory(uint64_t addr, Context *hint, uint64_t *base, size_t *size)
{
	// Launch loops name the same few buffers over and over (an op's
	// operands): the thread's last hits answer until some memory is
	// retired.
	struct Hit {
		uint64_t base = 0;
		size_t size = 0;
		Context *ctx = nullptr;
	};
	struct Hits {
		uint64_t generation = UINT64_MAX;
		Hit hit[4];
		unsigned next = 0;  // the one to replace
	};
	thread_local Hits hits;
	uint64_t generation = gMemoryGeneration.load(std::memory_order_acquire);
	if (hits.generation == generation) {
		for (const Hit &h : hits.hit) {
			if (addr - h.base < h.size) {
				*base = h.base;
				*size = h.size;
				return h.ctx;
			}
		}
	} else {
		hits = Hits{};
		hits.generation = generation;
	}
	Context *found = findDeviceMemorySlow(addr, hint, base, size);
	if (found) {
		hits.hit[hits.next] = {*base, *size, found};
		hits.next = (hits.next + 1) % 4;
	}
	return found;
}

npurtError_t Runtime::processMemory(int ordinal, ProcessMemory *out)
{
	*out = {};
	// A context in the set is not destroyed while the lock is held
	// (destroyContext takes it off first); its pool's lock nests inside,
	// as in findDeviceMemorySlow.
	std::lock_guard<std::mutex> lock(ctxMutex_);
	for (const npurtContext_st *c : contexts_) {
		auto *ctx = const_cast<Context *>(static_cast<const Context *>(c));
		if (ctx->ordinal() != ordinal)
			continue;
		uint64_t deviceBytes = 0;
		if (npurtError_t err = ctx->driverDeviceBytes(&deviceBytes))
			return err;
		out->allocated += ctx->pool().stats().allocatedBytes.current;
		out->deviceBytes += deviceBytes;
		out->contexts++;
	}
	return npurtSuccess;
}

Context *Runtime::findDeviceMemorySlow(uint64_t addr, Context *hint, uint64_t *base, size_t *size)
{
	int ordinal = deviceOfAddress(addr);
	if (ordinal < 0)
		return nullptr;
	if (hint && hint->ordinal() == ordinal && hint->findDeviceRange(addr, base, size))
		return hint;
	std::lock_guard<std::mutex> lock(ctxMutex_);
	for (const npurtContext_st *c : contexts_) {
		auto *ctx = const_cast<Context *>(static_cast<const Context *>(c));
		if (ctx != hint && ctx->ordinal() == ordinal &&
		    ctx->findDeviceRange(addr, base, size))
			return ctx;
	}
	return nullptr;
}

bool Runtime::addHostRange(uint64_t base, const HostRange &r)
{
	std::lock_guard<std::mutex> lock(ctxMutex_);
	auto next = hostRanges_.lower_bound(base);
	if (next != hostRanges_.end() && next->first < base + r.size)
		return false;
	if (next != hostRanges_.begin()) {
		auto prev = std::prev(next);
		if (prev->first + prev->second.size > base)
			return false;
	}
	hostRanges_[base] = r;
	return true;
}

bool Runtime::takeHostRange(uint64_t userBase, bool pinned, uint64_t *base, HostRange *r)
{
	std::lock_guard<std::mutex> lock(ctxMutex_);
	// Ranges never overlap: the one containing userBase is the only
	// candidate (its key is the page-aligned start, at or below it).
	auto it = hostRanges_.upper_bound(userBase);
	if (it == hostRanges_.begin())
		return false;
	--it;
	if (it->second.userBase != userBase || it->second.pinned != pinned)
		return false;
	*base = it->first;
	*r = it->second;
	hostRanges_.erase(it);
	return true;
}

bool Runtime::findHostRange(uint64_t addr, uint64_t *base, HostRange *r)
{
	std::lock_guard<std::mutex> lock(ctxMutex_);
	auto it = hostRanges_.upper_bound(addr);
	if (it == hostRanges_.begin())
		return false;
	--it;
	if (addr - it->first >= it->second.size)
		return false;
	*base = it->first;
	*r = it->second;
	return true;
}

bool Runtime::findManagedRange(uint64_t addr, HostRange *r)
{
	uint64_t base = 0;
	return findHostRange(addr, &base, r) && r->pinned && (r->flags & kHostManaged) &&
	       addr >= r->userBase && addr - r->userBase < r->userSize;
}

void setThreadContext(Context *ctx)
{
	threadContext() = ctx;
}

}  // namespace npurt

// npu_runtime.cpp - errors, devices, streams, the device guard and the
// allocator of the PrivateUse1 backend, all on libnpurt's C API.
#include "npu_runtime.h"

#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace torch_npurt {

namespace {

constexpr int kMaxDevices = 16;  // the driver's limit (num_devices)
// Pool streams per priority and device, as CUDA's: each made when first
// handed out (its kernel queues when first used), then reused in turn.
constexpr unsigned kPoolSize = 32;
constexpr size_t kPriorities = 8;  // room for libnpurt's priority range

std::string runtimeMessage(npurtError_t err)
{
	const char *msg = npurtGetLastErrorMessage();
	std::string what = std::string(npurtGetErrorName(err)) + ": " +
	                   ((msg && *msg) ? msg : npurtGetErrorString(err));
	npurtGetLastError();  // consumed: the next failure starts clean
	return what;
}

std::string formatBytes(uint64_t b)
{
	char buf[32];
	if (b >= (1ull << 30))
		std::snprintf(buf, sizeof(buf), "%.2f GiB", b / double(1ull << 30));
	else if (b >= (1ull << 20))
		std::snprintf(buf, sizeof(buf), "%.2f MiB", b / double(1ull << 20));
	else
		std::snprintf(buf, sizeof(buf), "%.2f KiB", b / 1024.0);
	return buf;
}

}  // namespace

// "on stream 0x55.. (NPU 0, ...)" in a fault report: add the torch name
// of the stream.
std::string nameStreams(std::string msg)
{
	const std::string key = "on stream 0x";
	size_t at = msg.find(key);
	if (at == std::string::npos)
		return msg;
	size_t begin = at + key.size() - 2, end = begin + 2;
	while (end < msg.size() && std::isxdigit(static_cast<unsigned char>(msg[end])))
		end++;
	void *p = reinterpret_cast<void *>(
	        std::strtoull(msg.substr(begin, end - begin).c_str(), nullptr, 16));
	std::string name = describeNativeStream(p);
	if (name.empty())
		return msg;
	return msg.substr(0, end) + " = " + name + msg.substr(end);
}

void throwError(npurtError_t err, const char *what)
{
	std::string msg = std::string(what) + ": " + nameStreams(runtimeMessage(err));
	if (err == npurtErrorNoDevice)
		msg += " (torch_npurt.npu.is_available() is False: is npu.ko loaded?)";
	TORCH_CHECK(false, msg);
}

namespace {
std::atomic<bool> gRuntimeStarted{false};
}  // namespace

int deviceCount()
{
	// Cached: the set of NPUs is fixed for the life of the process.
	static int count = [] {
		int n = 0;
		if (npurtGetDeviceCount(&n) != npurtSuccess)
			n = 0;  // the reason stays readable through noDeviceReason()
		gRuntimeStarted.store(true);
		return n;
	}();
	return count;
}

bool runtimeStarted()
{
	return gRuntimeStarted.load();
}

std::string noDeviceReason()
{
	static std::string reason = [] {
		int n = 0;
		npurtError_t err = npurtGetDeviceCount(&n);
		if (err == npurtSuccess && n > 0)
			return std::string();
		if (err == npurtSuccess)
			return std::string("no NPU found");
		return runtimeMessage(err);
	}();
	return reason;
}

int currentDevice()
{
	int dev = 0;
	check(npurtGetDevice(&dev), "npurtGetDevice");
	return dev;
}

void setDevice(int device)
{
	int cur = -1;
	if (npurtGetDevice(&cur) == npurtSuccess && cur == device)
		return;
	check(npurtSetDevice(device), "npurtSetDevice");
}

int checkedDevice(int64_t index)
{
	int n = deviceCount();
	if (n == 0)
		TORCH_CHECK(false, "NPU unavailable: ", noDeviceReason());
	if (index < 0)
		return currentDevice();
	TORCH_CHECK_INDEX(index < n, "NPU device ", index, " requested, but ", n,
	                  " NPU(s) present (valid indices 0..", n - 1, ")");
	return static_cast<int>(index);
}

DeviceScope::DeviceScope(int device) : previous_(currentDevice())
{
	setDevice(device);
}

DeviceScope::~DeviceScope()
{
	if (previous_ >= 0)
		npurtSetDevice(previous_);
}

// ---------------------------------------------------------------- streams

namespace {

struct StreamEntry {
	npurtStream_t stream;
	int priority;
	npurtEvent_t sync;  // for the waits around a backward
	bool external = false;  // ExternalStream's: its owner may destroy it
};

struct DeviceStreams {
	std::mutex lock;
	std::vector<StreamEntry> table;  // id = index + 1
	// Pool stream ids per priority (index: priority - greatest).
	std::vector<int64_t> pool[kPriorities];
	std::atomic<unsigned> next[kPriorities]{};
};

std::array<DeviceStreams, kMaxDevices> &streamTables()
{
	// Leaked on purpose: streams outlive every tensor and static destructor.
	static auto *tables = new std::array<DeviceStreams, kMaxDevices>();
	return *tables;
}

thread_local std::array<int64_t, kMaxDevices> tlsCurrent{};  // 0: default stream

int64_t addStream(int device, int priority)
{
	DeviceScope scope(device);
	npurtStream_t s = nullptr;
	check(npurtStreamCreateWithPriority(&s, npurtStreamNonBlocking, priority),
	      "npurtStreamCreateWithPriority");
	auto &t = streamTables()[device];
	std::lock_guard<std::mutex> g(t.lock);
	npurtEvent_t ev = nullptr;
	npurtError_t err = npurtEventCreateWithFlags(&ev, npurtEventDisableTiming);
	if (err != npurtSuccess) {
		npurtStreamDestroy(s);
		check(err, "npurtEventCreateWithFlags");
	}
	t.table.push_back({s, priority, ev});
	return static_cast<int64_t>(t.table.size());
}

void checkStreamDevice(const c10::Stream &stream)
{
	TORCH_CHECK(stream.device_type() == kNpu, "expected an NPU stream, got a stream of ",
	            stream.device());
	checkedDevice(stream.device_index());
}

}  // namespace

npurtStream_t nativeStream(const c10::Stream &stream)
{
	checkStreamDevice(stream);
	if (stream.id() == 0)
		return nullptr;
	auto &t = streamTables()[stream.device_index()];
	std::lock_guard<std::mutex> g(t.lock);
	TORCH_CHECK(stream.id() > 0 && static_cast<size_t>(stream.id()) <= t.table.size(),
	            "unknown NPU stream id ", stream.id(), " on ", stream.device());
	return t.table[stream.id() - 1].stream;
}

int64_t externalStream(int device, npurtStream_t s)
{
	if (!s || s == npurtStreamLegacy)
		return 0;  // the device's default stream
	TORCH_CHECK(s != npurtStreamPerThread,
	            "ExternalStream: npurtStreamPerThread is a different stream in every thread; "
	            "pass a stream made by npurtStreamCreate*");
	int owner = -1;
	check(npurtStreamGetDevice(s, &owner), "npurtStreamGetDevice");
	TORCH_CHECK(owner == device, "ExternalStream: the stream belongs to NPU ", owner,
	            ", not NPU ", device);
	int priority = 0;
	check(npurtStreamGetPriority(s, &priority), "npurtStreamGetPriority");
	DeviceScope scope(device);
	auto &t = streamTables()[device];
	std::lock_guard<std::mutex> g(t.lock);
	for (size_t i = 0; i < t.table.size(); i++)
		if (t.table[i].stream == s)
			return static_cast<int64_t>(i + 1);
	npurtEvent_t ev = nullptr;
	check(npurtEventCreateWithFlags(&ev, npurtEventDisableTiming), "npurtEventCreateWithFlags");
	t.table.push_back({s, priority, ev, true});
	return static_cast<int64_t>(t.table.size());
}

c10::Stream streamFromIds(int64_t device, int64_t id)
{
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, checkedDevice(device)), id);
}

c10::Stream defaultStream(int device)
{
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), 0);
}

c10::Stream currentStream(int device)
{
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), tlsCurrent[device]);
}

c10::Stream exchangeStream(const c10::Stream &stream)
{
	checkStreamDevice(stream);
	int dev = stream.device_index();
	c10::Stream old = currentStream(dev);
	tlsCurrent[dev] = stream.id();
	return old;
}

std::vector<int64_t> syncStreamsBeforeBackward()
{
	int n = deviceCount();
	for (int dev = 0; dev < n; dev++) {
		auto &t = streamTables()[dev];
		std::lock_guard<std::mutex> g(t.lock);
		if (t.table.empty())
			continue;  // only the default stream was ever used
		DeviceScope scope(dev);
		for (const StreamEntry &e : t.table) {
			int priority = 0;
			if (e.external &&
			    npurtStreamGetPriority(e.stream, &priority) != npurtSuccess) {
				npurtGetLastError();  // destroyed by its owner: no work to order
				continue;
			}
			check(npurtEventRecord(e.sync, e.stream), "npurtEventRecord");
			check(npurtStreamWaitEvent(nullptr, e.sync, 0), "npurtStreamWaitEvent");
		}
	}
	// The implicit gradients (torch's ones_like in the caller's thread)
	// are made after this point: on the default streams, where 1.13's
	// device threads consume them (torch 2.x's engine orders them from
	// there to the forward's streams itself). Switched once nothing can
	// throw, so that the epilogue always follows.
	std::vector<int64_t> saved(tlsCurrent.begin(), tlsCurrent.begin() + n);
	std::fill(tlsCurrent.begin(), tlsCurrent.begin() + n, 0);
	return saved;
}

void syncStreamsAfterBackward(const std::vector<int64_t> &saved)
{
	int n = deviceCount();
	TORCH_CHECK(saved.size() == static_cast<size_t>(n), "_backward_epilogue: ", saved.size(),
	            " streams for ", n, " NPUs");
	for (int dev = 0; dev < n; dev++) {
		auto &t = streamTables()[dev];
		std::lock_guard<std::mutex> g(t.lock);
		TORCH_CHECK(saved[dev] >= 0 && static_cast<size_t>(saved[dev]) <= t.table.size(),
		            "_backward_epilogue: unknown stream id ", saved[dev], " on NPU ", dev);
	}
	// Restored before any wait can throw.
	std::copy(saved.begin(), saved.end(), tlsCurrent.begin());
	for (int dev = 0; dev < n; dev++) {
		int64_t cur = saved[dev];
		if (cur == 0)
			continue;  // the caller works on the default stream itself
		auto &t = streamTables()[dev];
		std::lock_guard<std::mutex> g(t.lock);
		const StreamEntry &e = t.table[cur - 1];
		DeviceScope scope(dev);
		// The entry's own event: recorded on the default stream here, its
		// earlier use (recorded on e.stream) is already waited for.
		check(npurtEventRecord(e.sync, nullptr), "npurtEventRecord");
		check(npurtStreamWaitEvent(e.stream, e.sync, 0), "npurtStreamWaitEvent");
	}
}

std::string describeNativeStream(const void *stream)
{
	int n = deviceCount();
	for (int dev = 0; dev < n; dev++) {
		auto &t = streamTables()[dev];
		std::lock_guard<std::mutex> g(t.lock);
		for (size_t i = 0; i < t.table.size(); i++)
			if (t.table[i].stream == stream)
				return "torch_npurt.npu.Stream(device=" + std::to_string(dev) +
				       ", id=" + std::to_string(i + 1) + ")";
	}
	return "";
}

c10::Stream poolStream(int device, int priority)
{
	device = checkedDevice(device);
	int least = 0, greatest = 0;
	npurtDeviceGetStreamPriorityRange(&least, &greatest);
	// Beyond the highest is the highest, as torch.cuda's; past the lowest
	// is an error there too.
	priority = std::max(priority, greatest);
	TORCH_CHECK(priority <= least, "stream priority ", priority, " is out of range [", greatest,
	            ", ", least, "] (lower numbers are higher priority)");
	auto &t = streamTables()[device];
	size_t cls = static_cast<size_t>(priority - greatest);
	TORCH_INTERNAL_ASSERT(cls < kPriorities);
	unsigned n = t.next[cls].fetch_add(1);
	std::unique_lock<std::mutex> g(t.lock);
	std::vector<int64_t> &pool = t.pool[cls];
	int64_t id = 0;
	if (n < kPoolSize || pool.empty()) {
		g.unlock();  // addStream takes the lock
		id = addStream(device, priority);
		g.lock();
		pool.push_back(id);
	} else {
		// Fewer than kPoolSize only while another thread makes one.
		id = pool[n % pool.size()];
	}
	return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), id);
}

int streamPriority(const c10::Stream &stream)
{
	npurtStream_t s = nativeStream(stream);
	DeviceScope scope(stream.device_index());
	int prio = 0;
	check(npurtStreamGetPriority(s, &prio), "npurtStreamGetPriority");
	return prio;
}

// ------------------------------------------------------------- call sites

namespace {

struct SiteState {
	int depth = 0;
	const char *op = nullptr;  // the outermost OpScope's name
	bool captured = false;  // site is this scope's
	const PythonSite *site = nullptr;
};

thread_local SiteState tlsSite;
std::atomic<PythonSiteHook> gSiteHook{nullptr};
std::atomic<bool> gCallSites{true};

void capture(SiteState &st)
{
	st.captured = true;
	PythonSiteHook hook = gSiteHook.load(std::memory_order_relaxed);
	st.site = hook && gCallSites.load(std::memory_order_relaxed) ? hook() : nullptr;
}

// The call-site ids this thread registered, by site and op name. Names
// are mostly literals but not always (the fallback's labels), so the key
// is the name's hash and the entry keeps the text to compare.
struct SiteIdKey {
	const PythonSite *site;
	size_t nameHash;
	bool operator==(const SiteIdKey &o) const
	{
		return site == o.site && nameHash == o.nameHash;
	}
};
struct SiteIdHash {
	size_t operator()(const SiteIdKey &k) const
	{
		return std::hash<const void *>()(k.site) ^ (k.nameHash * 0x9e3779b97f4a7c15ull);
	}
};
struct SiteId {
	std::string name;
	uint64_t id;
};
constexpr size_t kMaxThreadSiteIds = 4096;
thread_local std::unordered_map<SiteIdKey, SiteId, SiteIdHash> tlsSiteIds;

void nameSite(const PythonSite *site, const char *name)
{
	if (!site) {
		npurtSetCallSite("torch_npurt", 0, name);
		return;
	}
	const SiteIdKey key{site, std::hash<std::string_view>()(name)};
	auto it = tlsSiteIds.find(key);
	if (it != tlsSiteIds.end() && it->second.name == name) {
		npurtSetCallSiteId(it->second.id);
		return;
	}
	uint64_t id = 0;
	if (it == tlsSiteIds.end() && tlsSiteIds.size() < kMaxThreadSiteIds) {
		if (npurtCallSiteRegister(site->file.c_str(), site->line, name, &id) ==
		    npurtSuccess) {
			tlsSiteIds.emplace(key, SiteId{name, id});
			npurtSetCallSiteId(id);
			return;
		}
		npurtGetLastError();  // the runtime's sites are full: named by text
	}
	npurtSetCallSite(site->file.c_str(), site->line, name);
}

}  // namespace

OpScope::OpScope(const char *op)
{
	SiteState &st = tlsSite;
	if (st.depth++ == 0) {
		st.op = op;
		st.captured = false;  // captured at the first enqueue, if any
	}
}

OpScope::~OpScope()
{
	SiteState &st = tlsSite;
	if (--st.depth == 0)
		st.op = nullptr;
}

void enqueueSite(const char *what)
{
	SiteState &st = tlsSite;
	const char *name = what;
	if (st.depth > 0) {
		// A helper's label that refines the op ("aten::copy_ (transpose)")
		// stays; a helper's own name inside another op gives way to it.
		size_t n = std::strlen(st.op);
		if (std::strncmp(what, st.op, n) != 0)
			name = st.op;
		if (!st.captured)
			capture(st);
	} else {
		capture(st);
		st.captured = false;
	}
	nameSite(st.site, name);
}

void setPythonSiteHook(PythonSiteHook hook)
{
	gSiteHook.store(hook);
}

void setCallSitesEnabled(bool on)
{
	gCallSites.store(on);
}

bool callSitesEnabled()
{
	return gCallSites.load();
}

namespace {
std::atomic<int> gSyncDebug{0};
}  // namespace

void setSyncDebugMode(int mode)
{
	TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode ", mode,
	            ", expected one of 0 (default), 1 (warn), 2 (error)");
	gSyncDebug.store(mode);
}

int syncDebugMode()
{
	return gSyncDebug.load();
}

std::string syncMessage(const char *what)
{
	return std::string("called a synchronizing NPU operation (") + what + ")";
}

void checkSync(const char *what)
{
	int mode = gSyncDebug.load(std::memory_order_relaxed);
	if (mode == 0)
		return;
	TORCH_CHECK(mode != 2, syncMessage(what));
	TORCH_WARN(syncMessage(what));
}

// ------------------------------------------------------------ device guard

namespace {

struct NpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
	c10::DeviceType type() const override { return kNpu; }

	c10::Device exchangeDevice(c10::Device d) const override
	{
		c10::Device old = getDevice();
		if (old.index() != d.index())
			setDevice(d);
		return old;
	}

	c10::Device getDevice() const override { return c10::Device(kNpu, currentDevice()); }

	void setDevice(c10::Device d) const override
	{
		TORCH_CHECK(d.type() == kNpu, "expected an NPU device, got ", d);
		torch_npurt::setDevice(checkedDevice(d.index()));
	}

	void uncheckedSetDevice(c10::Device d) const noexcept override
	{
		npurtSetDevice(d.index());
	}

	c10::Stream getStream(c10::Device d) const noexcept override
	{
		return currentStream(d.index());
	}

	c10::Stream getDefaultStream(c10::Device d) const override
	{
		return defaultStream(d.index());
	}

	c10::Stream getStreamFromGlobalPool(c10::Device d, bool highPriority) const override
	{
		int least = 0, greatest = 0;
		npurtDeviceGetStreamPriorityRange(&least, &greatest);
		return poolStream(d.index(), highPriority ? greatest : 0);
	}

	c10::Stream exchangeStream(c10::Stream s) const noexcept override
	{
		int dev = s.device_index();
		c10::Stream old = currentStream(dev);
		tlsCurrent[dev] = s.id();
		return old;
	}

	c10::DeviceIndex deviceCount() const noexcept override
	{
		return static_cast<c10::DeviceIndex>(torch_npurt::deviceCount());
	}

	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex deviceIndex,
	            const c10::EventFlag flag) const override
	{
		TORCH_CHECK(deviceIndex == -1 || deviceIndex == stream.device_index(),
		            "event device ", int(deviceIndex), " does not match the stream's ",
		            stream.device());
		DeviceScope scope(stream.device_index());
		auto *ev = reinterpret_cast<npurtEvent_t *>(event);
		if (!*ev) {
			// PyTorch's default event is the cheap kind; BACKEND_DEFAULT
			// times, as cudaEventDefault does.
			unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT
			                         ? npurtEventTiming
			                         : npurtEventDisableTiming;
			check(npurtEventCreateWithFlags(ev, flags), "npurtEventCreateWithFlags");
		}
		check(npurtEventRecord(*ev, nativeStream(stream)), "npurtEventRecord");
	}

	void block(void *event, const c10::Stream &stream) const override
	{
		if (!event)
			return;  // never recorded: nothing to wait for
		DeviceScope scope(stream.device_index());
		check(npurtStreamWaitEvent(nativeStream(stream), static_cast<npurtEvent_t>(event),
		                           0),
		      "npurtStreamWaitEvent");
	}

	bool queryEvent(void *event) const override
	{
		if (!event)
			return true;
		npurtError_t err = npurtEventQuery(static_cast<npurtEvent_t>(event));
		if (err == npurtErrorNotReady)
			return false;
		check(err, "npurtEventQuery");
		return true;
	}

	void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override
	{
		if (event)
			npurtEventDestroy(static_cast<npurtEvent_t>(event));
	}

	bool queryStream(const c10::Stream &stream) const override
	{
		DeviceScope scope(stream.device_index());
		npurtError_t err = npurtStreamQuery(nativeStream(stream));
		if (err == npurtErrorNotReady)
			return false;
		check(err, "npurtStreamQuery");
		return true;
	}

	void synchronizeStream(const c10::Stream &stream) const override
	{
		checkSync("stream synchronize");
		DeviceScope scope(stream.device_index());
		check(npurtStreamSynchronize(nativeStream(stream)), "npurtStreamSynchronize");
	}

	// Eager memory needs no record: libnpurt does not reuse a freed block
	// before the tasks queued before the free, on every stream, have
	// completed (RUNTIME_NEEDS.md 1). A capture's work is not queued, so a
	// graph pool's block used by another stream waits for the capture's end.
	void recordDataPtrOnStream(const c10::DataPtr &data,
	                           const c10::Stream &stream) const override
	{
		capturePoolRecordStream(data.get(), nativeStream(stream));
	}

	// torch 2.x's device-generic calls (torch.Stream, torch.Event,
	// torch.accelerator): virtual in the torch versions that have them,
	// which these override; unused members where they do not (1.13), so
	// not marked override.
	c10::Stream getNewStream(c10::Device d, int priority = 0) const
	{
		return poolStream(d.index(), priority);
	}

	void synchronizeEvent(void *event) const
	{
		if (event)  // never recorded: nothing to wait for
			check(npurtEventSynchronize(static_cast<npurtEvent_t>(event)),
			      "npurtEventSynchronize");
	}

	void synchronizeDevice(const c10::DeviceIndex index) const
	{
		// An explicit synchronize: not flagged by set_sync_debug_mode,
		// as torch.npu.synchronize() is not.
		DeviceScope scope(checkedDevice(index));
		check(npurtDeviceSynchronize(), "npurtDeviceSynchronize");
	}

	double elapsedTime(void *start, void *end, const c10::DeviceIndex index) const
	{
		TORCH_CHECK(start && end,
		            "both events must be recorded before the elapsed time is asked for");
		DeviceScope scope(checkedDevice(index));
		float ms = 0;
		check(npurtEventElapsedTime(&ms, static_cast<npurtEvent_t>(start),
		                            static_cast<npurtEvent_t>(end)),
		      "npurtEventElapsedTime");
		return ms;
	}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

// --------------------------------------------------------------- allocator

std::atomic<bool> freeErrorReported{false};

void freeDeviceMemory(void *p)
{
	if (p && !capturePoolFree(p))
		freeToRuntime(p);
}

}  // namespace

void freeToRuntime(void *p)
{
	RelaxedCaptureMode relaxed;
	npurtError_t err = npurtFree(p);
	// A deleter cannot throw; a failed free is a bug worth one line.
	if (err != npurtSuccess && !freeErrorReported.exchange(true))
		std::fprintf(stderr, "torch_npurt: npurtFree(%p) failed: %s\n", p,
		             runtimeMessage(err).c_str());
}

void rawDelete(void *p)
{
	if (!p || capturePoolFree(p))
		return;
	RelaxedCaptureMode relaxed;
	check(npurtFree(p), "npurtFree");
}

void throwOutOfMemory(int device, size_t n)
{
	std::string runtime = runtimeMessage(npurtErrorMemoryAllocation);
	npurtMemStats st{};
	size_t freeB = 0, total = 0;
	npurtMemGetStats(&st);
	npurtMemGetInfo(&freeB, &total);
	npurtGetLastError();
	TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory. Tried to allocate ",
	                 formatBytes(n), " (NPU ", device, "; ", formatBytes(total),
	                 " total capacity; ", formatBytes(st.allocatedBytes),
	                 " already allocated; ", formatBytes(freeB), " free; ",
	                 formatBytes(st.reservedBytes),
	                 " reserved in total by PyTorch). The runtime says: ", runtime);
}

namespace {

// Allocator::copy_data (torch 2.3+): both blocks are this allocator's.
[[maybe_unused]] void copyDeviceBlock(void *dest, const void *src, size_t count)
{
	check(npurtMemcpy(dest, src, count, npurtMemcpyDeviceToDevice), "npurtMemcpy");
}

class NpuAllocator final : public c10::Allocator {
public:
	c10::DataPtr allocate(size_t n) NPU_ALLOCATE_CONST override
	{
		int dev = checkedDevice(-1);
		void *p = nullptr;
		if (n) {
			// The pool's snapshot names the Python line (or the op)
			// that made each block.
			enqueueSite("memory allocation");
			if ((p = capturePoolAllocate(dev, n)))
				return {p, p, &freeDeviceMemory, c10::Device(kNpu, dev)};
			RelaxedCaptureMode relaxed;
			npurtError_t err = npurtMalloc(&p, n);
			// Blocks parked for other processes that let go since.
			if (err == npurtErrorMemoryAllocation && ipcCollect()) {
				npurtGetLastError();
				err = npurtMalloc(&p, n);
			}
			if (err == npurtErrorMemoryAllocation)
				throwOutOfMemory(dev, n);
			check(err, "npurtMalloc");
		}
		return {p, p, &freeDeviceMemory, c10::Device(kNpu, dev)};
	}

	c10::DeleterFnPtr raw_deleter() const override { return &freeDeviceMemory; }
	NPU_ALLOCATOR_COPY_DATA(copyDeviceBlock)
};

NpuAllocator gAllocator;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &gAllocator);

c10::Allocator *allocator()
{
	return &gAllocator;
}

// ---------------------------------------------------------------- fallback

namespace {
std::mutex gFallbackLock;
std::map<std::string, uint64_t> gFallbacks;
}  // namespace

void countFallback(const std::string &name)
{
	std::lock_guard<std::mutex> g(gFallbackLock);
	gFallbacks[name]++;
}

std::map<std::string, uint64_t> fallbackCounts()
{
	std::lock_guard<std::mutex> g(gFallbackLock);
	return gFallbacks;
}

}  // namespace torch_npurt

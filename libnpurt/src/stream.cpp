#include "stream.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>
#include <shared_mutex>
#include <unordered_map>

#include "error.h"
#include "graph.h"
#include "ipc.h"
#include "npu_drm.h"
#include "runtime.h"

namespace npurt {
namespace {

// Launches closer than this (on the coarse clock: a few ticks) are a burst.
constexpr int64_t kBurstGapNs = int64_t{10} * 1000000;
// A burst's batch gathers this long on an idle device before the flusher
// submits it: one SUBMIT (and one flusher wakeup) per that many launches,
// not per launch. Work ahead that ends, a full batch, or anything that
// needs the batch's point submits it sooner.
constexpr auto kGather = std::chrono::microseconds(100);
// Tasks that move more than kBatchMaxCost bytes (or GEMMs of more
// multiply-adds) are worth a submission of their own: queued in the
// kernel they start the moment the work ahead ends, where a batch waits
// for the flusher to notice.
// Larger tasks are batched only behind two queued jobs of the stream:
// the flusher submits the batch when the first of them ends, while the
// second keeps the engine busy, so consecutive large copies run without
// the engine idling between jobs (about 20 us each under emulation). A
// batch stops growing at this much work (taskWork: tens of ms of engine
// time), far below the job timeout, which the driver applies to each task
// anyway.
constexpr uint64_t kBatchMaxTotal = 64 << 20;

// Each run of a strided copy costs the engine as much as this many bytes
// (the driver's NPU_COPY_RUN_COST).
constexpr uint64_t kRunCost = 64;

}  // namespace

uint64_t taskCost(const TaskInfo &t)
{
	if (t.op == npurtOpGemm)
		return t.m * t.n * t.k;  // validated: does not overflow
	return t.bytes + t.runs * kRunCost;  // runs: at most kMaxRunsPerPacket
}

bool joinsCompute(uint32_t engineClass, const TaskInfo &t)
{
	return engineClass == DRM_NPU_ENGINE_COPY && taskCost(t) <= kJoinCost;
}

namespace {

// What bounds a batch: a task's device time, in bytes a copy engine moves
// in the same time, so that copies, element-wise ops and GEMMs bound it
// alike (taskCost's multiply-adds are far slower than bytes). Measured on
// the emulated NPU (make bench): copies about 3 GB/s, element-wise ops
// about 0.5 GB/s of operands, GEMMs about 0.08 G multiply-adds/s.
constexpr uint64_t kOpWorkPerByte = 4;
constexpr uint64_t kGemmWorkPerMac = 32;

uint64_t taskWork(const TaskInfo &t)
{
	const uint64_t cost = taskCost(t);
	const uint64_t scale = t.op == npurtOpGemm ? kGemmWorkPerMac
	                       : t.op >= 0         ? kOpWorkPerByte
	                                           : 1;
	return cost > UINT64_MAX / scale ? UINT64_MAX : cost * scale;
}

// The globals below are never destroyed (like the Runtime): the runtime's
// own threads (the fault monitor, the streams' flushers and host function
// workers) may still use them while exit runs static destructors. The
// soak found the monitor's pass iterating a destroyed gStreams.
std::mutex &gHandleMutex = *new std::mutex;  // guards gStreams, gEvents
// Held shared while forEachLiveStream's caller uses the streams it listed
// (holding no other lock); taken exclusively by a stream's destruction
// once the stream is off gStreams, so no listed stream is freed in use.
std::shared_mutex &gStreamUse = *new std::shared_mutex;
std::set<const npurtStream_st *> &gStreams = *new std::set<const npurtStream_st *>;
std::set<const npurtEvent_st *> &gEvents = *new std::set<const npurtEvent_st *>;
// Bumped when a stream is destroyed: invalidates the threads' cached
// handle checks (resolveStream).
std::atomic<uint64_t> gStreamGeneration{0};

// The call site given by npurtSetCallSite for the next enqueue, and the
// last one given: loops name the same site on every call.
struct PendingSite {
	const std::string *pending = nullptr;
	const std::string *last = nullptr;
	std::string lastFile, lastFunction;
	int lastLine = 0;
};

PendingSite &threadCallSite()
{
	thread_local PendingSite site;
	return site;
}

// Interned call sites: a program has a bounded number of them, but a
// buggy one could make up texts without end, so the table stops growing.
constexpr size_t kMaxCallSites = 1 << 16;
// Never destroyed either (reports name call sites).
std::mutex &gSiteMutex = *new std::mutex;  // guards gSites and the table's growth
std::unordered_map<std::string, std::unique_ptr<std::string>> &gSites =
        *new std::unordered_map<std::string, std::unique_ptr<std::string>>;
// Registered call sites (npurtCallSiteRegister): id n is entry n - 1, read
// without the lock; entries are written once, before the count covers them.
std::atomic<const std::string *> gSiteTable[kMaxCallSites];
std::atomic<uint64_t> gSiteIds{0};
std::unordered_map<const std::string *, uint64_t> &gSiteIdOf =
        *new std::unordered_map<const std::string *, uint64_t>;  // guarded by gSiteMutex
const std::string &kTooManySites = *new std::string(
        "(a call site: more than 65536 distinct ones were given, no more are kept)");

std::string hex(uint64_t v)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return buf;
}

int syncobjCreate(os::Device &f, uint32_t *handle)
{
	drm_syncobj_create c{};
	int ret = f.ioctl(DRM_IOCTL_SYNCOBJ_CREATE, &c);
	*handle = c.handle;
	return ret;
}

void syncobjDestroy(os::Device &f, uint32_t handle)
{
	drm_syncobj_destroy d{};
	d.handle = handle;
	f.ioctl(DRM_IOCTL_SYNCOBJ_DESTROY, &d);
}

// Puts the fence of point srcPoint of syncobj src (of file from; 0 for a
// binary one) into the binary syncobj dst of file to: a transfer within
// one file, a sync_file between files (another context or device).
int carryFence(os::Device &from, uint32_t src, uint64_t srcPoint, os::Device &to, uint32_t dst)
{
	drm_syncobj_transfer t{};
	t.src_handle = src;
	t.src_point = srcPoint;
	if (&from == &to) {
		t.dst_handle = dst;
		return from.ioctl(DRM_IOCTL_SYNCOBJ_TRANSFER, &t);
	}
	uint32_t tmp = 0;
	int ret = syncobjCreate(from, &tmp);
	t.dst_handle = tmp;
	if (!ret)
		ret = from.ioctl(DRM_IOCTL_SYNCOBJ_TRANSFER, &t);
	drm_syncobj_handle h{};
	h.handle = tmp;
	h.flags = DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE;
	h.fd = -1;
	if (!ret)
		ret = from.ioctl(DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &h);
	if (tmp)
		syncobjDestroy(from, tmp);
	if (!ret) {
		drm_syncobj_handle in{};
		in.fd = h.fd;
		in.handle = dst;
		in.flags = DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE;
		ret = to.ioctl(DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &in);
	}
	if (h.fd >= 0)
		close(h.fd);
	return ret;
}

const char *errorKind(int err)
{
	switch (err) {
	case -EFAULT:
		return "device memory fault";
	case -ETIMEDOUT:
		return "job timeout (the engine was reset)";
	case -EINVAL:
		return "op error";
	case -ECANCELED:
		return "cancelled: work it depended on failed";
	default:
		return "device error";
	}
}

npurtError_t errorCode(int err)
{
	switch (err) {
	case -EFAULT:
		return npurtErrorDeviceFault;
	case -ETIMEDOUT:
		return npurtErrorLaunchTimeout;
	default:
		return npurtErrorLaunchFailure;
	}
}

// The queue's state from the kernel: the failure's point, offset and error.
npurtError_t queueStatus(const Timeline &tl, const char *api, drm_npu_queue_status *qs)
{
	*qs = {};
	qs->queue_id = tl.queueId;
	if (int ret = tl.file->ioctl(DRM_IOCTL_NPU_QUEUE_STATUS, qs))
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": queue status", ret));
	return npurtSuccess;
}

// "NPU 0, copy engine 1": where a queue's work runs, for messages.
std::string engineName(const Timeline &tl)
{
	return "NPU " + std::to_string(tl.ordinal) + ", " + (tl.engineClass ? "compute" : "copy") +
	       " engine " + std::to_string(tl.engineId);
}

}  // namespace

int64_t monotonicNs()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t coarseNs()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t deadlineAfter(int64_t timeoutMs)
{
	if (timeoutMs < 0 || timeoutMs > INT64_MAX / 2000000)
		return INT64_MAX;
	return monotonicNs() + timeoutMs * 1000000;
}

bool launchBlocking()
{
	static const bool on = [] {
		const char *v = std::getenv("NPURT_LAUNCH_BLOCKING");
		return v && *v && std::strcmp(v, "0") != 0;
	}();
	return on;
}

const char *const kOpNames[16] = {"add",        "sub",        "mul",       "div",  "max", "min",
                                  "scale",      "axpy",       "relu",      "gelu", "exp", "cast",
                                  "reduce_sum", "reduce_max", "transpose", "gemm"};
const char *const kTypeNames[4] = {"f32", "f16", "bf16", "i32"};

CallSite takeCallSite(void *returnAddress)
{
	PendingSite &ps = threadCallSite();
	CallSite cs;
	if (ps.pending) {
		cs.text = ps.pending;
		ps.pending = nullptr;
	} else {
		cs.returnAddress = returnAddress;
	}
	return cs;
}

CallSite peekCallSite(void *returnAddress)
{
	CallSite cs;
	cs.text = threadCallSite().pending;
	if (!cs.text)
		cs.returnAddress = returnAddress;
	return cs;
}

std::string CallSite::str() const
{
	if (text)
		return *text;
	void *ra = const_cast<void *>(returnAddress);
	Dl_info info{};
	if (ra && dladdr(ra, &info) && info.dli_sname) {
		uint64_t off =
		        reinterpret_cast<uint64_t>(ra) - reinterpret_cast<uint64_t>(info.dli_saddr);
		return std::string(info.dli_sname) + "+" + hex(off) + " (" +
		       hex(reinterpret_cast<uint64_t>(ra)) + ")";
	}
	std::string where = hex(reinterpret_cast<uint64_t>(ra));
	if (ra && dladdr(ra, &info) && info.dli_fname)
		where += std::string(" in ") + info.dli_fname + " at +" +
		         hex(reinterpret_cast<uint64_t>(ra) -
		             reinterpret_cast<uint64_t>(info.dli_fbase));
	return "return address " + where;
}

namespace {

// The interned text of a call site; with gSiteMutex held.
const std::string *internSiteLocked(const char *file, int line, const char *function)
{
	std::string text = std::string(file) + ":" + std::to_string(line);
	if (*function)
		text += std::string(" in ") + function + (std::strchr(function, '(') ? "" : "()");
	auto it = gSites.find(text);
	if (it != gSites.end())
		return it->second.get();
	if (gSites.size() >= kMaxCallSites)
		return &kTooManySites;
	auto owned = std::make_unique<std::string>(text);
	const std::string *p = owned.get();
	gSites.emplace(std::move(text), std::move(owned));
	return p;
}

}  // namespace

npurtError_t registerCallSite(const char *file, int line, const char *function, uint64_t *id)
{
	std::lock_guard<std::mutex> lock(gSiteMutex);
	const std::string *text =
	        internSiteLocked(file ? file : "?", line, function ? function : "");
	if (text == &kTooManySites)
		return setError(npurtErrorMemoryAllocation,
		                "npurtCallSiteRegister: more than 65536 distinct call sites");
	auto it = gSiteIdOf.find(text);
	if (it != gSiteIdOf.end()) {
		*id = it->second;
		return npurtSuccess;
	}
	const uint64_t n = gSiteIds.load(std::memory_order_relaxed);
	gSiteTable[n].store(text, std::memory_order_relaxed);
	gSiteIds.store(n + 1, std::memory_order_release);
	gSiteIdOf.emplace(text, n + 1);
	*id = n + 1;
	return npurtSuccess;
}

bool setCallSiteId(uint64_t id)
{
	if (!id || id > gSiteIds.load(std::memory_order_acquire))
		return false;
	threadCallSite().pending = gSiteTable[id - 1].load(std::memory_order_relaxed);
	return true;
}

void setCallSite(const char *file, int line, const char *function)
{
	PendingSite &ps = threadCallSite();
	if (!file)
		file = "?";
	if (!function)
		function = "";
	// Compared by content: the caller may reuse its buffers.
	if (ps.last && ps.lastLine == line && ps.lastFile == file && ps.lastFunction == function) {
		ps.pending = ps.last;
		return;
	}
	{
		std::lock_guard<std::mutex> lock(gSiteMutex);
		ps.pending = internSiteLocked(file, line, function);
	}
	ps.last = ps.pending;
	ps.lastFile = file;
	ps.lastFunction = function;
	ps.lastLine = line;
}

namespace {

std::string describe(const TaskInfo &t)
{
	if (t.op >= 0 && t.op < 16) {
		std::string w = std::string("op ") + kOpNames[t.op] + " " + kTypeNames[t.dtype & 3];
		if (t.outDtype != t.dtype)
			w += std::string("->") + kTypeNames[t.outDtype & 3];
		w += " ";
		switch (t.op) {
		case npurtOpReduceSum:
		case npurtOpReduceMax:
			return w + std::to_string(t.m) + "x" + std::to_string(t.n) + " axis " +
			       std::to_string(t.axis);
		case npurtOpTranspose:
			return w + std::to_string(t.m) + "x" + std::to_string(t.n);
		case npurtOpGemm:
			return w + std::to_string(t.m) + "x" + std::to_string(t.n) + "x" +
			       std::to_string(t.k);
		default:
			return w + std::to_string(t.n);
		}
	}
	if (t.op == -1)
		return std::string(t.label) + " " + std::to_string(t.bytes) + " bytes";
	if (t.op == -2)
		return "fill " + std::to_string(t.bytes) + " bytes with " + hex(t.value);
	return t.label;
}

}  // namespace

std::string TaskInfo::what() const
{
	return describe(*this);
}

Timeline::~Timeline()
{
	if (queueId) {
		drm_npu_queue_destroy d{};
		d.queue_id = queueId;
		file->ioctl(DRM_IOCTL_NPU_QUEUE_DESTROY, &d);
	}
	syncobjDestroy(*file, syncobj);
}

namespace {

// How long a wait spins on the completion record before it sleeps in the
// kernel: waking a sleeping thread costs tens of microseconds (much more
// under emulation), which short device work would otherwise add to every
// wait (as CUDA's default spin-then-block scheduling does). NPURT_SPIN_US
// overrides it (0: never spin).
int64_t spinNs()
{
	static const int64_t ns = [] {
		const char *v = std::getenv("NPURT_SPIN_US");
		char *end = nullptr;
		long us = v && *v ? std::strtol(v, &end, 10) : -1;
		if (us < 0 || (end && *end) || us > 1000000)
			us = 200;
		return static_cast<int64_t>(us) * 1000;
	}();
	return ns;
}

// Whether point has completed on the record, polling it until deadlineNs
// at the latest. The poll yields the CPU between looks: the thread that
// completes the work (the engine's, or a submitter's running it) may be
// waiting for this very CPU.
bool spinFor(const drm_npu_queue_completion *rec, uint64_t point, int64_t deadlineNs)
{
	for (;;) {
		if (__atomic_load_n(&rec->completed, __ATOMIC_ACQUIRE) >= point)
			return true;
		if (monotonicNs() >= deadlineNs)
			return false;
		sched_yield();
	}
}

// npurtDeviceScheduleSpin: polls without giving the CPU away.
bool spinHard(const drm_npu_queue_completion *rec, uint64_t point, int64_t deadlineNs)
{
	for (unsigned i = 0;; i++) {
		if (__atomic_load_n(&rec->completed, __ATOMIC_ACQUIRE) >= point)
			return true;
		// The clock is read now and then: under emulation it is slow.
		if (i % 64 == 0 && monotonicNs() >= deadlineNs)
			return false;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
}

// The schedule flag (npurtSetDeviceFlags) of the device a timeline is on.
unsigned scheduleOf(int ordinal)
{
	Runtime &rt = Runtime::instance();
	if (ordinal < 0 || ordinal >= rt.deviceCount())
		return npurtDeviceScheduleAuto;
	return rt.device(ordinal).flags() & npurtDeviceScheduleMask;
}

}  // namespace

int waitPoint(const Point &p, int64_t deadlineNs, bool spin)
{
	if (!p)
		return 0;
	drm_syncobj_timeline_wait w{};
	uint32_t handle = p.tl->syncobj;
	uint64_t point = p.value;
	w.handles = reinterpret_cast<uintptr_t>(&handle);
	w.points = reinterpret_cast<uintptr_t>(&point);
	w.count_handles = 1;
	if (const auto *rec = p.tl->record.load(std::memory_order_acquire)) {
		// Without spinning (a poll, a blocking-sync event or device),
		// spinFor only looks once.
		const unsigned mode =
		        spin ? scheduleOf(p.tl->ordinal) : npurtDeviceScheduleBlockingSync;
		if (mode == npurtDeviceScheduleSpin || mode == npurtDeviceScheduleYield) {
			// Polls until the deadline, asking the kernel every 10 ms
			// too: a record write that faulted is dropped.
			constexpr int64_t kAskKernelNs = 10'000'000;
			for (;;) {
				const int64_t until =
				        std::min(deadlineNs, monotonicNs() + kAskKernelNs);
				if (mode == npurtDeviceScheduleSpin ? spinHard(rec, p.value, until)
				                                    : spinFor(rec, p.value, until))
					return 0;
				if (until >= deadlineNs)
					break;
				w.timeout_nsec = 0;
				if (int r = p.tl->file->ioctl(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
				    r != -ETIME)
					return r;
			}
		} else if (spinFor(rec, p.value,
		                   std::min(deadlineNs,
		                            monotonicNs() + (mode == npurtDeviceScheduleAuto
		                                                     ? spinNs()
		                                                     : 0)))) {
			return 0;
		}
	}
	w.timeout_nsec = deadlineNs;
	// The kernel sleeps in jiffies, which under emulation can run ahead
	// of CLOCK_MONOTONIC: an -ETIME before the deadline waits again.
	int ret;
	do
		ret = p.tl->file->ioctl(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
	while (ret == -ETIME && monotonicNs() < deadlineNs);
	return ret;
}

namespace {
std::atomic<uint64_t> gStreamSerial{0};
}  // namespace

Stream::Stream(Context &ctx, unsigned flags, int priority, bool isDefault)
    : ctx_(ctx), flags_(flags), priority_(priority), isDefault_(isDefault),
      serial_(gStreamSerial.fetch_add(1, std::memory_order_relaxed) + 1)
{
	life_->stream = this;
}

Stream::~Stream()
{
	// Points of this stream outlive it in events; its completion records
	// do not.
	for (int cls = 0; cls < 2; cls++)
		if (timelines_[cls] && doneSlot_[cls])
			timelines_[cls]->record = nullptr;
	{
		std::unique_lock<std::mutex> lock(mutex_);
		stopping_ = true;
		cv_.notify_all();
	}
	// Deferred work still runs (and may batch), then what is batched is
	// submitted: destroying a stream does not drop its work.
	if (worker_.joinable())
		worker_.join();
	{
		std::scoped_lock lock(submitMutex_, mutex_);
		if (flushBatch("npurtStreamDestroy"))
			npurtGetLastError();
		flushCv_.notify_all();
	}
	if (flusher_.joinable())
		flusher_.join();
	// Staging buffers may still be read by queued copies: let them finish.
	for (int i = 0; i < Staging::kBuffers; i++) {
		waitPoint(staging_.use[i], INT64_MAX);
		ctx_.freePinned(staging_.buf[i]);
	}
	// The completion records are written until the last job ends.
	Point last = lastClass_ >= 0 ? Point{timelines_[lastClass_], last_[lastClass_]} : Point{};
	// Freed memory waiting for this stream's tasks waits for this point.
	ctx_.streamEnded(this, last);
	{
		std::lock_guard<std::mutex> lock(life_->mutex);
		life_->stream = nullptr;
		life_->last = last;
	}
	// A queue other streams share goes on writing its record: the slot
	// stays reserved until the context ends.
	for (int cls = 0; cls < 2; cls++)
		if (doneSlot_[cls] && (!timelines_[cls] || ctx_.closeQueue(*timelines_[cls])))
			ctx_.retireTimestampSlot(doneSlot_[cls], last);
	for (auto &w : waits_)
		if (w.temporary)
			syncobjDestroy(ctx_.node(), w.handle);
}

npurtError_t Stream::ensureTimeline(uint32_t engineClass)
{
	if (timelines_[engineClass])
		return npurtSuccess;
	drm_npu_queue_create qc{};
	qc.engine_class = engineClass;
	// The engine writes each job's end to the completion record: the
	// stream sees its work end, or fail, without a system call.
	if (!doneSlot_[engineClass])
		doneSlot_[engineClass] = ctx_.allocTimestampSlot();
	if (doneSlot_[engineClass]) {
		qc.flags = DRM_NPU_QUEUE_STATUS_WRITEBACK;
		qc.status_addr = doneSlot_[engineClass];
	}
	// Runtime priorities: 0 normal, -1 high, 1 low (lower is higher).
	qc.priority = priority_ < 0   ? DRM_NPU_PRIORITY_HIGH
	              : priority_ > 0 ? DRM_NPU_PRIORITY_LOW
	                              : DRM_NPU_PRIORITY_NORMAL;
	int ret = ctx_.node().ioctl(DRM_IOCTL_NPU_QUEUE_CREATE, &qc);
	if (ret == -EACCES && qc.priority == DRM_NPU_PRIORITY_HIGH) {
		// High priority is a privilege (CAP_SYS_NICE); a stream's
		// priority is a hint, as CUDA's: normal without it.
		qc.priority = DRM_NPU_PRIORITY_NORMAL;
		ret = ctx_.node().ioctl(DRM_IOCTL_NPU_QUEUE_CREATE, &qc);
	}
	if (ret == -ENOSPC) {
		// The context has all the queues the driver gives it: share
		// one, as CUDA's streams share hardware queues. Jobs of the
		// sharers run in submission order and a failure stops them
		// all; without a completion record of its own this stream asks
		// the kernel how its work stands.
		if (doneSlot_[engineClass])
			ctx_.freeTimestampSlot(doneSlot_[engineClass]);
		doneSlot_[engineClass] = 0;
		if (auto shared = ctx_.shareQueue(engineClass, qc.priority)) {
			timelines_[engineClass] = std::move(shared);
			return npurtSuccess;
		}
		return setError(npurtErrorMemoryAllocation,
		                "creating a device queue: the context has the driver's maximum "
		                "and none of its own to share");
	}
	if (ret)
		return setError(errorFromErrno(ret), osMessage("creating a device queue", ret));
	auto tl = std::make_shared<Timeline>();
	tl->file = ctx_.file();
	tl->queueId = qc.queue_id;
	tl->syncobj = qc.syncobj_handle;
	tl->engineClass = engineClass;
	tl->engineId = qc.engine_id;
	tl->ordinal = ctx_.ordinal();
	tl->priority = qc.priority;
	tl->record = completion(static_cast<int>(engineClass));
	ctx_.addQueue(tl);
	timelines_[engineClass] = std::move(tl);
	return npurtSuccess;
}

Point Stream::tail()
{
	std::scoped_lock lock(submitMutex_, mutex_);
	if (flushBatch("submitting batched work"))
		npurtGetLastError();  // the stream's failure: reported by its next call
	if (lastClass_ < 0)
		return {};
	return {timelines_[lastClass_], last_[lastClass_]};
}

uint64_t Stream::pendingMark()
{
	std::lock_guard<std::mutex> lock(mutex_);
	uint64_t count = appended_ + deferredTasks_;
	if (!count || (batch_.tasks.empty() && ready_.empty() && !deferredTasks_ && !submitting_ &&
	               deviceState() == DeviceState::Idle))
		return 0;
	return count;
}

uint64_t Stream::enqueuedTasks()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return appended_ + deferredTasks_;
}

npurtError_t Stream::settleWaits(const char *api)
{
	std::scoped_lock lock(submitMutex_, mutex_);
	// A failed stream runs nothing more: its tasks count as done.
	return failed_ || waits_.empty() ? npurtSuccess : flushWaits(api);
}

bool Stream::orderedAfter(uint64_t serial, uint64_t tasks)
{
	if (serial == serial_)
		return true;
	std::lock_guard<std::mutex> lock(mutex_);
	for (const auto &[s, t] : waitedFor_)
		if (s == serial)
			return t >= tasks;
	return false;
}

bool Stream::tasksDone(uint64_t count, bool block)
{
	// The flusher holds historyMutex_ across its SUBMIT ioctl: a poll
	// waiting for it would make every allocation behind a busy stream pay
	// for a system call it is not part of.
	auto take = [block](std::mutex &m) {
		return block ? std::unique_lock<std::mutex>(m)
		             : std::unique_lock<std::mutex>(m, std::try_to_lock);
	};
	std::unique_lock<std::mutex> lock = take(mutex_);
	if (!lock)
		return false;
	Point p;
	{
		std::unique_lock<std::mutex> history = take(historyMutex_);
		if (!history)
			return false;
		if (seq_ >= count) {
			// Past the record, a later task stands in: the stream's
			// tasks complete in order.
			uint64_t n = std::max(count, seq_ > kTaskHistory ? seq_ - kTaskHistory + 1
			                                                 : uint64_t{1});
			const TaskRecord &r = history_[n % kTaskHistory];
			if (r.point)
				p = {timelines_[r.engineClass], r.point};
		} else if (!failed_) {
			return false;  // still batched or deferred
		}
	}
	// A failed stream runs nothing more: its submitted jobs are what
	// remains.
	if (!p && failed_ && lastClass_ >= 0)
		p = {timelines_[lastClass_], last_[lastClass_]};
	if (!p)
		return true;
	if (const drm_npu_queue_completion *rec = completion(static_cast<int>(p.tl->engineClass)))
		return __atomic_load_n(&rec->completed, __ATOMIC_ACQUIRE) >= p.value;
	return waitPoint(p, 0, false) == 0;
}

bool Stream::waitTasks(uint64_t count, int64_t deadlineNs)
{
	while (!tasksDone(count)) {
		if (monotonicNs() >= deadlineNs)
			return false;
		// Deferred tasks join a batch once the host work ahead has run.
		if (waitIdle(deadlineNs, "waiting for freed memory")) {
			npurtGetLastError();
			return false;
		}
		if (waitPoint(tail(), deadlineNs, false) == -ETIME)
			return tasksDone(count);
	}
	return true;
}

Point Stream::pendingTail()
{
	std::scoped_lock lock(submitMutex_, mutex_);
	if (flushBatch("submitting batched work"))
		npurtGetLastError();  // the stream's failure: reported by its next call
	if (lastClass_ < 0 || deviceState() == DeviceState::Idle || failed_)
		return {};
	return {timelines_[lastClass_], last_[lastClass_]};
}

npurtError_t Stream::legacyOrder(const char *api)
{
	if (isDefault_ && anyCapture())
		if (npurtError_t err = captureForbidsLegacy(ctx_, api))
			return err;
	if (!isDefault_ && !blocking())
		return npurtSuccess;
	std::atomic<uint64_t> &mine = isDefault_ ? ctx_.defaultWork : ctx_.blockingWork;
	std::atomic<uint64_t> &other = isDefault_ ? ctx_.blockingWork : ctx_.defaultWork;
	mine.fetch_add(1, std::memory_order_relaxed);
	uint64_t seen = other.load(std::memory_order_acquire);
	if (seen == seenOther_.load(std::memory_order_relaxed))
		return npurtSuccess;
	seenOther_.store(seen, std::memory_order_relaxed);
	std::vector<Point> ahead;
	auto look = [this, &ahead](Stream *s) {
		if (s == this || (isDefault_ ? !s->blocking() : !s->isDefault()))
			return;
		if (Point p = s->pendingTail())
			ahead.push_back(std::move(p));
	};
	if (isDefault_)
		ctx_.forEachStream(look);
	else
		ctx_.withDefaultStream(look);
	if (ahead.empty())
		return npurtSuccess;
	std::scoped_lock lock(submitMutex_, mutex_);
	if (failed_)
		return setError(failed_, std::string(api) + ": " + failMessage_);
	// Batched work came before and must not wait.
	if (npurtError_t err = flushBatch(api))
		return err;
	for (const Point &p : ahead)
		if (npurtError_t err = pushWait({p.tl->syncobj, p.value, false}, api))
			return err;
	return npurtSuccess;
}

bool Stream::busy()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return !deferred_.empty() || workerBusy_;
}

bool Stream::idle()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return batch_.tasks.empty() && ready_.empty() && deferred_.empty() && !workerBusy_ &&
	       waits_.empty() && deviceState() == DeviceState::Idle;
}

std::string Stream::describeTask(const Timeline &tl, uint64_t point, uint32_t offset)
{
	// Tasks batched into one job share its point; the failing packet's
	// offset tells them apart (else the job's first task is named).
	uint64_t seq = 0;
	TaskInfo t;
	if (!findTask(tl.engineClass, point, offset, &seq, &t))
		return "the task at point " + std::to_string(point) +
		       " of its queue (no longer on record)";
	std::string task = "task " + std::to_string(seq) + " (" + t.what() + ")";
	if (t.graphNode)
		return task + ", graph node " + std::to_string(t.graphNode) +
		       " of a launched graph, made by " + t.api + " at " + t.site.str();
	return task + ", enqueued by " + t.api + " from " + t.site.str();
}

npurtError_t Stream::fail(npurtError_t code, const std::string &message, bool notify)
{
	bool first = failed_ == npurtSuccess;
	if (first) {
		failed_ = code;
		failMessage_ = message;
	}
	if (first && notify)
		notifyError(this, failed_, failMessage_);
	return setError(failed_, failMessage_);
}

// Looks at the queues' state; called with mutex_ held.
npurtError_t Stream::checkFailure(const char *api)
{
	if (failed_)
		return setError(failed_, std::string(api) + ": " + failMessage_);
	// Both queues may have failed (the second one because of the first):
	// report the task that came first in the stream.
	Timeline *failedTl = nullptr;
	drm_npu_queue_status st{};
	uint64_t firstSeq = UINT64_MAX;
	for (auto &t : timelines_) {
		if (!t)
			continue;
		drm_npu_queue_status qs;
		if (npurtError_t err = queueStatus(*t, api, &qs))
			return err;
		if (qs.state != DRM_NPU_QUEUE_ERROR)
			continue;
		uint64_t seq = UINT64_MAX - 1;
		findTask(t->engineClass, qs.error_point, qs.error_offset, &seq, nullptr);
		if (seq < firstSeq || !failedTl) {
			firstSeq = seq;
			failedTl = t.get();
			st = qs;
		}
	}
	if (failedTl) {
		Timeline *tl = failedTl;
		std::string msg = std::string(errorKind(st.error));
		if (st.error == -EFAULT)
			msg += " at device address " + hex(st.fault_addr);
		char where[64];
		std::snprintf(where, sizeof(where), "%p", static_cast<void *>(this));
		msg += " on stream " + std::string(where) + " (" + engineName(*tl) +
		       "): " + describeTask(*tl, st.error_point, st.error_offset) +
		       "; later work on the stream was cancelled (npurtStreamRecover resumes it)";
		fail(errorCode(st.error), msg, true);
		return setError(failed_, std::string(api) + ": " + failMessage_);
	}
	return npurtSuccess;
}

npurtError_t Stream::flushWaits(const char *api)
{
	if (npurtError_t err = flushBatch(api))
		return err;
	if (waits_.empty())
		return npurtSuccess;
	drm_npu_pkt_header nop{DRM_NPU_PKT_NOP, sizeof(drm_npu_pkt_header)};
	TaskInfo info;
	info.api = api;
	info.label = "wait for an event";
	info.op = -3;
	uint32_t cls = lastClass_ >= 0 ? lastClass_ : DRM_NPU_ENGINE_COPY;
	return submitNow(cls, &nop, sizeof(nop), info);
}

npurtError_t Stream::checkFailureLocked(const char *api)
{
	std::lock_guard<std::mutex> lock(mutex_);
	return checkFailure(api);
}

Stream::DeviceState Stream::deviceState() const
{
	if (lastClass_ < 0)
		return DeviceState::Idle;
	const drm_npu_queue_completion *rec = completion(lastClass_);
	if (!rec)
		return DeviceState::Unknown;
	uint64_t done = __atomic_load_n(&rec->completed, __ATOMIC_ACQUIRE);
	if (done < last_[lastClass_])
		return DeviceState::Busy;
	// The error was written before the point.
	return __atomic_load_n(&rec->error, __ATOMIC_RELAXED) ? DeviceState::Failed
	                                                      : DeviceState::Idle;
}

uint64_t Stream::jobsAhead(int engineClass) const
{
	const drm_npu_queue_completion *rec = completion(engineClass);
	if (!rec)
		return 0;
	uint64_t done = __atomic_load_n(&rec->completed, __ATOMIC_ACQUIRE);
	return done < last_[engineClass] ? last_[engineClass] - done : 0;
}

void Stream::append(uint32_t engineClass, const void *packet, uint32_t size, const TaskInfo &info)
{
	auto put = [this](const void *p, size_t n) { batch_.cmds.append(p, n); };
	appended_++;
	batch_.engineClass = static_cast<int>(engineClass);
	batch_.tasks.push_back(info);
	TaskInfo &t = batch_.tasks.back();
	t.cmdBegin = static_cast<uint32_t>(batch_.cmds.size());
	if (!profiling()) {
		put(packet, size);
		t.cmdEnd = static_cast<uint32_t>(batch_.cmds.size());
		return;
	}
	// Profiling brackets the task with two device timestamps.
	if (!t.queuedNs)
		t.queuedNs = static_cast<uint64_t>(monotonicNs());
	t.tsStart = ctx_.allocTimestampSlot();
	t.tsEnd = t.tsStart ? ctx_.allocTimestampSlot() : 0;
	if (!t.tsEnd) {
		ctx_.freeTimestampSlot(t.tsStart);
		t.tsStart = 0;
	}
	drm_npu_pkt_timestamp ts{};
	ts.hdr = {DRM_NPU_PKT_TIMESTAMP, sizeof(ts)};
	if (t.tsEnd) {
		ts.dst = t.tsStart;
		put(&ts, sizeof(ts));
		batch_.profiled = true;
	}
	put(packet, size);
	if (t.tsEnd) {
		ts.dst = t.tsEnd;
		put(&ts, sizeof(ts));
	}
	t.cmdEnd = static_cast<uint32_t>(batch_.cmds.size());
}

void Stream::dropJob(Batch &job)
{
	{
		// Dropped tasks keep their numbers (with no point: they never
		// run), so that later tasks' numbers still match appended_.
		std::lock_guard<std::mutex> lock(historyMutex_);
		if (history_.empty())
			history_.resize(kTaskHistory);
		auto cls = static_cast<uint32_t>(std::max(job.engineClass, 0));
		for (const auto &t : job.taskList()) {
			uint64_t seq = ++seq_;
			history_[seq % kTaskHistory] = {t, 0, cls};
		}
	}
	for (const auto &t : job.taskList()) {
		ctx_.freeTimestampSlot(t.tsStart);
		ctx_.freeTimestampSlot(t.tsEnd);
	}
	job.clear();
}

bool Stream::findTask(uint32_t engineClass, uint64_t point, uint32_t offset, uint64_t *seq,
                      TaskInfo *task)
{
	std::lock_guard<std::mutex> lock(historyMutex_);
	if (history_.empty())
		return false;
	const TaskInfo *found = nullptr;
	bool exact = false;
	// A job's tasks have consecutive numbers: scan back from the newest.
	uint64_t oldest = seq_ > kTaskHistory ? seq_ - kTaskHistory + 1 : 1;
	for (uint64_t n = seq_; n >= oldest && n; n--) {
		const TaskRecord &r = history_[n % kTaskHistory];
		if (r.point != point || r.engineClass != engineClass) {
			if (found)
				break;
			continue;
		}
		if (!exact) {
			found = &r.task;
			*seq = n;
			exact = offset >= r.task.cmdBegin && offset < r.task.cmdEnd;
		}
		if (r.task.cmdBegin == 0)
			break;  // the job's first task
	}
	if (found && task)
		*task = *found;
	return found;
}

const std::vector<TaskInfo> &Stream::Batch::taskList() const
{
	return step ? step->tasks : tasks;
}

const uint8_t *Stream::Batch::cmdData() const
{
	return step ? step->cmds.data() : cmds.data();
}

size_t Stream::Batch::cmdSize() const
{
	return step ? step->cmds.size() : cmds.size();
}

npurtError_t Stream::flushReady(const char *api, std::unique_lock<std::mutex> *unlocked)
{
	while (!ready_.empty()) {
		// Taken off first: the flusher lets go of mutex_ during the ioctl,
		// and launches may queue more meanwhile.
		Batch job = std::move(ready_.front());
		ready_.pop_front();
		if (npurtError_t err = submitJob(job, api, unlocked))
			return err;
	}
	return npurtSuccess;
}

npurtError_t Stream::flushBatch(const char *api, std::unique_lock<std::mutex> *unlocked)
{
	if (npurtError_t err = flushReady(api, unlocked))
		return err;
	if (batch_.tasks.empty())
		return npurtSuccess;
	// The batch's buffers alternate with the job's, so that neither is
	// reallocated in the steady state.
	std::swap(batch_, job_);
	return submitJob(job_, api, unlocked);
}

npurtError_t Stream::submitJob(Batch &job, const char *api, std::unique_lock<std::mutex> *unlocked)
{
	const TaskInfo &first = job.taskList().front();
	if (first.api && *first.api)
		api = first.api;
	if (failed_) {
		dropJob(job);
		return setError(failed_, std::string(api) + ": " + failMessage_);
	}
	auto cls = static_cast<uint32_t>(job.engineClass);
	if (npurtError_t err = ensureTimeline(cls)) {
		dropJob(job);
		return err;
	}
	fences_.clear();
	if (lastClass_ >= 0 && lastClass_ != static_cast<int>(cls))
		fences_.push_back({timelines_[lastClass_]->syncobj, 0, last_[lastClass_]});
	for (auto &w : waits_)
		fences_.push_back({w.handle, 0, w.point});
	size_t waitsTaken = waits_.size();

	drm_npu_submit s{};
	s.queue_id = timelines_[cls]->queueId;
	s.flags = job.callerWaits ? DRM_NPU_SUBMIT_CALLER_WAITS : 0;
	s.cmds_ptr = reinterpret_cast<uintptr_t>(job.cmdData());
	s.cmds_size = static_cast<uint32_t>(job.cmdSize());
	s.in_fence_count = static_cast<uint32_t>(fences_.size());
	s.in_fences_ptr = reinterpret_cast<uintptr_t>(fences_.data());
	os::Device &node = ctx_.node();
	const uint32_t engineId = timelines_[cls]->engineId;
	// The job's tasks go on record under historyMutex_ alone.
	auto record = [&](uint64_t point) {
		if (history_.empty())
			history_.resize(kTaskHistory);
		for (const auto &info : job.taskList()) {
			uint64_t seq = ++seq_;
			history_[seq % kTaskHistory] = {info, point, cls};
			if (!job.profiled || !info.tsEnd)
				continue;
			ProfiledTask pt;
			pt.task = info;
			pt.seq = seq;
			pt.engineClass = cls;
			pt.engineId = engineId;
			pt.stream = this;
			pt.ordinal = ctx_.ordinal();
			pt.ctx = &ctx_;
			profileTask(pt);
		}
	};
	// The flusher lets enqueuing threads append to the next batch while
	// the ioctl runs and while it records the job's tasks; submitMutex_
	// keeps everything else out. It holds historyMutex_ from before the
	// ioctl, so a fault report looking for the job waits for its tasks,
	// and lets it go before taking mutex_ again (the order is mutex_,
	// then historyMutex_).
	std::unique_lock<std::mutex> recording(historyMutex_, std::defer_lock);
	if (unlocked) {
		submitting_ = true;
		unlocked->unlock();
		recording.lock();
	}
	int ret = node.ioctl(DRM_IOCTL_NPU_SUBMIT, &s);
	bool recorded = false;
	if (unlocked) {
		if (!ret) {
			record(s.point);
			recorded = true;
		}
		recording.unlock();
		unlocked->lock();
	}
	// Until last_ holds the job's point, pendingMark() must not take the
	// stream for idle.
	struct Submitted {
		bool &flag;
		~Submitted() { flag = false; }
	} submitted{submitting_};
	if (ret == -EINVAL && job.taskList().size() > 1) {
		// The device refused a packet the runtime let through: submit the
		// tasks one by one, so the good ones run and the bad one is named.
		return splitJob(job, api);
	}
	if (ret) {
		std::string what = job.taskList().size() == 1
		                           ? job.taskList().front().what()
		                           : std::to_string(job.taskList().size()) + " tasks";
		dropJob(job);
		if (ret == -EIO)
			return checkFailure(api);
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": submitting " + what, ret));
	}
	for (size_t i = 0; i < waitsTaken; i++)
		if (waits_[i].temporary)
			syncobjDestroy(ctx_.node(), waits_[i].handle);
	waits_.erase(waits_.begin(), waits_.begin() + static_cast<std::ptrdiff_t>(waitsTaken));

	last_[cls] = s.point;
	lastClass_ = static_cast<int>(cls);
	if (!recorded) {
		recording.lock();
		record(s.point);
	}
	job.clear();
	return npurtSuccess;
}

npurtError_t Stream::splitJob(Batch &whole, const char *api)
{
	Batch one;
	npurtError_t first = npurtSuccess;
	for (TaskInfo t : whole.taskList()) {
		uint32_t begin = t.cmdBegin, end = t.cmdEnd;
		one.engineClass = whole.engineClass;
		one.cmds.clear();
		one.cmds.append(whole.cmdData() + begin, end - begin);
		t.cmdBegin = 0;
		t.cmdEnd = end - begin;
		one.tasks.assign(1, t);
		npurtError_t err = submitJob(one, api, nullptr);
		// A refused task fails the stream like a faulting one would: the
		// tasks after it must not run without it.
		if (err && !failed_)
			fail(err, npurtGetLastErrorMessage(), true);
		if (err && first == npurtSuccess)
			first = err;
	}
	// Its flags too: the buffers serve the next batch.
	whole.clear();
	if (first == npurtSuccess)
		return npurtSuccess;
	return setError(failed_ ? failed_ : first, std::string(api) + ": " + failMessage_);
}

npurtError_t Stream::submitNow(uint32_t engineClass, const void *packet, uint32_t size,
                               const TaskInfo &info, bool callerWaits)
{
	if (failed_)
		return setError(failed_, std::string(info.api) + ": " + failMessage_);
	if (!batch_.tasks.empty() && batch_.engineClass != static_cast<int>(engineClass))
		if (npurtError_t err = flushBatch(info.api))
			return err;
	append(engineClass, packet, size, info);
	batch_.callerWaits = callerWaits;
	return flushBatch(info.api);
}

void Stream::defer(std::function<void()> action, bool next)
{
	if (next && onOwnWorker())
		deferred_.insert(deferred_.begin() + static_cast<std::ptrdiff_t>(nextInserted_++),
		                 std::move(action));
	else
		deferred_.push_back(std::move(action));
	if (!worker_.joinable())
		worker_ = std::thread([this] { workerLoop(); });
	cv_.notify_all();
}

namespace {
thread_local bool tOnWorker = false;
}  // namespace

bool Stream::onWorker()
{
	return tOnWorker;
}

bool Stream::deferIfBusy(std::function<void()> action)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (deferred_.empty() && !workerBusy_)
		return false;
	defer(std::move(action));
	return true;
}

void Stream::workerLoop()
{
	tOnWorker = true;
	pthread_setname_np(pthread_self(), "npurt-hostfn");
	std::unique_lock<std::mutex> lock(mutex_);
	for (;;) {
		cv_.wait(lock, [this] { return stopping_ || !deferred_.empty(); });
		if (deferred_.empty())
			return;
		auto action = std::move(deferred_.front());
		deferred_.pop_front();
		nextInserted_ = 0;
		workerBusy_ = true;
		lock.unlock();
		action();
		lock.lock();
		workerBusy_ = false;
		cv_.notify_all();
	}
}

void Stream::flusherLoop()
{
	pthread_setname_np(pthread_self(), "npurt-flush");
	for (;;) {
		Point ahead;
		int cls = -1;
		uint64_t seen = 0;  // the stream's last point when the batch was looked at
		{
			std::unique_lock<std::mutex> lock(mutex_);
			flushCv_.wait(lock, [this] {
				return stopping_ || !batch_.tasks.empty() || !ready_.empty();
			});
			if (stopping_)
				return;  // the destructor submits what is left
			if (!ready_.empty()) {
				// Sealed jobs go to the kernel's queue at once: they
				// do not grow while the device works.
				lock.unlock();
				std::unique_lock<std::mutex> submitting(submitMutex_);
				lock.lock();
				if (flushReady("submitting a graph launch", &lock) && !failed_)
					fail(npurtPeekAtLastError(), npurtGetLastErrorMessage(),
					     true);
				npurtGetLastError();
				continue;
			}
			cls = lastClass_;
			seen = cls >= 0 ? last_[cls] : 0;
			DeviceState state = deviceState();
			if (state == DeviceState::Busy || state == DeviceState::Unknown) {
				// A deep batch goes in behind the last job while it waits.
				ahead = {timelines_[cls],
				         batch_.deep && seen > 1 ? seen - 1 : seen};
			} else if (gather_) {
				auto until = std::chrono::steady_clock::now() + kGather;
				flushCv_.wait_until(lock, until, [this] { return stopping_; });
				if (stopping_)
					return;
			}
		}
		// Bounded, so that a stream being destroyed is not held up.
		if (ahead &&
		    waitPoint(ahead, monotonicNs() + int64_t{20} * 1000000, false) == -ETIME)
			continue;
		std::unique_lock<std::mutex> submitting(submitMutex_);
		std::unique_lock<std::mutex> lock(mutex_);
		// Submitted meanwhile (a full batch, a synchronize): the batch now
		// has that to wait for, or is gone.
		if (batch_.tasks.empty() || lastClass_ != cls || (cls >= 0 && last_[cls] != seen))
			continue;
		if (flushBatch("submitting batched work", &lock) && !failed_)
			fail(npurtPeekAtLastError(), npurtGetLastErrorMessage(), true);
		npurtGetLastError();
	}
}

npurtError_t Stream::submit(uint32_t engineClass, const void *packet, uint32_t size,
                            const TaskInfo &info, bool callerWaits)
{
	const char *api = info.api;
	if (capturing()) {
		npurtError_t err = npurtSuccess;
		if (captureTask(engineClass, packet, size, info, callerWaits, &err))
			return err;
	}
	if (!tOnWorker)
		if (npurtError_t err = legacyOrder(api))
			return err;
	{
		std::unique_lock<std::mutex> lock(mutex_);
		if (failed_)
			return setError(failed_, std::string(api) + ": " + failMessage_);
		// A small copy or fill behind compute work joins it (kJoinCost).
		// Not one a caller waits for: those are submitted alone at once.
		const int before = batch_.tasks.empty() ? lastClass_ : batch_.engineClass;
		if (!callerWaits && before == DRM_NPU_ENGINE_COMPUTE &&
		    joinsCompute(engineClass, info))
			engineClass = DRM_NPU_ENGINE_COMPUTE;
		if ((!deferred_.empty() || workerBusy_) && !tOnWorker) {
			const auto *b = static_cast<const uint8_t *>(packet);
			TaskInfo later = info;
			if (profiling())
				later.queuedNs = static_cast<uint64_t>(monotonicNs());
			deferredTasks_++;
			defer([this, engineClass, cmds = std::vector<uint8_t>(b, b + size),
			       later]() {
				std::scoped_lock l(submitMutex_, mutex_);
				deferredTasks_--;
				if (submitNow(engineClass, cmds.data(),
				              static_cast<uint32_t>(cmds.size()), later) &&
				    !failed_)
					fail(npurtPeekAtLastError(), npurtGetLastErrorMessage(),
					     true);
			});
			return npurtSuccess;
		}
		// Batch only behind running work with nothing to wait for first;
		// an idle stream starts its task at once. (A task joining an open
		// batch needs no look at the device.)
		bool open = !batch_.tasks.empty();
		DeviceState state = open ? DeviceState::Unknown : deviceState();
		if (state == DeviceState::Failed)
			if (npurtError_t err = checkFailure(api))
				return err;
		// A burst: launches following each other with no host wait in
		// between (and less than a few ms apart) go to the flusher in
		// batches even when the device keeps up, so the launching thread
		// makes no system call; the first launch after a wait or a pause
		// is submitted at once.
		// The gap is measured from the last launch that opened a batch
		// or was submitted at once: launches onto an open batch need no
		// clock.
		bool hot = false;
		if (!open) {
			int64_t now = coarseNs();
			hot = burst_ && now - lastEnqueue_ <= kBurstGapNs;
			lastEnqueue_ = now;
		}
		const uint64_t cost = taskCost(info);
		const int cls = static_cast<int>(engineClass);
		const bool big = cost > kBatchMaxCost;
		bool batching = !callerWaits && !launchBlocking() && waits_.empty() &&
		                (open ? batch_.engineClass == cls : true);
		if (!big)
			batching = batching &&
			           (open || hot || !ready_.empty() || state == DeviceState::Busy);
		else
			batching = batching && lastClass_ == cls && jobsAhead(cls) >= 2;
		if (batching) {
			if (!open)
				gather_ = state != DeviceState::Busy;
			append(engineClass, packet, size, info);
			const uint64_t work = taskWork(info);
			batch_.work =
			        batch_.work > UINT64_MAX - work ? UINT64_MAX : batch_.work + work;
			batch_.deep = batch_.deep || big;
			// Full, or a deep batch whose first job ahead ended: submit
			// it now, with the locks taken in order. Else the flusher
			// submits it: a batch of small tasks on an idle engine runs
			// inside SUBMIT, which is the flusher's time to spend, not
			// the launching thread's.
			if (batch_.cmds.size() >= kBatchBytes ||
			    batch_.tasks.size() >= kBatchTasks || batch_.work >= kBatchMaxTotal ||
			    (batch_.deep && jobsAhead(cls) < 2)) {
				lock.unlock();
				std::scoped_lock both(submitMutex_, mutex_);
				return flushBatch(api);
			}
			if (batch_.tasks.size() == 1) {
				if (!flusher_.joinable())
					flusher_ = std::thread([this] { flusherLoop(); });
				flushCv_.notify_one();
			}
			return npurtSuccess;
		}
	}
	npurtError_t err;
	{
		std::scoped_lock both(submitMutex_, mutex_);
		err = submitNow(engineClass, packet, size, info, callerWaits);
		burst_ = !callerWaits;
	}
	if (!err && launchBlocking())
		return synchronize(-1, api);
	return err;
}

npurtError_t Stream::hostFunc(std::function<void(npurtError_t)> fn, bool afterFailure,
                              const TaskInfo &info, const npurtHostNodeParams *raw)
{
	if (capturing()) {
		npurtError_t err = npurtSuccess;
		if (captureHost(fn, afterFailure, info, raw, &err))
			return err;
	}
	if (npurtError_t err = legacyOrder(info.api))
		return err;
	std::scoped_lock lock(submitMutex_, mutex_);
	if (failed_)
		return setError(failed_, std::string(info.api) + ": " + failMessage_);
	if (deferred_.empty() && !workerBusy_)
		if (npurtError_t err = flushWaits(info.api))
			return err;
	defer([this, fn = std::move(fn), afterFailure, api = info.api] {
		runHost(fn, afterFailure, api);
	});
	return npurtSuccess;
}

void Stream::runHost(const std::function<void(npurtError_t)> &fn, bool afterFailure,
                     const char *api)
{
	Point p;
	{
		std::scoped_lock l(submitMutex_, mutex_);
		// Event waits queued ahead of it (a deferred npurtStreamWaitEvent)
		// become a job it waits for.
		if (flushWaits(api))
			npurtGetLastError();  // the failure stops fn just below
		if (lastClass_ >= 0)
			p = {timelines_[lastClass_], last_[lastClass_]};
	}
	waitPoint(p, INT64_MAX);
	npurtError_t status;
	{
		std::lock_guard<std::mutex> l(mutex_);
		status = checkFailure(api);
		if (status != npurtSuccess)
			npurtGetLastError();
	}
	// Like later device work, a host function after a failure does not
	// run; a stream callback is told the failure.
	if (status == npurtSuccess || afterFailure)
		fn(status);
}

npurtError_t Stream::waitIdle(int64_t deadlineNs, const char *api)
{
	std::unique_lock<std::mutex> lock(mutex_);
	while (!deferred_.empty() || workerBusy_) {
		if (deadlineNs == INT64_MAX) {
			cv_.wait(lock);
		} else {
			int64_t left = deadlineNs - monotonicNs();
			if (left <= 0 || cv_.wait_for(lock, std::chrono::nanoseconds(left)) ==
			                         std::cv_status::timeout)
				if (!deferred_.empty() || workerBusy_)
					return setError(npurtErrorTimeout,
					                std::string(api) +
					                        ": host functions on the stream "
					                        "did not finish in time");
		}
	}
	return npurtSuccess;
}

bool Stream::settled(const char *api, npurtError_t *result, Point *p)
{
	burst_ = false;  // the host looks: the next launch starts at once
	if ((*result = flushWaits(api)))
		return true;
	DeviceState state = deviceState();
	if (failed_ || state == DeviceState::Failed) {
		*result = checkFailure(api);
		return true;
	}
	if (state == DeviceState::Idle)
		return true;
	*result = state == DeviceState::Busy ? npurtErrorNotReady : npurtSuccess;
	*p = {timelines_[lastClass_], last_[lastClass_]};
	return false;
}

npurtError_t Stream::synchronize(int64_t timeoutMs, const char *api)
{
	if (capturing())
		return builder_ ? npurtSuccess
		                : captureRefuse(api, "synchronizing a capturing stream");
	if (npurtError_t err = captureForbids(api))
		return err;
	int64_t deadline = deadlineAfter(timeoutMs);
	if (npurtError_t err = waitIdle(deadline, api))
		return err;
	Point p;
	{
		std::scoped_lock lock(submitMutex_, mutex_);
		npurtError_t result;
		if (settled(api, &result, &p))
			return result;
	}
	int ret = waitPoint(p, deadline);
	if (ret == -ETIME)
		return setError(npurtErrorTimeout,
		                std::string(api) + ": the stream's work did not finish within " +
		                        std::to_string(timeoutMs) + " ms");
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": waiting", ret));
	std::lock_guard<std::mutex> lock(mutex_);
	if (!failed_ && deviceState() == DeviceState::Idle)
		return npurtSuccess;
	return checkFailure(api);
}

npurtError_t Stream::query(const char *api)
{
	if (capturing())
		return captureRefuse(api, "querying a capturing stream");
	if (busy())
		return npurtErrorNotReady;
	Point p;
	{
		std::scoped_lock lock(submitMutex_, mutex_);
		npurtError_t result;
		if (settled(api, &result, &p) || result == npurtErrorNotReady)
			return result;
	}
	int ret = waitPoint(p, 0);
	std::lock_guard<std::mutex> lock(mutex_);
	if (npurtError_t err = checkFailure(api))
		return err;
	if (ret == -ETIME)
		return npurtErrorNotReady;
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": waiting", ret));
	return npurtSuccess;
}

npurtError_t Stream::recover(const char *api)
{
	if (npurtError_t err = waitIdle(INT64_MAX, api))
		return err;
	// Everything submitted before the failure must have ended (cancelled
	// jobs end quickly); then the queues take work again.
	waitPoint(tail(), INT64_MAX);
	std::lock_guard<std::mutex> lock(mutex_);
	for (auto &tl : timelines_) {
		if (!tl)
			continue;
		drm_npu_queue_destroy r{};
		r.queue_id = tl->queueId;
		int ret = tl->file->ioctl(DRM_IOCTL_NPU_QUEUE_RESET, &r);
		if (ret)
			return setError(errorFromErrno(ret),
			                osMessage(std::string(api) + ": queue reset", ret));
	}
	// Nothing runs on the queues now: forget the failed jobs' errors.
	for (int cls = 0; cls < 2; cls++)
		if (drm_npu_queue_completion *rec = completion(cls))
			__atomic_store_n(&rec->error, 0, __ATOMIC_RELAXED);
	// Everything submitted has ended: later work must not take the failed
	// jobs as in-fences (it would be cancelled with their error).
	lastClass_ = -1;
	failed_ = npurtSuccess;
	failMessage_.clear();
	return npurtSuccess;
}

npurtError_t Stream::staging(Staging **out, const char *api)
{
	if (capturing())
		return captureRefuse(api, "a copy staged through pageable host memory (capture "
		                          "copies of device, pinned or registered memory)");
	for (auto &b : staging_.buf)
		if (!b.ptr)
			if (npurtError_t err = ctx_.allocPinned(Staging::kBufferSize, &b, api))
				return err;
	*out = &staging_;
	return npurtSuccess;
}

// Events.

npurtError_t Stream::recordNow(Event &ev, const char *api)
{
	// A record that cannot be submitted still stands for the work before
	// it: a record deferred behind a host function that meets the stream
	// failed meanwhile must report that failure, not success (found by
	// the soak).
	auto lastPoint = [this] {
		return lastClass_ >= 0 ? Point{timelines_[lastClass_], last_[lastClass_]} : Point{};
	};
	if (npurtError_t err = flushWaits(api)) {
		ev.resolve(lastPoint(), &ctx_, 0);
		return err;
	}
	if (!ev.timing()) {
		ev.resolve(lastPoint(), &ctx_, 0);
		return npurtSuccess;
	}
	uint64_t slot = ev.slotFor(ctx_);
	if (!slot) {
		ev.resolve({}, &ctx_, 0);
		return setError(npurtErrorHostMemoryAllocation,
		                std::string(api) + ": no memory for the event's timestamp");
	}
	drm_npu_pkt_timestamp t{};
	t.hdr = {DRM_NPU_PKT_TIMESTAMP, sizeof(t)};
	t.dst = slot;
	TaskInfo info;
	info.api = api;
	info.label = "event timestamp";
	info.op = -3;
	uint32_t cls = lastClass_ >= 0 ? lastClass_ : DRM_NPU_ENGINE_COPY;
	if (npurtError_t err = submitNow(cls, &t, sizeof(t), info)) {
		// The event stays usable, without a timestamp.
		ev.resolve(lastPoint(), &ctx_, 0);
		return err;
	}
	ev.resolve({timelines_[cls], last_[cls]}, &ctx_, slot);
	return npurtSuccess;
}

npurtError_t Stream::record(Event &ev, const char *api)
{
	if (capturing()) {
		npurtError_t err = npurtSuccess;
		if (captureRecord(ev, api, &err))
			return err;
	}
	// On the legacy default stream a record also covers the blocking
	// streams' work before it (and theirs the default stream's), as in
	// CUDA: a stop event on NULL completes after every stream's work.
	if (npurtError_t err = legacyOrder(api))
		return err;
	std::scoped_lock lock(submitMutex_, mutex_);
	if (failed_)
		return setError(failed_, std::string(api) + ": " + failMessage_);
	ev.setPending(this);
	ev.setOrder(serial_, appended_ + deferredTasks_);
	if (!deferred_.empty() || workerBusy_) {
		defer([this, &ev, api]() {
			std::scoped_lock l(submitMutex_, mutex_);
			if (recordNow(ev, api))
				npurtGetLastError();
		});
		return npurtSuccess;
	}
	return recordNow(ev, api);
}

npurtError_t Stream::wait(Event &ev, const char *api)
{
	{
		npurtError_t err = npurtSuccess;
		if (captureWait(ev, api, &err))
			return err;
	}
	// What the wait orders this stream after, for the memory pools (noted
	// before the wait is in place: a pool reads it only for requests
	// enqueued after this call returns).
	uint64_t srcSerial = 0, srcTasks = 0;
	ev.order(&srcSerial, &srcTasks);
	if (srcSerial && srcSerial != serial_) {
		std::lock_guard<std::mutex> lock(mutex_);
		auto it = std::ranges::find_if(
		        waitedFor_, [srcSerial](const auto &w) { return w.first == srcSerial; });
		if (it == waitedFor_.end()) {
			// Forgetting a dependency only delays reuse: bounded.
			if (waitedFor_.size() >= kWaitedForMax)
				waitedFor_.erase(waitedFor_.begin());
			waitedFor_.emplace_back(srcSerial, srcTasks);
		} else {
			it->second = std::max(it->second, srcTasks);
		}
	}
	if (std::shared_ptr<RecordTicket> t = ev.pendingRecord()) {
		// The record is queued behind a host function on its stream: the
		// caller does not wait for it (CUDA's never does). Later work
		// here goes behind a task of this stream's worker that takes
		// the point once the record has happened.
		std::scoped_lock lock(submitMutex_, mutex_);
		if (failed_)
			return setError(failed_, std::string(api) + ": " + failMessage_);
		if (npurtError_t err = flushBatch(api))
			return err;
		defer([this, t, api] {
			Point p = t->wait();
			std::scoped_lock l(submitMutex_, mutex_);
			if (p && !failed_ && addWait(p, api))
				fail(npurtPeekAtLastError(), npurtGetLastErrorMessage(), true);
		});
		return npurtSuccess;
	}
	if (const auto &fence = ev.interprocess()) {
		// The latest record of any process sharing the event, as its
		// fence holds it now.
		std::scoped_lock lock(submitMutex_, mutex_);
		if (failed_)
			return setError(failed_, std::string(api) + ": " + failMessage_);
		if (npurtError_t err = flushBatch(api))
			return err;
		return addFenceWait(*fence->file, fence->syncobj, 0, api);
	}
	Stream *src = nullptr;
	uint64_t slot = 0;
	Context *evCtx = nullptr;
	Point p = ev.point(&src, &slot, &evCtx, INT64_MAX);
	if (!p)
		return npurtSuccess;  // never recorded, or nothing to wait for
	std::scoped_lock lock(submitMutex_, mutex_);
	if (failed_)
		return setError(failed_, std::string(api) + ": " + failMessage_);
	// Batched work came before the wait and must not wait for the event.
	if (npurtError_t err = flushBatch(api))
		return err;
	return addWait(p, api);
}

npurtError_t Stream::addWait(const Point &p, const char *api)
{
	if (p.tl->file.get() == &ctx_.node())
		return pushWait({p.tl->syncobj, p.value, false}, api);
	return addFenceWait(*p.tl->file, p.tl->syncobj, p.value, api);
}

npurtError_t Stream::pushWait(const PendingWait &w, const char *api)
{
	if (!w.temporary)
		for (PendingWait &x : waits_)
			if (!x.temporary && x.handle == w.handle) {
				x.point = std::max(x.point, w.point);
				return npurtSuccess;
			}
	waits_.push_back(w);
	// One fence of a job is kept for the order across engine classes
	// (submitJob); the job that carries the waits goes to the same queue
	// as the next one, so that runs after it.
	if (waits_.size() < DRM_NPU_MAX_IN_FENCES - 1)
		return npurtSuccess;
	return flushWaits(api);
}

npurtError_t Stream::addFenceWait(os::Device &from, uint32_t syncobj, uint64_t point,
                                  const char *api)
{
	uint32_t local = 0;
	int ret = syncobjCreate(ctx_.node(), &local);
	if (!ret)
		ret = carryFence(from, syncobj, point, ctx_.node(), local);
	if (ret) {
		if (local)
			syncobjDestroy(ctx_.node(), local);
		return setError(
		        errorFromErrno(ret),
		        osMessage(std::string(api) + ": carrying the event to another device",
		                  ret));
	}
	return pushWait({local, 0, true}, api);
}

Event::~Event()
{
	if (slotCtx_)
		slotCtx_->freeTimestampSlot(slot_);
	if (exportFd_ >= 0)
		close(exportFd_);
}

Point RecordTicket::wait()
{
	std::unique_lock<std::mutex> lock(mutex);
	cv.wait(lock, [this] { return done; });
	return point;
}

void Event::afterRecord(std::function<void()> f)
{
	Context *pendingCtx = nullptr;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		if (pending_ && stream_)
			pendingCtx = &stream_->ctx();
	}
	auto run = [this, f = std::move(f)] {
		Stream *s = nullptr;
		uint64_t slot = 0;
		Context *c = nullptr;
		point(&s, &slot, &c, INT64_MAX);
		f();
	};
	if (pendingCtx)
		pendingCtx->reap(run);
	else
		run();
}

void Event::setPending(Stream *s)
{
	std::lock_guard<std::mutex> lock(mutex_);
	capture_.reset();
	capNodes_.clear();
	pending_ = true;
	recorded_ = true;
	stream_ = s;
	ticket_ = std::make_shared<RecordTicket>();
}

void Event::resolve(Point p, Context *ctx, uint64_t slot)
{
	std::lock_guard<std::mutex> lock(mutex_);
	point_ = std::move(p);
	pending_ = false;
	(void)ctx;
	(void)slot;
	if (ipc_) {
		// The record, for every process sharing the event: the fence of
		// the point, or a signalled one when there is nothing to wait for.
		int ret;
		if (point_) {
			ret = carryFence(*point_.tl->file, point_.tl->syncobj, point_.value,
			                 *ipc_->file, ipc_->syncobj);
		} else {
			drm_syncobj_array a{};
			a.handles = reinterpret_cast<uintptr_t>(&ipc_->syncobj);
			a.count_handles = 1;
			ret = ipc_->file->ioctl(DRM_IOCTL_SYNCOBJ_SIGNAL, &a);
		}
		// Cannot fail for a live syncobj; if it did, this process's own
		// waits still see the point, which they check as well.
		(void)ret;
	}
	if (ticket_) {
		std::lock_guard<std::mutex> l(ticket_->mutex);
		ticket_->point = point_;
		ticket_->done = true;
		ticket_->cv.notify_all();
		ticket_.reset();
	}
	cv_.notify_all();
}

std::shared_ptr<RecordTicket> Event::pendingRecord()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return pending_ ? ticket_ : nullptr;
}

void Event::setOrder(uint64_t serial, uint64_t tasks)
{
	std::lock_guard<std::mutex> lock(mutex_);
	orderSerial_ = serial;
	orderTasks_ = tasks;
}

void Event::order(uint64_t *serial, uint64_t *tasks)
{
	std::lock_guard<std::mutex> lock(mutex_);
	*serial = orderSerial_;
	*tasks = orderTasks_;
}

uint64_t Event::slotFor(Context &ctx)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (slotCtx_ != &ctx) {
		if (slotCtx_)
			slotCtx_->freeTimestampSlot(slot_);
		slot_ = ctx.allocTimestampSlot();
		slotCtx_ = slot_ ? &ctx : nullptr;
	}
	if (slot_)
		*reinterpret_cast<volatile uint64_t *>(slot_) = 0;
	return slot_;
}

void Event::forgetContext(Context *ctx)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (slotCtx_ == ctx) {
		slotCtx_ = nullptr;
		slot_ = 0;
	}
}

bool Event::recorded()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return recorded_;
}

Point Event::point(Stream **stream, uint64_t *slot, Context **ctx, int64_t deadlineNs)
{
	std::unique_lock<std::mutex> lock(mutex_);
	while (pending_) {
		if (deadlineNs == INT64_MAX) {
			cv_.wait(lock);
		} else {
			int64_t left = deadlineNs - monotonicNs();
			if (left <= 0)
				break;
			cv_.wait_for(lock, std::chrono::nanoseconds(left));
		}
	}
	*stream = stream_;
	*slot = slot_;
	*ctx = slotCtx_;
	return point_;
}

namespace {

// Waits for the fence of an interprocess event's syncobj until deadlineNs.
int waitFence(const Timeline &fence, int64_t deadlineNs)
{
	drm_syncobj_wait w{};
	w.handles = reinterpret_cast<uintptr_t>(&fence.syncobj);
	w.count_handles = 1;
	w.timeout_nsec = deadlineNs;
	int ret;
	do
		ret = fence.file->ioctl(DRM_IOCTL_SYNCOBJ_WAIT, &w);
	while (ret == -ETIME && deadlineNs > 0 && monotonicNs() < deadlineNs);
	return ret;
}

}  // namespace

npurtError_t Event::makeInterprocess(Context &ctx, const char *api)
{
	drm_syncobj_create c{};
	c.flags = DRM_SYNCOBJ_CREATE_SIGNALED;  // never recorded: complete
	if (int ret = ctx.node().ioctl(DRM_IOCTL_SYNCOBJ_CREATE, &c))
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": creating the event's fence", ret));
	auto tl = std::make_shared<Timeline>();
	tl->file = ctx.file();
	tl->syncobj = c.handle;
	tl->ordinal = ctx.ordinal();
	ipc_ = std::move(tl);
	return npurtSuccess;
}

npurtError_t Event::exportInterprocess(int *fd, uint64_t *inode, const char *api)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (exportFd_ < 0) {
		drm_syncobj_handle h{};
		h.handle = ipc_->syncobj;
		h.fd = -1;
		if (int ret = ipc_->file->ioctl(DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &h))
			return setError(errorFromErrno(ret),
			                osMessage(std::string(api) + ": exporting the event", ret));
		exportFd_ = h.fd;
		exportInode_ = descriptorInode(h.fd);
	}
	*fd = exportFd_;
	*inode = exportInode_;
	return npurtSuccess;
}

namespace {

// After the point has completed: whether the work up to it failed. Jobs
// after a queue's first failure are cancelled, so the point failed when
// its queue's first error is at or before it. A timeline's fence does not
// carry the error (its point is a dma_fence_chain link), hence the queue's
// status: without it an event recorded on a stream destroyed before anyone
// looked at its failure synchronised with npurtSuccess (found by the
// soak). IPC events hold another process's fence and cannot ask.
npurtError_t pointFailure(const Point &p, const char *api)
{
	if (!p)
		return npurtSuccess;
	// The common case needs no system call: the completion record says the
	// point's own job was the last to end, and ended well (a job after a
	// failure ends cancelled, unless the queue was recovered in between,
	// where the kernel's status says the same).
	if (const auto *rec = p.tl->record.load(std::memory_order_acquire)) {
		uint64_t done = __atomic_load_n(&rec->completed, __ATOMIC_ACQUIRE);
		if (done == p.value && !__atomic_load_n(&rec->error, __ATOMIC_ACQUIRE))
			return npurtSuccess;
	}
	drm_npu_queue_status qs;
	if (npurtError_t err = queueStatus(*p.tl, api, &qs))
		return err;
	if (qs.state != DRM_NPU_QUEUE_ERROR || !qs.error_point || qs.error_point > p.value)
		return npurtSuccess;
	return setError(errorCode(qs.error),
	                std::string(api) + ": the work the event recorded failed: " +
	                        errorKind(qs.error) + " (" + engineName(*p.tl) + ")");
}

}  // namespace

npurtError_t Event::query(const char *api)
{
	if (npurtError_t err = checkNotCaptured(api))
		return err;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		if (pending_)
			return npurtErrorNotReady;
	}
	int ret;
	Point p;
	if (ipc_) {
		ret = waitFence(*ipc_, 0);
	} else {
		Stream *s = nullptr;
		uint64_t slot = 0;
		Context *c = nullptr;
		p = point(&s, &slot, &c, 0);
		ret = waitPoint(p, 0);
	}
	if (ret == -ETIME)
		return npurtErrorNotReady;
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": waiting", ret));
	return pointFailure(p, api);
}

npurtError_t Event::synchronize(int64_t timeoutMs, const char *api)
{
	if (npurtError_t err = checkNotCaptured(api))
		return err;
	if (npurtError_t err = captureForbids(api))
		return err;
	int64_t deadline = deadlineAfter(timeoutMs);
	Stream *s = nullptr;
	uint64_t slot = 0;
	Context *c = nullptr;
	Point p = point(&s, &slot, &c, deadline);
	{
		std::lock_guard<std::mutex> lock(mutex_);
		if (pending_)
			return setError(npurtErrorTimeout,
			                std::string(api) + ": the event was not recorded in time");
	}
	// A blocking-sync event sleeps at once, whatever the device's flags.
	int ret = ipc_ ? waitFence(*ipc_, deadline)
	               : waitPoint(p, deadline, !(flags_ & npurtEventBlockingSync));
	if (ret == -ETIME)
		return setError(npurtErrorTimeout, std::string(api) +
		                                           ": the event did not complete within " +
		                                           std::to_string(timeoutMs) + " ms");
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": waiting", ret));
	return ipc_ ? npurtSuccess : pointFailure(p, api);
}

Stream *createStreamForContext(Context &ctx, unsigned flags, int priority, bool isDefault)
{
	auto *s = new Stream(ctx, flags, priority, isDefault);
	ctx.addStream(s);
	std::lock_guard<std::mutex> lock(gHandleMutex);
	gStreams.insert(s);
	return s;
}

namespace {

// Takes the stream's handle away: false if another call did first.
bool unregisterStream(Stream *s)
{
	std::lock_guard<std::mutex> lock(gHandleMutex);
	if (!gStreams.erase(s))
		return false;
	gStreamGeneration.fetch_add(1, std::memory_order_acq_rel);
	return true;
}

// The rest of a destruction once the handle is gone: off the context's
// list, then deleted (after its work is submitted and its host functions
// have run: ~Stream).
void endStream(Stream *s)
{
	s->ctx().removeStream(s);
	{
		// A fault monitor pass that listed the stream ends first.
		std::unique_lock<std::shared_mutex> barrier(gStreamUse);
	}
	delete s;
}

}  // namespace

npurtError_t destroyStreamHandle(Stream *s, const char *api)
{
	if (s->capturing())
		s->abandonCapture();
	if (!unregisterStream(s))
		return setError(npurtErrorInvalidHandle,
		                std::string(api) + ": the stream is being destroyed already");
	if (!s->hasDeferredWork()) {
		endStream(s);
		return npurtSuccess;
	}
	// Host functions queued: they may wait for anything (even for this
	// call to return), so the destruction goes on in a thread of its own;
	// the context waits for it before it ends (Context::reap). The stream
	// stays on the context's list until they have run, so that
	// npurtDeviceSynchronize waits for them as cudaDeviceSynchronize does
	// (off the list first, a synchronize could return before the last).
	Context &ctx = s->ctx();
	ctx.reap([s] {
		s->drainHostWork("npurtStreamDestroy");
		endStream(s);
	});
	return npurtSuccess;
}

void destroyStreamForContext(Stream *s)
{
	if (s->capturing())
		s->abandonCapture();
	unregisterStream(s);
	endStream(s);
}

namespace {

// The calling thread's per-thread default streams (npurtStreamPerThread),
// one per context it used, destroyed when the thread exits. A context's
// destruction destroys them with its other streams: an entry is checked
// against the live streams whenever some stream was destroyed, by serial,
// since a later stream (the next context's default stream, say) may live
// at a destroyed one's address, and a context at a destroyed one's.
class PerThreadStreams {
public:
	~PerThreadStreams()
	{
		for (auto &e : entries_)
			if (live(e))
				destroyStreamForContext(e.stream);
	}
	Stream *get(Context &c)
	{
		const uint64_t generation = gStreamGeneration.load(std::memory_order_acquire);
		for (auto &e : entries_) {
			if (e.ctx != &c)
				continue;
			if (e.generation == generation || live(e)) {
				e.generation = generation;
				return e.stream;
			}
			e = make(c);
			return e.stream;
		}
		entries_.push_back(make(c));
		return entries_.back().stream;
	}

private:
	struct Entry {
		Context *ctx;
		Stream *stream;
		uint64_t serial;
		uint64_t generation;
	};
	static bool live(const Entry &e)
	{
		std::lock_guard<std::mutex> lock(gHandleMutex);
		return gStreams.count(e.stream) != 0 && e.stream->serial() == e.serial;
	}
	static Entry make(Context &c)
	{
		Stream *st = createPerThread(c);
		return {&c, st, st->serial(), gStreamGeneration.load(std::memory_order_acquire)};
	}
	static Stream *createPerThread(Context &c)
	{
		// Blocking, as CUDA's: it orders against the legacy default stream.
		Stream *st = createStreamForContext(c, npurtStreamDefault, 0, false);
		st->markPerThread();
		return st;
	}
	std::vector<Entry> entries_;
};

}  // namespace

npurtError_t resolveStream(npurtStream_t handle, Stream **out, const char *api)
{
	if (!handle || handle == npurtStreamLegacy || handle == npurtStreamPerThread) {
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		if (handle == npurtStreamPerThread) {
			thread_local PerThreadStreams perThread;
			*out = perThread.get(*c);
			return npurtSuccess;
		}
		npurtError_t err = npurtSuccess;
		*out = c->defaultStream(&err);
		return err;
	}
	// Launch loops name the same stream over and over: the thread's last
	// validated handle answers until some stream is destroyed.
	struct LastStream {
		uint64_t generation = UINT64_MAX;
		npurtStream_t handle = nullptr;
	};
	thread_local LastStream last;
	uint64_t generation = gStreamGeneration.load(std::memory_order_acquire);
	if (last.handle == handle && last.generation == generation) {
		*out = static_cast<Stream *>(handle);
		return npurtSuccess;
	}
	std::lock_guard<std::mutex> lock(gHandleMutex);
	if (gStreams.count(handle))
		last = {generation, handle};
	else
		return setError(npurtErrorInvalidHandle,
		                std::string(api) + ": stream " +
		                        hex(reinterpret_cast<uint64_t>(handle)) +
		                        " is not a live stream (destroyed, or not made by "
		                        "npurtStreamCreate)");
	*out = static_cast<Stream *>(handle);
	return npurtSuccess;
}

void forEachLiveStream(const std::function<void(Stream *)> &f)
{
	std::shared_lock<std::shared_mutex> use(gStreamUse);
	std::vector<Stream *> live;
	{
		std::lock_guard<std::mutex> lock(gHandleMutex);
		live.reserve(gStreams.size());
		for (const npurtStream_st *s : gStreams)
			live.push_back(const_cast<Stream *>(static_cast<const Stream *>(s)));
	}
	for (Stream *s : live)
		f(s);
}

void registerEvent(Event *ev)
{
	std::lock_guard<std::mutex> lock(gHandleMutex);
	gEvents.insert(ev);
}

void forgetContextInEvents(Context *ctx)
{
	std::lock_guard<std::mutex> lock(gHandleMutex);
	for (const npurtEvent_st *e : gEvents)
		const_cast<Event *>(static_cast<const Event *>(e))->forgetContext(ctx);
}

bool unregisterEvent(Event *ev)
{
	std::lock_guard<std::mutex> lock(gHandleMutex);
	return gEvents.erase(ev) == 1;
}

npurtError_t resolveEvent(npurtEvent_t handle, Event **out, const char *api)
{
	std::lock_guard<std::mutex> lock(gHandleMutex);
	if (!handle || !gEvents.count(handle))
		return setError(npurtErrorInvalidHandle,
		                std::string(api) + ": event " +
		                        hex(reinterpret_cast<uint64_t>(handle)) +
		                        " is not a live event (NULL, destroyed, or not made by "
		                        "npurtEventCreate)");
	*out = static_cast<Event *>(handle);
	return npurtSuccess;
}

}  // namespace npurt

// Streams and events: ordered device work, its completion and its faults.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "context.h"
#include "npu_drm.h"
#include "npurt/npurt.h"

struct npurtStream_st {};
struct npurtEvent_st {};

namespace npurt {

// One kernel queue (of one engine class) and its timeline syncobj. Shared
// by the stream and the events that refer to its points; the queue and
// syncobj are destroyed with the last reference.
struct Timeline {
	std::shared_ptr<os::Device> file;
	uint32_t queueId = 0;
	uint32_t syncobj = 0;
	uint32_t engineClass = 0;
	uint32_t engineId = 0;
	int ordinal = 0;
	uint32_t priority = 0;  // drm_npu_priority
	// Streams using the queue besides its creator, and whether its creator
	// is gone and no stream may join (Context::queueMutex_ guards both).
	int sharers = 0;
	bool closed = false;
	// The queue's completion record while its stream lives (waits spin on
	// it briefly before they sleep); null without one.
	std::atomic<const drm_npu_queue_completion *> record{nullptr};
	~Timeline();
};

// A point on a timeline; an empty point is complete.
struct Point {
	std::shared_ptr<Timeline> tl;
	uint64_t value = 0;
	explicit operator bool() const { return tl && value; }
};

// Where an API call came from: a call site given with npurtSetCallSite
// (interned: the text lives as long as the process), else the caller's
// return address, resolved with dladdr only when a report needs it.
struct CallSite {
	const std::string *text = nullptr;
	const void *returnAddress = nullptr;
	std::string str() const;
};

struct TaskInfo;
// What the device's time for a task grows with (bytes, or a GEMM's
// multiply-adds), as the driver counts it.
uint64_t taskCost(const TaskInfo &t);
// A job whose tasks cost at most this in all is small: the driver may run
// it inside SUBMIT when the engine is idle (NPU_DIRECT_MAX_COST).
constexpr uint64_t kBatchMaxCost = 64 << 10;
// A copy or fill costing at most this, next to compute work of its stream
// (or graph), runs on the compute engine with it (which runs every packet
// type): moving it to the copy engine would cost a fence between engines,
// more than the copy itself under emulation.
constexpr uint64_t kJoinCost = 64 << 10;
// Whether a task of this engine class may join compute work beside it.
bool joinsCompute(uint32_t engineClass, const TaskInfo &t);

// What a task was, for fault reports and the profiler. Plain data filled
// on every enqueue; the text is made only when a report needs it.
struct TaskInfo {
	const char *api = "";  // the API call that enqueued it
	const char *label = "";  // "copy host (pinned) -> device", "fill", ...
	CallSite site;  // where the API call came from
	uint64_t m = 0, n = 0, k = 0;  // ops: the shape
	uint64_t value = 0;  // fills: the byte
	uint64_t bytes = 0;
	uint64_t runs = 0;  // strided copies: pieces the engine moves one by one
	uint64_t queuedNs = 0;  // profiling: host CLOCK_MONOTONIC at enqueue
	uint64_t tsStart = 0;  // profiling: timestamp slots, 0 if none
	uint64_t tsEnd = 0;
	uint32_t cmdBegin = 0;  // its packets: [cmdBegin, cmdEnd) of the job
	uint32_t cmdEnd = 0;
	uint32_t axis = 0;
	uint32_t graphNode = 0;  // launched by a graph: the node's number
	int16_t op = -1;  // npurtOpKind, or -1 copy, -2 fill, -3 other
	uint8_t dtype = 0, outDtype = 0;  // ops

	// "copy host (pinned) -> device 4096 bytes", "op gemm f32 64x64x64".
	std::string what() const;
};

// A task as the profiler keeps it: with where and when it ran.
struct ProfiledTask {
	TaskInfo task;
	uint64_t seq = 0;  // task number on its stream
	uint32_t engineClass = 0;
	uint32_t engineId = 0;
	const void *stream = nullptr;
	int ordinal = 0;
	Context *ctx = nullptr;  // owner of the timestamp slots
	uint64_t startValue = 0;  // the timestamps, once the slots are gone
	uint64_t endValue = 0;
};

class Event;
class Graph;
class GraphNode;
struct Capture;
struct GraphPlan;
struct PlanStep;
// Events a deferred graph launch made pending (see Stream::runPlan).
using MarkedEvents = std::vector<Event *>;

// Names of npurtOpKind and npurtDataType values.
extern const char *const kOpNames[16];
extern const char *const kTypeNames[4];

// Where the current API call comes from: set by npurtSetCallSite for the
// next enqueue, else the caller's return address.
CallSite takeCallSite(void *returnAddress);
// The same without using it up: an allocation made on the way to the
// enqueue the site was set for (an op's output) is named by it too.
CallSite peekCallSite(void *returnAddress);
void setCallSite(const char *file, int line, const char *function);
// npurtCallSiteRegister / npurtSetCallSiteId: a call site interned once and
// named by a number after; false for a number never handed out.
npurtError_t registerCallSite(const char *file, int line, const char *function, uint64_t *id);
bool setCallSiteId(uint64_t id);

// f(s) for every live stream, each kept alive during its call (for the
// fault monitor; f must not destroy streams).
void forEachLiveStream(const std::function<void(Stream *)> &f);

// A stream as markers of other contexts see it (peer access: freed memory
// of a context its stream reaches waits for its work): the stream while
// it lives, then the point its last work ends at. The stream's end takes
// the mutex; a marker holds it while it asks the stream.
struct StreamLife {
	std::mutex mutex;
	Stream *stream = nullptr;
	Point last;
};

class Stream : public npurtStream_st {
public:
	// A batch this large is submitted even while the work ahead of it
	// runs (well under DRM_NPU_MAX_CMDS_SIZE; about 700 ops), and so is
	// one of this many tasks (half the task history, so a failing job's
	// tasks are still on record when the failure is seen).
	static constexpr size_t kBatchBytes = 64 << 10;
	static constexpr size_t kBatchTasks = 1024;

	Stream(Context &ctx, unsigned flags, int priority, bool isDefault);
	~Stream();
	Stream(const Stream &) = delete;
	Stream &operator=(const Stream &) = delete;

	Context &ctx() { return ctx_; }
	// A number no other stream of the process ever has (the pools'
	// StreamId: a pointer may be reused by the next stream).
	uint64_t serial() const { return serial_; }
	unsigned flags() const { return flags_; }
	int priority() const { return priority_; }
	bool isDefault() const { return isDefault_; }
	// A thread's npurtStreamPerThread stream: not the user's to destroy.
	bool perThread() const { return perThread_; }
	void markPerThread() { perThread_ = true; }
	// A hidden stream building a graph's node (buildNode): nothing runs
	// on it, and device-wide synchronisation passes it by.
	void markBuilder() { builder_ = true; }

	// Enqueues one task (a packet) on the engine class; runs after every
	// earlier task of the stream. While the stream's device work is still
	// running, tasks gather into a batch that becomes one job: submitted
	// when the work ahead of it ends (by the stream's flusher thread), when
	// it is full, or when anything needs its point (events, waits,
	// synchronisation). On an idle stream a task is submitted at once.
	// callerWaits: the caller waits for the task right after (a
	// synchronous API): it is submitted at once, and the driver may run
	// it in the calling thread.
	npurtError_t submit(uint32_t engineClass, const void *packet, uint32_t size,
	                    const TaskInfo &info, bool callerWaits = false);
	// Runs fn(status) on the stream's worker once the work ahead of it
	// has run: status is success, or the stream's failure, in which case
	// fn runs only if afterFailure (a stream callback).
	// raw: the function and data as given, kept by a capture's host node.
	npurtError_t hostFunc(std::function<void(npurtError_t)> fn, bool afterFailure,
	                      const TaskInfo &info, const npurtHostNodeParams *raw = nullptr);
	npurtError_t record(Event &ev, const char *api);
	// Never blocks the caller: a record still deferred behind a host
	// function is waited for by this stream's worker.
	npurtError_t wait(Event &ev, const char *api);

	// Success, npurtErrorNotReady, or the stream's failure.
	npurtError_t query(const char *api);
	// timeoutMs < 0: no limit.
	npurtError_t synchronize(int64_t timeoutMs, const char *api);
	npurtError_t recover(const char *api);

	// The stream's failure, if one was observed (checks the queues);
	// called with the stream's lock held, see checkFailureLocked().
	npurtError_t checkFailure(const char *api);
	// Takes the lock itself.
	npurtError_t checkFailureLocked(const char *api);

	// Pinned staging buffers for pageable copies, allocated on first use.
	// The caller holds stagingLock() while it uses them: threads sharing
	// a stream take turns.
	// Pageable copies go through kBuffers pinned buffers in turn, so that
	// the CPU copies into one while the engine drains the others.
	struct Staging {
		static constexpr int kBuffers = 4;
		static constexpr size_t kBufferSize = 2u << 20;
		PinnedBuffer buf[kBuffers];
		Point use[kBuffers];  // the last copy through each buffer
		int next = 0;  // the buffer the next chunk takes
		void advance() { next = (next + 1) % kBuffers; }
	};
	npurtError_t staging(Staging **out, const char *api);
	std::unique_lock<std::mutex> stagingLock()
	{
		return std::unique_lock<std::mutex>(stagingMutex_);
	}

	// The point after which everything enqueued so far is done.
	Point tail();

	// For safe reuse of freed memory (Context's StreamTracker): a count
	// of the tasks enqueued so far, deferred ones included, or 0 when
	// none of them is still to run; whether the first `count` tasks have
	// completed (or will never run: the stream failed); and a wait for
	// them, submitting what is batched. No flush, no system call, for
	// the first two. A poll (block false) does not wait for the stream's
	// locks: while a submission holds them it answers "not yet".
	uint64_t pendingMark();
	const std::shared_ptr<StreamLife> &life() const { return life_; }
	bool tasksDone(uint64_t count, bool block = true);
	bool waitTasks(uint64_t count, int64_t deadlineNs);
	// Stream-ordered reuse across streams: the tasks enqueued so far
	// (pendingMark's count, also when done), and whether work enqueued
	// here from now on runs after the first `tasks` tasks of the stream
	// `serial`, because this stream waited for an event recorded after
	// them (directly; dependencies through a third stream are not
	// followed).
	uint64_t enqueuedTasks();
	bool orderedAfter(uint64_t serial, uint64_t tasks);
	// Event waits not yet carried by a job become one (a NOP task), so
	// that the stream's task count covers them: a stream-ordered free
	// is complete only after what the stream waited for.
	npurtError_t settleWaits(const char *api);

	// The point of the stream's last submitted work (its batch submitted
	// first) while that work runs; empty when it is done or failed.
	Point pendingTail();
	bool blocking() const { return !isDefault_ && !(flags_ & npurtStreamNonBlocking); }

	// The failure message for a fault recorded on tl at error_point.
	// offset: of the failing packet in the job's command buffer.
	std::string describeTask(const Timeline &tl, uint64_t point, uint32_t offset);

	// Deferred work (host functions) still queued or running.
	bool busy();
	// Nothing enqueued on the stream is still to run.
	bool idle();
	// Waits until deferred work has run (copies that use host memory
	// directly cannot be deferred).
	npurtError_t drainHostWork(const char *api) { return waitIdle(INT64_MAX, api); }
	// Runs action after the deferred work when there is some (true); false
	// when there is none and the caller should do the work now.
	bool deferIfBusy(std::function<void()> action);
	// Whether the calling thread is this stream's worker, running deferred
	// work (whose submissions go straight to the device).
	static bool onWorker();
	// Whether host functions (or work deferred behind one) are queued or
	// running.
	bool hasDeferredWork()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return !deferred_.empty() || workerBusy_;
	}

	// Stream capture (capture.cpp). While a stream captures, its enqueue
	// calls add nodes to the capture's graph instead of running.
	bool capturing() const { return capturing_.load(std::memory_order_acquire); }
	npurtError_t beginCapture(npurtStreamCaptureMode mode, const char *api);
	npurtError_t endCapture(Graph **out, const char *api);
	// npurtStreamUpdateCaptureDependencies: the nodes (of the capture's
	// graph) the stream's next captured work depends on, set or added to.
	npurtError_t updateCaptureDependencies(const std::vector<GraphNode *> &nodes, bool set,
	                                       const char *api);
	npurtError_t captureInfo(npurtStreamCaptureStatus *status, unsigned long long *id,
	                         Graph **graph, const npurtGraphNode_t **deps, size_t *count);
	std::shared_ptr<Capture> capture();
	// Puts the stream into cap, its next work after deps; or takes it out.
	void joinCapture(const std::shared_ptr<Capture> &cap, std::vector<GraphNode *> deps);
	void leaveCapture(const Capture *cap);
	// A call the capture cannot record: npurtErrorStreamCaptureUnsupported
	// naming what, and the capture is invalidated.
	npurtError_t captureRefuse(const char *api, const std::string &what);
	// The stream is being destroyed: its capture is invalidated.
	void abandonCapture();
	// npurtGraphLaunch on a capturing stream: g (an executable graph's)
	// becomes a child graph node after the stream's captured work; *err
	// is set. False if the stream is not capturing (the launch runs).
	bool captureGraph(const Graph &g, const char *api, npurtError_t *err);
	// npurtEventRecordWithFlags / npurtStreamWaitEvent with the External
	// flag on a capturing stream: an event record (record) or wait node
	// after the stream's captured work; a record also orders the
	// capture's waits for ev, as a plain one does. False if the stream is
	// not capturing.
	bool captureExternal(Event &ev, bool record, const char *api, npurtError_t *err);
	// Runs an executable graph's plan after the stream's work
	// (graph_launch.cpp).
	npurtError_t launchGraph(const std::shared_ptr<const GraphPlan> &plan, const char *api);
	// Later work waits for p (an executable graph's last launch on
	// another stream).
	npurtError_t waitFor(const Point &p, const char *api);

private:
	// Recording into the capture instead of running (capture.cpp); false
	// when the stream left the capture meanwhile (then the call runs).
	bool captureTask(uint32_t engineClass, const void *packet, uint32_t size,
	                 const TaskInfo &info, bool callerWaits, npurtError_t *err);
	bool captureHost(std::function<void(npurtError_t)> fn, bool afterFailure,
	                 const TaskInfo &info, const npurtHostNodeParams *raw, npurtError_t *err);
	bool captureRecord(Event &ev, const char *api, npurtError_t *err);
	// A wait that involves a capture (the stream's or the event's).
	bool captureWait(Event &ev, const char *api, npurtError_t *err);
	// Runs plan's steps from `from` on (graph_launch.cpp); with both locks
	// held.
	// marked: the events the plan records from `from` on, made pending
	// when the launch (or the host step before them) was deferred; null
	// when it runs as it is launched.
	npurtError_t runPlan(const std::shared_ptr<const GraphPlan> &plan, size_t from,
	                     const std::shared_ptr<MarkedEvents> &marked, const char *api);
	// Runs the plan from `from` on behind the stream's worker (`later`
	// of its tasks counted as deferred meanwhile).
	void continuePlan(const std::shared_ptr<const GraphPlan> &plan, size_t from, uint64_t later,
	                  const std::shared_ptr<MarkedEvents> &marked, const char *api,
	                  bool next = false);
	// Records ev now (or resolves it with the last point); with both
	// locks held.
	npurtError_t recordNow(Event &ev, const char *api);
	// A host function's turn on the worker: waits for the work ahead,
	// then runs fn (not after a failure unless afterFailure).
	void runHost(const std::function<void(npurtError_t)> &fn, bool afterFailure,
	             const char *api);
	// runPlan's tasks step, onto the batch (with mutex_ held).
	void appendStep(const PlanStep &step);
	// Adds a task to batch_ (with its profiling timestamps); submits the
	// batch. With mutex_ held.
	void append(uint32_t engineClass, const void *packet, uint32_t size, const TaskInfo &info);
	// A job's packets; keeps its memory when cleared.
	class CmdBuffer {
	public:
		void append(const void *p, size_t n)
		{
			if (size_ + n > bytes_.size())
				bytes_.resize(std::max(bytes_.size() * 2, size_ + n));
			std::memcpy(bytes_.data() + size_, p, n);
			size_ += n;
		}
		const uint8_t *data() const { return bytes_.data(); }
		size_t size() const { return size_; }
		void clear() { size_ = 0; }

	private:
		std::vector<uint8_t> bytes_;
		size_t size_ = 0;
	};
	struct Batch {
		int engineClass = -1;
		bool profiled = false;  // some task has timestamps
		bool callerWaits = false;  // DRM_NPU_SUBMIT_CALLER_WAITS
		// Holds a large task, batched behind two queued jobs: the flusher
		// submits it when the first of them ends (see Stream::submit).
		bool deep = false;
		uint64_t work = 0;  // taskWork() of the tasks, summed
		CmdBuffer cmds;
		std::vector<TaskInfo> tasks;
		// A sealed job of an executable graph: its packets and tasks are
		// the plan step's (kept alive by plan), not copied.
		std::shared_ptr<const GraphPlan> plan;
		const PlanStep *step = nullptr;
		const std::vector<TaskInfo> &taskList() const;
		const uint8_t *cmdData() const;
		size_t cmdSize() const;
		// Empty again, keeping its memory.
		void clear()
		{
			engineClass = -1;
			profiled = false;
			callerWaits = false;
			deep = false;
			work = 0;
			cmds.clear();
			tasks.clear();
			plan.reset();
			step = nullptr;
		}
	};
	// Submits the sealed jobs of ready_ (with submitMutex_ and mutex_
	// held; the flusher passes its lock, as to flushBatch).
	npurtError_t flushReady(const char *api, std::unique_lock<std::mutex> *unlocked = nullptr);
	// Sealed jobs, to be submitted in order before batch_ (graph
	// launches: the launching thread only queues them, the flusher
	// submits them); at most kReadyMax, then launches submit themselves.
	static constexpr size_t kReadyMax = 1024;
	std::deque<Batch> ready_;
	// The submitted task number seq (from 1) and the point of its job, in
	// history_[seq % kTaskHistory] while it is among the last ones.
	struct TaskRecord {
		TaskInfo task;
		uint64_t point;
		uint32_t engineClass;
	};
	static constexpr size_t kTaskHistory = 2048;
	// The task whose packets hold offset in the job at point (else the
	// job's first task), copied to *task (if not null); false if no
	// longer on record.
	bool findTask(uint32_t engineClass, uint64_t point, uint32_t offset, uint64_t *seq,
	              TaskInfo *task);
	// Submits batch_; with submitMutex_ and mutex_ held (the flusher passes
	// its lock of mutex_, released during the ioctl).
	npurtError_t flushBatch(const char *api, std::unique_lock<std::mutex> *unlocked = nullptr);
	npurtError_t submitJob(Batch &job, const char *api, std::unique_lock<std::mutex> *unlocked);
	npurtError_t splitJob(Batch &whole, const char *api);
	void dropJob(Batch &job);
	npurtError_t submitNow(uint32_t engineClass, const void *packet, uint32_t size,
	                       const TaskInfo &info, bool callerWaits = false);
	// The legacy default stream's ordering (see Context::defaultWork),
	// before an enqueue: counts it, and makes the stream wait for the
	// other side's work when that side has enqueued since the last look.
	// Takes other streams' locks, so it runs before this stream's.
	npurtError_t legacyOrder(const char *api);
	// Whether the stream's last submitted job still runs, has ended, or
	// failed (it or work it depended on), from the completion record the
	// engine writes: no system call. Unknown without a record.
	enum class DeviceState { Idle, Busy, Failed, Unknown };
	DeviceState deviceState() const;
	void flusherLoop();
	npurtError_t ensureTimeline(uint32_t engineClass);
	// Queues action for the worker; with mutex_ held. A continuation
	// (next) of the action the worker runs now goes ahead of the actions
	// queued meanwhile, after the continuations it queued before: a graph
	// launch deferred behind a host step goes on in its own order, not
	// behind the launches queued after it.
	void defer(std::function<void()> action, bool next = false);
	// Whether the calling thread is this stream's worker.
	bool onOwnWorker() const { return worker_.get_id() == std::this_thread::get_id(); }
	void workerLoop();
	npurtError_t fail(npurtError_t code, const std::string &message, bool notify);
	// Turns pending event waits into a job, so that the stream's tail
	// includes them; with mutex_ held.
	npurtError_t flushWaits(const char *api);
	// Makes the next job wait for p (carried over as a sync_file when it
	// is of another device or context). With both locks held.
	npurtError_t addWait(const Point &p, const char *api);
	// Makes the next job wait for the fence a syncobj holds now (point 0:
	// a binary one), copied into a syncobj of this stream's file.
	npurtError_t addFenceWait(os::Device &from, uint32_t syncobj, uint64_t point,
	                          const char *api);
	struct PendingWait;
	// Adds a wait for the next job: one for a later point of a timeline
	// already waited for replaces it; near the driver's limit of fences a
	// job (DRM_NPU_MAX_IN_FENCES) the waits go ahead in a job of their own.
	// With both locks held.
	npurtError_t pushWait(const PendingWait &w, const char *api);
	npurtError_t waitIdle(int64_t deadlineNs, const char *api);
	// For synchronize and query, with both locks held: submits what is
	// pending and reads the completion record. True when that settles it
	// (*result: success or the failure); else *p is the point to wait for
	// and *result npurtErrorNotReady if the work is known to run, success
	// if only the kernel knows.
	bool settled(const char *api, npurtError_t *result, Point *p);

	Context &ctx_;
	unsigned flags_;
	int priority_;
	bool isDefault_;
	bool perThread_ = false;
	bool builder_ = false;
	const uint64_t serial_;

	// Held while a job is submitted, so points are handed out in order
	// (taken before mutex_). Enqueuing onto a batch needs only mutex_.
	std::mutex submitMutex_;
	std::mutex mutex_;  // guards everything below
	std::shared_ptr<Timeline> timelines_[2];
	uint64_t last_[2] = {0, 0};
	// Jobs of this stream on engineClass's queue not yet complete
	// (with mutex_ held); 0 when that cannot be told.
	uint64_t jobsAhead(int engineClass) const;
	// Pinned completion records (drm_npu_queue_completion) of the queues.
	uint64_t doneSlot_[2] = {0, 0};
	// The completion record of the engine class's queue, or null.
	drm_npu_queue_completion *completion(int engineClass) const
	{
		return reinterpret_cast<drm_npu_queue_completion *>(doneSlot_[engineClass]);
	}
	// Tasks not yet submitted: one job's packets, all of one engine class;
	// and the batch being submitted.
	Batch batch_, job_;
	std::vector<drm_npu_fence> fences_;  // flushBatch's in-fences
	bool burst_ = false;  // submitted at once, and no host wait since
	bool gather_ = false;  // batch_ opened by a burst on an idle device
	int64_t lastEnqueue_ =
	        0;  // coarseNs() of the last launch that opened a batch or was submitted
	std::condition_variable flushCv_;  // wakes flusher_: a batch opened
	std::thread flusher_;
	std::shared_ptr<StreamLife> life_ = std::make_shared<StreamLife>();
	int lastClass_ = -1;
	struct PendingWait {
		uint32_t handle;
		uint64_t point;
		bool temporary;  // a syncobj imported for this wait, destroyed after
	};
	std::vector<PendingWait> waits_;
	// Submitted tasks, for fault reports (see TaskRecord): written by
	// submissions (under submitMutex_) without mutex_, so that launches
	// onto the next batch do not wait while a job's tasks are recorded.
	std::mutex historyMutex_;  // guards history_ and seq_; taken after mutex_
	std::vector<TaskRecord> history_;
	uint64_t seq_ = 0;  // tasks submitted (or dropped: point 0), in append order
	// Tasks appended to a batch, and deferred tasks not yet appended
	// (with mutex_ held); the flusher's job between unlocking mutex_ for
	// its SUBMIT and recording the job's point.
	uint64_t appended_ = 0;
	uint64_t deferredTasks_ = 0;
	bool submitting_ = false;
	// The other side's count at this stream's last look (legacyOrder).
	std::atomic<uint64_t> seenOther_{0};
	npurtError_t failed_ = npurtSuccess;
	std::string failMessage_;
	// Streams this one waited for: serial -> tasks (see orderedAfter).
	static constexpr size_t kWaitedForMax = 64;
	std::vector<std::pair<uint64_t, uint64_t>> waitedFor_;

	// Deferred actions (after a host function), run by worker_ in order.
	std::deque<std::function<void()>> deferred_;
	size_t nextInserted_ = 0;  // continuations queued by the running action
	bool workerBusy_ = false;
	bool stopping_ = false;
	std::condition_variable cv_;
	std::thread worker_;

	std::mutex stagingMutex_;  // guards staging_
	Staging staging_;

	// The capture the stream is in (guarded by mutex_; capturing_ tells
	// without the lock), and npurtStreamGetCaptureInfo's last answer.
	std::shared_ptr<Capture> capture_;
	std::atomic<bool> capturing_{false};
	std::vector<npurtGraphNode_t> captureDeps_;
};

// A deferred record's outcome, shared with streams told to wait for it
// (which may outlive the event: it can be destroyed once recorded).
struct RecordTicket {
	std::mutex mutex;
	std::condition_variable cv;
	bool done = false;
	Point point;
	// Until the record has happened (its host function ahead returned).
	Point wait();
};

class Event : public npurtEvent_st {
public:
	explicit Event(unsigned flags) : flags_(flags) {}
	~Event();
	Event(const Event &) = delete;
	Event &operator=(const Event &) = delete;
	unsigned flags() const { return flags_; }
	// As in CUDA, events time unless created with npurtEventDisableTiming.
	bool timing() const { return !(flags_ & npurtEventDisableTiming); }

	// Called by Stream::record; `pending` until a deferred record runs.
	void setPending(Stream *s);
	void resolve(Point p, Context *ctx, uint64_t slot);
	// The recorded point, after waiting for a deferred record.
	Point point(Stream **stream, uint64_t *slot, Context **ctx, int64_t deadlineNs);
	bool recorded();
	uint64_t slotFor(Context &ctx);
	// The ticket of a record still deferred, else null.
	std::shared_ptr<RecordTicket> pendingRecord();
	// Runs f once the last record has happened (a destroy's end): at once,
	// or, when the record is deferred behind a host function (which may
	// wait for the caller), in a thread of that stream's context
	// (Context::reap) while the caller goes on.
	void afterRecord(std::function<void()> f);
	// The stream of the last record (its serial) and the tasks enqueued
	// on it by then; 0s if none. For stream-ordered memory reuse.
	void setOrder(uint64_t serial, uint64_t tasks);
	void order(uint64_t *serial, uint64_t *tasks);

	npurtError_t query(const char *api);
	npurtError_t synchronize(int64_t timeoutMs, const char *api);
	// The context that holds the timestamp slot is going away.
	void forgetContext(Context *ctx);
	// A record in a capture (capture.cpp): the nodes a wait for it
	// depends on; a record outside a capture ends it.
	void setCaptured(std::shared_ptr<Capture> cap, std::vector<GraphNode *> nodes);
	std::shared_ptr<Capture> captured(std::vector<GraphNode *> *nodes);
	// npurtErrorCapturedEvent for a use outside a capture (query,
	// synchronize, timing) of an event last recorded in one.
	npurtError_t checkNotCaptured(const char *api);

	// Interprocess events (npurtEventInterprocess): a binary syncobj that
	// holds the fence of the latest record of any process, made in ctx's
	// file (or opened from another process's export). Query, synchronize
	// and waits use it.
	npurtError_t makeInterprocess(Context &ctx, const char *api);
	void adoptInterprocess(std::shared_ptr<Timeline> fence) { ipc_ = std::move(fence); }
	const std::shared_ptr<Timeline> &interprocess() const { return ipc_; }
	// The export of the fence for npurtIpcGetEventHandle (made once, kept
	// until the event is destroyed).
	npurtError_t exportInterprocess(int *fd, uint64_t *inode, const char *api);

private:
	unsigned flags_;
	// Held while a job is submitted, so points are handed out in order
	// (taken before mutex_). Enqueuing onto a batch needs only mutex_.
	std::mutex submitMutex_;
	std::mutex mutex_;  // guards everything below
	std::condition_variable cv_;
	bool recorded_ = false;
	bool pending_ = false;
	Point point_;
	Stream *stream_ = nullptr;
	Context *slotCtx_ = nullptr;
	uint64_t slot_ = 0;  // timing: where the device writes the timestamp
	std::shared_ptr<RecordTicket> ticket_;  // while pending_
	uint64_t orderSerial_ = 0, orderTasks_ = 0;
	std::shared_ptr<Capture> capture_;  // the capture of the last record
	std::vector<GraphNode *> capNodes_;
	// Interprocess: the fence syncobj (a Timeline without a queue) and its
	// export; set before the event is shared, then read-only.
	std::shared_ptr<Timeline> ipc_;
	int exportFd_ = -1;
	uint64_t exportInode_ = 0;
};

// Creates a stream of ctx and registers it; destroys one (waiting for its
// host functions).
Stream *createStreamForContext(Context &ctx, unsigned flags, int priority, bool isDefault);
void destroyStreamForContext(Stream *s);
// npurtStreamDestroy: the handle goes now, the stream once its host
// functions have run (in a thread of the context's, without waiting);
// npurtErrorInvalidHandle if another call destroys it already.
npurtError_t destroyStreamHandle(Stream *s, const char *api);
// Validates a stream handle: null is the current context's default stream.
npurtError_t resolveStream(npurtStream_t handle, Stream **out, const char *api);
npurtError_t resolveEvent(npurtEvent_t handle, Event **out, const char *api);
void registerEvent(Event *ev);
bool unregisterEvent(Event *ev);
// Detaches every event from a context being destroyed.
void forgetContextInEvents(Context *ctx);

// Waits for a point; 0, -ETIME at the deadline, or -errno. spin: poll
// the queue's completion record for a while before sleeping (for threads
// that wait on behalf of the application, not for the runtime's own).
int waitPoint(const Point &p, int64_t deadlineNs, bool spin = true);
// CLOCK_MONOTONIC now, and a deadline timeoutMs from now (-1: forever).
int64_t monotonicNs();
// CLOCK_MONOTONIC_COARSE: a few ms of resolution, but no clock device read.
int64_t coarseNs();
int64_t deadlineAfter(int64_t timeoutMs);

// Synchronous launches for debugging (NPURT_LAUNCH_BLOCKING=1).
bool launchBlocking();

// Profiler hooks.
extern std::atomic<bool> gProfiling;
inline bool profiling()
{
	return gProfiling.load(std::memory_order_relaxed);
}
void profileTask(const ProfiledTask &task);
void forgetContextInProfiler(Context *ctx);

// The error callback, called when a stream's failure is first observed.
void notifyError(Stream *s, npurtError_t code, const std::string &message);

}  // namespace npurt

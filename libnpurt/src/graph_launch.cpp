// Launching an executable graph onto a stream: its plan's tasks go onto the
// stream's batch whole (one job per run of one engine class), host
// functions and event waits behind the stream's worker as the enqueue calls
// put them, and the batch is submitted by the stream's flusher, so that the
// launching thread makes no system call.
#include <algorithm>
#include <thread>

#include "error.h"
#include "graph.h"
#include "stream.h"

namespace npurt {
namespace {

uint64_t tasksFrom(const GraphPlan &plan, size_t from)
{
	uint64_t n = 0;
	for (size_t i = from; i < plan.steps.size(); i++)
		n += plan.steps[i].tasks.size();
	return n;
}

// The events the plan records from step `from` on, made pending now, as a
// deferred npurtEventRecord's are (the stream they are recorded on and its
// task count). An event destroyed meanwhile waits for its pending record,
// so the ones listed stay alive until they are recorded or resolved.
std::shared_ptr<MarkedEvents> markRecords(const GraphPlan &plan, size_t from, Stream *s,
                                          uint64_t serial, uint64_t tasks)
{
	auto marked = std::make_shared<MarkedEvents>();
	for (size_t i = from; i < plan.steps.size(); i++) {
		const PlanStep &st = plan.steps[i];
		Event *ev = nullptr;
		if (st.kind != PlanStep::Record || resolveEvent(st.event, &ev, "npurtGraphLaunch"))
			continue;
		ev->setPending(s);
		ev->setOrder(serial, tasks);
		marked->push_back(ev);
	}
	npurtGetLastError();
	return marked;
}

}  // namespace

void Stream::appendStep(const PlanStep &step)
{
	if (profiling()) {
		// Each task gets its timestamps.
		for (const TaskInfo &t : step.tasks)
			append(step.engineClass, step.cmds.data() + t.cmdBegin,
			       t.cmdEnd - t.cmdBegin, t);
		return;
	}
	const auto base = static_cast<uint32_t>(batch_.cmds.size());
	batch_.cmds.append(step.cmds.data(), step.cmds.size());
	batch_.engineClass = static_cast<int>(step.engineClass);
	for (const TaskInfo &t : step.tasks) {
		batch_.tasks.push_back(t);
		batch_.tasks.back().cmdBegin += base;
		batch_.tasks.back().cmdEnd += base;
	}
	appended_ += step.tasks.size();
}

void Stream::continuePlan(const std::shared_ptr<const GraphPlan> &plan, size_t from, uint64_t later,
                          const std::shared_ptr<MarkedEvents> &marked, const char *api, bool next)
{
	deferredTasks_ += later;
	auto action = [this, plan, from, later, marked, api] {
		std::scoped_lock l(submitMutex_, mutex_);
		deferredTasks_ -= later;
		if (npurtError_t err = runPlan(plan, from, marked, api)) {
			if (!failed_)
				fail(err, npurtGetLastErrorMessage(), true);
			// The records the plan did not reach stand for the work
			// before the failure, as a deferred record's do.
			Point last = lastClass_ >= 0
			                     ? Point{timelines_[lastClass_], last_[lastClass_]}
			                     : Point{};
			for (Event *ev : *marked)
				ev->resolve(last, &ctx_, 0);
			marked->clear();
		}
		npurtGetLastError();
	};
	defer(std::move(action), next);
}

npurtError_t Stream::runPlan(const std::shared_ptr<const GraphPlan> &plan, size_t from,
                             const std::shared_ptr<MarkedEvents> &marked, const char *api)
{
	// Run by the worker (a deferred launch, or its rest), the plan goes
	// on ahead of launches queued meanwhile: they come after it.
	const bool next = onOwnWorker();
	// The rest of the plan after step i goes behind the worker's task.
	auto rest = [this, &plan, api, &marked, next](size_t i) {
		const uint64_t later = tasksFrom(*plan, i + 1);
		continuePlan(plan, i + 1, later,
		             marked ? marked
		                    : markRecords(*plan, i + 1, this, serial_,
		                                  appended_ + deferredTasks_ + later),
		             api, next);
	};
	for (size_t i = from; i < plan->steps.size(); i++) {
		const PlanStep &st = plan->steps[i];
		if (st.kind == PlanStep::Tasks) {
			if (!batch_.tasks.empty() &&
			    (batch_.engineClass != static_cast<int>(st.engineClass) ||
			     batch_.cmds.size() + st.cmds.size() > kBatchBytes ||
			     batch_.tasks.size() + st.tasks.size() > kBatchTasks))
				if (npurtError_t err = flushBatch(api))
					return err;
			appendStep(st);
			continue;
		}
		if (npurtError_t err = flushWaits(api))
			return err;
		if (st.kind == PlanStep::Host) {
			auto host = [this, fn = st.host, after = st.afterFailure, api] {
				runHost(fn, after, api);
			};
			defer(std::move(host), next);
			rest(i);
			return npurtSuccess;
		}
		Event *ev = nullptr;
		if (st.kind == PlanStep::Record && marked) {
			// Made pending when the launch was deferred (and kept alive
			// by that); one not listed was destroyed before.
			auto it = std::ranges::find(*marked, st.event);
			if (it == marked->end())
				continue;
			marked->erase(it);
			if (npurtError_t err = recordNow(*st.event, api))
				return err;
			continue;
		}
		if (npurtError_t err = resolveEvent(st.event, &ev, api))
			return setError(err, std::string(api) +
			                             ": an event of the graph was destroyed (" +
			                             npurtGetLastErrorMessage() + ")");
		if (st.kind == PlanStep::Record) {
			ev->setPending(this);
			ev->setOrder(serial_, appended_ + deferredTasks_);
			if (npurtError_t err = recordNow(*ev, api))
				return err;
			continue;
		}
		if (std::shared_ptr<RecordTicket> t = ev->pendingRecord()) {
			// Recorded behind a host function: waited for by the worker.
			auto waitForRecord = [this, t, api] {
				Point p = t->wait();
				std::scoped_lock l(submitMutex_, mutex_);
				if (p && !failed_ && addWait(p, api))
					fail(npurtPeekAtLastError(), npurtGetLastErrorMessage(),
					     true);
			};
			defer(std::move(waitForRecord), next);
			rest(i);
			return npurtSuccess;
		}
		Stream *src = nullptr;
		uint64_t slot = 0;
		Context *evCtx = nullptr;
		if (Point p = ev->point(&src, &slot, &evCtx, 0))
			if (npurtError_t err = addWait(p, api))
				return err;
	}
	if (batch_.tasks.empty())
		return npurtSuccess;
	if (launchBlocking())
		return flushBatch(api);
	// No gathering: the graph is the batch.
	gather_ = false;
	if (!flusher_.joinable())
		flusher_ = std::thread([this] { flusherLoop(); });
	flushCv_.notify_one();
	return npurtSuccess;
}

npurtError_t Stream::launchGraph(const std::shared_ptr<const GraphPlan> &plan, const char *api)
{
	if (capturing())
		return captureRefuse(api, "launching a graph into a capture (child graphs)");
	// A launch whose events are gone runs nothing.
	if (!plan->tasksOnly)
		for (const PlanStep &st : plan->steps) {
			Event *ev = nullptr;
			if ((st.kind == PlanStep::Record || st.kind == PlanStep::Wait) &&
			    resolveEvent(st.event, &ev, api))
				return setError(npurtErrorInvalidHandle,
				                std::string(api) +
				                        ": an event of the graph was destroyed (" +
				                        npurtGetLastErrorMessage() + ")");
		}
	if (!onWorker())
		if (npurtError_t err = legacyOrder(api))
			return err;
	if (plan->tasksOnly && !profiling() && !launchBlocking()) {
		// The common case: each step is a sealed job the flusher submits
		// as it is (no copy of packets or tasks); the launching thread
		// takes mutex_ alone, as an enqueue onto a batch does.
		std::lock_guard<std::mutex> lock(mutex_);
		if (failed_)
			return setError(failed_, std::string(api) + ": " + failMessage_);
		if (deferred_.empty() && !workerBusy_ && ready_.size() < kReadyMax) {
			if (!batch_.tasks.empty()) {
				ready_.push_back(std::move(batch_));  // earlier work first
				batch_ = Batch{};
			}
			for (const PlanStep &st : plan->steps) {
				Batch &b = ready_.emplace_back();
				b.engineClass = static_cast<int>(st.engineClass);
				b.plan = plan;
				b.step = &st;
			}
			appended_ += plan->taskCount;
			if (!flusher_.joinable())
				flusher_ = std::thread([this] { flusherLoop(); });
			flushCv_.notify_one();
			return npurtSuccess;
		}
	}
	std::scoped_lock lock(submitMutex_, mutex_);
	if (failed_)
		return setError(failed_, std::string(api) + ": " + failMessage_);
	if ((!deferred_.empty() || workerBusy_) && !onWorker()) {
		continuePlan(plan, 0, plan->taskCount,
		             markRecords(*plan, 0, this, serial_,
		                         appended_ + deferredTasks_ + plan->taskCount),
		             api);
		return npurtSuccess;
	}
	return runPlan(plan, 0, nullptr, api);
}

npurtError_t Stream::waitFor(const Point &p, const char *api)
{
	std::scoped_lock lock(submitMutex_, mutex_);
	if (failed_)
		return setError(failed_, std::string(api) + ": " + failMessage_);
	if (npurtError_t err = flushBatch(api))
		return err;
	return addWait(p, api);
}

}  // namespace npurt

// The profiler (per-task device timestamps, trace export, summary) and the
// asynchronous error callback.
#include <atomic>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "error.h"
#include "runtime.h"
#include "stream.h"

namespace npurt {

std::atomic<bool> gProfiling{false};

namespace {
// Never destroyed, as the Runtime: the monitor thread and the streams'
// flushers (profileTask) may still use them while exit runs static
// destructors (the soak found the monitor running on after them).
std::mutex &gProfMutex = *new std::mutex;  // guards gRecords
std::vector<ProfiledTask> &gRecords = *new std::vector<ProfiledTask>;

std::mutex &gCbMutex = *new std::mutex;  // guards gCallback, gUserData, gMonitor, gPending
npurtErrorCallback_t gCallback = nullptr;
void *gUserData = nullptr;
// Never destroyed: a program may exit with a callback still set.
std::thread *gMonitor = nullptr;
std::atomic<bool> gMonitorStop{false};
std::condition_variable &gCbCv = *new std::condition_variable;
struct PendingReport {
	Stream *stream;
	npurtError_t code;
	std::string message;
};
std::vector<PendingReport> &gPending = *new std::vector<PendingReport>;

std::string kindOf(const ProfiledTask &p)
{
	const TaskInfo &t = p.task;
	if (t.op >= 0 && t.op < 16)
		return kOpNames[t.op];
	if (t.op == -1)
		return "copy";
	if (t.op == -2)
		return "fill";
	return "other";
}

uint64_t stamp(uint64_t slot)
{
	return slot ? *reinterpret_cast<volatile uint64_t *>(slot) : 0;
}

uint64_t startOf(const ProfiledTask &t)
{
	return t.task.tsStart ? stamp(t.task.tsStart) : t.startValue;
}

uint64_t endOf(const ProfiledTask &t)
{
	return t.task.tsEnd ? stamp(t.task.tsEnd) : t.endValue;
}

std::string jsonEscape(const std::string &s)
{
	std::string out;
	for (char c : s) {
		if (c == '"' || c == '\\')
			out += '\\';
		if (static_cast<unsigned char>(c) < 0x20)
			continue;
		out += c;
	}
	return out;
}

// While a callback is set: delivers fault reports (never with a runtime
// lock held, so the callback may call the runtime) and polls every live
// stream for failures, so faults are reported even when nobody calls in.
void monitorLoop()
{
	while (!gMonitorStop.load()) {
		std::vector<PendingReport> reports;
		npurtErrorCallback_t cb;
		void *data;
		{
			std::unique_lock<std::mutex> lock(gCbMutex);
			gCbCv.wait_for(lock, std::chrono::milliseconds(10),
			               [] { return !gPending.empty() || gMonitorStop.load(); });
			reports.swap(gPending);
			cb = gCallback;
			data = gUserData;
		}
		for (auto &r : reports)
			if (cb)
				cb(r.stream, r.code, r.message.c_str(), data);
		forEachLiveStream([](Stream *s) {
			if (s->checkFailureLocked("monitor") != npurtSuccess)
				npurtGetLastError();
		});
	}
}

}  // namespace

void profileTask(const ProfiledTask &task)
{
	std::lock_guard<std::mutex> lock(gProfMutex);
	gRecords.push_back(task);
}

// A context is going away with its timestamp memory: keep the values its
// records have so far and stop pointing into it.
void forgetContextInProfiler(Context *ctx)
{
	std::lock_guard<std::mutex> lock(gProfMutex);
	for (auto &r : gRecords) {
		if (r.ctx != ctx)
			continue;
		r.startValue = stamp(r.task.tsStart);
		r.endValue = stamp(r.task.tsEnd);
		r.task.tsStart = r.task.tsEnd = 0;
		r.ctx = nullptr;
	}
}

void notifyError(Stream *s, npurtError_t code, const std::string &message)
{
	std::lock_guard<std::mutex> lock(gCbMutex);
	if (!gCallback)
		return;
	gPending.push_back({s, code, message});
	gCbCv.notify_all();
}

}  // namespace npurt

using npurt::gRecords;
using npurt::ProfiledTask;

extern "C" {

npurtError_t npurtSetErrorCallback(npurtErrorCallback_t callback, void *userData)
{
	std::thread *old = nullptr;
	{
		std::lock_guard<std::mutex> lock(npurt::gCbMutex);
		npurt::gCallback = callback;
		npurt::gUserData = userData;
		if (callback && !npurt::gMonitor) {
			npurt::gMonitorStop = false;
			npurt::gMonitor = new std::thread(npurt::monitorLoop);
		} else if (!callback && npurt::gMonitor) {
			npurt::gMonitorStop = true;
			npurt::gPending.clear();
			npurt::gCbCv.notify_all();
			old = npurt::gMonitor;
			npurt::gMonitor = nullptr;
		}
	}
	// From the callback itself the monitor cannot join itself.
	if (old && old->get_id() == std::this_thread::get_id())
		old->detach();
	else if (old)
		old->join();
	delete old;
	return npurtSuccess;
}

npurtError_t npurtProfilerStart(void)
{
	std::lock_guard<std::mutex> lock(npurt::gProfMutex);
	// The previous session's timestamp slots go back to their contexts.
	for (auto &r : gRecords) {
		if (r.ctx) {
			r.ctx->freeTimestampSlot(r.task.tsStart);
			r.ctx->freeTimestampSlot(r.task.tsEnd);
		}
	}
	gRecords.clear();
	npurt::gProfiling = true;
	return npurtSuccess;
}

npurtError_t npurtProfilerStop(void)
{
	npurt::gProfiling = false;
	return npurtSuccess;
}

npurtError_t npurtProfilerExportTrace(const char *path)
{
	if (!path)
		return npurt::setError(npurtErrorInvalidValue,
		                       "npurtProfilerExportTrace: path is NULL");
	std::vector<ProfiledTask> records;
	{
		std::lock_guard<std::mutex> lock(npurt::gProfMutex);
		records = gRecords;
	}
	FILE *f = std::fopen(path, "w");
	if (!f)
		return npurt::setError(
		        npurtErrorOperatingSystem,
		        npurt::osMessage(std::string("npurtProfilerExportTrace: ") + path, errno));
	std::fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
	const char *sep = "";
	std::map<std::pair<int, uint32_t>, bool> named;
	for (const auto &t : records) {
		uint64_t a = npurt::startOf(t), b = npurt::endOf(t);
		if (!a || !b || b < a)
			continue;  // not finished yet
		// One process per NPU, one thread per engine.
		if (!named[{t.ordinal, t.engineId}]) {
			named[{t.ordinal, t.engineId}] = true;
			std::fprintf(f,
			             "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, "
			             "\"tid\": %u, "
			             "\"args\": {\"name\": \"%s engine %u\"}}",
			             sep, t.ordinal, t.engineId, t.engineClass ? "compute" : "copy",
			             t.engineId);
			sep = ",\n";
			std::fprintf(f,
			             "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, "
			             "\"args\": {\"name\": \"NPU %d\"}}",
			             sep, t.ordinal, t.ordinal);
		}
		std::fprintf(
		        f,
		        "%s{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": %d, "
		        "\"tid\": "
		        "%u, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"stream\": \"%p\", \"task\": "
		        "%" PRIu64 ", \"api\": \"%s\", \"bytes\": %" PRIu64
		        ", \"queued_host_ns\": %" PRIu64 ", \"site\": \"%s\"}}",
		        sep, npurt::jsonEscape(t.task.what()).c_str(), npurt::kindOf(t).c_str(),
		        t.ordinal, t.engineId, a / 1000.0, (b - a) / 1000.0, t.stream, t.seq,
		        t.task.api, t.task.bytes, t.task.queuedNs,
		        npurt::jsonEscape(t.task.site.str()).c_str());
		sep = ",\n";
	}
	std::fprintf(f, "\n]}\n");
	if (std::fclose(f))
		return npurt::setError(
		        npurtErrorOperatingSystem,
		        npurt::osMessage("npurtProfilerExportTrace: writing", errno));
	return npurtSuccess;
}

npurtError_t npurtProfilerSummary(char *buf, size_t size, size_t *needed)
{
	try {
		std::vector<ProfiledTask> records;
		{
			std::lock_guard<std::mutex> lock(npurt::gProfMutex);
			records = gRecords;
		}
		struct Acc {
			uint64_t count = 0, ns = 0, bytes = 0;
		};
		std::map<std::string, Acc> byKind, byStream;
		std::map<std::pair<int, uint32_t>, Acc> byEngine;
		uint64_t first = UINT64_MAX, last = 0;
		for (const auto &t : records) {
			uint64_t a = npurt::startOf(t), b = npurt::endOf(t);
			if (!a || !b || b < a)
				continue;
			first = std::min(first, a);
			last = std::max(last, b);
			char sname[32];
			std::snprintf(sname, sizeof(sname), "%p", t.stream);
			for (Acc *acc : {&byKind[npurt::kindOf(t)], &byStream[sname],
			                 &byEngine[{t.ordinal, t.engineId}]}) {
				acc->count++;
				acc->ns += b - a;
				acc->bytes += t.task.bytes;
			}
		}
		std::string out;
		char line[160];
		auto row = [&](const std::string &name, const Acc &a) {
			std::snprintf(line, sizeof(line),
			              "  %-24s %8" PRIu64 " tasks %12.3f ms %14" PRIu64 " bytes\n",
			              name.c_str(), a.count, a.ns / 1e6, a.bytes);
			out += line;
		};
		out += "time per op kind:\n";
		for (auto &[k, a] : byKind)
			row(k, a);
		out += "time per stream:\n";
		for (auto &[k, a] : byStream)
			row(k, a);
		out += "engine utilisation (busy / profiled span):\n";
		double span = last > first ? static_cast<double>(last - first) : 0;
		for (auto &[k, a] : byEngine) {
			std::snprintf(line, sizeof(line),
			              "  NPU %d engine %-3u %8" PRIu64
			              " tasks %12.3f ms busy %6.1f%%\n",
			              k.first, k.second, a.count, a.ns / 1e6,
			              span ? 100.0 * a.ns / span : 0.0);
			out += line;
		}
		if (needed)
			*needed = out.size() + 1;
		if (buf && size) {
			size_t n = std::min(size - 1, out.size());
			std::memcpy(buf, out.data(), n);
			buf[n] = '\0';
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtProfilerSummary");
	}
}

}  // extern "C"

// C API: memory accounting for frameworks (this process's usage of a
// device, the per-process limit, the pool's snapshot, the OOM observer,
// the pools' settings).
#include <cmath>
#include <map>
#include <mutex>
#include <string>

#include "alloc_config.h"
#include "allocator.h"
#include "context.h"
#include "error.h"
#include "mem_usage.h"
#include "runtime.h"
#include "stream.h"

using npurt::Context;
using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;

namespace {

std::mutex gObserverMutex;  // guards gObserver and gObserverData
npurtOomObserver gObserver = nullptr;
void *gObserverData = nullptr;

}  // namespace

namespace npurt {

void notifyOutOfMemory(int ordinal, size_t requested)
{
	thread_local bool inObserver = false;
	if (inObserver)
		return;
	npurtOomObserver fn = nullptr;
	void *data = nullptr;
	{
		std::lock_guard<std::mutex> lock(gObserverMutex);
		fn = gObserver;
		data = gObserverData;
	}
	if (!fn)
		return;
	// The message is the thread's last error; the observer may make
	// calls that replace it, so the caller's copy is what it is given.
	std::string message = npurtGetLastErrorMessage();
	inObserver = true;
	fn(ordinal, requested, message.c_str(), data);
	inObserver = false;
	setError(npurtErrorMemoryAllocation, message);
}

}  // namespace npurt

npurtError_t npurtDeviceGetMemUsage(int device, npurtMemUsage *usage)
{
	try {
		if (!usage)
			return nullArgument("npurtDeviceGetMemUsage", "usage");
		if (npurtError_t err =
		            Runtime::instance().startAndCheck(device, "npurtDeviceGetMemUsage"))
			return err;
		Runtime &rt = Runtime::instance();
		Context *primary = nullptr;
		if (npurtError_t err =
		            rt.primaryContext(device, &primary, "npurtDeviceGetMemUsage"))
			return err;
		npurtMemUsage u{};
		uint64_t freeBytes = 0, totalBytes = 0;
		if (npurtError_t err = primary->queryMemory(&freeBytes, &totalBytes))
			return err;
		npurt::ProcessMemory pm;
		if (npurtError_t err = rt.processMemory(device, &pm))
			return err;
		const npurt::Device &d = rt.device(device);
		u.freeBytes = freeBytes;
		u.totalBytes = totalBytes;
		u.processReservedBytes = d.reservedBytes();
		u.processAllocatedBytes = pm.allocated;
		u.processDeviceBytes = pm.deviceBytes;
		u.limitBytes = d.limit();
		u.contexts = pm.contexts;
		*usage = u;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetMemUsage");
	}
}

npurtError_t npurtSetMemoryLimit(int device, size_t bytes)
{
	try {
		if (npurtError_t err =
		            Runtime::instance().startAndCheck(device, "npurtSetMemoryLimit"))
			return err;
		Runtime::instance().device(device).setLimit(bytes);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtSetMemoryLimit");
	}
}

npurtError_t npurtSetMemoryFraction(int device, double fraction)
{
	try {
		if (npurtError_t err =
		            Runtime::instance().startAndCheck(device, "npurtSetMemoryFraction"))
			return err;
		// NaN fails the comparison too.
		if (!(fraction > 0.0 && fraction <= 1.0))
			return setError(
			        npurtErrorInvalidValue,
			        "npurtSetMemoryFraction: the fraction must be in (0, 1], not " +
			                std::to_string(fraction));
		uint64_t total = Runtime::instance().device(device).prop().totalGlobalMem;
		auto bytes =
		        static_cast<uint64_t>(std::floor(fraction * static_cast<double>(total)));
		Runtime::instance().device(device).setLimit(bytes ? bytes : 1);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtSetMemoryFraction");
	}
}

npurtError_t npurtGetMemoryLimit(int device, size_t *bytes)
{
	try {
		if (!bytes)
			return nullArgument("npurtGetMemoryLimit", "bytes");
		if (npurtError_t err =
		            Runtime::instance().startAndCheck(device, "npurtGetMemoryLimit"))
			return err;
		*bytes = Runtime::instance().device(device).limit();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtGetMemoryLimit");
	}
}

npurtError_t npurtMemGetSnapshot(npurtMemSegmentInfo *segments, size_t *segmentCount,
                                 npurtMemBlockInfo *blocks, size_t *blockCount)
{
	try {
		if (!segmentCount)
			return nullArgument("npurtMemGetSnapshot", "segmentCount");
		if (!blockCount)
			return nullArgument("npurtMemGetSnapshot", "blockCount");
		if ((*segmentCount && !segments) || (*blockCount && !blocks))
			return setError(npurtErrorInvalidValue,
			                "npurtMemGetSnapshot: a non-zero count with a null array");
		Context *c = nullptr;
		if (npurtError_t err =
		            Runtime::instance().currentContext(&c, "npurtMemGetSnapshot"))
			return err;
		npurt::PoolSnapshot snap = c->pool().snapshot();
		const size_t haveSegments = *segmentCount, haveBlocks = *blockCount;
		*segmentCount = snap.segments.size();
		*blockCount = snap.blocks.size();
		if (!haveSegments && !haveBlocks)
			return npurtSuccess;  // the sizing call
		if (haveSegments < snap.segments.size() || haveBlocks < snap.blocks.size())
			return setError(
			        npurtErrorInvalidValue,
			        "npurtMemGetSnapshot: the pool has " +
			                std::to_string(snap.segments.size()) + " segments and " +
			                std::to_string(snap.blocks.size()) +
			                " blocks; the arrays hold " + std::to_string(haveSegments) +
			                " and " + std::to_string(haveBlocks) +
			                " (the counts now say what is needed)");
		for (size_t i = 0; i < snap.segments.size(); i++) {
			const auto &s = snap.segments[i];
			segments[i] = npurtMemSegmentInfo{};
			segments[i].address = s.addr;
			segments[i].size = s.size;
			segments[i].allocatedBytes = s.allocated;
			segments[i].pendingFreeBytes = s.pendingFree;
			segments[i].firstBlock = s.firstBlock;
			segments[i].blocks = s.blocks;
			segments[i].small = s.small ? 1 : 0;
			segments[i].expandable = s.expandable ? 1 : 0;
			segments[i].mappedBytes = s.mapped;
		}
		for (size_t i = 0; i < snap.blocks.size(); i++) {
			const auto &b = snap.blocks[i];
			blocks[i] = npurtMemBlockInfo{};
			blocks[i].address = b.addr;
			blocks[i].size = b.size;
			blocks[i].requestedSize = b.requested;
			blocks[i].segment = b.segment;
			blocks[i].state = b.state == npurt::PoolSnapshot::State::Allocated
			                          ? npurtMemBlockAllocated
			                  : b.state == npurt::PoolSnapshot::State::PendingFree
			                          ? npurtMemBlockPendingFree
			                          : npurtMemBlockFree;
			blocks[i].callSite = b.site.text;
			blocks[i].returnAddress = b.site.returnAddress;
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemGetSnapshot");
	}
}

static_assert(static_cast<uint32_t>(npurt::TraceEvent::Action::Oom) == npurtMemTraceOom,
              "TraceEvent::Action follows npurtMemTraceAction");
static_assert(sizeof(npurtMemTraceEntry) == 88, "npurtMemTraceEntry is ABI: grow it into reserved");

npurtError_t npurtMemRecordHistory(size_t maxEntries)
{
	try {
		if (npurtError_t err = Runtime::instance().start())
			return err;
		npurt::setHistoryLimit(maxEntries);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemRecordHistory");
	}
}

npurtError_t npurtMemGetHistory(npurtMemTraceEntry *entries, size_t *count)
{
	try {
		const char *api = "npurtMemGetHistory";
		if (!count)
			return nullArgument(api, "count");
		if (*count && !entries)
			return setError(npurtErrorInvalidValue,
			                "npurtMemGetHistory: a non-zero count with a null array");
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		const std::vector<npurt::TraceEvent> events = c->pool().history();
		const size_t have = *count;
		*count = events.size();
		if (!have)
			return npurtSuccess;  // the sizing call
		if (have < events.size())
			return setError(npurtErrorInvalidValue,
			                "npurtMemGetHistory: the history holds " +
			                        std::to_string(events.size()) +
			                        " events; the array holds " + std::to_string(have) +
			                        " (the count now says what is needed)");
		// Streams by serial, as they are now: a destroyed one has none.
		std::map<uint64_t, npurtStream_t> streams;
		c->forEachStream([&streams](npurt::Stream *st) {
			if (!st->isDefault())
				streams[st->serial()] = st;
		});
		for (size_t i = 0; i < events.size(); i++) {
			const npurt::TraceEvent &e = events[i];
			npurtMemTraceEntry &out = entries[i];
			out = npurtMemTraceEntry{};
			out.action = static_cast<uint32_t>(e.action);
			out.address = e.addr;
			out.size = e.size;
			auto it = streams.find(e.stream);
			out.stream = it == streams.end() ? nullptr : it->second;
			out.timeNs = e.timeNs;
			out.callSite = e.site.text;
			out.returnAddress = e.site.returnAddress;
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemGetHistory");
	}
}

npurtError_t npurtMemSetOomObserver(npurtOomObserver observer, void *userData)
{
	std::lock_guard<std::mutex> lock(gObserverMutex);
	gObserver = observer;
	gObserverData = observer ? userData : nullptr;
	return npurtSuccess;
}

npurtError_t npurtMemSetAllocatorConfig(const char *config)
{
	try {
		const char *api = "npurtMemSetAllocatorConfig";
		if (!config)
			return nullArgument(api, "config");
		if (npurtError_t err = Runtime::instance().start())
			return err;
		npurt::AllocatorConfig cfg;
		std::string why;
		if (!npurt::parseAllocatorConfig(config, &cfg, &why))
			return setError(npurtErrorInvalidValue, std::string(api) + ": " + why);
		npurt::setAllocatorConfig(cfg);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemSetAllocatorConfig");
	}
}

npurtError_t npurtMemGetAllocatorConfig(char *config, size_t len)
{
	try {
		const char *api = "npurtMemGetAllocatorConfig";
		if (!config)
			return nullArgument(api, "config");
		if (npurtError_t err = Runtime::instance().start())
			return err;
		std::string text = npurt::formatAllocatorConfig(npurt::allocatorConfig(nullptr));
		if (text.size() >= len)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": the settings take " +
			                        std::to_string(text.size() + 1) +
			                        " bytes, len is " + std::to_string(len));
		text.copy(config, text.size());
		config[text.size()] = '\0';
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemGetAllocatorConfig");
	}
}

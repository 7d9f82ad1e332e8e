// Stream capture: a capturing stream's enqueue calls add graph nodes instead
// of running; an event recorded in the capture carries it to the streams
// that wait for it (fork) and back (join); the capture mode decides which
// calls elsewhere it forbids. Lock order: gCaptureMutex, then a capture's
// mutex, then a stream's mutex_ (never the other way: Stream::capture()
// lets go of mutex_ before the caller locks the capture).
#include <algorithm>
#include <unordered_set>

#include "context.h"
#include "error.h"
#include "graph.h"
#include "runtime.h"
#include "stream.h"

namespace npurt {
namespace {

// Active captures (not the hidden ones that build explicit nodes), never
// destroyed: the runtime's threads may look while exit runs.
std::mutex &gCaptureMutex = *new std::mutex;  // guards gActive
std::vector<std::shared_ptr<Capture>> &gActive = *new std::vector<std::shared_ptr<Capture>>;
std::atomic<int> gActiveCount{0};
std::atomic<uint64_t> gCaptureIds{0};

thread_local npurtStreamCaptureMode tMode = npurtStreamCaptureModeGlobal;

// With cap.mutex held; the first reason stands.
void invalidate(Capture &cap, npurtError_t code, const std::string &why)
{
	if (!cap.invalid) {
		cap.invalid = code;
		cap.why = why;
	}
}

npurtError_t invalidated(const Capture &cap, const char *api)
{
	return setError(npurtErrorStreamCaptureInvalidated,
	                std::string(api) + ": the stream's capture was invalidated earlier (" +
	                        cap.why + "); end it with npurtStreamEndCapture");
}

void retire(const Capture *cap)
{
	std::lock_guard<std::mutex> lock(gCaptureMutex);
	auto it = std::ranges::find_if(gActive, [cap](const auto &c) { return c.get() == cap; });
	if (it != gActive.end()) {
		gActive.erase(it);
		gActiveCount.fetch_sub(1, std::memory_order_release);
	}
}

npurtGraphNodeType typeOf(const TaskInfo &info)
{
	if (info.op >= 0)
		return npurtGraphNodeTypeKernel;
	if (info.op == -1)
		return npurtGraphNodeTypeMemcpy;
	if (info.op == -2)
		return npurtGraphNodeTypeMemset;
	return npurtGraphNodeTypeEmpty;
}

// Whether every stream's last captured work is before the origin's: the
// forked streams joined.
bool joined(const Capture &cap, std::string *why)
{
	auto origin = cap.frontier.find(cap.origin);
	std::unordered_set<const GraphNode *> before;
	std::vector<const GraphNode *> todo;
	if (origin != cap.frontier.end())
		todo.assign(origin->second.begin(), origin->second.end());
	while (!todo.empty()) {
		const GraphNode *n = todo.back();
		todo.pop_back();
		if (!before.insert(n).second)
			continue;
		todo.insert(todo.end(), n->deps.begin(), n->deps.end());
	}
	for (const auto &[s, nodes] : cap.frontier) {
		if (s == cap.origin)
			continue;
		for (const GraphNode *n : nodes) {
			if (before.count(n))
				continue;
			*why = "graph node " + std::to_string(n->id) + " (" +
			       (n->p.tasks.empty() ? std::string("a host or event node")
			                           : n->p.tasks.front().info.what()) +
			       ") of a forked stream is not waited for by the origin stream: "
			       "record "
			       "an event after it and make the origin stream wait for it";
			return false;
		}
	}
	return true;
}

// A stream's place in its capture, with the capture locked.
struct InCapture {
	std::shared_ptr<Capture> cap;
	std::unique_lock<std::mutex> lock;
	std::vector<GraphNode *> *deps = nullptr;  // what its next work depends on
};

enum class Entry {
	Left,  // not (or no longer) in a capture: the call runs as usual
	Invalid,  // the capture was invalidated: *err says so
	In
};

Entry enter(Stream &s, const char *api, InCapture *in, npurtError_t *err)
{
	in->cap = s.capture();
	if (!in->cap)
		return Entry::Left;
	in->lock = std::unique_lock<std::mutex>(in->cap->mutex);
	auto it = in->cap->frontier.find(&s);
	if (it == in->cap->frontier.end())
		return Entry::Left;  // the capture ended meanwhile
	if (in->cap->invalid) {
		*err = invalidated(*in->cap, api);
		return Entry::Invalid;
	}
	in->deps = &it->second;
	*err = npurtSuccess;
	return Entry::In;
}

// A node after the stream's last captured work, which it becomes.
GraphNode *addAfter(InCapture &in, NodeParams p)
{
	GraphNode *n = in.cap->into().add(std::move(p), *in.deps);
	in.deps->assign(1, n);
	return n;
}

}  // namespace

Capture::~Capture()
{
	if (graph)
		unregisterGraph(graph.get());
}

npurtError_t refuseIfCapturing(const Graph &g, const char *what, const char *api)
{
	if (!g.capturing.load(std::memory_order_relaxed))
		return npurtSuccess;
	return setError(npurtErrorIllegalState,
	                std::string(api) + ": " + what +
	                        " while a stream capture builds the graph; end the capture "
	                        "(npurtStreamEndCapture) first");
}

bool anyCapture()
{
	return gActiveCount.load(std::memory_order_acquire) > 0;
}

npurtError_t captureForbids(const char *api)
{
	if (!anyCapture() || tMode == npurtStreamCaptureModeRelaxed)
		return npurtSuccess;
	const std::thread::id me = std::this_thread::get_id();
	std::vector<std::shared_ptr<Capture>> broken;
	{
		std::lock_guard<std::mutex> lock(gCaptureMutex);
		for (const auto &c : gActive) {
			bool own = c->thread == me && c->mode != npurtStreamCaptureModeRelaxed;
			bool global = tMode == npurtStreamCaptureModeGlobal && c->thread != me &&
			              c->mode == npurtStreamCaptureModeGlobal;
			if (own || global)
				broken.push_back(c);
		}
	}
	if (broken.empty())
		return npurtSuccess;
	for (const auto &c : broken) {
		std::lock_guard<std::mutex> lock(c->mutex);
		invalidate(*c, npurtErrorStreamCaptureUnsupported,
		           std::string(api) + " was called during the capture");
	}
	return setError(npurtErrorStreamCaptureUnsupported,
	                std::string(api) +
	                        ": not permitted while a stream captures (it allocates or waits "
	                        "synchronously); the capture is invalidated. Make the call before "
	                        "the capture, or capture in npurtStreamCaptureModeRelaxed (or "
	                        "switch this thread with npurtThreadExchangeStreamCaptureMode)");
}

npurtError_t captureForbidsLegacy(Context &ctx, const char *api)
{
	std::vector<std::shared_ptr<Capture>> active;
	{
		std::lock_guard<std::mutex> lock(gCaptureMutex);
		active = gActive;
	}
	bool hit = false;
	for (const auto &c : active) {
		std::lock_guard<std::mutex> lock(c->mutex);
		for (const auto &[s, nodes] : c->frontier) {
			if (&s->ctx() != &ctx || !s->blocking())
				continue;
			invalidate(*c, npurtErrorStreamCaptureImplicit,
			           std::string(api) + " used the legacy default stream");
			hit = true;
			break;
		}
	}
	if (!hit)
		return npurtSuccess;
	return setError(npurtErrorStreamCaptureImplicit,
	                std::string(api) +
	                        ": work on the legacy default stream would wait for a capturing "
	                        "blocking stream; the capture is invalidated (capture on a "
	                        "non-blocking stream, or use per-thread default streams)");
}

std::shared_ptr<Capture> Stream::capture()
{
	std::lock_guard<std::mutex> lock(mutex_);
	return capture_;
}

void Stream::joinCapture(const std::shared_ptr<Capture> &cap, std::vector<GraphNode *> deps)
{
	std::lock_guard<std::mutex> l(cap->mutex);
	cap->frontier[this] = std::move(deps);
	std::lock_guard<std::mutex> lock(mutex_);
	capture_ = cap;
	capturing_.store(true, std::memory_order_release);
}

void Stream::leaveCapture(const Capture *cap)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (capture_.get() != cap)
		return;
	capture_.reset();
	capturing_.store(false, std::memory_order_release);
	captureDeps_.clear();
}

void Stream::abandonCapture()
{
	std::shared_ptr<Capture> cap = capture();
	if (!cap)
		return;
	std::unique_ptr<Graph> graph;
	{
		std::lock_guard<std::mutex> lock(cap->mutex);
		invalidate(*cap, npurtErrorStreamCaptureInvalidated,
		           "a stream in the capture was destroyed");
		if (cap->origin == this && cap->graph) {
			// Nothing can end the capture now: it ends here, without
			// a graph, for the streams that joined it too.
			cap->active = false;
			for (const auto &[s, nodes] : cap->frontier)
				if (s != this)
					s->leaveCapture(cap.get());
			cap->frontier.clear();
			graph = std::move(cap->graph);
			graph->capturing.store(false, std::memory_order_relaxed);
		} else {
			cap->frontier.erase(this);
		}
	}
	leaveCapture(cap.get());
	if (cap->origin == this)
		retire(cap.get());
	if (graph)
		unregisterGraph(graph.get());  // its handle is refused from now on
}

npurtError_t Stream::captureRefuse(const char *api, const std::string &what)
{
	if (std::shared_ptr<Capture> cap = capture()) {
		std::lock_guard<std::mutex> lock(cap->mutex);
		invalidate(*cap, npurtErrorStreamCaptureUnsupported,
		           what + " (" + std::string(api) + ")");
	}
	return setError(npurtErrorStreamCaptureUnsupported,
	                std::string(api) + ": " + what +
	                        " is not permitted while the stream is capturing; the capture "
	                        "is invalidated");
}

npurtError_t Stream::beginCapture(npurtStreamCaptureMode mode, const char *api)
{
	if (mode != npurtStreamCaptureModeGlobal && mode != npurtStreamCaptureModeThreadLocal &&
	    mode != npurtStreamCaptureModeRelaxed)
		return setError(npurtErrorInvalidValue, std::string(api) +
		                                                ": unknown capture mode " +
		                                                std::to_string(mode));
	if (isDefault_)
		return setError(npurtErrorStreamCaptureUnsupported,
		                std::string(api) + ": the legacy default stream cannot capture "
		                                   "(capture a created stream, or "
		                                   "npurtStreamPerThread)");
	auto cap = std::make_shared<Capture>();
	cap->id = gCaptureIds.fetch_add(1, std::memory_order_relaxed) + 1;
	cap->mode = mode;
	cap->thread = std::this_thread::get_id();
	cap->origin = this;
	cap->graph = std::make_unique<Graph>(ctx_);
	cap->graph->capturing.store(true, std::memory_order_relaxed);
	{
		std::lock_guard<std::mutex> l(cap->mutex);
		std::lock_guard<std::mutex> lock(mutex_);
		if (capture_)
			return setError(npurtErrorIllegalState,
			                std::string(api) + ": the stream is capturing already");
		if (failed_)
			return setError(failed_, std::string(api) + ": " + failMessage_);
		cap->frontier[this] = {};
		capture_ = cap;
		capturing_.store(true, std::memory_order_release);
	}
	// A live graph from now on: npurtStreamGetCaptureInfo hands it out.
	registerGraph(cap->graph.get());
	std::lock_guard<std::mutex> lock(gCaptureMutex);
	gActive.push_back(cap);
	gActiveCount.fetch_add(1, std::memory_order_release);
	return npurtSuccess;
}

npurtError_t Stream::endCapture(Graph **out, const char *api)
{
	*out = nullptr;
	std::shared_ptr<Capture> cap = capture();
	if (!cap || cap->builder)
		return setError(npurtErrorIllegalState,
		                std::string(api) + ": the stream is not capturing");
	if (cap->origin != this) {
		{
			std::lock_guard<std::mutex> lock(cap->mutex);
			invalidate(*cap, npurtErrorStreamCaptureUnmatched,
			           "npurtStreamEndCapture was called on a forked stream");
		}
		return setError(npurtErrorStreamCaptureUnmatched,
		                std::string(api) + ": the capture began on another stream (this "
		                                   "one joined it by an event wait): end it on "
		                                   "the stream that began it");
	}
	if (cap->mode != npurtStreamCaptureModeRelaxed && cap->thread != std::this_thread::get_id())
		return setError(npurtErrorStreamCaptureWrongThread,
		                std::string(api) + ": a global or thread-local capture is ended by "
		                                   "the thread that began it");
	npurtError_t code = npurtSuccess;
	std::string why;
	std::unique_ptr<Graph> graph;
	{
		std::lock_guard<std::mutex> lock(cap->mutex);
		if (!cap->graph)  // another thread's npurtStreamEndCapture won
			return setError(npurtErrorIllegalState,
			                std::string(api) + ": the capture has ended already");
		cap->active = false;
		code = cap->invalid;
		why = cap->why;
		if (!code && !joined(*cap, &why))
			code = npurtErrorStreamCaptureUnjoined;
		for (const auto &[s, nodes] : cap->frontier)
			s->leaveCapture(cap.get());
		cap->frontier.clear();
		graph = std::move(cap->graph);
		graph->capturing.store(false, std::memory_order_relaxed);
	}
	retire(cap.get());
	if (code) {
		// No graph: its handle (npurtStreamGetCaptureInfo's) dies.
		unregisterGraph(graph.get());
		if (code == npurtErrorStreamCaptureUnjoined)
			return setError(code, std::string(api) + ": " + why);
		return setError(npurtErrorStreamCaptureInvalidated,
		                std::string(api) + ": the capture was invalidated (" + why +
		                        "): no graph");
	}
	*out = graph.release();
	return npurtSuccess;
}

npurtError_t Stream::updateCaptureDependencies(const std::vector<GraphNode *> &nodes, bool set,
                                               const char *api)
{
	std::shared_ptr<Capture> cap = capture();
	if (!cap || cap->builder)
		return setError(npurtErrorIllegalState,
		                std::string(api) + ": the stream is not capturing");
	std::lock_guard<std::mutex> l(cap->mutex);
	auto it = cap->frontier.find(this);
	if (it == cap->frontier.end())
		return setError(npurtErrorIllegalState,
		                std::string(api) + ": the stream's capture has ended");
	if (cap->invalid)
		return invalidated(*cap, api);
	for (size_t i = 0; i < nodes.size(); i++)
		if (nodes[i]->graph != cap->graph.get())
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": node " + std::to_string(i) +
			                        " is not a node of the graph being captured");
	if (set)
		it->second.clear();
	for (GraphNode *n : nodes)
		if (std::ranges::find(it->second, n) == it->second.end())
			it->second.push_back(n);
	return npurtSuccess;
}

npurtError_t Stream::captureInfo(npurtStreamCaptureStatus *status, unsigned long long *id,
                                 Graph **graph, const npurtGraphNode_t **deps, size_t *count)
{
	std::shared_ptr<Capture> cap = capture();
	if (!cap || cap->builder) {
		*status = npurtStreamCaptureStatusNone;
		*id = 0;
		*graph = nullptr;
		*deps = nullptr;
		*count = 0;
		return npurtSuccess;
	}
	std::lock_guard<std::mutex> l(cap->mutex);
	*status =
	        cap->invalid ? npurtStreamCaptureStatusInvalidated : npurtStreamCaptureStatusActive;
	*id = cap->id;
	*graph = cap->graph.get();
	std::lock_guard<std::mutex> lock(mutex_);
	captureDeps_.clear();
	auto it = cap->frontier.find(this);
	if (it != cap->frontier.end())
		captureDeps_.assign(it->second.begin(), it->second.end());
	*deps = captureDeps_.data();
	*count = captureDeps_.size();
	return npurtSuccess;
}

bool Stream::captureTask(uint32_t engineClass, const void *packet, uint32_t size,
                         const TaskInfo &info, bool callerWaits, npurtError_t *err)
{
	if (callerWaits && capture()) {
		*err = captureRefuse(info.api, "a synchronous call (it waits for its work)");
		return true;
	}
	InCapture in;
	Entry e = enter(*this, info.api, &in, err);
	if (e != Entry::In)
		return e == Entry::Invalid;
	GraphNode *n = in.cap->open;
	if (!n) {
		NodeParams p;
		p.type = typeOf(info);
		p.site = info.site;
		n = addAfter(in, std::move(p));
		if (in.cap->builder)
			in.cap->open = n;
	}
	GraphTask t;
	t.engineClass = engineClass;
	const auto *b = static_cast<const uint8_t *>(packet);
	t.packet.assign(b, b + size);
	t.info = info;
	t.info.graphNode = n->id;
	n->p.tasks.push_back(std::move(t));
	return true;
}

bool Stream::captureHost(std::function<void(npurtError_t)> fn, bool afterFailure,
                         const TaskInfo &info, const npurtHostNodeParams *raw, npurtError_t *err)
{
	InCapture in;
	Entry e = enter(*this, info.api, &in, err);
	if (e != Entry::In)
		return e == Entry::Invalid;
	NodeParams p;
	p.type = npurtGraphNodeTypeHost;
	p.hostFn = std::move(fn);
	p.hostAfterFailure = afterFailure;
	if (raw)
		p.host = *raw;
	p.site = info.site;
	addAfter(in, std::move(p));
	return true;
}

bool Stream::captureGraph(const Graph &g, const char *api, npurtError_t *err)
{
	if (!capturing())
		return false;
	// As npurtGraphAddChildGraphNode refuses it.
	if (g.hasMemoryNodes()) {
		*err = captureRefuse(api, "launching a graph with memory alloc or free nodes "
		                          "(it cannot be a child graph)");
		return true;
	}
	std::shared_ptr<Graph> child = embedGraph(g);  // copied outside the capture's lock
	InCapture in;
	Entry e = enter(*this, api, &in, err);
	if (e != Entry::In)
		return e == Entry::Invalid;
	NodeParams p;
	p.type = npurtGraphNodeTypeGraph;
	p.child = std::move(child);
	addAfter(in, std::move(p));
	return true;
}

bool Stream::captureExternal(Event &ev, bool record, const char *api, npurtError_t *err)
{
	if (!capturing())
		return false;
	InCapture in;
	Entry e = enter(*this, api, &in, err);
	if (e != Entry::In)
		return e == Entry::Invalid;
	NodeParams p;
	p.type = record ? npurtGraphNodeTypeEventRecord : npurtGraphNodeTypeWaitEvent;
	p.event = &ev;
	GraphNode *n = addAfter(in, std::move(p));
	if (record)
		ev.setCaptured(in.cap, {n});
	return true;
}

bool Stream::captureRecord(Event &ev, const char *api, npurtError_t *err)
{
	InCapture in;
	Entry e = enter(*this, api, &in, err);
	if (e == Entry::In)
		ev.setCaptured(in.cap, *in.deps);
	return e != Entry::Left;
}

bool Stream::captureWait(Event &ev, const char *api, npurtError_t *err)
{
	std::vector<GraphNode *> nodes;
	std::shared_ptr<Capture> from = ev.captured(&nodes);
	std::shared_ptr<Capture> mine = capturing() ? capture() : nullptr;
	if (!from && !mine)
		return false;
	*err = npurtSuccess;
	if (!from) {
		// Captured work cannot wait for work outside the capture (a
		// launch of the graph would not know which run of it to wait for).
		if (!ev.recorded())
			return true;  // nothing to wait for
		std::lock_guard<std::mutex> lock(mine->mutex);
		invalidate(*mine, npurtErrorStreamCaptureIsolation,
		           std::string(api) + " waited for an event recorded outside the capture");
		*err = setError(npurtErrorStreamCaptureIsolation,
		                std::string(api) +
		                        ": the event was recorded outside the capture; a capturing "
		                        "stream waits only for events recorded in its capture (the "
		                        "capture is invalidated)");
		return true;
	}
	if (mine && mine != from) {
		std::lock_guard<std::mutex> lock(mine->mutex);
		invalidate(*mine, npurtErrorStreamCaptureMerge,
		           std::string(api) + " waited for an event of another capture");
		*err = setError(npurtErrorStreamCaptureMerge,
		                std::string(api) + ": the event was recorded in another capture; "
		                                   "two captures cannot merge (the capture is "
		                                   "invalidated)");
		return true;
	}
	std::lock_guard<std::mutex> lock(from->mutex);
	if (!from->active) {
		*err = setError(npurtErrorCapturedEvent,
		                std::string(api) +
		                        ": the event was last recorded in a capture that "
		                        "has ended; record it again outside a capture");
		return true;
	}
	if (from->invalid) {
		*err = invalidated(*from, api);
		return true;
	}
	auto it = from->frontier.find(this);
	if (it == from->frontier.end()) {
		// Fork: the stream joins the capture.
		if (isDefault_) {
			invalidate(*from, npurtErrorStreamCaptureImplicit,
			           std::string(api) + " made the legacy default stream wait");
			*err = setError(npurtErrorStreamCaptureImplicit,
			                std::string(api) +
			                        ": the legacy default stream cannot join a "
			                        "capture (the capture is invalidated)");
			return true;
		}
		from->frontier[this] = std::move(nodes);
		std::lock_guard<std::mutex> l(mutex_);
		capture_ = from;
		capturing_.store(true, std::memory_order_release);
		return true;
	}
	for (GraphNode *n : nodes)
		if (std::ranges::find(it->second, n) == it->second.end())
			it->second.push_back(n);
	return true;
}

npurtError_t buildNode(Graph &g, const std::vector<GraphNode *> &deps,
                       const std::function<npurtError_t(npurtStream_t)> &enqueue,
                       npurtGraphNodeType type, GraphNode **out, const char *api)
{
	if (!g.alive())
		return setError(npurtErrorInvalidValue,
		                std::string(api) +
		                        ": the graph's device was reset; make a new graph");
	Stream *s = createStreamForContext(g.ctx(), npurtStreamNonBlocking, 0, false);
	s->markBuilder();
	auto cap = std::make_shared<Capture>();
	cap->builder = true;
	cap->target = &g;
	cap->origin = s;
	s->joinCapture(cap, deps);
	npurtError_t err = enqueue(s);
	GraphNode *n = nullptr;
	{
		std::lock_guard<std::mutex> lock(cap->mutex);
		n = cap->open;
		if (!err && cap->invalid)
			err = setError(cap->invalid, std::string(api) + ": " + cap->why);
	}
	s->leaveCapture(cap.get());
	destroyStreamForContext(s);
	if (!err && !n)
		err = setError(npurtErrorInvalidValue,
		               std::string(api) + ": the node would do nothing (a size of 0)");
	if (err) {
		if (n)
			g.remove(n);
		return err;
	}
	n->p.type = type;
	// Reports name the graph call that made the node.
	for (GraphTask &t : n->p.tasks)
		t.info.api = api;
	*out = n;
	return npurtSuccess;
}

bool captureMalloc(Stream &s, size_t bytes, void **out, const CallSite &site, const char *api,
                   npurtError_t *err)
{
	std::shared_ptr<Capture> cap = s.capture();
	if (!cap)
		return false;
	std::shared_ptr<GraphMemory> mem;
	{
		std::lock_guard<std::mutex> lock(cap->mutex);
		if (!cap->frontier.count(&s))
			return false;
		if (cap->invalid) {
			*err = invalidated(*cap, api);
			return true;
		}
		mem = cap->into().memory();
	}
	// Allocated without the capture's lock: the allocator may wait for
	// streams to free cached memory.
	void *p = nullptr;
	if ((*err = allocGraphMemory(*mem, bytes, site, &p, api))) {
		std::lock_guard<std::mutex> lock(cap->mutex);
		invalidate(*cap, *err, std::string(api) + " could not allocate graph memory");
		return true;
	}
	std::lock_guard<std::mutex> lock(cap->mutex);
	auto it = cap->frontier.find(&s);
	if (it == cap->frontier.end() || cap->invalid) {
		// Ended or invalidated meanwhile: the block stays with the
		// graph's memory, freed with it.
		*err = cap->invalid ? invalidated(*cap, api)
		                    : setError(npurtErrorStreamCaptureInvalidated,
		                               std::string(api) + ": the capture ended meanwhile");
		return true;
	}
	NodeParams np;
	np.type = npurtGraphNodeTypeMemAlloc;
	np.dptr = p;
	np.bytes = bytes;
	np.site = site;
	GraphNode *n = cap->into().add(std::move(np), it->second);
	it->second.assign(1, n);
	*out = p;
	return true;
}

bool captureFree(Stream &s, void *p, const CallSite &site, const char *api, npurtError_t *err)
{
	InCapture in;
	Entry e = enter(s, api, &in, err);
	if (e != Entry::In)
		return e == Entry::Invalid;
	bool ours = std::ranges::any_of(in.cap->into().nodes(), [p](const auto &n) {
		return n->p.type == npurtGraphNodeTypeMemAlloc && n->p.dptr == p;
	});
	if (!ours) {
		invalidate(*in.cap, npurtErrorInvalidValue,
		           std::string(api) + " freed memory not allocated in the capture");
		*err = setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + hexAddr(reinterpret_cast<uint64_t>(p)) +
		                        " was not allocated in this capture: a capture frees only "
		                        "its own allocations (the capture is invalidated)");
		return true;
	}
	NodeParams np;
	np.type = npurtGraphNodeTypeMemFree;
	np.dptr = p;
	np.site = site;
	addAfter(in, std::move(np));
	return true;
}

npurtStreamCaptureMode exchangeCaptureMode(npurtStreamCaptureMode mode)
{
	npurtStreamCaptureMode old = tMode;
	tMode = mode;
	return old;
}

// Events.

void Event::setCaptured(std::shared_ptr<Capture> cap, std::vector<GraphNode *> nodes)
{
	std::lock_guard<std::mutex> lock(mutex_);
	capture_ = std::move(cap);
	capNodes_ = std::move(nodes);
}

std::shared_ptr<Capture> Event::captured(std::vector<GraphNode *> *nodes)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (capture_)
		*nodes = capNodes_;
	return capture_;
}

npurtError_t Event::checkNotCaptured(const char *api)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (!capture_)
		return npurtSuccess;
	return setError(npurtErrorCapturedEvent,
	                std::string(api) + ": the event was last recorded in a stream capture; "
	                                   "record it outside a capture to query, synchronize "
	                                   "or time it");
}

}  // namespace npurt

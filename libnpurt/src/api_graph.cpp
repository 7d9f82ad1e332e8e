// C API: stream capture, graphs and their nodes, executable graphs. Checks
// the arguments and handles; graph.cpp, capture.cpp and graph_launch.cpp do
// the rest. Op, copy and fill nodes are made by the enqueue calls
// themselves (buildNode), so they are checked exactly as those are.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "context.h"
#include "copy.h"
#include "error.h"
#include "graph.h"
#include "npu_drm.h"
#include "runtime.h"
#include "stream.h"

using npurt::Context;
using npurt::Event;
using npurt::Graph;
using npurt::GraphExec;
using npurt::GraphNode;
using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;
using npurt::Stream;

namespace {

using Enqueue = std::function<npurtError_t(npurtStream_t)>;
using NodeCopy = npurt::NodeParams::Copy;

npurtError_t dependencies(Graph &g, const npurtGraphNode_t *deps, size_t n,
                          std::vector<GraphNode *> *out, const char *api)
{
	if (n && !deps)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": pDependencies is NULL with numDependencies " +
		                        std::to_string(n));
	for (size_t i = 0; i < n; i++) {
		GraphNode *d = nullptr;
		if (npurtError_t err = npurt::resolveNode(deps[i], &d, api))
			return err;
		if (d->graph != &g)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": dependency " + std::to_string(i) +
			                        " is a node of another graph");
		out->push_back(d);
	}
	return npurtSuccess;
}

// The graph and the ends of the edges from[i] -> to[i].
npurtError_t edges(npurtGraph_t graph, const npurtGraphNode_t *from, const npurtGraphNode_t *to,
                   size_t n, Graph **g, std::vector<GraphNode *> *a, std::vector<GraphNode *> *b,
                   const char *api)
{
	if (npurtError_t err = npurt::resolveGraph(graph, g, api))
		return err;
	if (n && (!from || !to))
		return nullArgument(api, !from ? "from" : "to");
	if (npurtError_t err = dependencies(**g, from, n, a, api))
		return err;
	return dependencies(**g, to, n, b, api);
}

// The graph of a node to be added, with its dependencies in *d; null (and
// *err) if an argument is bad.
Graph *target(npurtGraphNode_t *pNode, npurtGraph_t graph, const npurtGraphNode_t *deps, size_t n,
              std::vector<GraphNode *> *d, npurtError_t *err, const char *api)
{
	Graph *g = nullptr;
	if (!pNode)
		*err = nullArgument(api, "pGraphNode");
	else if ((*err = npurt::resolveGraph(graph, &g, api)))
		return nullptr;
	else if (!g->alive())
		*err = setError(npurtErrorInvalidValue,
		                std::string(api) +
		                        ": the graph's device was reset; make a new graph");
	else
		*err = dependencies(*g, deps, n, d, api);
	return *err ? nullptr : g;
}

npurtError_t nodeOfType(npurtGraphNode_t node, npurtGraphNodeType type, GraphNode **out,
                        const char *api)
{
	if (npurtError_t err = npurt::resolveNode(node, out, api))
		return err;
	if ((*out)->p.type != type)
		return setError(npurtErrorInvalidValue, std::string(api) + ": graph node " +
		                                                std::to_string((*out)->id) +
		                                                " is not of this type");
	return npurtSuccess;
}

// The tasks of n made again by enqueue (a parameter update), on a scratch
// graph of ctx: n keeps them only if the call succeeds.
npurtError_t rebuild(Context &ctx, GraphNode *n, const Enqueue &enqueue, const char *api)
{
	Graph scratch(ctx);
	GraphNode *made = nullptr;
	if (npurtError_t err = npurt::buildNode(scratch, {}, enqueue, n->p.type, &made, api))
		return err;
	n->p.tasks = std::move(made->p.tasks);
	n->p.site = made->p.site;
	return npurtSuccess;
}

Enqueue opCall(const npurtOpDesc *desc, void *ra)
{
	return [desc, ra](npurtStream_t s) { return npurt::enqueueOp(desc, s, ra); };
}

Enqueue copyCall(void *dst, const void *src, size_t count, npurtMemcpyKind kind, void *ra,
                 const char *api)
{
	return [=](npurtStream_t s) {
		if (!count)
			return setError(npurtErrorInvalidValue, std::string(api) + ": count is 0");
		return npurt::planCopy(api, dst, src, count, kind, s, false, ra);
	};
}

npurtError_t checkMemset(const npurtMemsetParams *p, const char *api)
{
	if (!p)
		return nullArgument(api, "pMemsetParams");
	if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": elementSize must be 1, 2 or 4, not " +
		                        std::to_string(p->elementSize));
	if (!p->width || !p->height)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": width and height must not be 0");
	size_t row = 0;
	if (__builtin_mul_overflow(p->width, size_t{p->elementSize}, &row) ||
	    (p->height > 1 && p->pitch < row))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the pitch is smaller than a row (width * "
		                                   "elementSize bytes)");
	size_t span = 0;
	if (p->height > 1 && (__builtin_mul_overflow(p->pitch, p->height - 1, &span) ||
	                      __builtin_add_overflow(span, row, &span)))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the extent overflows");
	return npurtSuccess;
}

Enqueue fillCall(const npurtMemsetParams &p, void *ra, const char *api)
{
	return [p, ra, api](npurtStream_t s) {
		uint32_t mask = p.elementSize == 4 ? 0xffffffffu : (1u << (8 * p.elementSize)) - 1;
		auto *base = static_cast<char *>(p.dst);
		for (size_t r = 0; r < p.height; r++)
			if (npurtError_t err =
			            npurt::planFill(api, base + r * p.pitch, p.value & mask,
			                            p.elementSize, p.width, s, false, ra))
				return err;
		return npurtSuccess;
	};
}

std::function<void(npurtError_t)> hostCall(const npurtHostNodeParams &p)
{
	return [fn = p.fn, data = p.userData](npurtError_t) { fn(data); };
}

// CUDA's list convention: a NULL array asks for the count; a longer one
// is NULL-filled after the entries and *num set to the count.
npurtError_t listOut(const std::vector<GraphNode *> &v, npurtGraphNode_t *arr, size_t *num,
                     const char *api, const char *numName)
{
	if (!num)
		return nullArgument(api, numName);
	if (!arr) {
		*num = v.size();
		return npurtSuccess;
	}
	size_t k = std::min(*num, v.size());
	for (size_t i = 0; i < k; i++)
		arr[i] = v[i];
	if (*num > v.size()) {
		for (size_t i = v.size(); i < *num; i++)
			arr[i] = nullptr;
		*num = v.size();
	}
	return npurtSuccess;
}

std::vector<GraphNode *> allNodes(const Graph &g)
{
	std::vector<GraphNode *> v;
	for (const auto &n : g.nodes())
		v.push_back(n.get());
	return v;
}

// The op a captured op node's packet holds (for npurtGraphKernelNodeGetParams).
npurtOpDesc opOfPacket(const std::vector<uint8_t> &packet)
{
	npurtOpDesc d{};
	drm_npu_pkt_op p{};
	if (packet.size() < sizeof(p))
		return d;
	std::memcpy(&p, packet.data(), sizeof(p));
	d.op = static_cast<npurtOpKind>(p.op);
	d.dtype = static_cast<npurtDataType>(p.dtype);
	d.outDtype = static_cast<npurtDataType>(p.out_dtype);
	d.flags = p.flags;
	d.a = reinterpret_cast<const void *>(p.a);
	d.b = reinterpret_cast<const void *>(p.b);
	d.c = reinterpret_cast<const void *>(p.c);
	d.out = reinterpret_cast<void *>(p.out);
	d.m = p.m;
	d.n = p.n;
	d.k = p.k;
	d.axis = static_cast<int>(p.axis);
	std::memcpy(&d.alpha, &p.alpha_bits, 4);
	std::memcpy(&d.beta, &p.beta_bits, 4);
	return d;
}

npurtError_t notAnExecNode(const char *api)
{
	return setError(npurtErrorInvalidValue,
	                std::string(api) + ": not a node of the graph the executable graph "
	                                   "was made from");
}

npurtError_t execNode(npurtGraphExec_t exec, npurtGraphNode_t node, npurtGraphNodeType type,
                      GraphExec **e, GraphNode **n, const char *api)
{
	if (npurtError_t err = npurt::resolveExec(exec, e, api))
		return err;
	*n = (*e)->mine(node);
	if (!*n)
		return notAnExecNode(api);
	if ((*n)->p.type != type)
		return setError(npurtErrorInvalidValue, std::string(api) + ": graph node " +
		                                                std::to_string((*n)->id) +
		                                                " is not of this type");
	return npurtSuccess;
}

// An executable graph's kernel, memcpy or memset node: the ones that can be
// disabled (as CUDA's).
npurtError_t switchableNode(npurtGraphExec_t exec, npurtGraphNode_t node, GraphExec **e,
                            GraphNode **n, const char *api)
{
	if (npurtError_t err = npurt::resolveExec(exec, e, api))
		return err;
	*n = (*e)->mine(node);
	if (!*n)
		return notAnExecNode(api);
	const npurtGraphNodeType t = (*n)->p.type;
	if (t != npurtGraphNodeTypeKernel && t != npurtGraphNodeTypeMemcpy &&
	    t != npurtGraphNodeTypeMemset)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": graph node " + std::to_string((*n)->id) +
		                        " is not a kernel, memcpy or memset node (only those can "
		                        "be disabled)");
	return npurtSuccess;
}

// Runs f, turning exceptions into errors.
template <typename F> npurtError_t guarded(const char *api, F f)
{
	try {
		return f();
	} catch (...) {
		return npurt::errorFromException(api);
	}
}

npurtError_t addNode(npurtGraphNode_t *pNode, npurtGraph_t graph, const npurtGraphNode_t *deps,
                     size_t n, npurt::NodeParams p, const char *api, GraphNode **made = nullptr)
{
	std::vector<GraphNode *> d;
	npurtError_t err = npurtSuccess;
	Graph *g = target(pNode, graph, deps, n, &d, &err, api);
	if (!g)
		return err;
	GraphNode *node = g->add(std::move(p), d);
	*pNode = node;
	if (made)
		*made = node;
	return npurtSuccess;
}

npurtError_t addBuilt(npurtGraphNode_t *pNode, npurtGraph_t graph, const npurtGraphNode_t *deps,
                      size_t n, const Enqueue &enqueue, npurtGraphNodeType type, GraphNode **made,
                      const char *api)
{
	std::vector<GraphNode *> d;
	npurtError_t err = npurtSuccess;
	Graph *g = target(pNode, graph, deps, n, &d, &err, api);
	if (!g)
		return err;
	if ((err = npurt::buildNode(*g, d, enqueue, type, made, api)))
		return err;
	*pNode = *made;
	return npurtSuccess;
}

npurtError_t eventNode(npurtGraphNode_t *pNode, npurtGraph_t graph, const npurtGraphNode_t *deps,
                       size_t n, npurtEvent_t event, npurtGraphNodeType type, const char *api)
{
	Event *ev = nullptr;
	if (npurtError_t err = npurt::resolveEvent(event, &ev, api))
		return err;
	npurt::NodeParams p;
	p.type = type;
	p.event = ev;
	return addNode(pNode, graph, deps, n, std::move(p), api);
}

// f(ctx, node) for a node of the given type of a user's graph.
template <typename F>
npurtError_t onNode(npurtGraphNode_t node, npurtGraphNodeType type, const char *api, F f)
{
	GraphNode *n = nullptr;
	if (npurtError_t err = nodeOfType(node, type, &n, api))
		return err;
	return f(n->graph->ctx(), *n);
}

// f(ctx, node) for an executable graph's copy of node; later launches use
// what it changed.
template <typename F>
npurtError_t onExecNode(npurtGraphExec_t exec, npurtGraphNode_t node, npurtGraphNodeType type,
                        const char *api, F f)
{
	GraphExec *e = nullptr;
	GraphNode *n = nullptr;
	if (npurtError_t err = execNode(exec, node, type, &e, &n, api))
		return err;
	if (npurtError_t err = f(e->ctx(), *n))
		return err;
	e->replan();
	return npurtSuccess;
}

// A node's new parameters: checked and planned as the enqueue call would,
// kept only if good.
npurtError_t setOp(Context &ctx, GraphNode &n, const npurtOpDesc *d, void *ra, const char *api)
{
	if (!d)
		return nullArgument(api, "pNodeParams");
	if (npurtError_t err = rebuild(ctx, &n, opCall(d, ra), api))
		return err;
	n.p.op = *d;
	return npurtSuccess;
}

npurtError_t setCopy(Context &ctx, GraphNode &n, const NodeCopy &c, void *ra, const char *api)
{
	if (npurtError_t err =
	            rebuild(ctx, &n, copyCall(c.dst, c.src, c.count, c.kind, ra, api), api))
		return err;
	n.p.copy = c;
	return npurtSuccess;
}

npurtError_t setMemset(Context &ctx, GraphNode &n, const npurtMemsetParams *p, void *ra,
                       const char *api)
{
	if (npurtError_t err = checkMemset(p, api))
		return err;
	if (npurtError_t err = rebuild(ctx, &n, fillCall(*p, ra, api), api))
		return err;
	n.p.memset = *p;
	return npurtSuccess;
}

npurtError_t setHost(GraphNode &n, const npurtHostNodeParams *p, const char *api)
{
	if (!p || !p->fn)
		return nullArgument(api, !p ? "pNodeParams" : "pNodeParams->fn");
	n.p.host = *p;
	n.p.hostFn = hostCall(*p);
	n.p.hostAfterFailure = false;
	return npurtSuccess;
}

npurtError_t setEvent(GraphNode &n, npurtEvent_t event, const char *api)
{
	Event *ev = nullptr;
	if (npurtError_t err = npurt::resolveEvent(event, &ev, api))
		return err;
	n.p.event = ev;
	return npurtSuccess;
}

// A getter's output, for a node of the given type.
template <typename T, typename F>
npurtError_t getParam(npurtGraphNode_t node, npurtGraphNodeType type, T *out, const char *outName,
                      const char *api, F get)
{
	if (!out)
		return nullArgument(api, outName);
	return onNode(node, type, api, [&](Context &, GraphNode &n) {
		*out = get(n);
		return npurtSuccess;
	});
}

// The event of a record or wait node, and a new one for it.
npurtError_t eventOf(npurtGraphNode_t node, npurtEvent_t *out, npurtGraphNodeType type,
                     const char *api)
{
	return guarded(api, [&] {
		return getParam(node, type, out, "event_out", api,
		                [](const GraphNode &n) -> npurtEvent_t { return n.p.event; });
	});
}

npurtError_t eventTo(npurtGraphNode_t node, npurtEvent_t event, npurtGraphNodeType type,
                     const char *api)
{
	return guarded(api, [&] {
		return onNode(node, type, api,
		              [&](Context &, GraphNode &n) { return setEvent(n, event, api); });
	});
}

npurtError_t instantiate(npurtGraphExec_t *pExec, npurtGraph_t graph, unsigned long long flags,
                         const char *api)
{
	if (!pExec)
		return nullArgument(api, "pGraphExec");
	Graph *g = nullptr;
	if (npurtError_t err = npurt::resolveGraph(graph, &g, api))
		return err;
	if (npurtError_t err = npurt::refuseIfCapturing(*g, "cannot instantiate the graph", api))
		return err;
	if (flags & npurtGraphInstantiateFlagDeviceLaunch)
		return setError(npurtErrorNotSupported,
		                std::string(api) + ": device launch is not supported");
	const unsigned long long known = npurtGraphInstantiateFlagAutoFreeOnLaunch |
	                                 npurtGraphInstantiateFlagUpload |
	                                 npurtGraphInstantiateFlagUseNodePriority;
	if (flags & ~known)
		return setError(npurtErrorInvalidValue, std::string(api) + ": unknown flags " +
		                                                npurt::hexAddr(flags & ~known));
	if (!g->alive())
		return setError(npurtErrorInvalidValue,
		                std::string(api) +
		                        ": the graph's device was reset; make a new graph");
	std::unordered_map<const GraphNode *, GraphNode *> map;
	std::unique_ptr<Graph> copy = g->clone(&map);
	auto exec = std::make_unique<GraphExec>(g->ctx(), std::move(copy), std::move(map));
	// Its memory nodes' blocks are the graph's (and its clones'): one
	// executable graph uses them at a time, as in CUDA.
	if (g->hasMemoryNodes()) {
		if (!npurt::claimGraphMemory(*g->memory()))
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) +
			                ": the graph has memory alloc or free nodes and an "
			                "executable graph of it (or of a clone of it) exists; "
			                "destroy that one first (npurtGraphExecDestroy): they "
			                "would share its memory");
		exec->claimedMemory = true;
	}
	GraphExec *e = exec.release();
	npurt::registerExec(e);
	*pExec = e;
	return npurtSuccess;
}

}  // namespace

extern "C" {

// Stream capture.

npurtError_t npurtStreamBeginCapture(npurtStream_t stream, npurtStreamCaptureMode mode)
{
	const char *api = "npurtStreamBeginCapture";
	return guarded(api, [&] {
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		return s->beginCapture(mode, api);
	});
}

npurtError_t npurtStreamEndCapture(npurtStream_t stream, npurtGraph_t *pGraph)
{
	const char *api = "npurtStreamEndCapture";
	return guarded(api, [&] {
		if (!pGraph)
			return nullArgument(api, "pGraph");
		*pGraph = nullptr;
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		Graph *g = nullptr;
		npurtError_t err = s->endCapture(&g, api);
		*pGraph = g;
		return err;
	});
}

npurtError_t npurtStreamIsCapturing(npurtStream_t stream, npurtStreamCaptureStatus *pCaptureStatus)
{
	const char *api = "npurtStreamIsCapturing";
	return guarded(api, [&] {
		if (!pCaptureStatus)
			return nullArgument(api, "pCaptureStatus");
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		unsigned long long id = 0;
		Graph *g = nullptr;
		const npurtGraphNode_t *deps = nullptr;
		size_t n = 0;
		return s->captureInfo(pCaptureStatus, &id, &g, &deps, &n);
	});
}

npurtError_t npurtStreamGetCaptureInfo(npurtStream_t stream,
                                       npurtStreamCaptureStatus *captureStatus_out,
                                       unsigned long long *id_out, npurtGraph_t *graph_out,
                                       const npurtGraphNode_t **dependencies_out,
                                       size_t *numDependencies_out)
{
	const char *api = "npurtStreamGetCaptureInfo";
	return guarded(api, [&] {
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		npurtStreamCaptureStatus status = npurtStreamCaptureStatusNone;
		unsigned long long id = 0;
		Graph *g = nullptr;
		const npurtGraphNode_t *deps = nullptr;
		size_t n = 0;
		if (npurtError_t err = s->captureInfo(&status, &id, &g, &deps, &n))
			return err;
		if (captureStatus_out)
			*captureStatus_out = status;
		if (id_out)
			*id_out = id;
		if (graph_out)
			*graph_out = g;
		if (dependencies_out)
			*dependencies_out = deps;
		if (numDependencies_out)
			*numDependencies_out = n;
		return npurtSuccess;
	});
}

npurtError_t npurtStreamUpdateCaptureDependencies(npurtStream_t stream,
                                                  const npurtGraphNode_t *dependencies,
                                                  size_t numDependencies, unsigned int flags)
{
	const char *api = "npurtStreamUpdateCaptureDependencies";
	return guarded(api, [&] {
		if (flags != npurtStreamAddCaptureDependencies &&
		    flags != npurtStreamSetCaptureDependencies)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": flags must be "
			                        "npurtStreamAddCaptureDependencies or "
			                        "npurtStreamSetCaptureDependencies, not " +
			                        std::to_string(flags));
		if (numDependencies && !dependencies)
			return nullArgument(api, "dependencies");
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		std::vector<GraphNode *> nodes;
		for (size_t i = 0; i < numDependencies; i++) {
			GraphNode *n = nullptr;
			if (npurtError_t err = npurt::resolveNode(dependencies[i], &n, api))
				return err;
			nodes.push_back(n);
		}
		return s->updateCaptureDependencies(
		        nodes, flags == npurtStreamSetCaptureDependencies, api);
	});
}

npurtError_t npurtThreadExchangeStreamCaptureMode(npurtStreamCaptureMode *mode)
{
	const char *api = "npurtThreadExchangeStreamCaptureMode";
	if (!mode)
		return nullArgument(api, "mode");
	if (*mode != npurtStreamCaptureModeGlobal && *mode != npurtStreamCaptureModeThreadLocal &&
	    *mode != npurtStreamCaptureModeRelaxed)
		return setError(npurtErrorInvalidValue, std::string(api) +
		                                                ": unknown capture mode " +
		                                                std::to_string(*mode));
	*mode = npurt::exchangeCaptureMode(*mode);
	return npurtSuccess;
}

// Graphs.

npurtError_t npurtGraphCreate(npurtGraph_t *pGraph, unsigned int flags)
{
	const char *api = "npurtGraphCreate";
	return guarded(api, [&] {
		if (!pGraph)
			return nullArgument(api, "pGraph");
		if (flags)
			return setError(npurtErrorInvalidValue, std::string(api) +
			                                                ": flags must be 0, not " +
			                                                std::to_string(flags));
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		auto *g = new Graph(*c);
		npurt::registerGraph(g);
		*pGraph = g;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphDestroy(npurtGraph_t graph)
{
	const char *api = "npurtGraphDestroy";
	return guarded(api, [&] {
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(graph, &g, api))
			return err;
		if (g->embedded)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the graph is a child graph node's own; it goes "
			                        "with the node (npurtGraphDestroyNode)");
		if (npurtError_t err =
		            npurt::refuseIfCapturing(*g, "cannot destroy the graph", api))
			return err;
		if (!npurt::unregisterGraph(g))
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the graph is being destroyed already");
		delete g;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphClone(npurtGraph_t *pGraphClone, npurtGraph_t originalGraph)
{
	const char *api = "npurtGraphClone";
	return guarded(api, [&] {
		if (!pGraphClone)
			return nullArgument(api, "pGraphClone");
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(originalGraph, &g, api))
			return err;
		std::unique_ptr<Graph> c = g->clone(nullptr);
		c->origin = g;
		npurt::registerGraph(c.get());
		*pGraphClone = c.release();
		return npurtSuccess;
	});
}

npurtError_t npurtGraphNodeFindInClone(npurtGraphNode_t *pNode, npurtGraphNode_t originalNode,
                                       npurtGraph_t clonedGraph)
{
	const char *api = "npurtGraphNodeFindInClone";
	return guarded(api, [&] {
		if (!pNode)
			return nullArgument(api, "pNode");
		GraphNode *n = nullptr;
		Graph *c = nullptr;
		if (npurtError_t err = npurt::resolveNode(originalNode, &n, api))
			return err;
		if (npurtError_t err = npurt::resolveGraph(clonedGraph, &c, api))
			return err;
		if (c->origin != n->graph)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the graph is not a clone of the node's graph");
		for (const auto &m : c->nodes())
			if (m->id == n->id) {
				*pNode = m.get();
				return npurtSuccess;
			}
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the node was added after the clone was made");
	});
}

npurtError_t npurtGraphAddKernelNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                     const npurtGraphNode_t *pDependencies, size_t numDependencies,
                                     const npurtOpDesc *pNodeParams)
{
	const char *api = "npurtGraphAddKernelNode";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		if (!pNodeParams)
			return nullArgument(api, "pNodeParams");
		GraphNode *n = nullptr;
		if (npurtError_t err =
		            addBuilt(pGraphNode, graph, pDependencies, numDependencies,
		                     opCall(pNodeParams, ra), npurtGraphNodeTypeKernel, &n, api))
			return err;
		n->p.op = *pNodeParams;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphKernelNodeGetParams(npurtGraphNode_t node, npurtOpDesc *pNodeParams)
{
	const char *api = "npurtGraphKernelNodeGetParams";
	return guarded(api, [&] {
		// A captured op has only its packet.
		return getParam(node, npurtGraphNodeTypeKernel, pNodeParams, "pNodeParams", api,
		                [](const GraphNode &n) {
			                return n.p.op.out || n.p.tasks.empty()
			                               ? n.p.op
			                               : opOfPacket(n.p.tasks[0].packet);
		                });
	});
}

npurtError_t npurtGraphKernelNodeSetParams(npurtGraphNode_t node, const npurtOpDesc *pNodeParams)
{
	const char *api = "npurtGraphKernelNodeSetParams";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		return onNode(node, npurtGraphNodeTypeKernel, api, [&](Context &c, GraphNode &n) {
			return setOp(c, n, pNodeParams, ra, api);
		});
	});
}

npurtError_t npurtGraphAddMemcpyNode1D(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                       const npurtGraphNode_t *pDependencies,
                                       size_t numDependencies, void *dst, const void *src,
                                       size_t count, npurtMemcpyKind kind)
{
	const char *api = "npurtGraphAddMemcpyNode1D";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		GraphNode *n = nullptr;
		if (npurtError_t err = addBuilt(pGraphNode, graph, pDependencies, numDependencies,
		                                copyCall(dst, src, count, kind, ra, api),
		                                npurtGraphNodeTypeMemcpy, &n, api))
			return err;
		n->p.copy = {dst, src, count, kind};
		return npurtSuccess;
	});
}

npurtError_t npurtGraphMemcpyNodeSetParams1D(npurtGraphNode_t node, void *dst, const void *src,
                                             size_t count, npurtMemcpyKind kind)
{
	const char *api = "npurtGraphMemcpyNodeSetParams1D";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		return onNode(node, npurtGraphNodeTypeMemcpy, api, [&](Context &c, GraphNode &n) {
			return setCopy(c, n, {dst, src, count, kind}, ra, api);
		});
	});
}

npurtError_t npurtGraphAddMemsetNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                     const npurtGraphNode_t *pDependencies, size_t numDependencies,
                                     const npurtMemsetParams *pMemsetParams)
{
	const char *api = "npurtGraphAddMemsetNode";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		if (npurtError_t err = checkMemset(pMemsetParams, api))
			return err;
		GraphNode *n = nullptr;
		if (npurtError_t err = addBuilt(pGraphNode, graph, pDependencies, numDependencies,
		                                fillCall(*pMemsetParams, ra, api),
		                                npurtGraphNodeTypeMemset, &n, api))
			return err;
		n->p.memset = *pMemsetParams;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphMemsetNodeGetParams(npurtGraphNode_t node, npurtMemsetParams *pNodeParams)
{
	const char *api = "npurtGraphMemsetNodeGetParams";
	return guarded(api, [&] {
		return getParam(node, npurtGraphNodeTypeMemset, pNodeParams, "pNodeParams", api,
		                [](const GraphNode &n) { return n.p.memset; });
	});
}

npurtError_t npurtGraphMemsetNodeSetParams(npurtGraphNode_t node,
                                           const npurtMemsetParams *pNodeParams)
{
	const char *api = "npurtGraphMemsetNodeSetParams";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		return onNode(node, npurtGraphNodeTypeMemset, api, [&](Context &c, GraphNode &n) {
			return setMemset(c, n, pNodeParams, ra, api);
		});
	});
}

npurtError_t npurtGraphAddHostNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                   const npurtGraphNode_t *pDependencies, size_t numDependencies,
                                   const npurtHostNodeParams *pNodeParams)
{
	const char *api = "npurtGraphAddHostNode";
	return guarded(api, [&] {
		GraphNode params;
		params.p.type = npurtGraphNodeTypeHost;
		if (npurtError_t err = setHost(params, pNodeParams, api))
			return err;
		return addNode(pGraphNode, graph, pDependencies, numDependencies,
		               std::move(params.p), api);
	});
}

npurtError_t npurtGraphHostNodeGetParams(npurtGraphNode_t node, npurtHostNodeParams *pNodeParams)
{
	const char *api = "npurtGraphHostNodeGetParams";
	return guarded(api, [&] {
		return getParam(node, npurtGraphNodeTypeHost, pNodeParams, "pNodeParams", api,
		                [](const GraphNode &n) { return n.p.host; });
	});
}

npurtError_t npurtGraphHostNodeSetParams(npurtGraphNode_t node,
                                         const npurtHostNodeParams *pNodeParams)
{
	const char *api = "npurtGraphHostNodeSetParams";
	return guarded(api, [&] {
		return onNode(node, npurtGraphNodeTypeHost, api, [&](Context &, GraphNode &n) {
			return setHost(n, pNodeParams, api);
		});
	});
}

npurtError_t npurtGraphAddEmptyNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                    const npurtGraphNode_t *pDependencies, size_t numDependencies)
{
	const char *api = "npurtGraphAddEmptyNode";
	return guarded(api, [&] {
		return addNode(pGraphNode, graph, pDependencies, numDependencies, {}, api);
	});
}

npurtError_t npurtGraphAddEventRecordNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                          const npurtGraphNode_t *pDependencies,
                                          size_t numDependencies, npurtEvent_t event)
{
	const char *api = "npurtGraphAddEventRecordNode";
	return guarded(api, [&] {
		return eventNode(pGraphNode, graph, pDependencies, numDependencies, event,
		                 npurtGraphNodeTypeEventRecord, api);
	});
}

npurtError_t npurtGraphAddEventWaitNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                        const npurtGraphNode_t *pDependencies,
                                        size_t numDependencies, npurtEvent_t event)
{
	const char *api = "npurtGraphAddEventWaitNode";
	return guarded(api, [&] {
		return eventNode(pGraphNode, graph, pDependencies, numDependencies, event,
		                 npurtGraphNodeTypeWaitEvent, api);
	});
}

npurtError_t npurtGraphEventRecordNodeGetEvent(npurtGraphNode_t node, npurtEvent_t *event_out)
{
	return eventOf(node, event_out, npurtGraphNodeTypeEventRecord,
	               "npurtGraphEventRecordNodeGetEvent");
}

npurtError_t npurtGraphEventRecordNodeSetEvent(npurtGraphNode_t node, npurtEvent_t event)
{
	return eventTo(node, event, npurtGraphNodeTypeEventRecord,
	               "npurtGraphEventRecordNodeSetEvent");
}

npurtError_t npurtGraphEventWaitNodeGetEvent(npurtGraphNode_t node, npurtEvent_t *event_out)
{
	return eventOf(node, event_out, npurtGraphNodeTypeWaitEvent,
	               "npurtGraphEventWaitNodeGetEvent");
}

npurtError_t npurtGraphEventWaitNodeSetEvent(npurtGraphNode_t node, npurtEvent_t event)
{
	return eventTo(node, event, npurtGraphNodeTypeWaitEvent, "npurtGraphEventWaitNodeSetEvent");
}

npurtError_t npurtGraphAddMemAllocNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                       const npurtGraphNode_t *pDependencies,
                                       size_t numDependencies, npurtMemAllocNodeParams *nodeParams)
{
	const char *api = "npurtGraphAddMemAllocNode";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		if (!nodeParams)
			return nullArgument(api, "nodeParams");
		std::vector<GraphNode *> d;
		npurtError_t err = npurtSuccess;
		Graph *g = target(pGraphNode, graph, pDependencies, numDependencies, &d, &err, api);
		if (!g)
			return err;
		if (g->embedded)
			return setError(
			        npurtErrorNotSupported,
			        std::string(api) +
			                ": a child graph node's graph cannot have memory nodes");
		const npurtMemPoolProps &pp = nodeParams->poolProps;
		const int dev = g->ctx().ordinal();
		if (pp.allocType != npurtMemAllocationTypePinned ||
		    pp.location.type != npurtMemLocationTypeDevice || pp.location.id != dev)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": poolProps must name pinned memory of the "
			                        "graph's device (NPU " +
			                        std::to_string(dev) + ")");
		if (nodeParams->accessDescCount && !nodeParams->accessDescs)
			return nullArgument(api, "accessDescs");
		for (size_t i = 0; i < nodeParams->accessDescCount; i++) {
			const npurtMemAccessDesc &a = nodeParams->accessDescs[i];
			if (a.location.type != npurtMemLocationTypeDevice || a.location.id != dev ||
			    a.flags != npurtMemAccessFlagsProtReadWrite)
				return setError(npurtErrorNotSupported,
				                std::string(api) +
				                        ": graph memory is read-write on its "
				                        "own device only");
		}
		npurt::NodeParams p;
		p.type = npurtGraphNodeTypeMemAlloc;
		p.bytes = nodeParams->bytesize;
		p.site = npurt::takeCallSite(ra);
		if ((err = npurt::allocGraphMemory(*g->memory(), nodeParams->bytesize, p.site,
		                                   &p.dptr, api)))
			return err;
		nodeParams->dptr = p.dptr;
		*pGraphNode = g->add(std::move(p), d);
		return npurtSuccess;
	});
}

npurtError_t npurtGraphMemAllocNodeGetParams(npurtGraphNode_t node,
                                             npurtMemAllocNodeParams *params_out)
{
	const char *api = "npurtGraphMemAllocNodeGetParams";
	return guarded(api, [&] {
		if (!params_out)
			return nullArgument(api, "params_out");
		GraphNode *n = nullptr;
		if (npurtError_t err = nodeOfType(node, npurtGraphNodeTypeMemAlloc, &n, api))
			return err;
		*params_out = {};
		params_out->poolProps.allocType = npurtMemAllocationTypePinned;
		params_out->poolProps.location.type = npurtMemLocationTypeDevice;
		params_out->poolProps.location.id = n->graph->ctx().ordinal();
		params_out->bytesize = n->p.bytes;
		params_out->dptr = n->p.dptr;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphAddMemFreeNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                      const npurtGraphNode_t *pDependencies, size_t numDependencies,
                                      void *dptr)
{
	const char *api = "npurtGraphAddMemFreeNode";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		std::vector<GraphNode *> d;
		npurtError_t err = npurtSuccess;
		Graph *g = target(pGraphNode, graph, pDependencies, numDependencies, &d, &err, api);
		if (!g)
			return err;
		bool ours = std::ranges::any_of(g->nodes(), [dptr](const auto &n) {
			return n->p.type == npurtGraphNodeTypeMemAlloc && n->p.dptr == dptr;
		});
		if (!ours)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " +
			                        npurt::hexAddr(reinterpret_cast<uint64_t>(dptr)) +
			                        " is not memory of an alloc node of this graph");
		npurt::NodeParams p;
		p.type = npurtGraphNodeTypeMemFree;
		p.dptr = dptr;
		p.site = npurt::takeCallSite(ra);
		*pGraphNode = g->add(std::move(p), d);
		return npurtSuccess;
	});
}

npurtError_t npurtGraphMemFreeNodeGetParams(npurtGraphNode_t node, void *dptr_out)
{
	const char *api = "npurtGraphMemFreeNodeGetParams";
	return guarded(api, [&] {
		return getParam(node, npurtGraphNodeTypeMemFree, static_cast<void **>(dptr_out),
		                "dptr_out", api, [](const GraphNode &n) { return n.p.dptr; });
	});
}

npurtError_t npurtGraphAddChildGraphNode(npurtGraphNode_t *pGraphNode, npurtGraph_t graph,
                                         const npurtGraphNode_t *pDependencies,
                                         size_t numDependencies, npurtGraph_t childGraph)
{
	const char *api = "npurtGraphAddChildGraphNode";
	return guarded(api, [&] {
		Graph *child = nullptr;
		if (npurtError_t err = npurt::resolveGraph(childGraph, &child, api))
			return err;
		std::vector<GraphNode *> d;
		npurtError_t err = npurtSuccess;
		Graph *g = target(pGraphNode, graph, pDependencies, numDependencies, &d, &err, api);
		if (!g)
			return err;
		if (&child->ctx() != &g->ctx())
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the child graph is of another device");
		if (child->hasMemoryNodes())
			return setError(npurtErrorNotSupported,
			                std::string(api) +
			                        ": the child graph has memory alloc or free "
			                        "nodes, which a child graph cannot have");
		npurt::NodeParams p;
		p.type = npurtGraphNodeTypeGraph;
		p.child = npurt::embedGraph(*child);
		*pGraphNode = g->add(std::move(p), d);
		return npurtSuccess;
	});
}

npurtError_t npurtGraphChildGraphNodeGetGraph(npurtGraphNode_t node, npurtGraph_t *pGraph)
{
	const char *api = "npurtGraphChildGraphNodeGetGraph";
	return guarded(api, [&] {
		return getParam(node, npurtGraphNodeTypeGraph, pGraph, "pGraph", api,
		                [](const GraphNode &n) -> npurtGraph_t { return n.p.child.get(); });
	});
}

npurtError_t npurtDeviceGetGraphMemAttribute(int device, npurtGraphMemAttributeType attr,
                                             void *value)
{
	const char *api = "npurtDeviceGetGraphMemAttribute";
	return guarded(api, [&] {
		if (!value)
			return nullArgument(api, "value");
		if (npurtError_t err = Runtime::instance().startAndCheck(device, api))
			return err;
		uint64_t current = 0, high = 0;
		npurt::graphMemoryUsage(device, &current, &high);
		switch (attr) {
		case npurtGraphMemAttrUsedMemCurrent:
		case npurtGraphMemAttrReservedMemCurrent:
			*static_cast<uint64_t *>(value) = current;
			return npurtSuccess;
		case npurtGraphMemAttrUsedMemHigh:
		case npurtGraphMemAttrReservedMemHigh:
			*static_cast<uint64_t *>(value) = high;
			return npurtSuccess;
		}
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown attribute " +
		                        std::to_string(static_cast<int>(attr)));
	});
}

npurtError_t npurtDeviceSetGraphMemAttribute(int device, npurtGraphMemAttributeType attr,
                                             void *value)
{
	const char *api = "npurtDeviceSetGraphMemAttribute";
	return guarded(api, [&] {
		if (!value)
			return nullArgument(api, "value");
		if (npurtError_t err = Runtime::instance().startAndCheck(device, api))
			return err;
		if (attr != npurtGraphMemAttrUsedMemHigh &&
		    attr != npurtGraphMemAttrReservedMemHigh)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": only the High attributes can be set "
			                        "(reset), not attribute " +
			                        std::to_string(static_cast<int>(attr)));
		if (*static_cast<const uint64_t *>(value) != 0)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": a High attribute is reset with 0");
		npurt::resetGraphMemoryHigh(device);
		return npurtSuccess;
	});
}

npurtError_t npurtDeviceGraphMemTrim(int device)
{
	const char *api = "npurtDeviceGraphMemTrim";
	return guarded(api, [&] { return Runtime::instance().startAndCheck(device, api); });
}

npurtError_t npurtGraphNodeGetType(npurtGraphNode_t node, npurtGraphNodeType *pType)
{
	const char *api = "npurtGraphNodeGetType";
	return guarded(api, [&] {
		if (!pType)
			return nullArgument(api, "pType");
		GraphNode *n = nullptr;
		if (npurtError_t err = npurt::resolveNode(node, &n, api))
			return err;
		*pType = n->p.type;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphGetNodes(npurtGraph_t graph, npurtGraphNode_t *nodes, size_t *numNodes)
{
	const char *api = "npurtGraphGetNodes";
	return guarded(api, [&] {
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(graph, &g, api))
			return err;
		return listOut(allNodes(*g), nodes, numNodes, api, "numNodes");
	});
}

npurtError_t npurtGraphGetRootNodes(npurtGraph_t graph, npurtGraphNode_t *pRootNodes,
                                    size_t *pNumRootNodes)
{
	const char *api = "npurtGraphGetRootNodes";
	return guarded(api, [&] {
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(graph, &g, api))
			return err;
		std::vector<GraphNode *> roots = allNodes(*g);
		std::erase_if(roots, [](const GraphNode *n) { return !n->deps.empty(); });
		return listOut(roots, pRootNodes, pNumRootNodes, api, "pNumRootNodes");
	});
}

npurtError_t npurtGraphGetEdges(npurtGraph_t graph, npurtGraphNode_t *from, npurtGraphNode_t *to,
                                size_t *numEdges)
{
	const char *api = "npurtGraphGetEdges";
	return guarded(api, [&] {
		if (!numEdges)
			return nullArgument(api, "numEdges");
		if (!from != !to)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": from and to must both be NULL or both not");
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(graph, &g, api))
			return err;
		std::vector<GraphNode *> a, b;
		for (const auto &n : g->nodes())
			for (GraphNode *d : n->deps) {
				a.push_back(d);
				b.push_back(n.get());
			}
		size_t k = *numEdges;
		if (npurtError_t err = listOut(a, from, numEdges, api, "numEdges"))
			return err;
		return from ? listOut(b, to, &k, api, "numEdges") : npurtSuccess;
	});
}

npurtError_t npurtGraphNodeGetDependencies(npurtGraphNode_t node, npurtGraphNode_t *pDependencies,
                                           size_t *pNumDependencies)
{
	const char *api = "npurtGraphNodeGetDependencies";
	return guarded(api, [&] {
		GraphNode *n = nullptr;
		if (npurtError_t err = npurt::resolveNode(node, &n, api))
			return err;
		return listOut(n->deps, pDependencies, pNumDependencies, api, "pNumDependencies");
	});
}

npurtError_t npurtGraphNodeGetDependentNodes(npurtGraphNode_t node,
                                             npurtGraphNode_t *pDependentNodes,
                                             size_t *pNumDependentNodes)
{
	const char *api = "npurtGraphNodeGetDependentNodes";
	return guarded(api, [&] {
		GraphNode *n = nullptr;
		if (npurtError_t err = npurt::resolveNode(node, &n, api))
			return err;
		return listOut(n->dependents, pDependentNodes, pNumDependentNodes, api,
		               "pNumDependentNodes");
	});
}

npurtError_t npurtGraphAddDependencies(npurtGraph_t graph, const npurtGraphNode_t *from,
                                       const npurtGraphNode_t *to, size_t numDependencies)
{
	const char *api = "npurtGraphAddDependencies";
	return guarded(api, [&] {
		Graph *g = nullptr;
		std::vector<GraphNode *> a, b;
		if (npurtError_t err = edges(graph, from, to, numDependencies, &g, &a, &b, api))
			return err;
		std::vector<size_t> added;
		for (size_t i = 0; i < numDependencies; i++) {
			bool had = std::ranges::find(b[i]->deps, a[i]) != b[i]->deps.end();
			if (g->addEdge(a[i], b[i])) {
				if (!had)
					added.push_back(i);
				continue;
			}
			for (size_t j : added)
				g->removeEdge(a[j], b[j]);
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": edge " + std::to_string(i) +
			                        " (node " + std::to_string(a[i]->id) + " -> node " +
			                        std::to_string(b[i]->id) +
			                        ") would make a cycle; no edge was added");
		}
		return npurtSuccess;
	});
}

npurtError_t npurtGraphRemoveDependencies(npurtGraph_t graph, const npurtGraphNode_t *from,
                                          const npurtGraphNode_t *to, size_t numDependencies)
{
	const char *api = "npurtGraphRemoveDependencies";
	return guarded(api, [&] {
		Graph *g = nullptr;
		std::vector<GraphNode *> a, b;
		if (npurtError_t err = edges(graph, from, to, numDependencies, &g, &a, &b, api))
			return err;
		for (size_t i = 0; i < numDependencies; i++)
			if (std::ranges::find(b[i]->deps, a[i]) == b[i]->deps.end())
				return setError(npurtErrorInvalidValue,
				                std::string(api) + ": there is no edge " +
				                        std::to_string(i) +
				                        "; no edge was removed");
		for (size_t i = 0; i < numDependencies; i++)
			g->removeEdge(a[i], b[i]);
		return npurtSuccess;
	});
}

npurtError_t npurtGraphDestroyNode(npurtGraphNode_t node)
{
	const char *api = "npurtGraphDestroyNode";
	return guarded(api, [&] {
		GraphNode *n = nullptr;
		if (npurtError_t err = npurt::resolveNode(node, &n, api))
			return err;
		if (npurtError_t err =
		            npurt::refuseIfCapturing(*n->graph, "cannot destroy a node", api))
			return err;
		n->graph->remove(n);
		return npurtSuccess;
	});
}

npurtError_t npurtGraphDebugDotPrint(npurtGraph_t graph, const char *path, unsigned int flags)
{
	const char *api = "npurtGraphDebugDotPrint";
	return guarded(api, [&] {
		if (!path)
			return nullArgument(api, "path");
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(graph, &g, api))
			return err;
		std::string text = g->dot(flags & npurtGraphDebugDotFlagsVerbose);
		FILE *f = std::fopen(path, "w");
		if (!f)
			return setError(
			        npurtErrorOperatingSystem,
			        npurt::osMessage(std::string(api) + ": opening " + path, -errno));
		bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
		ok = std::fclose(f) == 0 && ok;
		if (!ok)
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": writing " + path + " failed");
		return npurtSuccess;
	});
}

// Executable graphs.

npurtError_t npurtGraphInstantiate(npurtGraphExec_t *pGraphExec, npurtGraph_t graph,
                                   unsigned long long flags)
{
	const char *api = "npurtGraphInstantiate";
	return guarded(api, [&] { return instantiate(pGraphExec, graph, flags, api); });
}

npurtError_t npurtGraphInstantiateWithFlags(npurtGraphExec_t *pGraphExec, npurtGraph_t graph,
                                            unsigned long long flags)
{
	const char *api = "npurtGraphInstantiateWithFlags";
	return guarded(api, [&] { return instantiate(pGraphExec, graph, flags, api); });
}

npurtError_t npurtGraphLaunch(npurtGraphExec_t graphExec, npurtStream_t stream)
{
	const char *api = "npurtGraphLaunch";
	return guarded(api, [&] {
		GraphExec *e = nullptr;
		if (npurtError_t err = npurt::resolveExec(graphExec, &e, api))
			return err;
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		if (&s->ctx() != &e->ctx())
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the stream is not of the graph's context "
			                        "(its device)");
		// Into a capture: the executable graph becomes a child graph node.
		npurtError_t err = npurtSuccess;
		if (s->captureGraph(e->graph(), api, &err))
			return err;
		std::lock_guard<std::mutex> lock(e->launchMutex);
		// After the executable graph's last launch on another stream:
		// after that stream's work so far, deferred work included (a
		// stream capturing since cannot record: its submitted work).
		if (e->lastStream && e->lastStream != s->life()) {
			npurt::Point p;
			bool recorded = false;
			{
				std::lock_guard<std::mutex> l(e->lastStream->mutex);
				Stream *prev = e->lastStream->stream;
				if (prev && !prev->capturing()) {
					if (npurtError_t err = prev->record(e->order, api))
						return err;
					recorded = true;
				} else {
					p = prev ? prev->tail() : e->lastStream->last;
				}
			}
			npurtError_t err = recorded ? s->wait(e->order, api)
			                   : p      ? s->waitFor(p, api)
			                            : npurtSuccess;
			if (err)
				return err;
		}
		if (npurtError_t err = s->launchGraph(e->plan(), api))
			return err;
		e->lastStream = s->life();
		return npurtSuccess;
	});
}

npurtError_t npurtGraphUpload(npurtGraphExec_t graphExec, npurtStream_t stream)
{
	const char *api = "npurtGraphUpload";
	return guarded(api, [&] {
		GraphExec *e = nullptr;
		if (npurtError_t err = npurt::resolveExec(graphExec, &e, api))
			return err;
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		// The plan is made at instantiation: nothing to upload.
		if (&s->ctx() != &e->ctx())
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the stream is not of the graph's context");
		return npurtSuccess;
	});
}

npurtError_t npurtGraphExecDestroy(npurtGraphExec_t graphExec)
{
	const char *api = "npurtGraphExecDestroy";
	return guarded(api, [&] {
		GraphExec *e = nullptr;
		if (npurtError_t err = npurt::resolveExec(graphExec, &e, api))
			return err;
		if (!npurt::unregisterExec(e))
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": being destroyed already");
		// A record of its ordering event still deferred refers to it: it
		// goes once the record has run; the call returns at once.
		e->order.afterRecord([e] { delete e; });
		return npurtSuccess;
	});
}

npurtError_t npurtGraphExecUpdate(npurtGraphExec_t graphExec, npurtGraph_t hGraph,
                                  npurtGraphExecUpdateResultInfo *resultInfo)
{
	const char *api = "npurtGraphExecUpdate";
	return guarded(api, [&] {
		if (!resultInfo)
			return nullArgument(api, "resultInfo");
		GraphExec *e = nullptr;
		if (npurtError_t err = npurt::resolveExec(graphExec, &e, api))
			return err;
		Graph *g = nullptr;
		if (npurtError_t err = npurt::resolveGraph(hGraph, &g, api))
			return err;
		if (npurtError_t err =
		            npurt::refuseIfCapturing(*g, "cannot update from the graph", api))
			return err;
		if (&g->ctx() != &e->ctx()) {
			*resultInfo = {npurtGraphExecUpdateErrorNotSupported, nullptr, nullptr};
			return setError(npurtErrorGraphExecUpdateFailure,
			                std::string(api) + ": the graph is of another device");
		}
		if (e->update(*g, resultInfo))
			return npurtSuccess;
		static const char *const why[] = {"",
		                                  "",
		                                  "the topology changed",
		                                  "a node's type changed",
		                                  "",
		                                  "a parameter cannot change",
		                                  "graph memory cannot change"};
		std::string node = resultInfo->errorNode
		                           ? " (node " +
		                                     std::to_string(static_cast<GraphNode *>(
		                                                            resultInfo->errorNode)
		                                                            ->id) +
		                                     ")"
		                           : "";
		return setError(npurtErrorGraphExecUpdateFailure,
		                std::string(api) + ": " + why[resultInfo->result] + node +
		                        "; the executable graph is unchanged");
	});
}

npurtError_t npurtGraphExecKernelNodeSetParams(npurtGraphExec_t hGraphExec, npurtGraphNode_t node,
                                               const npurtOpDesc *pNodeParams)
{
	const char *api = "npurtGraphExecKernelNodeSetParams";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		return onExecNode(hGraphExec, node, npurtGraphNodeTypeKernel, api,
		                  [&](Context &c, GraphNode &n) {
			                  return setOp(c, n, pNodeParams, ra, api);
		                  });
	});
}

npurtError_t npurtGraphExecMemcpyNodeSetParams1D(npurtGraphExec_t hGraphExec, npurtGraphNode_t node,
                                                 void *dst, const void *src, size_t count,
                                                 npurtMemcpyKind kind)
{
	const char *api = "npurtGraphExecMemcpyNodeSetParams1D";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		return onExecNode(hGraphExec, node, npurtGraphNodeTypeMemcpy, api,
		                  [&](Context &c, GraphNode &n) {
			                  return setCopy(c, n, {dst, src, count, kind}, ra, api);
		                  });
	});
}

npurtError_t npurtGraphExecMemsetNodeSetParams(npurtGraphExec_t hGraphExec, npurtGraphNode_t node,
                                               const npurtMemsetParams *pNodeParams)
{
	const char *api = "npurtGraphExecMemsetNodeSetParams";
	void *ra = __builtin_return_address(0);
	return guarded(api, [&] {
		return onExecNode(hGraphExec, node, npurtGraphNodeTypeMemset, api,
		                  [&](Context &c, GraphNode &n) {
			                  return setMemset(c, n, pNodeParams, ra, api);
		                  });
	});
}

npurtError_t npurtGraphExecHostNodeSetParams(npurtGraphExec_t hGraphExec, npurtGraphNode_t node,
                                             const npurtHostNodeParams *pNodeParams)
{
	const char *api = "npurtGraphExecHostNodeSetParams";
	return guarded(api, [&] {
		return onExecNode(
		        hGraphExec, node, npurtGraphNodeTypeHost, api,
		        [&](Context &, GraphNode &n) { return setHost(n, pNodeParams, api); });
	});
}

npurtError_t npurtGraphExecEventRecordNodeSetEvent(npurtGraphExec_t hGraphExec,
                                                   npurtGraphNode_t hNode, npurtEvent_t event)
{
	const char *api = "npurtGraphExecEventRecordNodeSetEvent";
	return guarded(api, [&] {
		return onExecNode(hGraphExec, hNode, npurtGraphNodeTypeEventRecord, api,
		                  [&](Context &, GraphNode &n) { return setEvent(n, event, api); });
	});
}

npurtError_t npurtGraphExecEventWaitNodeSetEvent(npurtGraphExec_t hGraphExec,
                                                 npurtGraphNode_t hNode, npurtEvent_t event)
{
	const char *api = "npurtGraphExecEventWaitNodeSetEvent";
	return guarded(api, [&] {
		return onExecNode(hGraphExec, hNode, npurtGraphNodeTypeWaitEvent, api,
		                  [&](Context &, GraphNode &n) { return setEvent(n, event, api); });
	});
}

npurtError_t npurtGraphNodeSetEnabled(npurtGraphExec_t hGraphExec, npurtGraphNode_t hNode,
                                      unsigned int isEnabled)
{
	const char *api = "npurtGraphNodeSetEnabled";
	return guarded(api, [&] {
		GraphExec *e = nullptr;
		GraphNode *n = nullptr;
		if (npurtError_t err = switchableNode(hGraphExec, hNode, &e, &n, api))
			return err;
		if (n->enabled != (isEnabled != 0)) {
			n->enabled = isEnabled != 0;
			e->replan();
		}
		return npurtSuccess;
	});
}

npurtError_t npurtGraphNodeGetEnabled(npurtGraphExec_t hGraphExec, npurtGraphNode_t hNode,
                                      unsigned int *isEnabled)
{
	const char *api = "npurtGraphNodeGetEnabled";
	return guarded(api, [&] {
		if (!isEnabled)
			return nullArgument(api, "isEnabled");
		GraphExec *e = nullptr;
		GraphNode *n = nullptr;
		if (npurtError_t err = switchableNode(hGraphExec, hNode, &e, &n, api))
			return err;
		*isEnabled = n->enabled ? 1 : 0;
		return npurtSuccess;
	});
}

npurtError_t npurtGraphExecChildGraphNodeSetParams(npurtGraphExec_t hGraphExec,
                                                   npurtGraphNode_t node, npurtGraph_t childGraph)
{
	const char *api = "npurtGraphExecChildGraphNodeSetParams";
	return guarded(api, [&] {
		GraphExec *e = nullptr;
		GraphNode *n = nullptr;
		if (npurtError_t err =
		            execNode(hGraphExec, node, npurtGraphNodeTypeGraph, &e, &n, api))
			return err;
		Graph *child = nullptr;
		if (npurtError_t err = npurt::resolveGraph(childGraph, &child, api))
			return err;
		npurtGraphExecUpdateResultInfo info{};
		if (&child->ctx() != &e->ctx() || !e->updateChild(*n, *child, &info))
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) + ": the graph does not pair with graph node " +
			                std::to_string(n->id) +
			                "'s (its nodes, types, edges and engines must match)");
		return npurtSuccess;
	});
}

}  // extern "C"

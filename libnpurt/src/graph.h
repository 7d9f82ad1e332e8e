// Graphs: nodes and their dependencies (graph.cpp), stream capture
// (capture.cpp), and executable graphs, planned here and launched onto a
// stream as batches (graph_launch.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "npurt/npurt.h"
#include "stream.h"

struct npurtGraph_st {};
struct npurtGraphNode_st {};
struct npurtGraphExec_st {};

namespace npurt {

class Graph;

// One engine task of a node: its packet as a stream would submit it.
struct GraphTask {
	uint32_t engineClass = 0;
	std::vector<uint8_t> packet;
	TaskInfo info;
};

// What a node does; copied into clones and executable graphs.
struct NodeParams {
	npurtGraphNodeType type = npurtGraphNodeTypeEmpty;
	std::vector<GraphTask> tasks;  // op, copy and fill nodes
	npurtOpDesc op{};  // op nodes made by npurtGraphAddKernelNode
	struct Copy {
		void *dst = nullptr;
		const void *src = nullptr;
		size_t count = 0;
		npurtMemcpyKind kind = npurtMemcpyDefault;
	} copy;
	npurtMemsetParams memset{};
	npurtHostNodeParams host{};  // as given (a captured callback has none)
	std::function<void(npurtError_t)> hostFn;  // what runs
	bool hostAfterFailure = false;  // a stream callback: told the failure
	Event *event = nullptr;  // record and wait nodes
	void *dptr = nullptr;  // alloc and free nodes
	size_t bytes = 0;
	// Child graph nodes: the embedded graph, a copy of its own (clones of
	// the node copy it again: see embedGraph).
	std::shared_ptr<Graph> child;
	CallSite site;  // the call that made the node
};

class GraphNode : public npurtGraphNode_st {
public:
	Graph *graph = nullptr;
	uint32_t id = 0;  // 1, 2, ... in the order nodes were made: reports name it
	NodeParams p;
	std::vector<GraphNode *> deps;  // incoming edges
	std::vector<GraphNode *> dependents;  // outgoing edges
	// An executable graph's node: false while npurtGraphNodeSetEnabled
	// has it run as an empty node.
	bool enabled = true;
};

// The memory of a graph's alloc nodes: shared by the graph, its clones and
// its executable graphs, freed (safely: after the work using it) with the
// last of them.
struct GraphMemory {
	Context *ctx = nullptr;
	uint64_t ctxSerial = 0;
	int device = 0;  // ctx's ordinal (kept: ctx may go first)
	std::vector<uint64_t> blocks;  // guarded by the graph registry's lock
	// Executable graphs using the blocks (one at most, as in CUDA: two
	// would share them); guarded by the graph registry's lock.
	int execs = 0;
	GraphMemory() = default;
	GraphMemory(const GraphMemory &) = delete;
	GraphMemory &operator=(const GraphMemory &) = delete;
	~GraphMemory();
};

// Allocates graph memory in ctx (registered, so that frees outside the
// graph know it); the size rounded as npurtMalloc rounds.
npurtError_t allocGraphMemory(GraphMemory &mem, size_t bytes, const CallSite &site, void **out,
                              const char *api);
// An executable graph takes mem's blocks: false if another one has them.
bool claimGraphMemory(GraphMemory &mem);
void releaseGraphMemory(GraphMemory &mem);
// Whether p is the start of graph memory (a free of it outside the graph
// ends nothing: the memory lives as long as the graph).
bool isGraphMemory(const void *p);
// A device's graph memory in bytes: now, and at most since the start or
// resetGraphMemoryHigh.
void graphMemoryUsage(int device, uint64_t *current, uint64_t *high);
void resetGraphMemoryHigh(int device);

class Graph : public npurtGraph_st {
public:
	explicit Graph(Context &ctx);
	~Graph();
	Graph(const Graph &) = delete;
	Graph &operator=(const Graph &) = delete;

	Context &ctx() const { return *ctx_; }
	// Whether the graph's context still lives (npurtDeviceReset destroys
	// it; a new one may get its address).
	bool alive() const;
	// npurtGraphClone's original (compared, never followed).
	const Graph *origin = nullptr;
	// A child graph node's graph: the node owns it, the user may change
	// it but not destroy it, and it holds no memory nodes (as CUDA's).
	bool embedded = false;
	// A stream capture's graph while the capture lasts: the user may read
	// it and add nodes and edges (npurtStreamGetCaptureInfo hands it out),
	// not destroy it, its nodes, or instantiate it.
	std::atomic<bool> capturing{false};
	const std::vector<std::unique_ptr<GraphNode>> &nodes() const { return nodes_; }
	const std::shared_ptr<GraphMemory> &memory() const { return memory_; }

	// A node after deps (nodes of this graph, checked by the caller).
	GraphNode *add(NodeParams p, const std::vector<GraphNode *> &deps);
	void remove(GraphNode *n);
	// Whether n is a node of this graph.
	bool owns(const npurtGraphNode_st *n) const;
	// Adds from -> to; false if it would close a cycle (nothing changed).
	bool addEdge(GraphNode *from, GraphNode *to);
	bool removeEdge(GraphNode *from, GraphNode *to);
	// A copy with the same nodes, ids and edges, sharing the memory;
	// *map (if not null) gets original -> clone.
	std::unique_ptr<Graph> clone(std::unordered_map<const GraphNode *, GraphNode *> *map) const;
	// Nodes in an order every edge goes forward in, consecutive ones of
	// the same engine class kept together where the edges allow.
	std::vector<const GraphNode *> order() const;
	std::string dot(bool verbose) const;
	// Whether it has memory alloc or free nodes.
	bool hasMemoryNodes() const;

private:
	Context *ctx_;
	uint64_t ctxSerial_;
	std::vector<std::unique_ptr<GraphNode>> nodes_;
	uint32_t nextId_ = 1;
	std::shared_ptr<GraphMemory> memory_;
};

// A child graph node's graph: a copy of g, registered as a graph handle
// (npurtGraphChildGraphNodeGetGraph) until the last node holding it goes.
std::shared_ptr<Graph> embedGraph(const Graph &g);

// Makes an op, copy or fill node after deps with the enqueue call itself
// (so that it is checked and planned as that call is): enqueue runs on a
// hidden stream capturing into g, and the tasks it makes become one node,
// *out. A failed call leaves the graph as it was.
npurtError_t buildNode(Graph &g, const std::vector<GraphNode *> &deps,
                       const std::function<npurtError_t(npurtStream_t)> &enqueue,
                       npurtGraphNodeType type, GraphNode **out, const char *api);

// npurtLaunchOp's work (api_stream.cpp), for op nodes.
npurtError_t enqueueOp(const npurtOpDesc *desc, npurtStream_t stream, void *returnAddress);

// Handles of live graphs, nodes (of live graphs the user holds) and
// executable graphs.
void registerGraph(Graph *g);
bool unregisterGraph(Graph *g);
npurtError_t resolveGraph(npurtGraph_t handle, Graph **out, const char *api);
npurtError_t resolveNode(npurtGraphNode_t handle, GraphNode **out, const char *api);

// A stream capture: the graph being recorded and where each stream of it
// has got to.
struct Capture {
	uint64_t id = 0;
	npurtStreamCaptureMode mode = npurtStreamCaptureModeGlobal;
	std::thread::id thread;
	Stream *origin = nullptr;
	bool builder = false;  // Graph::builder's: one node per call
	std::mutex mutex;  // guards everything below
	std::unique_ptr<Graph> graph;
	Graph *target = nullptr;  // builder: the graph nodes go to
	bool active = true;
	npurtError_t invalid = npurtSuccess;  // why the capture was invalidated
	std::string why;
	// The streams in the capture and the nodes their next work depends on.
	std::unordered_map<Stream *, std::vector<GraphNode *>> frontier;
	GraphNode *open = nullptr;  // builder: the node this call's tasks join
	Graph &into() { return target ? *target : *graph; }

	Capture() = default;
	Capture(const Capture &) = delete;
	Capture &operator=(const Capture &) = delete;
	// Unregisters a graph the capture still holds (it ended without one).
	~Capture();
};

// The "unsafe" calls a capture forbids (see npurtStreamCaptureMode): 0, or
// npurtErrorStreamCaptureUnsupported with the captures it breaks
// invalidated. Free of cost while nothing captures.
npurtError_t captureForbids(const char *api);
// Whether any capture is active in the process (cheap).
bool anyCapture();
// Work on ctx's legacy default stream while a blocking stream of ctx
// captures: npurtErrorStreamCaptureImplicit, that capture invalidated.
npurtError_t captureForbidsLegacy(Context &ctx, const char *api);

// A user call that would destroy or instantiate g (or destroy its nodes)
// while a capture builds it: npurtErrorIllegalState, else 0.
npurtError_t refuseIfCapturing(const Graph &g, const char *what, const char *api);

// npurtThreadExchangeStreamCaptureMode: the calling thread's mode, swapped.
npurtStreamCaptureMode exchangeCaptureMode(npurtStreamCaptureMode mode);

// npurtMallocAsync / npurtFreeAsync on a capturing stream: alloc and free
// nodes (*err); false if the stream is not capturing after all.
bool captureMalloc(Stream &s, size_t bytes, void **out, const CallSite &site, const char *api,
                   npurtError_t *err);
bool captureFree(Stream &s, void *p, const CallSite &site, const char *api, npurtError_t *err);

// An executable graph's work as a stream runs it: steps in order.
struct PlanStep {
	enum Kind { Tasks, Host, Record, Wait } kind = Tasks;
	uint32_t engineClass = 0;  // Tasks: packets back to back, one class
	std::vector<uint8_t> cmds;
	std::vector<TaskInfo> tasks;  // cmdBegin/cmdEnd: within cmds
	std::function<void(npurtError_t)> host;
	bool afterFailure = false;
	Event *event = nullptr;
};
struct GraphPlan {
	std::vector<PlanStep> steps;
	uint64_t taskCount = 0;
	bool tasksOnly = true;  // no host, record or wait steps
};

class GraphExec : public npurtGraphExec_st {
public:
	GraphExec(Context &ctx, std::unique_ptr<Graph> copy,
	          std::unordered_map<const GraphNode *, GraphNode *> map);
	~GraphExec();
	GraphExec(const GraphExec &) = delete;
	GraphExec &operator=(const GraphExec &) = delete;
	// Whether it holds its graph memory's claim (claimGraphMemory).
	bool claimedMemory = false;
	Context &ctx() const { return graph_->ctx(); }
	Graph &graph() { return *graph_; }
	// The exec's node for a node of the graph it was made from (or from
	// an update), else null.
	GraphNode *mine(const npurtGraphNode_st *original);
	// Builds the plan from the graph's nodes (after instantiation and
	// every update).
	void replan();
	std::shared_ptr<const GraphPlan> plan();
	// Launches in order: the last launch's stream, and an event a launch
	// on another stream records there to wait for (kept until the exec is
	// destroyed: a record deferred behind a host function refers to it).
	std::mutex launchMutex;
	std::shared_ptr<StreamLife> lastStream;
	Event order{npurtEventDisableTiming};
	// Updates: takes the parameters of g's nodes (same topology and
	// types), else fills *info and returns false.
	bool update(const Graph &g, npurtGraphExecUpdateResultInfo *info);
	// npurtGraphExecChildGraphNodeSetParams: the exec's child node n
	// takes child's parameters (same topology and types), else false with
	// *info saying why.
	bool updateChild(GraphNode &n, const Graph &child, npurtGraphExecUpdateResultInfo *info);

private:
	std::unique_ptr<Graph> graph_;
	std::unordered_map<const GraphNode *, GraphNode *> map_;  // original -> mine
	std::mutex planMutex_;
	std::shared_ptr<const GraphPlan> plan_;
};

void registerExec(GraphExec *e);
bool unregisterExec(GraphExec *e);
npurtError_t resolveExec(npurtGraphExec_t handle, GraphExec **out, const char *api);

// Builds the plan of g (see Graph::order).
std::shared_ptr<const GraphPlan> buildPlan(const Graph &g);

}  // namespace npurt

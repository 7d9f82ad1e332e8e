// Graphs: nodes, edges, clones, the order a launch runs them in, graph
// memory, and the handles of graphs, nodes and executable graphs.
#include "graph.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "context.h"
#include "error.h"
#include "runtime.h"

namespace npurt {
namespace {

// Never destroyed, as the stream registry: handles are checked until exit.
std::mutex &gGraphMutex = *new std::mutex;  // guards the sets and gGraphMemory
std::unordered_set<const npurtGraph_st *> &gGraphs = *new std::unordered_set<const npurtGraph_st *>;
std::unordered_set<const npurtGraphNode_st *> &gNodes =
        *new std::unordered_set<const npurtGraphNode_st *>;
std::unordered_set<const npurtGraphExec_st *> &gExecs =
        *new std::unordered_set<const npurtGraphExec_st *>;
// Graph memory blocks: base -> bytes; and how many there are, so that
// frees look only while some exist (npurtFree is a hot path).
std::map<uint64_t, size_t> &gGraphMemory = *new std::map<uint64_t, size_t>;
std::atomic<size_t> gGraphBlocks{0};
// Per device: graph memory bytes now and the high-water mark.
struct GraphMemoryUse {
	uint64_t current = 0, high = 0;
};
std::map<int, GraphMemoryUse> &gGraphUse = *new std::map<int, GraphMemoryUse>;

// A step of a plan holds at most this much: a batch takes a step whole
// (with room for the profiler's timestamps), well under the stream's
// batch limits; and no more device work than the driver runs inside
// SUBMIT on an idle engine (a larger job waits for the engine's worker).
constexpr size_t kStepBytes = 32u << 10;
constexpr size_t kStepTasks = 256;

bool hasTasks(const GraphNode *n)
{
	return !n->p.tasks.empty();
}

std::string escape(const std::string &s)
{
	std::string out;
	for (char c : s) {
		if (c == '"' || c == '\\')
			out += '\\';
		out += c;
	}
	return out;
}

const char *typeName(npurtGraphNodeType t)
{
	switch (t) {
	case npurtGraphNodeTypeKernel:
		return "op";
	case npurtGraphNodeTypeMemcpy:
		return "memcpy";
	case npurtGraphNodeTypeMemset:
		return "memset";
	case npurtGraphNodeTypeHost:
		return "host";
	case npurtGraphNodeTypeWaitEvent:
		return "event wait";
	case npurtGraphNodeTypeEventRecord:
		return "event record";
	case npurtGraphNodeTypeMemAlloc:
		return "mem alloc";
	case npurtGraphNodeTypeMemFree:
		return "mem free";
	case npurtGraphNodeTypeGraph:
		return "child graph";
	default:
		return "empty";
	}
}

// A live handle of set as T, else npurtErrorInvalidValue saying why.
template <typename H, typename T>
npurtError_t lookUp(const std::unordered_set<const H *> &set, H *handle, T **out, const char *what,
                    const char *why, const char *api)
{
	if (!handle)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + what + " is NULL");
	std::lock_guard<std::mutex> lock(gGraphMutex);
	if (!set.count(handle))
		return setError(npurtErrorInvalidValue, std::string(api) + ": " + why);
	*out = static_cast<T *>(handle);
	return npurtSuccess;
}

}  // namespace

GraphMemory::~GraphMemory()
{
	{
		std::lock_guard<std::mutex> lock(gGraphMutex);
		for (uint64_t b : blocks) {
			auto it = gGraphMemory.find(b);
			if (it == gGraphMemory.end())
				continue;
			gGraphUse[device].current -= it->second;
			gGraphMemory.erase(it);
		}
		gGraphBlocks.store(gGraphMemory.size(), std::memory_order_release);
	}
	// A destroyed context took its memory with it.
	if (!ctx || !Runtime::instance().isContext(ctx) || ctx->serial() != ctxSerial)
		return;
	for (uint64_t b : blocks)
		if (ctx->pool().deallocate(b))
			npurtGetLastError();
}

npurtError_t allocGraphMemory(GraphMemory &mem, size_t bytes, const CallSite &site, void **out,
                              const char *api)
{
	if (!bytes)
		return setError(npurtErrorInvalidValue, std::string(api) + ": the size is 0");
	uint64_t addr = 0;
	npurtError_t err = mem.ctx->pool().allocate(
	        bytes, 0, &addr, {site.text ? site.text->c_str() : nullptr, site.returnAddress});
	if (err)
		return setError(err, std::string(api) + ": graph memory of " +
		                             std::to_string(bytes) +
		                             " bytes: " + npurtGetLastErrorMessage());
	std::lock_guard<std::mutex> lock(gGraphMutex);
	mem.blocks.push_back(addr);
	gGraphMemory[addr] = bytes;
	gGraphBlocks.store(gGraphMemory.size(), std::memory_order_release);
	GraphMemoryUse &use = gGraphUse[mem.device];
	use.current += bytes;
	use.high = std::max(use.high, use.current);
	*out = reinterpret_cast<void *>(addr);
	return npurtSuccess;
}

bool claimGraphMemory(GraphMemory &mem)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	if (mem.execs)
		return false;
	mem.execs++;
	return true;
}

void releaseGraphMemory(GraphMemory &mem)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	mem.execs--;
}

void graphMemoryUsage(int device, uint64_t *current, uint64_t *high)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	const GraphMemoryUse &use = gGraphUse[device];
	*current = use.current;
	*high = use.high;
}

void resetGraphMemoryHigh(int device)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	GraphMemoryUse &use = gGraphUse[device];
	use.high = use.current;
}

bool isGraphMemory(const void *p)
{
	if (!gGraphBlocks.load(std::memory_order_acquire))
		return false;
	std::lock_guard<std::mutex> lock(gGraphMutex);
	return gGraphMemory.count(reinterpret_cast<uint64_t>(p)) != 0;
}

Graph::Graph(Context &ctx)
    : ctx_(&ctx), ctxSerial_(ctx.serial()), memory_(std::make_shared<GraphMemory>())
{
	memory_->ctx = &ctx;
	memory_->ctxSerial = ctx.serial();
	memory_->device = ctx.ordinal();
}

bool Graph::alive() const
{
	return Runtime::instance().isContext(ctx_) && ctx_->serial() == ctxSerial_;
}

Graph::~Graph()
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	for (const auto &n : nodes_)
		gNodes.erase(n.get());
}

GraphNode *Graph::add(NodeParams p, const std::vector<GraphNode *> &deps)
{
	auto n = std::make_unique<GraphNode>();
	n->graph = this;
	n->id = nextId_++;
	n->p = std::move(p);
	for (GraphNode *d : deps) {
		if (std::ranges::find(n->deps, d) != n->deps.end())
			continue;
		n->deps.push_back(d);
		d->dependents.push_back(n.get());
	}
	GraphNode *raw = n.get();
	nodes_.push_back(std::move(n));
	std::lock_guard<std::mutex> lock(gGraphMutex);
	gNodes.insert(raw);
	return raw;
}

void Graph::remove(GraphNode *n)
{
	for (GraphNode *d : n->deps)
		std::erase(d->dependents, n);
	for (GraphNode *d : n->dependents)
		std::erase(d->deps, n);
	{
		std::lock_guard<std::mutex> lock(gGraphMutex);
		gNodes.erase(n);
	}
	std::erase_if(nodes_, [n](const auto &p) { return p.get() == n; });
}

bool Graph::owns(const npurtGraphNode_st *n) const
{
	return n && static_cast<const GraphNode *>(n)->graph == this;
}

bool Graph::addEdge(GraphNode *from, GraphNode *to)
{
	if (from == to)
		return false;
	if (std::ranges::find(to->deps, from) != to->deps.end())
		return true;
	// A cycle: from is reached from to.
	std::vector<const GraphNode *> todo{to};
	std::unordered_set<const GraphNode *> seen{to};
	while (!todo.empty()) {
		const GraphNode *n = todo.back();
		todo.pop_back();
		for (const GraphNode *d : n->dependents) {
			if (d == from)
				return false;
			if (seen.insert(d).second)
				todo.push_back(d);
		}
	}
	to->deps.push_back(from);
	from->dependents.push_back(to);
	return true;
}

bool Graph::removeEdge(GraphNode *from, GraphNode *to)
{
	if (std::ranges::find(to->deps, from) == to->deps.end())
		return false;
	std::erase(to->deps, from);
	std::erase(from->dependents, to);
	return true;
}

std::unique_ptr<Graph> Graph::clone(std::unordered_map<const GraphNode *, GraphNode *> *map) const
{
	auto g = std::make_unique<Graph>(*ctx_);
	g->memory_ = memory_;
	std::unordered_map<const GraphNode *, GraphNode *> m;
	for (const auto &n : nodes_) {
		std::vector<GraphNode *> deps;
		deps.reserve(n->deps.size());
		for (const GraphNode *d : n->deps)
			deps.push_back(m.at(d));
		GraphNode *c = g->add(n->p, deps);
		if (n->p.child)
			c->p.child = embedGraph(*n->p.child);
		c->id = n->id;
		m[n.get()] = c;
	}
	g->nextId_ = nextId_;
	if (map)
		*map = std::move(m);
	return g;
}

std::vector<const GraphNode *> Graph::order() const
{
	std::unordered_map<const GraphNode *, size_t> waiting;
	std::vector<const GraphNode *> ready, out;
	out.reserve(nodes_.size());
	for (const auto &n : nodes_) {
		waiting[n.get()] = n->deps.size();
		if (n->deps.empty())
			ready.push_back(n.get());
	}
	int cls = -1;
	while (!ready.empty()) {
		// The same engine class as the last task node, else a node
		// without tasks, else the first ready one (ready keeps the order
		// nodes were made in).
		auto pick = std::ranges::find_if(ready, [cls](const GraphNode *n) {
			return hasTasks(n) &&
			       static_cast<int>(n->p.tasks.front().engineClass) == cls;
		});
		if (pick == ready.end())
			pick = std::ranges::find_if(
			        ready, [](const GraphNode *n) { return !hasTasks(n); });
		if (pick == ready.end())
			pick = ready.begin();
		const GraphNode *n = *pick;
		ready.erase(pick);
		if (hasTasks(n))
			cls = static_cast<int>(n->p.tasks.back().engineClass);
		out.push_back(n);
		for (const GraphNode *d : n->dependents)
			if (--waiting[d] == 0)
				ready.push_back(d);
	}
	return out;
}

bool Graph::hasMemoryNodes() const
{
	return std::ranges::any_of(nodes_, [](const auto &n) {
		return n->p.type == npurtGraphNodeTypeMemAlloc ||
		       n->p.type == npurtGraphNodeTypeMemFree;
	});
}

std::shared_ptr<Graph> embedGraph(const Graph &g)
{
	std::shared_ptr<Graph> c(g.clone(nullptr).release(), [](Graph *p) {
		unregisterGraph(p);
		delete p;
	});
	c->embedded = true;
	registerGraph(c.get());
	return c;
}

std::string Graph::dot(bool verbose) const
{
	std::string s = "digraph npurtGraph {\n\trankdir=TB;\n\tnode [shape=box];\n";
	for (const auto &n : nodes_) {
		std::string label = std::to_string(n->id) + ": " + typeName(n->p.type);
		if (verbose || n->p.tasks.size() == 1)
			for (const GraphTask &t : n->p.tasks)
				label += "\\n" + escape(t.info.what());
		if (n->p.child)
			label += "\\n" + std::to_string(n->p.child->nodes().size()) + " nodes";
		if (n->p.type == npurtGraphNodeTypeMemAlloc ||
		    n->p.type == npurtGraphNodeTypeMemFree)
			label += "\\n" + hexAddr(reinterpret_cast<uint64_t>(n->p.dptr)) +
			         (n->p.bytes ? " " + std::to_string(n->p.bytes) + " bytes" : "");
		if (verbose && (n->p.site.text || n->p.site.returnAddress))
			label += "\\nat " + escape(n->p.site.str());
		s += "\tn" + std::to_string(n->id) + " [label=\"" + label + "\"];\n";
	}
	for (const auto &n : nodes_)
		for (const GraphNode *d : n->deps)
			s += "\tn" + std::to_string(d->id) + " -> n" + std::to_string(n->id) +
			     ";\n";
	return s + "}\n";
}

namespace {

// A task as the plan places it: the engine class may differ from the
// node's (joinSmallCopies).
struct PlannedTask {
	const GraphTask *task;
	uint32_t node;
	uint32_t engineClass;
};

// Small copies and fills next to compute tasks join them (joinsCompute): a
// maximal run of them goes to the compute engine when the task before or
// after it is compute work, saving a fence between engines on each side.
void joinSmallCopies(std::vector<PlannedTask> &tasks)
{
	auto isCompute = [&](size_t i) {
		return i < tasks.size() && tasks[i].engineClass == DRM_NPU_ENGINE_COMPUTE;
	};
	for (size_t i = 0; i < tasks.size();) {
		size_t end = i;
		while (end < tasks.size() &&
		       joinsCompute(tasks[end].engineClass, tasks[end].task->info))
			end++;
		if (end == i) {
			i++;
			continue;
		}
		if ((i > 0 && isCompute(i - 1)) || isCompute(end))
			for (size_t k = i; k < end; k++)
				tasks[k].engineClass = DRM_NPU_ENGINE_COMPUTE;
		i = end;
	}
}

// Packs tasks, in order, into steps: one engine class each, bounded as
// batches are (a step of small tasks may run inside SUBMIT).
void appendTasks(GraphPlan &plan, const std::vector<PlannedTask> &tasks)
{
	uint64_t cost = 0;  // of the last step's tasks
	PlanStep *last = nullptr;
	for (const PlannedTask &pt : tasks) {
		const GraphTask &t = *pt.task;
		const uint64_t c = taskCost(t.info);
		if (!last || last->engineClass != pt.engineClass ||
		    last->cmds.size() + t.packet.size() > kStepBytes ||
		    last->tasks.size() >= kStepTasks || cost + c > kBatchMaxCost) {
			last = &plan.steps.emplace_back();
			last->engineClass = pt.engineClass;
			cost = 0;
		}
		cost += c;
		TaskInfo info = t.info;
		info.graphNode = pt.node;
		info.cmdBegin = static_cast<uint32_t>(last->cmds.size());
		last->cmds.insert(last->cmds.end(), t.packet.begin(), t.packet.end());
		info.cmdEnd = static_cast<uint32_t>(last->cmds.size());
		last->tasks.push_back(info);
		plan.taskCount++;
	}
}

}  // namespace

std::shared_ptr<const GraphPlan> buildPlan(const Graph &g)
{
	auto plan = std::make_shared<GraphPlan>();
	// The tasks since the last host, record or wait step: small copies
	// join compute work only within such a run, whose order is fixed.
	std::vector<PlannedTask> run;
	auto flush = [&] {
		joinSmallCopies(run);
		appendTasks(*plan, run);
		run.clear();
	};
	// A child graph's nodes run in its node's place (the plan is one
	// order), their tasks named by that node of the launched graph.
	std::function<void(const Graph &, uint32_t)> visit = [&](const Graph &graph,
	                                                         uint32_t outer) {
		for (const GraphNode *n : graph.order()) {
			const NodeParams &p = n->p;
			const uint32_t id = outer ? outer : n->id;
			if (p.child) {
				visit(*p.child, id);
				continue;
			}
			if (!n->enabled)
				continue;  // disabled: an empty node (edges are in the order)
			for (const GraphTask &t : p.tasks)
				run.push_back({&t, id, t.engineClass});
			PlanStep step;
			switch (p.type) {
			case npurtGraphNodeTypeHost:
				step.kind = PlanStep::Host;
				step.host = p.hostFn;
				step.afterFailure = p.hostAfterFailure;
				break;
			case npurtGraphNodeTypeEventRecord:
				step.kind = PlanStep::Record;
				step.event = p.event;
				break;
			case npurtGraphNodeTypeWaitEvent:
				step.kind = PlanStep::Wait;
				step.event = p.event;
				break;
			default:
				continue;
			}
			flush();
			plan->tasksOnly = false;
			plan->steps.push_back(std::move(step));
		}
	};
	visit(g, 0);
	flush();
	return plan;
}

GraphExec::GraphExec(Context &, std::unique_ptr<Graph> copy,
                     std::unordered_map<const GraphNode *, GraphNode *> map)
    : graph_(std::move(copy)), map_(std::move(map))
{
	replan();
}

GraphExec::~GraphExec()
{
	if (claimedMemory)
		releaseGraphMemory(*graph_->memory());
}

GraphNode *GraphExec::mine(const npurtGraphNode_st *original)
{
	auto it = map_.find(static_cast<const GraphNode *>(original));
	return it == map_.end() ? nullptr : it->second;
}

void GraphExec::replan()
{
	std::shared_ptr<const GraphPlan> p = buildPlan(*graph_);
	std::lock_guard<std::mutex> lock(planMutex_);
	plan_ = std::move(p);
}

std::shared_ptr<const GraphPlan> GraphExec::plan()
{
	std::lock_guard<std::mutex> lock(planMutex_);
	return plan_;
}

namespace {

bool updateFailed(npurtGraphExecUpdateResultInfo *info, npurtGraphExecUpdateResult r,
                  const GraphNode *n, const GraphNode *from)
{
	info->result = r;
	info->errorNode = const_cast<GraphNode *>(n);
	info->errorFromNode = const_cast<GraphNode *>(from);
	return false;
}

// Whether theirs may update mine: the same nodes, paired in the order they
// were made (as a capture of the same code makes them), of the same types
// and engine classes, with the same edges under that pairing and the same
// graph memory; child graphs alike. *info says why not, or success.
bool updatable(const Graph &mine, const Graph &theirs, npurtGraphExecUpdateResultInfo *info)
{
	const auto &mineNodes = mine.nodes();
	const auto &theirNodes = theirs.nodes();
	if (mineNodes.size() != theirNodes.size())
		return updateFailed(info, npurtGraphExecUpdateErrorTopologyChanged, nullptr,
		                    nullptr);
	std::unordered_map<const GraphNode *, size_t> index;
	for (size_t i = 0; i < theirNodes.size(); i++)
		index[theirNodes[i].get()] = i;
	std::unordered_map<const GraphNode *, size_t> myIndex;
	for (size_t i = 0; i < mineNodes.size(); i++)
		myIndex[mineNodes[i].get()] = i;
	for (size_t i = 0; i < theirNodes.size(); i++) {
		const GraphNode *t = theirNodes[i].get();
		const GraphNode *m = mineNodes[i].get();
		if (t->p.type != m->p.type)
			return updateFailed(info, npurtGraphExecUpdateErrorNodeTypeChanged, t,
			                    nullptr);
		std::set<size_t> a, b;
		for (const GraphNode *d : t->deps)
			a.insert(index.at(d));
		for (const GraphNode *d : m->deps)
			b.insert(myIndex.at(d));
		if (a != b)
			return updateFailed(info, npurtGraphExecUpdateErrorTopologyChanged, t,
			                    t->deps.empty() ? nullptr : t->deps.front());
		// Graph memory is fixed when the exec is made.
		if ((t->p.type == npurtGraphNodeTypeMemAlloc ||
		     t->p.type == npurtGraphNodeTypeMemFree) &&
		    (t->p.dptr != m->p.dptr || t->p.bytes != m->p.bytes))
			return updateFailed(info, npurtGraphExecUpdateErrorNotSupported, t,
			                    nullptr);
		if (hasTasks(t) != hasTasks(m) ||
		    (hasTasks(t) &&
		     t->p.tasks.front().engineClass != m->p.tasks.front().engineClass))
			return updateFailed(info, npurtGraphExecUpdateErrorParametersChanged, t,
			                    nullptr);
		// The node inside a child that differs is not the caller's to
		// name: the child node is.
		if (t->p.child && !updatable(*m->p.child, *t->p.child, info))
			return updateFailed(info, info->result, t, nullptr);
	}
	*info = npurtGraphExecUpdateResultInfo{};
	info->result = npurtGraphExecUpdateSuccess;
	return true;
}

// The parameters of `from`, a node of a graph the user holds, into an
// exec's node; an embedded graph copied, so that later changes to the
// user's graph do not reach the exec.
void takeParams(GraphNode &mine, const GraphNode &from)
{
	uint32_t id = mine.id;
	mine.p = from.p;
	if (from.p.child)
		mine.p.child = embedGraph(*from.p.child);
	mine.id = id;
}

}  // namespace

bool GraphExec::update(const Graph &g, npurtGraphExecUpdateResultInfo *info)
{
	if (!updatable(*graph_, g, info))
		return false;
	const auto &mineNodes = graph_->nodes();
	const auto &theirs = g.nodes();
	for (size_t i = 0; i < theirs.size(); i++) {
		takeParams(*mineNodes[i], *theirs[i]);
		map_[theirs[i].get()] = mineNodes[i].get();
	}
	replan();
	return true;
}

bool GraphExec::updateChild(GraphNode &n, const Graph &child, npurtGraphExecUpdateResultInfo *info)
{
	if (!updatable(*n.p.child, child, info))
		return false;
	n.p.child = embedGraph(child);
	replan();
	return true;
}

void registerGraph(Graph *g)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	gGraphs.insert(g);
}

bool unregisterGraph(Graph *g)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	return gGraphs.erase(g) != 0;
}

npurtError_t resolveGraph(npurtGraph_t handle, Graph **out, const char *api)
{
	return lookUp(gGraphs, handle, out, "the graph",
	              "not a live graph (destroyed, or not made by npurtGraphCreate, "
	              "npurtGraphClone or npurtStreamEndCapture)",
	              api);
}

npurtError_t resolveNode(npurtGraphNode_t handle, GraphNode **out, const char *api)
{
	if (!handle)
		return setError(npurtErrorInvalidValue, std::string(api) + ": the node is NULL");
	std::lock_guard<std::mutex> lock(gGraphMutex);
	// An executable graph's copies and a capture's graph are not the user's.
	if (!gNodes.count(handle) || !gGraphs.count(static_cast<GraphNode *>(handle)->graph))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": not a node of a live graph (destroyed, or "
		                                   "a bad handle)");
	*out = static_cast<GraphNode *>(handle);
	return npurtSuccess;
}

void registerExec(GraphExec *e)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	gExecs.insert(e);
}

bool unregisterExec(GraphExec *e)
{
	std::lock_guard<std::mutex> lock(gGraphMutex);
	return gExecs.erase(e) != 0;
}

npurtError_t resolveExec(npurtGraphExec_t handle, GraphExec **out, const char *api)
{
	return lookUp(gExecs, handle, out, "the executable graph",
	              "not a live executable graph (destroyed, or not made by "
	              "npurtGraphInstantiate)",
	              api);
}

}  // namespace npurt

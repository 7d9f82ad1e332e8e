// npu_graph.cpp - graph capture and replay for PyTorch (torch_npu's
// NPUGraph, torch.cuda.CUDAGraph) over libnpurt's stream capture, and the
// private memory pools that go with it.
//
// Work enqueued on a capturing stream is recorded, not run; a replay runs
// it again on the same addresses. So the memory of the tensors the capture
// made must stay the graph's: it comes from a private pool (as in
// PyTorch's caching allocator), whose blocks are handed out again only to
// later allocations of a capture into the same pool, never to eager code,
// and which goes back to libnpurt when the last graph using it is reset.
// Inside one capture a freed block is reused by the same stream only (the
// capture orders that stream's work as the replay will); one that
// record_stream() marked as used by another stream waits for the end of
// the capture.
//
// libnpurt forbids npurtMalloc and npurtFree during a global-mode capture
// (they are "potentially unsafe" CUDA calls). Neither waits for the device
// in libnpurt (a free parks its block behind the work queued before it),
// so the allocator makes them in relaxed mode, as PyTorch does around its
// cudaMalloc.
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <torch/extension.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "npu_runtime.h"

namespace py = pybind11;

namespace torch_npurt {

namespace {

// torch's MempoolId_t: (graph's id, 0) for a graph's own pool, (0, id) for
// one made by graph_pool_handle().
using PoolId = std::pair<uint64_t, uint64_t>;

struct Pool;

struct Block {
	void *ptr = nullptr;
	size_t size = 0;
	npurtStream_t stream = nullptr;  // the one it was allocated for
	bool otherStreams = false;  // record_stream() named another stream
	std::shared_ptr<Pool> pool;
};

struct Pool {
	PoolId id;
	int device = 0;
	int owners = 0;  // graphs that captured into it, and captures underway
	int capturing = 0;
	// Free blocks by (stream, size).
	std::multimap<std::pair<npurtStream_t, size_t>, Block *> free;
	// Freed during a capture after another stream used them.
	std::vector<Block *> deferred;
	size_t blocks = 0;  // free and in use
	size_t bytes = 0;
};

struct Capture {
	unsigned long long id = 0;  // libnpurt's capture id
	std::shared_ptr<Pool> pool;
};

// Guards everything below. Taken on every allocation and free while a
// capture is underway or a pool holds blocks; never held across a call
// that waits for the device.
std::mutex gMutex;
std::map<PoolId, std::shared_ptr<Pool>> gPools;
std::unordered_map<void *, Block *> gBlocks;  // every pool block by address
std::vector<Capture> gCaptures;
std::atomic<int> gCapturesUnderway{0};
std::atomic<size_t> gPoolBlocks{0};
std::atomic<uint64_t> gNextId{1};

// Pool blocks are rounded up so that nearby sizes share blocks; a free
// block serves a request of at least half its size.
constexpr size_t kRound = 512;

size_t roundSize(size_t n)
{
	return (n + kRound - 1) / kRound * kRound;
}

// Hands a block back to libnpurt. gMutex held.
void dropBlock(Block *b)
{
	gBlocks.erase(b->ptr);
	gPoolBlocks.fetch_sub(1, std::memory_order_release);
	b->pool->blocks--;
	b->pool->bytes -= b->size;
	DeviceScope scope(b->pool->device);
	freeToRuntime(b->ptr);
	delete b;
}

// The last graph or capture of a pool let go of it: its free blocks go
// back to libnpurt now, the ones in use when their tensors die. gMutex held.
void unown(const std::shared_ptr<Pool> &pool)
{
	if (--pool->owners > 0)
		return;
	for (auto &[key, b] : pool->free)
		dropBlock(b);
	pool->free.clear();
	for (Block *b : pool->deferred)
		dropBlock(b);
	pool->deferred.clear();
	gPools.erase(pool->id);
}

// A capture is over: blocks other streams used are free again (later
// captures into the pool are ordered after this one by their replays).
// gMutex held.
void endCapture(unsigned long long id)
{
	for (auto it = gCaptures.begin(); it != gCaptures.end(); ++it) {
		if (it->id != id)
			continue;
		std::shared_ptr<Pool> pool = it->pool;
		gCaptures.erase(it);
		gCapturesUnderway.fetch_sub(1, std::memory_order_release);
		if (--pool->capturing == 0) {
			for (Block *b : pool->deferred) {
				b->otherStreams = false;
				pool->free.emplace(std::make_pair(b->stream, b->size), b);
			}
			pool->deferred.clear();
		}
		unown(pool);
		return;
	}
}

npurtStreamCaptureMode parseMode(const std::string &mode)
{
	if (mode == "global")
		return npurtStreamCaptureModeGlobal;
	if (mode == "thread_local")
		return npurtStreamCaptureModeThreadLocal;
	if (mode == "relaxed")
		return npurtStreamCaptureModeRelaxed;
	throw py::value_error("capture_error_mode must be \"global\", \"thread_local\" or "
	                      "\"relaxed\", not \"" +
	                      mode + "\"");
}

}  // namespace

void *capturePoolAllocate(int device, size_t n)
{
	if (gCapturesUnderway.load(std::memory_order_acquire) == 0)
		return nullptr;
	npurtStream_t s = currentNative(device);
	npurtStreamCaptureStatus status = npurtStreamCaptureStatusNone;
	unsigned long long id = 0;
	if (!s || npurtStreamGetCaptureInfo(s, &status, &id) != npurtSuccess ||
	    status == npurtStreamCaptureStatusNone) {
		npurtGetLastError();
		return nullptr;
	}
	const size_t size = roundSize(n);
	std::lock_guard<std::mutex> lock(gMutex);
	std::shared_ptr<Pool> pool;
	for (const Capture &c : gCaptures)
		if (c.id == id)
			pool = c.pool;
	// A capture that is not an NPUGraph's (libnpurt's API used directly)
	// gets ordinary memory, as a cudaMalloc would.
	if (!pool)
		return nullptr;
	auto it = pool->free.lower_bound({s, size});
	if (it != pool->free.end() && it->first.first == s && it->first.second / 2 <= size) {
		Block *b = it->second;
		pool->free.erase(it);
		return b->ptr;
	}
	void *p = nullptr;
	npurtError_t err = npurtSuccess;
	{
		RelaxedCaptureMode relaxed;
		err = npurtMalloc(&p, size);
	}
	if (err == npurtErrorMemoryAllocation)
		throwOutOfMemory(device, n);
	check(err, "npurtMalloc");
	auto *b = new Block{p, size, s, false, pool};
	gBlocks.emplace(p, b);
	gPoolBlocks.fetch_add(1, std::memory_order_release);
	pool->blocks++;
	pool->bytes += size;
	return p;
}

bool capturePoolFree(void *p)
{
	if (gPoolBlocks.load(std::memory_order_acquire) == 0)
		return false;
	std::lock_guard<std::mutex> lock(gMutex);
	auto it = gBlocks.find(p);
	if (it == gBlocks.end())
		return false;
	Block *b = it->second;
	Pool &pool = *b->pool;
	if (pool.owners == 0)
		dropBlock(b);
	else if (b->otherStreams && pool.capturing > 0)
		pool.deferred.push_back(b);
	else
		pool.free.emplace(std::make_pair(b->stream, b->size), b);
	return true;
}

bool captureUnderway()
{
	return gCapturesUnderway.load(std::memory_order_acquire) > 0;
}

RelaxedCaptureMode::RelaxedCaptureMode() : active_(captureUnderway())
{
	if (active_)
		npurtThreadExchangeStreamCaptureMode(&mode_);
}

RelaxedCaptureMode::~RelaxedCaptureMode()
{
	if (active_)
		npurtThreadExchangeStreamCaptureMode(&mode_);
}

void capturePoolRecordStream(void *p, npurtStream_t stream)
{
	if (gPoolBlocks.load(std::memory_order_acquire) == 0)
		return;
	std::lock_guard<std::mutex> lock(gMutex);
	auto it = gBlocks.find(p);
	if (it != gBlocks.end() && it->second->stream != stream)
		it->second->otherStreams = true;
}

namespace {

// One NPUGraph: a capture, then its graph and executable graph.
class PyGraph {
public:
	PyGraph() = default;
	~PyGraph()
	{
		try {
			reset();
		} catch (...) {  // NOLINT(bugprone-empty-catch): a destructor cannot throw
		}
	}
	PyGraph(const PyGraph &) = delete;
	PyGraph &operator=(const PyGraph &) = delete;

	void captureBegin(int device, int64_t streamId, py::object poolArg, const std::string &mode)
	{
		const npurtStreamCaptureMode m = parseMode(mode);
		TORCH_CHECK(!capturing_, "NPUGraph.capture_begin: this graph is already capturing");
		TORCH_CHECK(!exec_, "NPUGraph.capture_begin: this graph was captured already; "
		                    "call reset() before capturing it again");
		TORCH_CHECK(streamId != 0,
		            "NPU graphs must be captured on a non-default stream (a stream of "
		            "torch.npu.Stream(), as torch.npu.graph uses); after the capture they "
		            "can be replayed on any stream");
		c10::Stream cs = streamFromIds(device, streamId);
		device = cs.device_index();
		npurtStream_t s = nativeStream(cs);
		PoolId id;
		if (poolArg.is_none()) {
			id = {gNextId.fetch_add(1), 0};
		} else {
			auto t = poolArg.cast<std::pair<uint64_t, uint64_t>>();
			TORCH_CHECK(
			        t.first || t.second,
			        "NPUGraph.capture_begin: pool must be another graph's pool() or "
			        "a torch.npu.graph_pool_handle()");
			id = t;
		}
		DeviceScope scope(device);
		std::shared_ptr<Pool> pool;
		{
			std::lock_guard<std::mutex> lock(gMutex);
			auto &slot = gPools[id];
			if (!slot) {
				slot = std::make_shared<Pool>();
				slot->id = id;
				slot->device = device;
			}
			pool = slot;
			TORCH_CHECK(pool->device == device, "NPUGraph.capture_begin: pool ",
			            id.first, ",", id.second, " holds memory of NPU ", pool->device,
			            ", not of NPU ", device);
			pool->owners++;
			pool->capturing++;
		}
		npurtError_t err = npurtStreamBeginCapture(s, m);
		unsigned long long cid = 0;
		npurtStreamCaptureStatus status = npurtStreamCaptureStatusNone;
		if (!err)
			err = npurtStreamGetCaptureInfo(s, &status, &cid);
		std::lock_guard<std::mutex> lock(gMutex);
		if (err) {
			pool->capturing--;
			unown(pool);
			throwError(err, "NPUGraph.capture_begin");
		}
		gCaptures.push_back({cid, pool});
		gCapturesUnderway.fetch_add(1, std::memory_order_release);
		capturing_ = true;
		device_ = device;
		stream_ = s;
		captureId_ = cid;
		pool_ = pool;
	}

	// Ends the capture; `keep` false throws the graph away (an exception
	// left the capture) and reports nothing.
	size_t captureEnd(bool keep)
	{
		TORCH_CHECK(capturing_, "NPUGraph.capture_end: no capture_begin() before");
		DeviceScope scope(device_);
		npurtGraph_t graph = nullptr;
		npurtError_t err = npurtStreamEndCapture(stream_, &graph);
		capturing_ = false;
		{
			std::lock_guard<std::mutex> lock(gMutex);
			pool_->owners++;  // the graph's; endCapture drops the capture's
			endCapture(captureId_);
		}
		if (!err && keep)
			err = npurtGraphInstantiate(&exec_, graph, 0);
		if (err || !keep) {
			std::string msg = err ? std::string(npurtGetErrorName(err)) + ": " +
			                                  npurtGetLastErrorMessage()
			                      : "";
			npurtGetLastError();
			if (graph)
				npurtGraphDestroy(graph);
			exec_ = nullptr;
			release();
			TORCH_CHECK(!err || !keep, "NPUGraph.capture_end: ", nameStreams(msg));
			return 0;
		}
		graph_ = graph;
		size_t nodes = 0;
		check(npurtGraphGetNodes(graph_, nullptr, &nodes), "npurtGraphGetNodes");
		return nodes;
	}

	// The NPU it was captured on (replayed there), -1 before a capture.
	int device() const { return exec_ || capturing_ ? device_ : -1; }

	void replay(int device, int64_t streamId)
	{
		TORCH_CHECK(exec_, capturing_ ? "NPUGraph.replay: the capture has not ended"
		                              : "NPUGraph.replay: nothing captured (call "
		                                "capture_begin() and capture_end() first)");
		device = checkedDevice(device);
		TORCH_CHECK(device == device_, "NPUGraph.replay: the graph was captured on NPU ",
		            device_, "; the current stream is of NPU ", device);
		c10::Stream s = streamFromIds(device, streamId);
		DeviceScope scope(device);
		check(npurtGraphLaunch(exec_, nativeStream(s)), "NPUGraph.replay");
	}

	void reset()
	{
		if (capturing_)
			captureEnd(false);
		DeviceScope scope(device_);
		if (exec_)
			npurtGraphExecDestroy(exec_);
		if (graph_)
			npurtGraphDestroy(graph_);
		exec_ = nullptr;
		graph_ = nullptr;
		release();
	}

	py::tuple pool() const
	{
		TORCH_CHECK(pool_, "NPUGraph.pool: the graph has no pool (capture it first)");
		return py::make_tuple(pool_->id.first, pool_->id.second);
	}

	void debugDump(const std::string &path) const
	{
		TORCH_CHECK(graph_, "NPUGraph.debug_dump: nothing captured");
		check(npurtGraphDebugDotPrint(graph_, path.c_str(), npurtGraphDebugDotFlagsVerbose),
		      "npurtGraphDebugDotPrint");
	}

	py::dict poolStats() const
	{
		py::dict d;
		if (!pool_)
			return d;
		std::lock_guard<std::mutex> lock(gMutex);
		d["blocks"] = pool_->blocks;
		d["bytes"] = pool_->bytes;
		d["free_blocks"] = pool_->free.size() + pool_->deferred.size();
		return d;
	}

private:
	void release()
	{
		if (!pool_)
			return;
		std::lock_guard<std::mutex> lock(gMutex);
		unown(pool_);
		pool_.reset();
	}

	bool capturing_ = false;
	int device_ = 0;
	npurtStream_t stream_ = nullptr;
	unsigned long long captureId_ = 0;
	std::shared_ptr<Pool> pool_;
	npurtGraph_t graph_ = nullptr;
	npurtGraphExec_t exec_ = nullptr;
};

}  // namespace

void registerGraphs(py::module &m)
{
	py::class_<PyGraph>(m, "_Graph")
	        .def(py::init<>())
	        .def("capture_begin", &PyGraph::captureBegin)
	        .def("capture_end", &PyGraph::captureEnd)
	        .def("replay", &PyGraph::replay)
	        .def("reset", &PyGraph::reset)
	        .def("pool", &PyGraph::pool)
	        .def("device", [](const PyGraph &p) { return p.device(); })
	        .def("debug_dump", &PyGraph::debugDump)
	        .def("pool_stats", &PyGraph::poolStats);
	m.def("_graph_pool_handle", [] { return py::make_tuple(0, gNextId.fetch_add(1)); });
	// Tensor.record_stream for every torch version (1.13 cannot build a
	// torch.Stream of ours to hand to its own binding).
	m.def("_record_stream", [](const at::Tensor &t, int64_t id) {
		TORCH_CHECK(t.device().type() == kNpu, "record_stream: a tensor on ", t.device(),
		            " cannot be recorded on an NPU stream");
		if (!t.has_storage())
			return;
		c10::Stream s = streamFromIds(t.device().index(), id);
		capturePoolRecordStream(t.storage().data_ptr().get(), nativeStream(s));
	});
	m.def("_stream_is_capturing", [](int d, int64_t id) {
		npurtStream_t ns = nativeStream(streamFromIds(d, id));
		if (!ns)
			return false;  // the legacy default stream never captures
		npurtStreamCaptureStatus st = npurtStreamCaptureStatusNone;
		check(npurtStreamIsCapturing(ns, &st), "npurtStreamIsCapturing");
		return st != npurtStreamCaptureStatusNone;
	});
}

}  // namespace torch_npurt

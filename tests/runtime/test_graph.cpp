// Graphs against the real module (run in the VM): stream capture with
// fork/join replayed 1000 times, the calls a capture forbids and the errors
// it gives, explicit graphs and their structure calls, executable graph
// updates, graph memory, a fault inside a replayed graph, launch order
// across streams, threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gate.h"
#include "npurt/npurt.h"
#include "ptds_unit.h"
#include "vm_knobs.h"

namespace {

constexpr size_t kN = 256;  // floats per buffer

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

npurtOpDesc addOp(const float *a, const float *b, float *out, uint64_t n = kN)
{
	npurtOpDesc d{};
	d.op = npurtOpAdd;
	d.dtype = npurtFloat32;
	d.outDtype = npurtFloat32;
	d.a = a;
	d.b = b;
	d.out = out;
	d.n = n;
	return d;
}

// Device buffers of kN floats, and a pinned one to read them through.
class Graphs : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
		for (auto &b : buf_)
			ASSERT_EQ(npurtMalloc(reinterpret_cast<void **>(&b), kN * 4), npurtSuccess);
		ASSERT_EQ(npurtMallocHost(reinterpret_cast<void **>(&host_), kN * 4), npurtSuccess);
		for (auto &s : s_)
			ASSERT_EQ(npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking),
			          npurtSuccess);
		// ones and twos
		fill(buf_[0], 1.0f);
		fill(buf_[1], 2.0f);
	}
	void TearDown() override
	{
		for (auto &s : s_) {
			npurtStreamCaptureStatus st = npurtStreamCaptureStatusNone;
			if (npurtStreamIsCapturing(s, &st) == npurtSuccess &&
			    st != npurtStreamCaptureStatusNone) {
				npurtGraph_t g = nullptr;
				npurtStreamEndCapture(s, &g);
				if (g)
					npurtGraphDestroy(g);
			}
			npurtStreamDestroy(s);
		}
		for (auto &b : buf_)
			npurtFree(b);
		npurtFreeHost(host_);
		npurtGetLastError();
	}
	void fill(float *d, float v)
	{
		for (size_t i = 0; i < kN; i++)
			host_[i] = v;
		ASSERT_EQ(npurtMemcpy(d, host_, kN * 4, npurtMemcpyHostToDevice), npurtSuccess);
	}
	// Whether every float of d is v.
	bool holds(const float *d, float v)
	{
		if (npurtMemcpy(host_, d, kN * 4, npurtMemcpyDeviceToHost) != npurtSuccess)
			return false;
		for (size_t i = 0; i < kN; i++)
			if (host_[i] != v)
				return false;
		return true;
	}
	// Begins a capture on s with a memset in it: the graph being captured
	// and the memset's node.
	void captureMemset(npurtStream_t s, npurtGraph_t *g, npurtGraphNode_t *node)
	{
		ASSERT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
		ASSERT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, s), npurtSuccess);
		const npurtGraphNode_t *deps = nullptr;
		size_t n = 0;
		ASSERT_EQ(npurtStreamGetCaptureInfo(s, nullptr, nullptr, g, &deps, &n),
		          npurtSuccess);
		ASSERT_EQ(n, 1u);
		*node = deps[0];
	}
	size_t nodeCount(npurtGraph_t g)
	{
		size_t n = 0;
		EXPECT_EQ(npurtGraphGetNodes(g, nullptr, &n), npurtSuccess);
		return n;
	}

	float *buf_[6] = {};
	float *host_ = nullptr;
	npurtStream_t s_[3] = {};
};

TEST_F(Graphs, ForkJoinAcrossThreeStreamsReplayed1000Times)
{
	float *ones = buf_[0], *twos = buf_[1], *acc1 = buf_[2], *acc2 = buf_[3], *sum = buf_[4];
	ASSERT_EQ(npurtMemset(acc1, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtMemset(acc2, 0, kN * 4), npurtSuccess);
	npurtEvent_t fork = nullptr, j1 = nullptr, j2 = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&fork, npurtEventDisableTiming), npurtSuccess);
	ASSERT_EQ(npurtEventCreateWithFlags(&j1, npurtEventDisableTiming), npurtSuccess);
	ASSERT_EQ(npurtEventCreateWithFlags(&j2, npurtEventDisableTiming), npurtSuccess);

	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(fork, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[1], fork, 0), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[2], fork, 0), npurtSuccess);
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusNone;
	ASSERT_EQ(npurtStreamIsCapturing(s_[1], &st), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusActive) << "a forked stream joins the capture";
	npurtOpDesc d1 = addOp(acc1, ones, acc1), d2 = addOp(acc2, twos, acc2);
	ASSERT_EQ(npurtLaunchOp(&d1, s_[1]), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtLaunchOp(&d2, s_[2]), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventRecord(j1, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(j2, s_[2]), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[0], j1, 0), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[0], j2, 0), npurtSuccess);
	npurtOpDesc d3 = addOp(acc1, acc2, sum);
	ASSERT_EQ(npurtLaunchOp(&d3, s_[0]), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess) << lastMessage();
	ASSERT_NE(g, nullptr);
	EXPECT_EQ(npurtStreamIsCapturing(s_[1], &st), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusNone) << "the end takes every stream out";
	// Nothing ran during the capture.
	EXPECT_TRUE(holds(acc1, 0.0f));

	ASSERT_EQ(nodeCount(g), 3u);
	size_t roots = 0;
	ASSERT_EQ(npurtGraphGetRootNodes(g, nullptr, &roots), npurtSuccess);
	EXPECT_EQ(roots, 2u) << "the two forked ops depend on nothing in the graph";
	size_t edges = 0;
	ASSERT_EQ(npurtGraphGetEdges(g, nullptr, nullptr, &edges), npurtSuccess);
	EXPECT_EQ(edges, 2u) << "the join: the sum after both";

	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess) << lastMessage();
	for (int i = 0; i < 1000; i++)
		ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess) << i << " " << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess) << lastMessage();
	EXPECT_TRUE(holds(acc1, 1000.0f));
	EXPECT_TRUE(holds(acc2, 2000.0f));
	EXPECT_TRUE(holds(sum, 3000.0f)) << "the join ran after both branches every time";
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtErrorInvalidValue) << "destroyed twice";
	npurtGetLastError();
	for (auto e : {fork, j1, j2})
		npurtEventDestroy(e);
}

TEST_F(Graphs, CaptureInfoNamesTheStreamsDependencies)
{
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusActive;
	unsigned long long id = 1;
	ASSERT_EQ(npurtStreamGetCaptureInfo(s_[0], &st, &id, nullptr, nullptr, nullptr),
	          npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusNone);
	EXPECT_EQ(id, 0u);
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeThreadLocal), npurtSuccess);
	const npurtGraphNode_t *deps = nullptr;
	size_t n = 99;
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamGetCaptureInfo(s_[0], &st, &id, &g, &deps, &n), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusActive);
	EXPECT_NE(id, 0u);
	EXPECT_NE(g, nullptr);
	EXPECT_EQ(n, 0u);
	ASSERT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamGetCaptureInfo(s_[0], &st, nullptr, nullptr, &deps, &n), npurtSuccess);
	ASSERT_EQ(n, 1u);
	npurtGraphNodeType type = npurtGraphNodeTypeEmpty;
	npurtGraph_t out = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &out), npurtSuccess);
	ASSERT_EQ(nodeCount(out), 1u);
	npurtGraphNode_t node = nullptr;
	size_t one = 1;
	ASSERT_EQ(npurtGraphGetNodes(out, &node, &one), npurtSuccess);
	EXPECT_EQ(node, deps[0]) << "the dependency named during the capture is the node";
	ASSERT_EQ(npurtGraphNodeGetType(node, &type), npurtSuccess);
	EXPECT_EQ(type, npurtGraphNodeTypeMemset);
	npurtGraphDestroy(out);
}

// CUDA's pattern for a node capture cannot make: add it to the graph being
// captured (npurtStreamGetCaptureInfo's), then make the stream's next work
// depend on it.
TEST_F(Graphs, NodesAddedToTheCapturedGraphJoinTheStreamsWork)
{
	npurtStream_t s = s_[0];
	ASSERT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
	npurtOpDesc first = addOp(buf_[0], buf_[1], buf_[2]);  // 1 + 2
	ASSERT_EQ(npurtLaunchOp(&first, s), npurtSuccess);
	npurtGraph_t g = nullptr;
	const npurtGraphNode_t *deps = nullptr;
	size_t n = 0;
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusNone;
	ASSERT_EQ(npurtStreamGetCaptureInfo(s, &st, nullptr, &g, &deps, &n), npurtSuccess);
	ASSERT_EQ(n, 1u);
	ASSERT_NE(g, nullptr);
	// The graph and its nodes are live handles during the capture.
	EXPECT_EQ(nodeCount(g), 1u);
	npurtGraphNodeType type = npurtGraphNodeTypeEmpty;
	ASSERT_EQ(npurtGraphNodeGetType(deps[0], &type), npurtSuccess);
	EXPECT_EQ(type, npurtGraphNodeTypeKernel);
	npurtOpDesc second = addOp(buf_[2], buf_[1], buf_[3]);  // 3 + 2
	npurtGraphNode_t added = nullptr;
	ASSERT_EQ(npurtGraphAddKernelNode(&added, g, deps, 1, &second), npurtSuccess);
	ASSERT_EQ(npurtStreamUpdateCaptureDependencies(s, &added, 1,
	                                               npurtStreamSetCaptureDependencies),
	          npurtSuccess);
	ASSERT_EQ(npurtStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, &n), npurtSuccess);
	ASSERT_EQ(n, 1u);
	EXPECT_EQ(deps[0], added);
	npurtOpDesc third = addOp(buf_[3], buf_[0], buf_[4]);  // 5 + 1
	ASSERT_EQ(npurtLaunchOp(&third, s), npurtSuccess);
	npurtGraph_t out = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s, &out), npurtSuccess);
	EXPECT_EQ(out, g) << "the graph handed out during the capture is the captured graph";
	ASSERT_EQ(nodeCount(out), 3u);
	size_t edges = 0;
	ASSERT_EQ(npurtGraphGetEdges(out, nullptr, nullptr, &edges), npurtSuccess);
	EXPECT_EQ(edges, 2u) << "a chain: captured, added, captured";
	fill(buf_[4], 0.0f);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, out, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_TRUE(holds(buf_[4], 6.0f));
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(out), npurtSuccess);
}

// A launch deferred behind its host node goes on before the launches queued
// after it: the host node sees its own launch's copy, not a later step.
// (The rest of a deferred launch used to queue behind the next launches:
// a host node between two copies into one buffer saw the second copy of
// the launch before it in 3 of 5 back-to-back launches.)
TEST_F(Graphs, BackToBackLaunchesWithAHostNodeKeepEachLaunchsOrder)
{
	npurtStream_t s = s_[0];
	struct Check {
		const float *seen;
		std::atomic<int> calls{0}, wrong{0};
	} check;
	check.seen = host_;
	auto fn = [](void *p) {
		auto *c = static_cast<Check *>(p);
		c->calls++;
		for (size_t i = 0; i < kN; i++)
			if (c->seen[i] != 1.0f) {
				c->wrong++;
				return;
			}
	};
	fill(buf_[2], 0.0f);
	ASSERT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(host_, buf_[0], kN * 4, npurtMemcpyDeviceToHost, s),
	          npurtSuccess);  // ones
	ASSERT_EQ(npurtLaunchHostFunc(s, fn, &check), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(host_, buf_[2], kN * 4, npurtMemcpyDeviceToHost, s),
	          npurtSuccess);  // zeros
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s, &g), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	const int launches = 20;
	for (int i = 0; i < launches; i++)
		ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_EQ(check.calls.load(), launches);
	EXPECT_EQ(check.wrong.load(), 0) << "host nodes that saw a later step's copy";
	EXPECT_TRUE(std::all_of(host_, host_ + kN, [](float v) { return v == 0.0f; }));
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
}

// A graph with memory nodes has one executable graph at a time (as CUDA's):
// a second one, of it or of a clone, would use the same blocks.
TEST_F(Graphs, OneExecutableGraphAtATimeForAGraphWithMemoryNodes)
{
	npurtStream_t s = s_[0];
	ASSERT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
	void *tmp = nullptr;
	ASSERT_EQ(npurtMallocAsync(&tmp, kN * 4, s), npurtSuccess);
	npurtOpDesc add = addOp(buf_[0], buf_[1], static_cast<float *>(tmp));
	ASSERT_EQ(npurtLaunchOp(&add, s), npurtSuccess);
	ASSERT_EQ(npurtMemcpyAsync(buf_[3], tmp, kN * 4, npurtMemcpyDeviceToDevice, s),
	          npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(tmp, s), npurtSuccess);
	npurtGraph_t g = nullptr, clone = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s, &g), npurtSuccess);
	ASSERT_EQ(npurtGraphClone(&clone, g), npurtSuccess);
	npurtGraphExec_t first = nullptr, second = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&first, g, 0), npurtSuccess);
	EXPECT_EQ(npurtGraphInstantiate(&second, g, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtGraphExecDestroy")) << lastMessage();
	EXPECT_EQ(second, nullptr);
	EXPECT_EQ(npurtGraphInstantiate(&second, clone, 0), npurtErrorInvalidValue)
	        << "a clone shares the graph's memory";
	npurtGetLastError();
	ASSERT_EQ(npurtGraphLaunch(first, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_TRUE(holds(buf_[3], 3.0f));
	ASSERT_EQ(npurtGraphExecDestroy(first), npurtSuccess);
	// The first gone, the clone's executable graph may be made.
	ASSERT_EQ(npurtGraphInstantiate(&second, clone, 0), npurtSuccess);
	fill(buf_[3], 0.0f);
	ASSERT_EQ(npurtGraphLaunch(second, s), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_TRUE(holds(buf_[3], 3.0f));
	EXPECT_EQ(npurtGraphExecDestroy(second), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(clone), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
}

TEST_F(Graphs, UpdateCaptureDependenciesRefusesBadArgumentsAndKeepsTheCapture)
{
	npurtStream_t s = s_[0];
	npurtGraph_t other = nullptr;
	npurtGraphNode_t foreign = nullptr;
	ASSERT_EQ(npurtGraphCreate(&other, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphAddEmptyNode(&foreign, other, nullptr, 0), npurtSuccess);
	EXPECT_EQ(npurtStreamUpdateCaptureDependencies(s, nullptr, 0,
	                                               npurtStreamAddCaptureDependencies),
	          npurtErrorIllegalState)
	        << "the stream is not capturing";
	EXPECT_TRUE(contains(lastMessage(), "not capturing")) << lastMessage();
	npurtGetLastError();

	npurtGraph_t g = nullptr;
	npurtGraphNode_t zeroed = nullptr;
	captureMemset(s, &g, &zeroed);
	if (HasFatalFailure())
		return;
	const npurtGraphNode_t *deps = nullptr;
	size_t n = 0;
	EXPECT_EQ(npurtStreamUpdateCaptureDependencies(s, &zeroed, 1, 2), npurtErrorInvalidValue)
	        << "unknown flags";
	EXPECT_EQ(npurtStreamUpdateCaptureDependencies(s, nullptr, 1,
	                                               npurtStreamAddCaptureDependencies),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamUpdateCaptureDependencies(s, &foreign, 1,
	                                               npurtStreamAddCaptureDependencies),
	          npurtErrorInvalidValue)
	        << "a node of another graph";
	EXPECT_TRUE(contains(lastMessage(), "not a node of the graph being captured"))
	        << lastMessage();
	// The capture's graph and nodes cannot go, nor be instantiated, yet.
	EXPECT_EQ(npurtGraphDestroy(g), npurtErrorIllegalState);
	EXPECT_TRUE(contains(lastMessage(), "npurtStreamEndCapture")) << lastMessage();
	EXPECT_EQ(npurtGraphDestroyNode(zeroed), npurtErrorIllegalState);
	npurtGraphExec_t exec = nullptr;
	EXPECT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtErrorIllegalState);
	EXPECT_EQ(exec, nullptr);
	npurtGetLastError();
	// Add: a second dependency, a duplicate ignored; Set with none: the
	// next work is a root.
	npurtGraphNode_t empty = nullptr;
	ASSERT_EQ(npurtGraphAddEmptyNode(&empty, g, nullptr, 0), npurtSuccess);
	npurtGraphNode_t both[] = {empty, zeroed};
	ASSERT_EQ(
	        npurtStreamUpdateCaptureDependencies(s, both, 2, npurtStreamAddCaptureDependencies),
	        npurtSuccess);
	ASSERT_EQ(npurtStreamGetCaptureInfo(s, nullptr, nullptr, nullptr, &deps, &n), npurtSuccess);
	ASSERT_EQ(n, 2u);
	EXPECT_EQ(deps[0], zeroed);
	EXPECT_EQ(deps[1], empty);
	ASSERT_EQ(npurtStreamUpdateCaptureDependencies(s, nullptr, 0,
	                                               npurtStreamSetCaptureDependencies),
	          npurtSuccess);
	ASSERT_EQ(npurtStreamGetCaptureInfo(s, nullptr, nullptr, nullptr, &deps, &n), npurtSuccess);
	EXPECT_EQ(n, 0u);
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusNone;
	ASSERT_EQ(npurtStreamIsCapturing(s, &st), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusActive) << "refused calls do not invalidate";
	npurtGraph_t out = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s, &out), npurtSuccess);
	EXPECT_EQ(nodeCount(out), 2u);
	EXPECT_EQ(npurtGraphDestroy(out), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(other), npurtSuccess);
}

TEST_F(Graphs, TheCapturedGraphsHandleDiesWithAFailedCapture)
{
	npurtStream_t s = s_[0];
	npurtGraph_t g = nullptr;
	npurtGraphNode_t node = nullptr;
	captureMemset(s, &g, &node);
	if (HasFatalFailure())
		return;
	// A synchronous call invalidates the capture.
	EXPECT_EQ(npurtStreamSynchronize(s), npurtErrorStreamCaptureUnsupported);
	EXPECT_EQ(npurtStreamUpdateCaptureDependencies(s, &node, 1,
	                                               npurtStreamAddCaptureDependencies),
	          npurtErrorStreamCaptureInvalidated);
	npurtGraph_t out = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s, &out), npurtErrorStreamCaptureInvalidated);
	EXPECT_EQ(out, nullptr);
	// No graph: its handle and its nodes' are refused, not followed.
	size_t count = 0;
	EXPECT_EQ(npurtGraphGetNodes(g, nullptr, &count), npurtErrorInvalidValue);
	npurtGraphNodeType type = npurtGraphNodeTypeEmpty;
	EXPECT_EQ(npurtGraphNodeGetType(node, &type), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphDestroy(g), npurtErrorInvalidValue);
	npurtGetLastError();
}

TEST_F(Graphs, ForbiddenCallsFailAndInvalidateTheCapture)
{
	struct Case {
		const char *what;
		std::function<npurtError_t()> call;
	};
	float *d = buf_[2];
	std::vector<char> pageable(kN * 4);
	npurtStream_t s = s_[0];
	ASSERT_EQ(npurtMemset(buf_[5], 0, kN * 4), npurtSuccess);
	std::vector<Case> cases = {
	        {"synchronize the stream", [&] { return npurtStreamSynchronize(s); }},
	        {"query the stream", [&] { return npurtStreamQuery(s); }},
	        {"npurtMalloc",
	         [&] {
		         void *p = nullptr;
		         return npurtMalloc(&p, 4096);
	         }},
	        {"npurtDeviceSynchronize", [&] { return npurtDeviceSynchronize(); }},
	        {"a synchronous copy elsewhere",
	         [&] { return npurtMemcpy(buf_[5], buf_[0], kN * 4, npurtMemcpyDeviceToDevice); }},
	        {"a pageable copy",
	         [&] {
		         return npurtMemcpyAsync(d, pageable.data(), kN * 4,
		                                 npurtMemcpyHostToDevice, s);
	         }},
	        {"a stream callback (CUDA's cudaStreamAddCallback is not captured)",
	         [&] {
		         return npurtStreamAddCallback(
		                 s, [](npurtStream_t, npurtError_t, void *) {}, nullptr, 0);
	         }},
	};
	for (const Case &c : cases) {
		ASSERT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess)
		        << c.what;
		ASSERT_EQ(npurtMemsetAsync(d, 0, kN * 4, s), npurtSuccess);
		EXPECT_EQ(c.call(), npurtErrorStreamCaptureUnsupported) << c.what;
		EXPECT_TRUE(contains(lastMessage(), "captur")) << lastMessage();
		npurtStreamCaptureStatus st = npurtStreamCaptureStatusNone;
		ASSERT_EQ(npurtStreamIsCapturing(s, &st), npurtSuccess);
		EXPECT_EQ(st, npurtStreamCaptureStatusInvalidated) << c.what;
		// Later captured calls fail too.
		EXPECT_EQ(npurtMemsetAsync(d, 0, kN * 4, s), npurtErrorStreamCaptureInvalidated)
		        << c.what;
		npurtGraph_t g = reinterpret_cast<npurtGraph_t>(1);
		EXPECT_EQ(npurtStreamEndCapture(s, &g), npurtErrorStreamCaptureInvalidated)
		        << c.what;
		EXPECT_EQ(g, nullptr);
		npurtGetLastError();
		// The stream works normally after.
		ASSERT_EQ(npurtMemsetAsync(d, 0, kN * 4, s), npurtSuccess) << c.what;
		ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << c.what;
	}
	EXPECT_TRUE(holds(buf_[5], 0.0f)) << "the refused synchronous copy did nothing";
}

TEST_F(Graphs, RelaxedAndThreadLocalModesAllowWhatTheyShould)
{
	void *p = nullptr;
	// Relaxed: npurtMalloc is fine and the capture goes on.
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeRelaxed), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&p, 4096), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(p), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess) << lastMessage();
	npurtGraphDestroy(g);

	// Another thread's global capture forbids this thread's unsafe calls
	// (its mode is global), unless it switches itself to relaxed; a
	// thread-local capture does not.
	for (npurtStreamCaptureMode mode :
	     {npurtStreamCaptureModeGlobal, npurtStreamCaptureModeThreadLocal}) {
		std::atomic<int> phase{0};
		npurtError_t fromOther = npurtSuccess, relaxedOther = npurtErrorUnknown;
		std::thread other([&] {
			npurtSetDevice(0);
			while (phase.load() != 1)
				std::this_thread::yield();
			void *q = nullptr;
			fromOther = npurtMalloc(&q, 4096);
			if (!fromOther)
				npurtFree(q);
			npurtGetLastError();
			npurtStreamCaptureMode m = npurtStreamCaptureModeRelaxed;
			npurtThreadExchangeStreamCaptureMode(&m);
			EXPECT_EQ(m, npurtStreamCaptureModeGlobal);
			relaxedOther = npurtMalloc(&q, 4096);
			if (!relaxedOther)
				npurtFree(q);
			npurtThreadExchangeStreamCaptureMode(&m);
			phase = 2;
		});
		ASSERT_EQ(npurtStreamBeginCapture(s_[0], mode), npurtSuccess);
		phase = 1;
		other.join();
		npurtGraph_t out = nullptr;
		npurtError_t end = npurtStreamEndCapture(s_[0], &out);
		if (mode == npurtStreamCaptureModeGlobal) {
			EXPECT_EQ(fromOther, npurtErrorStreamCaptureUnsupported);
			EXPECT_EQ(end, npurtErrorStreamCaptureInvalidated);
		} else {
			EXPECT_EQ(fromOther, npurtSuccess);
			EXPECT_EQ(end, npurtSuccess);
		}
		EXPECT_EQ(relaxedOther, npurtSuccess) << "a relaxed thread is never forbidden";
		if (out)
			npurtGraphDestroy(out);
		npurtGetLastError();
	}
	npurtStreamCaptureMode bad = static_cast<npurtStreamCaptureMode>(7);
	EXPECT_EQ(npurtThreadExchangeStreamCaptureMode(&bad), npurtErrorInvalidValue);
	EXPECT_EQ(npurtThreadExchangeStreamCaptureMode(nullptr), npurtErrorInvalidValue);
	npurtGetLastError();
}

TEST_F(Graphs, CaptureErrorsHaveTheirOwnCodes)
{
	npurtGraph_t g = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s_[0], &g), npurtErrorIllegalState) << "not capturing";
	EXPECT_EQ(npurtStreamEndCapture(s_[0], nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamBeginCapture(nullptr, npurtStreamCaptureModeGlobal),
	          npurtErrorStreamCaptureUnsupported)
	        << "the legacy default stream cannot capture";
	EXPECT_EQ(npurtStreamBeginCapture(s_[0], static_cast<npurtStreamCaptureMode>(3)),
	          npurtErrorInvalidValue);
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	EXPECT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal),
	          npurtErrorIllegalState);

	// A captured event outside the capture.
	npurtEvent_t e = nullptr, outside = nullptr;
	ASSERT_EQ(npurtEventCreate(&e), npurtSuccess);
	ASSERT_EQ(npurtEventCreate(&outside), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(outside, s_[2]), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, s_[0]), npurtSuccess);
	EXPECT_EQ(npurtEventQuery(e), npurtErrorCapturedEvent);
	EXPECT_EQ(npurtEventSynchronize(e), npurtErrorCapturedEvent);
	float ms = 0;
	EXPECT_EQ(npurtEventElapsedTime(&ms, outside, e), npurtErrorCapturedEvent);
	// A forked stream cannot end the capture; the wrong thread cannot either.
	ASSERT_EQ(npurtStreamWaitEvent(s_[1], e, 0), npurtSuccess);
	std::thread t([&] {
		npurtGraph_t tg = nullptr;
		EXPECT_EQ(npurtStreamEndCapture(s_[0], &tg), npurtErrorStreamCaptureWrongThread);
	});
	t.join();
	EXPECT_EQ(npurtStreamEndCapture(s_[1], &g), npurtErrorStreamCaptureUnmatched);
	EXPECT_EQ(npurtStreamEndCapture(s_[0], &g), npurtErrorStreamCaptureInvalidated);
	EXPECT_EQ(g, nullptr);

	// Unjoined work.
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[1], e, 0), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, s_[1]), npurtSuccess);
	EXPECT_EQ(npurtStreamEndCapture(s_[0], &g), npurtErrorStreamCaptureUnjoined);
	EXPECT_TRUE(contains(lastMessage(), "graph node 1")) << lastMessage();
	EXPECT_EQ(g, nullptr);
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusActive;
	ASSERT_EQ(npurtStreamIsCapturing(s_[1], &st), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusNone);

	// A wait for an event recorded outside the capture.
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	EXPECT_EQ(npurtStreamWaitEvent(s_[0], outside, 0), npurtErrorStreamCaptureIsolation);
	EXPECT_EQ(npurtStreamEndCapture(s_[0], &g), npurtErrorStreamCaptureInvalidated);

	// Two captures cannot merge.
	npurtEvent_t e2 = nullptr;
	ASSERT_EQ(npurtEventCreate(&e2), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeRelaxed), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(s_[1], npurtStreamCaptureModeRelaxed), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e2, s_[0]), npurtSuccess);
	EXPECT_EQ(npurtStreamWaitEvent(s_[1], e2, 0), npurtErrorStreamCaptureMerge);
	EXPECT_EQ(npurtStreamEndCapture(s_[1], &g), npurtErrorStreamCaptureInvalidated);
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess);
	npurtGraphDestroy(g);
	// The event of an ended capture.
	EXPECT_EQ(npurtStreamWaitEvent(s_[2], e2, 0), npurtErrorCapturedEvent);
	ASSERT_EQ(npurtEventRecord(e2, s_[2]), npurtSuccess);
	EXPECT_EQ(npurtEventSynchronize(e2), npurtSuccess) << "a record outside ends it";

	// The legacy default stream while a blocking stream captures.
	npurtStream_t blocking = nullptr;
	ASSERT_EQ(npurtStreamCreate(&blocking), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(blocking, npurtStreamCaptureModeRelaxed), npurtSuccess);
	EXPECT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, nullptr), npurtErrorStreamCaptureImplicit);
	EXPECT_EQ(npurtStreamEndCapture(blocking, &g), npurtErrorStreamCaptureInvalidated);
	EXPECT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, nullptr), npurtSuccess);
	EXPECT_EQ(npurtStreamDestroy(blocking), npurtSuccess);
	npurtGetLastError();
	for (auto ev : {e, outside, e2})
		npurtEventDestroy(ev);
}

TEST_F(Graphs, DestroyingAStreamOfTheCaptureInvalidatesIt)
{
	npurtStream_t extra = nullptr;
	npurtEvent_t e = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&extra, npurtStreamNonBlocking), npurtSuccess);
	ASSERT_EQ(npurtEventCreate(&e), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(extra, e, 0), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(extra), npurtSuccess);
	npurtGraph_t g = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s_[0], &g), npurtErrorStreamCaptureInvalidated);
	EXPECT_TRUE(contains(lastMessage(), "destroyed")) << lastMessage();
	// The origin stream itself: the capture goes with it.
	npurtStream_t origin = nullptr;
	ASSERT_EQ(npurtStreamCreateWithFlags(&origin, npurtStreamNonBlocking), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(origin, npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, origin), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(origin), npurtSuccess);
	void *p = nullptr;
	EXPECT_EQ(npurtMalloc(&p, 4096), npurtSuccess) << "no capture is left to forbid it";
	npurtFree(p);
	// With a stream forked in, and the capture's graph handed out: the
	// capture ends for the forked stream too (it works as before), and the
	// graph's handle is refused.
	ASSERT_EQ(npurtStreamCreateWithFlags(&origin, npurtStreamNonBlocking), npurtSuccess);
	ASSERT_EQ(npurtStreamCreateWithFlags(&extra, npurtStreamNonBlocking), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(origin, npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(e, origin), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(extra, e, 0), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(buf_[2], 0, kN * 4, extra), npurtSuccess);
	ASSERT_EQ(npurtStreamGetCaptureInfo(origin, nullptr, nullptr, &g, nullptr, nullptr),
	          npurtSuccess);
	ASSERT_NE(g, nullptr);
	ASSERT_EQ(npurtStreamDestroy(origin), npurtSuccess);
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusActive;
	ASSERT_EQ(npurtStreamIsCapturing(extra, &st), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusNone);
	fill(buf_[4], 0.0f);
	npurtOpDesc add = addOp(buf_[0], buf_[1], buf_[4]);
	ASSERT_EQ(npurtLaunchOp(&add, extra), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(extra), npurtSuccess) << lastMessage();
	EXPECT_TRUE(holds(buf_[4], 3.0f));
	size_t count = 0;
	EXPECT_EQ(npurtGraphGetNodes(g, nullptr, &count), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphDestroy(g), npurtErrorInvalidValue);
	npurtStreamDestroy(extra);
	npurtEventDestroy(e);
	npurtGetLastError();
}

void countHost(void *p)
{
	++*static_cast<int *>(p);
}

TEST_F(Graphs, ExplicitGraphBuiltNodeByNode)
{
	float *ones = buf_[0], *x = buf_[2], *y = buf_[3];
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	float *src = nullptr;  // read by every launch: apart from holds()'s buffer
	ASSERT_EQ(npurtMallocHost(reinterpret_cast<void **>(&src), kN * 4), npurtSuccess);
	for (size_t i = 0; i < kN; i++)
		src[i] = 5.0f;
	npurtGraphNode_t copy = nullptr, set = nullptr, op = nullptr, host = nullptr, rec = nullptr;
	ASSERT_EQ(npurtGraphAddMemcpyNode1D(&copy, g, nullptr, 0, x, src, kN * 4,
	                                    npurtMemcpyHostToDevice),
	          npurtSuccess)
	        << lastMessage();
	npurtMemsetParams mp{};
	mp.dst = y;
	mp.value = 0;
	mp.elementSize = 4;
	mp.width = kN;
	mp.height = 1;
	ASSERT_EQ(npurtGraphAddMemsetNode(&set, g, nullptr, 0, &mp), npurtSuccess) << lastMessage();
	npurtOpDesc d = addOp(x, ones, y);
	npurtGraphNode_t both[2] = {copy, set};
	ASSERT_EQ(npurtGraphAddKernelNode(&op, g, both, 2, &d), npurtSuccess) << lastMessage();
	int runs = 0;
	npurtHostNodeParams hp{countHost, &runs};
	ASSERT_EQ(npurtGraphAddHostNode(&host, g, &op, 1, &hp), npurtSuccess);
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreate(&ev), npurtSuccess);
	ASSERT_EQ(npurtGraphAddEventRecordNode(&rec, g, &host, 1, ev), npurtSuccess);

	// Structure.
	EXPECT_EQ(nodeCount(g), 5u);
	npurtGraphNodeType type{};
	ASSERT_EQ(npurtGraphNodeGetType(op, &type), npurtSuccess);
	EXPECT_EQ(type, npurtGraphNodeTypeKernel);
	size_t n = 0;
	ASSERT_EQ(npurtGraphNodeGetDependencies(op, nullptr, &n), npurtSuccess);
	EXPECT_EQ(n, 2u);
	npurtGraphNode_t deps[4] = {};
	n = 4;
	ASSERT_EQ(npurtGraphNodeGetDependencies(op, deps, &n), npurtSuccess);
	EXPECT_EQ(n, 2u);
	EXPECT_EQ(deps[2], nullptr) << "the rest of a longer array is NULL";
	ASSERT_EQ(npurtGraphNodeGetDependentNodes(op, deps, &n), npurtSuccess);
	EXPECT_EQ(n, 1u);
	EXPECT_EQ(deps[0], host);
	npurtOpDesc back{};
	ASSERT_EQ(npurtGraphKernelNodeGetParams(op, &back), npurtSuccess);
	EXPECT_EQ(back.out, y);
	EXPECT_EQ(back.n, kN);
	npurtHostNodeParams hb{};
	ASSERT_EQ(npurtGraphHostNodeGetParams(host, &hb), npurtSuccess);
	EXPECT_EQ(hb.userData, &runs);
	npurtEvent_t evBack = nullptr;
	ASSERT_EQ(npurtGraphEventRecordNodeGetEvent(rec, &evBack), npurtSuccess);
	EXPECT_EQ(evBack, ev);
	EXPECT_EQ(npurtGraphKernelNodeGetParams(host, &back), npurtErrorInvalidValue)
	        << "not an op node";
	// A cycle is refused and leaves the edges as they were.
	size_t edges = 0;
	ASSERT_EQ(npurtGraphGetEdges(g, nullptr, nullptr, &edges), npurtSuccess);
	EXPECT_EQ(npurtGraphAddDependencies(g, &rec, &copy, 1), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "cycle")) << lastMessage();
	size_t after = 0;
	ASSERT_EQ(npurtGraphGetEdges(g, nullptr, nullptr, &after), npurtSuccess);
	EXPECT_EQ(after, edges);
	std::vector<npurtGraphNode_t> from(edges), to(edges);
	ASSERT_EQ(npurtGraphGetEdges(g, from.data(), to.data(), &after), npurtSuccess);
	EXPECT_EQ(to[0], op);

	// Dot output.
	const char *path = "/tmp/npurt_test_graph.dot";
	ASSERT_EQ(npurtGraphDebugDotPrint(g, path, npurtGraphDebugDotFlagsVerbose), npurtSuccess);
	std::ifstream f(path);
	std::stringstream text;
	text << f.rdbuf();
	EXPECT_TRUE(contains(text.str(), "digraph")) << text.str();
	EXPECT_TRUE(contains(text.str(), "op add f32 256")) << text.str();
	EXPECT_TRUE(contains(text.str(), "n3 -> n4")) << text.str();
	EXPECT_EQ(npurtGraphDebugDotPrint(g, "/nonexistent/dir/x.dot", 0),
	          npurtErrorOperatingSystem);

	// A clone launches alike.
	npurtGraph_t c = nullptr;
	ASSERT_EQ(npurtGraphClone(&c, g), npurtSuccess);
	npurtGraphNode_t opInClone = nullptr;
	ASSERT_EQ(npurtGraphNodeFindInClone(&opInClone, op, c), npurtSuccess);
	EXPECT_NE(opInClone, op);
	ASSERT_EQ(npurtGraphNodeGetType(opInClone, &type), npurtSuccess);
	EXPECT_EQ(type, npurtGraphNodeTypeKernel);
	EXPECT_EQ(npurtGraphNodeFindInClone(&opInClone, op, g), npurtErrorInvalidValue);

	npurtGraphExec_t exec = nullptr, execClone = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphInstantiateWithFlags(&execClone, c,
	                                         npurtGraphInstantiateFlagAutoFreeOnLaunch),
	          npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtEventSynchronize(ev), npurtSuccess) << lastMessage();
	EXPECT_EQ(runs, 1) << "the record node after the host node";
	EXPECT_TRUE(holds(y, 6.0f));
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(execClone, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_EQ(runs, 2);
	EXPECT_TRUE(holds(y, 6.0f));

	// Node edits in the graph change later instantiations only.
	mp.value = 0x40000000;  // 2.0f
	ASSERT_EQ(npurtGraphMemsetNodeSetParams(set, &mp), npurtSuccess);
	d = addOp(ones, ones, y);
	ASSERT_EQ(npurtGraphKernelNodeSetParams(op, &d), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 6.0f)) << "the executable graph keeps its parameters";

	// Removing nodes and edges.
	ASSERT_EQ(npurtGraphRemoveDependencies(g, &host, &rec, 1), npurtSuccess);
	EXPECT_EQ(npurtGraphRemoveDependencies(g, &host, &rec, 1), npurtErrorInvalidValue);
	ASSERT_EQ(npurtGraphDestroyNode(rec), npurtSuccess);
	EXPECT_EQ(nodeCount(g), 4u);
	EXPECT_EQ(npurtGraphNodeGetType(rec, &type), npurtErrorInvalidValue) << "destroyed node";
	npurtGetLastError();
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphExecDestroy(execClone), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(c), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
	npurtEventDestroy(ev);
	npurtFreeHost(src);
	npurtGetLastError();
}

TEST_F(Graphs, BadNodesAreRefusedAndLeaveTheGraphAsItWas)
{
	npurtGraph_t g = nullptr, other = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphCreate(&other, 0), npurtSuccess);
	EXPECT_EQ(npurtGraphCreate(&g, 1), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphCreate(nullptr, 0), npurtErrorInvalidValue);
	npurtGraphNode_t n = nullptr, foreign = nullptr;
	ASSERT_EQ(npurtGraphAddEmptyNode(&foreign, other, nullptr, 0), npurtSuccess);
	// An operand that is not device memory.
	std::vector<float> pageable(kN);
	npurtOpDesc d = addOp(pageable.data(), buf_[0], buf_[2]);
	EXPECT_EQ(npurtGraphAddKernelNode(&n, g, nullptr, 0, &d), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "operand a")) << lastMessage();
	d = addOp(buf_[0], buf_[1], buf_[2], kN * 2);
	EXPECT_EQ(npurtGraphAddKernelNode(&n, g, nullptr, 0, &d), npurtErrorInvalidValue)
	        << "overruns its allocation";
	d = addOp(buf_[0], buf_[1], buf_[2]);
	EXPECT_EQ(npurtGraphAddKernelNode(&n, g, &foreign, 1, &d), npurtErrorInvalidValue)
	        << "a dependency of another graph";
	EXPECT_EQ(npurtGraphAddKernelNode(&n, g, nullptr, 1, &d), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphAddKernelNode(nullptr, g, nullptr, 0, &d), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphAddKernelNode(&n, g, nullptr, 0, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphAddMemcpyNode1D(&n, g, nullptr, 0, buf_[2], pageable.data(), kN * 4,
	                                    npurtMemcpyHostToDevice),
	          npurtErrorStreamCaptureUnsupported)
	        << "pageable memory cannot be replayed";
	EXPECT_EQ(npurtGraphAddMemcpyNode1D(&n, g, nullptr, 0, buf_[2], buf_[0], 0,
	                                    npurtMemcpyDeviceToDevice),
	          npurtErrorInvalidValue);
	npurtMemsetParams mp{};
	mp.dst = buf_[2];
	mp.elementSize = 3;
	mp.width = 4;
	mp.height = 1;
	EXPECT_EQ(npurtGraphAddMemsetNode(&n, g, nullptr, 0, &mp), npurtErrorInvalidValue);
	mp.elementSize = 4;
	mp.height = 2;
	mp.pitch = 8;
	EXPECT_EQ(npurtGraphAddMemsetNode(&n, g, nullptr, 0, &mp), npurtErrorInvalidValue)
	        << "pitch below a row";
	mp.width = kN * 2;
	mp.height = 1;
	EXPECT_EQ(npurtGraphAddMemsetNode(&n, g, nullptr, 0, &mp), npurtErrorInvalidValue)
	        << "overruns";
	npurtHostNodeParams hp{nullptr, nullptr};
	EXPECT_EQ(npurtGraphAddHostNode(&n, g, nullptr, 0, &hp), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphAddEventRecordNode(&n, g, nullptr, 0, nullptr),
	          npurtErrorInvalidHandle);
	EXPECT_EQ(nodeCount(g), 0u) << "every refused node left nothing behind";

	npurtGraphExec_t exec = nullptr;
	EXPECT_EQ(npurtGraphInstantiate(&exec, g, npurtGraphInstantiateFlagDeviceLaunch),
	          npurtErrorNotSupported);
	EXPECT_EQ(npurtGraphInstantiate(&exec, g, 1ull << 40), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphLaunch(nullptr, s_[0]), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphLaunch(reinterpret_cast<npurtGraphExec_t>(g), s_[0]),
	          npurtErrorInvalidValue);
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess) << "an empty graph is fine";
	EXPECT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	EXPECT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(other), npurtSuccess);
	EXPECT_EQ(npurtGraphAddEmptyNode(&n, other, nullptr, 0), npurtErrorInvalidValue)
	        << "a destroyed graph";
	EXPECT_EQ(npurtGraphNodeGetType(foreign, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
	npurtGetLastError();
}

// Captures memset(value) then y = x + y into a graph.
npurtGraph_t captureSetAndAdd(npurtStream_t s, float *x, float *y, unsigned value)
{
	EXPECT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
	EXPECT_EQ(npurtMemsetD32Async(x, value, kN, s), npurtSuccess);
	npurtOpDesc d = addOp(x, y, y);
	EXPECT_EQ(npurtLaunchOp(&d, s), npurtSuccess);
	npurtGraph_t g = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s, &g), npurtSuccess);
	return g;
}

// A memset node's parameters: kN floats of x set to the float of bits.
npurtMemsetParams setFloats(float *x, unsigned bits)
{
	npurtMemsetParams mp{};
	mp.dst = x;
	mp.value = bits;
	mp.elementSize = 4;
	mp.width = kN;
	mp.height = 1;
	return mp;
}

TEST_F(Graphs, ExecUpdateBetweenLaunches)
{
	float *x = buf_[2], *y = buf_[3];
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	npurtGraph_t g1 = captureSetAndAdd(s_[0], x, y, 0x3f800000);  // 1.0f
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g1, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 1.0f));
	npurtGraph_t g2 = captureSetAndAdd(s_[0], x, y, 0x40400000);  // 3.0f
	npurtGraphExecUpdateResultInfo info{};
	ASSERT_EQ(npurtGraphExecUpdate(exec, g2, &info), npurtSuccess) << lastMessage();
	EXPECT_EQ(info.result, npurtGraphExecUpdateSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 4.0f)) << "the update's value was used";

	// Per-node: the node handles of the graph the exec was updated from.
	npurtGraphNode_t nodes[2] = {};
	size_t n = 2;
	ASSERT_EQ(npurtGraphGetNodes(g2, nodes, &n), npurtSuccess);
	npurtMemsetParams mp = setFloats(x, 0x41000000);  // 8.0f
	ASSERT_EQ(npurtGraphExecMemsetNodeSetParams(exec, nodes[0], &mp), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 12.0f));
	npurtOpDesc d = addOp(x, x, y);
	ASSERT_EQ(npurtGraphExecKernelNodeSetParams(exec, nodes[1], &d), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 16.0f));
	EXPECT_EQ(npurtGraphExecMemsetNodeSetParams(exec, nodes[1], &mp), npurtErrorInvalidValue)
	        << "the node is an op";
	d.n = kN * 4;
	EXPECT_EQ(npurtGraphExecKernelNodeSetParams(exec, nodes[1], &d), npurtErrorInvalidValue);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 16.0f)) << "a refused update changed nothing";

	// Another topology cannot update.
	npurtGraph_t g3 = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g3, 0), npurtSuccess);
	npurtGraphNode_t e = nullptr;
	ASSERT_EQ(npurtGraphAddEmptyNode(&e, g3, nullptr, 0), npurtSuccess);
	EXPECT_EQ(npurtGraphExecUpdate(exec, g3, &info), npurtErrorGraphExecUpdateFailure);
	EXPECT_EQ(info.result, npurtGraphExecUpdateErrorTopologyChanged);
	ASSERT_EQ(npurtGraphAddEmptyNode(&e, g3, nullptr, 0), npurtSuccess);
	EXPECT_EQ(npurtGraphExecUpdate(exec, g3, &info), npurtErrorGraphExecUpdateFailure);
	EXPECT_EQ(info.result, npurtGraphExecUpdateErrorNodeTypeChanged);
	EXPECT_EQ(npurtGraphExecUpdate(exec, g3, nullptr), npurtErrorInvalidValue);
	npurtGetLastError();
	for (npurtGraph_t g : {g1, g2, g3})
		EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
	// The exec outlives its graphs.
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 16.0f)) << "y = x + x with x set to 8 by the updated memset";
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
}

// npurtGraphNodeSetEnabled: a disabled node runs as an empty node, keeps
// (and takes) its parameters, and comes back when enabled.
TEST_F(Graphs, DisabledNodesRunAsEmptyNodes)
{
	float *x = buf_[2], *y = buf_[3];
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	npurtGraph_t g = captureSetAndAdd(s_[0], x, y, 0x3f800000);  // x = 1; y += x
	npurtGraphNode_t nodes[2] = {};
	size_t n = 2;
	ASSERT_EQ(npurtGraphGetNodes(g, nodes, &n), npurtSuccess);
	npurtGraphNode_t set = nodes[0], add = nodes[1];
	npurtGraphNode_t empty = nullptr;
	ASSERT_EQ(npurtGraphAddEmptyNode(&empty, g, &add, 1), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	unsigned on = 7;
	ASSERT_EQ(npurtGraphNodeGetEnabled(exec, add, &on), npurtSuccess);
	EXPECT_EQ(on, 1u) << "nodes start enabled";

	ASSERT_EQ(npurtGraphNodeSetEnabled(exec, add, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphNodeGetEnabled(exec, add, &on), npurtSuccess);
	EXPECT_EQ(on, 0u);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(x, 1.0f)) << "the memset ran";
	EXPECT_TRUE(holds(y, 0.0f)) << "the disabled op did not";

	// The other way round; x set outside the graph stays.
	ASSERT_EQ(npurtGraphNodeSetEnabled(exec, set, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphNodeSetEnabled(exec, add, 5), npurtSuccess);  // any non-zero
	fill(x, 5.0f);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 5.0f));

	// Parameters set while disabled are used once enabled.
	npurtMemsetParams mp = setFloats(x, 0x40000000);  // 2.0f
	ASSERT_EQ(npurtGraphExecMemsetNodeSetParams(exec, set, &mp), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 10.0f)) << "still disabled: x is 5";
	ASSERT_EQ(npurtGraphNodeSetEnabled(exec, set, 1), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 12.0f));

	// Refused: other node types, nodes of other graphs, no result pointer,
	// a destroyed exec; nothing changes.
	EXPECT_EQ(npurtGraphNodeSetEnabled(exec, empty, 0), npurtErrorInvalidValue);
	EXPECT_NE(lastMessage().find("not a kernel, memcpy or memset node"), std::string::npos)
	        << lastMessage();
	EXPECT_EQ(npurtGraphNodeGetEnabled(exec, empty, &on), npurtErrorInvalidValue);
	npurtGraph_t other = captureSetAndAdd(s_[0], x, y, 0);
	npurtGraphNode_t foreign[2] = {};
	n = 2;
	ASSERT_EQ(npurtGraphGetNodes(other, foreign, &n), npurtSuccess);
	EXPECT_EQ(npurtGraphNodeSetEnabled(exec, foreign[1], 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphNodeGetEnabled(exec, add, nullptr), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphNodeSetEnabled(nullptr, add, 0), npurtErrorInvalidValue);
	npurtGetLastError();
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 14.0f)) << "both nodes still enabled";
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	EXPECT_EQ(npurtGraphNodeSetEnabled(exec, add, 0), npurtErrorInvalidValue);
	npurtGetLastError();
	EXPECT_EQ(npurtGraphDestroy(other), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
}

TEST_F(Graphs, GraphMemoryKeepsItsAddressAcrossLaunches)
{
	float *out = buf_[3];
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	float *tmp = nullptr;
	ASSERT_EQ(npurtMallocAsync(reinterpret_cast<void **>(&tmp), kN * 4, s_[0]), npurtSuccess)
	        << lastMessage();
	ASSERT_NE(tmp, nullptr);
	ASSERT_EQ(npurtMemsetD32Async(tmp, 0x40a00000, kN, s_[0]), npurtSuccess);  // 5.0f
	npurtOpDesc d = addOp(tmp, buf_[0], out);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtFreeAsync(buf_[4], s_[0]), npurtErrorInvalidValue)
	        << "a capture frees only its own memory";
	npurtGraph_t g = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s_[0], &g), npurtErrorStreamCaptureInvalidated);
	npurtGetLastError();

	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtMallocAsync(reinterpret_cast<void **>(&tmp), kN * 4, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtMemsetD32Async(tmp, 0x40a00000, kN, s_[0]), npurtSuccess);
	d = addOp(tmp, buf_[0], out);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtFreeAsync(tmp, s_[0]), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess) << lastMessage();
	npurtGraphNode_t nodes[4] = {};
	size_t n = 4;
	ASSERT_EQ(npurtGraphGetNodes(g, nodes, &n), npurtSuccess);
	ASSERT_EQ(n, 4u);
	npurtGraphNodeType t0{}, t3{};
	npurtGraphNodeGetType(nodes[0], &t0);
	npurtGraphNodeGetType(nodes[3], &t3);
	EXPECT_EQ(t0, npurtGraphNodeTypeMemAlloc);
	EXPECT_EQ(t3, npurtGraphNodeTypeMemFree);
	npurtMemAllocNodeParams ap{};
	ASSERT_EQ(npurtGraphMemAllocNodeGetParams(nodes[0], &ap), npurtSuccess);
	EXPECT_EQ(ap.dptr, tmp);
	EXPECT_EQ(ap.bytesize, kN * 4);
	void *freed = nullptr;
	ASSERT_EQ(npurtGraphMemFreeNodeGetParams(nodes[3], &freed), npurtSuccess);
	EXPECT_EQ(freed, tmp);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess) << "the exec keeps the memory";
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(npurtMemset(out, 0, kN * 4), npurtSuccess);
		ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
		EXPECT_TRUE(holds(out, 6.0f)) << i;
	}
	// A free outside the graph ends nothing the graph needs.
	EXPECT_EQ(npurtFree(tmp), npurtSuccess);
	ASSERT_EQ(npurtMemset(out, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(out, 6.0f));
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);

	// Explicit alloc and free nodes.
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	npurtMemAllocNodeParams p{};
	p.poolProps.allocType = npurtMemAllocationTypePinned;
	p.poolProps.location.type = npurtMemLocationTypeDevice;
	p.poolProps.location.id = 0;
	p.bytesize = 1 << 20;
	npurtGraphNode_t a = nullptr, f = nullptr;
	ASSERT_EQ(npurtGraphAddMemAllocNode(&a, g, nullptr, 0, &p), npurtSuccess) << lastMessage();
	EXPECT_NE(p.dptr, nullptr);
	ASSERT_EQ(npurtGraphAddMemFreeNode(&f, g, &a, 1, p.dptr), npurtSuccess);
	EXPECT_EQ(npurtGraphAddMemFreeNode(&f, g, &a, 1, buf_[2]), npurtErrorInvalidValue);
	npurtMemAllocNodeParams bad = p;
	bad.poolProps.location.id = 7;
	EXPECT_EQ(npurtGraphAddMemAllocNode(&a, g, nullptr, 0, &bad), npurtErrorInvalidValue);
	bad = p;
	bad.bytesize = 0;
	EXPECT_EQ(npurtGraphAddMemAllocNode(&a, g, nullptr, 0, &bad), npurtErrorInvalidValue);
	bad = p;
	bad.bytesize = size_t{1} << 50;
	EXPECT_NE(npurtGraphAddMemAllocNode(&a, g, nullptr, 0, &bad), npurtSuccess)
	        << "more than the device has";
	EXPECT_EQ(nodeCount(g), 2u);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
	npurtGetLastError();
}

TEST_F(Graphs, AFaultInAReplayedGraphNamesTheNode)
{
	if (vmknobs::debugfsDir(0).empty())
		GTEST_SKIP() << "needs root and debugfs to inject a fault";
	float *x = buf_[2];
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtMemsetAsync(x, 0, kN * 4, s_[0]), npurtSuccess);
	npurtOpDesc d = addOp(x, buf_[0], x);
	ASSERT_EQ(npurtSetCallSite("test_graph.cpp", 4242, "replayed_op"), npurtSuccess);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	// The next job faults: the graph's one job.
	ASSERT_TRUE(vmknobs::writeKnob(0, "inject_fault", 1));
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	npurtError_t err = npurtStreamSynchronize(s_[0]);
	std::string msg = lastMessage();
	vmknobs::writeKnob(0, "inject_fault", 0);
	EXPECT_EQ(err, npurtErrorDeviceFault) << msg;
	std::printf("the report: %s\n", msg.c_str());
	EXPECT_TRUE(contains(msg, "of a launched graph, made by npurt")) << msg;
	EXPECT_TRUE(contains(msg, "npurtLaunchOp") || contains(msg, "npurtMemsetAsync")) << msg;
	npurtGetLastError();
	ASSERT_EQ(npurtStreamRecover(s_[0]), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess) << "runs again after recovery";
	EXPECT_TRUE(holds(x, 1.0f));
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
}

TEST_F(Graphs, LaunchesOfOneExecRunInOrderAcrossStreams)
{
	float *y = buf_[3];
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	npurtOpDesc d = addOp(y, buf_[0], y);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s_[1], Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[2]), npurtSuccess);
	ASSERT_TRUE(gate.waitReached(20000));
	EXPECT_EQ(npurtStreamQuery(s_[2]), npurtErrorNotReady)
	        << "the second launch waits for the first, held by the gate";
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(s_[2]), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 2.0f));
	EXPECT_EQ(npurtGraphExecDestroy(exec), npurtSuccess);
	npurtGraphDestroy(g);
}

TEST_F(Graphs, HostNodesAndLaunchesBehindHostFunctions)
{
	float *y = buf_[3];
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	int runs = 0;
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	npurtOpDesc d = addOp(y, buf_[0], y);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtLaunchHostFunc(s_[0], countHost, &runs), npurtSuccess);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess);
	EXPECT_EQ(runs, 0) << "captured, not run";
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s_[0], Gate::hostFn, &gate), npurtSuccess);
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	ASSERT_TRUE(gate.waitReached(20000));
	EXPECT_EQ(runs, 0);
	gate.open();
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess) << lastMessage();
	EXPECT_EQ(runs, 5);
	EXPECT_TRUE(holds(y, 10.0f));
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
}

TEST_F(Graphs, RecordsOfADeferredLaunchArePendingAtOnce)
{
	float *y = buf_[3];
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	npurtOpDesc d = addOp(buf_[0], buf_[1], y);
	npurtGraphNode_t op = nullptr, rec = nullptr;
	ASSERT_EQ(npurtGraphAddKernelNode(&op, g, nullptr, 0, &d), npurtSuccess);
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventDisableTiming), npurtSuccess);
	ASSERT_EQ(npurtGraphAddEventRecordNode(&rec, g, &op, 1, ev), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s_[0], Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[0]), npurtSuccess);
	EXPECT_EQ(npurtEventQuery(ev), npurtErrorNotReady) << "the launch's record is pending";
	// A stream told to wait for it waits for the deferred record.
	ASSERT_EQ(npurtStreamWaitEvent(s_[1], ev, 0), npurtSuccess);
	npurtOpDesc twice = addOp(y, y, buf_[4]);
	ASSERT_EQ(npurtLaunchOp(&twice, s_[1]), npurtSuccess);
	// Destroying the event waits for the record, which the gate holds.
	std::atomic<bool> destroyed{false};
	std::thread t([&] {
		EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
		destroyed = true;
	});
	ASSERT_TRUE(gate.waitReached(20000));
	gate.open();
	t.join();
	EXPECT_TRUE(destroyed.load());
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess) << lastMessage();
	EXPECT_TRUE(holds(buf_[4], 6.0f)) << "s_[1] ran after the graph's op";
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	// Launched again, its record node names a destroyed event: the launch
	// is refused whole, the stream goes on.
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	EXPECT_EQ(npurtGraphLaunch(exec, s_[0]), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "an event of the graph was destroyed"))
	        << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 0.0f)) << "nothing of the refused launch ran";
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
}

TEST_F(Graphs, PerThreadStreamsCaptureWithCudasShortForms)
{
	npurtGraph_t g = nullptr;
	unsigned long long id = 0;
	ASSERT_EQ(ptdsCaptureMemset(buf_[2], kN * 4, &g, &id), npurtSuccess) << lastMessage();
	EXPECT_NE(id, 0u);
	ASSERT_EQ(nodeCount(g), 1u);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g), npurtSuccess) << "flags default to 0";
	ASSERT_EQ(npurtMemset(buf_[2], 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, npurtStreamPerThread), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(npurtStreamPerThread), npurtSuccess);
	std::vector<unsigned char> h(kN * 4);
	ASSERT_EQ(npurtMemcpy(h.data(), buf_[2], kN * 4, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(h[0], 0x11);
	EXPECT_EQ(h[kN * 4 - 1], 0x11);
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
}

TEST_F(Graphs, LaunchingIntoACaptureAddsAChildGraphAndACapturingStreamOrdersNothing)
{
	float *y = buf_[3];
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	npurtOpDesc d = addOp(y, buf_[0], y);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	// The stream of the last launch captures now: a launch elsewhere is
	// ordered after its submitted work and joins no capture.
	ASSERT_EQ(npurtStreamBeginCapture(s_[1], npurtStreamCaptureModeRelaxed), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[2]), npurtSuccess) << lastMessage();
	npurtStreamCaptureStatus st = npurtStreamCaptureStatusActive;
	ASSERT_EQ(npurtStreamIsCapturing(s_[2], &st), npurtSuccess);
	EXPECT_EQ(st, npurtStreamCaptureStatusNone);
	// A launch into a capture adds the graph as a child graph node; it
	// does not run.
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess) << lastMessage();
	npurtGraph_t outer = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[1], &outer), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtStreamSynchronize(s_[2]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 2.0f));
	ASSERT_EQ(nodeCount(outer), 1u);
	npurtGraphNode_t node = nullptr;
	size_t n = 1;
	ASSERT_EQ(npurtGraphGetNodes(outer, &node, &n), npurtSuccess);
	npurtGraphNodeType type = npurtGraphNodeTypeEmpty;
	ASSERT_EQ(npurtGraphNodeGetType(node, &type), npurtSuccess);
	EXPECT_EQ(type, npurtGraphNodeTypeGraph);
	npurtGraphExec_t outerExec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&outerExec, outer, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(outerExec, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess);
	EXPECT_TRUE(holds(y, 3.0f));
	npurtGraphExecDestroy(outerExec);
	npurtGraphDestroy(outer);
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
}

// A graph of one op, y += ones (or twos), captured.
npurtGraph_t addGraph(npurtStream_t s, float *y, const float *x)
{
	EXPECT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
	npurtOpDesc d = addOp(y, x, y);
	EXPECT_EQ(npurtLaunchOp(&d, s), npurtSuccess);
	npurtGraph_t g = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s, &g), npurtSuccess) << lastMessage();
	return g;
}

TEST_F(Graphs, ChildGraphNodesRunInPlaceAndOwnTheirGraph)
{
	float *y = buf_[3];
	const float *ones = buf_[0];
	npurtGraph_t child = addGraph(s_[0], y, ones);
	ASSERT_NE(child, nullptr);
	// y := 0, then the child twice in a row.
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	npurtMemsetParams mp{};
	mp.dst = y;
	mp.elementSize = 4;
	mp.width = kN;
	mp.height = 1;
	npurtGraphNode_t zero = nullptr, a = nullptr, b = nullptr;
	ASSERT_EQ(npurtGraphAddMemsetNode(&zero, g, nullptr, 0, &mp), npurtSuccess);
	ASSERT_EQ(npurtGraphAddChildGraphNode(&a, g, &zero, 1, child), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtGraphAddChildGraphNode(&b, g, &a, 1, child), npurtSuccess);
	npurtGraphNodeType type = npurtGraphNodeTypeEmpty;
	ASSERT_EQ(npurtGraphNodeGetType(a, &type), npurtSuccess);
	EXPECT_EQ(type, npurtGraphNodeTypeGraph);
	EXPECT_EQ(nodeCount(g), 3u);
	// The node holds a copy: changing the graph it was made from changes
	// nothing in it.
	npurtGraphNode_t extra = nullptr;
	npurtOpDesc d = addOp(y, ones, y);
	ASSERT_EQ(npurtGraphAddKernelNode(&extra, child, nullptr, 0, &d), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess) << lastMessage();
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 2.0f));

	// The node's own graph: queried and changed (the next instantiation
	// sees it), never destroyed by the user nor given memory nodes.
	npurtGraph_t own = nullptr;
	EXPECT_EQ(npurtGraphChildGraphNodeGetGraph(zero, &own), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphChildGraphNodeGetGraph(a, nullptr), npurtErrorInvalidValue);
	ASSERT_EQ(npurtGraphChildGraphNodeGetGraph(a, &own), npurtSuccess);
	ASSERT_NE(own, nullptr);
	EXPECT_NE(own, child);
	EXPECT_EQ(nodeCount(own), 1u);
	EXPECT_EQ(npurtGraphDestroy(own), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "child graph node's own")) << lastMessage();
	npurtMemAllocNodeParams ap{};
	ap.poolProps.allocType = npurtMemAllocationTypePinned;
	ap.poolProps.location.type = npurtMemLocationTypeDevice;
	ap.poolProps.location.id = 0;
	ap.bytesize = 4096;
	npurtGraphNode_t alloc = nullptr;
	EXPECT_EQ(npurtGraphAddMemAllocNode(&alloc, own, nullptr, 0, &ap), npurtErrorNotSupported);
	ASSERT_EQ(npurtGraphAddKernelNode(&extra, own, nullptr, 0, &d), npurtSuccess);
	npurtGraphExec_t exec2 = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec2, g, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec2, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 3.0f));
	// The first exec was made before: unchanged.
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 2.0f));

	// A clone has its own copy of each child graph.
	npurtGraph_t c = nullptr;
	ASSERT_EQ(npurtGraphClone(&c, g), npurtSuccess);
	npurtGraphNode_t ca = nullptr;
	ASSERT_EQ(npurtGraphNodeFindInClone(&ca, a, c), npurtSuccess);
	npurtGraph_t cown = nullptr;
	ASSERT_EQ(npurtGraphChildGraphNodeGetGraph(ca, &cown), npurtSuccess);
	EXPECT_NE(cown, own);
	EXPECT_EQ(nodeCount(cown), 2u);

	// A graph with memory nodes cannot be a child.
	npurtGraph_t withMem = nullptr;
	ASSERT_EQ(npurtGraphCreate(&withMem, 0), npurtSuccess);
	ASSERT_EQ(npurtGraphAddMemAllocNode(&alloc, withMem, nullptr, 0, &ap), npurtSuccess);
	npurtGraphNode_t bad = nullptr;
	EXPECT_EQ(npurtGraphAddChildGraphNode(&bad, g, nullptr, 0, withMem),
	          npurtErrorNotSupported);
	EXPECT_EQ(npurtGraphAddChildGraphNode(&bad, g, nullptr, 0, nullptr),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphAddChildGraphNode(nullptr, g, nullptr, 0, child),
	          npurtErrorInvalidValue);
	EXPECT_EQ(nodeCount(g), 3u);

	// The dot file shows the child node.
	char path[] = "/tmp/npurt_child_XXXXXX";
	int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_EQ(npurtGraphDebugDotPrint(g, path, 0), npurtSuccess);
	std::ifstream f(path);
	std::stringstream dot;
	dot << f.rdbuf();
	unlink(path);
	EXPECT_TRUE(contains(dot.str(), "child graph")) << dot.str();

	// Destroying the node ends its graph's handle.
	ASSERT_EQ(npurtGraphDestroyNode(a), npurtSuccess);
	size_t n = 0;
	EXPECT_EQ(npurtGraphGetNodes(own, nullptr, &n), npurtErrorInvalidValue);
	npurtGetLastError();
	EXPECT_EQ(npurtGraphDestroy(withMem), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(c), npurtSuccess);
	npurtGraphExecDestroy(exec);
	npurtGraphExecDestroy(exec2);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess);
	EXPECT_EQ(npurtGraphDestroy(child), npurtSuccess);
}

TEST_F(Graphs, ExternalEventRecordAndWaitNodes)
{
	float *y = buf_[3];
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	npurtEvent_t done = nullptr, go = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&done, npurtEventDisableTiming), npurtSuccess);
	ASSERT_EQ(npurtEventCreateWithFlags(&go, npurtEventDisableTiming), npurtSuccess);
	EXPECT_EQ(npurtEventRecordWithFlags(done, s_[0], 2), npurtErrorInvalidValue);
	EXPECT_EQ(npurtStreamWaitEvent(s_[0], go, 2), npurtErrorInvalidValue);

	// wait(go) -> y += 1 -> record(done), all as nodes.
	ASSERT_EQ(npurtStreamBeginCapture(s_[0], npurtStreamCaptureModeGlobal), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[0], go, npurtEventWaitExternal), npurtSuccess)
	        << lastMessage();
	npurtOpDesc d = addOp(y, buf_[0], y);
	ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
	ASSERT_EQ(npurtEventRecordWithFlags(done, s_[0], npurtEventRecordExternal), npurtSuccess)
	        << lastMessage();
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtStreamEndCapture(s_[0], &g), npurtSuccess) << lastMessage();
	std::vector<npurtGraphNode_t> nodes(3);
	size_t n = 3;
	ASSERT_EQ(npurtGraphGetNodes(g, nodes.data(), &n), npurtSuccess);
	ASSERT_EQ(n, 3u);
	std::vector<npurtGraphNodeType> types;
	for (npurtGraphNode_t node : nodes) {
		npurtGraphNodeType t = npurtGraphNodeTypeEmpty;
		ASSERT_EQ(npurtGraphNodeGetType(node, &t), npurtSuccess);
		types.push_back(t);
	}
	EXPECT_EQ(types, (std::vector<npurtGraphNodeType>{npurtGraphNodeTypeWaitEvent,
	                                                  npurtGraphNodeTypeKernel,
	                                                  npurtGraphNodeTypeEventRecord}));
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);

	// Each launch waits for go's latest record and records done.
	Gate gate;
	ASSERT_EQ(npurtLaunchHostFunc(s_[2], Gate::hostFn, &gate), npurtSuccess);
	ASSERT_EQ(npurtEventRecord(go, s_[2]), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_TRUE(gate.waitReached(20000));
	EXPECT_EQ(npurtEventQuery(done), npurtErrorNotReady);
	EXPECT_EQ(npurtStreamQuery(s_[1]), npurtErrorNotReady);
	gate.open();
	ASSERT_EQ(npurtEventSynchronize(done), npurtSuccess) << lastMessage();
	EXPECT_TRUE(holds(y, 1.0f));
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);

	// Outside a capture the flags change nothing.
	ASSERT_EQ(npurtEventRecordWithFlags(go, s_[2], npurtEventRecordExternal), npurtSuccess);
	ASSERT_EQ(npurtStreamWaitEvent(s_[1], go, npurtEventWaitExternal), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
	npurtEventDestroy(done);
	npurtEventDestroy(go);
	npurtGetLastError();
}

TEST_F(Graphs, StreamIdsAreDistinctAndStable)
{
	unsigned long long id[3] = {};
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(npurtStreamGetId(s_[i], &id[i]), npurtSuccess);
	EXPECT_NE(id[0], id[1]);
	EXPECT_NE(id[1], id[2]);
	EXPECT_NE(id[0], id[2]);
	unsigned long long again = 0, legacy = 0, perThread = 0;
	ASSERT_EQ(npurtStreamGetId(s_[1], &again), npurtSuccess);
	EXPECT_EQ(again, id[1]);
	ASSERT_EQ(npurtStreamGetId(nullptr, &legacy), npurtSuccess);
	ASSERT_EQ(npurtStreamGetId(npurtStreamPerThread, &perThread), npurtSuccess);
	EXPECT_NE(legacy, perThread);
	EXPECT_EQ(npurtStreamGetId(s_[0], nullptr), npurtErrorInvalidValue);
	// A new stream never takes a destroyed one's id.
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	unsigned long long first = 0, second = 0;
	ASSERT_EQ(npurtStreamGetId(s, &first), npurtSuccess);
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess);
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	ASSERT_EQ(npurtStreamGetId(s, &second), npurtSuccess);
	EXPECT_NE(first, second);
	ASSERT_EQ(npurtStreamDestroy(s), npurtSuccess);
	npurtGetLastError();
}

TEST_F(Graphs, GraphMemoryAttributesFollowAllocNodes)
{
	uint64_t before = 0, now = 0, high = 0, reserved = 0;
	ASSERT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrUsedMemCurrent, &before),
	          npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	npurtMemAllocNodeParams p{};
	p.poolProps.allocType = npurtMemAllocationTypePinned;
	p.poolProps.location.type = npurtMemLocationTypeDevice;
	p.poolProps.location.id = 0;
	p.bytesize = 1 << 20;
	npurtGraphNode_t a = nullptr;
	ASSERT_EQ(npurtGraphAddMemAllocNode(&a, g, nullptr, 0, &p), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrUsedMemCurrent, &now),
	          npurtSuccess);
	EXPECT_EQ(now, before + (1 << 20));
	ASSERT_EQ(
	        npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrReservedMemCurrent, &reserved),
	        npurtSuccess);
	EXPECT_EQ(reserved, now);
	ASSERT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrUsedMemHigh, &high),
	          npurtSuccess);
	EXPECT_GE(high, now);
	EXPECT_EQ(npurtDeviceGraphMemTrim(0), npurtSuccess);

	// Given back with the graph; the high mark stays until reset.
	ASSERT_EQ(npurtGraphDestroy(g), npurtSuccess);
	ASSERT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrUsedMemCurrent, &now),
	          npurtSuccess);
	EXPECT_EQ(now, before);
	ASSERT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrReservedMemHigh, &high),
	          npurtSuccess);
	EXPECT_GE(high, before + (1 << 20));
	uint64_t zero = 0, one = 1;
	EXPECT_EQ(npurtDeviceSetGraphMemAttribute(0, npurtGraphMemAttrUsedMemHigh, &one),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceSetGraphMemAttribute(0, npurtGraphMemAttrUsedMemCurrent, &zero),
	          npurtErrorInvalidValue);
	ASSERT_EQ(npurtDeviceSetGraphMemAttribute(0, npurtGraphMemAttrUsedMemHigh, &zero),
	          npurtSuccess);
	ASSERT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrUsedMemHigh, &high),
	          npurtSuccess);
	EXPECT_EQ(high, now);

	int count = 0;
	ASSERT_EQ(npurtGetDeviceCount(&count), npurtSuccess);
	EXPECT_EQ(npurtDeviceGetGraphMemAttribute(count, npurtGraphMemAttrUsedMemCurrent, &now),
	          npurtErrorInvalidDevice);
	EXPECT_EQ(npurtDeviceGetGraphMemAttribute(0, npurtGraphMemAttrUsedMemCurrent, nullptr),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGetGraphMemAttribute(0, static_cast<npurtGraphMemAttributeType>(9),
	                                          &now),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtDeviceGraphMemTrim(-1), npurtErrorInvalidDevice);
	npurtGetLastError();
}

TEST_F(Graphs, ChildGraphParametersUpdateInAnExec)
{
	float *y = buf_[3];
	npurtGraph_t ones = addGraph(s_[0], y, buf_[0]);
	npurtGraph_t twos = addGraph(s_[0], y, buf_[1]);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	npurtGraphNode_t a = nullptr;
	ASSERT_EQ(npurtGraphAddChildGraphNode(&a, g, nullptr, 0, ones), npurtSuccess);
	npurtGraphExec_t exec = nullptr;
	ASSERT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess);
	ASSERT_EQ(npurtMemset(y, 0, kN * 4), npurtSuccess);
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 1.0f));
	ASSERT_EQ(npurtGraphExecChildGraphNodeSetParams(exec, a, twos), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 3.0f));

	// Another shape is refused, and the exec keeps what it had.
	npurtGraphNode_t more = nullptr;
	npurtOpDesc d = addOp(y, buf_[0], y);
	ASSERT_EQ(npurtGraphAddKernelNode(&more, twos, nullptr, 0, &d), npurtSuccess);
	EXPECT_EQ(npurtGraphExecChildGraphNodeSetParams(exec, a, twos), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "does not pair")) << lastMessage();
	EXPECT_EQ(npurtGraphExecChildGraphNodeSetParams(exec, a, nullptr), npurtErrorInvalidValue);
	// So does a whole-graph update whose child differs: the child node is
	// named.
	npurtGraph_t g2 = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g2, 0), npurtSuccess);
	npurtGraphNode_t a2 = nullptr;
	ASSERT_EQ(npurtGraphAddChildGraphNode(&a2, g2, nullptr, 0, twos), npurtSuccess);
	npurtGraphExecUpdateResultInfo info{};
	EXPECT_EQ(npurtGraphExecUpdate(exec, g2, &info), npurtErrorGraphExecUpdateFailure);
	EXPECT_EQ(info.result, npurtGraphExecUpdateErrorTopologyChanged);
	EXPECT_EQ(info.errorNode, a2);
	npurtGetLastError();
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 5.0f));
	// One of the same shape updates it.
	npurtGraph_t g3 = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g3, 0), npurtSuccess);
	npurtGraphNode_t a3 = nullptr;
	ASSERT_EQ(npurtGraphAddChildGraphNode(&a3, g3, nullptr, 0, ones), npurtSuccess);
	ASSERT_EQ(npurtGraphExecUpdate(exec, g3, &info), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtGraphLaunch(exec, s_[1]), npurtSuccess);
	ASSERT_EQ(npurtStreamSynchronize(s_[1]), npurtSuccess);
	EXPECT_TRUE(holds(y, 6.0f));
	npurtGraphExecDestroy(exec);
	for (npurtGraph_t x : {g, g2, g3, ones, twos})
		EXPECT_EQ(npurtGraphDestroy(x), npurtSuccess);
}

TEST_F(Graphs, ThreadsCaptureAndLaunchTheirOwnGraphs)
{
	constexpr int kThreads = 4;
	float *outs[kThreads] = {buf_[2], buf_[3], buf_[4], buf_[5]};
	std::vector<std::thread> threads;
	std::atomic<int> failures{0};
	for (int t = 0; t < kThreads; t++) {
		threads.emplace_back([&, t] {
			npurtSetDevice(0);
			npurtStream_t s = nullptr;
			if (npurtStreamCreateWithFlags(&s, npurtStreamNonBlocking)) {
				failures++;
				return;
			}
			npurtMemsetAsync(outs[t], 0, kN * 4, s);
			npurtGraph_t g = nullptr;
			npurtGraphExec_t exec = nullptr;
			npurtOpDesc d = addOp(outs[t], buf_[0], outs[t]);
			bool ok = npurtStreamBeginCapture(s, npurtStreamCaptureModeThreadLocal) ==
			                  0 &&
			          npurtLaunchOp(&d, s) == 0 && npurtLaunchOp(&d, s) == 0 &&
			          npurtStreamEndCapture(s, &g) == 0 &&
			          npurtGraphInstantiate(&exec, g, 0) == 0;
			for (int i = 0; ok && i < 50; i++)
				ok = npurtGraphLaunch(exec, s) == 0;
			ok = ok && npurtStreamSynchronize(s) == 0;
			if (!ok) {
				ADD_FAILURE() << t << ": " << npurtGetLastErrorMessage();
				failures++;
			}
			npurtGraphExecDestroy(exec);
			npurtGraphDestroy(g);
			npurtStreamDestroy(s);
		});
	}
	for (auto &th : threads)
		th.join();
	EXPECT_EQ(failures.load(), 0);
	for (float *o : outs)
		EXPECT_TRUE(holds(o, 100.0f));
}

// The profiler's count of tasks per engine (its "engine utilisation"
// lines) over what ran between npurtProfilerStart and npurtProfilerStop.
std::map<unsigned, uint64_t> tasksPerEngine()
{
	std::map<unsigned, uint64_t> out;
	size_t needed = 0;
	if (npurtProfilerSummary(nullptr, 0, &needed) != npurtSuccess)
		return out;
	std::string sum(needed, '\0');
	if (npurtProfilerSummary(sum.data(), sum.size(), nullptr) != npurtSuccess)
		return out;
	std::istringstream in(sum.c_str());
	std::string line;
	bool engines = false;
	while (std::getline(in, line)) {
		if (contains(line, "engine utilisation")) {
			engines = true;
			continue;
		}
		int dev = 0;
		unsigned engine = 0;
		unsigned long long tasks = 0;
		if (engines && std::sscanf(line.c_str(), " NPU %d engine %u %llu tasks", &dev,
		                           &engine, &tasks) == 3)
			out[engine] += tasks;
	}
	return out;
}

// Whether each of the n bytes at device address d is v.
bool allBytes(const void *d, size_t n, uint8_t v)
{
	std::vector<uint8_t> back(n);
	if (npurtMemcpy(back.data(), d, n, npurtMemcpyDeviceToHost) != npurtSuccess)
		return false;
	return std::ranges::all_of(back, [v](uint8_t b) { return b == v; });
}

// Captures, on s, `pairs` times: a memset of `bytes` of big (alternating
// the byte 0 and 1) then out = a + b; launches it once to warm up, then
// once profiled: the tasks per engine of that launch.
std::map<unsigned, uint64_t> profiledMixedGraph(npurtStream_t s, void *big, size_t bytes, float *a,
                                                float *b, float *out, int pairs)
{
	EXPECT_EQ(npurtStreamBeginCapture(s, npurtStreamCaptureModeGlobal), npurtSuccess);
	for (int i = 0; i < pairs; i++) {
		EXPECT_EQ(npurtMemsetAsync(big, i & 1, bytes, s), npurtSuccess);
		npurtOpDesc d = addOp(a, b, out);
		EXPECT_EQ(npurtLaunchOp(&d, s), npurtSuccess);
	}
	npurtGraph_t g = nullptr;
	EXPECT_EQ(npurtStreamEndCapture(s, &g), npurtSuccess) << lastMessage();
	npurtGraphExec_t exec = nullptr;
	EXPECT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtGraphLaunch(exec, s), npurtSuccess);
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_EQ(npurtProfilerStart(), npurtSuccess);
	EXPECT_EQ(npurtGraphLaunch(exec, s), npurtSuccess);
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtProfilerStop(), npurtSuccess);
	npurtGraphExecDestroy(exec);
	npurtGraphDestroy(g);
	return tasksPerEngine();
}

TEST_F(Graphs, SmallMemsetsBetweenOpsRunInTheOpsJob)
{
	// kN * 4 bytes: far under kJoinCost; no fence between engines needed.
	std::map<unsigned, uint64_t> per =
	        profiledMixedGraph(s_[0], buf_[2], kN * 4, buf_[0], buf_[1], buf_[3], 8);
	ASSERT_EQ(per.size(), 1u) << "memsets and ops on one engine";
	EXPECT_EQ(per.begin()->second, 16u);
	EXPECT_TRUE(holds(buf_[3], 3.0f));
	EXPECT_TRUE(allBytes(buf_[2], kN * 4, 1)) << "the last memset (byte 1) ran last";
}

TEST_F(Graphs, LargeCopiesBetweenOpsKeepTheCopyEngine)
{
	const size_t bytes = 1u << 20;  // above kJoinCost
	void *big = nullptr;
	ASSERT_EQ(npurtMalloc(&big, bytes), npurtSuccess);
	std::map<unsigned, uint64_t> per =
	        profiledMixedGraph(s_[0], big, bytes, buf_[0], buf_[1], buf_[3], 4);
	EXPECT_EQ(per.size(), 2u) << "the memsets on the copy engine, the ops on compute";
	uint64_t total = 0;
	for (auto &[engine, n] : per) {
		EXPECT_EQ(n, 4u) << "engine " << engine;
		total += n;
	}
	EXPECT_EQ(total, 8u);
	EXPECT_TRUE(holds(buf_[3], 3.0f));
	EXPECT_TRUE(allBytes(big, bytes, 1)) << "the last memset (byte 1) ran last";
	npurtFree(big);
}

TEST_F(Graphs, SmallMemsetsBehindOpsOnAStreamJoinThem)
{
	// Not a graph: the stream joins a small memset to the compute work
	// before it, and leaves one a caller waits for alone.
	ASSERT_EQ(npurtProfilerStart(), npurtSuccess);
	for (int i = 0; i < 6; i++) {
		npurtOpDesc d = addOp(buf_[0], buf_[1], buf_[3]);
		ASSERT_EQ(npurtLaunchOp(&d, s_[0]), npurtSuccess);
		ASSERT_EQ(npurtMemsetAsync(buf_[2], i & 1, kN * 4, s_[0]), npurtSuccess);
	}
	ASSERT_EQ(npurtStreamSynchronize(s_[0]), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtProfilerStop(), npurtSuccess);
	std::map<unsigned, uint64_t> per = tasksPerEngine();
	ASSERT_EQ(per.size(), 1u) << "memsets behind ops on the ops' engine";
	EXPECT_EQ(per.begin()->second, 12u);
	EXPECT_TRUE(holds(buf_[3], 3.0f));
	EXPECT_TRUE(allBytes(buf_[2], kN * 4, 1)) << "the last memset (byte 1) ran last";
}

TEST(GraphsReset, AGraphOfAResetDeviceIsRefusedNotFollowed)
{
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	npurtGraph_t g = nullptr;
	ASSERT_EQ(npurtGraphCreate(&g, 0), npurtSuccess);
	npurtMemAllocNodeParams p{};
	p.poolProps.allocType = npurtMemAllocationTypePinned;
	p.poolProps.location.type = npurtMemLocationTypeDevice;
	p.poolProps.location.id = 0;
	p.bytesize = 4096;
	npurtGraphNode_t a = nullptr, e = nullptr;
	ASSERT_EQ(npurtGraphAddMemAllocNode(&a, g, nullptr, 0, &p), npurtSuccess);
	ASSERT_EQ(npurtDeviceReset(), npurtSuccess);
	EXPECT_EQ(npurtGraphAddEmptyNode(&e, g, &a, 1), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "reset")) << lastMessage();
	npurtGraphExec_t exec = nullptr;
	EXPECT_EQ(npurtGraphInstantiate(&exec, g, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtGraphDestroy(g), npurtSuccess) << "its memory went with the context";
	npurtGetLastError();
}

}  // namespace

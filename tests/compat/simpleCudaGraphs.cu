// simpleCudaGraphs, in the style of CUDA's sample: a fork/join across three
// streams captured into a graph and launched 1000 times, a graph built node
// by node with a host node checking its result, the executable graphs
// updated between launches (a recapture with other parameters, and single
// nodes), memory allocated and freed inside a capture, and a node added to
// the graph being captured.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}
__global__ void scale(float *out, const float *in, float alpha, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = alpha * in[i];
}
#endif

namespace {

const int n = 1 << 14;
const size_t bytes = n * sizeof(float);
const int launches = 1000;

float *h_a, *h_b, *h_y;  // pinned: the captured copies read and write them
float *d_a, *d_b, *d_y, *d_acc;

// Every element of got against want(i); names the first mismatch.
template <class F> void expectAll(const char *what, const float *got, F want)
{
	for (int i = 0; i < n; i++) {
		if (got[i] != want(i)) {
			std::fprintf(stderr, "%s: element %d is %g, want %g\n", what, i, got[i],
			             want(i));
			std::exit(1);
		}
	}
}

float bytesAsFloat(int byte)
{
	float f;
	std::memset(&f, byte, sizeof f);
	return f;
}

// y as the captured sequence computes it.
float expectY(int i, float alpha, int byte)
{
	float a = alpha * h_a[i];
	float b = i < n / 4 ? bytesAsFloat(byte) : 3.0f * h_b[i];
	return a + b;
}

// The fork/join: s[1] copies a in and scales it by alpha; s[2] copies b in,
// triples it and memsets its first quarter to byte; s[0] adds them into y,
// adds y to acc and copies y out.
cudaGraph_t captureForkJoin(cudaStream_t *s, cudaEvent_t *ev, float alpha, int byte)
{
	cudaGraph_t g;
	CHECK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
	CHECK(cudaEventRecord(ev[0], s[0]));
	CHECK(cudaStreamWaitEvent(s[1], ev[0], 0));
	CHECK(cudaStreamWaitEvent(s[2], ev[0], 0));
	CHECK(cudaMemcpyAsync(d_a, h_a, bytes, cudaMemcpyHostToDevice, s[1]));
	scale<<<n / 256, 256, 0, s[1]>>>(d_a, d_a, alpha, n);  // npurt: CHECK(opScale(d_a, d_a, alpha, n, s[1]));
	CHECK(cudaEventRecord(ev[1], s[1]));
	CHECK(cudaMemcpyAsync(d_b, h_b, bytes, cudaMemcpyHostToDevice, s[2]));
	scale<<<n / 256, 256, 0, s[2]>>>(d_b, d_b, 3.0f, n);  // npurt: CHECK(opScale(d_b, d_b, 3.0f, n, s[2]));
	CHECK(cudaMemsetAsync(d_b, byte, bytes / 4, s[2]));
	CHECK(cudaEventRecord(ev[2], s[2]));
	CHECK(cudaStreamWaitEvent(s[0], ev[1], 0));
	CHECK(cudaStreamWaitEvent(s[0], ev[2], 0));
	vectorAdd<<<n / 256, 256, 0, s[0]>>>(d_a, d_b, d_y, n);  // npurt: CHECK(opAdd(d_y, d_a, d_b, n, s[0]));
	vectorAdd<<<n / 256, 256, 0, s[0]>>>(d_acc, d_y, d_acc, n);  // npurt: CHECK(opAdd(d_acc, d_acc, d_y, n, s[0]));
	CHECK(cudaMemcpyAsync(h_y, d_y, bytes, cudaMemcpyDeviceToHost, s[0]));
	CHECK(cudaStreamEndCapture(s[0], &g));
	return g;
}

// What the explicit graph's host node checks, after its copy out.
struct HostCheck {
	const float *x, *z;
	float addend;
	int calls;
	bool ok;
};

void CUDART_CB checkOnHost(void *data)
{
	HostCheck *c = (HostCheck *)data;
	c->calls++;
	c->ok = true;
	for (int i = 0; i < n; i++)
		c->ok = c->ok && c->z[i] == c->x[i] + c->addend;
}

// A kernel node with the parameters of a captured launch's node. Their type
// (cudaKernelNodeParams; the op descriptor after the port) is deduced from
// the getter, so the same source builds both ways.
template <class P>
cudaError_t addKernelNodeAs(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps,
                            size_t ndeps, cudaGraphNode_t launched,
                            cudaError_t (*get)(cudaGraphNode_t, P *))
{
	P params;
	cudaError_t err = get(launched, &params);
	if (err != cudaSuccess)
		return err;
	return cudaGraphAddKernelNode(node, g, deps, ndeps, &params);
}

unsigned int floatBits(float f)
{
	unsigned int u;
	std::memcpy(&u, &f, sizeof u);
	return u;
}

}  // namespace

int main()
{
	CHECK(cudaSetDevice(0));
	CHECK(cudaMallocHost((void **)&h_a, bytes));
	CHECK(cudaMallocHost((void **)&h_b, bytes));
	CHECK(cudaMallocHost((void **)&h_y, bytes));
	CHECK(cudaMalloc((void **)&d_a, bytes));
	CHECK(cudaMalloc((void **)&d_b, bytes));
	CHECK(cudaMalloc((void **)&d_y, bytes));
	CHECK(cudaMalloc((void **)&d_acc, bytes));
	for (int i = 0; i < n; i++) {
		h_a[i] = (float)(i % 100);
		h_b[i] = (float)(i % 7);
	}
	// Non-blocking, as in CUDA's sample: work on the legacy default stream
	// would break a capture on blocking streams.
	cudaStream_t s[3], launchStream;
	for (auto &t : s)
		CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&launchStream, cudaStreamNonBlocking));
	cudaEvent_t ev[3], start, stop;
	for (auto &e : ev)
		CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));

	// 1. Stream capture with fork and join, launched 1000 times: acc ends
	// up 1000 * y (exact: small integers).
	cudaGraph_t forkJoin = captureForkJoin(s, ev, 2.0f, 0);
	size_t numNodes = 0, numRoots = 0;
	CHECK(cudaGraphGetNodes(forkJoin, NULL, &numNodes));
	CHECK(cudaGraphGetRootNodes(forkJoin, NULL, &numRoots));
	std::printf("Num of nodes in the graph created using stream capture API = %zu\n", numNodes);
	// Event records and waits are edges, not nodes; the two side
	// streams' copies are the roots.
	EXPECT(numNodes == 8);
	EXPECT(numRoots == 2);
	cudaGraphExec_t forkJoinExec;
	CHECK(cudaGraphInstantiate(&forkJoinExec, forkJoin, 0));
	CHECK(cudaMemsetAsync(d_acc, 0, bytes, launchStream));
	CHECK(cudaEventRecord(start, launchStream));
	for (int i = 0; i < launches; i++)
		CHECK(cudaGraphLaunch(forkJoinExec, launchStream));
	CHECK(cudaEventRecord(stop, launchStream));
	CHECK(cudaEventSynchronize(stop));
	float ms = 0;
	CHECK(cudaEventElapsedTime(&ms, start, stop));
	std::printf("%d launches of the captured graph: %.2f ms (%.1f us each)\n", launches, ms,
	            ms * 1000.0f / launches);
	float *h_acc = NULL;
	CHECK(cudaMallocHost((void **)&h_acc, bytes));
	CHECK(cudaMemcpy(h_acc, d_acc, bytes, cudaMemcpyDeviceToHost));
	expectAll("captured graph: y", h_y, [](int i) { return expectY(i, 2.0f, 0); });
	expectAll("captured graph: acc after 1000 launches", h_acc,
	          [](int i) { return launches * expectY(i, 2.0f, 0); });
	std::printf("stream capture with fork/join: ok\n");

	// 2. A graph built node by node: x copied in and c filled with 1.0f
	// (roots), z = x + c, z copied out, a host node checking z.
	float *h_x, *h_x2, *h_z, *d_x, *d_c, *d_z;
	CHECK(cudaMallocHost((void **)&h_x, bytes));
	CHECK(cudaMallocHost((void **)&h_x2, bytes));
	CHECK(cudaMallocHost((void **)&h_z, bytes));
	CHECK(cudaMalloc((void **)&d_x, bytes));
	CHECK(cudaMalloc((void **)&d_c, bytes));
	CHECK(cudaMalloc((void **)&d_z, bytes));
	for (int i = 0; i < n; i++) {
		h_x[i] = (float)(i % 13);
		h_x2[i] = (float)(i % 17) * 10.0f;
	}
	cudaGraph_t built;
	CHECK(cudaGraphCreate(&built, 0));
	cudaGraphNode_t copyIn, fill, add, copyOut, hostCheck;
	CHECK(cudaGraphAddMemcpyNode1D(&copyIn, built, NULL, 0, d_x, h_x, bytes,
	                               cudaMemcpyHostToDevice));
	cudaMemsetParams fillParams = {};
	fillParams.dst = d_c;
	fillParams.value = floatBits(1.0f);
	fillParams.elementSize = sizeof(float);
	fillParams.width = n;
	fillParams.height = 1;
	CHECK(cudaGraphAddMemsetNode(&fill, built, NULL, 0, &fillParams));
	// The kernel node: in CUDA its parameters are cudaKernelNodeParams, in
	// the port an op descriptor, so neither can be written here. They are
	// taken from a captured launch of the kernel instead.
	cudaGraph_t launchGraph;
	CHECK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
	vectorAdd<<<n / 256, 256, 0, s[0]>>>(d_x, d_c, d_z, n);  // npurt: CHECK(opAdd(d_z, d_x, d_c, n, s[0]));
	CHECK(cudaStreamEndCapture(s[0], &launchGraph));
	cudaGraphNode_t launched;
	size_t one = 1;
	CHECK(cudaGraphGetNodes(launchGraph, &launched, &one));
	EXPECT(one == 1);
	cudaGraphNode_t inputs[2] = {copyIn, fill};
	CHECK(addKernelNodeAs(&add, built, inputs, 2, launched, cudaGraphKernelNodeGetParams));
	CHECK(cudaGraphDestroy(launchGraph));
	CHECK(cudaGraphAddMemcpyNode1D(&copyOut, built, &add, 1, h_z, d_z, bytes,
	                               cudaMemcpyDeviceToHost));
	HostCheck hc = {h_x, h_z, 1.0f, 0, false};
	cudaHostNodeParams hostParams = {};
	hostParams.fn = checkOnHost;
	hostParams.userData = &hc;
	CHECK(cudaGraphAddHostNode(&hostCheck, built, &copyOut, 1, &hostParams));
	size_t numEdges = 0;
	CHECK(cudaGraphGetNodes(built, NULL, &numNodes));
	CHECK(cudaGraphGetRootNodes(built, NULL, &numRoots));
	CHECK(cudaGraphGetEdges(built, NULL, NULL, &numEdges));
	std::printf("Num of nodes in the graph created manually = %zu\n", numNodes);
	EXPECT(numNodes == 5 && numRoots == 2 && numEdges == 4);
	cudaGraphExec_t builtExec;
	CHECK(cudaGraphInstantiate(&builtExec, built, 0));
	CHECK(cudaGraphLaunch(builtExec, launchStream));
	CHECK(cudaStreamSynchronize(launchStream));
	expectAll("built graph: z", h_z, [&](int i) { return h_x[i] + 1.0f; });
	EXPECT(hc.calls == 1 && hc.ok);
	std::printf("graph built node by node: ok\n");

	// 3. Updates. A graph of another topology is refused, and the
	// executable graph stays usable.
	cudaGraphExecUpdateResultInfo info;
	EXPECT(cudaGraphExecUpdate(forkJoinExec, built, &info) == cudaErrorGraphExecUpdateFailure);
	EXPECT(info.result == cudaGraphExecUpdateErrorTopologyChanged);
	EXPECT(cudaGetLastError() == cudaErrorGraphExecUpdateFailure);
	// The same sequence captured with another scale and memset value: the
	// update takes its parameters.
	cudaGraph_t forkJoin2 = captureForkJoin(s, ev, 4.0f, 0x40);
	CHECK(cudaGraphExecUpdate(forkJoinExec, forkJoin2, &info));
	EXPECT(info.result == cudaGraphExecUpdateSuccess);
	CHECK(cudaMemsetAsync(d_acc, 0, bytes, launchStream));
	CHECK(cudaGraphLaunch(forkJoinExec, launchStream));
	CHECK(cudaGraphLaunch(forkJoinExec, launchStream));
	CHECK(cudaMemcpyAsync(h_acc, d_acc, bytes, cudaMemcpyDeviceToHost, launchStream));
	CHECK(cudaStreamSynchronize(launchStream));
	expectAll("updated captured graph: y", h_y, [](int i) { return expectY(i, 4.0f, 0x40); });
	expectAll("updated captured graph: acc after 2 launches", h_acc,
	          [](int i) { return expectY(i, 4.0f, 0x40) + expectY(i, 4.0f, 0x40); });
	// Single nodes of the executable graph: another source for the copy
	// in, another fill value. The graph it was made from keeps its own.
	fillParams.value = floatBits(2.0f);
	CHECK(cudaGraphExecMemsetNodeSetParams(builtExec, fill, &fillParams));
	CHECK(cudaGraphExecMemcpyNodeSetParams1D(builtExec, copyIn, d_x, h_x2, bytes,
	                                         cudaMemcpyHostToDevice));
	hc.x = h_x2;
	hc.addend = 2.0f;
	CHECK(cudaGraphLaunch(builtExec, launchStream));
	CHECK(cudaStreamSynchronize(launchStream));
	expectAll("updated built graph: z", h_z, [&](int i) { return h_x2[i] + 2.0f; });
	EXPECT(hc.calls == 2 && hc.ok);
	cudaMemsetParams kept;
	CHECK(cudaGraphMemsetNodeGetParams(fill, &kept));
	EXPECT(kept.value == floatBits(1.0f));
	std::printf("executable graph updates: ok\n");

	// 4. A temporary allocated and freed in the capture (alloc and free
	// nodes): each launch adds 2 * a to out.
	float *d_in, *d_out;
	CHECK(cudaMalloc((void **)&d_in, bytes));
	CHECK(cudaMalloc((void **)&d_out, bytes));
	CHECK(cudaMemcpyAsync(d_in, h_a, bytes, cudaMemcpyHostToDevice, launchStream));
	CHECK(cudaMemsetAsync(d_out, 0, bytes, launchStream));
	cudaGraph_t withAlloc;
	CHECK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
	float *tmp = NULL;
	CHECK(cudaMallocAsync((void **)&tmp, bytes, s[0]));
	scale<<<n / 256, 256, 0, s[0]>>>(tmp, d_in, 2.0f, n);  // npurt: CHECK(opScale(tmp, d_in, 2.0f, n, s[0]));
	vectorAdd<<<n / 256, 256, 0, s[0]>>>(d_out, tmp, d_out, n);  // npurt: CHECK(opAdd(d_out, d_out, tmp, n, s[0]));
	CHECK(cudaFreeAsync(tmp, s[0]));
	CHECK(cudaStreamEndCapture(s[0], &withAlloc));
	cudaGraphNode_t nodes[4];
	numNodes = 4;
	CHECK(cudaGraphGetNodes(withAlloc, nodes, &numNodes));
	EXPECT(numNodes == 4);
	int allocs = 0, frees = 0;
	for (size_t i = 0; i < numNodes; i++) {
		cudaGraphNodeType type;
		CHECK(cudaGraphNodeGetType(nodes[i], &type));
		allocs += type == cudaGraphNodeTypeMemAlloc;
		frees += type == cudaGraphNodeTypeMemFree;
	}
	EXPECT(allocs == 1 && frees == 1);
	cudaGraphExec_t withAllocExec;
	CHECK(cudaGraphInstantiate(&withAllocExec, withAlloc, 0));
	const int replays = 5;
	for (int i = 0; i < replays; i++)
		CHECK(cudaGraphLaunch(withAllocExec, launchStream));
	CHECK(cudaStreamSynchronize(launchStream));
	CHECK(cudaMemcpy(h_y, d_out, bytes, cudaMemcpyDeviceToHost));
	expectAll("graph with alloc and free nodes: out", h_y,
	          [](int i) { return replays * 2.0f * h_a[i]; });
	std::printf("cudaMallocAsync/cudaFreeAsync in a capture, %d launches: ok\n", replays);

	// 5. A node added to the graph being captured (CUDA 12's
	// cudaStreamGetCaptureInfo, 11.3's _v2): a host node between two
	// captured copies checks the first one's result, and the capture goes
	// on after it. The second copy overwrites what the host node checks.
	CHECK(cudaMemset(d_z, 0, bytes));
	HostCheck midCheck = {h_a, h_z, 0.0f, 0, false};
	cudaGraph_t withHostNode;
	CHECK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
	CHECK(cudaMemcpyAsync(d_x, h_a, bytes, cudaMemcpyHostToDevice, s[0]));
	CHECK(cudaMemcpyAsync(h_z, d_x, bytes, cudaMemcpyDeviceToHost, s[0]));
	cudaStreamCaptureStatus captureStatus;
	cudaGraph_t capturing = NULL;
	const cudaGraphNode_t *captureDeps = NULL;
	size_t numCaptureDeps = 0;
	CHECK(cudaStreamGetCaptureInfo(s[0], &captureStatus, NULL, &capturing, &captureDeps,
	                               &numCaptureDeps));
	EXPECT(captureStatus == cudaStreamCaptureStatusActive && numCaptureDeps == 1);
	cudaHostNodeParams midParams = {};
	midParams.fn = checkOnHost;
	midParams.userData = &midCheck;
	cudaGraphNode_t midNode;
	CHECK(cudaGraphAddHostNode(&midNode, capturing, captureDeps, numCaptureDeps, &midParams));
	CHECK(cudaStreamUpdateCaptureDependencies(s[0], &midNode, 1,
	                                          cudaStreamSetCaptureDependencies));
	CHECK(cudaMemcpyAsync(h_z, d_z, bytes, cudaMemcpyDeviceToHost, s[0]));
	CHECK(cudaStreamEndCapture(s[0], &withHostNode));
	EXPECT(withHostNode == capturing);
	CHECK(cudaGraphGetNodes(withHostNode, NULL, &numNodes));
	CHECK(cudaGraphGetEdges(withHostNode, NULL, NULL, &numEdges));
	EXPECT(numNodes == 4 && numEdges == 3);
	cudaGraphExec_t withHostNodeExec;
	CHECK(cudaGraphInstantiate(&withHostNodeExec, withHostNode, 0));
	for (int i = 0; i < replays; i++)
		CHECK(cudaGraphLaunch(withHostNodeExec, launchStream));
	CHECK(cudaStreamSynchronize(launchStream));
	EXPECT(midCheck.calls == replays && midCheck.ok);
	expectAll("graph with a node added in the capture: z", h_z, [](int) { return 0.0f; });
	std::printf("a host node added to the graph being captured, %d launches: ok\n", replays);

	// 6. Clean up.
	for (cudaGraphExec_t e : {forkJoinExec, builtExec, withAllocExec, withHostNodeExec})
		CHECK(cudaGraphExecDestroy(e));
	for (cudaGraph_t g : {forkJoin, forkJoin2, built, withAlloc, withHostNode})
		CHECK(cudaGraphDestroy(g));
	for (cudaStream_t t : {s[0], s[1], s[2], launchStream})
		CHECK(cudaStreamDestroy(t));
	for (cudaEvent_t e : {ev[0], ev[1], ev[2], start, stop})
		CHECK(cudaEventDestroy(e));
	for (float *p : {h_a, h_b, h_y, h_acc, h_x, h_x2, h_z})
		CHECK(cudaFreeHost(p));
	for (float *p : {d_a, d_b, d_y, d_acc, d_x, d_c, d_z, d_in, d_out})
		CHECK(cudaFree(p));
	std::printf("simpleCudaGraphs: PASSED\n");
	return 0;
}

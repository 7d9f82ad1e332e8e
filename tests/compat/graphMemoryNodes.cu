// graphMemoryNodes, in the style of CUDA's sample: graph memory made by
// alloc and free nodes (built with the graph API and captured from
// cudaMallocAsync/cudaFreeAsync), watched through the device's graph memory
// attributes and trimmed; then graphs in graphs: child graph nodes, a graph
// launched into a capture, and external event nodes that let work outside a
// graph wait for one step of it.
#include <cuda_runtime.h>

#include <cstdio>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void scale(float *out, const float *in, float alpha, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = alpha * in[i];
}
__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}
#endif

namespace {

const int n = 1 << 12;
const size_t bytes = n * sizeof(float);

unsigned long long graphMem(cudaGraphMemAttributeType attr)
{
	unsigned long long v = 0;
	CHECK(cudaDeviceGetGraphMemAttribute(0, attr, &v));
	return v;
}

void expectAll(const char *what, const float *got, float want)
{
	for (int i = 0; i < n; i++) {
		if (got[i] != want) {
			std::fprintf(stderr, "%s: element %d is %g, want %g\n", what, i, got[i],
			             want);
			std::exit(1);
		}
	}
}

}  // namespace

int main()
{
	CHECK(cudaSetDevice(0));
	float *h_in, *h_out, *d_in, *d_mid, *d_out;
	CHECK(cudaMallocHost((void **)&h_in, bytes));
	CHECK(cudaMallocHost((void **)&h_out, bytes));
	CHECK(cudaMalloc((void **)&d_in, bytes));
	CHECK(cudaMalloc((void **)&d_mid, bytes));
	CHECK(cudaMalloc((void **)&d_out, bytes));
	for (int i = 0; i < n; i++)
		h_in[i] = 3.0f;
	CHECK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));
	cudaStream_t stream;
	CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	const unsigned long long reservedBefore = graphMem(cudaGraphMemAttrReservedMemCurrent);

	// 1. Graph API: tmp = alloc; tmp = 2 * in; out = tmp + in; free tmp.
	cudaGraph_t graph;
	CHECK(cudaGraphCreate(&graph, 0));
	cudaMemAllocNodeParams allocParams = {};
	allocParams.poolProps.allocType = cudaMemAllocationTypePinned;
	allocParams.poolProps.location.type = cudaMemLocationTypeDevice;
	allocParams.poolProps.location.id = 0;
	allocParams.bytesize = bytes;
	cudaGraphNode_t allocNode, kernelsNode, freeNode;
	CHECK(cudaGraphAddMemAllocNode(&allocNode, graph, NULL, 0, &allocParams));
	float *d_tmp = (float *)allocParams.dptr;
	// The two kernels come as a captured graph, embedded after the alloc
	// node as a child graph node.
	cudaGraph_t kernels;
	CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	scale<<<n / 256, 256, 0, stream>>>(d_tmp, d_in, 2.0f, n);  // npurt: CHECK(opScale(d_tmp, d_in, 2.0f, n, stream));
	vectorAdd<<<n / 256, 256, 0, stream>>>(d_tmp, d_in, d_out, n);  // npurt: CHECK(opAdd(d_out, d_tmp, d_in, n, stream));
	CHECK(cudaStreamEndCapture(stream, &kernels));
	size_t numKernels = 0;
	CHECK(cudaGraphGetNodes(kernels, NULL, &numKernels));
	EXPECT(numKernels == 2);
	CHECK(cudaGraphAddChildGraphNode(&kernelsNode, graph, &allocNode, 1, kernels));
	CHECK(cudaGraphAddMemFreeNode(&freeNode, graph, &kernelsNode, 1, d_tmp));
	// kernels names d_tmp, which goes with graph.
	CHECK(cudaGraphDestroy(kernels));
	cudaGraphExec_t exec;
	CHECK(cudaGraphInstantiate(&exec, graph, 0));
	for (int i = 0; i < 10; i++)
		CHECK(cudaGraphLaunch(exec, stream));
	CHECK(cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, stream));
	CHECK(cudaStreamSynchronize(stream));
	expectAll("graph with memory nodes", h_out, 9.0f);
	EXPECT(graphMem(cudaGraphMemAttrReservedMemHigh) >= reservedBefore + bytes);
	std::printf("graph memory reserved: %llu bytes (high %llu)\n",
	            graphMem(cudaGraphMemAttrReservedMemCurrent),
	            graphMem(cudaGraphMemAttrReservedMemHigh));
	CHECK(cudaGraphExecDestroy(exec));
	CHECK(cudaGraphDestroy(graph));
	CHECK(cudaDeviceGraphMemTrim(0));
	EXPECT(graphMem(cudaGraphMemAttrReservedMemCurrent) <= reservedBefore);
	unsigned long long zero = 0;
	CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
	EXPECT(graphMem(cudaGraphMemAttrUsedMemHigh) == graphMem(cudaGraphMemAttrUsedMemCurrent));

	// 2. The same captured from stream-ordered allocation.
	CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	float *d_tmp2;
	CHECK(cudaMallocAsync((void **)&d_tmp2, bytes, stream));
	scale<<<n / 256, 256, 0, stream>>>(d_tmp2, d_in, 4.0f, n);  // npurt: CHECK(opScale(d_tmp2, d_in, 4.0f, n, stream));
	vectorAdd<<<n / 256, 256, 0, stream>>>(d_tmp2, d_in, d_out, n);  // npurt: CHECK(opAdd(d_out, d_tmp2, d_in, n, stream));
	CHECK(cudaFreeAsync(d_tmp2, stream));
	cudaGraph_t captured;
	CHECK(cudaStreamEndCapture(stream, &captured));
	CHECK(cudaGraphInstantiate(&exec, captured, 0));
	CHECK(cudaGraphLaunch(exec, stream));
	CHECK(cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, stream));
	CHECK(cudaStreamSynchronize(stream));
	expectAll("captured graph memory", h_out, 15.0f);
	// A graph with memory nodes cannot be a child graph.
	cudaGraph_t parent;
	cudaGraphNode_t child;
	CHECK(cudaGraphCreate(&parent, 0));
	EXPECT(cudaGraphAddChildGraphNode(&child, parent, NULL, 0, captured) ==
	       cudaErrorNotSupported);
	cudaGetLastError();
	CHECK(cudaGraphExecDestroy(exec));
	CHECK(cudaGraphDestroy(captured));

	// 3. Graphs in graphs: a graph of the two kernels twice as child
	// nodes in a row, then the parent's executable graph launched into a
	// capture, after which an external event record node tells a side
	// stream when each launch of the captured graph is done.
	CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	scale<<<n / 256, 256, 0, stream>>>(d_mid, d_in, 2.0f, n);  // npurt: CHECK(opScale(d_mid, d_in, 2.0f, n, stream));
	vectorAdd<<<n / 256, 256, 0, stream>>>(d_mid, d_in, d_out, n);  // npurt: CHECK(opAdd(d_out, d_mid, d_in, n, stream));
	CHECK(cudaStreamEndCapture(stream, &kernels));
	CHECK(cudaGraphAddChildGraphNode(&child, parent, NULL, 0, kernels));
	cudaGraphNode_t second;
	CHECK(cudaGraphAddChildGraphNode(&second, parent, &child, 1, kernels));
	cudaGraphNodeType type;
	CHECK(cudaGraphNodeGetType(second, &type));
	EXPECT(type == cudaGraphNodeTypeGraph);
	cudaGraph_t embedded;
	CHECK(cudaGraphChildGraphNodeGetGraph(second, &embedded));
	size_t embeddedNodes = 0;
	CHECK(cudaGraphGetNodes(embedded, NULL, &embeddedNodes));
	EXPECT(embeddedNodes == 2);
	cudaGraphExec_t parentExec;
	CHECK(cudaGraphInstantiate(&parentExec, parent, 0));

	cudaStream_t side;
	CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	cudaEvent_t done;
	CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
	CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	CHECK(cudaMemsetAsync(d_out, 0, bytes, stream));
	CHECK(cudaGraphLaunch(parentExec, stream));
	CHECK(cudaEventRecordWithFlags(done, stream, cudaEventRecordExternal));
	cudaGraph_t outer;
	CHECK(cudaStreamEndCapture(stream, &outer));
	size_t outerNodes = 0;
	CHECK(cudaGraphGetNodes(outer, NULL, &outerNodes));
	EXPECT(outerNodes == 3);  // the memset, the child graph, the record
	cudaGraphExec_t outerExec;
	CHECK(cudaGraphInstantiate(&outerExec, outer, 0));
	CHECK(cudaGraphLaunch(outerExec, stream));
	CHECK(cudaStreamWaitEvent(side, done, 0));
	CHECK(cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, side));
	CHECK(cudaStreamSynchronize(side));
	expectAll("child graphs", h_out, 9.0f);
	unsigned long long idMain = 0, idSide = 0;
	CHECK(cudaStreamGetId(stream, &idMain));
	CHECK(cudaStreamGetId(side, &idSide));
	EXPECT(idMain != idSide);
	std::printf("graphs in graphs: ok\n");

	CHECK(cudaGraphExecDestroy(outerExec));
	CHECK(cudaGraphExecDestroy(parentExec));
	CHECK(cudaGraphDestroy(outer));
	CHECK(cudaGraphDestroy(parent));
	CHECK(cudaGraphDestroy(kernels));
	CHECK(cudaEventDestroy(done));
	CHECK(cudaStreamDestroy(side));
	CHECK(cudaStreamDestroy(stream));
	CHECK(cudaFree(d_in));
	CHECK(cudaFree(d_mid));
	CHECK(cudaFree(d_out));
	CHECK(cudaFreeHost(h_in));
	CHECK(cudaFreeHost(h_out));
	std::printf("graphMemoryNodes: PASSED\n");
	return 0;
}

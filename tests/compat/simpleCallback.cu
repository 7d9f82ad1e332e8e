// simpleCallback, in the style of CUDA's sample: each worker's stream runs
// a copy, a kernel and a copy back, then a callback that checks the result
// on the host.
#include <cuda_runtime.h>

#include <atomic>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void incKernel(float *data, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		data[i] *= 4.0f;
}
#endif

struct Worker {
	cudaStream_t stream;
	float *h, *d;
	int n, id;
	cudaError_t status;
	bool ok;
};

static std::atomic<int> done{0};

static void CUDART_CB myStreamCallback(cudaStream_t stream, cudaError_t status, void *data)
{
	Worker *w = (Worker *)data;
	w->status = status;
	w->ok = stream == w->stream;
	for (int i = 0; i < w->n; i++)
		w->ok = w->ok && w->h[i] == (float)(w->id + i % 5) * 4.0f;
	done++;
}

int main()
{
	const int nworkers = 4, n = 1 << 16;
	Worker workers[nworkers];
	for (int k = 0; k < nworkers; k++) {
		Worker &w = workers[k];
		w.n = n;
		w.id = k;
		w.ok = false;
		w.status = cudaErrorUnknown;
		CHECK(cudaStreamCreate(&w.stream));
		CHECK(cudaMallocHost((void **)&w.h, n * sizeof(float)));
		CHECK(cudaMalloc((void **)&w.d, n * sizeof(float)));
		for (int i = 0; i < n; i++)
			w.h[i] = (float)(k + i % 5);
		CHECK(cudaMemcpyAsync(w.d, w.h, n * sizeof(float), cudaMemcpyHostToDevice, w.stream));
		incKernel<<<n / 256, 256, 0, w.stream>>>(w.d, n); // npurt: CHECK(opScale(w.d, w.d, 4.0f, n, w.stream));
		CHECK(cudaMemcpyAsync(w.h, w.d, n * sizeof(float), cudaMemcpyDeviceToHost, w.stream));
		CHECK(cudaStreamAddCallback(w.stream, myStreamCallback, &w, 0));
	}
	for (auto &w : workers)
		CHECK(cudaStreamSynchronize(w.stream));
	EXPECT(done == nworkers);
	for (auto &w : workers) {
		EXPECT(w.status == cudaSuccess && w.ok);
		CHECK(cudaStreamDestroy(w.stream));
		CHECK(cudaFreeHost(w.h));
		CHECK(cudaFree(w.d));
	}
	std::printf("Result = PASS\n");
	return 0;
}

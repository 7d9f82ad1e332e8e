// simpleIPC, in the style of CUDA's sample: the parent shares device memory
// and an event with a child process through shared memory (the handles are
// plain bytes); the child waits for the parent's kernel through the event,
// runs its own on the same memory, and the parent sees the result.
#include <cuda_runtime.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void simpleKernel(float *d, float factor, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		d[i] *= factor;
}
#endif

struct Shared {
	cudaIpcMemHandle_t memHandle;
	cudaIpcEventHandle_t eventHandle;
};

static const int n = 1 << 18;

static int child(Shared *sh, int in, int out)
{
	char c = 0;
	EXPECT(read(in, &c, 1) == 1);
	float *d = nullptr;
	cudaEvent_t ev;
	cudaStream_t s;
	CHECK(cudaIpcOpenMemHandle((void **)&d, sh->memHandle, cudaIpcMemLazyEnablePeerAccess));
	CHECK(cudaIpcOpenEventHandle(&ev, sh->eventHandle));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CHECK(cudaStreamWaitEvent(s, ev, 0));
	simpleKernel<<<n / 256, 256, 0, s>>>(d, 3.0f, n); // npurt: CHECK(opScale(d, d, 3.0f, n, s));
	CHECK(cudaStreamSynchronize(s));
	std::vector<float> h(n);
	CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++)
		EXPECT(h[i] == (float)(i % 9) * 6.0f);
	CHECK(cudaIpcCloseMemHandle(d));
	CHECK(cudaEventDestroy(ev));
	CHECK(cudaStreamDestroy(s));
	EXPECT(write(out, "d", 1) == 1);
	return 0;
}

int main()
{
	Shared *sh = (Shared *)mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
	                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	EXPECT(sh != MAP_FAILED);
	int toChild[2], toParent[2];
	EXPECT(pipe(toChild) == 0 && pipe(toParent) == 0);
	// As in CUDA's sample: fork before the runtime starts in either.
	pid_t pid = fork();
	EXPECT(pid >= 0);
	if (pid == 0)
		_exit(child(sh, toChild[0], toParent[1]));

	float *d = nullptr;
	cudaEvent_t ev;
	cudaStream_t s;
	CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
	CHECK(cudaStreamCreate(&s));
	CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess));
	std::vector<float> h(n);
	for (int i = 0; i < n; i++)
		h[i] = (float)(i % 9);
	CHECK(cudaMemcpyAsync(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
	simpleKernel<<<n / 256, 256, 0, s>>>(d, 2.0f, n); // npurt: CHECK(opScale(d, d, 2.0f, n, s));
	CHECK(cudaEventRecord(ev, s));
	CHECK(cudaIpcGetMemHandle(&sh->memHandle, d));
	CHECK(cudaIpcGetEventHandle(&sh->eventHandle, ev));
	EXPECT(write(toChild[1], "g", 1) == 1);
	char c = 0;
	EXPECT(read(toParent[0], &c, 1) == 1 && c == 'd');
	int status = 0;
	EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++)
		EXPECT(h[i] == (float)(i % 9) * 6.0f);
	CHECK(cudaEventDestroy(ev));
	CHECK(cudaStreamDestroy(s));
	CHECK(cudaFree(d));
	std::printf("Result = PASS\n");
	return 0;
}

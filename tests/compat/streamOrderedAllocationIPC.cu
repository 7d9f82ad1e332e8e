// streamOrderedAllocationIPC, in the style of CUDA's sample: the parent
// makes a shareable memory pool and sends its descriptor to a child over a
// Unix socket (SCM_RIGHTS) with an allocation's export data; the child
// imports the pool and the pointer, runs its kernel on the memory, frees
// its import, and the parent sees the result.
#include <cuda_runtime.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
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

static const int n = 1 << 18;

static void sendShareable(int sock, int fd, const cudaMemPoolPtrExportData &data)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = {};
	iovec iov{const_cast<cudaMemPoolPtrExportData *>(&data), sizeof data};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctrl;
	msg.msg_controllen = sizeof ctrl;
	cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
	EXPECT(sendmsg(sock, &msg, 0) == (ssize_t)sizeof data);
}

static int receiveShareable(int sock, cudaMemPoolPtrExportData *data)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = {};
	iovec iov{data, sizeof *data};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctrl;
	msg.msg_controllen = sizeof ctrl;
	EXPECT(recvmsg(sock, &msg, 0) == (ssize_t)sizeof *data);
	cmsghdr *c = CMSG_FIRSTHDR(&msg);
	EXPECT(c && c->cmsg_type == SCM_RIGHTS);
	int fd = -1;
	std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return fd;
}

static int child(int sock)
{
	cudaMemPoolPtrExportData data;
	int fd = receiveShareable(sock, &data);
	cudaMemPool_t pool;
	float *d = nullptr;
	cudaStream_t s;
	CHECK(cudaSetDevice(0));
	CHECK(cudaMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd,
	                                           cudaMemHandleTypePosixFileDescriptor, 0));
	close(fd);
	CHECK(cudaMemPoolImportPointer((void **)&d, pool, &data));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	simpleKernel<<<n / 256, 256, 0, s>>>(d, 3.0f, n); // npurt: CHECK(opScale(d, d, 3.0f, n, s));
	CHECK(cudaStreamSynchronize(s));
	std::vector<float> h(n);
	CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++)
		EXPECT(h[i] == (float)(i % 9) * 6.0f);
	// Imported pointers are freed before the exporter frees the memory.
	CHECK(cudaFreeAsync(d, s));
	CHECK(cudaStreamSynchronize(s));
	CHECK(cudaStreamDestroy(s));
	CHECK(cudaMemPoolDestroy(pool));
	EXPECT(write(sock, "d", 1) == 1);
	return 0;
}

int main()
{
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	// As in CUDA's sample: fork before the runtime starts in either.
	pid_t pid = fork();
	EXPECT(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(child(sv[1]));
	}
	close(sv[1]);

	int handleTypes = 0;
	CHECK(cudaDeviceGetAttribute(&handleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes, 0));
	EXPECT(handleTypes & cudaMemHandleTypePosixFileDescriptor);
	cudaMemPoolProps props = {};
	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	cudaMemPool_t pool;
	cudaStream_t s;
	float *d = nullptr;
	CHECK(cudaSetDevice(0));
	CHECK(cudaMemPoolCreate(&pool, &props));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CHECK(cudaMallocFromPoolAsync((void **)&d, n * sizeof(float), pool, s));
	std::vector<float> h(n);
	for (int i = 0; i < n; i++)
		h[i] = (float)(i % 9);
	CHECK(cudaMemcpyAsync(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
	simpleKernel<<<n / 256, 256, 0, s>>>(d, 2.0f, n); // npurt: CHECK(opScale(d, d, 2.0f, n, s));
	CHECK(cudaStreamSynchronize(s));
	int fd = -1;
	cudaMemPoolPtrExportData data;
	CHECK(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor,
	                                         0));
	CHECK(cudaMemPoolExportPointer(&data, d));
	sendShareable(sv[0], fd, data);
	close(fd);
	char c = 0;
	EXPECT(read(sv[0], &c, 1) == 1 && c == 'd');
	int status = 0;
	EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++)
		EXPECT(h[i] == (float)(i % 9) * 6.0f);
	CHECK(cudaFreeAsync(d, s));
	CHECK(cudaStreamSynchronize(s));
	CHECK(cudaStreamDestroy(s));
	CHECK(cudaMemPoolDestroy(pool));
	std::printf("Result = PASS\n");
	return 0;
}

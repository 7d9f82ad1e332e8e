// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_prime_test - sharing npu BOs through PRIME (dma-buf).
 *
 * Export with DRM_IOCTL_PRIME_HANDLE_TO_FD and import with
 * DRM_IOCTL_PRIME_FD_TO_HANDLE: between contexts of one device (the same
 * BO), between npu devices (a BO of kind IMPORTED sharing the exporter's
 * pages), between processes over a Unix socket; the memory lives as long
 * as its last user, and device memory accounting (DRM_NPU_QUERY_MEMORY)
 * follows. Tests that need two npu devices skip with one.
 *
 * Needs npu.ko loaded (tools/vmrun); skips when there is no npu render node.
 * The foreign dma-buf test loads vgem when it can (root), and unloads it.
 * regression_* tests reproduce kernel bugs this suite found.
 */

#define _GNU_SOURCE		/* memfd_create() */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"

#define GIB		(1024ULL * 1024 * 1024)
#define BO_PAGES	16

FIXTURE(prime) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	/* The node with device index 0, or -1 when there is none. */
	int fd;
	/* The node with device index 1, or -1 when there is only one. */
	int fd1;
	struct drm_npu_device_info info;
	__u64 page;
	/* A page-aligned device address with room after it. */
	__u64 va;
	/* Size of the BOs the tests share. */
	__u64 size;
};

FIXTURE_SETUP(prime)
{
	int n;

	self->fd = -1;
	self->fd1 = -1;
	self->page = sysconf(_SC_PAGESIZE);
	self->size = BO_PAGES * self->page;
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	if (n > 1)
		self->fd1 = self->nodes[1].fd;
	ASSERT_EQ(0, npu_query_device_info(self->fd, &self->info));
	self->va = (self->info.va_start + GIB - 1) & ~(GIB - 1);
	ASSERT_LE(self->va + GIB, self->info.va_end);
}

FIXTURE_TEARDOWN(prime)
{
	npu_close_nodes(self->nodes, self->num_nodes);
}

/*
 * A SKIP() in FIXTURE_SETUP() does not stop the test body in every version
 * of the harness: bodies return early themselves when this says so.
 */
static bool no_device(int fd)
{
	return fd < 0;
}

/* Another file (context) on the same render node. */
static int reopen(const struct npu_node *node)
{
	return open(node->path, O_RDWR | O_CLOEXEC);
}

static struct drm_npu_memory_info mem_info(struct __test_metadata *_metadata,
					   int fd)
{
	struct drm_npu_memory_info mi;

	ASSERT_EQ(0, npu_query_memory(fd, &mi));
	return mi;
}

/* Device memory use and BO count of @fd's device are @used and @bos. */
static void check_mem(struct __test_metadata *_metadata, int fd, int line,
		      __u64 used, __u64 bos)
{
	struct drm_npu_memory_info mi = mem_info(_metadata, fd);

	ASSERT_EQ(used, mi.used) TH_LOG("from line %d", line);
	ASSERT_EQ(bos, mi.bo_count) TH_LOG("from line %d", line);
}

#define CHECK_MEM(fd, used, bos) check_mem(_metadata, fd, __LINE__, used, bos)

static void check_ctx(struct __test_metadata *_metadata, int fd, int line,
		      const struct drm_npu_context_info *want)
{
	struct drm_npu_context_info got;

	ASSERT_EQ(0, npu_context_info(fd, &got)) TH_LOG("from line %d", line);
	EXPECT_EQ(want->bo_count, got.bo_count) TH_LOG("from line %d", line);
	EXPECT_EQ(want->bo_bytes, got.bo_bytes) TH_LOG("from line %d", line);
	EXPECT_EQ(want->device_bytes, got.device_bytes)
		TH_LOG("from line %d", line);
	EXPECT_EQ(want->pinned_bytes, got.pinned_bytes)
		TH_LOG("from line %d", line);
	EXPECT_EQ(want->mapping_count, got.mapping_count)
		TH_LOG("from line %d", line);
	EXPECT_EQ(want->mapped_bytes, got.mapped_bytes)
		TH_LOG("from line %d", line);
	ASSERT_TRUE(_metadata->passed) TH_LOG("from line %d", line);
}

/* CHECK_CTX(fd, .bo_count = 1, ...): the context holds exactly that. */
#define CHECK_CTX(fd, ...) \
	check_ctx(_metadata, fd, __LINE__, \
		  &(const struct drm_npu_context_info){ __VA_ARGS__ })

/* Whether @size bytes at device address @va of @fd hold pattern @seed. */
static bool device_has_pattern(int fd, __u64 va, size_t size,
			       unsigned int seed, size_t from)
{
	char *buf = malloc(size);
	bool ok;

	if (!buf)
		return false;
	ok = !npu_vm_read(fd, va, buf, size) &&
	     npu_has_pattern(buf, size, seed, from);
	free(buf);
	return ok;
}

/* Write pattern @seed to @size bytes at device address @va of @fd. */
static int device_fill(int fd, __u64 va, size_t size, unsigned int seed)
{
	char *buf = malloc(size);
	int ret;

	if (!buf)
		return -ENOMEM;
	npu_fill_pattern(buf, size, seed);
	ret = npu_vm_write(fd, va, buf, size);
	free(buf);
	return ret;
}

static int send_fd(int sock, int fd)
{
	char cmsg_buf[CMSG_SPACE(sizeof(int))] = { };
	char byte = 'f';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cmsg_buf,
		.msg_controllen = sizeof(cmsg_buf),
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);

	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -errno;
}

/* Receive a file descriptor; a negative errno on failure. */
static int recv_fd(int sock)
{
	char cmsg_buf[CMSG_SPACE(sizeof(int))] = { };
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cmsg_buf,
		.msg_controllen = sizeof(cmsg_buf),
	};
	struct cmsghdr *cmsg;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -EPROTO;
	cmsg = CMSG_FIRSTHDR(&msg);
	if (!cmsg || cmsg->cmsg_level != SOL_SOCKET ||
	    cmsg->cmsg_type != SCM_RIGHTS ||
	    cmsg->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
	return fd;
}

/*
 * Same device, another file: the import is the exporter's BO itself (same
 * size, kind and mmap offset), counted once in device memory, and both
 * contexts see each other's writes.
 */
TEST_F(prime, same_device)
{
	const __u64 size = self->size;
	struct drm_npu_bo_info ia, ib;
	struct drm_npu_memory_info base;
	__u32 ha, hb;
	int fb, dfd, fl;
	char *pa, *pb;

	if (no_device(self->fd))
		return;
	base = mem_info(_metadata, self->fd);
	fb = reopen(&self->nodes[0]);
	ASSERT_LE(0, fb);

	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE, &ha));
	ASSERT_EQ(0, npu_vm_map(self->fd, ha, self->va, size, 0, 0));
	ASSERT_EQ(0, device_fill(self->fd, self->va, size, 1));

	ASSERT_EQ(0, npu_prime_export(self->fd, ha, DRM_CLOEXEC | DRM_RDWR,
				      &dfd));
	ASSERT_LE(0, dfd);
	fl = fcntl(dfd, F_GETFD);
	ASSERT_LE(0, fl);
	ASSERT_TRUE(!!(fl & FD_CLOEXEC));
	fl = fcntl(dfd, F_GETFL);
	ASSERT_LE(0, fl);
	ASSERT_EQ(O_RDWR, fl & O_ACCMODE);

	ASSERT_EQ(0, npu_prime_import(fb, dfd, &hb));
	ASSERT_EQ(0, npu_bo_info(self->fd, ha, &ia));
	ASSERT_EQ(0, npu_bo_info(fb, hb, &ib));
	ASSERT_EQ(size, ib.size);
	ASSERT_EQ((__u32)DRM_NPU_BO_DEVICE, ib.kind);
	ASSERT_EQ(ia.mmap_offset, ib.mmap_offset);
	CHECK_MEM(self->fd, base.used + size, base.bo_count + 1);
	/* Per context: the importer counts the BO (and its device bytes). */
	CHECK_CTX(fb, .bo_count = 1, .bo_bytes = size, .device_bytes = size);

	ASSERT_EQ(0, npu_vm_map(fb, hb, self->va + size, size, 0, 0));
	ASSERT_TRUE(device_has_pattern(fb, self->va + size, size, 1, 0));
	ASSERT_EQ(0, device_fill(fb, self->va + size, size / 2, 2));
	ASSERT_TRUE(device_has_pattern(self->fd, self->va, size / 2, 2, 0));
	ASSERT_TRUE(device_has_pattern(self->fd, self->va + size / 2,
				       size / 2, 1, size / 2));

	/* The CPU sees the same memory through either file. */
	pa = npu_bo_mmap(self->fd, ha, size);
	ASSERT_NE(MAP_FAILED, pa);
	pb = npu_bo_mmap(fb, hb, size);
	ASSERT_NE(MAP_FAILED, pb);
	ASSERT_TRUE(npu_has_pattern(pb, size / 2, 2, 0));
	npu_fill_pattern(pa, size, 3);
	ASSERT_TRUE(npu_has_pattern(pb, size, 3, 0));
	ASSERT_TRUE(device_has_pattern(fb, self->va + size, size, 3, 0));
	ASSERT_EQ(0, munmap(pa, size));
	ASSERT_EQ(0, munmap(pb, size));

	ASSERT_EQ(0, close(dfd));
	ASSERT_EQ(0, npu_vm_unmap(fb, self->va + size, size));
	ASSERT_EQ(0, npu_gem_close(fb, hb));
	CHECK_MEM(self->fd, base.used + size, base.bo_count + 1);
	ASSERT_EQ(0, close(fb));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, ha));
	CHECK_MEM(self->fd, base.used, base.bo_count);
}

/*
 * Importing into the exporting file gives back the exporter's handle;
 * importing twice into another file gives one handle, one BO.
 */
TEST_F(prime, import_same_handle)
{
	__u32 h, h2, hb, hb2;
	int fb, dfd, dfd2;

	if (no_device(self->fd))
		return;
	fb = reopen(&self->nodes[0]);
	ASSERT_LE(0, fb);
	ASSERT_EQ(0, npu_bo_create(self->fd, self->size, DRM_NPU_BO_HOST,
				   &h));
	ASSERT_EQ(0, npu_prime_export(self->fd, h, DRM_CLOEXEC, &dfd));
	ASSERT_EQ(0, npu_prime_import(self->fd, dfd, &h2));
	ASSERT_EQ(h, h2);
	CHECK_CTX(self->fd, .bo_count = 1, .bo_bytes = self->size);

	ASSERT_EQ(0, npu_prime_import(fb, dfd, &hb));
	ASSERT_EQ(0, npu_prime_import(fb, dfd, &hb2));
	ASSERT_EQ(hb, hb2);
	/* A second export is a new fd for the same dma-buf. */
	ASSERT_EQ(0, npu_prime_export(self->fd, h, DRM_CLOEXEC, &dfd2));
	ASSERT_NE(dfd, dfd2);
	ASSERT_EQ(0, npu_prime_import(fb, dfd2, &hb2));
	ASSERT_EQ(hb, hb2);
	CHECK_CTX(fb, .bo_count = 1, .bo_bytes = self->size);

	ASSERT_EQ(0, close(dfd));
	ASSERT_EQ(0, close(dfd2));
	ASSERT_EQ(0, npu_gem_close(fb, hb));
	ASSERT_EQ(-EINVAL, npu_gem_close(fb, hb2));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	ASSERT_EQ(0, close(fb));
}

TEST_F(prime, export_flags)
{
	const __u32 bad[] = {
		1, 4, DRM_CLOEXEC | DRM_RDWR | 1, 0x80000000, 0xffffffff,
	};
	int dfd, fl;
	size_t i;
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->size, DRM_NPU_BO_DEVICE,
				   &h));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		dfd = -1;
		ASSERT_EQ(-EINVAL, npu_prime_export(self->fd, h, bad[i], &dfd))
			TH_LOG("flags 0x%x", bad[i]);
		ASSERT_EQ(-1, dfd);
	}

	/* No flags: read-only, inherited across exec. */
	ASSERT_EQ(0, npu_prime_export(self->fd, h, 0, &dfd));
	fl = fcntl(dfd, F_GETFD);
	ASSERT_LE(0, fl);
	ASSERT_FALSE(!!(fl & FD_CLOEXEC));
	fl = fcntl(dfd, F_GETFL);
	ASSERT_LE(0, fl);
	ASSERT_EQ(O_RDONLY, fl & O_ACCMODE);
	ASSERT_EQ(0, close(dfd));

	ASSERT_EQ(-ENOENT, npu_prime_export(self->fd, h + 1, DRM_CLOEXEC,
					    &dfd));
	ASSERT_EQ(-ENOENT, npu_prime_export(self->fd, 0, DRM_CLOEXEC, &dfd));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	ASSERT_EQ(-ENOENT, npu_prime_export(self->fd, h, DRM_CLOEXEC, &dfd));
}

/* Only dma-bufs import; nothing is created by a failed import. */
TEST_F(prime, import_not_dmabuf)
{
	int p[2], closed, memfd;
	__u32 h = 0;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(-EINVAL, npu_prime_import(self->fd, p[0], &h));
	ASSERT_EQ(-EINVAL, npu_prime_import(self->fd, p[1], &h));
	ASSERT_EQ(-EINVAL, npu_prime_import(self->fd, self->fd, &h));
	memfd = memfd_create("npu_prime_test", MFD_CLOEXEC);
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, self->size));
	ASSERT_EQ(-EINVAL, npu_prime_import(self->fd, memfd, &h));
	ASSERT_EQ(-EBADF, npu_prime_import(self->fd, -1, &h));
	closed = dup(p[0]);
	ASSERT_LE(0, closed);
	ASSERT_EQ(0, close(closed));
	ASSERT_EQ(-EBADF, npu_prime_import(self->fd, closed, &h));
	ASSERT_EQ(0U, h);
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(0, close(p[0]));
	ASSERT_EQ(0, close(p[1]));
	ASSERT_EQ(0, close(memfd));
}

/* Userptr BOs cannot be exported; the BO stays usable. */
TEST_F(prime, userptr_export)
{
	char *m, buf[16];
	int dfd = -1;
	__u32 h;

	if (no_device(self->fd))
		return;
	m = mmap(NULL, self->size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 0x42, self->size);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, self->size, 0, &h));
	ASSERT_EQ(-EINVAL, npu_prime_export(self->fd, h,
					    DRM_CLOEXEC | DRM_RDWR, &dfd));
	ASSERT_EQ(-1, dfd);
	ASSERT_EQ(-EINVAL, npu_prime_export(self->fd, h, 0, &dfd));
	ASSERT_EQ(0, npu_vm_map(self->fd, h, self->va, self->size, 0, 0));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0x42));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, self->size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	ASSERT_EQ(0, munmap(m, self->size));
}

/*
 * Another npu device: a BO of kind IMPORTED, the exporter's size, no mmap
 * offset, no device memory of its own; the data is shared both ways.
 */
static void check_cross_device(struct __test_metadata *_metadata, int fd0,
			       int fd1, __u64 va, __u64 page, __u32 kind)
{
	const __u64 size = BO_PAGES * page;
	struct drm_npu_memory_info base0, base1;
	struct drm_npu_bo_info info;
	__u32 h0, h1, h1b;
	int dfd;
	char *p;

	base0 = mem_info(_metadata, fd0);
	base1 = mem_info(_metadata, fd1);
	ASSERT_EQ(0, npu_bo_create(fd0, size, kind, &h0));
	p = npu_bo_mmap(fd0, h0, size);
	ASSERT_NE(MAP_FAILED, p);
	npu_fill_pattern(p, size, 10);
	ASSERT_EQ(0, npu_prime_export(fd0, h0, DRM_CLOEXEC | DRM_RDWR,
				      &dfd));

	ASSERT_EQ(0, npu_prime_import(fd1, dfd, &h1));
	ASSERT_EQ(0, npu_prime_import(fd1, dfd, &h1b));
	ASSERT_EQ(h1, h1b);
	ASSERT_EQ(0, npu_bo_info(fd1, h1, &info));
	ASSERT_EQ(size, info.size);
	ASSERT_EQ((__u32)DRM_NPU_BO_IMPORTED, info.kind);
	ASSERT_EQ(0ULL, info.mmap_offset);
	ASSERT_EQ(MAP_FAILED, npu_bo_mmap(fd1, h1, size));

	CHECK_MEM(fd0, base0.used + (kind == DRM_NPU_BO_DEVICE ? size : 0),
		  base0.bo_count + 1);
	CHECK_MEM(fd1, base1.used, base1.bo_count + 1);
	CHECK_CTX(fd1, .bo_count = 1, .bo_bytes = size);

	/* The whole BO, and a window of it. */
	ASSERT_EQ(0, npu_vm_map(fd1, h1, va, size, 0, 0));
	ASSERT_EQ(0, npu_vm_map(fd1, h1, va + size, 2 * page,
				3 * page, DRM_NPU_VM_READONLY));
	ASSERT_TRUE(device_has_pattern(fd1, va, size, 10, 0));
	ASSERT_TRUE(device_has_pattern(fd1, va + size, 2 * page,
				       10, 3 * page));

	ASSERT_EQ(0, device_fill(fd1, va, size, 11));
	ASSERT_TRUE(npu_has_pattern(p, size, 11, 0));
	ASSERT_EQ(0, npu_vm_map(fd0, h0, va, size, 0, 0));
	ASSERT_TRUE(device_has_pattern(fd0, va, size, 11, 0));
	ASSERT_EQ(0, device_fill(fd0, va, size, 12));
	ASSERT_TRUE(device_has_pattern(fd1, va + size, 2 * page,
				       12, 3 * page));

	ASSERT_EQ(0, npu_vm_unmap(fd0, va, size));
	ASSERT_EQ(0, npu_vm_unmap(fd1, va, size));
	ASSERT_EQ(0, npu_vm_unmap(fd1, va + size, 2 * page));
	ASSERT_EQ(0, npu_gem_close(fd1, h1));
	CHECK_MEM(fd1, base1.used, base1.bo_count);
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, close(dfd));
	ASSERT_EQ(0, npu_gem_close(fd0, h0));
	CHECK_MEM(fd0, base0.used, base0.bo_count);
}

TEST_F(prime, cross_device_device_bo)
{
	if (no_device(self->fd))
		return;
	if (self->fd1 < 0)
		SKIP(return, "needs two npu devices (num_devices=2)");
	check_cross_device(_metadata, self->fd, self->fd1, self->va,
			   self->page, DRM_NPU_BO_DEVICE);
}

TEST_F(prime, cross_device_host_bo)
{
	if (no_device(self->fd))
		return;
	if (self->fd1 < 0)
		SKIP(return, "needs two npu devices (num_devices=2)");
	check_cross_device(_metadata, self->fd, self->fd1, self->va,
			   self->page, DRM_NPU_BO_HOST);
}

/*
 * Re-exporting an imported BO hands out the original dma-buf: back on the
 * exporting device it is the original BO (and handle).
 */
TEST_F(prime, cross_device_reexport)
{
	struct drm_npu_bo_info info;
	__u32 h0, h1, h0b, hc;
	int dfd, dfd1, fc;

	if (no_device(self->fd))
		return;
	if (self->fd1 < 0)
		SKIP(return, "needs two npu devices (num_devices=2)");
	ASSERT_EQ(0, npu_bo_create(self->fd, self->size, DRM_NPU_BO_DEVICE,
				   &h0));
	ASSERT_EQ(0, npu_prime_export(self->fd, h0, DRM_CLOEXEC, &dfd));
	ASSERT_EQ(0, npu_prime_import(self->fd1, dfd, &h1));
	ASSERT_EQ(0, close(dfd));

	ASSERT_EQ(0, npu_prime_export(self->fd1, h1, DRM_CLOEXEC, &dfd1));
	ASSERT_EQ(0, npu_prime_import(self->fd, dfd1, &h0b));
	ASSERT_EQ(h0, h0b);
	fc = reopen(&self->nodes[0]);
	ASSERT_LE(0, fc);
	ASSERT_EQ(0, npu_prime_import(fc, dfd1, &hc));
	ASSERT_EQ(0, npu_bo_info(fc, hc, &info));
	ASSERT_EQ((__u32)DRM_NPU_BO_DEVICE, info.kind);
	ASSERT_NE(0ULL, info.mmap_offset);

	ASSERT_EQ(0, close(fc));
	ASSERT_EQ(0, close(dfd1));
	ASSERT_EQ(0, npu_gem_close(self->fd1, h1));
	ASSERT_EQ(0, npu_gem_close(self->fd, h0));
}

/*
 * The importer keeps the memory: the exporter closes its handle, its file
 * and the dma-buf, and the data is still there; device memory is given back
 * only when the last importer's handle and mappings are gone.
 */
TEST_F(prime, outlives_exporter)
{
	const __u64 size = self->size;
	struct drm_npu_memory_info base0, base1 = { };
	struct drm_npu_bo_info info;
	__u32 he, h0, h1 = 0;
	int fe, dfd;
	char *p;

	if (no_device(self->fd))
		return;
	base0 = mem_info(_metadata, self->fd);
	if (self->fd1 >= 0)
		base1 = mem_info(_metadata, self->fd1);
	fe = reopen(&self->nodes[0]);
	ASSERT_LE(0, fe);
	ASSERT_EQ(0, npu_bo_create(fe, size, DRM_NPU_BO_DEVICE, &he));
	p = npu_bo_mmap(fe, he, size);
	ASSERT_NE(MAP_FAILED, p);
	npu_fill_pattern(p, size, 20);
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, npu_prime_export(fe, he, DRM_CLOEXEC | DRM_RDWR, &dfd));
	ASSERT_EQ(0, npu_prime_import(self->fd, dfd, &h0));
	if (self->fd1 >= 0)
		ASSERT_EQ(0, npu_prime_import(self->fd1, dfd, &h1));

	ASSERT_EQ(0, npu_gem_close(fe, he));
	ASSERT_EQ(0, close(fe));
	ASSERT_EQ(0, close(dfd));
	CHECK_MEM(self->fd, base0.used + size, base0.bo_count + 1);

	ASSERT_EQ(0, npu_bo_info(self->fd, h0, &info));
	ASSERT_EQ(size, info.size);
	ASSERT_EQ(0, npu_vm_map(self->fd, h0, self->va, size, 0, 0));
	ASSERT_TRUE(device_has_pattern(self->fd, self->va, size, 20, 0));
	ASSERT_EQ(0, device_fill(self->fd, self->va, size, 21));

	/* The last handle on this device goes; the mapping holds the BO. */
	ASSERT_EQ(0, npu_gem_close(self->fd, h0));
	CHECK_MEM(self->fd, base0.used + size, base0.bo_count + 1);
	ASSERT_TRUE(device_has_pattern(self->fd, self->va, size, 21, 0));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	if (self->fd1 < 0) {
		CHECK_MEM(self->fd, base0.used, base0.bo_count);
		return;
	}

	/* The other device's import still holds it. */
	CHECK_MEM(self->fd, base0.used + size, base0.bo_count + 1);
	CHECK_MEM(self->fd1, base1.used, base1.bo_count + 1);
	ASSERT_EQ(0, npu_vm_map(self->fd1, h1, self->va, size, 0, 0));
	ASSERT_TRUE(device_has_pattern(self->fd1, self->va, size, 21, 0));
	ASSERT_EQ(0, npu_gem_close(self->fd1, h1));
	CHECK_MEM(self->fd, base0.used + size, base0.bo_count + 1);
	ASSERT_EQ(0, device_fill(self->fd1, self->va, size, 22));
	ASSERT_TRUE(device_has_pattern(self->fd1, self->va, size, 22, 0));
	ASSERT_EQ(0, npu_vm_unmap(self->fd1, self->va, size));
	CHECK_MEM(self->fd, base0.used, base0.bo_count);
	CHECK_MEM(self->fd1, base1.used, base1.bo_count);
}

/*
 * Child: import the dma-buf it receives on its own files (this device, and
 * the second one if there is one), check and change the data, tell the
 * parent, then check the data again after the parent let go of everything.
 */
static void scm_child(struct __test_metadata *_metadata,
		      const struct npu_node *nodes, int num_nodes, __u64 va,
		      __u64 size, int sock)
{
	const __u64 half = size / 2;
	struct drm_npu_bo_info info;
	int dfd, f0, f1 = -1;
	__u32 h0, h1;
	char c = 'r';

	dfd = recv_fd(sock);
	ASSERT_LE(0, dfd);
	f0 = reopen(&nodes[0]);
	ASSERT_LE(0, f0);
	ASSERT_EQ(0, npu_prime_import(f0, dfd, &h0));
	ASSERT_EQ(0, npu_bo_info(f0, h0, &info));
	ASSERT_EQ(size, info.size);
	ASSERT_EQ((__u32)DRM_NPU_BO_DEVICE, info.kind);
	ASSERT_EQ(0, npu_vm_map(f0, h0, va, size, 0, 0));
	ASSERT_TRUE(device_has_pattern(f0, va, size, 30, 0));
	ASSERT_EQ(0, device_fill(f0, va, half, 31));

	if (num_nodes > 1) {
		f1 = reopen(&nodes[1]);
		ASSERT_LE(0, f1);
		ASSERT_EQ(0, npu_prime_import(f1, dfd, &h1));
		ASSERT_EQ(0, npu_bo_info(f1, h1, &info));
		ASSERT_EQ((__u32)DRM_NPU_BO_IMPORTED, info.kind);
		ASSERT_EQ(0, npu_vm_map(f1, h1, va, size, 0, 0));
		ASSERT_TRUE(device_has_pattern(f1, va, half, 31, 0));
		ASSERT_TRUE(device_has_pattern(f1, va + half, half, 30,
					       half));
		ASSERT_EQ(0, device_fill(f1, va + half, half, 32));
		ASSERT_EQ(0, npu_gem_close(f1, h1));
	}
	ASSERT_EQ(0, close(dfd));
	ASSERT_EQ(0, npu_gem_close(f0, h0));

	ASSERT_EQ(1, write(sock, &c, 1));
	ASSERT_EQ(1, read(sock, &c, 1));
	ASSERT_TRUE(device_has_pattern(f0, va, half, 31, 0));
	if (f1 >= 0) {
		ASSERT_TRUE(device_has_pattern(f1, va + half, half, 32,
					       0));
		ASSERT_TRUE(device_has_pattern(f0, va + half, half, 32,
					       0));
		ASSERT_EQ(0, close(f1));
	}
	ASSERT_EQ(0, close(f0));
	_exit(0);
}

/*
 * A dma-buf passed to another process over a Unix socket (SCM_RIGHTS)
 * imports there; the child's mappings keep the memory after the parent
 * closed its handle and its file.
 */
TEST_F(prime, child_process)
{
	const __u64 size = self->size, half = size / 2;
	struct drm_npu_memory_info base;
	int sv[2], fe, dfd;
	char *p, c = 'g';
	bool two;
	__u32 he;
	pid_t pid;

	if (no_device(self->fd))
		return;
	base = mem_info(_metadata, self->fd);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	fe = reopen(&self->nodes[0]);
	ASSERT_LE(0, fe);
	ASSERT_EQ(0, npu_bo_create(fe, size, DRM_NPU_BO_DEVICE, &he));
	p = npu_bo_mmap(fe, he, size);
	ASSERT_NE(MAP_FAILED, p);
	npu_fill_pattern(p, size, 30);
	ASSERT_EQ(0, npu_prime_export(fe, he, DRM_CLOEXEC | DRM_RDWR, &dfd));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(sv[0]);
		scm_child(_metadata, self->nodes, self->num_nodes, self->va,
			  size, sv[1]);
	}
	ASSERT_EQ(0, close(sv[1]));
	ASSERT_EQ(0, send_fd(sv[0], dfd));
	ASSERT_EQ(0, close(dfd));
	if (read(sv[0], &c, 1) != 1)
		ASSERT_EQ(0, npu_wait_child(pid)) TH_LOG("child failed");

	/* What the child wrote, on one device or both. */
	ASSERT_TRUE(npu_has_pattern(p, half, 31, 0));
	two = self->num_nodes > 1;
	ASSERT_TRUE(npu_has_pattern(p + half, half, two ? 32 : 30,
				    two ? 0 : half));

	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, npu_gem_close(fe, he));
	ASSERT_EQ(0, close(fe));
	CHECK_MEM(self->fd, base.used + size, base.bo_count + 1);

	ASSERT_EQ(1, write(sv[0], &c, 1));
	ASSERT_EQ(0, npu_wait_child(pid));
	CHECK_MEM(self->fd, base.used, base.bo_count);
	ASSERT_EQ(0, close(sv[0]));
}

/*
 * The dma-buf itself can be mapped: DRM_RDWR exports map read-write,
 * read-only exports refuse a shared writable mapping. It was a bug: on 6.1
 * drm_gem_dmabuf_mmap() needs drm_driver.gem_prime_mmap, which npu does
 * not set, so mmap() of an npu dma-buf fails with -ENOSYS (from 6.6 on the
 * core maps GEM dma-bufs itself).
 */
TEST_F(prime, regression_dmabuf_mmap)
{
	const __u64 size = self->size;
	int rw, ro;
	char *p, *q;
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE, &h));
	ASSERT_EQ(0, npu_vm_map(self->fd, h, self->va, size, 0, 0));
	ASSERT_EQ(0, device_fill(self->fd, self->va, size, 40));
	ASSERT_EQ(0, npu_prime_export(self->fd, h, DRM_CLOEXEC | DRM_RDWR,
				      &rw));
	/*
	 * A second export reuses the BO's dma-buf (core DRM): its access mode
	 * is the first export's, so it is read-write too.
	 */
	ASSERT_EQ(0, npu_prime_export(self->fd, h, DRM_CLOEXEC, &ro));

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("mmap: %s", strerror(errno));
	ASSERT_TRUE(npu_has_pattern(p, size, 40, 0));
	npu_fill_pattern(p, size, 41);
	ASSERT_TRUE(device_has_pattern(self->fd, self->va, size, 41, 0));

	q = mmap(NULL, size, PROT_READ, MAP_SHARED, ro, 0);
	ASSERT_NE(MAP_FAILED, q);
	ASSERT_TRUE(npu_has_pattern(q, size, 41, 0));
	ASSERT_EQ(0, munmap(q, size));

	/* Past the end of the BO. */
	q = mmap(NULL, size + self->page, PROT_READ, MAP_SHARED, rw, 0);
	ASSERT_EQ(MAP_FAILED, q);

	/* The mapping holds the BO after every handle and fd is gone. */
	ASSERT_EQ(0, close(rw));
	ASSERT_EQ(0, close(ro));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	npu_fill_pattern(p, size, 42);
	ASSERT_TRUE(npu_has_pattern(p, size, 42, 0));
	ASSERT_EQ(0, munmap(p, size));
}

/* Open the DRM primary node of driver @name; -ENOENT if there is none. */
static int open_card_of(const char *name)
{
	char path[64], drv[32];
	struct drm_version v;
	int i, fd;

	for (i = 0; i < 64; i++) {
		snprintf(path, sizeof(path), "%s/card%d", NPU_DRI_DIR, i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(&v, 0, sizeof(v));
		memset(drv, 0, sizeof(drv));
		v.name = drv;
		v.name_len = sizeof(drv) - 1;
		if (!ioctl(fd, DRM_IOCTL_VERSION, &v) && !strcmp(drv, name))
			return fd;
		close(fd);
	}
	return -ENOENT;
}

/*
 * A dma-buf of another exporter (vgem, loaded for the test when the kernel
 * has it) is refused with -EOPNOTSUPP: the emulated device reaches memory
 * through struct pages that other exporters need not have.
 */
TEST_F(prime, import_foreign_dmabuf)
{
	struct drm_mode_create_dumb dumb = {
		.width = 1024,
		.height = 4,
		.bpp = 32,
	};
	bool loaded = false;
	int vfd, dfd, ret;
	__u32 h = 0;

	if (no_device(self->fd))
		return;
	vfd = open_card_of("vgem");
	if (vfd < 0) {
		if (geteuid() || system("modprobe vgem 2>/dev/null"))
			SKIP(return, "no vgem driver to export a foreign dma-buf");
		loaded = true;
		vfd = open_card_of("vgem");
	}
	ASSERT_LE(0, vfd) TH_LOG("vgem loaded, but no vgem card node");

	ret = npu_ioctl(vfd, DRM_IOCTL_MODE_CREATE_DUMB, &dumb);
	ASSERT_EQ(0, ret) TH_LOG("vgem dumb buffer: %s", strerror(-ret));
	ASSERT_EQ(0, npu_prime_export(vfd, dumb.handle, DRM_CLOEXEC | DRM_RDWR,
				      &dfd));
	ASSERT_EQ(-EOPNOTSUPP, npu_prime_import(self->fd, dfd, &h));
	ASSERT_EQ(0U, h);
	CHECK_CTX(self->fd, .bo_count = 0);
	if (self->fd1 >= 0)
		ASSERT_EQ(-EOPNOTSUPP, npu_prime_import(self->fd1, dfd, &h));

	ASSERT_EQ(0, close(dfd));
	ASSERT_EQ(0, close(vfd));
	if (loaded && system("modprobe -r vgem 2>/dev/null"))
		TH_LOG("could not unload vgem");
}

TEST_HARNESS_MAIN

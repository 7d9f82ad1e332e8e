// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_mem_test - the memory uAPI of the npu driver.
 *
 * BOs (DRM_IOCTL_NPU_BO_CREATE, BO_FROM_USERPTR, BO_INFO, GEM_CLOSE, mmap),
 * device memory accounting (DRM_NPU_QUERY_MEMORY), the per-context device
 * address space (DRM_IOCTL_NPU_VM_BIND) and the emulated MMU behind
 * DRM_IOCTL_NPU_VM_ACCESS, context isolation, DRM_IOCTL_NPU_CONTEXT_INFO,
 * leaks after a killed process (debugfs npu_memory) and concurrent use of
 * one file. PRIME sharing is in npu_prime_test.c.
 *
 * Needs npu.ko loaded (tools/vmrun) and root (debugfs, RLIMIT_MEMLOCK and
 * capability tests); skips when there is no npu render node. The test that
 * fills the whole device memory skips when the device has more than 256 MiB
 * (load the module with mem_size_mb=64 to run it).
 *
 * The regression_* tests at the end reproduce kernel bugs this suite found.
 */

#define _GNU_SOURCE		/* memfd_create() */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"

#define KIB			1024ULL
#define MIB			(1024 * KIB)
#define GIB			(1024 * MIB)
#define TIB			(1024 * GIB)
/* The driver's largest BO (NPU_BO_MAX_SIZE in npu_gem.c). */
#define BO_MAX_SIZE		TIB
/* The largest VM_ACCESS transfer (NPU_VM_ACCESS_MAX in npu_vm.c). */
#define VM_ACCESS_MAX		(64 * MIB)
/* Fill the device memory only when it is at most this large. */
#define CAPACITY_TEST_MAX	(256 * MIB)
#define OOM_CHUNKS		8
#define POISON			0xa5
#define NUM_THREADS		4
#define THREAD_LOOPS		40
/* Device address space of each thread in the concurrency test. */
#define THREAD_VA_SPAN		GIB
#define MEMLOCK_LIMIT		(64 * KIB)
#define DEBUGFS_SETTLE_MS	2000
#define TAINTED_PATH		"/proc/sys/kernel/tainted"
/* TAINT_WARN: bit 9 of the taint mask. */
#define TAINT_WARN		0x200L
#define KMSG_PATH		"/dev/kmsg"
#define KMSG_RECORD_MAX		8192

FIXTURE(mem) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	/* The node with device index 0, or -1 when there is none. */
	int fd;
	struct drm_npu_device_info info;
	__u64 page;
	/* A page-aligned device address with room after it. */
	__u64 va;
};

FIXTURE_SETUP(mem)
{
	int n;

	self->fd = -1;
	self->page = sysconf(_SC_PAGESIZE);
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	ASSERT_EQ(0, npu_query_device_info(self->fd, &self->info));
	self->va = (self->info.va_start + GIB - 1) & ~(GIB - 1);
	ASSERT_LE(self->va + NUM_THREADS * THREAD_VA_SPAN, self->info.va_end);
}

FIXTURE_TEARDOWN(mem)
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

static __u64 page_round(__u64 size, __u64 page)
{
	return (size + page - 1) & ~(page - 1);
}

static void *anon_map(size_t len, int prot)
{
	return mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

/* Another file (context) on the same render node. */
static int reopen(const struct npu_node *node)
{
	return open(node->path, O_RDWR | O_CLOEXEC);
}

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

static struct drm_npu_memory_info mem_info(struct __test_metadata *_metadata,
					   int fd)
{
	struct drm_npu_memory_info mi;

	ASSERT_EQ(0, npu_query_memory(fd, &mi));
	return mi;
}

static __u64 mem_used(struct __test_metadata *_metadata, int fd)
{
	return mem_info(_metadata, fd).used;
}

/* mm->pinned_vm of this process in KiB (VmPin in /proc/self/status). */
static long vm_pinned_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f;

	f = fopen("/proc/self/status", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmPin: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

/* Create a BO of @kind and map all of it at @va. */
static __u32 mapped_bo(struct __test_metadata *_metadata, int fd, __u32 kind,
		       __u64 size, __u64 va)
{
	__u32 handle = 0;

	ASSERT_EQ(0, npu_bo_create(fd, size, kind, &handle));
	ASSERT_EQ(0, npu_vm_map(fd, handle, va, size, 0, 0));
	return handle;
}

/* ---- BO_CREATE ---------------------------------------------------- */

static void check_bo_create(struct __test_metadata *_metadata, int fd,
			    __u64 page, __u32 kind)
{
	const __u64 sizes[] = {
		1, page - 1, page, page + 1, 5 * page + 123, MIB,
	};
	__u64 used = mem_used(_metadata, fd);
	struct drm_npu_bo_info info;
	__u32 handle;
	unsigned char *p;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		__u64 size = page_round(sizes[i], page);

		ASSERT_EQ(0, npu_bo_create(fd, sizes[i], kind, &handle))
			TH_LOG("kind %u size %llu", kind, sizes[i]);
		ASSERT_NE(0U, handle);

		memset(&info, POISON, sizeof(info));
		info.handle = handle;
		info.flags = 0;
		ASSERT_EQ(0, npu_ioctl(fd, DRM_IOCTL_NPU_BO_INFO, &info));
		ASSERT_EQ(handle, info.handle);
		ASSERT_EQ(size, info.size) TH_LOG("asked %llu", sizes[i]);
		ASSERT_EQ(kind, info.kind);
		ASSERT_EQ(0U, info.status);
		ASSERT_NE(0ULL, info.mmap_offset);
		ASSERT_EQ(0ULL, info.mmap_offset % page);
		CHECK_CTX(fd, .bo_count = 1, .bo_bytes = size,
			  .device_bytes = kind == DRM_NPU_BO_DEVICE ? size : 0);

		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			 info.mmap_offset);
		ASSERT_NE(MAP_FAILED, p) TH_LOG("mmap: %s", strerror(errno));
		ASSERT_TRUE(npu_all_bytes(p, size, 0)) TH_LOG("not zeroed");
		npu_fill_pattern(p, size, i);
		ASSERT_TRUE(npu_has_pattern(p, size, i, 0));
		ASSERT_EQ(0, munmap(p, size));

		/* A second mapping sees what the first one wrote. */
		p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd,
			 info.mmap_offset);
		ASSERT_NE(MAP_FAILED, p);
		ASSERT_TRUE(npu_has_pattern(p, size, i, 0));
		ASSERT_EQ(0, munmap(p, size));

		ASSERT_EQ(0, npu_gem_close(fd, handle));
		CHECK_CTX(fd, .bo_count = 0);
		ASSERT_EQ(used, mem_used(_metadata, fd));
	}
}

TEST_F(mem, bo_create_device)
{
	if (no_device(self->fd))
		return;
	check_bo_create(_metadata, self->fd, self->page, DRM_NPU_BO_DEVICE);
}

TEST_F(mem, bo_create_host)
{
	if (no_device(self->fd))
		return;
	check_bo_create(_metadata, self->fd, self->page, DRM_NPU_BO_HOST);
}

/* A rejected BO_CREATE leaves nothing behind and writes no handle. */
static void bo_create_fails(struct __test_metadata *_metadata, int fd,
			    struct drm_npu_bo_create *args, int err)
{
	struct drm_npu_memory_info before = mem_info(_metadata, fd);
	struct drm_npu_memory_info after;

	args->handle = 0;
	ASSERT_EQ(err, npu_ioctl(fd, DRM_IOCTL_NPU_BO_CREATE, args))
		TH_LOG("size 0x%llx kind %u flags 0x%x pad 0x%x",
		       args->size, args->kind, args->flags, args->pad);
	ASSERT_EQ(0U, args->handle);
	CHECK_CTX(fd, .bo_count = 0);
	after = mem_info(_metadata, fd);
	ASSERT_EQ(before.used, after.used);
	ASSERT_EQ(before.bo_count, after.bo_count);
}

TEST_F(mem, bo_create_zero_size)
{
	struct drm_npu_bo_create args = { .size = 0 };

	if (no_device(self->fd))
		return;
	args.kind = DRM_NPU_BO_DEVICE;
	bo_create_fails(_metadata, self->fd, &args, -EINVAL);
	args.kind = DRM_NPU_BO_HOST;
	bo_create_fails(_metadata, self->fd, &args, -EINVAL);
}

/* Above the driver's 1 TiB limit: -EINVAL before any allocation. */
TEST_F(mem, bo_create_huge)
{
	const __u64 sizes[] = {
		BO_MAX_SIZE + 1, BO_MAX_SIZE + self->page, 2 * BO_MAX_SIZE,
		1ULL << 62, 1ULL << 63,
	};
	const __u32 kinds[] = { DRM_NPU_BO_DEVICE, DRM_NPU_BO_HOST };
	struct drm_npu_bo_create args = { };
	size_t i, k;

	if (no_device(self->fd))
		return;
	for (k = 0; k < ARRAY_SIZE(kinds); k++) {
		for (i = 0; i < ARRAY_SIZE(sizes); i++) {
			args.size = sizes[i];
			args.kind = kinds[k];
			bo_create_fails(_metadata, self->fd, &args, -EINVAL);
		}
	}
}

/* Sizes that wrap around when rounded up to the page. */
TEST_F(mem, bo_create_size_overflow)
{
	const __u64 sizes[] = {
		~0ULL, ~0ULL - 1, ~0ULL - self->page + 2,
	};
	const __u32 kinds[] = { DRM_NPU_BO_DEVICE, DRM_NPU_BO_HOST };
	struct drm_npu_bo_create args = { };
	size_t i, k;

	if (no_device(self->fd))
		return;
	for (k = 0; k < ARRAY_SIZE(kinds); k++) {
		for (i = 0; i < ARRAY_SIZE(sizes); i++) {
			args.size = sizes[i];
			args.kind = kinds[k];
			bo_create_fails(_metadata, self->fd, &args, -EINVAL);
		}
	}
}

/*
 * Exactly the 1 TiB limit passes the size check; device memory that small
 * cannot hold it: -ENOMEM from the capacity check, before any allocation.
 */
TEST_F(mem, bo_create_max_size_device)
{
	struct drm_npu_bo_create args = {
		.size = BO_MAX_SIZE,
		.kind = DRM_NPU_BO_DEVICE,
	};

	if (no_device(self->fd))
		return;
	if (self->info.mem_capacity >= BO_MAX_SIZE)
		SKIP(return, "device memory of %llu bytes holds 1 TiB",
		     self->info.mem_capacity);
	bo_create_fails(_metadata, self->fd, &args, -ENOMEM);
}

TEST_F(mem, bo_create_bad_kind)
{
	const __u32 kinds[] = {
		DRM_NPU_BO_USERPTR, DRM_NPU_BO_IMPORTED, 4, 0x80000000,
		0xffffffff,
	};
	struct drm_npu_bo_create args = { .size = self->page };
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(kinds); i++) {
		args.kind = kinds[i];
		bo_create_fails(_metadata, self->fd, &args, -EINVAL);
	}
}

TEST_F(mem, bo_create_bad_flags)
{
	const __u32 flags[] = { 1, 2, 0x80000000, 0xffffffff };
	struct drm_npu_bo_create args = { .size = self->page };
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(flags); i++) {
		args.flags = flags[i];
		args.kind = DRM_NPU_BO_DEVICE;
		bo_create_fails(_metadata, self->fd, &args, -EINVAL);
		args.kind = DRM_NPU_BO_HOST;
		bo_create_fails(_metadata, self->fd, &args, -EINVAL);
	}
}

TEST_F(mem, bo_create_bad_pad)
{
	const __u32 pads[] = { 1, 0x80000000, 0xffffffff };
	struct drm_npu_bo_create args = { .size = self->page };
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(pads); i++) {
		args.pad = pads[i];
		args.kind = DRM_NPU_BO_DEVICE;
		bo_create_fails(_metadata, self->fd, &args, -EINVAL);
		args.kind = DRM_NPU_BO_HOST;
		bo_create_fails(_metadata, self->fd, &args, -EINVAL);
	}
}

/* ---- device memory accounting ------------------------------------- */

/*
 * QUERY_MEMORY: used grows by the (rounded) size of DEVICE BOs only, the
 * BO count by every BO, the context count by every open file.
 */
TEST_F(mem, memory_accounting)
{
	const __u64 dsize = MIB + 1, hsize = 3 * MIB;
	const __u64 drounded = page_round(dsize, self->page);
	struct drm_npu_memory_info base, mi;
	__u32 dev, host;
	int fd2;

	if (no_device(self->fd))
		return;
	base = mem_info(_metadata, self->fd);
	ASSERT_EQ(self->info.mem_capacity, base.capacity);
	ASSERT_LE(base.used, base.capacity);

	ASSERT_EQ(0, npu_bo_create(self->fd, dsize, DRM_NPU_BO_DEVICE, &dev));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used + drounded, mi.used);
	ASSERT_EQ(base.bo_count + 1, mi.bo_count);

	ASSERT_EQ(0, npu_bo_create(self->fd, hsize, DRM_NPU_BO_HOST, &host));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used + drounded, mi.used);
	ASSERT_EQ(base.bo_count + 2, mi.bo_count);
	ASSERT_EQ(base.capacity, mi.capacity);

	ASSERT_EQ(0, npu_gem_close(self->fd, dev));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count + 1, mi.bo_count);

	ASSERT_EQ(0, npu_gem_close(self->fd, host));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count, mi.bo_count);

	fd2 = reopen(&self->nodes[0]);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(base.context_count + 1,
		  mem_info(_metadata, self->fd).context_count);
	ASSERT_EQ(0, close(fd2));
	ASSERT_EQ(base.context_count,
		  mem_info(_metadata, self->fd).context_count);
}

/* A CPU mapping holds the BO (and its device memory) after GEM_CLOSE. */
TEST_F(mem, mmap_outlives_close)
{
	const __u64 size = 16 * self->page;
	__u64 used;
	__u32 handle;
	void *p;

	if (no_device(self->fd))
		return;
	used = mem_used(_metadata, self->fd);
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE,
				   &handle));
	p = npu_bo_mmap(self->fd, handle, size);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(used + size, mem_used(_metadata, self->fd));

	npu_fill_pattern(p, size, 3);
	ASSERT_TRUE(npu_has_pattern(p, size, 3, 0));
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(used, mem_used(_metadata, self->fd));
}

/* A DEVICE BO larger than what is free: -ENOMEM, nothing charged. */
TEST_F(mem, device_memory_too_big)
{
	struct drm_npu_memory_info mi;
	struct drm_npu_bo_create args = { .kind = DRM_NPU_BO_DEVICE };
	__u32 host;

	if (no_device(self->fd))
		return;
	mi = mem_info(_metadata, self->fd);
	args.size = mi.capacity - mi.used + self->page;
	bo_create_fails(_metadata, self->fd, &args, -ENOMEM);
	args.size = mi.capacity + 1;
	bo_create_fails(_metadata, self->fd, &args, -ENOMEM);

	/* Host memory is not device memory. */
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &host));
	ASSERT_EQ(0, npu_gem_close(self->fd, host));
}

/*
 * Fill the device memory exactly, fail one more page with -ENOMEM, free a
 * chunk and allocate it again, then free everything: used returns to the
 * baseline.
 */
TEST_F_TIMEOUT(mem, device_memory_full, 180)
{
	__u32 handles[OOM_CHUNKS + 1], extra, host;
	struct drm_npu_memory_info base, mi;
	__u64 chunk, left, size;
	int n = 0, i;

	if (no_device(self->fd))
		return;
	base = mem_info(_metadata, self->fd);
	if (base.capacity > CAPACITY_TEST_MAX)
		SKIP(return, "%llu MiB of device memory; runs at %llu or less",
		     base.capacity / MIB, CAPACITY_TEST_MAX / MIB);

	left = base.capacity - base.used;
	chunk = page_round(left / OOM_CHUNKS, self->page);
	while (left) {
		size = left < chunk ? left : chunk;
		ASSERT_GT(OOM_CHUNKS + 1, n);
		ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE,
					   &handles[n]))
			TH_LOG("chunk %d of %llu bytes, %llu left", n, size,
			       left);
		left -= size;
		n++;
	}
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(mi.capacity, mi.used);

	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, self->page,
					 DRM_NPU_BO_DEVICE, &extra));
	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, 1, DRM_NPU_BO_DEVICE,
					 &extra));
	ASSERT_EQ(mi.capacity, mem_used(_metadata, self->fd));
	ASSERT_EQ(mi.bo_count, mem_info(_metadata, self->fd).bo_count);

	/* Host BOs do not use device memory. */
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &host));
	ASSERT_EQ(0, npu_gem_close(self->fd, host));

	/* Recovery: free one chunk, allocate it again, fail once more. */
	ASSERT_EQ(0, npu_gem_close(self->fd, handles[0]));
	ASSERT_EQ(mi.capacity - chunk, mem_used(_metadata, self->fd));
	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, chunk + self->page,
					 DRM_NPU_BO_DEVICE, &extra));
	ASSERT_EQ(0, npu_bo_create(self->fd, chunk, DRM_NPU_BO_DEVICE,
				   &handles[0]));
	ASSERT_EQ(mi.capacity, mem_used(_metadata, self->fd));
	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, self->page,
					 DRM_NPU_BO_DEVICE, &extra));

	for (i = 0; i < n; i++)
		ASSERT_EQ(0, npu_gem_close(self->fd, handles[i]));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count, mi.bo_count);
	CHECK_CTX(self->fd, .bo_count = 0);
}

/* ---- GEM_CLOSE, BO_INFO, mmap ------------------------------------- */

TEST_F(mem, gem_close_twice)
{
	__u32 handle;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_DEVICE,
				   &handle));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	ASSERT_EQ(-EINVAL, npu_gem_close(self->fd, handle));
	ASSERT_EQ(-EINVAL, npu_gem_close(self->fd, 0));
	ASSERT_EQ(-EINVAL, npu_gem_close(self->fd, 0xffffffff));
	CHECK_CTX(self->fd, .bo_count = 0);
}

TEST_F(mem, bo_info_unknown_handle)
{
	struct drm_npu_bo_info info;
	__u32 handle;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(-ENOENT, npu_bo_info(self->fd, 0, &info));
	ASSERT_EQ(-ENOENT, npu_bo_info(self->fd, 1, &info));
	ASSERT_EQ(-ENOENT, npu_bo_info(self->fd, 0xffffffff, &info));

	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &handle));
	ASSERT_EQ(0, npu_bo_info(self->fd, handle, &info));
	ASSERT_EQ(-ENOENT, npu_bo_info(self->fd, handle + 1, &info));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	ASSERT_EQ(-ENOENT, npu_bo_info(self->fd, handle, &info));
}

TEST_F(mem, bo_info_bad_flags)
{
	const __u32 flags[] = { 1, 2, 0x80000000, 0xffffffff };
	struct drm_npu_bo_info info;
	__u32 handle;
	size_t i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_DEVICE,
				   &handle));
	for (i = 0; i < ARRAY_SIZE(flags); i++) {
		memset(&info, 0, sizeof(info));
		info.handle = handle;
		info.flags = flags[i];
		ASSERT_EQ(-EINVAL, npu_ioctl(self->fd, DRM_IOCTL_NPU_BO_INFO,
					     &info))
			TH_LOG("flags 0x%x", flags[i]);
		ASSERT_EQ(0ULL, info.size);
		ASSERT_EQ(0ULL, info.mmap_offset);
	}
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
}

/* Only the whole BO, or a prefix, from its start can be mapped. */
TEST_F(mem, mmap_bad_range)
{
	const __u64 size = 2 * self->page;
	struct drm_npu_bo_info info;
	__u32 handle;
	void *p;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE,
				   &handle));
	ASSERT_EQ(0, npu_bo_info(self->fd, handle, &info));

	/* Past the end. */
	p = mmap(NULL, size + self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, info.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);

	/* Starting inside the BO, even within its size. */
	p = mmap(NULL, self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, info.mmap_offset + self->page);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);

	/* Bogus offsets. */
	p = mmap(NULL, self->page, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);
	p = mmap(NULL, self->page, PROT_READ, MAP_SHARED, self->fd,
		 info.mmap_offset + 64 * GIB);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);

	/* A prefix is fine. */
	p = mmap(NULL, self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, info.mmap_offset);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, munmap(p, self->page));

	/* Gone with the BO. */
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 info.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);
}

/* ---- userptr ------------------------------------------------------ */

TEST_F(mem, userptr_basic)
{
	const size_t size = 4 * self->page;
	struct drm_npu_bo_info info;
	__u32 h1, h2;
	long pinned;
	void *buf, *m;

	if (no_device(self->fd))
		return;
	pinned = vm_pinned_kib();
	ASSERT_LE(0, pinned);

	ASSERT_EQ(0, posix_memalign(&buf, self->page, size));
	memset(buf, 0, size);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, buf, size, 0, &h1));
	ASSERT_EQ(0, npu_bo_info(self->fd, h1, &info));
	ASSERT_EQ(h1, info.handle);
	ASSERT_EQ((__u64)size, info.size);
	ASSERT_EQ((__u32)DRM_NPU_BO_USERPTR, info.kind);
	ASSERT_EQ(0U, info.status);
	ASSERT_EQ(0ULL, info.mmap_offset);
	CHECK_CTX(self->fd, .bo_count = 1, .bo_bytes = size,
		  .pinned_bytes = size);
	ASSERT_EQ(pinned + (long)(size / KIB), vm_pinned_kib());

	m = anon_map(2 * size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, 2 * size, 0, &h2));
	ASSERT_NE(h1, h2);
	ASSERT_EQ(0, npu_bo_info(self->fd, h2, &info));
	ASSERT_EQ((__u64)(2 * size), info.size);
	ASSERT_EQ((__u32)DRM_NPU_BO_USERPTR, info.kind);
	CHECK_CTX(self->fd, .bo_count = 2, .bo_bytes = 3 * size,
		  .pinned_bytes = 3 * size);
	ASSERT_EQ(pinned + (long)(3 * size / KIB), vm_pinned_kib());

	ASSERT_EQ(0, npu_gem_close(self->fd, h1));
	ASSERT_EQ(0, npu_gem_close(self->fd, h2));
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(pinned, vm_pinned_kib());
	ASSERT_EQ(0, munmap(m, 2 * size));
	free(buf);
}

/* A rejected BO_FROM_USERPTR pins nothing and creates nothing. */
static void userptr_fails(struct __test_metadata *_metadata, int fd,
			  __u64 ptr, __u64 size, __u32 flags, int err)
{
	struct drm_npu_bo_userptr args = {
		.user_ptr = ptr,
		.size = size,
		.flags = flags,
	};
	struct drm_npu_context_info before, after;
	long pinned = vm_pinned_kib();

	ASSERT_EQ(0, npu_context_info(fd, &before));
	ASSERT_EQ(err, npu_ioctl(fd, DRM_IOCTL_NPU_BO_FROM_USERPTR, &args))
		TH_LOG("ptr 0x%llx size 0x%llx flags 0x%x", ptr, size, flags);
	ASSERT_EQ(0U, args.handle);
	ASSERT_EQ(0, npu_context_info(fd, &after));
	ASSERT_EQ(0, memcmp(&before, &after, sizeof(before)));
	ASSERT_EQ(pinned, vm_pinned_kib());
}

TEST_F(mem, userptr_misaligned)
{
	const __u64 page = self->page;
	__u64 p;
	void *m;

	if (no_device(self->fd))
		return;
	m = anon_map(4 * page, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	p = (__u64)(uintptr_t)m;
	userptr_fails(_metadata, self->fd, p + 1, page, 0, -EINVAL);
	userptr_fails(_metadata, self->fd, p + page / 2, page, 0, -EINVAL);
	userptr_fails(_metadata, self->fd, p + page - 1, 2 * page, 0,
		      -EINVAL);
	userptr_fails(_metadata, self->fd, p, 1, 0, -EINVAL);
	userptr_fails(_metadata, self->fd, p, page - 1, 0, -EINVAL);
	userptr_fails(_metadata, self->fd, p, page + 1, 0, -EINVAL);
	userptr_fails(_metadata, self->fd, p, 3 * page + 8, 0, -EINVAL);
	ASSERT_EQ(0, munmap(m, 4 * page));
}

TEST_F(mem, userptr_zero_size)
{
	void *m;

	if (no_device(self->fd))
		return;
	m = anon_map(self->page, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, 0, 0,
		      -EINVAL);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, 0,
		      DRM_NPU_BO_USERPTR_READONLY, -EINVAL);
	ASSERT_EQ(0, munmap(m, self->page));
}

TEST_F(mem, userptr_overflow)
{
	const __u64 page = self->page;
	const __u64 top = ~0ULL & ~(page - 1);

	if (no_device(self->fd))
		return;
	/* ptr + size wraps past 2^64. */
	userptr_fails(_metadata, self->fd, top, 2 * page, 0, -EINVAL);
	userptr_fails(_metadata, self->fd, top - page, 4 * page, 0,
		      -EINVAL);
	userptr_fails(_metadata, self->fd, page, top, 0, -EINVAL);
	/* Longer than the driver's largest BO. */
	userptr_fails(_metadata, self->fd, page, BO_MAX_SIZE + page, 0,
		      -EINVAL);
	/* No wrap, but kernel addresses are no user memory. */
	userptr_fails(_metadata, self->fd, top - page, page, 0, -EFAULT);
	userptr_fails(_metadata, self->fd, 0xffff888000000000ULL, page, 0,
		      -EFAULT);
}

TEST_F(mem, userptr_unmapped)
{
	const size_t size = 4 * self->page;
	__u32 handle;
	char *m;

	if (no_device(self->fd))
		return;
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0, munmap(m, size));
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, size, 0,
		      -EFAULT);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, size,
		      DRM_NPU_BO_USERPTR_READONLY, -EFAULT);

	/* Only the last page missing: the pages before are unpinned again. */
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 1, size);
	ASSERT_EQ(0, munmap(m + size - self->page, self->page));
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, size, 0,
		      -EFAULT);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size - self->page, 0,
				    &handle));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));

	/* A PROT_NONE hole in the middle. */
	ASSERT_EQ(0, mprotect(m + self->page, self->page, PROT_NONE));
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m,
		      size - self->page, 0, -EFAULT);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m,
		      size - self->page, DRM_NPU_BO_USERPTR_READONLY, -EFAULT);
	ASSERT_EQ(0, munmap(m, size - self->page));
	userptr_fails(_metadata, self->fd, 0, self->page, 0, -EFAULT);
}

TEST_F(mem, userptr_bad_flags)
{
	const __u32 flags[] = {
		2, 4, DRM_NPU_BO_USERPTR_READONLY | 2, 0x80000000, 0xffffffff,
	};
	size_t i;
	void *m;

	if (no_device(self->fd))
		return;
	m = anon_map(self->page, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	for (i = 0; i < ARRAY_SIZE(flags); i++)
		userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m,
			      self->page, flags[i], -EINVAL);
	ASSERT_EQ(0, munmap(m, self->page));
}

/*
 * A read-only user mapping can be registered read-only; a writable pin of
 * it fails with -EFAULT. The device sees what the CPU wrote before.
 */
TEST_F(mem, userptr_readonly)
{
	const size_t size = 2 * self->page;
	__u32 h_ro, h_zero;
	char *m, *z, *buf;
	__u64 fault;

	if (no_device(self->fd))
		return;
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	npu_fill_pattern(m, size, 9);
	ASSERT_EQ(0, mprotect(m, size, PROT_READ));
	buf = malloc(size);
	ASSERT_NE(NULL, buf);

	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, size, 0,
		      -EFAULT);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size,
				    DRM_NPU_BO_USERPTR_READONLY, &h_ro));
	CHECK_CTX(self->fd, .bo_count = 1, .bo_bytes = size,
		  .pinned_bytes = size);

	ASSERT_EQ(0, npu_vm_map(self->fd, h_ro, self->va, size, 0,
				DRM_NPU_VM_READONLY));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 9, 0));
	ASSERT_EQ(-EACCES, npu_vm_access(self->fd, self->va + 5, buf, 10,
					 true, &fault));
	ASSERT_EQ(self->va + 5, fault);
	ASSERT_TRUE(npu_has_pattern(m, size, 9, 0));

	/* Never-touched read-only memory: the device reads zeroes. */
	z = anon_map(size, PROT_READ);
	ASSERT_NE(MAP_FAILED, z);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)z, size, 0,
		      -EFAULT);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, z, size,
				    DRM_NPU_BO_USERPTR_READONLY, &h_zero));
	ASSERT_EQ(0, npu_vm_map(self->fd, h_zero, self->va + size, size, 0,
				DRM_NPU_VM_READONLY));
	memset(buf, POISON, size);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + size, buf, size));
	ASSERT_TRUE(npu_all_bytes(buf, size, 0));

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + size, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h_ro));
	ASSERT_EQ(0, npu_gem_close(self->fd, h_zero));
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(0, munmap(m, size));
	ASSERT_EQ(0, munmap(z, size));
	free(buf);
}

/*
 * @top (a mkdtemp() template) becomes a folder with an ext4 image (a file
 * system that writes back) mounted on @top/mnt through a loop device (the
 * drivers loaded first: the guest has no udev static nodes to load loop on
 * demand, and the kernel's modprobe is not the chroot's); false, and
 * nothing left, if this system cannot do it.
 */
static bool mount_ext4(char *top)
{
	char cmd[512];

	if (!mkdtemp(top))
		return false;
	snprintf(cmd, sizeof(cmd),
		 "modprobe -q loop; modprobe -q ext4; cd %s && truncate -s 8M img && mkfs.ext4 -q -F img && mkdir mnt && mount -o loop img mnt",
		 top);
	if (system(cmd) == 0)
		return true;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", top);
	return false;
}

static void umount_ext4(const char *top)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "umount %s/mnt && rm -rf %s", top, top);
	if (system(cmd))
		fprintf(stderr, "cannot unmount and remove %s\n", top);
}

/*
 * A shared mapping of a file its file system writes back is not pinned
 * writable (the device's writes would bypass the file system's dirty
 * tracking: Linux 6.5's GUP refuses such pins, 6.1's took them), in one
 * errno on every kernel. Read-only it is pinned, and the device sees what
 * the CPU writes to the file later. A private mapping of the file, and
 * shmem (memfd), are pinned writable.
 */
TEST_F(mem, userptr_written_back_file)
{
	const size_t size = 4 * self->page;
	char top[] = "/tmp/npu-ext4-XXXXXX", path[64];
	__u32 h_ro, h_priv, h_shm;
	char *m, *mp, *ms, *buf;
	int fd, memfd;

	if (no_device(self->fd))
		return;
	if (geteuid() != 0 || !mount_ext4(top))
		SKIP(return, "cannot mount an ext4 image (needs root, loop, mkfs.ext4)");
	snprintf(path, sizeof(path), "%s/mnt/f", top);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, size));
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, m);
	npu_fill_pattern(m, size, 3);
	buf = malloc(size);
	ASSERT_NE(NULL, buf);

	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, size, 0,
		      -EOPNOTSUPP);
	/* Read-only now: mprotect could make it writable under the pin. */
	ASSERT_EQ(0, mprotect(m, size, PROT_READ));
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)m, size, 0,
		      -EOPNOTSUPP);
	ASSERT_EQ(0, mprotect(m, size, PROT_READ | PROT_WRITE));
	/* One page of it in an otherwise anonymous range is enough. */
	ms = anon_map(2 * size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, ms);
	ASSERT_EQ(ms + size, mmap(ms + size, self->page, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_FIXED, fd, 0));
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)ms, 2 * size, 0,
		      -EOPNOTSUPP);
	ASSERT_EQ(0, munmap(ms, 2 * size));

	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size,
				    DRM_NPU_BO_USERPTR_READONLY, &h_ro));
	ASSERT_EQ(0, npu_vm_map(self->fd, h_ro, self->va, size, 0,
				DRM_NPU_VM_READONLY));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 3, 0));
	npu_fill_pattern(m, size, 4);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 4, 0));

	/* Private: the device writes the process's copy, not the file. */
	mp = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	ASSERT_NE(MAP_FAILED, mp);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, mp, size, 0, &h_priv));
	ASSERT_EQ(0, npu_vm_map(self->fd, h_priv, self->va + size, size, 0,
				0));
	npu_fill_pattern(buf, size, 5);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va + size, buf, size));
	ASSERT_TRUE(npu_has_pattern(mp, size, 5, 0));
	ASSERT_TRUE(npu_has_pattern(m, size, 4, 0));

	/* shmem does not write back. */
	memfd = memfd_create("npu_mem_test", MFD_CLOEXEC);
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, size));
	ms = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, ms);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, ms, size, 0, &h_shm));
	ASSERT_EQ(0, npu_vm_map(self->fd, h_shm, self->va + 2 * size, size, 0,
				0));
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va + 2 * size, buf, size));
	ASSERT_TRUE(npu_has_pattern(ms, size, 5, 0));

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + size, size));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + 2 * size, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h_ro));
	ASSERT_EQ(0, npu_gem_close(self->fd, h_priv));
	ASSERT_EQ(0, npu_gem_close(self->fd, h_shm));
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(0, munmap(m, size));
	ASSERT_EQ(0, munmap(mp, size));
	ASSERT_EQ(0, munmap(ms, size));
	close(memfd);
	close(fd);
	free(buf);
	umount_ext4(top);
}

/*
 * Registering a buffer before filling it is the common pattern: what the
 * CPU writes after BO_FROM_USERPTR must reach the device, read-only or not.
 * The range is untouched at registration: no pages behind it yet.
 */
static void check_fill_after_register(struct __test_metadata *_metadata,
				      int fd, __u64 va, __u64 page,
				      __u32 flags)
{
	const size_t size = 2 * page;
	__u32 map_flags = flags & DRM_NPU_BO_USERPTR_READONLY ?
		DRM_NPU_VM_READONLY : 0;
	char *m, *buf;
	__u32 h;

	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	buf = malloc(size);
	ASSERT_NE(NULL, buf);

	ASSERT_EQ(0, npu_bo_userptr(fd, m, size, flags, &h));
	ASSERT_EQ(0, npu_vm_map(fd, h, va, size, 0, map_flags));
	npu_fill_pattern(m, size, 21);
	ASSERT_EQ(0, npu_vm_read(fd, va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 21, 0))
		TH_LOG("CPU writes made after BO_FROM_USERPTR are lost (the device reads 0x%02x)",
		       (unsigned char)buf[0]);

	ASSERT_EQ(0, npu_vm_unmap(fd, va, size));
	ASSERT_EQ(0, npu_gem_close(fd, h));
	ASSERT_EQ(0, munmap(m, size));
	free(buf);
}

TEST_F(mem, userptr_fill_after_register)
{
	if (no_device(self->fd))
		return;
	check_fill_after_register(_metadata, self->fd, self->va, self->page,
				  0);
}

/* The pages stay pinned and reachable after the user range is unmapped. */
TEST_F(mem, userptr_outlives_munmap)
{
	const size_t size = 4 * self->page;
	long pinned;
	__u32 handle;
	char *m, *buf;

	if (no_device(self->fd))
		return;
	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	pinned = vm_pinned_kib();
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	npu_fill_pattern(m, size, 4);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size, 0, &handle));
	ASSERT_EQ(0, npu_vm_map(self->fd, handle, self->va, size, 0, 0));
	ASSERT_EQ(0, munmap(m, size));

	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 4, 0));
	npu_fill_pattern(buf, size, 5);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf, size));
	memset(buf, 0, size);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 5, 0));
	ASSERT_EQ(pinned + (long)(size / KIB), vm_pinned_kib());

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	ASSERT_EQ(pinned, vm_pinned_kib());
	free(buf);
}

static __u32 bo_status(struct __test_metadata *_metadata, int fd,
			__u32 handle)
{
	struct drm_npu_bo_info info;

	memset(&info, 0xa5, sizeof(info));
	info.handle = handle;
	info.flags = 0;
	EXPECT_EQ(0, npu_ioctl(fd, DRM_IOCTL_NPU_BO_INFO, &info));
	return info.status;
}

/*
 * A userptr BO stays usable but reports STALE once its user range no
 * longer certainly maps the pinned pages; writes through the mapping it
 * pinned do not count. Device and host BOs never report it.
 */
TEST_F(mem, userptr_stale_when_the_range_changes)
{
	const size_t size = 4 * self->page;
	enum { UNMAP, PROTECT, DONTNEED, REMAP, N };
	__u32 handle[N], dev;
	char *m[N];
	int i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < N; i++) {
		m[i] = anon_map(size, PROT_READ | PROT_WRITE);
		ASSERT_NE(MAP_FAILED, m[i]);
		npu_fill_pattern(m[i], size, i);
		ASSERT_EQ(0, npu_bo_userptr(self->fd, m[i], size, 0,
					    &handle[i]));
		EXPECT_EQ(0U, bo_status(_metadata, self->fd, handle[i]));
		npu_fill_pattern(m[i], size, i + 10);
		EXPECT_EQ(0U, bo_status(_metadata, self->fd, handle[i]));
	}
	ASSERT_EQ(0, munmap(m[UNMAP] + self->page, self->page));
	ASSERT_EQ(0, mprotect(m[PROTECT], self->page, PROT_READ));
	ASSERT_EQ(0, madvise(m[DONTNEED] + 2 * self->page, self->page,
			     MADV_DONTNEED));
	ASSERT_NE(MAP_FAILED, mmap(m[REMAP], size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
				   0));
	for (i = 0; i < N; i++) {
		EXPECT_EQ((__u32)DRM_NPU_BO_STATUS_STALE,
			  bo_status(_metadata, self->fd, handle[i]))
			TH_LOG("case %d", i);
		EXPECT_EQ(0, npu_gem_close(self->fd, handle[i]));
		munmap(m[i], size);
	}

	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE, &dev));
	EXPECT_EQ(0U, bo_status(_metadata, self->fd, dev));
	EXPECT_EQ(0, npu_gem_close(self->fd, dev));
}

/* A BO's own CPU mapping has no struct pages to pin: -EFAULT. */
TEST_F(mem, userptr_of_bo_mmap)
{
	const size_t size = 2 * self->page;
	__u32 handle;
	void *p;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_HOST, &handle));
	p = npu_bo_mmap(self->fd, handle, size);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 1, size);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)p, size, 0,
		      -EFAULT);
	userptr_fails(_metadata, self->fd, (__u64)(uintptr_t)p, size,
		      DRM_NPU_BO_USERPTR_READONLY, -EFAULT);
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
}

TEST_F(mem, userptr_no_mmap)
{
	const size_t size = 2 * self->page;
	struct drm_npu_bo_info info;
	__u32 handle;
	void *m, *p;

	if (no_device(self->fd))
		return;
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size, 0, &handle));
	ASSERT_EQ(0, npu_bo_info(self->fd, handle, &info));
	ASSERT_EQ(0ULL, info.mmap_offset);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 info.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	ASSERT_EQ(0, munmap(m, size));
}

static void memlock_child(struct __test_metadata *_metadata, int fd,
			  __u64 page, bool drop_cap)
{
	struct rlimit rl = { MEMLOCK_LIMIT, MEMLOCK_LIMIT };
	const size_t big = MIB, half = MEMLOCK_LIMIT / 2;
	__u32 h_big, h1, h2, h3;
	char *m;

	m = anon_map(big, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 1, big);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
	if (!drop_cap) {
		/* CAP_IPC_LOCK lifts the limit. */
		ASSERT_EQ(0, npu_bo_userptr(fd, m, big, 0, &h_big));
		ASSERT_EQ(0, npu_gem_close(fd, h_big));
		_exit(0);
	}
	ASSERT_EQ(0, npu_drop_cap(CAP_IPC_LOCK));

	ASSERT_EQ(-ENOMEM, npu_bo_userptr(fd, m, big, 0, &h_big));
	ASSERT_EQ(0, vm_pinned_kib());
	ASSERT_EQ(0, npu_bo_userptr(fd, m, half, 0, &h1));
	ASSERT_EQ(0, npu_bo_userptr(fd, m + half, half, 0, &h2));
	/* At the limit now: one more page is too much. */
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(fd, m + 2 * half, page, 0, &h3));
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(fd, m + 2 * half, page,
					  DRM_NPU_BO_USERPTR_READONLY, &h3));
	ASSERT_EQ((long)(MEMLOCK_LIMIT / KIB), vm_pinned_kib());
	/* Closing one gives its share back. */
	ASSERT_EQ(0, npu_gem_close(fd, h1));
	ASSERT_EQ(0, npu_bo_userptr(fd, m + 2 * half, half, 0, &h3));
	ASSERT_EQ(0, npu_gem_close(fd, h2));
	ASSERT_EQ(0, npu_gem_close(fd, h3));
	ASSERT_EQ(0, vm_pinned_kib());
	_exit(0);
}

/*
 * RLIMIT_MEMLOCK of 64 KiB without CAP_IPC_LOCK: 1 MiB is -ENOMEM, 32 KiB
 * twice fits, a page more does not. With CAP_IPC_LOCK the limit is lifted.
 */
TEST_F(mem, userptr_memlock)
{
	int i, status;
	pid_t pid;

	if (no_device(self->fd))
		return;
	if (geteuid())
		SKIP(return, "needs root to set the capability under test");
	for (i = 0; i < 2; i++) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid)
			memlock_child(_metadata, self->fd, self->page, i);
		status = npu_wait_child(pid);
		ASSERT_EQ(0, status) TH_LOG("child %s CAP_IPC_LOCK failed",
					    i ? "without" : "with");
	}
	CHECK_CTX(self->fd, .bo_count = 0);
}

/* ---- VM_BIND ------------------------------------------------------ */

/*
 * Map a BO, write and read it through the device address, and see the
 * same bytes through the BO's own CPU mapping, both ways.
 */
static void check_map_access(struct __test_metadata *_metadata, int fd,
			     __u64 va, __u32 kind, __u64 page)
{
	const size_t size = 4 * page;
	__u32 handle;
	char *buf, *p;
	__u64 fault;

	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	handle = mapped_bo(_metadata, fd, kind, size, va);
	p = npu_bo_mmap(fd, handle, size);
	ASSERT_NE(MAP_FAILED, p);

	memset(buf, POISON, size);
	ASSERT_EQ(0, npu_vm_read(fd, va, buf, size));
	ASSERT_TRUE(npu_all_bytes(buf, size, 0));

	npu_fill_pattern(buf, size, kind + 1);
	ASSERT_EQ(0, npu_vm_write(fd, va, buf, size));
	memset(buf, 0, size);
	ASSERT_EQ(0, npu_vm_read(fd, va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, kind + 1, 0));
	ASSERT_TRUE(npu_has_pattern(p, size, kind + 1, 0));

	npu_fill_pattern(p, size, kind + 50);
	ASSERT_EQ(0, npu_vm_read(fd, va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, kind + 50, 0));

	ASSERT_EQ(0, npu_vm_unmap(fd, va, size));
	ASSERT_EQ(-ENXIO, npu_vm_access(fd, va, buf, size, false, &fault));
	ASSERT_EQ(va, fault);
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, npu_gem_close(fd, handle));
	CHECK_CTX(fd, .bo_count = 0);
	free(buf);
}

TEST_F(mem, vm_bind_device)
{
	if (no_device(self->fd))
		return;
	check_map_access(_metadata, self->fd, self->va, DRM_NPU_BO_DEVICE,
			 self->page);
}

TEST_F(mem, vm_bind_host)
{
	if (no_device(self->fd))
		return;
	check_map_access(_metadata, self->fd, self->va, DRM_NPU_BO_HOST,
			 self->page);
}

/* Device writes land in the user's memory and the other way round. */
TEST_F(mem, vm_bind_userptr)
{
	const size_t size = 4 * self->page;
	__u32 handle;
	char *m, *buf;

	if (no_device(self->fd))
		return;
	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	npu_fill_pattern(m, size, 30);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size, 0, &handle));
	ASSERT_EQ(0, npu_vm_map(self->fd, handle, self->va, size, 0, 0));

	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 30, 0));
	npu_fill_pattern(buf, size, 31);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(m, size, 31, 0));
	npu_fill_pattern(m, size, 32);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 32, 0));

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	ASSERT_EQ(0, munmap(m, size));
	free(buf);
}

/* A window into a BO: bo_offset selects where the device address lands. */
TEST_F(mem, vm_bind_bo_offset)
{
	const __u64 page = self->page, size = 8 * page;
	__u32 handle;
	char *p, *buf;

	if (no_device(self->fd))
		return;
	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE,
				   &handle));
	p = npu_bo_mmap(self->fd, handle, size);
	ASSERT_NE(MAP_FAILED, p);
	npu_fill_pattern(p, size, 40);

	ASSERT_EQ(0, npu_vm_map(self->fd, handle, self->va, 2 * page,
				3 * page, 0));
	/* The last page alone, and the same BO a second time (aliasing). */
	ASSERT_EQ(0, npu_vm_map(self->fd, handle, self->va + 4 * page, page,
				size - page, 0));
	ASSERT_EQ(0, npu_vm_map(self->fd, handle, self->va + 8 * page, size,
				0, 0));
	CHECK_CTX(self->fd, .bo_count = 1, .bo_bytes = size,
		  .device_bytes = size, .mapping_count = 3,
		  .mapped_bytes = size + 3 * page);

	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, 2 * page));
	ASSERT_TRUE(npu_has_pattern(buf, 2 * page, 40, 3 * page));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + 4 * page, buf, page));
	ASSERT_TRUE(npu_has_pattern(buf, page, 40, size - page));

	/* A write through one alias shows through the other and the CPU. */
	memset(buf, 0x3c, page);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va + page, buf, page));
	ASSERT_TRUE(npu_all_bytes(p + 4 * page, page, 0x3c));
	memset(buf, 0, page);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + 12 * page, buf, page));
	ASSERT_TRUE(npu_all_bytes(buf, page, 0x3c));

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, 2 * page));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + 4 * page, page));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + 8 * page, size));
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, handle));
	CHECK_CTX(self->fd, .bo_count = 0);
	free(buf);
}

/* A rejected VM_BIND changes nothing in the address space. */
static void bind_fails(struct __test_metadata *_metadata, int fd,
		       struct drm_npu_vm_bind *args, int err)
{
	struct drm_npu_context_info before, after;

	ASSERT_EQ(0, npu_context_info(fd, &before));
	ASSERT_EQ(err, npu_ioctl(fd, DRM_IOCTL_NPU_VM_BIND, args))
		TH_LOG("op %u flags 0x%x handle %u pad 0x%x addr 0x%llx size 0x%llx off 0x%llx",
		       args->op, args->flags, args->handle, args->pad,
		       args->addr, args->size, args->bo_offset);
	ASSERT_EQ(0, npu_context_info(fd, &after));
	ASSERT_EQ(before.mapping_count, after.mapping_count);
	ASSERT_EQ(before.mapped_bytes, after.mapped_bytes);
	ASSERT_EQ(before.bo_count, after.bo_count);
}

static void map_fails(struct __test_metadata *_metadata, int fd,
		      __u32 handle, __u64 addr, __u64 size, __u64 bo_offset,
		      __u32 flags, int err)
{
	struct drm_npu_vm_bind args = {
		.op = DRM_NPU_VM_MAP,
		.flags = flags,
		.handle = handle,
		.addr = addr,
		.size = size,
		.bo_offset = bo_offset,
	};

	bind_fails(_metadata, fd, &args, err);
}

static void unmap_fails(struct __test_metadata *_metadata, int fd,
			__u64 addr, __u64 size, int err)
{
	struct drm_npu_vm_bind args = {
		.op = DRM_NPU_VM_UNMAP,
		.addr = addr,
		.size = size,
	};

	bind_fails(_metadata, fd, &args, err);
}

TEST_F(mem, vm_bind_misaligned)
{
	const __u64 page = self->page, va = self->va;
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, 4 * page, DRM_NPU_BO_HOST, &h));
	map_fails(_metadata, self->fd, h, va + 1, page, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va + page / 2, page, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, 1, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, page + 1, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, 2 * page - 8, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, page, 1, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, page, page / 2, 0, -EINVAL);

	ASSERT_EQ(0, npu_vm_map(self->fd, h, va, 2 * page, 0, 0));
	unmap_fails(_metadata, self->fd, va + 1, 2 * page, -EINVAL);
	unmap_fails(_metadata, self->fd, va, 2 * page - 1, -EINVAL);
	ASSERT_EQ(0, npu_vm_unmap(self->fd, va, 2 * page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_zero_size)
{
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &h));
	map_fails(_metadata, self->fd, h, self->va, 0, 0, 0, -EINVAL);
	unmap_fails(_metadata, self->fd, self->va, 0, -EINVAL);
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_past_bo)
{
	const __u64 page = self->page, size = 4 * page, va = self->va;
	const __u64 top = ~0ULL & ~(page - 1);
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE, &h));
	map_fails(_metadata, self->fd, h, va, size + page, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, page, size, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, 2 * page, 3 * page, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, size, page, 0, -EINVAL);
	/* bo_offset + size wraps around. */
	map_fails(_metadata, self->fd, h, va, 2 * page, top, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, va, page, top, 0, -EINVAL);
	/* The exact end is fine. */
	ASSERT_EQ(0, npu_vm_map(self->fd, h, va, page, size - page, 0));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, va, page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_addr_overflow)
{
	const __u64 page = self->page;
	const __u64 top = ~0ULL & ~(page - 1);
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, 4 * page, DRM_NPU_BO_HOST, &h));
	map_fails(_metadata, self->fd, h, top, 2 * page, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, top - page, 4 * page, 0, 0,
		  -EINVAL);
	map_fails(_metadata, self->fd, h, self->va, top, 0, 0, -EINVAL);
	unmap_fails(_metadata, self->fd, top, 2 * page, -EINVAL);
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

/* [va_start, va_end) of DEVICE_INFO bounds every mapping, both ends. */
TEST_F(mem, vm_bind_va_range)
{
	const __u64 page = self->page;
	const __u64 start = self->info.va_start, end = self->info.va_end;
	char buf[64];
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0ULL, start % page);
	ASSERT_EQ(0ULL, end % page);
	ASSERT_EQ(0, npu_bo_create(self->fd, 2 * page, DRM_NPU_BO_HOST, &h));

	map_fails(_metadata, self->fd, h, 0, page, 0, 0, -EINVAL);
	if (start >= page) {
		map_fails(_metadata, self->fd, h, start - page, page, 0, 0,
			  -EINVAL);
		map_fails(_metadata, self->fd, h, start - page, 2 * page, 0,
			  0, -EINVAL);
	}
	map_fails(_metadata, self->fd, h, end, page, 0, 0, -EINVAL);
	map_fails(_metadata, self->fd, h, end - page, 2 * page, 0, 0,
		  -EINVAL);
	map_fails(_metadata, self->fd, h, end + page, page, 0, 0, -EINVAL);
	unmap_fails(_metadata, self->fd, end, page, -EINVAL);
	if (start >= page)
		unmap_fails(_metadata, self->fd, start - page, page, -EINVAL);

	/* The first and the last page of the range can be mapped. */
	ASSERT_EQ(0, npu_vm_map(self->fd, h, start, page, 0, 0));
	ASSERT_EQ(0, npu_vm_map(self->fd, h, end - page, page, page, 0));
	memset(buf, 0x11, sizeof(buf));
	ASSERT_EQ(0, npu_vm_write(self->fd, start, buf, sizeof(buf)));
	memset(buf, 0x22, sizeof(buf));
	ASSERT_EQ(0, npu_vm_write(self->fd, end - sizeof(buf), buf,
				  sizeof(buf)));
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(0, npu_vm_read(self->fd, start, buf, sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0x11));
	ASSERT_EQ(0, npu_vm_read(self->fd, end - sizeof(buf), buf,
				 sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0x22));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, start, page));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, end - page, page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_overlap)
{
	const __u64 p = self->page, a = self->va + 16 * p;
	const struct {
		__u64 addr, size;
	} overlaps[] = {
		{ a - 2 * p, 4 * p },	/* left */
		{ a + 2 * p, 4 * p },	/* right */
		{ a + p, p },		/* contained */
		{ a, 4 * p },		/* same */
		{ a - p, 6 * p },	/* containing */
		{ a + 3 * p, p },	/* last page */
		{ a - p, 2 * p },	/* first page */
	};
	__u32 h1, h2;
	size_t i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, 8 * p, DRM_NPU_BO_DEVICE, &h1));
	ASSERT_EQ(0, npu_bo_create(self->fd, 8 * p, DRM_NPU_BO_HOST, &h2));
	ASSERT_EQ(0, npu_vm_map(self->fd, h1, a, 4 * p, 0, 0));
	for (i = 0; i < ARRAY_SIZE(overlaps); i++) {
		map_fails(_metadata, self->fd, h2, overlaps[i].addr,
			  overlaps[i].size, 0, 0, -EEXIST);
		map_fails(_metadata, self->fd, h1, overlaps[i].addr,
			  overlaps[i].size, p, DRM_NPU_VM_READONLY, -EEXIST);
	}
	/* Touching on either side is no overlap. */
	ASSERT_EQ(0, npu_vm_map(self->fd, h2, a - 2 * p, 2 * p, 0, 0));
	ASSERT_EQ(0, npu_vm_map(self->fd, h2, a + 4 * p, 2 * p, 2 * p, 0));
	CHECK_CTX(self->fd, .bo_count = 2, .bo_bytes = 16 * p,
		  .device_bytes = 8 * p, .mapping_count = 3,
		  .mapped_bytes = 8 * p);
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a, 4 * p));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a - 2 * p, 2 * p));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a + 4 * p, 2 * p));
	ASSERT_EQ(0, npu_gem_close(self->fd, h1));
	ASSERT_EQ(0, npu_gem_close(self->fd, h2));
}

TEST_F(mem, vm_bind_bad_op)
{
	const __u32 ops[] = { 2, 3, 0x80000000, 0xffffffff };
	struct drm_npu_vm_bind args = { };
	__u32 h;
	size_t i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &h));
	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		args.op = ops[i];
		args.handle = h;
		args.addr = self->va;
		args.size = self->page;
		bind_fails(_metadata, self->fd, &args, -EINVAL);
	}
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_bad_pad)
{
	const __u32 pads[] = { 1, 0x80000000, 0xffffffff };
	struct drm_npu_vm_bind args;
	__u32 h;
	size_t i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &h));
	for (i = 0; i < ARRAY_SIZE(pads); i++) {
		memset(&args, 0, sizeof(args));
		args.op = DRM_NPU_VM_MAP;
		args.handle = h;
		args.pad = pads[i];
		args.addr = self->va;
		args.size = self->page;
		bind_fails(_metadata, self->fd, &args, -EINVAL);
	}
	ASSERT_EQ(0, npu_vm_map(self->fd, h, self->va, self->page, 0, 0));
	for (i = 0; i < ARRAY_SIZE(pads); i++) {
		memset(&args, 0, sizeof(args));
		args.op = DRM_NPU_VM_UNMAP;
		args.pad = pads[i];
		args.addr = self->va;
		args.size = self->page;
		bind_fails(_metadata, self->fd, &args, -EINVAL);
	}
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, self->page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_map_bad_flags)
{
	const __u32 flags[] = {
		2, DRM_NPU_VM_READONLY | 2, 0x80000000, 0xffffffff,
	};
	size_t i;
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_HOST,
				   &h));
	for (i = 0; i < ARRAY_SIZE(flags); i++)
		map_fails(_metadata, self->fd, h, self->va, self->page, 0,
			  flags[i], -EINVAL);
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

/* UNMAP takes no flags, no handle and no bo_offset. */
TEST_F(mem, vm_bind_unmap_bad_args)
{
	const __u64 page = self->page;
	struct drm_npu_vm_bind args;
	char buf[16];
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, 2 * page, DRM_NPU_BO_HOST, &h));
	ASSERT_EQ(0, npu_vm_map(self->fd, h, self->va, 2 * page, 0, 0));

	memset(&args, 0, sizeof(args));
	args.op = DRM_NPU_VM_UNMAP;
	args.addr = self->va;
	args.size = 2 * page;
	args.flags = DRM_NPU_VM_READONLY;
	bind_fails(_metadata, self->fd, &args, -EINVAL);
	args.flags = 0x80000000;
	bind_fails(_metadata, self->fd, &args, -EINVAL);
	args.flags = 0;
	args.handle = h;
	bind_fails(_metadata, self->fd, &args, -EINVAL);
	args.handle = 0;
	args.bo_offset = page;
	bind_fails(_metadata, self->fd, &args, -EINVAL);

	/* Still mapped. */
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, sizeof(buf)));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, 2 * page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

/* UNMAP takes exactly one earlier mapping, nothing less or more. */
TEST_F(mem, vm_bind_unmap_not_exact)
{
	const __u64 p = self->page, a = self->va + 8 * p;
	char buf[16];
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, 4 * p, DRM_NPU_BO_DEVICE, &h));
	ASSERT_EQ(0, npu_vm_map(self->fd, h, a, 4 * p, 0, 0));
	unmap_fails(_metadata, self->fd, a, 2 * p, -ENOENT);
	unmap_fails(_metadata, self->fd, a + p, 3 * p, -ENOENT);
	unmap_fails(_metadata, self->fd, a + p, p, -ENOENT);
	unmap_fails(_metadata, self->fd, a, 8 * p, -ENOENT);
	unmap_fails(_metadata, self->fd, a - p, 5 * p, -ENOENT);
	unmap_fails(_metadata, self->fd, a - 4 * p, 4 * p, -ENOENT);
	unmap_fails(_metadata, self->fd, a + 4 * p, p, -ENOENT);
	ASSERT_EQ(0, npu_vm_read(self->fd, a, buf, sizeof(buf)));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a, 4 * p));
	unmap_fails(_metadata, self->fd, a, 4 * p, -ENOENT);
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_bind_unknown_handle)
{
	__u32 h;

	if (no_device(self->fd))
		return;
	map_fails(_metadata, self->fd, 0, self->va, self->page, 0, 0,
		  -ENOENT);
	map_fails(_metadata, self->fd, 1, self->va, self->page, 0, 0,
		  -ENOENT);
	map_fails(_metadata, self->fd, 0xffffffff, self->va, self->page, 0,
		  0, -ENOENT);
	ASSERT_EQ(0, npu_bo_create(self->fd, self->page, DRM_NPU_BO_DEVICE,
				   &h));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	map_fails(_metadata, self->fd, h, self->va, self->page, 0, 0,
		  -ENOENT);
}

/* A read-only userptr BO only takes read-only mappings. */
TEST_F(mem, vm_bind_readonly_userptr)
{
	const size_t size = 2 * self->page;
	__u32 h;
	char *m, buf[32];
	__u64 fault;

	if (no_device(self->fd))
		return;
	m = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	npu_fill_pattern(m, size, 60);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, m, size,
				    DRM_NPU_BO_USERPTR_READONLY, &h));
	map_fails(_metadata, self->fd, h, self->va, size, 0, 0, -EACCES);
	map_fails(_metadata, self->fd, h, self->va, self->page, self->page, 0,
		  -EACCES);
	ASSERT_EQ(0, npu_vm_map(self->fd, h, self->va, size, 0,
				DRM_NPU_VM_READONLY));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + self->page, buf,
				 sizeof(buf)));
	ASSERT_TRUE(npu_has_pattern(buf, sizeof(buf), 60, self->page));
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(-EACCES, npu_vm_access(self->fd, self->va + self->page,
					 buf, sizeof(buf), true, &fault));
	ASSERT_EQ(self->va + self->page, fault);
	ASSERT_TRUE(npu_has_pattern(m, size, 60, 0));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	ASSERT_EQ(0, munmap(m, size));
}

/* Any BO can be mapped read-only; the device then cannot write it. */
TEST_F(mem, vm_bind_readonly_mapping)
{
	const size_t size = 2 * self->page;
	char *p, buf[64];
	__u64 fault;
	__u32 h;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, size, DRM_NPU_BO_DEVICE, &h));
	p = npu_bo_mmap(self->fd, h, size);
	ASSERT_NE(MAP_FAILED, p);
	npu_fill_pattern(p, size, 61);
	ASSERT_EQ(0, npu_vm_map(self->fd, h, self->va, size, 0,
				DRM_NPU_VM_READONLY));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + 100, buf, sizeof(buf)));
	ASSERT_TRUE(npu_has_pattern(buf, sizeof(buf), 61, 100));
	ASSERT_EQ(-EACCES, npu_vm_access(self->fd, self->va + 100, buf,
					 sizeof(buf), true, &fault));
	ASSERT_EQ(self->va + 100, fault);
	ASSERT_TRUE(npu_has_pattern(p, size, 61, 0));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, munmap(p, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

/*
 * A mapping holds its BO: after GEM_CLOSE the data stays reachable, and the
 * device memory is given back only at UNMAP. The context's BO counts follow
 * its handles, so they drop at GEM_CLOSE already.
 */
TEST_F(mem, vm_bind_outlives_close)
{
	const size_t size = 64 * self->page;
	struct drm_npu_memory_info base, mi;
	struct drm_npu_bo_info info;
	char *buf;
	__u32 h;

	if (no_device(self->fd))
		return;
	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	base = mem_info(_metadata, self->fd);
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_DEVICE, size, self->va);
	npu_fill_pattern(buf, size, 70);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf, size));

	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	ASSERT_EQ(-ENOENT, npu_bo_info(self->fd, h, &info));
	CHECK_CTX(self->fd, .bo_count = 0, .mapping_count = 1,
		  .mapped_bytes = size);
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used + size, mi.used);
	ASSERT_EQ(base.bo_count + 1, mi.bo_count);

	memset(buf, 0, size);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 70, 0));
	npu_fill_pattern(buf, size, 71);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf, size));
	memset(buf, 0, size);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, size));
	ASSERT_TRUE(npu_has_pattern(buf, size, 71, 0));

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count, mi.bo_count);
	CHECK_CTX(self->fd, .bo_count = 0);
	free(buf);
}

/* Closing the file frees what its mappings still hold. */
TEST_F(mem, vm_bind_file_close_frees)
{
	const size_t size = 16 * self->page;
	struct drm_npu_memory_info base, mi;
	__u32 h1, h2;
	int fd;

	if (no_device(self->fd))
		return;
	base = mem_info(_metadata, self->fd);
	fd = reopen(&self->nodes[0]);
	ASSERT_LE(0, fd);
	h1 = mapped_bo(_metadata, fd, DRM_NPU_BO_DEVICE, size, self->va);
	h2 = mapped_bo(_metadata, fd, DRM_NPU_BO_HOST, size,
		       self->va + size);
	ASSERT_EQ(0, npu_gem_close(fd, h1));
	ASSERT_NE(h1, h2);
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used + size, mi.used);
	ASSERT_EQ(base.bo_count + 2, mi.bo_count);
	ASSERT_EQ(0, close(fd));
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count, mi.bo_count);
	ASSERT_EQ(base.context_count, mi.context_count);
}

/* ---- VM_ACCESS ---------------------------------------------------- */

TEST_F(mem, vm_access_unmapped)
{
	const __u64 addrs[] = {
		self->va, self->va + 123, self->info.va_start,
		self->info.va_end - 1, self->info.va_end - self->page, 0, 1,
		self->info.va_start - 1,
	};
	char buf[64];
	__u64 fault;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(addrs); i++) {
		memset(buf, POISON, sizeof(buf));
		fault = 0;
		ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, addrs[i], buf, 1,
						false, &fault))
			TH_LOG("read at 0x%llx", addrs[i]);
		ASSERT_EQ(addrs[i], fault);
		ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), POISON));
		fault = 0;
		ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, addrs[i], buf, 1,
						true, &fault))
			TH_LOG("write at 0x%llx", addrs[i]);
		ASSERT_EQ(addrs[i], fault);
	}
}

/*
 * An access that starts mapped and runs into a hole faults at the first
 * unmapped byte. The kernel copies in page-sized chunks, in address order:
 * a write has stored every byte before the fault, nothing after it; a read
 * has copied the chunks before the one that faulted and nothing of it.
 */
TEST_F(mem, vm_access_into_hole)
{
	const __u64 p = self->page, a = self->va;
	char *buf, *bo;
	__u64 fault;
	__u32 h1, h2;

	if (no_device(self->fd))
		return;
	buf = malloc(4 * p);
	ASSERT_NE(NULL, buf);
	/* [a, a + 2p) mapped, [a + 2p, a + 3p) a hole, [a + 3p, a + 4p). */
	h1 = mapped_bo(_metadata, self->fd, DRM_NPU_BO_HOST, 2 * p, a);
	h2 = mapped_bo(_metadata, self->fd, DRM_NPU_BO_HOST, p, a + 3 * p);
	bo = npu_bo_mmap(self->fd, h1, 2 * p);
	ASSERT_NE(MAP_FAILED, bo);

	/* Write from the middle of the mapping across the hole. */
	npu_fill_pattern(buf, 4 * p, 80);
	fault = 0;
	ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, a + p + 100, buf, 2 * p,
					true, &fault));
	ASSERT_EQ(a + 2 * p, fault);
	ASSERT_TRUE(npu_all_bytes(bo, p + 100, 0));
	ASSERT_TRUE(npu_has_pattern(bo + p + 100, p - 100, 80, 0));

	/* Across the hole into the next mapping: nothing past the fault. */
	fault = 0;
	ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, a, buf, 4 * p, true,
					&fault));
	ASSERT_EQ(a + 2 * p, fault);
	ASSERT_TRUE(npu_has_pattern(bo, 2 * p, 80, 0));
	memset(buf, POISON, p);
	ASSERT_EQ(0, npu_vm_read(self->fd, a + 3 * p, buf, p));
	ASSERT_TRUE(npu_all_bytes(buf, p, 0));

	/* Reads: whole chunks before the faulting one reach the buffer. */
	memset(buf, POISON, 4 * p);
	fault = 0;
	ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, a, buf, 3 * p, false,
					&fault));
	ASSERT_EQ(a + 2 * p, fault);
	ASSERT_TRUE(npu_has_pattern(buf, 2 * p, 80, 0));
	ASSERT_TRUE(npu_all_bytes(buf + 2 * p, 2 * p, POISON));

	/* A read starting unaligned: the chunk that faults is not copied. */
	memset(buf, POISON, 4 * p);
	fault = 0;
	ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, a + 2 * p - 10, buf, 20,
					false, &fault));
	ASSERT_EQ(a + 2 * p, fault);
	ASSERT_TRUE(npu_all_bytes(buf, 4 * p, POISON));

	ASSERT_EQ(0, munmap(bo, 2 * p));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a, 2 * p));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a + 3 * p, p));
	ASSERT_EQ(0, npu_gem_close(self->fd, h1));
	ASSERT_EQ(0, npu_gem_close(self->fd, h2));
	free(buf);
}

/* A write running from a writable into a read-only mapping: -EACCES. */
TEST_F(mem, vm_access_readonly_fault)
{
	const __u64 p = self->page, a = self->va;
	char *buf, *bo;
	__u64 fault;
	__u32 h;

	if (no_device(self->fd))
		return;
	buf = malloc(2 * p);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, npu_bo_create(self->fd, 2 * p, DRM_NPU_BO_DEVICE, &h));
	bo = npu_bo_mmap(self->fd, h, 2 * p);
	ASSERT_NE(MAP_FAILED, bo);
	ASSERT_EQ(0, npu_vm_map(self->fd, h, a, p, 0, 0));
	ASSERT_EQ(0, npu_vm_map(self->fd, h, a + p, p, p,
				DRM_NPU_VM_READONLY));

	npu_fill_pattern(buf, 2 * p, 90);
	fault = 0;
	ASSERT_EQ(-EACCES, npu_vm_access(self->fd, a + p / 2, buf, p, true,
					 &fault));
	ASSERT_EQ(a + p, fault);
	ASSERT_TRUE(npu_all_bytes(bo, p / 2, 0));
	ASSERT_TRUE(npu_has_pattern(bo + p / 2, p / 2, 90, 0));
	ASSERT_TRUE(npu_all_bytes(bo + p, p, 0));

	/* Reading across both is fine. */
	ASSERT_EQ(0, npu_vm_read(self->fd, a, buf, 2 * p));
	ASSERT_TRUE(npu_has_pattern(buf + p / 2, p / 2, 90, 0));

	ASSERT_EQ(0, npu_vm_unmap(self->fd, a, p));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, a + p, p));
	ASSERT_EQ(0, munmap(bo, 2 * p));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	free(buf);
}

static void access_fails(struct __test_metadata *_metadata, int fd,
			 struct drm_npu_vm_access *args, int err)
{
	args->fault_addr = 0x5a5a5a5a;
	ASSERT_EQ(err, npu_ioctl(fd, DRM_IOCTL_NPU_VM_ACCESS, args))
		TH_LOG("addr 0x%llx size 0x%llx ptr 0x%llx flags 0x%x pad 0x%x",
		       args->addr, args->size, args->user_ptr, args->flags,
		       args->pad);
	/* Not a device fault: fault_addr is zero. */
	ASSERT_EQ(0ULL, args->fault_addr);
}

TEST_F(mem, vm_access_bad_size)
{
	const __u64 sizes[] = {
		0, VM_ACCESS_MAX + 1, 2 * VM_ACCESS_MAX, ~0ULL,
	};
	struct drm_npu_vm_access args = { };
	char buf[16];
	__u64 fault;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		args.addr = self->va;
		args.size = sizes[i];
		args.user_ptr = (__u64)(uintptr_t)buf;
		args.flags = 0;
		access_fails(_metadata, self->fd, &args, -EINVAL);
		args.flags = DRM_NPU_VM_ACCESS_WRITE;
		access_fails(_metadata, self->fd, &args, -EINVAL);
	}
	/* 64 MiB is allowed: it gets as far as the (unmapped) address. */
	ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, self->va, buf,
					VM_ACCESS_MAX, false, &fault));
	ASSERT_EQ(self->va, fault);
}

TEST_F(mem, vm_access_bad_flags_pad)
{
	const __u32 vals[] = { 2, 4, 0x80000000, 0xffffffff };
	struct drm_npu_vm_access args;
	char buf[16];
	__u32 h;
	size_t i;

	if (no_device(self->fd))
		return;
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_HOST, self->page,
		      self->va);
	for (i = 0; i < ARRAY_SIZE(vals); i++) {
		memset(&args, 0, sizeof(args));
		args.addr = self->va;
		args.size = sizeof(buf);
		args.user_ptr = (__u64)(uintptr_t)buf;
		args.flags = vals[i];
		access_fails(_metadata, self->fd, &args, -EINVAL);
		args.flags = vals[i] | DRM_NPU_VM_ACCESS_WRITE;
		access_fails(_metadata, self->fd, &args, -EINVAL);
		args.flags = 0;
		args.pad = vals[i];
		access_fails(_metadata, self->fd, &args, -EINVAL);
		args.pad = 1;
		access_fails(_metadata, self->fd, &args, -EINVAL);
	}
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, self->page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_F(mem, vm_access_bad_user_ptr)
{
	const __u64 page = self->page;
	struct drm_npu_vm_access args = { .addr = self->va, .size = 64 };
	char *around, *hole, *ro, *bo;
	__u32 h;

	if (no_device(self->fd))
		return;
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_DEVICE, 2 * page,
		      self->va);
	bo = npu_bo_mmap(self->fd, h, 2 * page);
	ASSERT_NE(MAP_FAILED, bo);
	ro = anon_map(page, PROT_READ);
	ASSERT_NE(MAP_FAILED, ro);
	/* A hole between two mapped pages; nothing is mapped after it. */
	around = anon_map(3 * page, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, around);
	hole = around + page;
	ASSERT_EQ(0, munmap(hole, page));

	args.user_ptr = 0;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	args.flags = DRM_NPU_VM_ACCESS_WRITE;
	access_fails(_metadata, self->fd, &args, -EFAULT);

	args.user_ptr = (__u64)(uintptr_t)hole;
	args.flags = 0;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	args.flags = DRM_NPU_VM_ACCESS_WRITE;
	access_fails(_metadata, self->fd, &args, -EFAULT);

	/* Reading into read-only memory. */
	args.user_ptr = (__u64)(uintptr_t)ro;
	args.flags = 0;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	ASSERT_TRUE(npu_all_bytes(ro, page, 0));

	args.user_ptr = 0xffff888000000000ULL;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	args.flags = DRM_NPU_VM_ACCESS_WRITE;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	ASSERT_TRUE(npu_all_bytes(bo, 2 * page, 0));

	/* A buffer that runs from mapped memory into the hole. */
	args.user_ptr = (__u64)(uintptr_t)(hole - 32);
	args.flags = 0;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	args.flags = DRM_NPU_VM_ACCESS_WRITE;
	access_fails(_metadata, self->fd, &args, -EFAULT);
	ASSERT_TRUE(npu_all_bytes(bo, 2 * page, 0));

	ASSERT_EQ(0, munmap(around, page));
	ASSERT_EQ(0, munmap(hole + page, page));
	ASSERT_EQ(0, munmap(ro, page));
	ASSERT_EQ(0, munmap(bo, 2 * page));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, 2 * page));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

/* Unaligned accesses crossing page boundaries, compared with the CPU. */
TEST_F(mem, vm_access_cross_page)
{
	const __u64 p = self->page, size = 4 * p;
	const struct {
		__u64 off, len;
	} cases[] = {
		{ p - 1, 2 }, { p - 100, 200 }, { 1, p }, { p / 2, 2 * p },
		{ 7, 3 * p + 11 }, { 0, size }, { size - 1, 1 },
	};
	char *buf, *bo;
	size_t i;
	__u32 h;

	if (no_device(self->fd))
		return;
	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_DEVICE, size, self->va);
	bo = npu_bo_mmap(self->fd, h, size);
	ASSERT_NE(MAP_FAILED, bo);

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		__u64 off = cases[i].off, len = cases[i].len;

		memset(bo, 0, size);
		npu_fill_pattern(buf, len, 100 + i);
		ASSERT_EQ(0, npu_vm_write(self->fd, self->va + off, buf, len))
			TH_LOG("offset %llu length %llu", off, len);
		ASSERT_TRUE(npu_all_bytes(bo, off, 0));
		ASSERT_TRUE(npu_has_pattern(bo + off, len, 100 + i, 0));
		ASSERT_TRUE(npu_all_bytes(bo + off + len, size - off - len, 0));

		npu_fill_pattern(bo, size, 200 + i);
		memset(buf, 0, size);
		ASSERT_EQ(0, npu_vm_read(self->fd, self->va + off, buf, len));
		ASSERT_TRUE(npu_has_pattern(buf, len, 200 + i, off));
	}
	ASSERT_EQ(0, munmap(bo, size));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	free(buf);
}

/* One access across two adjacent mappings of different BOs. */
TEST_F(mem, vm_access_adjacent_mappings)
{
	const __u64 p = self->page, half = 3 * p;
	char *buf, *m1, *m2, *user;
	__u32 h1, h2, h3;

	if (no_device(self->fd))
		return;
	buf = malloc(3 * half);
	ASSERT_NE(NULL, buf);
	user = anon_map(half, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, user);
	h1 = mapped_bo(_metadata, self->fd, DRM_NPU_BO_DEVICE, half, self->va);
	h2 = mapped_bo(_metadata, self->fd, DRM_NPU_BO_HOST, half,
		       self->va + half);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, user, half, 0, &h3));
	ASSERT_EQ(0, npu_vm_map(self->fd, h3, self->va + 2 * half, half, 0,
				0));
	m1 = npu_bo_mmap(self->fd, h1, half);
	ASSERT_NE(MAP_FAILED, m1);
	m2 = npu_bo_mmap(self->fd, h2, half);
	ASSERT_NE(MAP_FAILED, m2);

	npu_fill_pattern(buf, 3 * half, 110);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va + 10, buf,
				  3 * half - 20));
	ASSERT_TRUE(npu_all_bytes(m1, 10, 0));
	ASSERT_TRUE(npu_has_pattern(m1 + 10, half - 10, 110, 0));
	ASSERT_TRUE(npu_has_pattern(m2, half, 110, half - 10));
	ASSERT_TRUE(npu_has_pattern(user, half - 10, 110, 2 * half - 10));
	ASSERT_TRUE(npu_all_bytes(user + half - 10, 10, 0));

	npu_fill_pattern(m1, half, 111);
	npu_fill_pattern(m2, half, 112);
	npu_fill_pattern(user, half, 113);
	memset(buf, 0, 3 * half);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, 3 * half));
	ASSERT_TRUE(npu_has_pattern(buf, half, 111, 0));
	ASSERT_TRUE(npu_has_pattern(buf + half, half, 112, 0));
	ASSERT_TRUE(npu_has_pattern(buf + 2 * half, half, 113, 0));

	ASSERT_EQ(0, munmap(m1, half));
	ASSERT_EQ(0, munmap(m2, half));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, half));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + half, half));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + 2 * half, half));
	ASSERT_EQ(0, npu_gem_close(self->fd, h1));
	ASSERT_EQ(0, npu_gem_close(self->fd, h2));
	ASSERT_EQ(0, npu_gem_close(self->fd, h3));
	ASSERT_EQ(0, munmap(user, half));
	free(buf);
}

/* A transfer of several MiB, unaligned at both ends. */
TEST_F(mem, vm_access_large)
{
	const __u64 size = 4 * MIB;
	char *buf, *bo;
	__u32 h;

	if (no_device(self->fd))
		return;
	buf = malloc(size);
	ASSERT_NE(NULL, buf);
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_HOST, size, self->va);
	bo = npu_bo_mmap(self->fd, h, size);
	ASSERT_NE(MAP_FAILED, bo);
	npu_fill_pattern(buf, size, 120);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va + 3, buf, size - 5));
	ASSERT_TRUE(npu_has_pattern(bo + 3, size - 5, 120, 0));
	npu_fill_pattern(bo, size, 121);
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + 1, buf, size - 1));
	ASSERT_TRUE(npu_has_pattern(buf, size - 1, 121, 1));
	ASSERT_EQ(0, munmap(bo, size));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
	free(buf);
}

/* ---- isolation ---------------------------------------------------- */

/* Handles, CPU mappings and device mappings of one file are its own. */
TEST_F(mem, isolation_files)
{
	const __u64 size = 2 * self->page;
	struct drm_npu_bo_info info;
	char buf_a[64], buf_b[64];
	__u32 ha, hb;
	__u64 fault;
	int fb;
	void *p;

	if (no_device(self->fd))
		return;
	fb = reopen(&self->nodes[0]);
	ASSERT_LE(0, fb);
	ha = mapped_bo(_metadata, self->fd, DRM_NPU_BO_DEVICE, size, self->va);
	memset(buf_a, 0xaa, sizeof(buf_a));
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf_a, sizeof(buf_a)));

	/* A's handle means nothing in B. */
	ASSERT_EQ(-ENOENT, npu_bo_info(fb, ha, &info));
	map_fails(_metadata, fb, ha, self->va, size, 0, 0, -ENOENT);
	ASSERT_EQ(-EINVAL, npu_gem_close(fb, ha));
	ASSERT_EQ(0, npu_bo_info(self->fd, ha, &info));

	/* A's mmap offset is not B's to map. */
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fb, info.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	ASSERT_EQ(EACCES, errno);

	/* A's mapping is not in B's address space. */
	ASSERT_EQ(-ENXIO, npu_vm_access(fb, self->va, buf_b, sizeof(buf_b),
					false, &fault));
	ASSERT_EQ(self->va, fault);
	CHECK_CTX(fb, .bo_count = 0);

	/* The same address in B maps B's own BO. */
	hb = mapped_bo(_metadata, fb, DRM_NPU_BO_DEVICE, size, self->va);
	memset(buf_b, 0xbb, sizeof(buf_b));
	ASSERT_EQ(0, npu_vm_write(fb, self->va, buf_b, sizeof(buf_b)));
	memset(buf_a, 0, sizeof(buf_a));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf_a, sizeof(buf_a)));
	ASSERT_TRUE(npu_all_bytes(buf_a, sizeof(buf_a), 0xaa));
	memset(buf_b, 0, sizeof(buf_b));
	ASSERT_EQ(0, npu_vm_read(fb, self->va, buf_b, sizeof(buf_b)));
	ASSERT_TRUE(npu_all_bytes(buf_b, sizeof(buf_b), 0xbb));
	CHECK_CTX(self->fd, .bo_count = 1, .bo_bytes = size,
		  .device_bytes = size, .mapping_count = 1,
		  .mapped_bytes = size);
	CHECK_CTX(fb, .bo_count = 1, .bo_bytes = size, .device_bytes = size,
		  .mapping_count = 1, .mapped_bytes = size);

	/* B unmapping its address leaves A's mapping alone. */
	ASSERT_EQ(0, npu_vm_unmap(fb, self->va, size));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf_a, sizeof(buf_a)));
	ASSERT_TRUE(npu_all_bytes(buf_a, sizeof(buf_a), 0xaa));
	ASSERT_EQ(-ENOENT, npu_vm_unmap(fb, self->va, size));

	ASSERT_EQ(0, npu_gem_close(fb, hb));
	ASSERT_EQ(0, close(fb));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, ha));
}

static void isolation_child(struct __test_metadata *_metadata,
			    const char *path, int parent_fd, __u32 parent_h,
			    __u64 va, __u64 size, int ready_fd, int go_fd)
{
	struct drm_npu_bo_info info;
	char buf[64], c = 0;
	__u64 fault;
	__u32 h;
	int fd;

	fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(-ENOENT, npu_bo_info(fd, parent_h, &info));
	ASSERT_EQ(-ENXIO, npu_vm_access(fd, va, buf, sizeof(buf), false,
					&fault));
	ASSERT_EQ(va, fault);

	h = mapped_bo(_metadata, fd, DRM_NPU_BO_HOST, size, va);
	memset(buf, 0xcc, sizeof(buf));
	ASSERT_EQ(0, npu_vm_write(fd, va, buf, sizeof(buf)));

	/* The inherited file is the parent's context, not a copy. */
	ASSERT_EQ(0, npu_vm_read(parent_fd, va, buf, sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0x99));
	ASSERT_EQ(0, npu_bo_info(parent_fd, parent_h, &info));

	ASSERT_EQ(1, write(ready_fd, &c, 1));
	ASSERT_EQ(1, read(go_fd, &c, 1));
	ASSERT_EQ(0, npu_vm_read(fd, va, buf, sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0xcc));
	ASSERT_EQ(0, npu_vm_unmap(fd, va, size));
	ASSERT_EQ(0, npu_gem_close(fd, h));
	ASSERT_EQ(0, close(fd));
	_exit(0);
}

/* Two processes, each with its own file: two address spaces. */
TEST_F(mem, isolation_processes)
{
	const __u64 size = 2 * self->page;
	int ready[2], go[2];
	char buf[64], c = 0;
	pid_t pid;
	__u32 h;

	if (no_device(self->fd))
		return;
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_DEVICE, size, self->va);
	memset(buf, 0x99, sizeof(buf));
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf, sizeof(buf)));
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		isolation_child(_metadata, self->nodes[0].path, self->fd, h,
				self->va, size, ready[1], go[0]);

	ASSERT_EQ(1, read(ready[0], &c, 1));
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0x99));
	ASSERT_EQ(1, write(go[1], &c, 1));
	ASSERT_EQ(0, npu_wait_child(pid));

	ASSERT_EQ(0, npu_vm_read(self->fd, self->va, buf, sizeof(buf)));
	ASSERT_TRUE(npu_all_bytes(buf, sizeof(buf), 0x99));
	CHECK_CTX(self->fd, .bo_count = 1, .bo_bytes = size,
		  .device_bytes = size, .mapping_count = 1,
		  .mapped_bytes = size);
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, size));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

/* ---- CONTEXT_INFO ------------------------------------------------- */

TEST_F(mem, context_info_counts)
{
	const __u64 p = self->page;
	__u32 hd, hh, hu;
	char *user;
	int fd;

	if (no_device(self->fd))
		return;
	fd = reopen(&self->nodes[0]);
	ASSERT_LE(0, fd);
	user = anon_map(4 * p, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, user);
	CHECK_CTX(fd, .bo_count = 0);

	ASSERT_EQ(0, npu_bo_create(fd, 3 * p - 5, DRM_NPU_BO_DEVICE, &hd));
	CHECK_CTX(fd, .bo_count = 1, .bo_bytes = 3 * p, .device_bytes = 3 * p);
	ASSERT_EQ(0, npu_bo_create(fd, 2 * p, DRM_NPU_BO_HOST, &hh));
	CHECK_CTX(fd, .bo_count = 2, .bo_bytes = 5 * p, .device_bytes = 3 * p);
	ASSERT_EQ(0, npu_bo_userptr(fd, user, 4 * p, 0, &hu));
	CHECK_CTX(fd, .bo_count = 3, .bo_bytes = 9 * p, .device_bytes = 3 * p,
		  .pinned_bytes = 4 * p);

	ASSERT_EQ(0, npu_vm_map(fd, hd, self->va, 3 * p, 0, 0));
	ASSERT_EQ(0, npu_vm_map(fd, hh, self->va + 4 * p, p, p,
				DRM_NPU_VM_READONLY));
	ASSERT_EQ(0, npu_vm_map(fd, hu, self->va + 8 * p, 2 * p, 0, 0));
	ASSERT_EQ(0, npu_vm_map(fd, hu, self->va + 12 * p, 2 * p, 2 * p, 0));
	CHECK_CTX(fd, .bo_count = 3, .bo_bytes = 9 * p, .device_bytes = 3 * p,
		  .pinned_bytes = 4 * p, .mapping_count = 4,
		  .mapped_bytes = 8 * p);

	ASSERT_EQ(0, npu_vm_unmap(fd, self->va + 8 * p, 2 * p));
	CHECK_CTX(fd, .bo_count = 3, .bo_bytes = 9 * p, .device_bytes = 3 * p,
		  .pinned_bytes = 4 * p, .mapping_count = 3,
		  .mapped_bytes = 6 * p);

	/* Counts of BOs follow handles; mappings keep theirs. */
	ASSERT_EQ(0, npu_gem_close(fd, hd));
	CHECK_CTX(fd, .bo_count = 2, .bo_bytes = 6 * p, .pinned_bytes = 4 * p,
		  .mapping_count = 3, .mapped_bytes = 6 * p);
	ASSERT_EQ(0, npu_gem_close(fd, hu));
	CHECK_CTX(fd, .bo_count = 1, .bo_bytes = 2 * p, .mapping_count = 3,
		  .mapped_bytes = 6 * p);

	/* Failed calls change nothing. */
	ASSERT_EQ(-EEXIST, npu_vm_map(fd, hh, self->va, p, 0, 0));
	ASSERT_EQ(-ENOENT, npu_vm_unmap(fd, self->va, p));
	ASSERT_EQ(-EINVAL, npu_bo_create(fd, 0, DRM_NPU_BO_HOST, &hd));
	CHECK_CTX(fd, .bo_count = 1, .bo_bytes = 2 * p, .mapping_count = 3,
		  .mapped_bytes = 6 * p);

	ASSERT_EQ(0, npu_vm_unmap(fd, self->va, 3 * p));
	ASSERT_EQ(0, npu_vm_unmap(fd, self->va + 4 * p, p));
	ASSERT_EQ(0, npu_vm_unmap(fd, self->va + 12 * p, 2 * p));
	CHECK_CTX(fd, .bo_count = 1, .bo_bytes = 2 * p);
	ASSERT_EQ(0, npu_gem_close(fd, hh));
	CHECK_CTX(fd, .bo_count = 0);
	/* Other contexts saw none of it. */
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(0, close(fd));
	ASSERT_EQ(0, munmap(user, 4 * p));
}

TEST_F(mem, context_info_bad_args)
{
	const __u32 vals[] = { 1, 2, 0x80000000, 0xffffffff };
	struct drm_npu_context_info ci;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(vals); i++) {
		memset(&ci, 0, sizeof(ci));
		ci.flags = vals[i];
		ASSERT_EQ(-EINVAL, npu_ioctl(self->fd,
					     DRM_IOCTL_NPU_CONTEXT_INFO, &ci));
		memset(&ci, 0, sizeof(ci));
		ci.pad = vals[i];
		ASSERT_EQ(-EINVAL, npu_ioctl(self->fd,
					     DRM_IOCTL_NPU_CONTEXT_INFO, &ci));
	}
	/* The output fields need not be zero on input. */
	memset(&ci, POISON, sizeof(ci));
	ci.flags = 0;
	ci.pad = 0;
	ASSERT_EQ(0, npu_ioctl(self->fd, DRM_IOCTL_NPU_CONTEXT_INFO, &ci));
	ASSERT_EQ(0ULL, ci.bo_count);
	ASSERT_EQ(0ULL, ci.mapped_bytes);
}

/* ---- leaks after SIGKILL (debugfs) -------------------------------- */

struct dbg_memory {
	long long capacity, used, bos, contexts;
};

static int read_dbg_memory(const char *dir, struct dbg_memory *m)
{
	char path[128], line[128];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/npu_memory", dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	memset(m, 0, sizeof(*m));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "capacity: %lld", &m->capacity) == 1 ||
		    sscanf(line, "used: %lld", &m->used) == 1 ||
		    sscanf(line, "bos: %lld", &m->bos) == 1 ||
		    sscanf(line, "contexts: %lld", &m->contexts) == 1)
			found++;
	}
	fclose(f);
	return found == 4 ? 0 : -EPROTO;
}

static bool dbg_equal(const struct dbg_memory *a, const struct dbg_memory *b)
{
	return a->capacity == b->capacity && a->used == b->used &&
	       a->bos == b->bos && a->contexts == b->contexts;
}

/* Whether debugfs npu_clients lists a context of process @pid. */
static bool dbg_lists_pid(const char *dir, pid_t pid)
{
	char path[128], line[256], want[48];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/npu_clients", dir);
	snprintf(want, sizeof(want), "context pid %d ", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want)))
			found = true;
	}
	fclose(f);
	return found;
}

/*
 * Hold BOs, mappings, imports and a CPU mapping, then wait to be killed.
 * Not inlined into the test, whose frame holds the harness's setjmp (gcc
 * 14 then warns that the locals may be clobbered).
 */
static __attribute__((noinline)) void leak_child(struct __test_metadata *_metadata,
		       const struct npu_node *nodes, int num_nodes, __u64 va,
		       __u64 page, int ready_fd)
{
	const __u64 size = 64 * page;
	__u32 hd, hh, hu, himp = 0;
	int f1, f2, f3, dmabuf = -1;
	char *user, c = 0;
	void *p;

	f1 = open(nodes[0].path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, f1);
	f2 = open(nodes[0].path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, f2);
	user = anon_map(size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, user);

	hd = mapped_bo(_metadata, f1, DRM_NPU_BO_DEVICE, size, va);
	hh = mapped_bo(_metadata, f1, DRM_NPU_BO_HOST, size, va + size);
	ASSERT_EQ(0, npu_bo_userptr(f1, user, size, 0, &hu));
	ASSERT_EQ(0, npu_vm_map(f1, hu, va + 2 * size, size, 0, 0));
	/* A handle closed while its mapping lives on. */
	ASSERT_EQ(0, npu_gem_close(f1, hh));
	p = npu_bo_mmap(f1, hd, size);
	ASSERT_NE(MAP_FAILED, p);

	ASSERT_EQ(0, npu_prime_export(f1, hd, DRM_CLOEXEC | DRM_RDWR,
				      &dmabuf));
	ASSERT_EQ(0, npu_prime_import(f2, dmabuf, &himp));
	ASSERT_EQ(0, npu_vm_map(f2, himp, va, size, 0, 0));
	if (num_nodes > 1) {
		f3 = open(nodes[1].path, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, f3);
		ASSERT_EQ(0, npu_prime_import(f3, dmabuf, &himp));
		ASSERT_EQ(0, npu_vm_map(f3, himp, va, size, 0, 0));
	}

	ASSERT_EQ(1, write(ready_fd, &c, 1));
	for (;;)
		pause();
}

/*
 * A process killed with everything open (BOs, mappings, a CPU mapping,
 * PRIME imports on this and the other device) leaves nothing behind:
 * debugfs npu_memory returns to its baseline on every device.
 */
TEST_F(mem, no_leak_after_kill)
{
	struct dbg_memory base[2], now[2];
	char dir[2][64];
	int ndev, i, ready[2], ret, ms;
	char c;
	pid_t pid;

	if (no_device(self->fd))
		return;
	ndev = self->num_nodes > 1 ? 2 : 1;
	for (i = 0; i < ndev; i++) {
		ret = npu_debugfs_dir(self->nodes[i].fd, dir[i],
				      sizeof(dir[i]));
		if (ret == -ENOENT)
			SKIP(return, "the driver's debugfs folder is not visible");
		ASSERT_EQ(0, ret);
		ret = read_dbg_memory(dir[i], &base[i]);
		if (ret == -ENOENT || ret == -EACCES)
			SKIP(return, "cannot read %s/npu_memory: %s", dir[i],
			     strerror(-ret));
		ASSERT_EQ(0, ret) TH_LOG("%s/npu_memory: %s", dir[i],
					 strerror(-ret));
	}
	ASSERT_EQ(0, pipe(ready));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		leak_child(_metadata, self->nodes, self->num_nodes, self->va,
			   self->page, ready[1]);
	close(ready[1]);
	ret = read(ready[0], &c, 1);
	if (ret != 1)
		ASSERT_EQ(0, npu_wait_child(pid)) TH_LOG("child failed");

	ASSERT_EQ(0, read_dbg_memory(dir[0], &now[0]));
	ASSERT_EQ(base[0].used + 64 * (long long)self->page, now[0].used);
	/* DEVICE, HOST (closed but mapped) and userptr. */
	ASSERT_EQ(base[0].bos + 3, now[0].bos);
	ASSERT_EQ(base[0].contexts + 2, now[0].contexts);
	ASSERT_TRUE(dbg_lists_pid(dir[0], pid));
	if (ndev > 1) {
		ASSERT_EQ(0, read_dbg_memory(dir[1], &now[1]));
		ASSERT_EQ(base[1].used, now[1].used);
		ASSERT_EQ(base[1].bos + 1, now[1].bos);
		ASSERT_EQ(base[1].contexts + 1, now[1].contexts);
	}

	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(128 + SIGKILL, npu_wait_child(pid));

	/* Give deferred releases a moment, then insist. */
	for (ms = 0; ms < DEBUGFS_SETTLE_MS; ms += 10) {
		bool same = true;

		for (i = 0; i < ndev; i++) {
			ASSERT_EQ(0, read_dbg_memory(dir[i], &now[i]));
			same = same && dbg_equal(&base[i], &now[i]);
		}
		if (same)
			break;
		usleep(10 * 1000);
	}
	for (i = 0; i < ndev; i++) {
		ASSERT_EQ(base[i].used, now[i].used) TH_LOG("%s", dir[i]);
		ASSERT_EQ(base[i].bos, now[i].bos) TH_LOG("%s", dir[i]);
		ASSERT_EQ(base[i].contexts, now[i].contexts)
			TH_LOG("%s", dir[i]);
		ASSERT_FALSE(dbg_lists_pid(dir[i], pid));
	}
	if (ms)
		TH_LOG("debugfs settled after %d ms", ms);
}

/* ---- concurrency -------------------------------------------------- */

struct bo_thread {
	int fd;
	int index;
	__u64 va;
	__u64 page;
	int errors;
	int first_error_line;
	int first_error;
	pthread_t thread;
};

static void thread_fail(struct bo_thread *t, int line, int err)
{
	if (!t->errors++) {
		t->first_error_line = line;
		t->first_error = err;
	}
}

static void *bo_thread_fn(void *arg)
{
	struct bo_thread *t = arg;
	const size_t max = 4 * t->page;
	char *user, *buf, *p;
	int i, ret;

	user = anon_map(max, PROT_READ | PROT_WRITE);
	buf = malloc(max);
	if (user == MAP_FAILED || !buf) {
		thread_fail(t, __LINE__, -ENOMEM);
		return NULL;
	}
	for (i = 0; i < THREAD_LOOPS; i++) {
		size_t size = (1 + (i % 4)) * t->page;
		int kind = (i + t->index) % 3;
		unsigned int seed = t->index * 1000 + i;
		__u64 va = t->va + (i % 8) * max;
		__u32 h;

		if (kind == 2)
			ret = npu_bo_userptr(t->fd, user, size, 0, &h);
		else
			ret = npu_bo_create(t->fd, size, kind, &h);
		if (ret) {
			thread_fail(t, __LINE__, ret);
			continue;
		}
		ret = npu_vm_map(t->fd, h, va, size, 0, 0);
		if (ret) {
			thread_fail(t, __LINE__, ret);
			npu_gem_close(t->fd, h);
			continue;
		}
		npu_fill_pattern(buf, size, seed);
		ret = npu_vm_write(t->fd, va, buf, size);
		if (ret)
			thread_fail(t, __LINE__, ret);
		memset(buf, 0, size);
		ret = npu_vm_read(t->fd, va, buf, size);
		if (ret || !npu_has_pattern(buf, size, seed, 0))
			thread_fail(t, __LINE__, ret);
		if (kind == 2 && !npu_has_pattern(user, size, seed, 0))
			thread_fail(t, __LINE__, 0);
		if (kind != 2 && !(i % 5)) {
			p = npu_bo_mmap(t->fd, h, size);
			if (p == MAP_FAILED) {
				thread_fail(t, __LINE__, -errno);
			} else {
				if (!npu_has_pattern(p, size, seed, 0))
					thread_fail(t, __LINE__, 0);
				munmap(p, size);
			}
		}
		ret = npu_vm_unmap(t->fd, va, size);
		if (ret)
			thread_fail(t, __LINE__, ret);
		ret = npu_gem_close(t->fd, h);
		if (ret)
			thread_fail(t, __LINE__, ret);
	}
	munmap(user, max);
	free(buf);
	return NULL;
}

/*
 * Threads sharing one file, each in its own device address range, create,
 * bind, access, unbind and close BOs; afterwards the context holds nothing
 * and the device memory is back where it was.
 */
TEST_F_TIMEOUT(mem, concurrent_threads, 300)
{
	struct bo_thread threads[NUM_THREADS];
	struct drm_npu_memory_info base, mi;
	int i;

	if (no_device(self->fd))
		return;
	base = mem_info(_metadata, self->fd);
	for (i = 0; i < NUM_THREADS; i++) {
		memset(&threads[i], 0, sizeof(threads[i]));
		threads[i].fd = self->fd;
		threads[i].index = i;
		threads[i].va = self->va + i * THREAD_VA_SPAN;
		threads[i].page = self->page;
		ASSERT_EQ(0, pthread_create(&threads[i].thread, NULL,
					    bo_thread_fn, &threads[i]));
	}
	for (i = 0; i < NUM_THREADS; i++) {
		ASSERT_EQ(0, pthread_join(threads[i].thread, NULL));
		EXPECT_EQ(0, threads[i].errors)
			TH_LOG("thread %d: first error at line %d: %s", i,
			       threads[i].first_error_line,
			       strerror(-threads[i].first_error));
	}
	CHECK_CTX(self->fd, .bo_count = 0);
	mi = mem_info(_metadata, self->fd);
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count, mi.bo_count);
}

/* ---- regressions: kernel bugs these tests found, now fixed ---------- */

static long read_taint(void)
{
	long taint = -1;
	FILE *f;

	f = fopen(TAINTED_PATH, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &taint) != 1)
		taint = -1;
	fclose(f);
	return taint;
}

/* /dev/kmsg opened at its end, to read what the kernel logs from now on. */
static int kmsg_open_end(void)
{
	int fd = open(KMSG_PATH, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0 && lseek(fd, 0, SEEK_END) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Count kernel log records since kmsg_open_end() that report a problem. */
static int kmsg_reports(int fd)
{
	static const char *const bad[] = {
		"WARNING:", "BUG:", "Call Trace", "Oops", "vmalloc error",
		"page allocation failure",
	};
	static char rec[KMSG_RECORD_MAX + 1];
	int reports = 0;
	ssize_t len;
	size_t i;

	for (;;) {
		len = read(fd, rec, KMSG_RECORD_MAX);
		if (len < 0 && errno == EPIPE)
			continue;
		if (len <= 0)
			break;
		rec[len] = '\0';
		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			if (strstr(rec, bad[i])) {
				reports++;
				break;
			}
		}
	}
	return reports;
}

/*
 * BO_FROM_USERPTR of exactly the 1 TiB limit must fail cleanly. It was a bug:
 * the page array (2 GiB) is allocated with kvmalloc_array(GFP_KERNEL)
 * before RLIMIT_MEMLOCK is checked, and kvmalloc WARNs for more than
 * INT_MAX bytes (mm/util.c kvmalloc_node).
 */
TEST_F(mem, regression_userptr_max_size)
{
	long before, after;
	__u32 h;
	int kmsg, ret;

	if (no_device(self->fd))
		return;
	before = read_taint();
	kmsg = kmsg_open_end();
	ret = npu_bo_userptr(self->fd, (void *)(uintptr_t)(64 * KIB),
			     BO_MAX_SIZE, 0, &h);
	after = read_taint();
	ASSERT_NE(0, ret);
	ASSERT_TRUE(ret == -ENOMEM || ret == -EFAULT) TH_LOG("%s",
							     strerror(-ret));
	if (kmsg >= 0) {
		ASSERT_EQ(0, kmsg_reports(kmsg));
		close(kmsg);
	}
	if (before >= 0 && !(before & TAINT_WARN))
		ASSERT_FALSE(after & TAINT_WARN);
}

/*
 * A HOST BO nearly as large as the limit (1 TiB - 1 MiB, still inside the
 * DRM mmap offset space) must fail with -ENOMEM without a kernel splat.
 * It was a bug: nothing bounds HOST BOs, so drm_gem_get_pages() asks vmalloc
 * for a 2 GiB page array and the allocation failure is logged with a stack
 * trace ("vmalloc error: size ..., exceeds total pages").
 */
TEST_F(mem, regression_host_bo_max_size)
{
	__u64 used;
	__u32 h;
	int kmsg;

	if (no_device(self->fd))
		return;
	used = mem_used(_metadata, self->fd);
	kmsg = kmsg_open_end();
	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, BO_MAX_SIZE - MIB,
					 DRM_NPU_BO_HOST, &h));
	CHECK_CTX(self->fd, .bo_count = 0);
	ASSERT_EQ(used, mem_used(_metadata, self->fd));
	if (kmsg >= 0) {
		ASSERT_EQ(0, kmsg_reports(kmsg));
		close(kmsg);
	}
}

/*
 * The same for a read-only userptr BO. It was a bug: without FOLL_WRITE,
 * pin_user_pages() of never-touched anonymous memory pins the shared zero
 * page (6.1 does not unshare it for R/O long-term pins); the CPU's first
 * write then maps a new page and the device keeps reading zeroes.
 */
TEST_F(mem, regression_userptr_readonly_fill_after_register)
{
	if (no_device(self->fd))
		return;
	check_fill_after_register(_metadata, self->fd, self->va, self->page,
				  DRM_NPU_BO_USERPTR_READONLY);
}

/*
 * VM_ACCESS at or past va_end, where no mapping can exist, must fault with
 * -ENXIO. It was a bug: npu_vm_find() takes drm_mm's head node (whose start
 * is va_end) for a mapping there and npu_vm_translate() dereferences
 * garbage: a NULL pointer oops on an empty address space, a wild access
 * otherwise; the oops leaves vm->lock held, so the process hangs in exit.
 * Last in the file for that reason.
 */
TEST_F(mem, regression_vm_access_past_va_end)
{
	const __u64 p = self->page, end = self->info.va_end;
	const __u64 addrs[] = { end, end + p, 1ULL << 63, ~0ULL - p };
	char buf[64];
	__u64 fault;
	size_t i;
	__u32 h;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(addrs); i++) {
		ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, addrs[i], buf,
						sizeof(buf), false, &fault));
		ASSERT_EQ(addrs[i], fault);
	}
	/* Running off the last mapped page into va_end. */
	h = mapped_bo(_metadata, self->fd, DRM_NPU_BO_HOST, p, end - p);
	ASSERT_EQ(-ENXIO, npu_vm_access(self->fd, end - 16, buf, 32, true,
					&fault));
	ASSERT_EQ(end, fault);
	ASSERT_EQ(0, npu_vm_unmap(self->fd, end - p, p));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_submit_test - queues, command submission and fences of the npu driver.
 *
 * Queue creation and destruction, every packet against memory read back
 * through the BOs' CPU mappings, ordering within a queue and dependencies
 * between queues (timeline points and imported sync_files), waits that time
 * out, the exact errno of every rejected submission, device faults and the
 * queue error state with its reset, fault and hang injection through
 * debugfs, concurrent submitters, and processes that die with work in
 * flight.
 *
 * Waits are sized from the module's job_timeout_ms, so the suite runs at
 * any timeout. Needs npu.ko loaded (tools/vmrun); the injection and leak
 * tests need root for debugfs and skip without it.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"
#include "npu_submit_util.h"

#define KIB			1024ULL
#define MIB			(1024 * KIB)
#define GIB			(1024 * MIB)
#define POISON			0xa5
/* The fixture's two device BOs. */
#define BO_SIZE			(16 * MIB)
/* Room for the packets of a small job. */
#define SMALL_CMDS		64
/* Scratch at the end of BO 0 that queue_works() writes. */
#define SCRATCH_OFF		(BO_SIZE - 4 * KIB)

/*
 * struct dev_mem - a device BO mapped in a context's address space and
 * through the CPU
 */
struct dev_mem {
	int fd;
	__u32 bo;
	__u64 va;
	__u64 size;
	unsigned char *cpu;
};

FIXTURE(submit) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	/* The node with device index 0, or -1 when there is none. */
	int fd;
	struct drm_npu_device_info info;
	unsigned int timeout_ms;
	/* Waits for jobs that must complete: a job timeout and then some. */
	long long wait_ms;
	__u64 page;
	struct dev_mem mem[2];
	/* A device address with no mapping around it. */
	__u64 hole;
	/* A copy queue. */
	struct drm_npu_queue_create q;
	/* debugfs of the device; usable if dbg_ok. */
	char dbg[64];
	bool dbg_ok;
	/* An inject_* file was written: teardown clears them. */
	bool injected;
	/* Last value queue_works() wrote. */
	__u64 works_seq;
};

static int mem_create(int fd, __u64 va, __u64 size, struct dev_mem *m)
{
	int ret;

	memset(m, 0, sizeof(*m));
	m->fd = fd;
	m->va = va;
	m->size = size;
	m->cpu = MAP_FAILED;
	ret = npu_bo_create(fd, size, DRM_NPU_BO_DEVICE, &m->bo);
	if (ret)
		return ret;
	ret = npu_vm_map(fd, m->bo, va, size, 0, 0);
	if (ret)
		return ret;
	m->cpu = npu_bo_mmap(fd, m->bo, size);
	return m->cpu == MAP_FAILED ? -errno : 0;
}

/* What the context's close would do anyway; for files that stay open. */
static void mem_destroy(struct dev_mem *m)
{
	if (m->cpu && m->cpu != MAP_FAILED)
		munmap(m->cpu, m->size);
	m->cpu = MAP_FAILED;
	if (m->bo) {
		npu_vm_unmap(m->fd, m->va, m->size);
		npu_gem_close(m->fd, m->bo);
	}
	m->bo = 0;
}

FIXTURE_SETUP(submit)
{
	long page = sysconf(_SC_PAGESIZE);
	__u64 va;
	int n;

	self->fd = -1;
	self->mem[0].cpu = MAP_FAILED;
	self->mem[1].cpu = MAP_FAILED;
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	ASSERT_EQ(0, npu_query_device_info(self->nodes[0].fd, &self->info));
	self->fd = self->nodes[0].fd;
	self->timeout_ms = npu_job_timeout_ms();
	self->wait_ms = self->timeout_ms + 10000;
	ASSERT_LT(0, page);
	self->page = page;

	/* BO 0 at the first GiB boundary, BO 1 64 MiB further; a hole between. */
	va = (self->info.va_start + GIB - 1) & ~(GIB - 1);
	ASSERT_LE(va + GIB, self->info.va_end);
	ASSERT_EQ(0, mem_create(self->fd, va, BO_SIZE, &self->mem[0]));
	ASSERT_EQ(0, mem_create(self->fd, va + 64 * MIB, BO_SIZE,
				&self->mem[1]));
	self->hole = va + 40 * MIB + 0x10;

	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &self->q));

	self->dbg_ok = !npu_debugfs_dir(self->fd, self->dbg,
					sizeof(self->dbg)) &&
		       !access(self->dbg, R_OK | W_OK | X_OK);
}

FIXTURE_TEARDOWN(submit)
{
	int i;

	if (self->injected) {
		nsub_dbg_write(self->dbg, "inject_hang", 0);
		nsub_dbg_write(self->dbg, "inject_fault", 0);
		nsub_dbg_write(self->dbg, "inject_latency_us", 0);
	}
	for (i = 0; i < 2; i++) {
		if (self->mem[i].cpu && self->mem[i].cpu != MAP_FAILED)
			munmap(self->mem[i].cpu, self->mem[i].size);
	}
	npu_close_nodes(self->nodes, self->num_nodes);
}

/*
 * Helpers take the fixture as struct _test_data_submit, the type
 * FIXTURE_DATA(submit) names (spelled out: checkpatch reads the macro form
 * as a multiplication).
 */

/*
 * A SKIP() in FIXTURE_SETUP() does not stop the test body in every version
 * of the harness: bodies return early themselves when this says so.
 */
static bool no_device(int fd)
{
	return fd < 0;
}

/* Device address and CPU pointer of byte @off of fixture BO @i. */
static __u64 dva(struct _test_data_submit *self, int i, __u64 off)
{
	return self->mem[i].va + off;
}

static unsigned char *cpu(struct _test_data_submit *self, int i, __u64 off)
{
	return self->mem[i].cpu + off;
}

static __u64 get_u64(const void *p)
{
	__u64 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void put_u64(void *p, __u64 v)
{
	memcpy(p, &v, sizeof(v));
}

/* Submit the packets of @cb and wait for the job; 0 or a negative errno. */
static int run_cmds(int fd, const struct drm_npu_queue_create *q,
		    const struct npu_cmdbuf *cb, long long wait_ms,
		    __u64 *point)
{
	__u64 p = 0;
	int ret;

	ret = npu_submit_cmdbuf(fd, q->queue_id, cb, NULL, 0, &p);
	if (ret)
		return ret;
	if (point)
		*point = p;
	return nsub_wait(fd, q->syncobj_handle, p, wait_ms);
}

/* The queue's error, or a negative errno of QUEUE_STATUS itself. */
static int queue_error(int fd, __u32 queue_id)
{
	struct drm_npu_queue_status st;
	int ret;

	ret = npu_queue_status(fd, queue_id, &st);
	return ret ? ret : st.error;
}

/*
 * Run a WRITE_VALUE job on @q of @fd into @m, and check that it ran, got
 * the next point and left the queue without error.
 */
static void expect_queue_works(struct __test_metadata *_metadata, int fd,
			       const struct drm_npu_queue_create *q,
			       struct dev_mem *m, __u64 off, __u64 value)
{
	struct drm_npu_queue_status before, after;
	__u64 cmds[SMALL_CMDS / 8];
	struct npu_cmdbuf cb;
	__u64 point = 0;
	int ret;

	ASSERT_EQ(0, npu_queue_status(fd, q->queue_id, &before));
	put_u64(m->cpu + off, ~value);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, m->va + off, value);
	ret = run_cmds(fd, q, &cb, npu_job_timeout_ms() + 10000, &point);
	ASSERT_EQ(0, ret) TH_LOG("queue %u: %s", q->queue_id, strerror(-ret));
	EXPECT_EQ(before.submitted + 1, point);
	EXPECT_EQ(value, get_u64(m->cpu + off));
	ASSERT_EQ(0, npu_queue_status(fd, q->queue_id, &after));
	EXPECT_EQ((__u32)DRM_NPU_QUEUE_OK, after.state);
	EXPECT_EQ(0, after.error);
	EXPECT_EQ(point, after.submitted);
	EXPECT_EQ(point, after.completed);
}

/* The fixture's queue still runs jobs, and nothing consumed a point. */
static void queue_works(struct __test_metadata *_metadata,
			struct _test_data_submit *self)
{
	self->works_seq++;
	expect_queue_works(_metadata, self->fd, &self->q, &self->mem[0],
			   SCRATCH_OFF, 0x5eed000000000000ULL | self->works_seq);
}

/*
 * Create a queue of @class on an engine other than @avoid (if the class
 * has one): the least loaded engine is picked, so a few tries do it.
 */
static int queue_create_avoiding(int fd, __u32 class, __u32 avoid,
				 struct drm_npu_queue_create *q)
{
	struct drm_npu_queue_create tries[8];
	int i, n, ret;

	for (n = 0; n < 8; n++) {
		ret = npu_queue_create(fd, class, DRM_NPU_PRIORITY_NORMAL,
				       &tries[n]);
		if (ret || tries[n].engine_id != avoid || n == 7)
			break;
	}
	for (i = 0; i < n; i++)
		npu_queue_destroy(fd, tries[i].queue_id);
	if (ret)
		return ret;
	*q = tries[n];
	return 0;
}

/* Expect queue @queue_id in ERROR with @error at @point (fault at @addr). */
#define expect_queue_error(fd, queue_id, error, point, addr) \
	expect_queue_error_what(_metadata, fd, queue_id, error, point, addr, \
				__func__)

static void expect_queue_error_what(struct __test_metadata *_metadata, int fd,
				    __u32 queue_id, int error, __u64 point,
				    __u64 addr, const char *what)
{
	struct drm_npu_queue_status st;

	ASSERT_EQ(0, npu_queue_status(fd, queue_id, &st));
	EXPECT_EQ((__u32)DRM_NPU_QUEUE_ERROR, st.state) TH_LOG("%s", what);
	EXPECT_EQ(error, st.error)
		TH_LOG("%s: error %s", what, strerror(-st.error));
	EXPECT_EQ(point, st.error_point) TH_LOG("%s", what);
	EXPECT_EQ(addr, st.fault_addr) TH_LOG("%s", what);
}

/* Reset a queue that has nothing in flight, and check it is clean. */
static void reset_queue(struct __test_metadata *_metadata, int fd,
			__u32 queue_id)
{
	struct drm_npu_queue_status st;

	ASSERT_EQ(0, npu_queue_reset(fd, queue_id));
	ASSERT_EQ(0, npu_queue_status(fd, queue_id, &st));
	EXPECT_EQ((__u32)DRM_NPU_QUEUE_OK, st.state);
	EXPECT_EQ(0, st.error);
	EXPECT_EQ(0ULL, st.error_point);
	EXPECT_EQ(0ULL, st.fault_addr);
	EXPECT_EQ(0U, st.error_offset);
	EXPECT_EQ(st.submitted, st.completed);
}

/* ---- queues -------------------------------------------------------- */

/* Engine classes by engine id, from DRM_NPU_QUERY_ENGINES. */
static int engine_classes(int fd, __u32 *classes, __u32 max)
{
	struct drm_npu_engine_info engines[32];
	__u32 size = sizeof(engines), i;
	int ret;

	ret = npu_query(fd, DRM_NPU_QUERY_ENGINES, engines, &size);
	if (ret)
		return ret;
	for (i = 0; i < size / sizeof(engines[0]); i++) {
		if (engines[i].engine_id < max)
			classes[engines[i].engine_id] = engines[i].engine_class;
	}
	return 0;
}

/* Both classes at every priority: distinct ids and syncobjs, all run. */
TEST_F(submit, queue_create_all_classes_and_priorities)
{
	struct drm_npu_queue_create qs[6];
	struct drm_npu_queue_status st;
	__u32 classes[32];
	int i, j;

	if (no_device(self->fd))
		return;
	memset(classes, 0xff, sizeof(classes));
	ASSERT_EQ(0, engine_classes(self->fd, classes, 32));
	for (i = 0; i < 6; i++) {
		__u32 class = i / 3 ? DRM_NPU_ENGINE_COMPUTE :
				      DRM_NPU_ENGINE_COPY;
		__u32 prio = i % 3;

		ASSERT_EQ(0, npu_queue_create(self->fd, class, prio, &qs[i]))
			TH_LOG("class %u priority %u", class, prio);
		EXPECT_NE(0U, qs[i].queue_id);
		EXPECT_NE(0U, qs[i].syncobj_handle);
		EXPECT_EQ(0U, qs[i].flags);
		ASSERT_LT(qs[i].engine_id, self->info.num_engines);
		EXPECT_EQ(class, classes[qs[i].engine_id]);
		for (j = 0; j < i; j++) {
			EXPECT_NE(qs[j].queue_id, qs[i].queue_id);
			EXPECT_NE(qs[j].syncobj_handle, qs[i].syncobj_handle);
		}
		EXPECT_NE(self->q.queue_id, qs[i].queue_id);

		ASSERT_EQ(0, npu_queue_status(self->fd, qs[i].queue_id, &st));
		EXPECT_EQ((__u32)DRM_NPU_QUEUE_OK, st.state);
		EXPECT_EQ(0, st.error);
		EXPECT_EQ(0ULL, st.submitted);
		EXPECT_EQ(0ULL, st.completed);
		EXPECT_EQ(qs[i].engine_id, st.engine_id);
		EXPECT_EQ(0U, st.error_offset);
	}
	for (i = 0; i < 6; i++)
		expect_queue_works(_metadata, self->fd, &qs[i], &self->mem[0],
				   8 * i, 0x1000 + i);
	for (i = 0; i < 6; i++) {
		ASSERT_EQ(0, npu_queue_destroy(self->fd, qs[i].queue_id));
		EXPECT_EQ(-ENOENT, npu_queue_status(self->fd, qs[i].queue_id,
						    &st));
	}
	queue_works(_metadata, self);
}

/*
 * A high-priority queue is served first whenever it has a job: without
 * CAP_SYS_NICE QUEUE_CREATE refuses it (-EACCES), normal and low work.
 */
TEST_F(submit, queue_high_priority_needs_cap_sys_nice)
{
	struct drm_npu_queue_create q;
	int status;
	pid_t pid;

	if (no_device(self->fd))
		return;
	if (geteuid())
		SKIP(return, "needs root to drop the capability under test");
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (npu_drop_cap(CAP_SYS_NICE))
			_exit(2);
		if (npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				     DRM_NPU_PRIORITY_HIGH, &q) != -EACCES ||
		    npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				     DRM_NPU_PRIORITY_HIGH, &q) != -EACCES)
			_exit(3);
		if (npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				     DRM_NPU_PRIORITY_NORMAL, &q) ||
		    npu_queue_destroy(self->fd, q.queue_id) ||
		    npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				     DRM_NPU_PRIORITY_LOW, &q) ||
		    npu_queue_destroy(self->fd, q.queue_id))
			_exit(4);
		_exit(0);
	}
	status = npu_wait_child(pid);
	ASSERT_EQ(0, status) TH_LOG("child: 2 capset, 3 high allowed, 4 normal/low refused");
	/* With it (root), high priority is fine. */
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_HIGH, &q));
	ASSERT_EQ(0, npu_queue_destroy(self->fd, q.queue_id));
}

TEST_F(submit, queue_create_bad_args)
{
	const __u32 wb = DRM_NPU_QUEUE_STATUS_WRITEBACK;
	const struct {
		__u32 class, priority, flags;
		__u64 status_addr;
	} bad[] = {
		{ 2, DRM_NPU_PRIORITY_NORMAL, 0, 0 },
		{ 0xffffffff, DRM_NPU_PRIORITY_NORMAL, 0, 0 },
		{ DRM_NPU_ENGINE_COPY, 3, 0, 0 },
		{ DRM_NPU_ENGINE_COMPUTE, 0xffffffff, 0, 0 },
		{ DRM_NPU_ENGINE_COPY, DRM_NPU_PRIORITY_NORMAL, 2, 0 },
		{ DRM_NPU_ENGINE_COMPUTE, DRM_NPU_PRIORITY_LOW, 0x80000000, 0 },
		/* Write-back without an address, misaligned, wrapping. */
		{ DRM_NPU_ENGINE_COPY, DRM_NPU_PRIORITY_NORMAL, wb, 0 },
		{ DRM_NPU_ENGINE_COPY, DRM_NPU_PRIORITY_NORMAL, wb, 0x1004 },
		{ DRM_NPU_ENGINE_COPY, DRM_NPU_PRIORITY_NORMAL, wb, ~7ULL },
		/* An address without the flag. */
		{ DRM_NPU_ENGINE_COPY, DRM_NPU_PRIORITY_NORMAL, 0, 0x1000 },
	};
	struct drm_npu_queue_create q, ok;
	struct drm_npu_queue_status st;
	unsigned int i, n;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&q, 0, sizeof(q));
		q.engine_class = bad[i].class;
		q.priority = bad[i].priority;
		q.flags = bad[i].flags;
		q.status_addr = bad[i].status_addr;
		EXPECT_EQ(-EINVAL, npu_ioctl(self->fd,
					     DRM_IOCTL_NPU_QUEUE_CREATE, &q))
			TH_LOG("class %u priority %u flags %#x status 0x%llx",
			       bad[i].class, bad[i].priority, bad[i].flags,
			       bad[i].status_addr);
	}
	/* Nothing was left half-created: ours is the only queue. */
	for (i = 1, n = 0; i <= 1024; i++)
		n += !npu_queue_status(self->fd, i, &st);
	EXPECT_EQ(1U, n);
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_LOW, &ok));
	queue_works(_metadata, self);
	expect_queue_works(_metadata, self->fd, &ok, &self->mem[0], 0, 1);
}

TEST_F(submit, queue_destroy_errors)
{
	struct drm_npu_queue_destroy d = { 0 };
	struct drm_npu_queue_status st;
	struct drm_npu_pkt_header nop = { DRM_NPU_PKT_NOP, 8 };
	struct drm_npu_queue_create q;

	if (no_device(self->fd))
		return;
	EXPECT_EQ(-ENOENT, npu_queue_destroy(self->fd, 0));
	EXPECT_EQ(-ENOENT, npu_queue_destroy(self->fd, 12345));
	EXPECT_EQ(-ENOENT, npu_queue_destroy(self->fd, 0xffffffff));

	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_HIGH, &q));
	d.queue_id = q.queue_id;
	d.pad = 1;
	EXPECT_EQ(-EINVAL, npu_ioctl(self->fd, DRM_IOCTL_NPU_QUEUE_DESTROY,
				     &d));
	/* The queue survived the bad call. */
	expect_queue_works(_metadata, self->fd, &q, &self->mem[0], 0, 42);

	EXPECT_EQ(0, npu_queue_destroy(self->fd, q.queue_id));
	EXPECT_EQ(-ENOENT, npu_queue_destroy(self->fd, q.queue_id));
	EXPECT_EQ(-ENOENT, npu_queue_status(self->fd, q.queue_id, &st));
	EXPECT_EQ(-ENOENT, npu_queue_reset(self->fd, q.queue_id));
	EXPECT_EQ(-ENOENT, npu_submit(self->fd, q.queue_id, &nop, 8, NULL, 0,
				      NULL));
	/* Its syncobj handle stays valid, its last point signalled. */
	EXPECT_EQ(0, nsub_wait(self->fd, q.syncobj_handle, 1, 0));
	queue_works(_metadata, self);
}

TEST_F(submit, queue_status_and_reset_bad_args)
{
	struct drm_npu_queue_destroy r = { 0 };
	struct drm_npu_queue_status st;

	if (no_device(self->fd))
		return;
	memset(&st, 0, sizeof(st));
	st.queue_id = self->q.queue_id;
	st.flags = 1;
	EXPECT_EQ(-EINVAL, npu_ioctl(self->fd, DRM_IOCTL_NPU_QUEUE_STATUS,
				     &st));
	EXPECT_EQ(-ENOENT, npu_queue_status(self->fd, 0, &st));
	EXPECT_EQ(-ENOENT, npu_queue_status(self->fd, 777, &st));

	r.queue_id = self->q.queue_id;
	r.pad = 1;
	EXPECT_EQ(-EINVAL, npu_ioctl(self->fd, DRM_IOCTL_NPU_QUEUE_RESET, &r));
	EXPECT_EQ(-ENOENT, npu_queue_reset(self->fd, 0));
	EXPECT_EQ(-ENOENT, npu_queue_reset(self->fd, 777));
	/* Resetting a queue without error and without work is fine. */
	EXPECT_EQ(0, npu_queue_reset(self->fd, self->q.queue_id));

	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(self->q.engine_id, st.engine_id);
	EXPECT_EQ(0U, st.error_offset);
	EXPECT_EQ(0ULL, st.error_point);
	EXPECT_EQ(0ULL, st.fault_addr);
	queue_works(_metadata, self);
}

/* A context sees only its own queues and syncobjs. */
TEST_F(submit, queues_are_per_file)
{
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_create q2;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	struct dev_mem m2;
	__u64 cmds[SMALL_CMDS / 8];
	__u32 mine;
	int fd2;

	if (no_device(self->fd))
		return;
	queue_works(_metadata, self);
	fd2 = open(self->nodes[0].path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	EXPECT_EQ(-ENOENT, npu_submit_cmdbuf(fd2, self->q.queue_id, &cb, NULL,
					     0, NULL));
	EXPECT_EQ(-ENOENT, npu_queue_status(fd2, self->q.queue_id, &st));
	EXPECT_EQ(-ENOENT, npu_queue_reset(fd2, self->q.queue_id));
	EXPECT_EQ(-ENOENT, npu_queue_destroy(fd2, self->q.queue_id));

	/*
	 * A signalled syncobj of ours works as an in-fence here, its handle
	 * means nothing there.
	 */
	ASSERT_EQ(0, npu_syncobj_create(self->fd, DRM_SYNCOBJ_CREATE_SIGNALED,
					&mine));
	fence.handle = mine;
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, &fence,
				       1, NULL));
	ASSERT_EQ(0, npu_queue_create(fd2, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &q2));
	ASSERT_NE(mine, q2.syncobj_handle);
	EXPECT_EQ(-ENOENT, npu_submit_cmdbuf(fd2, q2.queue_id, &cb, &fence, 1,
					     NULL));

	ASSERT_EQ(0, mem_create(fd2, self->mem[0].va, MIB, &m2));
	expect_queue_works(_metadata, fd2, &q2, &m2, 0, 0xf2);
	/* Same device address, different address space. */
	EXPECT_NE(0xf2ULL, get_u64(cpu(self, 0, 0)));

	/* Destroying theirs leaves ours alone, whatever the ids. */
	ASSERT_EQ(0, npu_queue_destroy(fd2, q2.queue_id));
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(0, st.error);
	EXPECT_EQ(st.submitted, st.completed);
	mem_destroy(&m2);
	close(fd2);
	queue_works(_metadata, self);
}

/*
 * The queue's syncobj is a timeline: SYNCOBJ_QUERY reports the last
 * signalled point, LAST_SUBMITTED the last one submitted.
 */
TEST_F(submit, syncobj_is_a_timeline)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0);
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	__u64 point, v, one = 1;
	int i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle, 0,
				       &v));
	EXPECT_EQ(0ULL, v);
	for (i = 0; i < 3; i++)
		queue_works(_metadata, self);
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle, 0,
				       &v));
	EXPECT_EQ(3ULL, v);
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle,
				       DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
				       &v));
	EXPECT_EQ(3ULL, v);

	/* Point 4 waits for the flag. */
	put_u64(cpu(self, 0, 0), 0);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_EQ);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &point));
	ASSERT_EQ(4ULL, point);
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle, 0,
				       &v));
	EXPECT_EQ(3ULL, v);
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle,
				       DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
				       &v));
	EXPECT_EQ(4ULL, v);
	EXPECT_EQ(0, nsub_signalled(self->fd, self->q.syncobj_handle, 4));
	EXPECT_EQ(1, nsub_signalled(self->fd, self->q.syncobj_handle, 2));
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(4ULL, st.submitted);
	EXPECT_EQ(3ULL, st.completed);

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, 4,
			       self->wait_ms));
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle, 0,
				       &v));
	EXPECT_EQ(4ULL, v);
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(4ULL, st.completed);
	EXPECT_EQ(0, st.error);
}

/* Destroying the queue's syncobj handle does not destroy the queue. */
TEST_F(submit, syncobj_destroy_keeps_queue)
{
	struct drm_npu_queue_status st;
	__u64 cmds[SMALL_CMDS / 8];
	struct npu_cmdbuf cb;
	__u64 point = 0;
	int i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_syncobj_destroy(self->fd, self->q.syncobj_handle));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, dva(self, 0, 64), 77);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &point));
	EXPECT_EQ(1ULL, point);
	for (i = 0; i < 1000; i++) {
		ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
		if (st.completed == point)
			break;
		usleep(10000);
	}
	EXPECT_EQ(point, st.completed);
	EXPECT_EQ(0, st.error);
	EXPECT_EQ(77ULL, get_u64(cpu(self, 0, 64)));
}

/* ---- packets ------------------------------------------------------- */

static bool fill_ok(const unsigned char *p, __u64 size, __u32 value,
		    __u32 width)
{
	__u64 i;

	for (i = 0; i < size; i++) {
		if (p[i] != (unsigned char)(value >> (8 * (i % width))))
			return false;
	}
	return true;
}

TEST_F(submit, fill_widths)
{
	static const struct {
		__u64 off, size;
		__u32 value, width;
	} cases[] = {
		{ 1, 1, 0x5a, 1 },
		{ 3, 4097, 0xc3, 1 },
		{ 4096 - 5, 11, 0x00, 1 },
		{ 2, 2, 0xbeef, 2 },
		{ 4094, 4, 0x1234, 2 },
		{ 6, 2 * 4096 + 6, 0xffff, 2 },
		{ 4, 4, 0xdeadbeef, 4 },
		{ 4092, 8, 0x01020304, 4 },
		{ 12, MIB + 12, 0x89abcdef, 4 },
		{ 0, 8, 0xffffffff, 4 },
		/* A head, quadwords and a tail (the engine fills by 8). */
		{ 10, 20, 0x2468, 2 },
		{ 4, 12, 0x0a0b0c0d, 4 },
		{ 5, 27, 0x7e, 1 },
	};
	__u64 cmds[SMALL_CMDS / 8];
	struct npu_cmdbuf cb;
	unsigned int i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const unsigned char *p = cpu(self, 1, 64 + cases[i].off);

		memset(cpu(self, 1, 0), POISON, 2 * MIB);
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_fill(&cb, dva(self, 1, 64 + cases[i].off),
			      cases[i].size, cases[i].value, cases[i].width);
		ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms,
				      NULL));
		EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 64 + cases[i].off,
					  POISON))
			TH_LOG("fill %u: bytes before", i);
		EXPECT_TRUE(fill_ok(p, cases[i].size, cases[i].value,
				    cases[i].width))
			TH_LOG("fill %u: width %u value %#x", i,
			       cases[i].width, cases[i].value);
		EXPECT_TRUE(npu_all_bytes(p + cases[i].size, 64, POISON))
			TH_LOG("fill %u: bytes after", i);
	}
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
}

/* Copies of odd sizes at odd offsets, within and across pages. */
TEST_F(submit, copy_shapes)
{
	const __u64 pg = self->page;
	const struct {
		__u64 src, dst, size;
	} cases[] = {
		{ 0, 0, 1 },
		{ 1, 3, 7 },
		{ 5, 2, 13 },
		{ pg - 1, 1, 2 },
		{ 7, pg - 3, pg + 99 },
		{ pg - 3, 2 * pg - 5, 3 * pg + 7 },
		{ 3, 5, 65537 },
		{ 8, 16, 4096 },
		{ 2 * pg, 2 * pg, 2 * pg },
	};
	__u64 cmds[16 * 4];
	struct npu_cmdbuf cb;
	__u64 dst = 64;
	unsigned int i;

	if (no_device(self->fd))
		return;
	npu_fill_pattern(cpu(self, 0, 0), 4 * MIB, 3);
	memset(cpu(self, 1, 0), POISON, 4 * MIB);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		npu_emit_copy(&cb, dva(self, 0, cases[i].src),
			      dva(self, 1, dst + cases[i].dst), cases[i].size);
		dst += 256 * KIB;
	}
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));

	dst = 64;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const unsigned char *p = cpu(self, 1, dst + cases[i].dst);

		EXPECT_EQ(POISON, p[-1]) TH_LOG("copy %u: byte before", i);
		EXPECT_TRUE(npu_has_pattern(p, cases[i].size, 3, cases[i].src))
			TH_LOG("copy %u: %llu bytes from +%llu to +%llu", i,
			       cases[i].size, cases[i].src, cases[i].dst);
		EXPECT_EQ(POISON, p[cases[i].size])
			TH_LOG("copy %u: byte after", i);
		dst += 256 * KIB;
	}
}

/* ---- strided copies -------------------------------------------------- */

struct strided_case {
	__u32 ndim, elem;
	__u64 sizes[DRM_NPU_COPY_MAX_DIMS];
	__u64 src_strides[DRM_NPU_COPY_MAX_DIMS];
	__u64 dst_strides[DRM_NPU_COPY_MAX_DIMS];
	__u64 src_off;
	const char *what;
};

/* The copy on the CPU, in the engine's (row-major) order. */
static void strided_on_cpu(const struct strided_case *c, unsigned char *dst,
			   const unsigned char *src)
{
	__u64 idx[DRM_NPU_COPY_MAX_DIMS] = { 0 };
	__u64 so, d_o;
	int d;

	for (;;) {
		so = 0;
		d_o = 0;
		for (d = 0; d < (int)c->ndim; d++) {
			so += idx[d] * c->src_strides[d];
			d_o += idx[d] * c->dst_strides[d];
		}
		memcpy(dst + d_o, src + so, c->elem);
		for (d = c->ndim - 1; d >= 0; d--) {
			if (++idx[d] < c->sizes[d])
				break;
			idx[d] = 0;
		}
		if (d < 0)
			return;
	}
}

/*
 * Views as frameworks make them (transposes, permutes with dense rows,
 * broadcasts, element sizes 1 to 16, odd ones included, runs across
 * pages, runs longer than a slice and more runs than one slice holds,
 * all six dimensions), on a copy queue and on a compute queue: each
 * destination window equals the CPU's result, bytes between elements
 * included (they keep the poison).
 */
TEST_F(submit, copy_strided_views)
{
	static const struct strided_case cases[] = {
		{ 2, 4, { 48, 64 }, { 4, 48 * 4 }, { 64 * 4, 4 }, 0,
		  "transpose of a 64x48 f32 matrix" },
		{ 3, 8, { 5, 7, 9 }, { 72, 360, 8 }, { 504, 72, 8 }, 8,
		  "permute (1, 0, 2) of 8-byte elements" },
		{ 2, 2, { 33, 100 }, { 0, 2 }, { 200, 2 }, 6,
		  "broadcast of a row" },
		{ 2, 1, { 300, 17 }, { 1, 300 }, { 17, 1 }, 4093,
		  "byte transpose across pages" },
		{ 1, 3, { 1000 }, { 5 }, { 3 }, 1, "3-byte elements" },
		{ 3, 16, { 4, 4, 4 }, { 1024, 16, 256 }, { 256, 64, 16 }, 16,
		  "16-byte elements" },
		{ 2, 1, { 2, 300000 }, { 300007, 1 }, { 300000, 1 }, 3,
		  "rows longer than a slice" },
		{ 2, 4, { 100, 100 }, { 4, 400 }, { 400, 4 }, 0,
		  "more runs than a slice" },
		{ 6, 4, { 2, 2, 2, 2, 2, 3 }, { 4, 8, 16, 32, 64, 128 },
		  { 384, 192, 96, 48, 24, 4 }, 12, "six dimensions" },
	};
	const __u64 window = MIB;
	struct drm_npu_queue_create cq;
	unsigned char *want;
	__u64 cmds[4096 / 8];
	struct npu_cmdbuf cb;
	unsigned int i, pass;

	if (no_device(self->fd))
		return;
	want = malloc(window);
	ASSERT_NE(NULL, want);
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_NORMAL, &cq));
	npu_fill_pattern(cpu(self, 0, 0), 4 * MIB, 7);
	for (pass = 0; pass < 2; pass++) {
		const struct drm_npu_queue_create *q = pass ? &cq : &self->q;
		const char *kind = pass ? "compute" : "copy";

		memset(cpu(self, 1, 0), POISON, ARRAY_SIZE(cases) * window);
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		for (i = 0; i < ARRAY_SIZE(cases); i++)
			npu_emit_copy_strided(&cb,
					      dva(self, 0, cases[i].src_off),
					      dva(self, 1, i * window),
					      cases[i].ndim, cases[i].elem,
					      cases[i].sizes,
					      cases[i].src_strides,
					      cases[i].dst_strides);
		ASSERT_FALSE(cb.overflow);
		ASSERT_EQ(0, run_cmds(self->fd, q, &cb, self->wait_ms, NULL));
		EXPECT_EQ(0, queue_error(self->fd, q->queue_id));
		for (i = 0; i < ARRAY_SIZE(cases); i++) {
			memset(want, POISON, window);
			strided_on_cpu(&cases[i], want,
				       cpu(self, 0, cases[i].src_off));
			EXPECT_EQ(0, memcmp(want, cpu(self, 1, i * window),
					    window))
				TH_LOG("%s (%s queue)", cases[i].what, kind);
		}
	}
	npu_queue_destroy(self->fd, cq.queue_id);
	free(want);
}

/*
 * Multi-MiB copies between two BOs, and copies whose source or
 * destination runs across two BOs mapped back to back.
 */
TEST_F(submit, copy_large_and_across_bos)
{
	const __u64 big = 6 * MIB + 3, small = MIB;
	__u64 cmds[SMALL_CMDS / 8 * 3];
	struct dev_mem c, d;
	struct npu_cmdbuf cb;
	__u64 adj;

	if (no_device(self->fd))
		return;
	adj = dva(self, 1, BO_SIZE) + 4 * MIB;
	ASSERT_EQ(0, mem_create(self->fd, adj, small, &c));
	ASSERT_EQ(0, mem_create(self->fd, adj + small, small, &d));

	npu_fill_pattern(cpu(self, 0, 0), big + 1, 9);
	memset(cpu(self, 1, 0), POISON, big + 8);
	npu_fill_pattern(c.cpu, small, 11);
	npu_fill_pattern(d.cpu, small, 12);

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	/* BO 0 -> BO 1, 6 MiB + 3 at an odd offset. */
	npu_emit_copy(&cb, dva(self, 0, 1), dva(self, 1, 3), big);
	/* The last 1000 bytes of C and the first 2000 of D -> BO 0 tail. */
	npu_emit_copy(&cb, adj + small - 1000, dva(self, 0, 12 * MIB + 1),
		      3000);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));

	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 3, POISON));
	EXPECT_TRUE(npu_has_pattern(cpu(self, 1, 3), big, 9, 1));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 3 + big), 5, POISON));
	EXPECT_TRUE(npu_has_pattern(cpu(self, 0, 12 * MIB + 1), 1000, 11,
				    small - 1000));
	EXPECT_TRUE(npu_has_pattern(cpu(self, 0, 12 * MIB + 1001), 2000, 12,
				    0));

	/* And a destination across C and D. */
	npu_fill_pattern(cpu(self, 1, 0), 4096, 13);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, dva(self, 1, 0), adj + small - 500, 1000);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	EXPECT_TRUE(npu_has_pattern(c.cpu + small - 500, 500, 13, 0));
	EXPECT_TRUE(npu_has_pattern(d.cpu, 500, 13, 500));
	EXPECT_TRUE(npu_has_pattern(d.cpu + 500, 100, 12, 500));
	EXPECT_TRUE(npu_has_pattern(c.cpu, small - 500, 11, 0));
	mem_destroy(&c);
	mem_destroy(&d);
}

/*
 * The device clock only goes forward: across jobs of a queue, across
 * queues, and within a job; and it counts nanoseconds.
 */
TEST_F(submit, timestamp_monotonic)
{
	const int jobs = 16;
	__u64 cmds[SMALL_CMDS / 8 * 2], ts[16], a, b;
	struct drm_npu_queue_create q2;
	struct npu_cmdbuf cb;
	__s64 t0, t1;
	__u64 point;
	int i;

	if (no_device(self->fd))
		return;
	EXPECT_EQ(1000000000ULL, self->info.clock_hz);
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_NORMAL, &q2));
	memset(cpu(self, 0, 0), 0, 4096);
	t0 = npu_monotonic_ns();
	for (i = 0; i < jobs; i++) {
		const struct drm_npu_queue_create *q = i % 2 ? &q2 : &self->q;

		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_timestamp(&cb, dva(self, 0, 8 * i));
		/* Each job waits for the previous one (alternating queues). */
		ASSERT_EQ(0, run_cmds(self->fd, q, &cb, self->wait_ms, &point));
	}
	t1 = npu_monotonic_ns();
	for (i = 0; i < jobs; i++)
		ts[i] = get_u64(cpu(self, 0, 8 * i));
	for (i = 1; i < jobs; i++)
		EXPECT_LT(ts[i - 1], ts[i]) TH_LOG("job %d", i);
	EXPECT_NE(0ULL, ts[0]);
	/* Nanoseconds: the device saw no more time pass than the CPU. */
	EXPECT_LE(ts[jobs - 1] - ts[0], (__u64)(t1 - t0));

	/* Within a job, around an 8 MiB fill. */
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_timestamp(&cb, dva(self, 0, 512));
	npu_emit_fill(&cb, dva(self, 1, 0), 8 * MIB, 0x11, 1);
	npu_emit_timestamp(&cb, dva(self, 0, 520));
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	a = get_u64(cpu(self, 0, 512));
	b = get_u64(cpu(self, 0, 520));
	EXPECT_LT(ts[jobs - 1], a);
	EXPECT_LT(a, b);
	TH_LOG("8 MiB fill took %llu ns of device time", b - a);
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
	EXPECT_EQ(0, queue_error(self->fd, q2.queue_id));
}

TEST_F(submit, write_value)
{
	const __u64 pg = self->page;
	const __u64 offs[] = {
		0, 24, pg - 8, 2 * pg + 16, 4 * pg - 8, BO_SIZE - 8,
	};
	const __u64 vals[] = {
		0, ~0ULL, 0x0123456789abcdefULL, 1, 0x8000000000000000ULL,
		0xa5a5a5a5a5a5a5a5ULL + 1,
	};
	__u64 cmds[SMALL_CMDS / 8 * 4];
	struct npu_cmdbuf cb;
	unsigned int i;

	if (no_device(self->fd))
		return;
	memset(cpu(self, 1, 0), POISON, 5 * pg);
	memset(cpu(self, 1, BO_SIZE - pg), POISON, pg);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	for (i = 0; i < ARRAY_SIZE(offs); i++)
		npu_emit_write_value(&cb, dva(self, 1, offs[i]), vals[i]);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	for (i = 0; i < ARRAY_SIZE(offs); i++) {
		const unsigned char *p = cpu(self, 1, offs[i]);

		EXPECT_EQ(vals[i], get_u64(p)) TH_LOG("offset %llu", offs[i]);
		if (offs[i] >= 8)
			EXPECT_TRUE(npu_all_bytes(p - 8, 8, POISON))
				TH_LOG("before offset %llu", offs[i]);
		if (offs[i] + 16 <= BO_SIZE)
			EXPECT_TRUE(npu_all_bytes(p + 8, 8, POISON))
				TH_LOG("after offset %llu", offs[i]);
	}
}

/* One job of 1000 packets of every kind runs them all, in order. */
TEST_F(submit, thousand_packets)
{
	const int n = 1000;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	size_t cap = n * sizeof(struct drm_npu_pkt_copy);
	__u64 *cmds, point, prev_ts = 0;
	int i;

	if (no_device(self->fd))
		return;
	cmds = malloc(cap);
	ASSERT_NE(NULL, cmds);
	memset(cpu(self, 1, 0), 0, 64 * KIB);
	npu_cmdbuf_init(&cb, cmds, cap);
	for (i = 0; i < n; i++) {
		switch (i % 5) {
		case 0:
			npu_emit_write_value(&cb, dva(self, 1, 8 * i), i + 1);
			break;
		case 1:
			/* Copy the value the previous packet wrote. */
			npu_emit_copy(&cb, dva(self, 1, 8 * (i - 1)),
				      dva(self, 1, 8 * i), 8);
			break;
		case 2:
			npu_emit_fill(&cb, dva(self, 1, 8 * i), 8, i, 4);
			break;
		case 3:
			npu_emit_nop(&cb);
			break;
		default:
			npu_emit_timestamp(&cb, dva(self, 1, 8 * i));
			break;
		}
	}
	ASSERT_FALSE(cb.overflow);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point));
	free(cmds);
	for (i = 0; i < n; i++) {
		__u64 v = get_u64(cpu(self, 1, 8 * i));

		switch (i % 5) {
		case 0:
			ASSERT_EQ((__u64)i + 1, v) TH_LOG("packet %d", i);
			break;
		case 1:
			ASSERT_EQ((__u64)i, v) TH_LOG("packet %d", i);
			break;
		case 2:
			ASSERT_EQ(((__u64)i << 32) | i, v) TH_LOG("packet %d", i);
			break;
		case 3:
			ASSERT_EQ(0ULL, v) TH_LOG("packet %d", i);
			break;
		default:
			/* The clock went on between timestamps. */
			ASSERT_LT(prev_ts, v) TH_LOG("packet %d", i);
			prev_ts = v;
			break;
		}
	}
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(0, st.error);
	EXPECT_EQ(point, st.completed);
}

/* A command buffer of exactly DRM_NPU_MAX_CMDS_SIZE is fine. */
TEST_F(submit, largest_command_buffer)
{
	const __u32 max = DRM_NPU_MAX_CMDS_SIZE;
	struct drm_npu_pkt_write_value *w;
	struct drm_npu_pkt_header *h;
	__u64 *cmds, point;
	__u32 off;

	if (no_device(self->fd))
		return;
	cmds = calloc(1, max + 8);
	ASSERT_NE(NULL, cmds);
	for (off = 0; off < max - sizeof(*w); off += sizeof(*h)) {
		h = (void *)((char *)cmds + off);
		h->opcode = DRM_NPU_PKT_NOP;
		h->size = sizeof(*h);
	}
	w = (void *)((char *)cmds + off);
	w->hdr.opcode = DRM_NPU_PKT_WRITE_VALUE;
	w->hdr.size = sizeof(*w);
	w->dst = dva(self, 0, 0);
	w->value = 0xfeed;
	put_u64(cpu(self, 0, 0), 0);
	ASSERT_EQ(0, npu_submit(self->fd, self->q.queue_id, cmds, max, NULL, 0,
				&point));
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, point,
			       self->wait_ms));
	EXPECT_EQ(0xfeedULL, get_u64(cpu(self, 0, 0)));
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));

	/* A NOP more is too much. */
	h = (void *)((char *)cmds + max);
	h->opcode = DRM_NPU_PKT_NOP;
	h->size = sizeof(*h);
	EXPECT_EQ(-EINVAL, npu_submit(self->fd, self->q.queue_id, cmds,
				      max + 8, NULL, 0, NULL));
	free(cmds);
	queue_works(_metadata, self);
}

/*
 * Jobs of a queue run in submission order: each copies the value the
 * previous one left, then leaves its own, behind a slow first job.
 */
TEST_F(submit, order_within_queue)
{
	const int jobs = 32;
	__u64 cmds[SMALL_CMDS / 8 * 2], counter = dva(self, 0, 0);
	struct npu_cmdbuf cb;
	__u64 point, last = 0;
	int i;

	if (no_device(self->fd))
		return;
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 0, 4096), POISON, 8 * (jobs + 1));
	for (i = 1; i <= jobs; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		if (i == 1)
			npu_emit_fill(&cb, dva(self, 1, 0), 8 * MIB, 0x33, 1);
		npu_emit_copy(&cb, counter, dva(self, 0, 4096 + 8 * i), 8);
		npu_emit_write_value(&cb, counter, i);
		ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb,
					       NULL, 0, &point));
		/* Points go up by one per submit. */
		if (last)
			EXPECT_EQ(last + 1, point);
		last = point;
	}
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, last,
			       self->wait_ms));
	for (i = 1; i <= jobs; i++)
		EXPECT_EQ((__u64)i - 1, get_u64(cpu(self, 0, 4096 + 8 * i)))
			TH_LOG("job %d", i);
	EXPECT_EQ((__u64)jobs, get_u64(cpu(self, 0, 0)));
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
}

/* ---- rejected submissions ----------------------------------------- */

/* Submit raw arguments; the errno, or 0. */
static int submit_raw(int fd, struct drm_npu_submit *args)
{
	return npu_ioctl(fd, DRM_IOCTL_NPU_SUBMIT, args);
}

/*
 * Expect @err for the @size bytes of packets at @cmds, and that the queue
 * still works (with the next point: the rejected job took none).
 */
static void expect_rejected(struct __test_metadata *_metadata,
			    struct _test_data_submit *self, const void *cmds,
			    __u32 size, int err, const char *what)
{
	int ret;

	ret = npu_submit(self->fd, self->q.queue_id, cmds, size, NULL, 0,
			 NULL);
	EXPECT_EQ(err, ret) TH_LOG("%s: got %s", what, strerror(-ret));
	queue_works(_metadata, self);
}

/* As expect_rejected(), for raw SUBMIT arguments. */
static void expect_args_rejected(struct __test_metadata *_metadata,
				 struct _test_data_submit *self,
				 struct drm_npu_submit *args, int err,
				 const char *what)
{
	int ret;

	ret = submit_raw(self->fd, args);
	EXPECT_EQ(err, ret) TH_LOG("%s: got %s", what, strerror(-ret));
	queue_works(_metadata, self);
}

TEST_F(submit, reject_bad_arguments)
{
	struct drm_npu_pkt_header nop = { DRM_NPU_PKT_NOP, 8 };
	struct drm_npu_submit args;
	__u64 point;
	void *bad;

	if (no_device(self->fd))
		return;
	bad = mmap(NULL, self->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	ASSERT_NE(MAP_FAILED, bad);

	memset(&args, 0, sizeof(args));
	args.queue_id = self->q.queue_id;
	args.cmds_ptr = (__u64)(uintptr_t)&nop;
	args.cmds_size = sizeof(nop);
	args.flags = 2;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "flags 2");
	args.flags = 0x80000000;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "flags bit 31");
	args.flags = 0;

	args.cmds_size = 0;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "cmds_size 0");
	args.cmds_size = 4;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "cmds_size 4");
	args.cmds_size = 12;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "cmds_size 12");
	args.cmds_size = DRM_NPU_MAX_CMDS_SIZE + 8;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "cmds_size past the limit");
	args.cmds_size = 0xfffffff8;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "cmds_size 0xfffffff8");
	args.cmds_size = sizeof(nop);

	/* Unreadable command buffers. */
	args.cmds_ptr = 0;
	expect_args_rejected(_metadata, self, &args, -EFAULT, "cmds_ptr NULL");
	args.cmds_ptr = (__u64)(uintptr_t)bad;
	expect_args_rejected(_metadata, self, &args, -EFAULT,
			     "cmds_ptr unmapped");
	args.cmds_ptr = ~0ULL - 7;
	expect_args_rejected(_metadata, self, &args, -EFAULT,
			     "cmds_ptr kernel half");
	args.cmds_ptr = (__u64)(uintptr_t)&nop;

	/* Unknown queues. */
	args.queue_id = 0;
	expect_args_rejected(_metadata, self, &args, -ENOENT, "queue 0");
	args.queue_id = self->q.queue_id + 1000;
	expect_args_rejected(_metadata, self, &args, -ENOENT, "queue +1000");
	args.queue_id = self->q.queue_id;

	/* The point field is output only. */
	ASSERT_EQ(0, npu_syncobj_query(self->fd, self->q.syncobj_handle,
				       DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
				       &point));
	args.point = 12345;
	ASSERT_EQ(0, submit_raw(self->fd, &args));
	EXPECT_EQ(point + 1, args.point);
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, args.point,
			       self->wait_ms));
	munmap(bad, self->page);
	queue_works(_metadata, self);
}

TEST_F(submit, reject_bad_headers)
{
	__u64 cmds[16];
	struct drm_npu_pkt_header *h = (void *)cmds;
	struct drm_npu_pkt_copy *c = (void *)cmds;

	if (no_device(self->fd))
		return;
	memset(cmds, 0, sizeof(cmds));
	h->opcode = DRM_NPU_PKT_NOP;
	h->size = 0;
	expect_rejected(_metadata, self, cmds, 8, -EINVAL, "NOP size 0");
	h->size = 16;
	expect_rejected(_metadata, self, cmds, 16, -EINVAL, "NOP size 16");
	h->size = 4;
	expect_rejected(_metadata, self, cmds, 8, -EINVAL, "NOP size 4");

	h->opcode = DRM_NPU_PKT_COPY_STRIDED + 1;
	h->size = 8;
	expect_rejected(_metadata, self, cmds, 8, -EINVAL, "opcode 8");
	h->opcode = 0xffffffff;
	expect_rejected(_metadata, self, cmds, 8, -EINVAL, "opcode ~0");
	h->opcode = 0x100;
	expect_rejected(_metadata, self, cmds, 8, -EINVAL, "opcode 256");

	/* A COPY whose header is right but which runs past the buffer. */
	memset(cmds, 0, sizeof(cmds));
	c->hdr.opcode = DRM_NPU_PKT_COPY;
	c->hdr.size = sizeof(*c);
	c->src = dva(self, 0, 0);
	c->dst = dva(self, 0, 4096);
	c->size = 8;
	expect_rejected(_metadata, self, cmds, 8, -EINVAL, "truncated COPY");
	expect_rejected(_metadata, self, cmds, 24, -EINVAL,
			"COPY short by 8");
	/* A NOP, then a truncated COPY. */
	memmove(cmds + 1, cmds, sizeof(*c));
	h->opcode = DRM_NPU_PKT_NOP;
	h->size = 8;
	expect_rejected(_metadata, self, cmds, 8 + 16, -EINVAL,
			"NOP + truncated COPY");

	/* Header sizes that are not the packet's. */
	memset(cmds, 0, sizeof(cmds));
	c->hdr.opcode = DRM_NPU_PKT_COPY;
	c->src = dva(self, 0, 0);
	c->dst = dva(self, 0, 4096);
	c->size = 8;
	c->hdr.size = sizeof(*c) - 8;
	expect_rejected(_metadata, self, cmds, sizeof(*c), -EINVAL,
			"COPY size 24");
	c->hdr.size = sizeof(*c) + 8;
	expect_rejected(_metadata, self, cmds, sizeof(*c) + 8, -EINVAL,
			"COPY size 40");
	c->hdr.size = sizeof(struct drm_npu_pkt_fill);
	expect_rejected(_metadata, self, cmds, sizeof(*c) + 8, -EINVAL,
			"COPY with FILL's size");
	c->hdr.size = sizeof(*c);
	expect_rejected(_metadata, self, cmds, sizeof(*c), 0, "good COPY");

	memset(cmds, 0, sizeof(cmds));
	h->opcode = DRM_NPU_PKT_TIMESTAMP;
	h->size = 8;
	expect_rejected(_metadata, self, cmds, 16, -EINVAL,
			"TIMESTAMP size 8");
	h->opcode = DRM_NPU_PKT_WRITE_VALUE;
	h->size = 16;
	expect_rejected(_metadata, self, cmds, 24, -EINVAL,
			"WRITE_VALUE size 16");
	h->opcode = DRM_NPU_PKT_WAIT_VALUE;
	h->size = 32;
	expect_rejected(_metadata, self, cmds, 40, -EINVAL,
			"WAIT_VALUE size 32");
	h->opcode = DRM_NPU_PKT_OP;
	h->size = 64;
	expect_rejected(_metadata, self, cmds, 64, -EINVAL, "OP size 64");
	h->opcode = DRM_NPU_PKT_COPY_STRIDED;
	expect_rejected(_metadata, self, cmds, 64, -EINVAL,
			"COPY_STRIDED size 64");
}

static struct drm_npu_pkt_fill make_fill(__u64 dst, __u64 size, __u32 value,
					 __u32 width)
{
	struct drm_npu_pkt_fill f = {
		.hdr = { DRM_NPU_PKT_FILL, sizeof(f) },
		.dst = dst,
		.size = size,
		.value = value,
		.width = width,
	};

	return f;
}

static struct drm_npu_pkt_copy make_copy(__u64 src, __u64 dst, __u64 size)
{
	struct drm_npu_pkt_copy c = {
		.hdr = { DRM_NPU_PKT_COPY, sizeof(c) },
		.src = src,
		.dst = dst,
		.size = size,
	};

	return c;
}

TEST_F(submit, reject_bad_fill)
{
	const __u64 d = dva(self, 0, 0);
	const struct {
		struct drm_npu_pkt_fill f;
		const char *what;
	} bad[] = {
		{ make_fill(d, 12, 0, 3), "width 3" },
		{ make_fill(d, 16, 0, 0), "width 0" },
		{ make_fill(d, 16, 0, 8), "width 8" },
		{ make_fill(d + 1, 4, 0, 2), "width 2, odd dst" },
		{ make_fill(d, 5, 0, 2), "width 2, odd size" },
		{ make_fill(d + 2, 8, 0, 4), "width 4, dst 2 mod 4" },
		{ make_fill(d, 6, 0, 4), "width 4, size 6" },
		{ make_fill(d, 4, 0x100, 1), "width 1, value 0x100" },
		{ make_fill(d, 4, 0xffffffff, 1), "width 1, value ~0" },
		{ make_fill(d, 4, 0x10000, 2), "width 2, value 0x10000" },
		{ make_fill(d, 0, 0, 1), "size 0" },
		{ make_fill(d, 0, 0, 4), "size 0, width 4" },
		{ make_fill(~0ULL - 3, 8, 0, 4), "dst + size overflows" },
	};
	struct drm_npu_pkt_fill ok;
	unsigned int i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_rejected(_metadata, self, &bad[i].f, sizeof(bad[i].f),
				-EINVAL, bad[i].what);
	ok = make_fill(d, 4, 0xff, 1);
	expect_rejected(_metadata, self, &ok, sizeof(ok), 0, "good FILL");
}

TEST_F(submit, reject_bad_copy)
{
	const __u64 a = dva(self, 0, 0);
	const struct {
		struct drm_npu_pkt_copy c;
		const char *what;
	} bad[] = {
		{ make_copy(a, a + 4096, 0), "size 0" },
		{ make_copy(a, a, 8), "src == dst" },
		{ make_copy(a, a + 8, 16), "dst inside src" },
		{ make_copy(a + 8, a, 16), "src inside dst" },
		{ make_copy(a, a + 1, 2), "overlap by one" },
		{ make_copy(~0ULL - 7, a, 16), "src + size overflows" },
		{ make_copy(a, ~0ULL - 7, 16), "dst + size overflows" },
		{ make_copy(a, a + 4096, ~0ULL), "size ~0" },
	};
	struct drm_npu_pkt_copy ok;
	unsigned int i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_rejected(_metadata, self, &bad[i].c, sizeof(bad[i].c),
				-EINVAL, bad[i].what);
	/* Adjacent ranges do not overlap. */
	ok = make_copy(a, a + 16, 16);
	expect_rejected(_metadata, self, &ok, sizeof(ok), 0, "adjacent");
}

static struct drm_npu_pkt_copy_strided make_strided(__u64 src, __u64 dst,
						    __u32 ndim, __u32 elem,
						    __u64 size, __u64 stride)
{
	struct drm_npu_pkt_copy_strided c = {
		.hdr = { DRM_NPU_PKT_COPY_STRIDED, sizeof(c) },
		.src = src,
		.dst = dst,
		.ndim = ndim,
		.elem_size = elem,
	};
	__u32 d;

	for (d = 0; d < ndim && d < DRM_NPU_COPY_MAX_DIMS; d++) {
		c.sizes[d] = size;
		c.src_strides[d] = stride;
		c.dst_strides[d] = stride;
	}
	return c;
}

TEST_F(submit, reject_bad_copy_strided)
{
	const __u64 a = dva(self, 0, 0), b = dva(self, 1, 0);
	struct {
		struct drm_npu_pkt_copy_strided c;
		const char *what;
	} bad[] = {
		{ make_strided(a, b, 0, 4, 4, 4), "ndim 0" },
		{ make_strided(a, b, 7, 4, 2, 4), "ndim 7" },
		{ make_strided(a, b, 1, 0, 4, 4), "elem_size 0" },
		{ make_strided(a, b, 1, 17, 4, 17), "elem_size 17" },
		{ make_strided(a, b, 2, 4, 0, 4), "a size of 0" },
		{ make_strided(a, b, 1, 4, 8, 4), "size past ndim" },
		{ make_strided(a, b, 1, 4, 8, 4), "src stride past ndim" },
		{ make_strided(a, b, 1, 4, 8, 4), "dst stride past ndim" },
		{ make_strided(a, b, 1, 4, 3, ~0ULL / 2), "extent overflows" },
		{ make_strided(~0ULL - 15, b, 1, 4, 8, 4), "src + extent overflows" },
		{ make_strided(a, ~0ULL - 15, 1, 4, 8, 4), "dst + extent overflows" },
		{ make_strided(a, a, 1, 4, 8, 4), "src == dst" },
		{ make_strided(a, a + 4, 1, 4, 8, 8), "interleaved extents" },
		{ make_strided(a, b, 6, 1, 1ULL << 11, 0), "element count overflows" },
	};
	struct drm_npu_pkt_copy_strided ok;
	unsigned int i;

	if (no_device(self->fd))
		return;
	bad[5].c.sizes[1] = 1;
	bad[6].c.src_strides[1] = 4;
	bad[7].c.dst_strides[5] = 4;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_rejected(_metadata, self, &bad[i].c, sizeof(bad[i].c),
				-EINVAL, bad[i].what);
	/* Adjacent extents do not overlap; a broadcast source is fine. */
	ok = make_strided(a, a + 32, 1, 4, 8, 4);
	expect_rejected(_metadata, self, &ok, sizeof(ok), 0, "adjacent");
	ok = make_strided(a, b, 6, 1, 1ULL << 10, 0);
	ok.dst_strides[5] = 1;
	ok.sizes[0] = 1;
	ok.sizes[1] = 1;
	ok.sizes[2] = 1;
	ok.sizes[3] = 1;
	ok.sizes[4] = 2;
	expect_rejected(_metadata, self, &ok, sizeof(ok), 0, "broadcast");
}

TEST_F(submit, reject_misaligned_and_reserved)
{
	const __u64 a = dva(self, 0, 0);
	struct drm_npu_pkt_timestamp ts = {
		.hdr = { DRM_NPU_PKT_TIMESTAMP, sizeof(ts) },
	};
	struct drm_npu_pkt_write_value wr = {
		.hdr = { DRM_NPU_PKT_WRITE_VALUE, sizeof(wr) },
	};
	struct drm_npu_pkt_wait_value wt = {
		.hdr = { DRM_NPU_PKT_WAIT_VALUE, sizeof(wt) },
		.mask = ~0ULL,
	};
	int i;

	if (no_device(self->fd))
		return;
	for (i = 1; i < 8; i += 3) {
		ts.dst = a + i;
		expect_rejected(_metadata, self, &ts, sizeof(ts), -EINVAL,
				"TIMESTAMP misaligned");
		wr.dst = a + i;
		expect_rejected(_metadata, self, &wr, sizeof(wr), -EINVAL,
				"WRITE_VALUE misaligned");
		wt.addr = a + i;
		expect_rejected(_metadata, self, &wt, sizeof(wt), -EINVAL,
				"WAIT_VALUE misaligned");
	}
	wt.addr = a;
	wt.cmp = DRM_NPU_WAIT_NE + 1;
	expect_rejected(_metadata, self, &wt, sizeof(wt), -EINVAL,
			"WAIT_VALUE cmp 3");
	wt.cmp = 0xffffffff;
	expect_rejected(_metadata, self, &wt, sizeof(wt), -EINVAL,
			"WAIT_VALUE cmp ~0");
	wt.cmp = DRM_NPU_WAIT_GE;
	wt.pad = 1;
	expect_rejected(_metadata, self, &wt, sizeof(wt), -EINVAL,
			"WAIT_VALUE pad");
	wt.pad = 0;
	/* GE 0 is true at once. */
	expect_rejected(_metadata, self, &wt, sizeof(wt), 0, "good WAIT_VALUE");
	ts.dst = a + 8;
	expect_rejected(_metadata, self, &ts, sizeof(ts), 0, "good TIMESTAMP");
}

/* OP packets are for compute engines: -EINVAL on a copy queue. */
TEST_F(submit, reject_op_on_copy_queue)
{
	struct drm_npu_pkt_op op = {
		.hdr = { DRM_NPU_PKT_OP, sizeof(op) },
		.op = DRM_NPU_OP_ADD,
		.dtype = DRM_NPU_DTYPE_F32,
		.out_dtype = DRM_NPU_DTYPE_F32,
		.n = 16,
	};

	if (no_device(self->fd))
		return;
	op.a = dva(self, 0, 0);
	op.b = dva(self, 0, 4096);
	op.out = dva(self, 0, 8192);
	expect_rejected(_metadata, self, &op, sizeof(op), -EINVAL,
			"OP on a copy queue");
}

TEST_F(submit, reject_bad_fences)
{
	struct drm_npu_fence fences[DRM_NPU_MAX_IN_FENCES + 1];
	struct drm_npu_pkt_header nop = { DRM_NPU_PKT_NOP, 8 };
	struct drm_npu_queue_status st;
	struct drm_npu_submit args;
	char *area, *bad;
	__u32 bin;
	int i;

	if (no_device(self->fd))
		return;
	/* A readable page, then one that is not. */
	area = mmap(NULL, 2 * self->page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, area);
	bad = area + self->page;
	ASSERT_EQ(0, mprotect(bad, self->page, PROT_NONE));
	/* Point 1 exists. */
	queue_works(_metadata, self);

	memset(fences, 0, sizeof(fences));
	for (i = 0; i <= DRM_NPU_MAX_IN_FENCES; i++) {
		fences[i].handle = self->q.syncobj_handle;
		fences[i].point = 1;
	}
	memset(&args, 0, sizeof(args));
	args.queue_id = self->q.queue_id;
	args.cmds_ptr = (__u64)(uintptr_t)&nop;
	args.cmds_size = sizeof(nop);
	args.in_fences_ptr = (__u64)(uintptr_t)fences;

	args.in_fence_count = DRM_NPU_MAX_IN_FENCES + 1;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "one fence too many");
	args.in_fence_count = 0xffffffff;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "in_fence_count ~0");

	args.in_fence_count = 2;
	fences[1].flags = 1;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "fence flags");
	fences[1].flags = 0x80000000;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "fence flags bit 31");
	fences[1].flags = 0;

	/* No such syncobj. */
	fences[1].handle = 0;
	expect_args_rejected(_metadata, self, &args, -ENOENT, "handle 0");
	fences[1].handle = 0xdead;
	expect_args_rejected(_metadata, self, &args, -ENOENT,
			     "unknown handle");
	fences[1].handle = self->q.syncobj_handle;

	/* Points nobody submitted yet. */
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	fences[1].point = st.submitted + 1;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "the next point");
	fences[1].point = ~0ULL;
	expect_args_rejected(_metadata, self, &args, -EINVAL, "point ~0");
	/* An empty binary syncobj has no fence either. */
	ASSERT_EQ(0, npu_syncobj_create(self->fd, 0, &bin));
	fences[1].handle = bin;
	fences[1].point = 0;
	expect_args_rejected(_metadata, self, &args, -EINVAL,
			     "empty binary syncobj");
	fences[1].handle = self->q.syncobj_handle;
	fences[1].point = 1;

	/* Unreadable fences. */
	args.in_fences_ptr = 0;
	expect_args_rejected(_metadata, self, &args, -EFAULT,
			     "in_fences_ptr NULL");
	args.in_fences_ptr = (__u64)(uintptr_t)bad;
	expect_args_rejected(_metadata, self, &args, -EFAULT,
			     "in_fences_ptr unmapped");
	/* The second of two fences is past the end of the mapping. */
	memcpy(bad - sizeof(fences[0]), &fences[0], sizeof(fences[0]));
	args.in_fences_ptr = (__u64)(uintptr_t)(bad - sizeof(fences[0]));
	expect_args_rejected(_metadata, self, &args, -EFAULT,
			     "second fence unmapped");
	/* A bad pointer with no fences is never read. */
	args.in_fence_count = 0;
	args.in_fences_ptr = (__u64)(uintptr_t)bad;
	expect_args_rejected(_metadata, self, &args, 0,
			     "no fences at a bad pointer");

	/* The largest fence count is fine, fences may repeat. */
	args.in_fence_count = DRM_NPU_MAX_IN_FENCES;
	args.in_fences_ptr = (__u64)(uintptr_t)fences;
	fences[7].handle = bin;
	ASSERT_EQ(0, npu_syncobj_transfer(self->fd, bin, 0,
					  self->q.syncobj_handle, 1, 0));
	fences[7].point = 0;
	ASSERT_EQ(0, submit_raw(self->fd, &args));
	EXPECT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, args.point,
			       self->wait_ms));
	npu_syncobj_destroy(self->fd, bin);
	munmap(area, 2 * self->page);
	queue_works(_metadata, self);
}

/* ---- dependencies between queues ---------------------------------- */

/*
 * Queue B waits for a point of queue A, whose job waits for a flag that a
 * third queue sets later. B's job, on another engine, must run after A's:
 * it copies what A wrote and its timestamp is later than A's.
 */
TEST_F(submit, dependency_on_other_queue)
{
	__u64 cmds[SMALL_CMDS / 8 * 3], flag = dva(self, 0, 0);
	struct drm_npu_queue_create qb, qc;
	struct drm_npu_queue_status st;
	struct drm_npu_fence fence = { 0 };
	struct npu_cmdbuf cb;
	__u64 pa, pb, pc, ts_a, ts_b;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qb));
	/* C must not sit behind A on A's engine. */
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qc));
	ASSERT_NE(self->q.engine_id, qb.engine_id);
	ASSERT_NE(self->q.engine_id, qc.engine_id);
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), POISON, 2 * MIB);

	/* A: wait for the flag, stamp, fill 1 MiB. */
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	npu_emit_timestamp(&cb, dva(self, 0, 8));
	npu_emit_fill(&cb, dva(self, 1, 0), MIB, 0x77, 1);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &pa));

	/* B: after A, stamp and copy A's output. */
	fence.handle = self->q.syncobj_handle;
	fence.point = pa;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_timestamp(&cb, dva(self, 0, 16));
	npu_emit_copy(&cb, dva(self, 1, 0), dva(self, 1, MIB), MIB);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, &fence, 1,
				       &pb));

	usleep(100 * 1000);
	EXPECT_EQ(0, nsub_signalled(self->fd, qb.syncobj_handle, pb));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, MIB), MIB, POISON));
	ASSERT_EQ(0, npu_queue_status(self->fd, qb.queue_id, &st));
	EXPECT_EQ(0ULL, st.completed);

	/* C releases A. */
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, flag, 1);
	ASSERT_EQ(0, run_cmds(self->fd, &qc, &cb, self->wait_ms, &pc));
	ASSERT_EQ(0, nsub_wait(self->fd, qb.syncobj_handle, pb,
			       self->wait_ms));
	ASSERT_EQ(1, nsub_signalled(self->fd, self->q.syncobj_handle, pa));

	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, MIB), MIB, 0x77));
	ts_a = get_u64(cpu(self, 0, 8));
	ts_b = get_u64(cpu(self, 0, 16));
	EXPECT_LT(ts_a, ts_b);
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
	EXPECT_EQ(0, queue_error(self->fd, qb.queue_id));
	EXPECT_EQ(0, queue_error(self->fd, qc.queue_id));
}

/*
 * The same through a sync_file: A's point is transferred into a binary
 * syncobj, exported as a sync_file, imported into a new syncobj, and B
 * waits for that at point 0.
 */
TEST_F(submit, dependency_through_sync_file)
{
	__u64 cmds[SMALL_CMDS / 8 * 2], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_create qb;
	struct npu_cmdbuf cb;
	__u64 pa, pb;
	__u32 imported;
	int sync_fd = -1, status = 0;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qb));
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), POISON, 2 * MIB);

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_EQ);
	npu_emit_fill(&cb, dva(self, 1, 0), 64 * KIB, 0x3c, 1);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &pa));

	ASSERT_EQ(0, nsub_export_point(self->fd, self->q.syncobj_handle, pa,
				       &sync_fd));
	ASSERT_EQ(0, nsub_sync_file_status(sync_fd, &status));
	EXPECT_EQ(0, status);
	ASSERT_EQ(0, nsub_import_sync_file(self->fd, sync_fd, &imported));

	fence.handle = imported;
	fence.point = 0;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, dva(self, 1, 0), dva(self, 1, MIB), 64 * KIB);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, &fence, 1,
				       &pb));

	usleep(100 * 1000);
	EXPECT_EQ(0, nsub_signalled(self->fd, qb.syncobj_handle, pb));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, MIB), 64 * KIB, POISON));

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, qb.syncobj_handle, pb,
			       self->wait_ms));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, MIB), 64 * KIB, 0x3c));
	ASSERT_EQ(0, nsub_sync_file_status(sync_fd, &status));
	EXPECT_EQ(1, status);
	EXPECT_EQ(0, queue_error(self->fd, qb.queue_id));
	close(sync_fd);
	npu_syncobj_destroy(self->fd, imported);
}

/*
 * With inject_latency_us slowing every job, B (on another engine) still
 * starts only after A completed: the two latencies add up, and B's first
 * timestamp is at least one latency after A's last.
 */
TEST_F(submit, dependency_with_injected_latency)
{
	__u64 cmds[SMALL_CMDS / 8 * 2], ts_a, ts_b;
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_create qb;
	struct npu_cmdbuf cb;
	long long latency_us;
	__s64 t0, t1;
	__u64 pa, pb;

	if (no_device(self->fd))
		return;
	if (!self->dbg_ok)
		SKIP(return, "no access to %s", self->dbg);
	latency_us = self->timeout_ms * 1000LL / 4;
	if (latency_us > 200000)
		latency_us = 200000;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qb));
	memset(cpu(self, 1, 0), POISON, 2 * MIB);
	self->injected = true;
	ASSERT_EQ(0, nsub_dbg_write(self->dbg, "inject_latency_us",
				    latency_us));

	t0 = npu_monotonic_ns();
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_fill(&cb, dva(self, 1, 0), 64 * KIB, 0x42, 1);
	npu_emit_timestamp(&cb, dva(self, 0, 8));
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &pa));
	fence.handle = self->q.syncobj_handle;
	fence.point = pa;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_timestamp(&cb, dva(self, 0, 16));
	npu_emit_copy(&cb, dva(self, 1, 0), dva(self, 1, MIB), 64 * KIB);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, &fence, 1,
				       &pb));
	EXPECT_EQ(0, nsub_signalled(self->fd, qb.syncobj_handle, pb));
	ASSERT_EQ(0, nsub_wait(self->fd, qb.syncobj_handle, pb,
			       self->wait_ms));
	t1 = npu_monotonic_ns();
	ASSERT_EQ(0, nsub_dbg_write(self->dbg, "inject_latency_us", 0));

	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, MIB), 64 * KIB, 0x42));
	ts_a = get_u64(cpu(self, 0, 8));
	ts_b = get_u64(cpu(self, 0, 16));
	EXPECT_LE(ts_a + latency_us * 1000, ts_b);
	EXPECT_LE(2 * latency_us * 1000, t1 - t0);
	TH_LOG("latency %lld us: A to B %llu us, submit to B done %lld us",
	       latency_us, (ts_b - ts_a) / 1000, (t1 - t0) / 1000);
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
	EXPECT_EQ(0, queue_error(self->fd, qb.queue_id));
}

/* ---- waits that time out ------------------------------------------ */

/*
 * A WAIT_VALUE nobody satisfies: a wait with a deadline well before the
 * job timeout returns -ETIME at that deadline, not before; the job goes
 * on and completes once the value is written.
 */
TEST_F(submit, wait_times_out_at_deadline)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_queue_status st;
	long long wait_ms = self->timeout_ms / 4;
	struct npu_cmdbuf cb;
	__s64 t0, deadline, end, released;
	__u64 point;
	int ret;

	if (no_device(self->fd))
		return;
	put_u64(cpu(self, 0, 0), 0);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, 1, DRM_NPU_WAIT_EQ);
	t0 = npu_monotonic_ns();
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &point));
	deadline = nsub_deadline_ms(wait_ms);
	ret = npu_syncobj_wait_point(self->fd, self->q.syncobj_handle, point,
				     deadline);
	end = npu_monotonic_ns();
	EXPECT_EQ(-ETIME, ret) TH_LOG("wait: %s", strerror(-ret));
	/* Not early (a jiffy of rounding aside), and not much late. */
	EXPECT_LE(deadline - 2 * NSUB_NSEC_PER_MSEC, end);
	EXPECT_GE(deadline + 1000 * NSUB_NSEC_PER_MSEC, end);
	TH_LOG("-ETIME %lld us after a %lld ms deadline",
	       (end - deadline) / 1000, wait_ms);

	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(point - 1, st.completed);
	EXPECT_EQ(0, nsub_signalled(self->fd, self->q.syncobj_handle, point));

	/* A GE wait with a mask ignores the bits outside it. */
	one = 0xff00000000000001ULL;
	released = npu_monotonic_ns();
	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, point,
			       self->wait_ms));
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	if (released - t0 < self->timeout_ms * NSUB_NSEC_PER_MSEC * 3 / 4) {
		EXPECT_EQ(0, st.error);
	} else {
		TH_LOG("released %lld ms after submit: the job may have timed out",
		       (released - t0) / NSUB_NSEC_PER_MSEC);
	}
	if (st.error)
		ASSERT_EQ(0, npu_queue_reset(self->fd, self->q.queue_id));
	queue_works(_metadata, self);
}

/*
 * Left alone, a WAIT_VALUE is bounded by the job timeout: the job fails
 * with -ETIMEDOUT after about job_timeout_ms and its engine resets.
 */
TEST_F_TIMEOUT(submit, wait_value_times_out, 120)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0), point;
	struct nsub_engine_stats before, after;
	struct npu_cmdbuf cb;
	__s64 t0, dt;

	if (no_device(self->fd))
		return;
	if (self->dbg_ok)
		ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id,
					       &before));
	put_u64(cpu(self, 0, 0), 5);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 5, ~0ULL, DRM_NPU_WAIT_NE);
	npu_emit_write_value(&cb, dva(self, 0, 8), 0xdead);
	t0 = npu_monotonic_ns();
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point));
	dt = npu_monotonic_ns() - t0;
	TH_LOG("WAIT_VALUE gave up after %lld ms (job_timeout_ms %u)",
	       dt / NSUB_NSEC_PER_MSEC, self->timeout_ms);
	EXPECT_LE(self->timeout_ms * NSUB_NSEC_PER_MSEC, dt);
	EXPECT_GE((self->timeout_ms + 1000 + self->timeout_ms / 2) *
		  NSUB_NSEC_PER_MSEC, dt);
	expect_queue_error(self->fd, self->q.queue_id, -ETIMEDOUT, point, 0);
	EXPECT_NE(0xdeadULL, get_u64(cpu(self, 0, 8)));
	if (self->dbg_ok) {
		ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id,
					       &after));
		EXPECT_EQ(before.resets + 1, after.resets);
	}
	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
}

/*
 * A job of @steps packet pairs: WAIT_VALUE until the flag (BO 0 at 0)
 * reaches i, then WRITE_VALUE i to the ack word (BO 0 at 8). The host
 * raises the flag to i once packet i-1 acknowledged and @step_ns more
 * have passed, so each packet runs about @step_ns. Returns the last
 * acknowledged step; *@point is the job's point.
 */
static __u64 paced_job(struct __test_metadata *_metadata,
		       struct _test_data_submit *self, __u64 steps,
		       __s64 step_ns, __u64 *point)
{
	__u64 cmds[(SMALL_CMDS / 4) * (DRM_NPU_JOB_TIMEOUT_FACTOR + 2)];
	__s64 t0, limit;
	struct npu_cmdbuf cb;
	__u64 i, acked = 0;

	put_u64(cpu(self, 0, 0), 0);
	put_u64(cpu(self, 0, 8), 0);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	for (i = 1; i <= steps; i++) {
		npu_emit_wait_value(&cb, dva(self, 0, 0), i, ~0ULL,
				    DRM_NPU_WAIT_GE);
		npu_emit_write_value(&cb, dva(self, 0, 8), i);
	}
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, point));
	t0 = npu_monotonic_ns();
	limit = t0 + (__s64)(steps + 2) * step_ns +
		self->wait_ms * NSUB_NSEC_PER_MSEC;
	for (i = 1; i <= steps; i++) {
		/* The clock only paces the packets; the ack orders them. */
		while (npu_monotonic_ns() < t0 + (__s64)i * step_ns)
			usleep(1000);
		put_u64(cpu(self, 0, 0), i);
		while ((acked = get_u64(cpu(self, 0, 8))) < i &&
		       !nsub_signalled(self->fd, self->q.syncobj_handle,
				       *point) &&
		       npu_monotonic_ns() < limit)
			usleep(1000);
		acked = get_u64(cpu(self, 0, 8));
		if (acked < i)
			break;
	}
	EXPECT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, *point,
			       self->wait_ms));
	return acked;
}

/*
 * The watchdog measures progress: a job whose packets each end well
 * inside job_timeout_ms completes though the job runs longer than that.
 */
TEST_F_TIMEOUT(submit, job_timeout_bounds_each_packet, 120)
{
	__s64 t0, dt, step = self->timeout_ms * NSUB_NSEC_PER_MSEC / 2;
	__u64 point;

	if (no_device(self->fd))
		return;
	t0 = npu_monotonic_ns();
	EXPECT_EQ(4ULL, paced_job(_metadata, self, 4, step, &point));
	dt = npu_monotonic_ns() - t0;
	TH_LOG("4 packets of %lld ms ran in %lld ms (job_timeout_ms %u)",
	       step / NSUB_NSEC_PER_MSEC, dt / NSUB_NSEC_PER_MSEC,
	       self->timeout_ms);
	EXPECT_LT(self->timeout_ms * NSUB_NSEC_PER_MSEC * 3 / 2, dt);
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
}

/*
 * A job that keeps making progress is still cut off after
 * DRM_NPU_JOB_TIMEOUT_FACTOR job timeouts: one job cannot hold an engine
 * the other queues share.
 */
TEST_F_TIMEOUT(submit, job_timeout_bounds_the_job, 180)
{
	__u64 steps = DRM_NPU_JOB_TIMEOUT_FACTOR + 2, point, acked;
	__s64 step = self->timeout_ms * NSUB_NSEC_PER_MSEC * 9 / 10, t0, dt;

	if (no_device(self->fd))
		return;
	if (self->timeout_ms > NPU_JOB_TIMEOUT_DEFAULT_MS)
		SKIP(return, "job timeout %u ms: the job would run %u s",
		     self->timeout_ms,
		     self->timeout_ms * DRM_NPU_JOB_TIMEOUT_FACTOR / 1000);
	t0 = npu_monotonic_ns();
	acked = paced_job(_metadata, self, steps, step, &point);
	dt = npu_monotonic_ns() - t0;
	TH_LOG("cut off after %llu of %llu packets, %lld ms", acked, steps,
	       dt / NSUB_NSEC_PER_MSEC);
	EXPECT_LT(acked, steps);
	EXPECT_LE((__u64)DRM_NPU_JOB_TIMEOUT_FACTOR - 1, acked);
	EXPECT_LE((__s64)self->timeout_ms * DRM_NPU_JOB_TIMEOUT_FACTOR *
		  NSUB_NSEC_PER_MSEC, dt);
	expect_queue_error(self->fd, self->q.queue_id, -ETIMEDOUT, point, 0);
	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
}

struct waiter {
	int fd;
	__u32 handle;
	__u64 point;
	__s64 deadline;
	__u32 flags;
	int ret;
	pthread_t thread;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = npu_syncobj_wait(w->fd, &w->handle, &w->point, 1,
				  w->deadline, w->flags);
	return NULL;
}

/*
 * A point not submitted yet: -EINVAL without WAIT_FOR_SUBMIT, -ETIME at
 * the deadline with it, and a waiter already there sees the job once it
 * is submitted.
 */
TEST_F(submit, wait_for_submit)
{
	struct drm_npu_queue_status st;
	__u64 cmds[SMALL_CMDS / 8], next, point;
	struct npu_cmdbuf cb;
	struct waiter w;
	__s64 deadline, end;
	int ret;

	if (no_device(self->fd))
		return;
	queue_works(_metadata, self);
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	next = st.submitted + 1;

	EXPECT_EQ(-EINVAL, npu_syncobj_wait(self->fd, &self->q.syncobj_handle,
					    &next, 1, nsub_deadline_ms(100),
					    0));
	deadline = nsub_deadline_ms(100);
	ret = npu_syncobj_wait(self->fd, &self->q.syncobj_handle, &next, 1,
			       deadline,
			       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT);
	end = npu_monotonic_ns();
	EXPECT_EQ(-ETIME, ret) TH_LOG("wait: %s", strerror(-ret));
	EXPECT_LE(deadline - 2 * NSUB_NSEC_PER_MSEC, end);

	memset(&w, 0, sizeof(w));
	w.fd = self->fd;
	w.handle = self->q.syncobj_handle;
	w.point = next;
	w.deadline = nsub_deadline_ms(self->wait_ms);
	w.flags = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT;
	ASSERT_EQ(0, pthread_create(&w.thread, NULL, waiter_main, &w));
	usleep(50 * 1000);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &point));
	EXPECT_EQ(next, point);
	pthread_join(w.thread, NULL);
	EXPECT_EQ(0, w.ret);
	EXPECT_EQ(1, nsub_signalled(self->fd, self->q.syncobj_handle, point));
}

/*
 * DRM_NPU_SUBMIT_CALLER_WAITS: a large job on an idle queue and engine runs
 * inside the call (its point has completed when the call returns); without
 * the flag it goes to the engine's worker. A job that waits for a value is
 * never run inside the call, flag or not.
 */
TEST_F(submit, caller_waits_runs_inline)
{
	const __u64 big = 4 * MIB + 8;
	struct nsub_engine_stats before, after;
	__u64 cmds[SMALL_CMDS / 8], point;
	struct npu_cmdbuf cb;

	if (no_device(self->fd))
		return;
	if (!self->dbg_ok)
		SKIP(return, "needs root and debugfs to count direct jobs");
	queue_works(_metadata, self);

	npu_fill_pattern(cpu(self, 0, 0), big, 21);
	memset(cpu(self, 1, 0), POISON, big + 8);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, dva(self, 0, 0), dva(self, 1, 0), big);
	ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &before));
	ASSERT_EQ(0, npu_submit_flags(self->fd, self->q.queue_id,
				      DRM_NPU_SUBMIT_CALLER_WAITS, cb.data,
				      cb.size, NULL, 0, &point));
	EXPECT_EQ(1, nsub_signalled(self->fd, self->q.syncobj_handle, point));
	ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &after));
	EXPECT_EQ(before.direct + 1, after.direct);
	EXPECT_TRUE(npu_has_pattern(cpu(self, 1, 0), big, 21, 0));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, big), 8, POISON));

	/* The same without the flag: the worker runs it. */
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point));
	ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &before));
	EXPECT_EQ(after.direct, before.direct);
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));

	/* A WAIT_VALUE job returns at once and runs when the value comes. */
	put_u64(cpu(self, 0, 0), 0);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, dva(self, 0, 0), 7, ~0ULL,
			    DRM_NPU_WAIT_EQ);
	ASSERT_EQ(0, npu_submit_flags(self->fd, self->q.queue_id,
				      DRM_NPU_SUBMIT_CALLER_WAITS, cb.data,
				      cb.size, NULL, 0, &point));
	EXPECT_EQ(0, nsub_signalled(self->fd, self->q.syncobj_handle, point));
	put_u64(cpu(self, 0, 0), 7);
	EXPECT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, point,
			       self->wait_ms));
	ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &after));
	EXPECT_EQ(before.direct, after.direct);
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
}

/*
 * Copy @page bytes from @src to each of the @n pages at @dst (one packet
 * per page) on the fixture's queue; return how many pages the engine
 * copied through BOs' second mappings.
 */
static long long copy_page_to_each(struct __test_metadata *_metadata,
				   struct _test_data_submit *self, __u64 src,
				   __u64 dst, unsigned int n)
{
	size_t size = (size_t)n * 2 * sizeof(struct drm_npu_pkt_copy);
	struct nsub_engine_stats before = { 0 }, after = { 0 };
	struct npu_cmdbuf cb;
	void *cmds = malloc(size);
	unsigned int i;

	EXPECT_NE(NULL, cmds);
	if (!cmds)
		return -1;
	npu_cmdbuf_init(&cb, cmds, size);
	for (i = 0; i < n; i++)
		npu_emit_copy(&cb, src, dst + (__u64)i * self->page,
			      self->page);
	EXPECT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &before));
	EXPECT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	EXPECT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &after));
	EXPECT_EQ(0, queue_error(self->fd, self->q.queue_id));
	free(cmds);
	return after.aliased - before.aliased;
}

/*
 * A move stops at the end of a mapping: an unaligned copy into two
 * adjacent mappings (at @window) of distant ranges of fixture BO 1.
 */
static void copy_across_two_mappings(struct __test_metadata *_metadata,
				     struct _test_data_submit *self,
				     __u64 window)
{
	const __u64 pg = self->page, far = 8 * MIB, len = 3 * pg;
	const __u64 first = 2 * pg - 123;
	unsigned char *src = cpu(self, 0, 100);
	__u64 cmds[SMALL_CMDS / 8];
	struct npu_cmdbuf cb;

	npu_fill_pattern(src, len, 35);
	memset(cpu(self, 1, 0), POISON, BO_SIZE);
	ASSERT_EQ(0, npu_vm_map(self->fd, self->mem[1].bo, window, 2 * pg, 0,
				0));
	ASSERT_EQ(0, npu_vm_map(self->fd, self->mem[1].bo, window + 2 * pg,
				2 * pg, far, 0));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, dva(self, 0, 100), window + 123, len);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	EXPECT_EQ(0, memcmp(cpu(self, 1, 123), src, first));
	EXPECT_EQ(0, memcmp(cpu(self, 1, far), src + first, len - first));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 123, POISON));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, far + len - first), 64, POISON));
	EXPECT_EQ(0, npu_vm_unmap(self->fd, window, 2 * pg));
	EXPECT_EQ(0, npu_vm_unmap(self->fd, window + 2 * pg, 2 * pg));
}

/*
 * The copy engine moves data through the BOs' second (vmap) mappings,
 * contiguous over a whole mapping; where those collide in an emulator's
 * TLB (kernel addresses equal modulo 64 pages), page by page, through
 * whichever address of a page does not collide. One page copied to each
 * of 1024 others meets both cases for all but vanishing odds. Every byte
 * must land where it was sent, through an odd BO offset too, and nothing
 * next to it: for device BOs and for userptr BOs.
 */
TEST_F(submit, colliding_pages_copy_through_an_alias)
{
	const unsigned int n = 1024;
	const __u64 span = (__u64)n * self->page;
	/* BO 1 from an odd page offset, mapped a second time. */
	const __u64 bo_off = 4 * MIB + 3 * self->page;
	const __u64 window = self->mem[1].va + 128 * MIB;
	unsigned char *a = MAP_FAILED, *b = MAP_FAILED;
	__u32 ha = 0, hb = 0;
	unsigned int i;

	if (no_device(self->fd))
		return;
	if (!self->dbg_ok)
		SKIP(return, "needs root and debugfs to count aliased copies");

	npu_fill_pattern(cpu(self, 0, 0), self->page, 33);
	memset(cpu(self, 1, 0), POISON, BO_SIZE);
	ASSERT_EQ(0, npu_vm_map(self->fd, self->mem[1].bo, window, span,
				bo_off, 0));
	EXPECT_LE(n / 2, copy_page_to_each(_metadata, self, dva(self, 0, 0),
					   window, n));
	for (i = 0; i < n; i++) {
		ASSERT_TRUE(npu_has_pattern(cpu(self, 1, bo_off + i * span / n),
					    self->page, 33, 0))
			TH_LOG("page %u of the window", i);
	}
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), bo_off, POISON));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, bo_off + span),
				  BO_SIZE - bo_off - span, POISON));
	EXPECT_EQ(0, npu_vm_unmap(self->fd, window, span));

	copy_across_two_mappings(_metadata, self, window);

	/* The same between userptr BOs. */
	a = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	b = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, a);
	ASSERT_NE(MAP_FAILED, b);
	npu_fill_pattern(a, self->page, 34);
	memset(b, POISON, span);
	ASSERT_EQ(0, npu_bo_userptr(self->fd, a, span, 0, &ha));
	ASSERT_EQ(0, npu_bo_userptr(self->fd, b, span, 0, &hb));
	ASSERT_EQ(0, npu_vm_map(self->fd, ha, window, span, 0, 0));
	ASSERT_EQ(0, npu_vm_map(self->fd, hb, window + span, span, 0, 0));
	EXPECT_LE(n / 2, copy_page_to_each(_metadata, self, window,
					   window + span, n));
	for (i = 0; i < n; i++) {
		ASSERT_TRUE(npu_has_pattern(b + i * self->page, self->page,
					    34, 0))
			TH_LOG("userptr page %u", i);
	}
	EXPECT_EQ(0, npu_vm_unmap(self->fd, window, span));
	EXPECT_EQ(0, npu_vm_unmap(self->fd, window + span, span));
	EXPECT_EQ(0, npu_gem_close(self->fd, ha));
	EXPECT_EQ(0, npu_gem_close(self->fd, hb));
	munmap(a, span);
	munmap(b, span);
}

/* ---- device faults and the queue error ------------------------------ */

/*
 * Every packet that touches memory faults on an unmapped address and on a
 * write to a read-only mapping: the wait succeeds, the queue is in ERROR
 * with -EFAULT, the job's point and the first faulting address, new
 * submits are -EIO until QUEUE_RESET, and then the queue works again.
 */
TEST_F(submit, device_faults)
{
	const __u64 end0 = dva(self, 0, BO_SIZE), hole8 = self->hole & ~7ULL;
	const __u64 ro = dva(self, 1, 0) + 32 * MIB;
	struct {
		int kind;
		__u64 a, b, size, fault;
		const char *what;
	} cases[] = {
		{ DRM_NPU_PKT_COPY, self->hole, dva(self, 1, 0), 64, self->hole,
		  "COPY from a hole" },
		{ DRM_NPU_PKT_COPY, end0 - 100, dva(self, 1, 32 * KIB), 200,
		  end0, "COPY from past the end of a BO" },
		{ DRM_NPU_PKT_COPY, dva(self, 1, 0), self->hole, 64, self->hole,
		  "COPY to a hole" },
		{ DRM_NPU_PKT_COPY, dva(self, 1, 0), ro + 8, 64, ro + 8,
		  "COPY to a read-only mapping" },
		{ DRM_NPU_PKT_FILL, self->hole, 0, 64, self->hole,
		  "FILL of a hole" },
		{ DRM_NPU_PKT_WRITE_VALUE, hole8, 0, 0, hole8,
		  "WRITE_VALUE to a hole" },
		{ DRM_NPU_PKT_WRITE_VALUE, ro + 16, 0, 0, ro + 16,
		  "WRITE_VALUE to a read-only mapping" },
		{ DRM_NPU_PKT_TIMESTAMP, hole8, 0, 0, hole8,
		  "TIMESTAMP to a hole" },
		{ DRM_NPU_PKT_WAIT_VALUE, hole8, 0, 0, hole8,
		  "WAIT_VALUE on a hole" },
	};
	__u64 cmds[SMALL_CMDS / 8], point;
	struct npu_cmdbuf cb;
	unsigned int i;
	int ret;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_vm_map(self->fd, self->mem[1].bo, ro, 64 * KIB, 0,
				DRM_NPU_VM_READONLY));
	memset(cpu(self, 1, 0), POISON, 64 * KIB);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		switch (cases[i].kind) {
		case DRM_NPU_PKT_COPY:
			npu_emit_copy(&cb, cases[i].a, cases[i].b,
				      cases[i].size);
			break;
		case DRM_NPU_PKT_FILL:
			npu_emit_fill(&cb, cases[i].a, cases[i].size, 1, 1);
			break;
		case DRM_NPU_PKT_WRITE_VALUE:
			npu_emit_write_value(&cb, cases[i].a, 1);
			break;
		case DRM_NPU_PKT_TIMESTAMP:
			npu_emit_timestamp(&cb, cases[i].a);
			break;
		default:
			npu_emit_wait_value(&cb, cases[i].a, 0, 0,
					    DRM_NPU_WAIT_GE);
			break;
		}
		ret = run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point);
		ASSERT_EQ(0, ret) TH_LOG("%s: %s", cases[i].what,
					 strerror(-ret));
		expect_queue_error_what(_metadata, self->fd, self->q.queue_id,
					-EFAULT, point, cases[i].fault,
					cases[i].what);

		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_nop(&cb);
		EXPECT_EQ(-EIO, npu_submit_cmdbuf(self->fd, self->q.queue_id,
						  &cb, NULL, 0, NULL));
		reset_queue(_metadata, self->fd, self->q.queue_id);
		queue_works(_metadata, self);
	}
	/*
	 * Nothing was written through the read-only mapping, nor past the
	 * first fault of the copy that ran off the end of BO 0.
	 */
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 32 * KIB, POISON));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 32 * KIB + 100), 100, POISON));
}

/*
 * A strided copy whose second row runs into unmapped memory faults there,
 * at the first byte of that row, after writing the first row only.
 */
TEST_F(submit, copy_strided_fault)
{
	const __u64 sizes[2] = { 2, 16 }, src_strides[2] = { 128, 4 };
	const __u64 dst_strides[2] = { 64, 4 };
	const __u64 src = dva(self, 0, BO_SIZE - 64);
	__u64 cmds[SMALL_CMDS], point;
	struct npu_cmdbuf cb;

	if (no_device(self->fd))
		return;
	npu_fill_pattern(cpu(self, 0, BO_SIZE - 64), 64, 9);
	memset(cpu(self, 1, 0), POISON, 256);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy_strided(&cb, src, dva(self, 1, 0), 2, 4, sizes,
			      src_strides, dst_strides);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point));
	expect_queue_error(self->fd, self->q.queue_id, -EFAULT, point,
			   src + 128);
	EXPECT_EQ(0, memcmp(cpu(self, 0, BO_SIZE - 64), cpu(self, 1, 0), 64));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 64), 192, POISON));
	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
}

/*
 * A job of many packets that faults in the middle names the failing
 * packet by its offset in the command buffer (the runtime batches many
 * tasks into one job and reports the one that failed); the packets before
 * it ran and the ones after it did not. A fault in the first packet is at
 * offset 0.
 */
TEST_F(submit, fault_names_packet_offset)
{
	const unsigned int before[] = { 0, 1, 5, 40 };
	__u64 cmds[2048 / 8], point;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	unsigned int i, j;
	__u32 want;
	int ret;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(before); i++) {
		memset(cpu(self, 0, 0), 0, 4 * KIB);
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		for (j = 0; j < before[i]; j++)
			npu_emit_write_value(&cb, dva(self, 0, 8 * j), j + 1);
		want = cb.size;
		npu_emit_fill(&cb, self->hole, 64, 1, 1);
		npu_emit_write_value(&cb, dva(self, 0, 2 * KIB), 7);
		ASSERT_FALSE(cb.overflow);
		ret = run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point);
		ASSERT_EQ(0, ret) TH_LOG("%u packets first: %s", before[i],
					 strerror(-ret));
		ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
		EXPECT_EQ(-EFAULT, st.error);
		EXPECT_EQ(point, st.error_point);
		EXPECT_EQ(self->hole, st.fault_addr);
		EXPECT_EQ(want, st.error_offset)
			TH_LOG("%u packets before the fault", before[i]);
		for (j = 0; j < before[i]; j++)
			EXPECT_EQ(j + 1, get_u64(cpu(self, 0, 8 * j)));
		EXPECT_EQ(0ULL, get_u64(cpu(self, 0, 2 * KIB)));
		reset_queue(_metadata, self->fd, self->q.queue_id);
	}
}

/*
 * Jobs queued behind a faulting job are cancelled: they complete with
 * -ECANCELED without touching memory, and each job's fence carries its
 * own error.
 */
TEST_F(submit, fault_cancels_later_jobs)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	__u64 points[4];
	int sync_fds[4], status = 0, i;

	if (no_device(self->fd))
		return;
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), POISON, 64 * KIB);
	for (i = 0; i < 4; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		if (i == 0)
			npu_emit_wait_value(&cb, flag, 1, ~0ULL,
					    DRM_NPU_WAIT_GE);
		else if (i == 1)
			npu_emit_copy(&cb, self->hole, dva(self, 1, 0), 64);
		else if (i == 2)
			npu_emit_write_value(&cb, dva(self, 1, 128), 0x1234);
		else
			npu_emit_fill(&cb, dva(self, 1, 4096), 4096, 0x99, 1);
		ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb,
					       NULL, 0, &points[i]));
		ASSERT_EQ(0, nsub_export_point(self->fd,
					       self->q.syncobj_handle,
					       points[i], &sync_fds[i]));
	}
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(points[3], st.submitted);
	EXPECT_EQ(points[0] - 1, st.completed);

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, points[3],
			       self->wait_ms));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 64 * KIB, POISON));
	expect_queue_error(self->fd, self->q.queue_id, -EFAULT,
			   points[1], self->hole);
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(points[3], st.completed);

	for (i = 0; i < 4; i++) {
		/* Signalled; the fault; the cancelled jobs. */
		int want = i == 0 ? 1 : i == 1 ? -EFAULT : -ECANCELED;

		ASSERT_EQ(0, nsub_sync_file_status(sync_fds[i], &status));
		EXPECT_EQ(want, status) TH_LOG("job %d", i);
		close(sync_fds[i]);
	}
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	EXPECT_EQ(-EIO, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb,
					  NULL, 0, NULL));
	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
}

/* The completion record at @addr: its error and point. */
static void expect_completion(struct __test_metadata *_metadata, void *addr,
			      int error, __u64 point, const char *what)
{
	const struct drm_npu_queue_completion *rec = addr;

	EXPECT_EQ(error, rec->error) TH_LOG("%s", what);
	EXPECT_EQ(0U, rec->pad) TH_LOG("%s", what);
	EXPECT_EQ(point, rec->completed) TH_LOG("%s", what);
}

/*
 * A queue created with DRM_NPU_QUEUE_STATUS_WRITEBACK has the engine write
 * each job's point and error to memory before the job's fence signals: a
 * good job, a faulting one, a job cancelled behind it, and a good one
 * after QUEUE_RESET. A record address nothing is mapped at does not stop
 * the jobs, and a caller passing the first, 24-byte version of the
 * structure gets a queue without write-back.
 */
TEST_F(submit, completion_writeback)
{
	__u64 cmds[256 / 8], points[3], flag = dva(self, 0, 64);
	const __u64 rec = dva(self, 0, 256), one = 1;
	struct drm_npu_queue_create q, hole_q;
	struct npu_cmdbuf cb;
	int i, ret;

	if (no_device(self->fd))
		return;
	memset(cpu(self, 0, 0), 0, 4096);
	memset(&q, 0, sizeof(q));
	q.engine_class = DRM_NPU_ENGINE_COPY;
	q.priority = DRM_NPU_PRIORITY_NORMAL;
	q.flags = DRM_NPU_QUEUE_STATUS_WRITEBACK;
	q.status_addr = rec;
	ASSERT_EQ(0, npu_ioctl(self->fd, DRM_IOCTL_NPU_QUEUE_CREATE, &q));

	expect_queue_works(_metadata, self->fd, &q, &self->mem[0], 1024, 7);
	expect_completion(_metadata, cpu(self, 0, 256), 0, 1, "good job");

	/* A faulting job; its record is written before its fence signals. */
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_fill(&cb, self->hole, 64, 1, 1);
	ret = run_cmds(self->fd, &q, &cb, self->wait_ms, &points[0]);
	ASSERT_EQ(0, ret);
	expect_completion(_metadata, cpu(self, 0, 256), -EFAULT, points[0],
			  "faulting job");
	reset_queue(_metadata, self->fd, q.queue_id);

	/* Two jobs queued before the first faults: the second is cancelled. */
	for (i = 1; i < 3; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		if (i == 1) {
			npu_emit_wait_value(&cb, flag, 1, ~0ULL,
					    DRM_NPU_WAIT_GE);
			npu_emit_fill(&cb, self->hole, 64, 1, 1);
		} else {
			npu_emit_nop(&cb);
		}
		ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, q.queue_id, &cb, NULL,
					       0, &points[i]));
	}
	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, q.syncobj_handle, points[2],
			       self->wait_ms));
	expect_completion(_metadata, cpu(self, 0, 256), -ECANCELED,
			  points[2], "cancelled job");
	reset_queue(_metadata, self->fd, q.queue_id);
	expect_queue_works(_metadata, self->fd, &q, &self->mem[0], 1024, 8);
	expect_completion(_metadata, cpu(self, 0, 256), 0, points[2] + 1,
			  "good job after the reset");
	ASSERT_EQ(0, npu_queue_destroy(self->fd, q.queue_id));

	/* The record's address is a hole: jobs still complete. */
	memset(&hole_q, 0, sizeof(hole_q));
	hole_q.engine_class = DRM_NPU_ENGINE_COPY;
	hole_q.flags = DRM_NPU_QUEUE_STATUS_WRITEBACK;
	hole_q.status_addr = self->hole & ~7ULL;
	ASSERT_EQ(0, npu_ioctl(self->fd, DRM_IOCTL_NPU_QUEUE_CREATE, &hole_q));
	expect_queue_works(_metadata, self->fd, &hole_q, &self->mem[0], 1024,
			   9);
	ASSERT_EQ(0, npu_queue_destroy(self->fd, hole_q.queue_id));

	/* The first version of the structure: no status_addr. */
	memset(&q, 0, sizeof(q));
	q.status_addr = ~0ULL;	/* not passed: the kernel sees zero */
	ret = npu_ioctl(self->fd,
			DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_QUEUE_CREATE,
				 struct { __u32 w[6]; }), &q);
	ASSERT_EQ(0, ret) TH_LOG("24-byte QUEUE_CREATE: %s", strerror(-ret));
	EXPECT_NE(0U, q.queue_id);
	EXPECT_EQ(~0ULL, q.status_addr);
	memset(cpu(self, 0, 256), 0, 16);
	expect_queue_works(_metadata, self->fd, &q, &self->mem[0], 1024, 10);
	EXPECT_TRUE(npu_all_bytes(cpu(self, 0, 256), 16, 0));
	ASSERT_EQ(0, npu_queue_destroy(self->fd, q.queue_id));
}

/*
 * QUEUE_RESET is -EBUSY while a job submitted before the error is still
 * in flight (here: waiting for another queue), while other queues and
 * other files run; once that job completes (cancelled), the reset works.
 */
TEST_F(submit, reset_busy_while_jobs_in_flight)
{
	__u64 cmds[SMALL_CMDS / 8 * 2], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_queue_create qb, qc, q2;
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	__u64 pb, pa1, pa2;
	struct dev_mem m2;
	int fd2;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qb));
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), POISON, 4096);

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, NULL, 0,
				       &pb));

	/* The faulting job waits for its own flag: both are in before it. */
	put_u64(cpu(self, 0, 8), 0);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag + 8, 1, ~0ULL, DRM_NPU_WAIT_GE);
	npu_emit_copy(&cb, self->hole, dva(self, 1, 1024), 64);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &pa1));
	fence.handle = qb.syncobj_handle;
	fence.point = pb;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, dva(self, 1, 0), 0xabc);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, &fence,
				       1, &pa2));

	ASSERT_EQ(0, npu_vm_write(self->fd, flag + 8, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, pa1,
			       self->wait_ms));
	expect_queue_error(self->fd, self->q.queue_id, -EFAULT, pa1,
			   self->hole);
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ(pa2, st.submitted);
	EXPECT_EQ(pa1, st.completed);
	EXPECT_EQ(-EBUSY, npu_queue_reset(self->fd, self->q.queue_id));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	EXPECT_EQ(-EIO, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb,
					  NULL, 0, NULL));

	/* Other queues of this file, and other files, keep running. */
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &qc));
	expect_queue_works(_metadata, self->fd, &qc, &self->mem[0], 64, 0xc);
	fd2 = open(self->nodes[0].path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mem_create(fd2, self->mem[0].va, MIB, &m2));
	ASSERT_EQ(0, npu_queue_create(fd2, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &q2));
	expect_queue_works(_metadata, fd2, &q2, &m2, 0, 0x2);

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, pa2,
			       self->wait_ms));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 4096, POISON));
	expect_queue_error(self->fd, self->q.queue_id, -EFAULT, pa1,
			   self->hole);
	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
	EXPECT_EQ(0, queue_error(self->fd, qb.queue_id));
	mem_destroy(&m2);
	close(fd2);
}

/*
 * A job waiting for a job of another queue that fails completes with the
 * same error without running, and its queue records it.
 */
TEST_F(submit, dependency_on_failed_job)
{
	__u64 cmds[SMALL_CMDS / 8 * 2], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_create qb;
	struct npu_cmdbuf cb;
	int sync_fd = -1, status = 0;
	__u64 pa, pb;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qb));
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), POISON, 4096);

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	npu_emit_copy(&cb, self->hole, dva(self, 1, 1024), 64);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &pa));
	fence.handle = self->q.syncobj_handle;
	fence.point = pa;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, dva(self, 1, 0), 0xb1);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, &fence, 1,
				       &pb));
	ASSERT_EQ(0, nsub_export_point(self->fd, qb.syncobj_handle, pb,
				       &sync_fd));

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, qb.syncobj_handle, pb,
			       self->wait_ms));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 4096, POISON));
	expect_queue_error(self->fd, self->q.queue_id, -EFAULT, pa,
			   self->hole);
	expect_queue_error(self->fd, qb.queue_id, -EFAULT, pb, 0);
	ASSERT_EQ(0, nsub_sync_file_status(sync_fd, &status));
	EXPECT_EQ(-EFAULT, status);
	close(sync_fd);
	reset_queue(_metadata, self->fd, qb.queue_id);
	reset_queue(_metadata, self->fd, self->q.queue_id);
	expect_queue_works(_metadata, self->fd, &qb, &self->mem[0], 64, 0xb2);
	queue_works(_metadata, self);
}

/*
 * The same while the dependent queue still runs an earlier job: the
 * failed job must not complete before it, so QUEUE_STATUS.completed ends
 * at the last point and the queue can be reset.
 */
TEST_F(submit, dependency_on_failed_job_behind_running_job)
{
	__u64 cmds[SMALL_CMDS / 8 * 2], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_create qb;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	__u64 pa, pb1, pb2;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qb));
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), POISON, 4096);

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	npu_emit_write_value(&cb, dva(self, 1, 8), 0xb1);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, NULL, 0,
				       &pb1));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, self->hole, dva(self, 1, 1024), 64);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &pa));
	fence.handle = self->q.syncobj_handle;
	fence.point = pa;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, dva(self, 1, 0), 0xb2);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, &fence, 1,
				       &pb2));

	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, pa,
			       self->wait_ms));
	usleep(50 * 1000);
	/* B's second job cannot have completed: its first still runs. */
	EXPECT_EQ(0, nsub_signalled(self->fd, qb.syncobj_handle, pb2));
	ASSERT_EQ(0, npu_queue_status(self->fd, qb.queue_id, &st));
	EXPECT_EQ(pb1 - 1, st.completed);

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, qb.syncobj_handle, pb2,
			       self->wait_ms));
	EXPECT_EQ(0xb1ULL, get_u64(cpu(self, 1, 8)));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 8, POISON));
	expect_queue_error(self->fd, qb.queue_id, -EFAULT, pb2, 0);
	ASSERT_EQ(0, npu_queue_status(self->fd, qb.queue_id, &st));
	EXPECT_EQ(pb2, st.submitted);
	EXPECT_EQ(pb2, st.completed);
	EXPECT_EQ(0, npu_queue_reset(self->fd, qb.queue_id));
	reset_queue(_metadata, self->fd, self->q.queue_id);
}

/* ---- fault and hang injection -------------------------------------- */

TEST_F(submit, inject_fault)
{
	struct nsub_engine_stats before, after;
	__u64 cmds[SMALL_CMDS / 8], point;
	struct npu_cmdbuf cb;
	long long left;

	if (no_device(self->fd))
		return;
	if (!self->dbg_ok)
		SKIP(return, "no access to %s", self->dbg);
	memset(cpu(self, 1, 0), POISON, 3 * 4096);
	ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &before));
	self->injected = true;
	ASSERT_EQ(0, nsub_dbg_write(self->dbg, "inject_fault", 1));

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_fill(&cb, dva(self, 1, 4096), 4096, 0x5, 1);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, &point));
	expect_queue_error(self->fd, self->q.queue_id, -EFAULT,
			   point, dva(self, 1, 4096));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 0), 3 * 4096, POISON));
	ASSERT_EQ(0, nsub_dbg_read(self->dbg, "inject_fault", &left));
	EXPECT_EQ(0, left);
	ASSERT_EQ(0, nsub_engine_stats(self->dbg, self->q.engine_id, &after));
	EXPECT_EQ(before.resets + 1, after.resets);
	EXPECT_EQ(before.jobs + 1, after.jobs);

	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_fill(&cb, dva(self, 1, 4096), 4096, 0x5, 1);
	ASSERT_EQ(0, run_cmds(self->fd, &self->q, &cb, self->wait_ms, NULL));
	EXPECT_TRUE(npu_all_bytes(cpu(self, 1, 4096), 4096, 0x5));
}

/*
 * A hung job times out with -ETIMEDOUT after about job_timeout_ms and its
 * engine resets, while jobs on the other engines complete meanwhile.
 */
TEST_F_TIMEOUT(submit, inject_hang, 120)
{
	struct nsub_engine_stats before[3], after[3];
	struct drm_npu_queue_create others[2];
	__u64 cmds[SMALL_CMDS / 8], point;
	__u32 engines[3];
	struct npu_cmdbuf cb;
	__s64 t0, t1, t_others;
	long long left = 1;
	int i, ms;

	if (no_device(self->fd))
		return;
	if (!self->dbg_ok)
		SKIP(return, "no access to %s", self->dbg);
	/* The other copy engine, if any, and a compute engine. */
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_NORMAL, &others[1]));
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COPY,
					   self->q.engine_id, &others[0]));
	if (others[0].engine_id == self->q.engine_id) {
		ASSERT_EQ(0, npu_queue_destroy(self->fd, others[0].queue_id));
		ASSERT_EQ(0, queue_create_avoiding(self->fd,
						   DRM_NPU_ENGINE_COMPUTE,
						   others[1].engine_id,
						   &others[0]));
	}
	engines[0] = self->q.engine_id;
	engines[1] = others[0].engine_id;
	engines[2] = others[1].engine_id;
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, nsub_engine_stats(self->dbg, engines[i],
					       &before[i]));

	self->injected = true;
	ASSERT_EQ(0, nsub_dbg_write(self->dbg, "inject_hang", 1));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	t0 = npu_monotonic_ns();
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL,
				       0, &point));
	/* Our job took the injected hang once the counter is back at 0. */
	for (ms = 0; ms < 5000 && left; ms++) {
		ASSERT_EQ(0, nsub_dbg_read(self->dbg, "inject_hang", &left));
		if (left)
			usleep(1000);
	}
	ASSERT_EQ(0, left);

	for (i = 0; i < 2; i++)
		expect_queue_works(_metadata, self->fd, &others[i],
				   &self->mem[0], 8 * i, 0x4a + i);
	t_others = npu_monotonic_ns();
	if (t_others - t0 < self->timeout_ms * NSUB_NSEC_PER_MSEC * 3 / 4) {
		EXPECT_EQ(0, nsub_signalled(self->fd, self->q.syncobj_handle,
					    point));
	} else {
		TH_LOG("other engines took %lld ms: too slow to compare",
		       (t_others - t0) / NSUB_NSEC_PER_MSEC);
	}

	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, point,
			       self->wait_ms));
	t1 = npu_monotonic_ns();
	TH_LOG("hung job completed after %lld ms (job_timeout_ms %u), others after %lld ms",
	       (t1 - t0) / NSUB_NSEC_PER_MSEC, self->timeout_ms,
	       (t_others - t0) / NSUB_NSEC_PER_MSEC);
	EXPECT_LE(self->timeout_ms * NSUB_NSEC_PER_MSEC, t1 - t0);
	EXPECT_GE((self->timeout_ms + 1000 + self->timeout_ms / 2) *
		  NSUB_NSEC_PER_MSEC, t1 - t0);
	expect_queue_error(self->fd, self->q.queue_id, -ETIMEDOUT,
			   point, 0);

	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, nsub_engine_stats(self->dbg, engines[i],
					       &after[i]));
	EXPECT_EQ(before[0].resets + 1, after[0].resets);
	EXPECT_EQ(before[0].jobs + 1, after[0].jobs);
	for (i = 1; i < 3; i++) {
		EXPECT_EQ(before[i].resets, after[i].resets);
		EXPECT_EQ(before[i].jobs + 1, after[i].jobs);
	}
	reset_queue(_metadata, self->fd, self->q.queue_id);
	queue_works(_metadata, self);
}

/* ---- concurrent submitters ---------------------------------------- */

#define THREADS			8
#define JOBS_PER_THREAD		100

/*
 * struct submitter - a thread submitting WRITE_VALUE jobs
 * @fd: the DRM file.
 * @q: its queue: shared, or created by the thread when @own_queue.
 * @own_queue: create @q of class @index % 2 itself.
 * @index: the thread's number.
 * @va: device address of its JOBS_PER_THREAD slots.
 * @points: the points it got, in submission order.
 * @error: first error, a negative errno, or 0.
 */
struct submitter {
	int fd;
	struct drm_npu_queue_create q;
	bool own_queue;
	int index;
	__u64 va;
	__u64 points[JOBS_PER_THREAD];
	int error;
	pthread_t thread;
};

static __u64 slot_value(int thread, int job)
{
	return ((__u64)thread + 1) << 32 | (job + 1);
}

static void *submitter_main(void *arg)
{
	struct submitter *s = arg;
	__u64 cmds[SMALL_CMDS / 8];
	struct npu_cmdbuf cb;
	int i, ret;

	if (s->own_queue) {
		ret = npu_queue_create(s->fd, s->index % 2 ?
				       DRM_NPU_ENGINE_COMPUTE :
				       DRM_NPU_ENGINE_COPY,
				       s->index % 3, &s->q);
		if (ret) {
			s->error = ret;
			return NULL;
		}
	}
	for (i = 0; i < JOBS_PER_THREAD; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_write_value(&cb, s->va + 8 * i,
				     slot_value(s->index, i));
		ret = npu_submit_cmdbuf(s->fd, s->q.queue_id, &cb, NULL, 0,
					&s->points[i]);
		if (ret) {
			s->error = ret;
			return NULL;
		}
	}
	if (s->own_queue)
		s->error = nsub_wait(s->fd, s->q.syncobj_handle,
				     s->points[JOBS_PER_THREAD - 1],
				     npu_job_timeout_ms() + 60000);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

static void run_submitters(struct __test_metadata *_metadata,
			   struct _test_data_submit *self, struct submitter *s,
			   bool own_queues)
{
	int t;

	memset(cpu(self, 1, 0), 0, THREADS * JOBS_PER_THREAD * 8);
	for (t = 0; t < THREADS; t++) {
		memset(&s[t], 0, sizeof(s[t]));
		s[t].fd = self->fd;
		s[t].q = self->q;
		s[t].own_queue = own_queues;
		s[t].index = t;
		s[t].va = dva(self, 1, t * JOBS_PER_THREAD * 8);
	}
	for (t = 0; t < THREADS; t++)
		ASSERT_EQ(0, pthread_create(&s[t].thread, NULL, submitter_main,
					    &s[t]));
	for (t = 0; t < THREADS; t++)
		pthread_join(s[t].thread, NULL);
	for (t = 0; t < THREADS; t++)
		ASSERT_EQ(0, s[t].error) TH_LOG("thread %d: %s", t,
						strerror(-s[t].error));
}

static void expect_slots_written(struct __test_metadata *_metadata,
				 struct _test_data_submit *self)
{
	int t, i;

	for (t = 0; t < THREADS; t++) {
		for (i = 0; i < JOBS_PER_THREAD; i++) {
			__u64 off = (t * JOBS_PER_THREAD + i) * 8;

			ASSERT_EQ(slot_value(t, i), get_u64(cpu(self, 1, off)))
				TH_LOG("thread %d job %d", t, i);
		}
	}
}

/*
 * Eight threads submitting to one queue: every submission gets its own
 * point, the points are exactly 1..total, and every job runs.
 */
TEST_F_TIMEOUT(submit, threads_share_a_queue, 120)
{
	const int total = THREADS * JOBS_PER_THREAD;
	struct submitter s[THREADS];
	struct drm_npu_queue_status st;
	__u64 *all;
	int t, i;

	if (no_device(self->fd))
		return;
	run_submitters(_metadata, self, s, false);
	all = calloc(total, sizeof(*all));
	ASSERT_NE(NULL, all);
	for (t = 0; t < THREADS; t++) {
		for (i = 0; i < JOBS_PER_THREAD; i++) {
			all[t * JOBS_PER_THREAD + i] = s[t].points[i];
			/* Each thread's points go up. */
			if (i)
				ASSERT_LT(s[t].points[i - 1], s[t].points[i]);
		}
	}
	qsort(all, total, sizeof(*all), cmp_u64);
	for (i = 0; i < total; i++)
		ASSERT_EQ((__u64)i + 1, all[i]);
	free(all);

	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, total,
			       self->wait_ms + 60000));
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ((__u64)total, st.submitted);
	EXPECT_EQ((__u64)total, st.completed);
	EXPECT_EQ(0, st.error);
	expect_slots_written(_metadata, self);
}

/* Eight threads, each creating its own queue and submitting to it. */
TEST_F_TIMEOUT(submit, threads_own_queues, 120)
{
	struct submitter s[THREADS];
	struct drm_npu_queue_status st;
	int t, i;

	if (no_device(self->fd))
		return;
	run_submitters(_metadata, self, s, true);
	for (t = 0; t < THREADS; t++) {
		for (i = 0; i < JOBS_PER_THREAD; i++)
			ASSERT_EQ((__u64)i + 1, s[t].points[i]);
		ASSERT_EQ(0, npu_queue_status(self->fd, s[t].q.queue_id, &st));
		EXPECT_EQ((__u64)JOBS_PER_THREAD, st.completed);
		EXPECT_EQ(0, st.error);
		for (i = 0; i < t; i++)
			EXPECT_NE(s[i].q.queue_id, s[t].q.queue_id);
	}
	expect_slots_written(_metadata, self);
	for (t = 0; t < THREADS; t++)
		EXPECT_EQ(0, npu_queue_destroy(self->fd, s[t].q.queue_id));
}

/* ---- contexts and queues going away with work in flight ------------ */

#define KILL_JOBS		500

/*
 * The child of kill_with_work_in_flight: a context with a BO and two
 * queues, each led by a WAIT_VALUE nobody satisfies (it runs until the job
 * timeout), then 500 jobs (every tenth fills 4 MiB); then it waits to be
 * killed. Exit codes tell the parent what failed.
 */
static void busy_child(const char *path, __u64 va, int ready_fd)
{
	const __u64 flag = va + BO_SIZE - 8;
	__u64 cmds[SMALL_CMDS / 8];
	struct drm_npu_queue_create q[2];
	struct npu_cmdbuf cb;
	struct dev_mem m;
	char c = 'r';
	int fd, i;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		_exit(2);
	if (mem_create(fd, va, BO_SIZE, &m))
		_exit(3);
	if (npu_queue_create(fd, DRM_NPU_ENGINE_COPY, DRM_NPU_PRIORITY_LOW,
			     &q[0]) ||
	    npu_queue_create(fd, DRM_NPU_ENGINE_COMPUTE,
			     DRM_NPU_PRIORITY_HIGH, &q[1]))
		_exit(4);
	for (i = 0; i < 2; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_EQ);
		if (npu_submit_cmdbuf(fd, q[i].queue_id, &cb, NULL, 0, NULL))
			_exit(5);
	}
	for (i = 0; i < KILL_JOBS; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		if (i % 10 == 0)
			npu_emit_fill(&cb, va + (i % 20 ? 4 : 8) * MIB,
				      4 * MIB, i & 0xff, 1);
		else
			npu_emit_write_value(&cb, va + 8 * i, i);
		if (npu_submit_cmdbuf(fd, q[i % 2].queue_id, &cb, NULL, 0,
				      NULL))
			_exit(6);
	}
	if (write(ready_fd, &c, 1) != 1)
		_exit(7);
	for (;;)
		pause();
}

/*
 * A process killed with 500 jobs in flight (two running, the rest queued)
 * leaves nothing behind: once the running jobs time out its context leaves
 * npu_clients and device memory use returns to where it was (the module's
 * leak check at unload covers the rest).
 */
TEST_F_TIMEOUT(submit, kill_with_work_in_flight, 120)
{
	long long base, used = -1, depth = 0;
	int ready[2], listed = 1, ms, ret;
	__s64 reaped;
	pid_t pid;
	char c;

	if (no_device(self->fd))
		return;
	if (!self->dbg_ok)
		SKIP(return, "no access to %s", self->dbg);
	ASSERT_EQ(0, nsub_mem_used(self->dbg, &base));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(ready[0]);
		busy_child(self->nodes[0].path, self->mem[0].va, ready[1]);
	}
	close(ready[1]);
	ret = read(ready[0], &c, 1);
	close(ready[0]);
	if (ret != 1) {
		ret = npu_wait_child(pid);
		ASSERT_EQ(0, ret) TH_LOG("child failed with %d", ret);
	}
	EXPECT_EQ(1, nsub_client_listed(self->dbg, pid));
	ASSERT_EQ(0, nsub_mem_used(self->dbg, &used));
	EXPECT_EQ(base + (long long)BO_SIZE, used);
	/* Nothing could complete behind the blocked jobs. */
	ASSERT_EQ(0, nsub_client_depth(self->dbg, pid, &depth));
	EXPECT_EQ(KILL_JOBS + 2, depth);

	reaped = npu_monotonic_ns();
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(128 + SIGKILL, npu_wait_child(pid));
	reaped = npu_monotonic_ns() - reaped;
	for (ms = 0; ms < self->wait_ms; ms += 10) {
		listed = nsub_client_listed(self->dbg, pid);
		ASSERT_EQ(0, nsub_mem_used(self->dbg, &used));
		if (!listed && used == base)
			break;
		usleep(10 * 1000);
	}
	EXPECT_EQ(0, listed);
	EXPECT_EQ(base, used);
	TH_LOG("killed with %lld jobs in flight, reaped after %lld ms",
	       depth, reaped / NSUB_NSEC_PER_MSEC);
	TH_LOG("context gone and memory back %d ms later", ms);
	queue_works(_metadata, self);
}

/*
 * Destroying a queue with jobs queued returns at once; the jobs still
 * complete (or are cancelled) and their points signal.
 */
TEST_F(submit, destroy_with_jobs_queued)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0), one = 1;
	struct drm_npu_queue_create q2;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	__u64 point = 0;
	int i, ran = 0;
	__s64 t0, dt;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &q2));
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), 0, 4096);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, q2.queue_id, &cb, NULL, 0,
				       &point));
	for (i = 2; i <= 20; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_write_value(&cb, dva(self, 1, 8 * i), i);
		ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, q2.queue_id, &cb,
					       NULL, 0, &point));
	}
	ASSERT_EQ(20ULL, point);

	t0 = npu_monotonic_ns();
	ASSERT_EQ(0, npu_queue_destroy(self->fd, q2.queue_id));
	dt = npu_monotonic_ns() - t0;
	EXPECT_GT(self->timeout_ms * NSUB_NSEC_PER_MSEC / 2, dt)
		TH_LOG("destroy took %lld ms", dt / NSUB_NSEC_PER_MSEC);
	EXPECT_EQ(-ENOENT, npu_queue_status(self->fd, q2.queue_id, &st));
	EXPECT_EQ(0, nsub_signalled(self->fd, q2.syncobj_handle, 20));

	ASSERT_EQ(0, npu_vm_write(self->fd, flag, &one, sizeof(one)));
	ASSERT_EQ(0, nsub_wait(self->fd, q2.syncobj_handle, 20,
			       self->wait_ms));
	for (i = 2; i <= 20; i++) {
		__u64 v = get_u64(cpu(self, 1, 8 * i));

		EXPECT_TRUE(v == 0 || v == (__u64)i);
		ran += v == (__u64)i;
	}
	TH_LOG("destroy took %lld us; %d of 19 queued jobs ran",
	       dt / 1000, ran);
	EXPECT_EQ(0, npu_syncobj_destroy(self->fd, q2.syncobj_handle));
	queue_works(_metadata, self);
}

struct releaser {
	int fd;
	__u64 addr;
	unsigned int delay_ms;
	pthread_t thread;
};

static void *releaser_main(void *arg)
{
	struct releaser *r = arg;
	__u64 one = 1;

	usleep(r->delay_ms * 1000);
	npu_vm_write(r->fd, r->addr, &one, sizeof(one));
	return NULL;
}

/*
 * Also when the queued job still waits for another queue's job: destroy
 * returns at once, not when that dependency completes.
 */
TEST_F(submit, destroy_with_job_waiting_for_other_queue)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0);
	struct drm_npu_fence fence = { 0 };
	struct drm_npu_queue_create qa, qb;
	struct npu_cmdbuf cb;
	struct releaser r;
	__u64 pa, pb;
	__s64 t0, dt;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, queue_create_avoiding(self->fd, DRM_NPU_ENGINE_COMPUTE,
					   self->q.engine_id, &qa));
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &qb));
	put_u64(cpu(self, 0, 0), 0);
	put_u64(cpu(self, 1, 0), 0);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qa.queue_id, &cb, NULL, 0,
				       &pa));
	fence.handle = qa.syncobj_handle;
	fence.point = pa;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_write_value(&cb, dva(self, 1, 0), 0xdd);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, qb.queue_id, &cb, &fence, 1,
				       &pb));

	/* Release A later, well before its job would time out. */
	r.fd = self->fd;
	r.addr = flag;
	r.delay_ms = self->timeout_ms / 2;
	ASSERT_EQ(0, pthread_create(&r.thread, NULL, releaser_main, &r));
	t0 = npu_monotonic_ns();
	ASSERT_EQ(0, npu_queue_destroy(self->fd, qb.queue_id));
	dt = npu_monotonic_ns() - t0;
	pthread_join(r.thread, NULL);
	EXPECT_GT(r.delay_ms * NSUB_NSEC_PER_MSEC / 2, dt)
		TH_LOG("destroy took %lld ms, A was released after %u ms",
		       dt / NSUB_NSEC_PER_MSEC, r.delay_ms);
	ASSERT_EQ(0, nsub_wait(self->fd, qb.syncobj_handle, pb,
			       self->wait_ms));
	ASSERT_EQ(0, nsub_wait(self->fd, qa.syncobj_handle, pa,
			       self->wait_ms));
	EXPECT_EQ(0, queue_error(self->fd, qa.queue_id));
}

/*
 * And with more jobs queued behind a blocked one than the engine takes
 * in at once: destroy still returns at once.
 */
TEST_F(submit, destroy_with_many_jobs_queued)
{
	__u64 cmds[SMALL_CMDS / 8], flag = dva(self, 0, 0);
	const int jobs = 200;
	struct drm_npu_queue_create q2;
	struct npu_cmdbuf cb;
	struct releaser r;
	__u64 point = 0;
	__s64 t0, dt;
	int i;

	if (no_device(self->fd))
		return;
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &q2));
	put_u64(cpu(self, 0, 0), 0);
	memset(cpu(self, 1, 0), 0, 8 * (jobs + 1));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_wait_value(&cb, flag, 1, ~0ULL, DRM_NPU_WAIT_GE);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, q2.queue_id, &cb, NULL, 0,
				       &point));
	for (i = 2; i <= jobs; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_write_value(&cb, dva(self, 1, 8 * i), i);
		ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, q2.queue_id, &cb,
					       NULL, 0, &point));
	}

	r.fd = self->fd;
	r.addr = flag;
	r.delay_ms = self->timeout_ms / 2;
	ASSERT_EQ(0, pthread_create(&r.thread, NULL, releaser_main, &r));
	t0 = npu_monotonic_ns();
	ASSERT_EQ(0, npu_queue_destroy(self->fd, q2.queue_id));
	dt = npu_monotonic_ns() - t0;
	pthread_join(r.thread, NULL);
	EXPECT_GT(r.delay_ms * NSUB_NSEC_PER_MSEC / 2, dt)
		TH_LOG("destroy took %lld ms, the first job was released after %u ms",
		       dt / NSUB_NSEC_PER_MSEC, r.delay_ms);
	ASSERT_EQ(0, nsub_wait(self->fd, q2.syncobj_handle, point,
			       self->wait_ms));
	queue_works(_metadata, self);
}

TEST_HARNESS_MAIN

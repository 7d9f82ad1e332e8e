// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_regress_test - the paths behind reports the debug-kernel lane found.
 *
 * Each test drives, from user space, a path that made the debug kernel
 * (lockdep, KASAN, full preemption) report a bug in the driver, and checks
 * its results as well. On the stock kernel the tests check behaviour only;
 * on the debug kernel tools/vm-logcheck fails the run on the report, which
 * is how each test reproduced its bug before the fix:
 *
 * - signalling_path_then_bo_frees: "possible circular locking dependency"
 *   &vm->lock --> dma_fence_map --> &engine->exec_lock. An engine takes
 *   the address space's lock while it runs a job (fence signalling), and
 *   unbinding the last mapping of a BO freed the BO under that lock: a
 *   userptr BO removes its MMU interval notifier (which may wait for
 *   fences), a shmem BO's unpin takes the lock shmem holds around page
 *   allocation. Also through closing the file and through a job run at
 *   submission.
 * - submit_points_while_jobs_retire: "KASAN: use-after-free in
 *   npu_ioctl_submit": SUBMIT read the job's point after the scheduler,
 *   which may already have run and freed it, owned the job.
 * - queue_destroyed_while_created: "KASAN: use-after-free in
 *   npu_ioctl_queue_create" (found by npu-fuzz): QUEUE_CREATE put the
 *   queue in the file's table before it was done with it, so another
 *   thread guessing the id destroyed it under the creator, which then
 *   wrote its id and made a handle of its freed syncobj.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"
#include "npu_submit_util.h"

#define KIB			1024ULL
#define MIB			(1024 * KIB)
#define GIB			(1024 * MIB)
/* Over the size the driver runs at submission: this goes to an engine. */
#define ENGINE_COPY		(256 * KIB)
#define WAIT_MS			(npu_job_timeout_ms() + 30000LL)

FIXTURE(regress) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	int fd;
	const char *path;
	struct drm_npu_device_info info;
	__u64 va;
};

FIXTURE_SETUP(regress)
{
	int n;

	self->fd = -1;
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	self->path = self->nodes[0].path;
	ASSERT_EQ(0, npu_query_device_info(self->fd, &self->info));
	self->va = (self->info.va_start + GIB - 1) & ~(GIB - 1);
	ASSERT_LE(self->va + GIB, self->info.va_end);
}

FIXTURE_TEARDOWN(regress)
{
	npu_close_nodes(self->nodes, self->num_nodes);
}

/*
 * struct bo_pair - a userptr BO and a device BO mapped in one context, and
 * a copy queue
 */
struct bo_pair {
	unsigned char *host;
	__u32 user_bo;
	__u32 dev_bo;
	__u64 user_va;
	__u64 dev_va;
	struct drm_npu_queue_create q;
};

static int pair_create(int fd, __u64 va, struct bo_pair *p)
{
	int ret;

	memset(p, 0, sizeof(*p));
	p->host = mmap(NULL, ENGINE_COPY, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->host == MAP_FAILED)
		return -errno;
	npu_fill_pattern(p->host, ENGINE_COPY, 7);
	p->user_va = va;
	p->dev_va = va + 64 * MIB;
	ret = npu_bo_userptr(fd, p->host, ENGINE_COPY, 0, &p->user_bo);
	if (!ret)
		ret = npu_vm_map(fd, p->user_bo, p->user_va, ENGINE_COPY, 0, 0);
	if (!ret)
		ret = npu_bo_create(fd, ENGINE_COPY, DRM_NPU_BO_DEVICE,
				    &p->dev_bo);
	if (!ret)
		ret = npu_vm_map(fd, p->dev_bo, p->dev_va, ENGINE_COPY, 0, 0);
	if (!ret)
		ret = npu_queue_create(fd, DRM_NPU_ENGINE_COPY,
				       DRM_NPU_PRIORITY_NORMAL, &p->q);
	return ret;
}

/*
 * Copies the userptr BO to the device BO on an engine (too big to run at
 * submission), then a page back at submission (CALLER_WAITS on an idle
 * queue), and checks the bytes through VM_ACCESS.
 */
static int pair_run_jobs(int fd, struct bo_pair *p)
{
	__u64 cmds[8], point;
	struct npu_cmdbuf cb;
	unsigned char *back;
	int ret;

	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, p->user_va, p->dev_va, ENGINE_COPY);
	ret = npu_submit_cmdbuf(fd, p->q.queue_id, &cb, NULL, 0, &point);
	if (!ret)
		ret = nsub_wait(fd, p->q.syncobj_handle, point, WAIT_MS);
	if (ret)
		return ret;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, p->dev_va, p->user_va + ENGINE_COPY - 4 * KIB,
		      4 * KIB);
	ret = npu_submit_flags(fd, p->q.queue_id, DRM_NPU_SUBMIT_CALLER_WAITS,
			       cb.data, cb.size, NULL, 0, &point);
	if (!ret)
		ret = nsub_wait(fd, p->q.syncobj_handle, point, WAIT_MS);
	if (ret)
		return ret;
	back = malloc(ENGINE_COPY);
	if (!back)
		return -ENOMEM;
	ret = npu_vm_read(fd, p->dev_va, back, ENGINE_COPY);
	if (!ret && !npu_has_pattern(back, ENGINE_COPY, 7, 0))
		ret = -EIO;
	if (!ret && memcmp(p->host + ENGINE_COPY - 4 * KIB, back, 4 * KIB))
		ret = -EIO;
	free(back);
	return ret;
}

/*
 * Jobs through the engines and at submission, then the BOs' last
 * references dropped by unbinding (userptr first, then device memory),
 * and a second context closed with both still mapped.
 */
TEST_F(regress, signalling_path_then_bo_frees)
{
	struct drm_npu_context_info ci;
	struct bo_pair p, p2;
	int fd2;

	if (self->fd < 0)
		return;
	ASSERT_EQ(0, pair_create(self->fd, self->va, &p));
	ASSERT_EQ(0, pair_run_jobs(self->fd, &p));
	/* The mappings hold the last references now. */
	ASSERT_EQ(0, npu_gem_close(self->fd, p.user_bo));
	ASSERT_EQ(0, npu_gem_close(self->fd, p.dev_bo));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, p.user_va, ENGINE_COPY));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, p.dev_va, ENGINE_COPY));
	ASSERT_EQ(0, npu_context_info(self->fd, &ci));
	EXPECT_EQ(0ULL, ci.mapping_count);
	EXPECT_EQ(0ULL, ci.bo_count);
	/* Unbound is gone: the same unbind again finds nothing. */
	EXPECT_EQ(-ENOENT, npu_vm_unmap(self->fd, p.user_va, ENGINE_COPY));
	EXPECT_EQ(0, npu_queue_destroy(self->fd, p.q.queue_id));
	munmap(p.host, ENGINE_COPY);

	fd2 = open(self->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, pair_create(fd2, self->va, &p2));
	ASSERT_EQ(0, pair_run_jobs(fd2, &p2));
	ASSERT_EQ(0, npu_gem_close(fd2, p2.user_bo));
	ASSERT_EQ(0, npu_gem_close(fd2, p2.dev_bo));
	/* Closing frees the address space, its mappings and BOs. */
	ASSERT_EQ(0, close(fd2));
	munmap(p2.host, ENGINE_COPY);
}

#define SUBMITTERS		4
#define SUBMITS			800

struct submitter {
	pthread_t thread;
	int fd;
	__u64 va;
	struct drm_npu_queue_create q;
	__u64 points[SUBMITS];
	int error;
};

/* WRITE_VALUEs to its own queue as fast as SUBMIT returns. */
static void *submitter_main(void *arg)
{
	struct submitter *s = arg;
	struct npu_cmdbuf cb;
	__u64 cmds[4];
	int i, ret;

	for (i = 0; i < SUBMITS; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_write_value(&cb, s->va, i + 1);
		ret = npu_submit_cmdbuf(s->fd, s->q.queue_id, &cb, NULL, 0,
					&s->points[i]);
		if (ret) {
			s->error = ret;
			return NULL;
		}
	}
	s->error = nsub_wait(s->fd, s->q.syncobj_handle, SUBMITS, WAIT_MS);
	return NULL;
}

/*
 * Four threads on their own queues, so that jobs go through the scheduler
 * and retire while their SUBMIT returns: every point SUBMIT reports is the
 * job's, 1..N in order on each queue.
 */
TEST_F_TIMEOUT(regress, submit_points_while_jobs_retire, 300)
{
	struct submitter *s;
	__u32 dev_bo;
	__u64 v;
	int t, i;

	if (self->fd < 0)
		return;
	s = calloc(SUBMITTERS, sizeof(*s));
	ASSERT_NE(NULL, s);
	ASSERT_EQ(0, npu_bo_create(self->fd, MIB, DRM_NPU_BO_DEVICE, &dev_bo));
	ASSERT_EQ(0, npu_vm_map(self->fd, dev_bo, self->va, MIB, 0, 0));
	for (t = 0; t < SUBMITTERS; t++) {
		s[t].fd = self->fd;
		s[t].va = self->va + t * 4 * KIB;
		ASSERT_EQ(0, npu_queue_create(self->fd, t % 2 ?
					      DRM_NPU_ENGINE_COMPUTE :
					      DRM_NPU_ENGINE_COPY,
					      DRM_NPU_PRIORITY_NORMAL, &s[t].q));
	}
	for (t = 0; t < SUBMITTERS; t++)
		ASSERT_EQ(0, pthread_create(&s[t].thread, NULL,
					    submitter_main, &s[t]));
	for (t = 0; t < SUBMITTERS; t++)
		pthread_join(s[t].thread, NULL);
	for (t = 0; t < SUBMITTERS; t++) {
		ASSERT_EQ(0, s[t].error) TH_LOG("thread %d: %s", t,
						strerror(-s[t].error));
		for (i = 0; i < SUBMITS; i++)
			ASSERT_EQ((__u64)i + 1, s[t].points[i])
				TH_LOG("thread %d submit %d", t, i);
		ASSERT_EQ(0, npu_vm_read(self->fd, s[t].va, &v, sizeof(v)));
		EXPECT_EQ((__u64)SUBMITS, v);
		EXPECT_EQ(0, npu_queue_destroy(self->fd, s[t].q.queue_id));
	}
	free(s);
}

#define CREATES			2000

struct queue_racer {
	int fd;
	volatile int stop;
	int destroyed;
};

/* Destroys queue ids 1..4 over and over, as a guessing thread would. */
static void *queue_racer_main(void *arg)
{
	struct queue_racer *r = arg;
	__u32 id = 1;

	while (!r->stop) {
		if (npu_queue_destroy(r->fd, id) == 0)
			r->destroyed++;
		id = id % 4 + 1;
	}
	return NULL;
}

/*
 * One thread creates and destroys queues while another destroys the
 * lowest ids (which the next creates reuse): every queue a create returned
 * is destroyed exactly once, by either, and its syncobj handle is the
 * file's to destroy.
 */
TEST_F_TIMEOUT(regress, queue_destroyed_while_created, 300)
{
	struct queue_racer r = { .fd = self->fd };
	struct drm_npu_queue_create q;
	struct drm_npu_queue_status st;
	pthread_t thread;
	int created = 0, mine = 0, left = 0, i, ret;
	__u32 id;

	if (self->fd < 0)
		return;
	ASSERT_EQ(0, pthread_create(&thread, NULL, queue_racer_main, &r));
	for (i = 0; i < CREATES; i++) {
		ret = npu_queue_create(self->fd, i % 2 ? DRM_NPU_ENGINE_COMPUTE :
				       DRM_NPU_ENGINE_COPY,
				       DRM_NPU_PRIORITY_NORMAL, &q);
		if (ret == -ENOSPC)
			break;
		ASSERT_EQ(0, ret) TH_LOG("create %d: %s", i, strerror(-ret));
		created++;
		ASSERT_LE(1U, q.queue_id);
		/* Its handle is the file's whether or not the queue lives. */
		EXPECT_EQ(0, npu_syncobj_destroy(self->fd, q.syncobj_handle));
		ret = npu_queue_status(self->fd, q.queue_id, &st);
		EXPECT_TRUE(ret == 0 || ret == -ENOENT) TH_LOG("status: %s",
							       strerror(-ret));
		/* Unless the racer was first. */
		ret = npu_queue_destroy(self->fd, q.queue_id);
		EXPECT_TRUE(ret == 0 || ret == -ENOENT) TH_LOG("destroy: %s",
							       strerror(-ret));
		mine += ret == 0;
	}
	r.stop = 1;
	pthread_join(thread, NULL);
	for (id = 1; id <= 256; id++)
		left += npu_queue_destroy(self->fd, id) == 0;
	EXPECT_EQ(created, r.destroyed + mine + left);
	TH_LOG("%d queues created, %d destroyed by the racer", created,
	       r.destroyed);
}

#define SUBMIT_ROUNDS		300

/*
 * SUBMIT against a concurrent QUEUE_DESTROY (the racer destroys ids 1..4):
 * each submit either runs its job or finds the queue gone (-ENOENT) or
 * dying (-EIO); whatever ran completes. SUBMIT used to unlock the queue's
 * submit_lock after its job, and so its queue reference, could be gone
 * (KASAN on the debug lane reports such a use after free).
 */
TEST_F_TIMEOUT(regress, queue_destroyed_while_submitting, 300)
{
	struct queue_racer r = { .fd = self->fd };
	struct drm_npu_queue_create q;
	struct npu_cmdbuf cb;
	pthread_t thread;
	__u32 dev_bo;
	__u64 cmds[4], point;
	int round, i, ret, ran = 0, refused = 0;

	if (self->fd < 0)
		return;
	ASSERT_EQ(0, npu_bo_create(self->fd, MIB, DRM_NPU_BO_DEVICE, &dev_bo));
	ASSERT_EQ(0, npu_vm_map(self->fd, dev_bo, self->va, MIB, 0, 0));
	ASSERT_EQ(0, pthread_create(&thread, NULL, queue_racer_main, &r));
	for (round = 0; round < SUBMIT_ROUNDS; round++) {
		ret = npu_queue_create(self->fd, round % 2 ?
				       DRM_NPU_ENGINE_COMPUTE :
				       DRM_NPU_ENGINE_COPY,
				       DRM_NPU_PRIORITY_NORMAL, &q);
		ASSERT_EQ(0, ret) TH_LOG("create %d: %s", round, strerror(-ret));
		EXPECT_EQ(0, npu_syncobj_destroy(self->fd, q.syncobj_handle));
		for (i = 0; i < 64; i++) {
			npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
			npu_emit_write_value(&cb, self->va + 8 * i, round);
			ret = npu_submit_cmdbuf(self->fd, q.queue_id, &cb,
						NULL, 0, &point);
			if (ret) {
				EXPECT_TRUE(ret == -ENOENT || ret == -EIO)
					TH_LOG("submit: %s", strerror(-ret));
				refused++;
				break;
			}
			ran++;
		}
		npu_queue_destroy(self->fd, q.queue_id);
	}
	r.stop = 1;
	pthread_join(thread, NULL);
	TH_LOG("%d jobs submitted, %d submits found the queue gone", ran,
	       refused);
	EXPECT_LT(0, refused);
	EXPECT_EQ(0, npu_vm_unmap(self->fd, self->va, MIB));
	EXPECT_EQ(0, npu_gem_close(self->fd, dev_bo));
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_hostile_test - one process tries to reach another's objects.
 *
 * A victim process (forked, running as its own user when the test runs as
 * root) owns a context with every kind of object: device, host, userptr
 * and exported BOs mapped at device addresses and filled with patterns,
 * queues (one of them stopped by a fault), binary and timeline syncobjs,
 * dma-bufs. It describes them (handles, mmap offsets, device addresses,
 * queue ids, syncobj handles, descriptor numbers, its pid) to an attacker
 * process of another user, with its own file of the same node, which tries
 * to reach them every way the uAPI and the OS offer: guessing handles,
 * mmap offsets and device addresses, jobs whose packets address the
 * victim's or the kernel's memory, dma-bufs and flink names it was not
 * given, the victim's syncobjs and queue ids, engine scratch memory and
 * freed memory, and exhausting what the device and the driver have.
 *
 * Each attack must fail (or reach only the attacker's own objects), and
 * the victim then checks that nothing of it changed: the checksums of its
 * BOs through the device and the CPU, its queues' status and timelines,
 * its syncobjs, its resource counts. Then it runs jobs again: it keeps
 * working. Attacks are counted by kind; the last test prints the table
 * ("hostile: N attacks of K kinds, 0 succeeded").
 *
 * The exhaustion scenes hold what they exhausted while the test checks
 * the victim, and each limit must answer with its errno: device memory and
 * the driver's pinned budget (pinned_mem_mb) -ENOMEM, shared, so the
 * victim's new BOs fail too while its old ones work; userptr pins the
 * attacker's RLIMIT_MEMLOCK, -ENOMEM; per file 256 queues and 65536
 * mappings, -ENOSPC; per file 4096 jobs or 64 MiB of commands in flight,
 * -EAGAIN. Fills that pin RAM run only where the machine can spare it.
 * Run as root, the two processes are two other users sharing the node's
 * group; otherwise they are the caller's user and the process-boundary
 * scene is skipped.
 *
 * Nothing here sleeps to synchronise: victim, attacker and test talk
 * through pipes, and every wait has a timeout.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"
#include "npu_submit_util.h"
#include "npu_proc_util.h"

#define KIB			1024ULL
#define MIB			(1024 * KIB)
#define GIB			(1024 * MIB)

/* The users the two processes run as when the test runs as root. */
#define VICTIM_UID		61001
#define ATTACKER_UID		61002
/* The group both are in, which the test gives the node (as udev would). */
#define NODE_GID		61000

/* How long a peer may take to answer: jobs may wait for the job timeout. */
#define PEER_MS			((long long)npu_job_timeout_ms() * \
				 DRM_NPU_JOB_TIMEOUT_FACTOR + 60000)
#define JOB_MS			((long long)npu_job_timeout_ms() * \
				 DRM_NPU_JOB_TIMEOUT_FACTOR + 30000)

/* Addresses the kernel owns, and the edges of the device address space. */
static const __u64 kernel_addrs[] = {
	0xffff888000000000ULL,	/* the direct map */
	0xffffffff81000000ULL,	/* kernel text */
	0xffffc90000000000ULL,	/* vmalloc */
	0xffffea0000000000ULL,	/* struct pages */
	0xffffffffff600000ULL,	/* vsyscall */
	0x0000800000000000ULL,	/* just past user space */
	0xfffffffffffff000ULL,	/* the last page */
};

/* ---- the tally, shared by every process of the run ------------------ */

enum kind {
	K_HANDLES,
	K_MMAP,
	K_DEVICE_VA,
	K_KERNEL_ADDR,
	K_READONLY,
	K_DMABUF,
	K_PROCESS,
	K_FLINK,
	K_SYNCOBJ,
	K_QUEUE,
	K_FREED,
	K_SCRATCH,
	K_EXHAUST_MEMORY,
	K_EXHAUST_QUEUES,
	K_EXHAUST_PINNED,
	K_EXHAUST_JOBS,
	K_EXHAUST_MAPPINGS,
	K_COUNT
};

static const char *const kind_names[K_COUNT] = {
	[K_HANDLES] = "gem-handles",
	[K_MMAP] = "mmap-offsets",
	[K_DEVICE_VA] = "device-addresses",
	[K_KERNEL_ADDR] = "kernel-addresses",
	[K_READONLY] = "read-only-memory",
	[K_DMABUF] = "dma-buf-import",
	[K_PROCESS] = "process-boundary",
	[K_FLINK] = "flink-names",
	[K_SYNCOBJ] = "syncobjs",
	[K_QUEUE] = "queue-ids",
	[K_FREED] = "freed-memory",
	[K_SCRATCH] = "engine-scratch",
	[K_EXHAUST_MEMORY] = "exhaust-device-memory",
	[K_EXHAUST_QUEUES] = "exhaust-queues",
	[K_EXHAUST_PINNED] = "exhaust-pinned-memory",
	[K_EXHAUST_JOBS] = "exhaust-jobs-fences",
	[K_EXHAUST_MAPPINGS] = "exhaust-mappings",
};

struct tally {
	unsigned long tried[K_COUNT];
	unsigned long succeeded[K_COUNT];
	unsigned long victim_changed[K_COUNT];
};

static struct tally *tally;

/* Made before the harness forks its tests, so every test adds to it. */
static void __attribute__((constructor)) tally_init(void)
{
	tally = mmap(NULL, sizeof(*tally), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tally == MAP_FAILED)
		abort();
}

/*
 * attack() - count one attack of @kind; @refused says it failed as it
 * must (or reached only the attacker's own objects). Return: @refused.
 */
static bool __attribute__((format(printf, 3, 4)))
attack(enum kind kind, bool refused, const char *fmt, ...)
{
	va_list ap;

	__atomic_add_fetch(&tally->tried[kind], 1, __ATOMIC_RELAXED);
	if (refused)
		return true;
	__atomic_add_fetch(&tally->succeeded[kind], 1, __ATOMIC_RELAXED);
	va_start(ap, fmt);
	printf("# ATTACK SUCCEEDED (%s): ", kind_names[kind]);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	return false;
}

/* ---- pipes, children and users -------------------------------------- */

/* Whether the test can run its two processes as two other users. */
static bool can_switch_users(void)
{
	return geteuid() == 0;
}

/*
 * become() - turn the calling process into user @uid (group @uid, and the
 * node's group NODE_GID as a supplementary one), with no capabilities,
 * still dumpable as any user's process is. Does nothing when not root.
 */
static int become(uid_t uid)
{
	gid_t groups[1] = { NODE_GID };

	if (!can_switch_users())
		return 0;
	if (setgroups(1, groups) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		return -errno;
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
		return -errno;
	return 0;
}

/* FNV-1a, for checksums of memory. */
static __u64 fnv(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	__u64 h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/* The bytes the victim writes into memory it frees (freed-memory kind). */
static const char secret_marker[8] = { 'N', 'P', 'U', 'S', 'E', 'C', 'R', 'T' };

static bool has_secret(const void *buf, size_t len)
{
	const char *p = buf;
	size_t i;

	for (i = 0; i + sizeof(secret_marker) <= len; i += sizeof(secret_marker))
		if (!memcmp(p + i, secret_marker, sizeof(secret_marker)))
			return true;
	return false;
}

/* ---- the victim ------------------------------------------------------ */

enum vbo { VB_DEV, VB_DEV_BIG, VB_HOST, VB_UPTR, VB_EXPORT, VB_COUNT };
enum vq { VQ_COPY, VQ_COMPUTE, VQ_COMPUTE2, VQ_ERR, VQ_COUNT };
enum vs { VS_BIN, VS_TL, VS_SIG, VS_COUNT };

static const __u64 vb_size[VB_COUNT] = {
	[VB_DEV] = 64 * KIB,
	[VB_DEV_BIG] = 1 * MIB,
	[VB_HOST] = 64 * KIB,
	[VB_UPTR] = 64 * KIB,
	[VB_EXPORT] = 64 * KIB,
};
static const __u32 vb_kind[VB_COUNT] = {
	[VB_DEV] = DRM_NPU_BO_DEVICE,
	[VB_DEV_BIG] = DRM_NPU_BO_DEVICE,
	[VB_HOST] = DRM_NPU_BO_HOST,
	[VB_UPTR] = DRM_NPU_BO_USERPTR,
	[VB_EXPORT] = DRM_NPU_BO_DEVICE,
};

/* The timeline syncobj's point the victim signals. */
#define VS_TL_POINT		5

/**
 * struct victim_desc - what the victim tells: everything an attacker
 * could learn or guess about its objects
 */
struct victim_desc {
	pid_t pid;
	uid_t uid;
	int node_fd;
	__u64 va_base;
	__u32 handle[VB_COUNT];
	__u64 va[VB_COUNT];
	__u64 size[VB_COUNT];
	__u64 mmap_offset[VB_COUNT];
	__u64 cpu_addr[VB_COUNT];
	int dmabuf_fd[VB_COUNT];
	__u32 work_handle;
	__u64 work_va;
	__u32 queue_id[VQ_COUNT];
	__u32 queue_syncobj[VQ_COUNT];
	__u32 queue_engine[VQ_COUNT];
	__u32 syncobj[VS_COUNT];
	__u32 max_handle;
	__u32 max_syncobj;
};

/* What "nothing of the victim changed" compares. */
struct snapshot {
	__u64 sum[VB_COUNT];
	__u64 cpu_sum[VB_COUNT];
	struct drm_npu_bo_info bi[VB_COUNT];
	struct drm_npu_queue_status qs[VQ_COUNT];
	__u64 q_point[VQ_COUNT];
	__u64 q_submitted[VQ_COUNT];
	int bin_wait;
	int sig_wait;
	__u64 tl_point;
	__u64 tl_submitted;
	struct drm_npu_context_info ci;
};

enum vcmd {
	VC_CHECK,	/* compare with the snapshot: 0 or -EIO */
	VC_WORK,	/* run jobs and check them, then take a new snapshot */
	VC_ALLOC_DEVICE, /* make and free a DEVICE BO of arg bytes: errno */
	VC_ALLOC_HOST,	/* the same with a HOST BO */
	VC_USERPTR,	/* pin and unpin arg bytes: errno */
	VC_QUEUE,	/* make and destroy a queue: errno */
	VC_MAP,		/* bind and unbind a mapping of the work BO: errno */
	VC_SUBMIT,	/* submit a job, not waiting for it: errno */
	VC_SECRET,	/* fill memory and the engines' scratch with the
			 * secret marker, then free that memory */
	VC_EXIT,
};

struct vmsg {
	__u32 cmd;
	__u32 pad;
	__u64 arg;
};

struct victim {
	int fd;
	struct drm_npu_device_info info;
	struct victim_desc d;
	void *cpu[VB_COUNT];
	struct snapshot base;
	long page;
	__u64 pending;
};

static int v_wait_queue(struct victim *v, enum vq q, __u64 point)
{
	return nsub_wait(v->fd, v->d.queue_syncobj[q], point, JOB_MS);
}

/* Run one job on @q and wait for it; the queue's error if it failed. */
static int v_run(struct victim *v, enum vq q, const struct npu_cmdbuf *cb)
{
	struct drm_npu_queue_status st;
	__u64 point;
	int ret;

	ret = npu_submit_cmdbuf(v->fd, v->d.queue_id[q], cb, NULL, 0, &point);
	if (!ret)
		ret = v_wait_queue(v, q, point);
	if (!ret)
		ret = npu_queue_status(v->fd, v->d.queue_id[q], &st);
	if (!ret && st.error)
		ret = st.error;
	return ret;
}

static int v_read(struct victim *v, __u64 va, void *buf, __u64 size)
{
	return npu_vm_read(v->fd, va, buf, size);
}

static int snapshot_queue(struct victim *v, struct snapshot *s, int i)
{
	int ret;

	ret = npu_queue_status(v->fd, v->d.queue_id[i], &s->qs[i]);
	if (!ret)
		ret = npu_syncobj_query(v->fd, v->d.queue_syncobj[i], 0,
					&s->q_point[i]);
	if (!ret)
		ret = npu_syncobj_query(v->fd, v->d.queue_syncobj[i],
					DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
					&s->q_submitted[i]);
	return ret;
}

static int snapshot_take(struct victim *v, struct snapshot *s)
{
	struct drm_syncobj_wait w;
	unsigned char *buf;
	__u32 h;
	int i, ret = 0;

	memset(s, 0, sizeof(*s));
	buf = malloc(MIB);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < VB_COUNT && !ret; i++) {
		ret = v_read(v, v->d.va[i], buf, v->d.size[i]);
		if (!ret)
			s->sum[i] = fnv(buf, v->d.size[i]);
		if (!ret && v->cpu[i])
			s->cpu_sum[i] = fnv(v->cpu[i], v->d.size[i]);
		if (!ret)
			ret = npu_bo_info(v->fd, v->d.handle[i], &s->bi[i]);
	}
	free(buf);
	for (i = 0; i < VQ_COUNT && !ret; i++)
		ret = snapshot_queue(v, s, i);
	if (ret)
		return ret;
	memset(&w, 0, sizeof(w));
	h = v->d.syncobj[VS_BIN];
	w.handles = (__u64)(uintptr_t)&h;
	w.count_handles = 1;
	s->bin_wait = npu_ioctl(v->fd, DRM_IOCTL_SYNCOBJ_WAIT, &w);
	h = v->d.syncobj[VS_SIG];
	s->sig_wait = npu_ioctl(v->fd, DRM_IOCTL_SYNCOBJ_WAIT, &w);
	ret = npu_syncobj_query(v->fd, v->d.syncobj[VS_TL], 0, &s->tl_point);
	if (!ret)
		ret = npu_syncobj_query(v->fd, v->d.syncobj[VS_TL],
					DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
					&s->tl_submitted);
	if (!ret)
		ret = npu_context_info(v->fd, &s->ci);
	return ret;
}

/* Names the first difference; 0 if none. */
static int snapshot_compare(const struct snapshot *a, const struct snapshot *b)
{
	int i;

	for (i = 0; i < VB_COUNT; i++) {
		if (a->sum[i] != b->sum[i] || a->cpu_sum[i] != b->cpu_sum[i]) {
			printf("# victim: BO %d's contents changed\n", i);
			return -EIO;
		}
		if (memcmp(&a->bi[i], &b->bi[i], sizeof(a->bi[i]))) {
			printf("# victim: BO %d's BO_INFO changed\n", i);
			return -EIO;
		}
	}
	for (i = 0; i < VQ_COUNT; i++) {
		if (memcmp(&a->qs[i], &b->qs[i], sizeof(a->qs[i])) ||
		    a->q_point[i] != b->q_point[i] ||
		    a->q_submitted[i] != b->q_submitted[i]) {
			printf("# victim: queue %d changed: state %u->%u error %d->%d submitted %llu->%llu completed %llu->%llu\n",
			       i, a->qs[i].state, b->qs[i].state,
			       a->qs[i].error, b->qs[i].error,
			       (unsigned long long)a->qs[i].submitted,
			       (unsigned long long)b->qs[i].submitted,
			       (unsigned long long)a->qs[i].completed,
			       (unsigned long long)b->qs[i].completed);
			return -EIO;
		}
	}
	if (a->bin_wait != b->bin_wait || a->sig_wait != b->sig_wait ||
	    a->tl_point != b->tl_point || a->tl_submitted != b->tl_submitted) {
		printf("# victim: syncobjs changed: unsignalled %d->%d signalled %d->%d timeline %llu/%llu->%llu/%llu\n",
		       a->bin_wait, b->bin_wait, a->sig_wait, b->sig_wait,
		       (unsigned long long)a->tl_point,
		       (unsigned long long)a->tl_submitted,
		       (unsigned long long)b->tl_point,
		       (unsigned long long)b->tl_submitted);
		return -EIO;
	}
	if (memcmp(&a->ci, &b->ci, sizeof(a->ci))) {
		printf("# victim: CONTEXT_INFO changed: BOs %llu->%llu mappings %llu->%llu pinned %llu->%llu\n",
		       (unsigned long long)a->ci.bo_count,
		       (unsigned long long)b->ci.bo_count,
		       (unsigned long long)a->ci.mapping_count,
		       (unsigned long long)b->ci.mapping_count,
		       (unsigned long long)a->ci.pinned_bytes,
		       (unsigned long long)b->ci.pinned_bytes);
		return -EIO;
	}
	return 0;
}

static void fill_pattern_u32(void *buf, size_t len, __u32 seed)
{
	npu_fill_pattern(buf, len, seed);
}

static int victim_setup(struct victim *v, const char *path)
{
	struct drm_npu_queue_create q;
	__u64 cmds[64];
	struct npu_cmdbuf cb;
	unsigned char *buf;
	int i, ret;

	memset(v, 0, sizeof(*v));
	v->page = sysconf(_SC_PAGESIZE);
	v->fd = open(path, O_RDWR | O_CLOEXEC);
	if (v->fd < 0)
		return -errno;
	ret = npu_query_device_info(v->fd, &v->info);
	if (ret)
		return ret;
	v->d.pid = getpid();
	v->d.uid = getuid();
	v->d.node_fd = v->fd;
	v->d.va_base = ((v->info.va_start + GIB - 1) & ~(GIB - 1)) + GIB;

	buf = malloc(MIB);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < VB_COUNT; i++) {
		v->d.size[i] = vb_size[i];
		v->d.va[i] = v->d.va_base + i * 16 * MIB;
		v->d.dmabuf_fd[i] = -1;
		if (vb_kind[i] == DRM_NPU_BO_USERPTR) {
			v->cpu[i] = mmap(NULL, vb_size[i], PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (v->cpu[i] == MAP_FAILED) {
				ret = -errno;
				break;
			}
			fill_pattern_u32(v->cpu[i], vb_size[i], 100 + i);
			ret = npu_bo_userptr(v->fd, v->cpu[i], vb_size[i], 0,
					     &v->d.handle[i]);
		} else {
			ret = npu_bo_create(v->fd, vb_size[i], vb_kind[i],
					    &v->d.handle[i]);
		}
		if (!ret)
			ret = npu_vm_map(v->fd, v->d.handle[i], v->d.va[i],
					 vb_size[i], 0, 0);
		if (!ret && vb_kind[i] != DRM_NPU_BO_USERPTR) {
			fill_pattern_u32(buf, vb_size[i], 100 + i);
			ret = npu_vm_write(v->fd, v->d.va[i], buf, vb_size[i]);
		}
		if (ret)
			break;
		if (vb_kind[i] == DRM_NPU_BO_HOST) {
			v->cpu[i] = npu_bo_mmap(v->fd, v->d.handle[i],
						vb_size[i]);
			if (v->cpu[i] == MAP_FAILED) {
				ret = -errno;
				break;
			}
		}
		if (vb_kind[i] != DRM_NPU_BO_USERPTR) {
			struct drm_npu_bo_info bi;

			ret = npu_bo_info(v->fd, v->d.handle[i], &bi);
			if (ret)
				break;
			v->d.mmap_offset[i] = bi.mmap_offset;
		}
		if (i == VB_EXPORT || i == VB_HOST) {
			ret = npu_prime_export(v->fd, v->d.handle[i],
					       DRM_CLOEXEC | DRM_RDWR,
					       &v->d.dmabuf_fd[i]);
			if (ret)
				break;
		}
		v->d.cpu_addr[i] = (__u64)(uintptr_t)v->cpu[i];
		if (v->d.handle[i] > v->d.max_handle)
			v->d.max_handle = v->d.handle[i];
	}
	free(buf);
	if (ret)
		return ret;

	v->d.work_va = v->d.va_base + 15 * 16 * MIB;
	ret = npu_bo_create(v->fd, 64 * KIB, DRM_NPU_BO_DEVICE,
			    &v->d.work_handle);
	if (!ret)
		ret = npu_vm_map(v->fd, v->d.work_handle, v->d.work_va,
				 64 * KIB, 0, 0);
	if (ret)
		return ret;
	if (v->d.work_handle > v->d.max_handle)
		v->d.max_handle = v->d.work_handle;

	for (i = 0; i < VQ_COUNT; i++) {
		__u32 cls = (i == VQ_COMPUTE || i == VQ_COMPUTE2) ?
			    DRM_NPU_ENGINE_COMPUTE : DRM_NPU_ENGINE_COPY;

		ret = npu_queue_create(v->fd, cls, DRM_NPU_PRIORITY_NORMAL, &q);
		if (ret)
			return ret;
		v->d.queue_id[i] = q.queue_id;
		v->d.queue_syncobj[i] = q.syncobj_handle;
		v->d.queue_engine[i] = q.engine_id;
		if (q.syncobj_handle > v->d.max_syncobj)
			v->d.max_syncobj = q.syncobj_handle;
	}
	/* Some history on each queue; the error queue faults. */
	for (i = 0; i < VQ_COUNT; i++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		if (i == VQ_ERR)
			npu_emit_copy(&cb, v->d.va_base - 16 * MIB,
				      v->d.work_va, 4096);
		else
			npu_emit_copy(&cb, v->d.va[VB_DEV], v->d.work_va,
				      4096);
		ret = v_run(v, i, &cb);
		if (i == VQ_ERR)
			ret = ret == -EFAULT ? 0 : -EPROTO;
		if (ret)
			return ret;
	}

	for (i = 0; i < VS_COUNT; i++) {
		ret = npu_syncobj_create(v->fd, 0, &v->d.syncobj[i]);
		if (ret)
			return ret;
		if (v->d.syncobj[i] > v->d.max_syncobj)
			v->d.max_syncobj = v->d.syncobj[i];
	}
	{
		struct drm_syncobj_timeline_array ta = {
			.handles = (__u64)(uintptr_t)&v->d.syncobj[VS_TL],
			.count_handles = 1,
		};
		struct drm_syncobj_array sa = {
			.handles = (__u64)(uintptr_t)&v->d.syncobj[VS_SIG],
			.count_handles = 1,
		};
		__u64 point = VS_TL_POINT;

		ta.points = (__u64)(uintptr_t)&point;
		ret = npu_ioctl(v->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &ta);
		if (!ret)
			ret = npu_ioctl(v->fd, DRM_IOCTL_SYNCOBJ_SIGNAL, &sa);
		if (ret)
			return ret;
	}
	return snapshot_take(v, &v->base);
}

/* Jobs on every working queue, checked; then a new snapshot. */
static int victim_work(struct victim *v)
{
	unsigned char *buf, *want;
	struct npu_cmdbuf cb;
	__u64 cmds[64];
	int ret;

	buf = malloc(64 * KIB);
	want = malloc(64 * KIB);
	if (!buf || !want) {
		free(buf);
		free(want);
		return -ENOMEM;
	}
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_fill(&cb, v->d.work_va, 64 * KIB, 0, 1);
	npu_emit_copy(&cb, v->d.va[VB_DEV], v->d.work_va, 64 * KIB);
	ret = v_run(v, VQ_COPY, &cb);
	if (!ret)
		ret = v_read(v, v->d.work_va, buf, 64 * KIB);
	if (!ret)
		ret = v_read(v, v->d.va[VB_DEV], want, 64 * KIB);
	if (!ret && memcmp(buf, want, 64 * KIB))
		ret = -EIO;
	if (!ret) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_fill(&cb, v->d.work_va, 4096, 0x77, 1);
		ret = v_run(v, VQ_COMPUTE, &cb);
	}
	if (!ret) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_copy(&cb, v->d.va[VB_HOST], v->d.work_va + 4096,
			      4096);
		ret = v_run(v, VQ_COMPUTE2, &cb);
	}
	if (!ret)
		ret = v_read(v, v->d.work_va, buf, 8192);
	if (!ret && (!npu_all_bytes(buf, 4096, 0x77) ||
		     memcmp(buf + 4096, v->cpu[VB_HOST], 4096)))
		ret = -EIO;
	/* The queue that faulted still refuses work until it is reset. */
	if (!ret) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_nop(&cb);
		if (npu_submit_cmdbuf(v->fd, v->d.queue_id[VQ_ERR], &cb, NULL,
				      0, NULL) != -EIO)
			ret = -EPROTO;
	}
	free(buf);
	free(want);
	if (!ret)
		ret = snapshot_take(v, &v->base);
	return ret;
}

/*
 * Memory filled with the secret marker and freed, and ops of secret data
 * on both compute queues, so that the engines' scratch holds it.
 */
static int victim_secret(struct victim *v)
{
	const __u64 size = 8 * MIB, va = v->d.va_base + 512 * MIB;
	struct drm_npu_pkt_op *op;
	struct npu_cmdbuf cb;
	__u64 cmds[64];
	__u32 dev, host;
	char *buf;
	size_t i;
	int ret, q;

	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < size; i += sizeof(secret_marker))
		memcpy(buf + i, secret_marker, sizeof(secret_marker));
	ret = npu_bo_create(v->fd, size, DRM_NPU_BO_DEVICE, &dev);
	if (!ret)
		ret = npu_bo_create(v->fd, size, DRM_NPU_BO_HOST, &host);
	if (!ret)
		ret = npu_vm_map(v->fd, dev, va, size, 0, 0);
	if (!ret)
		ret = npu_vm_map(v->fd, host, va + size, size, 0, 0);
	if (!ret)
		ret = npu_vm_write(v->fd, va, buf, size);
	if (!ret)
		ret = npu_vm_write(v->fd, va + size, buf, size);
	free(buf);
	/* Ops over the secret: every scratch buffer of both engines. */
	for (q = VQ_COMPUTE; !ret && q <= VQ_COMPUTE2; q++) {
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		op = npu_cmdbuf_add(&cb, DRM_NPU_PKT_OP, sizeof(*op));
		op->op = DRM_NPU_OP_ADD;
		op->dtype = op->out_dtype = DRM_NPU_DTYPE_I32;
		op->a = va;
		op->b = va + 64 * KIB;
		op->out = va + size;
		op->n = 16384;
		op = npu_cmdbuf_add(&cb, DRM_NPU_PKT_OP, sizeof(*op));
		op->op = DRM_NPU_OP_GEMM;
		op->dtype = DRM_NPU_DTYPE_F32;
		op->out_dtype = DRM_NPU_DTYPE_F32;
		op->a = va;
		op->b = va + MIB;
		op->out = va + size + MIB;
		op->m = 64;
		op->n = 64;
		op->k = 64;
		op->alpha_bits = 0x3f800000;
		op = npu_cmdbuf_add(&cb, DRM_NPU_PKT_OP, sizeof(*op));
		op->op = DRM_NPU_OP_TRANSPOSE;
		op->dtype = op->out_dtype = DRM_NPU_DTYPE_I32;
		op->a = va + 2 * MIB;
		op->out = va + size + 2 * MIB;
		op->m = 64;
		op->n = 64;
		op = npu_cmdbuf_add(&cb, DRM_NPU_PKT_OP, sizeof(*op));
		op->op = DRM_NPU_OP_REDUCE_SUM;
		op->dtype = op->out_dtype = DRM_NPU_DTYPE_I32;
		op->a = va + 3 * MIB;
		op->out = va + size + 3 * MIB;
		op->m = 4;
		op->n = 4096;
		op->axis = 1;
		ret = v_run(v, q, &cb);
	}
	if (!ret)
		ret = npu_vm_unmap(v->fd, va, size);
	if (!ret)
		ret = npu_vm_unmap(v->fd, va + size, size);
	if (!ret)
		ret = npu_gem_close(v->fd, dev);
	if (!ret)
		ret = npu_gem_close(v->fd, host);
	if (!ret)
		ret = snapshot_take(v, &v->base);
	return ret;
}

static int victim_try(struct victim *v, const struct vmsg *m)
{
	struct drm_npu_queue_create q;
	__u32 h;
	void *p;
	int ret;

	switch (m->cmd) {
	case VC_ALLOC_DEVICE:
	case VC_ALLOC_HOST:
		ret = npu_bo_create(v->fd, m->arg, m->cmd == VC_ALLOC_DEVICE ?
				    DRM_NPU_BO_DEVICE : DRM_NPU_BO_HOST, &h);
		if (!ret)
			ret = npu_gem_close(v->fd, h);
		return ret;
	case VC_USERPTR:
		p = mmap(NULL, m->arg, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		memset(p, 1, m->arg);
		ret = npu_bo_userptr(v->fd, p, m->arg, 0, &h);
		if (!ret)
			ret = npu_gem_close(v->fd, h);
		munmap(p, m->arg);
		return ret;
	case VC_QUEUE:
		ret = npu_queue_create(v->fd, DRM_NPU_ENGINE_COPY,
				       DRM_NPU_PRIORITY_NORMAL, &q);
		if (!ret) {
			npu_syncobj_destroy(v->fd, q.syncobj_handle);
			ret = npu_queue_destroy(v->fd, q.queue_id);
		}
		return ret;
	case VC_SUBMIT: {
		struct npu_cmdbuf cb;
		__u64 cmds[4];

		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_nop(&cb);
		return npu_submit_cmdbuf(v->fd, v->d.queue_id[VQ_COPY], &cb,
					 NULL, 0, &v->pending);
	}
	case VC_MAP:
		ret = npu_vm_map(v->fd, v->d.work_handle,
				 v->d.va_base + 256 * MIB, 64 * KIB, 0, 0);
		if (!ret)
			ret = npu_vm_unmap(v->fd, v->d.va_base + 256 * MIB,
					   64 * KIB);
		return ret;
	}
	return -EINVAL;
}

/*
 * victim_main() - the victim process: sets up, tells the test what it
 * has, then serves the test's commands until VC_EXIT.
 */
static void __attribute__((noreturn))
victim_main(const char *path, int desc_w, int cmd_r, int reply_w)
{
	struct snapshot now;
	struct victim v;
	struct vmsg m;
	int ret;

	ret = become(VICTIM_UID);
	if (!ret)
		ret = victim_setup(&v, path);
	if (ret) {
		printf("# victim: setup failed: %s\n", strerror(-ret));
		v.d.pid = -ret;
		v.d.uid = (uid_t)-1;
	}
	if (npu_write_all(desc_w, &v.d, sizeof(v.d)) || ret)
		_exit(1);
	for (;;) {
		if (npu_read_all(cmd_r, &m, sizeof(m), 3600 * 1000LL))
			_exit(2);
		/* A job VC_SUBMIT left: it ends, and the queue moves on. */
		if (v.pending && m.cmd != VC_SUBMIT) {
			ret = v_wait_queue(&v, VQ_COPY, v.pending);
			if (!ret)
				ret = snapshot_queue(&v, &v.base, VQ_COPY);
			v.pending = 0;
			if (ret) {
				printf("# victim: its job did not end: %s\n",
				       strerror(-ret));
				_exit(4);
			}
		}
		switch (m.cmd) {
		case VC_CHECK:
			ret = snapshot_take(&v, &now);
			if (!ret)
				ret = snapshot_compare(&v.base, &now);
			break;
		case VC_WORK:
			ret = victim_work(&v);
			break;
		case VC_SECRET:
			ret = victim_secret(&v);
			break;
		case VC_EXIT:
			_exit(0);
		default:
			ret = victim_try(&v, &m);
			break;
		}
		if (npu_write_all(reply_w, &ret, sizeof(ret)))
			_exit(3);
	}
}

/* ---- the test's side: a scene of one victim -------------------------- */

struct scene {
	pid_t victim;
	int cmd_w;
	int reply_r;
	struct victim_desc d;
};

FIXTURE(hostile) {
	char path[64];
	char other_path[64];
	char card_path[PATH_MAX];
	char dbg_dir[PATH_MAX];
	char ro_path[64];
	struct drm_npu_device_info info;
	struct stat node_st;
	bool node_changed;
	pid_t owner;
	struct scene s;
	bool scene_live;
};

/*
 * The primary node (/dev/dri/cardN) of the same device, if the kernel
 * made one: 6.1 does for every render driver; accel devices have none.
 */
static void find_card(FIXTURE_DATA(hostile) *self, int render_fd)
{
	struct stat rs, cs;
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], link[PATH_MAX];
	struct dirent *de;
	DIR *d;
	ssize_t n;

	if (fstat(render_fd, &rs) || major(rs.st_rdev) != 226)
		return;
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u/device",
		 major(rs.st_rdev), minor(rs.st_rdev));
	n = readlink(link, a, sizeof(a) - 1);
	if (n <= 0)
		return;
	a[n] = '\0';
	d = opendir(NPU_DRI_DIR);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "card", 4))
			continue;
		snprintf(link, sizeof(link), "%s/%s", NPU_DRI_DIR, de->d_name);
		if (stat(link, &cs) || !S_ISCHR(cs.st_mode))
			continue;
		snprintf(b, sizeof(b), "/sys/dev/char/%u:%u/device",
			 major(cs.st_rdev), minor(cs.st_rdev));
		n = readlink(b, c, sizeof(c) - 1);
		if (n <= 0)
			continue;
		c[n] = '\0';
		if (!strcmp(a, c)) {
			snprintf(self->card_path, sizeof(self->card_path),
				 "%s", link);
			break;
		}
	}
	closedir(d);
}

FIXTURE_SETUP(hostile)
{
	struct npu_node nodes[NPU_MAX_NODES];
	int n, i;

	self->owner = getpid();
	self->scene_live = false;
	self->path[0] = self->other_path[0] = self->card_path[0] = '\0';
	self->dbg_dir[0] = self->ro_path[0] = '\0';
	n = npu_open_nodes(nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR,
			       NPU_DRI_DIR, strerror(-n));
	if (!n)
		SKIP(return, "no npu node (is npu.ko loaded?)");
	snprintf(self->path, sizeof(self->path), "%s", nodes[0].path);
	for (i = 1; i < n; i++) {
		if (nodes[i].device_index != nodes[0].device_index) {
			snprintf(self->other_path, sizeof(self->other_path),
				 "%s", nodes[i].path);
			break;
		}
	}
	ASSERT_EQ(0, npu_query_device_info(nodes[0].fd, &self->info));
	if (npu_debugfs_dir(nodes[0].fd, self->dbg_dir, sizeof(self->dbg_dir)))
		self->dbg_dir[0] = '\0';
	find_card(self, nodes[0].fd);
	npu_close_nodes(nodes, n);

	/*
	 * Both users get the node as a member of its group (what the
	 * packages' udev rule does with "render"), so each opens it
	 * itself, unprivileged, as on a real system.
	 */
	ASSERT_EQ(0, stat(self->path, &self->node_st));
	self->node_changed = false;
	if (can_switch_users()) {
		ASSERT_EQ(0, chown(self->path, -1, NODE_GID));
		ASSERT_EQ(0, chmod(self->path, 0660));
		self->node_changed = true;
	}
}

FIXTURE_TEARDOWN(hostile)
{
	/* Children that fail an assertion unwind through here too. */
	if (getpid() != self->owner)
		return;
	if (self->scene_live) {
		kill(self->s.victim, SIGKILL);
		npu_wait_child(self->s.victim);
		close(self->s.cmd_w);
		close(self->s.reply_r);
	}
	if (self->node_changed) {
		if (chown(self->path, -1, self->node_st.st_gid) ||
		    chmod(self->path, self->node_st.st_mode & 07777))
			TH_LOG("could not restore %s", self->path);
	}
	if (self->ro_path[0])
		unlink(self->ro_path);
}

static void scene_start(struct __test_metadata *_metadata,
			FIXTURE_DATA(hostile) *self)
{
	int desc[2], cmd[2], reply[2];
	pid_t pid;

	ASSERT_EQ(0, pipe2(desc, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(cmd, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(reply, O_CLOEXEC));
	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(desc[0]);
		close(cmd[1]);
		close(reply[0]);
		victim_main(self->path, desc[1], cmd[0], reply[1]);
	}
	close(desc[1]);
	close(cmd[0]);
	close(reply[1]);
	self->s.victim = pid;
	self->s.cmd_w = cmd[1];
	self->s.reply_r = reply[0];
	self->scene_live = true;
	ASSERT_EQ(0, npu_read_all(desc[0], &self->s.d, sizeof(self->s.d), PEER_MS))
		TH_LOG("the victim did not describe itself");
	close(desc[0]);
	ASSERT_EQ(pid, self->s.d.pid) TH_LOG("victim setup: %s",
					     strerror(self->s.d.pid));
}

/* Send @cmd to the victim; its answer (0 or a negative errno). */
static int victim_cmd(FIXTURE_DATA(hostile) *self, enum vcmd cmd, __u64 arg)
{
	struct vmsg m = { .cmd = cmd, .arg = arg };
	int ret, reply;

	ret = npu_write_all(self->s.cmd_w, &m, sizeof(m));
	if (!ret)
		ret = npu_read_all(self->s.reply_r, &reply, sizeof(reply), PEER_MS);
	return ret ? ret : reply;
}

/*
 * The victim compares itself with its snapshot, works, compares again and
 * ends. A change counts against @kind.
 */
static void scene_end(struct __test_metadata *_metadata,
		      FIXTURE_DATA(hostile) *self, enum kind kind)
{
	int ret;

	ret = victim_cmd(self, VC_CHECK, 0);
	if (ret)
		__atomic_add_fetch(&tally->victim_changed[kind], 1,
				   __ATOMIC_RELAXED);
	ASSERT_EQ(0, ret) TH_LOG("the victim changed under %s attacks",
				 kind_names[kind]);
	ASSERT_EQ(0, victim_cmd(self, VC_WORK, 0))
		TH_LOG("the victim no longer works after %s attacks",
		       kind_names[kind]);
	ASSERT_EQ(0, victim_cmd(self, VC_CHECK, 0));
	ASSERT_EQ(0, npu_write_all(self->s.cmd_w, &(struct vmsg){ .cmd = VC_EXIT },
			       sizeof(struct vmsg)));
	ASSERT_EQ(0, npu_wait_child_ms(self->s.victim, PEER_MS));
	self->scene_live = false;
	close(self->s.cmd_w);
	close(self->s.reply_r);
}

/* ---- the attacker ---------------------------------------------------- */

/*
 * Under a debug kernel a small object costs more than its size: KASAN's
 * redzones and shadow and kmemleak's records (a one-page BO took 12 KiB of
 * RAM under the 6.1 debug kernel, where the budget charges it 8 KiB, page
 * and overhead). kmemleak's file tells such a kernel; only root sees it
 * (debugfs is 0700), so it is asked before the attacker drops root (CI's
 * debug lane failed when the attacker asked).
 */
static bool debug_allocator(void)
{
	return !access("/sys/kernel/debug/kmemleak", F_OK);
}

/**
 * struct attacker - the attacking process's view
 * @v: what the victim told.
 * @path: the victim's node; @fd is the attacker's own file of it.
 * @other_path: another npu device's node ("" if none); @fd_other.
 * @info: the device.
 * @va: where the attacker maps its own memory.
 * @separate_users: the attacker is another user than the victim.
 * @debug_allocator: the kernel's small objects cost more than their size
 *                   (see debug_allocator()).
 * @qcopy: the attacker's copy queue; @qcomp its compute queue (made by
 *         attacker_queues()).
 * @sink: a device BO of the attacker's at @sink_va (1 MiB): where its
 *        jobs would put what they steal.
 * @page: the page size.
 * @sync: the attacker's side of the test's pipes (for attacks that need
 *        the victim to act in between): write a command, read a reply.
 */
struct attacker {
	const struct victim_desc *v;
	const char *path;
	const char *other_path;
	int fd;
	int fd_other;
	struct drm_npu_device_info info;
	__u64 va;
	bool separate_users;
	bool debug_allocator;
	struct drm_npu_queue_create qcopy, qcomp;
	bool have_queues;
	__u32 sink;
	__u64 sink_va;
	__u64 page;
	FIXTURE_DATA(hostile) *self;
	int hold_w;
	int hold_r;
};

/*
 * hold() - tell the test the attacker holds what it exhausted (@code
 * says what), and wait until the test has checked the victim meanwhile.
 */
static void hold(struct __test_metadata *_metadata, struct attacker *a,
		 int code)
{
	int c;

	ASSERT_EQ(0, npu_write_all(a->hold_w, &code, sizeof(code)));
	ASSERT_EQ(0, npu_read_all(a->hold_r, &c, sizeof(c), 4 * PEER_MS));
}

typedef void (*attack_fn)(struct __test_metadata *_metadata,
			  struct attacker *a);

typedef void (*hold_fn)(struct __test_metadata *_metadata,
			FIXTURE_DATA(hostile) *self, int code);

/*
 * run_attacker_held() - fork the attacker, as its own user, with its own
 * file of the victim's node (and of another device's); run @fn; count its
 * attacks of @kind; none may succeed. Each time the attacker holds what
 * it exhausted (hold()), @on_hold checks the victim meanwhile.
 */
static void run_attacker_held(struct __test_metadata *_metadata,
			      FIXTURE_DATA(hostile) *self, attack_fn fn,
			      enum kind kind, hold_fn on_hold)
{
	unsigned long before = tally->succeeded[kind];
	int to_test[2], to_att[2], code, ret;
	struct attacker a;
	pid_t pid;

	ASSERT_EQ(0, pipe2(to_test, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(to_att, O_CLOEXEC));
	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(to_test[0]);
		close(to_att[1]);
		memset(&a, 0, sizeof(a));
		a.v = &self->s.d;
		a.path = self->path;
		a.other_path = self->other_path;
		a.self = self;
		a.page = sysconf(_SC_PAGESIZE);
		a.separate_users = can_switch_users();
		a.debug_allocator = debug_allocator();
		a.fd_other = -1;
		a.hold_w = to_test[1];
		a.hold_r = to_att[0];
		ASSERT_EQ(0, become(ATTACKER_UID));
		a.fd = open(a.path, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, a.fd) TH_LOG("attacker: open %s: %s", a.path,
					  strerror(errno));
		if (a.other_path[0])
			a.fd_other = open(a.other_path, O_RDWR | O_CLOEXEC);
		ASSERT_EQ(0, npu_query_device_info(a.fd, &a.info));
		a.va = self->s.d.va_base + 4 * GIB;
		fn(_metadata, &a);
		_exit(0);
	}
	close(to_test[1]);
	close(to_att[0]);
	/* Until the attacker ends (its end of the pipe closes). */
	for (;;) {
		ret = npu_read_all(to_test[0], &code, sizeof(code), 3600 * 1000LL);
		if (ret == -EPIPE)
			break;
		ASSERT_EQ(0, ret) TH_LOG("the attacker did not end");
		ASSERT_NE(NULL, on_hold);
		on_hold(_metadata, self, code);
		ASSERT_EQ(0, npu_write_all(to_att[1], &code, sizeof(code)));
	}
	close(to_test[0]);
	close(to_att[1]);
	ret = npu_wait_child_ms(pid, PEER_MS);
	ASSERT_EQ(0, ret) TH_LOG("the attacker ended with %d", ret);
	ASSERT_EQ(before, tally->succeeded[kind])
		TH_LOG("%lu %s attacks succeeded",
		       tally->succeeded[kind] - before, kind_names[kind]);
}

static void run_attacker(struct __test_metadata *_metadata,
			 FIXTURE_DATA(hostile) *self, attack_fn fn,
			 enum kind kind)
{
	run_attacker_held(_metadata, self, fn, kind, NULL);
}

/* The attacker's own queues and its sink BO, made once. */
static void attacker_queues(struct __test_metadata *_metadata,
			    struct attacker *a)
{
	if (a->have_queues)
		return;
	ASSERT_EQ(0, npu_queue_create(a->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &a->qcopy));
	ASSERT_EQ(0, npu_queue_create(a->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_NORMAL, &a->qcomp));
	a->sink_va = a->va + 512 * MIB;
	ASSERT_EQ(0, npu_bo_create(a->fd, MIB, DRM_NPU_BO_DEVICE, &a->sink));
	ASSERT_EQ(0, npu_vm_map(a->fd, a->sink, a->sink_va, MIB, 0, 0));
	a->have_queues = true;
}

/* Whether the attacker's sink is still all zero (nothing was stolen). */
static bool sink_clean(struct __test_metadata *_metadata, struct attacker *a)
{
	static unsigned char buf[MIB];

	EXPECT_EQ(0, npu_vm_read(a->fd, a->sink_va, buf, MIB));
	return npu_all_bytes(buf, MIB, 0);
}

/*
 * run_job() - submit @cb on the attacker's queue @q (copy or compute) and
 * wait; the queue's error (0 if the job ran) and where it faulted. A
 * failed queue is reset. A refused submission returns its errno.
 */
static int run_job(struct __test_metadata *_metadata, struct attacker *a,
		   const struct drm_npu_queue_create *q,
		   const struct npu_cmdbuf *cb, __u32 flags, __u64 *fault)
{
	struct drm_npu_queue_status st;
	__u64 point;
	int ret;

	ret = npu_submit_flags(a->fd, q->queue_id, flags, cb->data, cb->size,
			       NULL, 0, &point);
	if (ret)
		return ret;
	EXPECT_EQ(0, nsub_wait(a->fd, q->syncobj_handle, point, JOB_MS));
	EXPECT_EQ(0, npu_queue_status(a->fd, q->queue_id, &st));
	if (fault)
		*fault = st.fault_addr;
	if (st.error)
		EXPECT_EQ(0, npu_queue_reset(a->fd, q->queue_id));
	return st.error;
}

/*
 * The numbers an attacker tries as handles or ids: the victim's own (which
 * it may have learnt), every small number (which it can guess), and the
 * edges.
 */
#define GUESS_SMALL		64
#define GUESS_MAX		(GUESS_SMALL + VB_COUNT + VQ_COUNT + VS_COUNT + 8)

static int guesses(const __u32 *known, int nknown, __u32 *out)
{
	static const __u32 edges[] = { 0, 0x7fffffff, 0x80000000, 0xffffffff };
	int n = 0, i;

	for (i = 0; i < nknown; i++)
		out[n++] = known[i];
	for (i = 1; i <= GUESS_SMALL; i++)
		out[n++] = i;
	for (i = 0; i < (int)(sizeof(edges) / sizeof(edges[0])); i++)
		out[n++] = edges[i];
	return n;
}

/* ---- gem-handles ----------------------------------------------------- */

static void attack_handles_on(struct __test_metadata *_metadata,
			      struct attacker *a, int fd, const char *where)
{
	__u32 known[VB_COUNT + 1], g[GUESS_MAX];
	struct drm_npu_bo_info bi;
	int n, i, ret, dfd;

	(void)_metadata;
	for (i = 0; i < VB_COUNT; i++)
		known[i] = a->v->handle[i];
	known[VB_COUNT] = a->v->work_handle;
	n = guesses(known, VB_COUNT + 1, g);
	for (i = 0; i < n; i++) {
		ret = npu_bo_info(fd, g[i], &bi);
		attack(K_HANDLES, ret == -ENOENT,
		       "%s: BO_INFO of handle %u: %d (size %llu)", where, g[i],
		       ret, (unsigned long long)bi.size);
		ret = npu_vm_map(fd, g[i], a->va, 64 * KIB, 0, 0);
		attack(K_HANDLES, ret == -ENOENT,
		       "%s: VM_BIND of handle %u: %d", where, g[i], ret);
		if (!ret)
			npu_vm_unmap(fd, a->va, 64 * KIB);
		ret = npu_prime_export(fd, g[i], DRM_CLOEXEC | DRM_RDWR, &dfd);
		attack(K_HANDLES, ret == -ENOENT,
		       "%s: PRIME export of handle %u: %d", where, g[i], ret);
		if (!ret)
			close(dfd);
		ret = npu_gem_close(fd, g[i]);
		attack(K_HANDLES, ret == -EINVAL,
		       "%s: GEM_CLOSE of handle %u: %d", where, g[i], ret);
	}
}

/*
 * Handle numbers are per file: a fresh file finds none of the victim's;
 * once the attacker has handles of the same numbers, they are its own.
 */
static void attack_handles(struct __test_metadata *_metadata,
			   struct attacker *a)
{
	__u32 own[GUESS_SMALL + 1], max = a->v->max_handle;
	unsigned char buf[4096];
	struct drm_npu_bo_info bi;
	struct drm_npu_context_info ci;
	__u32 h;
	int ret;

	attack_handles_on(_metadata, a, a->fd, "same device");
	if (a->fd_other >= 0)
		attack_handles_on(_metadata, a, a->fd_other, "other device");

	/* Own BOs whose handles cover the victim's numbers. */
	ASSERT_GT((__u32)GUESS_SMALL, max);
	for (h = 1; h <= max; h++) {
		ASSERT_EQ(0, npu_bo_create(a->fd, (h + 2) * a->page,
					   DRM_NPU_BO_HOST, &own[h]));
	}
	for (h = 1; h <= max; h++) {
		__u32 mine = 0, i;

		for (i = 1; i <= max; i++)
			if (own[i] == h)
				mine = i;
		ASSERT_NE(0U, mine) TH_LOG("handle %u is not the attacker's", h);
		ret = npu_bo_info(a->fd, h, &bi);
		attack(K_HANDLES, !ret && bi.size == (mine + 2) * a->page &&
		       bi.kind == DRM_NPU_BO_HOST,
		       "BO_INFO of colliding handle %u: %d size %llu kind %u",
		       h, ret, (unsigned long long)bi.size, bi.kind);
		/* At the victim's own device address, it is the attacker's. */
		ret = npu_vm_map(a->fd, h, a->v->va[VB_DEV], a->page, 0, 0);
		ASSERT_EQ(0, ret);
		memset(buf, 0xee, sizeof(buf));
		ret = npu_vm_read(a->fd, a->v->va[VB_DEV], buf, a->page);
		attack(K_HANDLES, !ret && npu_all_bytes(buf, a->page, 0),
		       "a colliding handle %u mapped at the victim's address reads %d: not zero",
		       h, ret);
		ASSERT_EQ(0, npu_vm_unmap(a->fd, a->v->va[VB_DEV], a->page));
	}
	for (h = 1; h <= max; h++)
		ASSERT_EQ(0, npu_gem_close(a->fd, own[h]));
	ASSERT_EQ(0, npu_context_info(a->fd, &ci));
	ASSERT_EQ(0ULL, ci.bo_count);
}

/* ---- mmap-offsets ---------------------------------------------------- */

/* An mmap of offset @off through @fd, which must fail. */
static void try_mmap(int fd, __u64 off, size_t len, int prot, int flags,
		     const char *what)
{
	void *p = mmap(NULL, len, prot, flags, fd, (off_t)off);

	if (!attack(K_MMAP, p == MAP_FAILED,
		    "%s: mmap of offset 0x%llx (%zu bytes, prot %d flags 0x%x) succeeded",
		    what, (unsigned long long)off, len, prot, flags))
		munmap(p, len);
}

static void attack_mmap(struct __test_metadata *_metadata, struct attacker *a)
{
	static const int prots[] = { PROT_READ, PROT_READ | PROT_WRITE };
	static const int flags[] = { MAP_SHARED, MAP_PRIVATE };
	__u64 lo = UINT64_MAX, hi = 0, off, own_off;
	struct drm_npu_bo_info bi;
	size_t p, f;
	void *m, *g;
	__u32 own;
	int i;

	for (i = 0; i < VB_COUNT; i++) {
		off = a->v->mmap_offset[i];
		if (!off)
			continue;
		lo = off < lo ? off : lo;
		hi = off + a->v->size[i] > hi ? off + a->v->size[i] : hi;
		for (p = 0; p < 2; p++)
			for (f = 0; f < 2; f++)
				try_mmap(a->fd, off, a->v->size[i], prots[p],
					 flags[f], "the victim's BO");
		/* Inside the BO, and one page of it. */
		try_mmap(a->fd, off + a->page, a->page, PROT_READ,
			 MAP_SHARED, "a page inside the victim's BO");
		if (a->fd_other >= 0)
			try_mmap(a->fd_other, off, a->v->size[i], PROT_READ,
				 MAP_SHARED, "through another device");
	}
	ASSERT_NE(0ULL, hi);
	/* Every page around the victim's offsets, as a guesser would. */
	for (off = lo > 64 * a->page ? lo - 64 * a->page : 0;
	     off < hi + 64 * a->page; off += a->page)
		try_mmap(a->fd, off, a->page, PROT_READ, MAP_SHARED,
			 "a guessed offset");

	/*
	 * The attacker's own BO: a mapping longer than it, or grown, must
	 * not run into the victim's pages that follow it in the offset space.
	 */
	ASSERT_EQ(0, npu_bo_create(a->fd, a->page, DRM_NPU_BO_DEVICE, &own));
	ASSERT_EQ(0, npu_bo_info(a->fd, own, &bi));
	own_off = bi.mmap_offset;
	try_mmap(a->fd, own_off, 2 * a->page, PROT_READ, MAP_SHARED,
		 "longer than the attacker's own BO");
	try_mmap(a->fd, own_off, (size_t)(hi - own_off) + a->page,
		 PROT_READ, MAP_SHARED, "from its own BO over the victim's");
	m = mmap(NULL, a->page, PROT_READ, MAP_SHARED, a->fd, (off_t)own_off);
	ASSERT_NE(MAP_FAILED, m);
	g = mremap(m, a->page, 64 * a->page, MREMAP_MAYMOVE);
	if (attack(K_MMAP, g == MAP_FAILED,
		   "mremap grew a mapping of its own BO to 64 pages"))
		munmap(m, a->page);
	else
		munmap(g, 64 * a->page);
	ASSERT_EQ(0, npu_gem_close(a->fd, own));
}

/* ---- device-addresses and kernel-addresses -------------------------- */

/* Every packet that reads or writes @addr, each run alone. */
static void jobs_at(struct __test_metadata *_metadata, struct attacker *a,
		    __u64 addr, enum kind kind, const char *what,
		    bool writes_only)
{
	/* The packets that read @addr. */
	static const bool reads[11] = {
		[0] = true, [1] = true, [6] = true, [7] = true, [9] = true,
	};
	__u64 cmds[64], fault;
	struct npu_cmdbuf cb;
	struct drm_npu_pkt_op *op;
	__u64 sizes[2] = { 2, 64 }, sstr[2] = { 4096, 1 }, dstr[2] = { 64, 1 };
	int i, ret;

	attacker_queues(_metadata, a);
	for (i = 0; i < 11; i++) {
		const struct drm_npu_queue_create *q = &a->qcopy;
		__u32 flags = 0;
		const char *pkt = "";

		if (writes_only && reads[i])
			continue;
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		switch (i) {
		case 0:
			npu_emit_copy(&cb, addr, a->sink_va, 4096);
			pkt = "COPY from";
			break;
		case 1:
			npu_emit_copy(&cb, addr, a->sink_va, 4096);
			flags = DRM_NPU_SUBMIT_CALLER_WAITS;
			pkt = "COPY (run at submission) from";
			break;
		case 2:
			npu_emit_copy(&cb, a->sink_va, addr, 4096);
			pkt = "COPY to";
			break;
		case 3:
			npu_emit_fill(&cb, addr, 4096, 0xdeadbeef, 4);
			pkt = "FILL";
			break;
		case 4:
			npu_emit_write_value(&cb, addr, 0xdeadbeefULL);
			pkt = "WRITE_VALUE";
			break;
		case 5:
			npu_emit_timestamp(&cb, addr);
			pkt = "TIMESTAMP";
			break;
		case 6:
			/* True at once for anything readable. */
			npu_emit_wait_value(&cb, addr, 0, 0, DRM_NPU_WAIT_EQ);
			pkt = "WAIT_VALUE";
			break;
		case 7:
			npu_emit_copy_strided(&cb, addr, a->sink_va, 2, 1,
					      sizes, sstr, dstr);
			pkt = "COPY_STRIDED from";
			break;
		case 8:
			npu_emit_copy_strided(&cb, a->sink_va, addr, 2, 1,
					      sizes, dstr, sstr);
			pkt = "COPY_STRIDED to";
			break;
		case 9:
		case 10:
			q = &a->qcomp;
			op = npu_cmdbuf_add(&cb, DRM_NPU_PKT_OP, sizeof(*op));
			op->op = DRM_NPU_OP_RELU;
			op->dtype = op->out_dtype = DRM_NPU_DTYPE_I32;
			op->n = 1024;
			op->a = i == 9 ? addr : a->sink_va;
			op->out = i == 9 ? a->sink_va + 64 * KIB : addr;
			pkt = i == 9 ? "OP reading" : "OP writing";
			break;
		}
		fault = 0;
		ret = run_job(_metadata, a, q, &cb, flags, &fault);
		/* A refused submission (-EINVAL: wraps) is fine too. */
		attack(kind, (ret == -EFAULT || ret == -EINVAL) &&
		       sink_clean(_metadata, a),
		       "%s: %s 0x%llx: job %d, fault at 0x%llx", what, pkt,
		       (unsigned long long)addr, ret,
		       (unsigned long long)fault);
	}
}

static void attack_device_va(struct __test_metadata *_metadata,
			     struct attacker *a)
{
	unsigned char buf[4096], want[4096];
	struct drm_npu_queue_create wq;
	__u64 fault, va, cmds[16];
	struct npu_cmdbuf cb;
	__u32 own;
	int i, ret;

	attacker_queues(_metadata, a);
	for (i = 0; i < VB_COUNT; i++) {
		__u64 at[3] = { a->v->va[i], a->v->va[i] + a->v->size[i] / 2,
				a->v->va[i] + a->v->size[i] - 8 };
		int j;

		for (j = 0; j < 3; j++) {
			va = at[j];
			memset(buf, 0x5a, sizeof(buf));
			ret = npu_vm_access(a->fd, va, buf, 8, false, &fault);
			attack(K_DEVICE_VA, ret == -ENXIO && fault == va &&
			       npu_all_bytes(buf, sizeof(buf), 0x5a),
			       "VM_ACCESS read of the victim's 0x%llx: %d",
			       (unsigned long long)va, ret);
			ret = npu_vm_access(a->fd, va, buf, 8, true, &fault);
			attack(K_DEVICE_VA, ret == -ENXIO && fault == va,
			       "VM_ACCESS write of the victim's 0x%llx: %d",
			       (unsigned long long)va, ret);
		}
		ret = npu_vm_unmap(a->fd, a->v->va[i], a->v->size[i]);
		attack(K_DEVICE_VA, ret == -ENOENT,
		       "VM_BIND unmap of the victim's mapping 0x%llx: %d",
		       (unsigned long long)a->v->va[i], ret);
		jobs_at(_metadata, a, a->v->va[i], K_DEVICE_VA,
			"the victim's address", false);
		jobs_at(_metadata, a, a->v->va[i] + a->v->size[i] - 4096,
			K_DEVICE_VA, "the victim's address", false);
	}
	/* The engine writes its completion record into the victim's BO? */
	memset(&wq, 0, sizeof(wq));
	wq.engine_class = DRM_NPU_ENGINE_COPY;
	wq.flags = DRM_NPU_QUEUE_STATUS_WRITEBACK;
	wq.status_addr = a->v->va[VB_DEV];
	ASSERT_EQ(0, npu_ioctl(a->fd, DRM_IOCTL_NPU_QUEUE_CREATE, &wq));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	ret = run_job(_metadata, a, &wq, &cb, 0, NULL);
	attack(K_DEVICE_VA, ret == 0,
	       "a queue whose completion record is at the victim's address: job %d",
	       ret);
	ASSERT_EQ(0, npu_queue_destroy(a->fd, wq.queue_id));

	/* The same numbers in the attacker's space are its own memory. */
	ASSERT_EQ(0, npu_bo_create(a->fd, 64 * KIB, DRM_NPU_BO_DEVICE, &own));
	ASSERT_EQ(0, npu_vm_map(a->fd, own, a->v->va[VB_DEV], 64 * KIB, 0, 0));
	npu_fill_pattern(want, sizeof(want), 7);
	ASSERT_EQ(0, npu_vm_write(a->fd, a->v->va[VB_DEV], want, sizeof(want)));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, a->v->va[VB_DEV], a->sink_va, sizeof(want));
	ASSERT_EQ(0, run_job(_metadata, a, &a->qcopy, &cb, 0, NULL));
	ASSERT_EQ(0, npu_vm_read(a->fd, a->sink_va, buf, sizeof(buf)));
	attack(K_DEVICE_VA, !memcmp(buf, want, sizeof(buf)),
	       "a copy from the victim's address in the attacker's space read not its own bytes");
	ASSERT_EQ(0, npu_vm_unmap(a->fd, a->v->va[VB_DEV], 64 * KIB));
	ASSERT_EQ(0, npu_gem_close(a->fd, own));
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(0, npu_vm_write(a->fd, a->sink_va, buf, sizeof(buf)));
}

static void attack_kernel_addr(struct __test_metadata *_metadata,
			       struct attacker *a)
{
	const __u64 edge[] = { 0, a->info.va_start - a->page,
			       a->info.va_end, a->info.va_end - 8 };
	unsigned char buf[4096], copy[4096];
	struct drm_npu_submit sub;
	__u64 fault, cmds[16], kaddr;
	struct npu_cmdbuf cb;
	unsigned long vdso;
	__u32 own, h;
	size_t i;
	int ret;

	attacker_queues(_metadata, a);
	ASSERT_EQ(0, npu_bo_create(a->fd, 4096, DRM_NPU_BO_DEVICE, &own));
	for (i = 0; i < sizeof(kernel_addrs) / sizeof(kernel_addrs[0]) + 4; i++) {
		kaddr = i < sizeof(kernel_addrs) / sizeof(kernel_addrs[0]) ?
			kernel_addrs[i] :
			edge[i - sizeof(kernel_addrs) / sizeof(kernel_addrs[0])];
		if (kaddr >= a->info.va_start && kaddr + a->page <= a->info.va_end &&
		    kaddr >= a->page) {
			/* Inside the space: no mapping there, a fault. */
		} else {
			ret = npu_vm_map(a->fd, own, kaddr, a->page, 0, 0);
			attack(K_KERNEL_ADDR, ret == -EINVAL,
			       "VM_BIND at 0x%llx: %d",
			       (unsigned long long)kaddr, ret);
			if (!ret)
				npu_vm_unmap(a->fd, kaddr, a->page);
		}
		ret = npu_vm_access(a->fd, kaddr, buf, 8, false, &fault);
		attack(K_KERNEL_ADDR, ret == -ENXIO,
		       "VM_ACCESS read at 0x%llx: %d",
		       (unsigned long long)kaddr, ret);
		ret = npu_vm_access(a->fd, kaddr, buf, 8, true, &fault);
		attack(K_KERNEL_ADDR, ret == -ENXIO,
		       "VM_ACCESS write at 0x%llx: %d",
		       (unsigned long long)kaddr, ret);
		jobs_at(_metadata, a, kaddr, K_KERNEL_ADDR, "a kernel address",
			false);
	}

	/* User pointers into the kernel: the driver must not follow them. */
	ASSERT_EQ(0, npu_vm_map(a->fd, own, a->va, a->page, 0, 0));
	npu_fill_pattern(copy, sizeof(copy), 9);
	ASSERT_EQ(0, npu_vm_write(a->fd, a->va, copy, sizeof(copy)));
	for (i = 0; i < sizeof(kernel_addrs) / sizeof(kernel_addrs[0]); i++) {
		struct drm_npu_vm_access acc = {
			.addr = a->va,
			.size = 64,
			.user_ptr = kernel_addrs[i],
		};
		struct drm_npu_bo_userptr up = {
			.user_ptr = kernel_addrs[i],
			.size = a->page,
		};

		ret = npu_ioctl(a->fd, DRM_IOCTL_NPU_VM_ACCESS, &acc);
		attack(K_KERNEL_ADDR, ret == -EFAULT,
		       "VM_ACCESS read into kernel pointer 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
		acc.flags = DRM_NPU_VM_ACCESS_WRITE;
		ret = npu_ioctl(a->fd, DRM_IOCTL_NPU_VM_ACCESS, &acc);
		ASSERT_EQ(0, npu_vm_read(a->fd, a->va, buf, sizeof(buf)));
		attack(K_KERNEL_ADDR, ret == -EFAULT && !memcmp(buf, copy, 4096),
		       "VM_ACCESS write from kernel pointer 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
		ret = npu_ioctl(a->fd, DRM_IOCTL_NPU_BO_FROM_USERPTR, &up);
		attack(K_KERNEL_ADDR, ret == -EFAULT || ret == -EINVAL,
		       "userptr of kernel address 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
		if (!ret)
			npu_gem_close(a->fd, up.handle);
		up.flags = DRM_NPU_BO_USERPTR_READONLY;
		ret = npu_ioctl(a->fd, DRM_IOCTL_NPU_BO_FROM_USERPTR, &up);
		attack(K_KERNEL_ADDR, ret == -EFAULT || ret == -EINVAL,
		       "read-only userptr of kernel address 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
		if (!ret)
			npu_gem_close(a->fd, up.handle);

		memset(&sub, 0, sizeof(sub));
		sub.queue_id = a->qcopy.queue_id;
		sub.cmds_ptr = kernel_addrs[i];
		sub.cmds_size = 64;
		ret = npu_ioctl(a->fd, DRM_IOCTL_NPU_SUBMIT, &sub);
		attack(K_KERNEL_ADDR, ret == -EFAULT,
		       "SUBMIT of commands at kernel address 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
		npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
		npu_emit_nop(&cb);
		sub.cmds_ptr = (__u64)(uintptr_t)cmds;
		sub.cmds_size = cb.size;
		sub.in_fence_count = 1;
		sub.in_fences_ptr = kernel_addrs[i];
		ret = npu_ioctl(a->fd, DRM_IOCTL_NPU_SUBMIT, &sub);
		attack(K_KERNEL_ADDR, ret == -EFAULT,
		       "SUBMIT of in-fences at kernel address 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
		ret = npu_query(a->fd, DRM_NPU_QUERY_DEVICE_INFO,
				(void *)(uintptr_t)kernel_addrs[i],
				&(__u32){ sizeof(struct drm_npu_device_info) });
		attack(K_KERNEL_ADDR, ret == -EFAULT,
		       "QUERY into kernel address 0x%llx: %d",
		       (unsigned long long)kernel_addrs[i], ret);
	}
	ASSERT_EQ(0, npu_vm_unmap(a->fd, a->va, a->page));
	ASSERT_EQ(0, npu_gem_close(a->fd, own));

	/* A range running from user space into the kernel's. */
	ret = npu_bo_userptr(a->fd, (void *)(uintptr_t)(0x800000000000ULL - a->page),
			     2 * a->page, 0, &h);
	attack(K_KERNEL_ADDR, ret == -EFAULT || ret == -EINVAL,
	       "userptr across the top of user space: %d", ret);

	/*
	 * The vDSO is user-readable kernel text: a read-only pin is allowed,
	 * but the device must never write it.
	 */
	vdso = getauxval(AT_SYSINFO_EHDR);
	if (vdso) {
		memcpy(copy, (void *)vdso, a->page);
		ret = npu_bo_userptr(a->fd, (void *)vdso, a->page, 0, &h);
		attack(K_KERNEL_ADDR, ret == -EFAULT,
		       "writable userptr of the vDSO: %d", ret);
		if (!ret)
			npu_gem_close(a->fd, h);
		ret = npu_bo_userptr(a->fd, (void *)vdso, a->page,
				     DRM_NPU_BO_USERPTR_READONLY, &h);
		if (!ret) {
			ret = npu_vm_map(a->fd, h, a->va, a->page, 0, 0);
			attack(K_KERNEL_ADDR, ret == -EACCES,
			       "writable mapping of a read-only pin of the vDSO: %d",
			       ret);
			if (!ret)
				npu_vm_unmap(a->fd, a->va, a->page);
			ASSERT_EQ(0, npu_vm_map(a->fd, h, a->va, a->page, 0,
						DRM_NPU_VM_READONLY));
			jobs_at(_metadata, a, a->va, K_KERNEL_ADDR,
				"the vDSO, mapped read-only:", true);
			ret = npu_vm_access(a->fd, a->va, buf, 8, true, &fault);
			attack(K_KERNEL_ADDR, ret == -EACCES,
			       "VM_ACCESS write to the vDSO: %d", ret);
			ASSERT_EQ(0, npu_vm_unmap(a->fd, a->va, a->page));
			ASSERT_EQ(0, npu_gem_close(a->fd, h));
		}
		attack(K_KERNEL_ADDR, !memcmp(copy, (void *)vdso, a->page),
		       "the vDSO changed");
	}
}

/* ---- read-only-memory ------------------------------------------------ */

/*
 * A file the attacker may read but not write (made by the test, another
 * user's): the device must not write it either, through any pin, mapping
 * or packet.
 */
static void attack_readonly(struct __test_metadata *_metadata,
			    struct attacker *a)
{
	const size_t len = 64 * KIB;
	unsigned char *m, *mp, *buf;
	__u64 cmds[16], fault;
	struct npu_cmdbuf cb;
	__u64 sum;
	__u32 h;
	int fd, ret;

	attacker_queues(_metadata, a);
	buf = malloc(len);
	ASSERT_NE(NULL, buf);
	fd = open(a->self->ro_path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)len, pread(fd, buf, len, 0));
	sum = fnv(buf, len);
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, m);

	ret = npu_bo_userptr(a->fd, m, len, 0, &h);
	attack(K_READONLY, ret == -EFAULT,
	       "writable userptr of a read-only shared file mapping: %d", ret);
	if (!ret)
		npu_gem_close(a->fd, h);
	ASSERT_EQ(0, npu_bo_userptr(a->fd, m, len, DRM_NPU_BO_USERPTR_READONLY,
				    &h));
	ret = npu_vm_map(a->fd, h, a->va, len, 0, 0);
	attack(K_READONLY, ret == -EACCES,
	       "writable device mapping of a read-only pin: %d", ret);
	if (!ret)
		npu_vm_unmap(a->fd, a->va, len);
	ASSERT_EQ(0, npu_vm_map(a->fd, h, a->va, len, 0, DRM_NPU_VM_READONLY));
	jobs_at(_metadata, a, a->va, K_READONLY, "a read-only file", true);
	ret = npu_vm_access(a->fd, a->va, buf, 64, true, &fault);
	attack(K_READONLY, ret == -EACCES,
	       "VM_ACCESS write to a read-only file: %d", ret);
	ret = mprotect(m, len, PROT_READ | PROT_WRITE);
	attack(K_READONLY, ret == -1 && errno == EACCES,
	       "mprotect made the read-only file writable");
	ASSERT_EQ(0, npu_vm_unmap(a->fd, a->va, len));
	ASSERT_EQ(0, npu_gem_close(a->fd, h));
	ASSERT_EQ(0, munmap(m, len));

	/* A private mapping may be written: into a copy, not the file. */
	mp = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	ASSERT_NE(MAP_FAILED, mp);
	ASSERT_EQ(0, mprotect(mp, len, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, npu_bo_userptr(a->fd, mp, len, 0, &h));
	ASSERT_EQ(0, npu_vm_map(a->fd, h, a->va, len, 0, 0));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_fill(&cb, a->va, len, 0xab, 1);
	ASSERT_EQ(0, run_job(_metadata, a, &a->qcopy, &cb, 0, NULL));
	ASSERT_TRUE(npu_all_bytes(mp, len, 0xab));
	ASSERT_EQ(0, npu_vm_unmap(a->fd, a->va, len));
	ASSERT_EQ(0, npu_gem_close(a->fd, h));
	ASSERT_EQ(0, munmap(mp, len));

	/* No access at all, and read-only anonymous memory. */
	m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	ret = npu_bo_userptr(a->fd, m, len, DRM_NPU_BO_USERPTR_READONLY, &h);
	attack(K_READONLY, ret == -EFAULT, "userptr of PROT_NONE memory: %d",
	       ret);
	ASSERT_EQ(0, mprotect(m, len, PROT_READ));
	ret = npu_bo_userptr(a->fd, m, len, 0, &h);
	attack(K_READONLY, ret == -EFAULT,
	       "writable userptr of read-only memory: %d", ret);
	ASSERT_EQ(0, munmap(m, len));

	ASSERT_EQ((ssize_t)len, pread(fd, buf, len, 0));
	attack(K_READONLY, fnv(buf, len) == sum, "the read-only file changed");
	close(fd);
	free(buf);
}

/* ---- dma-buf-import and process-boundary ----------------------------- */

static void attack_dmabuf(struct __test_metadata *_metadata,
			  struct attacker *a)
{
	struct drm_npu_context_info ci;
	int fd, hi = 0, i;
	__u32 h = 0;

	/* The attacker was given no dma-buf: none of its numbers is one. */
	for (i = 0; i < VB_COUNT; i++)
		hi = a->v->dmabuf_fd[i] > hi ? a->v->dmabuf_fd[i] : hi;
	for (fd = -1; fd <= hi + 64; fd++) {
		int ret = npu_prime_import(a->fd, fd, &h);

		attack(K_DMABUF, ret != 0,
		       "PRIME import of descriptor %d gave handle %u", fd, h);
		if (a->fd_other >= 0) {
			ret = npu_prime_import(a->fd_other, fd, &h);
			attack(K_DMABUF, ret != 0,
			       "PRIME import of descriptor %d on another device",
			       fd);
		}
	}
	ASSERT_EQ(0, npu_context_info(a->fd, &ci));
	ASSERT_EQ(0ULL, ci.bo_count);
}

/*
 * What the OS offers against another user's process: its descriptors,
 * memory and debug files. The runtime's IPC relies on these checks
 * (pidfd_getfd needs ptrace rights over the exporter).
 */
static void attack_process(struct __test_metadata *_metadata,
			   struct attacker *a)
{
	char path[PATH_MAX + 64];
	unsigned char buf[64];
	const char *dbg = a->self->dbg_dir;
	static const char *const dbg_files[] = {
		"npu_clients", "npu_memory", "npu_engines", "inject_fault",
		"inject_hang", "inject_latency_us",
	};
	struct iovec local, remote;
	int fds[VB_COUNT + 1], n = 0, pidfd, i, fd;
	pid_t vp = a->v->pid;

	(void)_metadata;
	if (!a->separate_users) {
		printf("# process-boundary: not root, so the attacker is the victim's user: skipped\n");
		return;
	}
	for (i = 0; i < VB_COUNT; i++)
		if (a->v->dmabuf_fd[i] >= 0)
			fds[n++] = a->v->dmabuf_fd[i];
	fds[n++] = a->v->node_fd;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", vp, fds[i]);
		fd = open(path, O_RDWR | O_CLOEXEC);
		attack(K_PROCESS, fd < 0, "open %s read-write", path);
		if (fd >= 0)
			close(fd);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		attack(K_PROCESS, fd < 0, "open %s", path);
		if (fd >= 0)
			close(fd);
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", vp, fds[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		attack(K_PROCESS, fd < 0, "open %s", path);
		if (fd >= 0)
			close(fd);
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", vp);
	{
		DIR *d = opendir(path);

		attack(K_PROCESS, !d, "list %s", path);
		if (d)
			closedir(d);
	}
	pidfd = syscall(SYS_pidfd_open, vp, 0);
	if (pidfd >= 0) {
		for (i = 0; i < n; i++) {
			fd = syscall(SYS_pidfd_getfd, pidfd, fds[i], 0);
			attack(K_PROCESS, fd < 0,
			       "pidfd_getfd of the victim's descriptor %d",
			       fds[i]);
			if (fd >= 0)
				close(fd);
		}
		close(pidfd);
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", vp);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	attack(K_PROCESS, fd < 0, "open %s", path);
	if (fd >= 0)
		close(fd);
	for (i = 0; i < VB_COUNT; i++) {
		if (!a->v->cpu_addr[i])
			continue;
		local.iov_base = buf;
		local.iov_len = sizeof(buf);
		remote.iov_base = (void *)(uintptr_t)a->v->cpu_addr[i];
		remote.iov_len = sizeof(buf);
		attack(K_PROCESS,
		       process_vm_readv(vp, &local, 1, &remote, 1, 0) < 0,
		       "process_vm_readv of the victim's BO %d", i);
		snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx",
			 vp, (unsigned long long)a->v->cpu_addr[i],
			 (unsigned long long)(a->v->cpu_addr[i] +
					      a->v->size[i]));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		attack(K_PROCESS, fd < 0, "open %s", path);
		if (fd >= 0)
			close(fd);
	}
	attack(K_PROCESS, ptrace(PTRACE_SEIZE, vp, 0, 0) < 0,
	       "ptrace of the victim");
	/* Debug files name every context and inject faults into all. */
	for (i = 0; dbg[0] && i < (int)(sizeof(dbg_files) / sizeof(dbg_files[0])); i++) {
		snprintf(path, sizeof(path), "%s/%s", dbg, dbg_files[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		attack(K_PROCESS, fd < 0, "open %s", path);
		if (fd >= 0)
			close(fd);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		attack(K_PROCESS, fd < 0, "open %s for writing", path);
		if (fd >= 0)
			close(fd);
	}
	fd = open(NPU_JOB_TIMEOUT_PARAM, O_WRONLY | O_CLOEXEC);
	attack(K_PROCESS, fd < 0, "open %s for writing", NPU_JOB_TIMEOUT_PARAM);
	if (fd >= 0)
		close(fd);
}

/* ---- flink-names ----------------------------------------------------- */

static void attack_flink(struct __test_metadata *_metadata,
			 struct attacker *a)
{
	struct drm_gem_flink fl;
	struct drm_gem_open op;
	__u32 own, name;
	int i, fd, ret;

	for (i = 0; i < VB_COUNT; i++) {
		fl = (struct drm_gem_flink){ .handle = a->v->handle[i] };
		ret = npu_ioctl(a->fd, DRM_IOCTL_GEM_FLINK, &fl);
		attack(K_FLINK, ret != 0, "GEM_FLINK of the victim's handle %u",
		       a->v->handle[i]);
	}
	/* Not even its own BOs get a global name on these nodes. */
	ASSERT_EQ(0, npu_bo_create(a->fd, a->page, DRM_NPU_BO_DEVICE, &own));
	fl = (struct drm_gem_flink){ .handle = own };
	ret = npu_ioctl(a->fd, DRM_IOCTL_GEM_FLINK, &fl);
	attack(K_FLINK, ret == -EACCES, "GEM_FLINK of its own BO: %d (name %u)",
	       ret, fl.name);
	ASSERT_EQ(0, npu_gem_close(a->fd, own));
	for (name = 0; name <= 256; name++) {
		op = (struct drm_gem_open){ .name = name };
		ret = npu_ioctl(a->fd, DRM_IOCTL_GEM_OPEN, &op);
		attack(K_FLINK, ret != 0, "GEM_OPEN of name %u: handle %u",
		       name, op.handle);
	}
	/* The primary node of a render-only device (6.1) is root's. */
	if (a->self->card_path[0] && a->separate_users) {
		fd = open(a->self->card_path, O_RDWR | O_CLOEXEC);
		attack(K_FLINK, fd < 0, "open %s", a->self->card_path);
		if (fd >= 0)
			close(fd);
	}
}

/* Through the primary node, as root: the victim's BOs have no names. */
static void flink_names_from_primary(struct __test_metadata *_metadata,
				     FIXTURE_DATA(hostile) *self)
{
	struct drm_gem_open op;
	__u32 name;
	int fd, ret;

	if (!self->card_path[0])
		return;
	fd = open(self->card_path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	for (name = 1; name <= 256; name++) {
		op = (struct drm_gem_open){ .name = name };
		ret = npu_ioctl(fd, DRM_IOCTL_GEM_OPEN, &op);
		attack(K_FLINK, ret == -ENOENT,
		       "GEM_OPEN of name %u on the primary node: %d", name,
		       ret);
	}
	close(fd);
	(void)_metadata;
}

/* ---- syncobjs -------------------------------------------------------- */

static int sync_try(int fd, int op, __u32 h, __u32 own)
{
	struct drm_syncobj_wait w = { .handles = (__u64)(uintptr_t)&h,
				      .count_handles = 1 };
	struct drm_syncobj_array sa = { .handles = (__u64)(uintptr_t)&h,
					.count_handles = 1 };
	__u64 point = 100;
	struct drm_syncobj_timeline_array ta = {
		.handles = (__u64)(uintptr_t)&h,
		.points = (__u64)(uintptr_t)&point,
		.count_handles = 1,
	};
	struct drm_syncobj_handle sh = { .handle = h, .fd = -1 };
	int sfd, ret;

	switch (op) {
	case 0:
		return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_WAIT, &w);
	case 1:
		return npu_syncobj_wait_point(fd, h, 1, 0);
	case 2:
		return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_SIGNAL, &sa);
	case 3:
		return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &ta);
	case 4:
		return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_RESET, &sa);
	case 5:
		return npu_syncobj_query(fd, h, 0, &point);
	case 6:
		ret = npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &sh);
		if (!ret)
			close(sh.fd);
		return ret;
	case 7:
		ret = npu_syncobj_export_sync_file(fd, h, &sfd);
		if (!ret)
			close(sfd);
		return ret;
	case 8:
		return npu_syncobj_transfer(fd, own, 1, h, 0, 0);
	case 9:
		return npu_syncobj_transfer(fd, h, 7, own, 0, 0);
	}
	return npu_syncobj_destroy(fd, h);
}

#define SYNC_OPS		11

static void attack_syncobjs(struct __test_metadata *_metadata,
			    struct attacker *a)
{
	__u32 known[VQ_COUNT + VS_COUNT], g[GUESS_MAX], own;
	__u64 cmds[16];
	struct drm_npu_fence fence;
	struct npu_cmdbuf cb;
	int n, i, op, ret;

	for (i = 0; i < VQ_COUNT; i++)
		known[i] = a->v->queue_syncobj[i];
	for (i = 0; i < VS_COUNT; i++)
		known[VQ_COUNT + i] = a->v->syncobj[i];
	n = guesses(known, VQ_COUNT + VS_COUNT, g);
	/* A fresh file: no syncobj of the attacker's exists yet. */
	for (i = 0; i < n; i++) {
		for (op = 0; op < SYNC_OPS; op++) {
			if (op == 8 || op == 9)
				continue;
			ret = sync_try(a->fd, op, g[i], 0);
			/* DRM says -EINVAL for some unknown handles. */
			attack(K_SYNCOBJ, ret == -ENOENT || ret == -EINVAL,
			       "syncobj op %d on the victim's number %u: %d", op,
			       g[i], ret);
		}
	}
	/* Now with syncobjs and a queue of its own. */
	attacker_queues(_metadata, a);
	ASSERT_EQ(0, npu_syncobj_create(a->fd, DRM_SYNCOBJ_CREATE_SIGNALED,
					&own));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	for (i = 0; i < n; i++) {
		bool mine = g[i] == own || g[i] == a->qcopy.syncobj_handle ||
			    g[i] == a->qcomp.syncobj_handle;

		if (mine)
			continue;
		for (op = 8; op <= 9; op++) {
			ret = sync_try(a->fd, op, g[i], own);
			attack(K_SYNCOBJ, ret == -ENOENT,
			       "syncobj transfer %d with the victim's number %u: %d",
			       op, g[i], ret);
		}
		fence = (struct drm_npu_fence){ .handle = g[i] };
		ret = npu_submit_cmdbuf(a->fd, a->qcopy.queue_id, &cb, &fence,
					1, NULL);
		attack(K_SYNCOBJ, ret == -ENOENT,
		       "an in-fence of the victim's syncobj %u: %d", g[i], ret);
		fence.point = 1;
		ret = npu_submit_cmdbuf(a->fd, a->qcopy.queue_id, &cb, &fence,
					1, NULL);
		attack(K_SYNCOBJ, ret == -ENOENT,
		       "an in-fence of the victim's timeline %u: %d", g[i], ret);
	}
	/*
	 * Its own syncobjs under the victim's numbers: signalling, resetting
	 * and destroying them touches only its own.
	 */
	for (i = 0; i < VS_COUNT + VQ_COUNT; i++) {
		__u32 h;

		ASSERT_EQ(0, npu_syncobj_create(a->fd, 0, &h));
	}
	for (i = 0; i < n; i++) {
		for (op = 2; op <= 4; op++)
			sync_try(a->fd, op, g[i], 0);
		sync_try(a->fd, SYNC_OPS - 1, g[i], 0);
	}
	ASSERT_EQ(0, npu_queue_destroy(a->fd, a->qcopy.queue_id));
	ASSERT_EQ(0, npu_queue_destroy(a->fd, a->qcomp.queue_id));
	a->have_queues = false;
}

/* ---- queue-ids ------------------------------------------------------- */

static void attack_queues(struct __test_metadata *_metadata,
			  struct attacker *a)
{
	struct drm_npu_queue_create own[VQ_COUNT];
	struct drm_npu_queue_status st;
	__u32 g[GUESS_MAX + 300];
	__u64 cmds[16];
	struct npu_cmdbuf cb;
	int n, i, ret;

	n = guesses(a->v->queue_id, VQ_COUNT, g);
	/* Every id up to past the per-file limit of 256. */
	for (i = GUESS_SMALL + 1; i <= 300; i++)
		g[n++] = i;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	for (i = 0; i < n; i++) {
		ret = npu_queue_status(a->fd, g[i], &st);
		attack(K_QUEUE, ret == -ENOENT,
		       "QUEUE_STATUS of queue %u: %d (submitted %llu)", g[i],
		       ret, (unsigned long long)st.submitted);
		ret = npu_queue_reset(a->fd, g[i]);
		attack(K_QUEUE, ret == -ENOENT, "QUEUE_RESET of queue %u: %d",
		       g[i], ret);
		ret = npu_submit_cmdbuf(a->fd, g[i], &cb, NULL, 0, NULL);
		attack(K_QUEUE, ret == -ENOENT, "SUBMIT to queue %u: %d", g[i],
		       ret);
		ret = npu_queue_destroy(a->fd, g[i]);
		attack(K_QUEUE, ret == -ENOENT,
		       "QUEUE_DESTROY of queue %u: %d", g[i], ret);
	}
	/*
	 * High priority would starve every other context on the engine: a
	 * privilege (CAP_SYS_NICE) the attacker, another user, has not.
	 */
	if (a->separate_users) {
		ret = npu_queue_create(a->fd, DRM_NPU_ENGINE_COPY,
				       DRM_NPU_PRIORITY_HIGH, &own[0]);
		if (!attack(K_QUEUE, ret == -EACCES,
			    "QUEUE_CREATE of a high-priority queue: %d", ret))
			npu_queue_destroy(a->fd, own[0].queue_id);
	}
	/* Its own queues under the victim's ids are its own. */
	for (i = 0; i < VQ_COUNT; i++)
		ASSERT_EQ(0, npu_queue_create(a->fd, DRM_NPU_ENGINE_COPY,
					      DRM_NPU_PRIORITY_NORMAL, &own[i]));
	for (i = 0; i < VQ_COUNT; i++) {
		int j, mine = 0;

		for (j = 0; j < VQ_COUNT; j++)
			mine |= own[j].queue_id == a->v->queue_id[i];
		if (!mine)
			continue;
		ret = npu_queue_status(a->fd, a->v->queue_id[i], &st);
		attack(K_QUEUE, !ret && st.submitted == 0 &&
		       st.state == DRM_NPU_QUEUE_OK,
		       "QUEUE_STATUS of its queue %u shows another's: %d, state %u, submitted %llu",
		       a->v->queue_id[i], ret, st.state,
		       (unsigned long long)st.submitted);
		ret = npu_queue_reset(a->fd, a->v->queue_id[i]);
		ASSERT_EQ(0, ret);
	}
	for (i = 0; i < VQ_COUNT; i++)
		ASSERT_EQ(0, npu_queue_destroy(a->fd, own[i].queue_id));
}

/* ---- freed-memory ---------------------------------------------------- */

/*
 * The victim filled memory with its secret and freed it; whatever the
 * attacker allocates now must hold zeros.
 */
static void attack_freed(struct __test_metadata *_metadata,
			 struct attacker *a)
{
	const __u64 chunk = 4 * MIB, total = 48 * MIB;
	static unsigned char buf[4 * MIB];
	__u32 h[2][12];
	__u64 i;
	int k;

	for (k = 0; k < 2; k++) {
		__u32 kind = k ? DRM_NPU_BO_HOST : DRM_NPU_BO_DEVICE;

		for (i = 0; i < total / chunk; i++) {
			void *p;

			ASSERT_EQ(0, npu_bo_create(a->fd, chunk, kind,
						   &h[k][i]));
			p = npu_bo_mmap(a->fd, h[k][i], chunk);
			ASSERT_NE(MAP_FAILED, p);
			attack(K_FREED, npu_all_bytes(p, chunk, 0),
			       "a new %s BO holds %s", k ? "HOST" : "DEVICE",
			       has_secret(p, chunk) ? "the victim's secret" :
			       "non-zero bytes");
			/* Through the device too. */
			ASSERT_EQ(0, npu_vm_map(a->fd, h[k][i], a->va, chunk,
						0, 0));
			ASSERT_EQ(0, npu_vm_read(a->fd, a->va, buf, chunk));
			attack(K_FREED, npu_all_bytes(buf, chunk, 0),
			       "a new BO reads non-zero through the device");
			ASSERT_EQ(0, npu_vm_unmap(a->fd, a->va, chunk));
			ASSERT_EQ(0, munmap(p, chunk));
		}
	}
	for (k = 0; k < 2; k++)
		for (i = 0; i < total / chunk; i++)
			ASSERT_EQ(0, npu_gem_close(a->fd, h[k][i]));
}

/* ---- engine-scratch --------------------------------------------------- */

/*
 * One op on queue @q whose exact result the attacker knows: inputs are
 * its own (zeros, or the pattern for TRANSPOSE); the output, poisoned
 * first, must be exactly @want (or, after a fault, the chunks before it
 * and the poison after). Anything else came from somewhere else: the
 * engine's scratch, which the victim's ops filled just before.
 */
static void scratch_op(struct __test_metadata *_metadata, struct attacker *a,
		       const struct drm_npu_queue_create *q,
		       const struct drm_npu_pkt_op *tmpl, const void *want,
		       size_t out_len, const char *what)
{
	static unsigned char got[64 * KIB];
	struct drm_npu_pkt_op *op;
	struct npu_cmdbuf cb;
	__u64 cmds[32];
	int ret;

	memset(got, 0x11, out_len);
	ASSERT_EQ(0, npu_vm_write(a->fd, tmpl->out, got, out_len));
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	op = npu_cmdbuf_add(&cb, DRM_NPU_PKT_OP, sizeof(*op));
	memcpy((char *)op + sizeof(op->hdr), (const char *)tmpl + sizeof(op->hdr),
	       sizeof(*op) - sizeof(op->hdr));
	ret = run_job(_metadata, a, q, &cb, 0, NULL);
	ASSERT_EQ(0, npu_vm_read(a->fd, tmpl->out, got, out_len));
	attack(K_SCRATCH, (ret == 0 || ret == -EFAULT) &&
	       !memcmp(got, want, out_len) && !has_secret(got, out_len),
	       "%s on engine %u: job %d, output not what its inputs give%s",
	       what, q->engine_id, ret,
	       has_secret(got, out_len) ? " (the victim's secret)" : "");
}

static void attack_scratch(struct __test_metadata *_metadata,
			   struct attacker *a)
{
	static unsigned char want[64 * KIB], in[64 * KIB];
	struct drm_npu_queue_create q[4];
	struct drm_npu_pkt_op op;
	__u64 ain = a->va, out = a->va + MIB, hole = a->va + 4 * MIB;
	__u32 bo_in, bo_out, bo_hole;
	unsigned int engines = 0;
	int i, j;

	/* Queues on every compute engine (each picks the least loaded). */
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, npu_queue_create(a->fd, DRM_NPU_ENGINE_COMPUTE,
					      DRM_NPU_PRIORITY_NORMAL, &q[i]));
	ASSERT_EQ(0, npu_bo_create(a->fd, MIB, DRM_NPU_BO_DEVICE, &bo_in));
	ASSERT_EQ(0, npu_vm_map(a->fd, bo_in, ain, MIB, 0, 0));
	ASSERT_EQ(0, npu_bo_create(a->fd, MIB, DRM_NPU_BO_DEVICE, &bo_out));
	ASSERT_EQ(0, npu_vm_map(a->fd, bo_out, out, MIB, 0, 0));
	/* 16 KiB of input, then nothing: a read past it faults. */
	ASSERT_EQ(0, npu_bo_create(a->fd, 16 * KIB, DRM_NPU_BO_DEVICE,
				   &bo_hole));
	ASSERT_EQ(0, npu_vm_map(a->fd, bo_hole, hole, 16 * KIB, 0, 0));

	for (i = 0; i < 4; i++) {
		if (engines & (1u << q[i].engine_id))
			continue;
		engines |= 1u << q[i].engine_id;

		/* Odd sizes: partial chunks and tiles. */
		memset(&op, 0, sizeof(op));
		op.op = DRM_NPU_OP_ADD;
		op.dtype = op.out_dtype = DRM_NPU_DTYPE_I32;
		op.a = ain;
		op.b = ain + 64 * KIB;
		op.out = out;
		op.n = 5;
		memset(want, 0x11, 64);
		memset(want, 0, 20);
		scratch_op(_metadata, a, &q[i], &op, want, 64, "ADD of 5");

		memset(&op, 0, sizeof(op));
		op.op = DRM_NPU_OP_GEMM;
		op.dtype = op.out_dtype = DRM_NPU_DTYPE_F32;
		op.a = ain;
		op.b = ain + 64 * KIB;
		op.out = out;
		op.m = 3;
		op.n = 5;
		op.k = 7;
		op.alpha_bits = 0x3f800000;
		memset(want, 0, 60);
		memset(want + 60, 0x11, 4);
		scratch_op(_metadata, a, &q[i], &op, want, 64, "GEMM 3x5x7");
		op.flags = DRM_NPU_OP_TRANS_A | DRM_NPU_OP_TRANS_B;
		scratch_op(_metadata, a, &q[i], &op, want, 64,
			   "transposed GEMM 3x5x7");

		for (j = 0; j < 2; j++) {
			memset(&op, 0, sizeof(op));
			op.op = DRM_NPU_OP_REDUCE_SUM;
			op.dtype = op.out_dtype = DRM_NPU_DTYPE_I32;
			op.a = ain;
			op.out = out;
			op.m = 3;
			op.n = 5;
			op.axis = j;
			memset(want, 0x11, 64);
			memset(want, 0, j ? 12 : 20);
			scratch_op(_metadata, a, &q[i], &op, want, 64,
				   "REDUCE_SUM 3x5");
		}

		memset(&op, 0, sizeof(op));
		op.op = DRM_NPU_OP_CAST;
		op.dtype = DRM_NPU_DTYPE_F32;
		op.out_dtype = DRM_NPU_DTYPE_F16;
		op.a = ain;
		op.out = out;
		op.n = 7;
		memset(want, 0x11, 64);
		memset(want, 0, 14);
		scratch_op(_metadata, a, &q[i], &op, want, 64, "CAST of 7");

		/* TRANSPOSE of 3x5 of its own pattern. */
		npu_fill_pattern(in, 60, 3);
		ASSERT_EQ(0, npu_vm_write(a->fd, ain + 128 * KIB, in, 60));
		memset(&op, 0, sizeof(op));
		op.op = DRM_NPU_OP_TRANSPOSE;
		op.dtype = op.out_dtype = DRM_NPU_DTYPE_I32;
		op.a = ain + 128 * KIB;
		op.out = out;
		op.m = 3;
		op.n = 5;
		memset(want, 0x11, 64);
		for (j = 0; j < 15; j++)
			memcpy(want + ((j % 5) * 3 + j / 5) * 4, in + j * 4, 4);
		scratch_op(_metadata, a, &q[i], &op, want, 64,
			   "TRANSPOSE 3x5");

		/*
		 * A RELU of 8192 elements whose second chunk faults: the
		 * first chunk's zeros, then the poison.
		 */
		memset(&op, 0, sizeof(op));
		op.op = DRM_NPU_OP_RELU;
		op.dtype = op.out_dtype = DRM_NPU_DTYPE_I32;
		op.a = hole;
		op.out = out;
		op.n = 8192;
		memset(want, 0, 16 * KIB);
		memset(want + 16 * KIB, 0x11, 16 * KIB);
		scratch_op(_metadata, a, &q[i], &op, want, 32 * KIB,
			   "RELU faulting in its second chunk");
	}
	ASSERT_EQ(0, npu_vm_unmap(a->fd, ain, MIB));
	ASSERT_EQ(0, npu_vm_unmap(a->fd, out, MIB));
	ASSERT_EQ(0, npu_vm_unmap(a->fd, hole, 16 * KIB));
	ASSERT_EQ(0, npu_gem_close(a->fd, bo_in));
	ASSERT_EQ(0, npu_gem_close(a->fd, bo_out));
	ASSERT_EQ(0, npu_gem_close(a->fd, bo_hole));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, npu_queue_destroy(a->fd, q[i].queue_id));
}

/* ---- exhaustion ------------------------------------------------------- */

/* What the attacker holds when it calls hold(): the test checks for it. */
enum held {
	HELD_DEVICE_CAPACITY = 1,	/* device memory, to its capacity */
	HELD_PINNED_BUDGET,		/* the driver's pinned RAM budget */
	HELD_QUEUES,
	HELD_MEMLOCK,
	HELD_JOBS,
	HELD_CMD_BYTES,
	HELD_MAPPINGS,
	HELD_NOTHING,			/* could not exhaust safely here */
};

/*
 * alloc_until_full() - allocate BOs of @kind, halving the size from @chunk
 * down to a page at each refusal, until even a page is refused or @cap
 * bytes are held. Return: bytes held; *@err the last refusal (0 if @cap).
 */
static __u64 alloc_until_full(struct __test_metadata *_metadata,
			      struct attacker *a, __u32 kind, __u64 chunk,
			      __u64 cap, __u32 *h, int max, int *n, int *err)
{
	__u64 held = 0;
	int ret;

	*err = 0;
	while (chunk >= a->page && held < cap) {
		if (chunk > cap - held) {
			chunk /= 2;
			continue;
		}
		ASSERT_GT(max, *n) TH_LOG("more BOs than expected");
		ret = npu_bo_create(a->fd, chunk, kind, &h[*n]);
		if (!ret) {
			held += chunk;
			(*n)++;
			continue;
		}
		*err = ret;
		chunk /= 2;
	}
	return held;
}

#define EXHAUST_BOS		4096

/*
 * Device memory: the attacker takes it all; a BO past capacity (or past
 * the driver's pinned budget, which the emulated device memory counts
 * in) is -ENOMEM; the victim's BOs keep working and its own new ones fail
 * the same way; freeing gives it back.
 */
static void attack_exhaust_memory(struct __test_metadata *_metadata,
				  struct attacker *a)
{
	struct drm_npu_memory_info mi, base;
	__u64 free_mem, held, budget = npu_pinned_budget();
	__u32 *h, extra;
	int n = 0, err, i, ret;

	h = calloc(EXHAUST_BOS, sizeof(*h));
	ASSERT_NE(NULL, h);
	ASSERT_EQ(0, npu_query_memory(a->fd, &base));
	free_mem = base.capacity - base.used;
	if (free_mem > npu_safe_to_pin() && (!budget || budget > npu_safe_to_pin())) {
		printf("# exhaust-device-memory: %llu MiB free on the device, %llu MiB safe to pin here: not filled\n",
		       (unsigned long long)(free_mem / MIB),
		       (unsigned long long)(npu_safe_to_pin() / MIB));
		ret = npu_bo_create(a->fd, free_mem + a->page,
				    DRM_NPU_BO_DEVICE, &extra);
		attack(K_EXHAUST_MEMORY, ret == -ENOMEM,
		       "a DEVICE BO past the free device memory: %d", ret);
		hold(_metadata, a, HELD_NOTHING);
		free(h);
		return;
	}
	held = alloc_until_full(_metadata, a, DRM_NPU_BO_DEVICE, 64 * MIB,
				free_mem + MIB, h, EXHAUST_BOS, &n, &err);
	ASSERT_EQ(0, npu_query_memory(a->fd, &mi));
	printf("# exhaust-device-memory: %llu MiB held in %d BOs, device %llu/%llu MiB used, refused with %d\n",
	       (unsigned long long)(held / MIB), n,
	       (unsigned long long)(mi.used / MIB),
	       (unsigned long long)(mi.capacity / MIB), err);
	attack(K_EXHAUST_MEMORY, err == -ENOMEM && mi.used <= mi.capacity,
	       "device memory past its capacity: %llu of %llu used, %d",
	       (unsigned long long)mi.used, (unsigned long long)mi.capacity,
	       err);
	for (i = 0; i < 8; i++) {
		ret = npu_bo_create(a->fd, i ? (__u64)i * MIB : a->page,
				    DRM_NPU_BO_DEVICE, &extra);
		attack(K_EXHAUST_MEMORY, ret == -ENOMEM,
		       "one more DEVICE BO when full: %d", ret);
		if (!ret)
			npu_gem_close(a->fd, extra);
	}
	hold(_metadata, a, mi.used == mi.capacity ? HELD_DEVICE_CAPACITY :
						  HELD_PINNED_BUDGET);
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, npu_gem_close(a->fd, h[i]));
	ASSERT_EQ(0, npu_query_memory(a->fd, &mi));
	ASSERT_EQ(base.used, mi.used);
	free(h);
}

/*
 * One-page HOST BOs until the budget refuses, with @budget bytes of it
 * left: each costs RAM beyond its page (its GEM and shmem objects), which
 * the budget must count too, or the RAM they take passes it by half as
 * much again. Stops early (and fails) if the machine's memory runs low
 * first.
 */
static void exhaust_small_bos(struct __test_metadata *_metadata,
			      struct attacker *a, __u64 budget)
{
	__u64 avail0 = npu_meminfo("MemAvailable"), used, slack;
	int max = budget / a->page + 1, n, i, ret = 0;
	__u32 *h;

	h = calloc(max, sizeof(*h));
	ASSERT_NE(NULL, h);
	for (n = 0; n < max; n++) {
		ret = npu_bo_create(a->fd, a->page, DRM_NPU_BO_HOST, &h[n]);
		if (ret)
			break;
		if (n % 4096 == 4095 && npu_meminfo("MemAvailable") < 384 * MIB)
			break;
	}
	used = avail0 - npu_meminfo("MemAvailable");
	slack = a->debug_allocator ? budget : budget / 8;
	printf("# exhaust-pinned-memory: %d one-page HOST BOs took %llu MiB of RAM (room %llu MiB of the budget, %llu MiB more allowed%s), then %d\n",
	       n, (unsigned long long)(used / MIB),
	       (unsigned long long)(budget / MIB),
	       (unsigned long long)(slack / MIB),
	       a->debug_allocator ? " under a debug kernel" : "", ret);
	attack(K_EXHAUST_PINNED, ret == -ENOMEM && used <= budget + slack,
	       "%d one-page HOST BOs took %llu MiB of RAM against a budget of %llu MiB",
	       n, (unsigned long long)(used / MIB),
	       (unsigned long long)(budget / MIB));
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, npu_gem_close(a->fd, h[i]));
	free(h);
}

/*
 * Pinned memory: userptr pins count against the attacker's
 * RLIMIT_MEMLOCK (whichever of its files pins them), and the driver's own
 * pinned host memory (HOST BOs) against its pinned budget.
 */
static void attack_exhaust_pinned(struct __test_metadata *_metadata,
				  struct attacker *a)
{
	const __u64 limit = MIB, piece = 64 * KIB;
	struct rlimit rl = { limit, limit };
	__u64 held, budget, safe, room;
	__u32 h[64], *hb;
	int n = 0, nb = 0, fd2, err, i, ret, first;
	char *m;

	/* Userptr: its RLIMIT_MEMLOCK, lowered to 1 MiB. */
	if (!a->separate_users) {
		printf("# exhaust-pinned-memory: not root, the attacker may have CAP_IPC_LOCK: memlock part skipped\n");
	} else {
		ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
		m = mmap(NULL, 4 * limit, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ASSERT_NE(MAP_FAILED, m);
		memset(m, 1, 4 * limit);
		fd2 = open(a->path, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd2);
		for (i = 0; i < 64; i++) {
			ret = npu_bo_userptr(i % 2 ? fd2 : a->fd, m + i * piece,
					     piece, 0, &h[n]);
			if (ret)
				break;
			n++;
		}
		printf("# exhaust-pinned-memory: %llu KiB pinned under RLIMIT_MEMLOCK %llu KiB, refused with %d\n",
		       (unsigned long long)(n * piece / KIB),
		       (unsigned long long)(limit / KIB), ret);
		attack(K_EXHAUST_PINNED, ret == -ENOMEM && n * piece <= limit,
		       "userptr past RLIMIT_MEMLOCK: %llu bytes pinned, %d",
		       (unsigned long long)(n * piece), ret);
		for (i = 0; i < 4; i++) {
			__u32 x;

			ret = npu_bo_userptr(i % 2 ? fd2 : a->fd,
					     m + 3 * limit, a->page,
					     i / 2 ? DRM_NPU_BO_USERPTR_READONLY :
						     0, &x);
			attack(K_EXHAUST_PINNED, ret == -ENOMEM,
			       "one more pinned page at the limit: %d", ret);
			if (!ret)
				npu_gem_close(a->fd, x);
		}
		hold(_metadata, a, HELD_MEMLOCK);
		for (i = 0; i < n; i++)
			ASSERT_EQ(0, npu_gem_close(i % 2 ? fd2 : a->fd, h[i]));
		close(fd2);
		munmap(m, 4 * limit);
	}

	/* HOST BOs: the driver's pinned budget, not the attacker's rlimit. */
	budget = npu_pinned_budget();
	safe = npu_safe_to_pin();
	if (budget > safe) {
		printf("# exhaust-pinned-memory: a pinned budget of %llu MiB, %llu MiB safe to pin here: HOST part skipped\n",
		       (unsigned long long)(budget / MIB),
		       (unsigned long long)(safe / MIB));
		return;
	}
	hb = calloc(EXHAUST_BOS, sizeof(*hb));
	ASSERT_NE(NULL, hb);
	held = alloc_until_full(_metadata, a, DRM_NPU_BO_HOST, 64 * MIB,
				safe, hb, EXHAUST_BOS, &nb, &err);
	printf("# exhaust-pinned-memory: %llu MiB of HOST BOs held (budget %llu MiB), refused with %d\n",
	       (unsigned long long)(held / MIB),
	       (unsigned long long)(budget / MIB), err);
	attack(K_EXHAUST_PINNED, err == -ENOMEM && budget && held <= budget,
	       "HOST BOs pinned %llu MiB with no limit before %llu MiB",
	       (unsigned long long)(held / MIB),
	       (unsigned long long)(safe / MIB));
	if (err)
		hold(_metadata, a, HELD_PINNED_BUDGET);
	/*
	 * One-page BOs into the last 128 MiB of the budget, the rest still
	 * held (the first two BOs are 64 MiB each when that much was held):
	 * a whole budget of them, hundreds of thousands, takes most of an
	 * hour under the debug kernel. There the last 32 MiB (a 96 MiB BO
	 * takes the rest): each BO costs KASAN's and kmemleak's work too, and
	 * 16385 of them ran the test past its timeout on a loaded host.
	 */
	room = budget;
	first = nb;
	if (err && held >= 128 * MIB) {
		room = 128 * MIB;
		first = 2;
	}
	for (i = 0; i < first; i++)
		ASSERT_EQ(0, npu_gem_close(a->fd, hb[i]));
	if (first == 2 && a->debug_allocator) {
		ASSERT_EQ(0, npu_bo_create(a->fd, 96 * MIB, DRM_NPU_BO_HOST,
					   &hb[1]));
		room = 32 * MIB;
		first = 1;
	}
	exhaust_small_bos(_metadata, a, room);
	for (i = first; i < nb; i++)
		ASSERT_EQ(0, npu_gem_close(a->fd, hb[i]));
	free(hb);
}

#define EXHAUST_FILES		4
#define MAX_QUEUES_PER_FILE	256

/*
 * Queues: 256 per file (-ENOSPC), each with a job done so that it is on
 * its engine's run queue; the victim still makes queues and runs jobs.
 */
static void attack_exhaust_queues(struct __test_metadata *_metadata,
				  struct attacker *a)
{
	struct drm_npu_queue_create *q, extra;
	int fds[EXHAUST_FILES], n[EXHAUST_FILES], f, i, ret;
	__u64 cmds[4], point;
	struct npu_cmdbuf cb;

	q = calloc(EXHAUST_FILES * (MAX_QUEUES_PER_FILE + 1), sizeof(*q));
	ASSERT_NE(NULL, q);
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	for (f = 0; f < EXHAUST_FILES; f++) {
		struct drm_npu_queue_create *fq = q + f * (MAX_QUEUES_PER_FILE + 1);

		fds[f] = f ? open(a->path, O_RDWR | O_CLOEXEC) : a->fd;
		ASSERT_LE(0, fds[f]);
		for (n[f] = 0; n[f] <= MAX_QUEUES_PER_FILE; n[f]++) {
			ret = npu_queue_create(fds[f], n[f] % 2 ?
					       DRM_NPU_ENGINE_COMPUTE :
					       DRM_NPU_ENGINE_COPY,
					       DRM_NPU_PRIORITY_NORMAL,
					       &fq[n[f]]);
			if (ret)
				break;
			ASSERT_EQ(0, npu_submit_cmdbuf(fds[f],
						       fq[n[f]].queue_id, &cb,
						       NULL, 0, NULL));
		}
		attack(K_EXHAUST_QUEUES, ret == -ENOSPC &&
		       n[f] == MAX_QUEUES_PER_FILE,
		       "queues of one file: %d, then %d", n[f], ret);
		for (i = 0; i < 4; i++) {
			ret = npu_queue_create(fds[f], i % 2, i / 2, &extra);
			attack(K_EXHAUST_QUEUES, ret == -ENOSPC,
			       "one more queue past the limit: %d", ret);
		}
	}
	for (f = 0; f < EXHAUST_FILES; f++) {
		struct drm_npu_queue_create *fq = q + f * (MAX_QUEUES_PER_FILE + 1);

		for (i = 0; i < n[f]; i++) {
			ret = npu_syncobj_query(fds[f], fq[i].syncobj_handle,
						DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
						&point);
			ASSERT_EQ(0, ret);
			ASSERT_EQ(0, nsub_wait(fds[f], fq[i].syncobj_handle,
					       point, JOB_MS));
		}
	}
	printf("# exhaust-queues: %d files x %d queues, each with a job done\n",
	       EXHAUST_FILES, n[0]);
	hold(_metadata, a, HELD_QUEUES);
	for (f = 1; f < EXHAUST_FILES; f++)
		close(fds[f]);
	for (i = 0; i < n[0]; i++)
		ASSERT_EQ(0, npu_queue_destroy(a->fd, q[i].queue_id));
	free(q);
}

/* A job of @n WAIT_VALUE packets: packet i waits for *@flag >= i + 1. */
static int submit_blocker(struct attacker *a, __u32 queue, __u64 flag, int n,
			  __u64 *point)
{
	struct npu_cmdbuf cb;
	__u64 *cmds;
	size_t len = (size_t)n * sizeof(struct drm_npu_pkt_wait_value);
	int i, ret;

	cmds = malloc(len);
	if (!cmds)
		return -ENOMEM;
	npu_cmdbuf_init(&cb, cmds, len);
	for (i = 0; i < n; i++)
		npu_emit_wait_value(&cb, flag, i + 1, ~0ULL, DRM_NPU_WAIT_GE);
	ret = npu_submit_cmdbuf(a->fd, queue, &cb, NULL, 0, point);
	free(cmds);
	return ret;
}

#define BLOCKER_STEPS		1024
/* More than the limit the test expects, and bounded: it may have none. */
#define FLOOD_JOBS_MAX		(3 * 4096)
#define FLOOD_BYTES_MAX		(192 * MIB)

/* Let the blocker end, and wait for everything the flood queued. */
static void flood_drain(struct __test_metadata *_metadata, struct attacker *a)
{
	__u64 all = ~0ULL, zero = 0, point;

	ASSERT_EQ(0, npu_vm_write(a->fd, a->va, &all, 8));
	ASSERT_EQ(0, npu_syncobj_query(a->fd, a->qcopy.syncobj_handle,
				       DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
				       &point));
	ASSERT_EQ(0, nsub_wait(a->fd, a->qcopy.syncobj_handle, point, JOB_MS));
	/* The blocker may have timed out meanwhile: start clean. */
	ASSERT_EQ(0, npu_queue_reset(a->fd, a->qcopy.queue_id));
	ASSERT_EQ(0, npu_vm_write(a->fd, a->va, &zero, 8));
}

/**
 * struct flood - how a flood ended
 * @n: jobs submitted behind the blocker.
 * @err: the refusal that ended it (0: @max jobs went in).
 * @more: what @extra further jobs got right after, alternately on the
 *        blocked queue and on @other.
 */
struct flood {
	int n;
	int err;
	int more[4];
};

/*
 * flood() - behind a blocker the attacker keeps alive (each of its wait
 * packets ends as the flood goes on, so none reaches the job timeout),
 * submit jobs of @size bytes of NOPs until the driver refuses one or @max
 * went in; then @extra more, of @extra_size, half of them on queue @other.
 * A blocker that timed out all the same (a machine so slow or busy that
 * the flood did not keep up) is not an answer: the round starts again.
 */
static void flood(struct __test_metadata *_metadata, struct attacker *a,
		  __u32 size, int max, __u32 other, __u32 extra_size,
		  int extra, struct flood *f)
{
	const __u64 flag = a->va;
	int every = max / BLOCKER_STEPS + 1, round, i, ret;
	struct npu_cmdbuf cb, xb;
	struct drm_npu_queue_status st;
	__u64 *cmds, *xcmds, flag_val;

	cmds = malloc(size);
	xcmds = malloc(extra_size);
	ASSERT_NE(NULL, cmds);
	ASSERT_NE(NULL, xcmds);
	npu_cmdbuf_init(&cb, cmds, size);
	for (i = 0; i < (int)(size / 8); i++)
		npu_emit_nop(&cb);
	npu_cmdbuf_init(&xb, xcmds, extra_size);
	for (i = 0; i < (int)(extra_size / 8); i++)
		npu_emit_nop(&xb);
	for (round = 0; round < 5; round++) {
		flag_val = 0;
		memset(f, 0, sizeof(*f));
		ASSERT_EQ(0, submit_blocker(a, a->qcopy.queue_id, flag,
					    BLOCKER_STEPS, NULL));
		while (f->n < max) {
			ret = npu_submit_cmdbuf(a->fd, a->qcopy.queue_id, &cb,
						NULL, 0, NULL);
			if (ret) {
				f->err = ret;
				break;
			}
			if (++f->n % every == 0) {
				++flag_val;
				ASSERT_EQ(0, npu_vm_write(a->fd, flag,
							  &flag_val, 8));
			}
		}
		for (i = 0; i < extra; i++)
			f->more[i] = npu_submit_cmdbuf(a->fd, i % 2 ? other :
						       a->qcopy.queue_id, &xb,
						       NULL, 0, NULL);
		/* Still blocked: the answers stand. */
		ASSERT_EQ(0, npu_queue_status(a->fd, a->qcopy.queue_id, &st));
		if (!st.error && f->err != -EIO)
			break;
		printf("# exhaust-jobs-fences: the blocker timed out after %d jobs (a slow machine): again\n",
		       f->n);
		flood_drain(_metadata, a);
	}
	ASSERT_GT(5, round) TH_LOG("the blocker never held");
	free(cmds);
	free(xcmds);
}

/*
 * Jobs and their fences: jobs queued behind a long one each hold kernel
 * memory (their command buffer, fences); one context may have only so
 * many in flight (-EAGAIN), in number and in bytes, however many queues
 * it spreads them over; the victim's context is not limited by it.
 */
static void attack_exhaust_jobs(struct __test_metadata *_metadata,
				struct attacker *a)
{
	struct drm_npu_queue_status st;
	struct drm_npu_queue_create q2;
	struct npu_cmdbuf cb;
	struct flood f;
	__u64 cmds[4];
	__u32 flag_bo;
	int i;

	attacker_queues(_metadata, a);
	ASSERT_EQ(0, npu_bo_create(a->fd, a->page, DRM_NPU_BO_DEVICE,
				   &flag_bo));
	ASSERT_EQ(0, npu_vm_map(a->fd, flag_bo, a->va, a->page, 0, 0));
	ASSERT_EQ(0, npu_queue_create(a->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_NORMAL, &q2));

	/* Small jobs: their number. */
	flood(_metadata, a, 8, FLOOD_JOBS_MAX, q2.queue_id, 8, 4, &f);
	ASSERT_EQ(0, npu_queue_status(a->fd, a->qcopy.queue_id, &st));
	printf("# exhaust-jobs-fences: %d NOP jobs queued behind a blocker (%llu in flight), then %d\n",
	       f.n, (unsigned long long)(st.submitted - st.completed), f.err);
	attack(K_EXHAUST_JOBS, f.err == -EAGAIN,
	       "%d jobs in flight in one context and no limit", f.n);
	for (i = 0; i < 4; i++)
		attack(K_EXHAUST_JOBS, f.more[i] == -EAGAIN,
		       "one more job (queue %d) at the limit: %d", i % 2,
		       f.more[i]);
	hold(_metadata, a, HELD_JOBS);
	flood_drain(_metadata, a);

	/* Big jobs: their command bytes. */
	flood(_metadata, a, DRM_NPU_MAX_CMDS_SIZE,
	      FLOOD_BYTES_MAX / DRM_NPU_MAX_CMDS_SIZE, q2.queue_id,
	      DRM_NPU_MAX_CMDS_SIZE, 2, &f);
	printf("# exhaust-jobs-fences: %d jobs of %u KiB queued behind a blocker, then %d\n",
	       f.n, DRM_NPU_MAX_CMDS_SIZE / 1024, f.err);
	attack(K_EXHAUST_JOBS, f.err == -EAGAIN,
	       "%d MiB of command buffers in flight in one context and no limit",
	       f.n * (DRM_NPU_MAX_CMDS_SIZE / 1024) / 1024);
	for (i = 0; i < 2; i++)
		attack(K_EXHAUST_JOBS, f.more[i] == -EAGAIN,
		       "one more big job (queue %d) at the limit: %d", i % 2,
		       f.more[i]);
	hold(_metadata, a, HELD_CMD_BYTES);
	flood_drain(_metadata, a);
	/* Once they end, the context submits again. */
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_nop(&cb);
	ASSERT_EQ(0, npu_submit_cmdbuf(a->fd, a->qcopy.queue_id, &cb, NULL, 0,
				       NULL));
	ASSERT_EQ(0, npu_queue_destroy(a->fd, q2.queue_id));
}

#define MAPPINGS_MAX		(70 * 1024)

/*
 * Mappings: each VM_BIND holds kernel memory; one context may have only
 * so many (-ENOSPC). One page BO mapped again and again.
 */
static void attack_exhaust_mappings(struct __test_metadata *_metadata,
				    struct attacker *a)
{
	struct drm_npu_context_info ci;
	__u32 bo;
	int n, i, ret = 0;

	ASSERT_EQ(0, npu_bo_create(a->fd, a->page, DRM_NPU_BO_DEVICE, &bo));
	for (n = 0; n < MAPPINGS_MAX; n++) {
		ret = npu_vm_map(a->fd, bo, a->va + (__u64)n * a->page, a->page,
				 0, 0);
		if (ret)
			break;
	}
	ASSERT_EQ(0, npu_context_info(a->fd, &ci));
	printf("# exhaust-mappings: %d mappings of one page, then %d\n", n,
	       ret);
	attack(K_EXHAUST_MAPPINGS, ret == -ENOSPC,
	       "%d mappings in one context and no limit", n);
	for (i = 0; i < 4; i++) {
		ret = npu_vm_map(a->fd, bo, a->va + (__u64)(n + i) * a->page,
				 a->page, 0, 0);
		attack(K_EXHAUST_MAPPINGS, ret == -ENOSPC,
		       "one more mapping at the limit: %d", ret);
	}
	hold(_metadata, a, HELD_MAPPINGS);
	/* Closing the file frees them all at once. */
	ASSERT_EQ(0, npu_gem_close(a->fd, bo));
}

/* ---- what the victim must still do while the attacker holds ---------- */

static void check_victim_held(struct __test_metadata *_metadata,
			      FIXTURE_DATA(hostile) *self, int code)
{
	int ret;

	/* Its objects work and nothing of it changed. */
	ASSERT_EQ(0, victim_cmd(self, VC_CHECK, 0));
	switch (code) {
	case HELD_DEVICE_CAPACITY:
	case HELD_PINNED_BUDGET:
		/* Shared by every context: the victim's new BOs fail too. */
		ret = victim_cmd(self, VC_ALLOC_DEVICE, MIB);
		EXPECT_EQ(-ENOMEM, ret);
		ret = victim_cmd(self, VC_ALLOC_HOST, MIB);
		EXPECT_EQ(code == HELD_PINNED_BUDGET ? -ENOMEM : 0, ret);
		EXPECT_EQ(0, victim_cmd(self, VC_USERPTR, 64 * KIB));
		break;
	case HELD_MEMLOCK:
		EXPECT_EQ(0, victim_cmd(self, VC_USERPTR, 64 * KIB));
		break;
	case HELD_QUEUES:
		EXPECT_EQ(0, victim_cmd(self, VC_QUEUE, 0));
		break;
	case HELD_JOBS:
	case HELD_CMD_BYTES:
		EXPECT_EQ(0, victim_cmd(self, VC_SUBMIT, 0));
		break;
	case HELD_MAPPINGS:
		EXPECT_EQ(0, victim_cmd(self, VC_MAP, 0));
		break;
	}
	EXPECT_EQ(0, victim_cmd(self, VC_MAP, 0));
}

/* And afterwards: freeing restores. */
static void check_victim_after(struct __test_metadata *_metadata,
			       FIXTURE_DATA(hostile) *self)
{
	EXPECT_EQ(0, victim_cmd(self, VC_ALLOC_DEVICE, MIB));
	EXPECT_EQ(0, victim_cmd(self, VC_ALLOC_HOST, MIB));
	EXPECT_EQ(0, victim_cmd(self, VC_USERPTR, 64 * KIB));
	EXPECT_EQ(0, victim_cmd(self, VC_QUEUE, 0));
	EXPECT_EQ(0, victim_cmd(self, VC_MAP, 0));
	EXPECT_EQ(0, victim_cmd(self, VC_SUBMIT, 0));
}

/* ---- the tests: one scene per kind ----------------------------------- */

#define HOSTILE_TEST(name, kind, fn, secs)				\
	TEST_F_TIMEOUT(hostile, name, secs)				\
	{								\
		scene_start(_metadata, self);				\
		run_attacker(_metadata, self, fn, kind);		\
		scene_end(_metadata, self, kind);			\
	}

HOSTILE_TEST(gem_handles, K_HANDLES, attack_handles, 300)
HOSTILE_TEST(mmap_offsets, K_MMAP, attack_mmap, 300)
HOSTILE_TEST(device_addresses, K_DEVICE_VA, attack_device_va, 600)
HOSTILE_TEST(kernel_addresses, K_KERNEL_ADDR, attack_kernel_addr, 600)
HOSTILE_TEST(dmabuf_not_given, K_DMABUF, attack_dmabuf, 300)
HOSTILE_TEST(syncobjs, K_SYNCOBJ, attack_syncobjs, 300)
HOSTILE_TEST(queue_ids, K_QUEUE, attack_queues, 300)

TEST_F_TIMEOUT(hostile, read_only_memory, 300)
{
	unsigned char buf[64 * KIB];
	int fd;

	snprintf(self->ro_path, sizeof(self->ro_path),
		 "/tmp/npu-hostile-ro.%d", getpid());
	fd = open(self->ro_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		  0644);
	ASSERT_LE(0, fd);
	npu_fill_pattern(buf, sizeof(buf), 21);
	ASSERT_EQ((ssize_t)sizeof(buf), write(fd, buf, sizeof(buf)));
	ASSERT_EQ(0, close(fd));
	scene_start(_metadata, self);
	run_attacker(_metadata, self, attack_readonly, K_READONLY);
	scene_end(_metadata, self, K_READONLY);
}

TEST_F_TIMEOUT(hostile, process_boundary, 300)
{
	if (!can_switch_users())
		SKIP(return, "needs root to run victim and attacker as two users");
	scene_start(_metadata, self);
	run_attacker(_metadata, self, attack_process, K_PROCESS);
	scene_end(_metadata, self, K_PROCESS);
}

TEST_F_TIMEOUT(hostile, flink_names, 300)
{
	scene_start(_metadata, self);
	run_attacker(_metadata, self, attack_flink, K_FLINK);
	if (can_switch_users())
		flink_names_from_primary(_metadata, self);
	scene_end(_metadata, self, K_FLINK);
}

TEST_F_TIMEOUT(hostile, freed_memory, 300)
{
	scene_start(_metadata, self);
	ASSERT_EQ(0, victim_cmd(self, VC_SECRET, 0));
	run_attacker(_metadata, self, attack_freed, K_FREED);
	scene_end(_metadata, self, K_FREED);
}

TEST_F_TIMEOUT(hostile, engine_scratch, 300)
{
	if (!self->info.num_compute_engines)
		SKIP(return, "no compute engine");
	scene_start(_metadata, self);
	ASSERT_EQ(0, victim_cmd(self, VC_SECRET, 0));
	run_attacker(_metadata, self, attack_scratch, K_SCRATCH);
	scene_end(_metadata, self, K_SCRATCH);
}

/* @heavy: thousands of objects, left out under NPU_EXHAUSTION=skip. */
#define EXHAUST_TEST(name, kind, fn, heavy, secs)			\
	TEST_F_TIMEOUT(hostile, name, secs)				\
	{								\
		if ((heavy) && npu_skip_exhaustion())			\
			SKIP(return, NPU_EXHAUSTION_SKIPPED);		\
		scene_start(_metadata, self);				\
		run_attacker_held(_metadata, self, fn, kind,		\
				  check_victim_held);			\
		check_victim_after(_metadata, self);			\
		scene_end(_metadata, self, kind);			\
	}

EXHAUST_TEST(exhaust_device_memory, K_EXHAUST_MEMORY, attack_exhaust_memory,
	     true, 600)
EXHAUST_TEST(exhaust_pinned_memory, K_EXHAUST_PINNED, attack_exhaust_pinned,
	     true, 600)
EXHAUST_TEST(exhaust_queues, K_EXHAUST_QUEUES, attack_exhaust_queues, false,
	     600)
EXHAUST_TEST(exhaust_jobs_and_fences, K_EXHAUST_JOBS, attack_exhaust_jobs,
	     true, 600)
EXHAUST_TEST(exhaust_mappings, K_EXHAUST_MAPPINGS, attack_exhaust_mappings,
	     true, 600)

/*
 * Each test runs in a child of the harness that leaves with _exit(): a
 * fully buffered stdout (a log file) would lose the lines it printed, the
 * table below among them.
 */
static void __attribute__((constructor)) hostile_line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Last: the table of what was tried; nothing may have succeeded. */
TEST_F(hostile, summary)
{
	unsigned long tried = 0, succeeded = 0, changed = 0;
	int kinds = 0, k;

	printf("# hostile: %-24s %8s %9s %14s\n", "kind", "attacks",
	       "succeeded", "victim changed");
	for (k = 0; k < K_COUNT; k++) {
		if (!tally->tried[k])
			continue;
		kinds++;
		tried += tally->tried[k];
		succeeded += tally->succeeded[k];
		changed += tally->victim_changed[k];
		printf("# hostile: %-24s %8lu %9lu %14lu\n", kind_names[k],
		       tally->tried[k], tally->succeeded[k],
		       tally->victim_changed[k]);
	}
	printf("# hostile: %lu attacks of %d kinds, %lu succeeded, victim changed %lu times\n",
	       tried, kinds, succeeded, changed);
	EXPECT_EQ(0UL, succeeded);
	EXPECT_EQ(0UL, changed);
}

TEST_HARNESS_MAIN

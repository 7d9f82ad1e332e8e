// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_pressure_test - the driver when memory runs short.
 *
 * - memlock_small: userptr pins are charged to the caller's RLIMIT_MEMLOCK
 *   (its mm's pinned_vm, as RDMA's ib_umem does) before anything is
 *   allocated: past the limit -ENOMEM at once, whatever the size, with no
 *   page touched; two files of one process share the limit; a forked child
 *   has its own (the limit is per process, as mlock's); the driver's own
 *   pinned memory (HOST BOs) is not charged there but to its pinned budget.
 * - guest_memory_nearly_full: a filler process locks all but about 320 MiB
 *   of the guest's memory; pins of memory already there still work and run
 *   jobs, a pin larger than RAM or past the limit fails at once, and DEVICE
 *   and HOST BOs larger than the memory left fail cleanly with -ENOMEM
 *   (their pages are allocated so as to fail rather than wake the OOM
 *   killer or warn), leaving nothing behind; once the filler is gone they
 *   succeed again. The run's kernel log must stay clean (vmrun checks it).
 * - device_memory_full_while_another_allocates: one process holds the
 *   device memory (to its capacity, or to the driver's pinned budget where
 *   that is smaller), another's BOs fail with -ENOMEM and its existing BOs
 *   keep working, the first keeps working, freeing restores; then both race
 *   allocations at the edge and the device's use never passes its capacity
 *   and returns to where it was.
 *
 * Every fill is bounded by what the machine can spare (the guests have 2-3
 * GiB). Processes talk through pipes; every wait has a timeout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"
#include "npu_submit_util.h"
#include "npu_proc_util.h"

#define KIB			1024ULL
#define MIB			(1024 * KIB)
#define GIB			(1024 * MIB)

/* The user the limited processes become when the test runs as root. */
#define LIMITED_UID		61003

/* What the filler leaves of the guest's memory. */
#define FILL_LEAVES		(320 * MIB)

#define PEER_MS			((long long)npu_job_timeout_ms() * \
				 DRM_NPU_JOB_TIMEOUT_FACTOR + 60000)

FIXTURE(pressure) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	int fd;
	const char *path;
	struct drm_npu_device_info info;
	__u64 va;
	__u64 page;
};

FIXTURE_SETUP(pressure)
{
	int n;

	self->fd = -1;
	self->page = sysconf(_SC_PAGESIZE);
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR,
			       NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	self->path = self->nodes[0].path;
	ASSERT_EQ(0, npu_query_device_info(self->fd, &self->info));
	self->va = ((self->info.va_start + GIB - 1) & ~(GIB - 1)) + GIB;
}

FIXTURE_TEARDOWN(pressure)
{
	npu_close_nodes(self->nodes, self->num_nodes);
}

/* Become another user: no capabilities (CAP_IPC_LOCK among them). */
static int become_limited(void)
{
	if (geteuid())
		return 0;
	if (setgroups(0, NULL) || setresgid(LIMITED_UID, LIMITED_UID,
					    LIMITED_UID) ||
	    setresuid(LIMITED_UID, LIMITED_UID, LIMITED_UID))
		return -errno;
	return 0;
}

static void *anon(size_t len, bool touch)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p != MAP_FAILED && touch)
		memset(p, 0x5a, len);
	return p;
}

/* One copy job of @len bytes on a fresh copy queue, waited for. */
static int copy_job(int fd, __u64 src, __u64 dst, __u64 len)
{
	struct drm_npu_queue_create q;
	struct drm_npu_queue_status st;
	struct npu_cmdbuf cb;
	__u64 cmds[8], point;
	int ret;

	ret = npu_queue_create(fd, DRM_NPU_ENGINE_COPY,
			       DRM_NPU_PRIORITY_NORMAL, &q);
	if (ret)
		return ret;
	npu_cmdbuf_init(&cb, cmds, sizeof(cmds));
	npu_emit_copy(&cb, src, dst, len);
	ret = npu_submit_cmdbuf(fd, q.queue_id, &cb, NULL, 0, &point);
	if (!ret)
		ret = nsub_wait(fd, q.syncobj_handle, point, PEER_MS);
	if (!ret)
		ret = npu_queue_status(fd, q.queue_id, &st);
	if (!ret)
		ret = st.error;
	npu_syncobj_destroy(fd, q.syncobj_handle);
	npu_queue_destroy(fd, q.queue_id);
	return ret;
}

/* ---- memlock_small ----------------------------------------------------- */

#define MEMLOCK_LIMIT		(256 * KIB)
#define PIECE			(64 * KIB)

/* A child of the limited process: it has its own mm, so its own limit. */
static void __attribute__((noreturn)) memlock_grandchild(int fd, char *m)
{
	__u32 h[MEMLOCK_LIMIT / PIECE + 1];
	unsigned int i;

	/* Its own pinned_vm starts at zero: the whole limit again. */
	for (i = 0; i < MEMLOCK_LIMIT / PIECE; i++)
		if (npu_bo_userptr(fd, m + i * PIECE, PIECE, 0, &h[i]))
			_exit(10 + i);
	if (npu_bo_userptr(fd, m + MEMLOCK_LIMIT, PIECE, 0, &h[i]) != -ENOMEM)
		_exit(20);
	_exit(0);
}

static void memlock_child(struct __test_metadata *_metadata,
			  FIXTURE_DATA(pressure) *self)
{
	struct rlimit rl = { MEMLOCK_LIMIT, MEMLOCK_LIMIT };
	struct rlimit none = { 0, 0 };
	__u32 h[MEMLOCK_LIMIT / PIECE], extra, host;
	__u64 rss;
	char *m, *big;
	int fd2, i, ret;
	pid_t pid;

	fd2 = open(self->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, become_limited());
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
	m = anon(4 * MEMLOCK_LIMIT, true);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0ULL, npu_self_status("VmPin"));

	/* 1 GiB past the limit: refused before a page is touched. */
	big = anon(GIB, false);
	ASSERT_NE(MAP_FAILED, big);
	rss = npu_self_status("VmRSS");
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(self->fd, big, GIB, 0, &extra));
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(self->fd, big, GIB,
					  DRM_NPU_BO_USERPTR_READONLY, &extra));
	ASSERT_GT(rss + MIB, npu_self_status("VmRSS"))
		TH_LOG("the refused pin faulted pages in");
	ASSERT_EQ(0ULL, npu_self_status("VmPin"));

	/* Up to the limit over two files of the process, then no more. */
	for (i = 0; i < (int)(MEMLOCK_LIMIT / PIECE); i++)
		ASSERT_EQ(0, npu_bo_userptr(i % 2 ? fd2 : self->fd,
					    m + i * PIECE, PIECE, 0, &h[i]));
	ASSERT_EQ(MEMLOCK_LIMIT, npu_self_status("VmPin"));
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(self->fd, m + MEMLOCK_LIMIT,
					  self->page, 0, &extra));
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(fd2, m + MEMLOCK_LIMIT, self->page,
					  DRM_NPU_BO_USERPTR_READONLY, &extra));
	ASSERT_EQ(MEMLOCK_LIMIT, npu_self_status("VmPin"));

	/*
	 * Pins are pinned_vm, as RDMA's: mlock's locked_vm is charged
	 * separately, so the process may still lock memory of its own.
	 */
	ASSERT_EQ(0, mlock(m + 2 * MEMLOCK_LIMIT, PIECE));
	ASSERT_EQ(0, munlock(m + 2 * MEMLOCK_LIMIT, PIECE));

	/* The driver's own pinned memory is not the caller's memlock. */
	ASSERT_EQ(0, npu_bo_create(self->fd, 4 * MIB, DRM_NPU_BO_HOST, &host));
	ASSERT_EQ(0, npu_gem_close(self->fd, host));

	/* A child process has its own mm and so its own limit. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		memlock_grandchild(self->fd, m + MEMLOCK_LIMIT);
	ret = npu_wait_child_ms(pid, PEER_MS);
	ASSERT_EQ(0, ret) TH_LOG("the forked child's pins: %d", ret);
	ASSERT_EQ(MEMLOCK_LIMIT, npu_self_status("VmPin"));

	/* Closing one gives its share back. */
	ASSERT_EQ(0, npu_gem_close(self->fd, h[0]));
	ASSERT_EQ(MEMLOCK_LIMIT - PIECE, npu_self_status("VmPin"));
	ASSERT_EQ(0, npu_bo_userptr(fd2, m + MEMLOCK_LIMIT, PIECE, 0, &h[0]));
	for (i = 0; i < (int)(MEMLOCK_LIMIT / PIECE); i++)
		ASSERT_EQ(0, npu_gem_close(i % 2 || !i ? fd2 : self->fd, h[i]));
	ASSERT_EQ(0ULL, npu_self_status("VmPin"));

	/* A limit of zero: nothing at all. */
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &none));
	ASSERT_EQ(-ENOMEM, npu_bo_userptr(self->fd, m, self->page, 0, &extra));
	close(fd2);
	_exit(0);
}

TEST_F_TIMEOUT(pressure, memlock_small, 120)
{
	pid_t pid;
	int ret;

	if (self->fd < 0)
		return;
	if (geteuid())
		SKIP(return, "needs root to run a process without CAP_IPC_LOCK");
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		memlock_child(_metadata, self);
	ret = npu_wait_child_ms(pid, PEER_MS);
	ASSERT_EQ(0, ret) TH_LOG("the limited process failed: %d", ret);
}

/* ---- guest_memory_nearly_full ------------------------------------------- */

/*
 * The filler: locks memory 64 MiB at a time while more than FILL_LEAVES
 * stays available, says how much it holds, and holds it until told.
 */
static void __attribute__((noreturn)) filler(int ready_w, int go_r)
{
	const size_t chunk = 64 * MIB;
	__u64 held = 0;
	char c;

	while (npu_meminfo("MemAvailable") > FILL_LEAVES + chunk) {
		void *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED || mlock(p, chunk))
			break;
		memset(p, 0xf1, chunk);
		held += chunk;
	}
	if (npu_write_all(ready_w, &held, sizeof(held)))
		_exit(1);
	if (npu_read_all(go_r, &c, 1, 3600 * 1000LL))
		_exit(2);
	_exit(0);
}

/* An unprivileged process under memory pressure: its limit, at once. */
static void __attribute__((noreturn)) limited_pin(int fd)
{
	struct rlimit rl = { MIB, MIB };
	__u64 rss;
	__u32 h;
	char *m;

	if (become_limited() || setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(1);
	m = anon(64 * MIB, false);
	if (m == MAP_FAILED)
		_exit(2);
	rss = npu_self_status("VmRSS");
	if (npu_bo_userptr(fd, m, 64 * MIB, 0, &h) != -ENOMEM)
		_exit(3);
	if (npu_self_status("VmRSS") > rss + MIB)
		_exit(4);
	_exit(0);
}

/* The kernel's count of OOM kills so far (/proc/vmstat oom_kill). */
static long long oom_kills(void)
{
	long long v = -1;
	char line[128];
	FILE *f = fopen("/proc/vmstat", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "oom_kill %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static __u64 pinned_now(FIXTURE_DATA(pressure) *self)
{
	char dir[PATH_MAX], path[PATH_MAX + 16], line[128];
	unsigned long long v = 0;
	FILE *f;

	if (npu_debugfs_dir(self->fd, dir, sizeof(dir)))
		return 0;
	snprintf(path, sizeof(path), "%s/npu_memory", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "pinned: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/*
 * A BO of @kind bigger than the memory left: refused with -ENOMEM, and
 * nothing of it stays.
 */
static void bo_too_big_for_ram(struct __test_metadata *_metadata,
			       FIXTURE_DATA(pressure) *self, __u32 kind,
			       __u64 size)
{
	struct drm_npu_memory_info before, after;
	struct drm_npu_context_info ci0, ci1;
	__u64 pinned = pinned_now(self);
	__u32 h = 0;
	int ret;

	ASSERT_EQ(0, npu_query_memory(self->fd, &before));
	ASSERT_EQ(0, npu_context_info(self->fd, &ci0));
	ret = npu_bo_create(self->fd, size, kind, &h);
	TH_LOG("a %s BO of %llu MiB with %llu MiB available: %s",
	       kind == DRM_NPU_BO_HOST ? "HOST" : "DEVICE",
	       (unsigned long long)(size / MIB),
	       (unsigned long long)(npu_meminfo("MemAvailable") / MIB),
	       strerror(-ret));
	if (!ret)
		npu_gem_close(self->fd, h);
	ASSERT_EQ(-ENOMEM, ret);
	ASSERT_EQ(0, npu_query_memory(self->fd, &after));
	ASSERT_EQ(before.used, after.used);
	ASSERT_EQ(before.bo_count, after.bo_count);
	ASSERT_EQ(0, npu_context_info(self->fd, &ci1));
	ASSERT_EQ(ci0.bo_count, ci1.bo_count);
	ASSERT_EQ(pinned, pinned_now(self));
}

/*
 * Pin @buf (resident already), copy it on the device into the BO mapped
 * at va + 1 GiB, and read the copy back into @back.
 */
static void pin_resident(struct __test_metadata *_metadata,
			 FIXTURE_DATA(pressure) *self, unsigned char *buf,
			 unsigned char *back, __u64 len)
{
	__u32 up;
	int ret;

	ret = npu_bo_userptr(self->fd, buf, len, 0, &up);
	ASSERT_EQ(0, ret) TH_LOG("pinning resident memory: %s", strerror(-ret));
	EXPECT_EQ(0, npu_vm_map(self->fd, up, self->va, len, 0, 0));
	EXPECT_EQ(0, copy_job(self->fd, self->va, self->va + GIB, len));
	EXPECT_EQ(0, npu_vm_read(self->fd, self->va + GIB, back, len));
	EXPECT_TRUE(npu_has_pattern(back, len, 41, 0));
	EXPECT_EQ(0, npu_vm_unmap(self->fd, self->va, len));
	EXPECT_EQ(0, npu_gem_close(self->fd, up));
}

/*
 * Makes a BO and closes it: 0, or the error of either. A function of its
 * own so that no handle is live across the test's forks (gcc 14 warns
 * that it might be clobbered).
 */
static int bo_make_and_close(int fd, __u64 size, __u32 kind)
{
	__u32 h;
	int ret = npu_bo_create(fd, size, kind, &h);

	return ret ? ret : npu_gem_close(fd, h);
}

TEST_F_TIMEOUT(pressure, guest_memory_nearly_full, 600)
{
	const __u64 buf_len = 32 * MIB;
	int ready[2], go[2], ret;
	__u64 held = 0, big, budget, left, ram;
	long long ooms = oom_kills();
	__u32 dev;
	struct sysinfo si;
	unsigned char *buf, *back;
	pid_t pid, lim;
	char c = 'g';

	if (self->fd < 0)
		return;
	if (npu_skip_exhaustion())
		SKIP(return, NPU_EXHAUSTION_SKIPPED);
	if (geteuid())
		SKIP(return, "needs root to lock most of the guest's memory");
	ASSERT_EQ(0, sysinfo(&si));
	ram = (__u64)si.totalram * si.mem_unit;
	if (ram > 8 * GIB)
		SKIP(return, "%llu MiB of RAM: this fills small guests only",
		     (unsigned long long)(ram / MIB));

	/* Before the pressure: memory of its own, touched, and a BO. */
	buf = anon(buf_len, true);
	ASSERT_NE(MAP_FAILED, buf);
	back = anon(buf_len, true);
	ASSERT_NE(MAP_FAILED, back);
	npu_fill_pattern(buf, buf_len, 41);
	ASSERT_EQ(0, npu_bo_create(self->fd, buf_len, DRM_NPU_BO_DEVICE, &dev));
	ASSERT_EQ(0, npu_vm_map(self->fd, dev, self->va + GIB, buf_len, 0, 0));

	ASSERT_EQ(0, pipe2(ready, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(go, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(ready[0]);
		close(go[1]);
		filler(ready[1], go[0]);
	}
	close(ready[1]);
	close(go[0]);
	ASSERT_EQ(0, npu_read_all(ready[0], &held, sizeof(held), PEER_MS));
	left = npu_meminfo("MemAvailable");
	TH_LOG("the filler locks %llu MiB; %llu MiB available of %llu",
	       (unsigned long long)(held / MIB),
	       (unsigned long long)(left / MIB),
	       (unsigned long long)(ram / MIB));

	/* Memory that is there already pins and works. */
	pin_resident(_metadata, self, buf, back, buf_len);

	/* More than RAM: refused up front. */
	big = (ram + GIB) & ~(self->page - 1);
	{
		void *v = mmap(NULL, big, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);

		__u32 h;

		ASSERT_NE(MAP_FAILED, v);
		EXPECT_EQ(-ENOMEM, npu_bo_userptr(self->fd, v, big, 0, &h));
		munmap(v, big);
		EXPECT_EQ(-ENOMEM, npu_bo_create(self->fd, big, DRM_NPU_BO_HOST, &h));
	}

	/* An unprivileged process meets its limit, not the shortage. */
	lim = fork();
	ASSERT_LE(0, lim);
	if (!lim)
		limited_pin(self->fd);
	EXPECT_EQ(0, npu_wait_child_ms(lim, PEER_MS));

	/*
	 * BOs bigger than what is left, yet inside the pinned budget: their
	 * pages cannot all be had, and the allocation fails cleanly.
	 */
	budget = npu_pinned_budget();
	left = npu_meminfo("MemAvailable");
	big = left + 128 * MIB;
	if (budget && big + pinned_now(self) >= budget)
		TH_LOG("the pinned budget (%llu MiB) refuses first",
		       (unsigned long long)(budget / MIB));
	bo_too_big_for_ram(_metadata, self, DRM_NPU_BO_HOST, big);
	bo_too_big_for_ram(_metadata, self, DRM_NPU_BO_DEVICE,
			   big < self->info.mem_capacity ? big :
			   self->info.mem_capacity);

	/* The context still works. */
	memset(back, 0, buf_len);
	EXPECT_EQ(0, npu_vm_write(self->fd, self->va + GIB, back, buf_len));
	EXPECT_EQ(0, npu_vm_read(self->fd, self->va + GIB, back, buf_len));
	EXPECT_TRUE(npu_all_bytes(back, buf_len, 0));

	/* Gone the pressure, the same BO is made. */
	ASSERT_EQ(0, npu_write_all(go[1], &c, 1));
	ASSERT_EQ(0, npu_wait_child_ms(pid, PEER_MS));
	close(ready[0]);
	close(go[1]);
	big = 256 * MIB;
	ret = bo_make_and_close(self->fd, big, DRM_NPU_BO_HOST);
	EXPECT_EQ(0, ret) TH_LOG("after the pressure: %s", strerror(-ret));
	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va + GIB, buf_len));
	ASSERT_EQ(0, npu_gem_close(self->fd, dev));
	/* Nobody was killed for memory meanwhile. */
	ASSERT_EQ(ooms, oom_kills());
}

/* ---- device_memory_full_while_another_allocates -------------------------- */

enum { HOLDER_FULL = 1, HOLDER_WORKED, HOLDER_HALF, HOLDER_EDGE, HOLDER_DONE };

#define HOLDER_BOS		4096
#define RACE_ROUNDS		200

struct holder_msg {
	int what;
	int err;
	__u64 held;
};

/*
 * The holder: takes the device memory (halving its chunk at each refusal)
 * and keeps working on it while the other process is refused; frees half,
 * takes it again but for a few MiB, racing the other for them; then frees
 * everything.
 */
static void __attribute__((noreturn))
holder(const char *path, __u64 va, int to_w, int from_r)
{
	struct holder_msg msg = { 0 };
	__u64 chunk = 64 * MIB, held = 0, freed, page = sysconf(_SC_PAGESIZE);
	struct drm_npu_memory_info mi;
	__u32 *h, extra;
	__u64 *sz;
	int n = 0, fd, i, ret, round;
	unsigned char *buf;
	char c;

	fd = open(path, O_RDWR | O_CLOEXEC);
	h = calloc(HOLDER_BOS, sizeof(*h));
	sz = calloc(HOLDER_BOS, sizeof(*sz));
	buf = malloc(MIB);
	if (fd < 0 || !h || !sz || !buf)
		_exit(1);
	/* Its working memory first: 2 MiB mapped, with a pattern. */
	if (npu_bo_create(fd, 2 * MIB, DRM_NPU_BO_DEVICE, &h[n]) ||
	    npu_vm_map(fd, h[n], va, 2 * MIB, 0, 0))
		_exit(2);
	n++;
	npu_fill_pattern(buf, MIB, 51);
	if (npu_vm_write(fd, va, buf, MIB))
		_exit(3);
	while (chunk >= page && n < HOLDER_BOS) {
		ret = npu_bo_create(fd, chunk, DRM_NPU_BO_DEVICE, &h[n]);
		if (!ret) {
			held += chunk;
			sz[n] = chunk;
			n++;
		} else {
			msg.err = ret;
			chunk /= 2;
		}
	}
	msg.what = HOLDER_FULL;
	msg.held = held;
	if (npu_write_all(to_w, &msg, sizeof(msg)) ||
	    npu_read_all(from_r, &c, 1, PEER_MS))
		_exit(4);

	/* Full, it keeps working: a copy within its memory. */
	msg.what = HOLDER_WORKED;
	msg.err = copy_job(fd, va, va + MIB, MIB);
	if (!msg.err)
		msg.err = npu_vm_read(fd, va + MIB, buf, MIB);
	if (!msg.err && !npu_has_pattern(buf, MIB, 51, 0))
		msg.err = -EIO;
	if (npu_write_all(to_w, &msg, sizeof(msg)) ||
	    npu_read_all(from_r, &c, 1, PEER_MS))
		_exit(5);

	/* Half of it back. */
	for (i = n / 2; i < n; i++)
		npu_gem_close(fd, h[i]);
	n /= 2;
	msg.what = HOLDER_HALF;
	if (npu_write_all(to_w, &msg, sizeof(msg)) ||
	    npu_read_all(from_r, &c, 1, PEER_MS))
		_exit(6);

	/* Fill again (in BOs of 1 MiB or more), give 3 MiB back, race. */
	chunk = 64 * MIB;
	while (chunk >= MIB && n < HOLDER_BOS) {
		if (npu_bo_create(fd, chunk, DRM_NPU_BO_DEVICE, &h[n])) {
			chunk /= 2;
		} else {
			sz[n] = chunk;
			n++;
		}
	}
	for (freed = 0; freed < 3 * MIB && n > 1; freed += sz[n])
		npu_gem_close(fd, h[--n]);
	msg.what = HOLDER_EDGE;
	if (npu_write_all(to_w, &msg, sizeof(msg)))
		_exit(7);
	for (round = 0; round < RACE_ROUNDS; round++) {
		ret = npu_bo_create(fd, 2 * MIB, DRM_NPU_BO_DEVICE, &extra);
		if (!ret)
			npu_gem_close(fd, extra);
		else if (ret != -ENOMEM)
			_exit(8);
		if (npu_query_memory(fd, &mi) || mi.used > mi.capacity)
			_exit(9);
	}
	if (npu_read_all(from_r, &c, 1, PEER_MS))
		_exit(10);
	for (i = 0; i < n; i++)
		npu_gem_close(fd, h[i]);
	msg.what = HOLDER_DONE;
	if (npu_write_all(to_w, &msg, sizeof(msg)))
		_exit(11);
	close(fd);
	_exit(0);
}

TEST_F_TIMEOUT(pressure, device_memory_full_while_another_allocates, 600)
{
	struct drm_npu_memory_info base, mi;
	struct holder_msg msg;
	int to_test[2], to_holder[2], round, ret, refused = 0;
	__u64 free_mem, budget;
	unsigned char buf[4096];
	__u32 mine, h;
	pid_t pid;
	char c = 'g';

	if (self->fd < 0)
		return;
	if (npu_skip_exhaustion())
		SKIP(return, NPU_EXHAUSTION_SKIPPED);
	ASSERT_EQ(0, npu_query_memory(self->fd, &base));
	free_mem = base.capacity - base.used;
	budget = npu_pinned_budget();
	if (free_mem > npu_safe_to_pin() &&
	    (!budget || budget > npu_safe_to_pin()))
		SKIP(return, "%llu MiB of device memory free, %llu MiB safe to pin here",
		     (unsigned long long)(free_mem / MIB),
		     (unsigned long long)(npu_safe_to_pin() / MIB));

	/* This process's BO, before the other takes the rest. */
	ASSERT_EQ(0, npu_bo_create(self->fd, MIB, DRM_NPU_BO_DEVICE, &mine));
	ASSERT_EQ(0, npu_vm_map(self->fd, mine, self->va, MIB, 0, 0));
	npu_fill_pattern(buf, sizeof(buf), 61);
	ASSERT_EQ(0, npu_vm_write(self->fd, self->va, buf, sizeof(buf)));

	ASSERT_EQ(0, pipe2(to_test, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(to_holder, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(to_test[0]);
		close(to_holder[1]);
		holder(self->path, self->va, to_test[1], to_holder[0]);
	}
	close(to_test[1]);
	close(to_holder[0]);

	ASSERT_EQ(0, npu_read_all(to_test[0], &msg, sizeof(msg), PEER_MS));
	ASSERT_EQ(HOLDER_FULL, msg.what);
	ASSERT_EQ(-ENOMEM, msg.err);
	ASSERT_EQ(0, npu_query_memory(self->fd, &mi));
	TH_LOG("the holder took %llu MiB: device %llu of %llu MiB used, pinned budget %llu MiB",
	       (unsigned long long)(msg.held / MIB),
	       (unsigned long long)(mi.used / MIB),
	       (unsigned long long)(mi.capacity / MIB),
	       (unsigned long long)(budget / MIB));
	ASSERT_LE(mi.used, mi.capacity);
	/* This process is refused... */
	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, MIB, DRM_NPU_BO_DEVICE, &h));
	ASSERT_EQ(-ENOMEM, npu_bo_create(self->fd, self->page,
					 DRM_NPU_BO_DEVICE, &h));
	/* ...but what it has works. */
	ASSERT_EQ(0, copy_job(self->fd, self->va, self->va + 4096, 4096));
	ASSERT_EQ(0, npu_vm_read(self->fd, self->va + 4096, buf, sizeof(buf)));
	ASSERT_TRUE(npu_has_pattern(buf, sizeof(buf), 61, 0));

	ASSERT_EQ(0, npu_write_all(to_holder[1], &c, 1));
	ASSERT_EQ(0, npu_read_all(to_test[0], &msg, sizeof(msg), PEER_MS));
	ASSERT_EQ(HOLDER_WORKED, msg.what);
	ASSERT_EQ(0, msg.err) TH_LOG("the holder's own job: %s",
				     strerror(-msg.err));

	/* Freeing restores. */
	ASSERT_EQ(0, npu_write_all(to_holder[1], &c, 1));
	ASSERT_EQ(0, npu_read_all(to_test[0], &msg, sizeof(msg), PEER_MS));
	ASSERT_EQ(HOLDER_HALF, msg.what);
	ASSERT_EQ(0, npu_bo_create(self->fd, MIB, DRM_NPU_BO_DEVICE, &h));
	ASSERT_EQ(0, npu_gem_close(self->fd, h));

	/* Both at the edge at once: never past capacity, nothing lost. */
	ASSERT_EQ(0, npu_write_all(to_holder[1], &c, 1));
	ASSERT_EQ(0, npu_read_all(to_test[0], &msg, sizeof(msg), PEER_MS));
	ASSERT_EQ(HOLDER_EDGE, msg.what);
	for (round = 0; round < RACE_ROUNDS; round++) {
		ret = npu_bo_create(self->fd, 2 * MIB, DRM_NPU_BO_DEVICE, &h);
		if (!ret) {
			ASSERT_EQ(0, npu_gem_close(self->fd, h));
		} else {
			refused++;
		}
		ASSERT_TRUE(ret == 0 || ret == -ENOMEM) TH_LOG("%d", ret);
		ASSERT_EQ(0, npu_query_memory(self->fd, &mi));
		ASSERT_LE(mi.used, mi.capacity);
		if (budget)
			ASSERT_LE(pinned_now(self), budget);
	}
	TH_LOG("at the edge: %d of %d allocations refused", refused,
	       RACE_ROUNDS);
	ASSERT_EQ(0, npu_write_all(to_holder[1], &c, 1));
	ASSERT_EQ(0, npu_read_all(to_test[0], &msg, sizeof(msg), PEER_MS));
	ASSERT_EQ(HOLDER_DONE, msg.what);
	ret = npu_wait_child_ms(pid, PEER_MS);
	ASSERT_EQ(0, ret) TH_LOG("the holder failed at step %d", ret);
	close(to_test[0]);
	close(to_holder[1]);

	ASSERT_EQ(0, npu_vm_unmap(self->fd, self->va, MIB));
	ASSERT_EQ(0, npu_gem_close(self->fd, mine));
	ASSERT_EQ(0, npu_query_memory(self->fd, &mi));
	ASSERT_EQ(base.used, mi.used);
	ASSERT_EQ(base.bo_count, mi.bo_count);
}

TEST_HARNESS_MAIN

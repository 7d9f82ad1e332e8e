// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu-fuzz - a structure-aware fuzzer of the npu driver's uAPI.
 *
 * It knows every ioctl of uapi/drm/npu_drm.h (QUERY, BO_CREATE,
 * BO_FROM_USERPTR, BO_INFO, VM_BIND, VM_ACCESS, CONTEXT_INFO, QUEUE_CREATE,
 * QUEUE_DESTROY, SUBMIT, QUEUE_STATUS, QUEUE_RESET), the DRM core calls the
 * stack uses (GEM_CLOSE, PRIME both ways, the syncobj ioctls) and the
 * system calls around them (mmap of BOs and dma-bufs, munmap, fork, closing
 * and reopening a file, remapping the memory userptr BOs pin, reading the
 * files' fdinfo and the devices' debugfs lists, arming the devices' fault
 * injection through debugfs, disarmed at the end). Most calls
 * are valid, built from what the process holds (handles, bound device
 * addresses, queues, timeline points, dma-bufs: calls.c), with command
 * buffers whose copies, fills and ops address bound memory (packets.c);
 * one call in four has one field mutated (boundary values, freed or
 * foreign handles, overlapping or unbound ranges, bad pointers, unknown
 * flags, non-zero pads, huge counts, reused points). Several files per
 * process, several threads and processes at once.
 *
 * Where /sys/kernel/debug/kcov exists (the debug kernel) it is
 * coverage-guided (kcov.c): programs that reached new kernel PCs are kept
 * and mutated. Otherwise (Debian's stock kernel has no CONFIG_KCOV) it is
 * random. It says which.
 *
 * Failures: a kernel report in the kernel log (WARN, BUG, oops, lockdep,
 * KASAN, RCU stall, hung task, the module's leak message), an errno the
 * call may not return (see calls.c), a refused field accepted, a worker
 * that crashed, a call that did not return within --hang-timeout, a device
 * that after the run does not come back (within --hang-timeout) to the
 * BOs, device memory and queues it held before. Each
 * prints the seed, the stream and the calls that led to it; with --out,
 * every stream's log and a replay file are written there.
 *
 * Determinism: every stream (process P, thread T) draws its calls from its
 * own generator seeded from --seed, P and T; the kernel's answers never
 * change which calls come next, so
 *   npu-fuzz --seed S --stream P.T --threads 1 --procs 1 --calls N
 * makes the same calls as that stream did (in random mode exactly; what
 * other streams did meanwhile is not repeated), and
 *   npu-fuzz --replay FILE
 * makes the calls of a replay file (one genome per line, 0x...) in order.
 *
 * usage: npu-fuzz [options]
 *   --seed N          the seed (decimal or 0x...; default: from the clock, printed)
 *   --calls N         stop after about N system calls in all
 *   --seconds S       stop after S seconds (default 10 when --calls is not given)
 *   --threads N       threads per process (default 2, at most 16)
 *   --procs N         processes (default 2, at most 16)
 *   --fds N           npu files per process (default 3, at most 8), over the NPUs
 *   --stream P.T      run only the stream of process P, thread T (with 1/1)
 *   --replay FILE     run the genomes of FILE in order, one thread
 *   --hang-timeout S  a call running longer is a hang (default from job_timeout_ms)
 *   --no-kcov         random even where KCOV exists
 *   --keep-going      do not stop at the first failure
 *   --out DIR         write summary.json, the logs and replay files of failures
 *   --json FILE       write the summary (JSON) there too
 *   --profile         time each kind of call (a clock read per call)
 *
 * The last line of its output is machine-readable:
 *   NPU_FUZZ_SUMMARY {"seed": ..., "mode": ..., "calls": ..., ...}
 * Exit status: 0 when nothing failed, 1 on a failure, 2 on bad usage or
 * when there is no npu node.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

static struct fz_opts opts = {
        .threads = 2,
        .procs = 2,
        .fds = 3,
};
static struct fz_shm *shm;
static uint64_t *replay;
static unsigned nreplay;
static int stream_p, stream_t;

uint64_t fz_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t stream_seed(uint64_t seed, int p, int t)
{
	uint64_t s = seed ^ ((uint64_t)(p + 1) << 40) ^ ((uint64_t)(t + 1) << 20);

	fz_rand(&s);
	return fz_rand(&s);
}

/* --- output, safe in a forked child and without stdio's locks ------- */

static void out_str(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(fd, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void __attribute__((format(printf, 2, 3))) out_fmt(int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	out_str(fd, buf);
}

static void print_lock(void)
{
	while (atomic_exchange(&shm->print_lock, 1))
		sched_yield();
}

static void print_unlock(void)
{
	atomic_store(&shm->print_lock, 0);
}

static const char *errname(int err)
{
	const char *n;

	if (err == FZ_ERR_PENDING)
		return "(in the kernel)";
	if (!err)
		return "0";
	n = strerrorname_np(err);
	return n ? n : "E?";
}

static void dump_rec(int fd, const struct fz_rec *r)
{
	char out[32] = "";

	if (r->a[3] && !r->err)
		snprintf(out, sizeof(out), " => %#llx", (unsigned long long)r->a[3]);
	out_fmt(fd,
	        "  #%-8llu fd%u %-14s %-3s %-23s %#llx %#llx %#llx -> %s%s%s  genome 0x%016llx\n",
	        (unsigned long long)r->seq, desc_fd(r->desc) % (unsigned)opts.fds,
	        fz_op_name[desc_op(r->desc)], desc_mut(r->desc) ? "mut" : "",
	        r->kind < K_COUNT ? fz_kind_name[r->kind] : "?", (unsigned long long)r->a[0],
	        (unsigned long long)r->a[1], (unsigned long long)r->a[2], errname(r->err), out,
	        r->child ? " (child)" : "", (unsigned long long)r->desc);
}

/* Prints the last @last calls of a stream (all of the ring with 0). */
void fz_dump_ring(const struct fz_shm *s, int proc, int thread, unsigned last, int fd)
{
	const struct fz_tshm *t = &s->t[proc][thread];
	uint64_t head = atomic_load(&t->head), n = head < FZ_RING ? head : FZ_RING, i;

	if (last && last < n)
		n = last;
	for (i = head - n; i < head; i++)
		dump_rec(fd, &t->ring[i % FZ_RING]);
}

/* The genomes of a stream's ring, oldest first, one per op: a replay file. */
static void write_replay(int proc, int thread, const char *path)
{
	const struct fz_tshm *t = &shm->t[proc][thread];
	uint64_t head = atomic_load(&t->head), n = head < FZ_RING ? head : FZ_RING, i;
	uint64_t last_seq = UINT64_MAX;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	out_fmt(fd, "# npu-fuzz --replay %s: the last ops of stream %d.%d (seed 0x%llx)\n", path,
	        proc, thread, (unsigned long long)opts.seed);
	for (i = head - n; i < head; i++) {
		const struct fz_rec *r = &t->ring[i % FZ_RING];

		if (r->child || r->seq == last_seq)
			continue;
		last_seq = r->seq;
		out_fmt(fd, "0x%016llx # %s%s\n", (unsigned long long)r->desc,
		        fz_op_name[desc_op(r->desc)], desc_mut(r->desc) ? " mutated" : "");
	}
	close(fd);
}

static void write_stream_files(int proc, int thread)
{
	char path[512];
	int fd;

	if (!opts.out_dir)
		return;
	snprintf(path, sizeof(path), "%s/stream-%d.%d.log", opts.out_dir, proc, thread);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		fz_dump_ring(shm, proc, thread, 0, fd);
		close(fd);
	}
	snprintf(path, sizeof(path), "%s/stream-%d.%d.replay", opts.out_dir, proc, thread);
	write_replay(proc, thread, path);
}

static void print_repro(int fd, int proc, int thread, uint64_t calls)
{
	int sp = opts.stream ? stream_p : proc, st = opts.stream ? stream_t : thread;

	if (opts.replay) {
		out_fmt(fd, "reproduce: npu-fuzz --replay %s\n", opts.replay);
		return;
	}
	out_fmt(fd,
	        "reproduce: npu-fuzz --seed 0x%llx --stream %d.%d --threads 1 --procs 1 --fds %d "
	        "--calls %llu%s\n",
	        (unsigned long long)opts.seed, sp, st, opts.fds, (unsigned long long)calls,
	        opts.no_kcov ? " --no-kcov" : "");
	if (opts.out_dir)
		out_fmt(fd, "   or: npu-fuzz --replay %s/stream-%d.%d.replay --fds %d\n",
		        opts.out_dir, proc, thread, opts.fds);
}

static void hexdump(int fd, const char *what, const void *p, size_t n)
{
	const uint64_t *q = p;
	size_t i;

	out_fmt(fd, "%s:", what);
	for (i = 0; i < n / 8; i++)
		out_fmt(fd, "%s %016llx", i % 4 ? "" : "\n   ", (unsigned long long)q[i]);
	out_str(fd, "\n");
}

/* The failing call's argument, and a SUBMIT's packets and in-fences. */
static void dump_arg(struct fz_ctx *c)
{
	const struct drm_npu_submit *s = c->arg;
	uint32_t off = 0;

	hexdump(2, "argument (64-bit words)", c->arg, c->arg_size);
	if (c->arg_size != sizeof(*s) || s->cmds_ptr != (uintptr_t)c->cmds)
		return;
	while (off + 8 <= s->cmds_size && off < FZ_CMDS_SIZE) {
		const struct drm_npu_pkt_header *h = (const void *)(c->cmds + off);
		char what[64];

		snprintf(what, sizeof(what), "packet at %u: opcode %u size %u", off, h->opcode,
		         h->size);
		if (h->size < 8 || h->size > 256 || off + h->size > FZ_CMDS_SIZE) {
			hexdump(2, what, h, 8);
			break;
		}
		hexdump(2, what, h, h->size);
		off += h->size;
	}
	if (s->in_fences_ptr == (uintptr_t)c->arr && s->in_fence_count <= DRM_NPU_MAX_IN_FENCES)
		hexdump(2, "in-fences (handle|flags, point)", c->arr,
		        s->in_fence_count * sizeof(struct drm_npu_fence));
}

void fz_fail(struct fz_ctx *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&shm->failures, 1);
	print_lock();
	out_fmt(2, "\nnpu-fuzz: FAILURE in stream %d.%d%s, op #%llu (%s, genome 0x%016llx): %s\n",
	        c->proc_index, c->thread_index, c->in_child ? " (forked child)" : "",
	        (unsigned long long)c->seq, fz_op_name[desc_op(c->desc)],
	        (unsigned long long)c->desc, msg);
	print_repro(2, c->proc_index, c->thread_index, c->ncalls);
	if (c->arg)
		dump_arg(c);
	out_str(2, "the stream's last calls (op, call, arguments, result):\n");
	fz_dump_ring(shm, c->proc_index, c->thread_index, 48, 2);
	if (!c->in_child)
		write_stream_files(c->proc_index, c->thread_index);
	print_unlock();
	if (!opts.keep_going)
		atomic_store(&shm->stop, 1);
}

/* --- a worker process ------------------------------------------------ */

static bool fd_is_npu(int fd)
{
	char name[8] = "";
	struct drm_version v = {.name_len = sizeof(name) - 1, .name = name};

	if (ioctl(fd, DRM_IOCTL_VERSION, &v))
		return false;
	return v.name_len == 3 && !memcmp(name, "npu", 3);
}

static int node_cmp(const void *a, const void *b)
{
	const struct fz_node *x = a, *y = b;

	return (int)x->info.device_index - (int)y->info.device_index;
}

/*
 * The device's debugfs folder: dri/MINOR for a render node, accel/MINOR or
 * accel/DEVICE for an accel node; the one with the fault injection files.
 */
static void find_debugfs(int fd, char *buf, size_t len)
{
	char link[128], dev[256], probe[400];
	const char *root, *name;
	struct stat st;
	ssize_t n;
	int i;

	buf[0] = 0;
	if (fstat(fd, &st) || !S_ISCHR(st.st_mode))
		return;
	root = major(st.st_rdev) == 226 ? "/sys/kernel/debug/dri" : "/sys/kernel/debug/accel";
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u/device", major(st.st_rdev),
	         minor(st.st_rdev));
	n = readlink(link, dev, sizeof(dev) - 1);
	dev[n > 0 ? n : 0] = 0;
	name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	for (i = 0; i < 2; i++) {
		if (i == 0)
			snprintf(buf, len, "%s/%u", root, minor(st.st_rdev));
		else
			snprintf(buf, len, "%s/%s", root, name);
		snprintf(probe, sizeof(probe), "%s/inject_fault", buf);
		if (!access(probe, W_OK))
			return;
	}
	buf[0] = 0;
}

/* Disarms what fault injection is still armed after the run. */
static void disarm_injection(void)
{
	static const char *const roots[] = {"/sys/kernel/debug/dri", "/sys/kernel/debug/accel"};
	static const char *const files[] = {"inject_fault", "inject_hang"};
	unsigned r, f;

	for (r = 0; r < 2; r++) {
		DIR *d = opendir(roots[r]);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			for (f = 0; f < 2; f++) {
				char path[512];
				int fd;

				snprintf(path, sizeof(path), "%s/%s/%s", roots[r], de->d_name,
				         files[f]);
				fd = open(path, O_WRONLY | O_CLOEXEC);
				if (fd < 0)
					continue;
				if (write(fd, "0", 1) != 1)
					fprintf(stderr, "npu-fuzz: cannot disarm %s\n", path);
				close(fd);
			}
		}
		if (d)
			closedir(d);
	}
}

static void scan_nodes(struct fz_proc *p, const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) && p->nnodes < FZ_MAX_NODES) {
		struct fz_node *n = &p->nodes[p->nnodes];
		struct drm_npu_engine_info eng[32];
		struct drm_npu_query q = {0};
		unsigned i;
		int fd;

		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(n->path, sizeof(n->path), "%s/%s", dir, de->d_name);
		fd = open(n->path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!fd_is_npu(fd)) {
			close(fd);
			continue;
		}
		q.query = DRM_NPU_QUERY_DEVICE_INFO;
		q.data_ptr = (uintptr_t)&n->info;
		q.size = sizeof(n->info);
		if (ioctl(fd, DRM_IOCTL_NPU_QUERY, &q) || n->info.num_engines > 32) {
			close(fd);
			continue;
		}
		q.query = DRM_NPU_QUERY_ENGINES;
		q.data_ptr = (uintptr_t)eng;
		q.size = n->info.num_engines * sizeof(eng[0]);
		if (ioctl(fd, DRM_IOCTL_NPU_QUERY, &q)) {
			close(fd);
			continue;
		}
		for (i = 0; i < n->info.num_engines; i++)
			n->engine_class[eng[i].engine_id & 31] = eng[i].engine_class;
		find_debugfs(fd, n->debugfs, sizeof(n->debugfs));
		close(fd);
		p->nnodes++;
	}
	closedir(d);
}

/* A buffer of @size bytes followed by an inaccessible page. */
static uint8_t *guarded(size_t size)
{
	uint8_t *p = mmap(NULL, size + FZ_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                  -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p + size, FZ_PAGE, PROT_NONE)) {
		munmap(p, size + FZ_PAGE);
		return NULL;
	}
	return p;
}

struct worker_thread {
	pthread_t thread;
	struct fz_ctx c;
};

static void run_one(struct fz_ctx *c, uint64_t d, uint64_t *hist, unsigned *nh)
{
	c->new_cov = false;
	fz_exec(c, d);
	if (*nh == FZ_PROG_MAX) {
		memmove(hist, hist + 1, (FZ_PROG_MAX - 1) * sizeof(*hist));
		(*nh)--;
	}
	hist[(*nh)++] = d;
	if (c->new_cov) {
		fz_corpus_add(c, hist, *nh);
		*nh = 0;
	}
}

static bool thread_done(struct fz_ctx *c)
{
	return atomic_load_explicit(&shm->stop, memory_order_relaxed) ||
	       (c->quota && c->ncalls >= c->quota);
}

static void *thread_main(void *arg)
{
	struct fz_ctx *c = arg;
	uint64_t hist[FZ_PROG_MAX], prog[FZ_PROG_MAX];
	unsigned nh = 0, n, i;
	uint64_t r = 0;

	c->cmds = guarded(FZ_CMDS_SIZE);
	c->arr = guarded(FZ_ARR_SIZE);
	c->io = guarded(FZ_IO_SIZE);
	if (!c->cmds || !c->arr || !c->io) {
		out_str(2, "npu-fuzz: out of memory for a thread's buffers\n");
		exit(2);
	}
	c->kcov_fd = -1;
	if (!opts.no_kcov && fz_kcov_available() && fz_kcov_open(c))
		out_fmt(2, "npu-fuzz: KCOV present but not usable by thread %d.%d: %s\n",
		        c->proc_index, c->thread_index, strerror(errno));
	atomic_store(&c->t->state, 1);
	while (!thread_done(c)) {
		if (replay) {
			if (r == nreplay)
				break;
			run_one(c, replay[r++], hist, &nh);
			continue;
		}
		if (c->kcov_fd >= 0 && fz_below(&c->rng, 2) && (n = fz_corpus_pick(c, prog)) != 0) {
			for (i = 0; i < n && !thread_done(c); i++)
				run_one(c, prog[i], hist, &nh);
			continue;
		}
		run_one(c, fz_gen_desc(c), hist, &nh);
	}
	c->t->ops = c->seq;
	atomic_store(&c->t->state, 2);
	return NULL;
}

static int worker_main(int pi)
{
	struct worker_thread *th;
	struct sysinfo si;
	struct fz_proc *p;
	uint64_t quota = 0;
	uint8_t *area;
	int i, ret;

	p = calloc(1, sizeof(*p));
	th = calloc((size_t)opts.threads, sizeof(*th));
	if (!p || !th)
		return 2;
	p->index = pi;
	pthread_mutex_init(&p->plock, NULL);
	scan_nodes(p, "/dev/accel", "accel");
	scan_nodes(p, "/dev/dri", "renderD");
	if (!p->nnodes) {
		out_str(2, "npu-fuzz: no npu node in /dev/accel or /dev/dri (is npu.ko loaded?)\n");
		return 2;
	}
	qsort(p->nodes, (size_t)p->nnodes, sizeof(p->nodes[0]), node_cmp);
	p->nfds = opts.fds;
	for (i = 0; i < p->nfds; i++) {
		pthread_mutex_init(&p->fds[i].lock, NULL);
		ret = fz_fd_open(p, i, i % p->nnodes);
		if (ret) {
			out_fmt(2, "npu-fuzz: opening %s: %s\n", p->nodes[i % p->nnodes].path,
			        strerror(-ret));
			return 2;
		}
	}
	for (i = 0; i < FZ_NDMABUF; i++)
		p->dmabuf[i] = -1;
	for (i = 0; i < FZ_NSYNCFD; i++)
		p->syncfd[i] = -1;
	/*
	 * The userptr regions, each between inaccessible pages: a mutated
	 * userptr range running past one must fail to pin, not pin the
	 * fuzzer's own memory, which the device would then write.
	 */
	area = mmap(NULL, FZ_NREGION * (FZ_REGION_SIZE + FZ_PAGE) + FZ_PAGE, PROT_NONE,
	            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		return 2;
	for (i = 0; i < FZ_NREGION; i++) {
		int prot = i == FZ_NREGION - 1 ? PROT_READ : PROT_READ | PROT_WRITE;

		p->region[i] = area + FZ_PAGE + i * (FZ_REGION_SIZE + FZ_PAGE);
		if (mprotect(p->region[i], FZ_REGION_SIZE, prot))
			return 2;
		if (prot & PROT_WRITE)
			memset(p->region[i], 0x40 + i, FZ_REGION_SIZE);
	}
	p->ro_page = mmap(NULL, FZ_PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->ro_page == MAP_FAILED)
		return 2;
	sysinfo(&si);
	p->total_ram = (uint64_t)si.totalram * si.mem_unit;
	p->corpus = calloc(FZ_CORPUS_MAX, sizeof(*p->corpus));
	if (opts.calls)
		quota = (opts.calls + (uint64_t)(opts.procs * opts.threads) - 1) /
		        (uint64_t)(opts.procs * opts.threads);

	for (i = 0; i < opts.threads; i++) {
		struct fz_ctx *c = &th[i].c;
		int sp = opts.stream ? stream_p : pi, st = opts.stream ? stream_t : i;

		c->p = p;
		c->shm = shm;
		c->t = &shm->t[pi][i];
		c->o = &opts;
		c->proc_index = pi;
		c->thread_index = i;
		c->quota = quota;
		c->rng = stream_seed(opts.seed, sp, st);
		c->t->stream_seed = c->rng;
		if (pthread_create(&th[i].thread, NULL, thread_main, c))
			return 2;
	}
	for (i = 0; i < opts.threads; i++)
		pthread_join(th[i].thread, NULL);
	return 0;
}

/* --- the monitor (the parent process) -------------------------------- */

/* What a device holds: after the run it must hold what it held before. */
struct dev_state {
	uint64_t used, bos, queues;
};

static bool dev_state(const struct fz_node *n, struct dev_state *st)
{
	struct drm_npu_memory_info mem = {0};
	struct drm_npu_device_stats ds = {0};
	struct drm_npu_query q = {.query = DRM_NPU_QUERY_MEMORY};
	int fd = open(n->path, O_RDWR | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	q.data_ptr = (uintptr_t)&mem;
	q.size = sizeof(mem);
	ok = !ioctl(fd, DRM_IOCTL_NPU_QUERY, &q);
	q = (struct drm_npu_query){.query = DRM_NPU_QUERY_DEVICE_STATS,
	                           .data_ptr = (uintptr_t)&ds,
	                           .size = sizeof(ds)};
	ok = ok && !ioctl(fd, DRM_IOCTL_NPU_QUERY, &q);
	close(fd);
	st->used = mem.used;
	st->bos = mem.bo_count;
	st->queues = ds.queues;
	return ok;
}

static struct fz_proc *nodes; /* the parent's list of the npu nodes */
static struct dev_state baseline[FZ_MAX_NODES];
static int leaks;

static void take_baseline(void)
{
	int i;

	nodes = calloc(1, sizeof(*nodes));
	if (!nodes)
		return;
	scan_nodes(nodes, "/dev/accel", "accel");
	scan_nodes(nodes, "/dev/dri", "renderD");
	for (i = 0; i < nodes->nnodes; i++)
		dev_state(&nodes->nodes[i], &baseline[i]);
}

/*
 * Once every worker has exited, the jobs they left finish (bounded by the
 * job timeout) and every device must be back where it was: no BO, byte of
 * device memory or queue left behind.
 */
static void check_leaks(void)
{
	uint64_t deadline = fz_now_ns() + (uint64_t)(opts.hang_timeout * 1e9);
	struct dev_state st;
	int i;

	if (!nodes)
		return;
	for (i = 0; i < nodes->nnodes; i++) {
		for (;;) {
			bool ok = dev_state(&nodes->nodes[i], &st);

			if (!ok || (st.bos == baseline[i].bos && st.used == baseline[i].used &&
			            st.queues == baseline[i].queues))
				break;
			if (fz_now_ns() > deadline) {
				leaks++;
				fprintf(stderr,
				        "npu-fuzz: FAILURE: %s holds %llu BOs, %llu bytes of "
				        "device memory "
				        "and %llu queues %.0f s after the run (before it: %llu, "
				        "%llu, "
				        "%llu): a leak or a job that never ended\n",
				        nodes->nodes[i].path, (unsigned long long)st.bos,
				        (unsigned long long)st.used, (unsigned long long)st.queues,
				        opts.hang_timeout, (unsigned long long)baseline[i].bos,
				        (unsigned long long)baseline[i].used,
				        (unsigned long long)baseline[i].queues);
				break;
			}
			/* Jobs drain asynchronously: look again shortly (bounded above). */
			poll(NULL, 0, 20);
		}
	}
}

/* What tools/vm-logcheck fails a run on, and the banners it lets pass. */
static const char *const report_patterns[] = {
        "WARNING:",
        "BUG:",
        "BUG ",
        "Oops",
        "general protection fault",
        "Call Trace",
        "kernel BUG",
        "possible recursive locking",
        "possible circular locking",
        "inconsistent lock state",
        "lockdep",
        "INFO: rcu",
        "rcu_sched self-detected",
        "rcu: INFO",
        "stall on CPU",
        "hung_task",
        "blocked for more than",
        "UBSAN",
        "KASAN",
        "kmemleak",
        "npu: leak",
};
static const char *const benign_prefixes[] = {
        "kmemleak: Kernel memory leak detector initialized",
        "RCU lockdep checking is enabled",
};

static bool is_report(const char *msg)
{
	size_t i;

	for (i = 0; i < sizeof(benign_prefixes) / sizeof(benign_prefixes[0]); i++)
		if (strstr(msg, benign_prefixes[i]))
			return false;
	for (i = 0; i < sizeof(report_patterns) / sizeof(report_patterns[0]); i++)
		if (strstr(msg, report_patterns[i]))
			return true;
	return false;
}

static int kernel_reports;

static void dump_all_rings(unsigned last)
{
	int p, t;

	for (p = 0; p < opts.procs; p++)
		for (t = 0; t < opts.threads; t++) {
			if (!atomic_load(&shm->t[p][t].head))
				continue;
			out_fmt(2, "stream %d.%d, last calls:\n", p, t);
			fz_dump_ring(shm, p, t, last, 2);
			write_stream_files(p, t);
		}
}

/* Reads what the kernel logged since; reports go to stderr. */
static void drain_kmsg(int kfd)
{
	char buf[8192];
	bool first = kernel_reports == 0;

	for (;;) {
		ssize_t n = read(kfd, buf, sizeof(buf) - 1);
		char *msg;

		if (n < 0 && errno == EPIPE)
			continue; /* overwritten records: go on with the next */
		if (n <= 0)
			return;
		buf[n] = 0;
		msg = strchr(buf, ';');
		msg = msg ? msg + 1 : buf;
		if (strchr(msg, '\n'))
			*strchr(msg, '\n') = 0;
		if (!is_report(msg))
			continue;
		kernel_reports++;
		print_lock();
		out_fmt(2, "npu-fuzz: KERNEL REPORT: %s\n", msg);
		if (first) {
			out_fmt(2,
			        "seed 0x%llx; every stream's recent calls follow (the report may "
			        "come from any)\n",
			        (unsigned long long)opts.seed);
			dump_all_rings(24);
			first = false;
		}
		print_unlock();
		if (!opts.keep_going)
			atomic_store(&shm->stop, 1);
	}
}

static unsigned job_timeout_ms(void)
{
	unsigned ms = 0;
	FILE *f = fopen("/sys/module/npu/parameters/job_timeout_ms", "re");

	if (f) {
		if (fscanf(f, "%u", &ms) != 1)
			ms = 0;
		fclose(f);
	}
	return ms ? ms : 2000;
}

struct monitor {
	pid_t pid[FZ_MAX_PROCS];
	int pidfd[FZ_MAX_PROCS];
	bool alive[FZ_MAX_PROCS];
	uint64_t last_progress[FZ_MAX_PROCS][FZ_MAX_THREADS];
	uint64_t last_change[FZ_MAX_PROCS][FZ_MAX_THREADS];
	int hangs, crashes, no_node;
};

static void progress_line(uint64_t start, uint64_t now)
{
	uint64_t calls = 0;
	int p, t, k;

	for (p = 0; p < opts.procs; p++)
		for (t = 0; t < opts.threads; t++)
			for (k = 0; k < K_COUNT; k++)
				calls += shm->t[p][t].calls[k];
	printf("npu-fuzz: %.0f s, %llu calls (%.0f/s), %d failures, %d kernel reports\n",
	       (double)(now - start) / 1e9, (unsigned long long)calls,
	       (double)calls * 1e9 / (double)(now - start), atomic_load(&shm->failures),
	       kernel_reports);
	if (atomic_load(&shm->pcs))
		printf("          KCOV PCs %llu, corpus %llu\n",
		       (unsigned long long)atomic_load(&shm->pcs),
		       (unsigned long long)atomic_load(&shm->corpus));
	fflush(stdout);
}

static void reap(struct monitor *m, int p)
{
	int status;

	if (waitpid(m->pid[p], &status, 0) != m->pid[p])
		return;
	m->alive[p] = false;
	close(m->pidfd[p]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
		m->no_node++;
		atomic_store(&shm->stop, 1);
		return;
	}
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && atomic_load(&shm->stop))
		return; /* killed by us after a hang */
	m->crashes++;
	print_lock();
	out_fmt(2, "\nnpu-fuzz: FAILURE: worker process %d %s %d\n", p,
	        WIFSIGNALED(status) ? "died of signal" : "exited with",
	        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	for (int t = 0; t < opts.threads; t++) {
		out_fmt(2, "stream %d.%d, last calls:\n", p, t);
		fz_dump_ring(shm, p, t, 32, 2);
		print_repro(2, p, t, 0);
		write_stream_files(p, t);
	}
	print_unlock();
	if (!opts.keep_going)
		atomic_store(&shm->stop, 1);
}

static void watchdog(struct monitor *m, uint64_t now)
{
	int p, t;

	for (p = 0; p < opts.procs; p++) {
		if (!m->alive[p])
			continue;
		for (t = 0; t < opts.threads; t++) {
			struct fz_tshm *ts = &shm->t[p][t];
			uint64_t prog = atomic_load(&ts->progress);

			if (prog != m->last_progress[p][t] || atomic_load(&ts->state) != 1) {
				m->last_progress[p][t] = prog;
				m->last_change[p][t] = now;
				continue;
			}
			if (now - m->last_change[p][t] < (uint64_t)(opts.hang_timeout * 1e9))
				continue;
			m->hangs++;
			print_lock();
			out_fmt(2,
			        "\nnpu-fuzz: FAILURE: stream %d.%d made no progress for %.0f s (a "
			        "hang); its last calls:\n",
			        p, t, opts.hang_timeout);
			fz_dump_ring(shm, p, t, 32, 2);
			print_repro(2, p, t, 0);
			write_stream_files(p, t);
			print_unlock();
			atomic_store(&shm->stop, 1);
			kill(m->pid[p], SIGKILL);
			m->last_change[p][t] = now;
		}
	}
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && *s && !*end;
}

static int load_replay(const char *path)
{
	char line[256];
	FILE *f = fopen(path, "re");
	unsigned cap = 0;

	if (!f) {
		fprintf(stderr, "npu-fuzz: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s = line;
		uint64_t d;

		while (*s == ' ' || *s == '\t')
			s++;
		if (strncmp(s, "0x", 2))
			continue;
		d = strtoull(s, NULL, 16);
		if (nreplay == cap) {
			cap = cap ? cap * 2 : 256;
			replay = realloc(replay, cap * sizeof(*replay));
			if (!replay) {
				fclose(f);
				return -1;
			}
		}
		replay[nreplay++] = d;
	}
	fclose(f);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: npu-fuzz [--seed N] [--calls N | --seconds S] [--threads N] [--procs N]\n"
	        "                [--fds N] [--stream P.T] [--replay FILE] [--hang-timeout S]\n"
	        "                [--no-kcov] [--keep-going] [--out DIR] [--json FILE] [--profile]\n"
	        "(the header of tools/fuzz/main.c says what each does)\n");
}

static int parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"seed", required_argument, NULL, 's'},
	        {"calls", required_argument, NULL, 'c'},
	        {"seconds", required_argument, NULL, 'S'},
	        {"threads", required_argument, NULL, 't'},
	        {"procs", required_argument, NULL, 'p'},
	        {"fds", required_argument, NULL, 'f'},
	        {"stream", required_argument, NULL, 'x'},
	        {"replay", required_argument, NULL, 'r'},
	        {"hang-timeout", required_argument, NULL, 'H'},
	        {"no-kcov", no_argument, NULL, 'K'},
	        {"keep-going", no_argument, NULL, 'k'},
	        {"out", required_argument, NULL, 'o'},
	        {"json", required_argument, NULL, 'j'},
	        {"profile", no_argument, NULL, 'P'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	bool have_seed = false;
	uint64_t v;
	int ch;

	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!parse_u64(optarg, &opts.seed))
				return -1;
			have_seed = true;
			break;
		case 'c':
			if (!parse_u64(optarg, &opts.calls))
				return -1;
			break;
		case 'S':
			opts.seconds = strtod(optarg, NULL);
			if (opts.seconds <= 0)
				return -1;
			break;
		case 't':
			if (!parse_u64(optarg, &v) || !v || v > FZ_MAX_THREADS)
				return -1;
			opts.threads = (int)v;
			break;
		case 'p':
			if (!parse_u64(optarg, &v) || !v || v > FZ_MAX_PROCS)
				return -1;
			opts.procs = (int)v;
			break;
		case 'f':
			if (!parse_u64(optarg, &v) || !v || v > FZ_MAX_FDS)
				return -1;
			opts.fds = (int)v;
			break;
		case 'x':
			if (sscanf(optarg, "%d.%d", &stream_p, &stream_t) != 2 || stream_p < 0 ||
			    stream_t < 0)
				return -1;
			opts.stream = true;
			break;
		case 'r':
			opts.replay = optarg;
			break;
		case 'H':
			opts.hang_timeout = strtod(optarg, NULL);
			if (opts.hang_timeout <= 0)
				return -1;
			break;
		case 'K':
			opts.no_kcov = true;
			break;
		case 'k':
			opts.keep_going = true;
			break;
		case 'o':
			opts.out_dir = optarg;
			break;
		case 'j':
			opts.json = optarg;
			break;
		case 'P':
			opts.profile = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (optind != argc)
		return -1;
	if (!have_seed)
		opts.seed = fz_now_ns() ^ ((uint64_t)getpid() << 32);
	if (opts.stream || opts.replay) {
		opts.threads = 1;
		opts.procs = 1;
	}
	if (!opts.calls && !opts.seconds && !opts.replay)
		opts.seconds = 10;
	return 0;
}

struct totals {
	uint64_t calls[K_COUNT], ok[K_COUNT], errs[K_COUNT][FZ_NERR], ns[K_COUNT], ops;
	uint64_t all, all_ok;
	unsigned paths;
};

static void sum(struct totals *s)
{
	int p, t, k, e;

	memset(s, 0, sizeof(*s));
	for (p = 0; p < opts.procs; p++)
		for (t = 0; t < opts.threads; t++) {
			const struct fz_tshm *ts = &shm->t[p][t];

			s->ops += ts->ops;
			for (k = 0; k < K_COUNT; k++) {
				s->calls[k] += ts->calls[k];
				s->ns[k] += ts->ns[k];
				s->ok[k] += ts->ok[k];
				for (e = 0; e < FZ_NERR; e++)
					s->errs[k][e] += ts->errs[k][e];
			}
		}
	for (k = 0; k < K_COUNT; k++) {
		s->all += s->calls[k];
		s->all_ok += s->ok[k];
		for (e = 1; e < FZ_NERR; e++)
			s->paths += s->errs[k][e] != 0;
	}
}

static void json_summary(FILE *f, const struct totals *s, const char *mode, double secs,
                         int failures, bool ok)
{
	bool first = true;
	int k, e;

	fprintf(f,
	        "{\"seed\": \"0x%llx\", \"mode\": \"%s\", \"procs\": %d, \"threads\": %d, "
	        "\"fds\": %d, \"seconds\": %.1f, \"ops\": %llu, \"calls\": %llu, \"accepted\": "
	        "%llu, "
	        "\"calls_per_s\": %.0f, \"distinct_error_paths\": %u, \"kcov_pcs\": %llu, "
	        "\"corpus\": %llu, \"kernel_reports\": %d, \"leaks\": %d, \"failures\": %d, "
	        "\"ok\": %s, "
	        "\"per_call\": {",
	        (unsigned long long)opts.seed, mode, opts.procs, opts.threads, opts.fds, secs,
	        (unsigned long long)s->ops, (unsigned long long)s->all,
	        (unsigned long long)s->all_ok, secs > 0 ? (double)s->all / secs : 0, s->paths,
	        (unsigned long long)atomic_load(&shm->pcs),
	        (unsigned long long)atomic_load(&shm->corpus), kernel_reports, leaks, failures,
	        ok ? "true" : "false");
	for (k = 0; k < K_COUNT; k++) {
		bool efirst = true;

		if (!s->calls[k])
			continue;
		fprintf(f, "%s\"%s\": {\"calls\": %llu, \"accepted\": %llu, \"errnos\": {",
		        first ? "" : ", ", fz_kind_name[k], (unsigned long long)s->calls[k],
		        (unsigned long long)s->ok[k]);
		first = false;
		for (e = 1; e < FZ_NERR; e++) {
			if (!s->errs[k][e])
				continue;
			fprintf(f, "%s\"%s\": %llu", efirst ? "" : ", ",
			        e == FZ_NERR - 1 ? "other" : errname(e),
			        (unsigned long long)s->errs[k][e]);
			efirst = false;
		}
		fprintf(f, "}}");
	}
	fprintf(f, "}}");
}

static void report(const char *mode, double secs, int failures, bool ok)
{
	struct totals s;
	char path[512];
	int k, e;

	sum(&s);
	printf("\nnpu-fuzz: %s after %.1f s: seed 0x%llx, mode %s, %d process(es) x %d thread(s), "
	       "%d file(s) each\n",
	       ok ? "PASS" : "FAIL", secs, (unsigned long long)opts.seed, mode, opts.procs,
	       opts.threads, opts.fds);
	printf("  calls made:            %llu (%.0f/s), in %llu ops\n", (unsigned long long)s.all,
	       secs > 0 ? (double)s.all / secs : 0, (unsigned long long)s.ops);
	printf("  calls accepted:        %llu (%.1f%%)\n", (unsigned long long)s.all_ok,
	       s.all ? 100.0 * (double)s.all_ok / (double)s.all : 0);
	printf("  distinct error paths:  %u (call, errno) pairs\n", s.paths);
	if (atomic_load(&shm->pcs))
		printf("  KCOV PCs:              %llu (corpus: %llu programs kept)\n",
		       (unsigned long long)atomic_load(&shm->pcs),
		       (unsigned long long)atomic_load(&shm->corpus));
	else
		printf("  KCOV PCs:              n/a\n");
	printf("  kernel reports:        %d\n", kernel_reports);
	printf("  left behind:           %s\n",
	       leaks ? "yes (see above)" : "nothing (BOs, device memory, queues)");
	printf("  failures:              %d\n", failures);
	printf("  %-24s %12s %12s  %s\n", "call", "made", "accepted", "errnos seen");
	for (k = 0; k < K_COUNT; k++) {
		char errs[512] = "";
		size_t len = 0;

		if (!s.calls[k])
			continue;
		for (e = 1; e < FZ_NERR; e++)
			if (s.errs[k][e] && len < sizeof(errs) - 32)
				len += (size_t)snprintf(errs + len, sizeof(errs) - len, "%s%s:%llu",
				                        len ? " " : "",
				                        e == FZ_NERR - 1 ? "other" : errname(e),
				                        (unsigned long long)s.errs[k][e]);
		if (opts.profile)
			len += (size_t)snprintf(
			        errs + len, sizeof(errs) - len, "  [%.1f us each, %.1f s in all]",
			        (double)s.ns[k] / 1e3 / (double)s.calls[k], (double)s.ns[k] / 1e9);
		printf("  %-24s %12llu %12llu  %s\n", fz_kind_name[k],
		       (unsigned long long)s.calls[k], (unsigned long long)s.ok[k], errs);
	}
	if (opts.out_dir) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/summary.json", opts.out_dir);
		f = fopen(path, "we");
		if (f) {
			json_summary(f, &s, mode, secs, failures, ok);
			fputc('\n', f);
			fclose(f);
		}
	}
	if (opts.json) {
		FILE *f = fopen(opts.json, "we");

		if (f) {
			json_summary(f, &s, mode, secs, failures, ok);
			fputc('\n', f);
			fclose(f);
		}
	}
	printf("NPU_FUZZ_SUMMARY ");
	json_summary(stdout, &s, mode, secs, failures, ok);
	printf("\n");
}

int main(int argc, char **argv)
{
	struct monitor m = {0};
	const char *mode;
	uint64_t start, now, stop_at = 0, stopped_at = 0, last_progress;
	struct pollfd pfd[FZ_MAX_PROCS + 1];
	int kfd, p, t, alive, failures, kills = 0;
	bool ok;

	if (parse_args(argc, argv)) {
		usage(stderr);
		return 2;
	}
	if (opts.replay && load_replay(opts.replay))
		return 2;
	if (!opts.hang_timeout)
		opts.hang_timeout = 2.0 * job_timeout_ms() * DRM_NPU_JOB_TIMEOUT_FACTOR / 1000 + 30;
	if (opts.out_dir)
		mkdir(opts.out_dir, 0755);
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
	           MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (shm == MAP_FAILED) {
		perror("npu-fuzz: shared memory");
		return 2;
	}
	shm->procs = opts.procs;
	shm->threads = opts.threads;
	mode = !opts.no_kcov && fz_kcov_available() ? "coverage-guided (KCOV)"
	       : opts.no_kcov                       ? "random (--no-kcov)"
	                                            : "random (no /sys/kernel/debug/kcov)";
	printf("npu-fuzz: seed 0x%llx, %s, %d process(es) x %d thread(s) x %d file(s), %s%s\n",
	       (unsigned long long)opts.seed, mode, opts.procs, opts.threads, opts.fds,
	       opts.replay ? "replaying " : "", opts.replay ? opts.replay : "");
	fflush(stdout);

	kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kfd >= 0)
		lseek(kfd, 0, SEEK_END);
	else
		fprintf(stderr, "npu-fuzz: cannot read /dev/kmsg (%s): kernel reports go unseen\n",
		        strerror(errno));

	take_baseline();
	start = fz_now_ns();
	last_progress = start;
	if (opts.seconds)
		stop_at = start + (uint64_t)(opts.seconds * 1e9);
	for (p = 0; p < opts.procs; p++) {
		m.pid[p] = fork();
		if (m.pid[p] < 0) {
			perror("npu-fuzz: fork");
			atomic_store(&shm->stop, 1);
			break;
		}
		if (!m.pid[p]) {
			if (kfd >= 0)
				close(kfd);
			_exit(worker_main(p));
		}
		m.pidfd[p] = (int)syscall(SYS_pidfd_open, m.pid[p], 0);
		m.alive[p] = true;
		/*
		 * The watchdog's clock starts now, not at boot: a first call
		 * still in the kernel at its first look was taken for one that
		 * had made no progress since time 0 (a false hang, seen on
		 * the debug kernel).
		 */
		for (t = 0; t < opts.threads; t++)
			m.last_change[p][t] = start;
	}

	for (;;) {
		int n = 0;

		for (p = 0, alive = 0; p < opts.procs; p++)
			alive += m.alive[p];
		if (!alive)
			break;
		if (kfd >= 0)
			pfd[n++] = (struct pollfd){.fd = kfd, .events = POLLIN};
		for (p = 0; p < opts.procs; p++)
			if (m.alive[p])
				pfd[n++] = (struct pollfd){.fd = m.pidfd[p], .events = POLLIN};
		poll(pfd, (nfds_t)n, 500);
		if (kfd >= 0)
			drain_kmsg(kfd);
		for (p = 0; p < opts.procs; p++) {
			struct pollfd x = {.fd = m.pidfd[p], .events = POLLIN};

			if (m.alive[p] && poll(&x, 1, 0) == 1)
				reap(&m, p);
		}
		now = fz_now_ns();
		watchdog(&m, now);
		if (now - last_progress >= 60000000000ull) {
			/* A line a minute, so a long run shows it lives. */
			last_progress = now;
			progress_line(start, now);
		}
		if (stop_at && now >= stop_at)
			atomic_store(&shm->stop, 1);
		if (atomic_load(&shm->stop) && !stopped_at)
			stopped_at = now;
		/* Asked to stop and still running well past a call's bound: a hang. */
		if (stopped_at && now - stopped_at > (uint64_t)(opts.hang_timeout * 1e9)) {
			if (kills++) {
				/* Killed and still there: stuck in the kernel. */
				out_str(2, "npu-fuzz: a killed worker does not exit: giving up on "
				           "it\n");
				break;
			}
			for (p = 0; p < opts.procs; p++)
				if (m.alive[p]) {
					m.hangs++;
					out_fmt(2,
					        "npu-fuzz: FAILURE: worker %d did not stop within "
					        "%.0f s\n",
					        p, opts.hang_timeout);
					kill(m.pid[p], SIGKILL);
				}
			stopped_at = now;
		}
	}
	if (kfd >= 0)
		drain_kmsg(kfd);
	if (atomic_load(&shm->injected))
		disarm_injection();
	if (!m.no_node)
		check_leaks();
	if (kfd >= 0) {
		drain_kmsg(kfd);
		close(kfd);
	}
	failures = atomic_load(&shm->failures) + m.hangs + m.crashes + kernel_reports + leaks;
	ok = !failures && !m.no_node;
	if (m.no_node)
		return 2;
	report(mode, (double)(fz_now_ns() - start) / 1e9, failures, ok);
	return ok ? 0 : 1;
}

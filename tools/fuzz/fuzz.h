/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * npu-fuzz: shared definitions. See main.c for what the fuzzer does and how
 * to run it.
 *
 * A call is described by a 64-bit genome (struct desc, below): which action,
 * on which of the process's files, which mutation of which field, and a seed
 * for every other choice. The executor turns a genome into arguments against
 * the process's pools of live objects (BOs, mappings, queues, syncobjs,
 * points, dma-bufs) at the time it runs, so a sequence of genomes replays
 * the same intent whatever handles the kernel hands out, as syzkaller's
 * programs refer to resources by the call that made them.
 */
#ifndef NPU_FUZZ_H
#define NPU_FUZZ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <npu_drm.h>

#define FZ_MAX_PROCS 16
#define FZ_MAX_THREADS 16
#define FZ_MAX_FDS 8
#define FZ_MAX_NODES 16
/* Entries of each thread's log of recent calls. */
#define FZ_RING 1024
/* errno values counted one by one; larger ones (kernel-internal codes that
 * must never reach user space) share the last slot.
 */
#define FZ_NERR 136

/* Pool sizes, per file. Small, so that most picks hit a live object. */
#define FZ_NBO 16
#define FZ_NMAP 24
#define FZ_NQ 8
#define FZ_NSO 8
#define FZ_NCPU 4
#define FZ_NFREED 8
/* Per process: dma-buf and syncobj/sync_file fds, userptr regions. */
#define FZ_NDMABUF 8
#define FZ_NSYNCFD 4
#define FZ_NREGION 4
#define FZ_REGION_SIZE (2u << 20)

/* Every mapping slot has its own 16 MiB window; mappings stay inside it. */
#define FZ_MAP_WINDOW (16ull << 20)

#define FZ_PAGE 4096ull

/* What the executor did: the system calls, for statistics and the log. */
enum fz_kind {
	K_QUERY,
	K_BO_CREATE,
	K_BO_USERPTR,
	K_BO_INFO,
	K_VM_BIND,
	K_VM_ACCESS,
	K_CONTEXT_INFO,
	K_QUEUE_CREATE,
	K_QUEUE_DESTROY,
	K_SUBMIT,
	K_QUEUE_STATUS,
	K_QUEUE_RESET,
	K_GEM_CLOSE,
	K_PRIME_TO_FD,
	K_PRIME_TO_HANDLE,
	K_SYNCOBJ_CREATE,
	K_SYNCOBJ_DESTROY,
	K_SYNCOBJ_WAIT,
	K_SYNCOBJ_TIMELINE_WAIT,
	K_SYNCOBJ_QUERY,
	K_SYNCOBJ_TRANSFER,
	K_SYNCOBJ_SIGNAL,
	K_SYNCOBJ_TIMELINE_SIGNAL,
	K_SYNCOBJ_RESET,
	K_SYNCOBJ_TO_FD,
	K_SYNCOBJ_TO_HANDLE,
	K_MMAP,
	K_MUNMAP,
	K_MADVISE,
	K_FORK,
	K_REOPEN,
	K_INJECT,
	K_PROC_READ,
	K_COUNT
};

/* The actions a genome names. */
enum fz_op {
	OP_QUERY,
	OP_BO_CREATE,
	OP_BO_USERPTR,
	OP_BO_INFO,
	OP_VM_MAP,
	OP_VM_UNMAP,
	OP_VM_ACCESS,
	OP_CONTEXT_INFO,
	OP_QUEUE_CREATE,
	OP_QUEUE_DESTROY,
	OP_SUBMIT,
	OP_QUEUE_STATUS,
	OP_QUEUE_RESET,
	OP_GEM_CLOSE,
	OP_PRIME_EXPORT,
	OP_PRIME_IMPORT,
	OP_SYNCOBJ_CREATE,
	OP_SYNCOBJ_DESTROY,
	OP_SYNCOBJ_WAIT,
	OP_SYNCOBJ_QUERY,
	OP_SYNCOBJ_TRANSFER,
	OP_SYNCOBJ_SIGNAL,
	OP_SYNCOBJ_EXPORT,
	OP_SYNCOBJ_IMPORT,
	OP_MMAP,
	OP_MUNMAP,
	OP_HOST_REMAP,
	OP_FORK,
	OP_REOPEN,
	OP_INJECT,
	OP_PROC_READ,
	OP_COUNT
};

/*
 * The genome of a call, packed into 64 bits:
 *   bits  0..7   op (enum fz_op, modulo OP_COUNT)
 *   bits  8..15  file slot (modulo the process's files)
 *   bits 16..23  mutation: 0 none, else its class (see calls.c)
 *   bits 24..31  which field the mutation hits (modulo the op's fields)
 *   bits 32..63  seed of every other choice
 */
static inline unsigned desc_op(uint64_t d)
{
	return (unsigned)(d & 0xff) % OP_COUNT;
}
static inline unsigned desc_fd(uint64_t d)
{
	return (unsigned)(d >> 8) & 0xff;
}
static inline unsigned desc_mut(uint64_t d)
{
	return (unsigned)(d >> 16) & 0xff;
}
static inline unsigned desc_field(uint64_t d)
{
	return (unsigned)(d >> 24) & 0xff;
}
static inline uint64_t desc_make(unsigned op, unsigned fd, unsigned mut, unsigned field,
                                 uint32_t seed)
{
	return (uint64_t)op | (uint64_t)(fd & 0xff) << 8 | (uint64_t)(mut & 0xff) << 16 |
	       (uint64_t)(field & 0xff) << 24 | (uint64_t)seed << 32;
}

/* splitmix64: fast, and every state is a good seed. */
static inline uint64_t fz_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static inline uint64_t fz_below(uint64_t *s, uint64_t n)
{
	return n ? fz_rand(s) % n : 0;
}
/* True with probability 1/n. */
static inline bool fz_one_in(uint64_t *s, uint64_t n)
{
	return fz_below(s, n) == 0;
}

/* One entry of a thread's call log (in shared memory: the monitor prints it). */
struct fz_rec {
	uint64_t desc;
	uint64_t seq; /* the op's index in its thread's stream */
	uint64_t a[4]; /* the call's main arguments; [3]: what it returned */
	uint16_t kind; /* enum fz_kind */
	int16_t err; /* errno, 0, or FZ_ERR_PENDING while in the kernel */
	uint8_t child; /* issued by a forked child */
	uint8_t pad[3];
};
#define FZ_ERR_PENDING 0x7fff

/* A thread's statistics and log, in memory shared with the monitor. */
struct fz_tshm {
	_Atomic uint64_t progress; /* ops done; the watchdog watches it move */
	_Atomic uint64_t head; /* entries written to ring */
	_Atomic int state; /* 0 idle, 1 running, 2 done */
	uint64_t stream_seed;
	uint64_t ops;
	uint64_t calls[K_COUNT];
	uint64_t ok[K_COUNT];
	uint64_t errs[K_COUNT][FZ_NERR];
	uint64_t ns[K_COUNT]; /* --profile: time in each kind of call */
	struct fz_rec ring[FZ_RING];
};

/* The PC set of coverage, shared by every process (open addressing). */
#define FZ_PC_BITS 20

struct fz_shm {
	_Atomic int stop;
	_Atomic int failures;
	_Atomic uint64_t pcs;
	_Atomic uint64_t corpus;
	_Atomic int injected; /* fault injection was armed: disarm it at the end */
	_Atomic int print_lock;
	int procs, threads;
	struct fz_tshm t[FZ_MAX_PROCS][FZ_MAX_THREADS];
	_Atomic uint64_t pc_table[1u << FZ_PC_BITS];
};

/* Pools: what a file holds, as far as the fuzzer knows. */
struct fz_bo {
	uint32_t handle;
	uint32_t kind;
	uint64_t size;
	uint64_t mmap_off;
	bool ro;
	bool live;
};

struct fz_map {
	uint64_t addr;
	uint64_t size;
	uint32_t handle;
	bool ro;
	bool live;
};

struct fz_queue {
	uint32_t id;
	uint32_t syncobj;
	uint32_t cls;
	uint32_t since_wait;
	uint64_t point;
	bool live;
	bool error;
	bool tampered; /* its timeline was signalled or transferred into */
};

struct fz_sobj {
	uint32_t handle;
	uint64_t point; /* highest point with a fence (timeline use) */
	bool live;
	bool has_fence;
	bool shared; /* also a syncobj of another file: it changes behind our back */
};

struct fz_cpumap {
	void *p;
	size_t len;
};

struct fz_fd {
	pthread_mutex_t lock;
	int fd;
	int node; /* index into fz_proc.nodes */
	uint32_t gen;
	_Atomic uint64_t epoch; /* bumped on every change of the pools below */
	bool tainted; /* a forked child used the file since it was opened */
	uint64_t va_base;
	struct fz_bo bo[FZ_NBO];
	struct fz_map map[FZ_NMAP];
	struct fz_queue q[FZ_NQ];
	struct fz_sobj so[FZ_NSO];
	struct fz_cpumap cpu[FZ_NCPU];
	uint32_t freed_bo[FZ_NFREED];
	uint32_t freed_q[FZ_NFREED];
	uint32_t freed_so[FZ_NFREED];
	unsigned nfreed_bo, nfreed_q, nfreed_so;
};

struct fz_node {
	char path[288];
	struct drm_npu_device_info info;
	uint32_t engine_class[32];
	char debugfs[300]; /* its debugfs folder (fault injection), or "" */
};

enum fz_syncfd_kind { SF_NONE, SF_SYNC_FILE, SF_SYNCOBJ };

/* A corpus program: genomes executed in order. */
#define FZ_PROG_MAX 12
struct fz_prog {
	uint8_t n;
	uint64_t d[FZ_PROG_MAX];
};
#define FZ_CORPUS_MAX 8192

struct fz_proc {
	int index;
	int nfds;
	struct fz_fd fds[FZ_MAX_FDS];
	int nnodes;
	struct fz_node nodes[FZ_MAX_NODES];
	pthread_mutex_t plock; /* dmabufs, syncfds, regions, corpus */
	int dmabuf[FZ_NDMABUF];
	int syncfd[FZ_NSYNCFD];
	int syncfd_kind[FZ_NSYNCFD];
	uint8_t *region[FZ_NREGION];
	uint8_t *ro_page; /* a read-only page: a bad pointer for kernel writes */
	uint64_t total_ram;
	unsigned job_timeout_ms;
	struct fz_prog *corpus;
	unsigned ncorpus;
};

struct fz_opts {
	uint64_t seed;
	uint64_t calls; /* total, 0: no limit */
	double seconds; /* 0: no limit */
	int threads, procs, fds;
	int stream_proc, stream_thread; /* --stream: the one stream to run */
	bool stream;
	bool no_kcov;
	bool keep_going;
	double hang_timeout;
	const char *replay;
	const char *out_dir;
	const char *json;
	bool profile;
};

/* A thread's state. */
struct fz_ctx {
	struct fz_proc *p;
	struct fz_shm *shm;
	struct fz_tshm *t;
	const struct fz_opts *o;
	int proc_index, thread_index;
	uint64_t rng; /* the stream: genomes, corpus choices */
	uint64_t lr; /* the current call's choices */
	uint64_t desc;
	uint64_t seq;
	uint64_t quota; /* calls this thread may make; 0: no limit */
	uint64_t ncalls;
	bool mutated; /* the current call carries a mutation */
	bool bad_ptr; /* ... of a user pointer */
	bool bad_fd; /* ... of a file descriptor argument */
	bool must_fail; /* ... that the driver must refuse (pad, unknown flag) */
	const char *why; /* ... and what it was */
	bool must_fail_pool; /* ... if the pool's view of the object was right */
	bool invalid; /* no live object to build a valid call from */
	bool pkt_mut; /* the mutation is for a packet of the command buffer */
	const void *arg; /* the ioctl's argument while it runs, for reports */
	struct fz_rec *last; /* the last call's log entry */
	uint64_t t0; /* --profile: when the call began */
	unsigned arg_size;
	bool in_child;
	bool new_cov;
	/* Guarded buffers (each followed by an inaccessible page). */
	uint8_t *cmds; /* FZ_CMDS_SIZE */
	uint8_t *arr; /* FZ_ARR_SIZE: fences, handles, points */
	uint8_t *io; /* FZ_IO_SIZE: VM_ACCESS, QUERY answers */
	/* KCOV */
	int kcov_fd;
	_Atomic uint64_t *cover;
};

#define FZ_CMDS_SIZE (64u << 10)
#define FZ_ARR_SIZE (16u << 10)
#define FZ_IO_SIZE (256u << 10)
#define FZ_COVER_SIZE (256u << 10) /* PCs per call, at most */

/* calls.c */
extern const char *const fz_kind_name[K_COUNT];
extern const char *const fz_op_name[OP_COUNT];
extern const unsigned fz_op_weight[OP_COUNT];
uint64_t fz_gen_desc(struct fz_ctx *c);
void fz_exec(struct fz_ctx *c, uint64_t desc);
int fz_fd_open(struct fz_proc *p, int slot, int node);

/* packets.c */
uint32_t fz_gen_cmds(struct fz_ctx *c, struct fz_fd *f, uint32_t cls);
uint64_t fz_mut_addr(struct fz_ctx *c, struct fz_fd *f, uint64_t old);

/* kcov.c */
bool fz_kcov_available(void);
int fz_kcov_open(struct fz_ctx *c);
void fz_kcov_start(struct fz_ctx *c);
void fz_kcov_collect(struct fz_ctx *c);
void fz_corpus_add(struct fz_ctx *c, const uint64_t *d, unsigned n);
unsigned fz_corpus_pick(struct fz_ctx *c, uint64_t *d);

/* main.c */
void fz_fail(struct fz_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fz_dump_ring(const struct fz_shm *shm, int proc, int thread, unsigned last, int out_fd);
uint64_t fz_now_ns(void);

/* Pool helpers (calls.c, packets.c). */
void fz_lock(struct fz_ctx *c, struct fz_fd *f);
void fz_unlock(struct fz_ctx *c, struct fz_fd *f);
void fz_plock(struct fz_ctx *c);
void fz_punlock(struct fz_ctx *c);

#endif /* NPU_FUZZ_H */

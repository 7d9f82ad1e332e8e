// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu-fuzz: what every call is, how a valid one is made from the pools, how
 * one field of it is mutated, and which results are wrong.
 *
 * Each op builds its arguments from the current file's pools under the
 * file's lock, drops the lock for the system call, and records what the
 * call made. The oracle (fz_check) knows which errno values each call may
 * return: a valid call whose pool snapshot still held when it ran (strict:
 * one thread, no forked child since the file was opened, no other change to
 * the pool meanwhile) may only fail the ways the hardware state explains
 * (a queue faulted meanwhile, device memory full); any call may fail the
 * documented ways once mutated; none may return an errno the ABI does not
 * know (ENOTTY, EBADF on a live file, kernel-internal codes), EFAULT for
 * pointers that were valid, or accept a non-zero reserved field or an
 * unknown flag of the npu uAPI.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#ifndef offsetofend
#define offsetofend(t, m) (offsetof(t, m) + sizeof(((t *)0)->m))
#endif

const char *const fz_kind_name[K_COUNT] = {
        [K_QUERY] = "QUERY",
        [K_BO_CREATE] = "BO_CREATE",
        [K_BO_USERPTR] = "BO_FROM_USERPTR",
        [K_BO_INFO] = "BO_INFO",
        [K_VM_BIND] = "VM_BIND",
        [K_VM_ACCESS] = "VM_ACCESS",
        [K_CONTEXT_INFO] = "CONTEXT_INFO",
        [K_QUEUE_CREATE] = "QUEUE_CREATE",
        [K_QUEUE_DESTROY] = "QUEUE_DESTROY",
        [K_SUBMIT] = "SUBMIT",
        [K_QUEUE_STATUS] = "QUEUE_STATUS",
        [K_QUEUE_RESET] = "QUEUE_RESET",
        [K_GEM_CLOSE] = "GEM_CLOSE",
        [K_PRIME_TO_FD] = "PRIME_HANDLE_TO_FD",
        [K_PRIME_TO_HANDLE] = "PRIME_FD_TO_HANDLE",
        [K_SYNCOBJ_CREATE] = "SYNCOBJ_CREATE",
        [K_SYNCOBJ_DESTROY] = "SYNCOBJ_DESTROY",
        [K_SYNCOBJ_WAIT] = "SYNCOBJ_WAIT",
        [K_SYNCOBJ_TIMELINE_WAIT] = "SYNCOBJ_TIMELINE_WAIT",
        [K_SYNCOBJ_QUERY] = "SYNCOBJ_QUERY",
        [K_SYNCOBJ_TRANSFER] = "SYNCOBJ_TRANSFER",
        [K_SYNCOBJ_SIGNAL] = "SYNCOBJ_SIGNAL",
        [K_SYNCOBJ_TIMELINE_SIGNAL] = "SYNCOBJ_TIMELINE_SIGNAL",
        [K_SYNCOBJ_RESET] = "SYNCOBJ_RESET",
        [K_SYNCOBJ_TO_FD] = "SYNCOBJ_HANDLE_TO_FD",
        [K_SYNCOBJ_TO_HANDLE] = "SYNCOBJ_FD_TO_HANDLE",
        [K_MMAP] = "mmap",
        [K_MUNMAP] = "munmap",
        [K_MADVISE] = "madvise",
        [K_FORK] = "fork",
        [K_REOPEN] = "reopen",
        [K_INJECT] = "inject (debugfs)",
        [K_PROC_READ] = "fdinfo/debugfs read",
};

const char *const fz_op_name[OP_COUNT] = {
        [OP_QUERY] = "query",
        [OP_BO_CREATE] = "bo_create",
        [OP_BO_USERPTR] = "bo_userptr",
        [OP_BO_INFO] = "bo_info",
        [OP_VM_MAP] = "vm_map",
        [OP_VM_UNMAP] = "vm_unmap",
        [OP_VM_ACCESS] = "vm_access",
        [OP_CONTEXT_INFO] = "context_info",
        [OP_QUEUE_CREATE] = "queue_create",
        [OP_QUEUE_DESTROY] = "queue_destroy",
        [OP_SUBMIT] = "submit",
        [OP_QUEUE_STATUS] = "queue_status",
        [OP_QUEUE_RESET] = "queue_reset",
        [OP_GEM_CLOSE] = "gem_close",
        [OP_PRIME_EXPORT] = "prime_export",
        [OP_PRIME_IMPORT] = "prime_import",
        [OP_SYNCOBJ_CREATE] = "syncobj_create",
        [OP_SYNCOBJ_DESTROY] = "syncobj_destroy",
        [OP_SYNCOBJ_WAIT] = "syncobj_wait",
        [OP_SYNCOBJ_QUERY] = "syncobj_query",
        [OP_SYNCOBJ_TRANSFER] = "syncobj_transfer",
        [OP_SYNCOBJ_SIGNAL] = "syncobj_signal",
        [OP_SYNCOBJ_EXPORT] = "syncobj_export",
        [OP_SYNCOBJ_IMPORT] = "syncobj_import",
        [OP_MMAP] = "mmap",
        [OP_MUNMAP] = "munmap",
        [OP_HOST_REMAP] = "host_remap",
        [OP_FORK] = "fork",
        [OP_REOPEN] = "reopen",
        [OP_INJECT] = "inject",
        [OP_PROC_READ] = "proc_read",
};

/* Relative frequency of each op in fresh genomes. */
const unsigned fz_op_weight[OP_COUNT] = {
        [OP_QUERY] = 350,
        [OP_BO_CREATE] = 450,
        [OP_BO_USERPTR] = 160,
        [OP_BO_INFO] = 350,
        [OP_VM_MAP] = 800,
        [OP_VM_UNMAP] = 330,
        [OP_VM_ACCESS] = 550,
        [OP_CONTEXT_INFO] = 120,
        [OP_QUEUE_CREATE] = 220,
        [OP_QUEUE_DESTROY] = 110,
        [OP_SUBMIT] = 3200,
        [OP_QUEUE_STATUS] = 380,
        [OP_QUEUE_RESET] = 180,
        [OP_GEM_CLOSE] = 300,
        [OP_PRIME_EXPORT] = 140,
        [OP_PRIME_IMPORT] = 140,
        [OP_SYNCOBJ_CREATE] = 150,
        [OP_SYNCOBJ_DESTROY] = 80,
        [OP_SYNCOBJ_WAIT] = 350,
        [OP_SYNCOBJ_QUERY] = 150,
        [OP_SYNCOBJ_TRANSFER] = 120,
        [OP_SYNCOBJ_SIGNAL] = 120,
        [OP_SYNCOBJ_EXPORT] = 80,
        [OP_SYNCOBJ_IMPORT] = 80,
        [OP_MMAP] = 120,
        [OP_MUNMAP] = 100,
        [OP_HOST_REMAP] = 20,
        [OP_FORK] = 3,
        [OP_REOPEN] = 4,
        [OP_INJECT] = 12,
        [OP_PROC_READ] = 40,
};

/* One genome in four carries a mutation. */
#define FZ_MUT_ONE_IN 4

uint64_t fz_gen_desc(struct fz_ctx *c)
{
	static unsigned total;
	unsigned op = 0, pick, fd, mut = 0;
	uint64_t r = fz_rand(&c->rng);

	if (!total)
		for (op = 0; op < OP_COUNT; op++)
			total += fz_op_weight[op];
	pick = (unsigned)(r % total);
	for (op = 0; op < OP_COUNT - 1 && pick >= fz_op_weight[op]; op++)
		pick -= fz_op_weight[op];
	fd = (unsigned)(r >> 32) & 0xff;
	if (((r >> 40) & 0xff) % FZ_MUT_ONE_IN == 0)
		mut = 1 + (unsigned)((r >> 48) & 0x7f);
	return desc_make(op, fd, mut, (unsigned)(r >> 56), (uint32_t)fz_rand(&c->rng));
}

void fz_lock(struct fz_ctx *c, struct fz_fd *f)
{
	if (!c->in_child)
		pthread_mutex_lock(&f->lock);
}

void fz_unlock(struct fz_ctx *c, struct fz_fd *f)
{
	if (!c->in_child)
		pthread_mutex_unlock(&f->lock);
}

/* A forked child has no other threads: it takes no locks (they may be held). */
void fz_plock(struct fz_ctx *c)
{
	if (!c->in_child)
		pthread_mutex_lock(&c->p->plock);
}

void fz_punlock(struct fz_ctx *c)
{
	if (!c->in_child)
		pthread_mutex_unlock(&c->p->plock);
}

static void pool_changed(struct fz_fd *f)
{
	atomic_fetch_add_explicit(&f->epoch, 1, memory_order_relaxed);
}

static struct fz_fd *cur_fd(struct fz_ctx *c)
{
	return &c->p->fds[desc_fd(c->desc) % c->p->nfds];
}

static struct fz_fd *other_fd(struct fz_ctx *c, struct fz_fd *f)
{
	int n = c->p->nfds;
	int i = (int)(f - c->p->fds);

	if (n == 1)
		return f;
	return &c->p->fds[(i + 1 + (int)fz_below(&c->lr, n - 1)) % n];
}

/* --- the oracle ------------------------------------------------------ */

/* errno sets: bit e for errno e (all below 128). */
typedef unsigned __int128 errset;
#define E(x) ((errset)1 << (x))

/* What a valid call may return in strict mode beyond 0. */
static errset base_errnos(unsigned kind)
{
	switch (kind) {
	case K_BO_CREATE:
		return E(ENOMEM);
	case K_BO_USERPTR:
		/* The regions are remapped and made read-only meanwhile. */
		return E(ENOMEM) | E(EFAULT) | E(EAGAIN) | E(EINVAL);
	case K_BO_INFO:
		return E(ENOMEM);
	case K_VM_BIND:
	case K_VM_ACCESS:
		return E(ENOMEM);
	case K_QUEUE_CREATE:
		return E(ENOMEM) | E(ENOSPC);
	case K_SUBMIT:
		/*
		 * A job of the queue faulted since: -EIO until QUEUE_RESET;
		 * the context's jobs in flight at their limit: -EAGAIN.
		 */
		return E(EIO) | E(ENOMEM) | E(EAGAIN);
	case K_QUEUE_RESET:
		return E(EBUSY);
	case K_PRIME_TO_FD:
	case K_PRIME_TO_HANDLE:
		return E(ENOMEM) | E(EMFILE);
	case K_SYNCOBJ_WAIT:
	case K_SYNCOBJ_TIMELINE_WAIT:
		/* A bounded deadline; a point without a fence is -EINVAL. */
		return E(ETIME) | E(EINVAL) | E(ENOMEM);
	case K_SYNCOBJ_CREATE:
	case K_SYNCOBJ_QUERY:
	case K_SYNCOBJ_SIGNAL:
	case K_SYNCOBJ_TIMELINE_SIGNAL:
	case K_SYNCOBJ_RESET:
		return E(ENOMEM);
	case K_SYNCOBJ_TRANSFER:
	case K_SYNCOBJ_TO_FD:
	case K_SYNCOBJ_TO_HANDLE:
		/* A source point or binary syncobj without a fence. */
		return E(EINVAL) | E(ENOMEM) | E(EMFILE);
	case K_MMAP:
		return E(ENOMEM) | E(EINVAL) | E(EACCES);
	case K_FORK:
		return E(EAGAIN) | E(ENOMEM);
	case K_REOPEN:
		return E(EMFILE) | E(ENOMEM);
	default:
		return 0;
	}
}

/* Failures a stale pool snapshot explains: the object changed meanwhile. */
#define STALE_ERRNOS \
	(E(EINVAL) | E(ENOENT) | E(EEXIST) | E(EACCES) | E(ENXIO) | E(EIO) | E(EBUSY) | E(ETIME))
/* Failures a mutated argument explains. */
#define MUTATED_ERRNOS                                                                            \
	(STALE_ERRNOS | E(EFAULT) | E(ENOMEM) | E(E2BIG) | E(EOVERFLOW) | E(ENOSPC) | E(ERANGE) | \
	 E(EOPNOTSUPP) | E(EPERM) | E(EMFILE) | E(ENODEV))

static bool errno_ok(struct fz_ctx *c, unsigned kind, int err, bool stale)
{
	errset ok = base_errnos(kind);

	if (!err)
		return true;
	if (err >= 128)
		return false;
	if (stale || c->invalid)
		ok |= STALE_ERRNOS;
	if (c->mutated)
		ok |= MUTATED_ERRNOS;
	if (c->bad_fd)
		ok |= E(EBADF);
	if (kind == K_INJECT)
		return true; /* not the driver's answer: only counted */
	if (kind == K_PROC_READ)
		return err == ENOENT; /* a file reopened meanwhile, else it reads */
	if (kind == K_FORK || kind == K_MMAP || kind == K_MUNMAP || kind == K_MADVISE)
		ok |= E(EINVAL) | E(ENOMEM) | E(EAGAIN);
	return (ok >> err) & 1;
}

static struct fz_rec *rec_begin(struct fz_ctx *c, unsigned kind, uint64_t a0, uint64_t a1,
                                uint64_t a2, uint64_t a3)
{
	uint64_t h = atomic_load_explicit(&c->t->head, memory_order_relaxed);
	struct fz_rec *r = &c->t->ring[h % FZ_RING];

	r->desc = c->desc;
	r->seq = c->seq;
	r->a[0] = a0;
	r->a[1] = a1;
	r->a[2] = a2;
	r->a[3] = a3;
	r->kind = (uint16_t)kind;
	r->err = FZ_ERR_PENDING;
	r->child = c->in_child;
	c->last = r;
	atomic_store_explicit(&c->t->head, h + 1, memory_order_release);
	if (c->o->profile)
		c->t0 = fz_now_ns();
	return r;
}

static void rec_end(struct fz_ctx *c, struct fz_rec *r, unsigned kind, int err, bool stale)
{
	r->err = (int16_t)err;
	if (c->o->profile)
		c->t->ns[kind] += fz_now_ns() - c->t0;
	c->t->calls[kind]++;
	if (!err)
		c->t->ok[kind]++;
	c->t->errs[kind][err >= 0 && err < FZ_NERR ? err : FZ_NERR - 1]++;
	c->ncalls++;
	if (!errno_ok(c, kind, err, stale))
		fz_fail(c, "%s returned %s (%d)%s%s", fz_kind_name[kind], strerror(err), err,
		        c->mutated ? " after a mutation" : " for a valid call",
		        stale ? " (pool changed meanwhile)" : "");
	else if (!err && c->must_fail && !(c->must_fail_pool && stale))
		fz_fail(c, "%s accepted what the uAPI refuses: %s", fz_kind_name[kind],
		        c->why ? c->why : "a non-zero reserved field or an unknown flag");
}

/* What the last call returned besides its errno, for the log. */
static void rec_out(struct fz_ctx *c, uint64_t v)
{
	c->last->a[3] = v;
}

/* Whether what the caller saw of @f may have changed under it. */
static bool snapshot_stale(struct fz_ctx *c, struct fz_fd *f, uint64_t epoch)
{
	return c->in_child || c->o->threads > 1 || f->tainted ||
	       atomic_load_explicit(&f->epoch, memory_order_relaxed) != epoch;
}

/*
 * Issues one ioctl on @f, logged and counted. Return: 0 or the errno.
 */
static int fz_ioctl(struct fz_ctx *c, struct fz_fd *f, unsigned kind, unsigned long req, void *arg,
                    uint64_t a0, uint64_t a1, uint64_t a2, uint64_t epoch)
{
	struct fz_rec *r = rec_begin(c, kind, a0, a1, a2, 0);
	int ret, err;

	c->arg = arg;
	c->arg_size = _IOC_SIZE(req);

	fz_kcov_start(c);
	ret = ioctl(f->fd, req, arg);
	err = ret ? errno : 0;
	fz_kcov_collect(c);
	rec_end(c, r, kind, err, snapshot_stale(c, f, epoch));
	c->arg = NULL;
	return err;
}

static uint64_t epoch_of(struct fz_fd *f)
{
	return atomic_load_explicit(&f->epoch, memory_order_relaxed);
}

/* Begins an op: the mutation state of the previous one is gone. */
static void op_begin(struct fz_ctx *c)
{
	c->mutated = false;
	c->bad_ptr = false;
	c->bad_fd = false;
	c->must_fail = false;
	c->must_fail_pool = false;
	c->invalid = false;
	c->why = NULL;
}

/* --- mutations ------------------------------------------------------- */

enum fz_fkind {
	F_PAD, /* must be zero: non-zero must fail */
	F_FLAGS, /* lim: the known bits; an unknown bit must fail */
	F_CFLAGS, /* flags of a DRM core ioctl: unknown bits, no expectation */
	F_HANDLE, /* a GEM handle */
	F_SOBJ, /* a syncobj handle */
	F_QID, /* a queue id */
	F_PTR, /* a user pointer */
	F_SIZE, /* a size or offset */
	F_VAL, /* any value */
	F_ADDR, /* a device address */
	F_COUNT, /* lim: the largest valid count */
	F_ENUM, /* lim: the number of valid values */
	F_FD, /* a file descriptor */
	F_ZERO, /* an output-only or reserved field of a core ioctl */
	F_VIRT, /* not a field: the op's own mutation (lim: its index) */
};

struct fz_field {
	uint16_t off;
	uint8_t size;
	uint8_t kind;
	uint64_t lim;
};

#define FLD(type, member, kind, lim)                                           \
	{                                                                      \
		offsetof(type, member), sizeof(((type *)0)->member), kind, lim \
	}
#define VIRT(n)                 \
	{                       \
		0, 0, F_VIRT, n \
	}

static uint64_t boundary(uint64_t *lr)
{
	unsigned n = (unsigned)fz_below(lr, 64);

	switch (fz_below(lr, 14)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return UINT64_MAX;
	case 3:
		return 1ull << n;
	case 4:
		return (1ull << n) - 1;
	case 5:
		return (1ull << n) + 1;
	case 6:
		return FZ_PAGE - 1;
	case 7:
		return FZ_PAGE + 1;
	case 8:
		return INT64_MAX;
	case 9:
		return 0x80000000ull;
	case 10:
		return UINT32_MAX;
	case 11:
		return (uint64_t)UINT32_MAX + 1;
	case 12:
		return UINT64_MAX - FZ_PAGE + 2; /* overflows when page-aligned */
	default:
		return fz_rand(lr);
	}
}

static uint32_t freed_or(struct fz_ctx *c, const uint32_t *freed, unsigned n, uint32_t dflt)
{
	if (!n)
		return dflt;
	return freed[fz_below(&c->lr, n < FZ_NFREED ? n : FZ_NFREED)];
}

/* A GEM handle of another file (a handle of this one only by chance). */
static uint32_t foreign_handle(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_fd *o = other_fd(c, f);
	uint32_t h;

	if (o == f)
		return 0x1000;
	fz_lock(c, o);
	h = o->bo[fz_below(&c->lr, FZ_NBO)].handle;
	fz_unlock(c, o);
	return h;
}

static uint64_t foreign_addr(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_fd *o = other_fd(c, f);
	struct fz_map *m;
	uint64_t a;

	if (o == f)
		return f->va_base + (1ull << 35);
	fz_lock(c, o);
	m = &o->map[fz_below(&c->lr, FZ_NMAP)];
	a = m->live ? m->addr : o->va_base;
	fz_unlock(c, o);
	return a;
}

/* An address in or next to a live mapping of @f: overlaps and edges. */
static uint64_t near_mapping(struct fz_ctx *c, struct fz_fd *f)
{
	unsigned i, start = (unsigned)fz_below(&c->lr, FZ_NMAP);
	uint64_t a = f->va_base;

	fz_lock(c, f);
	for (i = 0; i < FZ_NMAP; i++) {
		struct fz_map *m = &f->map[(start + i) % FZ_NMAP];

		if (!m->live)
			continue;
		switch (fz_below(&c->lr, 4)) {
		case 0:
			a = m->addr;
			break;
		case 1:
			a = m->addr + m->size - FZ_PAGE;
			break;
		case 2:
			a = m->addr + m->size;
			break;
		default:
			a = m->addr - FZ_PAGE;
		}
		break;
	}
	fz_unlock(c, f);
	return a;
}

uint64_t fz_mut_addr(struct fz_ctx *c, struct fz_fd *f, uint64_t old)
{
	const struct drm_npu_device_info *di = &c->p->nodes[f->node].info;

	switch (fz_below(&c->lr, 12)) {
	case 0:
		return old + 1 + fz_below(&c->lr, 7); /* misaligned */
	case 1:
		return di->va_start - FZ_PAGE;
	case 2:
		return di->va_end - FZ_PAGE;
	case 3:
		return di->va_end;
	case 4:
		return 0;
	case 5:
		return UINT64_MAX - FZ_PAGE + 1;
	case 6:
		return foreign_addr(c, f);
	case 7:
		return near_mapping(c, f);
	case 8:
		return 0xffff888000000000ull; /* a kernel address */
	case 9:
		return old + FZ_MAP_WINDOW; /* the next window: unbound */
	case 10:
		return old ^ (1ull << fz_below(&c->lr, 48));
	default:
		return boundary(&c->lr) & ~(FZ_PAGE - 1);
	}
}

static uint64_t mut_ptr(struct fz_ctx *c)
{
	c->bad_ptr = true;
	switch (fz_below(&c->lr, 8)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return (uintptr_t)(c->io + FZ_IO_SIZE); /* the guard page */
	case 3:
		return (uintptr_t)c->p->ro_page; /* fine to read, not to write */
	case 4:
		return 0xffff888000000000ull;
	case 5:
		return 0x0000800000000000ull; /* not canonical */
	case 6:
		return UINT64_MAX;
	default:
		return (uintptr_t)(c->io + FZ_IO_SIZE - 8); /* runs into the guard */
	}
}

static int mut_fd(struct fz_ctx *c, struct fz_fd *f)
{
	c->bad_fd = true;
	switch (fz_below(&c->lr, 7)) {
	case 0:
		return -1;
	case 1:
		return 0;
	case 2:
		return f->fd; /* a DRM file, not a dma-buf */
	case 3:
		return 1000; /* not open */
	case 4:
		return c->p->syncfd[fz_below(&c->lr, FZ_NSYNCFD)];
	case 5:
		return c->p->dmabuf[fz_below(&c->lr, FZ_NDMABUF)];
	default:
		return INT32_MAX;
	}
}

static void put_field(void *args, const struct fz_field *fl, uint64_t v)
{
	uint8_t *p = (uint8_t *)args + fl->off;

	switch (fl->size) {
	case 1:
		*p = (uint8_t)v;
		break;
	case 2: {
		uint16_t x = (uint16_t)v;

		memcpy(p, &x, 2);
		break;
	}
	case 4: {
		uint32_t x = (uint32_t)v;

		memcpy(p, &x, 4);
		break;
	}
	default:
		memcpy(p, &v, 8);
	}
}

static uint64_t get_field(const void *args, const struct fz_field *fl)
{
	const uint8_t *p = (const uint8_t *)args + fl->off;
	uint32_t x;
	uint64_t v;

	if (fl->size == 4) {
		memcpy(&x, p, 4);
		return x;
	}
	memcpy(&v, p, 8);
	return v;
}

/*
 * Applies the genome's mutation, if any, to one field of @args. Return: -1
 * when there was none or it hit a real field, else the index of the op's
 * own (virtual) mutation it chose.
 */
static int mutate(struct fz_ctx *c, struct fz_fd *f, void *args, const struct fz_field *fields,
                  unsigned n)
{
	const struct fz_field *fl;
	uint64_t old, v;
	unsigned bits;

	if (!desc_mut(c->desc) || !n)
		return -1;
	c->mutated = true;
	fl = &fields[desc_field(c->desc) % n];
	if (fl->kind == F_VIRT)
		return (int)fl->lim;
	old = get_field(args, fl);
	bits = fl->size * 8;
	switch (fl->kind) {
	case F_PAD:
		v = 1ull << fz_below(&c->lr, bits);
		c->must_fail = true;
		c->why = "a non-zero pad or reserved field";
		break;
	case F_FLAGS:
	case F_CFLAGS:
		if (fz_one_in(&c->lr, 3) && fl->lim) {
			v = fz_rand(&c->lr) & fl->lim; /* known flags only */
			break;
		}
		do {
			v = 1ull << fz_below(&c->lr, bits);
		} while (v & fl->lim);
		v |= old;
		if (fl->kind == F_FLAGS) {
			c->must_fail = true;
			c->why = "an unknown flag";
		}
		break;
	case F_HANDLE:
		switch (fz_below(&c->lr, 6)) {
		case 0:
			v = 0;
			break;
		case 1:
			v = freed_or(c, f->freed_bo, f->nfreed_bo, 0x77);
			break;
		case 2:
			v = foreign_handle(c, f);
			break;
		case 3:
			v = UINT32_MAX;
			break;
		case 4:
			v = f->so[fz_below(&c->lr, FZ_NSO)].handle;
			break;
		default:
			v = old + 1;
		}
		break;
	case F_SOBJ:
		switch (fz_below(&c->lr, 5)) {
		case 0:
			v = 0;
			break;
		case 1:
			v = freed_or(c, f->freed_so, f->nfreed_so, 0x77);
			break;
		case 2:
			v = f->bo[fz_below(&c->lr, FZ_NBO)].handle;
			break;
		case 3:
			v = UINT32_MAX;
			break;
		default:
			v = old + 1;
		}
		break;
	case F_QID:
		switch (fz_below(&c->lr, 5)) {
		case 0:
			v = 0;
			break;
		case 1:
			v = freed_or(c, f->freed_q, f->nfreed_q, 9);
			break;
		case 2:
			v = 256 + fz_below(&c->lr, 2);
			break;
		case 3:
			v = UINT32_MAX;
			break;
		default:
			v = old + 1;
		}
		break;
	case F_PTR:
		v = mut_ptr(c);
		break;
	case F_ADDR:
		v = fz_mut_addr(c, f, old);
		break;
	case F_COUNT:
		switch (fz_below(&c->lr, 5)) {
		case 0:
			v = 0;
			break;
		case 1:
			v = fl->lim;
			break;
		case 2:
			v = fl->lim + 1;
			break;
		case 3:
			v = fz_below(&c->lr, 2) ? UINT32_MAX : 1ull << fz_below(&c->lr, 32);
			break;
		default:
			v = old + 1;
		}
		break;
	case F_ENUM:
		switch (fz_below(&c->lr, 4)) {
		case 0:
			v = fl->lim;
			break;
		case 1:
			v = fl->lim + 1;
			break;
		case 2:
			v = UINT32_MAX;
			break;
		default:
			v = 0x80000000u | fz_below(&c->lr, 16);
		}
		break;
	case F_FD:
		v = (uint64_t)(int64_t)mut_fd(c, f);
		break;
	case F_ZERO:
		v = fz_rand(&c->lr);
		break;
	case F_SIZE:
		switch (fz_below(&c->lr, 4)) {
		case 0:
			v = old + 1;
			break;
		case 1:
			v = old + FZ_PAGE;
			break;
		case 2:
			v = old * 2;
			break;
		default:
			v = boundary(&c->lr);
		}
		break;
	default:
		v = boundary(&c->lr);
	}
	put_field(args, fl, v);
	return -1;
}

/* --- pool picking ---------------------------------------------------- */

/* A live slot, searched from a random start; or a random slot (invalid). */
#define PICK_LIVE(c, arr, n, out)                                    \
	do {                                                         \
		unsigned s_ = (unsigned)fz_below(&(c)->lr, (n)), i_; \
		(out) = &(arr)[s_];                                  \
		for (i_ = 0; i_ < (n); i_++)                         \
			if ((arr)[(s_ + i_) % (n)].live) {           \
				(out) = &(arr)[(s_ + i_) % (n)];     \
				break;                               \
			}                                            \
		if (!(out)->live)                                    \
			(c)->invalid = true;                         \
	} while (0)

static void push_freed(uint32_t *arr, unsigned *n, uint32_t v)
{
	arr[*n % FZ_NFREED] = v;
	(*n)++;
}

/* Forgets every pool entry that names syncobj @h (it was destroyed). */
static void forget_syncobj(struct fz_fd *f, uint32_t h)
{
	unsigned i;

	for (i = 0; i < FZ_NQ; i++)
		if (f->q[i].syncobj == h)
			f->q[i].syncobj = 0;
	for (i = 0; i < FZ_NSO; i++)
		if (f->so[i].handle == h)
			f->so[i].live = false;
	push_freed(f->freed_so, &f->nfreed_so, h);
}

/*
 * Syncobj @h got a fence: at timeline point @point, or (@point 0) as a
 * binary syncobj, which replaces its whole timeline; or lost it (@fence
 * false: a reset). A queue's own timeline then holds points that are not
 * jobs, or none.
 */
static void syncobj_set(struct fz_fd *f, uint32_t h, uint64_t point, bool fence)
{
	unsigned i;

	for (i = 0; i < FZ_NSO; i++) {
		struct fz_sobj *so = &f->so[i];

		if (!so->live || so->handle != h)
			continue;
		so->has_fence = fence;
		if (!point)
			so->point = 0;
		else if (point > so->point)
			so->point = point;
	}
	for (i = 0; i < FZ_NQ; i++)
		if (f->q[i].syncobj == h)
			f->q[i].tampered = true;
	pool_changed(f);
}

/* Forgets every BO slot holding GEM handle @h (it was closed). */
static void forget_handle(struct fz_fd *f, uint32_t h)
{
	unsigned i;

	for (i = 0; i < FZ_NBO; i++)
		if (f->bo[i].live && f->bo[i].handle == h)
			f->bo[i].live = false;
	push_freed(f->freed_bo, &f->nfreed_bo, h);
}

/* --- plain ioctls on a slot ----------------------------------------- */

static void gem_close(struct fz_ctx *c, struct fz_fd *f, uint32_t handle, bool mut)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_gem_close, handle, F_HANDLE, 0),
	        FLD(struct drm_gem_close, pad, F_ZERO, 0),
	};
	struct drm_gem_close a = {.handle = handle};
	uint64_t ep = epoch_of(f);
	int err;

	if (mut)
		mutate(c, f, &a, fields, 2);
	err = fz_ioctl(c, f, K_GEM_CLOSE, DRM_IOCTL_GEM_CLOSE, &a, a.handle, 0, 0, ep);
	if (!err) {
		fz_lock(c, f);
		forget_handle(f, a.handle);
		pool_changed(f);
		fz_unlock(c, f);
	}
}

static int vm_unmap(struct fz_ctx *c, struct fz_fd *f, uint64_t addr, uint64_t size,
                    struct drm_npu_vm_bind *out, bool mut)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_vm_bind, op, F_ENUM, 2),
	        FLD(struct drm_npu_vm_bind, flags, F_PAD, 0),
	        FLD(struct drm_npu_vm_bind, handle, F_PAD, 0),
	        FLD(struct drm_npu_vm_bind, pad, F_PAD, 0),
	        FLD(struct drm_npu_vm_bind, addr, F_ADDR, 0),
	        FLD(struct drm_npu_vm_bind, size, F_SIZE, 0),
	        FLD(struct drm_npu_vm_bind, bo_offset, F_PAD, 0),
	};
	struct drm_npu_vm_bind a = {.op = DRM_NPU_VM_UNMAP, .addr = addr, .size = size};
	uint64_t ep = epoch_of(f);
	int err;

	if (mut)
		mutate(c, f, &a, fields, sizeof(fields) / sizeof(fields[0]));
	err = fz_ioctl(c, f, K_VM_BIND, DRM_IOCTL_NPU_VM_BIND, &a, a.op, a.addr, a.size, ep);
	if (out)
		*out = a;
	return err;
}

/* Marks the tracked mapping at exactly @addr + @size unmapped. */
static void forget_mapping(struct fz_fd *f, uint64_t addr, uint64_t size)
{
	unsigned i;

	for (i = 0; i < FZ_NMAP; i++)
		if (f->map[i].live && f->map[i].addr == addr && f->map[i].size == size)
			f->map[i].live = false;
}

static void syncobj_destroy(struct fz_ctx *c, struct fz_fd *f, uint32_t h, bool mut)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_destroy, handle, F_SOBJ, 0),
	        FLD(struct drm_syncobj_destroy, pad, F_ZERO, 0),
	};
	struct drm_syncobj_destroy a = {.handle = h};
	uint64_t ep = epoch_of(f);

	if (mut)
		mutate(c, f, &a, fields, 2);
	if (!fz_ioctl(c, f, K_SYNCOBJ_DESTROY, DRM_IOCTL_SYNCOBJ_DESTROY, &a, a.handle, 0, 0, ep)) {
		fz_lock(c, f);
		forget_syncobj(f, a.handle);
		pool_changed(f);
		fz_unlock(c, f);
	}
}

static int queue_destroy(struct fz_ctx *c, struct fz_fd *f, unsigned kind, uint32_t id, bool mut)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_queue_destroy, queue_id, F_QID, 0),
	        FLD(struct drm_npu_queue_destroy, pad, F_PAD, 0),
	};
	struct drm_npu_queue_destroy a = {.queue_id = id};
	unsigned long req =
	        kind == K_QUEUE_DESTROY ? DRM_IOCTL_NPU_QUEUE_DESTROY : DRM_IOCTL_NPU_QUEUE_RESET;
	uint64_t ep = epoch_of(f);
	unsigned i;
	int err;

	if (mut)
		mutate(c, f, &a, fields, 2);
	err = fz_ioctl(c, f, kind, req, &a, a.queue_id, 0, 0, ep);
	if (err)
		return err;
	fz_lock(c, f);
	for (i = 0; i < FZ_NQ; i++) {
		struct fz_queue *q = &f->q[i];

		if (!q->live || q->id != a.queue_id)
			continue;
		if (kind == K_QUEUE_RESET) {
			q->error = false;
			continue;
		}
		q->live = false;
		push_freed(f->freed_q, &f->nfreed_q, q->id);
		/* Its timeline stays a syncobj of the file: keep waiting on it. */
		if (q->syncobj) {
			struct fz_sobj *so = &f->so[fz_below(&c->lr, FZ_NSO)];

			if (!so->live) {
				so->handle = q->syncobj;
				so->point = q->point;
				so->has_fence = q->point > 0;
				so->shared = q->tampered;
				so->live = true;
			}
		}
	}
	pool_changed(f);
	fz_unlock(c, f);
	return 0;
}

/* --- the ops --------------------------------------------------------- */

static void op_query(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_query, query, F_ENUM, 6),
	        FLD(struct drm_npu_query, flags, F_PAD, 0),
	        FLD(struct drm_npu_query, data_ptr, F_PTR, 0),
	        FLD(struct drm_npu_query, size, F_SIZE, 0),
	        FLD(struct drm_npu_query, pad, F_PAD, 0),
	};
	static const uint32_t sizes[] = {
	        [DRM_NPU_QUERY_DEVICE_INFO] = sizeof(struct drm_npu_device_info),
	        [DRM_NPU_QUERY_ENGINES] = sizeof(struct drm_npu_engine_info),
	        [DRM_NPU_QUERY_MEMORY] = sizeof(struct drm_npu_memory_info),
	        [DRM_NPU_QUERY_ENGINE_STATS] = sizeof(struct drm_npu_engine_stats),
	        [DRM_NPU_QUERY_DEVICE_STATS] = sizeof(struct drm_npu_device_stats),
	};
	const struct drm_npu_device_info *di = &c->p->nodes[f->node].info;
	uint32_t id = 1 + (uint32_t)fz_below(&c->lr, 5);
	struct drm_npu_query a = {.query = id, .data_ptr = (uintptr_t)c->io};
	bool array = id == DRM_NPU_QUERY_ENGINES || id == DRM_NPU_QUERY_ENGINE_STATS;
	uint64_t ep = epoch_of(f);
	uint32_t in_size;
	bool canary;
	int err;

	switch (fz_below(&c->lr, 4)) {
	case 0:
		a.size = 0; /* how big is the answer */
		break;
	case 1:
		/* one element of an array answer */
		a.size = sizes[id];
		break;
	default:
		a.size = array ? sizes[id] * di->num_engines : sizes[id];
	}
	mutate(c, f, &a, fields, 5);
	in_size = a.size;
	/* A canary past what the kernel may write: min(size, the answer's). */
	canary = a.data_ptr == (uintptr_t)c->io && in_size <= FZ_IO_SIZE - 64;
	if (canary)
		memset(c->io, 0xa5, in_size + 64);
	err = fz_ioctl(c, f, K_QUERY, DRM_IOCTL_NPU_QUERY, &a, a.query, a.size, a.data_ptr, ep);
	if (!err && !c->mutated && a.size != sizes[id] * (array ? di->num_engines : 1))
		fz_fail(c, "QUERY %u answered size %u", id, a.size);
	if (!err && canary) {
		uint32_t done = in_size < a.size ? in_size : a.size, i;

		for (i = done; i < in_size + 64; i++)
			if (c->io[i] != 0xa5) {
				fz_fail(c, "QUERY %u with size %u wrote byte %u (answer %u bytes)",
				        a.query, in_size, i, a.size);
				break;
			}
		/* The answers' pads are zero. */
		if (a.query == DRM_NPU_QUERY_DEVICE_INFO &&
		    done >= offsetofend(struct drm_npu_device_info, pad) &&
		    ((struct drm_npu_device_info *)c->io)->pad)
			fz_fail(c, "QUERY DEVICE_INFO: pad not zero");
		if (a.query == DRM_NPU_QUERY_DEVICE_STATS &&
		    done >= offsetofend(struct drm_npu_device_stats, pad) &&
		    ((struct drm_npu_device_stats *)c->io)->pad)
			fz_fail(c, "QUERY DEVICE_STATS: pad not zero");
		for (i = 0; a.query == DRM_NPU_QUERY_ENGINES &&
		            (i + 1) * sizeof(struct drm_npu_engine_info) <= done;
		     i++)
			if (((struct drm_npu_engine_info *)c->io)[i].pad)
				fz_fail(c, "QUERY ENGINES: pad of engine %u not zero", i);
	}
	if (!err && !c->mutated && id == DRM_NPU_QUERY_DEVICE_INFO && in_size &&
	    ((struct drm_npu_device_info *)c->io)->api_version >> 16 != DRM_NPU_API_VERSION_MAJOR)
		fz_fail(c, "QUERY DEVICE_INFO: api_version 0x%x",
		        ((struct drm_npu_device_info *)c->io)->api_version);
}

/* A BO size: mostly a few pages, sometimes up to 4 MiB (zeroing costs). */
static uint64_t bo_size(struct fz_ctx *c)
{
	uint64_t r = fz_below(&c->lr, 100);

	if (r < 88)
		return (1 + fz_below(&c->lr, 16)) * FZ_PAGE - fz_below(&c->lr, 2) * 100;
	if (r < 99)
		return (1 + fz_below(&c->lr, 64)) * FZ_PAGE;
	return (1 + fz_below(&c->lr, 1024)) * FZ_PAGE;
}

/*
 * A mutated size must not pin a real share of the guest's memory: sizes
 * the driver accepts are kept small, the refused ones stay as they are.
 */
static uint64_t clamp_alloc(struct fz_ctx *c, struct fz_fd *f, uint64_t size, uint32_t kind)
{
	uint64_t limit =
	        kind == DRM_NPU_BO_HOST ? c->p->total_ram : c->p->nodes[f->node].info.mem_capacity;
	uint64_t page = (size + FZ_PAGE - 1) & ~(FZ_PAGE - 1);

	if (size > (1ull << 40) || size + FZ_PAGE - 1 < size || page <= (1ull << 20))
		return size;
	if (page <= limit)
		return limit + FZ_PAGE;
	return size;
}

static void bo_slot_free(struct fz_ctx *c, struct fz_fd *f, struct fz_bo *b)
{
	uint32_t h;
	bool live;

	fz_lock(c, f);
	live = b->live;
	h = b->handle;
	fz_unlock(c, f);
	if (live)
		gem_close(c, f, h, false);
}

/* Records a new GEM handle in slot @b, unless another slot has it. */
static void bo_slot_set(struct fz_ctx *c, struct fz_fd *f, struct fz_bo *b, uint32_t handle,
                        uint32_t kind, uint64_t size, bool ro)
{
	unsigned i;

	fz_lock(c, f);
	for (i = 0; i < FZ_NBO; i++)
		if (f->bo[i].live && f->bo[i].handle == handle)
			break;
	if (i == FZ_NBO) {
		b->handle = handle;
		b->kind = kind;
		b->size = (size + FZ_PAGE - 1) & ~(FZ_PAGE - 1);
		b->mmap_off = 0;
		b->ro = ro;
		b->live = true;
	}
	pool_changed(f);
	fz_unlock(c, f);
}

static void op_bo_create(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_bo_create, size, F_SIZE, 0),
	        FLD(struct drm_npu_bo_create, kind, F_ENUM, 2),
	        FLD(struct drm_npu_bo_create, flags, F_PAD, 0),
	        FLD(struct drm_npu_bo_create, handle, F_ZERO, 0),
	        FLD(struct drm_npu_bo_create, pad, F_PAD, 0),
	};
	struct fz_bo *b = &f->bo[fz_below(&c->lr, FZ_NBO)];
	struct drm_npu_bo_create a = {
	        .size = bo_size(c),
	        .kind = fz_below(&c->lr, 5) < 3 ? DRM_NPU_BO_DEVICE : DRM_NPU_BO_HOST,
	};
	uint64_t ep;

	bo_slot_free(c, f, b);
	mutate(c, f, &a, fields, 5);
	a.size = clamp_alloc(c, f, a.size, a.kind);
	ep = epoch_of(f);
	if (fz_ioctl(c, f, K_BO_CREATE, DRM_IOCTL_NPU_BO_CREATE, &a, a.size, a.kind, 0, ep))
		return;
	rec_out(c, a.handle);
	if (!a.handle)
		fz_fail(c, "BO_CREATE returned handle 0");
	bo_slot_set(c, f, b, a.handle, a.kind, a.size, false);
}

static void op_bo_userptr(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        VIRT(0), /* user_ptr: only at memory no device write can hurt */
	        FLD(struct drm_npu_bo_userptr, size, F_SIZE, 0),
	        FLD(struct drm_npu_bo_userptr, flags, F_FLAGS, DRM_NPU_BO_USERPTR_READONLY),
	        FLD(struct drm_npu_bo_userptr, handle, F_ZERO, 0),
	        VIRT(0), /* a pointer at something else than a region */
	};
	unsigned r = (unsigned)fz_below(&c->lr, FZ_NREGION);
	uint64_t pages = FZ_REGION_SIZE / FZ_PAGE;
	uint64_t first = fz_below(&c->lr, pages);
	uint64_t n = 1 + fz_below(&c->lr, fz_one_in(&c->lr, 8) ? pages - first : 16);
	struct fz_bo *b = &f->bo[fz_below(&c->lr, FZ_NBO)];
	struct drm_npu_bo_userptr a;
	uint64_t ep;
	bool ro;

	if (first + n > pages)
		n = pages - first;
	/* The last region is mapped read-only: only READONLY pins it. */
	ro = r == FZ_NREGION - 1 || fz_one_in(&c->lr, 6);
	a = (struct drm_npu_bo_userptr){
	        .user_ptr = (uintptr_t)(c->p->region[r] + first * FZ_PAGE),
	        .size = n * FZ_PAGE,
	        .flags = ro ? DRM_NPU_BO_USERPTR_READONLY : 0,
	};
	bo_slot_free(c, f, b);
	if (mutate(c, f, &a, fields, 5) == 0) {
		switch (fz_below(&c->lr, 6)) {
		case 0:
			a.user_ptr = (uintptr_t)c->p->region[r] - FZ_PAGE; /* the guard below */
			break;
		case 4:
			a.user_ptr = (uintptr_t)c->p->region[r] + FZ_REGION_SIZE - FZ_PAGE;
			a.size = 2 * FZ_PAGE; /* into the guard above */
			break;
		case 5:
			a.user_ptr += 1 + fz_below(&c->lr, FZ_PAGE - 1); /* misaligned */
			break;
		case 1:
			a.user_ptr = (uintptr_t)c->p->ro_page;
			break;
		case 2:
			a.user_ptr = (uintptr_t)f->cpu[fz_below(&c->lr, FZ_NCPU)].p;
			break; /* a BO's own CPU mapping, or NULL */
		default:
			a.user_ptr = 0xffff888000000000ull;
		}
	}
	if (a.size > c->p->total_ram / 4 && a.size <= c->p->total_ram)
		a.size = c->p->total_ram + FZ_PAGE; /* refused before pinning */
	ep = epoch_of(f);
	if (fz_ioctl(c, f, K_BO_USERPTR, DRM_IOCTL_NPU_BO_FROM_USERPTR, &a, a.user_ptr, a.size,
	             a.flags, ep))
		return;
	rec_out(c, a.handle);
	bo_slot_set(c, f, b, a.handle, DRM_NPU_BO_USERPTR, a.size,
	            a.flags & DRM_NPU_BO_USERPTR_READONLY);
}

/* BO_INFO of slot @b; learns its size, kind and mmap offset. */
static int bo_info(struct fz_ctx *c, struct fz_fd *f, struct fz_bo *b, bool mut)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_bo_info, handle, F_HANDLE, 0),
	        FLD(struct drm_npu_bo_info, flags, F_PAD, 0),
	        FLD(struct drm_npu_bo_info, size, F_ZERO, 0),
	        FLD(struct drm_npu_bo_info, kind, F_ZERO, 0),
	        FLD(struct drm_npu_bo_info, mmap_offset, F_ZERO, 0),
	};
	struct drm_npu_bo_info a = {0};
	uint64_t ep;
	uint32_t kind;
	uint64_t size;
	bool live;
	int err;

	fz_lock(c, f);
	a.handle = b->handle;
	live = b->live;
	kind = b->kind;
	size = b->size;
	ep = epoch_of(f);
	fz_unlock(c, f);
	if (!live)
		c->invalid = true;
	if (mut)
		mutate(c, f, &a, fields, 5);
	err = fz_ioctl(c, f, K_BO_INFO, DRM_IOCTL_NPU_BO_INFO, &a, a.handle, 0, 0, ep);
	if (err)
		return err;
	if (!c->mutated && live && !snapshot_stale(c, f, ep) && kind != UINT32_MAX &&
	    (a.kind != kind || a.size != size))
		fz_fail(c, "BO_INFO of handle %u: kind %u size %llu, made as kind %u size %llu",
		        a.handle, a.kind, (unsigned long long)a.size, kind,
		        (unsigned long long)size);
	if ((a.status & ~DRM_NPU_BO_STATUS_STALE) || a.kind > DRM_NPU_BO_IMPORTED ||
	    (a.status && a.kind != DRM_NPU_BO_USERPTR) || a.size % FZ_PAGE || !a.size)
		fz_fail(c, "BO_INFO of handle %u: kind %u status 0x%x size %llu", a.handle, a.kind,
		        a.status, (unsigned long long)a.size);
	if (a.kind <= DRM_NPU_BO_HOST && !a.mmap_offset && !c->mutated)
		fz_fail(c, "BO_INFO: no mmap offset for a %s BO", a.kind ? "host" : "device");
	fz_lock(c, f);
	if (b->live && b->handle == a.handle) {
		b->kind = a.kind;
		b->size = a.size;
		b->mmap_off = a.mmap_offset;
		b->ro = b->ro && a.kind == DRM_NPU_BO_USERPTR;
	}
	fz_unlock(c, f);
	return 0;
}

static void op_bo_info(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_bo *b;

	PICK_LIVE(c, f->bo, FZ_NBO, b);
	bo_info(c, f, b, true);
}

static void op_gem_close(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_bo *b;
	uint32_t h;

	PICK_LIVE(c, f->bo, FZ_NBO, b);
	fz_lock(c, f);
	h = b->handle;
	fz_unlock(c, f);
	gem_close(c, f, h, true);
}

static void op_vm_map(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_vm_bind, op, F_ENUM, 2),
	        FLD(struct drm_npu_vm_bind, flags, F_FLAGS, DRM_NPU_VM_READONLY),
	        FLD(struct drm_npu_vm_bind, handle, F_HANDLE, 0),
	        FLD(struct drm_npu_vm_bind, pad, F_PAD, 0),
	        FLD(struct drm_npu_vm_bind, addr, F_ADDR, 0),
	        FLD(struct drm_npu_vm_bind, size, F_SIZE, 0),
	        FLD(struct drm_npu_vm_bind, bo_offset, F_SIZE, 0),
	        VIRT(0), /* overlap a live mapping */
	};
	unsigned slot = (unsigned)fz_below(&c->lr, FZ_NMAP);
	struct fz_map *m = &f->map[slot];
	struct drm_npu_vm_bind a = {.op = DRM_NPU_VM_MAP};
	uint64_t window = f->va_base + slot * FZ_MAP_WINDOW, bo_pages, off, n, ep;
	struct fz_bo *b;
	bool live, ro;
	int err;

	fz_lock(c, f);
	live = m->live;
	a.addr = m->addr;
	a.size = m->size;
	fz_unlock(c, f);
	if (live && !vm_unmap(c, f, a.addr, a.size, NULL, false)) {
		fz_lock(c, f);
		forget_mapping(f, a.addr, a.size);
		pool_changed(f);
		fz_unlock(c, f);
	}
	op_begin(c);
	PICK_LIVE(c, f->bo, FZ_NBO, b);
	fz_lock(c, f);
	bo_pages = b->size / FZ_PAGE;
	if (!bo_pages)
		bo_pages = 1;
	off = fz_below(&c->lr, bo_pages);
	if (fz_one_in(&c->lr, 2))
		off = 0;
	n = 1 + fz_below(&c->lr, bo_pages - off);
	if (fz_one_in(&c->lr, 2))
		n = bo_pages - off; /* the whole rest, the usual case */
	if (n * FZ_PAGE > FZ_MAP_WINDOW)
		n = FZ_MAP_WINDOW / FZ_PAGE;
	ro = b->ro || fz_one_in(&c->lr, 8);
	a.handle = b->handle;
	a.bo_offset = off * FZ_PAGE;
	a.size = n * FZ_PAGE;
	a.addr = window + fz_below(&c->lr, FZ_MAP_WINDOW / FZ_PAGE - n + 1) * FZ_PAGE;
	a.flags = ro ? DRM_NPU_VM_READONLY : 0;
	ep = epoch_of(f);
	fz_unlock(c, f);
	if (mutate(c, f, &a, fields, 8) == 0) {
		a.addr = near_mapping(c, f);
		c->mutated = true;
	}
	err = fz_ioctl(c, f, K_VM_BIND, DRM_IOCTL_NPU_VM_BIND, &a, a.handle, a.addr, a.size, ep);
	if (err)
		return;
	if (a.op == DRM_NPU_VM_UNMAP) {
		fz_lock(c, f);
		forget_mapping(f, a.addr, a.size);
		pool_changed(f);
		fz_unlock(c, f);
		return;
	}
	if (c->mutated) {
		/*
		 * Kept only inside its window: anything else would make later
		 * valid binds overlap it.
		 */
		if (a.addr < window || a.addr + a.size > window + FZ_MAP_WINDOW ||
		    a.addr + a.size < a.addr) {
			op_begin(c);
			if (vm_unmap(c, f, a.addr, a.size, NULL, false))
				fz_fail(c, "VM_BIND: cannot unmap the mapping just made at 0x%llx",
				        (unsigned long long)a.addr);
			return;
		}
	}
	fz_lock(c, f);
	m->addr = a.addr;
	m->size = a.size;
	m->handle = a.handle;
	m->ro = a.flags & DRM_NPU_VM_READONLY;
	m->live = true;
	pool_changed(f);
	fz_unlock(c, f);
}

static void op_vm_unmap(struct fz_ctx *c, struct fz_fd *f)
{
	struct drm_npu_vm_bind a;
	struct fz_map *m;
	uint64_t addr, size;

	PICK_LIVE(c, f->map, FZ_NMAP, m);
	fz_lock(c, f);
	addr = m->addr;
	size = m->size;
	fz_unlock(c, f);
	if (vm_unmap(c, f, addr, size, &a, true))
		return;
	fz_lock(c, f);
	forget_mapping(f, a.addr, a.size);
	pool_changed(f);
	fz_unlock(c, f);
}

static void op_vm_access(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_vm_access, addr, F_ADDR, 0),
	        FLD(struct drm_npu_vm_access, size, F_SIZE, 0),
	        FLD(struct drm_npu_vm_access, user_ptr, F_PTR, 0),
	        FLD(struct drm_npu_vm_access, flags, F_FLAGS, DRM_NPU_VM_ACCESS_WRITE),
	        FLD(struct drm_npu_vm_access, pad, F_PAD, 0),
	        FLD(struct drm_npu_vm_access, fault_addr, F_ZERO, 0),
	        VIRT(0), /* write through a read-only mapping, or past the end */
	};
	struct drm_npu_vm_access a = {.user_ptr = (uintptr_t)c->io};
	uint64_t off, len, ep;
	struct fz_map *m;
	bool ro, live;
	int err;

	PICK_LIVE(c, f->map, FZ_NMAP, m);
	fz_lock(c, f);
	live = m->live;
	ro = m->ro;
	off = fz_below(&c->lr, m->size ? m->size : 1);
	len = 1 + fz_below(&c->lr, fz_one_in(&c->lr, 4) ? 65536 : 256);
	if (len > m->size - off)
		len = m->size - off;
	if (!len)
		len = 8;
	a.addr = m->addr + off;
	a.size = len;
	ep = epoch_of(f);
	fz_unlock(c, f);
	a.flags = !ro && fz_one_in(&c->lr, 2) ? DRM_NPU_VM_ACCESS_WRITE : 0;
	if (a.flags)
		memset(c->io, (int)(c->seq & 0xff), len);
	if (mutate(c, f, &a, fields, 7) == 0) {
		a.flags = DRM_NPU_VM_ACCESS_WRITE;
		if (!ro)
			a.size = len + FZ_MAP_WINDOW; /* runs off the mapping */
	}
	err = fz_ioctl(c, f, K_VM_ACCESS, DRM_IOCTL_NPU_VM_ACCESS, &a, a.addr, a.size, a.flags, ep);
	if (err == ENXIO || err == EACCES) {
		/* The first faulting address: inside the range asked for. */
		if (a.fault_addr < a.addr ||
		    (a.addr + a.size > a.addr && a.fault_addr >= a.addr + a.size))
			fz_fail(c, "VM_ACCESS: %s at 0x%llx for 0x%llx+0x%llx", strerror(err),
			        (unsigned long long)a.fault_addr, (unsigned long long)a.addr,
			        (unsigned long long)a.size);
	} else if (!err && a.fault_addr) {
		fz_fail(c, "VM_ACCESS: success with fault_addr 0x%llx",
		        (unsigned long long)a.fault_addr);
	}
	(void)live;
}

static void op_context_info(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_context_info, flags, F_PAD, 0),
	        FLD(struct drm_npu_context_info, pad, F_PAD, 0),
	        FLD(struct drm_npu_context_info, bo_count, F_ZERO, 0),
	};
	struct drm_npu_context_info a = {0};
	uint64_t ep = epoch_of(f);

	mutate(c, f, &a, fields, 3);
	fz_ioctl(c, f, K_CONTEXT_INFO, DRM_IOCTL_NPU_CONTEXT_INFO, &a, 0, 0, 0, ep);
}

/* A writable device address for a queue's completion record. */
static uint64_t status_addr(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_map *m;
	uint64_t a;

	PICK_LIVE(c, f->map, FZ_NMAP, m);
	c->invalid = false; /* any address is valid: a faulting write is dropped */
	fz_lock(c, f);
	a = m->live && m->size >= 16 ? m->addr + (fz_below(&c->lr, m->size / 16) * 16)
	                             : f->va_base + 8;
	fz_unlock(c, f);
	return a;
}

static void op_queue_create(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_queue_create, engine_class, F_ENUM, 2),
	        FLD(struct drm_npu_queue_create, priority, F_ENUM, 3),
	        FLD(struct drm_npu_queue_create, flags, F_FLAGS, DRM_NPU_QUEUE_STATUS_WRITEBACK),
	        FLD(struct drm_npu_queue_create, queue_id, F_ZERO, 0),
	        FLD(struct drm_npu_queue_create, status_addr, F_VAL, 0),
	        VIRT(0), /* create until the context's limit, then destroy them */
	        VIRT(1), /* status_addr without the flag */
	};
	const struct fz_node *node = &c->p->nodes[f->node];
	struct fz_queue *q = &f->q[fz_below(&c->lr, FZ_NQ)];
	/* High priority needs CAP_SYS_NICE (-EACCES): root's only, here. */
	struct drm_npu_queue_create a = {
	        .engine_class = (uint32_t)fz_below(&c->lr, 2),
	        .priority = (uint32_t)fz_below(&c->lr, geteuid() ? 2 : 3),
	};
	uint32_t id, so;
	uint64_t ep;
	bool live;
	int v;

	if (fz_one_in(&c->lr, 4)) {
		a.flags = DRM_NPU_QUEUE_STATUS_WRITEBACK;
		a.status_addr = status_addr(c, f);
	}
	fz_lock(c, f);
	live = q->live;
	id = q->id;
	so = q->syncobj;
	fz_unlock(c, f);
	if (live) {
		queue_destroy(c, f, K_QUEUE_DESTROY, id, false);
		if (so)
			syncobj_destroy(c, f, so, false);
		op_begin(c);
	}
	v = mutate(c, f, &a, fields, 7);
	if (v == 0 && !fz_one_in(&c->lr, 16)) {
		/* Exhausting is 500 calls: kept rare. */
		a.priority = DRM_NPU_PRIORITY_HIGH + 1;
		c->must_fail = true;
		c->why = "an unknown priority";
		v = -1;
	}
	if (v == 0) {
		uint32_t ids[260], handles[260];
		unsigned n = 0, i;

		/* The limit is 256 per context: ENOSPC past it, nothing leaks. */
		c->mutated = true;
		while (n < 260) {
			struct drm_npu_queue_create b = {.engine_class = n & 1};

			ep = epoch_of(f);
			if (fz_ioctl(c, f, K_QUEUE_CREATE, DRM_IOCTL_NPU_QUEUE_CREATE, &b, n, 0, 0,
			             ep))
				break;
			ids[n] = b.queue_id;
			handles[n++] = b.syncobj_handle;
		}
		for (i = 0; i < n; i++) {
			struct drm_npu_queue_destroy d = {.queue_id = ids[i]};
			struct drm_syncobj_destroy s = {.handle = handles[i]};

			ep = epoch_of(f);
			fz_ioctl(c, f, K_QUEUE_DESTROY, DRM_IOCTL_NPU_QUEUE_DESTROY, &d, d.queue_id,
			         0, 0, ep);
			fz_ioctl(c, f, K_SYNCOBJ_DESTROY, DRM_IOCTL_SYNCOBJ_DESTROY, &s, s.handle,
			         0, 0, ep);
		}
		return;
	}
	if (v == 1) {
		a.flags = 0;
		a.status_addr = status_addr(c, f) | 8;
		c->must_fail = true;
		c->why = "status_addr without DRM_NPU_QUEUE_STATUS_WRITEBACK";
	}
	ep = epoch_of(f);
	if (fz_ioctl(c, f, K_QUEUE_CREATE, DRM_IOCTL_NPU_QUEUE_CREATE, &a, a.engine_class,
	             a.priority, a.status_addr, ep))
		return;
	rec_out(c, (uint64_t)a.syncobj_handle << 32 | a.queue_id);
	if (!a.queue_id || a.queue_id > 256 || a.engine_id >= node->info.num_engines ||
	    node->engine_class[a.engine_id] != a.engine_class)
		fz_fail(c, "QUEUE_CREATE: queue %u on engine %u (class %u) for class %u",
		        a.queue_id, a.engine_id,
		        a.engine_id < 32 ? node->engine_class[a.engine_id] : 99, a.engine_class);
	fz_lock(c, f);
	q->id = a.queue_id;
	q->syncobj = a.syncobj_handle;
	q->cls = a.engine_class;
	q->point = 0;
	q->since_wait = 0;
	q->error = false;
	q->live = true;
	pool_changed(f);
	fz_unlock(c, f);
}

static void op_queue_destroy(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_queue *q;
	uint32_t id, so;

	PICK_LIVE(c, f->q, FZ_NQ, q);
	fz_lock(c, f);
	id = q->id;
	so = q->syncobj;
	fz_unlock(c, f);
	if (!queue_destroy(c, f, K_QUEUE_DESTROY, id, true) && so && fz_one_in(&c->lr, 2)) {
		op_begin(c);
		syncobj_destroy(c, f, so, false);
	}
}

static void op_queue_status(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_queue_status, queue_id, F_QID, 0),
	        FLD(struct drm_npu_queue_status, flags, F_PAD, 0),
	        FLD(struct drm_npu_queue_status, submitted, F_ZERO, 0),
	};
	struct drm_npu_queue_status a = {0};
	struct fz_queue *q;
	uint64_t ep, point;
	bool strict;

	PICK_LIVE(c, f->q, FZ_NQ, q);
	fz_lock(c, f);
	a.queue_id = q->id;
	point = q->point;
	ep = epoch_of(f);
	fz_unlock(c, f);
	mutate(c, f, &a, fields, 3);
	if (fz_ioctl(c, f, K_QUEUE_STATUS, DRM_IOCTL_NPU_QUEUE_STATUS, &a, a.queue_id, 0, 0, ep))
		return;
	strict = !c->mutated && !c->invalid && !snapshot_stale(c, f, ep);
	if ((a.state == DRM_NPU_QUEUE_ERROR) != (a.error != 0) ||
	    (strict && (a.completed > a.submitted || a.submitted != point)))
		fz_fail(c,
		        "QUEUE_STATUS of queue %u: state %u error %d submitted %llu completed %llu "
		        "(%llu submitted as far as known)",
		        a.queue_id, a.state, a.error, (unsigned long long)a.submitted,
		        (unsigned long long)a.completed, (unsigned long long)point);
	if (a.error) {
		fz_lock(c, f);
		if (q->live && q->id == a.queue_id)
			q->error = true;
		fz_unlock(c, f);
	}
}

static void op_queue_reset(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_queue *q;
	uint32_t id;

	PICK_LIVE(c, f->q, FZ_NQ, q);
	fz_lock(c, f);
	id = q->id;
	fz_unlock(c, f);
	queue_destroy(c, f, K_QUEUE_RESET, id, true);
}

static uint64_t deadline_ns(struct fz_ctx *c, uint64_t max_ns)
{
	uint64_t now = fz_now_ns();

	if (fz_below(&c->lr, 10) < 7)
		return now; /* a poll */
	return now + fz_below(&c->lr, max_ns);
}

/* Waits (bounded) for a queue's last point: keeps the backlog short. */
static void queue_drain(struct fz_ctx *c, struct fz_fd *f, uint32_t so, uint64_t point)
{
	struct drm_syncobj_timeline_wait w = {
	        .handles = (uintptr_t)&so,
	        .points = (uintptr_t)&point,
	        .timeout_nsec = (int64_t)(fz_now_ns() + 200000000ull),
	        .count_handles = 1,
	};

	fz_ioctl(c, f, K_SYNCOBJ_TIMELINE_WAIT, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w, so, point, 1,
	         epoch_of(f));
}

/* In-fences from the file's timelines and signalled syncobjs. */
static uint32_t pick_fences(struct fz_ctx *c, struct fz_fd *f, struct drm_npu_fence *fe,
                            uint32_t max)
{
	uint32_t n = 0, want = fz_below(&c->lr, 2) ? 0 : 1 + (uint32_t)fz_below(&c->lr, 3);
	unsigned tries;

	if (want > max)
		want = max;
	fz_lock(c, f);
	for (tries = 0; n < want && tries < 8; tries++) {
		if (fz_below(&c->lr, 3)) {
			struct fz_queue *q = &f->q[fz_below(&c->lr, FZ_NQ)];
			uint64_t back;

			if (!q->live || !q->point || !q->syncobj)
				continue;
			if (q->tampered)
				c->invalid = true; /* its points are not only jobs */
			back = fz_below(&c->lr, q->point < 8 ? q->point : 8);
			fe[n++] = (struct drm_npu_fence){.handle = q->syncobj,
			                                 .point = q->point - back};
		} else {
			struct fz_sobj *so = &f->so[fz_below(&c->lr, FZ_NSO)];

			if (!so->live || !so->has_fence)
				continue;
			/*
			 * What a plain syncobj holds after signals, resets,
			 * transfers and imports is more than the pool models:
			 * the oracle takes only queues' timelines strictly.
			 */
			c->invalid = true;
			fe[n++] = (struct drm_npu_fence){
			        .handle = so->handle,
			        .point = so->point ? 1 + fz_below(&c->lr, so->point) : 0};
		}
	}
	fz_unlock(c, f);
	return n;
}

static void op_submit(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_npu_submit, queue_id, F_QID, 0),
	        FLD(struct drm_npu_submit, flags, F_FLAGS, DRM_NPU_SUBMIT_CALLER_WAITS),
	        FLD(struct drm_npu_submit, cmds_ptr, F_PTR, 0),
	        FLD(struct drm_npu_submit, cmds_size, F_SIZE, 0),
	        FLD(struct drm_npu_submit, in_fence_count, F_COUNT, DRM_NPU_MAX_IN_FENCES),
	        FLD(struct drm_npu_submit, in_fences_ptr, F_PTR, 0),
	        FLD(struct drm_npu_submit, point, F_ZERO, 0),
	        VIRT(0),
	        VIRT(0),
	        VIRT(0),
	        VIRT(0), /* a packet */
	        VIRT(1),
	        VIRT(1), /* an in-fence */
	};
	struct drm_npu_fence *fe = (struct drm_npu_fence *)c->arr;
	struct drm_npu_submit a = {0};
	uint32_t cls, so, id;
	struct fz_queue *q;
	uint64_t ep, point;
	bool live, error, drain = false;
	unsigned i;
	int v, err;

	PICK_LIVE(c, f->q, FZ_NQ, q);
	fz_lock(c, f);
	live = q->live;
	id = q->id;
	cls = q->cls;
	so = q->syncobj;
	point = q->point;
	error = q->error;
	if (q->since_wait >= 64 && so) {
		q->since_wait = 0;
		drain = true;
	}
	fz_unlock(c, f);
	if (drain)
		queue_drain(c, f, so, point);
	if (live && error && fz_below(&c->lr, 4)) {
		/* A faulted queue takes no work until it is reset. */
		queue_destroy(c, f, K_QUEUE_RESET, id, false);
		op_begin(c);
		if (!live)
			c->invalid = true;
	}
	a.queue_id = id;
	a.flags = fz_one_in(&c->lr, 8) ? DRM_NPU_SUBMIT_CALLER_WAITS : 0;
	a.in_fence_count = pick_fences(c, f, fe, DRM_NPU_MAX_IN_FENCES);
	a.in_fences_ptr = (uintptr_t)fe;
	a.cmds_ptr = (uintptr_t)c->cmds;
	v = mutate(c, f, &a, fields, sizeof(fields) / sizeof(fields[0]));
	/* The packets are built after the mutation picked its target. */
	c->pkt_mut = v == 0;
	a.cmds_size = fz_gen_cmds(c, f, cls);
	c->pkt_mut = false;
	if (v == 1) {
		i = a.in_fence_count ? (unsigned)fz_below(&c->lr, a.in_fence_count) : 0;
		if (!a.in_fence_count)
			a.in_fence_count = 1;
		switch (fz_below(&c->lr, 5)) {
		case 0:
			fe[i].flags = 1u << fz_below(&c->lr, 32);
			c->must_fail = true;
			c->why = "an in-fence with non-zero flags";
			break;
		case 1:
			fe[i].point = point + 1 + fz_below(&c->lr, 100); /* not submitted yet */
			fe[i].handle = so;
			break;
		case 2:
			fe[i].point = UINT64_MAX;
			break;
		case 3:
			fe[i].handle = freed_or(c, f->freed_so, f->nfreed_so, 0x55);
			break;
		default:
			/* the same fence many times */
			for (i = 1; i < DRM_NPU_MAX_IN_FENCES; i++)
				fe[i] = fe[0];
			a.in_fence_count = DRM_NPU_MAX_IN_FENCES;
		}
	} else if (c->mutated && v < 0) {
		/* A mutated cmds_size: keep it what the fields said. */
		if (desc_field(c->desc) % (sizeof(fields) / sizeof(fields[0])) == 3)
			a.cmds_size = (uint32_t)boundary(&c->lr);
	}
	ep = epoch_of(f);
	err = fz_ioctl(c, f, K_SUBMIT, DRM_IOCTL_NPU_SUBMIT, &a, a.queue_id, a.cmds_size,
	               a.in_fence_count, ep);
	rec_out(c, a.point);
	fz_lock(c, f);
	/* The queue that took the job: a mutated id may name another one. */
	for (i = 0; i < FZ_NQ; i++) {
		q = &f->q[i];
		if (!q->live || q->id != a.queue_id)
			continue;
		if (!err) {
			if (!a.point)
				fz_fail(c, "SUBMIT returned point 0");
			else if (!snapshot_stale(c, f, ep) && a.queue_id == id &&
			         a.point != point + 1)
				fz_fail(c, "SUBMIT returned point %llu after %llu",
				        (unsigned long long)a.point, (unsigned long long)point);
			if (a.point > q->point)
				q->point = a.point;
			q->since_wait++;
		} else if (err == EIO) {
			q->error = true;
		}
	}
	if (!err)
		pool_changed(f);
	fz_unlock(c, f);
}

static void op_prime_export(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_prime_handle, handle, F_HANDLE, 0),
	        FLD(struct drm_prime_handle, flags, F_CFLAGS, DRM_CLOEXEC | DRM_RDWR),
	        FLD(struct drm_prime_handle, fd, F_ZERO, 0),
	};
	struct drm_prime_handle a = {.flags = DRM_CLOEXEC, .fd = -1};
	unsigned slot = (unsigned)fz_below(&c->lr, FZ_NDMABUF);
	struct fz_bo *b;
	uint32_t kind;
	uint64_t ep;
	int old;

	PICK_LIVE(c, f->bo, FZ_NBO, b);
	fz_lock(c, f);
	a.handle = b->handle;
	kind = b->kind;
	ep = epoch_of(f);
	fz_unlock(c, f);
	if (fz_below(&c->lr, 2))
		a.flags |= DRM_RDWR;
	/* Userptr BOs cannot be exported; imported ones are not ours to. */
	if (kind == DRM_NPU_BO_USERPTR || kind >= DRM_NPU_BO_IMPORTED)
		c->invalid = true;
	mutate(c, f, &a, fields, 3);
	if (fz_ioctl(c, f, K_PRIME_TO_FD, DRM_IOCTL_PRIME_HANDLE_TO_FD, &a, a.handle, a.flags, 0,
	             ep))
		return;
	if (kind == DRM_NPU_BO_USERPTR && !c->mutated && !snapshot_stale(c, f, ep))
		fz_fail(c, "PRIME_HANDLE_TO_FD exported a userptr BO");
	fz_plock(c);
	old = c->p->dmabuf[slot];
	c->p->dmabuf[slot] = a.fd;
	fz_punlock(c);
	if (old >= 0)
		close(old);
}

static void op_prime_import(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_prime_handle, handle, F_ZERO, 0),
	        FLD(struct drm_prime_handle, flags, F_ZERO, 0),
	        FLD(struct drm_prime_handle, fd, F_FD, 0),
	};
	struct fz_bo *b = &f->bo[fz_below(&c->lr, FZ_NBO)];
	struct drm_prime_handle a = {0};
	uint64_t ep;

	fz_plock(c);
	a.fd = c->p->dmabuf[fz_below(&c->lr, FZ_NDMABUF)];
	fz_punlock(c);
	if (a.fd < 0)
		return;
	bo_slot_free(c, f, b);
	op_begin(c);
	mutate(c, f, &a, fields, 3);
	ep = epoch_of(f);
	/* Closed by another thread meanwhile: EBADF is no finding then. */
	if (c->o->threads > 1 || c->in_child)
		c->bad_fd = true;
	if (fz_ioctl(c, f, K_PRIME_TO_HANDLE, DRM_IOCTL_PRIME_FD_TO_HANDLE, &a, (uint64_t)a.fd, 0,
	             0, ep))
		return;
	rec_out(c, a.handle);
	bo_slot_set(c, f, b, a.handle, UINT32_MAX, 0, false);
	op_begin(c);
	bo_info(c, f, b, false);
}

static void op_syncobj_create(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_create, handle, F_ZERO, 0),
	        FLD(struct drm_syncobj_create, flags, F_CFLAGS, DRM_SYNCOBJ_CREATE_SIGNALED),
	};
	struct fz_sobj *so = &f->so[fz_below(&c->lr, FZ_NSO)];
	struct drm_syncobj_create a = {0};
	uint32_t h;
	bool live;

	a.flags = fz_below(&c->lr, 2) ? DRM_SYNCOBJ_CREATE_SIGNALED : 0;
	fz_lock(c, f);
	live = so->live;
	h = so->handle;
	fz_unlock(c, f);
	if (live) {
		syncobj_destroy(c, f, h, false);
		op_begin(c);
	}
	mutate(c, f, &a, fields, 2);
	if (fz_ioctl(c, f, K_SYNCOBJ_CREATE, DRM_IOCTL_SYNCOBJ_CREATE, &a, a.flags, 0, 0,
	             epoch_of(f)))
		return;
	rec_out(c, a.handle);
	fz_lock(c, f);
	so->handle = a.handle;
	so->has_fence = a.flags & DRM_SYNCOBJ_CREATE_SIGNALED;
	so->shared = false;
	so->point = 0;
	so->live = true;
	pool_changed(f);
	fz_unlock(c, f);
}

static void op_syncobj_destroy(struct fz_ctx *c, struct fz_fd *f)
{
	struct fz_sobj *so;
	uint32_t h;

	PICK_LIVE(c, f->so, FZ_NSO, so);
	fz_lock(c, f);
	h = so->handle;
	fz_unlock(c, f);
	syncobj_destroy(c, f, h, true);
}

/* Up to @max (handle, point) pairs of syncobjs with fences. */
static uint32_t pick_points(struct fz_ctx *c, struct fz_fd *f, uint32_t *h, uint64_t *pt,
                            uint32_t max, bool timeline_ok)
{
	uint32_t n = 0, want = 1 + (uint32_t)fz_below(&c->lr, max);
	unsigned tries;

	fz_lock(c, f);
	for (tries = 0; n < want && tries < 12; tries++) {
		if (timeline_ok && fz_below(&c->lr, 3)) {
			struct fz_queue *q = &f->q[fz_below(&c->lr, FZ_NQ)];

			if (!q->syncobj || !q->point)
				continue;
			h[n] = q->syncobj;
			pt[n++] = q->point - fz_below(&c->lr, q->point < 4 ? q->point : 4);
		} else {
			struct fz_sobj *so = &f->so[fz_below(&c->lr, FZ_NSO)];

			if (!so->live)
				continue;
			if (so->shared)
				c->invalid = true;
			h[n] = so->handle;
			pt[n++] = timeline_ok && so->point ? 1 + fz_below(&c->lr, so->point) : 0;
		}
	}
	fz_unlock(c, f);
	if (!n) {
		h[0] = f->so[0].handle;
		pt[0] = 0;
		n = 1;
		c->invalid = true;
	}
	return n;
}

/* Counts of the core syncobj arrays stay small: see README (Fuzzing). */
#define FZ_CORE_COUNT_MAX 1024

static void op_syncobj_wait(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field tfields[] = {
	        FLD(struct drm_syncobj_timeline_wait, handles, F_PTR, 0),
	        FLD(struct drm_syncobj_timeline_wait, points, F_PTR, 0),
	        FLD(struct drm_syncobj_timeline_wait, count_handles, F_COUNT, FZ_CORE_COUNT_MAX),
	        FLD(struct drm_syncobj_timeline_wait, flags, F_CFLAGS, 7),
	        FLD(struct drm_syncobj_timeline_wait, first_signaled, F_ZERO, 0),
	        FLD(struct drm_syncobj_timeline_wait, pad, F_ZERO, 0),
	};
	uint32_t *h = (uint32_t *)c->arr;
	uint64_t *pt = (uint64_t *)(c->arr + FZ_ARR_SIZE / 2);
	bool timeline = fz_below(&c->lr, 5) != 0;
	uint32_t n = pick_points(c, f, h, pt, 4, timeline);
	uint32_t flags = (uint32_t)fz_below(&c->lr, 8);
	uint64_t dl = deadline_ns(c, 2000000);

	if (timeline) {
		struct drm_syncobj_timeline_wait a = {
		        .handles = (uintptr_t)h,
		        .points = (uintptr_t)pt,
		        .timeout_nsec = (int64_t)dl,
		        .count_handles = n,
		        .flags = flags,
		};

		mutate(c, f, &a, tfields, 6);
		if (a.count_handles > FZ_CORE_COUNT_MAX)
			a.count_handles = FZ_CORE_COUNT_MAX;
		fz_ioctl(c, f, K_SYNCOBJ_TIMELINE_WAIT, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &a, h[0],
		         pt[0], a.count_handles, epoch_of(f));
	} else {
		struct drm_syncobj_wait a = {
		        .handles = (uintptr_t)h,
		        .timeout_nsec = (int64_t)dl,
		        .count_handles = n,
		        .flags = flags & 3,
		};
		static const struct fz_field fields[] = {
		        FLD(struct drm_syncobj_wait, handles, F_PTR, 0),
		        FLD(struct drm_syncobj_wait, count_handles, F_COUNT, FZ_CORE_COUNT_MAX),
		        FLD(struct drm_syncobj_wait, flags, F_CFLAGS, 3),
		        FLD(struct drm_syncobj_wait, pad, F_ZERO, 0),
		};

		mutate(c, f, &a, fields, 4);
		if (a.count_handles > FZ_CORE_COUNT_MAX)
			a.count_handles = FZ_CORE_COUNT_MAX;
		fz_ioctl(c, f, K_SYNCOBJ_WAIT, DRM_IOCTL_SYNCOBJ_WAIT, &a, h[0], 0, a.count_handles,
		         epoch_of(f));
	}
}

static void op_syncobj_query(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_timeline_array, handles, F_PTR, 0),
	        FLD(struct drm_syncobj_timeline_array, points, F_PTR, 0),
	        FLD(struct drm_syncobj_timeline_array, count_handles, F_COUNT, FZ_CORE_COUNT_MAX),
	        FLD(struct drm_syncobj_timeline_array, flags, F_CFLAGS,
	            DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED),
	};
	uint32_t *h = (uint32_t *)c->arr;
	uint64_t *pt = (uint64_t *)(c->arr + FZ_ARR_SIZE / 2);
	struct drm_syncobj_timeline_array a = {
	        .handles = (uintptr_t)h,
	        .points = (uintptr_t)pt,
	};

	a.count_handles = pick_points(c, f, h, pt, 4, true);
	a.flags = fz_below(&c->lr, 2) ? DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED : 0;
	mutate(c, f, &a, fields, 4);
	if (a.count_handles > FZ_CORE_COUNT_MAX)
		a.count_handles = FZ_CORE_COUNT_MAX;
	fz_ioctl(c, f, K_SYNCOBJ_QUERY, DRM_IOCTL_SYNCOBJ_QUERY, &a, h[0], a.flags, a.count_handles,
	         epoch_of(f));
}

static void op_syncobj_transfer(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_transfer, src_handle, F_SOBJ, 0),
	        FLD(struct drm_syncobj_transfer, dst_handle, F_SOBJ, 0),
	        FLD(struct drm_syncobj_transfer, src_point, F_VAL, 0),
	        FLD(struct drm_syncobj_transfer, dst_point, F_VAL, 0),
	        FLD(struct drm_syncobj_transfer, flags, F_CFLAGS, 0),
	        FLD(struct drm_syncobj_transfer, pad, F_ZERO, 0),
	        VIRT(0), /* into a queue's own timeline */
	};
	uint32_t h[1];
	uint64_t pt[1];
	struct drm_syncobj_transfer a = {0};
	struct fz_sobj *dst;
	bool timeline;

	pick_points(c, f, h, pt, 1, true);
	a.src_handle = h[0];
	a.src_point = pt[0];
	PICK_LIVE(c, f->so, FZ_NSO, dst);
	fz_lock(c, f);
	timeline = fz_below(&c->lr, 2);
	a.dst_handle = dst->handle;
	a.dst_point = timeline ? dst->point + 1 : 0;
	fz_unlock(c, f);
	if (mutate(c, f, &a, fields, 7) == 0) {
		struct fz_queue *q = &f->q[fz_below(&c->lr, FZ_NQ)];

		fz_lock(c, f);
		a.dst_handle = q->syncobj;
		a.dst_point = q->point + fz_below(&c->lr, 3);
		q->tampered = true;
		fz_unlock(c, f);
	}
	if (fz_ioctl(c, f, K_SYNCOBJ_TRANSFER, DRM_IOCTL_SYNCOBJ_TRANSFER, &a, a.src_handle,
	             a.dst_handle, a.dst_point, epoch_of(f)))
		return;
	fz_lock(c, f);
	syncobj_set(f, a.dst_handle, a.dst_point, true);
	fz_unlock(c, f);
}

static void op_syncobj_signal(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_timeline_array, handles, F_PTR, 0),
	        FLD(struct drm_syncobj_timeline_array, points, F_PTR, 0),
	        FLD(struct drm_syncobj_timeline_array, count_handles, F_COUNT, FZ_CORE_COUNT_MAX),
	        FLD(struct drm_syncobj_timeline_array, flags, F_CFLAGS, 0),
	        VIRT(0), /* a queue's own timeline */
	};
	uint32_t *h = (uint32_t *)c->arr;
	uint64_t *pt = (uint64_t *)(c->arr + FZ_ARR_SIZE / 2);
	struct drm_syncobj_timeline_array a = {.handles = (uintptr_t)h, .points = (uintptr_t)pt};
	unsigned variant = (unsigned)fz_below(&c->lr, 3), kind;
	unsigned long req;
	struct fz_sobj *so;

	PICK_LIVE(c, f->so, FZ_NSO, so);
	fz_lock(c, f);
	h[0] = so->handle;
	pt[0] = so->point + 1 + fz_below(&c->lr, 3);
	fz_unlock(c, f);
	a.count_handles = 1;
	if (mutate(c, f, &a, fields, 5) == 0) {
		struct fz_queue *q = &f->q[fz_below(&c->lr, FZ_NQ)];

		fz_lock(c, f);
		h[0] = q->syncobj;
		pt[0] = q->point + fz_below(&c->lr, 3);
		q->tampered = true;
		fz_unlock(c, f);
	}
	if (a.count_handles > FZ_CORE_COUNT_MAX)
		a.count_handles = FZ_CORE_COUNT_MAX;
	if (variant == 0) {
		kind = K_SYNCOBJ_TIMELINE_SIGNAL;
		req = DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL;
	} else {
		/* struct drm_syncobj_array is the prefix of the timeline one. */
		kind = variant == 1 ? K_SYNCOBJ_SIGNAL : K_SYNCOBJ_RESET;
		req = variant == 1 ? DRM_IOCTL_SYNCOBJ_SIGNAL : DRM_IOCTL_SYNCOBJ_RESET;
		a.points = 0; /* count_handles and pad follow handles there */
		memmove((uint8_t *)&a + 8, &a.count_handles, 8);
	}
	if (fz_ioctl(c, f, kind, req, &a, h[0], variant ? 0 : pt[0], variant, epoch_of(f)))
		return;
	fz_lock(c, f);
	syncobj_set(f, h[0], variant ? 0 : pt[0], variant != 2);
	fz_unlock(c, f);
}

static void op_syncobj_export(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_handle, handle, F_SOBJ, 0),
	        FLD(struct drm_syncobj_handle, flags, F_CFLAGS,
	            DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE),
	        FLD(struct drm_syncobj_handle, fd, F_ZERO, 0),
	        FLD(struct drm_syncobj_handle, pad, F_ZERO, 0),
	};
	unsigned slot = (unsigned)fz_below(&c->lr, FZ_NSYNCFD);
	struct drm_syncobj_handle a = {.fd = -1};
	uint32_t h[1];
	uint64_t pt[1];
	int old;

	pick_points(c, f, h, pt, 1, true);
	a.handle = h[0];
	if (fz_below(&c->lr, 2))
		a.flags = DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE;
	mutate(c, f, &a, fields, 4);
	if (fz_ioctl(c, f, K_SYNCOBJ_TO_FD, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &a, a.handle, a.flags,
	             0, epoch_of(f)))
		return;
	if (!(a.flags & DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE)) {
		unsigned i;

		/* Whoever imports the fd shares the syncobj from now on. */
		fz_lock(c, f);
		for (i = 0; i < FZ_NSO; i++)
			if (f->so[i].handle == a.handle)
				f->so[i].shared = true;
		for (i = 0; i < FZ_NQ; i++)
			if (f->q[i].syncobj == a.handle)
				f->q[i].tampered = true;
		pool_changed(f);
		fz_unlock(c, f);
	}
	fz_plock(c);
	old = c->p->syncfd[slot];
	c->p->syncfd[slot] = a.fd;
	c->p->syncfd_kind[slot] = a.flags & DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE
	                                  ? SF_SYNC_FILE
	                                  : SF_SYNCOBJ;
	fz_punlock(c);
	if (old >= 0)
		close(old);
}

static void op_syncobj_import(struct fz_ctx *c, struct fz_fd *f)
{
	static const struct fz_field fields[] = {
	        FLD(struct drm_syncobj_handle, handle, F_SOBJ, 0),
	        FLD(struct drm_syncobj_handle, flags, F_CFLAGS,
	            DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE),
	        FLD(struct drm_syncobj_handle, fd, F_FD, 0),
	        FLD(struct drm_syncobj_handle, pad, F_ZERO, 0),
	};
	unsigned slot = (unsigned)fz_below(&c->lr, FZ_NSYNCFD);
	struct fz_sobj *so = &f->so[fz_below(&c->lr, FZ_NSO)];
	struct drm_syncobj_handle a = {0};
	int kind;
	bool live;

	fz_plock(c);
	a.fd = c->p->syncfd[slot];
	kind = c->p->syncfd_kind[slot];
	fz_punlock(c);
	if (a.fd < 0)
		return;
	fz_lock(c, f);
	live = so->live;
	a.handle = so->handle;
	fz_unlock(c, f);
	if (kind == SF_SYNC_FILE) {
		/* Into an existing syncobj: it gets the sync_file's fence. */
		a.flags = DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE;
		if (!live)
			c->invalid = true;
	} else {
		a.handle = 0;
		if (live) {
			syncobj_destroy(c, f, so->handle, false);
			op_begin(c);
		}
	}
	mutate(c, f, &a, fields, 4);
	if (c->o->threads > 1 || c->in_child)
		c->bad_fd = true; /* closed by another thread meanwhile */
	if (fz_ioctl(c, f, K_SYNCOBJ_TO_HANDLE, DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &a, (uint64_t)a.fd,
	             a.flags, a.handle, epoch_of(f)))
		return;
	rec_out(c, a.handle);
	fz_lock(c, f);
	if (a.flags & DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE) {
		syncobj_set(f, a.handle, 0, true);
	} else {
		so->handle = a.handle;
		so->point = 0;
		so->has_fence = true;
		so->shared = true;
		so->live = true;
	}
	pool_changed(f);
	fz_unlock(c, f);
}

/* mmap and munmap: logged like the ioctls. */
static void *fz_mmap(struct fz_ctx *c, void *addr, size_t len, int prot, int flags, int fd,
                     uint64_t off)
{
	struct fz_rec *r = rec_begin(c, K_MMAP, (uintptr_t)addr, len, off, (uint64_t)fd);
	void *p;

	fz_kcov_start(c);
	p = mmap(addr, len, prot, flags, fd, (off_t)off);
	fz_kcov_collect(c);
	rec_end(c, r, K_MMAP, p == MAP_FAILED ? errno : 0, true);
	return p;
}

static void fz_munmap(struct fz_ctx *c, void *p, size_t len)
{
	struct fz_rec *r = rec_begin(c, K_MUNMAP, (uintptr_t)p, len, 0, 0);

	int err;

	fz_kcov_start(c);
	err = munmap(p, len) ? errno : 0;
	fz_kcov_collect(c);
	rec_end(c, r, K_MUNMAP, err, true);
}

static void cpu_slot_put(struct fz_ctx *c, struct fz_fd *f, unsigned i, void *p, size_t len)
{
	struct fz_cpumap old;

	fz_lock(c, f);
	old = f->cpu[i];
	f->cpu[i].p = p;
	f->cpu[i].len = len;
	fz_unlock(c, f);
	if (old.p)
		fz_munmap(c, old.p, old.len);
}

static void op_mmap(struct fz_ctx *c, struct fz_fd *f)
{
	unsigned slot = (unsigned)fz_below(&c->lr, FZ_NCPU), mv;
	int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED, fd = f->fd;
	uint64_t off, size;
	bool mut = desc_mut(c->desc) != 0;
	struct fz_bo *b;
	size_t len;
	uint8_t *p;

	if (fz_one_in(&c->lr, 8)) {
		/* A dma-buf's own mmap. */
		fz_plock(c);
		fd = c->p->dmabuf[fz_below(&c->lr, FZ_NDMABUF)];
		fz_punlock(c);
		if (fd < 0)
			return;
		len = FZ_PAGE;
		off = 0;
	} else {
		PICK_LIVE(c, f->bo, FZ_NBO, b);
		fz_lock(c, f);
		off = b->mmap_off;
		size = b->size;
		fz_unlock(c, f);
		if (!off) {
			if (bo_info(c, f, b, false))
				return;
			op_begin(c);
			fz_lock(c, f);
			off = b->mmap_off;
			size = b->size;
			fz_unlock(c, f);
			if (!off)
				return; /* userptr or imported from another device */
		}
		len = size;
		if (fz_one_in(&c->lr, 2) && size > FZ_PAGE)
			len = (1 + fz_below(&c->lr, size / FZ_PAGE)) * FZ_PAGE;
	}
	if (mut) {
		c->mutated = true;
		mv = (unsigned)fz_below(&c->lr, 5);
		if (mv == 0)
			len += FZ_PAGE; /* past the BO */
		else if (mv == 1)
			off += FZ_PAGE;
		else if (mv == 2)
			prot |= PROT_EXEC;
		else if (mv == 3)
			flags = MAP_PRIVATE;
		else
			off = boundary(&c->lr) & ~(FZ_PAGE - 1);
	}
	if (c->o->threads > 1 || c->in_child)
		c->bad_fd = true; /* a dma-buf closed by another thread meanwhile */
	p = fz_mmap(c, NULL, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return;
	if (!mut) {
		/* The CPU's view of the BO: touch both ends. */
		volatile uint8_t *v = p;

		v[0] = (uint8_t)(v[0] + 1);
		v[len - 1] = (uint8_t)(v[len - 1] + 1);
	}
	cpu_slot_put(c, f, slot, p, len);
}

static void op_munmap(struct fz_ctx *c, struct fz_fd *f)
{
	cpu_slot_put(c, f, (unsigned)fz_below(&c->lr, FZ_NCPU), NULL, 0);
}

/*
 * Changes what a userptr region maps: fresh pages, dropped pages or a
 * protection change. BOs pinning it turn stale (BO_INFO says so).
 */
static void op_host_remap(struct fz_ctx *c, struct fz_fd *f)
{
	unsigned r = (unsigned)fz_below(&c->lr, FZ_NREGION - 1); /* the RO one stays */
	uint8_t *base = c->p->region[r];
	struct fz_rec *rec;
	void *p;

	(void)f;
	switch (fz_below(&c->lr, 3)) {
	case 0:
		p = fz_mmap(c, base, FZ_REGION_SIZE, PROT_READ | PROT_WRITE,
		            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == MAP_FAILED)
			fz_fail(c, "cannot remap userptr region %u", r);
		break;
	case 1:
		rec = rec_begin(c, K_MADVISE, (uintptr_t)base, FZ_REGION_SIZE, MADV_DONTNEED, 0);
		rec_end(c, rec, K_MADVISE, madvise(base, FZ_REGION_SIZE, MADV_DONTNEED) ? errno : 0,
		        true);
		break;
	default:
		memset(base + fz_below(&c->lr, FZ_REGION_SIZE / FZ_PAGE) * FZ_PAGE, 0x5a, FZ_PAGE);
	}
}

static void tshm_reset_fd(struct fz_fd *f)
{
	memset(f->bo, 0, sizeof(f->bo));
	memset(f->map, 0, sizeof(f->map));
	memset(f->q, 0, sizeof(f->q));
	memset(f->so, 0, sizeof(f->so));
	f->nfreed_bo = f->nfreed_q = f->nfreed_so = 0;
	f->tainted = false;
	f->gen++;
	pool_changed(f);
}

static int open_node(const char *path)
{
	return open(path, O_RDWR | O_CLOEXEC);
}

int fz_fd_open(struct fz_proc *p, int slot, int node)
{
	struct fz_fd *f = &p->fds[slot];

	f->fd = open_node(p->nodes[node].path);
	if (f->fd < 0)
		return -errno;
	f->node = node;
	f->va_base = (uint64_t)(slot + 1) << 36;
	tshm_reset_fd(f);
	return 0;
}

/* Closes the file and opens a new one in its place (dup2: atomic for other threads). */
static void op_reopen(struct fz_ctx *c, struct fz_fd *f)
{
	int node = fz_below(&c->lr, 2) ? f->node : (int)fz_below(&c->lr, c->p->nnodes);
	struct fz_rec *r = rec_begin(c, K_REOPEN, (uint64_t)f->fd, (uint64_t)node, 0, 0);
	int fd, err = 0;

	fz_lock(c, f);
	fd = open_node(c->p->nodes[node].path);
	if (fd < 0) {
		err = errno;
	} else {
		if (dup2(fd, f->fd) < 0)
			err = errno;
		close(fd);
		if (!err) {
			f->node = node;
			tshm_reset_fd(f);
		}
	}
	fz_unlock(c, f);
	rec_end(c, r, K_REOPEN, err, true);
}

/*
 * A child process inherits the files (the same contexts) and does a few
 * calls on them before it exits; the parent waits for it, bounded.
 */
static void op_fork(struct fz_ctx *c, struct fz_fd *f)
{
	unsigned n = 1 + (unsigned)fz_below(&c->lr, 8), i;
	uint64_t crng = fz_rand(&c->lr);
	struct fz_rec *r;
	struct pollfd pfd;
	int pidfd, status;
	pid_t pid;

	(void)f;
	if (c->in_child)
		return;
	r = rec_begin(c, K_FORK, n, crng, 0, 0);
	pid = fork();
	if (pid < 0) {
		rec_end(c, r, K_FORK, errno, true);
		return;
	}
	if (!pid) {
		c->in_child = true;
		c->rng = crng;
		for (i = 0; i < n; i++) {
			uint64_t d = fz_gen_desc(c);

			if (desc_op(d) == OP_FORK)
				continue;
			fz_exec(c, d);
		}
		_exit(0);
	}
	rec_end(c, r, K_FORK, 0, true);
	/* The child changed the contexts behind the pools' back. */
	for (i = 0; i < (unsigned)c->p->nfds; i++) {
		fz_lock(c, &c->p->fds[i]);
		c->p->fds[i].tainted = true;
		fz_unlock(c, &c->p->fds[i]);
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	pfd = (struct pollfd){.fd = pidfd, .events = POLLIN};
	if (pidfd >= 0 && poll(&pfd, 1, (int)(c->o->hang_timeout * 1000)) == 0) {
		kill(pid, SIGKILL);
		fz_fail(c, "a forked child did not exit within %.0f s", c->o->hang_timeout);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (waitpid(pid, &status, 0) == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
	    !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
		fz_fail(c, "a forked child ended with status 0x%x", status);
}

/*
 * Arms the device's fault injection (debugfs): the next job on it faults,
 * rarely hangs until the watchdog; every queue, context and process on the
 * device sees the engine reset.
 */
static void op_inject(struct fz_ctx *c, struct fz_fd *f)
{
	const struct fz_node *n = &c->p->nodes[f->node];
	bool hang = fz_one_in(&c->lr, 32);
	char path[sizeof(n->debugfs) + 16];
	struct fz_rec *r;
	int fd, err = 0;

	if (!n->debugfs[0])
		return;
	snprintf(path, sizeof(path), "%s/%s", n->debugfs, hang ? "inject_hang" : "inject_fault");
	atomic_store(&c->shm->injected, 1);
	r = rec_begin(c, K_INJECT, hang, (uint64_t)f->node, 0, 0);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1)
		err = errno;
	if (fd >= 0)
		close(fd);
	rec_end(c, r, K_INJECT, err, true);
}

/*
 * Reads what the driver prints about the contexts while they change: the
 * file's fdinfo, or the device's debugfs lists of clients (every context's
 * mappings and queues), engines and memory.
 */
static void op_proc_read(struct fz_ctx *c, struct fz_fd *f)
{
	static const char *const files[] = {"npu_clients", "npu_engines", "npu_memory"};
	const struct fz_node *n = &c->p->nodes[f->node];
	char path[sizeof(n->debugfs) + 32];
	struct fz_rec *r;
	unsigned which = (unsigned)fz_below(&c->lr, 6);
	ssize_t got = 0;
	int fd, err = 0;

	if (which < 3 || !n->debugfs[0])
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", f->fd);
	else
		snprintf(path, sizeof(path), "%s/%s", n->debugfs, files[which - 3]);
	r = rec_begin(c, K_PROC_READ, which, (uint64_t)f->fd, 0, 0);
	fz_kcov_start(c);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		err = errno;
	while (fd >= 0 && (got = read(fd, c->io, FZ_IO_SIZE)) > 0)
		;
	if (fd >= 0 && got < 0)
		err = errno;
	if (fd >= 0)
		close(fd);
	fz_kcov_collect(c);
	rec_end(c, r, K_PROC_READ, err, true);
}

static void (*const fz_ops[OP_COUNT])(struct fz_ctx *, struct fz_fd *) = {
        [OP_QUERY] = op_query,
        [OP_BO_CREATE] = op_bo_create,
        [OP_BO_USERPTR] = op_bo_userptr,
        [OP_BO_INFO] = op_bo_info,
        [OP_VM_MAP] = op_vm_map,
        [OP_VM_UNMAP] = op_vm_unmap,
        [OP_VM_ACCESS] = op_vm_access,
        [OP_CONTEXT_INFO] = op_context_info,
        [OP_QUEUE_CREATE] = op_queue_create,
        [OP_QUEUE_DESTROY] = op_queue_destroy,
        [OP_SUBMIT] = op_submit,
        [OP_QUEUE_STATUS] = op_queue_status,
        [OP_QUEUE_RESET] = op_queue_reset,
        [OP_GEM_CLOSE] = op_gem_close,
        [OP_PRIME_EXPORT] = op_prime_export,
        [OP_PRIME_IMPORT] = op_prime_import,
        [OP_SYNCOBJ_CREATE] = op_syncobj_create,
        [OP_SYNCOBJ_DESTROY] = op_syncobj_destroy,
        [OP_SYNCOBJ_WAIT] = op_syncobj_wait,
        [OP_SYNCOBJ_QUERY] = op_syncobj_query,
        [OP_SYNCOBJ_TRANSFER] = op_syncobj_transfer,
        [OP_SYNCOBJ_SIGNAL] = op_syncobj_signal,
        [OP_SYNCOBJ_EXPORT] = op_syncobj_export,
        [OP_SYNCOBJ_IMPORT] = op_syncobj_import,
        [OP_MMAP] = op_mmap,
        [OP_MUNMAP] = op_munmap,
        [OP_HOST_REMAP] = op_host_remap,
        [OP_FORK] = op_fork,
        [OP_REOPEN] = op_reopen,
        [OP_INJECT] = op_inject,
        [OP_PROC_READ] = op_proc_read,
};

void fz_exec(struct fz_ctx *c, uint64_t desc)
{
	c->desc = desc;
	c->lr = desc * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull;
	c->seq++;
	op_begin(c);
	fz_ops[desc_op(desc)](c, cur_fd(c));
	atomic_fetch_add_explicit(&c->t->progress, 1, memory_order_relaxed);
}

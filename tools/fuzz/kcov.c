// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu-fuzz: coverage (KCOV) and the corpus.
 *
 * Each thread traces its own system calls through /sys/kernel/debug/kcov
 * (KCOV_TRACE_PC). A PC none of the processes saw before goes into the PC
 * set in shared memory, and the program that reached it (the thread's last
 * few genomes, ending with the call that did) into the process's corpus,
 * which the threads then mutate.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kcov.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

#define KCOV_PATH "/sys/kernel/debug/kcov"

bool fz_kcov_available(void)
{
	return access(KCOV_PATH, R_OK | W_OK) == 0;
}

int fz_kcov_open(struct fz_ctx *c)
{
	void *cover;
	int fd;

	c->kcov_fd = -1;
	fd = open(KCOV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, KCOV_INIT_TRACE, (unsigned long)FZ_COVER_SIZE))
		goto err;
	cover = mmap(NULL, FZ_COVER_SIZE * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	             0);
	if (cover == MAP_FAILED)
		goto err;
	if (ioctl(fd, KCOV_ENABLE, KCOV_TRACE_PC)) {
		munmap(cover, FZ_COVER_SIZE * sizeof(uint64_t));
		goto err;
	}
	c->cover = cover;
	c->kcov_fd = fd;
	return 0;
err:
	close(fd);
	return -errno;
}

void fz_kcov_start(struct fz_ctx *c)
{
	if (c->kcov_fd >= 0 && !c->in_child)
		atomic_store_explicit(&c->cover[0], 0, memory_order_relaxed);
}

static uint64_t pc_hash(uint64_t pc)
{
	pc ^= pc >> 33;
	pc *= 0xff51afd7ed558ccdull;
	return pc ^ (pc >> 33);
}

/* Return: true if @pc was new to every process. */
static bool pc_insert(struct fz_shm *shm, uint64_t pc)
{
	uint64_t mask = (1u << FZ_PC_BITS) - 1, h = pc_hash(pc) & mask, probe;

	for (probe = 0; probe < 64; probe++, h = (h + 1) & mask) {
		uint64_t v = atomic_load_explicit(&shm->pc_table[h], memory_order_relaxed),
		         zero = 0;

		if (v == pc)
			return false;
		if (v)
			continue;
		if (atomic_compare_exchange_strong(&shm->pc_table[h], &zero, pc)) {
			atomic_fetch_add_explicit(&shm->pcs, 1, memory_order_relaxed);
			return true;
		}
		if (atomic_load_explicit(&shm->pc_table[h], memory_order_relaxed) == pc)
			return false;
	}
	return false; /* the table is full around here: not worth more */
}

void fz_kcov_collect(struct fz_ctx *c)
{
	uint64_t n, i;

	if (c->kcov_fd < 0 || c->in_child)
		return;
	n = atomic_load_explicit(&c->cover[0], memory_order_relaxed);
	if (n >= FZ_COVER_SIZE)
		n = FZ_COVER_SIZE - 1;
	for (i = 0; i < n; i++)
		if (pc_insert(c->shm, atomic_load_explicit(&c->cover[i + 1], memory_order_relaxed)))
			c->new_cov = true;
}

void fz_corpus_add(struct fz_ctx *c, const uint64_t *d, unsigned n)
{
	struct fz_proc *p = c->p;
	struct fz_prog *prog;

	if (!n || !p->corpus)
		return;
	if (n > FZ_PROG_MAX)
		n = FZ_PROG_MAX;
	fz_plock(c);
	prog = p->ncorpus < FZ_CORPUS_MAX ? &p->corpus[p->ncorpus++]
	                                  : &p->corpus[fz_below(&c->rng, FZ_CORPUS_MAX)];
	prog->n = (uint8_t)n;
	memcpy(prog->d, d, n * sizeof(*d));
	fz_punlock(c);
	atomic_fetch_add_explicit(&c->shm->corpus, 1, memory_order_relaxed);
}

/*
 * A program of the corpus, mutated: a genome's seed, mutation, field or
 * file changed, a genome inserted or dropped, or another program's tail
 * spliced on. Return: its length (0: the corpus is empty).
 */
unsigned fz_corpus_pick(struct fz_ctx *c, uint64_t *d)
{
	struct fz_proc *p = c->p;
	const struct fz_prog *src;
	unsigned n, k, i, rounds;
	struct fz_prog other;

	fz_plock(c);
	if (!p->ncorpus) {
		fz_punlock(c);
		return 0;
	}
	src = &p->corpus[fz_below(&c->rng, p->ncorpus)];
	n = src->n;
	memcpy(d, src->d, n * sizeof(*d));
	other = p->corpus[fz_below(&c->rng, p->ncorpus)];
	fz_punlock(c);

	rounds = 1 + (unsigned)fz_below(&c->rng, 3);
	for (i = 0; i < rounds; i++) {
		uint64_t g;

		k = (unsigned)fz_below(&c->rng, n);
		g = d[k];
		switch (fz_below(&c->rng, 7)) {
		case 0: /* new choices, same intent */
			d[k] = (g & 0xffffffffull) | (fz_rand(&c->rng) << 32);
			break;
		case 1: /* mutated, or not any more */
			d[k] = desc_make(desc_op(g), desc_fd(g),
			                 desc_mut(g) ? 0 : 1 + (unsigned)fz_below(&c->rng, 127),
			                 (unsigned)fz_rand(&c->rng), (uint32_t)(g >> 32));
			break;
		case 2: /* another field */
			d[k] = desc_make(desc_op(g), desc_fd(g), desc_mut(g) ? desc_mut(g) : 1,
			                 (unsigned)fz_rand(&c->rng), (uint32_t)(g >> 32));
			break;
		case 3: /* another file */
			d[k] = desc_make(desc_op(g), (unsigned)fz_rand(&c->rng), desc_mut(g),
			                 desc_field(g), (uint32_t)(g >> 32));
			break;
		case 4: /* insert a fresh call */
			if (n < FZ_PROG_MAX) {
				memmove(&d[k + 1], &d[k], (n - k) * sizeof(*d));
				d[k] = fz_gen_desc(c);
				n++;
			}
			break;
		case 5: /* drop one */
			if (n > 1) {
				memmove(&d[k], &d[k + 1], (n - k - 1) * sizeof(*d));
				n--;
			}
			break;
		default: /* splice another program's tail */
			while (n < FZ_PROG_MAX && other.n) {
				d[n++] = other.d[other.n - 1];
				other.n--;
			}
		}
	}
	return n;
}

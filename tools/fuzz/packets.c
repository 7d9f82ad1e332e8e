// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu-fuzz: command buffers. Packets are made valid against the file's
 * live mappings (copies, fills and ops inside bound memory, writes only
 * through writable mappings, no overlaps, the op set's shapes and
 * alignments), then at most one of them is mutated: an address outside,
 * unbound, of another file or past the end of its mapping (accepted, and a
 * device fault when the job runs), or a field the submit-time validation
 * must refuse (an unknown opcode, a wrong packet size, a buffer cut inside
 * a packet, a non-zero reserved field, zero or overflowing lengths,
 * misalignment, overlaps, impossible op shapes, an op on a copy engine):
 * SUBMIT must then fail with EINVAL (c->must_fail).
 */
#include <string.h>

#include "fuzz.h"

struct span {
	uint64_t addr, size;
	bool ro;
};

struct cmdgen {
	struct fz_ctx *c;
	struct fz_fd *f;
	uint32_t cls;
	struct span sp[FZ_NMAP];
	unsigned nsp, nwr;
	uint8_t *buf;
	uint32_t size;
	uint32_t start[8];
	unsigned npkt;
};

static uint64_t rnd(struct cmdgen *g, uint64_t n)
{
	return fz_below(&g->c->lr, n);
}

/* A span (writable if asked) with at least @len bytes, or NULL. */
static const struct span *pick_span(struct cmdgen *g, bool writable, uint64_t len)
{
	unsigned i, s;

	if (!g->nsp)
		return NULL;
	s = (unsigned)rnd(g, g->nsp);
	for (i = 0; i < g->nsp; i++) {
		const struct span *sp = &g->sp[(s + i) % g->nsp];

		if ((!writable || !sp->ro) && sp->size >= len)
			return sp;
	}
	return NULL;
}

/* An address in @sp for @len bytes aligned to @align. */
static uint64_t place(struct cmdgen *g, const struct span *sp, uint64_t len, uint64_t align)
{
	uint64_t slots = (sp->size - len) / align + 1;

	return sp->addr + rnd(g, slots) * align;
}

static void *emit(struct cmdgen *g, uint32_t opcode, uint32_t size)
{
	struct drm_npu_pkt_header *h = (void *)(g->buf + g->size);

	memset(h, 0, size);
	h->opcode = opcode;
	h->size = size;
	g->start[g->npkt++] = g->size;
	g->size += size;
	return h;
}

/* A small length: mostly under a page, rarely a whole mapping (up to 1 MiB). */
static uint64_t small_len(struct cmdgen *g, uint64_t max)
{
	uint64_t n = rnd(g, 8) ? 1 + rnd(g, 4096) : 1 + rnd(g, 65536);

	if (rnd(g, 256) == 0)
		n = max < (1u << 20) ? max : 1u << 20;
	return n < max ? n : max;
}

static void gen_nop(struct cmdgen *g)
{
	emit(g, DRM_NPU_PKT_NOP, sizeof(struct drm_npu_pkt_header));
}

static void gen_copy(struct cmdgen *g)
{
	const struct span *s = pick_span(g, false, 1), *d = pick_span(g, true, 1);
	struct drm_npu_pkt_copy *p;
	uint64_t len;

	if (!s || !d)
		return gen_nop(g);
	len = small_len(g, s->size < d->size ? s->size : d->size);
	if (s == d) {
		/* One mapping: the two halves. */
		len = len > s->size / 2 ? s->size / 2 : len;
		if (!len)
			return gen_nop(g);
	}
	p = emit(g, DRM_NPU_PKT_COPY, sizeof(*p));
	p->size = len;
	if (s == d) {
		uint64_t half = s->size / 2;

		p->src = s->addr + rnd(g, half - len + 1);
		p->dst = s->addr + half + rnd(g, half - len + 1);
		if (rnd(g, 2)) {
			uint64_t t = p->src;

			p->src = p->dst;
			p->dst = t;
		}
	} else {
		p->src = place(g, s, len, 1);
		p->dst = place(g, d, len, 1);
	}
}

static void gen_fill(struct cmdgen *g)
{
	static const uint32_t widths[] = {1, 2, 4};
	uint32_t w = widths[rnd(g, 3)];
	const struct span *d = pick_span(g, true, 4);
	struct drm_npu_pkt_fill *p;
	uint64_t len;

	if (!d)
		return gen_nop(g);
	len = small_len(g, d->size) / w * w;
	if (!len)
		len = w;
	p = emit(g, DRM_NPU_PKT_FILL, sizeof(*p));
	p->dst = place(g, d, len, w);
	p->size = len;
	p->width = w;
	p->value = (uint32_t)fz_rand(&g->c->lr);
	if (w < 4)
		p->value &= (1u << (8 * w)) - 1;
}

static void gen_timestamp(struct cmdgen *g)
{
	const struct span *d = pick_span(g, true, 8);
	struct drm_npu_pkt_timestamp *p;

	if (!d)
		return gen_nop(g);
	p = emit(g, DRM_NPU_PKT_TIMESTAMP, sizeof(*p));
	p->dst = place(g, d, 8, 8);
}

static void gen_write_value(struct cmdgen *g)
{
	const struct span *d = pick_span(g, true, 8);
	struct drm_npu_pkt_write_value *p;

	if (!d)
		return gen_nop(g);
	p = emit(g, DRM_NPU_PKT_WRITE_VALUE, sizeof(*p));
	p->dst = place(g, d, 8, 8);
	p->value = fz_rand(&g->c->lr);
}

/* Always true when it runs: a mask of zero compares 0 with 0 (or 1). */
static void gen_wait_value(struct cmdgen *g)
{
	const struct span *s = pick_span(g, false, 8);
	struct drm_npu_pkt_wait_value *p;

	if (!s)
		return gen_nop(g);
	p = emit(g, DRM_NPU_PKT_WAIT_VALUE, sizeof(*p));
	p->addr = place(g, s, 8, 8);
	p->cmp = (uint32_t)rnd(g, 3);
	p->mask = 0;
	p->value = p->cmp == DRM_NPU_WAIT_NE ? 1 : 0;
}

static void gen_copy_strided(struct cmdgen *g)
{
	struct drm_npu_pkt_copy_strided *p;
	const struct span *s, *d;
	uint32_t ndim = 1 + (uint32_t)rnd(g, 3), e = 1 + (uint32_t)rnd(g, 16), i;
	uint64_t se = e, de = e, n;

	p = emit(g, DRM_NPU_PKT_COPY_STRIDED, sizeof(*p));
	p->ndim = ndim;
	p->elem_size = e;
	/*
	 * Innermost first: each stride at least the extent of the dimensions
	 * inside it (dense, or with gaps), so no two elements of a side
	 * coincide; or 0 on the source side, a broadcast.
	 */
	for (i = ndim; i-- > 0;) {
		n = 1 + rnd(g, 8);
		p->sizes[i] = n;
		p->src_strides[i] = rnd(g, 8) ? se * (1 + rnd(g, 2)) : 0;
		p->dst_strides[i] = de * (1 + rnd(g, 2));
		se += (n - 1) * p->src_strides[i];
		de += (n - 1) * p->dst_strides[i];
	}
	s = pick_span(g, false, se);
	d = pick_span(g, true, de);
	if (!s || !d || (s == d && s->size < se + de)) {
		g->size -= sizeof(*p);
		g->npkt--;
		return gen_nop(g);
	}
	if (s == d) {
		p->src = s->addr + rnd(g, s->size - se - de + 1);
		p->dst = p->src + se + rnd(g, s->addr + s->size - p->src - se - de + 1);
	} else {
		p->src = place(g, s, se, 1);
		p->dst = place(g, d, de, 1);
	}
}

static uint32_t dtype_size(uint32_t t)
{
	return t == DRM_NPU_DTYPE_F16 || t == DRM_NPU_DTYPE_BF16 ? 2 : 4;
}

static bool dtype_float(uint32_t t)
{
	return t != DRM_NPU_DTYPE_I32;
}

#define ALIGN16(x) (((x) + 15) & ~15ull)

static void gen_op(struct cmdgen *g)
{
	struct drm_npu_pkt_op *p;
	uint32_t dtype = (uint32_t)rnd(g, 4), es, oes;
	uint64_t a_len, b_len = 0, c_len = 0, o_len, total, base;
	const struct span *sp;
	unsigned kind = (unsigned)rnd(g, 10);

	p = emit(g, DRM_NPU_PKT_OP, sizeof(*p));
	p->alpha_bits = 0x3fc00000; /* 1.5f */
	if (kind < 5) {
		/* element-wise, unary, scale/axpy, cast */
		static const uint32_t ops[] = {DRM_NPU_OP_ADD,   DRM_NPU_OP_SUB,  DRM_NPU_OP_MUL,
		                               DRM_NPU_OP_MAX,   DRM_NPU_OP_MIN,  DRM_NPU_OP_DIV,
		                               DRM_NPU_OP_SCALE, DRM_NPU_OP_AXPY, DRM_NPU_OP_RELU,
		                               DRM_NPU_OP_GELU,  DRM_NPU_OP_EXP,  DRM_NPU_OP_CAST};
		uint32_t op = ops[rnd(g, 12)];

		if (op >= DRM_NPU_OP_SCALE && op <= DRM_NPU_OP_EXP && op != DRM_NPU_OP_RELU &&
		    !dtype_float(dtype))
			dtype = DRM_NPU_DTYPE_F32;
		if (op == DRM_NPU_OP_DIV && !dtype_float(dtype))
			dtype = DRM_NPU_DTYPE_F32; /* i32 / 0 is an op error */
		p->op = op;
		p->dtype = dtype;
		p->out_dtype = op == DRM_NPU_OP_CAST ? (uint32_t)rnd(g, 4) : dtype;
		p->n = 1 + rnd(g, 1024);
		es = dtype_size(dtype);
		oes = dtype_size(p->out_dtype);
		a_len = p->n * es;
		if (op <= DRM_NPU_OP_MIN || op == DRM_NPU_OP_AXPY)
			b_len = a_len;
		if (op != DRM_NPU_OP_SCALE && op != DRM_NPU_OP_AXPY)
			p->alpha_bits = 0;
		o_len = p->n * oes;
	} else if (kind < 8) {
		/* reduce, transpose */
		p->op = DRM_NPU_OP_REDUCE_SUM + (uint32_t)rnd(g, 3);
		p->dtype = p->out_dtype = dtype;
		p->m = 1 + rnd(g, 32);
		p->n = 1 + rnd(g, 32);
		es = dtype_size(dtype);
		a_len = p->m * p->n * es;
		if (p->op == DRM_NPU_OP_TRANSPOSE) {
			o_len = a_len;
		} else {
			p->axis = (uint32_t)rnd(g, 2);
			o_len = (p->axis ? p->m : p->n) * es;
		}
		p->alpha_bits = 0;
	} else {
		p->op = DRM_NPU_OP_GEMM;
		p->dtype = rnd(g, 2) ? DRM_NPU_DTYPE_F32 : DRM_NPU_DTYPE_F16;
		p->out_dtype = DRM_NPU_DTYPE_F32;
		p->flags = (uint32_t)rnd(g, 4);
		p->m = 1 + rnd(g, 16);
		p->n = 1 + rnd(g, 16);
		p->k = 1 + rnd(g, 16);
		es = dtype_size(p->dtype);
		a_len = p->m * p->k * es;
		b_len = p->k * p->n * es;
		o_len = p->m * p->n * 4;
		if (rnd(g, 2)) {
			p->beta_bits = 0x3f800000; /* 1.0f: C is read */
			c_len = o_len;
		}
	}
	total = ALIGN16(a_len) + ALIGN16(b_len) + ALIGN16(c_len) + ALIGN16(o_len);
	sp = pick_span(g, true, total);
	if (!sp) {
		g->size -= sizeof(*p);
		g->npkt--;
		return gen_nop(g);
	}
	base = place(g, sp, total, 16);
	p->a = base;
	base += ALIGN16(a_len);
	if (b_len) {
		p->b = base;
		base += ALIGN16(b_len);
	}
	if (c_len) {
		p->c = base;
		base += ALIGN16(c_len);
	}
	p->out = base;
	/* In place where the op set allows it. */
	if (kind < 5 && p->op != DRM_NPU_OP_CAST && rnd(g, 4) == 0)
		p->out = p->a;
}

/* --- mutations of one packet ---------------------------------------- */

static void must_fail(struct cmdgen *g, const char *why)
{
	g->c->must_fail = true;
	g->c->why = why;
}

static uint64_t bad_addr(struct cmdgen *g, uint64_t old)
{
	return fz_mut_addr(g->c, g->f, old);
}

static void mutate_copy(struct cmdgen *g, struct drm_npu_pkt_copy *p)
{
	switch (rnd(g, 7)) {
	case 0:
		p->src = bad_addr(g, p->src);
		break;
	case 1:
		p->dst = bad_addr(g, p->dst);
		break;
	case 2:
		p->size = 0;
		must_fail(g, "a copy of 0 bytes");
		break;
	case 3:
		p->dst = p->src + rnd(g, p->size);
		must_fail(g, "a copy whose ranges overlap");
		break;
	case 4:
		p->size = UINT64_MAX - rnd(g, 4096);
		must_fail(g, "a copy whose range wraps");
		break;
	case 5:
		p->size += FZ_MAP_WINDOW; /* runs off the mapping: a fault */
		break;
	default:
		p->size = 1ull << rnd(g, 40);
	}
	if (p->size && (p->src + p->size < p->src || p->dst + p->size < p->dst))
		must_fail(g, "a copy whose range wraps");
	else if (p->size && p->src < p->dst + p->size && p->dst < p->src + p->size)
		must_fail(g, "a copy whose ranges overlap");
}

static void mutate_fill(struct cmdgen *g, struct drm_npu_pkt_fill *p)
{
	switch (rnd(g, 7)) {
	case 0:
		p->width = (uint32_t)(rnd(g, 2) ? 3 : 8 + rnd(g, 8));
		must_fail(g, "a fill width other than 1, 2 or 4");
		break;
	case 1:
		if (p->width == 4)
			p->width = 2;
		p->value = 1u << (8 * p->width);
		must_fail(g, "a fill value wider than its width");
		break;
	case 2:
		if (p->width == 1)
			p->width = 2;
		p->dst |= 1;
		must_fail(g, "a misaligned fill");
		break;
	case 3:
		p->size = 0;
		must_fail(g, "a fill of 0 bytes");
		break;
	case 4:
		p->dst = bad_addr(g, p->dst) & ~7ull;
		break;
	case 5:
		p->size = (UINT64_MAX - p->dst) & ~7ull;
		if (p->size)
			p->size += 8;
		must_fail(g, "a fill whose range wraps");
		break;
	default:
		p->size = (p->size + FZ_MAP_WINDOW) & ~3ull;
	}
}

static void mutate_addr8(struct cmdgen *g, __u64 *addr)
{
	if (rnd(g, 2)) {
		*addr |= 1 + rnd(g, 7);
		must_fail(g, "a misaligned 8-byte address");
	} else {
		*addr = bad_addr(g, *addr) & ~7ull;
	}
}

static void mutate_wait(struct cmdgen *g, struct drm_npu_pkt_wait_value *p)
{
	switch (rnd(g, 5)) {
	case 0:
		p->pad = 1u << rnd(g, 32);
		must_fail(g, "a WAIT_VALUE with a non-zero pad");
		break;
	case 1:
		p->cmp = 3 + (uint32_t)rnd(g, 100);
		must_fail(g, "an unknown WAIT_VALUE comparison");
		break;
	case 2:
		mutate_addr8(g, &p->addr);
		break;
	default:
		/* Rarely a wait that holds until the job timeout. */
		if (rnd(g, 1024) == 0) {
			p->mask = UINT64_MAX;
			p->value = 0x5eed5eed5eed5eedull;
			p->cmp = DRM_NPU_WAIT_EQ;
		} else {
			p->addr = bad_addr(g, p->addr) & ~7ull;
		}
	}
}

static void mutate_strided(struct cmdgen *g, struct drm_npu_pkt_copy_strided *p)
{
	uint32_t d = (uint32_t)rnd(g, p->ndim);

	switch (rnd(g, 9)) {
	case 0:
		p->ndim = rnd(g, 2) ? 0 : DRM_NPU_COPY_MAX_DIMS + 1 + (uint32_t)rnd(g, 4);
		must_fail(g, "a strided copy of 0 or too many dimensions");
		break;
	case 1:
		p->elem_size = rnd(g, 2) ? 0 : DRM_NPU_COPY_MAX_ELEM_SIZE + 1;
		must_fail(g, "a strided copy's element size out of range");
		break;
	case 2:
		p->sizes[d] = 0;
		must_fail(g, "a strided copy with an empty dimension");
		break;
	case 3:
		if (p->ndim < DRM_NPU_COPY_MAX_DIMS) {
			p->dst_strides[p->ndim] = 1 + rnd(g, 100);
			must_fail(g, "a stride past ndim");
		}
		break;
	case 4:
		p->sizes[d] = 3; /* 2 * ~0: the multiplication overflows */
		p->src_strides[d] = UINT64_MAX - rnd(g, 8);
		must_fail(g, "a strided copy whose extent overflows");
		break;
	case 5:
		p->dst = p->src;
		must_fail(g, "a strided copy whose extents overlap");
		break;
	case 6:
		p->src = bad_addr(g, p->src);
		break;
	case 7:
		p->dst = bad_addr(g, p->dst);
		break;
	default:
		p->sizes[d] = 1ull << rnd(g, 34); /* long: faults or times out */
	}
}

static void mutate_op(struct cmdgen *g, struct drm_npu_pkt_op *p)
{
	bool elementwise = p->op <= DRM_NPU_OP_CAST;
	uint32_t es = dtype_size(p->dtype);

	switch (rnd(g, 12)) {
	case 0:
		p->pad = 1u << rnd(g, 32);
		must_fail(g, "an op with a non-zero pad");
		break;
	case 1:
		p->dtype = 4 + (uint32_t)rnd(g, 100);
		must_fail(g, "an unknown dtype");
		break;
	case 2:
		p->op = DRM_NPU_OP_GEMM + 1 + (uint32_t)rnd(g, 100);
		must_fail(g, "an unknown op");
		break;
	case 3:
		p->n = 0;
		must_fail(g, "an op of 0 elements");
		break;
	case 4:
		p->n = (1ull << 31) / es + 1 + rnd(g, 1000);
		if (p->m)
			p->m = 1;
		must_fail(g, "an operand over 1 GiB");
		break;
	case 5:
		if (es > 1) {
			p->a |= 1;
			must_fail(g, "a misaligned operand");
		}
		break;
	case 6:
		if (elementwise && p->op != DRM_NPU_OP_CAST && p->n > 1) {
			p->out = p->a + es;
			must_fail(g, "an output overlapping an input in part");
		}
		break;
	case 7:
		if (elementwise) {
			p->k = 1 + rnd(g, 8);
			must_fail(g, "an element-wise op with k set");
		} else if (p->op == DRM_NPU_OP_GEMM) {
			p->beta_bits = rnd(g, 2) ? 0x80000000u : 0;
			p->c = p->out + 4096;
			must_fail(g, "a GEMM with a C operand and beta 0");
		}
		break;
	case 8:
		p->a = bad_addr(g, p->a) & ~15ull;
		break;
	case 9:
		p->out = bad_addr(g, p->out) & ~15ull;
		break;
	case 10:
		/* An i32 division by the zeroes of fresh device memory: an op error. */
		if (elementwise) {
			p->op = DRM_NPU_OP_DIV;
			p->dtype = DRM_NPU_DTYPE_I32;
			p->out_dtype = DRM_NPU_DTYPE_I32;
			p->alpha_bits = 0;
			if (!p->b)
				p->b = p->a;
		}
		break;
	default:
		p->alpha_bits = (uint32_t)fz_rand(&g->c->lr); /* NaN, Inf, anything */
	}
}

static void mutate_packet(struct cmdgen *g)
{
	unsigned k = (unsigned)rnd(g, g->npkt);
	struct drm_npu_pkt_header *h = (void *)(g->buf + g->start[k]);

	switch (rnd(g, 10)) {
	case 0:
		h->opcode = DRM_NPU_PKT_COPY_STRIDED + 1 + (uint32_t)rnd(g, 1000);
		must_fail(g, "an unknown opcode");
		return;
	case 1:
		h->size = rnd(g, 2) ? h->size + 8 : (h->size > 8 ? h->size - 8 : 16);
		must_fail(g, "a packet size that is not its own");
		return;
	case 2:
		if (h->size > 8) {
			g->size = g->start[k] + 8;
			must_fail(g, "a command buffer ending inside a packet");
			return;
		}
		break;
	case 3:
		if (g->cls == DRM_NPU_ENGINE_COPY) {
			/* An op on a copy engine. */
			struct drm_npu_pkt_op *p;

			if (g->size + sizeof(*p) > FZ_CMDS_SIZE)
				return;
			p = (void *)(g->buf + g->size);
			memset(p, 0, sizeof(*p));
			p->hdr.opcode = DRM_NPU_PKT_OP;
			p->hdr.size = sizeof(*p);
			p->n = 1;
			p->a = g->f->va_base;
			p->out = g->f->va_base + 64;
			g->size += sizeof(*p);
			/* As far as the pool knows the queue's class. */
			must_fail(g, "an op on a copy engine");
			g->c->must_fail_pool = true;
			return;
		}
		break;
	default:
		break;
	}
	switch (h->opcode) {
	case DRM_NPU_PKT_COPY:
		mutate_copy(g, (void *)h);
		break;
	case DRM_NPU_PKT_FILL:
		mutate_fill(g, (void *)h);
		break;
	case DRM_NPU_PKT_TIMESTAMP:
		mutate_addr8(g, &((struct drm_npu_pkt_timestamp *)h)->dst);
		break;
	case DRM_NPU_PKT_WRITE_VALUE:
		mutate_addr8(g, &((struct drm_npu_pkt_write_value *)h)->dst);
		break;
	case DRM_NPU_PKT_WAIT_VALUE:
		mutate_wait(g, (void *)h);
		break;
	case DRM_NPU_PKT_COPY_STRIDED:
		mutate_strided(g, (void *)h);
		break;
	case DRM_NPU_PKT_OP:
		mutate_op(g, (void *)h);
		break;
	default:
		h->size = 16;
		must_fail(g, "a NOP of 16 bytes");
	}
}

/*
 * Builds the command buffer of a SUBMIT on a queue of class @cls into
 * c->cmds. Return: its size in bytes.
 */
uint32_t fz_gen_cmds(struct fz_ctx *c, struct fz_fd *f, uint32_t cls)
{
	struct cmdgen g = {.c = c, .f = f, .cls = cls, .buf = c->cmds};
	unsigned i, n;

	fz_lock(c, f);
	for (i = 0; i < FZ_NMAP; i++) {
		if (!f->map[i].live)
			continue;
		g.sp[g.nsp++] = (struct span){f->map[i].addr, f->map[i].size, f->map[i].ro};
		g.nwr += !f->map[i].ro;
	}
	fz_unlock(c, f);

	n = rnd(&g, 4) ? 1 + (unsigned)rnd(&g, 3) : 1 + (unsigned)rnd(&g, 7);
	for (i = 0; i < n; i++) {
		unsigned k = (unsigned)rnd(&g, 100);

		if (k < 30)
			gen_copy(&g);
		else if (k < 42)
			gen_fill(&g);
		else if (k < 54)
			gen_write_value(&g);
		else if (k < 62)
			gen_timestamp(&g);
		else if (k < 66)
			gen_nop(&g);
		else if (k < 76)
			gen_copy_strided(&g);
		else if (k < 80)
			gen_wait_value(&g);
		else if (cls == DRM_NPU_ENGINE_COMPUTE)
			gen_op(&g);
		else
			gen_copy(&g);
	}
	if (c->pkt_mut)
		mutate_packet(&g);
	return g.size;
}

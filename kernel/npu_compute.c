// SPDX-License-Identifier: GPL-2.0-only
/*
 * The tensor op set of the emulated compute engines: validation at submit
 * time and execution on the engine's thread.
 *
 * Execution only moves data. Operands are gathered from device memory
 * through the emulated MMU (npu_vm_rw()) into the engine's scratch buffers
 * (its "on-chip SRAM"), a chunk or a tile at a time; the numeric kernels of
 * npu_ops_fpu.c run on the scratch buffers between kernel_fpu_begin() and
 * kernel_fpu_end(), one bounded piece per section; results are scattered
 * back. There is no floating point in this file: alpha and beta travel as
 * binary32 bits. Between chunks the deadline is checked and the thread may
 * reschedule.
 */

#include <linux/errno.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <asm/fpu/api.h>

#include <drm/drm_device.h>
#include <drm/drm_print.h>
#include <drm/npu_drm.h>

#include "npu_compute.h"
#include "npu_ops.h"
#include "npu_vm.h"

/* Elements per chunk, and per tile: each scratch buffer holds one. */
#define NPU_CHUNK		4096
/* Edge of the GEMM output tiles (NPU_GEMM_TILE^2 == NPU_CHUNK). */
#define NPU_GEMM_TILE		64
/* Rows of a GEMM tile multiplied per FPU section. */
#define NPU_GEMM_ROWS		16
/* Edge of square transpose tiles. */
#define NPU_TRANSPOSE_TILE	64
#define NPU_OPERAND_MAX		SZ_1G
/* Binary32 bits without the sign: zero for +0 and -0. */
#define NPU_F32_ABS_MASK	0x7fffffffu

/**
 * struct npu_compute_scratch - a compute engine's working memory
 * @buf: four buffers of NPU_CHUNK 32-bit elements (64 KiB in all): inputs,
 *       output and accumulators of a chunk, or the tiles of a GEMM step.
 */
struct npu_compute_scratch {
	u32 buf[4][NPU_CHUNK];
};

struct npu_compute_scratch *npu_compute_scratch_alloc(void)
{
	return kvzalloc(sizeof(struct npu_compute_scratch), GFP_KERNEL);
}

void npu_compute_scratch_free(struct npu_compute_scratch *s)
{
	kvfree(s);
}

/* --- validation ---------------------------------------------------- */

static bool npu_dtype_is_float(u32 dtype)
{
	return dtype == DRM_NPU_DTYPE_F32 || dtype == DRM_NPU_DTYPE_F16 ||
	       dtype == DRM_NPU_DTYPE_BF16;
}

/*
 * An operand of @count elements of @es bytes at @addr: non-empty, at most
 * 1 GiB, not wrapping the address space, element-aligned.
 */
static int npu_check_operand(struct drm_device *drm, const char *name,
			     u64 addr, u64 count, u32 es, u64 *bytes)
{
	u64 end;

	if (!count || check_mul_overflow(count, (u64)es, bytes) ||
	    *bytes > NPU_OPERAND_MAX || check_add_overflow(addr, *bytes, &end)) {
		drm_dbg(drm, "op: %s: bad size (%llu elements)\n", name, count);
		return -EINVAL;
	}
	if (addr % es) {
		drm_dbg(drm, "op: %s: 0x%llx is not %u-byte aligned\n", name,
			addr, es);
		return -EINVAL;
	}
	return 0;
}

/*
 * Input @in (@in_len bytes) against output @out: disjoint, or the very
 * same range when @same_ok (the ops that read each element before writing
 * it).
 */
static int npu_check_alias(struct drm_device *drm, const char *name, u64 in,
			   u64 in_len, u64 out, u64 out_len, bool same_ok)
{
	if (in >= out + out_len || out >= in + in_len)
		return 0;
	if (same_ok && in == out && in_len == out_len)
		return 0;
	drm_dbg(drm, "op: %s overlaps the output\n", name);
	return -EINVAL;
}

/* Element-wise, unary and cast ops: a, b and out hold n elements. */
static int npu_validate_map(struct drm_device *drm,
			    const struct drm_npu_pkt_op *op)
{
	bool has_b = op->op <= DRM_NPU_OP_MIN || op->op == DRM_NPU_OP_AXPY;
	bool has_alpha = op->op == DRM_NPU_OP_SCALE ||
			 op->op == DRM_NPU_OP_AXPY;
	bool float_only = op->op >= DRM_NPU_OP_SCALE &&
			  op->op <= DRM_NPU_OP_EXP && op->op != DRM_NPU_OP_RELU;
	u32 es = npu_ops_dtype_size(op->dtype);
	u32 oes = npu_ops_dtype_size(op->out_dtype);
	u64 a_len, b_len, out_len;
	int ret;

	if (op->op != DRM_NPU_OP_CAST && op->out_dtype != op->dtype) {
		drm_dbg(drm, "op %u: out_dtype must equal dtype\n", op->op);
		return -EINVAL;
	}
	if (float_only && !npu_dtype_is_float(op->dtype)) {
		drm_dbg(drm, "op %u: float dtypes only\n", op->op);
		return -EINVAL;
	}
	if (op->flags || op->c || op->m || op->k || op->axis || op->beta_bits ||
	    (!has_b && op->b) || (!has_alpha && op->alpha_bits)) {
		drm_dbg(drm, "op %u: unused fields must be zero\n", op->op);
		return -EINVAL;
	}
	ret = npu_check_operand(drm, "a", op->a, op->n, es, &a_len);
	if (!ret)
		ret = npu_check_operand(drm, "out", op->out, op->n, oes,
					&out_len);
	if (!ret)
		ret = npu_check_alias(drm, "a", op->a, a_len, op->out, out_len,
				      true);
	if (ret || !has_b)
		return ret;
	ret = npu_check_operand(drm, "b", op->b, op->n, es, &b_len);
	if (!ret)
		ret = npu_check_alias(drm, "b", op->b, b_len, op->out, out_len,
				      true);
	return ret;
}

/* REDUCE_* and TRANSPOSE: a is m x n. */
static int npu_validate_matrix(struct drm_device *drm,
			       const struct drm_npu_pkt_op *op)
{
	bool reduce = op->op != DRM_NPU_OP_TRANSPOSE;
	u32 es = npu_ops_dtype_size(op->dtype);
	u64 count, a_len, out_len;
	int ret;

	if (op->out_dtype != op->dtype) {
		drm_dbg(drm, "op %u: out_dtype must equal dtype\n", op->op);
		return -EINVAL;
	}
	if (op->flags || op->b || op->c || op->k || op->alpha_bits ||
	    op->beta_bits || (reduce ? op->axis > 1 : op->axis)) {
		drm_dbg(drm, "op %u: unused fields must be zero\n", op->op);
		return -EINVAL;
	}
	if (!op->m || !op->n || check_mul_overflow(op->m, op->n, &count)) {
		drm_dbg(drm, "op %u: bad shape %llu x %llu\n", op->op, op->m,
			op->n);
		return -EINVAL;
	}
	ret = npu_check_operand(drm, "a", op->a, count, es, &a_len);
	if (ret)
		return ret;
	if (reduce)
		count = op->axis ? op->m : op->n;
	ret = npu_check_operand(drm, "out", op->out, count, es, &out_len);
	if (ret)
		return ret;
	return npu_check_alias(drm, "a", op->a, a_len, op->out, out_len,
			       false);
}

static int npu_validate_gemm(struct drm_device *drm,
			     const struct drm_npu_pkt_op *op)
{
	u32 es = npu_ops_dtype_size(op->dtype);
	u64 count, a_len, b_len, c_len, out_len;
	int ret;

	if ((op->dtype != DRM_NPU_DTYPE_F32 &&
	     op->dtype != DRM_NPU_DTYPE_F16) ||
	    op->out_dtype != DRM_NPU_DTYPE_F32) {
		drm_dbg(drm, "gemm: dtype f32 or f16, out_dtype f32\n");
		return -EINVAL;
	}
	if ((op->flags & ~(DRM_NPU_OP_TRANS_A | DRM_NPU_OP_TRANS_B)) ||
	    op->axis || (!(op->beta_bits & NPU_F32_ABS_MASK) && op->c)) {
		drm_dbg(drm, "gemm: bad flags or unused fields\n");
		return -EINVAL;
	}
	if (!op->m || !op->n || !op->k) {
		drm_dbg(drm, "gemm: empty shape\n");
		return -EINVAL;
	}
	if (check_mul_overflow(op->m, op->k, &count))
		count = 0;
	ret = npu_check_operand(drm, "a", op->a, count, es, &a_len);
	if (ret)
		return ret;
	if (check_mul_overflow(op->k, op->n, &count))
		count = 0;
	ret = npu_check_operand(drm, "b", op->b, count, es, &b_len);
	if (ret)
		return ret;
	if (check_mul_overflow(op->m, op->n, &count))
		count = 0;
	ret = npu_check_operand(drm, "out", op->out, count, sizeof(u32),
				&out_len);
	if (!ret)
		ret = npu_check_alias(drm, "a", op->a, a_len, op->out, out_len,
				      false);
	if (!ret)
		ret = npu_check_alias(drm, "b", op->b, b_len, op->out, out_len,
				      false);
	if (ret || !(op->beta_bits & NPU_F32_ABS_MASK))
		return ret;
	ret = npu_check_operand(drm, "c", op->c, count, sizeof(u32), &c_len);
	if (!ret)
		ret = npu_check_alias(drm, "c", op->c, c_len, op->out, out_len,
				      true);
	return ret;
}

int npu_compute_validate(struct drm_device *drm,
			 const struct drm_npu_pkt_op *op)
{
	if (op->hdr.opcode != DRM_NPU_PKT_OP || op->hdr.size != sizeof(*op) ||
	    op->pad) {
		drm_dbg(drm, "op: bad header or pad\n");
		return -EINVAL;
	}
	if (!npu_ops_dtype_size(op->dtype) ||
	    !npu_ops_dtype_size(op->out_dtype)) {
		drm_dbg(drm, "op: unknown dtype %u/%u\n", op->dtype,
			op->out_dtype);
		return -EINVAL;
	}

	switch (op->op) {
	case DRM_NPU_OP_ADD ... DRM_NPU_OP_CAST:
		return npu_validate_map(drm, op);
	case DRM_NPU_OP_REDUCE_SUM:
	case DRM_NPU_OP_REDUCE_MAX:
	case DRM_NPU_OP_TRANSPOSE:
		return npu_validate_matrix(drm, op);
	case DRM_NPU_OP_GEMM:
		return npu_validate_gemm(drm, op);
	default:
		drm_dbg(drm, "op: unknown op %u\n", op->op);
		return -EINVAL;
	}
}

u64 npu_compute_cost(const struct drm_npu_pkt_op *op)
{
	u64 es = npu_ops_dtype_size(op->dtype), cost;

	switch (op->op) {
	case DRM_NPU_OP_GEMM:
		if (check_mul_overflow(op->m, op->n, &cost) ||
		    check_mul_overflow(cost, op->k, &cost))
			return U64_MAX;
		return cost;
	case DRM_NPU_OP_REDUCE_SUM:
	case DRM_NPU_OP_REDUCE_MAX:
	case DRM_NPU_OP_TRANSPOSE:
		if (check_mul_overflow(op->m, op->n, &cost) ||
		    check_mul_overflow(cost, 2 * es, &cost))
			return U64_MAX;
		return cost;
	default:
		if (check_mul_overflow(op->n, 3 * es, &cost))
			return U64_MAX;
		return cost;
	}
}

/* --- execution ----------------------------------------------------- */

/**
 * struct npu_run - one op being executed
 * @vm: the context's address space.
 * @s: the engine's scratch buffers.
 * @op: the (validated) op.
 * @deadline: ktime_get_ns() past which the op is cut off.
 * @fault_addr: where a faulting device address goes.
 */
struct npu_run {
	struct npu_vm *vm;
	struct npu_compute_scratch *s;
	const struct drm_npu_pkt_op *op;
	u64 deadline;
	u64 *fault_addr;
};

static int npu_mem(struct npu_run *r, u64 addr, void *buf, size_t len,
		   bool write)
{
	int ret = npu_vm_rw(r->vm, addr, buf, len, write, r->fault_addr);

	if (ret == -ENXIO || ret == -EACCES)
		return -EFAULT;
	return ret;
}

/* Between chunks: cut off a late op, and let others run. */
static int npu_next_chunk(struct npu_run *r)
{
	if (ktime_get_coarse_ns() > r->deadline)
		return -ETIMEDOUT;
	cond_resched();
	return 0;
}

/*
 * Copy a @rows x @cols block between the packed buffer @buf and the
 * row-major device matrix at @base (@ld elements of @es bytes per row),
 * starting at its element (@row, @col). Whole rows go in one access.
 */
static int npu_block(struct npu_run *r, u64 base, u64 ld, u64 row, u64 col,
		     u32 rows, u32 cols, u32 es, void *buf, bool write)
{
	u64 addr = base + (row * ld + col) * es;
	u32 i;
	int ret;

	if (cols == ld)
		return npu_mem(r, addr, buf, (size_t)rows * cols * es, write);
	for (i = 0; i < rows; i++) {
		ret = npu_mem(r, addr + i * ld * es,
			      buf + (size_t)i * cols * es, cols * es, write);
		if (ret)
			return ret;
	}
	return 0;
}

/* Element-wise, unary and cast ops, NPU_CHUNK elements at a time. */
static int npu_run_map(struct npu_run *r)
{
	const struct drm_npu_pkt_op *op = r->op;
	bool has_b = op->op <= DRM_NPU_OP_MIN || op->op == DRM_NPU_OP_AXPY;
	u32 es = npu_ops_dtype_size(op->dtype);
	u32 oes = npu_ops_dtype_size(op->out_dtype);
	void *a = r->s->buf[0], *b = r->s->buf[1], *out = r->s->buf[2];
	u64 i;
	u32 cnt;
	int ret;

	for (i = 0; i < op->n; i += cnt) {
		cnt = min_t(u64, op->n - i, NPU_CHUNK);
		ret = npu_next_chunk(r);
		if (!ret)
			ret = npu_mem(r, op->a + i * es, a, cnt * es, false);
		if (!ret && has_b)
			ret = npu_mem(r, op->b + i * es, b, cnt * es, false);
		if (ret)
			return ret;

		kernel_fpu_begin();
		ret = npu_ops_map(op->op, op->dtype, op->out_dtype,
				  op->alpha_bits, out, a, has_b ? b : NULL,
				  cnt);
		kernel_fpu_end();
		if (ret)
			return ret;

		ret = npu_mem(r, op->out + i * oes, out, cnt * oes, true);
		if (ret)
			return ret;
	}
	return 0;
}

static void npu_reduce_init(const struct drm_npu_pkt_op *op, void *acc,
			    u32 n)
{
	kernel_fpu_begin();
	npu_ops_reduce_init(op->op, op->dtype, acc, n);
	kernel_fpu_end();
}

static int npu_reduce_finish(struct npu_run *r, u64 first, void *acc,
			     u32 n)
{
	const struct drm_npu_pkt_op *op = r->op;
	u32 es = npu_ops_dtype_size(op->dtype);
	void *out = r->s->buf[2];

	kernel_fpu_begin();
	npu_ops_reduce_finish(op->dtype, out, acc, n);
	kernel_fpu_end();
	return npu_mem(r, op->out + first * es, out, (size_t)n * es, true);
}

/* Axis 0: out[j] = (+) over i of a[i][j], NPU_CHUNK columns at a time. */
static int npu_run_reduce_axis0(struct npu_run *r)
{
	const struct drm_npu_pkt_op *op = r->op;
	u32 es = npu_ops_dtype_size(op->dtype);
	void *src = r->s->buf[0], *acc = r->s->buf[1];
	u32 cols, rows;
	u64 i, j;
	int ret;

	for (j = 0; j < op->n; j += cols) {
		cols = min_t(u64, op->n - j, NPU_CHUNK);
		npu_reduce_init(op, acc, cols);
		for (i = 0; i < op->m; i += rows) {
			/* Narrow matrices: several whole rows per chunk. */
			rows = cols == op->n ?
			       min_t(u64, op->m - i, NPU_CHUNK / cols) : 1;
			ret = npu_next_chunk(r);
			if (!ret)
				ret = npu_block(r, op->a, op->n, i, j, rows,
						cols, es, src, false);
			if (ret)
				return ret;
			kernel_fpu_begin();
			npu_ops_reduce_cols(op->op, op->dtype, acc, src, rows,
					    cols);
			kernel_fpu_end();
		}
		ret = npu_reduce_finish(r, j, acc, cols);
		if (ret)
			return ret;
	}
	return 0;
}

/* Axis 1: out[i] = (+) over j of a[i][j], NPU_CHUNK rows at a time. */
static int npu_run_reduce_axis1(struct npu_run *r)
{
	const struct drm_npu_pkt_op *op = r->op;
	u32 es = npu_ops_dtype_size(op->dtype);
	void *src = r->s->buf[0];
	u32 *acc = r->s->buf[1];
	u32 outs, rows, cols;
	u64 i, j;
	int ret;

	for (i = 0; i < op->m; i += outs) {
		u32 k;

		outs = min_t(u64, op->m - i, NPU_CHUNK);
		npu_reduce_init(op, acc, outs);
		for (k = 0; k < outs; k += rows) {
			/* Several short rows per chunk, or a long one in parts. */
			rows = op->n <= NPU_CHUNK ?
			       min_t(u64, outs - k, NPU_CHUNK / op->n) : 1;
			for (j = 0; j < op->n; j += cols) {
				cols = min_t(u64, op->n - j, NPU_CHUNK);
				ret = npu_next_chunk(r);
				if (!ret)
					ret = npu_block(r, op->a, op->n, i + k,
							j, rows, cols, es, src,
							false);
				if (ret)
					return ret;
				kernel_fpu_begin();
				npu_ops_reduce_rows(op->op, op->dtype, acc + k,
						    src, rows, cols);
				kernel_fpu_end();
			}
		}
		ret = npu_reduce_finish(r, i, acc, outs);
		if (ret)
			return ret;
	}
	return 0;
}

/* dst (@cols x @rows) = transpose of src (@rows x @cols); no FPU needed. */
static void npu_transpose_tile(void *dst, const void *src, u32 rows,
			       u32 cols, u32 es)
{
	u32 i, j;

	if (es == sizeof(u16)) {
		const u16 *s = src;
		u16 *d = dst;

		for (i = 0; i < rows; i++)
			for (j = 0; j < cols; j++)
				d[j * rows + i] = s[i * cols + j];
	} else {
		const u32 *s = src;
		u32 *d = dst;

		for (i = 0; i < rows; i++)
			for (j = 0; j < cols; j++)
				d[j * rows + i] = s[i * cols + j];
	}
}

/*
 * out (n x m) = a (m x n) transposed, in tiles of NPU_CHUNK elements:
 * square ones, or whole rows (columns) of a narrow (short) matrix so that
 * the reads (writes) are contiguous.
 */
static int npu_run_transpose(struct npu_run *r)
{
	const struct drm_npu_pkt_op *op = r->op;
	u32 es = npu_ops_dtype_size(op->dtype);
	void *in = r->s->buf[0], *out = r->s->buf[1];
	u32 tm, tn, rows, cols;
	u64 i, j;
	int ret;

	if (op->n <= NPU_TRANSPOSE_TILE) {
		tn = op->n;
		tm = min_t(u64, op->m, NPU_CHUNK / tn);
	} else if (op->m <= NPU_TRANSPOSE_TILE) {
		tm = op->m;
		tn = min_t(u64, op->n, NPU_CHUNK / tm);
	} else {
		tm = NPU_TRANSPOSE_TILE;
		tn = NPU_TRANSPOSE_TILE;
	}

	for (i = 0; i < op->m; i += tm) {
		rows = min_t(u64, op->m - i, tm);
		for (j = 0; j < op->n; j += tn) {
			cols = min_t(u64, op->n - j, tn);
			ret = npu_next_chunk(r);
			if (!ret)
				ret = npu_block(r, op->a, op->n, i, j, rows,
						cols, es, in, false);
			if (ret)
				return ret;
			npu_transpose_tile(out, in, rows, cols, es);
			ret = npu_block(r, op->out, op->m, j, i, cols, rows,
					es, out, true);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * Gather the @rows x @depth tile of op(A) at (@i, @p) into @stage as
 * stored (transposed when TRANS_A) and convert it into @tile.
 */
static int npu_gemm_load_a(struct npu_run *r, u64 i, u64 p, u32 rows,
			   u32 depth, void *stage, void *tile)
{
	const struct drm_npu_pkt_op *op = r->op;
	bool trans = op->flags & DRM_NPU_OP_TRANS_A;
	u32 es = npu_ops_dtype_size(op->dtype);
	int ret;

	if (trans)	/* A is stored k x m */
		ret = npu_block(r, op->a, op->m, p, i, depth, rows, es, stage,
				false);
	else
		ret = npu_block(r, op->a, op->k, i, p, rows, depth, es, stage,
				false);
	if (ret)
		return ret;
	kernel_fpu_begin();
	npu_ops_gemm_load(op->dtype, tile, stage, rows, depth, trans);
	kernel_fpu_end();
	return 0;
}

/* The same for the @depth x @cols tile of op(B) at (@p, @j). */
static int npu_gemm_load_b(struct npu_run *r, u64 p, u64 j, u32 depth,
			   u32 cols, void *stage, void *tile)
{
	const struct drm_npu_pkt_op *op = r->op;
	bool trans = op->flags & DRM_NPU_OP_TRANS_B;
	u32 es = npu_ops_dtype_size(op->dtype);
	int ret;

	if (trans)	/* B is stored n x k */
		ret = npu_block(r, op->b, op->k, j, p, cols, depth, es, stage,
				false);
	else
		ret = npu_block(r, op->b, op->n, p, j, depth, cols, es, stage,
				false);
	if (ret)
		return ret;
	kernel_fpu_begin();
	npu_ops_gemm_load(op->dtype, tile, stage, depth, cols, trans);
	kernel_fpu_end();
	return 0;
}

/*
 * acc += at * bt, NPU_GEMM_ROWS rows of the tile per FPU section (at most
 * 16 x 64 x 64 multiply-adds with preemption off).
 */
static void npu_gemm_madd(u32 *acc, const u32 *at, const void *bt, u32 rows,
			  u32 cols, u32 depth)
{
	u32 i, n;

	for (i = 0; i < rows; i += n) {
		n = min_t(u32, rows - i, NPU_GEMM_ROWS);
		kernel_fpu_begin();
		npu_ops_gemm_madd(acc + i * cols, at + i * depth, bt, n, cols,
				  depth);
		kernel_fpu_end();
	}
}

/*
 * out = alpha op(A) op(B) + beta C, one output tile (up to 64 x 64) at a
 * time: its binary32 accumulator sums the products in order of k, over
 * k-steps deep enough to fill the A and B tiles; C is read per tile only
 * when beta != 0 (so out may be C).
 */
static int npu_run_gemm(struct npu_run *r)
{
	const struct drm_npu_pkt_op *op = r->op;
	bool use_c = op->beta_bits & NPU_F32_ABS_MASK;
	void *stage = r->s->buf[0], *bt = r->s->buf[2];
	u32 *at = r->s->buf[1], *acc = r->s->buf[3];
	u32 tm = min_t(u64, op->m, NPU_GEMM_TILE);
	u32 tn = min_t(u64, op->n, NPU_GEMM_TILE);
	u32 tk = min_t(u64, op->k, NPU_CHUNK / max(tm, tn));
	u32 rows, cols, depth;
	u64 i, j, p;
	int ret;

	for (i = 0; i < op->m; i += tm) {
		rows = min_t(u64, op->m - i, tm);
		for (j = 0; j < op->n; j += tn) {
			cols = min_t(u64, op->n - j, tn);
			memset(acc, 0, (size_t)rows * cols * sizeof(u32));
			for (p = 0; p < op->k; p += depth) {
				depth = min_t(u64, op->k - p, tk);
				ret = npu_next_chunk(r);
				if (!ret)
					ret = npu_gemm_load_a(r, i, p, rows,
							      depth, stage, at);
				if (!ret)
					ret = npu_gemm_load_b(r, p, j, depth,
							      cols, stage, bt);
				if (ret)
					return ret;
				npu_gemm_madd(acc, at, bt, rows, cols, depth);
			}
			if (use_c) {
				ret = npu_block(r, op->c, op->n, i, j, rows,
						cols, sizeof(u32), stage,
						false);
				if (ret)
					return ret;
			}
			/* The A tile is free: the output tile goes there. */
			kernel_fpu_begin();
			npu_ops_gemm_store(at, acc, use_c ? stage : NULL,
					   op->alpha_bits, op->beta_bits,
					   rows * cols);
			kernel_fpu_end();
			ret = npu_block(r, op->out, op->n, i, j, rows, cols,
					sizeof(u32), at, true);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int npu_compute_run(struct npu_vm *vm, struct npu_compute_scratch *s,
		    const struct drm_npu_pkt_op *op, u64 deadline_ns,
		    u64 *fault_addr)
{
	struct npu_run r = {
		.vm = vm,
		.s = s,
		.op = op,
		.deadline = deadline_ns,
		.fault_addr = fault_addr,
	};

	switch (op->op) {
	case DRM_NPU_OP_ADD ... DRM_NPU_OP_CAST:
		return npu_run_map(&r);
	case DRM_NPU_OP_REDUCE_SUM:
	case DRM_NPU_OP_REDUCE_MAX:
		return op->axis ? npu_run_reduce_axis1(&r) :
				  npu_run_reduce_axis0(&r);
	case DRM_NPU_OP_TRANSPOSE:
		return npu_run_transpose(&r);
	case DRM_NPU_OP_GEMM:
		return npu_run_gemm(&r);
	default:
		return -EINVAL;
	}
}

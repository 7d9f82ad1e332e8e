/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Numeric kernels of the emulated compute engine (npu_ops_fpu.c).
 *
 * They work on kernel-memory buffers only and never sleep. npu_ops_fpu.c is
 * the one file of the driver built with SSE enabled, so every call into it
 * from the kernel must sit between kernel_fpu_begin() and kernel_fpu_end()
 * and process a bounded amount of data. The interface itself carries no
 * floating-point types: values cross it as buffers or as IEEE-754 bits.
 *
 * Float accumulators ("acc") are arrays of binary32; i32 accumulators are
 * arrays of u32 (wrapping two's complement).
 *
 * The file is also built in user space by tests/host, so it includes
 * nothing but <linux/types.h>, <linux/errno.h>, the uAPI header and this
 * one.
 */
#ifndef __NPU_OPS_H__
#define __NPU_OPS_H__

#include <linux/types.h>

#include <drm/npu_drm.h>

/* Bytes of one element of an enum drm_npu_dtype (0 for an unknown one). */
static inline u32 npu_ops_dtype_size(u32 dtype)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
	case DRM_NPU_DTYPE_I32:
		return 4;
	case DRM_NPU_DTYPE_F16:
	case DRM_NPU_DTYPE_BF16:
		return 2;
	default:
		return 0;
	}
}

/* Scalar conversions and functions on bits (round to nearest even). */
u32 npu_ops_f16_to_f32(u16 h);
u16 npu_ops_f32_to_f16(u32 f);
u32 npu_ops_bf16_to_f32(u16 h);
u16 npu_ops_f32_to_bf16(u32 f);
u32 npu_ops_i32_to_f32(s32 v);
u16 npu_ops_i32_to_f16(s32 v);
u16 npu_ops_i32_to_bf16(s32 v);
s32 npu_ops_f32_to_i32(u32 f);
u32 npu_ops_expf(u32 x);
u32 npu_ops_geluf(u32 x);

/*
 * out[i] = op(a[i], b[i]) for i < n: the element-wise, SCALE, AXPY, unary
 * and CAST ops of enum drm_npu_op. @b is only read by binary ops and AXPY;
 * @alpha is binary32 bits (SCALE, AXPY). @out may equal @a or @b when the
 * element sizes match. Return: 0, or -EINVAL for an i32 division by zero
 * (or an op/dtype the validator would have refused).
 */
int npu_ops_map(u32 op, u32 dtype, u32 out_dtype, u32 alpha, void *out,
		const void *a, const void *b, u32 n);

/* Reductions (REDUCE_SUM, REDUCE_MAX) into @n accumulators. */
void npu_ops_reduce_init(u32 op, u32 dtype, void *acc, u32 n);
/* acc[j] = acc[j] (+) src[i][j], src @rows x @cols packed. */
void npu_ops_reduce_cols(u32 op, u32 dtype, void *acc, const void *src,
			 u32 rows, u32 cols);
/* acc[i] = acc[i] (+) src[i][j] over j, src @rows x @cols packed. */
void npu_ops_reduce_rows(u32 op, u32 dtype, void *acc, const void *src,
			 u32 rows, u32 cols);
/* out[i] = (dtype)acc[i]. */
void npu_ops_reduce_finish(u32 dtype, void *out, const void *acc, u32 n);

/*
 * GEMM tiles. Load: dst (@rows x @cols binary32, packed) from src of
 * @dtype (F32 or F16), packed @rows x @cols, or @cols x @rows when @trans.
 */
void npu_ops_gemm_load(u32 dtype, void *dst, const void *src, u32 rows,
		       u32 cols, bool trans);
/* acc (m x n) += a (m x k) * b (k x n), all binary32 and packed. */
void npu_ops_gemm_madd(void *acc, const void *a, const void *b, u32 m, u32 n,
		       u32 k);
/* out[i] = alpha * acc[i] (+ beta * c[i] if @c), i < @count. */
void npu_ops_gemm_store(void *out, const void *acc, const void *c, u32 alpha,
			u32 beta, u32 count);

#endif /* __NPU_OPS_H__ */

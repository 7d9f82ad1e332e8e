// SPDX-License-Identifier: GPL-2.0-only
/*
 * Numeric kernels of the emulated compute engine.
 *
 * The only file of the driver built with SSE enabled (see kernel/Kbuild);
 * its callers follow the rules in npu_ops.h. Plain C on binary32, no libm:
 *  - f16 and bf16 conversions are integer bit manipulation, rounding to
 *    nearest even, with subnormals, infinities and NaNs (quieted, payload
 *    kept as far as it fits) handled exactly;
 *  - exp is a Cody-Waite range reduction plus a polynomial, GELU is built
 *    on it;
 *  - everything else is IEEE-754 arithmetic in the default environment
 *    (round to nearest even, no flush to zero) that kernel_fpu_begin()
 *    sets up. f16/bf16 element-wise ops compute in binary32 and round once
 *    more, which is exact for +, -, *, / (binary32 has more than twice
 *    their precision plus two bits).
 */

#include <linux/errno.h>
#include <linux/types.h>

#include <drm/npu_drm.h>

#include "npu_ops.h"

#define NPU_F32_SIGN		0x80000000u
#define NPU_F32_INF		0x7f800000u
#define NPU_F32_QUIET		0x00400000u
#define NPU_F32_MANT		0x007fffffu
#define NPU_F32_NEG_INF		(NPU_F32_SIGN | NPU_F32_INF)
#define NPU_F16_INF		0x7c00u
#define NPU_F16_QUIET		0x0200u
#define NPU_S32_MAX		0x7fffffff
#define NPU_S32_MIN		(-NPU_S32_MAX - 1)

/* Elements converted to binary32 at a time for f16/bf16 element-wise ops. */
#define NPU_OPS_BLOCK		64

union npu_f32 {
	float f;
	u32 u;
};

static inline float npu_f(u32 u)
{
	union npu_f32 v = { .u = u };

	return v.f;
}

static inline u32 npu_u(float f)
{
	union npu_f32 v = { .f = f };

	return v.u;
}

static inline u32 npu_min_u32(u32 a, u32 b)
{
	return a < b ? a : b;
}

static inline bool npu_f32_is_nan(u32 f)
{
	return (f & ~NPU_F32_SIGN) > NPU_F32_INF;
}

u32 npu_ops_f16_to_f32(u16 h)
{
	u32 sign = (u32)(h & 0x8000) << 16;
	u32 exp = (h >> 10) & 0x1f;
	u32 mant = h & 0x3ff;

	if (exp == 0x1f) {
		if (!mant)
			return sign | NPU_F32_INF;
		return sign | NPU_F32_INF | NPU_F32_QUIET | (mant << 13);
	}
	if (!exp) {
		if (!mant)
			return sign;
		/* Subnormal: normalise; each shift lowers the exponent. */
		exp = 127 - 15 + 1;
		while (!(mant & 0x400)) {
			mant <<= 1;
			exp--;
		}
		return sign | (exp << 23) | ((mant & 0x3ff) << 13);
	}
	return sign | ((exp + 127 - 15) << 23) | (mant << 13);
}

/*
 * Round the significand @sig to nearest even after dropping its low @shift
 * bits (1 <= @shift <= 31).
 */
static inline u32 npu_round_shift(u32 sig, u32 shift)
{
	u32 rem = sig & ((1u << shift) - 1);
	u32 half = 1u << (shift - 1);
	u32 r = sig >> shift;

	if (rem > half || (rem == half && (r & 1)))
		r++;
	return r;
}

u16 npu_ops_f32_to_f16(u32 f)
{
	u32 sign = (f >> 16) & 0x8000;
	u32 exp = (f >> 23) & 0xff;
	u32 mant = f & NPU_F32_MANT;
	int e;

	if (exp == 0xff) {
		if (!mant)
			return sign | NPU_F16_INF;
		return sign | NPU_F16_INF | NPU_F16_QUIET | (mant >> 13);
	}
	/* The f16 biased exponent; binary32 subnormals end up far below 0. */
	e = (int)exp - 127 + 15;
	if (e >= 0x1f)
		return sign | NPU_F16_INF;
	if (e <= 0) {
		/*
		 * f16 subnormal (or zero): the significand with its leading
		 * one, shifted to units of 2^-24. Below 2^-25 it is zero.
		 * A carry into bit 10 gives the smallest normal, correctly.
		 */
		if (e < -10)
			return sign;
		return sign | npu_round_shift(mant | 0x800000, 14 - e);
	}
	/* Normal: a carry out of the fraction bumps the exponent, up to inf. */
	return sign | (((u32)e << 10) + npu_round_shift(mant, 13));
}

u32 npu_ops_bf16_to_f32(u16 h)
{
	u32 f = (u32)h << 16;

	if (npu_f32_is_nan(f))
		f |= NPU_F32_QUIET;
	return f;
}

u16 npu_ops_f32_to_bf16(u32 f)
{
	if (npu_f32_is_nan(f))
		return (f | NPU_F32_QUIET) >> 16;
	/* Same exponent range: rounding the low half covers every case. */
	return (f + 0x7fff + ((f >> 16) & 1)) >> 16;
}

/*
 * Round a non-zero magnitude to a binary float with @mbits fraction bits,
 * exponent bias @bias and all-ones exponent @emax; returns the bits without
 * the sign, infinity when it overflows.
 */
static u32 npu_u32_to_float(u32 mag, u32 mbits, u32 bias, u32 emax)
{
	u32 top = 31 - __builtin_clz(mag);
	u32 bits;

	/* The significand's leading one adds the last 1 to the exponent. */
	if (top <= mbits)
		return ((top + bias - 1) << mbits) + (mag << (mbits - top));
	bits = ((top + bias - 1) << mbits) +
	       npu_round_shift(mag, top - mbits);
	if (bits >> mbits >= emax)
		return emax << mbits;
	return bits;
}

static u32 npu_i32_to_float(s32 v, u32 mbits, u32 bias, u32 emax,
			    u32 sign_bit)
{
	u32 mag = v < 0 ? 0u - (u32)v : (u32)v;

	if (!mag)
		return 0;
	return (v < 0 ? sign_bit : 0) |
	       npu_u32_to_float(mag, mbits, bias, emax);
}

u32 npu_ops_i32_to_f32(s32 v)
{
	return npu_i32_to_float(v, 23, 127, 0xff, NPU_F32_SIGN);
}

u16 npu_ops_i32_to_f16(s32 v)
{
	return npu_i32_to_float(v, 10, 15, 0x1f, 0x8000);
}

u16 npu_ops_i32_to_bf16(s32 v)
{
	return npu_i32_to_float(v, 7, 127, 0xff, 0x8000);
}

/* Round to nearest even; saturate; NaN is 0. */
s32 npu_ops_f32_to_i32(u32 f)
{
	u32 exp = (f >> 23) & 0xff;
	bool neg = f & NPU_F32_SIGN;
	u32 sig, mag;

	if (npu_f32_is_nan(f))
		return 0;
	/* |x| >= 2^31, infinities included. */
	if (exp >= 127 + 31)
		return neg ? NPU_S32_MIN : NPU_S32_MAX;
	/* |x| < 0.5 rounds to 0 (0.5 itself goes to even 0 below). */
	if (exp < 126)
		return 0;
	/* x = sig * 2^(exp - 150) */
	sig = (f & NPU_F32_MANT) | 0x800000;
	if (exp >= 150)
		mag = sig << (exp - 150);
	else
		mag = npu_round_shift(sig, 150 - exp);
	/* mag < 2^31 here, so the negation cannot overflow. */
	return neg ? -(s32)mag : (s32)mag;
}

static float npu_expf_f(float x)
{
	const float log2e = 1.44269504f;
	/* ln 2 in two parts: n * ln2_hi is exact for |n| < 256. */
	const float ln2_hi = npu_f(0x3f317200);
	const float ln2_lo = npu_f(0x35bfbe8e);
	float r, p, y;
	int n;

	if (x != x)
		return x + x;
	/* Past these, e^x overflows or rounds to zero. */
	if (x > 89.0f)
		return npu_f(NPU_F32_INF);
	if (x < -104.0f)
		return 0.0f;

	/* x = n ln2 + r, |r| <= ln2 / 2 (a little more from rounding). */
	n = (int)(x * log2e + (x < 0.0f ? -0.5f : 0.5f));
	r = (x - (float)n * ln2_hi) - (float)n * ln2_lo;

	/*
	 * e^r - 1 = r + r^2 p(r), p the Taylor series to r^7 (its remainder
	 * is below 6e-9 here); adding the small part last keeps the rounding
	 * error near half an ulp of the result.
	 */
	p = 1.0f / 5040.0f + r * (1.0f / 40320.0f);
	p = 1.0f / 720.0f + r * p;
	p = 1.0f / 120.0f + r * p;
	p = 1.0f / 24.0f + r * p;
	p = 1.0f / 6.0f + r * p;
	p = 0.5f + r * p;
	y = 1.0f + (r + r * r * p);

	/* y * 2^n, in two exact steps when 2^n itself is not normal. */
	if (n > 127) {
		y *= 2.0f;
		n--;
	} else if (n < -126) {
		y *= npu_f((127 - 64) << 23);
		n += 64;
	}
	return y * npu_f((u32)(n + 127) << 23);
}

/*
 * GELU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
 * Computed as x * sigmoid(2u) = x / (1 + e^-2u), the same function, which
 * avoids the cancellation of 1 + tanh(u) for negative x; for u < 0 as
 * x e^2u / (1 + e^2u), so that e^-2u cannot overflow before the result
 * underflows.
 */
static float npu_gelu_f(float x)
{
	const float k = 1.59576912f;	/* 2 sqrt(2 / pi) */
	const float c = 0.044715f;
	float z, t;

	if (npu_u(x) == NPU_F32_NEG_INF)
		return -0.0f;
	z = k * (x + c * x * x * x);
	if (z >= 0.0f)
		return x / (1.0f + npu_expf_f(-z));
	t = npu_expf_f(z);
	return x * t / (1.0f + t);
}

u32 npu_ops_expf(u32 x)
{
	return npu_u(npu_expf_f(npu_f(x)));
}

u32 npu_ops_geluf(u32 x)
{
	return npu_u(npu_gelu_f(npu_f(x)));
}

/* IEEE 754-2019 maximum/minimum: NaN propagates, -0 < +0. */
static inline float npu_fmax(float a, float b)
{
	if (a > b)
		return a;
	if (b > a)
		return b;
	if (a == b)
		return npu_f(npu_u(a) & npu_u(b));
	return a + b;
}

static inline float npu_fmin(float a, float b)
{
	if (a < b)
		return a;
	if (b < a)
		return b;
	if (a == b)
		return npu_f(npu_u(a) | npu_u(b));
	return a + b;
}

static inline float npu_relu(float a)
{
	if (a > 0.0f)
		return a;
	if (a != a)
		return a + a;
	return 0.0f;
}

/* Element @i of a float-typed buffer, as binary32. */
static inline float npu_ld(u32 dtype, const void *p, u32 i)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F16:
		return npu_f(npu_ops_f16_to_f32(((const u16 *)p)[i]));
	case DRM_NPU_DTYPE_BF16:
		return npu_f(npu_ops_bf16_to_f32(((const u16 *)p)[i]));
	default:
		return ((const float *)p)[i];
	}
}

static inline void npu_st(u32 dtype, void *p, u32 i, float v)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F16:
		((u16 *)p)[i] = npu_ops_f32_to_f16(npu_u(v));
		break;
	case DRM_NPU_DTYPE_BF16:
		((u16 *)p)[i] = npu_ops_f32_to_bf16(npu_u(v));
		break;
	default:
		((float *)p)[i] = v;
		break;
	}
}

static int npu_map_f32(u32 op, float alpha, float *out, const float *a,
		       const float *b, u32 n)
{
	u32 i;

	switch (op) {
	case DRM_NPU_OP_ADD:
		for (i = 0; i < n; i++)
			out[i] = a[i] + b[i];
		return 0;
	case DRM_NPU_OP_SUB:
		for (i = 0; i < n; i++)
			out[i] = a[i] - b[i];
		return 0;
	case DRM_NPU_OP_MUL:
		for (i = 0; i < n; i++)
			out[i] = a[i] * b[i];
		return 0;
	case DRM_NPU_OP_DIV:
		for (i = 0; i < n; i++)
			out[i] = a[i] / b[i];
		return 0;
	case DRM_NPU_OP_MAX:
		for (i = 0; i < n; i++)
			out[i] = npu_fmax(a[i], b[i]);
		return 0;
	case DRM_NPU_OP_MIN:
		for (i = 0; i < n; i++)
			out[i] = npu_fmin(a[i], b[i]);
		return 0;
	case DRM_NPU_OP_SCALE:
		for (i = 0; i < n; i++)
			out[i] = alpha * a[i];
		return 0;
	case DRM_NPU_OP_AXPY:
		for (i = 0; i < n; i++)
			out[i] = alpha * a[i] + b[i];
		return 0;
	case DRM_NPU_OP_RELU:
		for (i = 0; i < n; i++)
			out[i] = npu_relu(a[i]);
		return 0;
	case DRM_NPU_OP_GELU:
		for (i = 0; i < n; i++)
			out[i] = npu_gelu_f(a[i]);
		return 0;
	case DRM_NPU_OP_EXP:
		for (i = 0; i < n; i++)
			out[i] = npu_expf_f(a[i]);
		return 0;
	default:
		return -EINVAL;
	}
}

/* f16/bf16: through binary32 in blocks, rounding each result once. */
static int npu_map_half(u32 op, u32 dtype, float alpha, void *out,
			const void *a, const void *b, u32 n)
{
	float ta[NPU_OPS_BLOCK], tb[NPU_OPS_BLOCK], to[NPU_OPS_BLOCK];
	u32 i, j, cnt;
	int ret;

	for (i = 0; i < n; i += cnt) {
		cnt = npu_min_u32(n - i, NPU_OPS_BLOCK);
		for (j = 0; j < cnt; j++) {
			ta[j] = npu_ld(dtype, a, i + j);
			if (b)
				tb[j] = npu_ld(dtype, b, i + j);
		}
		ret = npu_map_f32(op, alpha, to, ta, b ? tb : NULL, cnt);
		if (ret)
			return ret;
		for (j = 0; j < cnt; j++)
			npu_st(dtype, out, i + j, to[j]);
	}
	return 0;
}

static int npu_map_i32(u32 op, u32 *out, const u32 *a, const u32 *b, u32 n)
{
	u32 i;

	switch (op) {
	case DRM_NPU_OP_ADD:
		for (i = 0; i < n; i++)
			out[i] = a[i] + b[i];
		return 0;
	case DRM_NPU_OP_SUB:
		for (i = 0; i < n; i++)
			out[i] = a[i] - b[i];
		return 0;
	case DRM_NPU_OP_MUL:
		for (i = 0; i < n; i++)
			out[i] = a[i] * b[i];
		return 0;
	case DRM_NPU_OP_DIV:
		for (i = 0; i < n; i++) {
			s32 x = (s32)a[i], y = (s32)b[i];

			if (!y)
				return -EINVAL;
			/* INT_MIN / -1 wraps to INT_MIN, like the others. */
			out[i] = y == -1 ? 0u - a[i] : (u32)(x / y);
		}
		return 0;
	case DRM_NPU_OP_MAX:
		for (i = 0; i < n; i++)
			out[i] = (s32)a[i] > (s32)b[i] ? a[i] : b[i];
		return 0;
	case DRM_NPU_OP_MIN:
		for (i = 0; i < n; i++)
			out[i] = (s32)a[i] < (s32)b[i] ? a[i] : b[i];
		return 0;
	case DRM_NPU_OP_RELU:
		for (i = 0; i < n; i++)
			out[i] = (s32)a[i] > 0 ? a[i] : 0;
		return 0;
	default:
		return -EINVAL;
	}
}

/* Element @i of any buffer as binary32 bits (i32 rounded). */
static inline u32 npu_ld_bits(u32 dtype, const void *p, u32 i)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F16:
		return npu_ops_f16_to_f32(((const u16 *)p)[i]);
	case DRM_NPU_DTYPE_BF16:
		return npu_ops_bf16_to_f32(((const u16 *)p)[i]);
	case DRM_NPU_DTYPE_I32:
		return npu_ops_i32_to_f32(((const s32 *)p)[i]);
	default:
		return ((const u32 *)p)[i];
	}
}

static void npu_cast(u32 dtype, u32 out_dtype, void *out, const void *a,
		     u32 n)
{
	const s32 *ai = a;
	u16 *o16 = out;
	u32 *o32 = out;
	u32 i;

	if (dtype == out_dtype) {
		if (out != a) {
			const u8 *src = a;
			u8 *dst = out;

			for (i = 0; i < n * npu_ops_dtype_size(dtype); i++)
				dst[i] = src[i];
		}
		return;
	}

	switch (out_dtype) {
	case DRM_NPU_DTYPE_F32:
		for (i = 0; i < n; i++)
			o32[i] = npu_ld_bits(dtype, a, i);
		break;
	case DRM_NPU_DTYPE_I32:
		for (i = 0; i < n; i++)
			o32[i] = npu_ops_f32_to_i32(npu_ld_bits(dtype, a, i));
		break;
	case DRM_NPU_DTYPE_F16:
		/* From i32 directly: through binary32 would round twice. */
		for (i = 0; i < n; i++)
			o16[i] = dtype == DRM_NPU_DTYPE_I32 ?
				 npu_ops_i32_to_f16(ai[i]) :
				 npu_ops_f32_to_f16(npu_ld_bits(dtype, a, i));
		break;
	case DRM_NPU_DTYPE_BF16:
		for (i = 0; i < n; i++)
			o16[i] = dtype == DRM_NPU_DTYPE_I32 ?
				 npu_ops_i32_to_bf16(ai[i]) :
				 npu_ops_f32_to_bf16(npu_ld_bits(dtype, a, i));
		break;
	}
}

int npu_ops_map(u32 op, u32 dtype, u32 out_dtype, u32 alpha, void *out,
		const void *a, const void *b, u32 n)
{
	if (op == DRM_NPU_OP_CAST) {
		if (!npu_ops_dtype_size(dtype) || !npu_ops_dtype_size(out_dtype))
			return -EINVAL;
		npu_cast(dtype, out_dtype, out, a, n);
		return 0;
	}
	if (out_dtype != dtype)
		return -EINVAL;
	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return npu_map_f32(op, npu_f(alpha), out, a, b, n);
	case DRM_NPU_DTYPE_F16:
	case DRM_NPU_DTYPE_BF16:
		return npu_map_half(op, dtype, npu_f(alpha), out, a, b, n);
	case DRM_NPU_DTYPE_I32:
		return npu_map_i32(op, out, a, b, n);
	default:
		return -EINVAL;
	}
}

void npu_ops_reduce_init(u32 op, u32 dtype, void *acc, u32 n)
{
	u32 *p = acc;
	u32 v, i;

	/* Sum from -0 so that a sum of -0s stays -0; max from the bottom. */
	if (dtype == DRM_NPU_DTYPE_I32)
		v = op == DRM_NPU_OP_REDUCE_SUM ? 0 : (u32)NPU_S32_MIN;
	else
		v = op == DRM_NPU_OP_REDUCE_SUM ? NPU_F32_SIGN : NPU_F32_NEG_INF;
	for (i = 0; i < n; i++)
		p[i] = v;
}

static inline u32 npu_imax(u32 a, u32 b)
{
	return (s32)a > (s32)b ? a : b;
}

void npu_ops_reduce_cols(u32 op, u32 dtype, void *acc, const void *src,
			 u32 rows, u32 cols)
{
	bool sum = op == DRM_NPU_OP_REDUCE_SUM;
	const u32 *si = src;
	float *fa = acc;
	u32 *ia = acc;
	u32 r, j;

	for (r = 0; r < rows; r++) {
		u32 base = r * cols;

		if (dtype == DRM_NPU_DTYPE_I32) {
			for (j = 0; j < cols; j++)
				ia[j] = sum ? ia[j] + si[base + j] :
					npu_imax(ia[j], si[base + j]);
		} else if (sum) {
			for (j = 0; j < cols; j++)
				fa[j] += npu_ld(dtype, src, base + j);
		} else {
			for (j = 0; j < cols; j++)
				fa[j] = npu_fmax(fa[j],
						 npu_ld(dtype, src, base + j));
		}
	}
}

void npu_ops_reduce_rows(u32 op, u32 dtype, void *acc, const void *src,
			 u32 rows, u32 cols)
{
	bool sum = op == DRM_NPU_OP_REDUCE_SUM;
	const u32 *si = src;
	float *fa = acc;
	u32 *ia = acc;
	u32 r, j;

	for (r = 0; r < rows; r++) {
		u32 base = r * cols;

		if (dtype == DRM_NPU_DTYPE_I32) {
			u32 v = ia[r];

			for (j = 0; j < cols; j++)
				v = sum ? v + si[base + j] :
				    npu_imax(v, si[base + j]);
			ia[r] = v;
		} else {
			float v = fa[r];

			for (j = 0; j < cols; j++)
				v = sum ? v + npu_ld(dtype, src, base + j) :
				    npu_fmax(v, npu_ld(dtype, src, base + j));
			fa[r] = v;
		}
	}
}

void npu_ops_reduce_finish(u32 dtype, void *out, const void *acc, u32 n)
{
	const u32 *a = acc;
	u16 *o16 = out;
	u32 *o32 = out;
	u32 i;

	for (i = 0; i < n; i++) {
		switch (dtype) {
		case DRM_NPU_DTYPE_F16:
			o16[i] = npu_ops_f32_to_f16(a[i]);
			break;
		case DRM_NPU_DTYPE_BF16:
			o16[i] = npu_ops_f32_to_bf16(a[i]);
			break;
		default:
			o32[i] = a[i];
			break;
		}
	}
}

void npu_ops_gemm_load(u32 dtype, void *dst, const void *src, u32 rows,
		       u32 cols, bool trans)
{
	float *d = dst;
	u32 r, c;

	for (r = 0; r < rows; r++)
		for (c = 0; c < cols; c++)
			d[r * cols + c] = npu_ld(dtype, src,
						 trans ? c * rows + r :
						 r * cols + c);
}

void npu_ops_gemm_madd(void *acc, const void *a, const void *b, u32 m, u32 n,
		       u32 k)
{
	const float *fa = a, *fb = b;
	float *fc = acc;
	u32 i, p, j;

	/* Each acc element sums its products in order of p. */
	for (i = 0; i < m; i++) {
		float *crow = fc + i * n;

		for (p = 0; p < k; p++) {
			const float *brow = fb + p * n;
			float av = fa[i * k + p];

			for (j = 0; j < n; j++)
				crow[j] += av * brow[j];
		}
	}
}

void npu_ops_gemm_store(void *out, const void *acc, const void *c, u32 alpha,
			u32 beta, u32 count)
{
	const float *fa = acc, *fc = c;
	float al = npu_f(alpha), be = npu_f(beta);
	float *fo = out;
	u32 i;

	if (fc) {
		for (i = 0; i < count; i++)
			fo[i] = al * fa[i] + be * fc[i];
	} else {
		for (i = 0; i < count; i++)
			fo[i] = al * fa[i];
	}
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * ops_fpu_test - kernel/npu_ops_fpu.c, the numeric kernels of the npu
 * compute engine, built in user space and checked against references
 * written independently with libm and double precision:
 *  - f16/bf16 to f32 and the round trips for all 65536 bit patterns;
 *  - f32, i32 to f16/bf16 against a nearest-value search in a table of
 *    every representable value (ties to even), on every rounding boundary;
 *  - float to i32 casts against rint(), saturation and NaN;
 *  - exp and GELU relative error (printed), and their special values;
 *  - every element-wise op on edge values for every dtype, i32 wrap and
 *    division edge cases, reductions and GEMM tiles.
 *
 * Prints KTAP; exits 1 if anything failed.
 */

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_ops.h"

/* ------------------------------------------------------------------ */
/* Harness                                                             */

static int case_failures;
static unsigned long case_checks;

#define CHECK(cond, ...)						\
	do {								\
		case_checks++;						\
		if (!(cond)) {						\
			if (case_failures < 10) {			\
				printf("# %s:%d: ", __func__, __LINE__); \
				printf(__VA_ARGS__);			\
				printf("\n");				\
			}						\
			case_failures++;				\
		}							\
	} while (0)

/* xorshift64*: deterministic inputs. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd32(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* Uniform in [lo, hi). */
static float rnd_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd32() >> 8) / 16777216.0f;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* ------------------------------------------------------------------ */
/* References                                                          */

/* Exact values of f16 and bf16 bit patterns (finite ones). */
static double ref_f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);

	return (h & 0x8000) ? -v : v;
}

static double ref_bf16_value(uint16_t h)
{
	int e = (h >> 7) & 0xff, m = h & 0x7f;
	double v = e ? ldexp(128 + m, e - 134) : ldexp(m, -133);

	return (h & 0x8000) ? -v : v;
}

#define F16_INF_IDX	0x7c00
#define BF16_INF_IDX	0x7f80

/*
 * Every non-negative finite value of the format, by bit pattern, and in
 * the infinity's slot the power of two above the largest finite value:
 * IEEE rounds to infinity exactly where that next value would win.
 */
static double f16_table[F16_INF_IDX + 1];
static double bf16_table[BF16_INF_IDX + 1];

static void build_tables(void)
{
	int i;

	for (i = 0; i < F16_INF_IDX; i++)
		f16_table[i] = ref_f16_value(i);
	f16_table[F16_INF_IDX] = 65536.0;
	for (i = 0; i < BF16_INF_IDX; i++)
		bf16_table[i] = ref_bf16_value(i);
	bf16_table[BF16_INF_IDX] = ldexp(1.0, 128);
}

/* Nearest table entry to a non-NaN x, ties to the even bit pattern. */
static uint16_t ref_round(const double *tab, int inf_idx, double x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double ax = fabs(x), d_lo, d_hi;
	int lo = 0, hi = inf_idx;

	if (ax >= tab[inf_idx])
		return sign | inf_idx;
	/* tab[lo] <= ax < tab[hi] */
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;

		if (tab[mid] <= ax)
			lo = mid;
		else
			hi = mid;
	}
	d_lo = ax - tab[lo];
	d_hi = tab[hi] - ax;
	if (d_lo < d_hi)
		return sign | lo;
	if (d_hi < d_lo)
		return sign | hi;
	return sign | (lo % 2 ? hi : lo);
}

static uint16_t ref_to_f16(double x)
{
	return ref_round(f16_table, F16_INF_IDX, x);
}

static uint16_t ref_to_bf16(double x)
{
	return ref_round(bf16_table, BF16_INF_IDX, x);
}

static int32_t ref_to_i32(double x)
{
	double r;

	if (isnan(x))
		return 0;
	r = rint(x);
	if (r >= 2147483648.0)
		return INT32_MAX;
	if (r <= -2147483648.0)
		return INT32_MIN;
	return (int32_t)r;
}

static bool f16_is_nan(uint16_t h)
{
	return (h & 0x7fff) > 0x7c00;
}

static bool bf16_is_nan(uint16_t h)
{
	return (h & 0x7fff) > 0x7f80;
}

/* Value of element @i of a buffer of @dtype, as a double (NaN kept). */
static double elem_value(uint32_t dtype, const void *p, size_t i)
{
	uint16_t h;

	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return ((const float *)p)[i];
	case DRM_NPU_DTYPE_F16:
		h = ((const uint16_t *)p)[i];
		if ((h & 0x7fff) == 0x7c00)
			return h & 0x8000 ? -INFINITY : INFINITY;
		return f16_is_nan(h) ? NAN : ref_f16_value(h);
	case DRM_NPU_DTYPE_BF16:
		h = ((const uint16_t *)p)[i];
		if ((h & 0x7fff) == 0x7f80)
			return h & 0x8000 ? -INFINITY : INFINITY;
		return bf16_is_nan(h) ? NAN : ref_bf16_value(h);
	default:
		return ((const int32_t *)p)[i];
	}
}

/* The bits of a value rounded once to @dtype (NaN as the default NaN). */
static uint32_t ref_bits(uint32_t dtype, double x)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return isnan(x) ? 0x7fc00000 : f2u((float)x);
	case DRM_NPU_DTYPE_F16:
		return isnan(x) ? 0x7e00 : ref_to_f16(x);
	case DRM_NPU_DTYPE_BF16:
		return isnan(x) ? 0x7fc0 : ref_to_bf16(x);
	default:
		return (uint32_t)ref_to_i32(x);
	}
}

static uint32_t elem_bits(uint32_t dtype, const void *p, size_t i)
{
	if (npu_ops_dtype_size(dtype) == 2)
		return ((const uint16_t *)p)[i];
	return ((const uint32_t *)p)[i];
}

static bool bits_is_nan(uint32_t dtype, uint32_t b)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return (b & 0x7fffffff) > 0x7f800000;
	case DRM_NPU_DTYPE_F16:
		return f16_is_nan(b);
	case DRM_NPU_DTYPE_BF16:
		return bf16_is_nan(b);
	default:
		return false;
	}
}

/* Same bits, or both NaN. */
static bool same_bits(uint32_t dtype, uint32_t got, uint32_t want)
{
	if (bits_is_nan(dtype, want))
		return bits_is_nan(dtype, got);
	return got == want;
}

static const char *const dtype_names[] = { "f32", "f16", "bf16", "i32" };

/* Relative error of a binary32 result, NaN-safe. */
static double rel_err(double got, double want)
{
	if (got == want)
		return 0;
	return fabs(got - want) / fabs(want);
}

/* ------------------------------------------------------------------ */
/* Conversions                                                         */

static void test_f16_to_f32_all(void)
{
	uint32_t h;

	for (h = 0; h < 0x10000; h++) {
		uint32_t got = npu_ops_f16_to_f32(h);

		if (f16_is_nan(h)) {
			/* Quieted, sign and payload kept. */
			uint32_t want = ((h & 0x8000) << 16) | 0x7fc00000 |
					((h & 0x3ff) << 13);

			CHECK(got == want, "f16 %#x -> %#x, want %#x", h, got,
			      want);
			continue;
		}
		CHECK(got == f2u((float)elem_value(DRM_NPU_DTYPE_F16, &h, 0)),
		      "f16 %#x -> %#x", h, got);
#ifdef __FLT16_MAX__
		{
			_Float16 c;
			uint16_t hb = h;

			memcpy(&c, &hb, sizeof(c));
			CHECK(got == f2u((float)c),
			      "f16 %#x -> %#x, compiler %#x", h, got,
			      f2u((float)c));
		}
#endif
	}
}

static void test_f16_round_trip_all(void)
{
	uint32_t h;

	for (h = 0; h < 0x10000; h++) {
		uint16_t back = npu_ops_f32_to_f16(npu_ops_f16_to_f32(h));
		uint16_t want = f16_is_nan(h) ? (h | 0x200) : h;

		CHECK(back == want, "f16 %#x -> f32 -> %#x", h, back);
	}
}

static void test_bf16_to_f32_all(void)
{
	uint32_t h;

	for (h = 0; h < 0x10000; h++) {
		uint32_t got = npu_ops_bf16_to_f32(h);

		if (bf16_is_nan(h)) {
			CHECK(got == ((h << 16) | 0x400000),
			      "bf16 %#x -> %#x", h, got);
			continue;
		}
		CHECK(got == f2u((float)elem_value(DRM_NPU_DTYPE_BF16, &h, 0)),
		      "bf16 %#x -> %#x", h, got);
	}
}

static void test_bf16_round_trip_all(void)
{
	uint32_t h;

	for (h = 0; h < 0x10000; h++) {
		uint16_t back = npu_ops_f32_to_bf16(npu_ops_bf16_to_f32(h));
		uint16_t want = bf16_is_nan(h) ? (h | 0x40) : h;

		CHECK(back == want, "bf16 %#x -> f32 -> %#x", h, back);
	}
}

/* One f32 -> f16/bf16 check against the table reference. */
static void check_f32_to_half(uint32_t f, bool bf16)
{
	uint16_t got = bf16 ? npu_ops_f32_to_bf16(f) : npu_ops_f32_to_f16(f);
	float x = u2f(f);

	if (isnan(x)) {
		uint16_t sign = (f >> 16) & 0x8000;

		if (bf16)
			CHECK(got == ((f >> 16) | 0x40), "%#x -> bf16 %#x", f,
			      got);
		else
			CHECK(got == (sign | 0x7e00 | ((f >> 13) & 0x3ff)),
			      "%#x -> f16 %#x", f, got);
		return;
	}
	if (bf16) {
		CHECK(got == ref_to_bf16(x), "%#x (%a) -> bf16 %#x, want %#x",
		      f, x, got, ref_to_bf16(x));
		return;
	}
	CHECK(got == ref_to_f16(x), "%#x (%a) -> f16 %#x, want %#x", f, x,
	      got, ref_to_f16(x));
#ifdef __FLT16_MAX__
	{
		_Float16 c = (_Float16)x;
		uint16_t cb;

		memcpy(&cb, &c, sizeof(cb));
		CHECK(got == cb, "%#x -> f16 %#x, compiler %#x", f, got, cb);
	}
#endif
}

/*
 * Every rounding boundary of the narrow format: each representable value,
 * each midpoint between neighbours, and binary32 values a few ulps
 * either side, both signs; then random bit patterns and specials.
 */
static void check_f32_to_half_all(bool bf16)
{
	const double *tab = bf16 ? bf16_table : f16_table;
	int inf_idx = bf16 ? BF16_INF_IDX : F16_INF_IDX;
	uint32_t specials[] = {
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
		0x7f800001, 0x7fbfffff, 0x00000001, 0x807fffff, 0x00800000,
		0x7f7fffff, 0xff7fffff, 0x477fe000, 0x477fefff, 0x477ff000,
		0x33000000, 0x33000001, 0x32ffffff, 0x387fc000, 0x38800000,
	};
	int i, d, s;

	for (i = 0; i < inf_idx; i++) {
		double mid = (tab[i] + tab[i + 1]) / 2;
		uint32_t points[2] = { f2u((float)tab[i]), f2u((float)mid) };
		int p;

		for (p = 0; p < 2; p++)
			for (d = -3; d <= 3; d++)
				for (s = 0; s < 2; s++) {
					uint32_t f = points[p] + d;

					if ((int32_t)points[p] + d < 0)
						continue;
					check_f32_to_half(f | (s ? 0x80000000 : 0),
							  bf16);
				}
	}
	for (i = 0; i < (int)(sizeof(specials) / sizeof(specials[0])); i++)
		check_f32_to_half(specials[i], bf16);
	for (i = 0; i < 4000000; i++)
		check_f32_to_half(rnd32(), bf16);
}

static void test_f32_to_f16(void)
{
	check_f32_to_half_all(false);
}

static void test_f32_to_bf16(void)
{
	check_f32_to_half_all(true);
}

static void check_i32_to_float(int32_t v)
{
	uint32_t f = npu_ops_i32_to_f32(v);
	uint16_t h = npu_ops_i32_to_f16(v);
	uint16_t b = npu_ops_i32_to_bf16(v);

	CHECK(f == f2u((float)v), "i32 %d -> f32 %#x", v, f);
	CHECK(h == ref_to_f16(v), "i32 %d -> f16 %#x, want %#x", v, h,
	      ref_to_f16(v));
	CHECK(b == ref_to_bf16(v), "i32 %d -> bf16 %#x, want %#x", v, b,
	      ref_to_bf16(v));
}

static void test_i32_to_float(void)
{
	int32_t v;
	int i, d;

	for (v = -70000; v <= 70000; v++)
		check_i32_to_float(v);
	check_i32_to_float(INT32_MIN);
	check_i32_to_float(INT32_MAX);
	/* Around powers of two and the midpoints of every precision. */
	for (i = 1; i < 31; i++) {
		for (d = -4; d <= 4; d++) {
			int64_t p = (int64_t)1 << i;
			int k;

			for (k = 0; k < 24; k++) {
				int64_t v64 = p + (p >> k) + d;

				if (v64 <= INT32_MAX) {
					check_i32_to_float((int32_t)v64);
					check_i32_to_float((int32_t)-v64);
				}
			}
		}
	}
	/* The double-rounding trap of i32 -> f32 -> bf16. */
	check_i32_to_float(0x01010001);
	check_i32_to_float(-0x01010001);
	for (i = 0; i < 2000000; i++)
		check_i32_to_float((int32_t)rnd32());
}

static void check_f32_to_i32(uint32_t f)
{
	int32_t got = npu_ops_f32_to_i32(f);
	int32_t want = ref_to_i32(u2f(f));

	CHECK(got == want, "f32 %#x (%a) -> i32 %d, want %d", f, u2f(f), got,
	      want);
}

static void test_f32_to_i32(void)
{
	uint32_t specials[] = {
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
		0x7f800001, 0x00000001, 0x3effffff, 0x3f000000, 0x3f000001,
		0xbf000000, 0x3fc00000, 0x40200000, 0xc0200000, 0x4effffff,
		0x4f000000, 0xcf000000, 0xcf000001, 0x7f7fffff, 0xff7fffff,
		0x4b000000, 0x4b000001, 0x4affffff, 0x4b7fffff,
	};
	int i, k, d;

	for (i = 0; i < (int)(sizeof(specials) / sizeof(specials[0])); i++)
		check_f32_to_i32(specials[i]);
	/* Every x.5 tie and its neighbours, up to where f32 has no halves. */
	for (k = -70000; k <= 70000; k++) {
		uint32_t t = f2u((float)k + 0.5f);

		for (d = -2; d <= 2; d++)
			check_f32_to_i32(t + d);
	}
	for (k = 0; k < 0x1000000; k += 7)
		check_f32_to_i32(f2u((float)k + 0.5f));
	/* All f32 from 2^22 to 2^32, and negatives, sparsely. */
	for (i = 0; i < 3000000; i++) {
		check_f32_to_i32(rnd32());
		check_f32_to_i32(0x4a800000 + rnd32() % 0x4000000);
		check_f32_to_i32(0xca800000 + rnd32() % 0x4000000);
	}
}

/* ------------------------------------------------------------------ */
/* exp and GELU                                                        */

static double ref_gelu(double x)
{
	double z = 2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);

	if (isinf(x))
		return x > 0 ? x : -0.0;
	/* x * sigmoid(z), the stable form of 0.5 x (1 + tanh(z / 2)). */
	if (z >= 0)
		return x / (1 + exp(-z));
	return x * exp(z) / (1 + exp(z));
}

static float npu_exp(float x)
{
	return u2f(npu_ops_expf(f2u(x)));
}

static float npu_gelu(float x)
{
	return u2f(npu_ops_geluf(f2u(x)));
}

static double exp_max_rel;

static void check_exp(float x, double *worst, float *worst_x)
{
	float got = npu_exp(x);
	double want = exp((double)x);
	float wantf = (float)want;
	double e;

	if (isinf(wantf)) {
		/* Rounds to inf: got may only be inf (or FLT_MAX at the edge). */
		CHECK(isinf(got) || rel_err(got, want) < 2e-7,
		      "exp(%a) = %a, want inf", x, got);
		return;
	}
	if (want < FLT_MIN) {
		/* Subnormal results: within an ulp of the subnormal grid. */
		CHECK(fabs(got - want) <= ldexp(1, -149) + want * 2e-7,
		      "exp(%a) = %a, want %a", x, got, want);
		return;
	}
	e = rel_err(got, want);
	if (e > *worst) {
		*worst = e;
		*worst_x = x;
	}
	CHECK(e < 2e-7, "exp(%a) = %a, want %a (rel %.3g)", x, got, want, e);
}

static void test_exp_accuracy(void)
{
	double worst = 0, ulps;
	float worst_x = 0;
	uint32_t f;
	int i;

	/* Every 29th binary32 in [-104, 89], both signs, plus random ones. */
	for (f = 0; f <= f2u(104.0f); f += 29) {
		if (u2f(f) <= 89.0f)
			check_exp(u2f(f), &worst, &worst_x);
		check_exp(-u2f(f), &worst, &worst_x);
	}
	for (i = 0; i < 2000000; i++)
		check_exp(rnd_uniform(-104.0f, 89.0f), &worst, &worst_x);
	for (i = 0; i < 2000000; i++)
		check_exp(rnd_uniform(-1.0f, 1.0f), &worst, &worst_x);
	exp_max_rel = worst;
	ulps = worst / ldexp(1, -23);
	printf("# exp: max relative error %.3g (%.2f ulp at 1.0) at x = %a, normal results\n",
	       worst, ulps, worst_x);
}

static void test_exp_special(void)
{
	float ln_max = logf(FLT_MAX);
	int i;

	CHECK(npu_exp(0.0f) == 1.0f, "exp(0)");
	CHECK(npu_exp(-0.0f) == 1.0f, "exp(-0)");
	CHECK(isnan(npu_exp(NAN)), "exp(NaN)");
	CHECK(isnan(npu_exp(-NAN)), "exp(-NaN)");
	CHECK(npu_exp(INFINITY) == INFINITY, "exp(inf)");
	CHECK(npu_exp(-INFINITY) == 0.0f && !signbit(npu_exp(-INFINITY)),
	      "exp(-inf)");
	CHECK(npu_exp(1000.0f) == INFINITY, "exp(1000)");
	CHECK(npu_exp(-1000.0f) == 0.0f, "exp(-1000)");
	CHECK(npu_exp(FLT_MAX) == INFINITY, "exp(FLT_MAX)");
	CHECK(npu_exp(-FLT_MAX) == 0.0f, "exp(-FLT_MAX)");
	CHECK(npu_exp(1e-30f) == 1.0f, "exp(1e-30)");
	CHECK(npu_exp(-1e-30f) == 1.0f, "exp(-1e-30)");
	CHECK(npu_exp(1.0f) == (float)M_E, "exp(1) = %a", npu_exp(1.0f));
	/* The overflow threshold, binary32 by binary32. */
	for (i = -8; i <= 8; i++) {
		float x = u2f(f2u(ln_max) + i);
		float want = (float)exp((double)x);

		CHECK(isinf(npu_exp(x)) == isinf(want), "exp(%a) = %a", x,
		      npu_exp(x));
	}
	/* Underflow: e^-103.97 is half the smallest subnormal. */
	CHECK(npu_exp(-104.0f) == 0.0f, "exp(-104)");
	CHECK(npu_exp(-103.0f) > 0.0f, "exp(-103) = %a", npu_exp(-103.0f));
	CHECK(npu_exp(-87.5f) > 0.0f && npu_exp(-87.5f) < FLT_MIN,
	      "exp(-87.5) subnormal");
}

struct gelu_stats {
	double worst[3];
	float worst_x[3];
	double worst_abs;
};

/*
 * Relative error bounds: 3e-7 for x >= 0; for x < 0 the result is about
 * x e^-|z|, and binary32's own rounding of z = 2 sqrt(2/pi) (x + 0.044715
 * x^3) costs up to a few |z| 2^-24 relative: 1e-6 + 4 |z| 2^-24.
 */
static void check_gelu(float x, struct gelu_stats *st)
{
	float got = npu_gelu(x);
	double want = ref_gelu(x);
	double z = fabs(2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
	double e, bound;
	int region;

	if (fabs(want) < FLT_MIN) {
		/* Underflowed results: absolute. */
		CHECK(fabs(got - want) <= FLT_MIN, "gelu(%a) = %a, want %a", x,
		      got, want);
		return;
	}
	e = rel_err(got, want);
	st->worst_abs = fmax(st->worst_abs, fabs(got - want));
	if (x >= 0) {
		region = 2;
		bound = 3e-7;
	} else {
		region = x >= -3.0f ? 1 : 0;
		bound = 1e-6 + 4 * z * ldexp(1, -24);
	}
	if (e > st->worst[region]) {
		st->worst[region] = e;
		st->worst_x[region] = x;
	}
	CHECK(e < bound, "gelu(%a) = %a, want %a (rel %.3g)", x, got, want, e);
}

static void test_gelu_accuracy(void)
{
	struct gelu_stats st;
	uint32_t f;
	int i;

	memset(&st, 0, sizeof(st));
	/* Every 31st binary32 of magnitude up to 12, both signs. */
	for (f = 0; f <= f2u(12.0f); f += 31) {
		check_gelu(u2f(f), &st);
		check_gelu(-u2f(f), &st);
	}
	for (i = 0; i < 2000000; i++) {
		float x = u2f(rnd32() & 0x7fffffff) * (i % 2 ? -1 : 1);

		if (!isnan(x) && !isinf(x))
			check_gelu(x, &st);
		check_gelu(rnd_uniform(-3.0f, 3.0f), &st);
	}
	printf("# gelu: max relative error %.3g for x < -3 (x = %a), %.3g on [-3, 0) (x = %a), %.3g for x >= 0 (x = %a); max absolute error %.3g\n",
	       st.worst[0], st.worst_x[0], st.worst[1], st.worst_x[1],
	       st.worst[2], st.worst_x[2], st.worst_abs);
}

static void test_gelu_special(void)
{
	CHECK(npu_gelu(0.0f) == 0.0f && !signbit(npu_gelu(0.0f)), "gelu(0)");
	CHECK(npu_gelu(-0.0f) == 0.0f && signbit(npu_gelu(-0.0f)),
	      "gelu(-0)");
	CHECK(isnan(npu_gelu(NAN)), "gelu(NaN)");
	CHECK(npu_gelu(INFINITY) == INFINITY, "gelu(inf)");
	CHECK(npu_gelu(-INFINITY) == 0.0f, "gelu(-inf) = %a",
	      npu_gelu(-INFINITY));
	CHECK(npu_gelu(FLT_MAX) == FLT_MAX, "gelu(FLT_MAX)");
	CHECK(npu_gelu(-FLT_MAX) == 0.0f, "gelu(-FLT_MAX)");
	CHECK(npu_gelu(1e30f) == 1e30f, "gelu(1e30)");
	CHECK(npu_gelu(-1e30f) == 0.0f, "gelu(-1e30)");
	CHECK(npu_gelu(100.0f) == 100.0f, "gelu(100)");
	CHECK(npu_gelu(-100.0f) == 0.0f, "gelu(-100)");
	CHECK(npu_gelu(1e-30f) == 0.5e-30f, "gelu(1e-30) = %a",
	      npu_gelu(1e-30f));
	CHECK(fabsf(npu_gelu(1.0f) - 0.841192f) < 1e-6f, "gelu(1) = %a",
	      npu_gelu(1.0f));
	CHECK(fabsf(npu_gelu(-1.0f) + 0.158808f) < 1e-6f, "gelu(-1) = %a",
	      npu_gelu(-1.0f));
}

/* ------------------------------------------------------------------ */
/* Element-wise ops                                                    */

#define MAX_VALUES	512

/* Interesting bit patterns of each dtype. */
static size_t edge_values(uint32_t dtype, uint32_t *v)
{
	static const uint32_t f32[] = {
		0, 0x80000000, 0x3f800000, 0xbf800000, 0x40000000, 0x3f000000,
		0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
		0x7f7fffff, 0xff7fffff, 0x00800000, 0x80800000, 0x00000001,
		0x807fffff, 0x3f800001, 0x3f7fffff, 0x4b000000, 0x4effffff,
		0x4f000000, 0x40490fdb, 0xc0490fdb, 0x3eaaaaab, 0x5f000000,
		0x1f000000,
	};
	static const uint32_t half[] = {
		0, 0x8000, 0x3c00, 0xbc00, 0x4000, 0x3800, 0x7c00, 0xfc00,
		0x7e00, 0xfe00, 0x7c01, 0x7bff, 0xfbff, 0x0400, 0x8400, 0x0001,
		0x83ff, 0x3c01, 0x3bff, 0x4248, 0x5bff, 0x7000, 0x1000,
	};
	static const uint32_t bf[] = {
		0, 0x8000, 0x3f80, 0xbf80, 0x4000, 0x3f00, 0x7f80, 0xff80,
		0x7fc0, 0xffc0, 0x7f81, 0x7f7f, 0xff7f, 0x0080, 0x8080, 0x0001,
		0x807f, 0x3f81, 0x3f7f, 0x4049, 0x5f00, 0x1f00,
	};
	static const uint32_t i32[] = {
		0, 1, 0xffffffff, 2, 0xfffffffe, 7, 0xfffffff9, 3, 0xfffffffd,
		0x7fffffff, 0x80000000, 0x7ffffffe, 0x80000001, 0x10000,
		0xffff0000, 1000000, 0xfff0bdc0, 0x40000000, 0xc0000000,
	};
	const uint32_t *src;
	size_t n, i;

	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		src = f32;
		n = sizeof(f32) / sizeof(f32[0]);
		break;
	case DRM_NPU_DTYPE_F16:
		src = half;
		n = sizeof(half) / sizeof(half[0]);
		break;
	case DRM_NPU_DTYPE_BF16:
		src = bf;
		n = sizeof(bf) / sizeof(bf[0]);
		break;
	default:
		src = i32;
		n = sizeof(i32) / sizeof(i32[0]);
		break;
	}
	memcpy(v, src, n * sizeof(*v));
	/* And random finite values. */
	for (i = n; i < n + 40; i++) {
		uint32_t r;

		do {
			r = rnd32();
			if (dtype == DRM_NPU_DTYPE_F16 || dtype == DRM_NPU_DTYPE_BF16)
				r &= 0xffff;
		} while (bits_is_nan(dtype, r) ||
			 (dtype == DRM_NPU_DTYPE_F32 && isinf(u2f(r))));
		v[i] = r;
	}
	return n + 40;
}

static void store_bits(uint32_t dtype, void *p, size_t i, uint32_t b)
{
	if (npu_ops_dtype_size(dtype) == 2)
		((uint16_t *)p)[i] = b;
	else
		((uint32_t *)p)[i] = b;
}

/* IEEE 754-2019 maximum/minimum in double. */
static double ref_max(double a, double b, bool is_max)
{
	if (isnan(a) || isnan(b))
		return NAN;
	if (a == b)
		return is_max ? (signbit(a) ? b : a) : (signbit(a) ? a : b);
	return (a > b) == is_max ? a : b;
}

/*
 * The reference of one float op: the exact result (or double's, rounded
 * once: still exact after rounding to the narrow type) rounded to @dtype.
 * SCALE and AXPY round to binary32 first, as the engine does: alpha is a
 * binary32, so for f16/bf16 that may differ from one rounding.
 */
static double ref_float_op(uint32_t op, double a, double b, float alpha)
{
	switch (op) {
	case DRM_NPU_OP_ADD:
		return a + b;
	case DRM_NPU_OP_SUB:
		return a - b;
	case DRM_NPU_OP_MUL:
		return a * b;
	case DRM_NPU_OP_DIV:
		return a / b;
	case DRM_NPU_OP_MAX:
		return ref_max(a, b, true);
	case DRM_NPU_OP_MIN:
		return ref_max(a, b, false);
	case DRM_NPU_OP_SCALE:
		return (float)((double)alpha * a);
	case DRM_NPU_OP_AXPY:
		return (double)(float)((double)alpha * a) + b;
	case DRM_NPU_OP_RELU:
		return isnan(a) ? a : (a > 0 ? a : 0.0);
	default:
		return NAN;
	}
}

static const char *const op_names[] = {
	"add", "sub", "mul", "div", "max", "min", "scale", "axpy", "relu",
	"gelu", "exp", "cast", "reduce_sum", "reduce_max", "transpose", "gemm",
};

/* Run @op on all pairs of edge values and compare every element. */
static void check_float_op(uint32_t op, uint32_t dtype, float alpha)
{
	static uint32_t v[MAX_VALUES];
	size_t nv = edge_values(dtype, v), n = nv * nv, i;
	size_t es = npu_ops_dtype_size(dtype);
	void *a = malloc(n * es), *b = malloc(n * es), *out = malloc(n * es);
	int ret;

	for (i = 0; i < n; i++) {
		store_bits(dtype, a, i, v[i / nv]);
		store_bits(dtype, b, i, v[i % nv]);
	}
	ret = npu_ops_map(op, dtype, dtype, f2u(alpha), out, a, b, n);
	CHECK(!ret, "%s %s: %d", op_names[op], dtype_names[dtype], ret);
	for (i = 0; i < n; i++) {
		double x = elem_value(dtype, a, i), y = elem_value(dtype, b, i);
		double want = ref_float_op(op, x, y, alpha);
		uint32_t wb = ref_bits(dtype, want);
		uint32_t got = elem_bits(dtype, out, i);

		/* AXPY in binary32 rounds twice; its reference does too. */
		if (op == DRM_NPU_OP_AXPY)
			wb = ref_bits(dtype, (double)(float)want);
		CHECK(same_bits(dtype, got, wb),
		      "%s %s alpha %a: %a, %a -> %#x, want %#x", op_names[op],
		      dtype_names[dtype], alpha, x, y, got, wb);
	}
	free(a);
	free(b);
	free(out);
}

static void test_float_binary(void)
{
	uint32_t op, dtype;

	for (dtype = DRM_NPU_DTYPE_F32; dtype <= DRM_NPU_DTYPE_BF16; dtype++)
		for (op = DRM_NPU_OP_ADD; op <= DRM_NPU_OP_MIN; op++)
			check_float_op(op, dtype, 0);
}

static void test_scale_axpy_relu(void)
{
	static const float alphas[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 3.0f, 1e30f, 1e-30f, -2.5f,
		INFINITY, NAN,
	};
	uint32_t dtype;
	size_t i;

	for (dtype = DRM_NPU_DTYPE_F32; dtype <= DRM_NPU_DTYPE_BF16; dtype++) {
		for (i = 0; i < sizeof(alphas) / sizeof(alphas[0]); i++) {
			check_float_op(DRM_NPU_OP_SCALE, dtype, alphas[i]);
			check_float_op(DRM_NPU_OP_AXPY, dtype, alphas[i]);
		}
		check_float_op(DRM_NPU_OP_RELU, dtype, 0);
	}
}

/* EXP and GELU on every f16 and bf16 value: within one narrow ulp. */
static void check_half_func(uint32_t op, uint32_t dtype, unsigned int *exact)
{
	static uint16_t in[0x10000], out[0x10000];
	uint32_t i;
	int ret;

	for (i = 0; i < 0x10000; i++)
		in[i] = i;
	ret = npu_ops_map(op, dtype, dtype, 0, out, in, NULL, 0x10000);
	CHECK(!ret, "map %d", ret);
	*exact = 0;
	for (i = 0; i < 0x10000; i++) {
		double x = elem_value(dtype, in, i);
		double want = op == DRM_NPU_OP_EXP ? exp(x) : ref_gelu(x);
		uint32_t wb = ref_bits(dtype, want);
		int32_t diff = (int32_t)out[i] - (int32_t)wb;

		if (isnan(x)) {
			CHECK(bits_is_nan(dtype, out[i]), "%s %s(%#x) = %#x",
			      dtype_names[dtype], op_names[op], i, out[i]);
			continue;
		}
		if (out[i] == wb) {
			(*exact)++;
			continue;
		}
		/* Same sign and a neighbouring bit pattern, i.e. one ulp. */
		CHECK(!((out[i] ^ wb) & 0x8000) && (diff == 1 || diff == -1),
		      "%s %s(%a) = %#x, want %#x", dtype_names[dtype],
		      op_names[op], x, out[i], wb);
	}
}

static void test_half_exp_gelu(void)
{
	unsigned int exact[4];

	check_half_func(DRM_NPU_OP_EXP, DRM_NPU_DTYPE_F16, &exact[0]);
	check_half_func(DRM_NPU_OP_GELU, DRM_NPU_DTYPE_F16, &exact[1]);
	check_half_func(DRM_NPU_OP_EXP, DRM_NPU_DTYPE_BF16, &exact[2]);
	check_half_func(DRM_NPU_OP_GELU, DRM_NPU_DTYPE_BF16, &exact[3]);
	printf("# correctly rounded of 65536: f16 exp %u, f16 gelu %u, bf16 exp %u, bf16 gelu %u (others within 1 ulp)\n",
	       exact[0], exact[1], exact[2], exact[3]);
}

static void test_f32_exp_gelu_map(void)
{
	float in[300], out[300];
	int i;

	/* The map entry point gives the scalar functions' results. */
	for (i = 0; i < 300; i++)
		in[i] = (i - 150) * 0.37f;
	CHECK(!npu_ops_map(DRM_NPU_OP_EXP, 0, 0, 0, out, in, NULL, 300),
	      "exp map");
	for (i = 0; i < 300; i++)
		CHECK(f2u(out[i]) == npu_ops_expf(f2u(in[i])), "exp %d", i);
	CHECK(!npu_ops_map(DRM_NPU_OP_GELU, 0, 0, 0, out, in, NULL, 300),
	      "gelu map");
	for (i = 0; i < 300; i++)
		CHECK(f2u(out[i]) == npu_ops_geluf(f2u(in[i])), "gelu %d", i);
}

static uint32_t ref_i32_op(uint32_t op, int32_t a, int32_t b)
{
	switch (op) {
	case DRM_NPU_OP_ADD:
		return (uint32_t)((int64_t)a + b);
	case DRM_NPU_OP_SUB:
		return (uint32_t)((int64_t)a - b);
	case DRM_NPU_OP_MUL:
		return (uint32_t)((int64_t)a * b);
	case DRM_NPU_OP_DIV:
		return (uint32_t)((int64_t)a / b);
	case DRM_NPU_OP_MAX:
		return a > b ? a : b;
	case DRM_NPU_OP_MIN:
		return a < b ? a : b;
	case DRM_NPU_OP_RELU:
		return a > 0 ? a : 0;
	default:
		return 0;
	}
}

static void test_i32_ops(void)
{
	static uint32_t v[MAX_VALUES], a[MAX_VALUES * MAX_VALUES],
		b[MAX_VALUES * MAX_VALUES], out[MAX_VALUES * MAX_VALUES];
	size_t nv = edge_values(DRM_NPU_DTYPE_I32, v), n = 0, i;
	uint32_t op;
	int ret;

	for (i = 0; i < nv * nv; i++) {
		a[n] = v[i / nv];
		b[n] = v[i % nv];
		n++;
	}
	for (op = DRM_NPU_OP_ADD; op <= DRM_NPU_OP_RELU; op++) {
		size_t m = 0;

		if (op == DRM_NPU_OP_SCALE || op == DRM_NPU_OP_AXPY)
			continue;
		/* Division: the pairs without a zero divisor. */
		for (i = 0; i < n; i++) {
			if (op == DRM_NPU_OP_DIV && !b[i])
				continue;
			a[m] = a[i];
			b[m] = b[i];
			m++;
		}
		ret = npu_ops_map(op, DRM_NPU_DTYPE_I32, DRM_NPU_DTYPE_I32, 0,
				  out, a, b, m);
		CHECK(!ret, "i32 %s: %d", op_names[op], ret);
		for (i = 0; i < m; i++) {
			uint32_t want = ref_i32_op(op, a[i], b[i]);

			CHECK(out[i] == want, "i32 %s(%d, %d) = %d, want %d",
			      op_names[op], (int32_t)a[i], (int32_t)b[i],
			      (int32_t)out[i], (int32_t)want);
		}
		/* The pairs removed for DIV are back for the next op. */
		for (i = 0; i < nv * nv; i++) {
			a[i] = v[i / nv];
			b[i] = v[i % nv];
		}
	}
}

static void test_i32_div_edges(void)
{
	int32_t a[] = { INT32_MIN, INT32_MIN, INT32_MAX, -7, 7, -7, 7, 1, -1,
			INT32_MIN, 0 };
	int32_t b[] = { -1, 1, -1, 2, -2, -2, 2, INT32_MIN, INT32_MIN,
			INT32_MIN, -5 };
	int32_t want[] = { INT32_MIN, INT32_MIN, -INT32_MAX, -3, -3, 3, 3, 0,
			   0, 1, 0 };
	int32_t out[11], z[4] = { 1, 2, 0, 4 }, one[4] = { 1, 1, 1, 1 };
	int i, ret;

	ret = npu_ops_map(DRM_NPU_OP_DIV, DRM_NPU_DTYPE_I32, DRM_NPU_DTYPE_I32,
			  0, out, a, b, 11);
	CHECK(!ret, "div %d", ret);
	for (i = 0; i < 11; i++)
		CHECK(out[i] == want[i], "%d / %d = %d, want %d", a[i], b[i],
		      out[i], want[i]);
	/* A zero divisor anywhere is an op error. */
	ret = npu_ops_map(DRM_NPU_OP_DIV, DRM_NPU_DTYPE_I32, DRM_NPU_DTYPE_I32,
			  0, out, one, z, 4);
	CHECK(ret == -EINVAL, "div by zero: %d", ret);
	ret = npu_ops_map(DRM_NPU_OP_DIV, DRM_NPU_DTYPE_I32, DRM_NPU_DTYPE_I32,
			  0, out, z, one, 4);
	CHECK(!ret, "zero dividend: %d", ret);
	/* Float division by zero is IEEE, not an error. */
	{
		float fa[2] = { 1.0f, 0.0f }, fb[2] = { 0.0f, 0.0f }, fo[2];

		ret = npu_ops_map(DRM_NPU_OP_DIV, 0, 0, 0, fo, fa, fb, 2);
		CHECK(!ret && isinf(fo[0]) && isnan(fo[1]), "f32 div by 0");
	}
	/* Ops outside a dtype's set are refused. */
	ret = npu_ops_map(DRM_NPU_OP_EXP, DRM_NPU_DTYPE_I32, DRM_NPU_DTYPE_I32,
			  0, out, a, NULL, 4);
	CHECK(ret == -EINVAL, "i32 exp: %d", ret);
	ret = npu_ops_map(DRM_NPU_OP_ADD, DRM_NPU_DTYPE_F32, DRM_NPU_DTYPE_F16,
			  0, out, a, b, 4);
	CHECK(ret == -EINVAL, "add f32 -> f16: %d", ret);
}

/* ------------------------------------------------------------------ */
/* Casts                                                               */

static void test_cast_all_pairs(void)
{
	static uint32_t in32[0x10000 + 64];
	static uint32_t out32[0x10000 + 64];
	uint32_t from, to;
	size_t i;

	for (from = 0; from < 4; from++) {
		size_t es = npu_ops_dtype_size(from), n;

		/* Every pattern of the half types; edge and random others. */
		if (es == 2) {
			n = 0x10000;
			for (i = 0; i < n; i++)
				((uint16_t *)in32)[i] = i;
		} else {
			uint32_t v[MAX_VALUES];
			size_t nv = edge_values(from, v);

			memcpy(in32, v, nv * 4);
			n = nv;
			for (; n < 0x10000; n++)
				in32[n] = rnd32();
		}
		for (to = 0; to < 4; to++) {
			int ret = npu_ops_map(DRM_NPU_OP_CAST, from, to, 0,
					      out32, in32, NULL, n);

			CHECK(!ret, "cast %d", ret);
			for (i = 0; i < n; i++) {
				double x = elem_value(from, in32, i);
				uint32_t got = elem_bits(to, out32, i);
				uint32_t want = ref_bits(to, x);

				/* A same-type cast is a copy, NaNs too. */
				if (from == to)
					want = elem_bits(from, in32, i);
				CHECK(same_bits(to, got, want),
				      "cast %s -> %s: %a -> %#x, want %#x",
				      dtype_names[from], dtype_names[to], x,
				      got, want);
			}
		}
	}
}

static void test_in_place(void)
{
	float f[100], r[100];
	uint16_t h[100];
	int i;

	for (i = 0; i < 100; i++) {
		f[i] = i * 0.75f - 30;
		r[i] = f[i] + f[i];
	}
	CHECK(!npu_ops_map(DRM_NPU_OP_ADD, 0, 0, 0, f, f, f, 100), "add");
	for (i = 0; i < 100; i++)
		CHECK(f[i] == r[i], "in-place add %d", i);
	for (i = 0; i < 100; i++)
		h[i] = npu_ops_f32_to_f16(f2u(i * 0.5f - 20));
	CHECK(!npu_ops_map(DRM_NPU_OP_CAST, DRM_NPU_DTYPE_F16,
			   DRM_NPU_DTYPE_BF16, 0, h, h, NULL, 100), "cast");
	for (i = 0; i < 100; i++)
		CHECK(h[i] == npu_ops_f32_to_bf16(f2u(i * 0.5f - 20)),
		      "in-place cast %d", i);
	for (i = 0; i < 100; i++)
		f[i] = i - 50.0f;
	CHECK(!npu_ops_map(DRM_NPU_OP_RELU, 0, 0, 0, f, f, NULL, 100), "relu");
	for (i = 0; i < 100; i++)
		CHECK(f[i] == (i > 50 ? i - 50.0f : 0), "in-place relu %d", i);
}

/* ------------------------------------------------------------------ */
/* Reductions                                                          */

static void fill_random(uint32_t dtype, void *p, size_t n, float lo,
			float hi)
{
	size_t i;

	for (i = 0; i < n; i++) {
		float x = rnd_uniform(lo, hi);

		switch (dtype) {
		case DRM_NPU_DTYPE_F32:
			((float *)p)[i] = x;
			break;
		case DRM_NPU_DTYPE_F16:
			((uint16_t *)p)[i] = npu_ops_f32_to_f16(f2u(x));
			break;
		case DRM_NPU_DTYPE_BF16:
			((uint16_t *)p)[i] = npu_ops_f32_to_bf16(f2u(x));
			break;
		default:
			((uint32_t *)p)[i] = rnd32();
			break;
		}
	}
}

/*
 * Reduce an m x n matrix both ways, feeding the kernels in pieces as the
 * engine's chunking does, and compare with double (i32: exact) results.
 */
static void check_reduce(uint32_t op, uint32_t dtype, uint32_t m, uint32_t n,
			 uint32_t piece)
{
	size_t es = npu_ops_dtype_size(dtype);
	uint8_t *a = malloc((size_t)m * n * es);
	uint32_t *acc = malloc(4 * (m > n ? m : n));
	uint32_t *out = malloc(4 * (m > n ? m : n));
	bool sum = op == DRM_NPU_OP_REDUCE_SUM;
	uint32_t axis, i, j, r;

	fill_random(dtype, a, (size_t)m * n, -100, 100);
	for (axis = 0; axis < 2; axis++) {
		uint32_t len = axis ? m : n;

		npu_ops_reduce_init(op, dtype, acc, len);
		if (axis == 0) {
			/* Row groups into column accumulators. */
			for (r = 0; r < m; r += piece) {
				uint32_t rows = m - r < piece ? m - r : piece;

				npu_ops_reduce_cols(op, dtype, acc,
						    a + (size_t)r * n * es, rows,
						    n);
			}
		} else {
			/* Row by row, each row in pieces. */
			for (r = 0; r < m; r++)
				for (j = 0; j < n; j += piece)
					npu_ops_reduce_rows(op, dtype, acc + r,
						a + ((size_t)r * n + j) * es, 1,
						n - j < piece ? n - j : piece);
		}
		npu_ops_reduce_finish(dtype, out, acc, len);
		for (i = 0; i < len; i++) {
			double want = sum ? 0 : -INFINITY, mag = 0;
			int64_t iw = sum ? 0 : INT32_MIN;
			uint32_t got = elem_bits(dtype, out, i);

			for (j = 0; j < (axis ? n : m); j++) {
				size_t idx = axis ? (size_t)i * n + j :
					     (size_t)j * n + i;
				double x = elem_value(dtype, a, idx);

				if (dtype == DRM_NPU_DTYPE_I32) {
					int32_t xi = ((int32_t *)a)[idx];

					iw = sum ? (int32_t)(uint32_t)(iw + xi) :
					     (xi > iw ? xi : iw);
					continue;
				}
				want = sum ? want + x : fmax(want, x);
				mag += fabs(x);
			}
			if (dtype == DRM_NPU_DTYPE_I32) {
				CHECK(got == (uint32_t)iw,
				      "i32 %s axis %u [%u] = %d, want %d",
				      op_names[op], axis, i, (int32_t)got,
				      (int32_t)iw);
			} else if (!sum) {
				CHECK(got == ref_bits(dtype, want),
				      "%s max axis %u [%u] = %#x, want %#x",
				      dtype_names[dtype], axis, i, got,
				      ref_bits(dtype, want));
			} else {
				/* f32 accumulation, then the dtype's rounding. */
				double g = elem_value(dtype, out, i);
				double ulp = dtype == DRM_NPU_DTYPE_F32 ? 0 :
					     fabs(want) * (dtype == DRM_NPU_DTYPE_F16 ?
							   ldexp(1, -10) : ldexp(1, -7));
				double tol = (axis ? n : m) * mag * ldexp(1, -24) +
					     ulp;

				CHECK(fabs(g - want) <= tol,
				      "%s sum axis %u [%u] = %a, want %a",
				      dtype_names[dtype], axis, i, g, want);
			}
		}
	}
	free(a);
	free(acc);
	free(out);
}

static void test_reduce(void)
{
	static const uint32_t shapes[][3] = {
		{ 1, 1, 1 }, { 1, 37, 5 }, { 37, 1, 4 }, { 13, 17, 3 },
		{ 64, 64, 64 }, { 100, 7, 33 }, { 3, 1000, 256 },
	};
	uint32_t op, dtype;
	size_t s;

	for (op = DRM_NPU_OP_REDUCE_SUM; op <= DRM_NPU_OP_REDUCE_MAX; op++)
		for (dtype = 0; dtype < 4; dtype++)
			for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
				check_reduce(op, dtype, shapes[s][0],
					     shapes[s][1], shapes[s][2]);
}

static void test_reduce_edges(void)
{
	float a[6] = { 1.0f, NAN, 3.0f, -0.0f, -0.0f, INFINITY };
	float acc[3];
	uint32_t out[3];
	int32_t ia[4] = { INT32_MAX, 1, INT32_MIN, -1 };
	uint32_t iacc[2];

	/* Columns: [1, -0] [NaN, -0] [3, inf]. */
	npu_ops_reduce_init(DRM_NPU_OP_REDUCE_MAX, 0, acc, 3);
	npu_ops_reduce_cols(DRM_NPU_OP_REDUCE_MAX, 0, acc, a, 2, 3);
	npu_ops_reduce_finish(0, out, acc, 3);
	CHECK(u2f(out[0]) == 1.0f && isnan(u2f(out[1])) &&
	      u2f(out[2]) == INFINITY, "max with NaN");
	npu_ops_reduce_init(DRM_NPU_OP_REDUCE_SUM, 0, acc, 3);
	npu_ops_reduce_cols(DRM_NPU_OP_REDUCE_SUM, 0, acc, a + 3, 1, 2);
	npu_ops_reduce_finish(0, out, acc, 2);
	CHECK(out[0] == 0x80000000 && out[1] == 0x80000000,
	      "sum of -0 is -0: %#x %#x", out[0], out[1]);
	/* Rows: [1, NaN, 3] [-0, -0, inf]. */
	npu_ops_reduce_init(DRM_NPU_OP_REDUCE_SUM, 0, acc, 2);
	npu_ops_reduce_rows(DRM_NPU_OP_REDUCE_SUM, 0, acc, a, 2, 3);
	npu_ops_reduce_finish(0, out, acc, 2);
	CHECK(isnan(u2f(out[0])) && u2f(out[1]) == INFINITY, "sum rows");
	/* i32 sums wrap. */
	npu_ops_reduce_init(DRM_NPU_OP_REDUCE_SUM, DRM_NPU_DTYPE_I32, iacc, 2);
	npu_ops_reduce_rows(DRM_NPU_OP_REDUCE_SUM, DRM_NPU_DTYPE_I32, iacc, ia,
			    2, 2);
	CHECK(iacc[0] == 0x80000000 && iacc[1] == 0x7fffffff,
	      "i32 wrap %#x %#x", iacc[0], iacc[1]);
	npu_ops_reduce_init(DRM_NPU_OP_REDUCE_MAX, DRM_NPU_DTYPE_I32, iacc, 2);
	npu_ops_reduce_cols(DRM_NPU_OP_REDUCE_MAX, DRM_NPU_DTYPE_I32, iacc, ia,
			    2, 2);
	CHECK(iacc[0] == 0x7fffffff && iacc[1] == 1, "i32 max %#x %#x",
	      iacc[0], iacc[1]);
	/* f16 sums round to f16 once, from the f32 accumulator. */
	{
		uint16_t h[3] = { 0x3c00, 0x1400, 0x1400 };	/* 1, 2^-10 x2 */
		uint16_t ho;

		npu_ops_reduce_init(DRM_NPU_OP_REDUCE_SUM, 1, acc, 1);
		npu_ops_reduce_rows(DRM_NPU_OP_REDUCE_SUM, 1, acc, h, 1, 3);
		npu_ops_reduce_finish(1, &ho, acc, 1);
		CHECK(ho == 0x3c02, "f16 sum %#x", ho);
	}
}

/* ------------------------------------------------------------------ */
/* GEMM                                                                */

/*
 * out = alpha * op(A) op(B) + beta * C through the tile kernels, with the
 * k dimension in pieces of @tk, A and B stored transposed when asked.
 */
static void check_gemm(uint32_t dtype, uint32_t m, uint32_t n, uint32_t k,
		       uint32_t tk, bool ta, bool tb, float alpha, float beta,
		       bool use_c)
{
	size_t es = npu_ops_dtype_size(dtype);
	uint8_t *a = malloc((size_t)m * k * es), *b = malloc((size_t)k * n * es);
	float *c = malloc(sizeof(float) * m * n), *acc = calloc(m * n, 4);
	float *out = malloc(sizeof(float) * m * n);
	float *at = malloc(sizeof(float) * m * tk), *bt = malloc(sizeof(float) * tk * n);
	uint8_t *stage_a = malloc((size_t)m * tk * es);
	uint8_t *stage_b = malloc((size_t)tk * n * es);
	uint32_t i, j, p, p0;

	fill_random(dtype, a, (size_t)m * k, -2, 2);
	fill_random(dtype, b, (size_t)k * n, -2, 2);
	fill_random(0, c, (size_t)m * n, -2, 2);

	for (p0 = 0; p0 < k; p0 += tk) {
		uint32_t kk = k - p0 < tk ? k - p0 : tk;

		/* Gather the k-slice of A (m x kk) and B (kk x n) as stored. */
		for (i = 0; i < m; i++)
			for (p = 0; p < kk; p++) {
				size_t src = ta ? (size_t)(p0 + p) * m + i :
					     (size_t)i * k + p0 + p;
				size_t dst = ta ? (size_t)p * m + i :
					     (size_t)i * kk + p;

				memcpy(stage_a + dst * es, a + src * es, es);
			}
		for (p = 0; p < kk; p++)
			for (j = 0; j < n; j++) {
				size_t src = tb ? (size_t)j * k + p0 + p :
					     (size_t)(p0 + p) * n + j;
				size_t dst = tb ? (size_t)j * kk + p :
					     (size_t)p * n + j;

				memcpy(stage_b + dst * es, b + src * es, es);
			}
		npu_ops_gemm_load(dtype, at, stage_a, m, kk, ta);
		npu_ops_gemm_load(dtype, bt, stage_b, kk, n, tb);
		npu_ops_gemm_madd(acc, at, bt, m, n, kk);
	}
	npu_ops_gemm_store(out, acc, use_c ? c : NULL, f2u(alpha), f2u(beta),
			   m * n);

	for (i = 0; i < m; i++)
		for (j = 0; j < n; j++) {
			double s = 0, mag = 0, want, tol;

			for (p = 0; p < k; p++) {
				size_t ai = ta ? (size_t)p * m + i :
					    (size_t)i * k + p;
				size_t bi = tb ? (size_t)j * k + p :
					    (size_t)p * n + j;
				double x = elem_value(dtype, a, ai) *
					   elem_value(dtype, b, bi);

				s += x;
				mag += fabs(x);
			}
			want = alpha * s + (use_c ? beta * c[i * n + j] : 0);
			tol = (k + 2) * ldexp(1, -24) *
			      (fabs(alpha) * mag +
			       (use_c ? fabs(beta * c[i * n + j]) : 0)) + 1e-30;
			CHECK(fabs(out[i * n + j] - want) <= tol,
			      "gemm %s %ux%ux%u ta %d tb %d [%u][%u] = %a, want %a",
			      dtype_names[dtype], m, n, k, ta, tb, i, j,
			      out[i * n + j], want);
		}
	free(a);
	free(b);
	free(c);
	free(acc);
	free(out);
	free(at);
	free(bt);
	free(stage_a);
	free(stage_b);
}

static void test_gemm(void)
{
	static const uint32_t shapes[][4] = {
		{ 1, 1, 1, 1 }, { 1, 1, 100, 64 }, { 5, 7, 9, 4 },
		{ 64, 64, 64, 64 }, { 17, 3, 130, 64 }, { 3, 65, 2, 64 },
	};
	uint32_t dtype, tr;
	size_t s;

	for (dtype = 0; dtype < 2; dtype++)
		for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (tr = 0; tr < 4; tr++) {
				check_gemm(dtype, shapes[s][0], shapes[s][1],
					   shapes[s][2], shapes[s][3], tr & 1,
					   tr & 2, 1.0f, 0.0f, false);
				check_gemm(dtype, shapes[s][0], shapes[s][1],
					   shapes[s][2], shapes[s][3], tr & 1,
					   tr & 2, -0.5f, 2.0f, true);
			}
}

static void test_gemm_edges(void)
{
	float a[4] = { 1, 2, 3, 4 }, b[4] = { 5, 6, 7, 8 };
	float acc[4] = { 0 }, out[4], c[4] = { NAN, 1, 1, 1 };
	float want[4] = { 19, 22, 43, 50 };
	int i;

	npu_ops_gemm_madd(acc, a, b, 2, 2, 2);
	/* Without C, a NaN in it is never read; alpha scales exactly. */
	npu_ops_gemm_store(out, acc, NULL, f2u(2.0f), 0, 4);
	for (i = 0; i < 4; i++)
		CHECK(out[i] == 2 * want[i], "gemm [%d] = %a", i, out[i]);
	npu_ops_gemm_store(out, acc, c, f2u(1.0f), f2u(1.0f), 4);
	CHECK(isnan(out[0]) && out[1] == 23, "gemm beta");
	/* In place on C. */
	npu_ops_gemm_store(c, acc, c, f2u(1.0f), f2u(-1.0f), 4);
	CHECK(c[1] == 21 && c[3] == 49, "gemm in place");
	/* inf * 0 in the products is NaN, as IEEE says. */
	a[0] = INFINITY;
	b[0] = 0;
	memset(acc, 0, sizeof(acc));
	npu_ops_gemm_madd(acc, a, b, 2, 2, 2);
	CHECK(isnan(acc[0]) && acc[3] == 50, "gemm inf * 0");
}

/* ------------------------------------------------------------------ */

struct test_case {
	const char *name;
	void (*fn)(void);
};

static const struct test_case cases[] = {
	{ "f16_to_f32_all", test_f16_to_f32_all },
	{ "f16_round_trip_all", test_f16_round_trip_all },
	{ "bf16_to_f32_all", test_bf16_to_f32_all },
	{ "bf16_round_trip_all", test_bf16_round_trip_all },
	{ "f32_to_f16", test_f32_to_f16 },
	{ "f32_to_bf16", test_f32_to_bf16 },
	{ "i32_to_float", test_i32_to_float },
	{ "f32_to_i32", test_f32_to_i32 },
	{ "exp_accuracy", test_exp_accuracy },
	{ "exp_special", test_exp_special },
	{ "gelu_accuracy", test_gelu_accuracy },
	{ "gelu_special", test_gelu_special },
	{ "float_binary", test_float_binary },
	{ "scale_axpy_relu", test_scale_axpy_relu },
	{ "half_exp_gelu", test_half_exp_gelu },
	{ "f32_exp_gelu_map", test_f32_exp_gelu_map },
	{ "i32_ops", test_i32_ops },
	{ "i32_div_edges", test_i32_div_edges },
	{ "cast_all_pairs", test_cast_all_pairs },
	{ "in_place", test_in_place },
	{ "reduce", test_reduce },
	{ "reduce_edges", test_reduce_edges },
	{ "gemm", test_gemm },
	{ "gemm_edges", test_gemm_edges },
};

int main(void)
{
	int n = sizeof(cases) / sizeof(cases[0]);
	int pass = 0, fail = 0, i;

	build_tables();
	printf("KTAP version 1\n");
	printf("1..%d\n", n);
	for (i = 0; i < n; i++) {
		case_failures = 0;
		case_checks = 0;
		cases[i].fn();
		if (case_failures) {
			printf("# %s: %d of %lu checks failed\n", cases[i].name,
			       case_failures, case_checks);
			printf("not ok %d %s\n", i + 1, cases[i].name);
			fail++;
		} else {
			printf("# %s: %lu checks\n", cases[i].name, case_checks);
			printf("ok %d %s\n", i + 1, cases[i].name);
			pass++;
		}
		fflush(stdout);
	}
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n",
	       pass, fail);
	return fail ? 1 : 0;
}

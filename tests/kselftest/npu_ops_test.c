// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_ops_test - the tensor ops of the compute engines (DRM_NPU_PKT_OP).
 *
 * Runs every op on a compute queue with operands in a device-memory BO
 * (written and read through its CPU mapping) and compares with a CPU
 * reference: exactly for integer ops, casts, transposes, max/min and the
 * correctly rounded float ops, within a tolerance for exp, GELU, sums and
 * GEMM. Then the packets npu_compute_validate() refuses (-EINVAL at
 * submit), MMU faults while an op runs (-EFAULT and the faulting address
 * in QUEUE_STATUS), i32 division by zero (-EINVAL) and an op cut off by
 * the job timeout (-ETIMEDOUT); every job's fence carries its error.
 *
 * Needs npu.ko loaded (tools/vmrun); skips when there is no npu render
 * node or no compute engine.
 */

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_submit_util.h"
#include "npu_test_util.h"

#define MIB			(1024ULL * 1024)
#define GIB			(1024 * MIB)
/* The device-memory BO every operand lives in. */
#define POOL_SIZE		(16 * MIB)
/* Skip on devices too small for the pool. */
#define MIN_CAPACITY		(32 * MIB)
/* Engine chunk size (NPU_CHUNK in npu_compute.c): sizes cross it. */
#define CHUNK			4096
#define WAIT_NS			(120 * 1000000000LL)
#define OPERAND_MAX		GIB
/* The timeout test only runs with a job timeout up to this. */
#define TIMEOUT_TEST_MAX_MS	10000

/* ------------------------------------------------------------------ */
/* Number formats (an independent reference: exact values, nearest)    */

#define F16_INF_IDX		0x7c00
#define BF16_INF_IDX		0x7f80

/*
 * The kselftest Makefile links no libm: the few functions the references
 * need are here, in double precision (far beyond binary32's needs).
 */

/* 2^e for -1022 <= e <= 1023. */
static double pow2(int e)
{
	uint64_t bits = (uint64_t)(e + 1023) << 52;
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* e^x: x = n ln2 + r, |r| <= ln2 / 2, and the Taylor series of e^r. */
static double ref_exp(double x)
{
	/* ln 2 in two parts; n * LN2_HI is exact for |n| < 2^20. */
	const double ln2_hi = 6.93147180369123816490e-01;
	const double ln2_lo = 1.90821492927058770002e-10;
	double r, t = 1, s = 1;
	int n, i;

	if (isnan(x))
		return x;
	if (x > 710)
		return INFINITY;
	if (x < -746)
		return 0;
	n = (int)(x / M_LN2 + (x < 0 ? -0.5 : 0.5));
	r = (x - n * ln2_hi) - n * ln2_lo;
	for (i = 1; i < 25; i++) {
		t *= r / i;
		s += t;
	}
	/* Two normal powers of two, so that only the last product rounds. */
	return s * pow2(n / 2) * pow2(n - n / 2);
}

static double ref_fmax(double a, double b)
{
	return a > b ? a : b;
}

static double f16_tab[F16_INF_IDX + 1];
static double bf16_tab[BF16_INF_IDX + 1];

static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0x1f)
		v = m ? NAN : INFINITY;
	else
		v = e ? (1024 + m) * pow2(e - 25) : m * pow2(-24);
	return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t h)
{
	int e = (h >> 7) & 0xff, m = h & 0x7f;
	double v;

	if (e == 0xff)
		v = m ? NAN : INFINITY;
	else
		v = e ? (128 + m) * pow2(e - 134) : m * pow2(-133);
	return (h & 0x8000) ? -v : v;
}

static void build_tables(void)
{
	int i;

	for (i = 0; i < F16_INF_IDX; i++)
		f16_tab[i] = f16_value(i);
	f16_tab[F16_INF_IDX] = 65536.0;
	for (i = 0; i < BF16_INF_IDX; i++)
		bf16_tab[i] = bf16_value(i);
	bf16_tab[BF16_INF_IDX] = 2 * pow2(127);
}

/* Nearest entry to non-NaN @x, ties to even; the last entry is inf. */
static uint16_t round_tab(const double *tab, int inf_idx, double x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double ax = fabs(x);
	int lo = 0, hi = inf_idx;

	if (ax >= tab[inf_idx])
		return sign | inf_idx;
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;

		if (tab[mid] <= ax)
			lo = mid;
		else
			hi = mid;
	}
	if (ax - tab[lo] < tab[hi] - ax)
		return sign | lo;
	if (ax - tab[lo] > tab[hi] - ax)
		return sign | hi;
	return sign | (lo % 2 ? hi : lo);
}

static uint32_t dtype_size(uint32_t dtype)
{
	return dtype == DRM_NPU_DTYPE_F16 || dtype == DRM_NPU_DTYPE_BF16 ? 2 : 4;
}

/* Element @i of a buffer of @dtype as a double (exact). */
static double get(uint32_t dtype, const void *p, size_t i)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return ((const float *)p)[i];
	case DRM_NPU_DTYPE_F16:
		return f16_value(((const uint16_t *)p)[i]);
	case DRM_NPU_DTYPE_BF16:
		return bf16_value(((const uint16_t *)p)[i]);
	default:
		return ((const int32_t *)p)[i];
	}
}

static uint32_t get_bits(uint32_t dtype, const void *p, size_t i)
{
	if (dtype_size(dtype) == 2)
		return ((const uint16_t *)p)[i];
	return ((const uint32_t *)p)[i];
}

static void put_bits(uint32_t dtype, void *p, size_t i, uint32_t bits)
{
	if (dtype_size(dtype) == 2)
		((uint16_t *)p)[i] = bits;
	else
		((uint32_t *)p)[i] = bits;
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* @x rounded once to @dtype: IEEE nearest even; i32 saturates, NaN -> 0. */
static uint32_t to_bits(uint32_t dtype, double x)
{
	double r;

	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return isnan(x) ? 0x7fc00000 : f2u((float)x);
	case DRM_NPU_DTYPE_F16:
		return isnan(x) ? 0x7e00 : round_tab(f16_tab, F16_INF_IDX, x);
	case DRM_NPU_DTYPE_BF16:
		return isnan(x) ? 0x7fc0 : round_tab(bf16_tab, BF16_INF_IDX, x);
	default:
		if (isnan(x))
			return 0;
		r = rint(x);
		if (r >= 2147483648.0)
			return INT32_MAX;
		if (r <= -2147483648.0)
			return (uint32_t)INT32_MIN;
		return (uint32_t)(int32_t)r;
	}
}

static void put(uint32_t dtype, void *p, size_t i, double x)
{
	put_bits(dtype, p, i, to_bits(dtype, x));
}

static bool is_nan_bits(uint32_t dtype, uint32_t b)
{
	switch (dtype) {
	case DRM_NPU_DTYPE_F32:
		return (b & 0x7fffffff) > 0x7f800000;
	case DRM_NPU_DTYPE_F16:
		return (b & 0x7fff) > 0x7c00;
	case DRM_NPU_DTYPE_BF16:
		return (b & 0x7fff) > 0x7f80;
	default:
		return false;
	}
}

static bool same_bits(uint32_t dtype, uint32_t got, uint32_t want)
{
	if (is_nan_bits(dtype, want))
		return is_nan_bits(dtype, got);
	return got == want;
}

/* xorshift: deterministic data. */
static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd32(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

static double rnd_uniform(double lo, double hi)
{
	return lo + (hi - lo) * (rnd32() >> 8) / 16777216.0;
}

/*
 * @n values of @dtype: specials first (for float types), then uniform in
 * [lo, hi) (i32: random bits and small numbers).
 */
static void fill(uint32_t dtype, void *p, size_t n, double lo, double hi,
		 bool specials)
{
	static const double sp[] = {
		0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 0.5, 1e-30,
		-3e38, 65504.0, 70000.0, 6e-8, 2.5, -2.5, 3.5,
	};
	static const int32_t isp[] = {
		0, 1, -1, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1,
		7, -7, 65536, -65536,
	};
	size_t i = 0, k;

	if (specials && dtype == DRM_NPU_DTYPE_I32)
		for (k = 0; k < sizeof(isp) / sizeof(isp[0]) && i < n; k++)
			put_bits(dtype, p, i++, isp[k]);
	else if (specials)
		for (k = 0; k < sizeof(sp) / sizeof(sp[0]) && i < n; k++)
			put(dtype, p, i++, sp[k]);
	for (; i < n; i++) {
		if (dtype == DRM_NPU_DTYPE_I32)
			put_bits(dtype, p, i,
				 i % 2 ? rnd32() : rnd32() % 2001 - 1000);
		else
			put(dtype, p, i, rnd_uniform(lo, hi));
	}
}

/* ------------------------------------------------------------------ */
/* Fixture                                                             */

/**
 * struct region - a piece of the pool
 * @dev: its device address.
 * @cpu: the same bytes through the BO's CPU mapping.
 */
struct region {
	__u64 dev;
	void *cpu;
};

FIXTURE(ops) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	int fd;
	struct drm_npu_device_info info;
	struct drm_npu_queue_create q;
	__u32 bo;
	/* Device address of the pool, and where it ends. */
	__u64 va;
	__u64 va_end;
	unsigned char *cpu;
	/* Bytes of the pool handed out. */
	__u64 used;
};

FIXTURE_SETUP(ops)
{
	int n;

	self->fd = -1;
	self->cpu = MAP_FAILED;
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	ASSERT_EQ(0, npu_query_device_info(self->nodes[0].fd, &self->info));
	if (!self->info.num_compute_engines)
		SKIP(return, "no compute engine");
	if (self->info.mem_capacity < MIN_CAPACITY)
		SKIP(return, "device memory below %llu MiB", MIN_CAPACITY / MIB);
	self->fd = self->nodes[0].fd;
	build_tables();

	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COMPUTE,
				      DRM_NPU_PRIORITY_NORMAL, &self->q));
	ASSERT_EQ(0, npu_bo_create(self->fd, POOL_SIZE, DRM_NPU_BO_DEVICE,
				   &self->bo));
	self->va = (self->info.va_start + GIB - 1) & ~(GIB - 1);
	self->va_end = self->va + POOL_SIZE;
	ASSERT_LE(self->va_end + GIB, self->info.va_end);
	ASSERT_EQ(0, npu_vm_map(self->fd, self->bo, self->va, POOL_SIZE, 0, 0));
	self->cpu = npu_bo_mmap(self->fd, self->bo, POOL_SIZE);
	ASSERT_NE(MAP_FAILED, self->cpu) TH_LOG("mmap: %s", strerror(errno));
}

FIXTURE_TEARDOWN(ops)
{
	if (self->cpu != MAP_FAILED)
		munmap(self->cpu, POOL_SIZE);
	npu_close_nodes(self->nodes, self->num_nodes);
}

static bool no_device(int fd)
{
	return fd < 0;
}

/* @bytes of the pool, 256-byte aligned. */
static struct region pool_alloc(struct __test_metadata *_metadata,
				FIXTURE_DATA(ops) *self, size_t bytes)
{
	struct region r = { 0 };

	bytes = (bytes + 255) & ~(size_t)255;
	EXPECT_LE(self->used + bytes, POOL_SIZE) TH_LOG("pool exhausted");
	if (self->used + bytes > POOL_SIZE)
		return r;
	r.dev = self->va + self->used;
	r.cpu = self->cpu + self->used;
	self->used += bytes;
	return r;
}

static void pool_reset(FIXTURE_DATA(ops) *self)
{
	self->used = 0;
}

static int submit_op(FIXTURE_DATA(ops) *self, const struct drm_npu_pkt_op *op,
		     __u64 *point)
{
	struct drm_npu_pkt_op pkt = *op;

	pkt.hdr.opcode = DRM_NPU_PKT_OP;
	pkt.hdr.size = sizeof(pkt);
	return npu_submit(self->fd, self->q.queue_id, &pkt, sizeof(pkt), NULL,
			  0, point);
}

/*
 * Submit @op, wait for it and return the queue's error (0 if none), with
 * the fault address in @fault_addr if not NULL. The job's own fence must
 * have signalled with that error.
 */
static int run_op(struct __test_metadata *_metadata, FIXTURE_DATA(ops) *self,
		  const struct drm_npu_pkt_op *op, __u64 *fault_addr)
{
	struct drm_npu_queue_status st;
	int ret, sync_fd, status = 0;
	__u64 point = 0;

	ret = submit_op(self, op, &point);
	EXPECT_EQ(0, ret) TH_LOG("submit op %u: %s", op->op, strerror(-ret));
	if (ret)
		return ret;
	ret = npu_syncobj_wait_point(self->fd, self->q.syncobj_handle, point,
				     npu_monotonic_ns() + WAIT_NS);
	EXPECT_EQ(0, ret) TH_LOG("wait: %s", strerror(-ret));
	EXPECT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	if (fault_addr)
		*fault_addr = st.fault_addr;
	if (st.error)
		EXPECT_EQ(point, st.error_point);
	ret = nsub_export_point(self->fd, self->q.syncobj_handle, point,
				&sync_fd);
	EXPECT_EQ(0, ret) TH_LOG("export point: %s", strerror(-ret));
	if (!ret) {
		EXPECT_EQ(0, nsub_sync_file_status(sync_fd, &status));
		EXPECT_EQ(st.error ? st.error : 1, status)
			TH_LOG("fence status of op %u", op->op);
		close(sync_fd);
	}
	return st.error;
}

static struct drm_npu_pkt_op make_op(__u32 op, __u32 dtype, __u64 a, __u64 b,
				     __u64 out, __u64 n)
{
	struct drm_npu_pkt_op p = {
		.op = op,
		.dtype = dtype,
		.out_dtype = dtype,
		.a = a,
		.b = b,
		.out = out,
		.n = n,
	};

	return p;
}

static const char *dtype_name(uint32_t dtype)
{
	static const char *const names[] = { "f32", "f16", "bf16", "i32" };

	return dtype < 4 ? names[dtype] : "?";
}

/* ------------------------------------------------------------------ */
/* Element-wise ops                                                    */

static double ref_maxmin(double a, double b, bool is_max)
{
	if (isnan(a) || isnan(b))
		return NAN;
	if (a == b)
		return (signbit(a) == is_max) ? b : a;
	return (a > b) == is_max ? a : b;
}

static double ref_gelu(double x)
{
	double z = 2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);

	if (isinf(x))
		return x > 0 ? x : -0.0;
	if (z >= 0)
		return x / (1 + ref_exp(-z));
	return x * ref_exp(z) / (1 + ref_exp(z));
}

/*
 * The float reference: the exact result (double is exact enough: one
 * more rounding to the narrow type does not change it), except that SCALE
 * and AXPY round to binary32 first as the engine does (alpha is binary32,
 * so f16/bf16 results may differ from one rounding of the exact value).
 */
static double ref_float(__u32 op, double a, double b, float alpha)
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
		return ref_maxmin(a, b, true);
	case DRM_NPU_OP_MIN:
		return ref_maxmin(a, b, false);
	case DRM_NPU_OP_SCALE:
		return (float)((double)alpha * a);
	case DRM_NPU_OP_AXPY:
		return (float)((float)((double)alpha * a) + (float)b);
	case DRM_NPU_OP_RELU:
		return isnan(a) ? a : (a > 0 ? a : 0.0);
	case DRM_NPU_OP_EXP:
		return ref_exp(a);
	case DRM_NPU_OP_GELU:
		return ref_gelu(a);
	default:
		return NAN;
	}
}

static uint32_t ref_i32(__u32 op, int32_t a, int32_t b)
{
	switch (op) {
	case DRM_NPU_OP_ADD:
		return (uint32_t)a + (uint32_t)b;
	case DRM_NPU_OP_SUB:
		return (uint32_t)a - (uint32_t)b;
	case DRM_NPU_OP_MUL:
		return (uint32_t)((int64_t)a * b);
	case DRM_NPU_OP_DIV:
		return (uint32_t)((int64_t)a / b);
	case DRM_NPU_OP_MAX:
		return a > b ? a : b;
	case DRM_NPU_OP_MIN:
		return a < b ? a : b;
	default:	/* RELU */
		return a > 0 ? a : 0;
	}
}

/*
 * Whether @got (bits of @dtype) is acceptable for exact result @want:
 * EXP and GELU within a tolerance (binary32) or one ulp (f16, bf16),
 * everything else exactly.
 */
static bool elem_ok(__u32 op, uint32_t dtype, uint32_t got, double want,
		    double x)
{
	uint32_t wb = to_bits(dtype, want);
	double g, tol;

	if (op != DRM_NPU_OP_EXP && op != DRM_NPU_OP_GELU)
		return same_bits(dtype, got, wb);
	if (isnan(want))
		return is_nan_bits(dtype, got);
	if (dtype != DRM_NPU_DTYPE_F32) {
		int32_t d = (int32_t)got - (int32_t)wb;

		return got == wb || (!((got ^ wb) & 0x8000) && (d == 1 || d == -1));
	}
	g = u2f(got);
	if (isinf(want) || isinf(g) || fabs(want) < FLT_MIN)
		return fabs(g - want) <= FLT_MIN || (float)want == g;
	tol = op == DRM_NPU_OP_EXP ? 2e-7 :
	      1e-6 + 4 * pow2(-24) *
	      fabs(2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
	return fabs(g - want) <= tol * fabs(want);
}

/*
 * Run @op on @n elements of @dtype (uniform in [lo, hi) after the
 * specials) and compare every element; returns the number of mismatches.
 */
static int check_map(struct __test_metadata *_metadata,
		     FIXTURE_DATA(ops) *self, __u32 op, uint32_t dtype,
		     size_t n, float alpha, double lo, double hi)
{
	bool has_b = op <= DRM_NPU_OP_MIN || op == DRM_NPU_OP_AXPY;
	size_t es = dtype_size(dtype), i;
	struct region a, b, out;
	struct drm_npu_pkt_op p;
	int bad = 0, ret;

	pool_reset(self);
	a = pool_alloc(_metadata, self, n * es);
	b = pool_alloc(_metadata, self, n * es);
	out = pool_alloc(_metadata, self, n * es);
	fill(dtype, a.cpu, n, lo, hi, true);
	fill(dtype, b.cpu, n, lo, hi, false);
	/* Divisors: no zero for i32; the specials meet every b for floats. */
	for (i = 0; i < n && dtype == DRM_NPU_DTYPE_I32; i++)
		if (!get_bits(dtype, b.cpu, i))
			put_bits(dtype, b.cpu, i, 3);
	memset(out.cpu, 0xa5, n * es);

	p = make_op(op, dtype, a.dev, has_b ? b.dev : 0, out.dev, n);
	if (op == DRM_NPU_OP_SCALE || op == DRM_NPU_OP_AXPY)
		p.alpha_bits = f2u(alpha);
	ret = run_op(_metadata, self, &p, NULL);
	EXPECT_EQ(0, ret) TH_LOG("op %u %s: %s", op, dtype_name(dtype),
				 strerror(-ret));
	if (ret)
		return 1;

	for (i = 0; i < n; i++) {
		uint32_t got = get_bits(dtype, out.cpu, i);
		double x = get(dtype, a.cpu, i), y = get(dtype, b.cpu, i);
		bool ok;
		double want = 0;

		if (dtype == DRM_NPU_DTYPE_I32) {
			uint32_t w = ref_i32(op, get_bits(dtype, a.cpu, i),
					     get_bits(dtype, b.cpu, i));

			ok = got == w;
		} else {
			want = ref_float(op, x, y, alpha);
			ok = elem_ok(op, dtype, got, want, x);
		}
		if (!ok && bad++ < 5)
			TH_LOG("op %u %s [%zu]: %a, %a -> %#x, want %a", op,
			       dtype_name(dtype), i, x, y, got, want);
	}
	return bad;
}

TEST_F_TIMEOUT(ops, binary_all_dtypes, 120)
{
	__u32 op, dtype;

	if (no_device(self->fd))
		return;
	for (dtype = 0; dtype < 4; dtype++)
		for (op = DRM_NPU_OP_ADD; op <= DRM_NPU_OP_MIN; op++)
			EXPECT_EQ(0, check_map(_metadata, self, op, dtype,
					       2 * CHUNK + 77, 0, -4, 4))
				TH_LOG("op %u %s", op, dtype_name(dtype));
}

TEST_F_TIMEOUT(ops, scale_axpy, 120)
{
	static const float alphas[] = { 0.0f, 1.0f, -2.5f, 1e30f, NAN };
	__u32 dtype;
	size_t i;

	if (no_device(self->fd))
		return;
	for (dtype = 0; dtype < 3; dtype++)
		for (i = 0; i < sizeof(alphas) / sizeof(alphas[0]); i++) {
			EXPECT_EQ(0, check_map(_metadata, self,
					       DRM_NPU_OP_SCALE, dtype, CHUNK + 1,
					       alphas[i], -100, 100));
			EXPECT_EQ(0, check_map(_metadata, self,
					       DRM_NPU_OP_AXPY, dtype, 3000,
					       alphas[i], -100, 100));
		}
}

TEST_F_TIMEOUT(ops, unary, 120)
{
	__u32 dtype;

	if (no_device(self->fd))
		return;
	for (dtype = 0; dtype < 4; dtype++)
		EXPECT_EQ(0, check_map(_metadata, self, DRM_NPU_OP_RELU, dtype,
				       CHUNK + 5, 0, -10, 10));
	for (dtype = 0; dtype < 3; dtype++) {
		EXPECT_EQ(0, check_map(_metadata, self, DRM_NPU_OP_EXP, dtype,
				       3 * CHUNK, 0, -90, 90));
		EXPECT_EQ(0, check_map(_metadata, self, DRM_NPU_OP_EXP, dtype,
				       CHUNK, 0, -1, 1));
		EXPECT_EQ(0, check_map(_metadata, self, DRM_NPU_OP_GELU, dtype,
				       3 * CHUNK, 0, -12, 12));
		EXPECT_EQ(0, check_map(_metadata, self, DRM_NPU_OP_GELU, dtype,
				       CHUNK, 0, -1e6, 1e6));
	}
}

TEST_F(ops, i32_wrap_and_division)
{
	static const int32_t a[] = { INT32_MAX, INT32_MIN, INT32_MIN, -7, 7, -7,
				     7, 0, 65536, INT32_MIN };
	static const int32_t b[] = { 1, -1, 1, 2, -2, -2, 2, -5, 65536, -1 };
	struct region ra, rb, ro;
	struct drm_npu_pkt_op p;
	size_t n = 10, i;
	__u32 op;

	if (no_device(self->fd))
		return;
	ra = pool_alloc(_metadata, self, sizeof(a));
	rb = pool_alloc(_metadata, self, sizeof(b));
	ro = pool_alloc(_metadata, self, sizeof(a));
	memcpy(ra.cpu, a, sizeof(a));
	memcpy(rb.cpu, b, sizeof(b));
	for (op = DRM_NPU_OP_ADD; op <= DRM_NPU_OP_MIN; op++) {
		p = make_op(op, DRM_NPU_DTYPE_I32, ra.dev, rb.dev, ro.dev, n);
		ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
		for (i = 0; i < n; i++)
			EXPECT_EQ(ref_i32(op, a[i], b[i]),
				  ((uint32_t *)ro.cpu)[i])
				TH_LOG("op %u: %d, %d", op, a[i], b[i]);
	}
	/* The edges spelled out: wrap, INT_MIN / -1, truncation. */
	p = make_op(DRM_NPU_OP_DIV, DRM_NPU_DTYPE_I32, ra.dev, rb.dev, ro.dev,
		    n);
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	EXPECT_EQ(INT32_MIN, ((int32_t *)ro.cpu)[1]);
	EXPECT_EQ(-3, ((int32_t *)ro.cpu)[3]);
	EXPECT_EQ(-3, ((int32_t *)ro.cpu)[4]);
	EXPECT_EQ(3, ((int32_t *)ro.cpu)[5]);
	EXPECT_EQ(INT32_MIN, ((int32_t *)ro.cpu)[9]);
	p = make_op(DRM_NPU_OP_ADD, DRM_NPU_DTYPE_I32, ra.dev, rb.dev, ro.dev,
		    n);
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	EXPECT_EQ(INT32_MIN, ((int32_t *)ro.cpu)[0]);
	EXPECT_EQ(INT32_MAX, ((int32_t *)ro.cpu)[1]);
}

/* ------------------------------------------------------------------ */
/* Casts                                                               */

TEST_F_TIMEOUT(ops, cast_all_pairs, 120)
{
	size_t n = 2 * CHUNK + 3, i;
	__u32 from, to;

	if (no_device(self->fd))
		return;
	for (from = 0; from < 4; from++)
		for (to = 0; to < 4; to++) {
			struct region a, out;
			struct drm_npu_pkt_op p;
			int bad = 0;

			pool_reset(self);
			a = pool_alloc(_metadata, self, n * 4);
			out = pool_alloc(_metadata, self, n * 4);
			/* Half types: a sweep of bit patterns, NaNs included. */
			if (dtype_size(from) == 2)
				for (i = 0; i < n; i++)
					put_bits(from, a.cpu, i, i * 8 + i / 4096);
			else
				fill(from, a.cpu, n, -3e9, 3e9, true);
			p = make_op(DRM_NPU_OP_CAST, from, a.dev, 0, out.dev, n);
			p.out_dtype = to;
			ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
			for (i = 0; i < n; i++) {
				uint32_t got = get_bits(to, out.cpu, i);
				uint32_t want = from == to ?
						get_bits(from, a.cpu, i) :
						to_bits(to, get(from, a.cpu, i));

				if (!same_bits(to, got, want) && bad++ < 5)
					TH_LOG("%s -> %s [%zu]: %a -> %#x, want %#x",
					       dtype_name(from), dtype_name(to),
					       i, get(from, a.cpu, i), got,
					       want);
			}
			EXPECT_EQ(0, bad) TH_LOG("cast %s -> %s",
						 dtype_name(from),
						 dtype_name(to));
		}
}

TEST_F(ops, in_place)
{
	size_t n = CHUNK + 9, i;
	struct region a, b, h;
	struct drm_npu_pkt_op p;
	float *fa, *fb;
	uint16_t *hh;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, n * 4);
	b = pool_alloc(_metadata, self, n * 4);
	h = pool_alloc(_metadata, self, n * 2);
	fa = a.cpu;
	fb = b.cpu;
	hh = h.cpu;
	for (i = 0; i < n; i++) {
		fa[i] = i * 0.25f;
		fb[i] = 1000.0f - i;
		hh[i] = to_bits(DRM_NPU_DTYPE_F16, i * 0.5 - 100);
	}
	/* out == a */
	p = make_op(DRM_NPU_OP_MUL, DRM_NPU_DTYPE_F32, a.dev, b.dev, a.dev, n);
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	for (i = 0; i < n; i++)
		EXPECT_EQ(f2u(i * 0.25f * (1000.0f - i)), f2u(fa[i]));
	/* AXPY with out == b: y = alpha x + y. */
	p = make_op(DRM_NPU_OP_AXPY, DRM_NPU_DTYPE_F32, b.dev, b.dev, b.dev, n);
	p.alpha_bits = f2u(2.0f);
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	for (i = 0; i < n; i++)
		EXPECT_EQ(f2u(3.0f * (1000.0f - i)), f2u(fb[i]));
	/* A same-size cast in place. */
	p = make_op(DRM_NPU_OP_CAST, DRM_NPU_DTYPE_F16, h.dev, 0, h.dev, n);
	p.out_dtype = DRM_NPU_DTYPE_BF16;
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	for (i = 0; i < n; i++)
		EXPECT_EQ(to_bits(DRM_NPU_DTYPE_BF16,
				  f16_value(to_bits(DRM_NPU_DTYPE_F16,
						    i * 0.5 - 100))), hh[i]);
}

/* ------------------------------------------------------------------ */
/* Reductions and transposes                                           */

static int check_reduce(struct __test_metadata *_metadata,
			FIXTURE_DATA(ops) *self, __u32 op, uint32_t dtype,
			__u64 m, __u64 n, __u32 axis)
{
	bool sum = op == DRM_NPU_OP_REDUCE_SUM;
	size_t es = dtype_size(dtype), outs = axis ? m : n, len = axis ? n : m;
	struct region a, out;
	struct drm_npu_pkt_op p;
	size_t i, j;
	int bad = 0, ret;

	pool_reset(self);
	a = pool_alloc(_metadata, self, m * n * es);
	out = pool_alloc(_metadata, self, outs * es);
	fill(dtype, a.cpu, m * n, -100, 100, false);
	p = make_op(op, dtype, a.dev, 0, out.dev, n);
	p.m = m;
	p.axis = axis;
	ret = run_op(_metadata, self, &p, NULL);
	EXPECT_EQ(0, ret);
	if (ret)
		return 1;
	for (i = 0; i < outs; i++) {
		double want = sum ? 0 : -INFINITY, mag = 0, g, tol;
		uint32_t iw = sum ? 0 : (uint32_t)INT32_MIN;
		uint32_t got = get_bits(dtype, out.cpu, i);
		bool ok;

		for (j = 0; j < len; j++) {
			size_t idx = axis ? i * n + j : j * n + i;
			double x = get(dtype, a.cpu, idx);
			uint32_t xi = get_bits(dtype, a.cpu, idx);

			want = sum ? want + x : ref_fmax(want, x);
			mag += fabs(x);
			iw = sum ? iw + xi :
			     ((int32_t)xi > (int32_t)iw ? xi : iw);
		}
		if (dtype == DRM_NPU_DTYPE_I32) {
			ok = got == iw;
		} else if (!sum) {
			ok = got == to_bits(dtype, want);
		} else {
			g = get(dtype, out.cpu, i);
			tol = len * mag * pow2(-24) +
			      fabs(want) * (dtype == DRM_NPU_DTYPE_F16 ? pow2(-10) :
					    dtype == DRM_NPU_DTYPE_BF16 ? pow2(-7) : 0);
			ok = fabs(g - want) <= tol;
		}
		if (!ok && bad++ < 5)
			TH_LOG("%s %s %llux%llu axis %u [%zu] = %#x, want %a",
			       sum ? "sum" : "max", dtype_name(dtype),
			       (unsigned long long)m, (unsigned long long)n,
			       axis, i, got, dtype == DRM_NPU_DTYPE_I32 ?
			       (double)(int32_t)iw : want);
	}
	return bad;
}

TEST_F_TIMEOUT(ops, reduce, 300)
{
	static const __u64 shapes[][2] = {
		{ 1, 1 }, { 3, 5000 }, { 5000, 3 }, { 70, 70 }, { 9000, 1 },
		{ 1, 9000 }, { 2, 8200 },
	};
	__u32 op, dtype, axis;
	size_t s;

	if (no_device(self->fd))
		return;
	for (op = DRM_NPU_OP_REDUCE_SUM; op <= DRM_NPU_OP_REDUCE_MAX; op++)
		for (dtype = 0; dtype < 4; dtype++)
			for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
				for (axis = 0; axis < 2; axis++)
					EXPECT_EQ(0, check_reduce(_metadata,
						self, op, dtype, shapes[s][0],
						shapes[s][1], axis));
}

TEST_F(ops, reduce_nan_and_wrap)
{
	struct region a, out;
	struct drm_npu_pkt_op p;
	float *fa;
	int32_t *ia;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, 6 * 4);
	out = pool_alloc(_metadata, self, 3 * 4);
	fa = a.cpu;
	/* [[1, NaN, 3], [-0, -0, inf]] */
	fa[0] = 1;
	fa[1] = NAN;
	fa[2] = 3;
	fa[3] = -0.0f;
	fa[4] = -0.0f;
	fa[5] = INFINITY;
	p = make_op(DRM_NPU_OP_REDUCE_MAX, DRM_NPU_DTYPE_F32, a.dev, 0,
		    out.dev, 3);
	p.m = 2;
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	EXPECT_EQ(1.0f, ((float *)out.cpu)[0]);
	EXPECT_TRUE(isnan(((float *)out.cpu)[1]));
	EXPECT_EQ(INFINITY, ((float *)out.cpu)[2]);
	p.op = DRM_NPU_OP_REDUCE_SUM;
	p.axis = 1;
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	EXPECT_TRUE(isnan(((float *)out.cpu)[0]));
	EXPECT_EQ(INFINITY, ((float *)out.cpu)[1]);
	ia = a.cpu;
	ia[0] = INT32_MAX;
	ia[1] = 1;
	ia[2] = INT32_MIN;
	ia[3] = -1;
	p = make_op(DRM_NPU_OP_REDUCE_SUM, DRM_NPU_DTYPE_I32, a.dev, 0,
		    out.dev, 2);
	p.m = 2;
	p.axis = 1;
	ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
	EXPECT_EQ(INT32_MIN, ((int32_t *)out.cpu)[0]);
	EXPECT_EQ(INT32_MAX, ((int32_t *)out.cpu)[1]);
}

TEST_F_TIMEOUT(ops, transpose, 120)
{
	static const __u64 shapes[][2] = {
		{ 1, 1 }, { 3, 5000 }, { 5000, 3 }, { 100, 130 }, { 257, 65 },
		{ 64, 64 }, { 1, 9000 }, { 9000, 1 },
	};
	__u32 dtype;
	size_t s, i, j;

	if (no_device(self->fd))
		return;
	for (dtype = 0; dtype < 4; dtype++)
		for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			__u64 m = shapes[s][0], n = shapes[s][1];
			size_t es = dtype_size(dtype);
			struct region a, out;
			struct drm_npu_pkt_op p;
			int bad = 0;

			pool_reset(self);
			a = pool_alloc(_metadata, self, m * n * es);
			out = pool_alloc(_metadata, self, m * n * es);
			for (i = 0; i < m * n; i++)
				put_bits(dtype, a.cpu, i, rnd32());
			p = make_op(DRM_NPU_OP_TRANSPOSE, dtype, a.dev, 0,
				    out.dev, n);
			p.m = m;
			ASSERT_EQ(0, run_op(_metadata, self, &p, NULL));
			for (i = 0; i < m; i++)
				for (j = 0; j < n; j++)
					if (get_bits(dtype, a.cpu, i * n + j) !=
					    get_bits(dtype, out.cpu, j * m + i))
						bad++;
			EXPECT_EQ(0, bad) TH_LOG("%s %llux%llu",
						 dtype_name(dtype),
						 (unsigned long long)m,
						 (unsigned long long)n);
		}
}

/* ------------------------------------------------------------------ */
/* GEMM                                                                */

static int check_gemm(struct __test_metadata *_metadata,
		      FIXTURE_DATA(ops) *self, uint32_t dtype, __u64 m,
		      __u64 n, __u64 k, __u32 flags, float alpha, float beta,
		      bool c_is_out)
{
	bool ta = flags & DRM_NPU_OP_TRANS_A, tb = flags & DRM_NPU_OP_TRANS_B;
	size_t es = dtype_size(dtype), i, j, q;
	struct region a, b, c, out;
	struct drm_npu_pkt_op p;
	float *cref;
	int bad = 0, ret;

	pool_reset(self);
	a = pool_alloc(_metadata, self, m * k * es);
	b = pool_alloc(_metadata, self, k * n * es);
	c = pool_alloc(_metadata, self, m * n * 4);
	out = c_is_out ? c : pool_alloc(_metadata, self, m * n * 4);
	fill(dtype, a.cpu, m * k, -2, 2, false);
	fill(dtype, b.cpu, k * n, -2, 2, false);
	fill(DRM_NPU_DTYPE_F32, c.cpu, m * n, -2, 2, false);
	cref = malloc(m * n * 4);
	ASSERT_NE(NULL, cref);
	memcpy(cref, c.cpu, m * n * 4);
	if (!c_is_out)
		memset(out.cpu, 0xa5, m * n * 4);

	p = make_op(DRM_NPU_OP_GEMM, dtype, a.dev, b.dev, out.dev, n);
	p.out_dtype = DRM_NPU_DTYPE_F32;
	p.m = m;
	p.k = k;
	p.flags = flags;
	p.alpha_bits = f2u(alpha);
	p.beta_bits = f2u(beta);
	if (beta != 0)
		p.c = c.dev;
	ret = run_op(_metadata, self, &p, NULL);
	EXPECT_EQ(0, ret);
	if (ret) {
		free(cref);
		return 1;
	}
	for (i = 0; i < m; i++)
		for (j = 0; j < n; j++) {
			double s = 0, mag = 0, want, tol, got;

			for (q = 0; q < k; q++) {
				double x = get(dtype, a.cpu, ta ? q * m + i : i * k + q);
				double y = get(dtype, b.cpu, tb ? j * k + q : q * n + j);

				s += x * y;
				mag += fabs(x * y);
			}
			want = alpha * s;
			tol = (k + 2) * pow2(-24) * fabs(alpha) * mag;
			if (beta != 0) {
				want += beta * (double)cref[i * n + j];
				tol += 2 * pow2(-24) *
				       fabs(beta * cref[i * n + j]);
			}
			got = ((float *)out.cpu)[i * n + j];
			if (!(fabs(got - want) <= tol + 1e-30) && bad++ < 5)
				TH_LOG("gemm %s %llux%llux%llu flags %u [%zu][%zu] = %a, want %a",
				       dtype_name(dtype), (unsigned long long)m,
				       (unsigned long long)n,
				       (unsigned long long)k, flags, i, j, got,
				       want);
		}
	free(cref);
	return bad;
}

TEST_F_TIMEOUT(ops, gemm, 600)
{
	static const __u64 shapes[][3] = {
		{ 1, 1, 1 }, { 65, 67, 130 }, { 3, 200, 5 }, { 128, 1, 64 },
		{ 1, 300, 700 }, { 200, 3, 9 },
	};
	__u32 dtype, flags;
	size_t s;

	if (no_device(self->fd))
		return;
	for (dtype = 0; dtype < 2; dtype++)
		for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (flags = 0; flags < 4; flags++) {
				EXPECT_EQ(0, check_gemm(_metadata, self, dtype,
							shapes[s][0], shapes[s][1],
							shapes[s][2], flags, 1.0f,
							0.0f, false));
				EXPECT_EQ(0, check_gemm(_metadata, self, dtype,
							shapes[s][0], shapes[s][1],
							shapes[s][2], flags, -0.5f,
							2.0f, s % 2));
			}
}

TEST_F_TIMEOUT(ops, gemm_256, 120)
{
	if (no_device(self->fd))
		return;
	EXPECT_EQ(0, check_gemm(_metadata, self, DRM_NPU_DTYPE_F32, 256, 256,
				256, DRM_NPU_OP_TRANS_B, 1.5f, -1.0f, true));
}

/* ------------------------------------------------------------------ */
/* Refused at submit                                                   */

struct bad_op {
	const char *what;
	struct drm_npu_pkt_op op;
};

TEST_F(ops, validation)
{
	__u64 A = 0, B = 0, O = 0;
	struct drm_npu_pkt_op good;
	struct region a, b, o;
	size_t i;
	int ret;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, 1 * MIB);
	b = pool_alloc(_metadata, self, 1 * MIB);
	o = pool_alloc(_metadata, self, 1 * MIB);
	A = a.dev;
	B = b.dev;
	O = o.dev;
	good = make_op(DRM_NPU_OP_ADD, DRM_NPU_DTYPE_F32, A, B, O, 100);

	/* Each entry overrides fields of a good packet. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#define ADD_F32(...) { .op = DRM_NPU_OP_ADD, .dtype = 0, .out_dtype = 0, \
		       .a = A, .b = B, .out = O, .n = 100, __VA_ARGS__ }
#define GEMM_F32(...) { .op = DRM_NPU_OP_GEMM, .a = A, .b = B, .out = O, \
			.m = 8, .n = 8, .k = 8, __VA_ARGS__ }
#define MATRIX(o, ...) { .op = o, .a = A, .out = O, .m = 10, .n = 10, \
			 __VA_ARGS__ }
	const struct bad_op bad[] = {
		{ "unknown op", ADD_F32(.op = DRM_NPU_OP_GEMM + 1) },
		{ "op 0xffffffff", ADD_F32(.op = 0xffffffff) },
		{ "unknown dtype", ADD_F32(.dtype = 4, .out_dtype = 4) },
		{ "out_dtype differs", ADD_F32(.out_dtype = DRM_NPU_DTYPE_F16) },
		{ "unknown cast target", ADD_F32(.op = DRM_NPU_OP_CAST, .b = 0,
						 .out_dtype = 7) },
		{ "gelu on i32", ADD_F32(.op = DRM_NPU_OP_GELU, .b = 0,
					 .dtype = 3, .out_dtype = 3) },
		{ "exp on i32", ADD_F32(.op = DRM_NPU_OP_EXP, .b = 0,
					.dtype = 3, .out_dtype = 3) },
		{ "scale on i32", ADD_F32(.op = DRM_NPU_OP_SCALE, .b = 0,
					  .dtype = 3, .out_dtype = 3) },
		{ "axpy on i32", ADD_F32(.op = DRM_NPU_OP_AXPY, .dtype = 3,
					 .out_dtype = 3) },
		{ "flags", ADD_F32(.flags = 1) },
		{ "pad", ADD_F32(.pad = 1) },
		{ "b on a unary op", ADD_F32(.op = DRM_NPU_OP_RELU) },
		{ "c", ADD_F32(.c = A) },
		{ "m", ADD_F32(.m = 1) },
		{ "k", ADD_F32(.k = 1) },
		{ "axis", ADD_F32(.axis = 1) },
		{ "alpha on add", ADD_F32(.alpha_bits = 0x3f800000) },
		{ "beta on axpy", ADD_F32(.op = DRM_NPU_OP_AXPY,
					  .beta_bits = 0x3f800000) },
		{ "n = 0", ADD_F32(.n = 0) },
		{ "over 1 GiB", ADD_F32(.n = OPERAND_MAX / 4 + 1) },
		{ "n overflows", ADD_F32(.n = 1ULL << 62) },
		{ "a wraps", ADD_F32(.a = ~0ULL - 255) },
		{ "misaligned a", ADD_F32(.a = A + 2) },
		{ "misaligned b", ADD_F32(.b = B + 1) },
		{ "misaligned out", ADD_F32(.out = O + 3) },
		{ "misaligned f16", ADD_F32(.dtype = 1, .out_dtype = 1,
					    .out = O + 1) },
		{ "out overlaps a", ADD_F32(.out = A + 4) },
		{ "a overlaps out", ADD_F32(.a = O + 396) },
		{ "out overlaps b", ADD_F32(.out = B - 8) },
		{ "widening cast in place", ADD_F32(.op = DRM_NPU_OP_CAST,
						    .b = 0, .dtype = 1,
						    .out = A) },
		{ "reduce axis 2", MATRIX(DRM_NPU_OP_REDUCE_SUM, .axis = 2) },
		{ "reduce m = 0", MATRIX(DRM_NPU_OP_REDUCE_SUM, .m = 0) },
		{ "reduce n = 0", MATRIX(DRM_NPU_OP_REDUCE_MAX, .n = 0) },
		{ "reduce b", MATRIX(DRM_NPU_OP_REDUCE_SUM, .b = B) },
		{ "reduce k", MATRIX(DRM_NPU_OP_REDUCE_SUM, .k = 1) },
		{ "reduce in place", MATRIX(DRM_NPU_OP_REDUCE_SUM, .out = A) },
		{ "reduce m x n overflows", MATRIX(DRM_NPU_OP_REDUCE_SUM,
						   .m = 1ULL << 32,
						   .n = 1ULL << 32) },
		{ "reduce over 1 GiB", MATRIX(DRM_NPU_OP_REDUCE_SUM,
					      .m = 1 << 15, .n = 1 << 14) },
		{ "transpose axis", MATRIX(DRM_NPU_OP_TRANSPOSE, .axis = 1) },
		{ "transpose in place", MATRIX(DRM_NPU_OP_TRANSPOSE, .out = A) },
		{ "transpose out_dtype", MATRIX(DRM_NPU_OP_TRANSPOSE,
						.out_dtype = 3) },
		{ "gemm bf16", GEMM_F32(.dtype = 2) },
		{ "gemm i32", GEMM_F32(.dtype = 3) },
		{ "gemm out f16", GEMM_F32(.out_dtype = 1) },
		{ "gemm flag 4", GEMM_F32(.flags = 4) },
		{ "gemm k = 0", GEMM_F32(.k = 0) },
		{ "gemm m = 0", GEMM_F32(.m = 0) },
		{ "gemm c without beta", GEMM_F32(.c = A + 4096) },
		{ "gemm out overlaps a", GEMM_F32(.out = A + 64) },
		{ "gemm out overlaps b", GEMM_F32(.b = O + 4) },
		{ "gemm c partly out", GEMM_F32(.beta_bits = 0x3f800000,
						.c = O + 4) },
		{ "gemm misaligned c", GEMM_F32(.beta_bits = 0x3f800000,
						.c = A + 4098) },
		{ "gemm axis", GEMM_F32(.axis = 1) },
		{ "gemm k overflows", GEMM_F32(.k = 1ULL << 61) },
	};
	const struct bad_op fine[] = {
		{ "in place", ADD_F32(.out = A) },
		{ "out == b", ADD_F32(.out = B) },
		{ "exactly 1 GiB", ADD_F32(.op = DRM_NPU_OP_RELU, .b = 0,
					   .n = OPERAND_MAX / 4) },
		{ "narrowing cast", ADD_F32(.op = DRM_NPU_OP_CAST, .b = 0,
					    .out_dtype = 1) },
		{ "gemm out == c", GEMM_F32(.beta_bits = 0x3f800000, .c = O) },
		{ "gemm -0 beta, no c", GEMM_F32(.beta_bits = 0x80000000) },
		{ "gemm both transposed", GEMM_F32(.flags = 3, .dtype = 1) },
		{ "reduce axis 1", MATRIX(DRM_NPU_OP_REDUCE_SUM, .axis = 1) },
	};
#pragma GCC diagnostic pop

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ret = submit_op(self, &bad[i].op, NULL);
		EXPECT_EQ(-EINVAL, ret) TH_LOG("%s: %s", bad[i].what,
					       strerror(-ret));
	}
	/* A bad header is refused too. */
	{
		struct drm_npu_pkt_op pkt = good;

		pkt.hdr.opcode = DRM_NPU_PKT_OP;
		pkt.hdr.size = sizeof(pkt) - 8;
		EXPECT_EQ(-EINVAL, npu_submit(self->fd, self->q.queue_id, &pkt,
					      sizeof(pkt), NULL, 0, NULL));
	}
	/* Accepted (only the submission is checked: the last runs fault). */
	for (i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		if (!strcmp(fine[i].what, "exactly 1 GiB"))
			continue;
		ret = submit_op(self, &fine[i].op, NULL);
		EXPECT_EQ(0, ret) TH_LOG("%s: %s", fine[i].what,
					 strerror(-ret));
	}
	/* And the queue still works. */
	EXPECT_EQ(0, run_op(_metadata, self, &good, NULL));
}

/* A 1 GiB operand is accepted and runs until it leaves the mapping. */
TEST_F_TIMEOUT(ops, one_gib_operand_faults_at_mapping_end, 120)
{
	struct drm_npu_pkt_op p;
	__u64 fault = 0;

	if (no_device(self->fd))
		return;
	p = make_op(DRM_NPU_OP_RELU, DRM_NPU_DTYPE_F32, self->va, 0, self->va,
		    OPERAND_MAX / 4);
	EXPECT_EQ(-EFAULT, run_op(_metadata, self, &p, &fault));
	EXPECT_EQ(self->va_end, fault);
}

/* ------------------------------------------------------------------ */
/* Errors while running                                                */

TEST_F(ops, fault_unmapped_input)
{
	struct drm_npu_queue_status st;
	struct region a, o;
	struct drm_npu_pkt_op p;
	__u64 fault = 0, hole = self->va_end + 64 * MIB;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, 4 * CHUNK * 4);
	o = pool_alloc(_metadata, self, 4 * CHUNK * 4);
	p = make_op(DRM_NPU_OP_ADD, DRM_NPU_DTYPE_F32, a.dev, hole, o.dev,
		    4 * CHUNK);
	EXPECT_EQ(-EFAULT, run_op(_metadata, self, &p, &fault));
	EXPECT_EQ(hole, fault);
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ((__u32)DRM_NPU_QUEUE_ERROR, st.state);
	/* The queue refuses work until it is reset. */
	EXPECT_EQ(-EIO, submit_op(self, &p, NULL));
	ASSERT_EQ(0, npu_queue_reset(self->fd, self->q.queue_id));
	p.b = a.dev;
	EXPECT_EQ(0, run_op(_metadata, self, &p, NULL));
}

TEST_F(ops, fault_past_mapping_end)
{
	struct drm_npu_pkt_op p;
	__u64 fault = 0;
	/* Starts 3 chunks before the end of the pool, runs 2 past it. */
	__u64 a = self->va_end - 3 * CHUNK * 4;

	if (no_device(self->fd))
		return;
	p = make_op(DRM_NPU_OP_EXP, DRM_NPU_DTYPE_F32, a, 0, self->va,
		    5 * CHUNK);
	EXPECT_EQ(-EFAULT, run_op(_metadata, self, &p, &fault));
	EXPECT_EQ(self->va_end, fault);
}

TEST_F(ops, fault_gemm_b)
{
	struct region a, o;
	struct drm_npu_pkt_op p;
	__u64 fault = 0, hole = self->va_end + 128 * MIB;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, 64 * 64 * 4);
	o = pool_alloc(_metadata, self, 64 * 64 * 4);
	p = make_op(DRM_NPU_OP_GEMM, DRM_NPU_DTYPE_F32, a.dev, hole, o.dev, 64);
	p.m = 64;
	p.k = 64;
	EXPECT_EQ(-EFAULT, run_op(_metadata, self, &p, &fault));
	EXPECT_EQ(hole, fault);
}

TEST_F(ops, fault_readonly_output)
{
	struct drm_npu_pkt_op p;
	struct region a;
	__u64 fault = 0, ro = self->va_end + 256 * MIB;
	__u32 bo;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, 1024 * 4);
	ASSERT_EQ(0, npu_bo_create(self->fd, 1 * MIB, DRM_NPU_BO_DEVICE, &bo));
	ASSERT_EQ(0, npu_vm_map(self->fd, bo, ro, 1 * MIB, 0,
				DRM_NPU_VM_READONLY));
	/* Reading from the read-only mapping is fine... */
	p = make_op(DRM_NPU_OP_RELU, DRM_NPU_DTYPE_F32, ro, 0, a.dev, 1024);
	EXPECT_EQ(0, run_op(_metadata, self, &p, NULL));
	/* ...writing to it faults. */
	p = make_op(DRM_NPU_OP_RELU, DRM_NPU_DTYPE_F32, a.dev, 0, ro + 4096,
		    1024);
	EXPECT_EQ(-EFAULT, run_op(_metadata, self, &p, &fault));
	EXPECT_EQ(ro + 4096, fault);
}

TEST_F(ops, i32_division_by_zero)
{
	struct drm_npu_queue_status st;
	struct region a, b, o;
	struct drm_npu_pkt_op p;
	size_t n = 3 * CHUNK, i;

	if (no_device(self->fd))
		return;
	a = pool_alloc(_metadata, self, n * 4);
	b = pool_alloc(_metadata, self, n * 4);
	o = pool_alloc(_metadata, self, n * 4);
	for (i = 0; i < n; i++) {
		((int32_t *)a.cpu)[i] = i;
		((int32_t *)b.cpu)[i] = i == CHUNK + 5 ? 0 : 7;
	}
	p = make_op(DRM_NPU_OP_DIV, DRM_NPU_DTYPE_I32, a.dev, b.dev, o.dev, n);
	EXPECT_EQ(-EINVAL, run_op(_metadata, self, &p, NULL));
	ASSERT_EQ(0, npu_queue_status(self->fd, self->q.queue_id, &st));
	EXPECT_EQ((__u32)DRM_NPU_QUEUE_ERROR, st.state);
	/* Float division by zero is no error. */
	ASSERT_EQ(0, npu_queue_reset(self->fd, self->q.queue_id));
	p.dtype = DRM_NPU_DTYPE_F32;
	p.out_dtype = DRM_NPU_DTYPE_F32;
	memset(b.cpu, 0, n * 4);
	EXPECT_EQ(0, run_op(_metadata, self, &p, NULL));
	EXPECT_EQ(INFINITY, ((float *)o.cpu)[1]);
	EXPECT_TRUE(isnan(((float *)o.cpu)[0]));
}

/* A GEMM far longer than the job timeout is cut off between tiles. */
TEST_F_TIMEOUT(ops, timeout_cuts_off_a_long_op, 120)
{
	unsigned int timeout_ms = npu_job_timeout_ms();
	__u64 m = 1024, start;
	struct region a, b, o;
	struct drm_npu_pkt_op p;
	int ret;

	if (no_device(self->fd))
		return;
	if (timeout_ms > TIMEOUT_TEST_MAX_MS)
		SKIP(return, "job timeout %u ms is too long for this test",
		     timeout_ms);
	a = pool_alloc(_metadata, self, m * m * 2);
	b = pool_alloc(_metadata, self, m * m * 2);
	o = pool_alloc(_metadata, self, m * m * 4);
	p = make_op(DRM_NPU_OP_GEMM, DRM_NPU_DTYPE_F16, a.dev, b.dev, o.dev, m);
	p.out_dtype = DRM_NPU_DTYPE_F32;
	p.m = m;
	p.k = m;
	start = npu_monotonic_ns();
	ret = run_op(_metadata, self, &p, NULL);
	EXPECT_EQ(-ETIMEDOUT, ret) TH_LOG("%s", strerror(-ret));
	/* Cut off near the timeout, not at the end of the GEMM. */
	EXPECT_LT(npu_monotonic_ns() - start,
		  (timeout_ms + 5000) * 1000000ULL);
	/* The engine goes on. */
	ASSERT_EQ(0, npu_queue_reset(self->fd, self->q.queue_id));
	p.m = 8;
	p.n = 8;
	p.k = 8;
	EXPECT_EQ(0, run_op(_metadata, self, &p, NULL));
}

TEST_HARNESS_MAIN

// Device ops: GEMM and elementwise add throughput, against the same
// computation on the host CPU in the same run.
//
// The host reference is one thread of plain loops compiled with the
// project's flags (-O2): GEMM in i-k-j order (row of A times rows of B,
// accumulating into a row of C), add as c[i] = a[i] + b[i].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "bench.h"

namespace bench {
namespace {

__attribute__((noinline)) void hostGemm(const float *a, const float *b, float *c, size_t m,
                                        size_t n, size_t k)
{
	std::fill(c, c + m * n, 0.0f);
	for (size_t i = 0; i < m; i++) {
		float *ci = c + i * n;
		for (size_t p = 0; p < k; p++) {
			float aip = a[i * k + p];
			const float *bp = b + p * n;
			for (size_t j = 0; j < n; j++)
				ci[j] += aip * bp[j];
		}
	}
}

__attribute__((noinline)) void hostAdd(const float *a, const float *b, float *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		c[i] = a[i] + b[i];
}

// Repetitions so that a sample lasts about `target` seconds.
int calibrate(const std::function<double(int)> &run, double target)
{
	run(1);
	double t = std::max(run(1), 1e-7);
	return static_cast<int>(std::clamp(std::ceil(target / t), 1.0, 100000.0));
}

void *deviceCopyOf(const std::vector<float> &v)
{
	void *p = nullptr;
	check(npurtMalloc(&p, v.size() * 4), "malloc");
	check(npurtMemcpy(p, v.data(), v.size() * 4, npurtMemcpyHostToDevice), "memcpy");
	return p;
}

double maxRelError(const std::vector<float> &got, const std::vector<float> &want)
{
	double worst = 0;
	for (size_t i = 0; i < got.size(); i++) {
		double d = std::fabs(static_cast<double>(got[i]) - want[i]);
		worst = std::max(worst, d / std::max(1.0, std::fabs(static_cast<double>(want[i]))));
	}
	return worst;
}

}  // namespace

void benchOps(const Options &o)
{
	const double target = o.quick ? 0.05 : 0.25;
	npurtStream_t s = nullptr;
	check(npurtStreamCreate(&s), "stream create");
	std::mt19937 rng(7);
	std::uniform_real_distribution<float> dist(-1.0f, 1.0f);

	// GEMM f32, dim^3.
	{
		const size_t dim = o.quick ? 128 : 256;
		std::vector<float> a(dim * dim), b(dim * dim), c(dim * dim), dc(dim * dim);
		for (auto &x : a)
			x = dist(rng);
		for (auto &x : b)
			x = dist(rng);
		void *da = deviceCopyOf(a), *db = deviceCopyOf(b), *dout = deviceCopyOf(c);
		npurtOpDesc d{};
		d.op = npurtOpGemm;
		d.dtype = npurtFloat32;
		d.outDtype = npurtFloat32;
		d.a = da;
		d.b = db;
		d.out = dout;
		d.m = d.n = d.k = dim;
		d.alpha = 1.0f;
		d.beta = 0.0f;
		const double flops = 2.0 * static_cast<double>(dim * dim * dim);
		auto dev = [&](int reps) {
			double t0 = now();
			for (int i = 0; i < reps; i++)
				check(npurtLaunchOp(&d, s), "launch op");
			check(npurtStreamSynchronize(s), "stream synchronize");
			return (now() - t0) / reps;
		};
		auto host = [&](int reps) {
			double t0 = now();
			for (int i = 0; i < reps; i++)
				hostGemm(a.data(), b.data(), c.data(), dim, dim, dim);
			return (now() - t0) / reps;
		};
		int dr = calibrate(dev, target), hr = calibrate(host, target);
		std::vector<double> dg, hg;
		for (int r = 0; r < o.runs; r++) {
			dg.push_back(flops / dev(dr) * 1e-9);
			hg.push_back(flops / host(hr) * 1e-9);
		}
		check(npurtMemcpy(dc.data(), dout, dc.size() * 4, npurtMemcpyDeviceToHost),
		      "memcpy");
		double err = maxRelError(dc, c);
		std::string dims =
		        std::to_string(dim) + "x" + std::to_string(dim) + "x" + std::to_string(dim);
		addFigure("ops", "host GEMM f32 " + dims + " (i-k-j loop, -O2)", "GFLOP/s", hg,
		          "the limit of the device GEMM");
		addFigure("ops", "device GEMM f32 " + dims, "GFLOP/s", dg, "host GEMM", "GFLOP/s",
		          hg, "max rel. error vs host " + fmt(err));
		check(npurtFree(da), "free");
		check(npurtFree(db), "free");
		check(npurtFree(dout), "free");
	}

	// Elementwise add, f32.
	{
		const size_t n = o.quick ? (1u << 20) : (4u << 20);
		std::vector<float> a(n), b(n), c(n), dc(n);
		for (auto &x : a)
			x = dist(rng);
		for (auto &x : b)
			x = dist(rng);
		void *da = deviceCopyOf(a), *db = deviceCopyOf(b), *dout = deviceCopyOf(c);
		npurtOpDesc d{};
		d.op = npurtOpAdd;
		d.dtype = npurtFloat32;
		d.outDtype = npurtFloat32;
		d.a = da;
		d.b = db;
		d.out = dout;
		d.n = n;
		const double bytes = 12.0 * static_cast<double>(n);  // two reads, one write
		auto dev = [&](int reps) {
			double t0 = now();
			for (int i = 0; i < reps; i++)
				check(npurtLaunchOp(&d, s), "launch op");
			check(npurtStreamSynchronize(s), "stream synchronize");
			return (now() - t0) / reps;
		};
		auto host = [&](int reps) {
			double t0 = now();
			for (int i = 0; i < reps; i++) {
				hostAdd(a.data(), b.data(), c.data(), n);
				asm volatile("" ::: "memory");
			}
			return (now() - t0) / reps;
		};
		int dr = calibrate(dev, target), hr = calibrate(host, target);
		std::vector<double> dg, hg;
		for (int r = 0; r < o.runs; r++) {
			dg.push_back(bytes / dev(dr) * 1e-9);
			hg.push_back(bytes / host(hr) * 1e-9);
		}
		check(npurtMemcpy(dc.data(), dout, dc.size() * 4, npurtMemcpyDeviceToHost),
		      "memcpy");
		double err = maxRelError(dc, c);
		std::string what = "add f32 " + std::to_string(n >> 20) + "M elements";
		addFigure("ops", "host " + what + " (loop, -O2)", "GB/s", hg,
		          "the limit of the device add; 12 B/element");
		addFigure("ops", "device " + what, "GB/s", dg, "host add", "GB/s", hg,
		          "max rel. error vs host " + fmt(err));
		check(npurtFree(da), "free");
		check(npurtFree(db), "free");
		check(npurtFree(dout), "free");
	}
	check(npurtStreamDestroy(s), "stream destroy");
	check(npurtMemEmptyCache(), "empty cache");
}

}  // namespace bench

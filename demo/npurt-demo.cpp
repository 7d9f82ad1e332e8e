// npurt-demo: the tour of the runtime that `make demo` runs in the VM, one
// section per topic of the seed docs: devices, contexts, memory and the
// pool, pinned memory, copies, streams and events overlapping copy and
// compute, an op pipeline checked against the CPU, a fault reported with
// its origin, and a profile trace.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "npurt/npurt.hpp"

namespace {

void section(const char *title)
{
	std::printf("\n== %s\n", title);
}

double mib(size_t b)
{
	return static_cast<double>(b) / (1 << 20);
}

void devices()
{
	section("devices");
	int runtimeVersion = 0, driverVersion = 0;
	npurt::check(npurtRuntimeGetVersion(&runtimeVersion));
	npurt::check(npurtDriverGetVersion(&driverVersion));
	std::printf("libnpurt %d, npu driver uAPI %d\n", runtimeVersion, driverVersion);
	int n = npurt::deviceCount();
	std::printf("%d NPU(s)\n", n);
	for (int d = 0; d < n; d++) {
		npurtDeviceProp p = npurt::deviceProperties(d);
		std::printf("  NPU %d: %s (%s)%s, %zu MiB, %d copy + %d compute engines\n", d,
		            p.name, p.devicePath, p.emulated ? " emulated" : "",
		            p.totalGlobalMem >> 20, p.copyEngineCount, p.computeEngineCount);
	}
	npurt::setDevice(n - 1);
	std::printf("selected NPU %d for this thread, back to 0\n", npurt::currentDevice());
	npurt::setDevice(0);
}

void contexts()
{
	section("contexts");
	npurtContext_t ctx = nullptr;
	npurt::check(npurtCtxCreate(&ctx, 0, 0));
	void *p = nullptr;
	npurt::check(npurtMalloc(&p, 4 << 20));
	size_t freeB = 0, total = 0;
	npurt::check(npurtMemGetInfo(&freeB, &total));
	std::printf("explicit context holds 4 MiB: %.1f MiB free of %.1f\n", mib(freeB),
	            mib(total));
	npurt::check(npurtCtxDestroy(ctx));
	npurt::check(npurtMemGetInfo(&freeB, &total));
	std::printf("destroyed with its memory: %.1f MiB free\n", mib(freeB));
	npurt::check(npurtCtxSetCurrent(nullptr));
}

void memoryPool()
{
	section("device memory and the caching pool");
	npurt::check(npurtMemResetPeakStats());
	{
		npurt::DeviceBuffer<float> a(1 << 20), b(1 << 18);
		npurtMemStats s{};
		npurt::check(npurtMemGetStats(&s));
		std::printf("allocated %.2f MiB, reserved %.2f MiB, %llu device allocations\n",
		            mib(s.allocatedBytes), mib(s.reservedBytes),
		            static_cast<unsigned long long>(s.deviceAllocs));
	}
	npurt::DeviceBuffer<float> again(1 << 20);
	npurtMemStats s{};
	npurt::check(npurtMemGetStats(&s));
	std::printf("freed and allocated again from the cache: %llu device allocations\n",
	            static_cast<unsigned long long>(s.deviceAllocs));
	void *huge = nullptr;
	npurtError_t err = npurtMalloc(&huge, size_t(1) << 40);
	std::printf("a 1 TiB request: %s: %s\n", npurtGetErrorName(err),
	            npurtGetLastErrorMessage());
	npurtGetLastError();
}

double copySeconds(void *dst, const void *src, size_t n, int reps)
{
	auto t0 = std::chrono::steady_clock::now();
	for (int i = 0; i < reps; i++)
		npurt::check(npurtMemcpy(dst, src, n, npurtMemcpyDefault));
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void copies()
{
	section("pinned memory and copies");
	const size_t n = 16 << 20;
	npurt::DeviceBuffer<char> dev(n);
	npurt::HostBuffer<char> pinned(n);
	std::vector<char> pageable(n, 1);
	std::memset(pinned.data(), 1, n);
	double tp = copySeconds(dev.data(), pinned.data(), n, 4);
	double tq = copySeconds(dev.data(), pageable.data(), n, 4);
	std::printf("16 MiB host->device: pinned %.0f MiB/s, pageable %.0f MiB/s (pinned/pageable "
	            "%.2fx)\n",
	            4 * mib(n) / tp, 4 * mib(n) / tq, tq / tp);
	npurtPointerAttributes a{};
	npurt::check(npurtPointerGetAttributes(&a, pinned.data()));
	std::printf("pinned memory is seen by NPU %d at its host address: %s\n", a.device,
	            a.devicePointer == pinned.data() ? "yes" : "no");
}

void streamsAndEvents()
{
	section("two streams overlapping copy and compute");
	const size_t n = 8 << 20;
	npurt::Stream copyStream(0), computeStream(0);
	npurt::DeviceBuffer<char> a(n), b(n), c(n), d(n);
	npurt::HostBuffer<char> host(n);
	npurt::Event start(true), copied(true), filled(true);
	start.record(copyStream);
	npurt::copyAsync(a.data(), host.data(), n, copyStream);
	npurt::copyAsync(b.data(), a.data(), n, copyStream);
	copied.record(copyStream);
	npurt::fillAsync(c.data(), 7, n, computeStream);
	npurt::copyAsync(d.data(), c.data(), n, computeStream);
	filled.record(computeStream);
	copied.synchronize();
	filled.synchronize();
	std::printf("copy stream: %.3f ms; the other stream ran beside it, done after %.3f ms\n",
	            copied.since(start), filled.since(start));
	// The compute stream waits for the copy stream's data.
	copied.waitOn(computeStream);
	npurt::copyAsync(c.data(), b.data(), n, computeStream);
	computeStream.synchronize();
	std::printf("stream-wait-event ordered the second stream after the first\n");
}

bool opPipeline()
{
	section("an op pipeline checked against the CPU");
	const uint64_t m = 64, k = 48, nn = 32;
	std::vector<float> ha(m * k), hb(k * nn), ref(m * nn), out(m * nn);
	for (size_t i = 0; i < ha.size(); i++)
		ha[i] = std::sin(0.1f * static_cast<float>(i));
	for (size_t i = 0; i < hb.size(); i++)
		hb[i] = std::cos(0.05f * static_cast<float>(i));
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < nn; j++) {
			float acc = 0;
			for (uint64_t x = 0; x < k; x++)
				acc += ha[i * k + x] * hb[x * nn + j];
			ref[i * nn + j] = acc > 0 ? acc : 0;  // relu(a*b)
		}
	npurt::Stream s(0);
	npurt::DeviceBuffer<float> a(m * k), b(k * nn), c(m * nn), r(m * nn);
	npurt::copyAsync(a.data(), ha.data(), a.bytes(), s);
	npurt::copyAsync(b.data(), hb.data(), b.bytes(), s);
	try {
		npurt::gemm(a, b, c, m, nn, k, 1.0f, 0.0f, s);
		npurt::activation(npurtOpRelu, c, r, s);
	} catch (const npurt::Error &e) {
		std::printf("ops not available on this device: %s\n", e.what());
		return false;
	}
	npurt::copyAsync(out.data(), r.data(), r.bytes(), s);
	s.synchronize();
	double worst = 0;
	for (size_t i = 0; i < out.size(); i++)
		worst = std::max(worst, static_cast<double>(std::fabs(out[i] - ref[i])));
	std::printf("relu(gemm %llux%llux%llu): max abs difference from the CPU %.2e -> %s\n",
	            static_cast<unsigned long long>(m), static_cast<unsigned long long>(nn),
	            static_cast<unsigned long long>(k), worst, worst < 1e-3 ? "match" : "MISMATCH");
	return worst < 1e-3;
}

void faultReport()
{
	section("a device fault, reported with its origin");
	npurtDeviceProp p = npurt::deviceProperties(0);
	std::ofstream f;
	if (p.debugfsPath[0])
		f.open(std::string(p.debugfsPath) + "/inject_fault");
	if (!f) {
		std::printf("(fault injection needs root and debugfs; skipped)\n");
		return;
	}
	npurt::Stream s(0);
	npurt::DeviceBuffer<char> a(4096), b(4096);
	f << 1 << std::flush;
	npurt::copyAsync(b.data(), a.data(), 4096, s);  // this task faults
	npurtError_t err = npurtStreamSynchronize(s.get());
	std::printf("%s:\n  %s\n", npurtGetErrorName(err), npurtGetLastErrorMessage());
	npurtGetLastError();
	s.recover();
	npurt::copyAsync(b.data(), a.data(), 4096, s);
	s.synchronize();
	std::printf("recovered: the stream runs again\n");
}

void profile()
{
	section("profiling");
	npurt::check(npurtProfilerStart());
	npurt::Stream s1(0), s2(0);
	npurt::DeviceBuffer<char> a(4 << 20), b(4 << 20);
	for (int i = 0; i < 4; i++) {
		npurt::fillAsync(a.data(), i, a.size(), s1);
		npurt::copyAsync(b.data(), a.data(), a.size(), s1);
		npurt::fillAsync(b.data(), i, b.size(), s2);
	}
	s1.synchronize();
	s2.synchronize();
	npurt::check(npurtProfilerStop());
	const char *path = "npurt-trace.json";
	if (npurtProfilerExportTrace(path) != npurtSuccess) {
		path = "/tmp/npurt-trace.json";
		npurtGetLastError();
		npurt::check(npurtProfilerExportTrace(path));
	}
	char summary[4096];
	size_t needed = 0;
	npurt::check(npurtProfilerSummary(summary, sizeof(summary), &needed));
	std::printf("trace written to %s (open it in ui.perfetto.dev)\n%s", path, summary);
}

}  // namespace

int main()
{
	try {
		devices();
		contexts();
		memoryPool();
		copies();
		streamsAndEvents();
		bool ops = opPipeline();
		faultReport();
		profile();
		std::printf("\ndemo finished%s\n", ops ? "" : " (without the op pipeline)");
		return 0;
	} catch (const npurt::Error &e) {
		std::fprintf(stderr, "npurt-demo: %s\n", e.what());
		return 1;
	}
}

// profile_trace: profile copies and fills on two streams, write a trace for
// chrome://tracing or ui.perfetto.dev, and print the summary (C++ layer).
//
//   example_profile_trace [TRACE.json]   (default /tmp/npurt_trace.json)
#include <npurt/npurt.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv)
try {
	const char *path = argc > 1 ? argv[1] : "/tmp/npurt_trace.json";
	const size_t n = 8 << 20;
	npurt::Stream s1(0), s2(0);
	npurt::DeviceBuffer<unsigned char> a(n), b(n), c(n);
	std::vector<unsigned char> host(n, 0x42);  // pageable

	npurt::check(npurtProfilerStart());
	for (int i = 0; i < 4; i++) {
		npurt::fillAsync(a.data(), i, n, s1);
		npurt::copyAsync(b.data(), a.data(), n, s1);
		// Pageable memory goes in staging chunks: one task each.
		npurt::copyAsync(c.data(), host.data(), n, s2);
	}
	s1.synchronize();
	s2.synchronize();
	npurt::check(npurtProfilerStop());

	npurt::check(npurtProfilerExportTrace(path));
	std::printf("trace written to %s\n", path);
	size_t needed = 0;
	npurt::check(npurtProfilerSummary(nullptr, 0, &needed));
	std::string summary(needed, '\0');
	npurt::check(npurtProfilerSummary(summary.data(), summary.size(), &needed));
	std::fputs(summary.c_str(), stdout);
	bool ok = summary.find("copy") != std::string::npos &&
	          summary.find("fill") != std::string::npos;
	return ok ? 0 : 1;
} catch (const npurt::Error &e) {
	std::fprintf(stderr, "%s\n", e.what());
	return 1;
}

// Device monitoring: see monitor.h.
#include "monitor.h"

#include <algorithm>
#include <map>

#include "npu_drm.h"

namespace npurt {

namespace {

int query(os::Device &node, uint32_t id, void *data, uint32_t size, uint32_t *full)
{
	drm_npu_query q{};
	q.query = id;
	q.data_ptr = reinterpret_cast<uintptr_t>(data);
	q.size = size;
	if (int ret = node.ioctl(DRM_IOCTL_NPU_QUERY, &q))
		return ret;
	if (full)
		*full = q.size;
	return 0;
}

unsigned percent(uint64_t busy, uint64_t window, uint32_t engines)
{
	if (!window || !engines)
		return 0;
	// long double: busy and window are nanoseconds, their product
	// overflows 64 bits after a few seconds.
	long double p = 100.0L * static_cast<long double>(busy) /
	                (static_cast<long double>(window) * engines);
	return static_cast<unsigned>(std::min(100.0L, p + 0.5L));
}

}  // namespace

int readEngineSample(os::Device &node, EngineSample *out)
{
	uint32_t size = 0;
	if (int ret = query(node, DRM_NPU_QUERY_ENGINES, nullptr, 0, &size))
		return ret;
	size_t n = size / sizeof(drm_npu_engine_info);
	EngineSample s;
	if (n) {
		std::vector<drm_npu_engine_info> engines(n);
		std::vector<drm_npu_engine_stats> stats(n);
		const auto bytes = static_cast<uint32_t>(n * sizeof(drm_npu_engine_stats));
		if (int ret =
		            query(node, DRM_NPU_QUERY_ENGINES, engines.data(),
		                  static_cast<uint32_t>(n * sizeof(drm_npu_engine_info)), nullptr))
			return ret;
		if (int ret = query(node, DRM_NPU_QUERY_ENGINE_STATS, stats.data(), bytes, nullptr))
			return ret;
		for (size_t i = 0; i < n; i++) {
			uint32_t cls = engines[i].engine_class;
			if (cls > DRM_NPU_ENGINE_COMPUTE)
				continue;  // a class this runtime does not know
			s.engines[cls]++;
			s.busyNs[cls] += stats[i].busy_ns;
			s.sampleNs = std::max<uint64_t>(s.sampleNs, stats[i].sample_ns);
		}
	}
	if (!s.sampleNs) {
		timespec ts{};
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s.sampleNs = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
		             static_cast<uint64_t>(ts.tv_nsec);
	}
	*out = s;
	return 0;
}

npurtUtilization utilizationBetween(const EngineSample &prev, const EngineSample &cur)
{
	npurtUtilization u{};
	u.sampleNs = cur.sampleNs;
	u.windowNs = cur.sampleNs > prev.sampleNs ? cur.sampleNs - prev.sampleNs : 0;
	u.computeBusyNs = cur.busyNs[DRM_NPU_ENGINE_COMPUTE];
	u.copyBusyNs = cur.busyNs[DRM_NPU_ENGINE_COPY];
	u.computeEngines = cur.engines[DRM_NPU_ENGINE_COMPUTE];
	u.copyEngines = cur.engines[DRM_NPU_ENGINE_COPY];
	// Counters only grow while the driver stays loaded; a reload in
	// between makes the difference meaningless, so it reads as idle.
	auto delta = [&](int cls) {
		return cur.busyNs[cls] >= prev.busyNs[cls] ? cur.busyNs[cls] - prev.busyNs[cls] : 0;
	};
	u.compute = percent(delta(DRM_NPU_ENGINE_COMPUTE), u.windowNs, u.computeEngines);
	u.copy = percent(delta(DRM_NPU_ENGINE_COPY), u.windowNs, u.copyEngines);
	return u;
}

std::vector<npurtProcessInfo> processesOf(const std::vector<os::ClientUsage> &clients,
                                          uint32_t index,
                                          const std::function<std::string(long)> &name)
{
	std::map<long, npurtProcessInfo> by;
	for (const auto &c : clients) {
		if (c.deviceIndex != index)
			continue;
		npurtProcessInfo &p = by[c.pid];
		p.pid = static_cast<int>(c.pid);
		p.contexts++;
		p.deviceBytes += c.deviceBytes;
		p.hostBytes += c.hostBytes;
		p.computeBusyNs += c.computeBusyNs;
		p.copyBusyNs += c.copyBusyNs;
		p.queues += c.queues;
	}
	std::vector<npurtProcessInfo> out;
	out.reserve(by.size());
	for (auto &[pid, p] : by) {
		std::string n = name(pid);
		n.copy(p.name, sizeof(p.name) - 1);
		out.push_back(p);
	}
	return out;
}

}  // namespace npurt

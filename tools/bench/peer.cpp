// Peer copies: NPU 0's copy engine reading NPU 1's memory through peer
// access (and npurtMemcpyPeerAsync, which maps it the same way), against
// a same-device device-to-device copy of the same size, and the host CPU
// time spent while they run.
#include "bench.h"

namespace bench {

namespace {

struct Timed {
	double seconds = 0, cpu = 0;
};

// reps copies enqueued on s, then one synchronize: wall and process CPU.
template <typename F> Timed timeCopies(npurtStream_t s, int reps, F enqueue)
{
	double t0 = now(), c0 = cpuSeconds();
	for (int i = 0; i < reps; i++)
		enqueue();
	check(npurtStreamSynchronize(s), "stream synchronize");
	return {(now() - t0) / reps, cpuSeconds() - c0};
}

}  // namespace

void benchPeer(const Options &o)
{
	int count = 0;
	check(npurtGetDeviceCount(&count), "device count");
	if (count < 2) {
		addNote("peer: skipped, needs two NPUs");
		return;
	}
	const size_t size = o.quick ? 4 * MiB : 64 * MiB;
	const int reps = o.quick ? 2 : 4;
	void *peerSrc = nullptr;
	check(npurtSetDevice(1), "set device 1");
	check(npurtMalloc(&peerSrc, size), "malloc on NPU 1");
	check(npurtMemset(peerSrc, 0x5a, size), "memset on NPU 1");
	check(npurtSetDevice(0), "set device 0");
	void *src = nullptr, *dst = nullptr;
	check(npurtMalloc(&src, size), "malloc");
	check(npurtMalloc(&dst, size), "malloc");
	check(npurtMemset(src, 0x5a, size), "memset");
	npurtStream_t s = nullptr;
	check(npurtStreamCreate(&s), "stream create");
	check(npurtDeviceEnablePeerAccess(1, 0), "enable peer access to NPU 1");

	std::vector<double> local, peer, peerApi, cpuPct;
	for (int r = 0; r < o.runs; r++) {
		Timed l = timeCopies(s, reps, [&] {
			check(npurtMemcpyAsync(dst, src, size, npurtMemcpyDeviceToDevice, s),
			      "device to device");
		});
		Timed p = timeCopies(s, reps, [&] {
			check(npurtMemcpyAsync(dst, peerSrc, size, npurtMemcpyDeviceToDevice, s),
			      "peer device to device");
		});
		Timed a = timeCopies(s, reps, [&] {
			check(npurtMemcpyPeerAsync(dst, 0, peerSrc, 1, size, s), "memcpy peer");
		});
		local.push_back(size / l.seconds * 1e-9);
		peer.push_back(size / p.seconds * 1e-9);
		peerApi.push_back(size / a.seconds * 1e-9);
		cpuPct.push_back(100.0 * p.cpu / (p.seconds * reps));
	}
	check(npurtDeviceDisablePeerAccess(1), "disable peer access");
	check(npurtStreamDestroy(s), "stream destroy");
	check(npurtFree(src), "free");
	check(npurtFree(dst), "free");
	check(npurtSetDevice(1), "set device 1");
	check(npurtFree(peerSrc), "free on NPU 1");
	check(npurtSetDevice(0), "set device 0");

	std::string sz = sizeName(size);
	addFigure("peer", "D2D same NPU " + sz, "GB/s", local, "the limit of the peer copies");
	size_t f = addFigure("peer", "D2D from the peer NPU (peer access) " + sz, "GB/s", peer,
	                     "D2D same NPU " + sz, "GB/s", local);
	addFigure("peer", "npurtMemcpyPeerAsync " + sz, "GB/s", peerApi, "D2D same NPU " + sz,
	          "GB/s", local);
	size_t c = addFigure("peer", "host CPU use during peer copies " + sz, "%", cpuPct,
	                     "process CPU time / wall time: enqueue and one synchronize");
	Goal g;
	g.text = "async peer copy >= 0.8 of a same-device D2D copy";
	g.value = figures()[f].ratio;
	g.measured = "peer GB/s / same-NPU GB/s, " + sz;
	g.atLeast = true;
	g.target = 0.8;
	addGoal(g);
	g = Goal{};
	g.text = "no host thread busy during a peer copy (CPU use <= 10%)";
	g.value = figures()[c].value;
	g.measured = "process CPU time / wall time, %";
	g.atLeast = false;
	g.target = 10;
	addGoal(g);
}

}  // namespace bench

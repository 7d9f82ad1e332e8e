// Copy planning (see copy.h).
#include "copy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "error.h"
#include "graph.h"
#include "npu_drm.h"
#include "runtime.h"
#include "stream.h"

namespace npurt {

namespace {

npurtError_t checkBounds(const char *api, const char *what, const void *p, size_t count,
                         const DeviceSide &d)
{
	uint64_t off = addrOf(p) - d.base;
	if (count <= d.size && off <= d.size - count)
		return npurtSuccess;
	return setError(npurtErrorInvalidValue,
	                std::string(api) + ": " + std::to_string(count) + " bytes at " + what +
	                        " " + hexAddr(addrOf(p)) + " overrun its allocation of " +
	                        std::to_string(d.size) + " bytes at " + hexAddr(d.base));
}

const char *kindName(npurtMemcpyKind k)
{
	switch (k) {
	case npurtMemcpyHostToHost:
		return "npurtMemcpyHostToHost";
	case npurtMemcpyHostToDevice:
		return "npurtMemcpyHostToDevice";
	case npurtMemcpyDeviceToHost:
		return "npurtMemcpyDeviceToHost";
	case npurtMemcpyDeviceToDevice:
		return "npurtMemcpyDeviceToDevice";
	default:
		return "npurtMemcpyDefault";
	}
}

// Where a copy operand lives, from the stream's point of view.
enum class Side { Device, Direct, Pageable };

// dev: for Side::Device the allocation; for Side::Direct the pinned or
// registered range as the user gave it (ctx: the context it is mapped in).
struct Operand {
	Side side = Side::Pageable;
	DeviceSide dev;
};

std::string contextName(const Context &c, const Context &sc)
{
	return c.ordinal() == sc.ordinal() ? "another context of NPU " + std::to_string(c.ordinal())
	                                   : "NPU " + std::to_string(c.ordinal());
}

}  // namespace

// Device memory of another context is named only where this context
// reaches it (peer access, or peerCopy: npurtMemcpyPeer): contexts are
// isolated.
npurtError_t checkReach(const char *api, const char *what, const void *p, Stream *s, Context &owner,
                        bool peerCopy)
{
	Context &sc = s->ctx();
	if (&owner == &sc)
		return npurtSuccess;
	bool reached = false;
	if (npurtError_t err = sc.reachPeer(owner, peerCopy, &reached, api))
		return err;
	if (reached)
		return npurtSuccess;
	return setError(npurtErrorInvalidValue,
	                std::string(api) + ": " + what + " " + hexAddr(addrOf(p)) +
	                        " is memory of " + contextName(owner, sc) +
	                        ", which the stream's context (NPU " +
	                        std::to_string(sc.ordinal()) +
	                        ") has no access to: enable peer access "
	                        "(npurtDeviceEnablePeerAccess, npurtCtxEnablePeerAccess), "
	                        "use npurtMemcpyPeer, or use a stream of its context");
}

namespace {

npurtError_t classify(const char *api, const char *what, const void *p, Stream *s, Operand *out,
                      bool peerCopy = false)
{
	bool isDevice = false;
	if (npurtError_t err = resolveDevice(api, what, p, &s->ctx(), &out->dev, &isDevice))
		return err;
	if (isDevice) {
		out->side = Side::Device;
		return checkReach(api, what, p, s, *out->dev.ctx, peerCopy);
	}
	uint64_t base = 0;
	Runtime::HostRange r{};
	// Pinned or registered memory mapped in the stream's context is read
	// and written by the copy engine at its host address.
	if (Runtime::instance().findHostRange(addrOf(p), &base, &r) && r.ctx == &s->ctx()) {
		out->side = Side::Direct;
		out->dev = {r.ctx, r.userBase, r.userSize};
	} else {
		out->side = Side::Pageable;
	}
	return npurtSuccess;
}

// Whether the stream's engines reach the operand at its address: device
// memory (classify refused memory of contexts the stream's does not
// reach), or host memory mapped in the stream's context.
bool engineReaches(const Operand &op)
{
	return op.side != Side::Pageable;
}

// No address space holds this many bytes (x86-64 has at most 57 bits).
constexpr uint64_t kMaxCount = 1ull << 57;

// Both operands of a copy touching dstExtent and srcExtent bytes from
// dst and src: where they live, checked against kind and against the
// bounds of their allocation (device memory, pinned or registered host
// memory).
npurtError_t resolveOperands(const char *api, void *dst, uint64_t dstExtent, const void *src,
                             uint64_t srcExtent, npurtMemcpyKind kind, Stream *s, Operand *d,
                             Operand *o, bool peerCopy = false)
{
	if (kind < npurtMemcpyHostToHost || kind > npurtMemcpyDefault)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown kind " + std::to_string(kind));
	if (dstExtent > kMaxCount || srcExtent > kMaxCount ||
	    addrOf(dst) > UINT64_MAX - dstExtent || addrOf(src) > UINT64_MAX - srcExtent)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " +
		                        std::to_string(std::max(dstExtent, srcExtent)) +
		                        " bytes at " + hexAddr(addrOf(dst)) + " or " +
		                        hexAddr(addrOf(src)) + " do not fit in an address space");
	if (npurtError_t err = classify(api, "dst", dst, s, d, peerCopy))
		return err;
	if (npurtError_t err = classify(api, "src", src, s, o, peerCopy))
		return err;
	bool dstDev = d->side == Side::Device, srcDev = o->side == Side::Device;
	if (kind != npurtMemcpyDefault) {
		bool wantDst = kind == npurtMemcpyHostToDevice || kind == npurtMemcpyDeviceToDevice;
		bool wantSrc = kind == npurtMemcpyDeviceToHost || kind == npurtMemcpyDeviceToDevice;
		if (wantDst != dstDev || wantSrc != srcDev)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": " + kindName(kind) + " but dst " +
			                        hexAddr(addrOf(dst)) + " is " +
			                        (dstDev ? "device" : "host") + " memory and src " +
			                        hexAddr(addrOf(src)) + " is " +
			                        (srcDev ? "device" : "host") + " memory");
	}
	if (d->side != Side::Pageable)
		if (npurtError_t err = checkBounds(api, "dst", dst, dstExtent, d->dev))
			return err;
	if (o->side != Side::Pageable)
		if (npurtError_t err = checkBounds(api, "src", src, srcExtent, o->dev))
			return err;
	return npurtSuccess;
}

TaskInfo task(const char *api, const char *label, int op, uint64_t bytes, const CallSite &site)
{
	TaskInfo t;
	t.api = api;
	t.label = label;
	t.op = op;
	t.bytes = bytes;
	t.site = site;
	return t;
}

// callerWaits: the caller waits for the copy right after (see Stream::submit).
npurtError_t submitCopy(Stream *s, uint64_t dst, uint64_t src, uint64_t n, const char *api,
                        const char *label, const CallSite &site, bool callerWaits = false)
{
	drm_npu_pkt_copy c{};
	c.hdr = {DRM_NPU_PKT_COPY, sizeof(c)};
	c.src = src;
	c.dst = dst;
	c.size = n;
	return s->submit(DRM_NPU_ENGINE_COPY, &c, sizeof(c), task(api, label, -1, n, site),
	                 callerWaits);
}

// Pageable copies of at least this size pin the host range for the copy
// and the engine moves the bytes directly: one pass over them instead of
// the CPU's memcpy into a staging buffer plus the engine's.
constexpr size_t kZeroCopyMin = 1u << 20;

// A pageable copy through a pin of its host range (Context::pinHost, which
// reuses the pin of an earlier copy of the range while the range has not
// changed), waited for before the pin is given back. False if the range cannot be pinned
// (or the copy would be deferred behind a host function): the caller
// stages it instead. Else *err is the copy's result.
bool zeroCopy(Stream *s, uint64_t devAddr, void *host, size_t count, bool toDevice, const char *api,
              const CallSite &site, npurtError_t *err)
{
	if (count < kZeroCopyMin || s->busy())
		return false;
	Context &c = s->ctx();
	Context::HostPin pin;
	if (!c.pinHost(host, count, toDevice, &pin))
		return false;
	uint64_t h = pin.deviceAddr(host);
	*err = submitCopy(s, toDevice ? devAddr : h, toDevice ? h : devAddr, count, api,
	                  toDevice ? "copy host (pageable, direct) -> device"
	                           : "copy device -> host (pageable, direct)",
	                  site, true);
	// The engine must be done with the pages before they are unpinned;
	// synchronize also waits for the copy should it have been deferred
	// behind a host function another thread enqueued meanwhile.
	if (!*err)
		*err = s->synchronize(-1, api);
	c.unpinHost(pin);
	return true;
}

// The chunk a pageable copy of count bytes moves through a staging buffer
// of bufSize bytes: the whole copy if it fits (copies in a row overlap
// through the buffers taken in turn), else half a buffer, so that the
// CPU's memcpy of one chunk overlaps the engine's of another. Smaller
// chunks lose more to each job's submission and wakeups than they gain.
size_t stagingChunk(size_t count, size_t bufSize)
{
	return count <= bufSize ? count : bufSize / 2;
}

// memcpy in 8 KiB pieces, for the staging copies. glibc moves blocks from
// about 16 KiB up to its non-temporal threshold with `rep movsb`, which an
// emulated CPU (QEMU TCG, where the tests and benchmarks run) executes a
// byte at a time: 0.47 GB/s there against 3.3 GB/s for its vector loop.
// Natively the pieces cost nothing measurable.
void stagingCopy(void *dst, const void *src, size_t n)
{
	constexpr size_t kPiece = 8u << 10;
	auto *d = static_cast<char *>(dst);
	const auto *s = static_cast<const char *>(src);
	for (size_t off = 0; off < n; off += kPiece)
		std::memcpy(d + off, s + off, std::min(kPiece, n - off));
}

// Pageable host to device: the CPU fills one pinned staging buffer while
// the copy engine drains those filled before (Stream::Staging).
// sync: the caller waits for the copy (npurtMemcpy).
npurtError_t stageIn(Stream *s, uint64_t dst, const void *src, size_t count, const char *api,
                     const CallSite &site, bool sync)
{
	// Behind a host function: keep a copy of the source (it may be reused
	// once this returns) and stage it when the stream gets there.
	if (!Stream::onWorker() && s->busy()) {
		auto copy = std::make_shared<std::vector<char>>(
		        static_cast<const char *>(src), static_cast<const char *>(src) + count);
		if (s->deferIfBusy([s, dst, copy, count, api, where = site] {
			    if (stageIn(s, dst, copy->data(), count, api, where, false))
				    npurtGetLastError();
		    }))
			return npurtSuccess;
	}
	auto lock = s->stagingLock();
	Stream::Staging *st = nullptr;
	if (npurtError_t err = s->staging(&st, api))
		return err;
	for (size_t off = 0; off < count; st->advance()) {
		int i = st->next;
		size_t n = std::min(count - off, stagingChunk(count, st->buf[i].size));
		if (waitPoint(st->use[i], INT64_MAX))
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": staging wait failed");
		stagingCopy(st->buf[i].ptr, static_cast<const char *>(src) + off, n);
		// The last chunk of a synchronous copy is waited for at once.
		if (npurtError_t err = submitCopy(s, dst + off, addrOf(st->buf[i].ptr), n, api,
		                                  "copy host (pageable) -> device", site,
		                                  sync && off + n == count))
			return err;
		st->use[i] = s->tail();
		off += n;
	}
	return npurtSuccess;
}

// Device to pageable host: the engine fills one buffer while the CPU
// empties the other; returns when the data has arrived.
npurtError_t stageOut(Stream *s, void *dst, uint64_t src, size_t count, const char *api,
                      const CallSite &site)
{
	// The staging buffers are reused as soon as the engine is done with
	// them, which a copy deferred behind a host function would not be.
	if (npurtError_t err = s->drainHostWork(api))
		return err;
	auto lock = s->stagingLock();
	Stream::Staging *st = nullptr;
	if (npurtError_t err = s->staging(&st, api))
		return err;
	PinnedBuffer *bufs = st->buf;
	Point *use = st->use;
	struct Pending {
		size_t off = 0, n = 0;
		int buf = -1;
	} prev;
	auto drain = [&](const Pending &p) -> npurtError_t {
		if (p.buf < 0)
			return npurtSuccess;
		if (waitPoint(use[p.buf], INT64_MAX))
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": staging wait failed");
		if (npurtError_t err = s->checkFailureLocked(api))
			return err;
		stagingCopy(static_cast<char *>(dst) + p.off, bufs[p.buf].ptr, p.n);
		return npurtSuccess;
	};
	for (size_t off = 0; off < count; st->advance()) {
		int i = st->next;
		size_t n = std::min(count - off, stagingChunk(count, bufs[i].size));
		if (waitPoint(use[i], INT64_MAX))
			return setError(npurtErrorOperatingSystem,
			                std::string(api) + ": staging wait failed");
		// A copy in one chunk is waited for at once: the driver may run it
		// in this thread.
		if (npurtError_t err =
		            submitCopy(s, addrOf(bufs[i].ptr), src + off, n, api,
		                       "copy device -> host (pageable)", site, n == count))
			return err;
		use[i] = s->tail();
		if (npurtError_t err = drain(prev))
			return err;
		prev = {off, n, i};
		off += n;
	}
	return drain(prev);
}

// peerCopy: npurtMemcpyPeer's, which may name memory of any context.
npurtError_t copy(const char *api, void *dst, const void *src, size_t count, npurtMemcpyKind kind,
                  npurtStream_t stream, bool sync, const CallSite &site, bool peerCopy = false)
{
	if (!count)
		return npurtSuccess;
	if (!dst || !src)
		return nullArgument(api, !dst ? "dst" : "src");
	Stream *s = nullptr;
	if (npurtError_t err = resolveStream(stream, &s, api))
		return err;
	Operand d, o;
	if (npurtError_t err =
	            resolveOperands(api, dst, count, src, count, kind, s, &d, &o, peerCopy))
		return err;
	bool dstDev = d.side == Side::Device, srcDev = o.side == Side::Device;
	bool dstHere = engineReaches(d), srcHere = engineReaches(o);
	// A graph replays packets: memory the engine does not reach is staged
	// or pinned for the one copy, which a replay could not repeat.
	if (s->capturing() && !(dstHere && srcHere))
		return s->captureRefuse(api,
		                        "a copy to or from pageable host memory (capture copies "
		                        "of device, pinned or registered memory)");
	npurtError_t err = npurtSuccess;
	if (!dstDev && !srcDev && !(dstHere && srcHere)) {
		// Host to host, in stream order.
		if ((err = s->synchronize(-1, api)))
			return err;
		std::memmove(dst, src, count);
		return npurtSuccess;
	}
	if (dstHere && srcHere) {
		static const char *const labels[2][2] = {
		        {"copy host (pinned) -> host (pinned)", "copy host (pinned) -> device"},
		        {"copy device -> host (pinned)", "copy device -> device"}};
		// The engine refuses overlapping ranges (the result would depend
		// on the order it moves bytes in).
		if (addrOf(src) < addrOf(dst) + count && addrOf(dst) < addrOf(src) + count)
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the source and destination ranges of " +
			                        std::to_string(count) + " bytes at " +
			                        hexAddr(addrOf(src)) + " and " +
			                        hexAddr(addrOf(dst)) + " overlap");
		err = submitCopy(s, addrOf(dst), addrOf(src), count, api, labels[srcDev][dstDev],
		                 site, sync);
	} else if (dstDev) {
		// From pageable memory.
		// An asynchronous copy behind queued work is staged, so that the
		// call returns without waiting for that work.
		if (!((sync || s->idle()) && zeroCopy(s, addrOf(dst), const_cast<void *>(src),
		                                      count, true, api, site, &err)))
			err = stageIn(s, addrOf(dst), src, count, api, site, sync);
	} else {
		// Device to pageable memory.
		if (zeroCopy(s, addrOf(src), dst, count, false, api, site, &err))
			return err;
		return stageOut(s, dst, addrOf(src), count, api, site);
	}
	if (!err && sync)
		err = s->synchronize(-1, api);
	return err;
}

// count elements of width bytes (1, 2 or 4, the FILL packet's widths)
// set to the width's low bytes of value, little-endian.
// A fill's stream, and devPtr checked to be device memory of its context
// holding `bytes`.
npurtError_t fillTarget(const char *api, void *devPtr, uint64_t bytes, npurtStream_t stream,
                        Stream **out)
{
	Stream *s = nullptr;
	if (npurtError_t err = resolveStream(stream, &s, api))
		return err;
	Operand d;
	if (npurtError_t err = classify(api, "devPtr", devPtr, s, &d))
		return err;
	if (d.side != Side::Device)
		return setError(npurtErrorInvalidValue, std::string(api) + ": " +
		                                                hexAddr(addrOf(devPtr)) +
		                                                " is not device memory");
	if (npurtError_t err = checkBounds(api, "devPtr", devPtr, bytes, d.dev))
		return err;
	*out = s;
	return npurtSuccess;
}

npurtError_t fill(const char *api, void *devPtr, uint32_t value, unsigned width, size_t count,
                  npurtStream_t stream, bool sync, const CallSite &site)
{
	if (!count)
		return npurtSuccess;
	if (!devPtr)
		return nullArgument(api, "devPtr");
	if (addrOf(devPtr) % width)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + hexAddr(addrOf(devPtr)) + " is not " +
		                        std::to_string(width) + "-byte aligned");
	size_t bytes = 0;
	if (__builtin_mul_overflow(count, size_t{width}, &bytes))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + std::to_string(count) + " elements of " +
		                        std::to_string(width) + " bytes overflow a size");
	Stream *s = nullptr;
	if (npurtError_t err = fillTarget(api, devPtr, bytes, stream, &s))
		return err;
	if (width < 4)
		value &= (1u << (8 * width)) - 1;
	npurtError_t err;
	drm_npu_pkt_fill f{};
	f.hdr = {DRM_NPU_PKT_FILL, sizeof(f)};
	f.dst = addrOf(devPtr);
	f.size = bytes;
	f.value = value;
	f.width = width;
	TaskInfo t = task(api, "fill", -2, bytes, site);
	t.value = f.value;
	err = s->submit(DRM_NPU_ENGINE_COPY, &f, sizeof(f), t, sync);
	if (!err && sync)
		err = s->synchronize(-1, api);
	return err;
}

// --- strided copies -------------------------------------------------------

// One dimension of a strided copy: elements, and bytes between them on
// each side.
struct Dim {
	uint64_t size, dst, src;
};

// The view in the engine's terms: size-1 dimensions dropped, dimensions
// merged where both sides are dense across them, element sizes above the
// packet's limit split into an inner dimension. Empty: one element.
std::vector<Dim> normalize(const StridedView &v, size_t *elemSize)
{
	std::vector<Dim> in;
	in.reserve(v.ndim + 1);
	for (int i = 0; i < v.ndim; i++)
		in.push_back({v.sizes[i], v.dstStrides[i], v.srcStrides[i]});
	size_t es = v.elemSize;
	if (es > DRM_NPU_COPY_MAX_ELEM_SIZE) {
		size_t g = DRM_NPU_COPY_MAX_ELEM_SIZE;
		while (es % g)
			g /= 2;
		in.push_back({es / g, g, g});
		es = g;
	}
	std::vector<Dim> out;
	for (const Dim &d : in) {
		if (d.size == 1)
			continue;
		if (!out.empty() && out.back().dst == d.dst * d.size &&
		    out.back().src == d.src * d.size) {
			out.back().size *= d.size;
			out.back().dst = d.dst;
			out.back().src = d.src;
			continue;
		}
		out.push_back(d);
	}
	*elemSize = es;
	return out;
}

// Bytes from a side's first byte to its last, plus one; false on overflow.
bool extent(const std::vector<Dim> &dims, size_t es, uint64_t Dim::*stride, uint64_t *out)
{
	uint64_t span = es;
	for (const Dim &d : dims) {
		uint64_t step = 0;
		if (__builtin_mul_overflow(d.size - 1, d.*stride, &step) ||
		    __builtin_add_overflow(span, step, &span))
			return false;
	}
	*out = span;
	return true;
}

// Walks every index of dims[0, n) in row-major order: f(dstOffset, srcOffset).
template <typename F> npurtError_t forEachIndex(const std::vector<Dim> &dims, size_t n, F f)
{
	std::vector<uint64_t> idx(n, 0);
	uint64_t doff = 0, soff = 0;
	for (;;) {
		if (npurtError_t err = f(doff, soff))
			return err;
		size_t i = n;
		while (i > 0) {
			const Dim &d = dims[i - 1];
			if (++idx[i - 1] < d.size) {
				doff += d.dst;
				soff += d.src;
				break;
			}
			doff -= (d.size - 1) * d.dst;
			soff -= (d.size - 1) * d.src;
			idx[i - 1] = 0;
			i--;
		}
		if (i == 0)
			return npurtSuccess;
	}
}

// Whether the driver has DRM_NPU_PKT_COPY_STRIDED (uAPI 1.1).
bool hasStridedPacket(Context &c)
{
	// npurtDeviceProp encodes major.minor as major * 1000 + minor * 10.
	return Runtime::instance().device(c.ordinal()).prop().driverApiVersion % 1000 >= 10;
}

// Runs (what the engine moves in one piece: a row dense on both sides, or
// one element) per packet at most. The engine walks runs one by one, so
// their number, not the bytes, is what a strided copy's time grows with;
// this many take milliseconds under emulation, far inside the job
// timeout that applies to each packet.
constexpr uint64_t kMaxRunsPerPacket = 1u << 16;

// Packets for dims on the stream's engines: the inner (up to) six
// dimensions per packet, one packet per index of the outer ones, and the
// outermost inner dimension cut into chunks of at most kMaxRunsPerPacket
// runs.
npurtError_t submitStrided(Stream *s, uint64_t dst, uint64_t src, const std::vector<Dim> &dims,
                           size_t es, const char *api, const char *label, const CallSite &site)
{
	const size_t n = dims.size();
	// As the engine sees a packet: its last dimension, when dense on both
	// sides, is one run.
	const size_t runDims = dims.back().dst == es && dims.back().src == es ? n - 1 : n;
	auto runsFrom = [&](size_t first) {
		uint64_t runs = 1;  // the element count did not overflow
		for (size_t i = first; i < runDims; i++)
			runs *= dims[i].size;
		return runs;
	};
	size_t outer = n - std::min<size_t>(n, DRM_NPU_COPY_MAX_DIMS);
	// Outer dimensions while what is inside the next one has too many runs:
	// then dims[outer] is cut so that a packet has at most the limit.
	while (outer + 1 < runDims && runsFrom(outer + 1) > kMaxRunsPerPacket)
		outer++;
	// outer < runDims (a view dense throughout is an ordinary copy before
	// this; were it not, it would be cut in elements, still right).
	const Dim &cut = dims[outer];
	const uint64_t below = runsFrom(outer + 1);  // at most the limit
	const uint64_t chunk = std::max<uint64_t>(1, kMaxRunsPerPacket / below);
	uint64_t inner = es;  // bytes of one index of dims[outer]
	for (size_t i = outer + 1; i < n; i++)
		inner *= dims[i].size;
	drm_npu_pkt_copy_strided c{};
	c.hdr = {DRM_NPU_PKT_COPY_STRIDED, sizeof(c)};
	c.ndim = static_cast<uint32_t>(n - outer);
	c.elem_size = static_cast<uint32_t>(es);
	for (size_t i = outer; i < n; i++) {
		c.sizes[i - outer] = dims[i].size;
		c.dst_strides[i - outer] = dims[i].dst;
		c.src_strides[i - outer] = dims[i].src;
	}
	return forEachIndex(dims, outer, [&](uint64_t doff, uint64_t soff) {
		for (uint64_t j = 0; j < cut.size; j += chunk) {
			const uint64_t len = std::min(chunk, cut.size - j);
			c.sizes[0] = len;
			c.dst = dst + doff + j * cut.dst;
			c.src = src + soff + j * cut.src;
			TaskInfo t = task(api, label, -1, len * inner, site);
			t.runs = len * below;
			if (npurtError_t err = s->submit(DRM_NPU_ENGINE_COPY, &c, sizeof(c), t))
				return err;
		}
		return npurtSuccess;
	});
}

npurtError_t copyStrided(const char *api, void *dst, const void *src, const StridedView &v,
                         npurtMemcpyKind kind, npurtStream_t stream, bool sync,
                         const CallSite &site)
{
	if (!dst || !src)
		return nullArgument(api, !dst ? "dst" : "src");
	if (v.ndim < 1 || v.ndim > NPURT_MAX_COPY_DIMS)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": ndim " + std::to_string(v.ndim) +
		                        " is not 1 to " + std::to_string(NPURT_MAX_COPY_DIMS));
	if (!v.sizes || !v.dstStrides || !v.srcStrides)
		return nullArgument(api, !v.sizes        ? "sizes"
		                         : !v.dstStrides ? "dstStrides"
		                                         : "srcStrides");
	if (!v.elemSize)
		return setError(npurtErrorInvalidValue, std::string(api) + ": elemSize is 0");
	for (int i = 0; i < v.ndim; i++)
		if (!v.sizes[i])
			return npurtSuccess;
	size_t es = 0;
	std::vector<Dim> dims = normalize(v, &es);
	uint64_t dstExt = 0, srcExt = 0, elems = 1;
	for (const Dim &d : dims)
		if (__builtin_mul_overflow(elems, d.size, &elems))
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": the element count overflows");
	if (!extent(dims, es, &Dim::dst, &dstExt) || !extent(dims, es, &Dim::src, &srcExt))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the strides reach past any address space");
	// Dense on both sides: an ordinary copy.
	if (dims.empty() || (dims.size() == 1 && dims[0].dst == es && dims[0].src == es))
		return copy(api, dst, src, elems * es, kind, stream, sync, site);

	Stream *s = nullptr;
	if (npurtError_t err = resolveStream(stream, &s, api))
		return err;
	Operand d, o;
	if (npurtError_t err = resolveOperands(api, dst, dstExt, src, srcExt, kind, s, &d, &o))
		return err;
	Context *sc = &s->ctx();
	bool dstHere = engineReaches(d), srcHere = engineReaches(o);
	npurtError_t err = npurtSuccess;
	if (dstHere && srcHere && hasStridedPacket(*sc)) {
		static const char *const labels[2][2] = {
		        {"copy strided host (pinned) -> host (pinned)",
		         "copy strided host (pinned) -> device"},
		        {"copy strided device -> host (pinned)", "copy strided device -> device"}};
		const char *label = labels[o.side == Side::Device][d.side == Side::Device];
		if (addrOf(src) < addrOf(dst) + dstExt && addrOf(dst) < addrOf(src) + srcExt) {
			// The engine refuses overlapping extents: gather the source
			// into a temporary first. Freeing it at once is safe: the
			// pool reuses it only after the copies below have run.
			uint64_t tmp = 0;
			if ((err = sc->pool().allocate(elems * es, 0, &tmp)))
				return err;
			std::vector<Dim> packed = dims;
			uint64_t stride = es;
			for (size_t i = packed.size(); i-- > 0;) {
				packed[i].dst = stride;
				stride *= packed[i].size;
			}
			std::vector<Dim> back = packed;
			for (size_t i = 0; i < dims.size(); i++) {
				back[i].src = packed[i].dst;
				back[i].dst = dims[i].dst;
			}
			err = submitStrided(s, tmp, addrOf(src), packed, es, api, label, site);
			if (!err)
				err = submitStrided(s, addrOf(dst), tmp, back, es, api, label,
				                    site);
			sc->pool().deallocate(tmp);
		} else {
			err = submitStrided(s, addrOf(dst), addrOf(src), dims, es, api, label,
			                    site);
		}
		if (!err && sync)
			err = s->synchronize(-1, api);
		return err;
	}
	// Pageable memory, or a driver without the packet: one ordinary copy per run (the innermost
	// dimension where it is dense on both sides, else each element).
	size_t runDims = dims.size();
	uint64_t run = es;
	if (dims.back().dst == es && dims.back().src == es) {
		run = dims.back().size * es;
		runDims--;
	}
	err = forEachIndex(dims, runDims, [&](uint64_t doff, uint64_t soff) {
		return copy(api, static_cast<char *>(dst) + doff,
		            static_cast<const char *>(src) + soff, run, kind, stream, false, site);
	});
	if (!err && sync)
		err = s->synchronize(-1, api);
	return err;
}
}  // namespace

npurtError_t resolveDevice(const char *api, const char *what, const void *p, Context *hint,
                           DeviceSide *out, bool *isDevice)
{
	Runtime &rt = Runtime::instance();
	*isDevice = false;
	out->ctx = rt.findDeviceMemory(addrOf(p), hint, &out->base, &out->size);
	if (out->ctx) {
		*isDevice = true;
		return npurtSuccess;
	}
	if (rt.deviceOfAddress(addrOf(p)) >= 0)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + what + " " + hexAddr(addrOf(p)) +
		                        " is a device address but not live device memory "
		                        "(freed, or never allocated)");
	return npurtSuccess;
}

npurtError_t planCopy(const char *api, void *dst, const void *src, size_t count,
                      npurtMemcpyKind kind, npurtStream_t stream, bool sync, void *ra,
                      bool peerCopy)
{
	// A synchronous call a capture forbids does nothing at all.
	if (sync)
		if (npurtError_t err = captureForbids(api))
			return err;
	return copy(api, dst, src, count, kind, stream, sync, takeCallSite(ra), peerCopy);
}

npurtError_t planFill(const char *api, void *devPtr, uint32_t value, unsigned width, size_t count,
                      npurtStream_t stream, bool sync, void *ra)
{
	if (sync)
		if (npurtError_t err = captureForbids(api))
			return err;
	return fill(api, devPtr, value, width, count, stream, sync, takeCallSite(ra));
}

npurtError_t planFillPitched(const char *api, void *devPtr, const PitchedBox &box,
                             unsigned char value, npurtStream_t stream, bool sync, void *ra)
{
	const size_t width = box.width, height = box.height, depth = box.depth;
	const size_t pitch = box.pitch, slicePitch = box.slicePitch;
	if (!width || !height || !depth)
		return npurtSuccess;
	if (!devPtr)
		return nullArgument(api, "devPtr");
	if (pitch < width)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": pitch " + std::to_string(pitch) +
		                        " is less than width " + std::to_string(width));
	uint64_t slice = 0, extent = 0, last = 0;
	if (__builtin_mul_overflow(uint64_t{height - 1}, uint64_t{pitch}, &extent) ||
	    __builtin_add_overflow(extent, uint64_t{width}, &slice) ||
	    __builtin_mul_overflow(uint64_t{depth - 1}, uint64_t{slicePitch}, &last) ||
	    __builtin_add_overflow(last, slice, &extent))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + std::to_string(height) +
		                        " rows of pitch " + std::to_string(pitch) + " in " +
		                        std::to_string(depth) + " slices overflow a size");
	if (depth > 1 && slicePitch < slice)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + std::to_string(height) +
		                        " rows do not fit a slice of " +
		                        std::to_string(slicePitch) + " bytes");
	if (sync)
		if (npurtError_t err = captureForbids(api))
			return err;
	CallSite site = takeCallSite(ra);
	if ((height == 1 || pitch == width) && (depth == 1 || slicePitch == slice))
		return fill(api, devPtr, value, 1, extent, stream, sync, site);
	// The whole extent is checked before the first row is filled, so a
	// bad height or depth leaves the memory untouched.
	Stream *s = nullptr;
	if (npurtError_t err = fillTarget(api, devPtr, extent, stream, &s))
		return err;
	const bool more = height > 1 || depth > 1;
	if (npurtError_t err = fill(api, devPtr, value, 1, width, stream, sync && !more, site))
		return err;
	// The other rows are copies of the first: source strides of 0. First
	// the rest of the first slice, then the other slices whole.
	auto *base = static_cast<char *>(devPtr);
	auto broadcast = [&](char *dst, size_t slices, size_t rows, bool wait) {
		const size_t sizes[3] = {slices, rows, width};
		const size_t dstStrides[3] = {slicePitch, pitch, 1};
		const size_t srcStrides[3] = {0, 0, 1};
		StridedView v;
		v.ndim = 3;
		v.elemSize = 1;
		v.sizes = sizes;
		v.dstStrides = dstStrides;
		v.srcStrides = srcStrides;
		return copyStrided(api, dst, devPtr, v, npurtMemcpyDeviceToDevice, stream, wait,
		                   site);
	};
	if (height > 1)
		if (npurtError_t err = broadcast(base + pitch, 1, height - 1, sync && depth == 1))
			return err;
	if (depth > 1)
		return broadcast(base + slicePitch, depth - 1, height, sync);
	return npurtSuccess;
}

npurtError_t planCopyStrided(const char *api, void *dst, const void *src, const StridedView &v,
                             npurtMemcpyKind kind, npurtStream_t stream, bool sync, void *ra)
{
	if (sync)
		if (npurtError_t err = captureForbids(api))
			return err;
	return copyStrided(api, dst, src, v, kind, stream, sync, takeCallSite(ra));
}

}  // namespace npurt

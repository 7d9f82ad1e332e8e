// C API: streams, events, host functions, op launch, error callback,
// call sites and the profiler's switches.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "copy.h"
#include "error.h"
#include "graph.h"
#include "ipc.h"
#include "mem_pool.h"
#include "npu_drm.h"
#include "runtime.h"
#include "stream.h"

using npurt::addrOf;
using npurt::Context;
using npurt::Event;
using npurt::Runtime;
using npurt::setError;
using npurt::Stream;

namespace {

// Stream priorities: 1 low, 0 normal, -1 high (lower is higher, as in CUDA).
constexpr int kLeastPriority = 1;
constexpr int kGreatestPriority = -1;

npurtError_t nullArgument(const char *api, const char *arg)
{
	return setError(npurtErrorInvalidValue, std::string(api) + ": " + arg + " is NULL");
}

std::string hex(uint64_t v)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

size_t elementSize(npurtDataType t)
{
	return t == npurtFloat32 || t == npurtInt32 ? 4 : 2;
}

// Checks that [p, p + bytes) is device-visible memory of the stream's
// context (device memory, or pinned/registered host memory mapped there).
npurtError_t checkOperand(const char *api, const char *name, const void *p, uint64_t bytes,
                          Stream *s)
{
	if (!p)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": operand " + name + " is NULL");
	Runtime &rt = Runtime::instance();
	uint64_t base = 0;
	size_t size = 0;
	Context *owner = rt.findDeviceMemory(addrOf(p), &s->ctx(), &base, &size);
	Runtime::HostRange r{};
	if (!owner && rt.findHostRange(addrOf(p), &base, &r)) {
		// Bounded by what the user pinned or registered, not the pages
		// (or the pool's rounded block) behind it.
		owner = r.ctx;
		base = r.userBase;
		size = r.userSize;
		if (addrOf(p) < base)
			size = 0;
	}
	if (!owner)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": operand " + name + " " + hex(addrOf(p)) +
		                        " is not device memory (freed, or host memory)");
	// Host memory is reached where it is mapped; device memory of another
	// context only through peer access.
	if (r.ctx && r.ctx != &s->ctx())
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": operand " + name + " " + hex(addrOf(p)) +
		                        " is host memory mapped for NPU " +
		                        std::to_string(r.ctx->ordinal()) +
		                        ", not for the stream's context (NPU " +
		                        std::to_string(s->ctx().ordinal()) + ")");
	if (!r.ctx)
		if (npurtError_t err = checkReach(api, (std::string("operand ") + name).c_str(), p,
		                                  s, *owner, false))
			return err;
	uint64_t off = addrOf(p) - base;
	if (bytes > size || off > size - bytes)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": operand " + name + " needs " +
		                        std::to_string(bytes) + " bytes at " + hex(addrOf(p)) +
		                        ", which overruns its allocation of " +
		                        std::to_string(size) + " bytes at " + hex(base));
	return npurtSuccess;
}

bool mul(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

// The device's rules for an op packet (the driver checks them again at
// submission): found here, a bad op fails its own call, even when it would
// have been batched with others. nullptr if the op is good.
const char *opRule(const drm_npu_pkt_op &p, uint64_t aBytes, uint64_t bBytes, uint64_t cBytes,
                   uint64_t outBytes)
{
	constexpr uint64_t kOperandMax = 1ull << 30;
	auto overlaps = [](uint64_t in, uint64_t inLen, uint64_t out, uint64_t outLen,
	                   bool sameOk) {
		if (in >= out + outLen || out >= in + inLen)
			return false;
		return !(sameOk && in == out && inLen == outLen);
	};
	uint64_t es = elementSize(static_cast<npurtDataType>(p.dtype));
	uint64_t oes =
	        p.op == npurtOpGemm ? 4 : elementSize(static_cast<npurtDataType>(p.out_dtype));
	bool isFloat = p.dtype != npurtInt32;
	switch (p.op) {
	case npurtOpReduceSum:
	case npurtOpReduceMax:
	case npurtOpTranspose:
		if (p.out_dtype != p.dtype)
			return "the output type must be the input type";
		if (p.flags)
			return "flags are for GEMM only";
		if (p.op != npurtOpTranspose && p.axis > 1)
			return "axis must be 0 or 1";
		if (!p.m || !p.n)
			return "the shape is empty";
		break;
	case npurtOpGemm:
		if (p.dtype != npurtFloat32 && p.dtype != npurtFloat16)
			return "GEMM takes f32 or f16 inputs";
		if (p.out_dtype != npurtFloat32)
			return "GEMM writes f32";
		if (p.flags & ~static_cast<uint32_t>(npurtOpTransA | npurtOpTransB))
			return "unknown flags";
		if (!p.m || !p.n || !p.k)
			return "the shape is empty";
		break;
	default:
		if (p.op != npurtOpCast && p.out_dtype != p.dtype)
			return "the output type must be the input type (only cast converts)";
		if (p.op >= npurtOpScale && p.op <= npurtOpExp && p.op != npurtOpRelu && !isFloat)
			return "this op takes floating-point types only";
		if (p.flags)
			return "flags are for GEMM only";
		if (!p.n)
			return "the shape is empty";
		break;
	}
	if (aBytes > kOperandMax || bBytes > kOperandMax || cBytes > kOperandMax ||
	    outBytes > kOperandMax)
		return "an operand is larger than 1 GiB";
	if (p.a % es || p.b % es || p.out % oes || p.c % 4)
		return "an operand is not aligned to its element size";
	// Element-wise ops may write in place; the others need an output apart.
	bool inPlace = p.op <= npurtOpCast;
	if (overlaps(p.a, aBytes, p.out, outBytes, inPlace) ||
	    (bBytes && overlaps(p.b, bBytes, p.out, outBytes, inPlace)))
		return "an input overlaps the output";
	if (cBytes && overlaps(p.c, cBytes, p.out, outBytes, true))
		return "c overlaps the output (it may only be the output itself)";
	return nullptr;
}

npurtError_t launchOp(const npurtOpDesc *d, npurtStream_t stream, void *ra)
{
	const char *api = "npurtLaunchOp";
	npurt::CallSite site = npurt::takeCallSite(ra);
	if (!d)
		return nullArgument(api, "desc");
	if (d->op < npurtOpAdd || d->op > npurtOpGemm)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown op " + std::to_string(d->op));
	if (d->dtype < npurtFloat32 || d->dtype > npurtInt32 || d->outDtype < npurtFloat32 ||
	    d->outDtype > npurtInt32)
		return setError(npurtErrorInvalidValue, std::string(api) + ": unknown data type");
	Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, api))
		return err;

	uint64_t in = elementSize(d->dtype), outE = elementSize(d->outDtype);
	uint64_t aBytes = 0, bBytes = 0, cBytes = 0, outBytes = 0, mn = 0;
	bool ok = true;
	switch (d->op) {
	case npurtOpReduceSum:
	case npurtOpReduceMax:
		ok = mul(d->m, d->n, &mn) && mul(mn, in, &aBytes) &&
		     mul(d->axis == 0 ? d->n : d->m, outE, &outBytes);
		break;
	case npurtOpTranspose:
		ok = mul(d->m, d->n, &mn) && mul(mn, in, &aBytes) && mul(mn, outE, &outBytes);
		break;
	case npurtOpGemm: {
		uint64_t mk = 0, kn = 0;
		ok = mul(d->m, d->k, &mk) && mul(mk, in, &aBytes) && mul(d->k, d->n, &kn) &&
		     mul(kn, in, &bBytes) && mul(d->m, d->n, &mn) && mul(mn, 4, &outBytes);
		cBytes = d->beta != 0.0f ? outBytes : 0;
		break;
	}
	default:
		ok = mul(d->n, in, &aBytes) && mul(d->n, outE, &outBytes);
		if (d->op <= npurtOpMin || d->op == npurtOpAxpy)
			bBytes = aBytes;
		break;
	}
	if (!ok)
		return setError(npurtErrorInvalidValue, std::string(api) + ": the shape overflows");
	if (npurtError_t err = checkOperand(api, "a", d->a, aBytes, s))
		return err;
	if (bBytes)
		if (npurtError_t err = checkOperand(api, "b", d->b, bBytes, s))
			return err;
	if (cBytes)
		if (npurtError_t err = checkOperand(api, "c", d->c, cBytes, s))
			return err;
	if (npurtError_t err = checkOperand(api, "out", d->out, outBytes, s))
		return err;

	drm_npu_pkt_op p{};
	p.hdr = {DRM_NPU_PKT_OP, sizeof(p)};
	p.op = d->op;
	p.dtype = d->dtype;
	p.out_dtype = d->outDtype;
	p.flags = d->flags;
	p.a = addrOf(d->a);
	p.b = bBytes ? addrOf(d->b) : 0;
	p.c = cBytes ? addrOf(d->c) : 0;
	p.out = addrOf(d->out);
	bool rows = d->op == npurtOpReduceSum || d->op == npurtOpReduceMax ||
	            d->op == npurtOpTranspose || d->op == npurtOpGemm;
	p.m = rows ? d->m : 0;
	p.n = d->n;
	p.k = d->op == npurtOpGemm ? d->k : 0;
	p.axis = d->op == npurtOpReduceSum || d->op == npurtOpReduceMax ? d->axis : 0;
	if (d->op == npurtOpScale || d->op == npurtOpAxpy || d->op == npurtOpGemm)
		std::memcpy(&p.alpha_bits, &d->alpha, 4);
	if (d->op == npurtOpGemm)
		std::memcpy(&p.beta_bits, &d->beta, 4);

	if (const char *why = opRule(p, aBytes, bBytes, cBytes, outBytes))
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": op " + npurt::kOpNames[d->op] + ": " + why);

	npurt::TaskInfo t;
	t.api = api;
	t.op = d->op;
	t.dtype = static_cast<uint8_t>(d->dtype);
	t.outDtype = static_cast<uint8_t>(d->outDtype);
	t.m = p.m;
	t.n = p.n;
	t.k = p.k;
	t.axis = p.axis;
	t.bytes = aBytes + bBytes + cBytes + outBytes;
	t.site = site;
	npurtError_t err = s->submit(DRM_NPU_ENGINE_COMPUTE, &p, sizeof(p), t);
	if (err == npurtErrorInvalidValue)
		setError(err, std::string(npurtGetLastErrorMessage()) +
		                      " (the device refused the op's shape or types)");
	return err;
}

// npurtEventRecordWithFlags (record) and npurtStreamWaitEvent: flags 0 or
// External (the same bit in both), which in a capture makes a node.
npurtError_t recordOrWait(npurtStream_t stream, npurtEvent_t event, unsigned int flags, bool record,
                          const char *api)
{
	static_assert(npurtEventRecordExternal == npurtEventWaitExternal);
	if (flags & ~npurtEventRecordExternal)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown flags " +
		                        npurt::hexAddr(flags & ~npurtEventRecordExternal));
	Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, api))
		return err;
	Event *ev = nullptr;
	if (npurtError_t err = npurt::resolveEvent(event, &ev, api))
		return err;
	npurtError_t err = npurtSuccess;
	if ((flags & npurtEventRecordExternal) && s->captureExternal(*ev, record, api, &err))
		return err;
	return record ? s->record(*ev, api) : s->wait(*ev, api);
}

}  // namespace

namespace npurt {

npurtError_t enqueueOp(const npurtOpDesc *desc, npurtStream_t stream, void *returnAddress)
{
	return launchOp(desc, stream, returnAddress);
}

}  // namespace npurt

extern "C" {

npurtError_t npurtDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	if (leastPriority)
		*leastPriority = kLeastPriority;
	if (greatestPriority)
		*greatestPriority = kGreatestPriority;
	return npurtSuccess;
}

npurtError_t npurtStreamCreateWithPriority(npurtStream_t *stream, unsigned int flags, int priority)
{
	try {
		const char *api = "npurtStreamCreateWithPriority";
		if (!stream)
			return nullArgument(api, "stream");
		if (flags & ~static_cast<unsigned int>(npurtStreamNonBlocking))
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": unknown flags " + hex(flags));
		// Out-of-range priorities are clamped, as CUDA does.
		priority = std::max(kGreatestPriority, std::min(kLeastPriority, priority));
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		*stream = npurt::createStreamForContext(*c, flags, priority, false);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtStreamCreate");
	}
}

npurtError_t npurtStreamCreateWithFlags(npurtStream_t *stream, unsigned int flags)
{
	return npurtStreamCreateWithPriority(stream, flags, 0);
}

npurtError_t npurtStreamCreate(npurtStream_t *stream)
{
	return npurtStreamCreateWithPriority(stream, 0, 0);
}

npurtError_t npurtStreamDestroy(npurtStream_t stream)
{
	try {
		if (!stream)
			return setError(npurtErrorInvalidHandle,
			                "npurtStreamDestroy: the default stream (NULL) cannot be "
			                "destroyed");
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamDestroy"))
			return err;
		if (s->isDefault() || s->perThread())
			return setError(npurtErrorInvalidHandle,
			                "npurtStreamDestroy: a default stream cannot be destroyed "
			                "(the context's, or a thread's npurtStreamPerThread)");
		return npurt::destroyStreamHandle(s, "npurtStreamDestroy");
	} catch (...) {
		return npurt::errorFromException("npurtStreamDestroy");
	}
}

npurtError_t npurtStreamQuery(npurtStream_t stream)
{
	try {
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamQuery"))
			return err;
		return s->query("npurtStreamQuery");
	} catch (...) {
		return npurt::errorFromException("npurtStreamQuery");
	}
}

npurtError_t npurtStreamSynchronizeTimeout(npurtStream_t stream, int64_t timeoutMs)
{
	try {
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamSynchronize"))
			return err;
		npurtError_t err = s->synchronize(timeoutMs, "npurtStreamSynchronize");
		if (!err)
			npurt::trimMemPools(s->ctx());  // release thresholds
		return err;
	} catch (...) {
		return npurt::errorFromException("npurtStreamSynchronize");
	}
}

npurtError_t npurtStreamSynchronize(npurtStream_t stream)
{
	return npurtStreamSynchronizeTimeout(stream, -1);
}

npurtError_t npurtStreamGetPriority(npurtStream_t stream, int *priority)
{
	if (!priority)
		return nullArgument("npurtStreamGetPriority", "priority");
	Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamGetPriority"))
		return err;
	*priority = s->priority();
	return npurtSuccess;
}

npurtError_t npurtStreamGetFlags(npurtStream_t stream, unsigned int *flags)
{
	if (!flags)
		return nullArgument("npurtStreamGetFlags", "flags");
	Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamGetFlags"))
		return err;
	*flags = s->flags();
	return npurtSuccess;
}

npurtError_t npurtStreamGetDevice(npurtStream_t stream, int *device)
{
	if (!device)
		return nullArgument("npurtStreamGetDevice", "device");
	Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamGetDevice"))
		return err;
	*device = s->ctx().ordinal();
	return npurtSuccess;
}

npurtError_t npurtStreamGetId(npurtStream_t stream, unsigned long long *streamId)
{
	if (!streamId)
		return nullArgument("npurtStreamGetId", "streamId");
	Stream *s = nullptr;
	if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamGetId"))
		return err;
	*streamId = s->serial();
	return npurtSuccess;
}

npurtError_t npurtStreamWaitEvent(npurtStream_t stream, npurtEvent_t event, unsigned int flags)
{
	try {
		return recordOrWait(stream, event, flags, false, "npurtStreamWaitEvent");
	} catch (...) {
		return npurt::errorFromException("npurtStreamWaitEvent");
	}
}

npurtError_t npurtDeviceReset(void)
{
	try {
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		return rt.resetPrimary(npurt::threadDevice());
	} catch (...) {
		return npurt::errorFromException("npurtDeviceReset");
	}
}

npurtError_t npurtDeviceSynchronizeTimeout(int64_t timeoutMs)
{
	try {
		const char *api = "npurtDeviceSynchronize";
		if (npurtError_t err = npurt::captureForbids(api))
			return err;
		Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		int64_t deadline = npurt::deadlineAfter(timeoutMs);
		npurtError_t first = npurtSuccess;
		// Pinned: another thread may destroy a stream meanwhile.
		c->forEachStreamPinned([&](Stream *s) {
			int64_t left =
			        deadline == INT64_MAX
			                ? -1
			                : std::max<int64_t>(0, (deadline - npurt::monotonicNs()) /
			                                               1000000);
			npurtError_t err = s->synchronize(left, api);
			if (err && !first)
				first = err;
		});
		if (first)
			return setError(first, npurtGetLastErrorMessage());
		npurt::trimMemPools(*c);  // release thresholds
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceSynchronize");
	}
}

npurtError_t npurtDeviceSynchronize(void)
{
	return npurtDeviceSynchronizeTimeout(-1);
}

npurtError_t npurtStreamRecover(npurtStream_t stream)
{
	try {
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, "npurtStreamRecover"))
			return err;
		return s->recover("npurtStreamRecover");
	} catch (...) {
		return npurt::errorFromException("npurtStreamRecover");
	}
}

npurtError_t npurtSetCallSite(const char *file, int line, const char *function)
{
	try {
		npurt::setCallSite(file, line, function);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtSetCallSite");
	}
}

npurtError_t npurtCallSiteRegister(const char *file, int line, const char *function, uint64_t *id)
{
	try {
		if (!id)
			return nullArgument("npurtCallSiteRegister", "id");
		return npurt::registerCallSite(file, line, function, id);
	} catch (...) {
		return npurt::errorFromException("npurtCallSiteRegister");
	}
}

npurtError_t npurtSetCallSiteId(uint64_t id)
{
	if (!npurt::setCallSiteId(id))
		return setError(npurtErrorInvalidValue,
		                "npurtSetCallSiteId: " + std::to_string(id) +
		                        " is not an id npurtCallSiteRegister gave");
	return npurtSuccess;
}

npurtError_t npurtEventCreateWithFlags(npurtEvent_t *event, unsigned int flags)
{
	try {
		if (!event)
			return nullArgument("npurtEventCreate", "event");
		unsigned known = npurtEventBlockingSync | npurtEventDisableTiming |
		                 npurtEventTiming | npurtEventInterprocess;
		if (flags & ~known)
			return setError(npurtErrorInvalidValue,
			                "npurtEventCreate: unknown flags " + hex(flags & ~known));
		if ((flags & npurtEventTiming) && (flags & npurtEventDisableTiming))
			return setError(
			        npurtErrorInvalidValue,
			        "npurtEventCreate: npurtEventTiming and npurtEventDisableTiming "
			        "contradict each other");
		if ((flags & npurtEventInterprocess) && !(flags & npurtEventDisableTiming))
			return setError(npurtErrorInvalidValue,
			                "npurtEventCreate: an npurtEventInterprocess event needs "
			                "npurtEventDisableTiming (as in CUDA)");
		auto ev = std::make_unique<Event>(flags);
		if (flags & npurtEventInterprocess) {
			npurt::Context *c = nullptr;
			if (npurtError_t err =
			            Runtime::instance().currentContext(&c, "npurtEventCreate"))
				return err;
			if (npurtError_t err = ev->makeInterprocess(*c, "npurtEventCreate"))
				return err;
		}
		npurt::registerEvent(ev.get());
		*event = ev.release();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtEventCreate");
	}
}

npurtError_t npurtIpcGetEventHandle(npurtIpcEventHandle_t *handle, npurtEvent_t event)
{
	try {
		const char *api = "npurtIpcGetEventHandle";
		if (!handle)
			return nullArgument(api, "handle");
		Event *ev = nullptr;
		if (npurtError_t err = npurt::resolveEvent(event, &ev, api))
			return err;
		if (!ev->interprocess())
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) +
			                ": the event was not created with npurtEventInterprocess");
		int fd = -1;
		uint64_t inode = 0;
		if (npurtError_t err = ev->exportInterprocess(&fd, &inode, api))
			return err;
		*handle = npurtIpcEventHandle_t{};
		handle->fd = fd;
		handle->pid = getpid();
		handle->magic = NPURT_IPC_EVENT_MAGIC;
		handle->inode = inode;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtIpcGetEventHandle");
	}
}

npurtError_t npurtIpcOpenEventHandle(npurtEvent_t *event, npurtIpcEventHandle_t handle)
{
	try {
		const char *api = "npurtIpcOpenEventHandle";
		if (!event)
			return nullArgument(api, "event");
		if (handle.magic != NPURT_IPC_EVENT_MAGIC || handle.fd < 0)
			return setError(
			        npurtErrorInvalidValue,
			        std::string(api) +
			                ": the handle is not one npurtIpcGetEventHandle made");
		npurt::Context *c = nullptr;
		if (npurtError_t err = Runtime::instance().currentContext(&c, api))
			return err;
		int fd = -1;
		bool owned = false;
		if (npurtError_t err = npurt::takeIpcDescriptor(handle.pid, handle.fd, handle.inode,
		                                                api, &fd, &owned))
			return err;
		drm_syncobj_handle h{};
		h.fd = fd;
		int ret = c->node().ioctl(DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &h);
		if (owned)
			close(fd);
		if (ret)
			return setError(ret == -EINVAL ? npurtErrorInvalidHandle
			                               : npurt::errorFromErrno(ret),
			                npurt::osMessage(std::string(api) + ": importing", ret));
		auto tl = std::make_shared<npurt::Timeline>();
		tl->file = c->file();
		tl->syncobj = h.handle;
		tl->ordinal = c->ordinal();
		auto ev = std::make_unique<Event>(npurtEventInterprocess | npurtEventDisableTiming);
		ev->adoptInterprocess(std::move(tl));
		npurt::registerEvent(ev.get());
		*event = ev.release();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtIpcOpenEventHandle");
	}
}

npurtError_t npurtEventCreate(npurtEvent_t *event)
{
	return npurtEventCreateWithFlags(event, npurtEventDefault);
}

npurtError_t npurtEventDestroy(npurtEvent_t event)
{
	try {
		Event *ev = nullptr;
		if (npurtError_t err = npurt::resolveEvent(event, &ev, "npurtEventDestroy"))
			return err;
		if (!npurt::unregisterEvent(ev))
			return setError(npurtErrorInvalidHandle,
			                "npurtEventDestroy: destroyed twice");
		// A record still deferred refers to it: the event goes once the
		// record has run; the call returns at once, as CUDA's.
		ev->afterRecord([ev] { delete ev; });
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtEventDestroy");
	}
}

npurtError_t npurtEventRecord(npurtEvent_t event, npurtStream_t stream)
{
	try {
		const char *api = "npurtEventRecord";
		Event *ev = nullptr;
		if (npurtError_t err = npurt::resolveEvent(event, &ev, api))
			return err;
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		return s->record(*ev, api);
	} catch (...) {
		return npurt::errorFromException("npurtEventRecord");
	}
}

npurtError_t npurtEventRecordWithFlags(npurtEvent_t event, npurtStream_t stream, unsigned int flags)
{
	try {
		return recordOrWait(stream, event, flags, true, "npurtEventRecordWithFlags");
	} catch (...) {
		return npurt::errorFromException("npurtEventRecordWithFlags");
	}
}

npurtError_t npurtEventQuery(npurtEvent_t event)
{
	try {
		Event *ev = nullptr;
		if (npurtError_t err = npurt::resolveEvent(event, &ev, "npurtEventQuery"))
			return err;
		return ev->query("npurtEventQuery");
	} catch (...) {
		return npurt::errorFromException("npurtEventQuery");
	}
}

npurtError_t npurtEventSynchronizeTimeout(npurtEvent_t event, int64_t timeoutMs)
{
	try {
		Event *ev = nullptr;
		if (npurtError_t err = npurt::resolveEvent(event, &ev, "npurtEventSynchronize"))
			return err;
		return ev->synchronize(timeoutMs, "npurtEventSynchronize");
	} catch (...) {
		return npurt::errorFromException("npurtEventSynchronize");
	}
}

npurtError_t npurtEventSynchronize(npurtEvent_t event)
{
	return npurtEventSynchronizeTimeout(event, -1);
}

npurtError_t npurtEventElapsedTime(float *ms, npurtEvent_t start, npurtEvent_t end)
{
	try {
		const char *api = "npurtEventElapsedTime";
		if (!ms)
			return nullArgument(api, "ms");
		Event *a = nullptr, *b = nullptr;
		if (npurtError_t err = npurt::resolveEvent(start, &a, api))
			return err;
		if (npurtError_t err = npurt::resolveEvent(end, &b, api))
			return err;
		if (!a->timing() || !b->timing())
			return setError(npurtErrorInvalidHandle,
			                std::string(api) +
			                        ": both events need timing (one was created with "
			                        "npurtEventDisableTiming)");
		for (Event *e : {a, b})
			if (npurtError_t err = e->checkNotCaptured(api))
				return err;
		if (!a->recorded() || !b->recorded())
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": an event was never recorded");
		for (Event *e : {a, b}) {
			npurtError_t q = e->query(api);
			if (q)
				return q;
		}
		Stream *sa = nullptr, *sb = nullptr;
		uint64_t slotA = 0, slotB = 0;
		Context *ca = nullptr, *cb = nullptr;
		a->point(&sa, &slotA, &ca, 0);
		b->point(&sb, &slotB, &cb, 0);
		if (!slotA || !slotB || !ca || !cb)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": no timestamp was recorded");
		if (ca->ordinal() != cb->ordinal())
			return setError(npurtErrorInvalidValue,
			                std::string(api) +
			                        ": the events were recorded on different NPUs, "
			                        "whose clocks are not comparable");
		uint64_t ta = *reinterpret_cast<volatile uint64_t *>(slotA);
		uint64_t tb = *reinterpret_cast<volatile uint64_t *>(slotB);
		double clock = static_cast<double>(
		        Runtime::instance().device(ca->ordinal()).prop().clockRateHz);
		*ms = static_cast<float>((static_cast<double>(tb) - static_cast<double>(ta)) /
		                         clock * 1e3);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtEventElapsedTime");
	}
}

npurtError_t npurtLaunchHostFunc(npurtStream_t stream, npurtHostFn_t fn, void *userData)
{
	void *ra = __builtin_return_address(0);
	try {
		const char *api = "npurtLaunchHostFunc";
		if (!fn)
			return nullArgument(api, "fn");
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		npurt::TaskInfo t;
		t.api = api;
		t.label = "host function";
		t.site = npurt::takeCallSite(ra);
		const npurtHostNodeParams raw{fn, userData};
		return s->hostFunc([fn, userData](npurtError_t) { fn(userData); }, false, t, &raw);
	} catch (...) {
		return npurt::errorFromException("npurtLaunchHostFunc");
	}
}

npurtError_t npurtStreamAddCallback(npurtStream_t stream, npurtStreamCallback_t callback,
                                    void *userData, unsigned int flags)
{
	void *ra = __builtin_return_address(0);
	try {
		const char *api = "npurtStreamAddCallback";
		if (!callback)
			return nullArgument(api, "callback");
		if (flags)
			return setError(npurtErrorInvalidValue, std::string(api) +
			                                                ": flags must be 0, not " +
			                                                std::to_string(flags));
		Stream *s = nullptr;
		if (npurtError_t err = npurt::resolveStream(stream, &s, api))
			return err;
		// As in CUDA: a callback is given its stream, which a replayed
		// graph does not have (npurtLaunchHostFunc is captured).
		if (s->capturing())
			return s->captureRefuse(api, "a stream callback (npurtLaunchHostFunc is "
			                             "captured)");
		npurt::TaskInfo t;
		t.api = api;
		t.label = "stream callback";
		t.site = npurt::takeCallSite(ra);
		// The callback is given the handle its caller passed (NULL for
		// the default stream), as CUDA's is.
		return s->hostFunc(
		        [callback, stream, userData](npurtError_t status) {
			        callback(stream, status, userData);
		        },
		        true, t);
	} catch (...) {
		return npurt::errorFromException("npurtStreamAddCallback");
	}
}

npurtError_t npurtLaunchOp(const npurtOpDesc *desc, npurtStream_t stream)
{
	void *ra = __builtin_return_address(0);
	try {
		return launchOp(desc, stream, ra);
	} catch (...) {
		return npurt::errorFromException("npurtLaunchOp");
	}
}

}  // extern "C"

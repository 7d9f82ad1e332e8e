// Copy planning: how a copy, a strided copy or a fill is done, given where
// its operands live (device memory of the stream's context, pinned or
// registered host memory the engine reaches directly, pageable memory,
// memory of a peer context): which packets, staging, pins and waits.
// The C API files validate handles and call these.
#pragma once

#include <cstddef>
#include <cstdint>

#include "npurt/npurt.h"

namespace npurt {

class Context;
class Stream;

// A device-side range of a copy: which context holds it, and its
// allocation's bounds.
struct DeviceSide {
	Context *ctx = nullptr;
	uint64_t base = 0;
	size_t size = 0;
};

// Resolves p as device memory; *isDevice false if it is not. An address
// inside the device window that is not live memory is an error (freed,
// or bogus).
npurtError_t resolveDevice(const char *api, const char *what, const void *p, Context *hint,
                           DeviceSide *out, bool *isDevice);

// Whether the stream's context reaches p, device memory of owner: its
// own, or a peer's it has access to (or is given, peerCopy: npurtMemcpyPeer).
// Contexts are isolated: otherwise npurtErrorInvalidValue naming what
// (an operand) and the ways to reach it.
npurtError_t checkReach(const char *api, const char *what, const void *p, Stream *s, Context &owner,
                        bool peerCopy);

// npurtMemcpy(Async). sync: the caller waits for the copy. ra: the API
// caller's return address, for fault reports. Device memory of another
// context than the stream's is refused unless the stream's context has
// peer access to it, or peerCopy (npurtMemcpyPeer) is set: then it is
// given access and the stream's engine copies.
npurtError_t planCopy(const char *api, void *dst, const void *src, size_t count,
                      npurtMemcpyKind kind, npurtStream_t stream, bool sync, void *ra,
                      bool peerCopy = false);

// npurtMemset(Async) (width 1) and npurtMemsetD16/D32(Async): count
// elements of width bytes.
npurtError_t planFill(const char *api, void *devPtr, uint32_t value, unsigned width, size_t count,
                      npurtStream_t stream, bool sync, void *ra);

// A box of pitched memory: depth slices, slicePitch bytes apart, of
// height rows, pitch bytes apart, of width bytes.
struct PitchedBox {
	size_t width = 0, height = 1, depth = 1;
	size_t pitch = 0, slicePitch = 0;
};

// npurtMemset2D/3D(Async): every byte of the box set to value. The whole
// extent is checked first; then the first row is filled and copied to
// the others (at most three tasks).
npurtError_t planFillPitched(const char *api, void *devPtr, const PitchedBox &box,
                             unsigned char value, npurtStream_t stream, bool sync, void *ra);

// A view of ndim dimensions (sizes in elements, strides in bytes,
// outermost first) copied element by element in row-major order.
struct StridedView {
	int ndim = 0;
	size_t elemSize = 0;
	const size_t *sizes = nullptr;
	const size_t *dstStrides = nullptr;
	const size_t *srcStrides = nullptr;
};

// npurtMemcpyStrided(Async) and npurtMemcpy2D(Async).
npurtError_t planCopyStrided(const char *api, void *dst, const void *src, const StridedView &v,
                             npurtMemcpyKind kind, npurtStream_t stream, bool sync, void *ra);

}  // namespace npurt

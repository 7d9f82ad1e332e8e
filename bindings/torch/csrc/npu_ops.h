// npu_ops.h - device-side building blocks shared by the kernel files:
// allocation, copies between any two strided views, fills, casts and op
// launches. Every function runs on the current stream of the tensors'
// device and makes that device current while it enqueues.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>

#include "npu_runtime.h"

namespace torch_npurt {

inline bool isNpu(const at::Tensor &t)
{
	return t.defined() && t.device().type() == kNpu;
}

inline int deviceOf(const at::Tensor &t)
{
	return t.device().index();
}

inline void *dataPtr(const at::Tensor &t)
{
	// Storage::data() is const from torch 2.1 on; the kernels write through it.
	return static_cast<char *>(const_cast<void *>(t.storage().data())) +
	       t.storage_offset() * t.element_size();
}

// A contiguous NPU tensor on `device`.
at::Tensor emptyNpu(at::IntArrayRef sizes, at::ScalarType dtype, int device);

#if NPU_TORCH_AT_LEAST(2, 1)
// The CPU generator an NPU generator (torch.Generator(device="npu")) is
// made of: random ops run on the CPU (npu_generator.cpp).
at::Generator cpuGeneratorOf(const at::Generator &npu);
#endif

// The libnpurt element type of a torch dtype, if the op set has it.
bool toNpurtType(at::ScalarType t, npurtDataType *out);

// Torch's error for operands on two devices; a CPU scalar (0-dim) may go
// with any device, as in torch's own kernels.
inline void checkSameDevice(const at::Tensor &a, const at::Tensor &b)
{
	bool cpuScalar = (a.is_cpu() && a.dim() == 0) || (b.is_cpu() && b.dim() == 0);
	TORCH_CHECK(a.device() == b.device() || cpuScalar,
	            "Expected all tensors to be on the same device, but found at least two "
	            "devices, ",
	            a.device(), " and ", b.device(), "!");
}

// dst := src for two NPU tensors of equal shape and dtype, any strides
// (src may broadcast, with zero strides). Device-side where libnpurt can
// do it; otherwise through the host, counted in the fallback report
// (libnpurt has no strided copy yet: RUNTIME_NEEDS.md).
void copyOnDevice(const at::Tensor &dst, const at::Tensor &src);

// src itself if it is contiguous, else a contiguous copy on its device.
at::Tensor contiguousOnDevice(const at::Tensor &src);

// Fills an NPU tensor (any strides) with a value.
void fillOnDevice(const at::Tensor &t, const at::Scalar &value);

// dst := src converted, both NPU tensors of equal shape; dst's dtype is
// the target. Through the op set's cast where it matches torch's
// conversion, else through the host (counted).
void castOnDevice(const at::Tensor &dst, const at::Tensor &src);
// Whether castOnDevice converts from -> to on the device.
bool castIsNative(at::ScalarType from, at::ScalarType to);

// Enqueues one op on the current stream of `device`; `what` names the
// ATen op in fault reports.
void launchOp(const npurtOpDesc &desc, int device, const char *what);

// Storage.resize_ and tensor resize_ of an NPU storage: a new block from the
// storage's allocator, the old bytes (as many as fit) copied on the
// device's current stream, as CUDA's resize_bytes_cuda.
void resizeStorageBytes(c10::StorageImpl *st, size_t nbytes, int device);

// Copies between host and device memory on the device's current stream;
// waits for it unless nonBlocking.
void copyBytes(void *dst, const void *src, size_t n, npurtMemcpyKind kind, int device,
               bool nonBlocking);

// Pinned host memory (npu_pinned.cpp): the allocator, whether a tensor's
// storage comes from it, and the device's pinned-pool statistics.
// The boxed CPU fallback (npu_kernels.cpp): the op on the CPU with its
// operands moved there and its results back, counted. NPU_FALLBACK calls it
// from a kernel that handles some cases itself.
void npuFallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);
#define NPU_FALLBACK(op, ...) \
	at::native::call_fallback_fn<&npuFallback, at::_ops::op>::call(__VA_ARGS__)

c10::Allocator *pinnedAllocator();
bool isPinnedByUs(const at::Tensor &t);
npurtHostMemStats hostMemStats(int device);

}  // namespace torch_npurt

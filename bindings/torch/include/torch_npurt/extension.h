// torch_npurt/extension.h - what a C++ extension of PyTorch needs to run its
// own operators on NPU tensors, as CUDA extensions use
// at::cuda::getCurrentCUDAStream() and torch_npu's use
// c10_npu::getCurrentNPUStream():
//
//   #include <torch/extension.h>
//   #include <torch_npurt/extension.h>
//
//   at::Tensor my_op_npu(const at::Tensor &x)
//   {
//           torch_npurt::checkNpuTensor(x, "x");
//           c10::DeviceGuard guard(x.device());
//           at::Tensor out = at::empty_like(x);  // torch's NPU allocator
//           npurtOpDesc d = {};                  // libnpurt's ops (npurt.h)
//           ...
//           NPURT_CHECK(npurtLaunchOp(&d, torch_npurt::getCurrentNPUStream()));
//           return out;
//   }
//   TORCH_LIBRARY_IMPL(my_ns, PrivateUse1, m) { m.impl("my_op", &my_op_npu); }
//
// An NPU tensor's data_ptr() is libnpurt device memory of its device; work
// enqueued on torch's current stream is ordered with torch's own ops as on
// CUDA. Build with torch_npurt.utils.cpp_extension (NpuExtension, load),
// which adds this directory, libnpurt's headers and -lnpurt.
//
// Header only: it reaches torch_npurt (loaded by `import torch_npurt`)
// through torch's device guard and dispatcher, so an extension does not
// link against torch_npurt's module. C++17, as libtorch 1.13 requires.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <npurt/npurt.h>

#include <cstdint>
#include <string>

namespace torch_npurt {

// The device type of NPU tensors: torch's PrivateUse1 (named "npu" on torch
// 2.x, "privateuseone" on 1.13).
constexpr c10::DeviceType kNPU = c10::DeviceType::PrivateUse1;

// The libnpurt stream behind a torch stream of an NPU (torch.npu.Stream,
// ExternalStream, a pool stream): nullptr for a device's default stream,
// as CUDA's legacy NULL stream. Throws c10::Error (a Python RuntimeError)
// for a stream that is not an NPU's or that torch_npurt does not know.
inline npurtStream_t getNPUStream(const c10::Stream &stream)
{
	TORCH_CHECK(stream.device_type() == kNPU, "torch_npurt::getNPUStream: a stream of ",
	            stream.device(), ", not of an NPU");
	// Registered by torch_npurt's module; looked up once it is there.
	static auto op = [] {
		auto handle = c10::Dispatcher::singleton().findSchema(
		        {"torch_npurt::_stream_handle", ""});
		TORCH_CHECK(handle.has_value(),
		            "torch_npurt::getNPUStream: torch_npurt is not loaded (import "
		            "torch_npurt before using the extension)");
		return handle->typed<int64_t(int64_t, int64_t)>();
	}();
	int64_t handle = op.call(stream.device_index(), stream.id());
	return reinterpret_cast<npurtStream_t>(static_cast<intptr_t>(handle));
}

// The calling thread's current torch stream on NPU `device` (-1: the
// current NPU), which torch.npu.stream()/set_stream() select: where an
// operator enqueues its work.
inline npurtStream_t getCurrentNPUStream(c10::DeviceIndex device = -1)
{
	c10::impl::VirtualGuardImpl impl(kNPU);
	if (device < 0)
		device = impl.getDevice().index();
	return getNPUStream(impl.getStream(c10::Device(kNPU, device)));
}

// Throws c10::Error unless `t` is a defined NPU tensor; `name` names the
// argument in the message.
inline void checkNpuTensor(const at::Tensor &t, const char *name)
{
	TORCH_CHECK(t.defined(), name, " is an undefined tensor");
	TORCH_CHECK(t.device().type() == kNPU, name, " must be an NPU tensor, got one on ",
	            t.device());
}

// Throws c10::Error for a failed libnpurt call: its name, the error's name
// and libnpurt's message for this thread's failure.
inline void checkNpurt(npurtError_t err, const char *call, const char *file, int line)
{
	if (err == npurtSuccess)
		return;
	const char *msg = npurtGetLastErrorMessage();
	std::string text = (msg && *msg) ? msg : npurtGetErrorString(err);
	// Reset, as C10_CUDA_CHECK does with cudaGetLastError(): the failure
	// is reported here, not again by the next check of the thread.
	(void)npurtGetLastError();
	TORCH_CHECK(false, call, " failed: ", npurtGetErrorName(err), ": ", text, " (", file, ":",
	            line, ")");
}

}  // namespace torch_npurt

// NPURT_CHECK(npurtCall(...)): as C10_CUDA_CHECK, throws c10::Error (a
// Python RuntimeError) naming the call and libnpurt's message.
#define NPURT_CHECK(expr) ::torch_npurt::checkNpurt((expr), #expr, __FILE__, __LINE__)

// scaled_residual.cpp - a custom operator written as a C++ extension of
// PyTorch that runs on the NPU: relu(alpha * x + residual), the fused
// residual step of a network, as two device ops (AXPY, then RELU in place)
// enqueued on torch's current NPU stream, ordered with torch's own work,
// and its gradient.
//
// Build: setup.py beside it (torch_npurt.utils.cpp_extension.NpuExtension).
// Use:   import torch_npurt, npurt_example_ext
//        torch.ops.npurt_example.scaled_residual(x, residual, 0.5)
#include <torch/extension.h>
#include <torch_npurt/extension.h>

#include <cstdint>
#include <vector>

namespace {

npurtDataType deviceType(const at::Tensor &t)
{
	switch (t.scalar_type()) {
	case at::kFloat:
		return npurtFloat32;
	case at::kHalf:
		return npurtFloat16;
	case at::kBFloat16:
		return npurtBFloat16;
	default:
		TORCH_CHECK(false, "scaled_residual: float32, float16 or bfloat16 tensors, got ",
		            t.scalar_type());
	}
}

at::Tensor scaledResidualNpu(const at::Tensor &x, const at::Tensor &residual, double alpha)
{
	torch_npurt::checkNpuTensor(x, "x");
	torch_npurt::checkNpuTensor(residual, "residual");
	TORCH_CHECK(x.device() == residual.device(), "scaled_residual: x is on ", x.device(),
	            ", residual on ", residual.device());
	TORCH_CHECK(x.sizes() == residual.sizes(), "scaled_residual: x has shape ", x.sizes(),
	            ", residual ", residual.sizes());
	TORCH_CHECK(x.scalar_type() == residual.scalar_type(), "scaled_residual: x is ",
	            x.scalar_type(), ", residual ", residual.scalar_type());
	npurtDataType dtype = deviceType(x);

	c10::DeviceGuard guard(x.device());
	// The device ops read n dense elements: torch makes dense copies of
	// views (on the device, on the current stream).
	at::Tensor a = x.contiguous();
	at::Tensor b = residual.contiguous();
	at::Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
	if (out.numel() == 0)
		return out;

	npurtStream_t stream = torch_npurt::getCurrentNPUStream(x.device().index());
	npurtOpDesc op = {};
	op.op = npurtOpAxpy;
	op.dtype = op.outDtype = dtype;
	op.a = a.data_ptr();
	op.b = b.data_ptr();
	op.out = out.data_ptr();
	op.n = static_cast<uint64_t>(out.numel());
	op.alpha = static_cast<float>(alpha);
	NPURT_CHECK(npurtLaunchOp(&op, stream));
	op.op = npurtOpRelu;
	op.a = out.data_ptr();
	op.b = nullptr;
	NPURT_CHECK(npurtLaunchOp(&op, stream));
	return out;
}

// The same on the CPU, for tensors there (and to compare with).
at::Tensor scaledResidualCpu(const at::Tensor &x, const at::Tensor &residual, double alpha)
{
	return at::relu(x * alpha + residual);
}

// The libnpurt stream the extension enqueues on now (as an integer), so a
// caller can see it follows torch.npu.stream().
int64_t currentStream(int64_t device)
{
	return static_cast<int64_t>(reinterpret_cast<intptr_t>(
	        torch_npurt::getCurrentNPUStream(static_cast<c10::DeviceIndex>(device))));
}

// Launches an op on a pointer that is not device memory, to show how a
// failed libnpurt call reaches Python (NPURT_CHECK).
void launchOnHostMemory(int64_t n)
{
	TORCH_CHECK(n > 0 && n <= (1 << 20), "launch_on_host_memory: n must be in 1..2^20, got ",
	            n);
	std::vector<float> host(static_cast<size_t>(n));
	npurtOpDesc op = {};
	op.op = npurtOpRelu;
	op.dtype = op.outDtype = npurtFloat32;
	op.a = host.data();
	op.out = host.data();
	op.n = static_cast<uint64_t>(n);
	NPURT_CHECK(npurtLaunchOp(&op, torch_npurt::getCurrentNPUStream()));
}

// Its gradient, so that networks using it train: with m = (out > 0),
// d/dx = alpha * m * grad and d/dresidual = m * grad, in torch's ops (on
// the NPU for NPU tensors). Registered for the Autograd alias key, which
// covers the NPU's (AutogradPrivateUse1) and the CPU's.
class ScaledResidual : public torch::autograd::Function<ScaledResidual> {
public:
	static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x,
	                          const at::Tensor &residual, double alpha)
	{
		static auto op = c10::Dispatcher::singleton()
		                         .findSchemaOrThrow("npurt_example::scaled_residual", "")
		                         .typed<at::Tensor(const at::Tensor &, const at::Tensor &,
		                                           double)>();
		// Below autograd: the device's (or the CPU's) kernel.
		at::AutoDispatchBelowADInplaceOrView below;
		at::Tensor out = op.call(x, residual, alpha);
		ctx->save_for_backward({out});
		ctx->saved_data["alpha"] = alpha;
		return out;
	}

	static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
	                                               torch::autograd::variable_list grads)
	{
		at::Tensor out = ctx->get_saved_variables()[0];
		double alpha = ctx->saved_data["alpha"].toDouble();
		at::Tensor g = grads[0] * (out > 0).to(grads[0].scalar_type());
		return {g * alpha, g, at::Tensor()};
	}
};

at::Tensor scaledResidualAutograd(const at::Tensor &x, const at::Tensor &residual, double alpha)
{
	return ScaledResidual::apply(x, residual, alpha);
}

}  // namespace

TORCH_LIBRARY(npurt_example, m)
{
	m.def("scaled_residual(Tensor x, Tensor residual, float alpha=1.0) -> Tensor");
	m.def("current_stream(int device=-1) -> int", &currentStream);
	m.def("launch_on_host_memory(int n) -> ()", &launchOnHostMemory);
}

TORCH_LIBRARY_IMPL(npurt_example, PrivateUse1, m)
{
	m.impl("scaled_residual", &scaledResidualNpu);
}

TORCH_LIBRARY_IMPL(npurt_example, CPU, m)
{
	m.impl("scaled_residual", &scaledResidualCpu);
}

TORCH_LIBRARY_IMPL(npurt_example, Autograd, m)
{
	m.impl("scaled_residual", &scaledResidualAutograd);
}

// A Python module too, so that `import npurt_example_ext` loads the ops.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
	m.doc() = "torch_npurt's example C++ extension (torch.ops.npurt_example)";
}

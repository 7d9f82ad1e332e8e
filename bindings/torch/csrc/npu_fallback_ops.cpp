// npu_fallback_ops.cpp - ops that run on the CPU, as the boxed fallback's
// do, but which the boxed fallback cannot run as they are named.
//
// - Convolutions (nn.Conv1d/2d/3d, their transposes and gradients): ATen
//   sends a convolution on a device other than CPU and CUDA to
//   convolution_overrideable, and its gradient to
//   convolution_backward_overrideable, which have no CPU kernels. These
//   run ATen's own convolution (or its gradient) on the CPU.
// - native_batch_norm updates running_mean and running_var in place in
//   training, but its schema does not say so (torch 1.13; 2.x trains
//   through _batch_norm_with_update, which does): the fallback would
//   update CPU copies and drop them. This one writes them back.
//
// Each moves the operands to the CPU, runs there and moves the results
// back, counted and named as the fallback's ops are.
#include "npu_ops.h"

#include <ATen/Operators.h>
#include <torch/library.h>

#include <array>
#include <tuple>

namespace torch_npurt {

namespace {

constexpr const char *kForward = "aten::convolution_overrideable";
constexpr const char *kBackward = "aten::convolution_backward_overrideable";
constexpr const char *kBatchNorm = "aten::native_batch_norm";

// Every operand on the NPU of @input (a CPU operand would be read as if
// it were device memory; torch's own message for the mix).
void checkOperands(const char *op, const at::Tensor &input,
                   std::initializer_list<const at::Tensor *> others)
{
	for (const at::Tensor *t : others)
		TORCH_CHECK(!t->defined() || t->device() == input.device(),
		            "Expected all tensors to be on the same device, but found at least "
		            "two devices, ",
		            input.device(), " and ", t->device(), "! (in ", op, ")");
}

at::Tensor back(const at::Tensor &t, at::Device device)
{
	return t.defined() ? t.to(device) : t;
}

at::Tensor orUndefined(const c10::optional<at::Tensor> &t)
{
	return t ? *t : at::Tensor();
}

c10::optional<at::Tensor> cpuCopy(const at::Tensor &t)
{
	if (!t.defined())
		return c10::nullopt;
	return t.cpu();
}

at::Tensor convolution(const at::Tensor &input, const at::Tensor &weight,
                       const c10::optional<at::Tensor> &bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef outputPadding, int64_t groups)
{
	at::Tensor b = orUndefined(bias);
	checkOperands(kForward, input, {&weight, &b});
	countFallback(kForward);
	OpScope scope("aten::convolution_overrideable (CPU fallback)");
	at::Tensor out = at::convolution(input.cpu(), weight.cpu(), cpuCopy(b), stride, padding,
	                                 dilation, transposed, outputPadding, groups);
	return back(out, input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolutionBackward(const at::Tensor &gradOut, const at::Tensor &input, const at::Tensor &weight,
                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                    bool transposed, at::IntArrayRef outputPadding, int64_t groups,
                    std::array<bool, 3> mask)
{
	checkOperands(kBackward, input, {&gradOut, &weight});
	countFallback(kBackward);
	OpScope scope("aten::convolution_backward_overrideable (CPU fallback)");
	// The bias has one element per output channel.
	const std::array<int64_t, 1> biasSizes{transposed ? weight.size(1) * groups
	                                                  : weight.size(0)};
	at::Tensor gi, gw, gb;
	std::tie(gi, gw, gb) = at::convolution_backward(
	        gradOut.cpu(), input.cpu(), weight.cpu(),
	        mask[2] ? at::OptionalIntArrayRef(biasSizes) : at::OptionalIntArrayRef(), stride,
	        padding, dilation, transposed, outputPadding, groups, mask);
	return {back(gi, input.device()), back(gw, input.device()), back(gb, input.device())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
batchNorm(const at::Tensor &input, const c10::optional<at::Tensor> &weight,
          const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &runningMean,
          const c10::optional<at::Tensor> &runningVar, bool training, double momentum, double eps)
{
	at::Tensor w = orUndefined(weight), b = orUndefined(bias);
	at::Tensor mean = orUndefined(runningMean), var = orUndefined(runningVar);
	checkOperands(kBatchNorm, input, {&w, &b, &mean, &var});
	countFallback(kBatchNorm);
	OpScope scope("aten::native_batch_norm (CPU fallback)");
	c10::optional<at::Tensor> cpuMean = cpuCopy(mean), cpuVar = cpuCopy(var);
	at::Tensor out, saveMean, saveInvstd;
	std::tie(out, saveMean, saveInvstd) = at::native_batch_norm(
	        input.cpu(), cpuCopy(w), cpuCopy(b), cpuMean, cpuVar, training, momentum, eps);
	if (training) {
		if (cpuMean)
			mean.copy_(*cpuMean);
		if (cpuVar)
			var.copy_(*cpuVar);
	}
	return {back(out, input.device()), back(saveMean, input.device()),
	        back(saveInvstd, input.device())};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("convolution_overrideable", TORCH_FN(convolution));
	m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackward));
	m.impl("native_batch_norm", TORCH_FN(batchNorm));
}

}  // namespace torch_npurt

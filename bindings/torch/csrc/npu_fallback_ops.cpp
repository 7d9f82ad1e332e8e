// npu_fallback_ops.cpp - ops that run on the CPU, as the boxed fallback's
// do, but which the boxed fallback cannot run as they are named.
//
// - Convolutions (nn.Conv1d/2d/3d, their transposes and gradients): ATen
//   sends a convolution on a device other than CPU and CUDA to
//   convolution_overrideable, and its gradient to
//   convolution_backward_overrideable, which have no CPU kernels. These
//   run ATen's own convolution (or its gradient) on the CPU.
// - LSTM and GRU cells: torch 2.x runs nn.LSTM/GRU (and their cells) on
//   PrivateUse1 through the fused cells that only CUDA implements. These
//   compute them on the CPU from ATen ops, the workspace laid out as CUDA's
//   (the activated gates), which the backward reads.
// - native_batch_norm updates running_mean and running_var in place in
//   training, but its schema does not say so (torch 1.13; 2.x trains
//   through _batch_norm_with_update, which does): the fallback would
//   update CPU copies and drop them. This one writes them back. It and its
//   gradient answer an empty input themselves: torch 1.13's CPU kernels
//   divide by zero there (group_norm of an empty batch reaches them on
//   the NPU, not on the CPU).
//
// Each moves the operands to the CPU, runs there and moves the results
// back, counted and named as the fallback's ops are.
#include "npu_ops.h"

#include <ATen/OpMathType.h>
#include <ATen/Operators.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <tuple>
#include <vector>

namespace torch_npurt {

namespace {

constexpr const char *kForward = "aten::convolution_overrideable";
constexpr const char *kBackward = "aten::convolution_backward_overrideable";
constexpr const char *kBatchNorm = "aten::native_batch_norm";
constexpr const char *kBatchNormBackward = "aten::native_batch_norm_backward";
constexpr const char *kLstmCell = "aten::_thnn_fused_lstm_cell";
constexpr const char *kLstmCellBackward = "aten::_thnn_fused_lstm_cell_backward_impl";
constexpr const char *kGruCell = "aten::_thnn_fused_gru_cell";
constexpr const char *kGruCellBackward = "aten::_thnn_fused_gru_cell_backward";

// Every defined operand on the device of @input.
void checkOperands(const at::Tensor &input, std::initializer_list<const at::Tensor *> others)
{
	for (const at::Tensor *t : others)
		if (t->defined())
			checkSameDevice(input, *t);
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
	checkOperands(input, {&weight, &b});
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
	checkOperands(input, {&gradOut, &weight});
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

// A batch norm's channels: dimension 1 (none for a 1-D input).
int64_t channels(const at::Tensor &input)
{
	return input.dim() > 1 ? input.size(1) : 0;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
batchNorm(const at::Tensor &input, const c10::optional<at::Tensor> &weight,
          const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &runningMean,
          const c10::optional<at::Tensor> &runningVar, bool training, double momentum, double eps)
{
	at::Tensor w = orUndefined(weight), b = orUndefined(bias);
	at::Tensor mean = orUndefined(runningMean), var = orUndefined(runningVar);
	checkOperands(input, {&w, &b, &mean, &var});
	countFallback(kBatchNorm);
	OpScope scope("aten::native_batch_norm (CPU fallback)");
	// Nothing to normalise. torch 1.13's CPU kernel divides by zero on an
	// empty input (SIGFPE; group_norm of an empty batch comes here on the
	// NPU, not on the CPU), 2.x's refuses it: an empty output, statistics of
	// nothing (NaN), running statistics left as they are.
	if (input.numel() == 0) {
		at::Tensor stat = at::full(
		        {training ? channels(input) : 0}, std::numeric_limits<float>::quiet_NaN(),
		        input.options().dtype(at::toOpMathType(input.scalar_type())));
		return {at::empty_like(input), stat, stat.clone()};
	}
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

// Its gradients, for the same reason: of an empty input, nothing flows
// back (1.13's CPU kernel divides by zero there too); the rest is the
// fallback's.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormBackward(
        const at::Tensor &gradOut, const at::Tensor &input, const c10::optional<at::Tensor> &weight,
        const c10::optional<at::Tensor> &runningMean, const c10::optional<at::Tensor> &runningVar,
        const c10::optional<at::Tensor> &saveMean, const c10::optional<at::Tensor> &saveInvstd,
        bool training, double eps, std::array<bool, 3> mask)
{
	if (input.numel() != 0)
		return NPU_FALLBACK(native_batch_norm_backward, gradOut, input, weight, runningMean,
		                    runningVar, saveMean, saveInvstd, training, eps, mask);
	at::Tensor w = orUndefined(weight);
	checkOperands(input, {&gradOut, &w});
	countFallback(kBatchNormBackward);
	at::TensorOptions o = w.defined() ? w.options() : input.options();
	return {mask[0] ? at::empty_like(input) : at::Tensor(),
	        mask[1] ? at::zeros({channels(input)}, o) : at::Tensor(),
	        mask[2] ? at::zeros({channels(input)}, o) : at::Tensor()};
}

at::Tensor cpuWithBias(const at::Tensor &gates, const c10::optional<at::Tensor> &bias)
{
	at::Tensor g = gates.cpu();
	return bias && bias->defined() ? g.add(bias->cpu()) : g;
}

// d(sigmoid)/dx from its value, and d(tanh)/dx from its value.
at::Tensor sigmoidGrad(const at::Tensor &s)
{
	return s.mul(at::rsub(s, 1));
}

at::Tensor tanhGrad(const at::Tensor &t)
{
	return at::rsub(t.mul(t), 1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
lstmCell(const at::Tensor &inputGates, const at::Tensor &hiddenGates, const at::Tensor &cx,
         const c10::optional<at::Tensor> &inputBias, const c10::optional<at::Tensor> &hiddenBias)
{
	at::Tensor ib = orUndefined(inputBias), hb = orUndefined(hiddenBias);
	checkOperands(inputGates, {&hiddenGates, &cx, &ib, &hb});
	countFallback(kLstmCell);
	OpScope scope("aten::_thnn_fused_lstm_cell (CPU fallback)");
	std::vector<at::Tensor> gates = cpuWithBias(inputGates, inputBias)
	                                        .add(cpuWithBias(hiddenGates, hiddenBias))
	                                        .chunk(4, 1);
	at::Tensor i = gates[0].sigmoid(), f = gates[1].sigmoid();
	at::Tensor g = gates[2].tanh(), o = gates[3].sigmoid();
	at::Tensor cy = f.mul(cx.cpu()).add(i.mul(g));
	at::Tensor hy = o.mul(cy.tanh());
	at::Device d = inputGates.device();
	return {back(hy, d), back(cy, d), back(at::cat({i, f, g, o}, 1), d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
lstmCellBackward(const c10::optional<at::Tensor> &gradHy, const c10::optional<at::Tensor> &gradCy,
                 const at::Tensor &cx, const at::Tensor &cy, const at::Tensor &workspace,
                 bool hasBias)
{
	at::Tensor ghy = orUndefined(gradHy), gcy = orUndefined(gradCy);
	if (!ghy.defined() && !gcy.defined())
		return {};
	checkOperands(workspace, {&ghy, &gcy, &cx, &cy});
	countFallback(kLstmCellBackward);
	OpScope scope("aten::_thnn_fused_lstm_cell_backward_impl (CPU fallback)");
	std::vector<at::Tensor> w = workspace.cpu().chunk(4, 1);
	const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
	at::Tensor tanhCy = cy.cpu().tanh();
	// The gradient reaching the cell state: through hy, and directly.
	at::Tensor gc =
	        ghy.defined() ? ghy.cpu().mul(o).mul(tanhGrad(tanhCy)) : at::zeros_like(tanhCy);
	if (gcy.defined())
		gc = gc.add(gcy.cpu());
	at::Tensor go =
	        ghy.defined() ? ghy.cpu().mul(tanhCy).mul(sigmoidGrad(o)) : at::zeros_like(o);
	at::Tensor gradGates =
	        at::cat({gc.mul(g).mul(sigmoidGrad(i)), gc.mul(cx.cpu()).mul(sigmoidGrad(f)),
	                 gc.mul(i).mul(tanhGrad(g)), go},
	                1);
	at::Tensor gradBias = hasBias ? gradGates.sum(0) : at::Tensor();
	at::Device d = workspace.device();
	return {back(gradGates, d), back(gc.mul(f), d), back(gradBias, d)};
}

std::tuple<at::Tensor, at::Tensor> gruCell(const at::Tensor &inputGates,
                                           const at::Tensor &hiddenGates, const at::Tensor &hx,
                                           const c10::optional<at::Tensor> &inputBias,
                                           const c10::optional<at::Tensor> &hiddenBias)
{
	at::Tensor ib = orUndefined(inputBias), hb = orUndefined(hiddenBias);
	checkOperands(inputGates, {&hiddenGates, &hx, &ib, &hb});
	countFallback(kGruCell);
	OpScope scope("aten::_thnn_fused_gru_cell (CPU fallback)");
	std::vector<at::Tensor> ig = cpuWithBias(inputGates, inputBias).chunk(3, 1);
	std::vector<at::Tensor> hg = cpuWithBias(hiddenGates, hiddenBias).chunk(3, 1);
	at::Tensor r = ig[0].add(hg[0]).sigmoid(), z = ig[1].add(hg[1]).sigmoid();
	at::Tensor n = ig[2].add(r.mul(hg[2])).tanh();
	at::Tensor h = hx.cpu();
	at::Tensor hy = n.add(z.mul(h.sub(n)));
	at::Device d = inputGates.device();
	return {back(hy, d), back(at::cat({r, z, n, h, hg[2]}, 1), d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
gruCellBackward(const at::Tensor &gradHy, const at::Tensor &workspace, bool hasBias)
{
	checkOperands(workspace, {&gradHy});
	countFallback(kGruCellBackward);
	OpScope scope("aten::_thnn_fused_gru_cell_backward (CPU fallback)");
	std::vector<at::Tensor> w = workspace.cpu().chunk(5, 1);
	const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
	at::Tensor g = gradHy.cpu();
	at::Tensor gz = g.mul(hx.sub(n)).mul(sigmoidGrad(z));
	at::Tensor gn = g.mul(at::rsub(z, 1)).mul(tanhGrad(n));
	at::Tensor gr = gn.mul(hn).mul(sigmoidGrad(r));
	at::Tensor gradInput = at::cat({gr, gz, gn}, 1);
	at::Tensor gradHidden = at::cat({gr, gz, gn.mul(r)}, 1);
	at::Device d = workspace.device();
	return {back(gradInput, d), back(gradHidden, d), back(g.mul(z), d),
	        back(hasBias ? gradInput.sum(0) : at::Tensor(), d),
	        back(hasBias ? gradHidden.sum(0) : at::Tensor(), d)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("convolution_overrideable", TORCH_FN(convolution));
	m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackward));
	m.impl("native_batch_norm", TORCH_FN(batchNorm));
	m.impl("native_batch_norm_backward", TORCH_FN(batchNormBackward));
	m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstmCell));
	m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstmCellBackward));
	m.impl("_thnn_fused_gru_cell", TORCH_FN(gruCell));
	m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gruCellBackward));
}

}  // namespace torch_npurt

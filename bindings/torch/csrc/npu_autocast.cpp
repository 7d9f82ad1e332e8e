// npu_autocast.cpp - torch.autocast("npu"): the cast policy of each op,
// registered for AutocastPrivateUse1.
//
// The policies are CUDA's: ATen (torch >= 2.3) lists the ops of each so
// that other backends register the same lists (matmuls and convolutions
// in the lower precision, reductions, norms and losses in float32, mixed
// inputs of the rest promoted). torch 1.13 has no AutocastPrivateUse1 key
// and its autocast accepts only "cuda" and "cpu", so there is nothing to
// register there (torch_npurt.npu.amp says so when it is used).
#include "npu_runtime.h"

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#ifdef AT_FORALL_LOWER_PRECISION_FP

namespace at::autocast {
namespace {

// Ops without a policy run as they are (ATen registers this for its own
// autocast keys only).
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m)
{
#define NPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
	AT_FORALL_LOWER_PRECISION_FP(NPU_LOWER_PRECISION_FP)
#define NPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
	AT_FORALL_FP32(NPU_FP32)
#define NPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
	AT_FORALL_FP32_SET_OPT_DTYPE(NPU_FP32_SET_OPT_DTYPE)
	AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
	        KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define NPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
	AT_FORALL_PROMOTE(NPU_PROMOTE)
}

}  // namespace
}  // namespace at::autocast

bool torch_npurt::autocastRegistered()
{
	return true;
}

#else

bool torch_npurt::autocastRegistered()
{
	return false;
}

#endif

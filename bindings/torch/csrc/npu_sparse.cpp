// npu_sparse.cpp - sparse COO tensors on the NPU (torch's SparsePrivateUse1
// key): indices and values are NPU tensors. The structure (construction,
// indices/values, nnz, dims, coalesced flag, resize, copy between devices)
// is ATen's own device-generic code; every other op on them runs on the CPU
// through sparseFallback, which moves the NPU operands (sparse or dense) to
// the host, calls the op there, writes back what it mutated and moves the
// results to the NPU, as the dense fallback does.
#include <ATen/ATen.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <torch/library.h>

#include "npu_runtime.h"

#include <string>
#include <utility>
#include <vector>

namespace torch_npurt {
namespace {

bool onNpu(const at::Tensor &t)
{
	return t.defined() && t.device().type() == kNpu;
}

// t on `device`, sparse or dense, keeping a sparse tensor's coalesced flag.
at::Tensor moved(const at::Tensor &t, at::Device device)
{
	at::Tensor r = t.to(device);
	if (t.is_sparse() && r.is_coalesced() != t.is_coalesced())
		r._coalesced_(t.is_coalesced());
	return r;
}

// Makes the NPU tensor dst hold src (a CPU result of the op that mutated
// the CPU copy of dst): its structure and values for a sparse one.
void writeBack(const at::Tensor &dst, const at::Tensor &src)
{
	if (!dst.is_sparse()) {
		at::_copy_from_and_resize(src, dst);
		return;
	}
	TORCH_CHECK(src.is_sparse(), "sparse fallback: ", "a sparse argument became dense");
	at::Tensor on = moved(src, dst.device());
	auto *impl = static_cast<at::SparseTensorImpl *>(dst.unsafeGetTensorImpl());
	impl->raw_resize_(src.sparse_dim(), src.dense_dim(), src.sizes());
	impl->set_indices_and_values_unsafe(on._indices(), on._values());
	impl->set_coalesced(src.is_coalesced());
}

struct Written {
	size_t arg;
	at::Tensor npu, cpu;
};

bool isWrite(const c10::Argument &a)
{
	return a.alias_info() && a.alias_info()->isWrite();
}

// An operand on the CPU; the first NPU operand's device is where results go.
at::Tensor toCpu(const at::Tensor &t, c10::optional<at::Device> *device)
{
	if (!onNpu(t))
		return t;
	if (!*device)
		*device = t.device();
	return moved(t, at::kCPU);
}

c10::IValue listToCpu(const c10::IValue &v, c10::optional<at::Device> *device)
{
	c10::List<at::Tensor> out;
	for (at::Tensor t : v.toTensorList())
		out.push_back(toCpu(t, device));
	return out;
}

c10::IValue optionalListToCpu(const c10::IValue &v, c10::optional<at::Device> *device)
{
	c10::List<c10::optional<at::Tensor>> out;
	for (const c10::IValue &e : v.toListRef())
		out.push_back(e.isTensor() ? c10::optional<at::Tensor>(toCpu(e.toTensor(), device))
		                           : c10::nullopt);
	return out;
}

c10::IValue resultToNpu(const c10::IValue &v, at::Device device)
{
	if (v.isTensor()) {
		const at::Tensor &t = v.toTensor();
		return t.defined() && t.device().is_cpu() ? moved(t, device) : t;
	}
	if (v.isTensorList()) {
		c10::List<at::Tensor> out;
		for (at::Tensor t : v.toTensorList())
			out.push_back(t.defined() && t.device().is_cpu() ? moved(t, device) : t);
		return out;
	}
	return v;
}

}  // namespace

void sparseFallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &schema = op.schema();
	std::string name = c10::toString(schema.operator_name());
	countFallback(name);
	std::string label = name + " (CPU fallback)";
	OpScope scope(label.c_str());
	// Below autograd, as the kernel that called this one: the host copies
	// are not recorded.
	at::AutoDispatchBelowADInplaceOrView below;
	const auto &args = schema.arguments();
	const size_t base = stack->size() - args.size();
	c10::optional<at::Device> device;
	std::vector<Written> written;
	for (size_t i = 0; i < args.size(); i++) {
		c10::IValue &v = (*stack)[base + i];
		if (v.isTensor() && onNpu(v.toTensor())) {
			at::Tensor npu = v.toTensor();
			v = toCpu(npu, &device);
			if (isWrite(args[i]))
				written.push_back({i, npu, v.toTensor()});
		} else if (v.isTensorList()) {
			TORCH_CHECK(
			        !isWrite(args[i]), name,
			        ": sparse NPU tensors in a written tensor list are not supported");
			v = listToCpu(v, &device);
		} else if (v.isList() && args[i].type()->kind() == c10::TypeKind::ListType &&
		           args[i].type()->containedType(0)->kind() ==
		                   c10::TypeKind::OptionalType) {
			v = optionalListToCpu(v, &device);
		} else if (v.isDevice() && v.toDevice().type() == kNpu) {
			device = v.toDevice();
			v = c10::IValue(at::Device(at::kCPU));
		}
	}
	try {
		op.callBoxed(stack);
	} catch (const c10::NotImplementedError &e) {
		// The CPU's sparse key has no kernel either: say so for the NPU's
		// (the op is not there for sparse tensors, on any device).
		std::string msg = e.what_without_backtrace();
#if NPU_TORCH_AT_LEAST(2, 0)
		const std::string npuKey = "'Sparse" + c10::get_privateuse1_backend() + "'";
#else
		const std::string npuKey = "'SparsePrivateUse1'";
#endif
		const std::string cpuKey = "'SparseCPU'";
		for (size_t at = msg.find(cpuKey); at != std::string::npos;
		     at = msg.find(cpuKey, at + npuKey.size()))
			msg.replace(at, cpuKey.size(), npuKey);
		TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
	}
	for (const Written &w : written)
		writeBack(w.npu, w.cpu);
	const auto &rets = schema.returns();
	for (size_t j = 0; j < rets.size(); j++) {
		c10::IValue &r = (*stack)[base + j];
		// A result that is a mutated argument is that NPU tensor.
		bool aliased = false;
		if (isWrite(rets[j]))
			for (const Written &w : written)
				if (args[w.arg].alias_info()->beforeSets() ==
				    rets[j].alias_info()->beforeSets()) {
					r = w.npu;
					aliased = true;
				}
		if (!aliased && device)
			r = resultToNpu(r, *device);
	}
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
}

// The structure, ATen's device-generic kernels (CPU's and CUDA's too).
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m)
{
	m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
	m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
#if NPU_TORCH_AT_LEAST(2, 1)
	m.impl("_sparse_coo_tensor_with_dims_and_tensors",
	       TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
#else
	m.impl("_sparse_coo_tensor_with_dims_and_tensors",
	       TORCH_FN(at::native::new_with_dims_and_tensor_sparse));
#endif
	m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
	m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
	m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
	m.impl("_values", TORCH_FN(at::native::_values_sparse));
	m.impl("indices", TORCH_FN(at::native::indices_sparse));
	m.impl("values", TORCH_FN(at::native::values_sparse));
	m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
	m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
	m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
	m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
	m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
	m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
	// What copy_ and 1.13's to() between devices call.
	m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
}

}  // namespace torch_npurt

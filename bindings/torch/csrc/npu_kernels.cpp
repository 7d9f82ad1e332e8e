// npu_kernels.cpp - compute kernels on libnpurt's op set and the CPU
// fallback for everything else.
//
// A kernel runs natively when the op set computes exactly what torch
// computes for those operands; in every other case it hands the call to
// the CPU fallback (counted for NPURT_TORCH_FALLBACK_REPORT), never an
// approximation.
#include "npu_ops.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>
#if NPU_TORCH_AT_LEAST(2, 0)
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#endif

#include <algorithm>
#include <limits>

namespace torch_npurt {

namespace {

constexpr int64_t kOperandMax = int64_t(1) << 30;  // bytes, per op operand
constexpr int64_t kMaxLaunches = 4096;  // per kernel call, before falling back

// ------------------------------------------------------------ CPU fallback

bool isOptionalTensorList(const c10::Argument &arg)
{
	return arg.type()->str() == "Tensor?[]";
}

// A factory op (randn(size, device=npu), ...) runs on the CPU and moves
// its result: first make sure the NPU can hold it, so that a result too
// large for the NPU raises the NPU's out-of-memory error instead of
// exhausting host memory. (The block goes back to the pool for the move.)
void reserveFactoryResult(const c10::FunctionSchema &schema, const torch::jit::Stack &stack,
                          size_t base, at::Device device)
{
	const auto &args = schema.arguments();
	c10::optional<int64_t> numel;
	at::ScalarType dtype = at::get_default_dtype_as_scalartype();
	for (size_t i = 0; i < args.size(); i++) {
		const c10::IValue &v = stack[base + i];
		if (args[i].name() == "size" && v.isList()) {
			int64_t n = 1;
			for (const c10::IValue &e : v.toListRef()) {
				if (!e.isInt())
					return;  // symbolic sizes: nothing to check
				int64_t d = e.toInt();
				if (d <= 0)
					return;  // empty (or invalid: the op says so)
				n = n <= INT64_MAX / d ? n * d : INT64_MAX;
			}
			numel = n;
		} else if (args[i].name() == "dtype" && v.isInt()) {
			dtype = static_cast<at::ScalarType>(v.toInt());
		}
	}
	if (!numel)
		return;
	size_t es = c10::elementSize(dtype);
	int64_t bytes = *numel <= INT64_MAX / int64_t(es) ? *numel * int64_t(es) : INT64_MAX;
	emptyNpu({bytes}, at::kByte, checkedDevice(device.has_index() ? device.index() : -1));
}

// The fallback runs any op on the CPU and puts the results on the first
// tensor's device, so it checks what the device kernels would (as CUDA's
// do): the tensors are on one NPU; a CPU tensor with them is a 0-dim one
// (a scalar). Index lists (Tensor?[]) may be on the CPU, as on CUDA.
// The NPU the arguments are on, if any is.
c10::optional<at::Device> checkFallbackDevices(const c10::FunctionSchema &schema,
                                               const torch::jit::Stack &stack, size_t base)
{
	const auto &args = schema.arguments();
	c10::optional<at::Device> npu;
	const at::Tensor *cpu = nullptr;
	auto look = [&](const at::Tensor &t, bool cpuAllowed) {
		if (!t.defined())
			return;
		if (isNpu(t)) {
			if (!npu)
				npu = t.device();
			TORCH_CHECK(t.device() == *npu,
			            "Expected all tensors to be on the same device, but found at "
			            "least two devices, ",
			            *npu, " and ", t.device(), "! (", schema.name(), ")");
		} else if (!cpuAllowed && t.is_cpu() && t.dim() != 0 && !cpu) {
			cpu = &t;
		}
	};
	for (size_t i = 0; i < args.size(); i++) {
		const c10::IValue &v = stack[base + i];
		if (v.isTensor()) {
			look(v.toTensor(), false);
		} else if (isOptionalTensorList(args[i]) && v.isList()) {
			for (const c10::IValue &e : v.toListRef())
				if (e.isTensor())
					look(e.toTensor(), true);
		} else if (v.isTensorList()) {
			// By index: c10::List yields element proxies, not references.
			const c10::List<at::Tensor> list = v.toTensorList();
			for (size_t k = 0; k < list.size(); k++)
				look(list.get(k), false);
		}
	}
	TORCH_CHECK(!npu || !cpu,
	            "Expected all tensors to be on the same device, but found at least two "
	            "devices, ",
	            *npu, " and cpu! (", schema.name(), ")");
	return npu;
}

#if !NPU_TORCH_AT_LEAST(2, 1)
// torch 1.13's cpu_fallback copies Tensor[] arguments to the CPU but neither
// writes the CPU results of an in-place list op (_foreach_add_, the
// optimizers' foreach steps) back nor moves Tensor[] results to the device:
// the update was lost and _foreach_sqrt's results stayed on the CPU. (2.1's
// does both; there our CPU lists would meet its write-back, which has no
// CPU kernel.) So the lists go to the CPU here, and come back after.
struct FallbackList {
	size_t arg;
	c10::List<at::Tensor> device;
	c10::List<at::Tensor> cpu;
};

std::vector<FallbackList> listsToCpu(const c10::FunctionSchema &schema, torch::jit::Stack &stack,
                                     size_t base)
{
	std::vector<FallbackList> lists;
	const auto &args = schema.arguments();
	for (size_t i = 0; i < args.size(); i++) {
		c10::IValue &v = stack[base + i];
		if (!v.isTensorList())
			continue;
		FallbackList l{i, v.toTensorList(), c10::List<at::Tensor>()};
		for (size_t k = 0; k < l.device.size(); k++) {
			at::Tensor t = l.device.get(k);
			l.cpu.push_back(t.defined() && isNpu(t) ? t.cpu() : t);
		}
		v = l.cpu;
		lists.push_back(std::move(l));
	}
	return lists;
}

bool writes(const c10::Argument &a)
{
	return a.alias_info() && a.alias_info()->isWrite();
}

void listsBack(const c10::FunctionSchema &schema, torch::jit::Stack &stack,
               const std::vector<FallbackList> &lists)
{
	const auto &args = schema.arguments();
	for (const FallbackList &l : lists) {
		if (!writes(args[l.arg]))
			continue;
		for (size_t k = 0; k < l.device.size(); k++) {
			at::Tensor t = l.device.get(k);
			if (t.defined() && isNpu(t))
				t.copy_(l.cpu.get(k));
		}
	}
	// A result that is an argument list itself is the device list.
	const auto &rets = schema.returns();
	size_t first = stack.size() - rets.size();
	for (size_t r = 0; r < rets.size(); r++) {
		if (!stack[first + r].isTensorList() || !writes(rets[r]))
			continue;
		for (const FallbackList &l : lists)
			if (*args[l.arg].alias_info() == *rets[r].alias_info())
				stack[first + r] = l.device;
	}
}
#endif

// Moves the op's CPU results (tensors and tensor lists; not those that are
// arguments written in place) to `device`.
void resultsTo(const c10::FunctionSchema &schema, torch::jit::Stack &stack, at::Device device)
{
	const auto &rets = schema.returns();
	size_t first = stack.size() - rets.size();
	auto moved = [&](const at::Tensor &t) {
		return t.defined() && t.is_cpu() ? t.to(device) : t;
	};
	for (size_t r = 0; r < rets.size(); r++) {
		c10::IValue &v = stack[first + r];
		if (rets[r].alias_info() && rets[r].alias_info()->isWrite())
			continue;
		if (v.isTensor()) {
			v = moved(v.toTensor());
		} else if (v.isTensorList()) {
			c10::List<at::Tensor> out;
			for (const at::Tensor &t : v.toTensorVector())
				out.push_back(moved(t));
			v = out;
		}
	}
}

}  // namespace

void npuFallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const auto &schema = op.schema();
	std::string name = c10::toString(schema.operator_name());
	countFallback(name);
	// Copies in and out are named after the op, for fault reports and
	// the profiler.
	std::string label = name + " (CPU fallback)";
	OpScope scope(label.c_str());
	const auto &args = schema.arguments();
	size_t base = stack->size() - args.size();
	const c10::optional<at::Device> npuIn = checkFallbackDevices(schema, *stack, base);
	const bool npuTensorIn = npuIn.has_value();
	c10::optional<at::Device> factoryDevice;
	bool npuGenerator = false;
	for (size_t i = 0; i < args.size(); i++) {
		c10::IValue &v = (*stack)[base + i];
		// ATen's cpu_fallback (1.13) leaves Tensor?[] (index tensors) on
		// the device, and the CPU kernel would read device memory.
		if (isOptionalTensorList(args[i]) && v.isList()) {
			c10::List<c10::optional<at::Tensor>> moved;
			for (const c10::IValue &e : v.toListRef()) {
				c10::optional<at::Tensor> t;
				if (e.isTensor())
					t = isNpu(e.toTensor()) ? e.toTensor().cpu() : e.toTensor();
				moved.push_back(t);
			}
			v = moved;
		}
		// Factory ops (device=npu, no tensor in): run on the CPU, move the
		// results afterwards.
		if (v.isDevice() && v.toDevice().type() == kNpu) {
			factoryDevice = v.toDevice();
			v = c10::IValue(at::Device(at::kCPU));
		}
#if NPU_TORCH_AT_LEAST(2, 1)
		// The CPU kernel draws from the NPU generator's CPU generator.
		if (v.isGenerator() && v.toGenerator().device().type() == kNpu) {
			npuGenerator = true;
			v = c10::IValue(cpuGeneratorOf(v.toGenerator()));
		}
#endif
	}
	// As CUDA's kernels refuse a CUDA generator for CPU tensors.
	TORCH_CHECK(!npuGenerator || npuTensorIn || factoryDevice,
	            "Expected a 'cpu' device type for generator but found 'npu' (", schema.name(),
	            ")");
	if (factoryDevice && !npuTensorIn)
		reserveFactoryResult(schema, *stack, base, *factoryDevice);
#if NPU_TORCH_AT_LEAST(2, 1)
	at::native::cpu_fallback(op, stack);
#else
	std::vector<FallbackList> lists = listsToCpu(schema, *stack, base);
	at::native::cpu_fallback(op, stack);
	listsBack(schema, *stack, lists);
	// 1.13 moves results to the first Tensor argument's device: the CPU
	// when there is none (torch.cat of NPU tensors) or it is a 0-dim
	// scalar. Results of NPU arguments belong on the NPU.
	if (npuIn)
		resultsTo(schema, *stack, *npuIn);
#endif
	if (factoryDevice && !npuTensorIn)
		resultsTo(schema, *stack, *factoryDevice);
}

namespace {

// ----------------------------------------------------------------- helpers

bool isHalfType(at::ScalarType t)
{
	return t == at::kHalf || t == at::kBFloat16;
}

bool isNativeFloat(at::ScalarType t)
{
	return t == at::kFloat || isHalfType(t);
}

int64_t chunkElems(at::ScalarType t)
{
	return kOperandMax / c10::elementSize(t);
}

// An NPU operand of `shape` in dtype t, contiguous, on `dev`: converted,
// broadcast and materialised as needed. A CPU 0-dim tensor becomes a fill.
at::Tensor operand(const at::Tensor &x, at::IntArrayRef shape, at::ScalarType t, int dev)
{
	if (x.is_cpu()) {
		at::Tensor o = emptyNpu(shape, t, dev);
		fillOnDevice(o, x.item());
		return o;
	}
	at::Tensor c = x;
	if (c.scalar_type() != t) {
		at::Tensor tmp = emptyNpu(c.sizes(), t, dev);
		castOnDevice(tmp, c);
		c = tmp;
	}
	if (c.sizes() != shape)
		c = c.expand(shape);
	return contiguousOnDevice(c);
}

// An output buffer for `out`: out itself when the device may write it
// directly, else a contiguous temporary (the caller copies it back).
// An output whose elements share memory (an expanded tensor) is refused,
// as torch's TensorIterator refuses it on CUDA: which write wins would be
// arbitrary.
at::Tensor directOut(const at::Tensor &out, at::ScalarType t, std::initializer_list<at::Tensor> ins)
{
	at::assert_no_internal_overlap(out);
	if (out.is_contiguous() && out.scalar_type() == t) {
		bool clash = false;
		for (const at::Tensor &in : ins) {
			// Full overlap is in-place (the device allows it); anything
			// else unclear gets a separate buffer.
			auto st = at::get_overlap_status(out, in);
			clash |= st != at::MemOverlapStatus::No && st != at::MemOverlapStatus::Full;
		}
		if (!clash)
			return out;
	}
	return emptyNpu(out.sizes(), t, deviceOf(out));
}

void finishOut(const at::Tensor &out, const at::Tensor &buf)
{
	if (!buf.is_same(out))
		const_cast<at::Tensor &>(out).copy_(buf);
}

// Elementwise op over n elements, in chunks the device accepts.
void elementwise(npurtOpKind op, npurtDataType dt, at::ScalarType st, const void *a, const void *b,
                 void *out, int64_t n, float alpha, int dev, const char *what)
{
	size_t es = c10::elementSize(st);
	int64_t chunk = chunkElems(st);
	for (int64_t off = 0; off < n; off += chunk) {
		npurtOpDesc d{};
		d.op = op;
		d.dtype = d.outDtype = dt;
		d.a = static_cast<const char *>(a) + off * es;
		d.b = b ? static_cast<const char *>(b) + off * es : nullptr;
		d.out = static_cast<char *>(out) + off * es;
		d.n = std::min(chunk, n - off);
		d.alpha = alpha;
		launchOp(d, dev, what);
	}
}

// ------------------------------------------------------ binary elementwise

struct BinaryOp {
	npurtOpKind op;
	const char *name;
	bool ints;  // the op set computes it on int32 as torch does
};

constexpr BinaryOp kAdd{npurtOpAdd, "aten::add", true};
constexpr BinaryOp kSub{npurtOpSub, "aten::sub", true};
constexpr BinaryOp kMul{npurtOpMul, "aten::mul", true};
constexpr BinaryOp kDiv{npurtOpDiv, "aten::div", false};
constexpr BinaryOp kMax{npurtOpMax, "aten::maximum", true};
constexpr BinaryOp kMin{npurtOpMin, "aten::minimum", true};

// out := a op (alpha * b). Returns false when the op set cannot compute it
// (the caller falls back). `out` undefined: a new tensor is returned in res.
bool binary(const BinaryOp &k, const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha,
            const at::Tensor &outIn, at::Tensor *res)
{
	checkSameDevice(a, b);
	OpScope scope(k.name);
	const at::Tensor &dref = isNpu(a) ? a : b;
	int dev = deviceOf(dref);
	at::ScalarType rt = at::result_type(a, b);
	if (!(isNativeFloat(rt) || (rt == at::kInt && k.ints)))
		return false;
	bool unitAlpha = alpha.equal(1);
	if (!unitAlpha && (rt == at::kInt || (k.op != npurtOpAdd && k.op != npurtOpSub)))
		return false;
	for (const at::Tensor *x : {&a, &b})
		if (isNpu(*x) && x->scalar_type() != rt && !castIsNative(x->scalar_type(), rt) &&
		    x->scalar_type() != rt)
			return false;
	if (outIn.defined()) {
		TORCH_CHECK(at::canCast(rt, outIn.scalar_type()), "result type ", rt,
		            " can't be cast to the desired output type ", outIn.scalar_type());
		if (!isNpu(outIn))
			return false;
	}
	std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
	TORCH_CHECK(!outIn.defined() || !outIn.is_same(a) || a.sizes() == at::IntArrayRef(shape),
	            "output with shape ", a.sizes(), " doesn't match the broadcast shape ", shape);
	at::Tensor out = outIn;
	if (out.defined())
		at::native::resize_output(out, shape);
	else
		out = emptyNpu(shape, rt, dev);
	*res = out;
	int64_t n = out.numel();
	if (n == 0)
		return true;
	// Scalars in half types: torch computes in float32 and rounds once;
	// so does the device when everything is float32.
	bool scalarIn = (a.is_cpu() && a.dim() == 0) || (b.is_cpu() && b.dim() == 0);
	at::ScalarType ct = isHalfType(rt) && (scalarIn || !unitAlpha) ? at::kFloat : rt;
	npurtDataType dt;
	toNpurtType(ct, &dt);

	at::Tensor buf = directOut(out, ct, {a, b});
	// x * scalar: the op set's scale, without materialising the scalar.
	if (k.op == npurtOpMul && ct != at::kInt && (b.is_cpu() || a.is_cpu())) {
		const at::Tensor &t = b.is_cpu() ? a : b;
		const at::Tensor &s = b.is_cpu() ? b : a;
		at::Tensor ta = operand(t, shape, ct, dev);
		elementwise(npurtOpScale, dt, ct, dataPtr(ta), nullptr, dataPtr(buf), n,
		            s.item().toFloat(), dev, k.name);
		finishOut(out, buf);
		return true;
	}
	at::Tensor ta = operand(a, shape, ct, dev);
	at::Tensor tb = operand(b, shape, ct, dev);
	// a and b may be buf itself (in place); partial overlaps were avoided.
	if (unitAlpha) {
		elementwise(k.op, dt, ct, dataPtr(ta), dataPtr(tb), dataPtr(buf), n, 0, dev,
		            k.name);
	} else {
		// a + alpha * b = axpy(alpha, b, a); a - alpha * b = axpy(-alpha, b, a)
		float al = alpha.toFloat() * (k.op == npurtOpSub ? -1.0f : 1.0f);
		elementwise(npurtOpAxpy, dt, ct, dataPtr(tb), dataPtr(ta), dataPtr(buf), n, al, dev,
		            k.name);
	}
	finishOut(out, buf);
	return true;
}

#define BINARY_KERNELS(fn, K, OPBASE)                                                           \
	at::Tensor fn(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)        \
	{                                                                                       \
		at::Tensor r;                                                                   \
		if (binary(K, a, b, alpha, at::Tensor(), &r))                                   \
			return r;                                                               \
		return NPU_FALLBACK(OPBASE##_Tensor, a, b, alpha);                              \
	}                                                                                       \
	at::Tensor &fn##_(at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha)          \
	{                                                                                       \
		at::Tensor r;                                                                   \
		if (binary(K, a, b, alpha, a, &r))                                              \
			return a;                                                               \
		return NPU_FALLBACK(OPBASE##__Tensor, a, b, alpha);                             \
	}                                                                                       \
	at::Tensor &fn##_out(const at::Tensor &a, const at::Tensor &b, const at::Scalar &alpha, \
	                     at::Tensor &out)                                                   \
	{                                                                                       \
		at::Tensor r;                                                                   \
		if (binary(K, a, b, alpha, out, &r))                                            \
			return out;                                                             \
		return NPU_FALLBACK(OPBASE##_out, a, b, alpha, out);                            \
	}

BINARY_KERNELS(add, kAdd, add)
BINARY_KERNELS(sub, kSub, sub)

#define BINARY_KERNELS_NOALPHA(fn, K, FUNC, INPLACE, OUT)                               \
	at::Tensor fn(const at::Tensor &a, const at::Tensor &b)                         \
	{                                                                               \
		at::Tensor r;                                                           \
		if (binary(K, a, b, 1, at::Tensor(), &r))                               \
			return r;                                                       \
		return NPU_FALLBACK(FUNC, a, b);                                        \
	}                                                                               \
	at::Tensor &fn##_(at::Tensor &a, const at::Tensor &b)                           \
	{                                                                               \
		at::Tensor r;                                                           \
		if (binary(K, a, b, 1, a, &r))                                          \
			return a;                                                       \
		return NPU_FALLBACK(INPLACE, a, b);                                     \
	}                                                                               \
	at::Tensor &fn##_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) \
	{                                                                               \
		at::Tensor r;                                                           \
		if (binary(K, a, b, 1, out, &r))                                        \
			return out;                                                     \
		return NPU_FALLBACK(OUT, a, b, out);                                    \
	}

BINARY_KERNELS_NOALPHA(mul, kMul, mul_Tensor, mul__Tensor, mul_out)
BINARY_KERNELS_NOALPHA(div, kDiv, div_Tensor, div__Tensor, div_out)

at::Tensor maximum(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor r;
	if (binary(kMax, a, b, 1, at::Tensor(), &r))
		return r;
	return NPU_FALLBACK(maximum, a, b);
}

at::Tensor &maximum_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	at::Tensor r;
	if (binary(kMax, a, b, 1, out, &r))
		return out;
	return NPU_FALLBACK(maximum_out, a, b, out);
}

at::Tensor minimum(const at::Tensor &a, const at::Tensor &b)
{
	at::Tensor r;
	if (binary(kMin, a, b, 1, at::Tensor(), &r))
		return r;
	return NPU_FALLBACK(minimum, a, b);
}

at::Tensor &minimum_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	at::Tensor r;
	if (binary(kMin, a, b, 1, out, &r))
		return out;
	return NPU_FALLBACK(minimum_out, a, b, out);
}

// ------------------------------------------------------- unary elementwise

// out := op(x); false if the op set cannot compute it for x's dtype.
bool unary(npurtOpKind op, bool ints, const at::Tensor &x, const at::Tensor &outIn, at::Tensor *res,
           const char *what)
{
	at::ScalarType t = x.scalar_type();
	if (!(isNativeFloat(t) || (ints && t == at::kInt)))
		return false;
	OpScope scope(what);
	if (outIn.defined() && (!isNpu(outIn) || outIn.scalar_type() != t))
		return false;
	int dev = deviceOf(x);
	at::Tensor out = outIn;
	if (out.defined()) {
		TORCH_CHECK(out.device() == x.device(),
		            "Expected all tensors to be on the same device, "
		            "but found at least two devices, ",
		            x.device(), " and ", out.device(), "!");
		at::native::resize_output(out, x.sizes());
	} else {
		out = emptyNpu(x.sizes(), t, dev);
	}
	*res = out;
	if (x.numel() == 0)
		return true;
	npurtDataType dt;
	toNpurtType(t, &dt);
	at::Tensor a = contiguousOnDevice(x);
	at::Tensor buf = directOut(out, t, {a});
	elementwise(op, dt, t, dataPtr(a), nullptr, dataPtr(buf), x.numel(), 0, dev, what);
	finishOut(out, buf);
	return true;
}

at::Tensor relu(const at::Tensor &x)
{
	at::Tensor r;
	if (unary(npurtOpRelu, true, x, at::Tensor(), &r, "aten::relu"))
		return r;
	return NPU_FALLBACK(relu, x);
}

at::Tensor &relu_(at::Tensor &x)
{
	at::Tensor r;
	if (unary(npurtOpRelu, true, x, x, &r, "aten::relu_"))
		return x;
	return NPU_FALLBACK(relu_, x);
}

at::Tensor exp(const at::Tensor &x)
{
	at::Tensor r;
	if (unary(npurtOpExp, false, x, at::Tensor(), &r, "aten::exp"))
		return r;
	return NPU_FALLBACK(exp, x);
}

at::Tensor &exp_out(const at::Tensor &x, at::Tensor &out)
{
	at::Tensor r;
	if (unary(npurtOpExp, false, x, out, &r, "aten::exp"))
		return out;
	return NPU_FALLBACK(exp_out, x, out);
}

// The op set's GELU is the tanh form: only approximate="tanh" is native.
at::Tensor gelu(const at::Tensor &x, c10::string_view approximate)
{
	at::Tensor r;
	if (approximate == "tanh" && unary(npurtOpGelu, false, x, at::Tensor(), &r, "aten::gelu"))
		return r;
	return NPU_FALLBACK(gelu, x, approximate);
}

at::Tensor &gelu_out(const at::Tensor &x, c10::string_view approximate, at::Tensor &out)
{
	at::Tensor r;
	if (approximate == "tanh" && unary(npurtOpGelu, false, x, out, &r, "aten::gelu"))
		return out;
	return NPU_FALLBACK(gelu_out, x, approximate, out);
}

// -------------------------------------------------------------------- GEMM

// A matrix operand for GEMM: the pointer and whether it is transposed
// (a transposed view of a contiguous matrix needs no copy).
struct MatArg {
	at::Tensor keep;
	const void *ptr;
	bool trans;
};

MatArg matArg(const at::Tensor &m, at::ScalarType ct)
{
	at::Tensor x = m;
	if (x.scalar_type() != ct) {
		at::Tensor c = emptyNpu(x.sizes(), ct, deviceOf(x));
		castOnDevice(c, x);
		x = c;
	}
	if (x.is_contiguous())
		return {x, dataPtr(x), false};
	if (x.t().is_contiguous())
		return {x, dataPtr(x), true};
	x = contiguousOnDevice(x);
	return {x, dataPtr(x), false};
}

// out32 (m x n float32, contiguous) := alpha * a @ b + beta * out32
void gemm(const at::Tensor &out32, const at::Tensor &a, const at::Tensor &b, float alpha,
          float beta, const char *what)
{
	at::ScalarType ct = a.scalar_type() == at::kHalf ? at::kHalf : at::kFloat;
	MatArg ma = matArg(a, ct), mb = matArg(b, ct);
	npurtOpDesc d{};
	d.op = npurtOpGemm;
	toNpurtType(ct, &d.dtype);
	d.outDtype = npurtFloat32;
	d.flags = (ma.trans ? npurtOpTransA : 0) | (mb.trans ? npurtOpTransB : 0);
	d.a = ma.ptr;
	d.b = mb.ptr;
	d.c = beta != 0.0f ? dataPtr(out32) : nullptr;
	d.out = dataPtr(out32);
	d.m = a.size(0);
	d.k = a.size(1);
	d.n = b.size(1);
	d.alpha = alpha;
	d.beta = beta;
	launchOp(d, deviceOf(out32), what);
}

bool gemmNative(const at::Tensor &a, const at::Tensor &b)
{
	int64_t es = a.element_size();
	return isNpu(a) && isNpu(b) && isNativeFloat(a.scalar_type()) &&
	       a.scalar_type() == b.scalar_type() && a.numel() * 4 <= kOperandMax &&
	       b.numel() * 4 <= kOperandMax && es > 0;
}

void checkMm(const at::Tensor &a, const at::Tensor &b, const char *name)
{
	checkSameDevice(a, b);
	TORCH_CHECK(a.dim() == 2, name, ": self must be a matrix");
	TORCH_CHECK(b.dim() == 2, name, ": mat2 must be a matrix");
	TORCH_CHECK(a.size(1) == b.size(0), name, ": mat1 and mat2 shapes cannot be multiplied (",
	            a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
	TORCH_CHECK(a.scalar_type() == b.scalar_type(),
	            "expected mat1 and mat2 to have the same dtype, but got: ", a.scalar_type(),
	            " != ", b.scalar_type());
}

// out := beta * bias + alpha * a @ b, bias broadcast to m x n (or none).
void matmulInto(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b,
                const at::Tensor &bias, float beta, float alpha, const char *what)
{
	int dev = deviceOf(out);
	int64_t m = a.size(0), n = b.size(1);
	if (m == 0 || n == 0)
		return;
	OpScope scope(what);
	bool useBias = bias.defined() && beta != 0.0f;
	at::Tensor acc =
	        out.scalar_type() == at::kFloat && out.is_contiguous() &&
	                        at::get_overlap_status(out, a) == at::MemOverlapStatus::No &&
	                        at::get_overlap_status(out, b) == at::MemOverlapStatus::No
	                ? out
	                : emptyNpu({m, n}, at::kFloat, dev);
	if (useBias) {
		at::Tensor e = bias.expand({m, n});
		if (!acc.is_same(bias)) {
			if (bias.scalar_type() == at::kFloat)
				copyOnDevice(acc, e);
			else
				castOnDevice(acc, e);
		}
	}
	if (a.size(1) == 0) {
		// No products: beta * bias, or zeros.
		if (useBias && beta != 1.0f)
			elementwise(npurtOpScale, npurtFloat32, at::kFloat, dataPtr(acc), nullptr,
			            dataPtr(acc), m * n, beta, dev, what);
		else if (!useBias)
			fillOnDevice(acc, 0);
	} else {
		gemm(acc, a, b, alpha, useBias ? beta : 0.0f, what);
	}
	if (!acc.is_same(out))
		const_cast<at::Tensor &>(out).copy_(acc);
}

at::Tensor mm(const at::Tensor &a, const at::Tensor &b)
{
	checkMm(a, b, "mm");
	if (!gemmNative(a, b))
		return NPU_FALLBACK(mm, a, b);
	at::Tensor out = emptyNpu({a.size(0), b.size(1)}, a.scalar_type(), deviceOf(a));
	matmulInto(out, a, b, at::Tensor(), 0.0f, 1.0f, "aten::mm");
	return out;
}

at::Tensor &mm_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out)
{
	checkMm(a, b, "mm");
	if (!gemmNative(a, b) || !isNpu(out) || out.scalar_type() != a.scalar_type())
		return NPU_FALLBACK(mm_out, a, b, out);
	at::native::resize_output(out, {a.size(0), b.size(1)});
	matmulInto(out, a, b, at::Tensor(), 0.0f, 1.0f, "aten::mm");
	return out;
}

at::Tensor addmm(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b,
                 const at::Scalar &beta, const at::Scalar &alpha)
{
	checkMm(a, b, "addmm");
	checkSameDevice(bias, a);
	bool ok = gemmNative(a, b) && isNpu(bias) && bias.scalar_type() == a.scalar_type() &&
	          at::is_expandable_to(bias.sizes(), {a.size(0), b.size(1)});
	if (!ok)
		return NPU_FALLBACK(addmm, bias, a, b, beta, alpha);
	at::Tensor out = emptyNpu({a.size(0), b.size(1)}, a.scalar_type(), deviceOf(a));
	matmulInto(out, a, b, bias, beta.toFloat(), alpha.toFloat(), "aten::addmm");
	return out;
}

at::Tensor &addmm_out(const at::Tensor &bias, const at::Tensor &a, const at::Tensor &b,
                      const at::Scalar &beta, const at::Scalar &alpha, at::Tensor &out)
{
	checkMm(a, b, "addmm");
	bool ok = gemmNative(a, b) && isNpu(bias) && isNpu(out) &&
	          bias.scalar_type() == a.scalar_type() && out.scalar_type() == a.scalar_type() &&
	          at::is_expandable_to(bias.sizes(), {a.size(0), b.size(1)});
	if (!ok)
		return NPU_FALLBACK(addmm_out, bias, a, b, beta, alpha, out);
	// addmm_(...) passes out == bias: read it before out is written.
	at::Tensor bb = out.is_same(bias) ? contiguousOnDevice(bias.clone()) : bias;
	at::native::resize_output(out, {a.size(0), b.size(1)});
	matmulInto(out, a, b, bb, beta.toFloat(), alpha.toFloat(), "aten::addmm");
	return out;
}

at::Tensor bmm(const at::Tensor &a, const at::Tensor &b)
{
	checkSameDevice(a, b);
	TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
	TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
	TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
	            "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0),
	            ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
	TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected scalar type ", a.scalar_type(),
	            " but found ", b.scalar_type());
	if (!gemmNative(a, b) || a.size(0) > kMaxLaunches)
		return NPU_FALLBACK(bmm, a, b);
	OpScope scope("aten::bmm");
	at::Tensor out = emptyNpu({a.size(0), a.size(1), b.size(2)}, a.scalar_type(), deviceOf(a));
	for (int64_t i = 0; i < a.size(0); i++)
		matmulInto(out.select(0, i), a.select(0, i), b.select(0, i), at::Tensor(), 0.0f,
		           1.0f, "aten::bmm");
	return out;
}

// --------------------------------------------------------------- reduction

// A reduction the op set has: its kind and the ATen name it runs for.
struct Reduction {
	npurtOpKind op;
	const char *name;
};
constexpr Reduction kSum{npurtOpReduceSum, "aten::sum"};
constexpr Reduction kAmax{npurtOpReduceMax, "aten::amax"};

// out (contiguous, outer*inner) := the reduction over the middle of x
// (contiguous, outer x red x inner).
void reduceInto(const Reduction &r, const at::Tensor &out, const at::Tensor &x, int64_t outer,
                int64_t red, int64_t inner)
{
	npurtOpDesc d{};
	d.op = r.op;
	toNpurtType(x.scalar_type(), &d.dtype);
	d.outDtype = d.dtype;
	size_t es = x.element_size();
	int dev = deviceOf(x);
	if (inner == 1) {
		d.a = dataPtr(x);
		d.out = dataPtr(out);
		d.m = outer;
		d.n = red;
		d.axis = 1;
		launchOp(d, dev, r.name);
		return;
	}
	for (int64_t o = 0; o < outer; o++) {
		d.a = static_cast<const char *>(dataPtr(x)) + o * red * inner * es;
		d.out = static_cast<char *>(dataPtr(out)) + o * inner * es;
		d.m = red;
		d.n = inner;
		d.axis = 0;
		launchOp(d, dev, r.name);
	}
}

// The reduction r over `dims` (any set; none: all) of self, converted to
// ot first, into outIn or a new tensor; false (nothing written) if the
// op set cannot. An empty reduction is 0 (the caller refuses it where
// torch does).
bool reduceNative(const Reduction &r, const at::Tensor &self, at::OptionalIntArrayRef dimOpt,
                  bool keepdim, at::ScalarType ot, const at::Tensor &outIn, at::Tensor *res)
{
	at::ScalarType in = self.scalar_type();
	if (!(isNativeFloat(ot) || (ot == at::kInt && r.op == npurtOpReduceMax)) ||
	    !(isNativeFloat(in) || in == at::kInt) || (in != ot && !castIsNative(in, ot)))
		return false;
	if (outIn.defined() && (!isNpu(outIn) || outIn.scalar_type() != ot))
		return false;
	if (self.numel() * c10::elementSize(ot) > kOperandMax)
		return false;
	OpScope scope(r.name);
	int64_t nd = self.dim();
	std::vector<bool> reduce(std::max<int64_t>(nd, 1), false);
	at::IntArrayRef dims = dimOpt.value_or(at::IntArrayRef{});
	if (dims.empty())
		std::fill(reduce.begin(), reduce.end(), true);
	for (int64_t d : dims) {
		int64_t w = at::maybe_wrap_dim(d, nd);
		TORCH_CHECK(!reduce[w] || dims.empty(), "dim ", w,
		            " appears multiple times in the list of dims");
		reduce[w] = true;
	}
	std::vector<int64_t> outShape;
	for (int64_t i = 0; i < nd; i++) {
		if (!reduce[i])
			outShape.push_back(self.size(i));
		else if (keepdim)
			outShape.push_back(1);
	}
	int dev = deviceOf(self);
	at::Tensor out = outIn;
	if (out.defined())
		at::native::resize_output(out, outShape);
	else
		out = emptyNpu(outShape, ot, dev);
	*res = out;
	if (out.numel() == 0)
		return true;
	if (self.numel() == 0) {
		fillOnDevice(out, 0);
		return true;
	}
	at::Tensor x = self;
	if (in != ot) {
		at::Tensor c = emptyNpu(self.sizes(), ot, dev);
		castOnDevice(c, self);
		x = c;
	}
	x = contiguousOnDevice(x);
	if (nd == 0) {
		copyOnDevice(out, x);  // the reduction of one element is itself
		return true;
	}
	// One run of adjacent reduced dimensions at a time, outermost first.
	std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
	std::vector<bool> red = reduce;
	while (true) {
		auto first = std::find(red.begin(), red.end(), true);
		if (first == red.end())
			break;
		auto last = std::find(first, red.end(), false);
		size_t f = first - red.begin(), l = last - red.begin();
		int64_t outer = 1, n = 1, inner = 1;
		for (size_t i = 0; i < f; i++)
			outer *= sizes[i];
		for (size_t i = f; i < l; i++)
			n *= sizes[i];
		for (size_t i = l; i < sizes.size(); i++)
			inner *= sizes[i];
		if (inner != 1 && outer > kMaxLaunches)
			return false;  // nothing written yet only on the first pass
		std::vector<int64_t> ns(sizes.begin(), sizes.begin() + f);
		ns.insert(ns.end(), sizes.begin() + l, sizes.end());
		at::Tensor y = emptyNpu(ns, ot, dev);
		reduceInto(r, y, x, outer, n, inner);
		x = y;
		sizes = ns;
		red.erase(red.begin() + f, red.begin() + l);
	}
	at::Tensor shaped = x.view(outShape);
	if (out.is_contiguous())
		copyOnDevice(out, shaped);
	else
		out.copy_(shaped);
	return true;
}

// torch's sum, times `scale` (the mean's 1/count): integers sum to int64
// (not in the op set: the fallback). Half types are summed in float32,
// scaled, and rounded once at the end, as CUDA's kernels accumulate: a
// half partial sum overflows past 65504 and rounds at every step.
bool sumNative(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
               c10::optional<at::ScalarType> dtype, const at::Tensor &out, at::Tensor *res,
               double scale = 1.0)
{
	at::ScalarType in = self.scalar_type();
	at::ScalarType ot = dtype.value_or(at::isIntegralType(in, true) ? at::kLong : in);
	if (!isHalfType(ot)) {
		if (!reduceNative(kSum, self, dim, keepdim, ot, out, res))
			return false;
		if (scale != 1.0)
			res->mul_(scale);
		return true;
	}
	if (out.defined() && (!isNpu(out) || out.scalar_type() != ot))
		return false;
	at::Tensor acc;
	if (!reduceNative(kSum, self, dim, keepdim, at::kFloat, at::Tensor(), &acc))
		return false;
	if (scale != 1.0)
		acc.mul_(scale);
	at::Tensor r = out;
	if (r.defined())
		at::native::resize_output(r, acc.sizes());
	else
		r = emptyNpu(acc.sizes(), ot, deviceOf(self));
	castOnDevice(r, acc);
	*res = r;
	return true;
}

at::Tensor sum_dim(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                   c10::optional<at::ScalarType> dtype)
{
	at::Tensor r;
	if (sumNative(self, dim, keepdim, dtype, at::Tensor(), &r))
		return r;
	return NPU_FALLBACK(sum_dim_IntList, self, dim, keepdim, dtype);
}

at::Tensor &sum_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                    c10::optional<at::ScalarType> dtype, at::Tensor &out)
{
	at::Tensor r;
	if (sumNative(self, dim, keepdim, dtype, out, &r))
		return out;
	return NPU_FALLBACK(sum_IntList_out, self, dim, keepdim, dtype, out);
}

// amax and max() (the values only: the op set has no arg-max). An empty
// input goes to the fallback: torch refuses it or gives an empty result.
at::Tensor amax(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	at::Tensor r;
	if (self.numel() > 0 &&
	    reduceNative(kAmax, self, dim, keepdim, self.scalar_type(), at::Tensor(), &r))
		return r;
	return NPU_FALLBACK(amax, self, dim, keepdim);
}

at::Tensor max_all(const at::Tensor &self)
{
	at::Tensor r;
	if (self.numel() > 0 && reduceNative(kAmax, self, at::IntArrayRef{}, false,
	                                     self.scalar_type(), at::Tensor(), &r))
		return r;
	return NPU_FALLBACK(max, self);
}

// Softmax from native ops, exp(x - amax(x)) / sum(exp(x - amax(x))), and
// its gradient, y * (g - sum(g * y)): in float32 for half types, as torch's
// CPU kernels accumulate. Empty inputs go to the fallback.
bool softmaxNative(const at::Tensor &t)
{
	return isNpu(t) && isNativeFloat(t.scalar_type()) && t.numel() > 0 &&
	       t.numel() * 4 <= kOperandMax;
}

at::Tensor softmax(const at::Tensor &self, int64_t dim, bool halfToFloat)
{
	if (!softmaxNative(self) || (halfToFloat && self.scalar_type() != at::kHalf))
		return NPU_FALLBACK(_softmax, self, dim, halfToFloat);
	OpScope scope("aten::_softmax");
	const int64_t d = at::maybe_wrap_dim(dim, self.dim());
	at::Tensor x = self.to(at::kFloat);
	at::Tensor e = at::exp(at::sub(x, at::amax(x, d, true)));
	at::Tensor y = at::div(e, at::sum(e, d, true));
	return halfToFloat ? y : y.to(self.scalar_type());
}

at::Tensor softmax_backward(const at::Tensor &grad, const at::Tensor &output, int64_t dim,
                            at::ScalarType inputDtype)
{
	if (!softmaxNative(grad) || !softmaxNative(output) || !isNativeFloat(inputDtype))
		return NPU_FALLBACK(_softmax_backward_data, grad, output, dim, inputDtype);
	checkSameDevice(grad, output);
	OpScope scope("aten::_softmax_backward_data");
	const int64_t d = at::maybe_wrap_dim(dim, output.dim());
	at::Tensor g = grad.to(at::kFloat), y = output.to(at::kFloat);
	at::Tensor gi = at::mul(y, at::sub(g, at::sum(at::mul(g, y), d, true)));
	return gi.to(inputDtype);
}

// mean = sum / count, natively where the sum is (a floating result; the
// mean of integers is an error, raised by the CPU kernel through the
// fallback). An empty reduction is 0 * inf: NaN, as torch gives.
at::Tensor mean_dim(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                    c10::optional<at::ScalarType> dtype)
{
	if (!isNativeFloat(dtype.value_or(self.scalar_type())))
		return NPU_FALLBACK(mean_dim, self, dim, keepdim, dtype);
	at::IntArrayRef dims = dim.value_or(at::IntArrayRef{});
	int64_t count = 1;
	if (dims.empty()) {
		count = self.numel();
	} else if (self.dim() > 0) {
		for (int64_t d : dims)
			count *= self.size(at::maybe_wrap_dim(d, self.dim()));
	}
	at::Tensor r;
	OpScope scope("aten::mean");
	if (!sumNative(self, dim, keepdim, dtype, at::Tensor(), &r,
	               count ? 1.0 / static_cast<double>(count)
	                     : std::numeric_limits<double>::infinity()))
		return NPU_FALLBACK(mean_dim, self, dim, keepdim, dtype);
	return r;
}

// MSE loss and its gradient from native ops (torch 1.13's CPU kernel for
// mse_loss.out, which the fallback reached, also warned that it resized
// its output).
bool mseNative(const at::Tensor &self, const at::Tensor &target)
{
	checkSameDevice(self, target);
	return isNpu(self) && isNpu(target) && isNativeFloat(self.scalar_type()) &&
	       self.scalar_type() == target.scalar_type();
}

at::Tensor mse_loss(const at::Tensor &self, const at::Tensor &target, int64_t reduction)
{
	if (!mseNative(self, target))
		return NPU_FALLBACK(mse_loss, self, target, reduction);
	OpScope scope("aten::mse_loss");
	at::Tensor d = at::sub(self, target);
	at::Tensor sq = at::mul(d, d);
	switch (reduction) {
	case at::Reduction::None:
		return sq;
	case at::Reduction::Sum:
		return at::sum(sq);
	case at::Reduction::Mean:
		return at::mean(sq);
	default:
		TORCH_CHECK(false, reduction, " is not a valid value for reduction");
	}
}

at::Tensor mse_loss_backward(const at::Tensor &grad, const at::Tensor &self,
                             const at::Tensor &target, int64_t reduction)
{
	if (!mseNative(self, target) || !isNpu(grad) || grad.scalar_type() != self.scalar_type())
		return NPU_FALLBACK(mse_loss_backward, grad, self, target, reduction);
	OpScope scope("aten::mse_loss_backward");
	const double norm = reduction == at::Reduction::Mean && self.numel()
	                            ? 2.0 / static_cast<double>(self.numel())
	                            : 2.0;
	return at::mul(at::sub(self, target), grad).mul_(norm);
}

// Tensor.record_stream: libnpurt keeps a freed block until the work queued
// before the free, on every stream, has run (RUNTIME_NEEDS.md 1), so
// there is nothing to record; the stream must still be an NPU's.
void record_stream(at::Tensor &self, c10::Stream s)
{
	TORCH_CHECK(s.device_type() == kNpu, "record_stream: ", self.device(),
	            " tensor recorded on a stream of ", s.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
}

#if !NPU_TORCH_AT_LEAST(2, 0)
// torch 1.13 lets ops with no autograd kernel fall through the autograd
// keys of CPU, CUDA and the other named backends, not PrivateUse1's:
// c10d's collectives (which DDP's C++ reaches through the dispatcher)
// stopped there on NPU tensors.
TORCH_LIBRARY_IMPL(_, AutogradPrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFallthrough());
}
#else
namespace {
// torch 2.x gives the autograd keys of CPU, CUDA and the other named
// backends an autograd fallback, and 2.6 not PrivateUse1's: ops with no
// autograd kernel of their own (the functional collectives of DTensor and
// FSDP2; _has_compatible_shallow_copy_type, which has an NPU kernel) had
// no kernel for AutogradPrivateUse1. The same fallback as CUDA's, unless
// this torch registers one.
const bool autogradFallback = [] {
	if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(
	            c10::DispatchKey::AutogradPrivateUse1))
		return false;
	static auto *lib =
	        new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::AutogradPrivateUse1,
	                           __FILE__, __LINE__);
	lib->fallback(torch::autograd::basicAutogradNotImplementedFallback());
	return true;
}();
}  // namespace
#endif

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	// Ops whose composite kernels, written for devices other than CPU and
	// CUDA, take precedence over the fallback; the whole op runs through
	// the fallback instead, as ops of no kernel do. torch 1.13's
	// linalg_eigvals.out computes on the CPU and writes the result with
	// at::complex as if the tensor given were a CPU or CUDA one: on the NPU
	// it failed with "found at least two devices" (float) or crashed
	// (complex). native_layer_norm and native_group_norm decompose into
	// batch norm and elementwise ops, each a round trip through the host,
	// whose results differ from the CPU's where the variance is zero (the
	// batch norm's mean is not exact, then multiplied by 1/sqrt(eps)).
	for (const char *op : {"linalg_eigvals.out", "native_layer_norm", "native_group_norm"})
		m.impl(op, torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
	m.impl("record_stream", TORCH_FN(record_stream));
	m.impl("add.Tensor", TORCH_FN(add));
	m.impl("add_.Tensor", TORCH_FN(add_));
	m.impl("add.out", TORCH_FN(add_out));
	m.impl("sub.Tensor", TORCH_FN(sub));
	m.impl("sub_.Tensor", TORCH_FN(sub_));
	m.impl("sub.out", TORCH_FN(sub_out));
	m.impl("mul.Tensor", TORCH_FN(mul));
	m.impl("mul_.Tensor", TORCH_FN(mul_));
	m.impl("mul.out", TORCH_FN(mul_out));
	m.impl("div.Tensor", TORCH_FN(div));
	m.impl("div_.Tensor", TORCH_FN(div_));
	m.impl("div.out", TORCH_FN(div_out));
	m.impl("maximum", TORCH_FN(maximum));
	m.impl("maximum.out", TORCH_FN(maximum_out));
	m.impl("minimum", TORCH_FN(minimum));
	m.impl("minimum.out", TORCH_FN(minimum_out));
	m.impl("relu", TORCH_FN(relu));
	m.impl("relu_", TORCH_FN(relu_));
	m.impl("exp", TORCH_FN(exp));
	m.impl("exp.out", TORCH_FN(exp_out));
	m.impl("gelu", TORCH_FN(gelu));
	m.impl("gelu.out", TORCH_FN(gelu_out));
	m.impl("mm", TORCH_FN(mm));
	m.impl("mm.out", TORCH_FN(mm_out));
	m.impl("addmm", TORCH_FN(addmm));
	m.impl("addmm.out", TORCH_FN(addmm_out));
	m.impl("bmm", TORCH_FN(bmm));
	m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
	m.impl("sum.IntList_out", TORCH_FN(sum_out));
	m.impl("mean.dim", TORCH_FN(mean_dim));
	m.impl("_softmax", TORCH_FN(softmax));
	m.impl("_softmax_backward_data", TORCH_FN(softmax_backward));
	m.impl("amax", TORCH_FN(amax));
	m.impl("max", TORCH_FN(max_all));
	m.impl("mse_loss", TORCH_FN(mse_loss));
	m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));
}

}  // namespace torch_npurt

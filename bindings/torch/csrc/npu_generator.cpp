// npu_generator.cpp - torch.Generator(device="npu") (torch 2.1+).
//
// Random ops on NPU tensors run through the CPU fallback, so an NPU
// generator is a CPU generator (torch's Mersenne Twister) that carries the
// NPU device: its seed and state are the CPU generator's, and the fallback
// hands the CPU kernel the generator inside (cpuGeneratorOf). A seed gives
// the same numbers as torch.Generator().manual_seed(seed) does on the CPU,
// and a new one starts from torch's default seed, as CUDA's does.
// torch 1.13 creates generators only for CPU and CUDA.
#include "npu_ops.h"

#if NPU_TORCH_AT_LEAST(2, 1)

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

#include <mutex>

namespace torch_npurt {
namespace {

// A generator's implementation with its mutex held.
class Locked {
public:
	explicit Locked(const at::Generator &g)
	    : impl_(g.unsafeGetGeneratorImpl()), lock_(impl_->mutex_)
	{}
	c10::GeneratorImpl *operator->() const { return impl_; }

private:
	c10::GeneratorImpl *impl_;
	std::lock_guard<std::mutex> lock_;
};

struct NpuGeneratorImpl final : c10::GeneratorImpl {
	NpuGeneratorImpl(c10::DeviceIndex device, at::Generator cpu)
	    : c10::GeneratorImpl(at::Device(kNpu, device),
	                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
	      cpu_(std::move(cpu))
	{}

	// Python takes this generator's mutex around each call; kernels take
	// the CPU generator's, so each forward takes that one too.
	void set_current_seed(uint64_t seed) override { Locked(cpu_)->set_current_seed(seed); }
	// A Mersenne Twister has no Philox offset: it is 0, as pickling and
	// copy.deepcopy of a non-CPU generator read and restore it.
	void set_offset(uint64_t offset) override
	{
		TORCH_CHECK(offset == 0,
		            "NPU generators are CPU Mersenne Twisters and have no offset "
		            "(set_state sets where they are)");
	}
	uint64_t get_offset() const override { return 0; }
	uint64_t current_seed() const override { return Locked(cpu_)->current_seed(); }
	uint64_t seed() override { return Locked(cpu_)->seed(); }
	void set_state(const c10::TensorImpl &state) override { Locked(cpu_)->set_state(state); }
	c10::intrusive_ptr<c10::TensorImpl> get_state() const override
	{
		return Locked(cpu_)->get_state();
	}

	const at::Generator &cpu() const { return cpu_; }

private:
	NpuGeneratorImpl *clone_impl() const override
	{
		Locked cpu(cpu_);
		return new NpuGeneratorImpl(device_.index(), at::Generator(cpu->clone()));
	}

	at::Generator cpu_;
};

at::Generator makeNpuGenerator(c10::DeviceIndex device)
{
	auto index = static_cast<c10::DeviceIndex>(checkedDevice(device));
	return at::make_generator<NpuGeneratorImpl>(index,
	                                            at::make_generator<at::CPUGeneratorImpl>());
}

}  // namespace

REGISTER_GENERATOR_PRIVATEUSE1(makeNpuGenerator)

at::Generator cpuGeneratorOf(const at::Generator &npu)
{
	const auto *impl = dynamic_cast<const NpuGeneratorImpl *>(npu.unsafeGetGeneratorImpl());
	TORCH_CHECK(impl, "a generator on ", npu.device(), " that torch_npurt did not make");
	return impl->cpu();
}

}  // namespace torch_npurt

#endif

// npu_hooks.cpp - at::PrivateUse1HooksInterface (torch 2.1+): what torch's
// core asks of a PrivateUse1 backend beyond kernels: pinned memory
// (Tensor.pin_memory(), is_pinned(), pin_memory=True factories, the
// DataLoader's pin thread go through it from 2.x on), the device of a
// pointer, generators and storage resizing. torch 1.13 has no such
// interface; the package patches those paths there (_patches.py).
#include "npu_ops.h"
#include "npu_runtime.h"

#if NPU_TORCH_AT_LEAST(2, 1)

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <algorithm>

namespace torch_npurt {
namespace {

npurtPointerAttributes attributesOf(const void *p)
{
	npurtPointerAttributes a{};
	if (npurtPointerGetAttributes(&a, p) != npurtSuccess) {
		npurtGetLastError();
		a.type = npurtMemoryTypeUnregistered;
	}
	return a;
}

struct NpuHooks final : at::PrivateUse1HooksInterface {
	// Random ops run through the CPU fallback, so they draw from the CPU
	// generator; torch.npu.manual_seed seeds it (as torch.manual_seed).
	const at::Generator &getDefaultGenerator(c10::DeviceIndex) const override
	{
		return at::detail::getDefaultCPUGenerator();
	}

	at::Device getDeviceFromPtr(void *data) const override
	{
		npurtPointerAttributes a = attributesOf(data);
		TORCH_CHECK(a.type == npurtMemoryTypeDevice, "pointer ", data,
		            " is not NPU device memory");
		return {kNpu, static_cast<c10::DeviceIndex>(a.device)};
	}

	bool isPinnedPtr(const void *data) const override
	{
		// No NPU, no pinned memory: answer without starting the runtime's
		// error path for every CPU tensor asked about.
		return torch_npurt::deviceCount() > 0 &&
		       attributesOf(data).type == npurtMemoryTypeHost;
	}

	at::Allocator *getPinnedMemoryAllocator() const override
	{
		checkedDevice(-1);
		return pinnedAllocator();
	}

	bool hasPrimaryContext(c10::DeviceIndex device) const override
	{
		return device >= 0 && device < torch_npurt::deviceCount();
	}

#if NPU_TORCH_AT_LEAST(2, 6)
	// The device-generic entry points (torch.accelerator) on the same
	// current device as torch.npu's.
	c10::DeviceIndex deviceCount() const override
	{
		return static_cast<c10::DeviceIndex>(torch_npurt::deviceCount());
	}
	void setCurrentDevice(c10::DeviceIndex device) const override
	{
		setDevice(device);
	}
	c10::DeviceIndex getCurrentDevice() const override
	{
		return static_cast<c10::DeviceIndex>(currentDevice());
	}
	c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override
	{
		c10::DeviceIndex previous = getCurrentDevice();
		if (device != previous)
			setDevice(device);
		return previous;
	}
	c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override
	{
		return exchangeDevice(device);
	}
#endif

	// Storage.resize_() of an NPU storage.
	void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override
	{
		resizeStorageBytes(storage.unsafeGetStorageImpl(), newsize,
		                   storage.device().index());
	}
};

// Registered when the extension loads, before any Python code asks.
const bool gRegistered = [] {
	at::RegisterPrivateUse1HooksInterface(new NpuHooks());
	return true;
}();

}  // namespace
}  // namespace torch_npurt

#endif

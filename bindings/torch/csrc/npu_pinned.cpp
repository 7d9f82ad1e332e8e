// npu_pinned.cpp - pinned (page-locked) host memory for CPU tensors:
// the c10 allocator over npurtMallocHost/npurtFreeHost, and the is_pinned
// and _pin_memory kernels.
//
// libnpurt caches freed pinned blocks and reuses one only after the copies
// queued before its free have run, so a tensor whose non-blocking copy is
// still queued may be freed at once (the DataLoader pattern) with nothing
// kept here.
#include "npu_ops.h"

#include <torch/library.h>

#include <cstdio>
#include <cstring>

namespace torch_npurt {

namespace {

std::atomic<bool> gPinnedFreeReported{false};

void freePinned(void *p)
{
	if (!p)
		return;
	if (npurtError_t err = npurtFreeHost(p)) {
		if (!gPinnedFreeReported.exchange(true))
			std::fprintf(stderr, "torch_npurt: npurtFreeHost(%p) failed: %s: %s\n", p,
			             npurtGetErrorName(err), npurtGetLastErrorMessage());
		npurtGetLastError();
	}
}

class PinnedAllocator final : public c10::Allocator {
public:
	c10::DataPtr allocate(size_t n) NPU_ALLOCATE_CONST override
	{
		void *p = nullptr;
		checkedDevice(-1);
		if (n) {
			npurtError_t err = npurtMallocHost(&p, n);
			if (err == npurtErrorHostMemoryAllocation) {
				std::string msg = npurtGetLastErrorMessage();
				npurtGetLastError();
				TORCH_CHECK_WITH(OutOfMemoryError, false,
				                 "pinned host memory: cannot allocate ", n,
				                 " bytes: ", msg,
				                 " (pinned memory counts against `ulimit -l`)");
			}
			check(err, "npurtMallocHost");
		}
		return {p, p, &freePinned, c10::Device(c10::DeviceType::CPU)};
	}

	c10::DeleterFnPtr raw_deleter() const override { return &freePinned; }
	NPU_ALLOCATOR_COPY_DATA(std::memcpy)
};

PinnedAllocator gPinnedAllocator;

// The NPU a pin_memory / is_pinned device argument names (current if none).
int pinDevice(c10::optional<at::Device> device)
{
	TORCH_CHECK(!device || device->type() == kNpu, "pinned memory for ", *device,
	            " is not NPU pinned memory");
	return checkedDevice(device && device->has_index() ? device->index() : -1);
}

bool is_pinned(const at::Tensor &self, c10::optional<at::Device> device)
{
	int dev = pinDevice(device);
	if (!self.is_cpu() || !self.has_storage() || !self.storage().data())
		return false;
	DeviceScope scope(dev);
	npurtPointerAttributes a{};
	check(npurtPointerGetAttributes(&a, self.storage().data()), "npurtPointerGetAttributes");
	return a.type == npurtMemoryTypeHost;
}

at::Tensor pin_memory(const at::Tensor &self, c10::optional<at::Device> device)
{
	TORCH_CHECK(self.is_cpu(), "cannot pin '", self.toString(),
	            "': only dense CPU tensors can be pinned");
	TORCH_CHECK(self.layout() == at::kStrided, "cannot pin a ", self.layout(),
	            " tensor: only strided CPU tensors can be pinned");
	DeviceScope scope(pinDevice(device));
	size_t nbytes =
	        at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.element_size());
	c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, &gPinnedAllocator, false);
	at::Tensor t =
	        at::empty({0}, self.options()).set_(storage, 0, self.sizes(), self.strides());
	t.copy_(self);
	return t;
}

}  // namespace

c10::Allocator *pinnedAllocator()
{
	return &gPinnedAllocator;
}

bool isPinnedByUs(const at::Tensor &t)
{
	return t.has_storage() && t.storage().data_ptr().get_deleter() == &freePinned;
}

npurtHostMemStats hostMemStats(int device)
{
	DeviceScope scope(checkedDevice(device));
	npurtHostMemStats st{};
	check(npurtHostMemGetStats(&st), "npurtHostMemGetStats");
	return st;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("is_pinned", TORCH_FN(is_pinned));
	m.impl("_pin_memory", TORCH_FN(pin_memory));
}

}  // namespace torch_npurt

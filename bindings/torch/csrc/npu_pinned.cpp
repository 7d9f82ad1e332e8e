// npu_pinned.cpp - pinned (page-locked) host memory for CPU tensors:
// the c10 allocator over npurtMallocHost/npurtFreeHost, the is_pinned and
// _pin_memory kernels, and the bookkeeping that keeps a pinned block alive
// until the asynchronous copies that use it have run.
//
// npurtFreeHost unmaps at once, even while a queued copy still reads or
// writes the block (RUNTIME_NEEDS.md), so a freed block whose copies are
// pending is parked here, with one event per copy, and given back to the
// runtime when they have completed (as PyTorch's CachingHostAllocator
// does for CUDA).
#include "npu_ops.h"

#include <torch/library.h>

#include <cstdio>
#include <unordered_map>
#include <vector>

namespace torch_npurt {

namespace {

struct PinnedBlock {
	size_t size = 0;
	int device = 0;
	std::vector<npurtEvent_t> uses;  // copies not known to be complete
	bool freed = false;
};

std::mutex gPinnedLock;
// Leaked on purpose: blocks may be freed by static destructors.
auto &gPinned = *new std::unordered_map<void *, PinnedBlock>();
std::atomic<bool> gPinnedFreeReported{false};

void reportFreeError(void *p, npurtError_t err)
{
	if (!gPinnedFreeReported.exchange(true))
		std::fprintf(stderr, "torch_npurt: npurtFreeHost(%p) failed: %s: %s\n", p,
		             npurtGetErrorName(err), npurtGetLastErrorMessage());
	npurtGetLastError();
}

// Drops the completed events of `b`; true if none is left. (Lock held.)
bool pruneUses(PinnedBlock &b)
{
	size_t keep = 0;
	for (npurtEvent_t e : b.uses) {
		npurtError_t err = npurtEventQuery(e);
		if (err == npurtErrorNotReady) {
			b.uses[keep++] = e;
			continue;
		}
		// Done, or its stream failed: the engine no longer touches the block.
		if (err != npurtSuccess)
			npurtGetLastError();
		npurtEventDestroy(e);
	}
	b.uses.resize(keep);
	return keep == 0;
}

// Gives back parked blocks whose copies have completed.
void releaseParked()
{
	std::vector<void *> done;
	{
		std::lock_guard<std::mutex> g(gPinnedLock);
		for (auto it = gPinned.begin(); it != gPinned.end();) {
			if (it->second.freed && pruneUses(it->second)) {
				done.push_back(it->first);
				it = gPinned.erase(it);
			} else {
				++it;
			}
		}
	}
	for (void *p : done)
		if (npurtError_t err = npurtFreeHost(p))
			reportFreeError(p, err);
}

void freePinned(void *p)
{
	if (!p)
		return;
	bool now = false;
	{
		std::lock_guard<std::mutex> g(gPinnedLock);
		auto it = gPinned.find(p);
		if (it == gPinned.end()) {
			now = true;  // not tracked (cannot happen): free it anyway
		} else if (pruneUses(it->second)) {
			gPinned.erase(it);
			now = true;
		} else {
			it->second.freed = true;  // parked until its copies are done
		}
	}
	if (now)
		if (npurtError_t err = npurtFreeHost(p))
			reportFreeError(p, err);
	releaseParked();
}

class PinnedAllocator final : public c10::Allocator {
public:
	c10::DataPtr allocate(size_t n) const override
	{
		releaseParked();
		void *p = nullptr;
		int dev = checkedDevice(-1);
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
			std::lock_guard<std::mutex> g(gPinnedLock);
			PinnedBlock &b = gPinned[p];
			b.size = n;
			b.device = dev;
		}
		return {p, p, &freePinned, c10::Device(c10::DeviceType::CPU)};
	}

	c10::DeleterFnPtr raw_deleter() const override { return &freePinned; }
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

void recordHostUse(const at::Tensor &host, npurtStream_t stream)
{
	if (!isPinnedByUs(host))
		return;
	void *base = host.storage().data();
	npurtEvent_t ev = nullptr;
	check(npurtEventCreateWithFlags(&ev, npurtEventDisableTiming), "npurtEventCreateWithFlags");
	npurtError_t err = npurtEventRecord(ev, stream);
	if (err != npurtSuccess) {
		npurtEventDestroy(ev);
		check(err, "npurtEventRecord");
	}
	std::lock_guard<std::mutex> g(gPinnedLock);
	auto it = gPinned.find(base);
	if (it == gPinned.end()) {
		npurtEventDestroy(ev);
		return;
	}
	pruneUses(it->second);
	it->second.uses.push_back(ev);
}

size_t parkedPinnedBlocks()
{
	std::lock_guard<std::mutex> g(gPinnedLock);
	size_t n = 0;
	for (auto &kv : gPinned)
		n += kv.second.freed;
	return n;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("is_pinned", TORCH_FN(is_pinned));
	m.impl("_pin_memory", TORCH_FN(pin_memory));
}

}  // namespace torch_npurt

// The caching pool of pinned host memory (npurtMallocHost), one per context.
//
// Pinning is slow (a BO, an mmap and a VM bind; the reverse to give it
// back), and DataLoader-style code pins every batch, so freed blocks stay
// pinned and mapped for the next request, as PyTorch's caching host
// allocator keeps them for CUDA. Policy:
// - Requests round up to a power of two up to 2 MiB (at least a page),
//   beyond that to a multiple of 2 MiB; a request takes the smallest cached
//   block of at least its rounded size and at most twice it.
// - Safe free: a block freed while work queued before the free on any
//   stream of the context (copies read and write pinned memory in place)
//   is still to run is parked until that work has completed; only then is
//   it reused or given back. The free itself does not wait.
// - A request the OS refuses gives the cached blocks back and retries,
//   then waits (bounded) for the parked ones. emptyCache() gives back
//   every cached block; the context's end gives back all of them.
//
// Thread safety: every method may be called from any thread; one mutex
// serialises them. The tracker is called with it held.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "allocator.h"
#include "npurt/npurt.h"

namespace npurt {

class Context;
struct PinnedBuffer;

class HostPool {
public:
	HostPool(Context &ctx, StreamTracker &tracker) : ctx_(ctx), tracker_(tracker) {}
	~HostPool();
	HostPool(const HostPool &) = delete;
	HostPool &operator=(const HostPool &) = delete;

	// A block of at least size bytes, pinned, mapped at its host address
	// in the context, and registered as the context's host range of
	// exactly size bytes (copies are bounds-checked against it), with
	// the npurtHostAlloc flags given.
	npurtError_t allocate(size_t size, unsigned flags, void **ptr, const char *api);
	// Takes back a block allocate() gave; false if ptr is not one (the
	// caller reports it).
	bool deallocate(void *ptr);
	// Gives every cached block back to the OS (parked ones stay parked).
	void emptyCache();
	npurtHostMemStats stats();
	void resetPeakStats();
	// Zeroes the counters (pins, unpins, calls, cache hits).
	void resetAccumulatedStats();

private:
	struct Parked {
		PinnedBuffer *block;
		std::vector<uint64_t> markers;
	};
	static uint64_t roundSize(uint64_t size);
	// With mutex_ held.
	PinnedBuffer *takeCached(uint64_t rounded);
	npurtError_t pinBlock(uint64_t rounded, PinnedBuffer **out, const char *api);
	void pollParked();
	void waitParked();
	void releaseCached();
	void release(PinnedBuffer *b);

	Context &ctx_;
	StreamTracker &tracker_;
	std::mutex mutex_;  // guards everything below
	std::multimap<uint64_t, PinnedBuffer *> cached_;  // by size
	std::vector<Parked> parked_;
	std::map<uint64_t, PinnedBuffer *> live_;  // by address
	npurtHostMemStats stats_{};
};

}  // namespace npurt

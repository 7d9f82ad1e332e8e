// Virtual memory management (npurtMem*: reservations, physical allocations,
// mappings and access); the semantics are in npurt.h. api_vmm.cpp checks
// the arguments' form; this unit owns the objects and their rules.
//
// Locking: opMutex_ serialises the calls that change mappings, whole,
// waits for queued work included; mutex_ guards the tables and is held
// only briefly, never around a wait or a call into a context, so lookups
// (findRange, for every copy of mapped memory) never wait behind a change.
// Order: opMutex_, then a context's locks (its streams' when waiting),
// then mutex_.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "npurt/npurt.h"

namespace npurt {

class AddressSpace;
class Context;

class VirtualMemory {
public:
	static constexpr uint64_t kGranularity = 2ull << 20;

	static VirtualMemory &instance();

	npurtError_t create(Context &ctx, uint64_t size, bool shareable,
	                    npurtMemGenericAllocationHandle_t *out);
	// Shareable allocations: a new dma-buf descriptor of handle's memory;
	// an allocation handle (of ctx) for a descriptor of such memory.
	npurtError_t exportFd(npurtMemGenericAllocationHandle_t handle, int *fd);
	npurtError_t importFd(Context &ctx, int fd, npurtMemGenericAllocationHandle_t *out);
	npurtError_t release(npurtMemGenericAllocationHandle_t handle);
	npurtError_t properties(npurtMemGenericAllocationHandle_t handle,
	                        npurtMemAllocationProp *prop);
	npurtError_t retain(uint64_t addr, npurtMemGenericAllocationHandle_t *out);

	npurtError_t reserve(Context &ctx, AddressSpace &space, uint64_t size, uint64_t align,
	                     uint64_t hint, uint64_t *out);
	npurtError_t freeReservation(uint64_t addr, uint64_t size);

	npurtError_t map(uint64_t addr, uint64_t size, uint64_t offset,
	                 npurtMemGenericAllocationHandle_t handle);
	npurtError_t unmap(uint64_t addr, uint64_t size);
	// flags per device ordinal (npurtMemAccessFlags); -1: not named.
	npurtError_t setAccess(uint64_t addr, uint64_t size, const int *flagsOfDevice, int devices);
	npurtError_t getAccess(uint64_t addr, int device, unsigned long long *flags);

	// For copies, fills and ops: the run of adjacent mappings of ctx's
	// allocations with access that holds addr. False if addr is not in one.
	bool findRange(const Context &ctx, uint64_t addr, uint64_t *base, size_t *size);
	// ctx is being destroyed: its allocations go, with their mappings.
	void forgetContext(Context &ctx);

private:
	struct Allocation {
		Context *ctx = nullptr;
		uint32_t bo = 0;
		uint64_t size = 0;
		int device = 0;
		int handleRefs = 1;  // npurtMemCreate's, npurtMemRetainAllocationHandle's
		int mappings = 0;
		bool shareable = false;  // made with a POSIX descriptor handle type
		bool imported = false;  // another's memory: not charged here
	};
	struct Mapping {
		uint64_t size = 0;
		uint64_t offset = 0;
		npurtMemGenericAllocationHandle_t alloc = 0;
		int access = npurtMemAccessFlagsProtNone;  // as bound in the context
	};
	struct Reservation {
		uint64_t size = 0;
		int device = 0;
		AddressSpace *space = nullptr;
		std::map<uint64_t, Mapping> maps;  // by address
	};

	// With mutex_ held: the reservation holding [addr, addr + size), or
	// null with the error set.
	Reservation *reservationOf(uint64_t addr, uint64_t size, const char *api);
	// With mutex_ held: whether [addr, addr + size) is exactly whole
	// mappings of r, with no gap; sets the error if not.
	bool wholeMappings(Reservation &r, uint64_t addr, uint64_t size, const char *api);
	// With mutex_ held: drops a reference; the allocation's memory goes
	// back to the device at the last (its BO closed, the charge undone).
	void unref(std::map<npurtMemGenericAllocationHandle_t, Allocation>::iterator it);
	// Checks that [addr, addr + size) is whole mappings, then waits for
	// the queued work of the contexts whose mappings there are bound with
	// other than `access` (they are about to lose it). With opMutex_ held.
	npurtError_t quiesce(uint64_t addr, uint64_t size, int access, const char *api);
	// Rebinds one mapping with `access` in its allocation's context.
	npurtError_t rebind(uint64_t addr, Mapping &m, int access, const char *api);

	std::mutex opMutex_;
	std::mutex mutex_;
	std::map<npurtMemGenericAllocationHandle_t, Allocation> allocs_;
	std::map<uint64_t, Reservation> reservations_;  // by address
	npurtMemGenericAllocationHandle_t nextHandle_ = 0;
	std::atomic<bool> anyMapping_{false};  // lookups skip the lock until one exists
};

}  // namespace npurt

// C API: virtual memory management (npurtMem*). Checks the arguments'
// form (null pointers, granularity, flags, locations); vmm.cpp does the
// rest.
#include <string>
#include <vector>

#include "context.h"
#include "error.h"
#include "ipc.h"
#include "mem_usage.h"
#include "runtime.h"
#include "vmm.h"

using npurt::Context;
using npurt::nullArgument;
using npurt::Runtime;
using npurt::setError;
using npurt::VirtualMemory;

namespace {

constexpr uint64_t kGranularity = VirtualMemory::kGranularity;

npurtError_t granular(const char *api, const char *what, uint64_t v, bool nonZero)
{
	if ((nonZero && v == 0) || v % kGranularity)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + what + " " + std::to_string(v) + " is " +
		                        (v ? "not a multiple of the granularity (2 MiB)" : "zero"));
	return npurtSuccess;
}

npurtError_t noFlags(const char *api, unsigned long long flags)
{
	if (flags)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": unknown flags " + npurt::hexAddr(flags));
	return npurtSuccess;
}

npurtError_t checkLocation(const char *api, const npurtMemLocation &loc)
{
	if (loc.type != npurtMemLocationTypeDevice)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": location type " +
		                        std::to_string(static_cast<int>(loc.type)) +
		                        " (only npurtMemLocationTypeDevice is supported)");
	if (loc.id < 0 || loc.id >= Runtime::instance().deviceCount())
		return setError(npurtErrorInvalidDevice, std::string(api) + ": location id " +
		                                                 std::to_string(loc.id) +
		                                                 " is not a device");
	return npurtSuccess;
}

npurtError_t checkProp(const char *api, const npurtMemAllocationProp *prop)
{
	if (!prop)
		return nullArgument(api, "prop");
	if (prop->type != npurtMemAllocationTypePinned)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": allocation type " +
		                        std::to_string(static_cast<int>(prop->type)) +
		                        " (only npurtMemAllocationTypePinned is supported)");
	if (prop->requestedHandleTypes != npurtMemHandleTypeNone &&
	    prop->requestedHandleTypes != npurtMemHandleTypePosixFileDescriptor)
		return setError(
		        npurtErrorNotSupported,
		        std::string(api) + ": shareable handle type " +
		                std::to_string(static_cast<int>(prop->requestedHandleTypes)) +
		                " (only npurtMemHandleTypePosixFileDescriptor)");
	for (unsigned char b : prop->reserved)
		if (b)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": prop->reserved is not zero");
	return checkLocation(api, prop->location);
}

// The runtime started and a current context (of the current device).
npurtError_t current(Context **ctx, const char *api)
{
	return Runtime::instance().currentContext(ctx, api);
}

}  // namespace

extern "C" {

npurtError_t npurtMemGetAllocationGranularity(size_t *granularity,
                                              const npurtMemAllocationProp *prop,
                                              npurtMemAllocationGranularityFlags option)
{
	try {
		const char *api = "npurtMemGetAllocationGranularity";
		if (!granularity)
			return nullArgument(api, "granularity");
		if (option != npurtMemAllocationGranularityMinimum &&
		    option != npurtMemAllocationGranularityRecommended)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": unknown option " +
			                        std::to_string(static_cast<int>(option)));
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		if (npurtError_t err = checkProp(api, prop))
			return err;
		*granularity = kGranularity;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtMemGetAllocationGranularity");
	}
}

npurtError_t npurtMemCreate(npurtMemGenericAllocationHandle_t *handle, size_t size,
                            const npurtMemAllocationProp *prop, unsigned long long flags)
{
	try {
		const char *api = "npurtMemCreate";
		if (!handle)
			return nullArgument(api, "handle");
		if (npurtError_t err = noFlags(api, flags))
			return err;
		if (npurtError_t err = granular(api, "size", size, true))
			return err;
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		if (npurtError_t err = checkProp(api, prop))
			return err;
		if (prop->location.id != c->ordinal())
			return setError(
			        npurtErrorNotSupported,
			        std::string(api) + ": memory of NPU " +
			                std::to_string(prop->location.id) + " while NPU " +
			                std::to_string(c->ordinal()) +
			                " is current (make it current with npurtSetDevice)");
		npurtError_t err = VirtualMemory::instance().create(
		        *c, size,
		        prop->requestedHandleTypes == npurtMemHandleTypePosixFileDescriptor,
		        handle);
		if (err == npurtErrorMemoryAllocation)
			npurt::notifyOutOfMemory(c->ordinal(), size);
		return err;
	} catch (...) {
		return npurt::errorFromException("npurtMemCreate");
	}
}

npurtError_t npurtMemExportToShareableHandle(void *shareableHandle,
                                             npurtMemGenericAllocationHandle_t handle,
                                             npurtMemAllocationHandleType handleType,
                                             unsigned long long flags)
{
	try {
		const char *api = "npurtMemExportToShareableHandle";
		if (!shareableHandle)
			return nullArgument(api, "shareableHandle");
		if (npurtError_t err = noFlags(api, flags))
			return err;
		if (npurtError_t err = npurt::checkShareableType(api, handleType))
			return err;
		return VirtualMemory::instance().exportFd(handle,
		                                          static_cast<int *>(shareableHandle));
	} catch (...) {
		return npurt::errorFromException("npurtMemExportToShareableHandle");
	}
}

npurtError_t npurtMemImportFromShareableHandle(npurtMemGenericAllocationHandle_t *handle,
                                               void *osHandle,
                                               npurtMemAllocationHandleType shHandleType)
{
	try {
		const char *api = "npurtMemImportFromShareableHandle";
		if (!handle)
			return nullArgument(api, "handle");
		if (npurtError_t err = npurt::checkShareableType(api, shHandleType))
			return err;
		const auto fd = reinterpret_cast<intptr_t>(osHandle);
		if (fd < 0 || fd > INT32_MAX)
			return setError(npurtErrorInvalidValue,
			                std::string(api) + ": osHandle " + std::to_string(fd) +
			                        " is not a file descriptor");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		return VirtualMemory::instance().importFd(*c, static_cast<int>(fd), handle);
	} catch (...) {
		return npurt::errorFromException("npurtMemImportFromShareableHandle");
	}
}

npurtError_t npurtMemRelease(npurtMemGenericAllocationHandle_t handle)
{
	try {
		return VirtualMemory::instance().release(handle);
	} catch (...) {
		return npurt::errorFromException("npurtMemRelease");
	}
}

npurtError_t npurtMemGetAllocationPropertiesFromHandle(npurtMemAllocationProp *prop,
                                                       npurtMemGenericAllocationHandle_t handle)
{
	try {
		if (!prop)
			return nullArgument("npurtMemGetAllocationPropertiesFromHandle", "prop");
		return VirtualMemory::instance().properties(handle, prop);
	} catch (...) {
		return npurt::errorFromException("npurtMemGetAllocationPropertiesFromHandle");
	}
}

npurtError_t npurtMemRetainAllocationHandle(npurtMemGenericAllocationHandle_t *handle, void *addr)
{
	try {
		if (!handle)
			return nullArgument("npurtMemRetainAllocationHandle", "handle");
		return VirtualMemory::instance().retain(reinterpret_cast<uint64_t>(addr), handle);
	} catch (...) {
		return npurt::errorFromException("npurtMemRetainAllocationHandle");
	}
}

npurtError_t npurtMemAddressReserve(npurtDeviceptr *ptr, size_t size, size_t alignment,
                                    npurtDeviceptr addr, unsigned long long flags)
{
	try {
		const char *api = "npurtMemAddressReserve";
		if (!ptr)
			return nullArgument(api, "ptr");
		if (npurtError_t err = noFlags(api, flags))
			return err;
		if (npurtError_t err = granular(api, "size", size, true))
			return err;
		if (alignment & (alignment - 1))
			return setError(npurtErrorInvalidValue, std::string(api) + ": alignment " +
			                                                std::to_string(alignment) +
			                                                " is not a power of two");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		const uint64_t align = alignment > kGranularity ? alignment : kGranularity;
		uint64_t got = 0;
		npurtError_t err =
		        VirtualMemory::instance().reserve(*c, c->space(), size, align, addr, &got);
		*ptr = got;
		return err;
	} catch (...) {
		return npurt::errorFromException("npurtMemAddressReserve");
	}
}

npurtError_t npurtMemAddressFree(npurtDeviceptr ptr, size_t size)
{
	try {
		return VirtualMemory::instance().freeReservation(ptr, size);
	} catch (...) {
		return npurt::errorFromException("npurtMemAddressFree");
	}
}

npurtError_t npurtMemMap(npurtDeviceptr ptr, size_t size, size_t offset,
                         npurtMemGenericAllocationHandle_t handle, unsigned long long flags)
{
	try {
		const char *api = "npurtMemMap";
		if (npurtError_t err = noFlags(api, flags))
			return err;
		if (npurtError_t err = granular(api, "address", ptr, true))
			return err;
		if (npurtError_t err = granular(api, "size", size, true))
			return err;
		if (npurtError_t err = granular(api, "offset", offset, false))
			return err;
		return VirtualMemory::instance().map(ptr, size, offset, handle);
	} catch (...) {
		return npurt::errorFromException("npurtMemMap");
	}
}

npurtError_t npurtMemUnmap(npurtDeviceptr ptr, size_t size)
{
	try {
		const char *api = "npurtMemUnmap";
		if (npurtError_t err = granular(api, "address", ptr, true))
			return err;
		if (npurtError_t err = granular(api, "size", size, true))
			return err;
		return VirtualMemory::instance().unmap(ptr, size);
	} catch (...) {
		return npurt::errorFromException("npurtMemUnmap");
	}
}

npurtError_t npurtMemSetAccess(npurtDeviceptr ptr, size_t size, const npurtMemAccessDesc *desc,
                               size_t count)
{
	try {
		const char *api = "npurtMemSetAccess";
		if (!desc && count)
			return nullArgument(api, "desc");
		if (count == 0)
			return setError(npurtErrorInvalidValue, std::string(api) + ": count is 0");
		if (npurtError_t err = granular(api, "address", ptr, true))
			return err;
		if (npurtError_t err = granular(api, "size", size, true))
			return err;
		Context *c = nullptr;  // starts the runtime: the devices are known
		if (npurtError_t err = current(&c, api))
			return err;
		std::vector<int> flagsOf(static_cast<size_t>(Runtime::instance().deviceCount()),
		                         -1);
		for (size_t i = 0; i < count; i++) {
			if (npurtError_t err = checkLocation(api, desc[i].location))
				return err;
			const int f = desc[i].flags;
			if (f != npurtMemAccessFlagsProtNone && f != npurtMemAccessFlagsProtRead &&
			    f != npurtMemAccessFlagsProtReadWrite)
				return setError(npurtErrorInvalidValue,
				                std::string(api) + ": unknown access flags " +
				                        std::to_string(f));
			int &slot = flagsOf[static_cast<size_t>(desc[i].location.id)];
			if (slot >= 0 && slot != f)
				return setError(npurtErrorInvalidValue,
				                std::string(api) + ": NPU " +
				                        std::to_string(desc[i].location.id) +
				                        " is given two different accesses");
			slot = f;
		}
		return VirtualMemory::instance().setAccess(ptr, size, flagsOf.data(),
		                                           static_cast<int>(flagsOf.size()));
	} catch (...) {
		return npurt::errorFromException("npurtMemSetAccess");
	}
}

npurtError_t npurtMemGetAccess(unsigned long long *flags, const npurtMemLocation *location,
                               npurtDeviceptr ptr)
{
	try {
		const char *api = "npurtMemGetAccess";
		if (!flags)
			return nullArgument(api, "flags");
		if (!location)
			return nullArgument(api, "location");
		Context *c = nullptr;
		if (npurtError_t err = current(&c, api))
			return err;
		if (npurtError_t err = checkLocation(api, *location))
			return err;
		return VirtualMemory::instance().getAccess(ptr, location->id, flags);
	} catch (...) {
		return npurt::errorFromException("npurtMemGetAccess");
	}
}

}  // extern "C"

// C API: versions and devices.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "error.h"
#include "runtime.h"

using npurt::Runtime;

using npurt::nullArgument;

static_assert(sizeof(npurtDeviceProp) == 448, "npurtDeviceProp is ABI: grow it into reserved");

namespace {

struct BusId {
	unsigned domain = 0, bus = 0, device = 0, function = 0;
};

// "DDDD:BB:DD.F" or "BB:DD.F", hex digits only (sscanf alone would take
// signs, spaces and trailing text).
bool parseBusId(const char *text, BusId *out)
{
	size_t len = strnlen(text, 32);
	if (len == 0 || len > 16 || std::strspn(text, "0123456789abcdefABCDEF:.") != len)
		return false;
	BusId id;
	int used = 0;
	if (std::sscanf(text, "%x:%x:%x.%x%n", &id.domain, &id.bus, &id.device, &id.function,
	                &used) == 4 &&
	    static_cast<size_t>(used) == len) {
		*out = id;
		return true;
	}
	id = BusId{};
	if (std::sscanf(text, "%x:%x.%x%n", &id.bus, &id.device, &id.function, &used) == 3 &&
	    static_cast<size_t>(used) == len) {
		*out = id;
		return true;
	}
	return false;
}

// npurtDeviceSetLimit/GetLimit: the limit is one of npurtLimit.
npurtError_t checkLimit(const char *api, int which)
{
	if (which >= 0 && which < npurt::Device::kLimits)
		return npurtSuccess;
	return npurt::setError(npurtErrorInvalidValue, std::string(api) + ": limit " +
	                                                       std::to_string(which) +
	                                                       " does not exist");
}

}  // namespace

extern "C" {

npurtError_t npurtRuntimeGetVersion(int *version)
{
	try {
		if (!version)
			return nullArgument("npurtRuntimeGetVersion", "version");
		*version = NPURT_VERSION;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtRuntimeGetVersion");
	}
}

npurtError_t npurtDriverGetVersion(int *version)
{
	try {
		if (!version)
			return nullArgument("npurtDriverGetVersion", "version");
		Runtime &rt = Runtime::instance();
		// Like CUDA: no driver is version 0, not an error.
		*version =
		        rt.start(false) == npurtSuccess ? rt.device(0).prop().driverApiVersion : 0;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDriverGetVersion");
	}
}

npurtError_t npurtGetDeviceCount(int *count)
{
	try {
		if (!count)
			return nullArgument("npurtGetDeviceCount", "count");
		Runtime &rt = Runtime::instance();
		npurtError_t err = rt.start();
		*count = err == npurtSuccess ? rt.deviceCount() : 0;
		return err;
	} catch (...) {
		return npurt::errorFromException("npurtGetDeviceCount");
	}
}

npurtError_t npurtGetDeviceProperties(npurtDeviceProp *prop, int device)
{
	try {
		if (!prop)
			return nullArgument("npurtGetDeviceProperties", "prop");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, "npurtGetDeviceProperties"))
			return err;
		*prop = rt.device(device).prop();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtGetDeviceProperties");
	}
}

npurtError_t npurtSetDevice(int device)
{
	try {
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, "npurtSetDevice"))
			return err;
		// As in CUDA: the device's primary context becomes current.
		npurt::setThreadContext(nullptr);
		npurt::threadDevice() = device;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtSetDevice");
	}
}

npurtError_t npurtGetDevice(int *device)
{
	try {
		if (!device)
			return nullArgument("npurtGetDevice", "device");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		*device = npurt::threadDevice();
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtGetDevice");
	}
}

npurtError_t npurtDeviceGetAttribute(int *value, npurtDeviceAttr attr, int device)
{
	try {
		if (!value)
			return nullArgument("npurtDeviceGetAttribute", "value");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, "npurtDeviceGetAttribute"))
			return err;
		const npurtDeviceProp &p = rt.device(device).prop();
		switch (attr) {
		case npurtDevAttrClockRate:
			*value = p.clockRate;
			break;
		case npurtDevAttrGpuOverlap:
			*value = p.deviceOverlap;
			break;
		case npurtDevAttrMultiProcessorCount:
			*value = p.multiProcessorCount;
			break;
		case npurtDevAttrKernelExecTimeout:
			*value = p.kernelExecTimeoutEnabled;
			break;
		case npurtDevAttrIntegrated:
			*value = p.integrated;
			break;
		case npurtDevAttrCanMapHostMemory:
			*value = p.canMapHostMemory;
			break;
		case npurtDevAttrComputeMode:
			*value = p.computeMode;
			break;
		case npurtDevAttrConcurrentKernels:
			*value = p.concurrentKernels;
			break;
		case npurtDevAttrEccEnabled:
			*value = p.ECCEnabled;
			break;
		case npurtDevAttrPciBusId:
			*value = p.pciBusID;
			break;
		case npurtDevAttrPciDeviceId:
			*value = p.pciDeviceID;
			break;
		case npurtDevAttrAsyncEngineCount:
			*value = p.asyncEngineCount;
			break;
		case npurtDevAttrUnifiedAddressing:
			*value = p.unifiedAddressing;
			break;
		case npurtDevAttrPciDomainId:
			*value = p.pciDomainID;
			break;
		case npurtDevAttrComputeCapabilityMajor:
			*value = p.major;
			break;
		case npurtDevAttrComputeCapabilityMinor:
			*value = p.minor;
			break;
		case npurtDevAttrStreamPrioritiesSupported:
			*value = p.streamPrioritiesSupported;
			break;
		case npurtDevAttrManagedMemory:
			*value = p.managedMemory;
			break;
		case npurtDevAttrConcurrentManagedAccess:
			*value = p.concurrentManagedAccess;
			break;
		case npurtDevAttrIsMultiGpuBoard:
			*value = p.isMultiGpuBoard;
			break;
		case npurtDevAttrHostRegisterSupported:
			*value = p.hostRegisterSupported;
			break;
		case npurtDevAttrMemoryPoolsSupported:
			*value = p.memoryPoolsSupported;
			break;
		case npurtDevAttrMemoryPoolSupportedHandleTypes:
			*value = static_cast<int>(p.memoryPoolSupportedHandleTypes);
			break;
		default:
			return npurt::setError(npurtErrorInvalidValue,
			                       "npurtDeviceGetAttribute: attribute " +
			                               std::to_string(static_cast<int>(attr)) +
			                               " has no meaning for an NPU");
		}
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetAttribute");
	}
}

npurtError_t npurtDeviceCanAccessPeer(int *canAccess, int device, int peerDevice)
{
	try {
		if (!canAccess)
			return nullArgument("npurtDeviceCanAccessPeer", "canAccess");
		if (npurtError_t err = Runtime::instance().checkPair(device, peerDevice,
		                                                     "npurtDeviceCanAccessPeer"))
			return err;
		// Every NPU's engines reach every other's memory once it is
		// mapped (dma-buf import); a device is not its own peer.
		*canAccess = device != peerDevice;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceCanAccessPeer");
	}
}

namespace {

// The current context and the primary context of peerDevice, another
// device.
npurtError_t peerPair(int peerDevice, npurt::Context **self, npurt::Context **peer, const char *api)
{
	Runtime &rt = Runtime::instance();
	if (npurtError_t err = rt.currentContext(self, api))
		return err;
	if (npurtError_t err = rt.checkOrdinal(peerDevice, api))
		return err;
	if (peerDevice == (*self)->ordinal())
		return npurt::setError(npurtErrorInvalidDevice,
		                       std::string(api) + ": NPU " + std::to_string(peerDevice) +
		                               " is the current device, not a peer");
	return rt.primaryContext(peerDevice, peer, api);
}

// op(peerCtx) on the current context once peerCtx is known to be a live
// context.
npurtError_t onPeerContext(npurtContext_t peerCtx, const char *api,
                           npurtError_t (npurt::Context::*op)(npurt::Context &, const char *))
{
	Runtime &rt = Runtime::instance();
	npurt::Context *self = nullptr;
	if (npurtError_t err = rt.currentContext(&self, api))
		return err;
	if (!peerCtx || !rt.isContext(peerCtx))
		return npurt::setError(npurtErrorInvalidHandle,
		                       std::string(api) + ": peerContext is not a live context");
	return (self->*op)(*static_cast<npurt::Context *>(peerCtx), api);
}

}  // namespace

npurtError_t npurtDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	try {
		const char *api = "npurtDeviceEnablePeerAccess";
		if (flags)
			return npurt::setError(npurtErrorInvalidValue,
			                       std::string(api) + ": flags must be 0");
		npurt::Context *self = nullptr, *peer = nullptr;
		if (npurtError_t err = peerPair(peerDevice, &self, &peer, api))
			return err;
		return self->enablePeer(*peer, api);
	} catch (...) {
		return npurt::errorFromException("npurtDeviceEnablePeerAccess");
	}
}

npurtError_t npurtDeviceDisablePeerAccess(int peerDevice)
{
	try {
		const char *api = "npurtDeviceDisablePeerAccess";
		npurt::Context *self = nullptr, *peer = nullptr;
		if (npurtError_t err = peerPair(peerDevice, &self, &peer, api))
			return err;
		return self->disablePeer(*peer, api);
	} catch (...) {
		return npurt::errorFromException("npurtDeviceDisablePeerAccess");
	}
}

npurtError_t npurtCtxEnablePeerAccess(npurtContext_t peerContext, unsigned int flags)
{
	try {
		const char *api = "npurtCtxEnablePeerAccess";
		if (flags)
			return npurt::setError(npurtErrorInvalidValue,
			                       std::string(api) + ": flags must be 0");
		return onPeerContext(peerContext, api, &npurt::Context::enablePeer);
	} catch (...) {
		return npurt::errorFromException("npurtCtxEnablePeerAccess");
	}
}

npurtError_t npurtCtxDisablePeerAccess(npurtContext_t peerContext)
{
	try {
		const char *api = "npurtCtxDisablePeerAccess";
		return onPeerContext(peerContext, api, &npurt::Context::disablePeer);
	} catch (...) {
		return npurt::errorFromException("npurtCtxDisablePeerAccess");
	}
}

npurtError_t npurtDeviceGetP2PAttribute(int *value, npurtDeviceP2PAttr attr, int srcDevice,
                                        int dstDevice)
{
	try {
		const char *api = "npurtDeviceGetP2PAttribute";
		if (!value)
			return nullArgument(api, "value");
		if (npurtError_t err = Runtime::instance().checkPair(srcDevice, dstDevice, api))
			return err;
		if (srcDevice == dstDevice)
			return npurt::setError(npurtErrorInvalidDevice,
			                       std::string(api) +
			                               ": srcDevice and dstDevice are both " +
			                               std::to_string(srcDevice));
		switch (attr) {
		case npurtDevP2PAttrPerformanceRank:
			*value = 0;  // one kind of link between every pair
			return npurtSuccess;
		case npurtDevP2PAttrAccessSupported:
			*value = 1;
			return npurtSuccess;
		case npurtDevP2PAttrNativeAtomicSupported:
		case npurtDevP2PAttrNpurtArrayAccessSupported:
			*value = 0;  // no atomics, no arrays
			return npurtSuccess;
		}
		return npurt::setError(npurtErrorInvalidValue,
		                       std::string(api) + ": unknown attribute " +
		                               std::to_string(static_cast<int>(attr)));
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetP2PAttribute");
	}
}

npurtError_t npurtSetDeviceFlags(unsigned int flags)
{
	try {
		if (flags & ~static_cast<unsigned>(npurtDeviceMask))
			return npurt::setError(npurtErrorInvalidValue,
			                       "npurtSetDeviceFlags: unknown flags " +
			                               npurt::hexAddr(flags & ~npurtDeviceMask));
		unsigned schedule = flags & npurtDeviceScheduleMask;
		if (schedule & (schedule - 1))
			return npurt::setError(
			        npurtErrorInvalidValue,
			        "npurtSetDeviceFlags: more than one schedule flag in " +
			                npurt::hexAddr(flags));
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		rt.device(npurt::threadDevice()).setFlags(flags);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtSetDeviceFlags");
	}
}

npurtError_t npurtGetDeviceFlags(unsigned int *flags)
{
	try {
		if (!flags)
			return nullArgument("npurtGetDeviceFlags", "flags");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		*flags = rt.device(npurt::threadDevice()).flags() | npurtDeviceMapHost;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtGetDeviceFlags");
	}
}

npurtError_t npurtDeviceSetLimit(npurtLimit limit, size_t value)
{
	try {
		const char *api = "npurtDeviceSetLimit";
		const int which = static_cast<int>(limit);
		if (npurtError_t err = checkLimit(api, which))
			return err;
		if (limit == npurtLimitMaxL2FetchGranularity && value > 128)
			return npurt::setError(npurtErrorInvalidValue,
			                       std::string(api) +
			                               ": the L2 fetch granularity is at "
			                               "most 128 bytes, not " +
			                               std::to_string(value));
		if (limit == npurtLimitPersistingL2CacheSize && value)
			return npurt::setError(
			        npurtErrorInvalidValue,
			        std::string(api) +
			                ": the NPU has no L2 cache to set aside (0 only)");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		rt.device(npurt::threadDevice()).setDeviceLimit(which, value);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceSetLimit");
	}
}

npurtError_t npurtDeviceGetLimit(size_t *pValue, npurtLimit limit)
{
	try {
		const char *api = "npurtDeviceGetLimit";
		if (!pValue)
			return nullArgument(api, "pValue");
		const int which = static_cast<int>(limit);
		if (npurtError_t err = checkLimit(api, which))
			return err;
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		*pValue = rt.device(npurt::threadDevice()).deviceLimit(which);
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetLimit");
	}
}

npurtError_t npurtDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	try {
		const char *api = "npurtDeviceGetPCIBusId";
		if (!pciBusId)
			return nullArgument(api, "pciBusId");
		if (len <= 0)
			return npurt::setError(npurtErrorInvalidValue,
			                       std::string(api) + ": len " + std::to_string(len) +
			                               " leaves no room for the id");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		if (npurtError_t err = rt.checkOrdinal(device, api))
			return err;
		const npurtDeviceProp &p = rt.device(device).prop();
		char id[32];
		int n = std::snprintf(id, sizeof(id), "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
		                      p.pciDeviceID);
		std::snprintf(pciBusId, static_cast<size_t>(len), "%s", id);
		if (n >= len)
			return npurt::setError(npurtErrorInvalidValue,
			                       std::string(api) + ": the id takes " +
			                               std::to_string(n + 1) + " bytes, len is " +
			                               std::to_string(len));
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetPCIBusId");
	}
}

npurtError_t npurtDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
	try {
		const char *api = "npurtDeviceGetByPCIBusId";
		if (!device)
			return nullArgument(api, "device");
		if (!pciBusId)
			return nullArgument(api, "pciBusId");
		BusId want;
		if (!parseBusId(pciBusId, &want))
			return npurt::setError(
			        npurtErrorInvalidValue,
			        std::string(api) + ": '" +
			                std::string(pciBusId, strnlen(pciBusId, 32)) +
			                "' is not a bus id of the form DDDD:BB:DD.F");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		for (int i = 0; i < rt.deviceCount(); i++) {
			const npurtDeviceProp &p = rt.device(i).prop();
			if (want.function == 0 &&
			    want.domain == static_cast<unsigned>(p.pciDomainID) &&
			    want.bus == static_cast<unsigned>(p.pciBusID) &&
			    want.device == static_cast<unsigned>(p.pciDeviceID)) {
				*device = i;
				return npurtSuccess;
			}
		}
		return npurt::setError(npurtErrorInvalidDevice,
		                       std::string(api) + ": no NPU has bus id " + pciBusId);
	} catch (...) {
		return npurt::errorFromException("npurtDeviceGetByPCIBusId");
	}
}

npurtError_t npurtChooseDevice(int *device, const npurtDeviceProp *prop)
{
	try {
		const char *api = "npurtChooseDevice";
		if (!device)
			return nullArgument(api, "device");
		if (!prop)
			return nullArgument(api, "prop");
		Runtime &rt = Runtime::instance();
		if (npurtError_t err = rt.start())
			return err;
		size_t nameLen = strnlen(prop->name, sizeof(prop->name));
		int best = 0, bestMet = -1;
		for (int i = 0; i < rt.deviceCount(); i++) {
			const npurtDeviceProp &p = rt.device(i).prop();
			int met = 0;
			met += !nameLen || !std::strncmp(p.name, prop->name, nameLen);
			met += std::make_pair(p.major, p.minor) >=
			       std::make_pair(prop->major, prop->minor);
			met += p.totalGlobalMem >= prop->totalGlobalMem;
			met += p.multiProcessorCount >= prop->multiProcessorCount;
			met += p.asyncEngineCount >= prop->asyncEngineCount;
			if (met > bestMet) {
				best = i;
				bestMet = met;
			}
		}
		*device = best;
		return npurtSuccess;
	} catch (...) {
		return npurt::errorFromException("npurtChooseDevice");
	}
}

}  // extern "C"

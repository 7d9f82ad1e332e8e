#include "runtime.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "error.h"
#include "npu_drm.h"

namespace npurt {
namespace {

int encodeVersion(uint32_t api)
{
	return static_cast<int>((api >> 16) * 1000 + (api & 0xffff) * 10);
}

struct Found {
	uint32_t index;
	std::unique_ptr<Device> device;
};

// Parses NPURT_VISIBLE_DEVICES ("0,2"): the driver indices to expose, in
// that order. Returns false with a message on a malformed list.
bool parseVisible(const char *env, std::vector<uint32_t> &out, std::string &msg)
{
	std::stringstream ss(env);
	std::string tok;
	std::set<uint32_t> seen;
	while (std::getline(ss, tok, ',')) {
		char *end = nullptr;
		errno = 0;
		unsigned long v = std::strtoul(tok.c_str(), &end, 10);
		if (tok.empty() || *end || errno || v > 0xffff || tok[0] == '-') {
			msg = "NPURT_VISIBLE_DEVICES='" + std::string(env) + "': '" + tok +
			      "' is not a device index";
			return false;
		}
		if (!seen.insert(static_cast<uint32_t>(v)).second) {
			msg = "NPURT_VISIBLE_DEVICES='" + std::string(env) + "' lists device " +
			      tok + " twice";
			return false;
		}
		out.push_back(static_cast<uint32_t>(v));
	}
	return true;
}

}  // namespace

Runtime &Runtime::instance()
{
	// Leaked on purpose: threads and atexit handlers may still call in
	// while static destructors run.
	static Runtime *rt = new Runtime();
	return *rt;
}

int &threadDevice()
{
	thread_local int device = 0;
	return device;
}

npurtError_t Runtime::start(bool record)
{
	std::lock_guard<std::mutex> lock(mutex_);
	if (!started_) {
		if (!os_)
			os_ = os::makeDrmInterface();
		startStatus_ = discover();
		started_ = true;
	}
	return record ? setError(startStatus_, startMessage_) : startStatus_;
}

npurtError_t Runtime::discover()
{
	os::Discovery found = os_->openDevices();
	std::vector<Found> devices;
	std::string mismatch;

	for (auto &node : found.devices) {
		drm_npu_device_info info{};
		drm_npu_query q{};
		q.query = DRM_NPU_QUERY_DEVICE_INFO;
		q.data_ptr = reinterpret_cast<uintptr_t>(&info);
		q.size = sizeof(info);
		int ret = node->ioctl(DRM_IOCTL_NPU_QUERY, &q);
		if (ret) {
			found.failures.push_back(osMessage("query " + node->path(), ret));
			continue;
		}
		if ((info.api_version >> 16) != DRM_NPU_API_VERSION_MAJOR) {
			mismatch = node->path() + " speaks uAPI " +
			           std::to_string(info.api_version >> 16) + "." +
			           std::to_string(info.api_version & 0xffff) +
			           ", this runtime needs " +
			           std::to_string(DRM_NPU_API_VERSION_MAJOR) + ".x";
			continue;
		}
		npurtDeviceProp p{};
		std::snprintf(p.name, sizeof(p.name), "%.*s", static_cast<int>(sizeof(info.name)),
		              info.name);
		std::snprintf(p.devicePath, sizeof(p.devicePath), "%s", node->path().c_str());
		p.deviceIndex = static_cast<int>(info.device_index);
		p.engineCount = static_cast<int>(info.num_engines);
		p.copyEngineCount = static_cast<int>(info.num_copy_engines);
		p.computeEngineCount = static_cast<int>(info.num_compute_engines);
		p.totalGlobalMem = info.mem_capacity;
		p.clockRateHz = info.clock_hz;
		p.capabilities = info.capabilities;
		p.vaStart = info.va_start;
		p.vaEnd = info.va_end;
		p.driverApiVersion = encodeVersion(info.api_version);
		p.emulated = (info.capabilities & DRM_NPU_CAP_EMULATED) ? 1 : 0;
		devices.push_back(
		        {info.device_index, std::make_unique<Device>(std::move(node), p)});
	}
	std::sort(devices.begin(), devices.end(),
	          [](const Found &a, const Found &b) { return a.index < b.index; });

	if (const char *env = std::getenv("NPURT_VISIBLE_DEVICES"); env && *env) {
		std::vector<uint32_t> visible;
		if (!parseVisible(env, visible, startMessage_))
			return npurtErrorInvalidValue;
		std::vector<Found> kept;
		for (uint32_t idx : visible) {
			auto it =
			        std::find_if(devices.begin(), devices.end(), [idx](const Found &f) {
				        return f.index == idx && f.device;
			        });
			if (it == devices.end()) {
				startMessage_ = "NPURT_VISIBLE_DEVICES names device " +
				                std::to_string(idx) + ", which does not exist";
				return npurtErrorInvalidDevice;
			}
			kept.push_back(std::move(*it));
		}
		devices = std::move(kept);
	}

	for (auto &f : devices)
		devices_.push_back(std::move(f.device));
	if (!devices_.empty())
		return npurtSuccess;

	if (!mismatch.empty()) {
		startMessage_ = mismatch;
		return npurtErrorInsufficientDriver;
	}
	startMessage_ = "no NPU found: no /dev/dri/renderD* node belongs to the npu driver "
	                "(is npu.ko loaded?)";
	for (const auto &f : found.failures)
		startMessage_ += "; " + f;
	if (found.firstError == EACCES || found.firstError == EPERM)
		startMessage_ +=
		        " (add the user to the group that owns the node, usually 'render')";
	return npurtErrorNoDevice;
}

npurtError_t Runtime::checkOrdinal(int ordinal, const char *api) const
{
	if (ordinal >= 0 && ordinal < deviceCount())
		return npurtSuccess;
	return setError(npurtErrorInvalidDevice,
	                std::string(api) + ": device " + std::to_string(ordinal) + " requested, " +
	                        std::to_string(deviceCount()) + " NPU(s) present (valid: 0.." +
	                        std::to_string(deviceCount() - 1) + ")");
}

void Runtime::resetForTesting(std::unique_ptr<os::Interface> os)
{
	Runtime &rt = instance();
	std::lock_guard<std::mutex> lock(rt.mutex_);
	rt.devices_.clear();
	rt.started_ = false;
	rt.startStatus_ = npurtSuccess;
	rt.startMessage_.clear();
	rt.os_ = std::move(os);
}

}  // namespace npurt

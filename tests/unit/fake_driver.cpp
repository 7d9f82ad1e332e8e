#include "fake_driver.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include "runtime.h"

namespace npurt::testing {
namespace {

std::atomic<int> gOpenCount{0};

class FakeDevice final : public os::Device {
public:
	explicit FakeDevice(FakeNode node) : node_(std::move(node)) {}
	const std::string &path() const override { return node_.path; }
	int ioctl(unsigned long request, void *arg) override
	{
		if (request != DRM_IOCTL_NPU_QUERY)
			return -ENOTTY;
		if (node_.queryErrno)
			return -node_.queryErrno;
		auto *q = static_cast<drm_npu_query *>(arg);
		if (q->query != DRM_NPU_QUERY_DEVICE_INFO || q->flags || q->pad)
			return -EINVAL;
		std::memcpy(reinterpret_cast<void *>(q->data_ptr), &node_.info,
		            std::min<size_t>(q->size, sizeof(node_.info)));
		q->size = sizeof(node_.info);
		return 0;
	}

	int fd() const override { return -1; }
	void *mmap(size_t, uint64_t) override
	{
		errno = ENODEV;
		return nullptr;
	}
	void munmap(void *, size_t) override {}
	std::unique_ptr<os::Device> reopen(int *err) override
	{
		*err = ENODEV;
		return nullptr;
	}

private:
	FakeNode node_;
};

class FakeInterface final : public os::Interface {
public:
	explicit FakeInterface(FakeSystem sys) : sys_(std::move(sys)) {}
	os::Discovery openDevices() override
	{
		gOpenCount++;
		os::Discovery d;
		for (const auto &n : sys_.nodes)
			d.devices.push_back(std::make_unique<FakeDevice>(n));
		d.failures = sys_.failures;
		d.firstError = sys_.firstError;
		return d;
	}
	std::vector<os::ClientUsage> clients() override { return sys_.clients; }
	std::string processName(long pid) override
	{
		auto it = sys_.names.find(pid);
		return it == sys_.names.end() ? "" : it->second;
	}

private:
	FakeSystem sys_;
};

}  // namespace

FakeNode makeNode(uint32_t index, uint32_t apiVersion)
{
	FakeNode n;
	n.path = "/dev/dri/renderD" + std::to_string(128 + index);
	n.info.api_version = apiVersion;
	n.info.device_index = index;
	n.info.mem_capacity = (1ULL << 30) * (index + 1);
	n.info.clock_hz = 1000000000;
	n.info.capabilities = DRM_NPU_CAP_EMULATED;
	n.info.num_engines = 4;
	n.info.num_copy_engines = 2;
	n.info.num_compute_engines = 2;
	n.info.va_start = 0x10000;
	n.info.va_end = 1ULL << 47;
	std::snprintf(n.info.name, sizeof(n.info.name), "fake-npu");
	return n;
}

int openCount()
{
	return gOpenCount.load();
}

void installFake(const FakeSystem &sys)
{
	gOpenCount = 0;
	Runtime::resetForTesting(std::make_unique<FakeInterface>(sys));
}

}  // namespace npurt::testing

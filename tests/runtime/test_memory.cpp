// Memory through libnpurt against the real module (run in the VM): the
// pool, pinned and registered host memory, pointer attributes, copies,
// contexts and IPC across processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "child.h"
#include "npurt/npurt.h"
#include "npurt/npurt.hpp"
#include "vm_knobs.h"

namespace {

std::string lastMessage()
{
	return npurtGetLastErrorMessage();
}

bool contains(const std::string &s, const std::string &needle)
{
	return s.find(needle) != std::string::npos;
}

std::vector<unsigned char> pattern(size_t n, unsigned seed)
{
	std::vector<unsigned char> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = static_cast<unsigned char>((i * 131 + seed) & 0xff);
	return v;
}

class Memory : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		npurtGetLastError();
	}
	void TearDown() override
	{
		npurtGetLastError();
		npurtSetDevice(0);
	}
	static size_t capacity()
	{
		size_t f = 0, t = 0;
		EXPECT_EQ(npurtMemGetInfo(&f, &t), npurtSuccess);
		return t;
	}
};

TEST_F(Memory, MallocCopyRoundTrip)
{
	const size_t n = (1 << 20) + 123;
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, n), npurtSuccess) << lastMessage();
	ASSERT_NE(d, nullptr);
	auto in = pattern(n, 7);
	std::vector<unsigned char> out(n, 0);
	ASSERT_EQ(npurtMemcpy(d, in.data(), n, npurtMemcpyHostToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(out.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(in, out);
	ASSERT_EQ(npurtMemset(static_cast<char *>(d) + 10, 0xab, 100), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(out.data(), d, n, npurtMemcpyDefault), npurtSuccess);
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(out[i], (i >= 10 && i < 110) ? 0xab : in[i]) << i;
	EXPECT_EQ(npurtFree(d), npurtSuccess);
}

TEST_F(Memory, FreshMemoryIsZeroed)
{
	npurtMemEmptyCache();
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 64 << 10), npurtSuccess);
	std::vector<unsigned char> out(64 << 10, 0xff);
	ASSERT_EQ(npurtMemcpy(out.data(), d, out.size(), npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(out, std::vector<unsigned char>(64 << 10, 0));
	npurtFree(d);
}

TEST_F(Memory, ZeroSizeAndNull)
{
	void *d = reinterpret_cast<void *>(1);
	EXPECT_EQ(npurtMalloc(&d, 0), npurtSuccess);
	EXPECT_EQ(d, nullptr);
	EXPECT_EQ(npurtFree(nullptr), npurtSuccess);
	EXPECT_EQ(npurtMalloc(nullptr, 16), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "devPtr is NULL"));
}

TEST_F(Memory, DoubleAndInteriorFreeAreErrors)
{
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	EXPECT_EQ(npurtFree(static_cast<char *>(d) + 512), npurtErrorInvalidValue);
	EXPECT_EQ(npurtFree(d), npurtSuccess);
	EXPECT_EQ(npurtFree(d), npurtErrorInvalidValue);
	char buf[32];
	std::snprintf(buf, sizeof(buf), "0x%llx",
	              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(d)));
	EXPECT_TRUE(contains(lastMessage(), buf)) << lastMessage();
	int host = 0;
	EXPECT_EQ(npurtFree(&host), npurtErrorInvalidValue);
}

TEST_F(Memory, PoolReusesFreedBlocks)
{
	npurtMemStats before{}, after{};
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtMalloc(&a, 3 << 20), npurtSuccess);
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	ASSERT_EQ(npurtMemGetStats(&before), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&b, 3 << 20), npurtSuccess);
	ASSERT_EQ(npurtMemGetStats(&after), npurtSuccess);
	EXPECT_EQ(a, b) << "a freed block is reused";
	EXPECT_EQ(after.deviceAllocs, before.deviceAllocs) << "no new device allocation";
	EXPECT_EQ(after.allocatedBytes, before.allocatedBytes + (3 << 20));
	npurtFree(b);
}

TEST_F(Memory, EmptyCacheReturnsMemoryToTheDevice)
{
	npurtMemEmptyCache();
	size_t free0 = 0, total = 0;
	ASSERT_EQ(npurtMemGetInfo(&free0, &total), npurtSuccess);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 8 << 20), npurtSuccess);
	size_t free1 = 0;
	npurtMemGetInfo(&free1, &total);
	EXPECT_LE(free1 + (8 << 20), free0);
	npurtFree(d);
	size_t free2 = 0;
	npurtMemGetInfo(&free2, &total);
	EXPECT_EQ(free2, free1) << "Free keeps the memory cached";
	npurtMemStats s{};
	npurtMemGetStats(&s);
	EXPECT_GT(s.reservedBytes, 0u);
	ASSERT_EQ(npurtMemEmptyCache(), npurtSuccess);
	size_t free3 = 0;
	npurtMemGetInfo(&free3, &total);
	EXPECT_EQ(free3, free0);
	npurtMemGetStats(&s);
	EXPECT_EQ(s.reservedBytes, 0u);
	EXPECT_GE(s.reservedBytesPeak, 8u << 20);
}

TEST_F(Memory, OutOfMemorySaysWhy)
{
	size_t cap = capacity();
	void *d = nullptr;
	npurtMemStats before{};
	npurtMemGetStats(&before);
	EXPECT_EQ(npurtMalloc(&d, cap + (64 << 20)), npurtErrorMemoryAllocation);
	std::string msg = lastMessage();
	EXPECT_TRUE(contains(msg, "out of device memory")) << msg;
	EXPECT_TRUE(contains(msg, "tried to allocate")) << msg;
	EXPECT_TRUE(contains(msg, "allocated")) << msg;
	EXPECT_TRUE(contains(msg, "reserved")) << msg;
	EXPECT_TRUE(contains(msg, "free")) << msg;
	npurtMemStats after{};
	npurtMemGetStats(&after);
	EXPECT_EQ(after.ooms, before.ooms + 1);
	// Nothing lost: allocation works again.
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	npurtFree(d);
}

TEST_F(Memory, FailedAllocationFirstEmptiesTheCache)
{
	size_t cap = capacity();
	if (cap > (256u << 20))
		GTEST_SKIP() << "needs a small device (mem_size_mb <= 256), has " << (cap >> 20)
		             << " MiB";
	npurtMemEmptyCache();
	// Cache most of the device, then ask for more than is left.
	void *a = nullptr;
	ASSERT_EQ(npurtMalloc(&a, cap / 2), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFree(a), npurtSuccess);
	npurtMemStats before{};
	npurtMemGetStats(&before);
	void *b = nullptr;
	ASSERT_EQ(npurtMalloc(&b, cap * 3 / 4), npurtSuccess) << lastMessage();
	npurtMemStats after{};
	npurtMemGetStats(&after);
	EXPECT_EQ(after.cacheFlushes, before.cacheFlushes + 1);
	npurtFree(b);
	npurtMemEmptyCache();
}

TEST_F(Memory, PointerAttributes)
{
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 10000), npurtSuccess);
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, static_cast<char *>(d) + 100), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeDevice);
	EXPECT_EQ(a.device, 0);
	EXPECT_EQ(a.base, d);
	EXPECT_EQ(a.size, 10000u);
	EXPECT_EQ(a.hostPointer, nullptr);
	npurtFree(d);
	EXPECT_EQ(npurtPointerGetAttributes(&a, d), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live device memory")) << lastMessage();

	int local = 0;
	ASSERT_EQ(npurtPointerGetAttributes(&a, &local), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeUnregistered);
	EXPECT_EQ(a.device, -1);
	EXPECT_EQ(npurtPointerGetAttributes(nullptr, &local), npurtErrorInvalidValue);
}

TEST_F(Memory, PinnedHostMemory)
{
	void *h = nullptr;
	ASSERT_EQ(npurtMallocHost(&h, 100000), npurtSuccess) << lastMessage();
	auto in = pattern(100000, 3);
	std::memcpy(h, in.data(), in.size());
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, static_cast<char *>(h) + 5), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeHost);
	EXPECT_EQ(a.hostPointer, static_cast<char *>(h) + 5);
	EXPECT_EQ(a.devicePointer, a.hostPointer) << "unified addressing";
	EXPECT_EQ(a.base, h);
	EXPECT_EQ(a.size, 100000u);

	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, in.size()), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(d, h, in.size(), npurtMemcpyDefault), npurtSuccess);
	std::memset(h, 0, in.size());
	ASSERT_EQ(npurtMemcpy(h, d, in.size(), npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(std::memcmp(h, in.data(), in.size()), 0);
	npurtFree(d);
	EXPECT_EQ(npurtFreeHost(h), npurtSuccess);
	EXPECT_EQ(npurtFreeHost(h), npurtErrorInvalidValue);
	int local = 0;
	EXPECT_EQ(npurtFreeHost(&local), npurtErrorInvalidValue);
	EXPECT_EQ(npurtFreeHost(nullptr), npurtSuccess);
	void *z = reinterpret_cast<void *>(1);
	EXPECT_EQ(npurtMallocHost(&z, 0), npurtSuccess);
	EXPECT_EQ(z, nullptr);
}

npurtHostMemStats hostStats()
{
	npurtHostMemStats st{};
	EXPECT_EQ(npurtHostMemGetStats(&st), npurtSuccess) << lastMessage();
	return st;
}

// npurtFreeHost keeps the block pinned for the next request of its size
// class, bounded by what was asked for, not by the rounded block.
TEST_F(Memory, PinnedPoolReusesFreedBlocks)
{
	ASSERT_EQ(npurtMemEmptyCache(), npurtSuccess);
	const npurtHostMemStats s0 = hostStats();
	void *h = nullptr, *h2 = nullptr;
	ASSERT_EQ(npurtMallocHost(&h, 100000), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFreeHost(h), npurtSuccess) << lastMessage();
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, h), npurtSuccess);
	EXPECT_NE(a.type, npurtMemoryTypeHost) << "a freed block is no longer the user's";
	ASSERT_EQ(npurtMallocHost(&h2, 90000), npurtSuccess) << lastMessage();
	EXPECT_EQ(h2, h) << "the cached block serves the next request of its class";
	npurtHostMemStats s1 = hostStats();
	EXPECT_EQ(s1.hostAllocs, s0.hostAllocs + 1);
	EXPECT_EQ(s1.cacheHits, s0.cacheHits + 1);
	EXPECT_EQ(s1.allocatedBytes, s0.allocatedBytes + 131072);
	ASSERT_EQ(npurtPointerGetAttributes(&a, h2), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeHost);
	EXPECT_EQ(a.size, 90000u);

	// Bounded by the 90000 bytes asked for, though the block holds 128 KiB.
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 100000), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemcpy(d, h2, 100000, npurtMemcpyHostToDevice), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overrun")) << lastMessage();
	EXPECT_EQ(npurtMemcpy(h2, d, 90001, npurtMemcpyDeviceToHost), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy(h2, d, 90000, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	npurtFree(d);

	ASSERT_EQ(npurtFreeHost(h2), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtFreeHost(h2), npurtErrorInvalidValue) << "a double free is reported";
	s1 = hostStats();
	EXPECT_EQ(s1.cachedBlocks, s0.cachedBlocks + 1);
	EXPECT_EQ(s1.reservedBytes, s0.reservedBytes + 131072);
	ASSERT_EQ(npurtMemEmptyCache(), npurtSuccess);
	s1 = hostStats();
	EXPECT_EQ(s1.reservedBytes, s0.reservedBytes) << "emptyCache unpins cached blocks";
	EXPECT_EQ(s1.hostFrees, s0.hostFrees + 1);
	EXPECT_EQ(s1.cachedBlocks, 0u);
}

// A small request does not pin down a large cached block.
TEST_F(Memory, PinnedPoolKeepsLargeBlocksForLargeRequests)
{
	void *big = nullptr, *small = nullptr, *again = nullptr;
	ASSERT_EQ(npurtMallocHost(&big, 8u << 20), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtFreeHost(big), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMallocHost(&small, 4096), npurtSuccess) << lastMessage();
	EXPECT_NE(small, big);
	ASSERT_EQ(npurtMallocHost(&again, (6u << 20) + 1), npurtSuccess) << lastMessage();
	EXPECT_EQ(again, big) << "8 MiB serves a request of 6 MiB";
	EXPECT_EQ(npurtFreeHost(small), npurtSuccess);
	EXPECT_EQ(npurtFreeHost(again), npurtSuccess);
	ASSERT_EQ(npurtMemEmptyCache(), npurtSuccess);
}

// Threads pin, copy asynchronously and free at once (the DataLoader
// pattern), each on its stream: every copy sees its own bytes.
TEST_F(Memory, ThreadsFreePinnedMemoryUnderQueuedCopies)
{
	const uint64_t live = hostStats().allocatedBytes;
	std::vector<std::thread> threads;
	std::vector<int> failures(4, 0);
	for (int t = 0; t < 4; t++) {
		threads.emplace_back([t, &failures] {
			npurtSetDevice(0);
			npurtStream_t s = nullptr;
			if (npurtStreamCreate(&s) != npurtSuccess) {
				failures[t]++;
				return;
			}
			for (int i = 0; i < 20; i++) {
				const size_t n = 4096u << ((t + i) % 6);
				auto in = pattern(n, static_cast<unsigned>(t * 100 + i));
				void *h = nullptr, *back = nullptr, *d = nullptr;
				bool ok = npurtMalloc(&d, n) == npurtSuccess &&
				          npurtMallocHost(&h, n) == npurtSuccess;
				if (ok) {
					std::memcpy(h, in.data(), n);
					ok = npurtMemcpyAsync(d, h, n, npurtMemcpyHostToDevice,
					                      s) == npurtSuccess &&
					     npurtFreeHost(h) == npurtSuccess &&
					     npurtMallocHost(&back, n) == npurtSuccess;
				}
				if (ok) {
					std::memset(back, 0, n);
					ok = npurtMemcpyAsync(back, d, n, npurtMemcpyDeviceToHost,
					                      s) == npurtSuccess &&
					     npurtStreamSynchronize(s) == npurtSuccess &&
					     std::memcmp(back, in.data(), n) == 0;
				}
				failures[t] += !ok;
				npurtFreeHost(back);
				npurtFree(d);
			}
			npurtStreamDestroy(s);
		});
	}
	for (auto &t : threads)
		t.join();
	for (int f : failures)
		EXPECT_EQ(f, 0);
	EXPECT_EQ(hostStats().allocatedBytes, live) << "every block was freed";
}

TEST_F(Memory, RegisteredHostMemory)
{
	std::vector<unsigned char> buf(300000);
	unsigned char *p = buf.data() + 1;  // deliberately unaligned
	const size_t n = 200000;
	ASSERT_EQ(npurtHostRegister(p, n, npurtHostRegisterDefault), npurtSuccess) << lastMessage();
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, p + 10), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeHost);
	EXPECT_EQ(a.base, p);
	EXPECT_EQ(a.size, n);
	EXPECT_EQ(npurtHostRegister(p + 100, 10, 0), npurtErrorHostMemoryAlreadyRegistered);

	void *d = nullptr;
	auto in = pattern(n, 9);
	ASSERT_EQ(npurtMalloc(&d, n), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(d, in.data(), n, npurtMemcpyHostToDevice), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(p, d, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(std::memcmp(p, in.data(), n), 0);
	npurtFree(d);

	EXPECT_EQ(npurtHostUnregister(p + 1), npurtErrorHostMemoryNotRegistered);
	EXPECT_EQ(npurtHostUnregister(p), npurtSuccess);
	EXPECT_EQ(npurtHostUnregister(p), npurtErrorHostMemoryNotRegistered);
	EXPECT_EQ(npurtPointerGetAttributes(&a, p), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeUnregistered);
}

TEST_F(Memory, RegisterRejectsBadRanges)
{
	std::vector<char> buf(8192);
	EXPECT_EQ(npurtHostRegister(nullptr, 10, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtHostRegister(buf.data(), 0, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtHostRegister(buf.data(), 10, 0x100), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "unknown flags")) << lastMessage();
	EXPECT_EQ(npurtHostRegister(buf.data(), SIZE_MAX, 0), npurtErrorInvalidValue);

	void *hole =
	        mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(hole, MAP_FAILED);
	munmap(hole, 1 << 16);
	EXPECT_EQ(npurtHostRegister(hole, 1 << 16, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not entirely mapped")) << lastMessage();

	void *ro = mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(ro, MAP_FAILED);
	EXPECT_EQ(npurtHostRegister(ro, 1 << 16, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtHostRegister(ro, 1 << 16, npurtHostRegisterReadOnly), npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(npurtHostUnregister(ro), npurtSuccess);
	munmap(ro, 1 << 16);
}

// A folder on ext4 (a file system that writes back), on a loop device in
// the guest's tmpfs; gone with the object. ok() is false when this system
// cannot make one (not root, no loop driver or mkfs.ext4).
class Ext4Folder {
public:
	Ext4Folder()
	{
		if (geteuid() != 0 || !mkdtemp(top_))
			return;
		made_ = true;
		std::string t = top_;
		// The drivers first: the guest has no udev static nodes to load
		// loop on demand, and the kernel's modprobe is not the chroot's.
		ok_ = std::system(("modprobe -q loop; modprobe -q ext4; cd " + t +
		                   " && truncate -s 16M img && mkfs.ext4 -q -F img && "
		                   "mkdir mnt && mount -o loop img mnt")
		                          .c_str()) == 0;
		if (!ok_)
			remove();
	}
	~Ext4Folder()
	{
		if (ok_ && std::system(("umount " + std::string(top_) + "/mnt").c_str()) != 0)
			ADD_FAILURE() << "cannot unmount " << top_ << "/mnt";
		remove();
	}
	Ext4Folder(const Ext4Folder &) = delete;
	Ext4Folder &operator=(const Ext4Folder &) = delete;
	bool ok() const { return ok_; }
	std::string path(const std::string &name) const
	{
		return std::string(top_) + "/mnt/" + name;
	}

private:
	void remove()
	{
		if (made_ && std::system(("rm -rf " + std::string(top_)).c_str()) != 0)
			ADD_FAILURE() << "cannot remove " << top_;
	}
	char top_[22] = "/tmp/npurt-ext4XXXXXX";
	bool made_ = false, ok_ = false;
};

// A shared mapping of a file on ext4 cannot be registered for the device
// to write (the driver refuses the pin on every kernel: writeback would
// not see the device's writes); read-only it can. Plain copies from and to
// it work whatever their size (the large ones stage when the pin is
// refused), and what they write reaches the file.
TEST_F(Memory, SharedMappingOfAFileThatIsWrittenBack)
{
	Ext4Folder folder;
	if (!folder.ok())
		GTEST_SKIP() << "cannot mount an ext4 image (needs root, loop, mkfs.ext4)";
	const size_t n = 4 << 20;  // past the size at which pageable copies pin
	int fd = open(folder.path("f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(ftruncate(fd, n), 0);
	auto *m = static_cast<unsigned char *>(
	        mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
	ASSERT_NE(m, MAP_FAILED);
	auto in = pattern(n, 21);
	std::memcpy(m, in.data(), n);

	EXPECT_EQ(npurtHostRegister(m, n, npurtHostRegisterDefault), npurtErrorNotSupported);
	EXPECT_TRUE(contains(lastMessage(), "maps a file shared")) << lastMessage();
	EXPECT_EQ(npurtHostRegister(m + 4096, 8192, npurtHostRegisterDefault),
	          npurtErrorNotSupported);
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, m), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeUnregistered) << "a refused registration leaves nothing";

	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, n), npurtSuccess);
	ASSERT_EQ(npurtHostRegister(m, n, npurtHostRegisterReadOnly), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(d, m, n, npurtMemcpyHostToDevice), npurtSuccess) << lastMessage();
	std::vector<unsigned char> back(n);
	ASSERT_EQ(npurtMemcpy(back.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(back, in);
	EXPECT_EQ(npurtHostUnregister(m), npurtSuccess);

	auto out = pattern(n, 22);
	ASSERT_EQ(npurtMemcpy(d, out.data(), n, npurtMemcpyHostToDevice), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(m, d, n, npurtMemcpyDeviceToHost), npurtSuccess) << lastMessage();
	EXPECT_EQ(std::memcmp(m, out.data(), n), 0);
	ASSERT_EQ(npurtMemcpy(d, m + 1, n - 1, npurtMemcpyHostToDevice), npurtSuccess)
	        << lastMessage();
	ASSERT_EQ(npurtMemcpy(back.data(), d, n - 1, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(std::memcmp(back.data(), out.data() + 1, n - 1), 0);
	npurtFree(d);

	ASSERT_EQ(munmap(m, n), 0);
	ASSERT_EQ(pread(fd, back.data(), n, 0), static_cast<ssize_t>(n));
	EXPECT_EQ(back, out) << "the device's copy reached the file";
	close(fd);
}

TEST_F(Memory, CopiesAreChecked)
{
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 4096), npurtSuccess);
	std::vector<char> h(8192);
	EXPECT_EQ(npurtMemcpy(d, h.data(), 4097, npurtMemcpyHostToDevice), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "overrun its allocation of 4096 bytes"))
	        << lastMessage();
	EXPECT_EQ(npurtMemcpy(h.data(), static_cast<char *>(d) + 4000, 97, npurtMemcpyDefault),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy(h.data(), d, 16, npurtMemcpyHostToDevice), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemcpyHostToDevice but dst")) << lastMessage();
	EXPECT_EQ(npurtMemcpy(d, h.data(), 16, static_cast<npurtMemcpyKind>(9)),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy(nullptr, h.data(), 16, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemcpy(d, h.data(), 0, npurtMemcpyDefault), npurtSuccess);
	EXPECT_EQ(npurtMemset(h.data(), 0, 16), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemset(d, 0, 4097), npurtErrorInvalidValue);
	npurtFree(d);
	EXPECT_EQ(npurtMemcpy(h.data(), d, 16, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not live device memory")) << lastMessage();
}

TEST_F(Memory, DeviceToDeviceAcrossNpus)
{
	if (npurt::deviceCount() < 2)
		GTEST_SKIP() << "needs two NPUs";
	const size_t n = 3 << 20;
	auto in = pattern(n, 11);
	void *a = nullptr, *b = nullptr;
	ASSERT_EQ(npurtMalloc(&a, n), npurtSuccess);
	ASSERT_EQ(npurtMemcpy(a, in.data(), n, npurtMemcpyHostToDevice), npurtSuccess);
	ASSERT_EQ(npurtSetDevice(1), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&b, n), npurtSuccess);
	npurtPointerAttributes attr{};
	npurtPointerGetAttributes(&attr, b);
	EXPECT_EQ(attr.device, 1);
	npurtPointerGetAttributes(&attr, a);
	EXPECT_EQ(attr.device, 0);
	// Contexts are isolated: NPU 1's context reaches NPU 0's memory only
	// with peer access (unlike CUDA, where unified addressing lets any
	// copy name any device's memory).
	EXPECT_EQ(npurtMemcpy(b, a, n, npurtMemcpyDefault), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "memory of NPU 0")) << lastMessage();
	ASSERT_EQ(npurtDeviceEnablePeerAccess(0, 0), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemcpy(b, a, n, npurtMemcpyDefault), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtDeviceDisablePeerAccess(0), npurtSuccess) << lastMessage();
	std::vector<unsigned char> out(n);
	ASSERT_EQ(npurtMemcpy(out.data(), b, n, npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(in, out);
	npurtFree(b);
	npurtSetDevice(0);
	npurtFree(a);
}

TEST_F(Memory, ContextsOwnTheirMemory)
{
	npurtContext_t primary = nullptr;
	ASSERT_EQ(npurtCtxGetCurrent(&primary), npurtSuccess);
	size_t free0 = 0, total = 0;
	npurtMemEmptyCache();
	npurtMemGetInfo(&free0, &total);

	npurtContext_t ctx = nullptr;
	ASSERT_EQ(npurtCtxCreate(&ctx, 0, 0), npurtSuccess) << lastMessage();
	npurtContext_t cur = nullptr;
	npurtCtxGetCurrent(&cur);
	EXPECT_EQ(cur, ctx);
	EXPECT_NE(ctx, primary);
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 16 << 20), npurtSuccess);
	size_t free1 = 0;
	npurtMemGetInfo(&free1, &total);
	EXPECT_LE(free1 + (16 << 20), free0);
	// Destroying the context frees what it allocated.
	ASSERT_EQ(npurtCtxDestroy(ctx), npurtSuccess);
	size_t free2 = 0;
	npurtMemGetInfo(&free2, &total);
	EXPECT_EQ(free2, free0);
	npurtCtxGetCurrent(&cur);
	EXPECT_EQ(cur, primary) << "back on the primary context";
	EXPECT_EQ(npurtCtxDestroy(ctx), npurtErrorInvalidHandle);
	EXPECT_EQ(npurtCtxSetCurrent(ctx), npurtErrorInvalidHandle);
	int bogus = 0;
	EXPECT_EQ(npurtCtxSetCurrent(reinterpret_cast<npurtContext_t>(&bogus)),
	          npurtErrorInvalidHandle);
	EXPECT_EQ(npurtCtxCreate(&ctx, 1, 0), npurtErrorInvalidValue);
	EXPECT_EQ(npurtCtxCreate(&ctx, 0, 99), npurtErrorInvalidDevice);
	EXPECT_EQ(npurtCtxCreate(nullptr, 0, 0), npurtErrorInvalidValue);
}

TEST_F(Memory, ThreadsAllocateAndCopyConcurrently)
{
	std::vector<std::thread> threads;
	std::vector<int> failures(4, 0);
	for (int t = 0; t < 4; t++) {
		threads.emplace_back([t, &failures] {
			for (int i = 0; i < 30; i++) {
				size_t n = 1000 +
				           static_cast<size_t>((t * 7919 + i * 104729) % 200000);
				auto in = pattern(n, static_cast<unsigned>(t * 100 + i));
				std::vector<unsigned char> out(n);
				void *d = nullptr;
				if (npurtMalloc(&d, n) != npurtSuccess ||
				    npurtMemcpy(d, in.data(), n, npurtMemcpyHostToDevice) ||
				    npurtMemcpy(out.data(), d, n, npurtMemcpyDeviceToHost) ||
				    out != in || npurtFree(d)) {
					failures[t]++;
				}
			}
		});
	}
	for (auto &t : threads)
		t.join();
	for (int f : failures)
		EXPECT_EQ(f, 0);
}

// IPC: the parent exports, a child process (this binary again, exec'd)
// imports over a Unix socket, checks the data and writes its own.
constexpr const char *kIpcEnv = "NPURT_TEST_IPC_SOCKET";

using npurt_test::recvFd;
using npurt_test::sendFd;

constexpr const char *kIpcModeEnv = "NPURT_TEST_IPC_MODE";

// The child of the IPC tests: gets the handle from the parent over the
// socket, as bytes ("bytes"), with the descriptor passed alongside
// ("scm"), or as bytes in a process of another user ("other-user"), opens
// it, checks the parent's data and writes its own.
TEST(Ipc, ChildSide)
{
	const char *env = std::getenv(kIpcEnv);
	if (!env)
		GTEST_SKIP() << "runs only as the child of the Memory.Ipc* tests";
	const std::string mode = std::getenv(kIpcModeEnv) ? std::getenv(kIpcModeEnv) : "bytes";
	int sock = std::atoi(env);
	npurtIpcMemHandle_t h{};
	if (mode == "scm" || mode == "vmm") {
		int fd = recvFd(sock, &h, sizeof(h));
		ASSERT_GE(fd, 0);
		h.fd = fd;
		h.pid = 0;  // the descriptor is this process's
	} else {
		ASSERT_EQ(read(sock, &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
	}
	void *d = nullptr;
	if (mode == "event") {
		// The handles, then: ready; the parent enqueues slow work on
		// the memory and records the event; go: wait for the event on
		// a stream of this process and read the memory behind it.
		npurtIpcEventHandle_t eh{};
		ASSERT_EQ(read(sock, &eh, sizeof(eh)), static_cast<ssize_t>(sizeof(eh)));
		npurtEvent_t ev = nullptr;
		npurtStream_t s = nullptr;
		void *host = nullptr;
		const size_t n = 1 << 20;
		ASSERT_EQ(npurtIpcOpenMemHandle(&d, h, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtIpcOpenEventHandle(&ev, eh), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
		ASSERT_EQ(npurtMallocHost(&host, n), npurtSuccess);
		char c = 'R';
		ASSERT_EQ(write(sock, &c, 1), 1);
		ASSERT_EQ(read(sock, &c, 1), 1);
		ASSERT_EQ(c, 'G');
		ASSERT_EQ(npurtStreamWaitEvent(s, ev, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtMemcpyAsync(host, d, n, npurtMemcpyDeviceToHost, s), npurtSuccess);
		ASSERT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtEventQuery(ev), npurtSuccess);
		EXPECT_EQ(npurtEventSynchronize(ev), npurtSuccess) << lastMessage();
		auto *b = static_cast<unsigned char *>(host);
		size_t first = 0;
		while (first < n && b[first] == 0x77)
			first++;
		EXPECT_EQ(first, n) << "the copy ran before the other process's work it waited for";
		EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
		EXPECT_EQ(npurtIpcCloseMemHandle(d), npurtSuccess);
		npurtFreeHost(host);
		npurtStreamDestroy(s);
		char done = 1;
		ASSERT_EQ(write(sock, &done, 1), 1);
		return;
	}
	if (mode == "vmm") {
		// A shareable npurtMemCreate allocation's descriptor, passed
		// over the socket: imported, mapped, read, written.
		const int fd = h.fd;
		npurtMemGenericAllocationHandle_t a = 0;
		ASSERT_EQ(npurtMemImportFromShareableHandle(
		                  &a, reinterpret_cast<void *>(static_cast<intptr_t>(fd)),
		                  npurtMemHandleTypePosixFileDescriptor),
		          npurtSuccess)
		        << lastMessage();
		close(fd);  // the import holds the memory
		npurtMemAllocationProp prop{};
		ASSERT_EQ(npurtMemGetAllocationPropertiesFromHandle(&prop, a), npurtSuccess);
		EXPECT_EQ(prop.requestedHandleTypes, npurtMemHandleTypePosixFileDescriptor);
		npurtDeviceptr base = 0;
		ASSERT_EQ(npurtMemAddressReserve(&base, h.size, 0, 0, 0), npurtSuccess);
		ASSERT_EQ(npurtMemMap(base, h.size, 0, a, 0), npurtSuccess) << lastMessage();
		npurtMemAccessDesc rw{};
		rw.location.type = npurtMemLocationTypeDevice;
		rw.location.id = 0;
		rw.flags = npurtMemAccessFlagsProtReadWrite;
		ASSERT_EQ(npurtMemSetAccess(base, h.size, &rw, 1), npurtSuccess) << lastMessage();
		void *d = reinterpret_cast<void *>(base);
		std::vector<unsigned char> got(1 << 20);
		ASSERT_EQ(npurtMemcpy(got.data(), d, got.size(), npurtMemcpyDeviceToHost),
		          npurtSuccess)
		        << lastMessage();
		EXPECT_EQ(got, pattern(1 << 20, 21));
		auto reply = pattern(1 << 20, 42);
		ASSERT_EQ(npurtMemcpy(d, reply.data(), reply.size(), npurtMemcpyHostToDevice),
		          npurtSuccess);
		EXPECT_EQ(npurtMemUnmap(base, h.size), npurtSuccess);
		EXPECT_EQ(npurtMemRelease(a), npurtSuccess);
		EXPECT_EQ(npurtMemAddressFree(base, h.size), npurtSuccess);
		char done = 1;
		ASSERT_EQ(write(sock, &done, 1), 1);
		return;
	}
	if (mode == "twice") {
		// Two opens share one mapping; the last close waits for the
		// work queued on it (slowed down) instead of unmapping under it.
		void *again = nullptr;
		ASSERT_EQ(npurtIpcOpenMemHandle(&d, h, 0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtIpcOpenMemHandle(&again, h, 0), npurtSuccess) << lastMessage();
		EXPECT_EQ(again, d);
		EXPECT_EQ(npurtIpcCloseMemHandle(again), npurtSuccess);
		std::vector<unsigned char> got(1 << 20);
		ASSERT_EQ(npurtMemcpy(got.data(), d, got.size(), npurtMemcpyDeviceToHost),
		          npurtSuccess)
		        << "open after one of two closes: " << lastMessage();
		EXPECT_EQ(got, pattern(1 << 20, 21));
		npurtStream_t s = nullptr;
		ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
		{
			vmknobs::JobLatency slow(0, vmknobs::latencyUs());
			ASSERT_EQ(npurtMemsetAsync(d, 0x5a, 1 << 20, s), npurtSuccess)
			        << lastMessage();
			EXPECT_EQ(npurtIpcCloseMemHandle(d), npurtSuccess) << lastMessage();
			EXPECT_EQ(npurtStreamQuery(s), npurtSuccess)
			        << "the close returned before the work queued on the memory";
		}
		EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtIpcCloseMemHandle(d), npurtErrorInvalidValue) << "closed twice";
		npurtStreamDestroy(s);
		char done = 1;
		ASSERT_EQ(write(sock, &done, 1), 1);
		return;
	}
	if (mode == "other-user") {
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);  // opened as root
		ASSERT_EQ(setgid(65534), 0);
		ASSERT_EQ(setuid(65534), 0);
		EXPECT_EQ(npurtIpcOpenMemHandle(&d, h, 0), npurtErrorPermission);
		EXPECT_TRUE(contains(lastMessage(), "another user")) << lastMessage();
		char done = 1;
		ASSERT_EQ(write(sock, &done, 1), 1);
		return;
	}
	if (mode == "seccomp-open" || mode == "seccomp-getfd") {
		// A container's seccomp profile refuses pidfd_open (or
		// pidfd_getfd as if it did not exist): a permission error that
		// says so, which torch_npurt's receivers answer by asking the
		// sender's broker; the same handle passed with its descriptor
		// still opens.
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
		ASSERT_TRUE(mode == "seccomp-open"
		                    ? npurt_test::refuseSyscall(SYS_pidfd_open, EPERM)
		                    : npurt_test::refuseSyscall(SYS_pidfd_getfd, ENOSYS));
		EXPECT_EQ(npurtIpcOpenMemHandle(&d, h, 0), npurtErrorPermission);
		EXPECT_TRUE(contains(lastMessage(), "seccomp")) << lastMessage();
		EXPECT_TRUE(contains(lastMessage(), std::to_string(h.pid))) << lastMessage();
		EXPECT_EQ(npurtGetLastError(), npurtErrorPermission);
		char done = 1;
		ASSERT_EQ(write(sock, &done, 1), 1);
		return;
	}
	ASSERT_EQ(npurtIpcOpenMemHandle(&d, h, 0), npurtSuccess) << lastMessage();
	if (mode == "scm")
		close(h.fd);
	auto want = pattern(1 << 20, 21);
	std::vector<unsigned char> got(1 << 20);
	ASSERT_EQ(npurtMemcpy(got.data(), d, got.size(), npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(got, want);
	auto reply = pattern(1 << 20, 42);
	ASSERT_EQ(npurtMemcpy(d, reply.data(), reply.size(), npurtMemcpyHostToDevice),
	          npurtSuccess);
	npurtPointerAttributes a{};
	ASSERT_EQ(npurtPointerGetAttributes(&a, d), npurtSuccess);
	EXPECT_EQ(a.type, npurtMemoryTypeDevice);
	EXPECT_EQ(npurtFree(d), npurtErrorInvalidValue) << "IPC memory is closed, not freed";
	EXPECT_EQ(npurtIpcCloseMemHandle(d), npurtSuccess);
	EXPECT_EQ(npurtIpcCloseMemHandle(d), npurtErrorInvalidValue);
	char done = 1;
	ASSERT_EQ(write(sock, &done, 1), 1);
}

// Runs Ipc.ChildSide in a child process in `mode`, handing it h (and, in
// mode "event", eh, then taking part in its protocol by calling between()
// between the child's ready and go); whether it finished and exited 0.
void runIpcChild(const char *mode, const npurtIpcMemHandle_t &h,
                 const npurtIpcEventHandle_t *eh = nullptr,
                 const std::function<void()> &between = {})
{
	int sv[2];
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		std::string env = std::string(kIpcEnv) + "=" + std::to_string(sv[1]);
		std::string menv = std::string(kIpcModeEnv) + "=" + mode;
		putenv(const_cast<char *>(env.c_str()));
		putenv(const_cast<char *>(menv.c_str()));
		execl("/proc/self/exe", "npurt_vm_tests", "--gtest_filter=Ipc.ChildSide",
		      static_cast<char *>(nullptr));
		_exit(127);
	}
	close(sv[1]);
	if (std::string(mode) == "scm" || std::string(mode) == "vmm")
		ASSERT_EQ(sendFd(sv[0], h.fd, &h, sizeof(h)), 0);
	else
		ASSERT_EQ(write(sv[0], &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
	if (eh) {
		ASSERT_EQ(write(sv[0], eh, sizeof(*eh)), static_cast<ssize_t>(sizeof(*eh)));
		char c = 0;
		EXPECT_EQ(read(sv[0], &c, 1), 1);
		EXPECT_EQ(c, 'R') << "the child did not get ready";
		between();
		c = 'G';
		EXPECT_EQ(write(sv[0], &c, 1), 1);
	}
	char done = 0;
	EXPECT_EQ(read(sv[0], &done, 1), 1) << "the child did not finish";
	int status = 0;
	waitpid(pid, &status, 0);
	close(sv[0]);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

// The handle is bytes: copied to another process, it opens there with
// nothing else, and both see each other's writes.
TEST_F(Memory, IpcShareAcrossProcesses)
{
	for (const char *mode : {"bytes", "scm"}) {
		SCOPED_TRACE(mode);
		void *d = nullptr;
		ASSERT_EQ(npurtMalloc(&d, 3 << 20), npurtSuccess);
		void *mid = static_cast<char *>(d) + (1 << 20);
		auto data = pattern(1 << 20, 21);
		ASSERT_EQ(npurtMemcpy(mid, data.data(), data.size(), npurtMemcpyHostToDevice),
		          npurtSuccess);
		npurtIpcMemHandle_t h{}, again{};
		ASSERT_EQ(npurtIpcGetMemHandle(&h, mid), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtIpcGetMemHandle(&again, mid), npurtSuccess) << lastMessage();
		EXPECT_EQ(std::memcmp(&h, &again, sizeof(h)), 0) << "one export per segment";
		EXPECT_EQ(h.pid, getpid());
		EXPECT_EQ(sizeof(h), 64u);
		runIpcChild(mode, h);
		std::vector<unsigned char> got(1 << 20);
		ASSERT_EQ(npurtMemcpy(got.data(), mid, got.size(), npurtMemcpyDeviceToHost),
		          npurtSuccess);
		EXPECT_EQ(got, pattern(1 << 20, 42)) << "the child's writes are visible here";
		npurtFree(d);
		npurtMemEmptyCache();
	}
}

// In another process, a second open maps the segment once and needs its
// own close; the last close waits for the work queued on the memory. In
// the exporting process the handle does not open (its own segment's GEM
// handle would be closed by the close).
TEST_F(Memory, IpcOpensNestAndCloseWaitsForQueuedWork)
{
	vmknobs::JobLatency probe(0, 0);
	if (!probe.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	auto data = pattern(1 << 20, 21);
	ASSERT_EQ(npurtMemcpy(d, data.data(), data.size(), npurtMemcpyHostToDevice), npurtSuccess);
	npurtIpcMemHandle_t h{};
	ASSERT_EQ(npurtIpcGetMemHandle(&h, d), npurtSuccess) << lastMessage();
	void *own = nullptr;
	EXPECT_EQ(npurtIpcOpenMemHandle(&own, h, 0), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "memory of this process")) << lastMessage();
	npurtIpcMemHandle_t local = h;
	local.pid = 0;  // the descriptor as this process's own (SCM_RIGHTS form)
	EXPECT_EQ(npurtIpcOpenMemHandle(&own, local, 0), npurtErrorInvalidValue);
	npurtGetLastError();
	runIpcChild("twice", h);
	std::vector<unsigned char> got(1 << 20);
	ASSERT_EQ(npurtMemcpy(got.data(), d, got.size(), npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(got, std::vector<unsigned char>(1 << 20, 0x5a)) << "the child's memset ran whole";
	EXPECT_EQ(npurtFree(d), npurtSuccess);
}

// A shareable npurtMemCreate allocation goes to another process as a
// descriptor (SCM_RIGHTS), as CUDA's POSIX-descriptor handles: that process
// maps it, and both see each other's writes; it outlives the exporter's
// release while the other process holds it.
TEST_F(Memory, VmmShareableAcrossProcesses)
{
	constexpr size_t kG = 2 << 20;
	npurtMemAllocationProp prop{};
	prop.type = npurtMemAllocationTypePinned;
	prop.requestedHandleTypes = npurtMemHandleTypePosixFileDescriptor;
	prop.location.type = npurtMemLocationTypeDevice;
	prop.location.id = 0;
	npurtMemGenericAllocationHandle_t a = 0;
	ASSERT_EQ(npurtMemCreate(&a, kG, &prop, 0), npurtSuccess) << lastMessage();
	npurtDeviceptr base = 0;
	ASSERT_EQ(npurtMemAddressReserve(&base, kG, 0, 0, 0), npurtSuccess);
	ASSERT_EQ(npurtMemMap(base, kG, 0, a, 0), npurtSuccess) << lastMessage();
	npurtMemAccessDesc rw{};
	rw.location = prop.location;
	rw.flags = npurtMemAccessFlagsProtReadWrite;
	ASSERT_EQ(npurtMemSetAccess(base, kG, &rw, 1), npurtSuccess) << lastMessage();
	void *d = reinterpret_cast<void *>(base);
	auto data = pattern(1 << 20, 21);
	ASSERT_EQ(npurtMemcpy(d, data.data(), data.size(), npurtMemcpyHostToDevice), npurtSuccess);
	npurtIpcMemHandle_t h{};  // the child's size; the descriptor goes alongside
	h.size = kG;
	ASSERT_EQ(
	        npurtMemExportToShareableHandle(&h.fd, a, npurtMemHandleTypePosixFileDescriptor, 0),
	        npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(npurtMemRelease(a), npurtSuccess) << "mapped: it lives on";
	runIpcChild("vmm", h);
	close(h.fd);
	std::vector<unsigned char> got(1 << 20);
	ASSERT_EQ(npurtMemcpy(got.data(), d, got.size(), npurtMemcpyDeviceToHost), npurtSuccess);
	EXPECT_EQ(got, pattern(1 << 20, 42)) << "the child's writes are visible here";
	EXPECT_EQ(npurtMemUnmap(base, kG), npurtSuccess);
	EXPECT_EQ(npurtMemAddressFree(base, kG), npurtSuccess);
}

// A process of another user cannot open the handle, even one that could
// open the device.
TEST_F(Memory, IpcHandleRefusesAnotherUser)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to run a child as another user";
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	npurtIpcMemHandle_t h{};
	ASSERT_EQ(npurtIpcGetMemHandle(&h, d), npurtSuccess) << lastMessage();
	runIpcChild("other-user", h);
	npurtFree(d);
}

// A process whose seccomp filter refuses the pidfd calls gets a
// permission error that names the cause, not an unexpected OS error.
TEST_F(Memory, IpcHandleUnderASeccompFilter)
{
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	npurtIpcMemHandle_t h{};
	ASSERT_EQ(npurtIpcGetMemHandle(&h, d), npurtSuccess) << lastMessage();
	for (const char *mode : {"seccomp-open", "seccomp-getfd"}) {
		SCOPED_TRACE(mode);
		runIpcChild(mode, h);
	}
	npurtFree(d);
}

// An interprocess event orders work across processes: a stream of the
// child waits for the parent's slow write to the shared memory.
TEST_F(Memory, IpcEventOrdersWorkAcrossProcesses)
{
	vmknobs::JobLatency probe(0, 0);
	if (!probe.on())
		GTEST_SKIP() << "needs root: makes device work slow through debugfs";
	const size_t n = 1 << 20;
	void *d = nullptr;
	ASSERT_EQ(npurtMalloc(&d, n), npurtSuccess);
	ASSERT_EQ(npurtMemset(d, 0, n), npurtSuccess);
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventInterprocess), npurtErrorInvalidValue)
	        << "CUDA's rule: interprocess events do not time";
	npurtGetLastError();
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventInterprocess | npurtEventDisableTiming),
	          npurtSuccess)
	        << lastMessage();
	EXPECT_EQ(npurtEventQuery(ev), npurtSuccess) << "never recorded: complete";
	npurtIpcMemHandle_t h{};
	npurtIpcEventHandle_t eh{};
	ASSERT_EQ(npurtIpcGetMemHandle(&h, d), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtIpcGetEventHandle(&eh, ev), npurtSuccess) << lastMessage();
	EXPECT_EQ(sizeof(eh), 64u);
	npurtStream_t s = nullptr;
	ASSERT_EQ(npurtStreamCreate(&s), npurtSuccess);
	runIpcChild("event", h, &eh, [&] {
		vmknobs::JobLatency slow(0, vmknobs::latencyUs());
		ASSERT_EQ(npurtMemsetAsync(d, 0x77, n, s), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtEventRecord(ev, s), npurtSuccess) << lastMessage();
	});
	EXPECT_EQ(npurtStreamSynchronize(s), npurtSuccess);
	EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
	npurtStreamDestroy(s);
	npurtFree(d);
}

TEST_F(Memory, IpcEventBadInput)
{
	npurtEvent_t plain = nullptr, opened = nullptr;
	npurtIpcEventHandle_t eh{};
	ASSERT_EQ(npurtEventCreateWithFlags(&plain, npurtEventDisableTiming), npurtSuccess);
	EXPECT_EQ(npurtIpcGetEventHandle(&eh, plain), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtEventInterprocess")) << lastMessage();
	npurtGetLastError();
	EXPECT_EQ(npurtIpcGetEventHandle(nullptr, plain), npurtErrorInvalidValue);
	EXPECT_EQ(npurtIpcOpenEventHandle(&opened, eh), npurtErrorInvalidValue) << "zero handle";
	npurtGetLastError();
	npurtEventDestroy(plain);
	// A handle of a destroyed event is stale, even in its own process.
	npurtEvent_t ev = nullptr;
	ASSERT_EQ(npurtEventCreateWithFlags(&ev, npurtEventInterprocess | npurtEventDisableTiming),
	          npurtSuccess);
	ASSERT_EQ(npurtIpcGetEventHandle(&eh, ev), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtIpcOpenEventHandle(&opened, eh), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventRecord(opened, nullptr), npurtSuccess) << "an opened event records";
	EXPECT_EQ(npurtEventSynchronize(ev), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtEventDestroy(opened), npurtSuccess);
	EXPECT_EQ(npurtEventDestroy(ev), npurtSuccess);
	EXPECT_EQ(npurtIpcOpenEventHandle(&opened, eh), npurtErrorInvalidHandle) << lastMessage();
	npurtGetLastError();
}

TEST_F(Memory, IpcBadHandles)
{
	void *d = nullptr, *p = nullptr;
	ASSERT_EQ(npurtMalloc(&d, 1 << 20), npurtSuccess);
	npurtIpcMemHandle_t h{};
	ASSERT_EQ(npurtIpcGetMemHandle(&h, d), npurtSuccess) << lastMessage();
	npurtIpcMemHandle_t bad = h;
	bad.magic = 0;
	EXPECT_EQ(npurtIpcOpenMemHandle(&p, bad, 0), npurtErrorInvalidValue);
	bad = h;
	bad.fd = -1;
	EXPECT_EQ(npurtIpcOpenMemHandle(&p, bad, 0), npurtErrorInvalidValue);
	bad = h;
	bad.pid = 0x3ffffff0;  // no such process
	EXPECT_EQ(npurtIpcOpenMemHandle(&p, bad, 0), npurtErrorInvalidHandle) << lastMessage();
	EXPECT_EQ(npurtIpcOpenMemHandle(&p, h, 2), npurtErrorInvalidValue) << "unknown flags";
	// Once the memory is back with the device, the handle is stale, even
	// if its descriptor number now names something else.
	npurtFree(d);
	npurtMemEmptyCache();
	int reused = open("/dev/null", O_RDONLY);
	EXPECT_EQ(npurtIpcOpenMemHandle(&p, h, 0), npurtErrorInvalidHandle) << lastMessage();
	EXPECT_TRUE(contains(lastMessage(), "gone")) << lastMessage();
	if (reused >= 0)
		close(reused);
	int local = 0;
	EXPECT_EQ(npurtIpcGetMemHandle(&h, &local), npurtErrorInvalidValue);
	npurtGetLastError();
}

}  // namespace

namespace {

// npu-smi lists this process with the device memory it holds.
TEST(NpuSmi, ShowsThisProcess)
{
	void *d = nullptr;
	ASSERT_EQ(npurtSetDevice(0), npurtSuccess);
	ASSERT_EQ(npurtMalloc(&d, 6 << 20), npurtSuccess);
	char self[4096] = {};
	ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
	std::string smi = std::string(self);
	smi = smi.substr(0, smi.rfind('/')) + "/npu-smi --json";
	FILE *f = popen(smi.c_str(), "r");
	ASSERT_NE(f, nullptr);
	std::string out;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	EXPECT_EQ(pclose(f), 0) << out;
	std::string me = "\"pid\": " + std::to_string(getpid()) + ",";
	size_t at = out.find(me);
	ASSERT_NE(at, std::string::npos) << out;
	// The pool reserved at least the 6 MiB asked for.
	size_t mem = out.find("\"device_memory\": ", at);
	ASSERT_NE(mem, std::string::npos);
	EXPECT_GE(std::strtoull(out.c_str() + mem + 17, nullptr, 10), 6ull << 20) << out;
	npurtFree(d);
}

}  // namespace

// Memory pools shared between processes (npurtMemPoolExportToShareableHandle
// and friends) against the real module: a child process imports the pool
// and its pointers, reads and writes them, from several threads; stale,
// foreign and forged data is refused; an exporter that exits leaves its
// importers' mappings working and their new imports refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "child.h"
#include "npurt/npurt.h"

namespace {

constexpr size_t kMiB = 1 << 20;
constexpr const char *kEnv = "NPURT_TEST_POOL_IPC";  // "mode:socket"

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
		v[i] = static_cast<unsigned char>(i * 31 + seed);
	return v;
}

std::vector<unsigned char> readBack(const void *d, size_t n)
{
	std::vector<unsigned char> v(n);
	EXPECT_EQ(npurtMemcpy(v.data(), d, n, npurtMemcpyDeviceToHost), npurtSuccess)
	        << lastMessage();
	return v;
}

npurtMemPoolProps shareableProps()
{
	npurtMemPoolProps p{};
	p.allocType = npurtMemAllocationTypePinned;
	p.handleTypes = npurtMemHandleTypePosixFileDescriptor;
	p.location.type = npurtMemLocationTypeDevice;
	p.location.id = 0;
	return p;
}

void *asHandle(int fd)
{
	return reinterpret_cast<void *>(static_cast<intptr_t>(fd));
}

// What the parent sends the child with the pool's handle.
struct Exported {
	npurtMemPoolPtrExportData a, b, stale;
};

// Receive timeouts on a test's socket: a child that dies does not hang it.
void limitWaits(int sock)
{
	const timeval t{120, 0};
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
}

class PoolIpc : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(npurtSetDevice(0), npurtSuccess) << lastMessage();
		ASSERT_EQ(npurtStreamCreateWithFlags(&s_, npurtStreamNonBlocking), npurtSuccess);
	}
	void TearDown() override
	{
		EXPECT_EQ(npurtStreamSynchronize(s_), npurtSuccess) << lastMessage();
		npurtStreamDestroy(s_);
		npurtGetLastError();
	}
	void *allocate(npurtMemPool_t pool, size_t n)
	{
		void *p = nullptr;
		EXPECT_EQ(npurtMallocFromPoolAsync(&p, n, pool, s_), npurtSuccess) << lastMessage();
		EXPECT_EQ(npurtStreamSynchronize(s_), npurtSuccess);
		return p;
	}
	// Runs PoolIpc.ChildSide in mode with the other end of a socket pair
	// while body runs here with this end; returns once it exited (0).
	void withChild(const char *mode, const std::function<void(int sock)> &body)
	{
		int sv[2];
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
		limitWaits(sv[0]);
		npurt_test::ChildResult r;
		std::thread child([&] {
			r = npurt_test::runChild(
			        "PoolIpc.ChildSide",
			        {std::string(kEnv) + "=" + mode + ":" + std::to_string(sv[1])});
		});
		body(sv[0]);
		close(sv[0]);  // the child sees the end
		child.join();
		close(sv[1]);
		EXPECT_TRUE(!r.timedOut && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
		        << npurt_test::indented(r.output);
	}
	npurtStream_t s_ = nullptr;
};

// The child's side: "import" takes the parent's pool and pointers;
// "export" makes a pool of its own, passes it, and exits when told.
TEST_F(PoolIpc, ChildSide)
{
	const char *env = std::getenv(kEnv);
	if (!env)
		GTEST_SKIP() << "runs only as the child of the PoolIpc tests";
	const std::string spec = env;
	const std::string mode = spec.substr(0, spec.find(':'));
	const int sock = std::atoi(spec.c_str() + spec.find(':') + 1);
	limitWaits(sock);
	if (mode == "export") {
		npurtMemPool_t pool = nullptr;
		npurtMemPoolProps p = shareableProps();
		ASSERT_EQ(npurtMemPoolCreate(&pool, &p), npurtSuccess) << lastMessage();
		void *a = allocate(pool, kMiB);
		auto data = pattern(kMiB, 7);
		ASSERT_EQ(npurtMemcpy(a, data.data(), kMiB, npurtMemcpyHostToDevice), npurtSuccess);
		Exported e{};
		ASSERT_EQ(npurtMemPoolExportPointer(&e.a, a), npurtSuccess) << lastMessage();
		int fd = -1;
		ASSERT_EQ(npurtMemPoolExportToShareableHandle(
		                  &fd, pool, npurtMemHandleTypePosixFileDescriptor, 0),
		          npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurt_test::sendFd(sock, fd, &e, sizeof e), 0);
		char go = 0;
		ASSERT_EQ(read(sock, &go, 1), 1) << "the parent did not say when to exit";
		_exit(0);  // as a crash would: nothing freed
	}
	ASSERT_EQ(mode, "import");
	Exported e{};
	const int fd = npurt_test::recvFd(sock, &e, sizeof e);
	ASSERT_GE(fd, 0);
	npurtMemPool_t pool = nullptr;
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&pool, asHandle(fd), npurtMemHandleTypeNone,
	                                                0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&pool, asHandle(fd),
	                                                npurtMemHandleTypePosixFileDescriptor, 1),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(nullptr, asHandle(fd),
	                                                npurtMemHandleTypePosixFileDescriptor, 0),
	          npurtErrorInvalidValue);
	ASSERT_EQ(npurtMemPoolImportFromShareableHandle(&pool, asHandle(fd),
	                                                npurtMemHandleTypePosixFileDescriptor, 0),
	          npurtSuccess)
	        << lastMessage();
	close(fd);  // the imported pool has its own connection

	void *a = nullptr, *again = nullptr;
	ASSERT_EQ(npurtMemPoolImportPointer(&a, pool, &e.a), npurtSuccess) << lastMessage();
	EXPECT_EQ(readBack(a, kMiB), pattern(kMiB, 21)) << "the exporter's data";
	auto reply = pattern(kMiB, 42);
	ASSERT_EQ(npurtMemcpy(a, reply.data(), kMiB, npurtMemcpyHostToDevice), npurtSuccess);
	ASSERT_EQ(npurtMemPoolImportPointer(&again, pool, &e.a), npurtSuccess) << lastMessage();
	EXPECT_EQ(again, a) << "imports of one allocation share its mapping";
	EXPECT_EQ(npurtFree(again), npurtSuccess) << lastMessage();
	EXPECT_EQ(readBack(a, 64), std::vector<unsigned char>(reply.begin(), reply.begin() + 64))
	        << "one import freed, the other maps it still";
	EXPECT_EQ(npurtFreeAsync(a, s_), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtFree(a), npurtErrorInvalidValue) << "freed twice";
	npurtGetLastError();

	// Threads import and free at once over the one connection.
	std::vector<std::thread> threads;
	std::vector<std::string> failures(4);
	for (int t = 0; t < 4; t++)
		threads.emplace_back([&, t] {
			for (int i = 0; i < 10 && failures[t].empty(); i++) {
				void *p = nullptr;
				if (npurtMemPoolImportPointer(&p, pool, i % 2 ? &e.a : &e.b) ||
				    npurtFree(p))
					failures[t] = lastMessage();
			}
		});
	for (auto &t : threads)
		t.join();
	for (const std::string &f : failures)
		EXPECT_EQ(f, "");

	void *b = nullptr;
	ASSERT_EQ(npurtMemPoolImportPointer(&b, pool, &e.b), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemsetAsync(b, 0x5b, 4096, s_), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtFreeAsync(b, s_), npurtSuccess) << "waits for the memset";
	EXPECT_EQ(npurtStreamSynchronize(s_), npurtSuccess);

	void *p = nullptr;
	EXPECT_EQ(npurtMemPoolImportPointer(&p, pool, &e.stale), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "no longer that allocation")) << lastMessage();
	Exported forged = e;
	forged.a.reserved[0] ^= 1;
	EXPECT_EQ(npurtMemPoolImportPointer(&p, pool, &forged.a), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "npurtMemPoolExportPointer")) << lastMessage();
	forged = e;
	forged.a.reserved[8] ^= 1;  // the pool's identity
	EXPECT_EQ(npurtMemPoolImportPointer(&p, pool, &forged.a), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "another pool")) << lastMessage();
	forged = e;
	forged.a.reserved[32] ^= 64;  // the offset in the segment: in range, wrong
	EXPECT_EQ(npurtMemPoolImportPointer(&p, pool, &forged.a), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "altered")) << lastMessage();
	EXPECT_EQ(npurtMemPoolImportPointer(nullptr, pool, &e.a), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolImportPointer(&p, pool, nullptr), npurtErrorInvalidValue);

	// An imported pool only imports: it does not allocate, and is not
	// exported again.
	EXPECT_EQ(npurtMallocFromPoolAsync(&p, 4096, pool, s_), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "imported from another process")) << lastMessage();
	int fd2 = -1;
	EXPECT_EQ(npurtMemPoolExportToShareableHandle(&fd2, pool,
	                                              npurtMemHandleTypePosixFileDescriptor, 0),
	          npurtErrorInvalidValue);
	npurtMemLocation here{npurtMemLocationTypeDevice, 0};
	npurtMemAccessFlags flags = npurtMemAccessFlagsProtNone;
	EXPECT_EQ(npurtMemPoolGetAccess(&flags, pool, &here), npurtSuccess) << lastMessage();
	EXPECT_EQ(flags, npurtMemAccessFlagsProtReadWrite);
	npurtMemAccessDesc rw{here, npurtMemAccessFlagsProtReadWrite};
	EXPECT_EQ(npurtMemPoolSetAccess(pool, &rw, 1), npurtSuccess) << lastMessage();

	EXPECT_EQ(npurtMemPoolDestroy(pool), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemPoolDestroy(pool), npurtErrorInvalidValue) << "destroyed twice";
	EXPECT_EQ(npurtMemPoolImportPointer(&p, pool, &e.a), npurtErrorInvalidValue);
	npurtGetLastError();
	char done = 1;
	ASSERT_EQ(write(sock, &done, 1), 1);
}

// A shareable pool goes to another process as a descriptor; its pointers as
// 64 bytes each. That process sees this one's data and this one its writes.
TEST_F(PoolIpc, ShareAcrossProcesses)
{
	npurtMemPool_t pool = nullptr;
	npurtMemPoolProps props = shareableProps();
	ASSERT_EQ(npurtMemPoolCreate(&pool, &props), npurtSuccess) << lastMessage();
	void *a = allocate(pool, kMiB), *b = allocate(pool, 4096), *c = allocate(pool, 8192);
	auto data = pattern(kMiB, 21);
	ASSERT_EQ(npurtMemcpy(a, data.data(), kMiB, npurtMemcpyHostToDevice), npurtSuccess);
	Exported e{};
	ASSERT_EQ(npurtMemPoolExportPointer(&e.a, a), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemPoolExportPointer(&e.b, b), npurtSuccess) << lastMessage();
	ASSERT_EQ(npurtMemPoolExportPointer(&e.stale, c), npurtSuccess) << lastMessage();
	EXPECT_EQ(sizeof(npurtMemPoolPtrExportData), 64u);
	ASSERT_EQ(npurtFreeAsync(c, s_), npurtSuccess);  // before the child imports it
	ASSERT_EQ(npurtStreamSynchronize(s_), npurtSuccess);
	int fd = -1;
	ASSERT_EQ(npurtMemPoolExportToShareableHandle(&fd, pool,
	                                              npurtMemHandleTypePosixFileDescriptor, 0),
	          npurtSuccess)
	        << lastMessage();
	// Holders of the handle that send nothing, or junk with a descriptor,
	// do not end it for the others.
	ASSERT_EQ(send(fd, "", 0, 0), 0);
	int junk[2];
	ASSERT_EQ(pipe(junk), 0);
	ASSERT_EQ(npurt_test::sendFd(fd, junk[0], "junk", 4), 0);
	close(junk[0]);
	close(junk[1]);
	withChild("import", [&](int sock) {
		ASSERT_EQ(npurt_test::sendFd(sock, fd, &e, sizeof e), 0);
		char done = 0;
		EXPECT_EQ(read(sock, &done, 1), 1) << "the child did not finish";
	});
	close(fd);
	EXPECT_EQ(readBack(a, kMiB), pattern(kMiB, 42)) << "the child's writes";
	EXPECT_EQ(readBack(b, 4096), std::vector<unsigned char>(4096, 0x5b));
	EXPECT_EQ(npurtFreeAsync(a, s_), npurtSuccess);
	EXPECT_EQ(npurtFreeAsync(b, s_), npurtSuccess);
	EXPECT_EQ(npurtMemPoolDestroy(pool), npurtSuccess) << lastMessage();
}

// The exporter exits (without freeing): what was imported stays mapped and
// readable until freed; new imports say the exporter is gone.
TEST_F(PoolIpc, ExporterExit)
{
	Exported e{};
	int fd = -1;
	npurtMemPool_t pool = nullptr;
	void *a = nullptr;
	withChild("export", [&](int sock) {
		fd = npurt_test::recvFd(sock, &e, sizeof e);
		ASSERT_GE(fd, 0) << "the child sent no handle";
		ASSERT_EQ(npurtMemPoolImportFromShareableHandle(
		                  &pool, asHandle(fd), npurtMemHandleTypePosixFileDescriptor, 0),
		          npurtSuccess)
		        << lastMessage();
		ASSERT_EQ(npurtMemPoolImportPointer(&a, pool, &e.a), npurtSuccess) << lastMessage();
		char go = 1;
		ASSERT_EQ(write(sock, &go, 1), 1);
	});
	ASSERT_NE(a, nullptr);
	void *again = nullptr;
	EXPECT_EQ(npurtMemPoolImportPointer(&again, pool, &e.a), npurtErrorInvalidHandle);
	EXPECT_TRUE(contains(lastMessage(), "exited")) << lastMessage();
	npurtMemPool_t other = nullptr;
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&other, asHandle(fd),
	                                                npurtMemHandleTypePosixFileDescriptor, 0),
	          npurtErrorInvalidHandle);
	EXPECT_EQ(readBack(a, kMiB), pattern(kMiB, 7)) << "the import outlives its exporter";
	EXPECT_EQ(npurtFree(a), npurtSuccess) << lastMessage();
	EXPECT_EQ(npurtMemPoolDestroy(pool), npurtSuccess);
	close(fd);
}

// What cannot be exported or imported, in one process.
TEST_F(PoolIpc, BadInput)
{
	npurtMemPool_t plain = nullptr, shared = nullptr;
	npurtMemPoolProps props = shareableProps();
	props.handleTypes = npurtMemHandleTypeNone;
	ASSERT_EQ(npurtMemPoolCreate(&plain, &props), npurtSuccess);
	props = shareableProps();
	ASSERT_EQ(npurtMemPoolCreate(&shared, &props), npurtSuccess) << lastMessage();
	const auto fdType = npurtMemHandleTypePosixFileDescriptor;
	int fd = -1;
	EXPECT_EQ(npurtMemPoolExportToShareableHandle(&fd, plain, fdType, 0),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "handleTypes")) << lastMessage();
	EXPECT_EQ(npurtMemPoolExportToShareableHandle(&fd, shared, npurtMemHandleTypeNone, 0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolExportToShareableHandle(&fd, shared, fdType, 1),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolExportToShareableHandle(nullptr, shared, fdType, 0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolExportToShareableHandle(&fd, nullptr, fdType, 0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(fd, -1) << "nothing made on failure";

	npurtMemPoolPtrExportData data{};
	void *dev = nullptr, *fromPlain = allocate(plain, 4096),
	     *fromShared = allocate(shared, 8192);
	ASSERT_EQ(npurtMalloc(&dev, 4096), npurtSuccess);
	EXPECT_EQ(npurtMemPoolExportPointer(&data, dev), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not memory of a memory pool")) << lastMessage();
	EXPECT_EQ(npurtMemPoolExportPointer(&data, fromPlain), npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "without handleTypes")) << lastMessage();
	EXPECT_EQ(npurtMemPoolExportPointer(&data, static_cast<char *>(fromShared) + 4096),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not its start")) << lastMessage();
	EXPECT_EQ(npurtMemPoolExportPointer(nullptr, fromShared), npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolExportPointer(&data, nullptr), npurtErrorInvalidValue);

	// This process's own handle is not imported here: the pool is at hand.
	ASSERT_EQ(npurtMemPoolExportToShareableHandle(&fd, shared, fdType, 0), npurtSuccess)
	        << lastMessage();
	EXPECT_GE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 1) << "close-on-exec";
	npurtMemPool_t imported = nullptr;
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&imported, asHandle(fd), fdType, 0),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "this process")) << lastMessage();
	close(fd);
	int pipefd[2];
	ASSERT_EQ(pipe(pipefd), 0);
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&imported, asHandle(pipefd[0]), fdType, 0),
	          npurtErrorInvalidValue);
	EXPECT_TRUE(contains(lastMessage(), "not a pool's shareable handle")) << lastMessage();
	close(pipefd[0]);
	close(pipefd[1]);
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&imported, asHandle(-1), fdType, 0),
	          npurtErrorInvalidValue);
	EXPECT_EQ(npurtMemPoolImportFromShareableHandle(&imported, asHandle(pipefd[0]), fdType, 0),
	          npurtErrorInvalidValue)
	        << "a closed descriptor";
	EXPECT_EQ(imported, nullptr);

	ASSERT_EQ(npurtMemPoolExportPointer(&data, fromShared), npurtSuccess) << lastMessage();
	void *p = nullptr;
	EXPECT_EQ(npurtMemPoolImportPointer(&p, shared, &data), npurtErrorInvalidValue)
	        << "not an imported pool";
	EXPECT_TRUE(contains(lastMessage(), "not a pool imported")) << lastMessage();

	EXPECT_EQ(npurtFree(dev), npurtSuccess);
	EXPECT_EQ(npurtFreeAsync(fromPlain, s_), npurtSuccess);
	EXPECT_EQ(npurtFreeAsync(fromShared, s_), npurtSuccess);
	EXPECT_EQ(npurtMemPoolDestroy(plain), npurtSuccess);
	EXPECT_EQ(npurtMemPoolDestroy(shared), npurtSuccess);
	npurtGetLastError();
}

}  // namespace

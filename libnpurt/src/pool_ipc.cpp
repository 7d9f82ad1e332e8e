// Memory pools shared between processes: see pool_ipc.h.
//
// The wire: a pool's shareable handle is one end of a SOCK_SEQPACKET pair
// whose other end the exporter serves. Every process that holds the handle
// shares that one socket, so replies cannot go over it: an importer sends,
// with its hello, one end of a pair of its own (SCM_RIGHTS), which becomes
// its private connection; its requests and their replies (and the
// segments' dma-bufs) go over that. Requests carry a sequence number so a
// reply that arrives after its request timed out is not taken for the next
// one's; an importer also watches the exporter's pidfd, so the exporter's
// exit is noticed even where a forked child keeps its sockets open.
//
// The exporter's thread never blocks: its sockets are read and written
// without waiting, and descriptors a peer sent (a hostile one may send a
// FUSE file whose close blocks) are closed outside its lock.
#include "pool_ipc.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "context.h"
#include "error.h"
#include "mem_pool.h"
#include "runtime.h"
#include "stream.h"

namespace npurt {

namespace {

constexpr uint32_t kWireMagic = 0x4e50504cu;  // "NPPL"
constexpr uint32_t kDataMagic = 0x4e505044u;  // "NPPD"
constexpr int kAnswerTimeoutMs = 10000;
constexpr int kMaxFds = 4;  // descriptors taken from one message (the kernel drops the rest)
constexpr size_t kMaxServed = 4096;  // sockets the exporter serves at most

enum Op : uint32_t { kHello = 1, kSegment = 2 };

struct Request {
	uint32_t magic;
	uint32_t op;
	uint64_t seq;
	uint64_t addr;  // kSegment: the allocation's start,
	uint64_t size;  // its size,
	uint64_t inode;  // its segment's dma-buf,
	uint64_t segOffset;  // its offset there
	uint64_t segSize;  // and the segment's size
};

struct Reply {
	uint32_t magic;
	int32_t status;  // an npurtError_t
	uint64_t seq;
	int64_t pid;  // kHello: the exporting process
	uint64_t poolId;  // and its pool
};

// npurtMemPoolPtrExportData's contents.
struct PtrData {
	uint32_t magic;
	int32_t pid;
	uint64_t poolId;
	uint64_t addr;
	uint64_t size;
	uint64_t segOffset;  // of addr in its segment
	uint64_t segSize;
	uint64_t inode;  // the segment's dma-buf
};
static_assert(sizeof(PtrData) <= sizeof(npurtMemPoolPtrExportData));

class FdGuard {
public:
	explicit FdGuard(int fd = -1) : fd_(fd) {}
	~FdGuard()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	FdGuard(const FdGuard &) = delete;
	FdGuard &operator=(const FdGuard &) = delete;
	int get() const { return fd_; }
	int release() { return std::exchange(fd_, -1); }

private:
	int fd_;
};

bool isSeqPacket(int fd)
{
	int type = 0;
	socklen_t len = sizeof type;
	return !getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) && type == SOCK_SEQPACKET;
}

// One message with fd (if >= 0) attached; the number of bytes sent or -1.
ssize_t sendWith(int sock, const void *buf, size_t len, int fd, int flags)
{
	iovec io{const_cast<void *>(buf), len};
	msghdr m{};
	m.msg_iov = &io;
	m.msg_iovlen = 1;
	alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
	if (fd >= 0) {
		m.msg_control = ctl;
		m.msg_controllen = sizeof ctl;
		cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	return sendmsg(sock, &m, flags | MSG_NOSIGNAL);
}

// One message and the descriptors that came with it (appended to *fds,
// which the caller closes). recvmsg's result.
ssize_t receiveWith(int sock, void *buf, size_t len, std::vector<int> *fds, int flags)
{
	iovec io{buf, len};
	msghdr m{};
	m.msg_iov = &io;
	m.msg_iovlen = 1;
	alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxFds)];
	m.msg_control = ctl;
	m.msg_controllen = sizeof ctl;
	ssize_t n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int got = -1;
			std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
			fds->push_back(got);
		}
	}
	return n;
}

void closeAll(const std::vector<int> &fds)
{
	for (int fd : fds)
		close(fd);
}

// The exporting side: one thread serving every shareable handle and
// importer connection of this process. Leaked: it serves until exit.
class Exporter {
public:
	static Exporter *instance(bool make)
	{
		static std::atomic<Exporter *> e{nullptr};
		static std::mutex once;
		if (Exporter *p = e.load(); p || !make)
			return p;
		std::lock_guard<std::mutex> lock(once);
		if (!e.load())
			e.store(new Exporter);
		return e.load();
	}

	npurtError_t serve(Context &ctx, uint64_t poolId, int *handle, const char *api);
	void forget(Context &ctx);

private:
	struct Served {
		int fd;
		Context *ctx;  // null once the pool's context went
		uint64_t poolId;
		bool handle;  // the shareable handle (else an importer's connection)
	};
	void run();
	bool connect(Served &s, bool hup, std::vector<Served> *joined, std::vector<int> *discard);
	bool answer(Served &s, bool hup, std::vector<int> *discard);
	npurtError_t start(const char *api);

	std::mutex mutex_;  // guards the rest; held while a request is answered
	std::vector<Served> served_;
	int wake_ = -1;  // eventfd: served_ changed
	pid_t servingPid_ = 0;  // the process whose thread serves (fork: not ours)
};

npurtError_t Exporter::start(const char *api)
{
	if (servingPid_ == getpid())
		return npurtSuccess;
	// First use, or a forked child: its copies of the parent's sockets are
	// the parent's to serve.
	for (const Served &s : served_)
		close(s.fd);
	served_.clear();
	if (wake_ >= 0)
		close(wake_);
	wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_ < 0)
		return setError(errorFromErrno(-errno),
		                osMessage(std::string(api) + ": starting the exporter", errno));
	std::thread([this] { run(); }).detach();
	if (!servingPid_) {
		// A fork never finds the lock held by a request half answered.
		pthread_atfork([] { instance(false)->mutex_.lock(); },
		               [] { instance(false)->mutex_.unlock(); },
		               [] { instance(false)->mutex_.unlock(); });
	}
	servingPid_ = getpid();
	return npurtSuccess;
}

npurtError_t Exporter::serve(Context &ctx, uint64_t poolId, int *handle, const char *api)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return setError(errorFromErrno(-errno),
		                osMessage(std::string(api) + ": making the handle", errno));
	FdGuard ours(sv[0]), theirs(sv[1]);
	std::lock_guard<std::mutex> lock(mutex_);
	if (npurtError_t err = start(api))
		return err;
	if (served_.size() >= kMaxServed)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": this process serves " +
		                        std::to_string(kMaxServed) +
		                        " pool handles and connections already; close "
		                        "handles no longer needed");
	served_.push_back({ours.release(), &ctx, poolId, true});
	const uint64_t one = 1;
	if (write(wake_, &one, sizeof one) < 0) {
		// Only EAGAIN (the counter is full): the thread wakes anyway.
	}
	*handle = theirs.release();
	return npurtSuccess;
}

void Exporter::forget(Context &ctx)
{
	std::lock_guard<std::mutex> lock(mutex_);
	for (Served &s : served_)
		if (s.ctx == &ctx)
			s.ctx = nullptr;
}

void Exporter::run()
{
	std::vector<pollfd> fds;
	std::vector<int> discard;
	for (;;) {
		{
			std::lock_guard<std::mutex> lock(mutex_);
			fds.assign(1, pollfd{wake_, POLLIN, 0});
			for (const Served &s : served_)
				fds.push_back({s.fd, POLLIN, 0});
		}
		if (poll(fds.data(), fds.size(), -1) < 0)
			continue;  // EINTR, or ENOMEM (passing)
		uint64_t n = 0;
		if (fds[0].revents && read(wake_, &n, sizeof n) < 0) {
			// EAGAIN: another change woke it first.
		}
		{
			std::lock_guard<std::mutex> lock(mutex_);
			std::vector<Served> joined;
			for (size_t i = 1; i < fds.size(); i++) {
				if (!fds[i].revents)
					continue;
				auto it = std::ranges::find(served_, fds[i].fd, &Served::fd);
				if (it == served_.end())
					continue;
				const bool hup = fds[i].revents & (POLLHUP | POLLERR | POLLNVAL);
				if (it->handle ? connect(*it, hup, &joined, &discard)
				               : answer(*it, hup, &discard))
					continue;
				discard.push_back(it->fd);
				served_.erase(it);
			}
			served_.insert(served_.end(), joined.begin(), joined.end());
		}
		closeAll(discard);
		discard.clear();
	}
}

// A hello on a shareable handle: the importer's connection joins. False
// when the handle's last holder closed it. (A message of no bytes reads
// as 0 too: only a hang-up ends the handle.)
bool Exporter::connect(Served &s, bool hup, std::vector<Served> *joined, std::vector<int> *discard)
{
	Request rq{};
	std::vector<int> got;
	ssize_t n = receiveWith(s.fd, &rq, sizeof rq, &got, MSG_DONTWAIT);
	if (n <= 0) {
		discard->insert(discard->end(), got.begin(), got.end());
		return n == 0 ? !hup : errno == EAGAIN || errno == EINTR;
	}
	const int conn = got.size() == 1 ? got[0] : -1;
	if (n != sizeof rq || rq.magic != kWireMagic || rq.op != kHello || conn < 0 ||
	    !isSeqPacket(conn) || served_.size() + joined->size() >= kMaxServed) {
		discard->insert(discard->end(), got.begin(), got.end());
		return true;  // not an importer (or too many): ignored
	}
	Reply rp{kWireMagic, s.ctx ? npurtSuccess : npurtErrorInvalidValue, rq.seq, getpid(),
	         s.poolId};
	if (sendWith(conn, &rp, sizeof rp, -1, MSG_DONTWAIT) == sizeof rp)
		joined->push_back({conn, s.ctx, s.poolId, false});
	else
		discard->push_back(conn);
	return true;
}

// A request on an importer's connection. False when the importer is gone
// or does not read its replies.
bool Exporter::answer(Served &s, bool hup, std::vector<int> *discard)
{
	Request rq{};
	ssize_t n = receiveWith(s.fd, &rq, sizeof rq, discard, MSG_DONTWAIT);
	if (n <= 0)
		return n == 0 ? !hup : errno == EAGAIN || errno == EINTR;
	Reply rp{kWireMagic, npurtErrorInvalidValue, rq.seq, getpid(), s.poolId};
	size_t size = 0;
	uint64_t segBase = 0, segSize = 0, inode = 0;
	int fd = -1;
	// The allocation is still the one exported: live at that address with
	// that size, at that place in the segment whose dma-buf the data names.
	// The descriptor sent is a copy: a free on another thread may close
	// the segment's own meanwhile.
	if (n == sizeof rq && rq.magic == kWireMagic && rq.op == kSegment && s.ctx &&
	    isPoolAllocation(*s.ctx, s.poolId, rq.addr, &size) && size == rq.size &&
	    !s.ctx->exportSegment(rq.addr, &segBase, &segSize, &fd, &inode,
	                          "npurtMemPoolImportPointer", true)) {
		discard->push_back(fd);
		if (inode == rq.inode && segSize == rq.segSize && rq.addr - segBase == rq.segOffset)
			rp.status = npurtSuccess;
		else
			fd = -1;
	}
	return sendWith(s.fd, &rp, sizeof rp, fd, MSG_DONTWAIT) == sizeof rp;
}

// The importing side.
struct ImportedPool : npurtMemPool_st {
	~ImportedPool()
	{
		if (fd >= 0)
			close(fd);
		if (pidfd >= 0)
			close(pidfd);
	}
	int fd = -1;  // this process's connection to the exporter
	int pidfd = -1;  // the exporter (readable once it exited); -1: unknown
	pid_t pid = 0;
	uint64_t poolId = 0;
	int device = 0;
	std::mutex mutex;  // one request at a time on fd
	uint64_t seq = 0;
};

// The counts of ptrs and of the context's imports move together: each
// import opens before it counts, each free uncounts before it closes, so
// an address is unmapped only when no import of it is left.
struct Importer {
	std::mutex mutex;  // guards the maps
	std::map<npurtMemPool_t, std::shared_ptr<ImportedPool>> pools;
	struct Ptr {
		Context *ctx;
		int count;  // imports of this address (they share the mapping)
	};
	std::map<uint64_t, Ptr> ptrs;
};

Importer &importer()
{
	static Importer *i = new Importer;  // leaked: used until exit
	return *i;
}

std::shared_ptr<ImportedPool> findImported(npurtMemPool_t handle)
{
	Importer &im = importer();
	std::lock_guard<std::mutex> lock(im.mutex);
	auto it = im.pools.find(handle);
	return it == im.pools.end() ? nullptr : it->second;
}

npurtError_t exporterGone(const char *api, pid_t pid)
{
	return setError(npurtErrorInvalidHandle,
	                std::string(api) + ": the exporting process" +
	                        (pid ? " " + std::to_string(pid) : std::string()) +
	                        " has exited (or closed the pool's connection)");
}

// The reply to request seq on conn (and the descriptor with it), waiting
// kAnswerTimeoutMs at most and not past the exporter's exit (its pidfd).
npurtError_t awaitReply(int conn, int pidfd, uint64_t seq, pid_t pid, Reply *rp, int *fd,
                        const char *api)
{
	const int64_t deadline = monotonicNs() + int64_t{kAnswerTimeoutMs} * 1000000;
	for (;;) {
		std::vector<int> got;
		ssize_t n = receiveWith(conn, rp, sizeof *rp, &got, MSG_DONTWAIT);
		FdGuard first(got.empty() ? -1 : got[0]);
		for (size_t i = 1; i < got.size(); i++)
			close(got[i]);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			const int64_t left = (deadline - monotonicNs()) / 1000000;
			pollfd p[2] = {{conn, POLLIN, 0}, {pidfd, POLLIN, 0}};
			int ready =
			        left > 0 ? poll(p, pidfd >= 0 ? 2 : 1, static_cast<int>(left)) : 0;
			if (ready == 0)
				return setError(
				        npurtErrorTimeout,
				        std::string(api) +
				                ": the exporting process did not answer within " +
				                std::to_string(kAnswerTimeoutMs / 1000) + " s");
			if (ready > 0 && !p[0].revents && p[1].revents)
				return exporterGone(api, pid);
			continue;
		}
		if (n <= 0)
			return exporterGone(api, pid);
		if (n != sizeof *rp || rp->magic != kWireMagic)
			return setError(npurtErrorInvalidHandle,
			                std::string(api) + ": the pool's connection sent a message "
			                                   "that is not an exporter's reply");
		if (rp->seq != seq)
			continue;  // the late reply to a request that timed out
		if (fd)
			*fd = first.release();
		return npurtSuccess;
	}
}

PtrData dataOf(const npurtMemPoolPtrExportData &raw)
{
	PtrData d{};
	std::memcpy(&d, &raw, sizeof d);
	return d;
}

}  // namespace

npurtError_t exportMemPool(MemPool &pool, int *fd, const char *api)
{
	if (!pool.shareable())
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the pool was not created with handleTypes "
		                                   "npurtMemHandleTypePosixFileDescriptor");
	return Exporter::instance(true)->serve(pool.ctx(), pool.id(), fd, api);
}

npurtError_t exportPoolPointer(Context &ctx, uint64_t addr, npurtMemPoolPtrExportData *data,
                               const char *api)
{
	uint64_t base = 0;
	size_t size = 0;
	Context *owner = Runtime::instance().findDeviceMemory(addr, &ctx, &base, &size);
	MemPool *pool = owner ? findPoolMemory(*owner, addr, &base, &size) : nullptr;
	if (!pool || !pool->shareable())
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + hexAddr(addr) +
		                        (pool ? " is of a pool created without handleTypes "
		                                "npurtMemHandleTypePosixFileDescriptor"
		                              : " is not memory of a memory pool "
		                                "(npurtMallocFromPoolAsync)"));
	if (base != addr)
		return setError(npurtErrorInvalidValue, std::string(api) + ": " + hexAddr(addr) +
		                                                " is inside the allocation at " +
		                                                hexAddr(base) + ", not its start");
	uint64_t segBase = 0, segSize = 0, inode = 0;
	int fd = -1;
	if (npurtError_t err =
	            owner->exportAllocation(addr, size, &segBase, &segSize, &fd, &inode, api))
		return err;
	PtrData d{kDataMagic, getpid(), pool->id(), addr, size, addr - segBase, segSize, inode};
	*data = npurtMemPoolPtrExportData{};
	std::memcpy(data, &d, sizeof d);
	return npurtSuccess;
}

npurtError_t importMemPool(int fd, int device, npurtMemPool_t *out, const char *api)
{
	const std::string which = std::string(api) + ": descriptor " + std::to_string(fd);
	FdGuard shared(fcntl(fd, F_DUPFD_CLOEXEC, 0));
	if (shared.get() < 0)
		return setError(npurtErrorInvalidValue, osMessage(which, errno));
	ucred cred{};
	socklen_t len = sizeof cred;
	if (!isSeqPacket(shared.get()) ||
	    getsockopt(shared.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return setError(npurtErrorInvalidValue,
		                which + " is not a pool's shareable handle (one "
		                        "npurtMemPoolExportToShareableHandle made)");
	// The pair's maker: the exporter, as this process's pid namespace sees it.
	if (cred.pid == getpid())
		return setError(npurtErrorInvalidValue,
		                which + " is of a pool of this process: allocate from the pool "
		                        "itself");
	auto pool = std::make_shared<ImportedPool>();
	pool->pidfd = cred.pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, cred.pid, 0)) : -1;
	if (pool->pidfd < 0 && errno == ESRCH)
		return exporterGone(api, cred.pid);
	int pair[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		return setError(errorFromErrno(-errno), osMessage(which + ": connecting", errno));
	FdGuard conn(pair[0]), theirs(pair[1]);
	const timeval limit{kAnswerTimeoutMs / 1000, 0};
	setsockopt(conn.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
	const Request hello{kWireMagic, kHello, 0, 0, 0, 0, 0, 0};
	// Not waiting on the shared socket: its options are every holder's.
	if (sendWith(shared.get(), &hello, sizeof hello, theirs.get(), MSG_DONTWAIT) < 0)
		return errno == EAGAIN ? setError(npurtErrorTimeout,
		                                  which + ": the exporting process is not taking "
		                                          "connections")
		                       : exporterGone(api, cred.pid);
	close(theirs.release());  // in flight: the exporter holds it now
	Reply rp{};
	if (npurtError_t err = awaitReply(conn.get(), pool->pidfd, 0, cred.pid, &rp, nullptr, api))
		return err;
	if (rp.status)
		return setError(npurtErrorInvalidValue,
		                which + ": the pool's device was reset in the exporting process");
	pool->fd = conn.release();
	pool->pid = static_cast<pid_t>(rp.pid);
	pool->poolId = rp.poolId;
	pool->device = device;
	Importer &im = importer();
	std::lock_guard<std::mutex> lock(im.mutex);
	im.pools[pool.get()] = pool;
	*out = pool.get();
	return npurtSuccess;
}

bool isImportedPool(npurtMemPool_t handle)
{
	return findImported(handle) != nullptr;
}

npurtError_t poolDevice(npurtMemPool_t handle, int *device, const char *api)
{
	if (auto imported = findImported(handle)) {
		*device = imported->device;
		return npurtSuccess;
	}
	MemPool *pool = nullptr;
	if (npurtError_t err = resolveMemPool(handle, &pool, api))
		return err;
	*device = pool->device();
	return npurtSuccess;
}

npurtError_t importPoolPointer(npurtMemPool_t handle, const npurtMemPoolPtrExportData &data,
                               void **ptr, const char *api)
{
	const PtrData d = dataOf(data);
	if (d.magic != kDataMagic || !d.size || !d.segSize || d.segOffset >= d.segSize ||
	    d.size > d.segSize - d.segOffset)
		return setError(npurtErrorInvalidValue, std::string(api) +
		                                                ": exportData is not what "
		                                                "npurtMemPoolExportPointer wrote");
	auto pool = findImported(handle);
	if (!pool)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " +
		                        hexAddr(reinterpret_cast<uint64_t>(handle)) +
		                        " is not a pool imported with "
		                        "npurtMemPoolImportFromShareableHandle");
	if (d.pid != pool->pid || d.poolId != pool->poolId)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": the pointer is of another pool (pool " +
		                        std::to_string(d.poolId) + " of process " +
		                        std::to_string(d.pid) + ")");
	Context *ctx = nullptr;
	if (npurtError_t err = Runtime::instance().primaryContext(pool->device, &ctx, api))
		return err;
	Reply rp{};
	int fd = -1;
	{
		std::lock_guard<std::mutex> lock(pool->mutex);
		const Request rq{kWireMagic, kSegment, ++pool->seq, d.addr,
		                 d.size,     d.inode,  d.segOffset, d.segSize};
		if (sendWith(pool->fd, &rq, sizeof rq, -1, 0) != sizeof rq)
			return errno == EAGAIN
			               ? setError(npurtErrorTimeout,
			                          std::string(api) + ": the exporting process is "
			                                             "not reading its requests")
			               : exporterGone(api, pool->pid);
		if (npurtError_t err =
		            awaitReply(pool->fd, pool->pidfd, rq.seq, pool->pid, &rp, &fd, api))
			return err;
	}
	FdGuard guard(fd);
	if (rp.status)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": " + hexAddr(d.addr) +
		                        " is no longer that allocation of the pool in process " +
		                        std::to_string(d.pid) +
		                        " (freed, or the pool destroyed), or the data was altered");
	if (fd < 0)
		return setError(npurtErrorInvalidHandle,
		                std::string(api) + ": the exporting process sent no memory");
	npurtIpcMemHandle_t h{};
	h.fd = fd;
	h.offset = d.segOffset;
	h.size = d.segSize;
	h.pid = 0;  // the descriptor is ours now
	h.magic = NPURT_IPC_HANDLE_MAGIC;
	h.inode = d.inode;
	if (npurtError_t err = ctx->ipcOpen(h, ptr, api))
		return err;
	Importer &im = importer();
	std::lock_guard<std::mutex> lock(im.mutex);
	auto [it, fresh] = im.ptrs.try_emplace(addrOf(*ptr), Importer::Ptr{ctx, 0});
	it->second.count++;
	return npurtSuccess;
}

npurtError_t destroyImportedPool(npurtMemPool_t handle, const char *api)
{
	std::shared_ptr<ImportedPool> gone;  // closed outside the lock
	Importer &im = importer();
	std::lock_guard<std::mutex> lock(im.mutex);
	auto it = im.pools.find(handle);
	if (it == im.pools.end())
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": not an imported pool");
	gone = std::move(it->second);
	im.pools.erase(it);
	return npurtSuccess;
}

bool freeImportedPointer(uint64_t addr, npurtError_t *err)
{
	Context *ctx = nullptr;
	{
		Importer &im = importer();
		std::lock_guard<std::mutex> lock(im.mutex);
		auto it = im.ptrs.find(addr);
		if (it == im.ptrs.end())
			return false;
		ctx = it->second.ctx;
		if (--it->second.count == 0)
			im.ptrs.erase(it);
	}
	*err = ctx->ipcClose(addr);
	return true;
}

void forgetContextInPoolIpc(Context &ctx)
{
	if (Exporter *e = Exporter::instance(false))
		e->forget(ctx);
	Importer &im = importer();
	std::lock_guard<std::mutex> lock(im.mutex);
	std::erase_if(im.ptrs, [&](const auto &entry) { return entry.second.ctx == &ctx; });
}

}  // namespace npurt

// npu_ipc.cpp - NPU tensors shared between processes, as torch.multiprocessing
// shares CUDA tensors: the producer sends libnpurt's IPC handle of the
// storage's segment, an interprocess event recorded after the work queued
// on it, and a reference counter in shared memory; the consumer maps the
// segment (once per segment), makes its current stream wait for the event
// and builds a storage over the memory.
//
// The producer must not reuse the block while a consumer uses it: sharing
// swaps the storage's deleter for one that parks the block ("limbo") until
// every consumer has let go (the counter is back at 0). A consumer lets go
// when its storage dies, after its own work on the memory has ended. Parked
// blocks are freed at the next share or receive, by torch.npu.ipc_collect(),
// empty_cache(), and before an allocation fails for lack of memory.
//
// What arrives from another process is checked before it is used: the
// handle's form, the storage inside the segment, the counter file's type,
// size and seals (a bad file would fault the consumer in a deleter). A
// process forked with shared or received storages does nothing when they
// die there: the blocks and the counts are its parent's.
//
// The consumer takes the producer's descriptors with pidfd_getfd. Where the
// kernel refuses that (another user, Yama's ptrace_scope, a seccomp filter)
// and the data came through torch.multiprocessing, it asks the producer's
// broker (_reductions.py) for them, which passes only descriptors a share
// named over a Unix socket to processes holding the family's authkey.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <pybind11/pybind11.h>
#include <torch/extension.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "npu_ops.h"

namespace py = pybind11;

namespace torch_npurt {
namespace {

using Counter = std::atomic<int64_t>;
static_assert(sizeof(Counter) == sizeof(int64_t) && Counter::is_always_lock_free,
              "counters shared between processes must be plain lock-free words");

constexpr size_t kCounterFileBytes = 64 << 10;
constexpr uint32_t kCountersPerFile = kCounterFileBytes / sizeof(Counter);

Counter *counterAt(void *base, uint32_t slot)
{
	return static_cast<Counter *>(base) + slot;
}

// A file system object's identity, as libnpurt's handles carry it: a
// descriptor number may be reused for another file.
uint64_t fileIdentity(int fd)
{
	struct stat st {};
	if (fstat(fd, &st))
		return 0;
	return static_cast<uint64_t>(st.st_ino) ^ (static_cast<uint64_t>(st.st_dev) << 40);
}

std::string osError(const std::string &what, int err)
{
	return what + ": " + std::strerror(err);
}

// ----------------------------------------------------------- producer side

// Counters of this process's shared blocks: memfd files, kept for the life
// of the process (a consumer maps one by taking its descriptor).
struct CounterFile {
	int fd = -1;
	uint64_t identity = 0;
	void *base = nullptr;
	std::vector<uint32_t> free;  // unused slots
};

// The seals a counter file carries: its size is fixed, so a consumer's
// mapping cannot fault.
constexpr int kCounterSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A shared block: the allocator's DataPtr, kept until the storage died and
// every consumer let go.
struct Sent {
	c10::DataPtr block;
	CounterFile *file = nullptr;
	uint32_t slot = 0;
	pid_t owner = 0;  // the process that shared it (not a forked child)
	uint64_t segment = 0;  // the segment's identity and the block's offset in it
	uint64_t offset = 0;

	Counter *counter() const { return counterAt(file->base, slot); }
};

// ----------------------------------------------------------- consumer side

// A segment of another process, mapped here once for all its storages.
struct Mapping {
	int device = 0;
	void *base = nullptr;  // the segment's start in this process
	uint64_t size = 0;
	~Mapping();
};

// Another process's counter file, mapped here.
struct CounterMap {
	void *base = nullptr;
	~CounterMap() { munmap(base, kCounterFileBytes); }
};

// A storage over another process's block.
struct Received {
	std::shared_ptr<Mapping> mapping;
	std::shared_ptr<CounterMap> counters;
	uint32_t slot = 0;
	int device = 0;
	pid_t owner = 0;  // the process that received it (not a forked child)
};

// Never destroyed: storages may die during interpreter shutdown, after
// static destructors ran.
struct State {
	std::mutex mutex;  // guards every member
	std::vector<std::unique_ptr<CounterFile>> files;
	std::vector<Sent *> limbo;  // dead storages' blocks still used elsewhere
	// This process's shared storages by (segment, offset): a tensor sent
	// to this same process comes back on its own storage.
	std::map<std::pair<uint64_t, uint64_t>, c10::weak_intrusive_ptr<c10::StorageImpl>> own;
	std::map<std::pair<int, uint64_t>, std::weak_ptr<Mapping>> mappings;  // (pid, segment)
	std::map<std::tuple<int, int, uint64_t>, std::weak_ptr<CounterMap>> counterMaps;
	// Received storages by (pid, segment, offset): one storage however
	// often the same block arrives.
	std::map<std::tuple<int, uint64_t, uint64_t>, c10::weak_intrusive_ptr<c10::StorageImpl>>
	        received;
	// Received blocks let go while a capture was underway (no synchronize
	// then): released at the next collect.
	std::vector<Received *> pending;
	// One interprocess event per device, recorded at each share (a
	// receiver waits for its latest record, which comes after the work
	// its share ordered): one descriptor however many blocks are shared.
	std::map<int, npurtEvent_t> events;
	// The descriptors shares named (memory, counters, events) and what
	// they were then: the only ones the broker passes to a receiver.
	std::map<int, uint64_t> served;
};

State &state()
{
	static State *s = new State;
	return *s;
}

// DeviceScope for deleters, which cannot throw (at exit the runtime may be
// gone: the calls then fail, and are reported at most once).
class QuietDeviceScope {
public:
	explicit QuietDeviceScope(int device)
	{
		if (npurtGetDevice(&previous_) != npurtSuccess || previous_ == device)
			previous_ = -1;
		else if (npurtSetDevice(device) != npurtSuccess)
			previous_ = -1;
		npurtGetLastError();
	}
	~QuietDeviceScope()
	{
		if (previous_ >= 0 && npurtSetDevice(previous_) != npurtSuccess)
			npurtGetLastError();
	}
	QuietDeviceScope(const QuietDeviceScope &) = delete;
	QuietDeviceScope &operator=(const QuietDeviceScope &) = delete;

private:
	int previous_ = -1;
};

std::atomic<bool> releaseErrorReported{false};

// Deleters cannot throw: a failure is reported once.
void reportOnce(const char *what, npurtError_t err)
{
	if (err != npurtSuccess && !releaseErrorReported.exchange(true))
		std::fprintf(stderr, "torch_npurt: %s failed: %s\n", what,
		             npurtGetErrorString(err));
	npurtGetLastError();
}

Mapping::~Mapping()
{
	QuietDeviceScope scope(device);
	reportOnce("npurtIpcCloseMemHandle", npurtIpcCloseMemHandle(base));
}

// With the state's lock held.
void takeSlot(Sent *s)
{
	State &st = state();
	for (auto &f : st.files)
		if (!f->free.empty()) {
			s->file = f.get();
			s->slot = f->free.back();
			f->free.pop_back();
			return;
		}
	auto f = std::make_unique<CounterFile>();
	f->fd = static_cast<int>(syscall(SYS_memfd_create, "torch_npurt-ipc-counters",
	                                 static_cast<unsigned>(MFD_CLOEXEC | MFD_ALLOW_SEALING)));
	TORCH_CHECK(f->fd >= 0, osError("sharing an NPU tensor: memfd_create", errno));
	if (ftruncate(f->fd, kCounterFileBytes) != 0 ||
	    fcntl(f->fd, F_ADD_SEALS, kCounterSeals) != 0 ||
	    (f->base = mmap(nullptr, kCounterFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd,
	                    0)) == MAP_FAILED) {
		const int e = errno;
		close(f->fd);
		TORCH_CHECK(false, osError("sharing an NPU tensor: its reference counters", e));
	}
	f->identity = fileIdentity(f->fd);
	for (uint32_t i = kCountersPerFile; i-- > 0;)
		f->free.push_back(i);
	st.files.push_back(std::move(f));
	takeSlot(s);
}

// Frees a shared block nobody uses any more (without the state's lock:
// the free goes to libnpurt).
void destroySent(Sent *s)
{
	s->block.clear();  // back to the allocator
	std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> dead;  // let go after the lock
	{
		std::lock_guard<std::mutex> lock(state().mutex);
		s->file->free.push_back(s->slot);
		auto it = state().own.find({s->segment, s->offset});
		if (it != state().own.end() && it->second.expired()) {
			dead.push_back(std::move(it->second));
			state().own.erase(it);
		}
	}
	delete s;
}

// The deleter of a shared storage's DataPtr in the producer.
void sentDelete(void *ctx)
{
	auto *s = static_cast<Sent *>(ctx);
	if (s->owner != getpid())
		return;  // a forked child's copy: the block is the parent's
	{
		std::lock_guard<std::mutex> lock(state().mutex);
		if (s->counter()->load(std::memory_order_acquire) > 0) {
			state().limbo.push_back(s);
			return;
		}
	}
	destroySent(s);
}

// A consumer lets go of a block: once its work on the memory has ended,
// the producer may reuse it.
void finishRelease(Received *r)
{
	{
		// A failure is a stream's earlier fault: its work stopped.
		QuietDeviceScope scope(r->device);
		if (npurtDeviceSynchronize() != npurtSuccess)
			npurtGetLastError();
	}
	r->mapping.reset();
	counterAt(r->counters->base, r->slot)->fetch_sub(1, std::memory_order_acq_rel);
	delete r;
}

// The deleter of a received storage's DataPtr in the consumer.
void receivedDelete(void *ctx)
{
	auto *r = static_cast<Received *>(ctx);
	if (r->owner != getpid())
		return;  // a forked child's copy: the use is the parent's
	if (captureUnderway()) {  // a synchronize would break the capture
		std::lock_guard<std::mutex> lock(state().mutex);
		state().pending.push_back(r);
		return;
	}
	finishRelease(r);
}

}  // namespace

size_t ipcCollect()
{
	State &st = state();
	std::vector<Sent *> done;
	std::vector<Received *> pending;
	{
		std::lock_guard<std::mutex> lock(st.mutex);
		auto keep = st.limbo.begin();
		for (Sent *s : st.limbo)
			if (s->counter()->load(std::memory_order_acquire) > 0)
				*keep++ = s;
			else
				done.push_back(s);
		st.limbo.erase(keep, st.limbo.end());
		if (!captureUnderway())
			pending.swap(st.pending);
	}
	for (Sent *s : done)
		destroySent(s);
	for (Received *r : pending)
		finishRelease(r);
	return done.size();
}

namespace {

std::string handleBytes(const void *h, size_t n)
{
	return std::string(static_cast<const char *>(h), n);
}

// The device's interprocess event for shares (made once, on `device`,
// which is current).
npurtEvent_t deviceEvent(int device)
{
	std::lock_guard<std::mutex> lock(state().mutex);
	npurtEvent_t &ev = state().events[device];
	if (!ev)
		check(npurtEventCreateWithFlags(&ev,
		                                npurtEventInterprocess | npurtEventDisableTiming),
		      "npurtEventCreateWithFlags");
	return ev;
}

// Lets the broker pass these descriptors of this process (as the files
// they name now).
void serve(std::initializer_list<int> fds)
{
	std::lock_guard<std::mutex> lock(state().mutex);
	for (int fd : fds)
		state().served[fd] = fileIdentity(fd);
}

// Shares t's storage: (memory handle, storage bytes, (pid, counter fd,
// counter file identity, slot), event handle); None for a storage without
// memory.
py::object share(const at::Tensor &t)
{
	TORCH_CHECK(isNpu(t), "_ipc_share: not an NPU tensor");
	c10::StorageImpl *impl = t.storage().unsafeGetStorageImpl();
	void *ptr = impl->data_ptr().get();
	const size_t nbytes = impl->nbytes();
	if (!ptr || !nbytes)
		return py::none();
	const int dev = deviceOf(t);
	ipcCollect();
	DeviceScope scope(dev);
	npurtIpcMemHandle_t h{};
	check(npurtIpcGetMemHandle(&h, ptr), "npurtIpcGetMemHandle");
	Sent *s = impl->data_ptr().cast_context<Sent>(&sentDelete);
	if (!s) {
		TORCH_CHECK(impl->data_ptr().get_deleter() == allocator()->raw_deleter(),
		            "only NPU memory from torch_npurt's allocator can be shared between "
		            "processes (this storage wraps memory made elsewhere)");
		auto sent = std::make_unique<Sent>();
		sent->owner = getpid();
		sent->segment = h.inode;
		sent->offset = h.offset;
		{
			std::lock_guard<std::mutex> lock(state().mutex);
			takeSlot(sent.get());
			sent->counter()->store(0, std::memory_order_relaxed);
			state().own.insert_or_assign(
			        std::make_pair(h.inode, h.offset),
			        c10::weak_intrusive_ptr<c10::StorageImpl>(
			                c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl)));
		}
		c10::DataPtr parked(ptr, sent.get(), &sentDelete, impl->data_ptr().device());
		sent->block = impl->set_data_ptr(std::move(parked));
		s = sent.release();
	}
	// The consumer's stream waits for what is queued on the block now.
	npurtEvent_t ev = deviceEvent(dev);
	check(npurtEventRecord(ev, currentNative(dev)), "npurtEventRecord");
	npurtIpcEventHandle_t eh{};
	check(npurtIpcGetEventHandle(&eh, ev), "npurtIpcGetEventHandle");
	serve({h.fd, s->file->fd, eh.fd});
	s->counter()->fetch_add(1, std::memory_order_acq_rel);
	return py::make_tuple(
	        py::bytes(handleBytes(&h, sizeof(h))), nbytes,
	        py::make_tuple(static_cast<int>(getpid()), s->file->fd, s->file->identity, s->slot),
	        py::bytes(handleBytes(&eh, sizeof(eh))));
}

// A descriptor of process `pid`, owned by the caller: taken with
// pidfd_getfd, or, where the kernel refuses that (another user, Yama's
// ptrace_scope, a container's seccomp filter), asked of the sender through
// `fetch` (the channel's broker, which passes it over a Unix socket); None:
// no broker (the data came through some other channel).
int takeDescriptor(int pid, int fd, const py::object &fetch, const std::string &what)
{
	const std::string from =
	        "receiving an NPU tensor: taking " + what + " from process " + std::to_string(pid);
	int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
	int e = errno;
	int local = -1;
	if (pidfd >= 0) {
		local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
		e = errno;
		close(pidfd);
	}
	if (local >= 0)
		return local;
	// EPERM or ENOSYS from either call: a policy refuses it (another user,
	// Yama's ptrace_scope, a seccomp filter that refuses pidfd_open itself
	// or pretends it does not exist), not a missing sender.
	const bool refused = e == EPERM || e == ENOSYS;
	if (refused && !fetch.is_none())
		return fetch(fd).cast<int>();
	TORCH_CHECK(pidfd >= 0,
	            osError(refused ? from + " (pidfd_open refused: a seccomp filter such as a "
	                                     "container's; a torch.multiprocessing channel "
	                                     "passes descriptors instead)"
	                            : "receiving an NPU tensor: the process that shared it (" +
	                                      std::to_string(pid) + ")" +
	                                      (e == ESRCH ? " has exited" : ""),
	                    e));
	const char *why = refused      ? " (another user's process, ptrace restrictions such as "
	                                 "Yama's ptrace_scope, or a seccomp filter; a "
	                                 "torch.multiprocessing channel passes descriptors "
	                                 "instead)"
	                  : e == EBADF ? " (gone: freed since?)"
	                               : "";
	TORCH_CHECK(false, osError(from + why, e));
	return -1;
}

// Closes a descriptor when it goes out of scope.
class FdCloser {
public:
	explicit FdCloser(int fd) : fd_(fd) {}
	~FdCloser() { close(fd_); }
	FdCloser(const FdCloser &) = delete;
	FdCloser &operator=(const FdCloser &) = delete;

private:
	int fd_;
};

// Another process's counter file, mapped (cached by process and file).
std::shared_ptr<CounterMap> mapCounters(int pid, int fd, uint64_t identity, const py::object &fetch)
{
	State &st = state();
	const auto key = std::make_tuple(pid, fd, identity);
	{
		std::lock_guard<std::mutex> lock(st.mutex);
		auto it = st.counterMaps.find(key);
		if (it != st.counterMaps.end())
			if (auto m = it->second.lock())
				return m;
	}
	const int local = takeDescriptor(pid, fd, fetch, "its reference counters");
	FdCloser closer(local);
	// Only a sealed counter file of the size made here: another file
	// (shorter, or one that may shrink) would fault this process in a
	// deleter, or have 8 of its bytes rewritten.
	struct stat st_ {};
	const bool ok = fileIdentity(local) == identity && fstat(local, &st_) == 0 &&
	                S_ISREG(st_.st_mode) &&
	                static_cast<uint64_t>(st_.st_size) == kCounterFileBytes &&
	                (fcntl(local, F_GET_SEALS) & kCounterSeals) == kCounterSeals;
	TORCH_CHECK(ok, "receiving an NPU tensor: process ", pid,
	            " no longer has the tensor's reference counters (it exited?)");
	auto m = std::make_shared<CounterMap>();
	m->base = mmap(nullptr, kCounterFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
	const int me = errno;
	if (m->base == MAP_FAILED) {
		m->base = nullptr;
		TORCH_CHECK(false, osError("receiving an NPU tensor: mapping its counters", me));
	}
	std::lock_guard<std::mutex> lock(st.mutex);
	st.counterMaps.insert_or_assign(key, m);
	return m;
}

// The segment named by h, mapped in this process (cached by process and
// segment); the block's address in *ptr.
std::shared_ptr<Mapping> mapSegment(const npurtIpcMemHandle_t &h, int dev, void **ptr,
                                    const py::object &fetch)
{
	State &st = state();
	const auto key = std::make_pair(h.pid, h.inode);
	{
		std::lock_guard<std::mutex> lock(st.mutex);
		auto it = st.mappings.find(key);
		if (it != st.mappings.end())
			if (auto m = it->second.lock()) {
				TORCH_CHECK(m->size == h.size,
				            "receiving an NPU tensor: malformed sharing data (the "
				            "segment's size)");
				TORCH_CHECK(m->device == dev,
				            "receiving an NPU tensor: its memory is "
				            "mapped on NPU ",
				            m->device, ", not NPU ", dev);
				*ptr = static_cast<char *>(m->base) + h.offset;
				return m;
			}
	}
	// libnpurt opens a descriptor of this process as the handle's (it
	// still checks that the descriptor names the memory).
	npurtIpcMemHandle_t mine = h;
	mine.fd = takeDescriptor(h.pid, h.fd, fetch, "its memory");
	mine.pid = 0;
	FdCloser closer(mine.fd);
	void *p = nullptr;
	check(npurtIpcOpenMemHandle(&p, mine, 0), "npurtIpcOpenMemHandle");
	auto m = std::make_shared<Mapping>();
	m->device = dev;
	m->base = static_cast<char *>(p) - h.offset;
	m->size = h.size;
	*ptr = p;
	std::lock_guard<std::mutex> lock(st.mutex);
	st.mappings.insert_or_assign(key, m);
	return m;
}

// Moves the expired entries of a cache of weak references to `out`, to be
// destroyed once the state's lock is released.
template <typename Map, typename Out> void pruneExpired(Map &map, Out &out)
{
	for (auto it = map.begin(); it != map.end();) {
		if (it->second.expired()) {
			out.push_back(std::move(it->second));
			it = map.erase(it);
		} else {
			++it;
		}
	}
}

// Gives a counted use back unless the receive went through (an error
// after the counters were mapped must not keep the sender's block).
class UseGuard {
public:
	UseGuard(std::shared_ptr<CounterMap> counters, uint32_t slot)
	    : counters_(std::move(counters)), slot_(slot)
	{}
	~UseGuard()
	{
		if (counters_)
			counterAt(counters_->base, slot_)->fetch_sub(1, std::memory_order_acq_rel);
	}
	void keep() { counters_.reset(); }
	UseGuard(const UseGuard &) = delete;
	UseGuard &operator=(const UseGuard &) = delete;

private:
	std::shared_ptr<CounterMap> counters_;
	uint32_t slot_;
};

// The storage of a shared tensor, in this process.
c10::intrusive_ptr<c10::StorageImpl> receiveStorage(int dev, const npurtIpcMemHandle_t &h,
                                                    size_t nbytes, int fd, uint64_t identity,
                                                    uint32_t slot, const py::object &fetch)
{
	State &st = state();
	if (h.pid == getpid()) {
		// Sent within this process (a queue between its threads): the
		// producer's own storage, whose share counted one use too many.
		c10::intrusive_ptr<c10::StorageImpl> impl;
		{
			std::lock_guard<std::mutex> lock(st.mutex);
			for (auto &f : st.files)
				if (f->fd == fd && f->identity == identity)
					counterAt(f->base, slot)
					        ->fetch_sub(1, std::memory_order_acq_rel);
			auto it = st.own.find({h.inode, h.offset});
			if (it != st.own.end())
				impl = it->second.lock();
		}
		TORCH_CHECK(impl, "receiving an NPU tensor: this process shared it and has "
		                  "freed it since");
		return impl;
	}
	auto counters = mapCounters(h.pid, fd, identity, fetch);
	UseGuard use(counters, slot);
	const auto key = std::make_tuple(h.pid, h.inode, h.offset);
	{
		std::lock_guard<std::mutex> lock(st.mutex);
		auto it = st.received.find(key);
		if (it != st.received.end())
			if (auto impl = it->second.lock()) {
				// Already here: that storage holds the block; this
				// share's use is given back at once (by the guard).
				TORCH_CHECK(impl->nbytes() == nbytes,
				            "receiving an NPU tensor: malformed sharing data (the "
				            "storage's size)");
				return impl;
			}
	}
	void *ptr = nullptr;
	auto mapping = mapSegment(h, dev, &ptr, fetch);
	auto *r = new Received{std::move(mapping), std::move(counters), slot, dev, getpid()};
	c10::DataPtr data(ptr, r, &receivedDelete, c10::Device(kNpu, dev));
	use.keep();  // the storage's deleter gives it back
	auto impl = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
	                                                  nbytes, std::move(data), nullptr,
	                                                  /*resizable=*/false);
	std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> dead;
	std::vector<std::weak_ptr<Mapping>> deadMaps;
	std::vector<std::weak_ptr<CounterMap>> deadCounters;
	std::lock_guard<std::mutex> lock(st.mutex);
	pruneExpired(st.received, dead);  // st.own: destroySent erases
	pruneExpired(st.mappings, deadMaps);
	pruneExpired(st.counterMaps, deadCounters);
	st.received.insert_or_assign(key, c10::weak_intrusive_ptr<c10::StorageImpl>(impl));
	return impl;
}

at::Tensor rebuild(int dev, const std::string &handle, size_t nbytes, const py::tuple &counter,
                   const std::string &event, const py::object &dtype,
                   const std::vector<int64_t> &sizes, const std::vector<int64_t> &strides,
                   int64_t offset, const py::object &fetch)
{
	npurtIpcMemHandle_t h{};
	npurtIpcEventHandle_t eh{};
	TORCH_CHECK(handle.size() == sizeof(h) && event.size() == sizeof(eh) && counter.size() == 4,
	            "receiving an NPU tensor: malformed sharing data");
	std::memcpy(&h, handle.data(), sizeof(h));
	std::memcpy(&eh, event.data(), sizeof(eh));
	const int pid = counter[0].cast<int>();
	const auto slot = counter[3].cast<uint32_t>();
	// One process made all three, and the storage lies in the segment:
	// nothing beyond the memory shared may be reached through it.
	TORCH_CHECK(h.magic == NPURT_IPC_HANDLE_MAGIC && eh.magic == NPURT_IPC_EVENT_MAGIC &&
	                    h.pid > 0 && h.pid == pid && eh.pid == pid && nbytes > 0 &&
	                    h.offset < h.size && nbytes <= h.size - h.offset &&
	                    slot < kCountersPerFile,
	            "receiving an NPU tensor: malformed sharing data");
	dev = checkedDevice(dev);
	at::ScalarType st = torch::python::detail::py_object_to_dtype(dtype);
	ipcCollect();
	DeviceScope scope(dev);
	auto impl = receiveStorage(dev, h, nbytes, counter[1].cast<int>(),
	                           counter[2].cast<uint64_t>(), slot, fetch);
	if (h.pid != getpid()) {
		// The work the producer queued on the block before sharing it
		// comes before this process's work on it.
		npurtIpcEventHandle_t mine = eh;
		mine.fd = takeDescriptor(eh.pid, eh.fd, fetch, "its event");
		mine.pid = 0;
		FdCloser closer(mine.fd);
		npurtEvent_t ev = nullptr;
		check(npurtIpcOpenEventHandle(&ev, mine), "npurtIpcOpenEventHandle");
		npurtError_t err = npurtStreamWaitEvent(currentNative(dev), ev, 0);
		npurtEventDestroy(ev);
		check(err, "npurtStreamWaitEvent");
	}
	at::Tensor t = at::empty({0}, at::TensorOptions().dtype(st).device(kNpu, dev));
	t.set_(c10::Storage(std::move(impl)), offset, sizes, strides);
	return t;
}

// An interprocess event's handle with its descriptor taken into this
// process (pid 0), and that descriptor (the caller closes it; -1 for an
// event of this process, whose handle is returned as it is).
py::tuple localizeEvent(const std::string &handle, const py::object &fetch)
{
	npurtIpcEventHandle_t eh{};
	TORCH_CHECK(handle.size() == sizeof(eh), "receiving an NPU event: malformed handle");
	std::memcpy(&eh, handle.data(), sizeof(eh));
	TORCH_CHECK(eh.magic == NPURT_IPC_EVENT_MAGIC && eh.pid > 0,
	            "receiving an NPU event: malformed handle");
	if (eh.pid == getpid())
		return py::make_tuple(py::bytes(handle), -1);
	eh.fd = takeDescriptor(eh.pid, eh.fd, fetch, "an event");
	eh.pid = 0;
	return py::make_tuple(py::bytes(handleBytes(&eh, sizeof(eh))), eh.fd);
}

// Lets the broker pass an interprocess event's descriptor (the event of
// this process whose handle this is).
void serveEvent(const std::string &handle)
{
	npurtIpcEventHandle_t eh{};
	TORCH_CHECK(handle.size() == sizeof(eh), "malformed event handle");
	std::memcpy(&eh, handle.data(), sizeof(eh));
	TORCH_CHECK(eh.magic == NPURT_IPC_EVENT_MAGIC && eh.pid == getpid(),
	            "not an event handle of this process");
	serve({eh.fd});
}

}  // namespace

void registerIpc(py::module &m)
{
	m.def("_ipc_localize_event", &localizeEvent);
	m.def("_ipc_serve_event", &serveEvent);
	m.def("_ipc_share", &share);
	m.def("_ipc_rebuild", &rebuild);
	// The broker's check: fd is one a share named, still the same file.
	m.def("_ipc_may_serve", [](int fd) {
		std::lock_guard<std::mutex> lock(state().mutex);
		auto it = state().served.find(fd);
		return it != state().served.end() && fileIdentity(fd) == it->second;
	});
	m.def("_ipc_collect", [] {
		py::gil_scoped_release nogil;
		return ipcCollect();
	});
	m.def("_ipc_limbo", [] {
		std::lock_guard<std::mutex> lock(state().mutex);
		return state().limbo.size();
	});
}

}  // namespace torch_npurt

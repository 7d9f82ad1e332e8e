// Contexts: one open file of an NPU each, with its own device address
// space, its caching pool of device memory and its IPC imports.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "host_pool.h"
#include "npurt/npurt.h"
#include "os_interface.h"

struct npurtContext_st {};  // the C handle's type: Context derives from it

namespace npurt {

class Runtime;

// A range of device addresses: a reserved slice of host address space
// handed out first-fit. One per device, shared by the device's contexts so
// device pointers stay unique in the process.
class AddressSpace {
public:
	AddressSpace(uint64_t base, uint64_t size);
	// An aligned range of `size` bytes, or 0 when the slice is full.
	uint64_t allocate(uint64_t size, uint64_t align);
	// Exactly [addr, addr + size), if all of it is free.
	bool allocateAt(uint64_t addr, uint64_t size);
	void release(uint64_t addr, uint64_t size);
	bool contains(uint64_t addr) const { return addr >= base_ && addr - base_ < size_; }

private:
	std::mutex mutex_;  // guards free_
	uint64_t base_, size_;
	std::map<uint64_t, uint64_t> free_;  // start -> size, coalesced
};

// Pinned host memory the runtime uses itself (staging, timestamps), mapped
// into one context at its host address.
struct PinnedBuffer {
	void *ptr = nullptr;
	size_t size = 0;
	uint32_t handle = 0;
};

class Stream;
struct StreamLife;
struct Timeline;
struct Point;

class Context final : public npurtContext_st, private SegmentBackend, private StreamTracker {
public:
	// `owned` is null for a primary context, which uses the device's
	// discovery file.
	Context(int ordinal, os::Device &node, std::unique_ptr<os::Device> owned,
	        AddressSpace &space);
	~Context() override;
	Context(const Context &) = delete;
	Context &operator=(const Context &) = delete;

	int ordinal() const { return ordinal_; }
	// A number no other context of the process ever has (a new context
	// may get a destroyed one's address).
	uint64_t serial() const { return serial_; }
	os::Device &node() { return node_; }
	CachingAllocator &pool() { return pool_; }
	// For the memory pools' allocators (mem_pool.cpp): segments from this
	// context, reuse ordered by its streams.
	SegmentBackend &segmentBackend() { return *this; }
	StreamTracker &streamTracker() { return *this; }
	HostPool &hostPool() { return hostPool_; }

	// The device memory containing addr in this context (pool or IPC
	// import): its base and size. False if there is none.
	bool findDeviceRange(uint64_t addr, uint64_t *base, size_t *size);
	// The pool segment containing addr: its base, size and BO handle.
	bool findSegment(uint64_t addr, uint64_t *base, uint64_t *size, uint32_t *handle);

	// A USERPTR BO pinning the pages [start, start + size) of this process
	// (page-aligned); 0 or -errno from the driver.
	int userptrBo(uint64_t start, uint64_t size, bool readonly, uint32_t *handle);
	// Bind [offset, offset + size) of a BO at addr in this context's
	// address space.
	int bind(uint32_t handle, uint64_t addr, uint64_t size, bool readonly, uint64_t offset = 0);
	int unbind(uint64_t addr, uint64_t size);
	void closeBo(uint32_t handle);

	// The export of the pool segment holding addr (made once, kept until
	// the segment goes back to the device): a close-on-exec dma-buf
	// descriptor of this process, with the inode that names it; with
	// copy, a duplicate the caller closes (the segment may go meanwhile).
	npurtError_t exportSegment(uint64_t addr, uint64_t *segBase, uint64_t *segSize, int *fd,
	                           uint64_t *inode, const char *api, bool copy = false);
	// The same for the allocation [base, base + size), which must lie in
	// one segment: in an expandable segment an allocation may span several
	// device memory objects, one per page, and an export names only one
	// (npurtErrorNotSupported).
	npurtError_t exportAllocation(uint64_t base, uint64_t size, uint64_t *segBase,
	                              uint64_t *segSize, int *fd, uint64_t *inode, const char *api);
	npurtError_t ipcOpen(const npurtIpcMemHandle_t &h, void **devPtr,
	                     const char *api = "npurtIpcOpenMemHandle");
	npurtError_t ipcClose(uint64_t addr);

	// Peer access (peer.cpp): this context's engines reach the pool
	// memory of another context (`owner`, of any device) at its own
	// addresses, through imports of owner's segments bound in this
	// context's address space, kept in step as owner's pool grows and
	// shrinks. Explicit access is the user's (npurtDeviceEnablePeerAccess,
	// npurtCtxEnablePeerAccess); implicit access is made on first use by
	// npurtMemcpyPeer, which CUDA lets copy between devices without it.
	// Until one of them, a copy, fill or op of this context naming
	// owner's memory fails: contexts are isolated.
	npurtError_t enablePeer(Context &owner, const char *api);
	npurtError_t disablePeer(Context &owner, const char *api);
	// Whether this context's work may name owner's memory: access was
	// enabled, or (peerCopy) it is made for npurtMemcpyPeer now. An
	// error only when making it failed.
	npurtError_t reachPeer(Context &owner, bool peerCopy, bool *reached, const char *api);

	// The device's address space (shared by its contexts).
	AddressSpace &space() { return space_; }
	// Waits until the work queued so far on this context's streams (and
	// its peers' streams that reach its memory) has ended, or deadlineNs
	// (CLOCK_MONOTONIC) passed; whether it ended.
	bool waitQueuedWork(int64_t deadlineNs);
	// Whether GEM handle h is one of this context's pool segments or IPC
	// imports (PRIME returns it again for the same buffer).
	bool ownsBo(uint32_t h);
	bool ownsSegmentBo(uint32_t h);  // a pool segment's
	// How long unmapping memory (npurtMemUnmap, narrowing access,
	// npurtIpcCloseMemHandle) waits for queued work that may use it.
	static constexpr int64_t kQueuedWorkLimitNs = 60'000'000'000;
	// What an out-of-memory message adds about the per-process limit
	// for `size` more bytes ("" if it was not the limit).
	std::string limitDetail(size_t size) { return oomDetail(size); }

	// Device memory free/total of this context's device.
	npurtError_t queryMemory(uint64_t *freeBytes, uint64_t *totalBytes);
	// The device memory the driver charges this context (its file).
	npurtError_t driverDeviceBytes(uint64_t *bytes);

	// The file, shared with objects that may outlive the context (queue
	// timelines referenced by events).
	std::shared_ptr<os::Device> file() { return file_; }

	// Pinned buffers for the runtime's own use.
	npurtError_t allocPinned(size_t size, PinnedBuffer *out, const char *api);
	void freePinned(PinnedBuffer &buf);

	// A pageable host range pinned and mapped at a device address of its
	// own for zero-copy copies: the engine reaches host byte q at
	// deviceAddr(q).
	struct HostPin {
		uint64_t hostStart = 0;  // page-aligned
		uint64_t va = 0, size = 0;
		uint32_t handle = 0;
		uint64_t deviceAddr(const void *q) const
		{
			return va + (reinterpret_cast<uint64_t>(q) - hostStart);
		}
	};
	// False, with nothing held, when the range cannot be pinned (not
	// mapped, or writable when it must be, or over the locked-memory
	// limit): the caller copies through staging buffers instead.
	// Pins outlive their copy in a cache (see pins_): the next copy of
	// the range reuses the pin while the kernel reports the range
	// unchanged. Thread-safe.
	bool pinHost(const void *ptr, size_t size, bool readonly, HostPin *out);
	// Once the copies through the pin have ended.
	void unpinHost(const HostPin &pin);
	// Unpins every cached pin not in use (to free locked memory).
	void dropPins();

	// A device address of 16 bytes in pinned memory, for a device
	// timestamp or a queue's completion record the CPU reads directly; 0
	// when none can be had.
	uint64_t allocTimestampSlot();
	void freeTimestampSlot(uint64_t addr);
	// A slot the device may still write until `point` of `tl` is reached:
	// reused only after that.
	void retireTimestampSlot(uint64_t addr, const Point &until);

	// The context's device queues (their timelines), for streams to share
	// once the driver gives the context no more: the least shared one of
	// the class, of the same priority if there is one; null if none.
	void addQueue(const std::shared_ptr<Timeline> &tl);
	std::shared_ptr<Timeline> shareQueue(uint32_t engineClass, uint32_t priority);
	// The queue's creator is going: true (and no stream joins it any
	// more) unless other streams share it, whose jobs go on writing the
	// creator's completion record.
	bool closeQueue(Timeline &tl);

	// The context's default stream (NULL), created on first use.
	Stream *defaultStream(npurtError_t *err);
	// Streams of this context (for DeviceSynchronize and destruction).
	void addStream(Stream *s);
	// Takes s off the list, then waits until no forEachStreamPinned call
	// uses it.
	void removeStream(Stream *s);
	std::vector<Stream *> streams();
	// Runs f (the end of a stream destroyed while its host functions were
	// queued) in a thread of its own; the context's end waits for it.
	void reap(const std::function<void()> &f);
	// Calls f(s) for every stream, each pinned (its destruction waits) for
	// its own call only, with no lock held: f may wait for the stream's
	// work, whose host functions may destroy other streams meanwhile.
	void forEachStreamPinned(const std::function<void(Stream *)> &f);
	// A stream's destructor has submitted its last work, ending at `last`.
	void streamEnded(Stream *s, const Point &last);

	// CUDA's legacy default stream: work on it waits for the work of the
	// context's blocking streams, and theirs for its. Each enqueue counts
	// on its side; a stream looks at the other side only when that count
	// moved since its last look (so one stream alone pays two atomics).
	std::atomic<uint64_t> defaultWork{0}, blockingWork{0};
	// Calls f(s) for every other stream, each kept alive during its call.
	template <typename F> void forEachStream(F f)
	{
		std::shared_lock<std::shared_mutex> life(streamLife_);
		for (Stream *s : streams())
			f(s);
	}
	// The default stream if it exists, kept alive while f runs.
	template <typename F> void withDefaultStream(F f)
	{
		std::shared_lock<std::shared_mutex> life(streamLife_);
		Stream *d = nullptr;
		{
			std::lock_guard<std::mutex> lock(defaultMutex_);
			d = default_;
		}
		if (d)
			f(d);
	}

private:
	// StreamTracker: freed device memory is reused only after the work
	// enqueued before the free, on every stream of the context, has
	// completed (see CachingAllocator). StreamId is a stream's serial().
	uint64_t mark(StreamId stream) override;
	bool orderedAfter(StreamId stream, uint64_t marker) override;
	void markPending(std::vector<uint64_t> *out) override;
	bool done(uint64_t marker) override;
	bool doneInPass(uint64_t marker, DoneMemo &memo) override;
	// Both: without a memo, a blocking ask of the marker's stream.
	bool markerDone(uint64_t marker, DoneMemo *memo);
	void release(uint64_t marker) override;
	bool wait(uint64_t marker, int64_t deadlineNs) override;
	// The first `tasks` tasks of a live stream, or a point once the
	// stream is gone; for a stream of another context (life set), the
	// same through its StreamLife.
	struct Marker {
		Stream *stream = nullptr;
		uint64_t tasks = 0;
		// mark()'s: the stream's serial and its tasks enqueued by then
		// (also when they are done), for Stream::orderedAfter.
		uint64_t serial = 0;
		uint64_t order = 0;

		std::shared_ptr<Timeline> tl;
		uint64_t point = 0;
		std::shared_ptr<StreamLife> life;
	};
	// Whether a stream's first `tasks` tasks are done (see markerDone).
	static bool tasksDone(Stream *s, uint64_t tasks, DoneMemo *memo);
	// Guards markers_ and nextMarker_; taken before streamMutex_ and a
	// stream's locks (called by the pool with its lock held).
	std::mutex markMutex_;
	std::map<uint64_t, Marker> markers_;
	uint64_t nextMarker_ = 0;

	// One of owner's segments bound here: its import's handle.
	struct PeerMap {
		uint64_t size;
		uint32_t handle;
	};
	struct PeerLink {
		bool explicitAccess = false;
		std::map<uint64_t, PeerMap> maps;  // by address
	};
	// All with the peer mutex held (peer.cpp), which guards peers_ and
	// accessors_ of every context; taken after the pool's lock and
	// markMutex_, before the segments' mutex_ and any stream's locks.
	npurtError_t linkPeer(Context &owner, bool explicitAccess, const char *api);
	npurtError_t mapPeerSegment(PeerLink &link, Context &owner, uint64_t base, uint64_t size,
	                            uint32_t ownerHandle, const char *api);
	void unmapPeerSegment(PeerLink &link, uint64_t base);
	void unmapPeer(PeerLink &link);
	void unlinkPeer(Context &owner);
	// Owner side: a segment made or about to go, in every accessor.
	npurtError_t peerSegmentAdded(uint64_t base, uint64_t size, uint32_t handle);
	void peerSegmentRemoved(uint64_t base);
	// With markMutex_ held: markers of the work queued so far on the
	// streams of contexts reaching this one's memory (through their
	// StreamLife: no stream of theirs tells this context it ends).
	void markAccessors(std::vector<uint64_t> *out);
	// The destructor's: every link to and from this context goes.
	void dropPeers();
	std::map<Context *, PeerLink> peers_;  // owners this context reaches
	std::vector<Context *> accessors_;  // contexts reaching this one
	std::atomic<size_t> accessorCount_{0};  // accessors_.size(), read unlocked

	npurtError_t allocSegment(size_t size, uint64_t *addr) override;
	void freeSegment(uint64_t addr, size_t size) override;
	void memInfo(size_t *freeBytes, size_t *totalBytes) override;
	std::string oomDetail(size_t segmentSize) override;
	size_t capacity() override;
	npurtError_t reserveRange(size_t size, uint64_t *addr) override;
	void releaseRange(uint64_t addr, size_t size) override;
	npurtError_t mapPage(uint64_t addr, size_t size) override;
	void unmapPage(uint64_t addr, size_t size) override;
	// New device memory bound at [va, va + size) of reserved address
	// space, listed as a segment (for peers and IPC), charged.
	npurtError_t backRange(uint64_t va, size_t size);
	npurtError_t backCharged(uint64_t va, size_t size);  // backRange, charged
	// The segment at addr unlisted, unbound and closed, its charge
	// undone; false if there is none.
	bool dropSegment(uint64_t addr, size_t size);

	struct Range {
		uint64_t size;
		uint32_t handle;
		int exportFd = -1;  // segments: the IPC export, if any
		uint64_t inode = 0;
		// imports: opens not yet closed. A second open of the same
		// memory gets the same GEM handle from PRIME, so it shares the
		// mapping rather than closing the handle under the first.
		int opens = 1;
	};

	// A registration cache of pageable ranges, as RDMA stacks keep: a
	// pin stays after its copy until the kernel reports its range
	// changed (DRM_NPU_BO_STATUS_STALE: unmapped, remapped, protection
	// changed, fork), until evicted least recently used beyond
	// pinCap_ bytes, or until the context goes.
	struct CachedPin {
		HostPin pin;
		bool readonly = false;
		int users = 0;
		bool dead = false;  // stale or superseded: unpinned at its last use
		uint64_t lastUse = 0;
	};
	bool pinStale(uint32_t handle);
	void releasePin(const HostPin &pin);
	// With pinMutex_ held: unpins idle entries, least recently used
	// first, until at most cap bytes stay pinned.
	void trimPins(uint64_t cap);
	void erasePin(size_t i);
	std::mutex pinMutex_;  // guards pins_, pinBytes_, pinClock_
	std::vector<CachedPin> pins_;
	uint64_t pinBytes_ = 0, pinClock_ = 0;
	const uint64_t pinCap_;

	int ordinal_;
	const uint64_t serial_ = nextSerial();
	static uint64_t nextSerial()
	{
		static std::atomic<uint64_t> n{0};
		return n.fetch_add(1, std::memory_order_relaxed) + 1;
	}
	os::Device &node_;
	std::shared_ptr<os::Device> file_;
	AddressSpace &space_;
	// Serialises npurtIpcOpenMemHandle and npurtIpcCloseMemHandle whole
	// (the close's wait included): an open must not find the GEM handle
	// PRIME gives back while a close is about to close it. Taken before
	// mutex_.
	std::mutex ipcMutex_;
	std::mutex mutex_;  // guards segments_ and imports_
	std::map<uint64_t, Range> segments_;  // pool segments by address
	std::map<uint64_t, Range> imports_;  // IPC imports by address
	// Held shared while a stream of the list is used from outside it
	// (forEachStream), exclusively while one is taken off the list; taken
	// before any stream's locks.
	std::shared_mutex streamLife_;
	std::mutex streamMutex_;  // guards streams_, streamPins_, slots_, slotChunks_, retired_
	std::vector<Stream *> streams_;
	std::map<Stream *, int> streamPins_;  // forEachStreamPinned's, by stream
	std::condition_variable unpinned_;
	std::mutex reapMutex_;  // guards reaping_
	std::condition_variable reaped_;
	int reaping_ = 0;  // reap() threads running
	std::mutex defaultMutex_;  // guards default_ (taken before streamMutex_)
	Stream *default_ = nullptr;
	std::vector<uint64_t> slots_;  // free timestamp slots
	std::vector<PinnedBuffer> slotChunks_;  // where they live
	struct Retired {
		uint64_t addr;
		std::shared_ptr<Timeline> tl;
		uint64_t point;
	};
	std::vector<Retired> retired_;  // slots in reach of running jobs
	std::mutex queueMutex_;  // guards queues_ and their sharers and closed
	std::vector<std::weak_ptr<Timeline>> queues_;
	HostPool hostPool_;  // pinned host memory (npurtMallocHost)
	CachingAllocator pool_;  // declared last: destroyed first
};

}  // namespace npurt

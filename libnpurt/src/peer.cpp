// Peer access between contexts (see Context::enablePeer): the owner's
// pool segments exported as dma-bufs, imported into the accessor's file
// and bound there at the owner's addresses, so that the accessor's copy
// engines and compute units reach them through its own address space.
#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <string>
#include <unistd.h>

#include "context.h"
#include "error.h"
#include "npu_drm.h"
#include "runtime.h"
#include "stream.h"

namespace npurt {

namespace {

// Guards every context's peers_ and accessors_. Links change rarely
// (enable, disable, a segment made or released while a peer reaches the
// pool, a context's end): one lock for all of them keeps a link's two
// ends consistent without ordering two contexts' locks.
std::mutex &peerMutex()
{
	static std::mutex m;
	return m;
}

std::string who(const Context &c)
{
	return "NPU " + std::to_string(c.ordinal());
}

}  // namespace

npurtError_t Context::mapPeerSegment(PeerLink &link, Context &owner, uint64_t base, uint64_t size,
                                     uint32_t ownerHandle, const char *api)
{
	drm_prime_handle ex{};
	ex.handle = ownerHandle;
	ex.flags = DRM_CLOEXEC | DRM_RDWR;
	if (int ret = owner.node().ioctl(DRM_IOCTL_PRIME_HANDLE_TO_FD, &ex))
		return setError(
		        errorFromErrno(ret),
		        osMessage(std::string(api) + ": exporting memory of " + who(owner), ret));
	drm_prime_handle im{};
	im.fd = ex.fd;
	int ret = node_.ioctl(DRM_IOCTL_PRIME_FD_TO_HANDLE, &im);
	// The import holds the memory: the descriptor is not needed after.
	close(ex.fd);
	if (ret)
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": importing memory of " + who(owner) +
		                                  " into " + who(*this),
		                          ret));
	if ((ret = bind(im.handle, base, size, false))) {
		closeBo(im.handle);
		return setError(errorFromErrno(ret),
		                osMessage(std::string(api) + ": mapping memory of " + who(owner) +
		                                  " at " + hexAddr(base) + " in " + who(*this),
		                          ret));
	}
	link.maps[base] = {size, im.handle};
	return npurtSuccess;
}

void Context::unmapPeerSegment(PeerLink &link, uint64_t base)
{
	auto m = link.maps.find(base);
	if (m == link.maps.end())
		return;
	unbind(base, m->second.size);
	closeBo(m->second.handle);
	link.maps.erase(m);
}

void Context::unmapPeer(PeerLink &link)
{
	for (auto &[base, m] : link.maps) {
		unbind(base, m.size);
		closeBo(m.handle);
	}
	link.maps.clear();
}

npurtError_t Context::linkPeer(Context &owner, bool explicitAccess, const char *api)
{
	auto it = peers_.find(&owner);
	if (it != peers_.end()) {
		if (explicitAccess && it->second.explicitAccess)
			return setError(npurtErrorPeerAccessAlreadyEnabled,
			                std::string(api) + ": access from " + who(*this) + " to " +
			                        who(owner) + " is already enabled");
		it->second.explicitAccess = it->second.explicitAccess || explicitAccess;
		return npurtSuccess;
	}
	// The link is in place before the owner's segments are listed: a
	// segment the owner makes or releases from now on waits for the peer
	// mutex (held here) and then finds the link, so each is mapped once
	// (listed here, or added after) and none is released under the
	// mapping.
	PeerLink &link = peers_[&owner];
	link.explicitAccess = explicitAccess;
	owner.accessors_.push_back(this);
	owner.accessorCount_.store(owner.accessors_.size(), std::memory_order_release);
	std::vector<std::pair<uint64_t, Range>> segs;
	{
		std::lock_guard<std::mutex> lock(owner.mutex_);
		segs.assign(owner.segments_.begin(), owner.segments_.end());
	}
	for (const auto &[base, r] : segs) {
		if (npurtError_t err = mapPeerSegment(link, owner, base, r.size, r.handle, api)) {
			unlinkPeer(owner);
			return err;
		}
	}
	return npurtSuccess;
}

void Context::unlinkPeer(Context &owner)
{
	auto it = peers_.find(&owner);
	if (it == peers_.end())
		return;
	unmapPeer(it->second);
	peers_.erase(it);
	std::erase(owner.accessors_, this);
	owner.accessorCount_.store(owner.accessors_.size(), std::memory_order_release);
}

npurtError_t Context::enablePeer(Context &owner, const char *api)
{
	if (&owner == this)
		return setError(npurtErrorInvalidValue,
		                std::string(api) + ": a context is not its own peer");
	std::lock_guard<std::mutex> lock(peerMutex());
	return linkPeer(owner, true, api);
}

npurtError_t Context::disablePeer(Context &owner, const char *api)
{
	{
		std::lock_guard<std::mutex> lock(peerMutex());
		auto it = peers_.find(&owner);
		if (it == peers_.end() || !it->second.explicitAccess)
			return setError(npurtErrorPeerAccessNotEnabled,
			                std::string(api) + ": access from " + who(*this) + " to " +
			                        who(owner) + " was not enabled");
	}
	// Work queued here may still use the owner's memory: it runs first,
	// so that disabling loses nothing (each stream kept alive meanwhile).
	npurtError_t err = npurtSuccess;
	forEachStream([&](Stream *s) {
		if (!err)
			err = s->synchronize(-1, api);
	});
	if (err)
		return err;
	std::lock_guard<std::mutex> lock(peerMutex());
	unlinkPeer(owner);
	return npurtSuccess;
}

npurtError_t Context::reachPeer(Context &owner, bool peerCopy, bool *reached, const char *api)
{
	std::lock_guard<std::mutex> lock(peerMutex());
	auto it = peers_.find(&owner);
	*reached = it != peers_.end() && (it->second.explicitAccess || peerCopy);
	if (*reached || !peerCopy)
		return npurtSuccess;
	if (npurtError_t err = linkPeer(owner, false, api))
		return err;
	*reached = true;
	return npurtSuccess;
}

npurtError_t Context::peerSegmentAdded(uint64_t base, uint64_t size, uint32_t handle)
{
	if (!accessorCount_.load(std::memory_order_acquire))
		return npurtSuccess;
	std::lock_guard<std::mutex> lock(peerMutex());
	for (size_t i = 0; i < accessors_.size(); i++) {
		Context *a = accessors_[i];
		PeerLink &link = a->peers_.at(this);
		// A link made since the segment was listed has mapped it already.
		if (link.maps.count(base))
			continue;
		npurtError_t err = a->mapPeerSegment(link, *this, base, size, handle,
		                                     "allocating device memory");
		if (!err)
			continue;
		// A segment some peer cannot reach is not handed out.
		for (size_t j = 0; j < i; j++)
			accessors_[j]->unmapPeerSegment(accessors_[j]->peers_.at(this), base);
		return err;
	}
	return npurtSuccess;
}

void Context::peerSegmentRemoved(uint64_t base)
{
	if (!accessorCount_.load(std::memory_order_acquire))
		return;
	std::lock_guard<std::mutex> lock(peerMutex());
	for (Context *a : accessors_)
		a->unmapPeerSegment(a->peers_.at(this), base);
}

void Context::markAccessors(std::vector<uint64_t> *out)
{
	if (!accessorCount_.load(std::memory_order_acquire))
		return;
	std::lock_guard<std::mutex> lock(peerMutex());
	for (Context *a : accessors_) {
		a->forEachStream([&](Stream *s) {
			if (uint64_t tasks = s->pendingMark()) {
				markers_[++nextMarker_] = {nullptr, tasks, 0,        0,
				                           nullptr, 0,     s->life()};
				out->push_back(nextMarker_);
			}
		});
	}
}

void Context::dropPeers()
{
	std::lock_guard<std::mutex> lock(peerMutex());
	while (!peers_.empty())
		unlinkPeer(*peers_.begin()->first);
	while (!accessors_.empty())
		accessors_.back()->unlinkPeer(*this);
}

}  // namespace npurt

// Inter-process handles; see ipc.h.
#include "ipc.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "error.h"

namespace npurt {

npurtError_t checkShareableType(const char *api, npurtMemAllocationHandleType type)
{
	if (type == npurtMemHandleTypePosixFileDescriptor)
		return npurtSuccess;
	return setError(npurtErrorInvalidValue,
	                std::string(api) + ": handle type " +
	                        std::to_string(static_cast<int>(type)) +
	                        " (only npurtMemHandleTypePosixFileDescriptor)");
}

uint64_t descriptorInode(int fd)
{
	struct stat st {};
	if (fstat(fd, &st))
		return 0;
	// The file system's device too: an inode number alone is only unique
	// within one (a reused descriptor's /dev/null on a 9p root matched a
	// dma-buf's inode number under the debug lane's kernel).
	return static_cast<uint64_t>(st.st_ino) ^ (static_cast<uint64_t>(st.st_dev) << 40);
}

namespace {

// The error for a descriptor of process `pid` this process could not take:
// pidfd_open failed (`opened` false) or pidfd_getfd did, with errno `e`.
npurtError_t takeFailed(const char *api, int pid, bool opened, int e)
{
	const std::string who = std::string(api) + ": process " + std::to_string(pid);
	const std::string exporter =
	        std::string(api) + ": the exporting process " + std::to_string(pid);
	// A policy refuses it: another user, ptrace restrictions, or a seccomp
	// filter (a container's profile), which may refuse either call with
	// EPERM or as if it did not exist.
	if (e == EPERM || e == ENOSYS)
		return setError(npurtErrorPermission,
		                osMessage(who + " exported it, and this process may not " +
		                                  (opened ? "take its descriptors (another user's "
		                                            "process, ptrace restrictions such as "
		                                            "Yama's ptrace_scope, or a seccomp "
		                                            "filter)"
		                                          : "open other processes (pidfd_open "
		                                            "refused: a seccomp filter such as a "
		                                            "container's)"),
		                          -e));
	// ESRCH: the exporter exited, also after pidfd_open (and was reaped):
	// the handle's process is gone (the soak saw npurtErrorOperatingSystem
	// here).
	if (e == ESRCH)
		return setError(npurtErrorInvalidHandle, osMessage(exporter + " has exited", -e));
	if (!opened)
		return setError(npurtErrorOperatingSystem, osMessage(exporter, -e));
	return setError(e == EBADF ? npurtErrorInvalidHandle : npurtErrorOperatingSystem,
	                osMessage(std::string(api) + ": taking it from process " +
	                                  std::to_string(pid) +
	                                  (e == EBADF ? " (gone: freed since?)" : ""),
	                          -e));
}

}  // namespace

npurtError_t takeIpcDescriptor(int pid, int fd, uint64_t inode, const char *api, int *out,
                               bool *owned)
{
	*owned = false;
	int local = fd;
	if (pid != 0 && pid != getpid()) {
		const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
		int e = errno;
		local = -1;
		if (pidfd >= 0) {
			local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
			e = errno;
			close(pidfd);
		}
		if (local < 0)
			return takeFailed(api, pid, pidfd >= 0, e);
		*owned = true;
	}
	// The number may have been reused since the export was given back.
	if (inode && descriptorInode(local) != inode) {
		if (*owned)
			close(local);
		*owned = false;
		return setError(npurtErrorInvalidHandle,
		                std::string(api) + ": what the handle names is gone (freed or "
		                                   "destroyed, or its process exited)");
	}
	*out = local;
	return npurtSuccess;
}

}  // namespace npurt

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

npurtError_t takeIpcDescriptor(int pid, int fd, uint64_t inode, const char *api, int *out,
                               bool *owned)
{
	*owned = false;
	int local = fd;
	if (pid != 0 && pid != getpid()) {
		int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
		if (pidfd < 0) {
			const int e = errno;
			// A seccomp filter (a container's profile) refuses the
			// call itself, with EPERM or as if it did not exist.
			if (e == EPERM || e == ENOSYS)
				return setError(
				        npurtErrorPermission,
				        osMessage(std::string(api) + ": process " +
				                          std::to_string(pid) +
				                          " exported it, and this process may "
				                          "not open other processes (pidfd_open "
				                          "refused: a seccomp filter such as a "
				                          "container's)",
				                  -e));
			return setError(e == ESRCH ? npurtErrorInvalidHandle
			                           : npurtErrorOperatingSystem,
			                osMessage(std::string(api) + ": the exporting process " +
			                                  std::to_string(pid) +
			                                  (e == ESRCH ? " has exited" : ""),
			                          -e));
		}
		local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
		const int e = errno;
		close(pidfd);
		if (local < 0) {
			if (e == EPERM || e == ENOSYS)
				return setError(npurtErrorPermission,
				                osMessage(std::string(api) + ": process " +
				                                  std::to_string(pid) +
				                                  " exported it, and this process "
				                                  "may not take its "
				                                  "descriptors (another user's "
				                                  "process, ptrace "
				                                  "restrictions such as Yama's "
				                                  "ptrace_scope, or a "
				                                  "seccomp filter)",
				                          -e));
			// ESRCH: the exporter exited (and was reaped) after
			// pidfd_open: the handle's process is gone, as above (the
			// soak saw npurtErrorOperatingSystem here).
			if (e == ESRCH)
				return setError(
				        npurtErrorInvalidHandle,
				        osMessage(std::string(api) + ": the exporting process " +
				                          std::to_string(pid) + " has exited",
				                  -e));
			return setError(
			        e == EBADF ? npurtErrorInvalidHandle : npurtErrorOperatingSystem,
			        osMessage(std::string(api) + ": taking it from process " +
			                          std::to_string(pid) +
			                          (e == EBADF ? " (gone: freed since?)" : ""),
			                  -e));
		}
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

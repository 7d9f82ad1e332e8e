// Inter-process handles: what memory and event handles share. A handle
// names a descriptor of the exporting process (pid, fd) and the inode it
// must still name; the opener takes a duplicate of it with pidfd_getfd,
// which the kernel allows only to a process that may ptrace the exporter.
#pragma once

#include <cstdint>

#include "npurt/npurt.h"

namespace npurt {

// A shareable handle's type (VMM allocations, pools): only POSIX
// descriptors are made.
npurtError_t checkShareableType(const char *api, npurtMemAllocationHandleType type);

// What names descriptor fd's file (its inode and file system), for the
// handle; 0 if it cannot be read.
uint64_t descriptorInode(int fd);

// A descriptor of this process for (pid, fd), checked to still name inode
// (when not 0): *owned when the caller must close it (a duplicate taken
// from another process). pid 0 or this process: fd is this process's.
npurtError_t takeIpcDescriptor(int pid, int fd, uint64_t inode, const char *api, int *out,
                               bool *owned);

}  // namespace npurt

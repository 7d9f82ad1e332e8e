// Memory pools shared between processes (npurtMemPoolExportToShareableHandle
// and friends).
//
// A shareable pool exports as one end of a Unix socket pair; this process
// keeps the other end, which a thread of the runtime (the exporter) serves:
// asked for an allocation of the pool (its address and the identity of its
// segment's dma-buf, from npurtMemPoolExportPointer's data), it sends the
// segment's dma-buf over SCM_RIGHTS. The socket is the capability, as
// CUDA's pool handle is; no ptrace rights are involved. The importer maps
// the dma-buf as an IPC import of its context (Context::ipcOpen), so the
// import is unmapped by Context::ipcClose when the pointer is freed.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstdint>

#include "npurt/npurt.h"

namespace npurt {

class Context;
class MemPool;

// Exporting side.
npurtError_t exportMemPool(MemPool &pool, int *fd, const char *api);
npurtError_t exportPoolPointer(Context &ctx, uint64_t addr, npurtMemPoolPtrExportData *data,
                               const char *api);

// Importing side. An imported pool is a handle of its own kind (not a
// MemPool): the pool functions that take one say so.
npurtError_t importMemPool(int fd, int device, npurtMemPool_t *out, const char *api);
bool isImportedPool(npurtMemPool_t handle);
// The device of a created, default or imported pool (for SetAccess and
// GetAccess, which take either).
npurtError_t poolDevice(npurtMemPool_t handle, int *device, const char *api);
npurtError_t importPoolPointer(npurtMemPool_t handle, const npurtMemPoolPtrExportData &data,
                               void **ptr, const char *api);
npurtError_t destroyImportedPool(npurtMemPool_t handle, const char *api);
// npurtFree and npurtFreeAsync of an imported pointer: false if addr is not
// one; else its import is closed and *err says how that went.
bool freeImportedPointer(uint64_t addr, npurtError_t *err);

// A context goes: the exporter stops serving its pools, and pointers
// imported into it are forgotten (the context unmaps its imports).
void forgetContextInPoolIpc(Context &ctx);

}  // namespace npurt

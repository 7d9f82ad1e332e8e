/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * npu_drm.h - user-space ABI of the npu DRM driver.
 *
 * Rules every structure here follows (Documentation/process/botching-up-ioctls.rst):
 *  - fixed-size types only, pointers carried as __u64;
 *  - explicit padding, and every pad, reserved field and unknown flag must be
 *    zero or the ioctl fails with -EINVAL;
 *  - structures only grow at the end; queries negotiate their size.
 */
#ifndef _NPU_DRM_H_
#define _NPU_DRM_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/* uAPI version: major changes break user space, minor ones only add. */
#define DRM_NPU_API_VERSION_MAJOR	1
#define DRM_NPU_API_VERSION_MINOR	0
#define DRM_NPU_API_VERSION \
	((DRM_NPU_API_VERSION_MAJOR << 16) | DRM_NPU_API_VERSION_MINOR)

#define DRM_NPU_QUERY			0x00
#define DRM_NPU_BO_CREATE		0x01
#define DRM_NPU_BO_FROM_USERPTR		0x02
#define DRM_NPU_BO_INFO			0x03
#define DRM_NPU_VM_BIND			0x04
#define DRM_NPU_VM_ACCESS		0x05
#define DRM_NPU_CONTEXT_INFO		0x06

#define DRM_IOCTL_NPU_QUERY \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_QUERY, struct drm_npu_query)
#define DRM_IOCTL_NPU_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_BO_CREATE, struct drm_npu_bo_create)
#define DRM_IOCTL_NPU_BO_FROM_USERPTR \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_BO_FROM_USERPTR, struct drm_npu_bo_userptr)
#define DRM_IOCTL_NPU_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_BO_INFO, struct drm_npu_bo_info)
#define DRM_IOCTL_NPU_VM_BIND \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_VM_BIND, struct drm_npu_vm_bind)
#define DRM_IOCTL_NPU_VM_ACCESS \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_VM_ACCESS, struct drm_npu_vm_access)
#define DRM_IOCTL_NPU_CONTEXT_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_CONTEXT_INFO, struct drm_npu_context_info)

/* Query kinds for struct drm_npu_query::query. */
enum drm_npu_query_id {
	/* struct drm_npu_device_info */
	DRM_NPU_QUERY_DEVICE_INFO = 1,
	/* an array of struct drm_npu_engine_info, one per engine */
	DRM_NPU_QUERY_ENGINES = 2,
	/* struct drm_npu_memory_info: device memory capacity and use */
	DRM_NPU_QUERY_MEMORY = 3,
};

/**
 * struct drm_npu_query - read a piece of device information
 * @query: one of enum drm_npu_query_id.
 * @flags: must be zero.
 * @data_ptr: user pointer to the output buffer.
 * @size: in: bytes available at @data_ptr; 0 asks only for the size.
 *        out: the full size of the answer.
 *        A structure answer fills min(@size, its size) bytes, so older user
 *        space reads a prefix of a grown structure and newer user space
 *        sees how much the kernel filled; @size below the structure's first
 *        version is -EINVAL.
 *        An array answer fills as many whole elements as fit; @size must be
 *        a non-zero multiple of the element size or it is -EINVAL. Array
 *        elements never grow: new per-element facts come as a new query.
 * @pad: must be zero.
 */
struct drm_npu_query {
	__u32 query;
	__u32 flags;
	__u64 data_ptr;
	__u32 size;
	__u32 pad;
};

/* Capability bits in struct drm_npu_device_info::capabilities. */
/* The device is the in-kernel emulator, not silicon. */
#define DRM_NPU_CAP_EMULATED		(1ULL << 0)

/**
 * struct drm_npu_device_info - answer to DRM_NPU_QUERY_DEVICE_INFO
 * @api_version: DRM_NPU_API_VERSION of the driver.
 * @device_index: index of this NPU among the driver's devices (0-based).
 * @mem_capacity: device memory in bytes.
 * @clock_hz: frequency of the device clock that timestamps count.
 * @capabilities: DRM_NPU_CAP_* bits.
 * @num_engines: total engines; DRM_NPU_QUERY_ENGINES lists them.
 * @num_copy_engines: engines of class DRM_NPU_ENGINE_COPY.
 * @num_compute_engines: engines of class DRM_NPU_ENGINE_COMPUTE.
 * @pad: zero.
 * @va_start: first device address user space may bind.
 * @va_end: one past the last such address.
 * @name: NUL-terminated device model name.
 */
struct drm_npu_device_info {
	__u32 api_version;
	__u32 device_index;
	__u64 mem_capacity;
	__u64 clock_hz;
	__u64 capabilities;
	__u32 num_engines;
	__u32 num_copy_engines;
	__u32 num_compute_engines;
	__u32 pad;
	__u64 va_start;
	__u64 va_end;
	char name[32];
};

/* Engine classes. */
enum drm_npu_engine_class {
	DRM_NPU_ENGINE_COPY = 0,
	DRM_NPU_ENGINE_COMPUTE = 1,
};

/**
 * struct drm_npu_engine_info - one element of DRM_NPU_QUERY_ENGINES
 * @engine_id: index of the engine on its device.
 * @engine_class: enum drm_npu_engine_class.
 * @instance: index of the engine within its class.
 * @pad: zero.
 */
struct drm_npu_engine_info {
	__u32 engine_id;
	__u32 engine_class;
	__u32 instance;
	__u32 pad;
};

/*
 * Memory objects (BOs). A context is an open file: its GEM handles and its
 * device address space are its own. Handles are closed with the core
 * DRM_IOCTL_GEM_CLOSE and shared with PRIME (DRM_IOCTL_PRIME_HANDLE_TO_FD /
 * FD_TO_HANDLE), which works between contexts, processes and NPUs.
 */

/* BO kinds. */
enum drm_npu_bo_kind {
	/*
	 * Device memory: counts against the device's capacity
	 * (drm_npu_device_info.mem_capacity); -ENOMEM beyond it.
	 */
	DRM_NPU_BO_DEVICE = 0,
	/* Pinned host memory: CPU-mappable and visible to the device. */
	DRM_NPU_BO_HOST = 1,
	/* Pinned pages of an existing user range (DRM_IOCTL_NPU_BO_FROM_USERPTR). */
	DRM_NPU_BO_USERPTR = 2,
	/* Imported through PRIME from another context or device. */
	DRM_NPU_BO_IMPORTED = 3,
};

/**
 * struct drm_npu_bo_create - allocate a BO
 * @size: bytes; rounded up to the page size. Zero, or a size that overflows
 *        when rounded, is -EINVAL.
 * @kind: DRM_NPU_BO_DEVICE or DRM_NPU_BO_HOST; anything else is -EINVAL.
 * @flags: must be zero.
 * @handle: out: the new GEM handle.
 * @pad: must be zero.
 *
 * The memory is zeroed. -ENOMEM when device memory (or host memory) is
 * exhausted; nothing is left behind.
 */
struct drm_npu_bo_create {
	__u64 size;
	__u32 kind;
	__u32 flags;
	__u32 handle;
	__u32 pad;
};

/* drm_npu_bo_userptr.flags: the device may only read the pages. */
#define DRM_NPU_BO_USERPTR_READONLY	(1 << 0)

/**
 * struct drm_npu_bo_userptr - pin a user range as a BO (host registration),
 * DRM_IOCTL_NPU_BO_FROM_USERPTR
 * @user_ptr: page-aligned start of the range.
 * @size: page-aligned, non-zero length.
 * @flags: DRM_NPU_BO_USERPTR_* bits; others are -EINVAL.
 * @handle: out: the new GEM handle.
 *
 * The pages are pinned for the life of the BO and counted against
 * RLIMIT_MEMLOCK (unless the caller has CAP_IPC_LOCK): -ENOMEM past it.
 * Misaligned or overflowing ranges are -EINVAL, an unmapped range -EFAULT.
 * Userptr BOs cannot be mmapped (the range is mapped already) or exported.
 */
struct drm_npu_bo_userptr {
	__u64 user_ptr;
	__u64 size;
	__u32 flags;
	__u32 handle;
};

/**
 * struct drm_npu_bo_info - what a BO is
 * @handle: in: the BO.
 * @flags: must be zero.
 * @size: out: size in bytes (page-aligned).
 * @kind: out: enum drm_npu_bo_kind.
 * @pad: out: zero.
 * @mmap_offset: out: offset to mmap() the BO through this file; 0 for
 *               BOs that cannot be mapped (userptr).
 */
struct drm_npu_bo_info {
	__u32 handle;
	__u32 flags;
	__u64 size;
	__u32 kind;
	__u32 pad;
	__u64 mmap_offset;
};

/* drm_npu_vm_bind.op */
#define DRM_NPU_VM_MAP			0
#define DRM_NPU_VM_UNMAP		1

/* drm_npu_vm_bind.flags: the mapping is read-only for the device. */
#define DRM_NPU_VM_READONLY		(1 << 0)

/**
 * struct drm_npu_vm_bind - map or unmap a BO range in the context's device
 * address space, at an address user space chooses
 * @op: DRM_NPU_VM_MAP or DRM_NPU_VM_UNMAP.
 * @flags: DRM_NPU_VM_* bits (MAP only; zero for UNMAP).
 * @handle: MAP: the BO. UNMAP: must be zero.
 * @pad: must be zero.
 * @addr: device address; page-aligned, inside
 *        [device_info.va_start, device_info.va_end).
 * @size: page-aligned, non-zero length.
 * @bo_offset: MAP: page-aligned offset into the BO; the range must lie inside
 *             it. UNMAP: must be zero.
 *
 * MAP fails with -EINVAL for misalignment, overflow or a range outside the
 * address space or the BO, -EEXIST if it overlaps an existing mapping,
 * -ENOENT for an unknown handle, and -EACCES for a writable mapping of a
 * read-only userptr BO. UNMAP takes exactly one whole earlier mapping
 * (-ENOENT if there is none at @addr with @size).
 * A mapping holds a reference on its BO: closing the handle does not unmap.
 */
struct drm_npu_vm_bind {
	__u32 op;
	__u32 flags;
	__u32 handle;
	__u32 pad;
	__u64 addr;
	__u64 size;
	__u64 bo_offset;
};

/* drm_npu_vm_access.flags: write @user_ptr to the device, else read. */
#define DRM_NPU_VM_ACCESS_WRITE		(1 << 0)

/**
 * struct drm_npu_vm_access - read or write device memory through the
 * context's MMU, exactly as the engines see it (a debug and test path)
 * @addr: device address.
 * @size: bytes, non-zero, at most 64 MiB.
 * @user_ptr: the user buffer to read into or write from.
 * @flags: DRM_NPU_VM_ACCESS_* bits.
 * @pad: must be zero.
 * @fault_addr: out: on a device fault, the first device address that
 *              faulted; else zero.
 *
 * Device faults: -ENXIO for an unmapped address, -EACCES for a write to a
 * read-only mapping (with @fault_addr set). -EFAULT for a bad @user_ptr.
 * Nothing is written past the first fault.
 */
struct drm_npu_vm_access {
	__u64 addr;
	__u64 size;
	__u64 user_ptr;
	__u32 flags;
	__u32 pad;
	__u64 fault_addr;
};

/**
 * struct drm_npu_context_info - resource counts of the calling context
 * (what it holds right now; tests use them to prove nothing leaked)
 * @flags: must be zero.
 * @pad: must be zero.
 * @bo_count: BOs created or imported by this context and not yet freed.
 * @bo_bytes: their total size.
 * @device_bytes: bytes of device memory those BOs take.
 * @mapping_count: live mappings in the address space.
 * @mapped_bytes: their total size.
 * @pinned_bytes: bytes of user memory pinned by userptr BOs.
 */
struct drm_npu_context_info {
	__u32 flags;
	__u32 pad;
	__u64 bo_count;
	__u64 bo_bytes;
	__u64 device_bytes;
	__u64 mapping_count;
	__u64 mapped_bytes;
	__u64 pinned_bytes;
};

/* Device-wide memory use, for DRM_NPU_QUERY_MEMORY. */
struct drm_npu_memory_info {
	__u64 capacity;
	__u64 used;
	__u64 bo_count;
	__u64 context_count;
};

#if defined(__cplusplus)
}
#endif

#endif /* _NPU_DRM_H_ */

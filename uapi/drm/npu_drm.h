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
#define DRM_NPU_API_VERSION_MINOR	2
#define DRM_NPU_API_VERSION \
	((DRM_NPU_API_VERSION_MAJOR << 16) | DRM_NPU_API_VERSION_MINOR)

#define DRM_NPU_QUERY			0x00
#define DRM_NPU_BO_CREATE		0x01
#define DRM_NPU_BO_FROM_USERPTR		0x02
#define DRM_NPU_BO_INFO			0x03
#define DRM_NPU_VM_BIND			0x04
#define DRM_NPU_VM_ACCESS		0x05
#define DRM_NPU_CONTEXT_INFO		0x06
#define DRM_NPU_QUEUE_CREATE		0x07
#define DRM_NPU_QUEUE_DESTROY		0x08
#define DRM_NPU_SUBMIT			0x09
#define DRM_NPU_QUEUE_STATUS		0x0a
#define DRM_NPU_QUEUE_RESET		0x0b

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
#define DRM_IOCTL_NPU_QUEUE_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_QUEUE_CREATE, struct drm_npu_queue_create)
#define DRM_IOCTL_NPU_QUEUE_DESTROY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_QUEUE_DESTROY, struct drm_npu_queue_destroy)
#define DRM_IOCTL_NPU_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_SUBMIT, struct drm_npu_submit)
#define DRM_IOCTL_NPU_QUEUE_STATUS \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_QUEUE_STATUS, struct drm_npu_queue_status)
#define DRM_IOCTL_NPU_QUEUE_RESET \
	DRM_IOW(DRM_COMMAND_BASE + DRM_NPU_QUEUE_RESET, struct drm_npu_queue_destroy)

/* Query kinds for struct drm_npu_query::query. */
enum drm_npu_query_id {
	/* struct drm_npu_device_info */
	DRM_NPU_QUERY_DEVICE_INFO = 1,
	/* an array of struct drm_npu_engine_info, one per engine */
	DRM_NPU_QUERY_ENGINES = 2,
	/* struct drm_npu_memory_info: device memory capacity and use */
	DRM_NPU_QUERY_MEMORY = 3,
	/* an array of struct drm_npu_engine_stats, one per engine (1.2) */
	DRM_NPU_QUERY_ENGINE_STATS = 4,
	/* struct drm_npu_device_stats: queues, faults, resets (1.2) */
	DRM_NPU_QUERY_DEVICE_STATS = 5,
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

/**
 * struct drm_npu_engine_stats - one element of DRM_NPU_QUERY_ENGINE_STATS
 * @engine_id: the engine (as in DRM_NPU_QUERY_ENGINES).
 * @queues: queues of every context feeding it now.
 * @busy_ns: time it spent running jobs since the module loaded; its
 *           utilisation over an interval is the difference of two reads
 *           divided by the difference of their @sample_ns.
 * @jobs_completed: jobs it ended, with or without error.
 * @faults: jobs that failed with a device fault or a bad op.
 * @timeouts: jobs that ran past the job timeout.
 * @resets: engine resets (after each fault or timeout).
 * @last_reset_ns: CLOCK_MONOTONIC time of the last reset; 0 if none.
 * @sample_ns: CLOCK_MONOTONIC time the counters were read.
 */
struct drm_npu_engine_stats {
	__u32 engine_id;
	__u32 queues;
	__u64 busy_ns;
	__u64 jobs_completed;
	__u64 faults;
	__u64 timeouts;
	__u64 resets;
	__u64 last_reset_ns;
	__u64 sample_ns;
};

/**
 * struct drm_npu_device_stats - answer to DRM_NPU_QUERY_DEVICE_STATS
 * @sample_ns: CLOCK_MONOTONIC time the counters were read.
 * @contexts: open contexts.
 * @queues: queues of every context.
 * @queues_in_error: of which stopped by a fault until their
 *                   DRM_IOCTL_NPU_QUEUE_RESET or their end.
 * @pad: zero.
 * @jobs_completed: the engines' @jobs_completed summed.
 * @faults: the engines' @faults summed.
 * @timeouts: the engines' @timeouts summed.
 * @resets: the engines' @resets summed.
 * @last_reset_ns: the latest of the engines' @last_reset_ns.
 */
struct drm_npu_device_stats {
	__u64 sample_ns;
	__u32 contexts;
	__u32 queues;
	__u32 queues_in_error;
	__u32 pad;
	__u64 jobs_completed;
	__u64 faults;
	__u64 timeouts;
	__u64 resets;
	__u64 last_reset_ns;
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
	 * (drm_npu_device_info.mem_capacity); -ENOMEM beyond it. The emulated
	 * NPU's device memory is host RAM: it also counts against the
	 * driver's pinned-RAM budget, as HOST BOs do (DRM_IOCTL_NPU_BO_CREATE).
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
 * @size: bytes; rounded up to the page size. Zero, more than 1 TiB, or a
 *        size that overflows when rounded, is -EINVAL.
 * @kind: DRM_NPU_BO_DEVICE or DRM_NPU_BO_HOST; anything else is -EINVAL.
 * @flags: must be zero.
 * @handle: out: the new GEM handle.
 * @pad: must be zero.
 *
 * The memory is zeroed. -ENOMEM when device memory is exhausted, for a
 * HOST BO larger than the machine's RAM, or when the RAM that DEVICE and
 * HOST BOs of every context and device pin together would pass the
 * driver's budget (the module parameter pinned_mem_mb, half of RAM unless
 * set; /sys/module/npu/parameters/pinned_mem_mb shows it; each BO counts a
 * page more, for its bookkeeping): pinned memory cannot be reclaimed, and
 * one user must not take it all. Nothing is left behind.
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
 * RLIMIT_MEMLOCK (unless the caller has CAP_IPC_LOCK): -ENOMEM past it, or
 * past the machine's RAM. Misaligned, overflowing or over 1 TiB ranges are
 * -EINVAL, a range not entirely mapped (or, without the READONLY flag, not
 * writable) -EFAULT. Without the READONLY flag, a range with a shared
 * mapping of a file its file system writes back (ext4, xfs, 9p, ...; not
 * tmpfs, memfd or hugetlbfs) is -EOPNOTSUPP on every kernel: the device's
 * writes would bypass the file system's dirty tracking (Linux 6.5 and later
 * refuse such pins in GUP); with the flag it is pinned read-only. Pages are
 * otherwise pinned for writing whenever the mapping allows it, so the
 * device sees what the CPU writes later even for a READONLY BO. Userptr
 * BOs cannot be mmapped (the range is mapped already) or exported
 * (-EINVAL).
 */
struct drm_npu_bo_userptr {
	__u64 user_ptr;
	__u64 size;
	__u32 flags;
	__u32 handle;
};

/* drm_npu_bo_info.status */
/*
 * A userptr BO whose user range has changed since the BO was made: part
 * of it was unmapped, remapped, had its protection changed, or was
 * otherwise invalidated (fork() write-protects it, for one). The BO still
 * pins the pages it was made with, which the range may no longer map: a
 * cache of userptr BOs must make a new one.
 */
#define DRM_NPU_BO_STATUS_STALE		(1 << 0)

/**
 * struct drm_npu_bo_info - what a BO is
 * @handle: in: the BO.
 * @flags: must be zero.
 * @size: out: size in bytes (page-aligned).
 * @kind: out: enum drm_npu_bo_kind.
 * @status: out: DRM_NPU_BO_STATUS_* bits.
 * @mmap_offset: out: offset to mmap() the BO through this file; 0 for
 *               BOs that cannot be mapped through it (userptr; BOs imported
 *               from another device: mmap their dma-buf instead).
 */
struct drm_npu_bo_info {
	__u32 handle;
	__u32 flags;
	__u64 size;
	__u32 kind;
	__u32 status;
	__u64 mmap_offset;
};

/* drm_npu_vm_bind.op */
#define DRM_NPU_VM_MAP			0
#define DRM_NPU_VM_UNMAP		1

/* drm_npu_vm_bind.flags: the mapping is read-only for the device. */
#define DRM_NPU_VM_READONLY		(1 << 0)

/* Mappings one context's address space holds at most. */
#define DRM_NPU_MAX_MAPPINGS		65536

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
 * -ENOENT for an unknown handle, -EACCES for a writable mapping of a
 * read-only userptr BO, and -ENOSPC when the address space holds
 * DRM_NPU_MAX_MAPPINGS mappings already (as vm.max_map_count bounds a
 * process's own address space). UNMAP takes exactly one whole earlier
 * mapping (-ENOENT if there is none at @addr with @size).
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
 * read-only mapping (with @fault_addr set; zero for other errors). -EFAULT
 * for a bad @user_ptr. The transfer goes in order, a page at a time: on a
 * fault, a write has stored every byte before the faulting address and
 * nothing after it; a read has returned the whole pages before the
 * faulting one.
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
 * @bo_count: GEM handles this context holds (a BO closed but still mapped
 *            is no longer counted here; see @mapping_count).
 * @bo_bytes: the size of the BOs behind them.
 * @device_bytes: of which device memory (a BO shared by several contexts
 *                counts in each).
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

/*
 * Queues and submission.
 *
 * A queue belongs to one context and feeds one engine of a class; jobs on
 * a queue run in submission order. Each queue owns a timeline syncobj: its
 * n-th job is point n. Wait with the core DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT
 * (absolute CLOCK_MONOTONIC deadline); export points as sync_files with the
 * core syncobj ioctls.
 *
 * The job timeout (the module parameter job_timeout_ms) bounds each packet: a
 * packet still running that long after it started is a hang. A job as a
 * whole may run DRM_NPU_JOB_TIMEOUT_FACTOR times as long, so that a job of
 * many packets that each make progress completes, while no job holds an
 * engine that other queues share for longer.
 *
 * A job that faults (bad device address, wrong permission, bad operands) or
 * runs past either bound completes its fence with an error
 * (-EFAULT for a memory fault, -EINVAL for an op error, -ETIMEDOUT), the
 * engine is reset and goes on with other queues, and the queue records the
 * first error: later jobs on it complete with -ECANCELED and new submits
 * fail with -EIO until DRM_IOCTL_NPU_QUEUE_RESET.
 */
#define DRM_NPU_JOB_TIMEOUT_FACTOR	16

/*
 * drm_npu_queue_create.priority. A ready job of a higher priority queue
 * runs first; DRM_NPU_PRIORITY_HIGH needs CAP_SYS_NICE (-EACCES without).
 */
enum drm_npu_priority {
	DRM_NPU_PRIORITY_LOW = 0,
	DRM_NPU_PRIORITY_NORMAL = 1,
	DRM_NPU_PRIORITY_HIGH = 2,
};

/* drm_npu_queue_create.flags */
#define DRM_NPU_QUEUE_STATUS_WRITEBACK	(1 << 0)

/**
 * struct drm_npu_queue_completion - what the engine writes at
 * drm_npu_queue_create.status_addr when each job of the queue ends
 * @error: the job's error (0, or a negative errno as its fence carries:
 *         -ECANCELED for a job that did not run because of an earlier
 *         failure); written first.
 * @pad: zero.
 * @completed: the job's point; written after @error, before the job's
 *             fence signals. Points end in order.
 *
 * So user space sees that its work has ended, and whether it failed,
 * without a system call: like a fence value a GPU writes to memory. A
 * write that faults is dropped (the fence still signals).
 */
struct drm_npu_queue_completion {
	__s32 error;
	__u32 pad;
	__u64 completed;
};

/**
 * struct drm_npu_queue_create - create a queue
 * @engine_class: enum drm_npu_engine_class.
 * @priority: enum drm_npu_priority.
 * @flags: 0 or DRM_NPU_QUEUE_STATUS_WRITEBACK; other bits are -EINVAL.
 * @queue_id: out: the queue's id in this context (non-zero).
 * @syncobj_handle: out: the queue's timeline syncobj. It belongs to the
 *                  context like any syncobj; destroying it does not
 *                  destroy the queue.
 * @engine_id: out: the engine the queue feeds.
 * @status_addr: with DRM_NPU_QUEUE_STATUS_WRITEBACK, the device address of
 *               a struct drm_npu_queue_completion (non-zero, 8-byte
 *               aligned, not wrapping) the engine updates after each job;
 *               else zero.
 *               Added after the first version: a caller passing the
 *               24-byte structure gets it as zero.
 */
struct drm_npu_queue_create {
	__u32 engine_class;
	__u32 priority;
	__u32 flags;
	__u32 queue_id;
	__u32 syncobj_handle;
	__u32 engine_id;
	__u64 status_addr;
};

/**
 * struct drm_npu_queue_destroy - destroy (or, for QUEUE_RESET, clear the
 * error of) a queue
 * @queue_id: the queue.
 * @pad: must be zero.
 *
 * Destroy returns at once; jobs already submitted still complete (or are
 * cancelled), and their points still signal. Reset clears a queue's error;
 * it fails with -EBUSY while any job of the queue is still in flight.
 */
struct drm_npu_queue_destroy {
	__u32 queue_id;
	__u32 pad;
};

/**
 * struct drm_npu_fence - a point to wait for before a job starts
 * @handle: a syncobj of this context (a queue's timeline, or one imported
 *          from a sync_file with DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE).
 * @flags: must be zero.
 * @point: the timeline point; 0 for a binary syncobj.
 *
 * The syncobj must exist (-ENOENT) and already have a fence at @point
 * (-EINVAL otherwise: a point nobody submitted yet). If that fence completes
 * with an error, the job completes with the same error without running,
 * and its queue records it. (A point that had already completed when the
 * job was submitted may no longer carry its error; the other queue's
 * status does.)
 */
struct drm_npu_fence {
	__u32 handle;
	__u32 flags;
	__u64 point;
};

/* Limits of one submission. */
#define DRM_NPU_MAX_CMDS_SIZE		(1 << 20)
#define DRM_NPU_MAX_IN_FENCES		64

/*
 * Limits of one context, over all its queues: the jobs submitted and not
 * yet ended (a job ends before its fence signals), and the bytes of their
 * command buffers, which the kernel keeps until then. A submission past
 * either fails with -EAGAIN: wait for a point of one of the context's
 * queues and submit again (libdrm's drmIoctl() retries by itself).
 */
#define DRM_NPU_MAX_JOBS_IN_FLIGHT	4096
#define DRM_NPU_MAX_CMDS_IN_FLIGHT	(64 << 20)

/**
 * struct drm_npu_submit - queue one job
 * @queue_id: the queue.
 * @flags: DRM_NPU_SUBMIT_* bits; others are -EINVAL.
 * @cmds_ptr: user pointer to the command buffer: packets back to back.
 * @cmds_size: its size in bytes: non-zero, a multiple of 8, at most
 *             DRM_NPU_MAX_CMDS_SIZE.
 * @in_fence_count: number of struct drm_npu_fence at @in_fences_ptr, at
 *                  most DRM_NPU_MAX_IN_FENCES.
 * @in_fences_ptr: user pointer to the in-fences.
 * @point: out: the job's point on the queue's timeline.
 *
 * Every packet is validated before anything is queued: an unknown opcode,
 * a size that is not the packet's, a packet running past the buffer,
 * non-zero reserved fields, zero or overflowing lengths, misaligned
 * addresses and inconsistent op shapes are -EINVAL. Device addresses are
 * only checked by the MMU when the job runs (faults). -EIO if the queue
 * has an error, -ENOENT for an unknown queue, -EAGAIN when the context
 * has DRM_NPU_MAX_JOBS_IN_FLIGHT jobs or DRM_NPU_MAX_CMDS_IN_FLIGHT bytes
 * of commands in flight already.
 *
 * A job whose queue and engine are idle, whose in-fences have signalled
 * and which has no WAIT_VALUE packet may run inside this call, in the
 * caller's context: small jobs always, any job with
 * DRM_NPU_SUBMIT_CALLER_WAITS. Its point has then completed when the call
 * returns. Otherwise the job is queued and the call returns at once.
 */
/*
 * drm_npu_submit.flags: the caller waits for the job right away, so it may
 * run in the caller's context whatever its size (the caller's thread is
 * busy for the job's duration, at most the job timeout).
 */
#define DRM_NPU_SUBMIT_CALLER_WAITS	(1 << 0)

struct drm_npu_submit {
	__u32 queue_id;
	__u32 flags;
	__u64 cmds_ptr;
	__u32 cmds_size;
	__u32 in_fence_count;
	__u64 in_fences_ptr;
	__u64 point;
};

/* Queue states in struct drm_npu_queue_status. */
#define DRM_NPU_QUEUE_OK		0
#define DRM_NPU_QUEUE_ERROR		1

/**
 * struct drm_npu_queue_status - state of a queue
 * @queue_id: the queue.
 * @flags: must be zero.
 * @state: out: DRM_NPU_QUEUE_OK or DRM_NPU_QUEUE_ERROR.
 * @error: out: the first error, a negative errno (0 if none).
 * @error_point: out: the point of the job that failed first.
 * @fault_addr: out: for a memory fault, the device address that faulted.
 * @submitted: out: the last point submitted.
 * @completed: out: the last point completed; points complete in order,
 *             failed and cancelled ones included.
 * @engine_id: out: the engine the queue feeds.
 * @error_offset: out: where in that job's command buffer the packet that
 *                failed starts (0 for a job cancelled or cut off before it
 *                ran a packet), so one job can carry many tasks.
 */
struct drm_npu_queue_status {
	__u32 queue_id;
	__u32 flags;
	__u32 state;
	__s32 error;
	__u64 error_point;
	__u64 fault_addr;
	__u64 submitted;
	__u64 completed;
	__u32 engine_id;
	__u32 error_offset;
};

/*
 * Command packets. Each starts with a header; sizes are in bytes and
 * include the header; every packet has a fixed size (its struct's).
 * Device addresses go through the context's MMU when the job runs.
 */
enum drm_npu_opcode {
	DRM_NPU_PKT_NOP = 0,
	DRM_NPU_PKT_COPY = 1,		/* copy engines and compute engines */
	DRM_NPU_PKT_FILL = 2,
	DRM_NPU_PKT_TIMESTAMP = 3,
	DRM_NPU_PKT_WRITE_VALUE = 4,
	DRM_NPU_PKT_WAIT_VALUE = 5,
	DRM_NPU_PKT_OP = 6,		/* compute engines only */
	DRM_NPU_PKT_COPY_STRIDED = 7,	/* copy engines and compute engines */
};

struct drm_npu_pkt_header {
	__u32 opcode;
	__u32 size;
};

/* Copy @size bytes from @src to @dst (any alignment; may not overlap). */
struct drm_npu_pkt_copy {
	struct drm_npu_pkt_header hdr;
	__u64 src;
	__u64 dst;
	__u64 size;
};

/*
 * Fill @size bytes at @dst with the @width-byte little-endian pattern in
 * @value (width 1, 2 or 4; @dst and @size multiples of it).
 */
struct drm_npu_pkt_fill {
	struct drm_npu_pkt_header hdr;
	__u64 dst;
	__u64 size;
	__u32 value;
	__u32 width;
};

#define DRM_NPU_COPY_MAX_DIMS		6
#define DRM_NPU_COPY_MAX_ELEM_SIZE	16

/**
 * struct drm_npu_pkt_copy_strided - copy a strided view of memory
 * @hdr: DRM_NPU_PKT_COPY_STRIDED, sizeof(struct drm_npu_pkt_copy_strided).
 * @src: device address of the source's first element.
 * @dst: device address of the destination's first element.
 * @ndim: dimensions in use, 1 to DRM_NPU_COPY_MAX_DIMS; the entries of
 *        @sizes and the strides past it must be zero.
 * @elem_size: bytes per element, 1 to DRM_NPU_COPY_MAX_ELEM_SIZE (the
 *             engine moves bytes: any alignment).
 * @sizes: elements per dimension, outermost first; each at least 1.
 * @src_strides: bytes from one element of a dimension to the next in the
 *               source; 0 repeats the element (a broadcast).
 * @dst_strides: the same for the destination.
 *
 * Element (i0, ..., i[ndim-1]) is copied from src + sum(i_d * src_strides[d])
 * to dst + sum(i_d * dst_strides[d]), in row-major order of the indices (so
 * where destination elements coincide, the last one written stays). Each
 * side's extent, its first byte to its last, must not overflow, and the
 * source's and the destination's extents must not overlap (-EINVAL): the
 * result would depend on the order the engine moves bytes in.
 */
struct drm_npu_pkt_copy_strided {
	struct drm_npu_pkt_header hdr;
	__u64 src;
	__u64 dst;
	__u32 ndim;
	__u32 elem_size;
	__u64 sizes[DRM_NPU_COPY_MAX_DIMS];
	__u64 src_strides[DRM_NPU_COPY_MAX_DIMS];
	__u64 dst_strides[DRM_NPU_COPY_MAX_DIMS];
};

/* Write the device clock (ns) as a __u64 at @dst (8-byte aligned). */
struct drm_npu_pkt_timestamp {
	struct drm_npu_pkt_header hdr;
	__u64 dst;
};

/* Write the __u64 @value at @dst (8-byte aligned). */
struct drm_npu_pkt_write_value {
	struct drm_npu_pkt_header hdr;
	__u64 dst;
	__u64 value;
};

/* drm_npu_pkt_wait_value.cmp */
#define DRM_NPU_WAIT_GE			0	/* (*addr & mask) >= value */
#define DRM_NPU_WAIT_EQ			1	/* (*addr & mask) == value */
#define DRM_NPU_WAIT_NE			2	/* (*addr & mask) != value */

/*
 * Wait until the __u64 at @addr (8-byte aligned) compares true; polled by
 * the engine, bounded by the job timeout.
 */
struct drm_npu_pkt_wait_value {
	struct drm_npu_pkt_header hdr;
	__u64 addr;
	__u64 value;
	__u64 mask;
	__u32 cmp;
	__u32 pad;
};

/* Element types. */
enum drm_npu_dtype {
	DRM_NPU_DTYPE_F32 = 0,
	DRM_NPU_DTYPE_F16 = 1,
	DRM_NPU_DTYPE_BF16 = 2,
	DRM_NPU_DTYPE_I32 = 3,
};

/* Tensor ops (drm_npu_pkt_op.op). Tensors are dense and row-major. */
enum drm_npu_op {
	/* out[i] = a[i] op b[i], i < n; dtype any, out_dtype = dtype */
	DRM_NPU_OP_ADD = 0,
	DRM_NPU_OP_SUB = 1,
	DRM_NPU_OP_MUL = 2,
	DRM_NPU_OP_DIV = 3,		/* i32: b == 0 is an op error */
	DRM_NPU_OP_MAX = 4,
	DRM_NPU_OP_MIN = 5,
	/* out[i] = alpha * a[i]; float dtypes */
	DRM_NPU_OP_SCALE = 6,
	/* out[i] = alpha * a[i] + b[i]; float dtypes */
	DRM_NPU_OP_AXPY = 7,
	/* out[i] = f(a[i]); RELU any dtype, GELU (tanh form) and EXP float */
	DRM_NPU_OP_RELU = 8,
	DRM_NPU_OP_GELU = 9,
	DRM_NPU_OP_EXP = 10,
	/* out[i] = (out_dtype)a[i]; float to i32 rounds to nearest, saturates */
	DRM_NPU_OP_CAST = 11,
	/* a is m x n; axis 0 reduces rows (out has n), axis 1 columns (m) */
	DRM_NPU_OP_REDUCE_SUM = 12,
	DRM_NPU_OP_REDUCE_MAX = 13,
	/* a is m x n, out is n x m; any dtype */
	DRM_NPU_OP_TRANSPOSE = 14,
	/*
	 * out (m x n, f32) = alpha * op(A) * op(B) + beta * C, op(A) m x k,
	 * op(B) k x n; A and B f32 or f16 (dtype), accumulation in f32; C (f32,
	 * m x n) is read only if beta != 0 and may equal out.
	 */
	DRM_NPU_OP_GEMM = 15,
};

/* drm_npu_pkt_op.flags for GEMM */
#define DRM_NPU_OP_TRANS_A		(1 << 0)	/* A is stored k x m */
#define DRM_NPU_OP_TRANS_B		(1 << 1)	/* B is stored n x k */

/**
 * struct drm_npu_pkt_op - launch a tensor op on a compute engine
 * @hdr: DRM_NPU_PKT_OP, sizeof(struct drm_npu_pkt_op).
 * @op: enum drm_npu_op.
 * @dtype: enum drm_npu_dtype of the inputs.
 * @out_dtype: enum drm_npu_dtype of the output (CAST: the target; GEMM:
 *             F32; otherwise equal to @dtype).
 * @flags: DRM_NPU_OP_TRANS_* for GEMM; zero otherwise.
 * @a: device address of the first input.
 * @b: second input (binary ops, AXPY, GEMM), else zero.
 * @c: GEMM's C when @beta_bits is not 0.0f, else zero.
 * @out: device address of the output.
 * @m: rows (reduce, transpose, GEMM); zero for elementwise ops.
 * @n: elements (elementwise), columns (reduce, transpose, GEMM).
 * @k: GEMM's inner dimension; zero otherwise.
 * @axis: reduce axis (0 or 1); zero otherwise.
 * @alpha_bits: IEEE-754 binary32 bits of alpha (SCALE, AXPY, GEMM).
 * @beta_bits: binary32 bits of beta (GEMM).
 * @pad: must be zero.
 *
 * Element counts and byte sizes must not overflow and each operand is at
 * most 1 GiB. Operands are aligned to their element size. Elementwise,
 * unary and same-size cast ops may write in place (out == a, or out == b);
 * GEMM's out may equal c; any other overlap of out with an input is -EINVAL.
 * A C operand counts as unused when beta is +0.0 or -0.0 (c must then be 0).
 *
 * Numerics: f16/bf16 are computed in f32 and rounded to nearest even once
 * (SCALE/AXPY: alpha * a (+ b) in f32, then rounded); float to i32 rounds
 * to nearest even and saturates, NaN gives 0; i32 arithmetic wraps, DIV
 * truncates toward zero, INT_MIN / -1 is INT_MIN and a zero divisor is an
 * op error (-EINVAL); MAX/MIN propagate NaN and order -0 below +0; RELU of
 * NaN is NaN. REDUCE accumulates in f32 in index order (i32 wraps). GEMM
 * accumulates over k in order in f32 and always multiplies (alpha == 0 with
 * an infinite input gives NaN). After an op error or a timeout the output
 * is partly written and undefined.
 */
struct drm_npu_pkt_op {
	struct drm_npu_pkt_header hdr;
	__u32 op;
	__u32 dtype;
	__u32 out_dtype;
	__u32 flags;
	__u64 a;
	__u64 b;
	__u64 c;
	__u64 out;
	__u64 m;
	__u64 n;
	__u64 k;
	__u32 axis;
	__u32 alpha_bits;
	__u32 beta_bits;
	__u32 pad;
};

#if defined(__cplusplus)
}
#endif

#endif /* _NPU_DRM_H_ */

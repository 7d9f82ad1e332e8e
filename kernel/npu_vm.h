/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Per-context device address spaces and the emulated MMU.
 */
#ifndef __NPU_VM_H__
#define __NPU_VM_H__

#include <linux/atomic.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/rwsem.h>
#include <linux/types.h>

#include <drm/drm_mm.h>

struct npu_device;
struct page;

/**
 * struct npu_vm - the device address space of one context
 * @refcount: the context holds one reference, every job another, so the
 *            mappings a running job uses outlive a closed file.
 * @lock: protects @mm, the mappings in it and the counters. Binds take
 *        it for writing; device accesses while they translate, and
 *        debugfs and statistics, for reading, so engines of one context
 *        do not wait for each other. The engines take it in the
 *        fence-signalling path, so nothing under it allocates, waits or
 *        drops a BO reference (which may free the BO: see
 *        npu_mapping_unlink()).
 * @mm: the mappings, as drm_mm nodes at the addresses user space chose.
 * @va_start: first address of the space.
 * @va_end: one past its last address.
 * @mapping_count: live mappings.
 * @mapped_bytes: their total size.
 * @busy_ns: engine time of the context's ended jobs per engine class, for
 *           its fdinfo (kept here, not in the file, because jobs hold the
 *           VM; under npu_device.busy_lock, see npu_vm_busy()).
 * @jobs: the context's jobs submitted and not yet ended, for SUBMIT's
 *        limit (DRM_NPU_MAX_JOBS_IN_FLIGHT); here because jobs hold the VM.
 * @cmd_bytes: the bytes of their command buffers, which the kernel keeps
 *             until they end (DRM_NPU_MAX_CMDS_IN_FLIGHT).
 */
struct npu_vm {
	struct kref refcount;
	struct rw_semaphore lock; /* see @lock above */
	struct drm_mm mm;
	u64 va_start;
	u64 va_end;
	u64 mapping_count;
	u64 mapped_bytes;
	u64 busy_ns[2];
	atomic_t jobs;
	atomic64_t cmd_bytes;
};

/**
 * struct npu_mapping - one bound range
 * @node: the range in the address space.
 * @bo: the BO mapped; the mapping holds a reference.
 * @bo_offset: where in the BO the range starts.
 * @readonly: the device may not write through it.
 * @gone: on the list of unlinked mappings freed after @vm->lock is dropped.
 */
struct npu_mapping {
	struct drm_mm_node node;
	struct npu_bo *bo;
	u64 bo_offset;
	bool readonly;
	struct list_head gone;
};

/**
 * struct npu_copy_unit - a copy engine's counters for npu_vm_copy()
 * @aliased: pages copied through BOs' second mappings (npu_bo.alias).
 *
 * Only adds up: it shows in debugfs's npu_engines.
 */
struct npu_copy_unit {
	atomic64_t aliased;
};

/* Bytes a copy moves between two looks at the clock and turns of vm->lock. */
#define NPU_VM_SLICE_BYTES	(64 * PAGE_SIZE)

struct npu_vm *npu_vm_create(struct npu_device *ndev);
void npu_vm_put(struct npu_vm *vm);

static inline struct npu_vm *npu_vm_get(struct npu_vm *vm)
{
	kref_get(&vm->refcount);
	return vm;
}

struct page *npu_vm_translate(struct npu_vm *vm, struct npu_mapping **tlb, u64 addr,
			      bool write);
int npu_vm_rw(struct npu_vm *vm, u64 addr, void *buf, size_t len,
	      bool write, u64 *fault_addr);
int npu_vm_copy(struct npu_vm *vm, u64 dst, u64 src, u64 len, u64 deadline_ns,
		struct npu_copy_unit *unit, u64 *fault_addr);
int npu_vm_copy_locked(struct npu_vm *vm, struct npu_mapping **stlb,
		       struct npu_mapping **dtlb, u64 dst, u64 src, u64 len,
		       struct npu_copy_unit *unit, u64 *fault_addr);
int npu_vm_fill(struct npu_vm *vm, u64 dst, u64 len, u32 value, u32 width,
		u64 deadline_ns, u64 *fault_addr);

int npu_ioctl_vm_bind(struct drm_device *drm, void *data,
		      struct drm_file *file);
int npu_ioctl_vm_access(struct drm_device *drm, void *data,
			struct drm_file *file);

#endif /* __NPU_VM_H__ */

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Buffer objects of the npu driver.
 */
#ifndef __NPU_GEM_H__
#define __NPU_GEM_H__

#include <linux/mmu_notifier.h>

#include <drm/drm_gem_shmem_helper.h>

struct dma_buf;
struct mm_struct;
struct npu_device;

/**
 * struct npu_bo - a buffer object
 * @shmem: the GEM object. DEVICE and HOST BOs are shmem BOs; USERPTR and
 *         IMPORTED BOs only use the embedded &drm_gem_object.
 * @ndev: the device the BO belongs to.
 * @kind: enum drm_npu_bo_kind.
 * @readonly: the device may only read the pages (read-only userptr).
 * @pages: the pages the device sees, @npages of them. Fixed for the BO's
 *         life: shmem BOs are pinned at creation, userptr pages pinned,
 *         imported BOs use their exporter's pinned pages.
 * @npages: number of pages.
 * @alias: a second kernel mapping of @pages (vmap), or NULL if that
 *         failed: the copy engine moves contiguous runs through it and
 *         sidesteps colliding linear-map addresses (see npu_vm_copy()).
 *         IMPORTED BOs borrow their exporter's.
 * @mm: USERPTR: the mm whose pinned_vm was charged.
 * @notifier: USERPTR: watches the user range for changes.
 * @notifier_seq: USERPTR: @notifier's sequence from before the pin; once
 *                it moved, the range changed (DRM_NPU_BO_STATUS_STALE).
 * @import: IMPORTED: the dma-buf whose exporter BO backs this one; holding
 *          it keeps the exporter's pages alive.
 */
struct npu_bo {
	struct drm_gem_shmem_object shmem;
	struct npu_device *ndev;
	u32 kind;
	bool readonly;
	struct page **pages;
	unsigned long npages;
	void *alias;
	struct mm_struct *mm;
	struct mmu_interval_notifier notifier;
	unsigned long notifier_seq;
	struct dma_buf *import;
};

static inline struct npu_bo *to_npu_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct npu_bo, shmem.base);
}

void npu_gem_init_limits(void);
u64 npu_gem_pinned_bytes(void);
u64 npu_gem_pinned_limit(void);
struct drm_gem_object *npu_gem_create_object(struct drm_device *drm,
					     size_t size);
struct drm_gem_object *npu_gem_prime_import(struct drm_device *drm,
					    struct dma_buf *dma_buf);
struct npu_bo *npu_bo_lookup(struct drm_file *file, u32 handle);

int npu_ioctl_bo_create(struct drm_device *drm, void *data,
			struct drm_file *file);
int npu_ioctl_bo_userptr(struct drm_device *drm, void *data,
			 struct drm_file *file);
int npu_ioctl_bo_info(struct drm_device *drm, void *data,
		      struct drm_file *file);

#endif /* __NPU_GEM_H__ */

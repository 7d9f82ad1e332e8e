/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Core device and file (context) structures of the npu driver.
 */
#ifndef __NPU_DRV_H__
#define __NPU_DRV_H__

#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/npu_drm.h>

#include <linux/xarray.h>

#include "npu_engine.h"
#include "npu_hw.h"
#include "npu_vm.h"

struct file;
struct seq_file;

#define NPU_DRIVER_NAME		"npu"
#define NPU_DRIVER_DESC		"Neural processing unit"
#define NPU_MAX_DEVICES		16

/**
 * struct npu_device - one NPU, exposed as one DRM render node
 * @drm: the DRM device; embedded, freed by drm_dev_put().
 * @hw: hardware backend; fixed at probe.
 * @hw_priv: backend's private state.
 * @index: index of this NPU among the driver's devices.
 * @props: what the backend reported at init; constant afterwards, so it is
 *         read without a lock.
 * @mem_used: bytes of device memory held by BOs (capacity is props).
 * @bo_count: live BOs of this device, of every kind.
 * @file_count: open files (contexts).
 * @engines: the engines, by id; @num_engines of them.
 * @num_engines: how many are initialised.
 * @inject: fault injection, set through debugfs.
 * @jobs_alive: jobs submitted and not yet freed.
 * @jobs_wq: woken when @jobs_alive drops to zero.
 * @reap_wq: tears destroyed queues down (see npu_queue_destroy()).
 * @queues_in_error: queues stopped by a fault until QUEUE_RESET or their
 *                   end, for DRM_NPU_QUERY_DEVICE_STATS (health).
 * @busy_lock: guards the busy time of the engines and of the contexts
 *             (npu_engine.busy_ns, .run_start_ns, .run_vm; npu_vm.busy_ns)
 *             together, so that a reader counts a running job's time so
 *             far exactly once, even as it ends. A leaf lock, in the
 *             fence-signalling path: nothing else is taken under it.
 */
struct npu_device {
	struct drm_device drm;
	const struct npu_hw_ops *hw;
	void *hw_priv;
	u32 index;
	struct npu_hw_props props;
	atomic64_t mem_used;
	atomic_t bo_count;
	atomic_t file_count;
	struct npu_engine engines[NPU_MAX_ENGINES];
	u32 num_engines;
	struct npu_inject inject;
	atomic_t jobs_alive;
	wait_queue_head_t jobs_wq;
	struct workqueue_struct *reap_wq;
	atomic_t queues_in_error;
	spinlock_t busy_lock; /* see @busy_lock above */
};

/**
 * struct npu_file_stats - what a context holds through its GEM handles
 * @bo_count: handles.
 * @bo_bytes: bytes of the BOs behind them.
 * @device_bytes: of which device memory.
 * @pinned_bytes: of which pinned user memory (userptr).
 * @host_bytes: of which host memory of any kind (pinned BOs and userptr).
 *
 * Updated by the GEM handle open/close callbacks, so lock-free atomics.
 */
struct npu_file_stats {
	atomic64_t bo_count;
	atomic64_t bo_bytes;
	atomic64_t device_bytes;
	atomic64_t pinned_bytes;
	atomic64_t host_bytes;
};

/**
 * struct npu_file - a context: one open file of a render node
 * @ndev: the device this file was opened on.
 * @file: the DRM file.
 * @vm: the context's device address space.
 * @stats: resource counts, for CONTEXT_INFO and debugfs.
 * @queues: the context's queues by id (the xarray's lock guards lookups).
 * @client_id: unique among the module's contexts, for fdinfo.
 *
 * Everything a context owns hangs off this structure and dies with the file.
 */
struct npu_file {
	struct npu_device *ndev;
	struct drm_file *file;
	struct npu_vm *vm;
	struct npu_file_stats stats;
	struct xarray queues;
	u64 client_id;
};

void npu_show_fdinfo(struct seq_file *m, struct file *f);

/**
 * struct npu_live_objects - objects alive across all devices; all must be
 * zero when the module unloads, or it reports a leak.
 */
struct npu_live_objects {
	atomic_t bos;
	atomic_t mappings;
	atomic_t files;
	atomic_t queues;
	atomic_t jobs;
};

extern struct npu_live_objects npu_live;

static inline struct npu_device *to_npu_device(struct drm_device *drm)
{
	return container_of(drm, struct npu_device, drm);
}

int npu_ioctl_query(struct drm_device *drm, void *data, struct drm_file *file);
int npu_ioctl_context_info(struct drm_device *drm, void *data,
			   struct drm_file *file);
void npu_debugfs_init(struct drm_minor *minor);

#endif /* __NPU_DRV_H__ */

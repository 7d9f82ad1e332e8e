/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel API differences, in one place. Decided by the compile probes of
 * configure.sh (npu_config.h), never by version numbers.
 */
#ifndef __NPU_COMPAT_H__
#define __NPU_COMPAT_H__

#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/stringify.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/gpu_scheduler.h>

#include "npu_config.h"

#if defined(NPU_HAVE_DRM_ACCEL)
#include <drm/drm_accel.h>
#include <drm/drm_ioctl.h>
#endif

/*
 * platform_driver remove callback: int-returning .remove before 6.11, with a
 * void .remove_new on 6.1 stable .. 6.12, and a void .remove from 6.11.
 */
#if defined(NPU_HAVE_PLATFORM_REMOVE_NEW)
#define NPU_PLATFORM_REMOVE_WRAPPER(fn)
#define NPU_PLATFORM_REMOVE(fn)		.remove_new = fn
#elif defined(NPU_HAVE_PLATFORM_REMOVE_VOID)
#define NPU_PLATFORM_REMOVE_WRAPPER(fn)
#define NPU_PLATFORM_REMOVE(fn)		.remove = fn
#else
#define NPU_PLATFORM_REMOVE_WRAPPER(fn)					\
	static int fn##_int(struct platform_device *pdev)		\
	{								\
		fn(pdev);						\
		return 0;						\
	}
#define NPU_PLATFORM_REMOVE(fn)		.remove = fn##_int
#endif

/* drm_driver.date went away in 6.14. */
#if defined(NPU_HAVE_DRM_DRIVER_DATE)
#define NPU_DRM_DRIVER_DATE(d)		.date = d,
#else
#define NPU_DRM_DRIVER_DATE(d)
#endif

/* Before 6.6, mmap of an exported dma-buf needs drm_driver.gem_prime_mmap. */
#if defined(NPU_HAVE_DRM_DRIVER_GEM_PRIME_MMAP)
#define NPU_DRM_DRIVER_PRIME_MMAP	.gem_prime_mmap = drm_gem_prime_mmap,
#else
#define NPU_DRM_DRIVER_PRIME_MMAP
#endif

/* MODULE_IMPORT_NS takes a string from 6.13 on. */
#if defined(NPU_HAVE_MODULE_IMPORT_NS_IDENT)
#define NPU_IMPORT_NS(ns)		MODULE_IMPORT_NS(ns)
#else
#define NPU_IMPORT_NS(ns)		MODULE_IMPORT_NS(__stringify(ns))
#endif

/*
 * The node: a compute accelerator (/dev/accel/accelN) where the kernel has
 * drivers/accel, as upstream wants of NPU drivers; a render node before.
 */
#if defined(NPU_HAVE_DRM_ACCEL)
#define NPU_DRIVER_NODE			DRIVER_COMPUTE_ACCEL
#define NPU_FOPS			DRM_ACCEL_FOPS
#else
#define NPU_DRIVER_NODE			DRIVER_RENDER
#define NPU_FOPS			DRM_GEM_FOPS
#endif

/*
 * The DRM core calls drm_driver.debugfs_init for DRM minors only: an accel
 * node's files are made by the driver once registered (as ivpu does), in
 * the device's debugfs folder (/sys/kernel/debug/accel/<unique>/).
 */
#if defined(NPU_HAVE_DRM_ACCEL)
#define npu_accel_debugfs_init(drm)	npu_debugfs_init((drm)->accel)
#else
#define npu_accel_debugfs_init(drm)	do { } while (0)
#endif

/* The lowest scheduler priority: _LOW from 6.7, _MIN before. */
#if defined(NPU_HAVE_DRM_SCHED_PRIORITY_LOW)
#define NPU_SCHED_PRIORITY_LOW		DRM_SCHED_PRIORITY_LOW
#else
#define NPU_SCHED_PRIORITY_LOW		DRM_SCHED_PRIORITY_MIN
#endif

/*
 * drm_sched_init() with a struct of arguments (6.15, and 6.1 and 6.12
 * stable), or with them listed: with a submit workqueue and a run-queue
 * count (6.8 to 6.14; a NULL workqueue makes the scheduler allocate its
 * own), or as 6.1 was released (the hardware submission limit, a timeout
 * workqueue and a score).
 */
static inline int npu_sched_init(struct drm_gpu_scheduler *sched,
				 const struct drm_sched_backend_ops *ops,
				 u32 credit_limit, long timeout,
				 const char *name, struct device *dev)
{
#if defined(NPU_HAVE_DRM_SCHED_INIT_ARGS)
	const struct drm_sched_init_args args = {
		.ops = ops,
#if defined(NPU_HAVE_DRM_SCHED_INIT_ARGS_NUM_RQS)
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
#endif
		.credit_limit = credit_limit,
		.hang_limit = 0,
		.timeout = timeout,
		.name = name,
		.dev = dev,
	};

	return drm_sched_init(sched, &args);
#elif defined(NPU_HAVE_DRM_SCHED_INIT_SUBMIT_WQ)
	return drm_sched_init(sched, ops, NULL, DRM_SCHED_PRIORITY_COUNT,
			      credit_limit, 0, timeout, NULL, NULL, name, dev);
#else
	return drm_sched_init(sched, ops, credit_limit, 0, timeout, NULL, NULL,
			      name, dev);
#endif
}

/*
 * drm_sched_job_init(): every job is one credit (the count is 6.7+); the
 * submitting client's id goes to the scheduler's trace points (6.17, and
 * 6.12 stable).
 */
#if defined(NPU_HAVE_DRM_SCHED_JOB_INIT_CLIENT_ID)
#define npu_sched_job_init(job, entity, owner, file) \
	drm_sched_job_init(job, entity, 1, owner, (file)->client_id)
#elif defined(NPU_HAVE_DRM_SCHED_JOB_INIT_CREDITS)
#define npu_sched_job_init(job, entity, owner, file) \
	drm_sched_job_init(job, entity, 1, owner)
#else
#define npu_sched_job_init(job, entity, owner, file) \
	drm_sched_job_init(job, entity, owner)
#endif

/* pin_user_pages() (mmap_lock held) lost its vmas argument in 6.5. */
#if defined(NPU_HAVE_PIN_USER_PAGES_VMAS)
#define npu_pin_user_pages(start, n, gup, pages) \
	pin_user_pages(start, n, gup, pages, NULL)
#else
#define npu_pin_user_pages(start, n, gup, pages) \
	pin_user_pages(start, n, gup, pages)
#endif

#endif /* __NPU_COMPAT_H__ */

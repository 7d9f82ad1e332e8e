// SPDX-License-Identifier: GPL-2.0-only
/*
 * Probe: drm_sched_init() lists a submit workqueue and a run-queue count
 * among its arguments (6.8 to 6.14); 6.1 as released lists neither.
 */
#include <linux/module.h>
#include <drm/gpu_scheduler.h>

static int probe_init(struct drm_gpu_scheduler *sched,
		      const struct drm_sched_backend_ops *ops)
{
	return drm_sched_init(sched, ops, NULL, DRM_SCHED_PRIORITY_COUNT, 1, 0, 1, NULL, NULL,
			      "probe", NULL);
}

/*
 * Static with a reference: -Wmissing-prototypes is on by default from 6.8,
 * and a probe that fails for a warning would answer wrongly.
 */
int (*const probe_ref)(struct drm_gpu_scheduler *sched,
		       const struct drm_sched_backend_ops *ops) = probe_init;
MODULE_LICENSE("GPL");

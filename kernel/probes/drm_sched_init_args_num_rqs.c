// SPDX-License-Identifier: GPL-2.0-only
/* Probe: struct drm_sched_init_args names its number of run queues. */
#include <linux/module.h>
#include <drm/gpu_scheduler.h>

const struct drm_sched_init_args probe_args = {
	.num_rqs = DRM_SCHED_PRIORITY_COUNT,
};
MODULE_LICENSE("GPL");

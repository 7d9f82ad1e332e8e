// SPDX-License-Identifier: GPL-2.0-only
/* Probe: the lowest scheduler priority is DRM_SCHED_PRIORITY_LOW (6.7+; _MIN before). */
#include <linux/module.h>
#include <drm/gpu_scheduler.h>

const enum drm_sched_priority probe_prio = DRM_SCHED_PRIORITY_LOW;
MODULE_LICENSE("GPL");

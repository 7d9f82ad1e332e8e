// SPDX-License-Identifier: GPL-2.0-only
/* Probe: drm_sched_init() takes a struct drm_sched_init_args (6.15, 6.1 stable). */
#include <linux/module.h>
#include <drm/gpu_scheduler.h>

static int probe_init(struct drm_gpu_scheduler *sched)
{
	const struct drm_sched_init_args args = { .credit_limit = 1 };

	return drm_sched_init(sched, &args);
}

int (*const probe_ref)(struct drm_gpu_scheduler *sched) = probe_init;
MODULE_LICENSE("GPL");

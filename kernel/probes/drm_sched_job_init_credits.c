// SPDX-License-Identifier: GPL-2.0-only
/* Probe: drm_sched_job_init() takes the job's credits (6.7+). */
#include <linux/module.h>
#include <drm/gpu_scheduler.h>

static int probe_job_init(struct drm_sched_job *job, struct drm_sched_entity *entity)
{
	return drm_sched_job_init(job, entity, 1, NULL);
}

int (*const probe_ref)(struct drm_sched_job *job,
		       struct drm_sched_entity *entity) = probe_job_init;
MODULE_LICENSE("GPL");

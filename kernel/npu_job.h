/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Jobs: validated command buffers scheduled on an engine.
 */
#ifndef __NPU_JOB_H__
#define __NPU_JOB_H__

#include <linux/kref.h>
#include <linux/workqueue.h>

#include <drm/gpu_scheduler.h>

struct npu_engine;
struct npu_queue;
struct npu_vm;

/**
 * struct npu_job - one submission
 * @base: the scheduler job.
 * @refcount: the scheduler's reference (dropped by free_job) and the
 *            engine's while the job runs.
 * @queue: its queue (referenced).
 * @vm: the context's address space (referenced): the job's view of memory.
 * @engine: the engine it runs on.
 * @cmds: the validated command buffer, @cmds_size bytes.
 * @cmds_size: its size.
 * @in_fences: the in-fences (referenced), checked for errors before the
 *             job runs; @in_fence_count of them.
 * @in_fence_count: how many.
 * @hw_fence: the engine's fence for this job; allocated at submit,
 *            initialised by run_job (@hw_fence_live).
 * @hw_fence_live: run_job initialised @hw_fence.
 * @point: the job's point on its queue's timeline.
 * @cost: its packets' cost estimate (npu_compute_cost() and bytes moved);
 *        U64_MAX for a job that may wait (WAIT_VALUE).
 * @in_flight: 1 while the job counts in its context's jobs in flight
 *             (npu_vm.jobs, npu_vm.cmd_bytes); given back once, when the
 *             job ends or, if it never ran, when it is freed.
 * @work: the engine's work item.
 */
struct npu_job {
	struct drm_sched_job base;
	struct kref refcount;
	struct npu_queue *queue;
	struct npu_vm *vm;
	struct npu_engine *engine;
	void *cmds;
	u32 cmds_size;
	struct dma_fence **in_fences;
	u32 in_fence_count;
	struct dma_fence *hw_fence;
	bool hw_fence_live;
	u64 point;
	u64 cost;
	atomic_t in_flight;
	struct work_struct work;
};

extern const struct drm_sched_backend_ops npu_sched_ops;

int npu_ioctl_submit(struct drm_device *drm, void *data,
		     struct drm_file *file);

#endif /* __NPU_JOB_H__ */

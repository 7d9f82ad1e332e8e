// SPDX-License-Identifier: GPL-2.0-only
/*
 * Engines of the emulated NPU. Each engine is a drm_gpu_scheduler whose
 * run_job hands the job to an ordered workqueue: the engine's single
 * execution unit. The engine is its own watchdog: a job runs against a
 * deadline (the job_timeout_ms module parameter) and is cut off with
 * -ETIMEDOUT, after which the engine resets and serves the next job, so
 * the scheduler's own timeout is not used.
 */

#include <linux/dma-fence.h>
#include <linux/sched.h>
#include <linux/wait.h>

#include <drm/drm_print.h>

#include "npu_compat.h"
#include "npu_compute.h"
#include "npu_drv.h"
#include "npu_engine.h"
#include "npu_job.h"

/* Jobs an engine holds at once (queued in its workqueue or running). */
#define NPU_ENGINE_CREDITS	64

static const char *const npu_class_names[] = {
	[DRM_NPU_ENGINE_COPY] = "copy",
	[DRM_NPU_ENGINE_COMPUTE] = "compute",
};

static void npu_engine_fini(struct npu_engine *engine)
{
	drm_sched_fini(&engine->sched);
	destroy_workqueue(engine->wq);
	npu_compute_scratch_free(engine->scratch);
	mutex_destroy(&engine->exec_lock);
}

static int npu_engine_init(struct npu_device *ndev, struct npu_engine *engine,
			   u32 id, u32 class, u32 instance)
{
	int ret;

	engine->ndev = ndev;
	engine->id = id;
	engine->class = class;
	snprintf(engine->name, sizeof(engine->name), "npu%u-%s%u", ndev->index,
		 npu_class_names[class], instance);
	spin_lock_init(&engine->fence_lock);
	engine->fence_context = dma_fence_context_alloc(1);
	engine->direct_context = dma_fence_context_alloc(1);
	mutex_init(&engine->exec_lock);

	if (class == DRM_NPU_ENGINE_COMPUTE) {
		engine->scratch = npu_compute_scratch_alloc();
		if (!engine->scratch) {
			ret = -ENOMEM;
			goto err_scratch;
		}
	}
	/*
	 * In the fence-signalling path: it must make progress under reclaim.
	 * Normal priority: the emulated engine runs on the CPUs the
	 * application uses, and a high-priority worker starved its threads
	 * (the runtime's flushers among them) while jobs ran.
	 */
	engine->wq = alloc_ordered_workqueue("%s", WQ_MEM_RECLAIM, engine->name);
	if (!engine->wq) {
		ret = -ENOMEM;
		goto err_scratch;
	}
	ret = npu_sched_init(&engine->sched, &npu_sched_ops, NPU_ENGINE_CREDITS,
			     MAX_SCHEDULE_TIMEOUT, engine->name, ndev->drm.dev);
	if (ret)
		goto err_wq;
	return 0;

err_wq:
	destroy_workqueue(engine->wq);
err_scratch:
	npu_compute_scratch_free(engine->scratch);
	mutex_destroy(&engine->exec_lock);
	return ret;
}

int npu_engines_init(struct npu_device *ndev)
{
	u32 instances[2] = { };
	u32 i;
	int ret;

	init_waitqueue_head(&ndev->jobs_wq);
	spin_lock_init(&ndev->busy_lock);
	ndev->reap_wq = alloc_workqueue("npu%u-reap", WQ_UNBOUND, 0, ndev->index);
	if (!ndev->reap_wq)
		return -ENOMEM;
	for (i = 0; i < ndev->props.num_engines; i++) {
		u32 class = ndev->props.engine_class[i];

		ret = npu_engine_init(ndev, &ndev->engines[i], i, class,
				      instances[class]++);
		if (ret)
			goto err_fini;
	}
	ndev->num_engines = ndev->props.num_engines;
	return 0;

err_fini:
	while (i--)
		npu_engine_fini(&ndev->engines[i]);
	destroy_workqueue(ndev->reap_wq);
	return ret;
}

/*
 * All contexts are closed by now, but jobs they submitted may still be on
 * the engines: let every one of them finish and be freed by its scheduler
 * before the schedulers go away.
 */
void npu_engines_fini(struct npu_device *ndev)
{
	u32 i;

	/* Queue teardowns first: they let the last jobs reach the engines. */
	destroy_workqueue(ndev->reap_wq);
	wait_event(ndev->jobs_wq, !atomic_read(&ndev->jobs_alive));
	for (i = 0; i < ndev->num_engines; i++)
		npu_engine_fini(&ndev->engines[i]);
	ndev->num_engines = 0;
}

/* The engine of @class with the fewest queues. */
struct npu_engine *npu_engine_pick(struct npu_device *ndev, u32 class)
{
	struct npu_engine *best = NULL;
	u32 i;

	for (i = 0; i < ndev->num_engines; i++) {
		struct npu_engine *e = &ndev->engines[i];

		if (e->class != class)
			continue;
		if (!best || atomic_read(&e->queues) < atomic_read(&best->queues))
			best = e;
	}
	return best;
}

/*
 * Busy time. A job's time counts from its start, so a reader sampling
 * while a long job runs sees the engine busy (npu-smi, fdinfo readers such
 * as gputop), not idle until the job ends and then busier than the
 * interval. Returns when the job started.
 */
u64 npu_engine_run_begin(struct npu_engine *engine, struct npu_vm *vm)
{
	struct npu_device *ndev = engine->ndev;
	u64 now;

	spin_lock(&ndev->busy_lock);
	now = ktime_get_ns();
	engine->run_start_ns = now;
	engine->run_vm = vm;
	spin_unlock(&ndev->busy_lock);
	return now;
}

void npu_engine_run_end(struct npu_engine *engine)
{
	struct npu_device *ndev = engine->ndev;
	u64 busy;

	spin_lock(&ndev->busy_lock);
	busy = ktime_get_ns() - engine->run_start_ns;
	engine->busy_ns += busy;
	engine->run_vm->busy_ns[engine->class] += busy;
	engine->run_vm = NULL;
	spin_unlock(&ndev->busy_lock);
}

/* @engine's busy time until *@now (set here), the running job's included. */
u64 npu_engine_busy(struct npu_engine *engine, u64 *now)
{
	struct npu_device *ndev = engine->ndev;
	u64 busy;

	spin_lock(&ndev->busy_lock);
	*now = ktime_get_ns();
	busy = engine->busy_ns;
	if (engine->run_vm)
		busy += *now - engine->run_start_ns;
	spin_unlock(&ndev->busy_lock);
	return busy;
}

/* @vm's busy time per engine class until now, its running jobs' included. */
void npu_vm_busy(struct npu_device *ndev, struct npu_vm *vm, u64 busy[2])
{
	u64 now;
	u32 i;

	spin_lock(&ndev->busy_lock);
	now = ktime_get_ns();
	busy[0] = vm->busy_ns[0];
	busy[1] = vm->busy_ns[1];
	for (i = 0; i < ndev->num_engines; i++) {
		struct npu_engine *e = &ndev->engines[i];

		if (e->run_vm == vm)
			busy[e->class] += now - e->run_start_ns;
	}
	spin_unlock(&ndev->busy_lock);
}

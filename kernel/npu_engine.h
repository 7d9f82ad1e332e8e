/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Engines of the emulated NPU: each is one drm_gpu_scheduler feeding an
 * ordered workqueue that runs jobs one at a time.
 */
#ifndef __NPU_ENGINE_H__
#define __NPU_ENGINE_H__

#include <linux/atomic.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <drm/gpu_scheduler.h>

#include "npu_vm.h"

struct npu_device;
struct npu_compute_scratch;

/**
 * struct npu_engine - one copy or compute engine
 * @ndev: its device.
 * @id: engine id on the device.
 * @class: enum drm_npu_engine_class.
 * @name: for fences and logs, e.g. "npu0-copy1".
 * @sched: the scheduler; queues of this engine are its entities.
 * @wq: ordered workqueue that runs the scheduler's jobs.
 * @exec_lock: held while a job executes, so the engine runs one at a
 *             time: by @wq's worker (in the fence-signalling path), or by
 *             a submitter running a small job directly on the idle engine
 *             (trylock only). Nothing is allocated and no fence is waited
 *             for under it.
 * @inflight: jobs handed to @wq and not yet ended.
 * @direct_context: dma-fence context of the jobs run at submission.
 * @direct_seqno: last seqno in @direct_context (under @fence_lock).
 * @direct_jobs: jobs run at submission.
 * @fence_context: dma-fence context of the hardware fences.
 * @fence_seqno: last hardware fence seqno.
 * @fence_lock: lock of the hardware fences.
 * @scratch: compute engines' working memory.
 * @copy: the copy engine's counters (see npu_vm_copy()).
 * @queues: queues feeding this engine (for picking the least loaded).
 * @busy_ns: time spent running jobs that have ended.
 * @run_start_ns: when the running job started.
 * @run_vm: the running job's address space (only compared), NULL when
 *          idle. These three under npu_device.busy_lock: see
 *          npu_engine_busy().
 * @jobs_done: jobs run to completion, with or without error.
 * @resets: resets after a fault or a timeout.
 * @faults: jobs that failed with a device fault or a bad op.
 * @timeouts: jobs that ran past the job timeout.
 * @last_reset_ns: CLOCK_MONOTONIC time of the last reset, 0 if none.
 *
 * The counters are lock-free atomics: DRM_NPU_QUERY_ENGINE_STATS and
 * debugfs read them while jobs run.
 */
struct npu_engine {
	struct npu_device *ndev;
	u32 id;
	u32 class;
	char name[24];
	struct drm_gpu_scheduler sched;
	struct workqueue_struct *wq;
	struct mutex exec_lock; /* see @exec_lock above */
	atomic_t inflight;
	u64 direct_context;
	u64 direct_seqno;
	atomic64_t direct_jobs;
	u64 fence_context;
	atomic64_t fence_seqno;
	spinlock_t fence_lock; /* see @fence_lock above */
	struct npu_compute_scratch *scratch;
	struct npu_copy_unit copy;
	atomic_t queues;
	u64 busy_ns;
	u64 run_start_ns;
	struct npu_vm *run_vm;
	atomic64_t jobs_done;
	atomic64_t resets;
	atomic64_t faults;
	atomic64_t timeouts;
	atomic64_t last_reset_ns;
};

/**
 * struct npu_inject - fault injection through debugfs, for tests
 * @hang: the next this many jobs on the device hang until they time out.
 * @fault: the next this many jobs fault at their first packet's address.
 * @latency_us: added to the start of every job.
 */
struct npu_inject {
	atomic_t hang;
	atomic_t fault;
	atomic_t latency_us;
};

int npu_engines_init(struct npu_device *ndev);
void npu_engines_fini(struct npu_device *ndev);
struct npu_engine *npu_engine_pick(struct npu_device *ndev, u32 class);
u64 npu_engine_run_begin(struct npu_engine *engine, struct npu_vm *vm);
void npu_engine_run_end(struct npu_engine *engine);
u64 npu_engine_busy(struct npu_engine *engine, u64 *now);
void npu_vm_busy(struct npu_device *ndev, struct npu_vm *vm, u64 busy[2]);

#endif /* __NPU_ENGINE_H__ */

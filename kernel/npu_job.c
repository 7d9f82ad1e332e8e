// SPDX-License-Identifier: GPL-2.0-only
/*
 * Submission and execution of jobs.
 *
 * DRM_IOCTL_NPU_SUBMIT copies and validates the whole command buffer,
 * resolves the in-fences, and pushes the job to its queue's scheduler
 * entity; its finished fence becomes the next point of the queue's
 * timeline. The scheduler calls run_job once the in-fences signal; run_job
 * hands the job to the engine's workqueue, which executes the packets
 * through the context's MMU and signals the job's hardware fence.
 *
 * Everything from run_job on is the fence-signalling path: no memory is
 * allocated there (the hardware fence and the compute engines' scratch
 * exist beforehand) and nothing waits for another fence.
 */

#include <linux/delay.h>
#include <linux/dma-fence.h>
#include <linux/dma-fence-chain.h>
#include <linux/ktime.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>

#include "npu_compat.h"
#include "npu_compute.h"
#include "npu_copy.h"
#include "npu_drv.h"
#include "npu_engine.h"
#include "npu_job.h"
#include "npu_queue.h"
#include "npu_vm.h"

/* How often a WAIT_VALUE packet looks at memory. */
#define NPU_WAIT_POLL_US	50

static struct npu_job *to_npu_job(struct drm_sched_job *sched_job)
{
	return container_of(sched_job, struct npu_job, base);
}

static const char *npu_fence_driver_name(struct dma_fence *fence)
{
	return "npu";
}

static const char *npu_fence_timeline_name(struct dma_fence *fence)
{
	return "npu-engine";
}

static const struct dma_fence_ops npu_hw_fence_ops = {
	.get_driver_name = npu_fence_driver_name,
	.get_timeline_name = npu_fence_timeline_name,
};

/*
 * A context's jobs in flight hold kernel memory until they end (their
 * command buffers, fences and scheduler state): one context has at most
 * DRM_NPU_MAX_JOBS_IN_FLIGHT of them, with at most
 * DRM_NPU_MAX_CMDS_IN_FLIGHT bytes of commands, over all its queues.
 * Without a bound one file could queue jobs behind a long one until the
 * machine ran out of memory.
 */
static int npu_vm_reserve_job(struct npu_vm *vm, u32 cmds_size)
{
	if (atomic_inc_return(&vm->jobs) > DRM_NPU_MAX_JOBS_IN_FLIGHT)
		goto err_jobs;
	if (atomic64_add_return(cmds_size, &vm->cmd_bytes) >
	    DRM_NPU_MAX_CMDS_IN_FLIGHT)
		goto err_bytes;
	return 0;

err_bytes:
	atomic64_sub(cmds_size, &vm->cmd_bytes);
err_jobs:
	atomic_dec(&vm->jobs);
	return -EAGAIN;
}

static void npu_vm_unreserve_job(struct npu_vm *vm, u32 cmds_size)
{
	atomic64_sub(cmds_size, &vm->cmd_bytes);
	atomic_dec(&vm->jobs);
}

/* The job's share of its context's limit goes back once: see @in_flight. */
static void npu_job_end_in_flight(struct npu_job *job)
{
	if (atomic_xchg(&job->in_flight, 0))
		npu_vm_unreserve_job(job->vm, job->cmds_size);
}

static void npu_job_release(struct kref *kref)
{
	struct npu_job *job = container_of(kref, struct npu_job, refcount);
	struct npu_device *ndev = job->engine->ndev;
	u32 i;

	npu_job_end_in_flight(job);

	for (i = 0; i < job->in_fence_count; i++)
		dma_fence_put(job->in_fences[i]);
	kfree(job->in_fences);
	if (job->hw_fence_live)
		dma_fence_put(job->hw_fence);
	else
		kfree(job->hw_fence);
	kvfree(job->cmds);
	npu_vm_put(job->vm);
	npu_queue_put(job->queue);
	kfree(job);
	atomic_dec(&npu_live.jobs);
	if (atomic_dec_and_test(&ndev->jobs_alive))
		wake_up_all(&ndev->jobs_wq);
}

static void npu_job_put(struct npu_job *job)
{
	kref_put(&job->refcount, npu_job_release);
}

/*
 * Records how the job ended on its queue, and in the queue's completion
 * record in memory if it has one. Completion is in order.
 */
static void npu_job_retire(struct npu_job *job, int error, u64 fault_addr,
			   u32 offset)
{
	struct drm_npu_queue_completion rec = {
		.error = error,
		.completed = job->point,
	};
	u64 addr = job->queue->status_addr;
	u64 ignored;

	if (error)
		npu_queue_record_error(job->queue, error, job->point,
				       fault_addr, offset);
	/* Before the fence: whoever waited for it may submit again. */
	npu_job_end_in_flight(job);
	atomic64_set(&job->queue->completed, job->point);
	if (!addr)
		return;
	/* The error lands before the point that makes it meaningful. */
	if (npu_vm_rw(job->vm, addr, &rec, offsetof(typeof(rec), completed),
		      true, &ignored))
		return;
	/* Pairs with user space reading the point, then the error. */
	smp_wmb();
	npu_vm_rw(job->vm, addr + offsetof(typeof(rec), completed),
		  &rec.completed, sizeof(rec.completed), true, &ignored);
}

static int npu_mmu_error(int err)
{
	/* The MMU's -ENXIO and -EACCES are both memory faults to the job. */
	return err == -ENXIO || err == -EACCES ? -EFAULT : err;
}

static int npu_exec_wait_value(struct npu_job *job,
			       const struct drm_npu_pkt_wait_value *w,
			       u64 deadline, u64 *fault_addr)
{
	u64 v;
	int ret;

	for (;;) {
		ret = npu_vm_rw(job->vm, w->addr, &v, sizeof(v), false,
				fault_addr);
		if (ret)
			return npu_mmu_error(ret);
		v &= w->mask;
		if ((w->cmp == DRM_NPU_WAIT_GE && v >= w->value) ||
		    (w->cmp == DRM_NPU_WAIT_EQ && v == w->value) ||
		    (w->cmp == DRM_NPU_WAIT_NE && v != w->value))
			return 0;
		if (ktime_get_coarse_ns() > deadline)
			return -ETIMEDOUT;
		usleep_range(NPU_WAIT_POLL_US, 2 * NPU_WAIT_POLL_US);
	}
}

/*
 * Runs the packets, already validated at submit; on failure *@err_off is
 * where the failing packet starts.
 */
static int npu_job_execute(struct npu_job *job, u64 job_end, u64 *fault_addr,
			   u32 *err_off)
{
	struct npu_device *ndev = job->engine->ndev;
	u64 timeout = (u64)ndev->props.job_timeout_ms * NSEC_PER_MSEC;
	u64 deadline;
	u32 off = 0;
	int ret = 0;

	while (!ret && off < job->cmds_size) {
		const struct drm_npu_pkt_header *hdr = job->cmds + off;

		/*
		 * The watchdog measures progress: each packet has
		 * job_timeout_ms from its start, so a batch of tasks that are
		 * each well inside the limit never times out as a whole; the
		 * job's own bound keeps one job from holding the engine.
		 */
		deadline = min(ktime_get_coarse_ns() + timeout + TICK_NSEC,
			       job_end);
		*err_off = off;

		switch (hdr->opcode) {
		case DRM_NPU_PKT_NOP:
			break;
		case DRM_NPU_PKT_COPY: {
			const struct drm_npu_pkt_copy *c = (const void *)hdr;

			ret = npu_vm_copy(job->vm, c->dst, c->src, c->size,
					  deadline, &job->engine->copy,
					  fault_addr);
			break;
		}
		case DRM_NPU_PKT_COPY_STRIDED:
			ret = npu_copy_strided_run(job->vm, (const void *)hdr,
						   deadline, &job->engine->copy,
						   fault_addr);
			break;
		case DRM_NPU_PKT_FILL: {
			const struct drm_npu_pkt_fill *f = (const void *)hdr;

			ret = npu_vm_fill(job->vm, f->dst, f->size, f->value,
					  f->width, deadline, fault_addr);
			break;
		}
		case DRM_NPU_PKT_TIMESTAMP: {
			const struct drm_npu_pkt_timestamp *t = (const void *)hdr;
			u64 now = ndev->hw->read_clock(ndev);

			ret = npu_vm_rw(job->vm, t->dst, &now, sizeof(now), true,
					fault_addr);
			break;
		}
		case DRM_NPU_PKT_WRITE_VALUE: {
			const struct drm_npu_pkt_write_value *w = (const void *)hdr;
			u64 v = w->value;

			ret = npu_vm_rw(job->vm, w->dst, &v, sizeof(v), true,
					fault_addr);
			break;
		}
		case DRM_NPU_PKT_WAIT_VALUE:
			ret = npu_exec_wait_value(job, (const void *)hdr,
						  deadline, fault_addr);
			break;
		case DRM_NPU_PKT_OP:
			ret = npu_compute_run(job->vm, job->engine->scratch,
					      (const void *)hdr, deadline,
					      fault_addr);
			break;
		}
		ret = npu_mmu_error(ret);
		off += hdr->size;
		if (!ret && ktime_get_coarse_ns() > deadline)
			ret = -ETIMEDOUT;
	}
	return ret;
}

/* The device address an injected fault reports: the first packet's. */
static u64 npu_job_first_addr(struct npu_job *job)
{
	const struct drm_npu_pkt_header *hdr = job->cmds;

	switch (hdr->opcode) {
	case DRM_NPU_PKT_COPY:
		return ((const struct drm_npu_pkt_copy *)hdr)->src;
	case DRM_NPU_PKT_COPY_STRIDED:
		return ((const struct drm_npu_pkt_copy_strided *)hdr)->src;
	case DRM_NPU_PKT_FILL:
		return ((const struct drm_npu_pkt_fill *)hdr)->dst;
	case DRM_NPU_PKT_OP:
		return ((const struct drm_npu_pkt_op *)hdr)->a;
	default:
		return 0;
	}
}

/*
 * The first error among the job's in-fences. A timeline point is a
 * dma_fence_chain node, which does not carry the error of the fence it
 * contains: look inside.
 */
static int npu_job_dependency_error(struct npu_job *job)
{
	u32 i;

	/* A job run at submission has no scheduler fence. */
	if (job->base.s_fence && job->base.s_fence->finished.error)
		return job->base.s_fence->finished.error;
	for (i = 0; i < job->in_fence_count; i++) {
		struct dma_fence *f = dma_fence_chain_contained(job->in_fences[i]);

		if (f->error)
			return f->error;
		if (job->in_fences[i]->error)
			return job->in_fences[i]->error;
	}
	return 0;
}

static int npu_atomic_take(atomic_t *v)
{
	return atomic_add_unless(v, -1, 0);
}

/*
 * Runs @job on its engine, which the caller owns (@exec_lock held), and
 * records how it ended. Return: the job's error.
 */
static int npu_job_exec_locked(struct npu_job *job)
{
	struct npu_engine *engine = job->engine;
	struct npu_device *ndev = engine->ndev;
	u64 start = npu_engine_run_begin(engine, job->vm);
	/*
	 * Checked against the coarse clock between packets and chunks: a
	 * tick late at most, and no clock read (slow under emulation) each.
	 */
	u64 deadline = start + (u64)ndev->props.job_timeout_ms * NSEC_PER_MSEC;
	u64 job_end = start + (u64)ndev->props.job_timeout_ms *
			      DRM_NPU_JOB_TIMEOUT_FACTOR * NSEC_PER_MSEC;
	u64 fault_addr = 0;
	u32 err_off = 0;
	u32 latency;
	int ret;

	lockdep_assert_held(&engine->exec_lock);
	/*
	 * A job whose inputs failed, or whose queue failed before it, ends
	 * here without running, in queue order like every other job.
	 */
	ret = npu_job_dependency_error(job);
	if (!ret && npu_queue_error(job->queue))
		ret = -ECANCELED;

	latency = ret ? 0 : atomic_read(&ndev->inject.latency_us);
	if (latency)
		usleep_range(latency, latency + 1);

	if (!ret && npu_atomic_take(&ndev->inject.hang)) {
		/* A hung job: nothing happens until the watchdog fires. */
		while (ktime_get_ns() <= deadline)
			usleep_range(2000, 5000);
		ret = -ETIMEDOUT;
	} else if (!ret && npu_atomic_take(&ndev->inject.fault)) {
		fault_addr = npu_job_first_addr(job);
		ret = -EFAULT;
	} else if (!ret) {
		ret = npu_job_execute(job, job_end, &fault_addr, &err_off);
	}

	if ((ret == -ETIMEDOUT || ret == -EFAULT || ret == -EINVAL) &&
	    !npu_job_dependency_error(job)) {
		/* The emulated engine resets: it keeps no state between jobs. */
		atomic64_inc(&engine->resets);
		atomic64_inc(ret == -ETIMEDOUT ? &engine->timeouts : &engine->faults);
		atomic64_set(&engine->last_reset_ns, ktime_get_ns());
		drm_dbg(&ndev->drm, "%s: job %llu failed (%d), engine reset\n",
			engine->name, job->point, ret);
	}
	npu_job_retire(job, ret, fault_addr, err_off);
	npu_engine_run_end(engine);
	atomic64_inc(&engine->jobs_done);
	return ret;
}

static void npu_job_work(struct work_struct *work)
{
	struct npu_job *job = container_of(work, struct npu_job, work);
	struct npu_engine *engine = job->engine;
	bool cookie;
	int ret;

	cookie = dma_fence_begin_signalling();
	mutex_lock(&engine->exec_lock);
	ret = npu_job_exec_locked(job);
	mutex_unlock(&engine->exec_lock);
	if (ret) {
		dma_fence_set_error(&job->base.s_fence->finished, ret);
		dma_fence_set_error(job->hw_fence, ret);
	}
	dma_fence_signal(job->hw_fence);
	atomic_dec(&engine->inflight);
	dma_fence_end_signalling(cookie);
	npu_job_put(job);
}

static struct dma_fence *npu_run_job(struct drm_sched_job *sched_job)
{
	struct npu_job *job = to_npu_job(sched_job);
	struct npu_engine *engine = job->engine;
	struct dma_fence *fence;

	dma_fence_init(job->hw_fence, &npu_hw_fence_ops, &engine->fence_lock,
		       engine->fence_context,
		       atomic64_inc_return(&engine->fence_seqno));
	job->hw_fence_live = true;
	/* The worker's reference; the scheduler holds its own until free_job. */
	kref_get(&job->refcount);
	atomic_inc(&engine->inflight);
	fence = dma_fence_get(job->hw_fence);
	queue_work(engine->wq, &job->work);
	return fence;
}

static enum drm_gpu_sched_stat npu_timedout_job(struct drm_sched_job *sched_job)
{
	/* Not reached: the engines enforce the job timeout themselves. */
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static void npu_free_job(struct drm_sched_job *sched_job)
{
	struct npu_job *job = to_npu_job(sched_job);

	drm_sched_job_cleanup(sched_job);
	npu_job_put(job);
}

const struct drm_sched_backend_ops npu_sched_ops = {
	.run_job = npu_run_job,
	.timedout_job = npu_timedout_job,
	.free_job = npu_free_job,
};

/* Sizes of the fixed-size packets, by opcode. */
static const u32 npu_pkt_sizes[] = {
	[DRM_NPU_PKT_NOP] = sizeof(struct drm_npu_pkt_header),
	[DRM_NPU_PKT_COPY] = sizeof(struct drm_npu_pkt_copy),
	[DRM_NPU_PKT_FILL] = sizeof(struct drm_npu_pkt_fill),
	[DRM_NPU_PKT_TIMESTAMP] = sizeof(struct drm_npu_pkt_timestamp),
	[DRM_NPU_PKT_WRITE_VALUE] = sizeof(struct drm_npu_pkt_write_value),
	[DRM_NPU_PKT_WAIT_VALUE] = sizeof(struct drm_npu_pkt_wait_value),
	[DRM_NPU_PKT_OP] = sizeof(struct drm_npu_pkt_op),
	[DRM_NPU_PKT_COPY_STRIDED] = sizeof(struct drm_npu_pkt_copy_strided),
};

static bool npu_range_ok(u64 addr, u64 size)
{
	u64 end;

	return size && !check_add_overflow(addr, size, &end);
}

static int npu_validate_packet(struct drm_device *drm,
			       const struct drm_npu_pkt_header *hdr,
			       u32 engine_class)
{
	switch (hdr->opcode) {
	case DRM_NPU_PKT_NOP:
		return 0;
	case DRM_NPU_PKT_COPY: {
		const struct drm_npu_pkt_copy *c = (const void *)hdr;

		if (!npu_range_ok(c->src, c->size) ||
		    !npu_range_ok(c->dst, c->size))
			return -EINVAL;
		/* Overlapping ranges would make the result order-dependent. */
		if (c->src < c->dst + c->size && c->dst < c->src + c->size)
			return -EINVAL;
		return 0;
	}
	case DRM_NPU_PKT_COPY_STRIDED:
		return npu_copy_strided_validate(drm, (const void *)hdr);
	case DRM_NPU_PKT_FILL: {
		const struct drm_npu_pkt_fill *f = (const void *)hdr;

		if ((f->width != 1 && f->width != 2 && f->width != 4) ||
		    !npu_range_ok(f->dst, f->size) || f->dst % f->width ||
		    f->size % f->width ||
		    (f->width < 4 && f->value >> (8 * f->width)))
			return -EINVAL;
		return 0;
	}
	case DRM_NPU_PKT_TIMESTAMP: {
		const struct drm_npu_pkt_timestamp *t = (const void *)hdr;

		return t->dst % 8 ? -EINVAL : 0;
	}
	case DRM_NPU_PKT_WRITE_VALUE: {
		const struct drm_npu_pkt_write_value *w = (const void *)hdr;

		return w->dst % 8 ? -EINVAL : 0;
	}
	case DRM_NPU_PKT_WAIT_VALUE: {
		const struct drm_npu_pkt_wait_value *w = (const void *)hdr;

		if (w->addr % 8 || w->pad || w->cmp > DRM_NPU_WAIT_NE)
			return -EINVAL;
		return 0;
	}
	case DRM_NPU_PKT_OP:
		if (engine_class != DRM_NPU_ENGINE_COMPUTE)
			return -EINVAL;
		return npu_compute_validate(drm, (const void *)hdr);
	default:
		return -EINVAL;
	}
}

/* What running a validated packet costs, for npu_job_run_direct(). */
static u64 npu_packet_cost(const struct drm_npu_pkt_header *hdr)
{
	switch (hdr->opcode) {
	case DRM_NPU_PKT_COPY:
		return ((const struct drm_npu_pkt_copy *)hdr)->size;
	case DRM_NPU_PKT_COPY_STRIDED:
		return npu_copy_strided_cost((const void *)hdr);
	case DRM_NPU_PKT_FILL:
		return ((const struct drm_npu_pkt_fill *)hdr)->size;
	case DRM_NPU_PKT_WAIT_VALUE:
		return U64_MAX;
	case DRM_NPU_PKT_OP:
		return npu_compute_cost((const struct drm_npu_pkt_op *)hdr);
	default:
		return sizeof(u64);
	}
}

static int npu_validate_cmds(struct drm_device *drm, const void *cmds,
			     u32 size, u32 engine_class, u64 *cost)
{
	u32 off = 0;
	int ret;

	*cost = 0;
	while (off < size) {
		const struct drm_npu_pkt_header *hdr = cmds + off;

		if (size - off < sizeof(*hdr) ||
		    hdr->opcode >= ARRAY_SIZE(npu_pkt_sizes) ||
		    hdr->size != npu_pkt_sizes[hdr->opcode] ||
		    hdr->size > size - off) {
			drm_dbg(drm, "submit: bad packet header at offset %u\n",
				off);
			return -EINVAL;
		}
		ret = npu_validate_packet(drm, hdr, engine_class);
		if (ret) {
			drm_dbg(drm, "submit: bad packet (opcode %u) at offset %u\n",
				hdr->opcode, off);
			return ret;
		}
		if (check_add_overflow(*cost, npu_packet_cost(hdr), cost))
			*cost = U64_MAX;
		off += hdr->size;
	}
	return 0;
}

/* Resolves the in-fences into references held by the job. */
static int npu_job_get_in_fences(struct drm_file *file, struct npu_job *job,
				 const struct drm_npu_submit *args)
{
	struct drm_npu_fence __user *ufences = u64_to_user_ptr(args->in_fences_ptr);
	struct drm_npu_fence f;
	u32 i;
	int ret;

	if (!args->in_fence_count)
		return 0;
	job->in_fences = kcalloc(args->in_fence_count,
				 sizeof(*job->in_fences), GFP_KERNEL_ACCOUNT);
	if (!job->in_fences)
		return -ENOMEM;
	for (i = 0; i < args->in_fence_count; i++) {
		if (copy_from_user(&f, &ufences[i], sizeof(f)))
			return -EFAULT;
		if (f.flags)
			return -EINVAL;
		ret = drm_syncobj_find_fence(file, f.handle, f.point, 0,
					     &job->in_fences[i]);
		if (ret) {
			drm_dbg(file->minor->dev,
				"submit: in-fence %u (syncobj %u point %llu): %d\n",
				i, f.handle, f.point, ret);
			return ret;
		}
		job->in_fence_count++;
	}
	return 0;
}

/*
 * Jobs up to this cost run at submission when their engine and queue are
 * idle: about as long as handing them to the engine would take.
 */
#define NPU_DIRECT_MAX_COST	SZ_64K

/*
 * Whether @job can run now, in the submitter's context: small (or any size
 * when the caller waits for it anyway) but never one that waits for a
 * value, nothing ahead of it on its queue or engine, its in-fences
 * signalled without error, and no fault injection armed (injected faults
 * and latency go through the engine's worker, as the tests expect).
 */
static bool npu_job_may_run_direct(struct npu_job *job, bool caller_waits)
{
	struct npu_device *ndev = job->engine->ndev;
	struct npu_queue *queue = job->queue;
	u32 i;

	lockdep_assert_held(&queue->submit_lock);
	if (job->cost == U64_MAX ||
	    (!caller_waits && job->cost > NPU_DIRECT_MAX_COST) ||
	    atomic_read(&ndev->inject.hang) ||
	    atomic_read(&ndev->inject.fault) ||
	    atomic_read(&ndev->inject.latency_us) ||
	    atomic64_read(&queue->completed) != queue->seqno ||
	    atomic_read(&job->engine->inflight))
		return false;
	for (i = 0; i < job->in_fence_count; i++)
		if (!dma_fence_is_signaled(job->in_fences[i]))
			return false;
	return !npu_job_dependency_error(job);
}

/*
 * Runs @job on its idle engine now, with the engine's @exec_lock taken by
 * the caller (released here), and makes its signalled fence the queue's
 * next point. The hardware does the same when a doorbell rings on an
 * idle engine; here it saves the scheduler and worker hand-offs.
 */
static void npu_job_run_direct(struct npu_job *job,
			       struct dma_fence_chain *chain)
{
	struct npu_engine *engine = job->engine;
	struct npu_queue *queue = job->queue;
	unsigned long flags;
	int ret;

	lockdep_assert_held(&queue->submit_lock);
	lockdep_assert_held(&engine->exec_lock);
	job->point = ++queue->seqno;
	ret = npu_job_exec_locked(job);
	mutex_unlock(&engine->exec_lock);
	/*
	 * The fence gets its seqno and is signalled in one fence_lock
	 * section: direct jobs of two queues of the engine signal
	 * direct_context's seqnos in order (fence merges keep only the later
	 * fence of a context). Not under exec_lock, which the signalling
	 * worker takes (lockdep: exec_lock -> dma_fence_map -> exec_lock).
	 */
	spin_lock_irqsave(&engine->fence_lock, flags);
	dma_fence_init(job->hw_fence, &npu_hw_fence_ops, &engine->fence_lock,
		       engine->direct_context, ++engine->direct_seqno);
	job->hw_fence_live = true;
	if (ret)
		dma_fence_set_error(job->hw_fence, ret);
	dma_fence_signal_locked(job->hw_fence);
	spin_unlock_irqrestore(&engine->fence_lock, flags);
	drm_syncobj_add_point(queue->syncobj, chain, job->hw_fence,
			      job->point);
	atomic64_inc(&engine->direct_jobs);
}

int npu_ioctl_submit(struct drm_device *drm, void *data,
		     struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_submit *args = data;
	struct dma_fence_chain *chain = NULL;
	struct npu_queue *queue;
	struct npu_job *job;
	u32 i;
	int ret;

	if ((args->flags & ~DRM_NPU_SUBMIT_CALLER_WAITS) || !args->cmds_size ||
	    args->cmds_size % 8 ||
	    args->cmds_size > DRM_NPU_MAX_CMDS_SIZE ||
	    args->in_fence_count > DRM_NPU_MAX_IN_FENCES) {
		drm_dbg(drm, "submit: bad flags, size or fence count\n");
		return -EINVAL;
	}
	queue = npu_queue_lookup(nfile, args->queue_id);
	if (!queue) {
		drm_dbg(drm, "submit: no queue %u\n", args->queue_id);
		return -ENOENT;
	}
	ret = npu_vm_reserve_job(nfile->vm, args->cmds_size);
	if (ret) {
		drm_dbg(drm, "submit: the context has too much in flight\n");
		npu_queue_put(queue);
		return ret;
	}

	/* Kernel memory user space asks for: its memory cgroup pays. */
	job = kzalloc(sizeof(*job), GFP_KERNEL_ACCOUNT);
	if (!job) {
		npu_vm_unreserve_job(nfile->vm, args->cmds_size);
		npu_queue_put(queue);
		return -ENOMEM;
	}
	atomic_set(&job->in_flight, 1);
	kref_init(&job->refcount);
	INIT_WORK(&job->work, npu_job_work);
	/*
	 * The job's own reference: SUBMIT keeps the lookup's until it has
	 * unlocked submit_lock (mutex_unlock may touch the mutex after a
	 * QUEUE_DESTROY has taken it, and the job may be freed by then).
	 */
	kref_get(&queue->refcount);
	job->queue = queue;
	job->engine = queue->engine;
	job->vm = npu_vm_get(nfile->vm);
	job->cmds_size = args->cmds_size;
	atomic_inc(&ndev->jobs_alive);
	atomic_inc(&npu_live.jobs);

	job->cmds = kvmalloc(args->cmds_size, GFP_KERNEL_ACCOUNT);
	job->hw_fence = kzalloc(sizeof(*job->hw_fence), GFP_KERNEL);
	chain = dma_fence_chain_alloc();
	if (!job->cmds || !job->hw_fence || !chain) {
		ret = -ENOMEM;
		goto err_put;
	}
	if (copy_from_user(job->cmds, u64_to_user_ptr(args->cmds_ptr),
			   args->cmds_size)) {
		ret = -EFAULT;
		goto err_put;
	}
	ret = npu_validate_cmds(drm, job->cmds, job->cmds_size,
				job->engine->class, &job->cost);
	if (ret)
		goto err_put;
	ret = npu_job_get_in_fences(file, job, args);
	if (ret)
		goto err_put;

	mutex_lock(&queue->submit_lock);
	if (queue->dead || npu_queue_error(queue)) {
		mutex_unlock(&queue->submit_lock);
		drm_dbg(drm, "submit: queue %u has an error\n", queue->id);
		ret = -EIO;
		goto err_put;
	}
	if (npu_job_may_run_direct(job,
				   args->flags & DRM_NPU_SUBMIT_CALLER_WAITS) &&
	    mutex_trylock(&job->engine->exec_lock)) {
		npu_job_run_direct(job, chain);
		mutex_unlock(&queue->submit_lock);
		args->point = job->point;
		npu_job_put(job);
		npu_queue_put(queue);
		return 0;
	}

	/* Allocates: under submit_lock, which no fence signalling takes. */
	ret = npu_sched_job_init(&job->base, &queue->entity, nfile, file);
	if (ret)
		goto err_unlock;
	for (i = 0; i < job->in_fence_count; i++) {
		/* The scheduler takes its own reference. */
		ret = drm_sched_job_add_dependency(&job->base,
						   dma_fence_get(job->in_fences[i]));
		if (ret)
			goto err_cleanup;
	}
	drm_sched_job_arm(&job->base);
	job->point = ++queue->seqno;
	args->point = job->point;
	drm_syncobj_add_point(queue->syncobj, chain,
			      &job->base.s_fence->finished, job->point);
	chain = NULL;
	/*
	 * The scheduler owns the job from here: it may run and be freed by
	 * its worker before push_job returns, so nothing below touches it.
	 */
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&queue->submit_lock);
	npu_queue_put(queue);
	return 0;

err_cleanup:
	drm_sched_job_cleanup(&job->base);
err_unlock:
	mutex_unlock(&queue->submit_lock);
err_put:
	dma_fence_chain_free(chain);
	npu_job_put(job);
	npu_queue_put(queue);
	return ret;
}

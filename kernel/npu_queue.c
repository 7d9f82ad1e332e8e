// SPDX-License-Identifier: GPL-2.0-only
/*
 * Queues: create, destroy, status and reset. A queue is a scheduler entity
 * on one engine plus a timeline syncobj whose points are its jobs, and the
 * place where the first error of its jobs is recorded.
 */

#include <linux/capability.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>

#include "npu_compat.h"
#include "npu_drv.h"
#include "npu_engine.h"
#include "npu_queue.h"

/* Queues one context may have. */
#define NPU_MAX_QUEUES		256

static void npu_queue_release(struct kref *kref)
{
	struct npu_queue *queue = container_of(kref, struct npu_queue, refcount);

	atomic_dec(&queue->engine->queues);
	if (queue->error)
		atomic_dec(&queue->engine->ndev->queues_in_error);
	/* NULL when QUEUE_CREATE failed to make it. */
	if (queue->syncobj)
		drm_syncobj_put(queue->syncobj);
	mutex_destroy(&queue->submit_lock);
	atomic_dec(&npu_live.queues);
	kfree(queue);
}

void npu_queue_put(struct npu_queue *queue)
{
	kref_put(&queue->refcount, npu_queue_release);
}

struct npu_queue *npu_queue_lookup(struct npu_file *nfile, u32 id)
{
	struct npu_queue *queue;

	xa_lock(&nfile->queues);
	queue = xa_load(&nfile->queues, id);
	if (queue)
		kref_get(&queue->refcount);
	xa_unlock(&nfile->queues);
	return queue;
}

/* Keeps the first error only: later ones are its consequences. */
void npu_queue_record_error(struct npu_queue *queue, int error, u64 point,
			    u64 fault_addr, u32 offset)
{
	unsigned long flags;

	spin_lock_irqsave(&queue->state_lock, flags);
	if (!queue->error) {
		queue->error = error;
		queue->error_point = point;
		queue->fault_addr = fault_addr;
		queue->error_offset = offset;
		atomic_inc(&queue->engine->ndev->queues_in_error);
	}
	spin_unlock_irqrestore(&queue->state_lock, flags);
}

int npu_queue_error(struct npu_queue *queue)
{
	unsigned long flags;
	int error;

	spin_lock_irqsave(&queue->state_lock, flags);
	error = queue->error;
	spin_unlock_irqrestore(&queue->state_lock, flags);
	return error;
}

static const enum drm_sched_priority npu_priorities[] = {
	[DRM_NPU_PRIORITY_LOW] = NPU_SCHED_PRIORITY_LOW,
	[DRM_NPU_PRIORITY_NORMAL] = DRM_SCHED_PRIORITY_NORMAL,
	[DRM_NPU_PRIORITY_HIGH] = DRM_SCHED_PRIORITY_HIGH,
};

int npu_ioctl_queue_create(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_queue_create *args = data;
	struct drm_gpu_scheduler *sched;
	struct npu_engine *engine;
	struct npu_queue *queue;
	u32 id;
	int ret;

	u64 end;

	if ((args->flags & ~DRM_NPU_QUEUE_STATUS_WRITEBACK) ||
	    args->engine_class > DRM_NPU_ENGINE_COMPUTE ||
	    args->priority > DRM_NPU_PRIORITY_HIGH) {
		drm_dbg(drm, "queue_create: bad flags, class or priority\n");
		return -EINVAL;
	}
	if ((args->flags & DRM_NPU_QUEUE_STATUS_WRITEBACK) ?
	    !args->status_addr || args->status_addr % 8 ||
	    check_add_overflow(args->status_addr,
			       (u64)sizeof(struct drm_npu_queue_completion),
			       &end) :
	    args->status_addr != 0) {
		drm_dbg(drm, "queue_create: bad status_addr\n");
		return -EINVAL;
	}
	/*
	 * The scheduler serves a ready high-priority queue first, always: a
	 * privilege, as amdgpu and panthor make it, or one user's queues
	 * starve every other context on the engine.
	 */
	if (args->priority == DRM_NPU_PRIORITY_HIGH && !capable(CAP_SYS_NICE)) {
		drm_dbg(drm, "queue_create: high priority needs CAP_SYS_NICE\n");
		return -EACCES;
	}
	engine = npu_engine_pick(ndev, args->engine_class);
	if (!engine)
		return -EINVAL;

	queue = kzalloc(sizeof(*queue), GFP_KERNEL);
	if (!queue)
		return -ENOMEM;
	kref_init(&queue->refcount);
	mutex_init(&queue->submit_lock);
	spin_lock_init(&queue->state_lock);
	queue->engine = engine;
	queue->status_addr = args->status_addr;
	atomic_inc(&engine->queues);
	atomic_inc(&npu_live.queues);

	ret = drm_syncobj_create(&queue->syncobj, 0, NULL);
	if (ret)
		goto err_put;
	sched = &engine->sched;
	ret = drm_sched_entity_init(&queue->entity,
				    npu_priorities[args->priority], &sched, 1,
				    NULL);
	if (ret)
		goto err_put;

	/*
	 * The id is reserved here and the queue published last: once in the
	 * table, another thread of the file may destroy it (npu-fuzz under
	 * KASAN caught this function writing queue->id after a racing
	 * QUEUE_DESTROY had freed the queue).
	 */
	ret = xa_alloc(&nfile->queues, &id, NULL,
		       XA_LIMIT(1, NPU_MAX_QUEUES), GFP_KERNEL);
	if (ret) {
		drm_dbg(drm, "queue_create: too many queues\n");
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto err_entity;
	}
	queue->id = id;

	ret = drm_syncobj_get_handle(file, queue->syncobj,
				     &args->syncobj_handle);
	if (ret)
		goto err_erase;

	/* The slot is reserved: storing into it allocates nothing. */
	WARN_ON(xa_is_err(xa_store(&nfile->queues, id, queue, GFP_KERNEL)));
	args->queue_id = id;
	args->engine_id = engine->id;
	return 0;

err_erase:
	xa_erase(&nfile->queues, id);
err_entity:
	drm_sched_entity_destroy(&queue->entity);
err_put:
	npu_queue_put(queue);
	return ret;
}

static void npu_queue_destroy_work(struct work_struct *work)
{
	struct npu_queue *queue = container_of(work, struct npu_queue,
					       destroy_work);

	drm_sched_entity_destroy(&queue->entity);
	npu_queue_put(queue);
}

/*
 * Destroying returns at once. Tearing the entity down waits until every
 * job queued on it has reached its engine (each either runs or fails by
 * its deadline), so it runs on the device's reaper workqueue; the queue
 * itself lives on while jobs hold it.
 */
static void npu_queue_destroy(struct npu_queue *queue)
{
	struct npu_device *ndev = queue->engine->ndev;

	mutex_lock(&queue->submit_lock);
	queue->dead = true;
	mutex_unlock(&queue->submit_lock);
	INIT_WORK(&queue->destroy_work, npu_queue_destroy_work);
	queue_work(ndev->reap_wq, &queue->destroy_work);
}

int npu_ioctl_queue_destroy(struct drm_device *drm, void *data,
			    struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_queue_destroy *args = data;
	struct npu_queue *queue;

	if (args->pad)
		return -EINVAL;
	/* A reserved id (a queue still being created) is no queue yet. */
	xa_lock(&nfile->queues);
	queue = xa_load(&nfile->queues, args->queue_id);
	if (queue)
		__xa_erase(&nfile->queues, args->queue_id);
	xa_unlock(&nfile->queues);
	if (!queue) {
		drm_dbg(drm, "queue_destroy: no queue %u\n", args->queue_id);
		return -ENOENT;
	}
	npu_queue_destroy(queue);
	return 0;
}

void npu_queues_destroy_all(struct npu_file *nfile)
{
	struct npu_queue *queue;
	unsigned long id;

	xa_for_each(&nfile->queues, id, queue) {
		xa_erase(&nfile->queues, id);
		npu_queue_destroy(queue);
	}
}

int npu_ioctl_queue_status(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_queue_status *args = data;
	struct npu_queue *queue;
	unsigned long flags;

	if (args->flags)
		return -EINVAL;
	queue = npu_queue_lookup(nfile, args->queue_id);
	if (!queue) {
		drm_dbg(drm, "queue_status: no queue %u\n", args->queue_id);
		return -ENOENT;
	}

	mutex_lock(&queue->submit_lock);
	args->submitted = queue->seqno;
	mutex_unlock(&queue->submit_lock);
	spin_lock_irqsave(&queue->state_lock, flags);
	args->error = queue->error;
	args->error_point = queue->error_point;
	args->fault_addr = queue->fault_addr;
	args->error_offset = queue->error_offset;
	spin_unlock_irqrestore(&queue->state_lock, flags);
	args->state = args->error ? DRM_NPU_QUEUE_ERROR : DRM_NPU_QUEUE_OK;
	args->completed = atomic64_read(&queue->completed);
	args->engine_id = queue->engine->id;
	npu_queue_put(queue);
	return 0;
}

int npu_ioctl_queue_reset(struct drm_device *drm, void *data,
			  struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_queue_destroy *args = data;
	struct npu_queue *queue;
	unsigned long flags;
	int ret = 0;

	if (args->pad)
		return -EINVAL;
	queue = npu_queue_lookup(nfile, args->queue_id);
	if (!queue)
		return -ENOENT;

	/* Holding submit_lock: no new job can slip in behind the check. */
	mutex_lock(&queue->submit_lock);
	if (atomic64_read(&queue->completed) != queue->seqno) {
		ret = -EBUSY;
	} else {
		spin_lock_irqsave(&queue->state_lock, flags);
		if (queue->error)
			atomic_dec(&queue->engine->ndev->queues_in_error);
		queue->error = 0;
		queue->error_point = 0;
		queue->fault_addr = 0;
		queue->error_offset = 0;
		spin_unlock_irqrestore(&queue->state_lock, flags);
	}
	mutex_unlock(&queue->submit_lock);
	npu_queue_put(queue);
	return ret;
}

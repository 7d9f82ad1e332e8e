/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Queues: a context's ordered streams of jobs into one engine.
 */
#ifndef __NPU_QUEUE_H__
#define __NPU_QUEUE_H__

#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

#include <drm/gpu_scheduler.h>

struct drm_syncobj;
struct npu_engine;
struct npu_file;

/**
 * struct npu_queue - one queue
 * @refcount: the context's queue table holds one reference, every job one.
 * @id: the queue's id in its context.
 * @engine: the engine it feeds.
 * @entity: its scheduler entity; torn down when the queue is destroyed.
 * @syncobj: the timeline syncobj; point n is the n-th job.
 * @submit_lock: serialises submissions, so points, scheduler order and
 *               the timeline agree. Never held while waiting for a fence.
 * @seqno: last point handed out (under @submit_lock).
 * @state_lock: protects @error, @error_point, @fault_addr and
 *              @error_offset; taken in the
 *              fence-signalling path (spinlock, no allocation).
 * @error: first error of a job on this queue (negative errno) or 0.
 * @error_point: that job's point.
 * @fault_addr: the device address of a memory fault, else 0.
 * @error_offset: the offset of the failed packet in that job's commands.
 * @status_addr: where the engine writes a struct drm_npu_queue_completion
 *               after each job, or 0.
 * @completed: last point completed; points complete in order.
 * @dead: the queue was destroyed; its entity is (being) torn down.
 * @destroy_work: tears the entity down off the caller's path: that waits
 *                until every queued job has reached the engine.
 */
struct npu_queue {
	struct kref refcount;
	u32 id;
	struct npu_engine *engine;
	struct drm_sched_entity entity;
	struct drm_syncobj *syncobj;
	struct mutex submit_lock; /* see @submit_lock above */
	u64 seqno;
	spinlock_t state_lock; /* see @state_lock above */
	int error;
	u64 error_point;
	u64 fault_addr;
	u32 error_offset;
	u64 status_addr;
	atomic64_t completed;
	bool dead;
	struct work_struct destroy_work;
};

struct npu_queue *npu_queue_lookup(struct npu_file *nfile, u32 id);
void npu_queue_put(struct npu_queue *queue);
void npu_queue_record_error(struct npu_queue *queue, int error, u64 point,
			    u64 fault_addr, u32 offset);
int npu_queue_error(struct npu_queue *queue);
void npu_queues_destroy_all(struct npu_file *nfile);

int npu_ioctl_queue_create(struct drm_device *drm, void *data,
			   struct drm_file *file);
int npu_ioctl_queue_destroy(struct drm_device *drm, void *data,
			    struct drm_file *file);
int npu_ioctl_queue_status(struct drm_device *drm, void *data,
			   struct drm_file *file);
int npu_ioctl_queue_reset(struct drm_device *drm, void *data,
			  struct drm_file *file);

#endif /* __NPU_QUEUE_H__ */

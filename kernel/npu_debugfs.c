// SPDX-License-Identifier: GPL-2.0-only
/*
 * debugfs, per device (/sys/kernel/debug/dri/<minor>/ for a render node,
 * /sys/kernel/debug/accel/<device name>/ for an accel node):
 *   npu_memory   device memory capacity and use, live BOs and contexts,
 *                the RAM all npu BOs pin and its limit (pinned_mem_mb)
 *   npu_clients  every context: its process, what it holds, its mappings
 *                and its queues
 *   npu_engines  per engine: queues, jobs done, busy time, resets
 *   inject_hang, inject_fault, inject_latency_us
 *                fault injection for tests: the next N jobs hang until
 *                the watchdog or fault; latency is added to every job
 */

#include <linux/debugfs.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/seq_file.h>

#include <drm/drm_debugfs.h>
#include <drm/drm_file.h>

#include "npu_drv.h"
#include "npu_gem.h"
#include "npu_queue.h"

static int npu_debugfs_memory(struct seq_file *m, void *data)
{
	struct drm_info_node *node = m->private;
	struct npu_device *ndev = to_npu_device(node->minor->dev);

	seq_printf(m, "capacity: %llu\n", ndev->props.mem_capacity);
	seq_printf(m, "used: %lld\n", atomic64_read(&ndev->mem_used));
	seq_printf(m, "bos: %d\n", atomic_read(&ndev->bo_count));
	/* Module-wide: every device's DEVICE and HOST BOs (pinned_mem_mb). */
	seq_printf(m, "pinned: %llu\n", npu_gem_pinned_bytes());
	seq_printf(m, "pinned_limit: %llu\n", npu_gem_pinned_limit());
	seq_printf(m, "contexts: %d\n", atomic_read(&ndev->file_count));
	return 0;
}

static const char *const npu_kind_names[] = {
	[DRM_NPU_BO_DEVICE] = "device",
	[DRM_NPU_BO_HOST] = "host",
	[DRM_NPU_BO_USERPTR] = "userptr",
	[DRM_NPU_BO_IMPORTED] = "imported",
};

static void npu_debugfs_queues(struct seq_file *m, struct npu_file *nfile)
{
	struct npu_queue *q;
	unsigned long id;

	xa_lock(&nfile->queues);
	xa_for_each(&nfile->queues, id, q)
		seq_printf(m, "  queue %lu engine %u submitted %llu completed %lld depth %lld error %d point %llu fault 0x%llx\n",
			   id, q->engine->id, READ_ONCE(q->seqno),
			   atomic64_read(&q->completed),
			   READ_ONCE(q->seqno) - atomic64_read(&q->completed),
			   READ_ONCE(q->error), READ_ONCE(q->error_point),
			   READ_ONCE(q->fault_addr));
	xa_unlock(&nfile->queues);
}

static int npu_debugfs_engines(struct seq_file *m, void *data)
{
	struct drm_info_node *node = m->private;
	struct npu_device *ndev = to_npu_device(node->minor->dev);
	u32 i;

	for (i = 0; i < ndev->num_engines; i++) {
		struct npu_engine *e = &ndev->engines[i];
		u64 now;

		seq_printf(m, "engine %u %s queues %d jobs %lld busy_ns %llu resets %lld direct %lld aliased %lld\n",
			   e->id, e->name, atomic_read(&e->queues),
			   atomic64_read(&e->jobs_done),
			   npu_engine_busy(e, &now),
			   atomic64_read(&e->resets),
			   atomic64_read(&e->direct_jobs),
			   atomic64_read(&e->copy.aliased));
	}
	return 0;
}

static void npu_debugfs_client(struct seq_file *m, struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct npu_file_stats *st = &nfile->stats;
	struct drm_mm_node *node;
	struct task_struct *task;
	char comm[TASK_COMM_LEN] = "?";
	pid_t pid;

	rcu_read_lock();
	pid = pid_vnr(file->pid);
	task = pid_task(file->pid, PIDTYPE_TGID);
	if (task)
		get_task_comm(comm, task);
	rcu_read_unlock();

	seq_printf(m, "context pid %d (%s): bos %lld bytes %lld device %lld pinned %lld",
		   pid, comm, atomic64_read(&st->bo_count),
		   atomic64_read(&st->bo_bytes),
		   atomic64_read(&st->device_bytes),
		   atomic64_read(&st->pinned_bytes));

	down_read(&nfile->vm->lock);
	seq_printf(m, " mappings %llu mapped %llu\n", nfile->vm->mapping_count,
		   nfile->vm->mapped_bytes);
	drm_mm_for_each_node(node, &nfile->vm->mm) {
		struct npu_bo *bo = container_of(node, struct npu_mapping,
						 node)->bo;

		seq_printf(m, "  map 0x%llx-0x%llx %s bo size %zu\n",
			   node->start, node->start + node->size,
			   npu_kind_names[bo->kind], bo->shmem.base.size);
	}
	up_read(&nfile->vm->lock);

	npu_debugfs_queues(m, nfile);
}

static int npu_debugfs_clients(struct seq_file *m, void *data)
{
	struct drm_info_node *node = m->private;
	struct drm_device *drm = node->minor->dev;
	struct drm_file *file;

	mutex_lock(&drm->filelist_mutex);
	list_for_each_entry(file, &drm->filelist, lhead) {
		/* Primary-node files are not contexts of ours until opened. */
		if (file->driver_priv)
			npu_debugfs_client(m, file);
	}
	mutex_unlock(&drm->filelist_mutex);
	return 0;
}

static const struct drm_info_list npu_debugfs_list[] = {
	{ "npu_memory", npu_debugfs_memory, 0 },
	{ "npu_clients", npu_debugfs_clients, 0 },
	{ "npu_engines", npu_debugfs_engines, 0 },
};

void npu_debugfs_init(struct drm_minor *minor)
{
	struct npu_device *ndev = to_npu_device(minor->dev);

	drm_debugfs_create_files(npu_debugfs_list,
				 ARRAY_SIZE(npu_debugfs_list),
				 minor->debugfs_root, minor);
	debugfs_create_atomic_t("inject_hang", 0600, minor->debugfs_root,
				&ndev->inject.hang);
	debugfs_create_atomic_t("inject_fault", 0600, minor->debugfs_root,
				&ndev->inject.fault);
	debugfs_create_atomic_t("inject_latency_us", 0600,
				minor->debugfs_root, &ndev->inject.latency_us);
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * DRM_IOCTL_NPU_QUERY: device information for user space.
 */

#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <drm/drm_print.h>

#include "npu_drv.h"

/* Size of the first version of struct drm_npu_device_info. */
#define NPU_DEVICE_INFO_SIZE_V1	offsetofend(struct drm_npu_device_info, name)

/*
 * Copy an answer of @full bytes to user space with size negotiation: size 0
 * asks for the size. A structure answer (@elem 0) needs at least its first
 * version's @min bytes and fills a prefix of any shorter buffer, so old and
 * new user space both work across a grown structure. An array answer needs
 * whole @elem-sized elements and fills as many as fit.
 */
static int npu_query_copy(struct drm_device *drm, struct drm_npu_query *q,
			  const void *answer, u32 full, u32 min, u32 elem)
{
	u32 n;

	if (q->size) {
		if (q->size < min || (elem && q->size % elem)) {
			drm_dbg(drm, "query %u: size %u is below %u or not whole elements\n",
				q->query, q->size, min);
			return -EINVAL;
		}
		n = min(q->size, full);
		if (copy_to_user(u64_to_user_ptr(q->data_ptr), answer, n))
			return -EFAULT;
	}
	q->size = full;
	return 0;
}

static int npu_query_device_info(struct npu_device *ndev,
				 struct drm_npu_query *q)
{
	const struct npu_hw_props *p = &ndev->props;
	struct drm_npu_device_info info = {
		.api_version = DRM_NPU_API_VERSION,
		.device_index = ndev->index,
		.mem_capacity = p->mem_capacity,
		.clock_hz = p->clock_hz,
		.capabilities = p->capabilities,
		.num_engines = p->num_engines,
		.va_start = p->va_start,
		.va_end = p->va_end,
	};
	u32 i;

	for (i = 0; i < p->num_engines; i++) {
		if (p->engine_class[i] == DRM_NPU_ENGINE_COPY)
			info.num_copy_engines++;
		else
			info.num_compute_engines++;
	}
	strscpy(info.name, p->name, sizeof(info.name));

	return npu_query_copy(&ndev->drm, q, &info, sizeof(info),
			      NPU_DEVICE_INFO_SIZE_V1, 0);
}

static int npu_query_engines(struct npu_device *ndev, struct drm_npu_query *q)
{
	const struct npu_hw_props *p = &ndev->props;
	struct drm_npu_engine_info engines[NPU_MAX_ENGINES] = { };
	u32 instances[2] = { };
	u32 i;

	for (i = 0; i < p->num_engines; i++) {
		u32 class = p->engine_class[i];

		engines[i].engine_id = i;
		engines[i].engine_class = class;
		engines[i].instance = instances[class]++;
	}

	return npu_query_copy(&ndev->drm, q, engines,
			      p->num_engines * sizeof(engines[0]),
			      sizeof(engines[0]), sizeof(engines[0]));
}

static int npu_query_memory(struct npu_device *ndev, struct drm_npu_query *q)
{
	struct drm_npu_memory_info info = {
		.capacity = ndev->props.mem_capacity,
		.used = atomic64_read(&ndev->mem_used),
		.bo_count = atomic_read(&ndev->bo_count),
		.context_count = atomic_read(&ndev->file_count),
	};

	return npu_query_copy(&ndev->drm, q, &info, sizeof(info),
			      sizeof(info), 0);
}

static void npu_engine_stats(struct npu_engine *e,
			     struct drm_npu_engine_stats *st)
{
	st->engine_id = e->id;
	st->queues = atomic_read(&e->queues);
	st->busy_ns = npu_engine_busy(e, &st->sample_ns);
	st->jobs_completed = atomic64_read(&e->jobs_done);
	st->faults = atomic64_read(&e->faults);
	st->timeouts = atomic64_read(&e->timeouts);
	st->resets = atomic64_read(&e->resets);
	st->last_reset_ns = atomic64_read(&e->last_reset_ns);
}

static int npu_query_engine_stats(struct npu_device *ndev,
				  struct drm_npu_query *q)
{
	/* On the heap: NPU_MAX_ENGINES of them would take 2 KiB of stack. */
	struct drm_npu_engine_stats *stats;
	u32 i;
	int ret;

	stats = kcalloc(ndev->num_engines, sizeof(*stats), GFP_KERNEL);
	if (!stats)
		return -ENOMEM;
	for (i = 0; i < ndev->num_engines; i++)
		npu_engine_stats(&ndev->engines[i], &stats[i]);

	ret = npu_query_copy(&ndev->drm, q, stats,
			     ndev->num_engines * sizeof(*stats),
			     sizeof(*stats), sizeof(*stats));
	kfree(stats);
	return ret;
}

static int npu_query_device_stats(struct npu_device *ndev,
				  struct drm_npu_query *q)
{
	struct drm_npu_device_stats info = {
		.sample_ns = ktime_get_ns(),
		.contexts = atomic_read(&ndev->file_count),
		.queues_in_error = atomic_read(&ndev->queues_in_error),
	};
	u32 i;

	for (i = 0; i < ndev->num_engines; i++) {
		struct drm_npu_engine_stats st;

		npu_engine_stats(&ndev->engines[i], &st);
		info.queues += st.queues;
		info.jobs_completed += st.jobs_completed;
		info.faults += st.faults;
		info.timeouts += st.timeouts;
		info.resets += st.resets;
		info.last_reset_ns = max(info.last_reset_ns, st.last_reset_ns);
	}

	return npu_query_copy(&ndev->drm, q, &info, sizeof(info),
			      sizeof(info), 0);
}

int npu_ioctl_query(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct drm_npu_query *q = data;

	if (q->flags || q->pad) {
		drm_dbg(drm, "query: flags 0x%x or pad 0x%x not zero\n",
			q->flags, q->pad);
		return -EINVAL;
	}

	switch (q->query) {
	case DRM_NPU_QUERY_DEVICE_INFO:
		return npu_query_device_info(ndev, q);
	case DRM_NPU_QUERY_ENGINES:
		return npu_query_engines(ndev, q);
	case DRM_NPU_QUERY_MEMORY:
		return npu_query_memory(ndev, q);
	case DRM_NPU_QUERY_ENGINE_STATS:
		return npu_query_engine_stats(ndev, q);
	case DRM_NPU_QUERY_DEVICE_STATS:
		return npu_query_device_stats(ndev, q);
	default:
		drm_dbg(drm, "query: unknown query %u\n", q->query);
		return -EINVAL;
	}
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * fdinfo: each open NPU file publishes its context's usage in
 * /proc/PID/fdinfo/FD with the keys of the DRM client usage statistics
 * (Documentation/gpu/drm-usage-stats.rst), which gputop, nvtop and
 * npu-smi read without root:
 *   drm-driver, drm-client-id,
 *   drm-engine-copy, drm-engine-compute (ns of engine time, cumulative),
 *   drm-engine-capacity-copy, drm-engine-capacity-compute (engines),
 *   drm-total-device, drm-total-host (KiB held through GEM handles),
 * and the driver's own npu-device (the NPU's index) and npu-queues.
 * DRM's drm_show_fdinfo() (6.5+) prints its part only for PCI devices and
 * is not on 6.1: the file operation prints all of it.
 */

#include <linux/fs.h>
#include <linux/seq_file.h>

#include <drm/drm_file.h>

#include "npu_drv.h"

void npu_show_fdinfo(struct seq_file *m, struct file *f)
{
	struct drm_file *file = f->private_data;
	struct npu_file *nfile = file ? file->driver_priv : NULL;
	struct npu_device *ndev;
	u32 classes[2] = { };
	u64 busy[2];
	unsigned long id;
	void *queue;
	u32 i, queues = 0;

	if (!nfile)
		return;
	ndev = nfile->ndev;
	for (i = 0; i < ndev->num_engines; i++)
		classes[ndev->engines[i].class]++;
	xa_lock(&nfile->queues);
	xa_for_each(&nfile->queues, id, queue)
		queues++;
	xa_unlock(&nfile->queues);
	npu_vm_busy(ndev, nfile->vm, busy);

	seq_printf(m, "drm-driver:\t%s\n", NPU_DRIVER_NAME);
	seq_printf(m, "drm-client-id:\t%llu\n", nfile->client_id);
	seq_printf(m, "drm-engine-copy:\t%llu ns\n", busy[DRM_NPU_ENGINE_COPY]);
	seq_printf(m, "drm-engine-capacity-copy:\t%u\n",
		   classes[DRM_NPU_ENGINE_COPY]);
	seq_printf(m, "drm-engine-compute:\t%llu ns\n",
		   busy[DRM_NPU_ENGINE_COMPUTE]);
	seq_printf(m, "drm-engine-capacity-compute:\t%u\n",
		   classes[DRM_NPU_ENGINE_COMPUTE]);
	seq_printf(m, "drm-total-device:\t%lld KiB\n",
		   atomic64_read(&nfile->stats.device_bytes) >> 10);
	seq_printf(m, "drm-total-host:\t%lld KiB\n",
		   atomic64_read(&nfile->stats.host_bytes) >> 10);
	seq_printf(m, "npu-device:\t%u\n", ndev->index);
	seq_printf(m, "npu-queues:\t%u\n", queues);
}

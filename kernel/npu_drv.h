/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Core device and file (context) structures of the npu driver.
 */
#ifndef __NPU_DRV_H__
#define __NPU_DRV_H__

#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/npu_drm.h>

#include "npu_hw.h"

#define NPU_DRIVER_NAME		"npu"
#define NPU_DRIVER_DESC		"Neural processing unit"
#define NPU_MAX_DEVICES		16

/**
 * struct npu_device - one NPU, exposed as one DRM render node
 * @drm: the DRM device; embedded, freed by drm_dev_put().
 * @hw: hardware backend; fixed at probe.
 * @hw_priv: backend's private state.
 * @index: index of this NPU among the driver's devices.
 * @props: what the backend reported at init; constant afterwards, so it is
 *         read without a lock.
 */
struct npu_device {
	struct drm_device drm;
	const struct npu_hw_ops *hw;
	void *hw_priv;
	u32 index;
	struct npu_hw_props props;
};

/**
 * struct npu_file - a context: one open file of a render node
 * @ndev: the device this file was opened on.
 *
 * Everything a context owns hangs off this structure and dies with the file.
 */
struct npu_file {
	struct npu_device *ndev;
};

static inline struct npu_device *to_npu_device(struct drm_device *drm)
{
	return container_of(drm, struct npu_device, drm);
}

int npu_ioctl_query(struct drm_device *drm, void *data, struct drm_file *file);

#endif /* __NPU_DRV_H__ */

// SPDX-License-Identifier: GPL-2.0-only
/*
 * Probe: the kernel has compute accelerator nodes (drivers/accel, 6.2+),
 * enabled in its configuration, so the module registers as one.
 */
#include <linux/module.h>
#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>

#if !IS_ENABLED(CONFIG_DRM_ACCEL)
#error "CONFIG_DRM_ACCEL is off"
#endif

DEFINE_DRM_ACCEL_FOPS(probe_fops);
const struct drm_driver probe_drv = {
	.driver_features = DRIVER_GEM | DRIVER_COMPUTE_ACCEL,
	.fops = &probe_fops,
};
MODULE_LICENSE("GPL");

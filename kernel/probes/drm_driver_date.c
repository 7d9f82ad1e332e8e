// SPDX-License-Identifier: GPL-2.0-only
/* Probe: struct drm_driver still has .date (removed in 6.14). */
#include <linux/module.h>
#include <drm/drm_drv.h>

const struct drm_driver probe_drv = { .date = "20260101" };
MODULE_LICENSE("GPL");

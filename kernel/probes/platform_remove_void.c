// SPDX-License-Identifier: GPL-2.0-only
/* Probe: struct platform_driver's .remove returns void (6.11+). */
#include <linux/module.h>
#include <linux/platform_device.h>

static void probe_remove(struct platform_device *pdev) { }
struct platform_driver probe_drv = { .remove = probe_remove };
MODULE_LICENSE("GPL");

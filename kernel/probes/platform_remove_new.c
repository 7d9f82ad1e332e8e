// SPDX-License-Identifier: GPL-2.0-only
/* Probe: struct platform_driver has .remove_new (6.1 stable .. 6.12). */
#include <linux/module.h>
#include <linux/platform_device.h>

static void probe_remove(struct platform_device *pdev) { }
struct platform_driver probe_drv = { .remove_new = probe_remove };
MODULE_LICENSE("GPL");

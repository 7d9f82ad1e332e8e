// SPDX-License-Identifier: GPL-2.0-only
/* Probe: dma-buf mmap goes through drm_driver.gem_prime_mmap (until 6.6). */
#include <linux/module.h>
#include <drm/drm_drv.h>
#include <drm/drm_prime.h>

const struct drm_driver probe_drv = { .gem_prime_mmap = drm_gem_prime_mmap };
MODULE_LICENSE("GPL");

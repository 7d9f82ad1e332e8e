/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel API differences, in one place. Decided by the compile probes of
 * configure.sh (npu_config.h), never by version numbers.
 */
#ifndef __NPU_COMPAT_H__
#define __NPU_COMPAT_H__

#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/stringify.h>

#include "npu_config.h"

/*
 * platform_driver remove callback: int-returning .remove before 6.11, with a
 * void .remove_new on 6.1 stable .. 6.12, and a void .remove from 6.11.
 */
#if defined(NPU_HAVE_PLATFORM_REMOVE_NEW)
#define NPU_PLATFORM_REMOVE_WRAPPER(fn)
#define NPU_PLATFORM_REMOVE(fn)		.remove_new = fn
#elif defined(NPU_HAVE_PLATFORM_REMOVE_VOID)
#define NPU_PLATFORM_REMOVE_WRAPPER(fn)
#define NPU_PLATFORM_REMOVE(fn)		.remove = fn
#else
#define NPU_PLATFORM_REMOVE_WRAPPER(fn)					\
	static int fn##_int(struct platform_device *pdev)		\
	{								\
		fn(pdev);						\
		return 0;						\
	}
#define NPU_PLATFORM_REMOVE(fn)		.remove = fn##_int
#endif

/* drm_driver.date went away in 6.14. */
#if defined(NPU_HAVE_DRM_DRIVER_DATE)
#define NPU_DRM_DRIVER_DATE(d)		.date = d,
#else
#define NPU_DRM_DRIVER_DATE(d)
#endif

/* Before 6.6, mmap of an exported dma-buf needs drm_driver.gem_prime_mmap. */
#if defined(NPU_HAVE_DRM_DRIVER_GEM_PRIME_MMAP)
#define NPU_DRM_DRIVER_PRIME_MMAP	.gem_prime_mmap = drm_gem_prime_mmap,
#else
#define NPU_DRM_DRIVER_PRIME_MMAP
#endif

/* MODULE_IMPORT_NS takes a string from 6.13 on. */
#if defined(NPU_HAVE_MODULE_IMPORT_NS_IDENT)
#define NPU_IMPORT_NS(ns)		MODULE_IMPORT_NS(ns)
#else
#define NPU_IMPORT_NS(ns)		MODULE_IMPORT_NS(__stringify(ns))
#endif

#endif /* __NPU_COMPAT_H__ */

// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu - DRM driver for neural processing units.
 *
 * Each NPU is a platform device bound to this driver and exposed as a DRM
 * render node. The emulated backend (npu_emu.c) creates those platform
 * devices itself; a silicon backend would come from its bus instead.
 */

#include <linux/mod_devicetable.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>

#include "npu_compat.h"
#include "npu_drv.h"

static int npu_open(struct drm_device *drm, struct drm_file *file)
{
	struct npu_file *nfile;

	nfile = kzalloc(sizeof(*nfile), GFP_KERNEL);
	if (!nfile)
		return -ENOMEM;

	nfile->ndev = to_npu_device(drm);
	file->driver_priv = nfile;
	return 0;
}

static void npu_postclose(struct drm_device *drm, struct drm_file *file)
{
	kfree(file->driver_priv);
	file->driver_priv = NULL;
}

static const struct drm_ioctl_desc npu_ioctls[] = {
	DRM_IOCTL_DEF_DRV(NPU_QUERY, npu_ioctl_query, DRM_RENDER_ALLOW),
};

DEFINE_DRM_GEM_FOPS(npu_fops);

static const struct drm_driver npu_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER | DRIVER_SYNCOBJ |
			   DRIVER_SYNCOBJ_TIMELINE,
	.open = npu_open,
	.postclose = npu_postclose,
	.ioctls = npu_ioctls,
	.num_ioctls = ARRAY_SIZE(npu_ioctls),
	.fops = &npu_fops,
	.name = NPU_DRIVER_NAME,
	.desc = NPU_DRIVER_DESC,
	NPU_DRM_DRIVER_DATE("20261129")
	.major = DRM_NPU_API_VERSION_MAJOR,
	.minor = DRM_NPU_API_VERSION_MINOR,
};

static int npu_probe(struct platform_device *pdev)
{
	const struct platform_device_id *id = platform_get_device_id(pdev);
	struct npu_device *ndev;
	int ret;

	ndev = devm_drm_dev_alloc(&pdev->dev, &npu_drm_driver,
				  struct npu_device, drm);
	if (IS_ERR(ndev))
		return PTR_ERR(ndev);

	ndev->hw = (const struct npu_hw_ops *)id->driver_data;
	ndev->index = pdev->id;
	platform_set_drvdata(pdev, ndev);

	ret = ndev->hw->init(ndev, &ndev->props);
	if (ret)
		return ret;

	ret = drm_dev_register(&ndev->drm, 0);
	if (ret)
		goto err_hw_fini;

	return 0;

err_hw_fini:
	ndev->hw->fini(ndev);
	return ret;
}

static void npu_remove(struct platform_device *pdev)
{
	struct npu_device *ndev = platform_get_drvdata(pdev);

	/* Fails later ioctls on still-open files with -ENODEV. */
	drm_dev_unplug(&ndev->drm);
	ndev->hw->fini(ndev);
}

NPU_PLATFORM_REMOVE_WRAPPER(npu_remove);

static const struct platform_device_id npu_platform_ids[] = {
	{ .name = "npu-emu", .driver_data = (kernel_ulong_t)&npu_emu_hw_ops },
	{ }
};
MODULE_DEVICE_TABLE(platform, npu_platform_ids);

static struct platform_driver npu_platform_driver = {
	.probe = npu_probe,
	NPU_PLATFORM_REMOVE(npu_remove),
	.id_table = npu_platform_ids,
	.driver = {
		.name = NPU_DRIVER_NAME,
	},
};

static int __init npu_init(void)
{
	int ret;

	ret = platform_driver_register(&npu_platform_driver);
	if (ret)
		return ret;

	ret = npu_emu_register_devices();
	if (ret)
		goto err_unregister_driver;

	return 0;

err_unregister_driver:
	platform_driver_unregister(&npu_platform_driver);
	return ret;
}

static void __exit npu_exit(void)
{
	npu_emu_unregister_devices();
	platform_driver_unregister(&npu_platform_driver);
}

module_init(npu_init);
module_exit(npu_exit);

MODULE_DESCRIPTION("DRM driver for neural processing units, with an emulated NPU");
MODULE_LICENSE("GPL");

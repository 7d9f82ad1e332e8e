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
#include <drm/drm_prime.h>

#include "npu_compat.h"
#include "npu_drv.h"
#include "npu_gem.h"
#include "npu_job.h"
#include "npu_queue.h"

struct npu_live_objects npu_live;
static atomic64_t npu_client_ids = ATOMIC64_INIT(0);

static int npu_open(struct drm_device *drm, struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct npu_file *nfile;

	nfile = kzalloc(sizeof(*nfile), GFP_KERNEL);
	if (!nfile)
		return -ENOMEM;

	nfile->ndev = ndev;
	nfile->file = file;
	nfile->client_id = atomic64_inc_return(&npu_client_ids);
	nfile->vm = npu_vm_create(ndev);
	if (!nfile->vm) {
		kfree(nfile);
		return -ENOMEM;
	}
	xa_init_flags(&nfile->queues, XA_FLAGS_ALLOC1);
	file->driver_priv = nfile;
	atomic_inc(&ndev->file_count);
	atomic_inc(&npu_live.files);
	return 0;
}

/* GEM handles are gone by now (drm_gem_release runs first); mappings hold
 * the last references of their BOs.
 */
static void npu_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct npu_file *nfile = file->driver_priv;

	/* Jobs in flight keep the queues and the address space they use. */
	npu_queues_destroy_all(nfile);
	xa_destroy(&nfile->queues);
	npu_vm_put(nfile->vm);
	kfree(nfile);
	file->driver_priv = NULL;
	atomic_dec(&ndev->file_count);
	atomic_dec(&npu_live.files);
}

int npu_ioctl_context_info(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_context_info *args = data;

	if (args->flags || args->pad)
		return -EINVAL;

	args->bo_count = atomic64_read(&nfile->stats.bo_count);
	args->bo_bytes = atomic64_read(&nfile->stats.bo_bytes);
	args->device_bytes = atomic64_read(&nfile->stats.device_bytes);
	args->pinned_bytes = atomic64_read(&nfile->stats.pinned_bytes);
	down_read(&nfile->vm->lock);
	args->mapping_count = nfile->vm->mapping_count;
	args->mapped_bytes = nfile->vm->mapped_bytes;
	up_read(&nfile->vm->lock);
	return 0;
}

static const struct drm_ioctl_desc npu_ioctls[] = {
	DRM_IOCTL_DEF_DRV(NPU_QUERY, npu_ioctl_query, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_BO_CREATE, npu_ioctl_bo_create, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_BO_FROM_USERPTR, npu_ioctl_bo_userptr,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_BO_INFO, npu_ioctl_bo_info, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_VM_BIND, npu_ioctl_vm_bind, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_VM_ACCESS, npu_ioctl_vm_access, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_CONTEXT_INFO, npu_ioctl_context_info,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_QUEUE_CREATE, npu_ioctl_queue_create,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_QUEUE_DESTROY, npu_ioctl_queue_destroy,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_SUBMIT, npu_ioctl_submit, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_QUEUE_STATUS, npu_ioctl_queue_status,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NPU_QUEUE_RESET, npu_ioctl_queue_reset,
			  DRM_RENDER_ALLOW),
};

static const struct file_operations npu_fops = {
	.owner = THIS_MODULE,
	NPU_FOPS,
	.show_fdinfo = npu_show_fdinfo,
};

static const struct drm_driver npu_drm_driver = {
	.driver_features = DRIVER_GEM | NPU_DRIVER_NODE | DRIVER_SYNCOBJ |
			   DRIVER_SYNCOBJ_TIMELINE,
	.open = npu_open,
	.postclose = npu_postclose,
	.gem_create_object = npu_gem_create_object,
	.prime_handle_to_fd = drm_gem_prime_handle_to_fd,
	.prime_fd_to_handle = drm_gem_prime_fd_to_handle,
	.gem_prime_import = npu_gem_prime_import,
	NPU_DRM_DRIVER_PRIME_MMAP
	.debugfs_init = npu_debugfs_init,
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

	ret = npu_engines_init(ndev);
	if (ret)
		goto err_hw_fini;

	ret = drm_dev_register(&ndev->drm, 0);
	if (ret)
		goto err_engines_fini;
	npu_accel_debugfs_init(&ndev->drm);

	return 0;

err_engines_fini:
	npu_engines_fini(ndev);
err_hw_fini:
	ndev->hw->fini(ndev);
	return ret;
}

static void npu_remove(struct platform_device *pdev)
{
	struct npu_device *ndev = platform_get_drvdata(pdev);

	/* Fails later ioctls on still-open files with -ENODEV. */
	drm_dev_unplug(&ndev->drm);
	npu_engines_fini(ndev);
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

	npu_gem_init_limits();
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

	/* vm-logcheck fails a test run on this line. */
	if (atomic_read(&npu_live.bos) || atomic_read(&npu_live.mappings) ||
	    atomic_read(&npu_live.files) || atomic_read(&npu_live.queues) ||
	    atomic_read(&npu_live.jobs))
		pr_err("npu: leak: %d BOs, %d mappings, %d files, %d queues, %d jobs still alive at unload\n",
		       atomic_read(&npu_live.bos),
		       atomic_read(&npu_live.mappings),
		       atomic_read(&npu_live.files),
		       atomic_read(&npu_live.queues),
		       atomic_read(&npu_live.jobs));
	if (npu_gem_pinned_bytes())
		pr_err("npu: leak: %llu bytes of pinned_mem_mb still charged at unload\n",
		       npu_gem_pinned_bytes());
}

module_init(npu_init);
module_exit(npu_exit);

MODULE_DESCRIPTION("DRM driver for neural processing units, with an emulated NPU");
MODULE_LICENSE("GPL");
NPU_IMPORT_NS(DMA_BUF);

// SPDX-License-Identifier: GPL-2.0-only
/*
 * The emulated NPU: a backend that behaves like hardware, for machines
 * without NPU silicon. It creates its own platform devices (one per emulated
 * NPU, count and shape set by module parameters) and implements
 * struct npu_hw_ops for them.
 */

#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>

#include "npu_drv.h"

static unsigned int num_devices = 2;
module_param(num_devices, uint, 0444);
MODULE_PARM_DESC(num_devices, "Number of emulated NPUs (1-16, default 2)");

static unsigned int mem_size_mb = 1024;
module_param(mem_size_mb, uint, 0444);
MODULE_PARM_DESC(mem_size_mb,
		 "Device memory of each emulated NPU in MiB (16-1048576, default 1024)");

static unsigned int copy_engines = 2;
module_param(copy_engines, uint, 0444);
MODULE_PARM_DESC(copy_engines, "Copy engines per emulated NPU (1-8, default 2)");

static unsigned int compute_engines = 2;
module_param(compute_engines, uint, 0444);
MODULE_PARM_DESC(compute_engines,
		 "Compute engines per emulated NPU (1-8, default 2)");

static unsigned int job_timeout_ms = 2000;
module_param(job_timeout_ms, uint, 0444);
MODULE_PARM_DESC(job_timeout_ms,
		 "A job running longer is stopped and fails with -ETIMEDOUT (10-600000, default 2000)");

/* Device addresses cover the whole x86-64 user address space (47 bits), so
 * the runtime can give host and device one unified address space.
 */
#define NPU_EMU_VA_START	SZ_64K
#define NPU_EMU_VA_END		BIT_ULL(47)

/* The emulated timestamp clock counts nanoseconds. */
#define NPU_EMU_CLOCK_HZ	NSEC_PER_SEC

/**
 * struct npu_emu - per-device state of the emulator
 * @clock_base: raw monotonic time at init; device clock zero.
 * @clock_last: the last value the device clock gave.
 */
struct npu_emu {
	u64 clock_base;
	atomic64_t clock_last;
};

static struct platform_device *npu_emu_pdevs[NPU_MAX_DEVICES];

static int npu_emu_init(struct npu_device *ndev, struct npu_hw_props *props)
{
	struct npu_emu *emu;
	u32 i;

	emu = kzalloc(sizeof(*emu), GFP_KERNEL);
	if (!emu)
		return -ENOMEM;

	emu->clock_base = ktime_get_raw_ns();
	ndev->hw_priv = emu;

	strscpy(props->name, "npu-emu", sizeof(props->name));
	props->mem_capacity = (u64)mem_size_mb * SZ_1M;
	props->clock_hz = NPU_EMU_CLOCK_HZ;
	props->capabilities = DRM_NPU_CAP_EMULATED;
	props->va_start = NPU_EMU_VA_START;
	props->va_end = NPU_EMU_VA_END;
	props->job_timeout_ms = job_timeout_ms;
	props->num_engines = copy_engines + compute_engines;
	for (i = 0; i < props->num_engines; i++)
		props->engine_class[i] = i < copy_engines ?
			DRM_NPU_ENGINE_COPY : DRM_NPU_ENGINE_COMPUTE;
	return 0;
}

static void npu_emu_fini(struct npu_device *ndev)
{
	kfree(ndev->hw_priv);
	ndev->hw_priv = NULL;
}

static u64 npu_emu_read_clock(struct npu_device *ndev)
{
	struct npu_emu *emu = ndev->hw_priv;

	u64 now = ktime_get_raw_ns() - emu->clock_base;
	s64 last = atomic64_read(&emu->clock_last);

	/*
	 * A device clock only goes forward. The host's can stand still for
	 * a while under emulation (QEMU TCG holds its TSC at the last value
	 * when the host's TSCs disagree across CPUs): then each read still
	 * gets a later tick.
	 */
	do {
		if (now <= (u64)last)
			now = last + 1;
	} while (!atomic64_try_cmpxchg(&emu->clock_last, &last, now));
	return now;
}

const struct npu_hw_ops npu_emu_hw_ops = {
	.init = npu_emu_init,
	.fini = npu_emu_fini,
	.read_clock = npu_emu_read_clock,
};

static int npu_emu_check_param(const char *name, unsigned int val,
			       unsigned int lo, unsigned int hi)
{
	if (val >= lo && val <= hi)
		return 0;
	pr_err("npu: %s=%u is out of range %u-%u\n", name, val, lo, hi);
	return -EINVAL;
}

static int npu_emu_check_params(void)
{
	int ret;

	ret = npu_emu_check_param("num_devices", num_devices, 1,
				  NPU_MAX_DEVICES);
	if (!ret)
		ret = npu_emu_check_param("mem_size_mb", mem_size_mb, 16,
					  SZ_1M);
	if (!ret)
		ret = npu_emu_check_param("copy_engines", copy_engines, 1, 8);
	if (!ret)
		ret = npu_emu_check_param("compute_engines", compute_engines,
					  1, 8);
	if (!ret)
		ret = npu_emu_check_param("job_timeout_ms", job_timeout_ms, 10,
					  600000);
	return ret;
}

void npu_emu_unregister_devices(void)
{
	int i;

	for (i = NPU_MAX_DEVICES - 1; i >= 0; i--) {
		if (npu_emu_pdevs[i])
			platform_device_unregister(npu_emu_pdevs[i]);
		npu_emu_pdevs[i] = NULL;
	}
}

/*
 * Create the emulated NPUs. Binding happens synchronously inside
 * platform_device_register_simple(), so a device whose probe failed has no
 * driver afterwards: report that as the load error instead of leaving a
 * half-populated driver behind.
 */
int npu_emu_register_devices(void)
{
	struct platform_device *pdev;
	unsigned int i;
	int ret;

	ret = npu_emu_check_params();
	if (ret)
		return ret;

	for (i = 0; i < num_devices; i++) {
		pdev = platform_device_register_simple("npu-emu", i, NULL, 0);
		if (IS_ERR(pdev)) {
			ret = PTR_ERR(pdev);
			goto err_unregister;
		}
		npu_emu_pdevs[i] = pdev;
		if (!platform_get_drvdata(pdev)) {
			ret = -ENODEV;
			pr_err("npu: emulated device %u failed to probe\n", i);
			goto err_unregister;
		}
	}
	return 0;

err_unregister:
	npu_emu_unregister_devices();
	return ret;
}

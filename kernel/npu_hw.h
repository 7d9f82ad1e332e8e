/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The hardware-facing seam of the npu driver.
 *
 * Everything that would touch silicon goes through struct npu_hw_ops, so a
 * real backend replaces the emulator (npu_emu.c) without changing the uAPI,
 * the ioctl code or the runtime.
 */
#ifndef __NPU_HW_H__
#define __NPU_HW_H__

#include <linux/types.h>

struct npu_device;

#define NPU_MAX_ENGINES		16

/**
 * struct npu_hw_props - static properties a backend reports at init
 * @name: model name shown to user space.
 * @mem_capacity: bytes of device memory.
 * @clock_hz: frequency of the timestamp clock.
 * @capabilities: DRM_NPU_CAP_* bits.
 * @va_start: first bindable device address.
 * @va_end: one past the last bindable device address.
 * @job_timeout_ms: a job running longer is stopped with -ETIMEDOUT.
 * @num_engines: number of valid entries in @engine_class.
 * @engine_class: enum drm_npu_engine_class of each engine, by engine id.
 */
struct npu_hw_props {
	char name[32];
	u64 mem_capacity;
	u64 clock_hz;
	u64 capabilities;
	u64 va_start;
	u64 va_end;
	u32 job_timeout_ms;
	u32 num_engines;
	u32 engine_class[NPU_MAX_ENGINES];
};

/**
 * struct npu_hw_ops - what the driver needs from a backend
 * @init: bring the device up and fill @props; undone by @fini.
 * @fini: quiesce and release everything @init set up.
 * @read_clock: current device timestamp, in ticks of props.clock_hz.
 */
struct npu_hw_ops {
	int (*init)(struct npu_device *ndev, struct npu_hw_props *props);
	void (*fini)(struct npu_device *ndev);
	u64 (*read_clock)(struct npu_device *ndev);
};

extern const struct npu_hw_ops npu_emu_hw_ops;

int npu_emu_register_devices(void);
void npu_emu_unregister_devices(void);

#endif /* __NPU_HW_H__ */

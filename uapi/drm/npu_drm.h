/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * npu_drm.h - user-space ABI of the npu DRM driver.
 *
 * Rules every structure here follows (Documentation/process/botching-up-ioctls.rst):
 *  - fixed-size types only, pointers carried as __u64;
 *  - explicit padding, and every pad, reserved field and unknown flag must be
 *    zero or the ioctl fails with -EINVAL;
 *  - structures only grow at the end; queries negotiate their size.
 */
#ifndef _NPU_DRM_H_
#define _NPU_DRM_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/* uAPI version: major changes break user space, minor ones only add. */
#define DRM_NPU_API_VERSION_MAJOR	1
#define DRM_NPU_API_VERSION_MINOR	0
#define DRM_NPU_API_VERSION \
	((DRM_NPU_API_VERSION_MAJOR << 16) | DRM_NPU_API_VERSION_MINOR)

#define DRM_NPU_QUERY			0x00

#define DRM_IOCTL_NPU_QUERY \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_QUERY, struct drm_npu_query)

/* Query kinds for struct drm_npu_query::query. */
enum drm_npu_query_id {
	/* struct drm_npu_device_info */
	DRM_NPU_QUERY_DEVICE_INFO = 1,
	/* an array of struct drm_npu_engine_info, one per engine */
	DRM_NPU_QUERY_ENGINES = 2,
};

/**
 * struct drm_npu_query - read a piece of device information
 * @query: one of enum drm_npu_query_id.
 * @flags: must be zero.
 * @data_ptr: user pointer to the output buffer.
 * @size: in: bytes available at @data_ptr; 0 asks only for the size.
 *        out: the full size of the answer.
 *        A structure answer fills min(@size, its size) bytes, so older user
 *        space reads a prefix of a grown structure and newer user space
 *        sees how much the kernel filled; @size below the structure's first
 *        version is -EINVAL.
 *        An array answer fills as many whole elements as fit; @size must be
 *        a non-zero multiple of the element size or it is -EINVAL. Array
 *        elements never grow: new per-element facts come as a new query.
 * @pad: must be zero.
 */
struct drm_npu_query {
	__u32 query;
	__u32 flags;
	__u64 data_ptr;
	__u32 size;
	__u32 pad;
};

/* Capability bits in struct drm_npu_device_info::capabilities. */
/* The device is the in-kernel emulator, not silicon. */
#define DRM_NPU_CAP_EMULATED		(1ULL << 0)

/**
 * struct drm_npu_device_info - answer to DRM_NPU_QUERY_DEVICE_INFO
 * @api_version: DRM_NPU_API_VERSION of the driver.
 * @device_index: index of this NPU among the driver's devices (0-based).
 * @mem_capacity: device memory in bytes.
 * @clock_hz: frequency of the device clock that timestamps count.
 * @capabilities: DRM_NPU_CAP_* bits.
 * @num_engines: total engines; DRM_NPU_QUERY_ENGINES lists them.
 * @num_copy_engines: engines of class DRM_NPU_ENGINE_COPY.
 * @num_compute_engines: engines of class DRM_NPU_ENGINE_COMPUTE.
 * @pad: zero.
 * @va_start: first device address user space may bind.
 * @va_end: one past the last such address.
 * @name: NUL-terminated device model name.
 */
struct drm_npu_device_info {
	__u32 api_version;
	__u32 device_index;
	__u64 mem_capacity;
	__u64 clock_hz;
	__u64 capabilities;
	__u32 num_engines;
	__u32 num_copy_engines;
	__u32 num_compute_engines;
	__u32 pad;
	__u64 va_start;
	__u64 va_end;
	char name[32];
};

/* Engine classes. */
enum drm_npu_engine_class {
	DRM_NPU_ENGINE_COPY = 0,
	DRM_NPU_ENGINE_COMPUTE = 1,
};

/**
 * struct drm_npu_engine_info - one element of DRM_NPU_QUERY_ENGINES
 * @engine_id: index of the engine on its device.
 * @engine_class: enum drm_npu_engine_class.
 * @instance: index of the engine within its class.
 * @pad: zero.
 */
struct drm_npu_engine_info {
	__u32 engine_id;
	__u32 engine_class;
	__u32 instance;
	__u32 pad;
};

#if defined(__cplusplus)
}
#endif

#endif /* _NPU_DRM_H_ */

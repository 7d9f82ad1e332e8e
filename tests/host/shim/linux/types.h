/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * <linux/types.h> as kernel/npu_ops_fpu.c sees it in the kernel: the uAPI
 * header (__u32 and friends, for <drm/npu_drm.h>) plus the kernel's short
 * type names and bool.
 */
#ifndef __NPU_SHIM_LINUX_TYPES_H__
#define __NPU_SHIM_LINUX_TYPES_H__

#include_next <linux/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;

#endif /* __NPU_SHIM_LINUX_TYPES_H__ */

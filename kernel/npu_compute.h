/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The tensor op set of the emulated compute engines (DRM_NPU_PKT_OP).
 */
#ifndef __NPU_COMPUTE_H__
#define __NPU_COMPUTE_H__

#include <linux/types.h>

struct drm_device;
struct drm_npu_pkt_op;
struct npu_vm;
struct npu_compute_scratch;

/*
 * Per compute engine working memory ("on-chip SRAM"), allocated at engine
 * init (GFP_KERNEL; never in the fence-signalling path). NULL on failure.
 */
struct npu_compute_scratch *npu_compute_scratch_alloc(void);
void npu_compute_scratch_free(struct npu_compute_scratch *s);

/*
 * Submit time (ioctl context): 0, or -EINVAL for an unknown op, dtype or
 * out_dtype combination, non-zero flags, pad or unused fields, zero or
 * overflowing element counts or byte sizes, an operand over 1 GiB, partly
 * overlapping input and output ranges, or misaligned addresses. Logs only
 * with drm_dbg().
 */
int npu_compute_validate(struct drm_device *drm,
			 const struct drm_npu_pkt_op *op);

/*
 * Run time, on the engine's thread (fence-signalling path: no allocation,
 * no waiting on fences). Executes a validated @op through @vm's MMU using
 * only @s. Return: 0; -EFAULT on an MMU fault with *@fault_addr the
 * faulting device address; -EINVAL for an op error (i32 division by zero);
 * -ETIMEDOUT once ktime_get_ns() passes @deadline_ns (checked between
 * chunks and tiles).
 */
/*
 * A validated op's cost, roughly in bytes moved (multiply-adds for GEMM):
 * small ops run at submission on an idle engine. Saturates at U64_MAX.
 */
u64 npu_compute_cost(const struct drm_npu_pkt_op *op);
int npu_compute_run(struct npu_vm *vm, struct npu_compute_scratch *s,
		    const struct drm_npu_pkt_op *op, u64 deadline_ns,
		    u64 *fault_addr);

#endif /* __NPU_COMPUTE_H__ */

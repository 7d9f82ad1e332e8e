/* SPDX-License-Identifier: GPL-2.0-only */
/* Temporary: the lead's stand-in until the compute engine lands. */
#ifndef __NPU_COMPUTE_H__
#define __NPU_COMPUTE_H__
#include <linux/types.h>
struct drm_device;
struct drm_npu_pkt_op;
struct npu_vm;
struct npu_compute_scratch;
struct npu_compute_scratch *npu_compute_scratch_alloc(void);
void npu_compute_scratch_free(struct npu_compute_scratch *s);
int npu_compute_validate(struct drm_device *drm, const struct drm_npu_pkt_op *op);
int npu_compute_run(struct npu_vm *vm, struct npu_compute_scratch *s,
		    const struct drm_npu_pkt_op *op, u64 deadline_ns, u64 *fault_addr);
#endif

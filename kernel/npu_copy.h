/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The copy engines' strided copy (DRM_NPU_PKT_COPY_STRIDED): a view of up
 * to DRM_NPU_COPY_MAX_DIMS dimensions copied in one packet, as frameworks
 * need for non-contiguous tensors.
 */
#ifndef __NPU_COPY_H__
#define __NPU_COPY_H__

#include <linux/types.h>

struct drm_device;
struct drm_npu_pkt_copy_strided;
struct npu_copy_unit;
struct npu_vm;

/*
 * Submit time: 0, or -EINVAL for a bad ndim or elem_size, a zero size, a
 * non-zero entry past ndim, an extent that overflows, or overlapping
 * source and destination extents. Logs only with drm_dbg().
 */
int npu_copy_strided_validate(struct drm_device *drm,
			      const struct drm_npu_pkt_copy_strided *c);

/*
 * A validated packet's cost in bytes moved, plus a per-run charge for
 * the runs of a scattered view. Saturates at U64_MAX.
 */
u64 npu_copy_strided_cost(const struct drm_npu_pkt_copy_strided *c);

/*
 * Run time (fence-signalling path: no allocation): 0, the MMU's fault
 * with *@fault_addr set, or -ETIMEDOUT past @deadline_ns.
 */
int npu_copy_strided_run(struct npu_vm *vm,
			 const struct drm_npu_pkt_copy_strided *c,
			 u64 deadline_ns, struct npu_copy_unit *unit,
			 u64 *fault_addr);

#endif /* __NPU_COPY_H__ */

// SPDX-License-Identifier: GPL-2.0-only
#include <linux/slab.h>
#include "npu_compute.h"
struct npu_compute_scratch { int x; };
struct npu_compute_scratch *npu_compute_scratch_alloc(void) { return kzalloc(sizeof(struct npu_compute_scratch), GFP_KERNEL); }
void npu_compute_scratch_free(struct npu_compute_scratch *s) { kfree(s); }
int npu_compute_validate(struct drm_device *drm, const struct drm_npu_pkt_op *op) { return -EINVAL; }
int npu_compute_run(struct npu_vm *vm, struct npu_compute_scratch *s, const struct drm_npu_pkt_op *op, u64 d, u64 *f) { return -EINVAL; }

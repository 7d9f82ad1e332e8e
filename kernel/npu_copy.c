// SPDX-License-Identifier: GPL-2.0-only
/*
 * Strided copies. The packet describes both sides as sizes and byte
 * strides; the engine walks the indices in row-major order and moves one
 * run at a time: the innermost dimension when it is dense on both sides,
 * else one element. Runs are grouped into slices that hold the VM's lock
 * for a bounded number of bytes, as npu_vm_copy() does, so binds get a
 * turn and the job's deadline is checked between slices.
 */
#include <linux/minmax.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/timekeeping.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/drm_print.h>
#include <drm/npu_drm.h>

#include "npu_copy.h"
#include "npu_vm.h"

/* Runs moved between two looks at the clock, at most. */
#define NPU_COPY_RUNS_PER_SLICE	4096

/* What the engine spends per run beyond its bytes (a translation). */
#define NPU_COPY_RUN_COST	64

/* Bytes from the first to the last byte of one side, plus one; false on overflow. */
static bool npu_copy_extent(const struct drm_npu_pkt_copy_strided *c,
			    const __u64 *strides, u64 *extent)
{
	u64 span = c->elem_size, step;
	u32 d;

	for (d = 0; d < c->ndim; d++) {
		if (check_mul_overflow(c->sizes[d] - 1, strides[d], &step) ||
		    check_add_overflow(span, step, &span))
			return false;
	}
	*extent = span;
	return true;
}

int npu_copy_strided_validate(struct drm_device *drm,
			      const struct drm_npu_pkt_copy_strided *c)
{
	u64 elems = 1, s_ext, d_ext, s_end, d_end;
	u32 d;

	if (!c->ndim || c->ndim > DRM_NPU_COPY_MAX_DIMS || !c->elem_size ||
	    c->elem_size > DRM_NPU_COPY_MAX_ELEM_SIZE) {
		drm_dbg(drm, "copy_strided: ndim %u or elem_size %u out of range\n",
			c->ndim, c->elem_size);
		return -EINVAL;
	}
	for (d = 0; d < DRM_NPU_COPY_MAX_DIMS; d++) {
		if (d >= c->ndim) {
			if (c->sizes[d] || c->src_strides[d] || c->dst_strides[d])
				goto unused;
			continue;
		}
		if (!c->sizes[d] || check_mul_overflow(elems, c->sizes[d], &elems))
			goto sizes;
	}
	if (!npu_copy_extent(c, c->src_strides, &s_ext) ||
	    !npu_copy_extent(c, c->dst_strides, &d_ext) ||
	    check_add_overflow(c->src, s_ext, &s_end) ||
	    check_add_overflow(c->dst, d_ext, &d_end)) {
		drm_dbg(drm, "copy_strided: an extent overflows\n");
		return -EINVAL;
	}
	if (c->src < d_end && c->dst < s_end) {
		drm_dbg(drm, "copy_strided: source and destination overlap\n");
		return -EINVAL;
	}
	return 0;
unused:
	drm_dbg(drm, "copy_strided: dimension %u past ndim is not zero\n", d);
	return -EINVAL;
sizes:
	drm_dbg(drm, "copy_strided: size %u is zero or the count overflows\n", d);
	return -EINVAL;
}

/* The dimensions walked one run at a time, and the bytes of a run. */
static u32 npu_copy_runs(const struct drm_npu_pkt_copy_strided *c, u64 *run)
{
	u32 last = c->ndim - 1;

	if (c->src_strides[last] == c->elem_size &&
	    c->dst_strides[last] == c->elem_size) {
		*run = c->sizes[last] * c->elem_size;
		return last;
	}
	*run = c->elem_size;
	return c->ndim;
}

u64 npu_copy_strided_cost(const struct drm_npu_pkt_copy_strided *c)
{
	u64 run, runs = 1, cost;
	u32 d, outer = npu_copy_runs(c, &run);

	for (d = 0; d < outer; d++)
		runs *= c->sizes[d];	/* validated: the product fits */
	if (check_mul_overflow(runs, run + NPU_COPY_RUN_COST, &cost))
		return U64_MAX;
	return cost;
}

int npu_copy_strided_run(struct npu_vm *vm,
			 const struct drm_npu_pkt_copy_strided *c,
			 u64 deadline_ns, struct npu_copy_unit *unit,
			 u64 *fault_addr)
{
	u64 idx[DRM_NPU_COPY_MAX_DIMS] = { 0 };
	u64 run, soff = 0, doff = 0;
	u32 outer = npu_copy_runs(c, &run);
	bool done = false;
	int ret = 0;

	/* A long dense run is a plain copy with its own slicing. */
	if (!outer)
		return npu_vm_copy(vm, c->dst, c->src, run, deadline_ns, unit,
				   fault_addr);
	while (!done) {
		struct npu_mapping *stlb = NULL, *dtlb = NULL;
		u64 bytes = 0;
		u32 runs = 0;

		if (ktime_get_coarse_ns() > deadline_ns)
			return -ETIMEDOUT;
		down_read(&vm->lock);
		while (!done && runs < NPU_COPY_RUNS_PER_SLICE &&
		       bytes < NPU_VM_SLICE_BYTES) {
			u32 d = outer;

			if (run > NPU_VM_SLICE_BYTES) {
				up_read(&vm->lock);
				ret = npu_vm_copy(vm, c->dst + doff, c->src + soff,
						  run, deadline_ns, unit,
						  fault_addr);
				down_read(&vm->lock);
				stlb = NULL;
				dtlb = NULL;
			} else {
				ret = npu_vm_copy_locked(vm, &stlb, &dtlb,
							 c->dst + doff,
							 c->src + soff, run,
							 unit, fault_addr);
			}
			if (ret)
				break;
			bytes += run;
			runs++;
			/* The next index in row-major order. */
			while (d--) {
				if (++idx[d] < c->sizes[d]) {
					soff += c->src_strides[d];
					doff += c->dst_strides[d];
					break;
				}
				soff -= (c->sizes[d] - 1) * c->src_strides[d];
				doff -= (c->sizes[d] - 1) * c->dst_strides[d];
				idx[d] = 0;
			}
			done = d == U32_MAX;
		}
		up_read(&vm->lock);
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}

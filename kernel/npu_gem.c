// SPDX-License-Identifier: GPL-2.0-only
/*
 * Buffer objects: device memory and pinned host memory (GEM shmem, pinned at
 * creation), userptr BOs (pinned user pages) and BOs imported from another
 * npu device through PRIME.
 *
 * Every BO lists the pages the emulated device reaches through its MMU
 * (npu_vm.c). Device-memory BOs are charged to the device's capacity;
 * userptr BOs to the owner's RLIMIT_MEMLOCK. Per-context counts follow GEM
 * handles (the open/close callbacks); device and module counts follow the
 * objects themselves.
 */

#include <linux/backing-dev.h>
#include <linux/dma-buf.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include "npu_compat.h"
#include "npu_drv.h"
#include "npu_gem.h"

/* Largest device-memory BO (the capacity bounds it further). */
#define NPU_BO_MAX_SIZE		BIT_ULL(40)

/*
 * RAM that the driver's own BOs pin, together: HOST BOs, and DEVICE BOs,
 * whose memory on the emulated NPU is host RAM too. Pinned pages cannot be
 * reclaimed and belong to no process the OOM killer could pick, so without
 * a bound one user could take the machine's memory from everyone (TTM
 * bounds its pages to half of RAM for the same reason). Userptr BOs pin
 * their owner's pages instead, charged to its RLIMIT_MEMLOCK.
 */
static unsigned int pinned_mem_mb;
module_param(pinned_mem_mb, uint, 0444);
MODULE_PARM_DESC(pinned_mem_mb,
		 "RAM all DEVICE and HOST BOs may pin together, in MiB (default 0: half of RAM; at most all of it)");

static u64 npu_pinned_limit;
static atomic64_t npu_pinned_bytes = ATOMIC64_INIT(0);

/*
 * What a BO costs beyond its pages (its GEM and shmem objects, file and
 * inode, page array, vmap area: about 2.5 KiB measured on 6.1), charged to
 * the budget with them, so that one-page BOs cannot take half as much RAM
 * again as the budget says.
 */
#define NPU_BO_BOOKKEEPING	PAGE_SIZE

/* At module load: the budget, shown back in the parameter. */
void npu_gem_init_limits(void)
{
	u64 ram_mb = ((u64)totalram_pages() << PAGE_SHIFT) / SZ_1M;

	if (!pinned_mem_mb)
		pinned_mem_mb = max_t(u64, ram_mb / 2, 1);
	else if (pinned_mem_mb > ram_mb)
		pinned_mem_mb = ram_mb;
	npu_pinned_limit = (u64)pinned_mem_mb * SZ_1M;
}

u64 npu_gem_pinned_bytes(void)
{
	return atomic64_read(&npu_pinned_bytes);
}

u64 npu_gem_pinned_limit(void)
{
	return npu_pinned_limit;
}

static int npu_pinned_charge(u64 size)
{
	if (atomic64_add_return(size, &npu_pinned_bytes) > npu_pinned_limit) {
		atomic64_sub(size, &npu_pinned_bytes);
		return -ENOMEM;
	}
	return 0;
}

static void npu_pinned_uncharge(u64 size)
{
	atomic64_sub(size, &npu_pinned_bytes);
}

/*
 * Pinned host memory (HOST and USERPTR BOs) can never exceed the RAM there
 * is: bigger requests fail with -ENOMEM before anything is allocated, so
 * the page arrays stay within what kvmalloc serves without complaint.
 */
static bool npu_fits_in_ram(u64 size)
{
	return size >> PAGE_SHIFT <= totalram_pages();
}

static int npu_bo_open(struct drm_gem_object *obj, struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct npu_bo *bo = to_npu_bo(obj);

	atomic64_inc(&nfile->stats.bo_count);
	atomic64_add(obj->size, &nfile->stats.bo_bytes);
	if (bo->kind == DRM_NPU_BO_DEVICE)
		atomic64_add(obj->size, &nfile->stats.device_bytes);
	if (bo->kind == DRM_NPU_BO_USERPTR)
		atomic64_add(obj->size, &nfile->stats.pinned_bytes);
	if (bo->kind == DRM_NPU_BO_USERPTR || bo->kind == DRM_NPU_BO_HOST)
		atomic64_add(obj->size, &nfile->stats.host_bytes);
	return 0;
}

static void npu_bo_close(struct drm_gem_object *obj, struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct npu_bo *bo = to_npu_bo(obj);

	atomic64_dec(&nfile->stats.bo_count);
	atomic64_sub(obj->size, &nfile->stats.bo_bytes);
	if (bo->kind == DRM_NPU_BO_DEVICE)
		atomic64_sub(obj->size, &nfile->stats.device_bytes);
	if (bo->kind == DRM_NPU_BO_USERPTR)
		atomic64_sub(obj->size, &nfile->stats.pinned_bytes);
	if (bo->kind == DRM_NPU_BO_USERPTR || bo->kind == DRM_NPU_BO_HOST)
		atomic64_sub(obj->size, &nfile->stats.host_bytes);
}

static int npu_mem_charge(struct npu_device *ndev, u64 size)
{
	u64 used = atomic64_add_return(size, &ndev->mem_used);

	if (used > ndev->props.mem_capacity) {
		atomic64_sub(size, &ndev->mem_used);
		return -ENOMEM;
	}
	return 0;
}

static void npu_bo_account(struct npu_device *ndev)
{
	atomic_inc(&ndev->bo_count);
	atomic_inc(&npu_live.bos);
}

static void npu_bo_unaccount(struct npu_device *ndev)
{
	atomic_dec(&ndev->bo_count);
	atomic_dec(&npu_live.bos);
}

/* Only a speed-up (npu_vm_copy()): a BO works without its alias. */
static void npu_bo_map_alias(struct npu_bo *bo)
{
	bo->alias = vmap(bo->pages, bo->npages, VM_MAP, PAGE_KERNEL);
}

static void npu_shmem_bo_free(struct drm_gem_object *obj)
{
	struct npu_bo *bo = to_npu_bo(obj);
	struct npu_device *ndev = bo->ndev;

	if (bo->pages) {
		vunmap(bo->alias);
		drm_gem_shmem_unpin(&bo->shmem);
		if (bo->kind == DRM_NPU_BO_DEVICE)
			atomic64_sub(obj->size, &ndev->mem_used);
		npu_pinned_uncharge(obj->size + NPU_BO_BOOKKEEPING);
		npu_bo_unaccount(ndev);
	}
	drm_gem_shmem_free(&bo->shmem);
}

static const struct drm_gem_object_funcs npu_shmem_bo_funcs = {
	.free = npu_shmem_bo_free,
	.open = npu_bo_open,
	.close = npu_bo_close,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = drm_gem_shmem_object_mmap,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

struct drm_gem_object *npu_gem_create_object(struct drm_device *drm,
					     size_t size)
{
	struct npu_bo *bo;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);

	bo->ndev = to_npu_device(drm);
	bo->shmem.base.funcs = &npu_shmem_bo_funcs;
	return &bo->shmem.base;
}

int npu_ioctl_bo_create(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct drm_npu_bo_create *args = data;
	struct drm_gem_shmem_object *shmem;
	struct npu_bo *bo;
	u64 size;
	int ret;

	if (args->flags || args->pad) {
		drm_dbg(drm, "bo_create: flags 0x%x or pad 0x%x not zero\n",
			args->flags, args->pad);
		return -EINVAL;
	}
	if (args->kind != DRM_NPU_BO_DEVICE && args->kind != DRM_NPU_BO_HOST) {
		drm_dbg(drm, "bo_create: bad kind %u\n", args->kind);
		return -EINVAL;
	}
	size = args->size;
	if (!size || size > NPU_BO_MAX_SIZE) {
		drm_dbg(drm, "bo_create: bad size 0x%llx\n", size);
		return -EINVAL;
	}
	size = PAGE_ALIGN(size);
	if (args->kind == DRM_NPU_BO_HOST && !npu_fits_in_ram(size)) {
		drm_dbg(drm, "bo_create: 0x%llx bytes exceed RAM\n", size);
		return -ENOMEM;
	}

	if (args->kind == DRM_NPU_BO_DEVICE) {
		ret = npu_mem_charge(ndev, size);
		if (ret) {
			drm_dbg(drm, "bo_create: device memory exhausted\n");
			return ret;
		}
	}
	ret = npu_pinned_charge(size + NPU_BO_BOOKKEEPING);
	if (ret) {
		drm_dbg(drm, "bo_create: pinned_mem_mb exhausted\n");
		goto err_uncharge_device;
	}

	shmem = drm_gem_shmem_create(drm, size);
	if (IS_ERR(shmem)) {
		ret = PTR_ERR(shmem);
		goto err_uncharge;
	}
	bo = to_npu_bo(&shmem->base);
	bo->kind = args->kind;

	/* Device memory and pinned host memory never move or swap. */
	ret = drm_gem_shmem_pin(shmem);
	if (ret) {
		drm_gem_object_put(&shmem->base);
		goto err_uncharge;
	}
	bo->pages = shmem->pages;
	bo->npages = size >> PAGE_SHIFT;
	npu_bo_map_alias(bo);
	npu_bo_account(ndev);

	ret = drm_gem_handle_create(file, &shmem->base, &args->handle);
	/* The handle holds the reference now (or nothing does, on error). */
	drm_gem_object_put(&shmem->base);
	return ret;

err_uncharge:
	npu_pinned_uncharge(size + NPU_BO_BOOKKEEPING);
err_uncharge_device:
	if (args->kind == DRM_NPU_BO_DEVICE)
		atomic64_sub(size, &ndev->mem_used);
	return ret;
}

static void npu_userptr_bo_free(struct drm_gem_object *obj)
{
	struct npu_bo *bo = to_npu_bo(obj);

	mmu_interval_notifier_remove(&bo->notifier);
	vunmap(bo->alias);
	unpin_user_pages_dirty_lock(bo->pages, bo->npages, !bo->readonly);
	atomic64_sub(bo->npages, &bo->mm->pinned_vm);
	mmdrop(bo->mm);
	kvfree(bo->pages);
	npu_bo_unaccount(bo->ndev);
	drm_gem_object_release(obj);
	kfree(bo);
}

static struct dma_buf *npu_no_export(struct drm_gem_object *obj, int flags)
{
	drm_dbg(obj->dev, "userptr BOs cannot be exported\n");
	return ERR_PTR(-EINVAL);
}

static const struct drm_gem_object_funcs npu_userptr_bo_funcs = {
	.free = npu_userptr_bo_free,
	.open = npu_bo_open,
	.close = npu_bo_close,
	.export = npu_no_export,
};

/*
 * Any change to the pinned user range moves the notifier's sequence past
 * npu_bo.notifier_seq, which makes the BO stale: the pages stay pinned
 * (the device may be using them), but user space learns through BO_INFO
 * that the range may map other pages now. Nothing here sleeps.
 */
static bool npu_userptr_invalidate(struct mmu_interval_notifier *mni,
				   const struct mmu_notifier_range *range,
				   unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
	return true;
}

static const struct mmu_interval_notifier_ops npu_userptr_notifier_ops = {
	.invalidate = npu_userptr_invalidate,
};

/* Charge @npages to the caller's RLIMIT_MEMLOCK, as RDMA and ivpu do. */
static int npu_memlock_charge(struct mm_struct *mm, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	u64 pinned = atomic64_add_return(npages, &mm->pinned_vm);

	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	return 0;
}

/*
 * A shared mapping of a file its filesystem writes back (ext4, xfs, 9p,
 * ...): the device writing through a long-term pin would dirty the pages
 * behind the filesystem's back, which writeback meets with WARNs and lost
 * data. GUP refuses writable long-term pins of them from Linux 6.5; 6.1's
 * does not, so the driver checks on every kernel (one errno on all).
 * shmem and hugetlbfs do not write back. VM_SHARED rather than VM_WRITE:
 * mprotect() could make the mapping writable under the pin.
 */
static bool npu_vma_written_back(struct vm_area_struct *vma)
{
	const struct vm_operations_struct *ops = vma->vm_ops;

	if (!(vma->vm_flags & VM_SHARED) || !vma->vm_file)
		return false;
	if (ops && (ops->page_mkwrite || ops->pfn_mkwrite))
		return true;
	return mapping_can_writeback(vma->vm_file->f_mapping);
}

/*
 * The mappings of [start, end): -EFAULT for a hole (GUP would fail too, and
 * a mapping made there later would not pass this check), -EOPNOTSUPP when
 * one is written back, else 0.
 */
static int npu_check_vmas(struct mm_struct *mm, u64 start, u64 end)
{
	struct vm_area_struct *vma;
	u64 addr = start;

	/* Not mmap_assert_locked(): with DEBUG_VM, 6.1's needs dump_mm(). */
	lockdep_assert_held(&mm->mmap_lock);
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr)
			return -EFAULT;
		if (npu_vma_written_back(vma))
			return -EOPNOTSUPP;
		addr = vma->vm_end;
	}
	return 0;
}

/*
 * Pin up to @n pages at @addr; the number pinned or an errno. The mappings
 * are checked and pinned under one hold of mmap_lock, so none can change
 * between the two. Pin for writing whenever the mapping allows it, even for
 * a read-only BO: a read-only pin of memory never written would pin the
 * shared zero page (or a page later replaced on copy-on-write), and the
 * device would not see what the CPU writes afterwards. Read-only mappings,
 * and written-back ones, pin read-only (for a read-only BO only).
 */
static long npu_pin_chunk(struct mm_struct *mm, u64 addr, unsigned long n,
			  bool readonly, struct page **pages)
{
	unsigned int gup = FOLL_LONGTERM | FOLL_WRITE;
	long ret;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = npu_check_vmas(mm, addr, addr + ((u64)n << PAGE_SHIFT));
	if (ret == -EOPNOTSUPP && readonly)
		gup = FOLL_LONGTERM;
	else if (ret)
		goto out;
	ret = npu_pin_user_pages(addr, n, gup, pages);
	if (ret == -EFAULT && readonly && (gup & FOLL_WRITE))
		ret = npu_pin_user_pages(addr, n, FOLL_LONGTERM, pages);
out:
	mmap_read_unlock(mm);
	return ret;
}

static int npu_pin_range(u64 start, unsigned long npages, bool readonly,
			 struct page **pages)
{
	unsigned long done = 0;
	long ret;

	while (done < npages) {
		ret = npu_pin_chunk(current->mm, start + ((u64)done << PAGE_SHIFT),
				    min_t(unsigned long, npages - done, SZ_256K),
				    readonly, pages + done);
		if (ret <= 0) {
			if (done)
				unpin_user_pages(pages, done);
			return ret ? ret : -EFAULT;
		}
		done += ret;
		if (fatal_signal_pending(current)) {
			unpin_user_pages(pages, done);
			return -EINTR;
		}
	}
	return 0;
}

int npu_ioctl_bo_userptr(struct drm_device *drm, void *data,
			 struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct drm_npu_bo_userptr *args = data;
	bool readonly = args->flags & DRM_NPU_BO_USERPTR_READONLY;
	unsigned long npages;
	struct npu_bo *bo;
	u64 end;
	int ret;

	if (args->flags & ~DRM_NPU_BO_USERPTR_READONLY) {
		drm_dbg(drm, "userptr: unknown flags 0x%x\n", args->flags);
		return -EINVAL;
	}
	if (!args->size || args->size > NPU_BO_MAX_SIZE ||
	    !PAGE_ALIGNED(args->user_ptr) || !PAGE_ALIGNED(args->size) ||
	    check_add_overflow(args->user_ptr, args->size, &end)) {
		drm_dbg(drm, "userptr: bad range 0x%llx+0x%llx\n",
			args->user_ptr, args->size);
		return -EINVAL;
	}
	if (!access_ok(u64_to_user_ptr(args->user_ptr), args->size))
		return -EFAULT;
	if (!npu_fits_in_ram(args->size))
		return -ENOMEM;
	npages = args->size >> PAGE_SHIFT;

	/* The limit first: a limited user gets nothing allocated at all. */
	ret = npu_memlock_charge(current->mm, npages);
	if (ret) {
		drm_dbg(drm, "userptr: RLIMIT_MEMLOCK exceeded\n");
		return ret;
	}
	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	bo->pages = kvmalloc_array(npages, sizeof(*bo->pages), GFP_KERNEL);
	if (!bo->pages) {
		ret = -ENOMEM;
		goto err_free_bo;
	}
	/* Watching first: a change while pinning makes the BO stale. */
	ret = mmu_interval_notifier_insert(&bo->notifier, current->mm,
					   args->user_ptr, args->size,
					   &npu_userptr_notifier_ops);
	if (ret)
		goto err_free_pages;
	bo->notifier_seq = mmu_interval_read_begin(&bo->notifier);
	ret = npu_pin_range(args->user_ptr, npages, readonly, bo->pages);
	if (ret)
		goto err_remove;

	bo->ndev = ndev;
	bo->kind = DRM_NPU_BO_USERPTR;
	bo->readonly = readonly;
	bo->npages = npages;
	npu_bo_map_alias(bo);
	bo->mm = current->mm;
	mmgrab(bo->mm);
	bo->shmem.base.funcs = &npu_userptr_bo_funcs;
	drm_gem_private_object_init(drm, &bo->shmem.base, args->size);
	npu_bo_account(ndev);

	ret = drm_gem_handle_create(file, &bo->shmem.base, &args->handle);
	drm_gem_object_put(&bo->shmem.base);
	return ret;

err_remove:
	mmu_interval_notifier_remove(&bo->notifier);
err_free_pages:
	kvfree(bo->pages);
err_free_bo:
	kfree(bo);
err_uncharge:
	atomic64_sub(npages, &current->mm->pinned_vm);
	return ret;
}

static void npu_imported_bo_free(struct drm_gem_object *obj)
{
	struct npu_bo *bo = to_npu_bo(obj);

	npu_bo_unaccount(bo->ndev);
	drm_gem_object_release(obj);
	dma_buf_put(bo->import);
	kfree(bo);
}

static const struct drm_gem_object_funcs npu_imported_bo_funcs = {
	.free = npu_imported_bo_free,
	.open = npu_bo_open,
	.close = npu_bo_close,
};

/*
 * PRIME import. A dma-buf exported by an npu BO is imported without a DMA
 * mapping: on the same device it is the same BO; on another npu device a
 * new BO shares the exporter's pinned pages, kept alive by a reference on
 * the dma-buf. Foreign dma-bufs are refused: the emulated device reaches
 * memory through struct pages, which other exporters need not have.
 */
struct drm_gem_object *npu_gem_prime_import(struct drm_device *drm,
					    struct dma_buf *dma_buf)
{
	struct drm_gem_object *src_obj = dma_buf->priv;
	struct npu_bo *src, *bo;

	if (dma_buf->owner != THIS_MODULE ||
	    src_obj->funcs != &npu_shmem_bo_funcs) {
		drm_dbg(drm, "import: dma-buf was not exported by npu\n");
		return ERR_PTR(-EOPNOTSUPP);
	}
	if (src_obj->dev == drm) {
		drm_gem_object_get(src_obj);
		return src_obj;
	}
	src = to_npu_bo(src_obj);

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	bo->ndev = to_npu_device(drm);
	bo->kind = DRM_NPU_BO_IMPORTED;
	bo->pages = src->pages;
	bo->npages = src->npages;
	bo->alias = src->alias;
	get_dma_buf(dma_buf);
	bo->import = dma_buf;
	bo->shmem.base.funcs = &npu_imported_bo_funcs;
	drm_gem_private_object_init(drm, &bo->shmem.base, src_obj->size);
	npu_bo_account(bo->ndev);
	return &bo->shmem.base;
}

/* Looks up a handle of @file and checks it is one of ours. */
struct npu_bo *npu_bo_lookup(struct drm_file *file, u32 handle)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(file, handle);

	return obj ? to_npu_bo(obj) : NULL;
}

int npu_ioctl_bo_info(struct drm_device *drm, void *data,
		      struct drm_file *file)
{
	struct drm_npu_bo_info *args = data;
	struct npu_bo *bo;
	int ret = 0;

	if (args->flags) {
		drm_dbg(drm, "bo_info: flags 0x%x not zero\n", args->flags);
		return -EINVAL;
	}
	bo = npu_bo_lookup(file, args->handle);
	if (!bo) {
		drm_dbg(drm, "bo_info: no handle %u\n", args->handle);
		return -ENOENT;
	}

	args->size = bo->shmem.base.size;
	args->kind = bo->kind;
	args->status = 0;
	if (bo->kind == DRM_NPU_BO_USERPTR &&
	    mmu_interval_check_retry(&bo->notifier, bo->notifier_seq))
		args->status |= DRM_NPU_BO_STATUS_STALE;
	args->mmap_offset = 0;
	if (bo->kind == DRM_NPU_BO_DEVICE || bo->kind == DRM_NPU_BO_HOST) {
		ret = drm_gem_create_mmap_offset(&bo->shmem.base);
		if (!ret)
			args->mmap_offset =
				drm_vma_node_offset_addr(&bo->shmem.base.vma_node);
	}
	drm_gem_object_put(&bo->shmem.base);
	return ret;
}

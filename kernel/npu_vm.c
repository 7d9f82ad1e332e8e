// SPDX-License-Identifier: GPL-2.0-only
/*
 * Device address spaces: each context (open file) maps BO ranges at device
 * addresses it chooses (VM_BIND style), and the emulated MMU translates
 * those addresses to pages, faulting on unmapped addresses and on writes to
 * read-only mappings. The engines reach memory only through
 * npu_vm_translate().
 */

#include <linux/highmem.h>
#include <linux/ktime.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_print.h>

#include "npu_drv.h"
#include "npu_gem.h"
#include "npu_vm.h"

/* Largest single DRM_IOCTL_NPU_VM_ACCESS transfer. */
#define NPU_VM_ACCESS_MAX	SZ_64M

struct npu_vm *npu_vm_create(struct npu_device *ndev)
{
	struct npu_vm *vm = kzalloc(sizeof(*vm), GFP_KERNEL);

	if (!vm)
		return NULL;
	kref_init(&vm->refcount);
	init_rwsem(&vm->lock);
	vm->va_start = ndev->props.va_start;
	vm->va_end = ndev->props.va_end;
	drm_mm_init(&vm->mm, ndev->props.va_start,
		    ndev->props.va_end - ndev->props.va_start);
	return vm;
}

/*
 * Takes @map out of the address space; the caller frees it with
 * npu_mappings_free() once @vm->lock is released. The engines take
 * @vm->lock in the fence-signalling path, and dropping a BO reference may
 * free the BO, which waits (a userptr BO removes its MMU interval notifier)
 * or takes locks held around allocation (a shmem BO's unpin takes the
 * pages lock): none of that may happen under @vm->lock.
 */
static void npu_mapping_unlink(struct npu_vm *vm, struct npu_mapping *map,
			       struct list_head *gone)
{
	lockdep_assert_held_write(&vm->lock);

	drm_mm_remove_node(&map->node);
	vm->mapping_count--;
	vm->mapped_bytes -= map->node.size;
	list_add_tail(&map->gone, gone);
}

/* Frees the mappings npu_mapping_unlink() collected, outside @vm->lock. */
static void npu_mappings_free(struct list_head *gone)
{
	struct npu_mapping *map, *next;

	list_for_each_entry_safe(map, next, gone, gone) {
		list_del(&map->gone);
		drm_gem_object_put(&map->bo->shmem.base);
		atomic_dec(&npu_live.mappings);
		kfree(map);
	}
}

static void npu_vm_release(struct kref *kref)
{
	struct npu_vm *vm = container_of(kref, struct npu_vm, refcount);
	struct drm_mm_node *node, *next;
	LIST_HEAD(gone);

	down_write(&vm->lock);
	drm_mm_for_each_node_safe(node, next, &vm->mm)
		npu_mapping_unlink(vm, container_of(node, struct npu_mapping,
						    node), &gone);
	up_write(&vm->lock);
	npu_mappings_free(&gone);
	drm_mm_takedown(&vm->mm);
	kfree(vm);
}

void npu_vm_put(struct npu_vm *vm)
{
	kref_put(&vm->refcount, npu_vm_release);
}

/*
 * The mapping holding @addr, or NULL. Addresses outside the space are
 * refused before drm_mm sees them: its iterator reports its own head node
 * for them, which is not a mapping.
 */
static struct npu_mapping *npu_vm_find(struct npu_vm *vm, u64 addr)
{
	struct drm_mm_node *node;

	lockdep_assert_held(&vm->lock);

	if (addr < vm->va_start || addr >= vm->va_end)
		return NULL;
	drm_mm_for_each_node_in_range(node, &vm->mm, addr, addr + 1) {
		if (addr - node->start < node->size)
			return container_of(node, struct npu_mapping, node);
		break;
	}
	return NULL;
}

/**
 * npu_vm_translate - the emulated MMU: device address to page
 * @vm: the context's address space; its lock must be held, and the page
 *      is only valid while it is.
 * @tlb: the mapping of the last translation (a one-entry TLB), or NULL;
 *       set to the mapping of @addr. Only valid while @vm->lock stays held:
 *       clear it whenever the lock is dropped.
 * @addr: device address.
 * @write: the access writes.
 *
 * Sequential accesses stay in one mapping for many pages: with @tlb they
 * skip the address-space lookup.
 *
 * Return: the page holding @addr, ERR_PTR(-ENXIO) if @addr is not mapped,
 * ERR_PTR(-EACCES) for a write through a read-only mapping.
 */
struct page *npu_vm_translate(struct npu_vm *vm, struct npu_mapping **tlb, u64 addr,
			      bool write)
{
	struct npu_mapping *map = *tlb;
	u64 offset;

	lockdep_assert_held(&vm->lock);

	/* Below the mapping's start the difference wraps and misses too. */
	if (!map || addr - map->node.start >= map->node.size) {
		map = npu_vm_find(vm, addr);
		if (!map)
			return ERR_PTR(-ENXIO);
		*tlb = map;
	}
	if (write && map->readonly)
		return ERR_PTR(-EACCES);
	offset = map->bo_offset + (addr - map->node.start);
	return map->bo->pages[offset >> PAGE_SHIFT];
}

/**
 * npu_vm_rw - copy between a kernel buffer and device memory through the MMU
 * @vm: the address space.
 * @addr: device address.
 * @buf: kernel buffer of @len bytes.
 * @len: bytes to copy.
 * @write: copy @buf to the device, else from it.
 * @fault_addr: set to the first faulting device address on a fault.
 *
 * Return: 0, or the fault (-ENXIO, -EACCES); nothing past it is copied.
 */
int npu_vm_rw(struct npu_vm *vm, u64 addr, void *buf, size_t len,
	      bool write, u64 *fault_addr)
{
	struct npu_mapping *tlb = NULL;
	int ret = 0;

	down_read(&vm->lock);
	while (len) {
		size_t in_page = offset_in_page(addr);
		size_t n = min_t(size_t, len, PAGE_SIZE - in_page);
		struct page *page = npu_vm_translate(vm, &tlb, addr, write);
		void *va;

		if (IS_ERR(page)) {
			*fault_addr = addr;
			ret = PTR_ERR(page);
			break;
		}
		va = kmap_local_page(page);
		if (write)
			memcpy(va + in_page, buf, n);
		else
			memcpy(buf, va + in_page, n);
		kunmap_local(va);
		addr += n;
		buf += n;
		len -= n;
	}
	up_read(&vm->lock);
	return ret;
}

/* Pages translated between two looks at the clock in long transfers. */
#define NPU_VM_PAGES_PER_SLICE	64

/* A device fault is -EFAULT to the job; the MMU says which kind. */
static int npu_vm_fault(struct page *page, u64 addr, u64 *fault_addr)
{
	*fault_addr = addr;
	return PTR_ERR(page) == -EACCES ? -EACCES : -EFAULT;
}

/*
 * An emulator (QEMU TCG, where this driver is tested) translates guest
 * addresses through a software TLB indexed by page number, at least 64
 * entries. Two pages whose numbers are equal modulo its size evict each
 * other on every access: a copy between them ran 10-15x slower, so whole
 * buffer pairs 8 MiB apart copied at 0.3 GB/s instead of 3.
 *
 * Every BO is also mapped with vmap (npu_bo.alias, unless that failed), so
 * a colliding pair is copied through a second address of one of its pages:
 * two addresses of one page that differ modulo 64 pages cannot both
 * collide with a third, whatever the TLB's size.
 */
static bool npu_pages_collide(const void *a, const void *b)
{
	return !((((unsigned long)a ^ (unsigned long)b) >> PAGE_SHIFT) & 63);
}

/* The vmap address of @addr in @map's BO, or NULL. */
static u8 *npu_mapping_alias(const struct npu_mapping *map, u64 addr)
{
	u8 *alias = map->bo->alias;

	return alias ? alias + map->bo_offset + (addr - map->node.start) : NULL;
}

/*
 * Whether a copy from @s to @d, both contiguous, never has a source and a
 * destination page that collide: their page numbers differ by q, and by
 * q + 1 too unless both start at the same offset in a page.
 */
static bool npu_run_is_clear(const u8 *d, const u8 *s)
{
	unsigned long q = ((unsigned long)d - (unsigned long)s) >> PAGE_SHIFT;

	if (offset_in_page(d) == offset_in_page(s))
		return q & 63;
	return (q & 63) && ((q + 1) & 63);
}

/*
 * The engine's data mover. Under QEMU TCG "rep movsq" moves 3.1-3.5 GB/s
 * where the kernel's memcpy (rep movsb, with ERMS) moves 0.46 GB/s over
 * long ranges.
 */
static void npu_copy_run(u8 *d, const u8 *s, size_t n)
{
	size_t q = n / 8;

	asm volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(q) : : "memory");
	memcpy(d, s, n % 8);
}

/* Bytes from @src and @dst, at most @max, that stay in both mappings. */
static u64 npu_run_length(const struct npu_mapping *smap, u64 src,
			  const struct npu_mapping *dmap, u64 dst, u64 max)
{
	u64 s_left = smap->node.start + smap->node.size - src;
	u64 d_left = dmap->node.start + dmap->node.size - dst;

	return min3(max, s_left, d_left);
}

static void npu_copy_in_page(u8 *d, const u8 *s, u8 *d_alias,
			     const u8 *s_alias, size_t n,
			     struct npu_copy_unit *unit)
{
	if (npu_pages_collide(d, s)) {
		if (d_alias && !npu_pages_collide(d_alias, s)) {
			d = d_alias;
			atomic64_inc(&unit->aliased);
		} else if (s_alias && !npu_pages_collide(d, s_alias)) {
			s = s_alias;
			atomic64_inc(&unit->aliased);
		}
	}
	npu_copy_run(d, s, n);
}

/**
 * npu_vm_copy_locked - copy device to device with @vm->lock held for reading
 * @vm: the address space.
 * @stlb: the source's last mapping (NULL to start), kept between calls
 *        while the lock stays held.
 * @dtlb: the same for the destination.
 * @dst: destination device address.
 * @src: source device address.
 * @len: bytes; the caller bounds it (the lock is held throughout).
 * @unit: the copy engine's counters.
 * @fault_addr: the faulting address on -EFAULT/-EACCES.
 *
 * Runs in the fence-signalling path: no allocation.
 */
int npu_vm_copy_locked(struct npu_vm *vm, struct npu_mapping **stlb,
		       struct npu_mapping **dtlb, u64 dst, u64 src, u64 len,
		       struct npu_copy_unit *unit, u64 *fault_addr)
{
	lockdep_assert_held_read(&vm->lock);
	while (len) {
		size_t n = min_t(u64, len, PAGE_SIZE - offset_in_page(src));
		struct page *sp, *dp;
		u8 *s, *d, *sa, *da;

		n = min_t(size_t, n, PAGE_SIZE - offset_in_page(dst));
		sp = npu_vm_translate(vm, stlb, src, false);
		if (IS_ERR(sp))
			return npu_vm_fault(sp, src, fault_addr);
		dp = npu_vm_translate(vm, dtlb, dst, true);
		if (IS_ERR(dp))
			return npu_vm_fault(dp, dst, fault_addr);
		sa = npu_mapping_alias(*stlb, src);
		da = npu_mapping_alias(*dtlb, dst);
		if (sa && da && npu_run_is_clear(da, sa)) {
			/* Both contiguous in their aliases: one move. */
			n = npu_run_length(*stlb, src, *dtlb, dst, len);
			npu_copy_run(da, sa, n);
			atomic64_add(DIV_ROUND_UP(n, PAGE_SIZE), &unit->aliased);
		} else {
			s = kmap_local_page(sp);
			d = kmap_local_page(dp);
			npu_copy_in_page(d + offset_in_page(dst),
					 s + offset_in_page(src), da, sa, n,
					 unit);
			kunmap_local(d);
			kunmap_local(s);
		}
		src += n;
		dst += n;
		len -= n;
	}
	return 0;
}

/**
 * npu_vm_copy - copy engine: device to device through the MMU
 * @vm: the address space.
 * @dst: destination device address.
 * @src: source device address.
 * @len: bytes.
 * @deadline_ns: ktime_get_ns() past which the copy stops with -ETIMEDOUT.
 * @unit: the copy engine's counters.
 * @fault_addr: the faulting address on -EFAULT/-EACCES.
 *
 * Runs in the fence-signalling path: no allocation. The lock is dropped
 * between slices so binds get a turn.
 */
int npu_vm_copy(struct npu_vm *vm, u64 dst, u64 src, u64 len, u64 deadline_ns,
		struct npu_copy_unit *unit, u64 *fault_addr)
{
	while (len) {
		u64 n = min_t(u64, len, NPU_VM_SLICE_BYTES);
		struct npu_mapping *stlb = NULL, *dtlb = NULL;
		int ret;

		if (ktime_get_coarse_ns() > deadline_ns)
			return -ETIMEDOUT;
		down_read(&vm->lock);
		ret = npu_vm_copy_locked(vm, &stlb, &dtlb, dst, src, n, unit,
					 fault_addr);
		up_read(&vm->lock);
		if (ret)
			return ret;
		src += n;
		dst += n;
		len -= n;
	}
	return 0;
}

/**
 * npu_vm_fill - fill @len bytes at @dst with a @width-byte pattern
 * @vm: the address space.
 * @dst: destination device address, a multiple of @width.
 * @len: bytes, a multiple of @width.
 * @value: the pattern, little-endian.
 * @width: 1, 2 or 4.
 * @deadline_ns: as for npu_vm_copy().
 * @fault_addr: as for npu_vm_copy().
 */
int npu_vm_fill(struct npu_vm *vm, u64 dst, u64 len, u32 value, u32 width,
		u64 deadline_ns, u64 *fault_addr)
{
	while (len) {
		unsigned int slice = NPU_VM_PAGES_PER_SLICE;
		struct npu_mapping *tlb = NULL;

		if (ktime_get_coarse_ns() > deadline_ns)
			return -ETIMEDOUT;
		down_read(&vm->lock);
		while (len && slice--) {
			size_t n = min_t(u64, len, PAGE_SIZE - offset_in_page(dst));
			struct page *dp = npu_vm_translate(vm, &tlb, dst, true);
			u8 *d;

			if (IS_ERR(dp)) {
				up_read(&vm->lock);
				return npu_vm_fault(dp, dst, fault_addr);
			}
			d = (u8 *)kmap_local_page(dp) + offset_in_page(dst);
			/*
			 * dst and len are multiples of width, so each piece of
			 * a page is whole elements (a byte loop took seconds
			 * for 64 MiB under KASAN, past the job timeout).
			 */
			if (width == 1)
				memset(d, value, n);
			else if (width == 2)
				memset16((u16 *)d, (__force u16)cpu_to_le16(value), n / 2);
			else
				memset32((u32 *)d, (__force u32)cpu_to_le32(value), n / 4);
			kunmap_local(d);
			dst += n;
			len -= n;
		}
		up_read(&vm->lock);
	}
	return 0;
}

static int npu_vm_map(struct npu_file *nfile, struct drm_npu_vm_bind *args)
{
	struct drm_device *drm = &nfile->ndev->drm;
	struct npu_vm *vm = nfile->vm;
	struct npu_mapping *map;
	struct npu_bo *bo;
	bool full;
	u64 end;
	int ret;

	if (args->flags & ~DRM_NPU_VM_READONLY)
		return -EINVAL;
	if (!PAGE_ALIGNED(args->bo_offset))
		return -EINVAL;

	bo = npu_bo_lookup(nfile->file, args->handle);
	if (!bo) {
		drm_dbg(drm, "vm_bind: no handle %u\n", args->handle);
		return -ENOENT;
	}
	if (check_add_overflow(args->bo_offset, args->size, &end) ||
	    end > bo->shmem.base.size) {
		drm_dbg(drm, "vm_bind: range past the BO\n");
		ret = -EINVAL;
		goto err_put;
	}
	if (bo->readonly && !(args->flags & DRM_NPU_VM_READONLY)) {
		drm_dbg(drm, "vm_bind: writable mapping of a read-only BO\n");
		ret = -EACCES;
		goto err_put;
	}

	/* Kernel memory user space asks for: its memory cgroup pays. */
	map = kzalloc(sizeof(*map), GFP_KERNEL_ACCOUNT);
	if (!map) {
		ret = -ENOMEM;
		goto err_put;
	}
	map->bo = bo;
	map->bo_offset = args->bo_offset;
	map->readonly = args->flags & DRM_NPU_VM_READONLY;
	map->node.start = args->addr;
	map->node.size = args->size;

	/*
	 * Each mapping is kernel memory: a context has at most
	 * DRM_NPU_MAX_MAPPINGS (one page BO mapped again and again would
	 * otherwise fill the machine).
	 */
	down_write(&vm->lock);
	full = vm->mapping_count >= DRM_NPU_MAX_MAPPINGS;
	ret = full ? -ENOSPC : drm_mm_reserve_node(&vm->mm, &map->node);
	if (!ret) {
		vm->mapping_count++;
		vm->mapped_bytes += args->size;
		atomic_inc(&npu_live.mappings);
	}
	up_write(&vm->lock);
	if (ret) {
		if (full) {
			drm_dbg(drm, "vm_bind: %u mappings already\n",
				DRM_NPU_MAX_MAPPINGS);
		} else {
			drm_dbg(drm, "vm_bind: 0x%llx+0x%llx overlaps a mapping\n",
				args->addr, args->size);
			ret = -EEXIST;
		}
		kfree(map);
		goto err_put;
	}
	/* The mapping keeps the lookup's reference. */
	return 0;

err_put:
	drm_gem_object_put(&bo->shmem.base);
	return ret;
}

static int npu_vm_unmap(struct npu_file *nfile, struct drm_npu_vm_bind *args)
{
	struct npu_vm *vm = nfile->vm;
	struct npu_mapping *map;
	LIST_HEAD(gone);
	int ret = -ENOENT;

	if (args->flags || args->handle || args->bo_offset)
		return -EINVAL;

	down_write(&vm->lock);
	map = npu_vm_find(vm, args->addr);
	if (map && map->node.start == args->addr &&
	    map->node.size == args->size) {
		npu_mapping_unlink(vm, map, &gone);
		ret = 0;
	}
	up_write(&vm->lock);
	npu_mappings_free(&gone);
	if (ret)
		drm_dbg(&nfile->ndev->drm, "vm_unbind: no mapping 0x%llx+0x%llx\n",
			args->addr, args->size);
	return ret;
}

int npu_ioctl_vm_bind(struct drm_device *drm, void *data,
		      struct drm_file *file)
{
	struct npu_device *ndev = to_npu_device(drm);
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_vm_bind *args = data;
	u64 end;

	if (args->pad || !args->size || !PAGE_ALIGNED(args->addr) ||
	    !PAGE_ALIGNED(args->size) ||
	    check_add_overflow(args->addr, args->size, &end) ||
	    args->addr < ndev->props.va_start || end > ndev->props.va_end) {
		drm_dbg(drm, "vm_bind: bad range 0x%llx+0x%llx or pad\n",
			args->addr, args->size);
		return -EINVAL;
	}

	switch (args->op) {
	case DRM_NPU_VM_MAP:
		return npu_vm_map(nfile, args);
	case DRM_NPU_VM_UNMAP:
		return npu_vm_unmap(nfile, args);
	default:
		drm_dbg(drm, "vm_bind: unknown op %u\n", args->op);
		return -EINVAL;
	}
}

int npu_ioctl_vm_access(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct npu_file *nfile = file->driver_priv;
	struct drm_npu_vm_access *args = data;
	bool write = args->flags & DRM_NPU_VM_ACCESS_WRITE;
	void __user *user = u64_to_user_ptr(args->user_ptr);
	u64 addr = args->addr;
	u64 left = args->size;
	void *bounce;
	int ret = 0;

	args->fault_addr = 0;
	if ((args->flags & ~DRM_NPU_VM_ACCESS_WRITE) || args->pad ||
	    !args->size || args->size > NPU_VM_ACCESS_MAX) {
		drm_dbg(drm, "vm_access: bad flags, pad or size\n");
		return -EINVAL;
	}

	bounce = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;

	/* User copies stay outside the VM lock: they can fault and sleep. */
	while (left) {
		size_t n = min_t(u64, left, PAGE_SIZE);

		if (write && copy_from_user(bounce, user, n)) {
			ret = -EFAULT;
			break;
		}
		ret = npu_vm_rw(nfile->vm, addr, bounce, n, write,
				&args->fault_addr);
		if (ret)
			break;
		if (!write && copy_to_user(user, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		addr += n;
		user += n;
		left -= n;
		if (signal_pending(current)) {
			ret = -EINTR;
			break;
		}
	}
	kfree(bounce);
	return ret;
}

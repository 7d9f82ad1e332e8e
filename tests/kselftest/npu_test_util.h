/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers shared by the npu kselftests: finding the npu render nodes,
 * issuing DRM_IOCTL_NPU_QUERY, thin wrappers of the memory ioctls (BOs,
 * VM_BIND, VM_ACCESS, CONTEXT_INFO, PRIME), and test data patterns.
 *
 * Every helper returns 0 (or a count) on success and a negative errno on
 * failure, and never prints: the tests decide what a failure means.
 */
#ifndef __NPU_TEST_UTIL_H__
#define __NPU_TEST_UTIL_H__

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include <npu_drm.h>

#define NPU_DRI_DIR		"/dev/dri"
#define NPU_ACCEL_DIR		"/dev/accel"
#define NPU_DRIVER_NAME		"npu"
#define NPU_NUM_DEVICES_PARAM	"/sys/module/npu/parameters/num_devices"

/* More than the driver's limit of 16, so that a surplus shows up. */
#define NPU_MAX_NODES		64

/**
 * struct npu_node - one open npu node
 * @path: device node path, e.g. /dev/accel/accel0 or /dev/dri/renderD128.
 * @fd: open file descriptor (O_RDWR | O_CLOEXEC).
 * @device_index: what DRM_NPU_QUERY_DEVICE_INFO reports as device_index.
 */
struct npu_node {
	char path[64];
	int fd;
	__u32 device_index;
};

/**
 * npu_query() - issue DRM_IOCTL_NPU_QUERY
 * @fd: an npu DRM file.
 * @query: enum drm_npu_query_id.
 * @data: output buffer (may be NULL).
 * @size: in: bytes at @data; out: the size the kernel wrote back. May be
 *        NULL to pass a size of 0.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_query(int fd, __u32 query, void *data, __u32 *size)
{
	struct drm_npu_query q = {
		.query = query,
		.data_ptr = (__u64)(uintptr_t)data,
		.size = size ? *size : 0,
	};

	if (ioctl(fd, DRM_IOCTL_NPU_QUERY, &q))
		return -errno;
	if (size)
		*size = q.size;
	return 0;
}

/**
 * npu_query_device_info() - read the whole struct drm_npu_device_info
 * @fd: an npu DRM file.
 * @info: filled on success.
 *
 * Return: 0, a negative errno, or -EPROTO when the answer has an
 * unexpected size.
 */
static inline int npu_query_device_info(int fd,
					struct drm_npu_device_info *info)
{
	__u32 size = sizeof(*info);
	int ret;

	memset(info, 0, sizeof(*info));
	ret = npu_query(fd, DRM_NPU_QUERY_DEVICE_INFO, info, &size);
	if (ret)
		return ret;
	return size == sizeof(*info) ? 0 : -EPROTO;
}

/**
 * npu_fd_is_npu() - tell whether a DRM file belongs to the npu driver
 * @fd: an open DRM file.
 *
 * Return: true if DRM_IOCTL_VERSION names the driver "npu".
 */
static inline bool npu_fd_is_npu(int fd)
{
	char name[sizeof(NPU_DRIVER_NAME) + 1] = "";
	struct drm_version v = {
		.name_len = sizeof(name) - 1,
		.name = name,
	};

	if (ioctl(fd, DRM_IOCTL_VERSION, &v))
		return false;
	return v.name_len == strlen(NPU_DRIVER_NAME) &&
	       !memcmp(name, NPU_DRIVER_NAME, v.name_len);
}

static inline int npu_node_cmp(const void *a, const void *b)
{
	const struct npu_node *na = a, *nb = b;

	if (na->device_index != nb->device_index)
		return na->device_index < nb->device_index ? -1 : 1;
	return strcmp(na->path, nb->path);
}

/**
 * npu_close_nodes() - close what npu_open_nodes() opened
 * @nodes: the array.
 * @count: number of valid entries.
 */
static inline void npu_close_nodes(struct npu_node *nodes, int count)
{
	int i;

	for (i = 0; i < count; i++) {
		if (nodes[i].fd >= 0)
			close(nodes[i].fd);
		nodes[i].fd = -1;
	}
}

/*
 * npu_scan_dir() - open the npu nodes among @dir_path's entries named @prefix*
 *
 * Appends to @nodes from *@count on; a node that cannot be opened sets
 * *@open_err (the first such error). Return: 0 or a negative errno.
 */
static inline int npu_scan_dir(const char *dir_path, const char *prefix,
			       struct npu_node *nodes, int max, int *count,
			       int *open_err)
{
	struct drm_npu_device_info info;
	struct dirent *de;
	int ret = 0;
	DIR *dir;
	int fd;

	dir = opendir(dir_path);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;

	while ((de = readdir(dir))) {
		struct npu_node *node;

		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		if (*count == max) {
			ret = -E2BIG;
			break;
		}
		node = &nodes[*count];
		ret = snprintf(node->path, sizeof(node->path), "%s/%s",
			       dir_path, de->d_name);
		if (ret < 0 || (size_t)ret >= sizeof(node->path)) {
			ret = -ENAMETOOLONG;
			break;
		}
		ret = 0;

		fd = open(node->path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			/* Maybe another driver's node; fail only if none. */
			if (!*open_err)
				*open_err = -errno;
			continue;
		}
		if (!npu_fd_is_npu(fd)) {
			close(fd);
			continue;
		}
		ret = npu_query_device_info(fd, &info);
		if (ret) {
			close(fd);
			break;
		}
		node->fd = fd;
		node->device_index = info.device_index;
		(*count)++;
	}
	closedir(dir);
	return ret;
}

/**
 * npu_open_nodes() - open every npu node
 * @nodes: array of at least @max entries, filled sorted by device_index.
 * @max: capacity of @nodes.
 *
 * Looks at every compute accelerator node (/dev/accel/accel*, kernels with
 * drivers/accel) and render node (/dev/dri/renderD*, before), keeps those
 * whose driver is "npu" and reads their device index with
 * DRM_NPU_QUERY_DEVICE_INFO.
 *
 * Return: the number of nodes opened (0 if there is none), or a negative
 * errno; on error nothing stays open. A node that cannot be opened is
 * skipped; its error is returned only when no npu node was found.
 */
static inline int npu_open_nodes(struct npu_node *nodes, int max)
{
	int open_err = 0;
	int count = 0;
	int ret;

	ret = npu_scan_dir(NPU_ACCEL_DIR, "accel", nodes, max, &count,
			   &open_err);
	if (!ret)
		ret = npu_scan_dir(NPU_DRI_DIR, "renderD", nodes, max, &count,
				   &open_err);
	if (ret) {
		npu_close_nodes(nodes, count);
		return ret;
	}
	if (!count)
		return open_err;
	qsort(nodes, count, sizeof(nodes[0]), npu_node_cmp);
	return count;
}

/**
 * npu_read_uint_file() - read one unsigned decimal number from a file
 * @path: e.g. NPU_NUM_DEVICES_PARAM.
 * @val: the number.
 *
 * Return: 0 or a negative errno (-EINVAL if the file holds no number).
 */
static inline int npu_read_uint_file(const char *path, unsigned int *val)
{
	FILE *f;
	int ret;

	f = fopen(path, "re");
	if (!f)
		return -errno;
	ret = fscanf(f, "%u", val) == 1 ? 0 : -EINVAL;
	fclose(f);
	return ret;
}

/**
 * npu_ioctl() - issue an ioctl
 * @fd: the file.
 * @request: the ioctl number.
 * @arg: its argument.
 *
 * Return: 0 or the negative errno of the failure.
 */
static inline int npu_ioctl(int fd, unsigned long request, void *arg)
{
	return ioctl(fd, request, arg) ? -errno : 0;
}

/**
 * npu_query_memory() - read struct drm_npu_memory_info (DRM_NPU_QUERY_MEMORY)
 * @fd: an npu DRM file.
 * @info: filled on success.
 *
 * Return: 0, a negative errno, or -EPROTO when the answer has an
 * unexpected size.
 */
static inline int npu_query_memory(int fd, struct drm_npu_memory_info *info)
{
	__u32 size = sizeof(*info);
	int ret;

	memset(info, 0, sizeof(*info));
	ret = npu_query(fd, DRM_NPU_QUERY_MEMORY, info, &size);
	if (ret)
		return ret;
	return size == sizeof(*info) ? 0 : -EPROTO;
}

/**
 * npu_bo_create() - DRM_IOCTL_NPU_BO_CREATE
 * @fd: an npu DRM file.
 * @size: bytes.
 * @kind: enum drm_npu_bo_kind.
 * @handle: the new handle on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_bo_create(int fd, __u64 size, __u32 kind, __u32 *handle)
{
	struct drm_npu_bo_create args = {
		.size = size,
		.kind = kind,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_NPU_BO_CREATE, &args);
	if (!ret)
		*handle = args.handle;
	return ret;
}

/**
 * npu_bo_userptr() - DRM_IOCTL_NPU_BO_FROM_USERPTR
 * @fd: an npu DRM file.
 * @ptr: start of the user range.
 * @size: its length.
 * @flags: DRM_NPU_BO_USERPTR_* bits.
 * @handle: the new handle on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_bo_userptr(int fd, const void *ptr, __u64 size,
				 __u32 flags, __u32 *handle)
{
	struct drm_npu_bo_userptr args = {
		.user_ptr = (__u64)(uintptr_t)ptr,
		.size = size,
		.flags = flags,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_NPU_BO_FROM_USERPTR, &args);
	if (!ret)
		*handle = args.handle;
	return ret;
}

/**
 * npu_bo_info() - DRM_IOCTL_NPU_BO_INFO
 * @fd: an npu DRM file.
 * @handle: the BO.
 * @info: filled on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_bo_info(int fd, __u32 handle,
			      struct drm_npu_bo_info *info)
{
	memset(info, 0, sizeof(*info));
	info->handle = handle;
	return npu_ioctl(fd, DRM_IOCTL_NPU_BO_INFO, info);
}

/**
 * npu_gem_close() - DRM_IOCTL_GEM_CLOSE
 * @fd: a DRM file.
 * @handle: the handle to close.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_gem_close(int fd, __u32 handle)
{
	struct drm_gem_close args = {
		.handle = handle,
	};

	return npu_ioctl(fd, DRM_IOCTL_GEM_CLOSE, &args);
}

/**
 * npu_vm_map() - DRM_IOCTL_NPU_VM_BIND with DRM_NPU_VM_MAP
 * @fd: an npu DRM file.
 * @handle: the BO.
 * @addr: device address.
 * @size: bytes.
 * @bo_offset: offset into the BO.
 * @flags: DRM_NPU_VM_* bits.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_vm_map(int fd, __u32 handle, __u64 addr, __u64 size,
			     __u64 bo_offset, __u32 flags)
{
	struct drm_npu_vm_bind args = {
		.op = DRM_NPU_VM_MAP,
		.flags = flags,
		.handle = handle,
		.addr = addr,
		.size = size,
		.bo_offset = bo_offset,
	};

	return npu_ioctl(fd, DRM_IOCTL_NPU_VM_BIND, &args);
}

/**
 * npu_vm_unmap() - DRM_IOCTL_NPU_VM_BIND with DRM_NPU_VM_UNMAP
 * @fd: an npu DRM file.
 * @addr: device address of the mapping.
 * @size: its size.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_vm_unmap(int fd, __u64 addr, __u64 size)
{
	struct drm_npu_vm_bind args = {
		.op = DRM_NPU_VM_UNMAP,
		.addr = addr,
		.size = size,
	};

	return npu_ioctl(fd, DRM_IOCTL_NPU_VM_BIND, &args);
}

/**
 * npu_vm_access() - DRM_IOCTL_NPU_VM_ACCESS
 * @fd: an npu DRM file.
 * @addr: device address.
 * @buf: user buffer of @size bytes.
 * @size: bytes to copy.
 * @write: copy @buf to the device, else the device to @buf.
 * @fault_addr: if not NULL, what the kernel reported as the fault address.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_vm_access(int fd, __u64 addr, const void *buf,
				__u64 size, bool write, __u64 *fault_addr)
{
	struct drm_npu_vm_access args = {
		.addr = addr,
		.size = size,
		.user_ptr = (__u64)(uintptr_t)buf,
		.flags = write ? DRM_NPU_VM_ACCESS_WRITE : 0,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_NPU_VM_ACCESS, &args);
	if (fault_addr)
		*fault_addr = args.fault_addr;
	return ret;
}

/* Read @size bytes at device address @addr into @buf. */
static inline int npu_vm_read(int fd, __u64 addr, void *buf, __u64 size)
{
	return npu_vm_access(fd, addr, buf, size, false, NULL);
}

/* Write @size bytes of @buf to device address @addr. */
static inline int npu_vm_write(int fd, __u64 addr, const void *buf,
			       __u64 size)
{
	return npu_vm_access(fd, addr, buf, size, true, NULL);
}

/**
 * npu_context_info() - DRM_IOCTL_NPU_CONTEXT_INFO
 * @fd: an npu DRM file.
 * @info: filled on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_context_info(int fd, struct drm_npu_context_info *info)
{
	memset(info, 0, sizeof(*info));
	return npu_ioctl(fd, DRM_IOCTL_NPU_CONTEXT_INFO, info);
}

/**
 * npu_prime_export() - DRM_IOCTL_PRIME_HANDLE_TO_FD
 * @fd: a DRM file.
 * @handle: the BO.
 * @flags: DRM_CLOEXEC, DRM_RDWR.
 * @dmabuf_fd: the dma-buf file descriptor on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_prime_export(int fd, __u32 handle, __u32 flags,
				   int *dmabuf_fd)
{
	struct drm_prime_handle args = {
		.handle = handle,
		.flags = flags,
		.fd = -1,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &args);
	if (!ret)
		*dmabuf_fd = args.fd;
	return ret;
}

/**
 * npu_prime_import() - DRM_IOCTL_PRIME_FD_TO_HANDLE
 * @fd: a DRM file.
 * @dmabuf_fd: the dma-buf.
 * @handle: the handle in @fd on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_prime_import(int fd, int dmabuf_fd, __u32 *handle)
{
	struct drm_prime_handle args = {
		.fd = dmabuf_fd,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &args);
	if (!ret)
		*handle = args.handle;
	return ret;
}

/**
 * npu_debugfs_dir() - the npu driver's debugfs folder for a node
 * @fd: an open npu device file.
 * @buf: receives it: /sys/kernel/debug/dri/MINOR for a render node,
 *       /sys/kernel/debug/accel/DEVICE (the device's name, 6.12) or
 *       .../accel/MINOR for an accel node: the one holding npu_engines.
 * @len: size of @buf.
 *
 * Return: 0 or a negative errno (-ENOTTY if @fd is not a character device,
 * -ENOENT if no such folder is visible).
 */
static inline int npu_debugfs_dir(int fd, char *buf, size_t len)
{
	char link[PATH_MAX], dev[PATH_MAX], probe[PATH_MAX + 16];
	const char *root, *name;
	struct stat st;
	ssize_t n;
	int i, ret;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISCHR(st.st_mode))
		return -ENOTTY;
	/* DRM's major is 226; accel nodes have their own (ACCEL_MAJOR). */
	root = major(st.st_rdev) == 226 ? "/sys/kernel/debug/dri" :
					   "/sys/kernel/debug/accel";
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u/device",
		 major(st.st_rdev), minor(st.st_rdev));
	n = readlink(link, dev, sizeof(dev) - 1);
	dev[n > 0 ? n : 0] = '\0';
	name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;

	for (i = 0; i < 2; i++) {
		if (i == 0)
			ret = snprintf(buf, len, "%s/%u", root,
				       minor(st.st_rdev));
		else if (*name)
			ret = snprintf(buf, len, "%s/%s", root, name);
		else
			break;
		if (ret < 0 || (size_t)ret >= len)
			return -ENAMETOOLONG;
		snprintf(probe, sizeof(probe), "%s/npu_engines", buf);
		if (!access(probe, F_OK))
			return 0;
	}
	return -ENOENT;
}

/**
 * npu_bo_mmap() - map a whole DEVICE or HOST BO read-write through @fd
 * @fd: the npu DRM file holding @handle.
 * @handle: the BO.
 * @len: bytes to map from the BO's start.
 *
 * Return: the mapping, or MAP_FAILED (errno set, EINVAL when the BO has no
 * mmap offset).
 */
static inline void *npu_bo_mmap(int fd, __u32 handle, size_t len)
{
	struct drm_npu_bo_info info;
	int ret;

	ret = npu_bo_info(fd, handle, &info);
	if (!ret && !info.mmap_offset)
		ret = -EINVAL;
	if (ret) {
		errno = -ret;
		return MAP_FAILED;
	}
	return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    info.mmap_offset);
}

/* Byte @i of the test pattern @seed: differs per seed and per offset. */
static inline unsigned char npu_pattern_byte(unsigned int seed, size_t i)
{
	return (unsigned char)(seed * 131 + i * 7 + (i >> 11) + 1);
}

/* Fill @len bytes at @buf with the pattern @seed from its offset 0. */
static inline void npu_fill_pattern(void *buf, size_t len, unsigned int seed)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = npu_pattern_byte(seed, i);
}

/* Whether @buf holds @len bytes of pattern @seed from its offset @from. */
static inline bool npu_has_pattern(const void *buf, size_t len,
				   unsigned int seed, size_t from)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != npu_pattern_byte(seed, from + i))
			return false;
	}
	return true;
}

/* Whether all @len bytes at @buf are @v. */
static inline bool npu_all_bytes(const void *buf, size_t len, unsigned char v)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != v)
			return false;
	}
	return true;
}

/* Drop capability @cap from every set of this process. */
static inline int npu_drop_cap(int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int i = CAP_TO_INDEX(cap);
	__u32 mask = CAP_TO_MASK(cap);

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	data[i].effective &= ~mask;
	data[i].permitted &= ~mask;
	data[i].inheritable &= ~mask;
	if (syscall(SYS_capset, &hdr, data))
		return -errno;
	return 0;
}

/**
 * npu_wait_child() - wait for a child process to end
 * @pid: the child.
 *
 * Return: its exit status, 128 + the number of the signal that killed it,
 * or -1 if waiting failed.
 */
static inline int npu_wait_child(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

/*
 * Queues, submission and fences (npu_submit_test, npu_latency_test):
 * thin wrappers of QUEUE_CREATE/DESTROY/STATUS/RESET and SUBMIT, a command
 * buffer builder, and the core syncobj ioctls the tests wait with.
 */

#include <time.h>

#define NPU_JOB_TIMEOUT_PARAM	"/sys/module/npu/parameters/job_timeout_ms"
/* What the module uses when job_timeout_ms is not given. */
#define NPU_JOB_TIMEOUT_DEFAULT_MS	2000

/**
 * npu_job_timeout_ms() - the job timeout the module was loaded with
 *
 * Return: /sys/module/npu/parameters/job_timeout_ms, or
 * NPU_JOB_TIMEOUT_DEFAULT_MS when it cannot be read.
 */
static inline unsigned int npu_job_timeout_ms(void)
{
	unsigned int ms;

	if (npu_read_uint_file(NPU_JOB_TIMEOUT_PARAM, &ms) || !ms)
		return NPU_JOB_TIMEOUT_DEFAULT_MS;
	return ms;
}

/* CLOCK_MONOTONIC in nanoseconds: the clock of syncobj wait deadlines. */
static inline __s64 npu_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__s64)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/**
 * npu_queue_create() - DRM_IOCTL_NPU_QUEUE_CREATE
 * @fd: an npu DRM file.
 * @engine_class: enum drm_npu_engine_class.
 * @priority: enum drm_npu_priority.
 * @q: on success the kernel's answer (queue_id, syncobj_handle,
 *     engine_id); may not be NULL.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_queue_create(int fd, __u32 engine_class, __u32 priority,
				   struct drm_npu_queue_create *q)
{
	memset(q, 0, sizeof(*q));
	q->engine_class = engine_class;
	q->priority = priority;
	return npu_ioctl(fd, DRM_IOCTL_NPU_QUEUE_CREATE, q);
}

/* DRM_IOCTL_NPU_QUEUE_DESTROY. Return: 0 or a negative errno. */
static inline int npu_queue_destroy(int fd, __u32 queue_id)
{
	struct drm_npu_queue_destroy args = {
		.queue_id = queue_id,
	};

	return npu_ioctl(fd, DRM_IOCTL_NPU_QUEUE_DESTROY, &args);
}

/* DRM_IOCTL_NPU_QUEUE_RESET. Return: 0 or a negative errno. */
static inline int npu_queue_reset(int fd, __u32 queue_id)
{
	struct drm_npu_queue_destroy args = {
		.queue_id = queue_id,
	};

	return npu_ioctl(fd, DRM_IOCTL_NPU_QUEUE_RESET, &args);
}

/**
 * npu_queue_status() - DRM_IOCTL_NPU_QUEUE_STATUS
 * @fd: an npu DRM file.
 * @queue_id: the queue.
 * @st: filled on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_queue_status(int fd, __u32 queue_id,
				   struct drm_npu_queue_status *st)
{
	memset(st, 0, sizeof(*st));
	st->queue_id = queue_id;
	return npu_ioctl(fd, DRM_IOCTL_NPU_QUEUE_STATUS, st);
}

/**
 * struct npu_cmdbuf - a command buffer being built
 * @data: the caller's buffer, 8-byte aligned.
 * @size: bytes of packets written so far.
 * @cap: bytes available at @data.
 * @overflow: a packet did not fit (and was dropped).
 */
struct npu_cmdbuf {
	void *data;
	__u32 size;
	__u32 cap;
	bool overflow;
};

static inline void npu_cmdbuf_init(struct npu_cmdbuf *cb, void *data,
				   __u32 cap)
{
	cb->data = data;
	cb->size = 0;
	cb->cap = cap;
	cb->overflow = false;
}

/**
 * npu_cmdbuf_add() - append a zeroed packet with its header set
 * @cb: the command buffer.
 * @opcode: enum drm_npu_opcode.
 * @size: the packet's size, header included.
 *
 * Return: the packet, or NULL (and @cb->overflow set) if it does not fit.
 */
static inline void *npu_cmdbuf_add(struct npu_cmdbuf *cb, __u32 opcode,
				   __u32 size)
{
	struct drm_npu_pkt_header *hdr;

	if (cb->overflow || size > cb->cap - cb->size) {
		cb->overflow = true;
		return NULL;
	}
	hdr = (void *)((char *)cb->data + cb->size);
	memset(hdr, 0, size);
	hdr->opcode = opcode;
	hdr->size = size;
	cb->size += size;
	return hdr;
}

static inline void npu_emit_nop(struct npu_cmdbuf *cb)
{
	npu_cmdbuf_add(cb, DRM_NPU_PKT_NOP, sizeof(struct drm_npu_pkt_header));
}

static inline void npu_emit_copy(struct npu_cmdbuf *cb, __u64 src, __u64 dst,
				 __u64 size)
{
	struct drm_npu_pkt_copy *p;

	p = npu_cmdbuf_add(cb, DRM_NPU_PKT_COPY, sizeof(*p));
	if (!p)
		return;
	p->src = src;
	p->dst = dst;
	p->size = size;
}

/* A strided copy of @ndim dimensions: sizes and byte strides, outermost first. */
static inline void npu_emit_copy_strided(struct npu_cmdbuf *cb, __u64 src,
					 __u64 dst, __u32 ndim, __u32 elem_size,
					 const __u64 *sizes,
					 const __u64 *src_strides,
					 const __u64 *dst_strides)
{
	struct drm_npu_pkt_copy_strided *p;
	__u32 d;

	p = npu_cmdbuf_add(cb, DRM_NPU_PKT_COPY_STRIDED, sizeof(*p));
	if (!p)
		return;
	p->src = src;
	p->dst = dst;
	p->ndim = ndim;
	p->elem_size = elem_size;
	for (d = 0; d < ndim && d < DRM_NPU_COPY_MAX_DIMS; d++) {
		p->sizes[d] = sizes[d];
		p->src_strides[d] = src_strides[d];
		p->dst_strides[d] = dst_strides[d];
	}
}

static inline void npu_emit_fill(struct npu_cmdbuf *cb, __u64 dst, __u64 size,
				 __u32 value, __u32 width)
{
	struct drm_npu_pkt_fill *p;

	p = npu_cmdbuf_add(cb, DRM_NPU_PKT_FILL, sizeof(*p));
	if (!p)
		return;
	p->dst = dst;
	p->size = size;
	p->value = value;
	p->width = width;
}

static inline void npu_emit_timestamp(struct npu_cmdbuf *cb, __u64 dst)
{
	struct drm_npu_pkt_timestamp *p;

	p = npu_cmdbuf_add(cb, DRM_NPU_PKT_TIMESTAMP, sizeof(*p));
	if (p)
		p->dst = dst;
}

static inline void npu_emit_write_value(struct npu_cmdbuf *cb, __u64 dst,
					__u64 value)
{
	struct drm_npu_pkt_write_value *p;

	p = npu_cmdbuf_add(cb, DRM_NPU_PKT_WRITE_VALUE, sizeof(*p));
	if (!p)
		return;
	p->dst = dst;
	p->value = value;
}

static inline void npu_emit_wait_value(struct npu_cmdbuf *cb, __u64 addr,
				       __u64 value, __u64 mask, __u32 cmp)
{
	struct drm_npu_pkt_wait_value *p;

	p = npu_cmdbuf_add(cb, DRM_NPU_PKT_WAIT_VALUE, sizeof(*p));
	if (!p)
		return;
	p->addr = addr;
	p->value = value;
	p->mask = mask;
	p->cmp = cmp;
}

/**
 * npu_submit_flags() - DRM_IOCTL_NPU_SUBMIT
 * @fd: an npu DRM file.
 * @queue_id: the queue.
 * @flags: DRM_NPU_SUBMIT_* bits.
 * @cmds: the packets.
 * @size: their size in bytes.
 * @fences: @nfences in-fences (may be NULL when @nfences is 0).
 * @nfences: how many.
 * @point: if not NULL, the job's timeline point on success.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_submit_flags(int fd, __u32 queue_id, __u32 flags,
				   const void *cmds, __u32 size,
				   const struct drm_npu_fence *fences,
				   __u32 nfences, __u64 *point)
{
	struct drm_npu_submit args = {
		.queue_id = queue_id,
		.flags = flags,
		.cmds_ptr = (__u64)(uintptr_t)cmds,
		.cmds_size = size,
		.in_fence_count = nfences,
		.in_fences_ptr = (__u64)(uintptr_t)fences,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_NPU_SUBMIT, &args);
	if (!ret && point)
		*point = args.point;
	return ret;
}

/* npu_submit_flags() without flags. */
static inline int npu_submit(int fd, __u32 queue_id, const void *cmds,
			     __u32 size, const struct drm_npu_fence *fences,
			     __u32 nfences, __u64 *point)
{
	return npu_submit_flags(fd, queue_id, 0, cmds, size, fences, nfences,
				point);
}

/* npu_submit() of a built command buffer; -E2BIG if it overflowed. */
static inline int npu_submit_cmdbuf(int fd, __u32 queue_id,
				    const struct npu_cmdbuf *cb,
				    const struct drm_npu_fence *fences,
				    __u32 nfences, __u64 *point)
{
	if (cb->overflow)
		return -E2BIG;
	return npu_submit(fd, queue_id, cb->data, cb->size, fences, nfences,
			  point);
}

/* DRM_IOCTL_SYNCOBJ_CREATE. Return: 0 or a negative errno. */
static inline int npu_syncobj_create(int fd, __u32 flags, __u32 *handle)
{
	struct drm_syncobj_create args = {
		.flags = flags,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_CREATE, &args);
	if (!ret)
		*handle = args.handle;
	return ret;
}

/* DRM_IOCTL_SYNCOBJ_DESTROY. Return: 0 or a negative errno. */
static inline int npu_syncobj_destroy(int fd, __u32 handle)
{
	struct drm_syncobj_destroy args = {
		.handle = handle,
	};

	return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_DESTROY, &args);
}

/**
 * npu_syncobj_wait() - DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT
 * @fd: a DRM file.
 * @handles: @count syncobjs.
 * @points: their points (0 for binary syncobjs).
 * @count: how many.
 * @deadline_ns: absolute CLOCK_MONOTONIC deadline.
 * @flags: DRM_SYNCOBJ_WAIT_FLAGS_* bits.
 *
 * Return: 0, -ETIME when the deadline passed, or another negative errno.
 */
static inline int npu_syncobj_wait(int fd, const __u32 *handles,
				   const __u64 *points, __u32 count,
				   __s64 deadline_ns, __u32 flags)
{
	struct drm_syncobj_timeline_wait args = {
		.handles = (__u64)(uintptr_t)handles,
		.points = (__u64)(uintptr_t)points,
		.timeout_nsec = deadline_ns,
		.count_handles = count,
		.flags = flags,
	};

	return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &args);
}

/* Wait for one point until @deadline_ns (absolute CLOCK_MONOTONIC). */
static inline int npu_syncobj_wait_point(int fd, __u32 handle, __u64 point,
					 __s64 deadline_ns)
{
	return npu_syncobj_wait(fd, &handle, &point, 1, deadline_ns, 0);
}

/**
 * npu_syncobj_query() - DRM_IOCTL_SYNCOBJ_QUERY of one syncobj
 * @fd: a DRM file.
 * @handle: the syncobj.
 * @flags: 0 (last signalled point) or
 *         DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED.
 * @point: the answer.
 *
 * Return: 0 or a negative errno.
 */
static inline int npu_syncobj_query(int fd, __u32 handle, __u32 flags,
				    __u64 *point)
{
	struct drm_syncobj_timeline_array args = {
		.handles = (__u64)(uintptr_t)&handle,
		.points = (__u64)(uintptr_t)point,
		.count_handles = 1,
		.flags = flags,
	};

	return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_QUERY, &args);
}

/* DRM_IOCTL_SYNCOBJ_TRANSFER: point @src_point of @src to @dst_point of @dst. */
static inline int npu_syncobj_transfer(int fd, __u32 dst, __u64 dst_point,
				       __u32 src, __u64 src_point, __u32 flags)
{
	struct drm_syncobj_transfer args = {
		.src_handle = src,
		.dst_handle = dst,
		.src_point = src_point,
		.dst_point = dst_point,
		.flags = flags,
	};

	return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_TRANSFER, &args);
}

/* The fence of binary syncobj @handle as a new sync_file in @sync_fd. */
static inline int npu_syncobj_export_sync_file(int fd, __u32 handle,
					       int *sync_fd)
{
	struct drm_syncobj_handle args = {
		.handle = handle,
		.flags = DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE,
		.fd = -1,
	};
	int ret;

	ret = npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &args);
	if (!ret)
		*sync_fd = args.fd;
	return ret;
}

/* Replace the fence of syncobj @handle by the one of sync_file @sync_fd. */
static inline int npu_syncobj_import_sync_file(int fd, __u32 handle,
					       int sync_fd)
{
	struct drm_syncobj_handle args = {
		.handle = handle,
		.flags = DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE,
		.fd = sync_fd,
	};

	return npu_ioctl(fd, DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &args);
}

#endif /* __NPU_TEST_UTIL_H__ */

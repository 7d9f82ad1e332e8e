/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers shared by the npu kselftests: finding the npu render nodes and
 * issuing DRM_IOCTL_NPU_QUERY.
 *
 * Every helper returns 0 (or a count) on success and a negative errno on
 * failure, and never prints: the tests decide what a failure means.
 */
#ifndef __NPU_TEST_UTIL_H__
#define __NPU_TEST_UTIL_H__

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <npu_drm.h>

#define NPU_DRI_DIR		"/dev/dri"
#define NPU_DRIVER_NAME		"npu"
#define NPU_NUM_DEVICES_PARAM	"/sys/module/npu/parameters/num_devices"

/* More than the driver's limit of 16, so that a surplus shows up. */
#define NPU_MAX_NODES		64

/**
 * struct npu_node - one open npu render node
 * @path: device node path, e.g. /dev/dri/renderD128.
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

/**
 * npu_open_nodes() - open every npu render node
 * @nodes: array of at least @max entries, filled sorted by device_index.
 * @max: capacity of @nodes.
 *
 * Looks at every /dev/dri/renderD* node, keeps those whose driver is "npu"
 * and reads their device index with DRM_NPU_QUERY_DEVICE_INFO.
 *
 * Return: the number of nodes opened (0 if there is none), or a negative
 * errno; on error nothing stays open. A node that cannot be opened is
 * skipped; its error is returned only when no npu node was found.
 */
static inline int npu_open_nodes(struct npu_node *nodes, int max)
{
	struct drm_npu_device_info info;
	struct dirent *de;
	int open_err = 0;
	int count = 0;
	int ret = 0;
	DIR *dir;
	int fd;

	dir = opendir(NPU_DRI_DIR);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;

	while ((de = readdir(dir))) {
		struct npu_node *node;

		if (strncmp(de->d_name, "renderD", strlen("renderD")))
			continue;
		if (count == max) {
			ret = -E2BIG;
			break;
		}
		node = &nodes[count];
		ret = snprintf(node->path, sizeof(node->path), "%s/%s",
			       NPU_DRI_DIR, de->d_name);
		if (ret < 0 || (size_t)ret >= sizeof(node->path)) {
			ret = -ENAMETOOLONG;
			break;
		}
		ret = 0;

		fd = open(node->path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			/* Maybe another driver's node; fail only if none. */
			if (!open_err)
				open_err = -errno;
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
		count++;
	}
	closedir(dir);

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

#endif /* __NPU_TEST_UTIL_H__ */

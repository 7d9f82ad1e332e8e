/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers of npu_submit_test and npu_latency_test on top of
 * npu_test_util.h: waiting for points, reading a job's own fence status
 * through a sync_file, and the debugfs files of a device (fault injection,
 * engine statistics, clients and memory use).
 *
 * Like npu_test_util.h, every helper returns 0 (or a value) on success and
 * a negative errno on failure, and never prints.
 */
#ifndef __NPU_SUBMIT_UTIL_H__
#define __NPU_SUBMIT_UTIL_H__

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/sync_file.h>

#include "npu_test_util.h"

#define NSUB_NSEC_PER_MSEC	1000000LL

/* Absolute CLOCK_MONOTONIC deadline @ms milliseconds from now. */
static inline __s64 nsub_deadline_ms(long long ms)
{
	return npu_monotonic_ns() + ms * NSUB_NSEC_PER_MSEC;
}

/**
 * nsub_wait() - wait for a point of a timeline syncobj
 * @fd: the DRM file holding @handle.
 * @handle: the syncobj.
 * @point: the point.
 * @ms: how long to wait at most.
 *
 * Return: 0 once the point signalled, -ETIME after @ms, or another negative
 * errno.
 */
static inline int nsub_wait(int fd, __u32 handle, __u64 point, long long ms)
{
	return npu_syncobj_wait_point(fd, handle, point, nsub_deadline_ms(ms));
}

/*
 * Whether a point has signalled, without waiting: 1 if it has, 0 if not,
 * or a negative errno. A deadline already past makes the wait a poll.
 */
static inline int nsub_signalled(int fd, __u32 handle, __u64 point)
{
	int ret;

	ret = npu_syncobj_wait_point(fd, handle, point, 1);
	if (ret == -ETIME)
		return 0;
	return ret ? ret : 1;
}

/**
 * nsub_export_point() - a sync_file of one point of a timeline syncobj
 * @fd: the DRM file holding @handle.
 * @handle: the timeline syncobj.
 * @point: the point; it must have a fence.
 * @sync_fd: the new sync_file on success.
 *
 * The point is transferred into a temporary binary syncobj, which is
 * exported with DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE.
 *
 * Return: 0 or a negative errno.
 */
static inline int nsub_export_point(int fd, __u32 handle, __u64 point,
				    int *sync_fd)
{
	__u32 bin;
	int ret;

	ret = npu_syncobj_create(fd, 0, &bin);
	if (ret)
		return ret;
	ret = npu_syncobj_transfer(fd, bin, 0, handle, point, 0);
	if (!ret)
		ret = npu_syncobj_export_sync_file(fd, bin, sync_fd);
	npu_syncobj_destroy(fd, bin);
	return ret;
}

/**
 * nsub_import_sync_file() - a new binary syncobj holding a sync_file's fence
 * @fd: a DRM file.
 * @sync_fd: the sync_file.
 * @handle: the new syncobj on success (wait for it at point 0).
 *
 * Return: 0 or a negative errno.
 */
static inline int nsub_import_sync_file(int fd, int sync_fd, __u32 *handle)
{
	int ret;

	ret = npu_syncobj_create(fd, 0, handle);
	if (ret)
		return ret;
	ret = npu_syncobj_import_sync_file(fd, *handle, sync_fd);
	if (ret)
		npu_syncobj_destroy(fd, *handle);
	return ret;
}

#define NSUB_MAX_SYNC_FENCES	16

/**
 * nsub_sync_file_status() - status of the first fence in a sync_file
 * @sync_fd: the sync_file.
 * @status: 0 while the fence is pending, 1 once it signalled, or the
 *          negative errno it signalled with.
 *
 * A sync_file of a timeline point holds a chain node; the first fence it
 * unwraps to is the job's own, whose error is the job's.
 *
 * Return: 0 or a negative errno (-ENODATA if the sync_file is empty).
 */
static inline int nsub_sync_file_status(int sync_fd, int *status)
{
	struct sync_fence_info fences[NSUB_MAX_SYNC_FENCES];
	struct sync_file_info info;

	memset(&info, 0, sizeof(info));
	if (ioctl(sync_fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	if (!info.num_fences)
		return -ENODATA;
	if (info.num_fences > NSUB_MAX_SYNC_FENCES)
		return -E2BIG;
	memset(fences, 0, sizeof(fences));
	info.sync_fence_info = (__u64)(uintptr_t)fences;
	if (ioctl(sync_fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	*status = fences[0].status;
	return 0;
}

/* ---- debugfs ------------------------------------------------------- */

/**
 * nsub_dbg_write() - write a number to a debugfs file of a device
 * @dir: the device's debugfs folder (npu_debugfs_dir()).
 * @name: e.g. "inject_hang".
 * @val: the number.
 *
 * Return: 0 or a negative errno.
 */
static inline int nsub_dbg_write(const char *dir, const char *name,
				 long long val)
{
	char path[128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	if (fprintf(f, "%lld\n", val) < 0)
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

/* Read the number in a debugfs file of a device. */
static inline int nsub_dbg_read(const char *dir, const char *name,
				long long *val)
{
	char path[128];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ret = fscanf(f, "%lld", val) == 1 ? 0 : -EPROTO;
	fclose(f);
	return ret;
}

/**
 * struct nsub_engine_stats - one line of debugfs npu_engines
 * @queues: queues feeding the engine.
 * @jobs: jobs it ran (with or without error).
 * @busy_ns: time it spent running them.
 * @resets: resets after a fault or a timeout.
 * @direct: jobs that ran inside SUBMIT, in the submitter's context.
 * @aliased: pages a copy engine copied through BOs' second mappings.
 */
struct nsub_engine_stats {
	long long queues;
	long long jobs;
	long long busy_ns;
	long long resets;
	long long direct;
	long long aliased;
};

/* The statistics of engine @engine_id from debugfs npu_engines. */
static inline int nsub_engine_stats(const char *dir, __u32 engine_id,
				    struct nsub_engine_stats *st)
{
	char path[128], line[256], name[32];
	int ret = -ENOENT;
	unsigned int id;
	FILE *f;

	snprintf(path, sizeof(path), "%s/npu_engines", dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line,
			   "engine %u %31s queues %lld jobs %lld busy_ns %lld resets %lld direct %lld aliased %lld",
			   &id, name, &st->queues, &st->jobs, &st->busy_ns,
			   &st->resets, &st->direct, &st->aliased) != 8)
			continue;
		if (id == engine_id) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* The "used:" bytes of debugfs npu_memory. */
static inline int nsub_mem_used(const char *dir, long long *used)
{
	char path[128], line[128];
	int ret = -EPROTO;
	FILE *f;

	snprintf(path, sizeof(path), "%s/npu_memory", dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "used: %lld", used) == 1) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/*
 * Whether debugfs npu_clients lists a context of process @pid: 1 if it
 * does, 0 if not, or a negative errno.
 */
static inline int nsub_client_listed(const char *dir, pid_t pid)
{
	char path[128], line[512], want[48];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/npu_clients", dir);
	snprintf(want, sizeof(want), "context pid %d ", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want)))
			found = 1;
	}
	fclose(f);
	return found;
}

/*
 * The jobs submitted and not yet completed on the queues of process @pid's
 * contexts, from the "depth" of their queue lines in debugfs npu_clients.
 */
static inline int nsub_client_depth(const char *dir, pid_t pid,
				    long long *depth)
{
	char path[128], line[512], want[48];
	bool mine = false;
	long long d;
	FILE *f;

	snprintf(path, sizeof(path), "%s/npu_clients", dir);
	snprintf(want, sizeof(want), "context pid %d ", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*depth = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "context pid ", strlen("context pid ")))
			mine = !strncmp(line, want, strlen(want));
		else if (mine &&
			 sscanf(line,
				" queue %*u engine %*u submitted %*u completed %*d depth %lld",
				&d) == 1)
			*depth += d;
	}
	fclose(f);
	return 0;
}

/* ---- statistics ---------------------------------------------------- */

static inline int nsub_cmp_s64(const void *a, const void *b)
{
	__s64 x = *(const __s64 *)a, y = *(const __s64 *)b;

	return x < y ? -1 : x > y;
}

/* The median of @n samples; sorts @v. */
static inline __s64 nsub_median(__s64 *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), nsub_cmp_s64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* __NPU_SUBMIT_UTIL_H__ */

// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_stats_test - what an operator's tools read: DRM_NPU_QUERY_ENGINE_STATS
 * and DRM_NPU_QUERY_DEVICE_STATS (uAPI 1.2), and each file's fdinfo (the
 * DRM client usage statistics).
 *
 * The queries' size negotiation and argument checks, that the counters
 * move with the work submitted (jobs, engine time, a fault counted with its
 * reset and the queue's error until QUEUE_RESET), and that fdinfo names the
 * driver, a unique client, the context's memory and its engine time.
 *
 * Needs npu.ko loaded (tools/vmrun); the fault test needs root (debugfs).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_submit_util.h"

#define MAX_ENGINES	32
#define DEV_VA		0x200000000ull
#define DEV_SIZE	(4u << 20)

static int stats_query(int fd, __u32 query, void *data, __u32 *size)
{
	struct drm_npu_query q = {
		.query = query,
		.data_ptr = (__u64)(uintptr_t)data,
		.size = *size,
	};
	int ret = ioctl(fd, DRM_IOCTL_NPU_QUERY, &q) ? -errno : 0;

	*size = q.size;
	return ret;
}

/* The engines (@info) and their stats (@st), @n of each; 0 or an errno. */
static int all_engine_stats(int fd, struct drm_npu_engine_info *info,
			    struct drm_npu_engine_stats *st, __u32 *n)
{
	__u32 size = MAX_ENGINES * sizeof(*info);
	int ret;

	ret = stats_query(fd, DRM_NPU_QUERY_ENGINES, info, &size);
	if (ret)
		return ret;
	*n = size / sizeof(*info);
	size = *n * sizeof(*st);
	return stats_query(fd, DRM_NPU_QUERY_ENGINE_STATS, st, &size);
}

/* The engine stats of the first copy engine, or -ENOENT. */
static int copy_engine_stats(int fd, struct drm_npu_engine_stats *out)
{
	struct drm_npu_engine_info info[MAX_ENGINES];
	struct drm_npu_engine_stats st[MAX_ENGINES];
	__u32 n, i;
	int ret;

	ret = all_engine_stats(fd, info, st, &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		if (info[i].engine_class == DRM_NPU_ENGINE_COPY) {
			*out = st[i];
			return 0;
		}
	}
	return -ENOENT;
}

static int device_stats(int fd, struct drm_npu_device_stats *out)
{
	__u32 size = sizeof(*out);

	memset(out, 0, sizeof(*out));
	return stats_query(fd, DRM_NPU_QUERY_DEVICE_STATS, out, &size);
}

/* The value of "key:\t<number>" in this process's fdinfo of @fd, or -1. */
static long long fdinfo_value(int fd, const char *key)
{
	char path[64], line[256];
	size_t len = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, len) && line[len] == ':') {
			v = strtoll(line + len + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static bool fdinfo_has(int fd, const char *text)
{
	char path[64], line[256];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

FIXTURE(stats) {
	struct npu_node nodes[NPU_MAX_NODES];
	int count;
	int fd;
	__u32 bo;
	struct drm_npu_queue_create q;
};

FIXTURE_SETUP(stats)
{
	self->count = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	if (self->count <= 0)
		SKIP(return, "no npu node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	ASSERT_EQ(0, npu_bo_create(self->fd, DEV_SIZE, DRM_NPU_BO_DEVICE, &self->bo));
	ASSERT_EQ(0, npu_vm_map(self->fd, self->bo, DEV_VA, DEV_SIZE, 0, 0));
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &self->q));
}

FIXTURE_TEARDOWN(stats)
{
	if (self->count > 0)
		npu_close_nodes(self->nodes, self->count);
}

/* One fill of the whole BO on the fixture's queue, waited for. */
static int fill_job(FIXTURE_DATA(stats) *self, __u64 *point)
{
	__u64 buf[16];
	struct npu_cmdbuf cb;
	int ret;

	npu_cmdbuf_init(&cb, buf, sizeof(buf));
	npu_emit_fill(&cb, DEV_VA, DEV_SIZE, 0x5a, 1);
	ret = npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL, 0, point);
	if (ret)
		return ret;
	return nsub_wait(self->fd, self->q.syncobj_handle, *point, 10000);
}

TEST_F(stats, engine_stats_size_negotiation_and_bad_sizes)
{
	struct drm_npu_engine_stats st[MAX_ENGINES];
	struct drm_npu_device_info info;
	__u32 size = 0;

	ASSERT_EQ(0, npu_query_device_info(self->fd, &info));
	ASSERT_EQ(0, stats_query(self->fd, DRM_NPU_QUERY_ENGINE_STATS, NULL, &size));
	EXPECT_EQ(info.num_engines * sizeof(st[0]), size);
	size = sizeof(st[0]) - 1;
	EXPECT_EQ(-EINVAL, stats_query(self->fd, DRM_NPU_QUERY_ENGINE_STATS, st, &size));
	size = sizeof(st[0]) + 4;
	EXPECT_EQ(-EINVAL, stats_query(self->fd, DRM_NPU_QUERY_ENGINE_STATS, st, &size));
	/* One element fits: the first engine's, and the full size back. */
	memset(st, 0xa5, sizeof(st));
	size = sizeof(st[0]);
	ASSERT_EQ(0, stats_query(self->fd, DRM_NPU_QUERY_ENGINE_STATS, st, &size));
	EXPECT_EQ(info.num_engines * sizeof(st[0]), size);
	EXPECT_EQ(0, (int)st[0].engine_id);
	EXPECT_NE(0u, st[0].sample_ns);
	EXPECT_EQ(0xa5a5a5a5ull, (unsigned long long)st[1].engine_id) TH_LOG("wrote past the buffer");
	size = 0;
	ASSERT_EQ(0, stats_query(self->fd, DRM_NPU_QUERY_DEVICE_STATS, NULL, &size));
	EXPECT_EQ(sizeof(struct drm_npu_device_stats), size);
	size = sizeof(struct drm_npu_device_stats) - 8;
	EXPECT_EQ(-EINVAL, stats_query(self->fd, DRM_NPU_QUERY_DEVICE_STATS, st, &size));
	EXPECT_EQ((__u32)DRM_NPU_API_VERSION, info.api_version);
}

TEST_F(stats, counters_move_with_the_work)
{
	struct drm_npu_engine_stats before, after;
	struct drm_npu_device_stats d0, d1;
	__u64 point = 0;
	int i;

	ASSERT_EQ(0, copy_engine_stats(self->fd, &before));
	ASSERT_EQ(0, device_stats(self->fd, &d0));
	EXPECT_GE((int)d0.contexts, 1);
	EXPECT_GE((int)d0.queues, 1);
	for (i = 0; i < 8; i++)
		ASSERT_EQ(0, fill_job(self, &point));
	ASSERT_EQ(0, device_stats(self->fd, &d1));
	EXPECT_GE(d1.jobs_completed, d0.jobs_completed + 8);
	EXPECT_GT(d1.sample_ns, d0.sample_ns);
	/* The queue's engine ran them: some copy engine moved. */
	ASSERT_EQ(0, copy_engine_stats(self->fd, &after));
	EXPECT_GT(after.sample_ns, before.sample_ns);
	EXPECT_LE(after.busy_ns - before.busy_ns, after.sample_ns - before.sample_ns);
	EXPECT_EQ(d1.faults, d0.faults);
}

TEST_F(stats, a_fault_is_counted_with_its_reset_and_the_queue_error)
{
	struct drm_npu_device_stats d0, d1, d2;
	char dir[96];
	__u64 point = 0;
	int ret;

	if (geteuid() != 0 || npu_debugfs_dir(self->fd, dir, sizeof(dir)))
		SKIP(return, "needs root and the driver's debugfs (fault injection)");
	ASSERT_EQ(0, device_stats(self->fd, &d0));
	ASSERT_EQ(0, nsub_dbg_write(dir, "inject_fault", 1));
	ret = fill_job(self, &point);
	nsub_dbg_write(dir, "inject_fault", 0);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, device_stats(self->fd, &d1));
	EXPECT_EQ(d0.faults + 1, d1.faults);
	EXPECT_EQ(d0.resets + 1, d1.resets);
	EXPECT_EQ(d0.timeouts, d1.timeouts);
	EXPECT_GT(d1.last_reset_ns, d0.sample_ns);
	EXPECT_LE(d1.last_reset_ns, d1.sample_ns);
	EXPECT_EQ(d0.queues_in_error + 1, d1.queues_in_error);
	ASSERT_EQ(0, npu_queue_reset(self->fd, self->q.queue_id));
	ASSERT_EQ(0, device_stats(self->fd, &d2));
	EXPECT_EQ(d0.queues_in_error, d2.queues_in_error);

	/* A queue that goes while in error leaves the count too. */
	ASSERT_EQ(0, nsub_dbg_write(dir, "inject_fault", 1));
	ret = fill_job(self, &point);
	nsub_dbg_write(dir, "inject_fault", 0);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, device_stats(self->fd, &d1));
	EXPECT_EQ(d0.queues_in_error + 1, d1.queues_in_error);
	ASSERT_EQ(0, npu_queue_destroy(self->fd, self->q.queue_id));
	/* The queue's teardown runs on the driver's workqueue. */
	for (ret = 0; ret < 200; ret++) {
		ASSERT_EQ(0, device_stats(self->fd, &d2));
		if (d2.queues_in_error == d0.queues_in_error)
			break;
		usleep(10000);
	}
	EXPECT_EQ(d0.queues_in_error, d2.queues_in_error);
}

/* The engines of @class summed: busy time and jobs ended; 0 or an errno. */
static int class_stats(int fd, __u32 class, __u64 *busy, __u64 *jobs)
{
	struct drm_npu_engine_info info[MAX_ENGINES];
	struct drm_npu_engine_stats st[MAX_ENGINES];
	__u32 n, i;
	int ret;

	ret = all_engine_stats(fd, info, st, &n);
	if (ret)
		return ret;
	*busy = *jobs = 0;
	for (i = 0; i < n; i++) {
		if (info[i].engine_class == class) {
			*busy += st[i].busy_ns;
			*jobs += st[i].jobs_completed;
		}
	}
	return 0;
}

/*
 * A job's time counts while it runs, in the engine's and in the context's
 * (fdinfo) busy time: a tool sampling during a long job sees the engine
 * busy, not idle until the job ends (it counted only then, so npu-smi
 * showed 0% through a job longer than its interval, then 100%).
 */
TEST_F(stats, a_running_job_counts_as_busy)
{
	__u64 busy0, busy1, jobs0, jobs1, point = 0, buf[16];
	long long latency_us, timeout_ms = 2000, f0, f1;
	bool seen = false, ended = false;
	struct npu_cmdbuf cb;
	char dir[96];
	FILE *f;
	int w;

	if (geteuid() != 0 || npu_debugfs_dir(self->fd, dir, sizeof(dir)))
		SKIP(return, "needs root and the driver's debugfs (latency injection)");
	f = fopen("/sys/module/npu/parameters/job_timeout_ms", "re");
	if (f) {
		if (fscanf(f, "%lld", &timeout_ms) != 1)
			timeout_ms = 2000;
		fclose(f);
	}
	/*
	 * Every job sleeps this long as it starts, on the engine (well inside
	 * the job timeout, which counts from the start).
	 */
	latency_us = timeout_ms * 1000 / 2;
	ASSERT_EQ(0, nsub_dbg_write(dir, "inject_latency_us", latency_us));
	npu_cmdbuf_init(&cb, buf, sizeof(buf));
	npu_emit_fill(&cb, DEV_VA, DEV_SIZE, 0x5a, 1);
	ASSERT_EQ(0, npu_submit_cmdbuf(self->fd, self->q.queue_id, &cb, NULL, 0, &point));
	/* The engine was idle: the job starts about now. */
	usleep(100000);
	/* 50 ms windows while it runs: the engine and the context busy. */
	for (w = 0; w < 5 && !seen && !ended; w++) {
		ASSERT_EQ(0, class_stats(self->fd, DRM_NPU_ENGINE_COPY, &busy0, &jobs0));
		f0 = fdinfo_value(self->fd, "drm-engine-copy");
		usleep(50000);
		ASSERT_EQ(0, class_stats(self->fd, DRM_NPU_ENGINE_COPY, &busy1, &jobs1));
		f1 = fdinfo_value(self->fd, "drm-engine-copy");
		ended = jobs1 != jobs0 || nsub_signalled(self->fd, self->q.syncobj_handle, point);
		seen = !ended && busy1 - busy0 >= 40000000ull && f1 - f0 >= 40000000ll;
	}
	nsub_dbg_write(dir, "inject_latency_us", 0);
	ASSERT_EQ(0, nsub_wait(self->fd, self->q.syncobj_handle, point, timeout_ms * 4));
	if (!seen && ended && w == 1)
		SKIP(return, "the job ended within the first window (a slow host)");
	EXPECT_TRUE(seen) TH_LOG("while the job ran: engines %llu ns, context %lld ns busy in 50 ms",
				 (unsigned long long)(busy1 - busy0), f1 - f0);
}

TEST_F(stats, fdinfo_names_the_client_its_memory_and_engine_time)
{
	struct npu_node other[NPU_MAX_NODES];
	long long dev0, dev1, busy0, busy1, id0, id1;
	__u64 point = 0;
	__u32 bo2;
	int n;

	EXPECT_TRUE(fdinfo_has(self->fd, "drm-driver:\tnpu"));
	EXPECT_TRUE(fdinfo_has(self->fd, "drm-engine-capacity-copy:"));
	EXPECT_EQ((long long)self->nodes[0].device_index,
		  fdinfo_value(self->fd, "npu-device"));
	EXPECT_EQ(1, fdinfo_value(self->fd, "npu-queues"));
	dev0 = fdinfo_value(self->fd, "drm-total-device");
	EXPECT_GE(dev0, (long long)(DEV_SIZE >> 10));
	ASSERT_EQ(0, npu_bo_create(self->fd, DEV_SIZE, DRM_NPU_BO_DEVICE, &bo2));
	dev1 = fdinfo_value(self->fd, "drm-total-device");
	EXPECT_EQ(dev0 + (DEV_SIZE >> 10), dev1);
	ASSERT_EQ(0, npu_gem_close(self->fd, bo2));
	EXPECT_EQ(dev0, fdinfo_value(self->fd, "drm-total-device"));

	busy0 = fdinfo_value(self->fd, "drm-engine-copy");
	ASSERT_GE(busy0, 0);
	ASSERT_EQ(0, fill_job(self, &point));
	busy1 = fdinfo_value(self->fd, "drm-engine-copy");
	EXPECT_GT(busy1, busy0);
	EXPECT_EQ(0, fdinfo_value(self->fd, "drm-engine-compute"));

	/* Another file of the same device is another client. */
	n = npu_open_nodes(other, NPU_MAX_NODES);
	ASSERT_GT(n, 0);
	id0 = fdinfo_value(self->fd, "drm-client-id");
	id1 = fdinfo_value(other[0].fd, "drm-client-id");
	EXPECT_GT(id0, 0);
	EXPECT_GT(id1, 0);
	EXPECT_NE(id0, id1);
	EXPECT_EQ(0, fdinfo_value(other[0].fd, "drm-total-device"));
	npu_close_nodes(other, n);
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_latency_test - how long a NOP job takes from DRM_IOCTL_NPU_SUBMIT to
 * its completion seen by DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT on an idle engine,
 * against the cost of a null ioctl (DRM_IOCTL_NPU_QUERY with size 0)
 * measured in the same run on the same file.
 *
 * The medians and their ratio are printed as "# " lines. The numbers depend
 * on the machine (and on emulation), so there is no limit to fail: the test
 * only fails if the ioctls themselves do. Skips without an npu render node.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_harness.h"
#include "npu_test_util.h"
#include "npu_submit_util.h"

#define WARMUP_JOBS		20
#define JOBS			500
#define NULL_IOCTLS		5000

/* The @pct percentile of @n sorted samples. */
static __s64 percentile(const __s64 *sorted, size_t n, unsigned int pct)
{
	return sorted[(n - 1) * pct / 100];
}

static void report(const char *what, __s64 *v, size_t n)
{
	__s64 median = nsub_median(v, n);

	ksft_print_msg("%s: median %lld ns, min %lld, p10 %lld, p90 %lld (%zu samples)\n",
		       what, (long long)median, (long long)v[0],
		       (long long)percentile(v, n, 10),
		       (long long)percentile(v, n, 90), n);
}

/* Submit one NOP job on @q and wait for it; its latency in ns, or -errno. */
static __s64 nop_job(int fd, const struct drm_npu_queue_create *q,
		     long long wait_ms)
{
	struct drm_npu_pkt_header nop = {
		.opcode = DRM_NPU_PKT_NOP,
		.size = sizeof(nop),
	};
	__u64 point;
	__s64 t0;
	int ret;

	t0 = npu_monotonic_ns();
	ret = npu_submit(fd, q->queue_id, &nop, sizeof(nop), NULL, 0, &point);
	if (!ret)
		ret = nsub_wait(fd, q->syncobj_handle, point, wait_ms);
	return ret ? ret : npu_monotonic_ns() - t0;
}

FIXTURE(latency) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	/* The node with device index 0, or -1 when there is none. */
	int fd;
	__s64 *jobs;
	__s64 *nulls;
};

FIXTURE_SETUP(latency)
{
	int n;

	self->fd = -1;
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	self->jobs = calloc(JOBS, sizeof(*self->jobs));
	self->nulls = calloc(NULL_IOCTLS, sizeof(*self->nulls));
	ASSERT_NE(NULL, self->jobs);
	ASSERT_NE(NULL, self->nulls);
}

FIXTURE_TEARDOWN(latency)
{
	free(self->jobs);
	free(self->nulls);
	npu_close_nodes(self->nodes, self->num_nodes);
}

TEST_F(latency, nop_job_vs_null_ioctl)
{
	long long wait_ms = npu_job_timeout_ms() + 10000;
	struct drm_npu_queue_create q;
	struct drm_npu_queue_status st;
	__s64 job_med, null_med, t0;
	int i, ret;
	__u32 size;

	/* A SKIP() in setup does not end the test in every harness. */
	if (self->fd < 0)
		return;
	ASSERT_EQ(0, npu_queue_create(self->fd, DRM_NPU_ENGINE_COPY,
				      DRM_NPU_PRIORITY_NORMAL, &q));
	for (i = 0; i < WARMUP_JOBS; i++)
		ASSERT_LT(0, nop_job(self->fd, &q, wait_ms));
	/* Each job waits for the previous one: the engine is idle. */
	for (i = 0; i < JOBS; i++) {
		self->jobs[i] = nop_job(self->fd, &q, wait_ms);
		ASSERT_LT(0, self->jobs[i])
			TH_LOG("job %d: %s", i, strerror((int)-self->jobs[i]));
	}
	ASSERT_EQ(0, npu_queue_status(self->fd, q.queue_id, &st));
	ASSERT_EQ(0, st.error);

	for (i = 0; i < NULL_IOCTLS; i++) {
		size = 0;
		t0 = npu_monotonic_ns();
		ret = npu_query(self->fd, DRM_NPU_QUERY_DEVICE_INFO, NULL,
				&size);
		self->nulls[i] = npu_monotonic_ns() - t0;
		ASSERT_EQ(0, ret) TH_LOG("query: %s", strerror(-ret));
		ASSERT_EQ(sizeof(struct drm_npu_device_info), size);
	}

	report("NOP job, submit to completion", self->jobs, JOBS);
	report("null ioctl (DRM_IOCTL_NPU_QUERY, size 0)", self->nulls,
	       NULL_IOCTLS);
	job_med = nsub_median(self->jobs, JOBS);
	null_med = nsub_median(self->nulls, NULL_IOCTLS);
	if (null_med < 1)
		null_med = 1;
	ksft_print_msg("ratio NOP job / null ioctl (medians): %.1f\n",
		       (double)job_med / (double)null_med);
	/* The harness runs this in a child that exits without flushing. */
	fflush(stdout);
	ASSERT_EQ(0, npu_queue_destroy(self->fd, q.queue_id));
}

TEST_HARNESS_MAIN

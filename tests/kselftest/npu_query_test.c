// SPDX-License-Identifier: GPL-2.0-only
/*
 * npu_query_test - DRM_IOCTL_NPU_QUERY on the npu render nodes.
 *
 * Checks the answers of DRM_NPU_QUERY_DEVICE_INFO and DRM_NPU_QUERY_ENGINES
 * against the emulated NPU, the size negotiation described in npu_drm.h,
 * the exact errno of every rejected argument, and that rejected calls do not
 * spam the kernel log.
 *
 * Needs npu.ko loaded (tools/vmrun) and root for the kernel log test; skips
 * when there is no npu render node.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npu_harness.h"
#include "npu_test_util.h"

#define POISON			0xa5
#define KMSG_PATH		"/dev/kmsg"
#define KMSG_RECORD_MAX		8192
#define KMSG_LEVEL_DEBUG	7
#define DRM_DEBUG_PARAM		"/sys/module/drm/parameters/debug"
#define DRM_UT_DRIVER		0x02
#define NUM_THREADS		4
/* Room for more engines than the driver's limit of 16. */
#define MAX_ENGINES		32
#define THREAD_LOOPS		200

static const __u32 unknown_query_ids[] = {
	0, DRM_NPU_QUERY_DEVICE_STATS + 1, 0x100, 0x7fffffff, 0x80000000, 0xffffffff,
};

static int raw_query(int fd, struct drm_npu_query *q)
{
	return ioctl(fd, DRM_IOCTL_NPU_QUERY, q) ? -errno : 0;
}

static struct drm_npu_query make_query(__u32 query, const void *data,
				       __u32 size)
{
	struct drm_npu_query q = {
		.query = query,
		.data_ptr = (__u64)(uintptr_t)data,
		.size = size,
	};

	return q;
}

/* Whether buf[from..to) all hold POISON. */
static bool is_poisoned(const void *buf, size_t from, size_t to)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = from; i < to; i++) {
		if (p[i] != POISON)
			return false;
	}
	return true;
}

static bool is_zero(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i])
			return false;
	}
	return true;
}

/* A page-aligned anonymous mapping that is no longer mapped. */
static void *unmapped_page(void)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (munmap(p, page))
		return NULL;
	return p;
}

FIXTURE(query) {
	struct npu_node nodes[NPU_MAX_NODES];
	int num_nodes;
	/* The node with device index 0, or -1 when there is none. */
	int fd;
	struct drm_npu_device_info info;
	/* drm.debug before the test changed it, or -1. */
	long long saved_drm_debug;
};

FIXTURE_SETUP(query)
{
	int n;

	self->fd = -1;
	self->saved_drm_debug = -1;
	n = npu_open_nodes(self->nodes, NPU_MAX_NODES);
	ASSERT_LE(0, n) TH_LOG("scanning %s and %s: %s", NPU_ACCEL_DIR, NPU_DRI_DIR, strerror(-n));
	self->num_nodes = n;
	if (!n)
		SKIP(return, "no npu render node (is npu.ko loaded?)");
	self->fd = self->nodes[0].fd;
	ASSERT_EQ(0, npu_query_device_info(self->fd, &self->info));
}

FIXTURE_TEARDOWN(query)
{
	FILE *f;

	if (self->saved_drm_debug >= 0) {
		f = fopen(DRM_DEBUG_PARAM, "we");
		if (f) {
			fprintf(f, "%lld\n", self->saved_drm_debug);
			fclose(f);
		}
	}
	npu_close_nodes(self->nodes, self->num_nodes);
}

/*
 * A SKIP() in FIXTURE_SETUP() does not stop the test body in every version
 * of the harness: bodies return early themselves when this says so.
 */
static bool no_device(int fd)
{
	return fd < 0;
}

TEST_F(query, device_info)
{
	int i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < self->num_nodes; i++) {
		struct drm_npu_device_info info;
		struct drm_npu_query q;

		memset(&info, POISON, sizeof(info));
		q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, sizeof(info));
		ASSERT_EQ(0, raw_query(self->nodes[i].fd, &q))
			TH_LOG("%s: %s", self->nodes[i].path, strerror(errno));

		/* Only size is written back. */
		ASSERT_EQ(sizeof(info), q.size);
		ASSERT_EQ((__u32)DRM_NPU_QUERY_DEVICE_INFO, q.query);
		ASSERT_EQ(0U, q.flags);
		ASSERT_EQ((__u64)(uintptr_t)&info, q.data_ptr);
		ASSERT_EQ(0U, q.pad);

		ASSERT_EQ((__u32)DRM_NPU_API_VERSION, info.api_version);
		ASSERT_EQ(self->nodes[i].device_index, info.device_index);
		ASSERT_LT(0ULL, info.mem_capacity);
		ASSERT_LT(0ULL, info.clock_hz);
		ASSERT_TRUE(!!(info.capabilities & DRM_NPU_CAP_EMULATED));
		ASSERT_LE(1U, info.num_copy_engines);
		ASSERT_LE(1U, info.num_compute_engines);
		ASSERT_EQ(info.num_copy_engines + info.num_compute_engines,
			  info.num_engines);
		ASSERT_EQ(0U, info.pad);
		ASSERT_LT(info.va_start, info.va_end);

		/* NUL-terminated, and no stale bytes after the NUL. */
		ASSERT_NE(NULL, memchr(info.name, '\0', sizeof(info.name)));
		ASSERT_STREQ("npu-emu", info.name);
		ASSERT_TRUE(is_zero(info.name + strlen(info.name),
				    sizeof(info.name) - strlen(info.name)));

		/* Emulated NPUs all share the module's parameters. */
		ASSERT_EQ(self->info.mem_capacity, info.mem_capacity);
		ASSERT_EQ(self->info.clock_hz, info.clock_hz);
		ASSERT_EQ(self->info.num_copy_engines, info.num_copy_engines);
		ASSERT_EQ(self->info.num_compute_engines,
			  info.num_compute_engines);
		ASSERT_EQ(self->info.va_start, info.va_start);
		ASSERT_EQ(self->info.va_end, info.va_end);
	}
}

/* Size 0 asks for the size and writes nothing, whatever data_ptr is. */
TEST_F(query, device_info_size_query)
{
	struct drm_npu_device_info info;
	struct drm_npu_query q;

	if (no_device(self->fd))
		return;
	memset(&info, POISON, sizeof(info));
	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, 0);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(sizeof(info), q.size);
	ASSERT_TRUE(is_poisoned(&info, 0, sizeof(info)));

	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, NULL, 0);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(sizeof(info), q.size);

	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, unmapped_page(), 0);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(sizeof(info), q.size);
}

/* A buffer twice the answer's size: the answer, and nothing past it. */
TEST_F(query, device_info_larger_buffer)
{
	const size_t len = 2 * sizeof(struct drm_npu_device_info);
	unsigned char buf[2 * sizeof(struct drm_npu_device_info)];
	struct drm_npu_query q;

	if (no_device(self->fd))
		return;
	memset(buf, POISON, sizeof(buf));
	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, buf, len);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(sizeof(self->info), q.size);
	ASSERT_EQ(0, memcmp(buf, &self->info, sizeof(self->info)));
	ASSERT_TRUE(is_poisoned(buf, sizeof(self->info), len));
}

/*
 * User space built against a later uAPI whose struct drm_npu_device_info
 * grew by a field: npu_drm.h says structures grow at the end and queries
 * negotiate their size, so an older kernel answers with its own size.
 */
TEST_F(query, device_info_grown_struct)
{
	const size_t len = sizeof(struct drm_npu_device_info) + sizeof(__u64);
	unsigned char buf[sizeof(struct drm_npu_device_info) + sizeof(__u64)];
	struct drm_npu_query q;

	if (no_device(self->fd))
		return;
	memset(buf, POISON, sizeof(buf));
	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, buf, len);
	ASSERT_EQ(0, raw_query(self->fd, &q))
		TH_LOG("size %zu (struct + one __u64): %s", len,
		       strerror(errno));
	ASSERT_EQ(sizeof(self->info), q.size);
	ASSERT_EQ(0, memcmp(buf, &self->info, sizeof(self->info)));
	ASSERT_TRUE(is_poisoned(buf, sizeof(self->info), len));
}

/* Below the first version's size: -EINVAL, nothing written. */
TEST_F(query, device_info_short_buffer)
{
	const __u32 sizes[] = {
		1, 4, 8, sizeof(struct drm_npu_device_info) - 8,
		sizeof(struct drm_npu_device_info) - 1,
	};
	struct drm_npu_device_info info;
	struct drm_npu_query q;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		memset(&info, POISON, sizeof(info));
		q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, sizes[i]);
		ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
			TH_LOG("size %u", sizes[i]);
		ASSERT_TRUE(is_poisoned(&info, 0, sizeof(info)));
	}
}

TEST_F(query, engines)
{
	struct drm_npu_engine_info engines[MAX_ENGINES];
	__u32 instance[2];
	__u32 i, n, size;
	int node;

	if (no_device(self->fd))
		return;
	n = self->info.num_engines;
	ASSERT_GE(ARRAY_SIZE(engines), n);
	for (node = 0; node < self->num_nodes; node++) {
		int fd = self->nodes[node].fd;

		size = 0;
		ASSERT_EQ(0, npu_query(fd, DRM_NPU_QUERY_ENGINES, NULL, &size));
		ASSERT_EQ(n * sizeof(engines[0]), size);

		memset(engines, POISON, sizeof(engines));
		ASSERT_EQ(0, npu_query(fd, DRM_NPU_QUERY_ENGINES, engines,
				       &size));
		ASSERT_EQ(n * sizeof(engines[0]), size);

		memset(instance, 0, sizeof(instance));
		for (i = 0; i < n; i++) {
			__u32 class = i < self->info.num_copy_engines ?
				DRM_NPU_ENGINE_COPY : DRM_NPU_ENGINE_COMPUTE;

			ASSERT_EQ(i, engines[i].engine_id);
			ASSERT_EQ(class, engines[i].engine_class)
				TH_LOG("engine %u", i);
			ASSERT_EQ(instance[class], engines[i].instance)
				TH_LOG("engine %u", i);
			ASSERT_EQ(0U, engines[i].pad);
			instance[class]++;
		}
		ASSERT_EQ(self->info.num_copy_engines,
			  instance[DRM_NPU_ENGINE_COPY]);
		ASSERT_EQ(self->info.num_compute_engines,
			  instance[DRM_NPU_ENGINE_COMPUTE]);
		ASSERT_TRUE(is_poisoned(engines, n * sizeof(engines[0]),
					sizeof(engines)));
	}
}

TEST_F(query, engines_size_query)
{
	struct drm_npu_engine_info e;
	struct drm_npu_query q;

	if (no_device(self->fd))
		return;
	memset(&e, POISON, sizeof(e));
	q = make_query(DRM_NPU_QUERY_ENGINES, &e, 0);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(self->info.num_engines * sizeof(e), q.size);
	ASSERT_TRUE(is_poisoned(&e, 0, sizeof(e)));

	q = make_query(DRM_NPU_QUERY_ENGINES, NULL, 0);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(self->info.num_engines * sizeof(e), q.size);
}

/* Room for k < n elements: the first k, and size says how many exist. */
TEST_F(query, engines_partial)
{
	struct drm_npu_engine_info all[MAX_ENGINES];
	struct drm_npu_engine_info buf[MAX_ENGINES];
	__u32 n = self->info.num_engines;
	const size_t esz = sizeof(all[0]);
	struct drm_npu_query q;
	__u32 k, size;

	if (no_device(self->fd))
		return;
	ASSERT_GE(ARRAY_SIZE(all), n);
	size = sizeof(all);
	ASSERT_EQ(0, npu_query(self->fd, DRM_NPU_QUERY_ENGINES, all, &size));
	ASSERT_EQ(n * esz, size);

	for (k = 1; k < n; k++) {
		memset(buf, POISON, sizeof(buf));
		q = make_query(DRM_NPU_QUERY_ENGINES, buf, k * esz);
		ASSERT_EQ(0, raw_query(self->fd, &q)) TH_LOG("%u elements", k);
		ASSERT_EQ(n * esz, q.size) TH_LOG("%u elements", k);
		ASSERT_EQ(0, memcmp(buf, all, k * esz)) TH_LOG("%u elements", k);
		ASSERT_TRUE(is_poisoned(buf, k * esz, sizeof(buf)))
			TH_LOG("%u elements", k);
	}
}

TEST_F(query, engines_larger_buffer)
{
	struct drm_npu_engine_info buf[MAX_ENGINES];
	__u32 n = self->info.num_engines;
	const size_t esz = sizeof(buf[0]);
	struct drm_npu_query q;

	if (no_device(self->fd))
		return;
	ASSERT_GE(ARRAY_SIZE(buf), n + 2);
	memset(buf, POISON, sizeof(buf));
	q = make_query(DRM_NPU_QUERY_ENGINES, buf, (n + 2) * esz);
	ASSERT_EQ(0, raw_query(self->fd, &q));
	ASSERT_EQ(n * esz, q.size);
	ASSERT_EQ(n - 1, buf[n - 1].engine_id);
	ASSERT_TRUE(is_poisoned(buf, n * esz, sizeof(buf)));
}

/* Not a whole number of elements: -EINVAL, nothing written. */
TEST_F(query, engines_bad_size)
{
	const size_t esz = sizeof(struct drm_npu_engine_info);
	struct drm_npu_engine_info buf[MAX_ENGINES];
	__u32 n = self->info.num_engines;
	const __u32 sizes[] = {
		1, 4, esz - 1, esz + 1, esz + esz / 2, n * esz - 1,
		n * esz + 1, (n + 1) * esz - 4,
	};
	struct drm_npu_query q;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		ASSERT_GE(sizeof(buf), sizes[i]);
		memset(buf, POISON, sizeof(buf));
		q = make_query(DRM_NPU_QUERY_ENGINES, buf, sizes[i]);
		ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
			TH_LOG("size %u", sizes[i]);
		ASSERT_TRUE(is_poisoned(buf, 0, sizeof(buf)))
			TH_LOG("size %u", sizes[i]);
	}
}

TEST_F(query, bad_flags)
{
	const __u32 flags[] = { 1, 2, 0x80000000, 0xffffffff };
	const __u32 ids[] = { DRM_NPU_QUERY_DEVICE_INFO, DRM_NPU_QUERY_ENGINES };
	struct drm_npu_device_info info;
	struct drm_npu_query q;
	size_t i, j;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		for (j = 0; j < ARRAY_SIZE(flags); j++) {
			memset(&info, POISON, sizeof(info));
			q = make_query(ids[i], &info, 0);
			q.flags = flags[j];
			ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
				TH_LOG("query %u flags 0x%x", ids[i], flags[j]);

			q = make_query(ids[i], &info, sizeof(info));
			q.flags = flags[j];
			ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
				TH_LOG("query %u flags 0x%x", ids[i], flags[j]);
			ASSERT_TRUE(is_poisoned(&info, 0, sizeof(info)));
		}
	}
}

TEST_F(query, bad_pad)
{
	const __u32 pads[] = { 1, 0x80000000, 0xffffffff };
	const __u32 ids[] = { DRM_NPU_QUERY_DEVICE_INFO, DRM_NPU_QUERY_ENGINES };
	struct drm_npu_device_info info;
	struct drm_npu_query q;
	size_t i, j;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		for (j = 0; j < ARRAY_SIZE(pads); j++) {
			memset(&info, POISON, sizeof(info));
			q = make_query(ids[i], &info, 0);
			q.pad = pads[j];
			ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
				TH_LOG("query %u pad 0x%x", ids[i], pads[j]);

			q = make_query(ids[i], &info, sizeof(info));
			q.pad = pads[j];
			ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
				TH_LOG("query %u pad 0x%x", ids[i], pads[j]);
			ASSERT_TRUE(is_poisoned(&info, 0, sizeof(info)));
		}
	}
}

TEST_F(query, unknown_query)
{
	struct drm_npu_device_info info;
	struct drm_npu_query q;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(unknown_query_ids); i++) {
		memset(&info, POISON, sizeof(info));
		q = make_query(unknown_query_ids[i], &info, 0);
		ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
			TH_LOG("query %u, size 0", unknown_query_ids[i]);

		q = make_query(unknown_query_ids[i], &info, sizeof(info));
		ASSERT_EQ(-EINVAL, raw_query(self->fd, &q))
			TH_LOG("query %u", unknown_query_ids[i]);
		ASSERT_TRUE(is_poisoned(&info, 0, sizeof(info)));
	}
}

/*
 * Output pointers that cannot be written: each query, with a size that is
 * valid for it, fails with -EFAULT.
 */
static const struct {
	__u32 query;
	__u32 size;
} fault_cases[] = {
	{ DRM_NPU_QUERY_DEVICE_INFO, sizeof(struct drm_npu_device_info) },
	{ DRM_NPU_QUERY_ENGINES, sizeof(struct drm_npu_engine_info) },
};

TEST_F(query, null_data_ptr)
{
	struct drm_npu_query q;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(fault_cases); i++) {
		q = make_query(fault_cases[i].query, NULL, fault_cases[i].size);
		ASSERT_EQ(-EFAULT, raw_query(self->fd, &q))
			TH_LOG("query %u", fault_cases[i].query);
	}
}

TEST_F(query, unmapped_data_ptr)
{
	struct drm_npu_query q;
	void *hole;
	size_t i;

	if (no_device(self->fd))
		return;
	hole = unmapped_page();
	ASSERT_NE(NULL, hole);
	for (i = 0; i < ARRAY_SIZE(fault_cases); i++) {
		q = make_query(fault_cases[i].query, hole, fault_cases[i].size);
		ASSERT_EQ(-EFAULT, raw_query(self->fd, &q))
			TH_LOG("query %u", fault_cases[i].query);
	}
}

TEST_F(query, readonly_data_ptr)
{
	long page = sysconf(_SC_PAGESIZE);
	struct drm_npu_query q;
	void *ro;
	size_t i;

	if (no_device(self->fd))
		return;
	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	for (i = 0; i < ARRAY_SIZE(fault_cases); i++) {
		q = make_query(fault_cases[i].query, ro, fault_cases[i].size);
		ASSERT_EQ(-EFAULT, raw_query(self->fd, &q))
			TH_LOG("query %u", fault_cases[i].query);
		ASSERT_TRUE(is_zero(ro, page));
	}
	munmap(ro, page);
}

/* Kernel and non-canonical addresses must never be written. */
TEST_F(query, kernel_data_ptr)
{
	const __u64 addrs[] = {
		0xffffffff81000000ULL,	/* x86-64 kernel text */
		0xffff888000000000ULL,	/* x86-64 direct map */
		0x8000000000000000ULL,	/* non-canonical */
		0xfffffffffffff000ULL,	/* last page, wraps with the size */
	};
	struct drm_npu_query q;
	size_t i, j;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(fault_cases); i++) {
		for (j = 0; j < ARRAY_SIZE(addrs); j++) {
			q = make_query(fault_cases[i].query, NULL,
				       fault_cases[i].size);
			q.data_ptr = addrs[j];
			ASSERT_EQ(-EFAULT, raw_query(self->fd, &q))
				TH_LOG("query %u to 0x%llx",
				       fault_cases[i].query,
				       (unsigned long long)addrs[j]);
		}
	}
}

/* The ioctl argument itself cannot be read. */
TEST_F(query, bad_query_arg)
{
	if (no_device(self->fd))
		return;
	ASSERT_EQ(-1, ioctl(self->fd, DRM_IOCTL_NPU_QUERY, NULL));
	ASSERT_EQ(EFAULT, errno);
	ASSERT_EQ(-1, ioctl(self->fd, DRM_IOCTL_NPU_QUERY, unmapped_page()));
	ASSERT_EQ(EFAULT, errno);
}

/* A driver ioctl number the driver does not have. */
TEST_F(query, unknown_ioctl)
{
	const unsigned long cmds[] = {
		DRM_IOWR(DRM_COMMAND_BASE + 0x3f, struct drm_npu_query),
		DRM_IO(DRM_COMMAND_BASE + 0x3f),
	};
	struct drm_npu_query q;
	size_t i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &self->info, 0);
		ASSERT_EQ(-1, ioctl(self->fd, cmds[i], &q))
			TH_LOG("cmd 0x%lx", cmds[i]);
		ASSERT_EQ(EINVAL, errno) TH_LOG("cmd 0x%lx", cmds[i]);
		ASSERT_EQ(0U, q.size);
	}
}

/*
 * One render node per emulated NPU, as many as the module parameter asks,
 * with device indices 0..n-1.
 */
TEST_F(query, device_indices)
{
	unsigned int num_devices;
	int i, ret;

	if (no_device(self->fd))
		return;
	for (i = 0; i < self->num_nodes; i++) {
		ASSERT_EQ((__u32)i, self->nodes[i].device_index)
			TH_LOG("%s", self->nodes[i].path);
	}

	ret = npu_read_uint_file(NPU_NUM_DEVICES_PARAM, &num_devices);
	if (ret == -ENOENT)
		SKIP(return, "%s is missing", NPU_NUM_DEVICES_PARAM);
	ASSERT_EQ(0, ret) TH_LOG("%s: %s", NPU_NUM_DEVICES_PARAM,
				 strerror(-ret));
	ASSERT_EQ(num_devices, (unsigned int)self->num_nodes);
}

struct query_thread {
	int fd;
	const struct drm_npu_device_info *expect;
	int errors;
	pthread_t thread;
};

static void *query_thread_fn(void *arg)
{
	struct drm_npu_engine_info engines[MAX_ENGINES];
	struct query_thread *t = arg;
	struct drm_npu_device_info info;
	__u32 size;
	int i;

	for (i = 0; i < THREAD_LOOPS; i++) {
		if (npu_query_device_info(t->fd, &info) ||
		    memcmp(&info, t->expect, sizeof(info)))
			t->errors++;
		size = sizeof(engines);
		if (npu_query(t->fd, DRM_NPU_QUERY_ENGINES, engines, &size) ||
		    size != t->expect->num_engines * sizeof(engines[0]))
			t->errors++;
	}
	return NULL;
}

/* Queries from several threads on one file all get the same answers. */
TEST_F(query, concurrent_queries)
{
	struct query_thread threads[NUM_THREADS];
	int i;

	if (no_device(self->fd))
		return;
	for (i = 0; i < NUM_THREADS; i++) {
		threads[i].fd = self->fd;
		threads[i].expect = &self->info;
		threads[i].errors = 0;
		ASSERT_EQ(0, pthread_create(&threads[i].thread, NULL,
					    query_thread_fn, &threads[i]));
	}
	for (i = 0; i < NUM_THREADS; i++) {
		ASSERT_EQ(0, pthread_join(threads[i].thread, NULL));
		ASSERT_EQ(0, threads[i].errors) TH_LOG("thread %d", i);
	}
}

/* Issue one of each rejected call; return how many did not fail. */
static int issue_bad_queries(int fd)
{
	long page = sysconf(_SC_PAGESIZE);
	struct drm_npu_device_info info;
	struct drm_npu_query q;
	int ok = 0;
	void *ro;
	size_t i;

	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, sizeof(info));
	q.flags = 1;
	ok += !raw_query(fd, &q);

	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, sizeof(info));
	q.pad = 1;
	ok += !raw_query(fd, &q);

	for (i = 0; i < ARRAY_SIZE(unknown_query_ids); i++) {
		q = make_query(unknown_query_ids[i], &info, sizeof(info));
		ok += !raw_query(fd, &q);
	}

	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, sizeof(info) - 1);
	ok += !raw_query(fd, &q);
	q = make_query(DRM_NPU_QUERY_ENGINES, &info,
		       sizeof(struct drm_npu_engine_info) + 1);
	ok += !raw_query(fd, &q);

	for (i = 0; i < ARRAY_SIZE(fault_cases); i++) {
		q = make_query(fault_cases[i].query, NULL, fault_cases[i].size);
		ok += !raw_query(fd, &q);
		q = make_query(fault_cases[i].query, unmapped_page(),
			       fault_cases[i].size);
		ok += !raw_query(fd, &q);
		q = make_query(fault_cases[i].query, NULL, fault_cases[i].size);
		q.data_ptr = 0xffffffff81000000ULL;
		ok += !raw_query(fd, &q);
	}

	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro != MAP_FAILED) {
		for (i = 0; i < ARRAY_SIZE(fault_cases); i++) {
			q = make_query(fault_cases[i].query, ro,
				       fault_cases[i].size);
			ok += !raw_query(fd, &q);
		}
		munmap(ro, page);
	}

	ok += !ioctl(fd, DRM_IOCTL_NPU_QUERY, NULL);
	q = make_query(DRM_NPU_QUERY_DEVICE_INFO, &info, 0);
	ok += !ioctl(fd, DRM_IOWR(DRM_COMMAND_BASE + 0x3f,
				  struct drm_npu_query), &q);
	return ok;
}

/*
 * Turn on drm.debug's driver category so that the driver's messages about
 * rejected calls are printed at all; they must then be debug level.
 */
static long long enable_drm_debug(void)
{
	long long old;
	FILE *f;
	int ret;

	f = fopen(DRM_DEBUG_PARAM, "re");
	if (!f)
		return -1;
	ret = fscanf(f, "%lli", &old);
	fclose(f);
	if (ret != 1 || old < 0)
		return -1;

	f = fopen(DRM_DEBUG_PARAM, "we");
	if (!f)
		return -1;
	fprintf(f, "%lld\n", old | DRM_UT_DRIVER);
	if (fclose(f))
		return -1;
	return old;
}

/*
 * Rejected calls are user space's mistakes: the kernel log may mention them
 * at debug level only, or a user could flood it.
 */
TEST_F(query, bad_queries_not_logged)
{
	static char rec[KMSG_RECORD_MAX + 1];
	unsigned int records = 0, debug_npu = 0;
	bool marker_seen = false;
	char marker[64], line[80];
	int fd, wfd, ok;
	ssize_t len;

	if (no_device(self->fd))
		return;
	fd = open(KMSG_PATH, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		SKIP(return, "cannot read %s: %s", KMSG_PATH, strerror(errno));
	ASSERT_LE(0, lseek(fd, 0, SEEK_END));

	self->saved_drm_debug = enable_drm_debug();
	if (self->saved_drm_debug < 0)
		TH_LOG("cannot enable drm.debug; driver messages stay off");

	ok = issue_bad_queries(self->fd);

	/*
	 * A debug-level record of our own marks the end of the batch; one
	 * write() per record, as /dev/kmsg wants.
	 */
	snprintf(marker, sizeof(marker), "ksft-query-marker-%d", getpid());
	snprintf(line, sizeof(line), "<%d>%s\n", KMSG_LEVEL_DEBUG, marker);
	wfd = open(KMSG_PATH, O_WRONLY | O_CLOEXEC);
	if (wfd >= 0) {
		if (write(wfd, line, strlen(line)) < 0)
			TH_LOG("writing to %s: %s", KMSG_PATH, strerror(errno));
		close(wfd);
	}

	for (;;) {
		unsigned long pri;
		char *msg, *end;

		len = read(fd, rec, KMSG_RECORD_MAX);
		if (len < 0 && errno == EPIPE)
			continue;	/* records were overwritten */
		if (len < 0 && errno == EAGAIN)
			break;
		ASSERT_LT(0, len) TH_LOG("reading %s: %s", KMSG_PATH,
					 strerror(errno));
		rec[len] = '\0';
		records++;

		pri = strtoul(rec, &end, 10);
		ASSERT_EQ(',', *end) TH_LOG("record '%s'", rec);
		msg = strchr(rec, ';');
		ASSERT_NE(NULL, msg) TH_LOG("record '%s'", rec);
		msg++;

		if (strstr(msg, marker)) {
			ASSERT_EQ(KMSG_LEVEL_DEBUG, (int)(pri & 7));
			marker_seen = true;
			break;
		}
		if (!strstr(msg, "npu"))
			continue;
		if ((pri & 7) >= KMSG_LEVEL_DEBUG) {
			debug_npu++;
			continue;
		}
		TH_LOG("level %lu record: %.*s", pri & 7,
		       (int)strcspn(msg, "\n"), msg);
		ASSERT_LE(KMSG_LEVEL_DEBUG, (int)(pri & 7));
	}
	close(fd);

	ASSERT_EQ(0, ok) TH_LOG("%d bad queries succeeded", ok);
	if (!marker_seen)
		TH_LOG("marker record not seen; read up to the end of the log");
	TH_LOG("%u new records, %u debug-level npu records", records,
	       debug_npu);
}

TEST_HARNESS_MAIN

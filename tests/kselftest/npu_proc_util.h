/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers of the kselftests that run several processes against each other
 * (npu_hostile_test, npu_pressure_test) on top of npu_test_util.h: pipes
 * with timeouts, waiting for a child with a timeout, the machine's memory
 * figures and the driver's pinned-RAM budget.
 *
 * Like npu_test_util.h, every helper returns 0 (or a value) on success and
 * a negative errno on failure, and never prints.
 */
#ifndef __NPU_PROC_UTIL_H__
#define __NPU_PROC_UTIL_H__

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "npu_test_util.h"

#define NPU_PINNED_MEM_PARAM	"/sys/module/npu/parameters/pinned_mem_mb"

/*
 * NPU_EXHAUSTION=skip: the scenes that fill a resource to its limit with
 * thousands of objects (minutes each under a debug kernel) skip. The debug
 * lanes' subsets in `make test` set it to fit CI's time; the stock lanes
 * and `make test-debug` run them.
 */
#define NPU_EXHAUSTION_SKIPPED	"NPU_EXHAUSTION=skip (this lane's subset)"

static inline bool npu_skip_exhaustion(void)
{
	const char *v = getenv("NPU_EXHAUSTION");

	return v && !strcmp(v, "skip");
}

/* Write all @len bytes of @buf to the pipe @fd. */
static inline int npu_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * npu_read_all() - read exactly @len bytes from the pipe @fd, waiting at
 * most @ms for each piece.
 *
 * Return: 0, -ETIME, or -EPIPE when the other end closed.
 */
static inline int npu_read_all(int fd, void *buf, size_t len, long long ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char *p = buf;

	while (len) {
		ssize_t n;
		int ret = poll(&pfd, 1, ms > INT_MAX ? INT_MAX : (int)ms);

		if (ret < 0 && errno == EINTR)
			continue;
		if (ret == 0)
			return -ETIME;
		if (ret < 0)
			return -errno;
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * npu_wait_child_ms() - wait for @pid to end, at most @ms (through a
 * pidfd: no polling). On timeout the child is killed.
 *
 * Return: as npu_wait_child(), or -ETIME.
 */
static inline int npu_wait_child_ms(pid_t pid, long long ms)
{
	int pfd = syscall(SYS_pidfd_open, pid, 0);
	int ret = 0;

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		do {
			ret = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
		} while (ret < 0 && errno == EINTR);
		close(pfd);
		if (ret == 0) {
			kill(pid, SIGKILL);
			npu_wait_child(pid);
			return -ETIME;
		}
	}
	return npu_wait_child(pid);
}

/* A figure of /proc/meminfo (e.g. "MemAvailable") in bytes, or 0. */
static inline __u64 npu_meminfo(const char *key)
{
	unsigned long long kb;
	char line[128];
	__u64 val = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, strlen(key)) &&
		    sscanf(line + strlen(key), ": %llu kB", &kb) == 1) {
			val = kb * 1024;
			break;
		}
	}
	fclose(f);
	return val;
}

/* A figure of /proc/self/status (e.g. "VmPin", "VmRSS") in bytes, or 0. */
static inline __u64 npu_self_status(const char *key)
{
	unsigned long long kb;
	char line[128];
	__u64 val = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, strlen(key)) &&
		    sscanf(line + strlen(key), ": %llu kB", &kb) == 1) {
			val = kb * 1024;
			break;
		}
	}
	fclose(f);
	return val;
}

/*
 * The RAM the driver's DEVICE and HOST BOs may pin together (its module
 * parameter pinned_mem_mb), or 0 for a driver without that budget.
 */
static inline __u64 npu_pinned_budget(void)
{
	unsigned int mb;

	if (npu_read_uint_file(NPU_PINNED_MEM_PARAM, &mb))
		return 0;
	return (__u64)mb << 20;
}

/*
 * The RAM a test may pin in this machine without putting anyone at risk
 * (the guests are small): what is available, less 384 MiB.
 */
static inline __u64 npu_safe_to_pin(void)
{
	__u64 avail = npu_meminfo("MemAvailable");

	return avail > (384ULL << 20) ? avail - (384ULL << 20) : 0;
}

#endif /* __NPU_PROC_UTIL_H__ */

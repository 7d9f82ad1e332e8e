/*
 * pinned_copies: host-to-device and device-to-host copies from pinned
 * (npurtMallocHost), registered (npurtHostRegister) and ordinary pageable
 * memory, with their times (C99).
 *
 * The copy engine reads and writes pinned and registered memory directly.
 * Pageable memory goes through the runtime's pinned staging buffers: the
 * CPU copies each chunk once more, and a pageable device-to-host copy
 * returns only when the data has arrived.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npurt/npurt.h"

#define CHECK(call)                                                                            \
	do {                                                                                   \
		npurtError_t err_ = (call);                                                    \
		if (err_ != npurtSuccess) {                                                    \
			fprintf(stderr, "%s failed: %s: %s\n", #call, npurtGetErrorName(err_), \
			        npurtGetLastErrorMessage());                                   \
			return 1;                                                              \
		}                                                                              \
	} while (0)

static double nowMs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Copies n bytes to the device and back on stream s; prints the times. */
static int roundTrip(const char *kind, unsigned char *src, unsigned char *dst, void *dev, size_t n,
                     npurtStream_t s)
{
	npurtEvent_t e0, e1, e2;
	float h2d, d2h;
	double t0, t1;
	size_t i;

	for (i = 0; i < n; i++)
		src[i] = (unsigned char)(i * 7 + 1);
	memset(dst, 0, n);
	CHECK(npurtEventCreateWithFlags(&e0, npurtEventTiming));
	CHECK(npurtEventCreateWithFlags(&e1, npurtEventTiming));
	CHECK(npurtEventCreateWithFlags(&e2, npurtEventTiming));

	t0 = nowMs();
	CHECK(npurtEventRecord(e0, s));
	CHECK(npurtMemcpyAsync(dev, src, n, npurtMemcpyHostToDevice, s));
	CHECK(npurtEventRecord(e1, s));
	CHECK(npurtMemcpyAsync(dst, dev, n, npurtMemcpyDeviceToHost, s));
	CHECK(npurtEventRecord(e2, s));
	CHECK(npurtStreamSynchronize(s));
	t1 = nowMs();

	if (memcmp(src, dst, n) != 0) {
		fprintf(stderr, "%s: the data came back wrong\n", kind);
		return 1;
	}
	CHECK(npurtEventElapsedTime(&h2d, e0, e1));
	CHECK(npurtEventElapsedTime(&d2h, e1, e2));
	printf("%-10s %4zu MiB: to device %8.3f ms (%7.1f MiB/s), back %8.3f ms (%7.1f MiB/s), "
	       "wall %8.3f ms\n",
	       kind, n >> 20, h2d, (n >> 20) / (h2d / 1e3), d2h, (n >> 20) / (d2h / 1e3), t1 - t0);
	CHECK(npurtEventDestroy(e0));
	CHECK(npurtEventDestroy(e1));
	CHECK(npurtEventDestroy(e2));
	return 0;
}

int main(void)
{
	const size_t n = 32 << 20;
	npurtStream_t s;
	void *dev, *pinnedSrc, *pinnedDst;
	unsigned char *pageSrc, *pageDst;

	CHECK(npurtStreamCreate(&s));
	CHECK(npurtMalloc(&dev, n));

	/* Pinned: allocated by the runtime, mapped for the device. */
	CHECK(npurtMallocHost(&pinnedSrc, n));
	CHECK(npurtMallocHost(&pinnedDst, n));
	if (roundTrip("pinned", pinnedSrc, pinnedDst, dev, n, s))
		return 1;

	/* Pageable: plain malloc memory, staged by the runtime. */
	pageSrc = malloc(n);
	pageDst = malloc(n);
	if (!pageSrc || !pageDst)
		return 1;
	if (roundTrip("pageable", pageSrc, pageDst, dev, n, s))
		return 1;

	/* Registered: the same malloc memory, pinned in place. */
	CHECK(npurtHostRegister(pageSrc, n, npurtHostRegisterDefault));
	CHECK(npurtHostRegister(pageDst, n, npurtHostRegisterDefault));
	if (roundTrip("registered", pageSrc, pageDst, dev, n, s))
		return 1;
	CHECK(npurtHostUnregister(pageSrc));
	CHECK(npurtHostUnregister(pageDst));

	free(pageSrc);
	free(pageDst);
	CHECK(npurtFreeHost(pinnedSrc));
	CHECK(npurtFreeHost(pinnedDst));
	CHECK(npurtFree(dev));
	CHECK(npurtStreamDestroy(s));
	printf("device times cover the copy engine only; the wall time of pageable copies "
	       "adds the CPU's staging\n");
	return 0;
}

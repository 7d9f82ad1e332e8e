/*
 * streams_events: two streams working at once, one waiting for the other
 * through an event, and timing events measuring both (C99).
 *
 * A producer stream fills a buffer and copies it; a consumer stream waits
 * for the producer's event, copies the result on and brings it back to the
 * host. A third, independent stream fills another buffer meanwhile.
 */
#include <stdio.h>
#include <string.h>

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

int main(void)
{
	const size_t n = 16 << 20;
	npurtStream_t producer, consumer, other;
	npurtEvent_t start, produced, end, otherDone;
	void *a, *b, *c, *d;
	unsigned char *host;
	float msProduce, msTotal;
	int least, greatest;
	size_t i;

	/* Lower numbers are higher priority; the consumer gets the highest. */
	CHECK(npurtDeviceGetStreamPriorityRange(&least, &greatest));
	CHECK(npurtStreamCreate(&producer));
	CHECK(npurtStreamCreateWithPriority(&consumer, npurtStreamNonBlocking, greatest));
	CHECK(npurtStreamCreateWithPriority(&other, npurtStreamNonBlocking, least));

	/* Events only record device timestamps when asked to. */
	CHECK(npurtEventCreateWithFlags(&start, npurtEventTiming));
	CHECK(npurtEventCreateWithFlags(&produced, npurtEventTiming));
	CHECK(npurtEventCreateWithFlags(&end, npurtEventTiming));
	CHECK(npurtEventCreate(&otherDone));

	CHECK(npurtMalloc(&a, n));
	CHECK(npurtMalloc(&b, n));
	CHECK(npurtMalloc(&c, n));
	CHECK(npurtMalloc(&d, n));
	CHECK(npurtMallocHost((void **)&host, n));

	/* Producer: a = 0x5a..., b = a. */
	CHECK(npurtEventRecord(start, producer));
	CHECK(npurtMemsetAsync(a, 0x5a, n, producer));
	CHECK(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, producer));
	CHECK(npurtEventRecord(produced, producer));

	/* Consumer: waits for b, then c = b and back to the host. */
	CHECK(npurtStreamWaitEvent(consumer, produced, 0));
	CHECK(npurtMemcpyAsync(c, b, n, npurtMemcpyDeviceToDevice, consumer));
	CHECK(npurtMemcpyAsync(host, c, n, npurtMemcpyDeviceToHost, consumer));
	CHECK(npurtEventRecord(end, consumer));

	/* Independent work overlaps with both. */
	CHECK(npurtMemsetAsync(d, 0x33, n, other));
	CHECK(npurtEventRecord(otherDone, other));

	printf("enqueued; consumer done yet? %s\n",
	       npurtEventQuery(end) == npurtSuccess ? "yes" : "not yet");
	CHECK(npurtEventSynchronize(end));
	CHECK(npurtEventSynchronize(otherDone));

	for (i = 0; i < n; i++) {
		if (host[i] != 0x5a) {
			fprintf(stderr, "byte %zu is 0x%02x, want 0x5a\n", i, host[i]);
			return 1;
		}
	}
	CHECK(npurtEventElapsedTime(&msProduce, start, produced));
	CHECK(npurtEventElapsedTime(&msTotal, start, end));
	printf("producer: fill + copy of %zu MiB took %.3f ms on the device\n", n >> 20, msProduce);
	printf("consumer finished %.3f ms after the producer started (data checked)\n", msTotal);
	if (msProduce <= 0.0f || msTotal < msProduce) {
		fprintf(stderr, "implausible times\n");
		return 1;
	}

	CHECK(npurtEventDestroy(start));
	CHECK(npurtEventDestroy(produced));
	CHECK(npurtEventDestroy(end));
	CHECK(npurtEventDestroy(otherDone));
	CHECK(npurtStreamDestroy(producer));
	CHECK(npurtStreamDestroy(consumer));
	CHECK(npurtStreamDestroy(other));
	CHECK(npurtFree(a));
	CHECK(npurtFree(b));
	CHECK(npurtFree(c));
	CHECK(npurtFree(d));
	CHECK(npurtFreeHost(host));
	return 0;
}

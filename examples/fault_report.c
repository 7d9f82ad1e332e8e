/*
 * fault_report: what a device fault looks like (C99).
 *
 * Makes the NPU's next job fault through the driver's debugfs fault
 * injection (root only; skipped otherwise), then shows the report the
 * synchronising call and the error callback give: the stream, the task, the
 * API call that enqueued it and where from. Recovers the stream after.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static int callbacks;

static void onError(npurtStream_t stream, npurtError_t error, const char *message, void *user)
{
	(void)user;
	callbacks++;
	printf("error callback: stream %p, %s:\n  %s\n", (void *)stream, npurtGetErrorName(error),
	       message);
}

int main(void)
{
	const size_t n = 1 << 20;
	npurtDeviceProp prop;
	char knob[128];
	FILE *f;
	npurtStream_t s;
	void *a, *b;
	npurtError_t err;

	CHECK(npurtGetDeviceProperties(&prop, 0));
	/* The driver's debugfs folder, "" when this process cannot see it. */
	snprintf(knob, sizeof(knob), "%s/inject_fault", prop.debugfsPath);
	if (geteuid() != 0 || !prop.debugfsPath[0] || access(knob, W_OK) != 0) {
		printf("skipped: injecting a fault writes the driver's debugfs knob %s, which "
		       "needs root\n",
		       prop.debugfsPath[0] ? knob : "inject_fault");
		return 0;
	}

	CHECK(npurtSetErrorCallback(onError, NULL));
	CHECK(npurtStreamCreate(&s));
	CHECK(npurtMalloc(&a, n));
	CHECK(npurtMalloc(&b, n));
	CHECK(npurtMemset(a, 1, n));
	CHECK(npurtDeviceSynchronize());

	f = fopen(knob, "w");
	if (!f || fprintf(f, "1\n") < 0 || fclose(f) != 0) {
		perror(knob);
		return 1;
	}
	/* Fault reports name this file and line for the next enqueue. */
	npurtSetCallSite(__FILE__, __LINE__, __func__);
	CHECK(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s));

	err = npurtStreamSynchronize(s);
	printf("npurtStreamSynchronize returned %s:\n  %s\n", npurtGetErrorName(err),
	       npurtGetLastErrorMessage());
	if (err != npurtErrorDeviceFault || !strstr(npurtGetLastErrorMessage(), "fault_report.c")) {
		fprintf(stderr, "expected a device fault naming this file\n");
		return 1;
	}
	npurtGetLastError();

	/* Later calls on the stream report the same failure until recovered. */
	err = npurtMemsetAsync(b, 2, n, s);
	printf("an enqueue after it returns %s too\n", npurtGetErrorName(err));
	CHECK(npurtStreamRecover(s));
	CHECK(npurtMemcpyAsync(b, a, n, npurtMemcpyDeviceToDevice, s));
	CHECK(npurtStreamSynchronize(s));
	printf("recovered: the same copy runs now (%d error callback%s)\n", callbacks,
	       callbacks == 1 ? "" : "s");

	CHECK(npurtSetErrorCallback(NULL, NULL));
	CHECK(npurtStreamDestroy(s));
	CHECK(npurtFree(a));
	CHECK(npurtFree(b));
	return callbacks == 1 ? 0 : 1;
}

// Shared by the C probes in tools/perf: a monotonic clock in seconds and
// the string moves they time.
#pragma once

#include <stddef.h>
#include <time.h>

static inline double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static inline void movsb(void *d, const void *s, size_t n)
{
	asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static inline void movsq(void *d, const void *s, size_t n)
{
	size_t q = n / 8;

	asm volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(q) : : "memory");
}

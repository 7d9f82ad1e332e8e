// A translation unit compiled with NPURT_API_PER_THREAD_DEFAULT_STREAM (as
// CUDA code built with --default-stream per-thread): here a NULL stream is
// the calling thread's per-thread default stream. test_parity.cpp calls it.
#ifndef NPURT_API_PER_THREAD_DEFAULT_STREAM
#error "built with -DNPURT_API_PER_THREAD_DEFAULT_STREAM"
#endif
#include "ptds_unit.h"

npurtError_t ptdsLaunchHostFunc(npurtHostFn_t fn, void *data)
{
	return npurtLaunchHostFunc(0, fn, data);
}

npurtError_t ptdsMemsetAsync(void *d, int value, size_t n)
{
	return npurtMemsetAsync(d, value, n, 0);
}

npurtError_t ptdsStreamQuery()
{
	return npurtStreamQuery(0);
}

npurtError_t ptdsMemcpy(void *dst, const void *src, size_t n, npurtMemcpyKind kind)
{
	return npurtMemcpy(dst, src, n, kind);
}

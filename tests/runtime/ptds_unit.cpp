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

npurtError_t ptdsCaptureMemset(void *d, size_t n, npurtGraph_t *graph, unsigned long long *id)
{
	// CUDA's short forms: the capture calls on NULL (the thread's stream),
	// GetCaptureInfo with its defaulted outputs.
	npurtError_t err = npurtStreamBeginCapture(0, npurtStreamCaptureModeThreadLocal);
	if (err)
		return err;
	npurtStreamCaptureStatus status = npurtStreamCaptureStatusNone;
	if ((err = npurtStreamGetCaptureInfo(0, &status, id)) ||
	    status != npurtStreamCaptureStatusActive)
		return err ? err : npurtErrorUnknown;
	if ((err = npurtMemsetAsync(d, 0x11, n, 0))) {
		npurtStreamEndCapture(0, graph);
		return err;
	}
	return npurtStreamEndCapture(0, graph);
}

npurtError_t ptdsMemset2D(void *d, size_t pitch, int value, size_t width, size_t height)
{
	return npurtMemset2D(d, pitch, value, width, height);
}

npurtError_t ptdsMemset3DAsync(npurtPitchedPtr p, int value, npurtExtent e)
{
	return npurtMemset3DAsync(p, value, e, 0);
}

npurtError_t ptdsMemcpy3D(const npurtMemcpy3DParms *p)
{
	return npurtMemcpy3D(p);
}

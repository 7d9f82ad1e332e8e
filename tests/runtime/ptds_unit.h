// Calls made from ptds_unit.cpp, which is built with
// NPURT_API_PER_THREAD_DEFAULT_STREAM: their NULL stream is per-thread.
#pragma once

#include "npurt/npurt.h"

npurtError_t ptdsLaunchHostFunc(npurtHostFn_t fn, void *data);
npurtError_t ptdsMemsetAsync(void *d, int value, size_t n);
npurtError_t ptdsStreamQuery();
npurtError_t ptdsMemcpy(void *dst, const void *src, size_t n, npurtMemcpyKind kind);
// A capture of one memset on the thread's stream (NULL), ended: *graph.
npurtError_t ptdsCaptureMemset(void *d, size_t n, npurtGraph_t *graph, unsigned long long *id);
npurtError_t ptdsMemset2D(void *d, size_t pitch, int value, size_t width, size_t height);
npurtError_t ptdsMemset3DAsync(npurtPitchedPtr p, int value, npurtExtent e);
npurtError_t ptdsMemcpy3D(const npurtMemcpy3DParms *p);

/*
 * npurt_profiler_api.h - what CUDA code that includes <cuda_profiler_api.h>
 * gets after the cuda -> npurt rename: npurtProfilerStart and
 * npurtProfilerStop, which <npurt/npurt.h> declares (they start and stop
 * libnpurt's own trace; see npurtProfilerExportTrace).
 */
#ifndef NPURT_PROFILER_API_H
#define NPURT_PROFILER_API_H

#include "npurt/npurt.h"

#endif /* NPURT_PROFILER_API_H */

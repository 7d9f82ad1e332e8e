/*
 * npurt_runtime.h - what CUDA code that includes <cuda_runtime.h> gets after
 * the mechanical cuda -> npurt rename (tests/compat/port.sh): the C API of
 * <npurt/npurt.h> and the spellings of CUDA's CUDART_* macros.
 */
#ifndef NPURT_RUNTIME_H
#define NPURT_RUNTIME_H

#include "npurt/npurt.h"

/* CUDART_VERSION and CUDART_CB after the rename. */
#define NPURTRT_VERSION NPURT_VERSION
#define NPURTRT_CB

#ifdef __cplusplus
/* CUDA's launch-configuration type: ported code keeps computing grids and
 * blocks around its (replaced) kernel launches. */
struct dim3 {
	unsigned int x, y, z;
	constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
	    : x(vx), y(vy), z(vz)
	{}
};
#endif

#endif /* NPURT_RUNTIME_H */

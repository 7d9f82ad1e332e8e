// The ops the ported kernel launches become (tests/compat/port.sh): each
// CUDA kernel of these programs computes what one libnpurt op does.
#pragma once

#include <npurt/npurt.h>

#include <cstddef>

// out[i] = alpha * in[i]
inline npurtError_t opScale(float *out, const float *in, float alpha, size_t n, npurtStream_t s)
{
	npurtOpDesc d{};
	d.op = npurtOpScale;
	d.dtype = d.outDtype = npurtFloat32;
	d.a = in;
	d.out = out;
	d.n = n;
	d.alpha = alpha;
	return npurtLaunchOp(&d, s);
}

// c[i] = a[i] + b[i]
inline npurtError_t opAdd(float *c, const float *a, const float *b, size_t n, npurtStream_t s)
{
	npurtOpDesc d{};
	d.op = npurtOpAdd;
	d.dtype = d.outDtype = npurtFloat32;
	d.a = a;
	d.b = b;
	d.out = c;
	d.n = n;
	return npurtLaunchOp(&d, s);
}

// out[0] = sum of in[0..n)
inline npurtError_t opSum(float *out, const float *in, size_t n, npurtStream_t s)
{
	npurtOpDesc d{};
	d.op = npurtOpReduceSum;
	d.dtype = d.outDtype = npurtFloat32;
	d.a = in;
	d.out = out;
	d.m = 1;
	d.n = n;
	d.axis = 1;
	return npurtLaunchOp(&d, s);
}

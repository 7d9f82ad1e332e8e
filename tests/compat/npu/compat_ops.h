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

// Each of height rows of width floats, pitch bytes apart, scaled in place
// by alpha: a 2-D kernel over pitched memory is one op per row.
inline npurtError_t opScale2D(float *base, size_t pitch, float alpha, size_t width, size_t height,
                              npurtStream_t s)
{
	for (size_t y = 0; y < height; y++) {
		auto *row = reinterpret_cast<float *>(reinterpret_cast<char *>(base) + y * pitch);
		if (npurtError_t err = opScale(row, row, alpha, width, s))
			return err;
	}
	return npurtSuccess;
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

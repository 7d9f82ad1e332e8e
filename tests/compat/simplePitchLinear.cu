// simplePitchLinear: a 2-D array of floats in pitched device memory
// (cudaMallocPitch), cleared with cudaMemset2D, written and read with
// cudaMemcpy2D, scaled by a 2-D kernel and partly cleared again with
// cudaMemset2DAsync; then a volume (cudaMalloc3D, cudaMemset3D,
// cudaMemcpy3D of a box). The device is chosen with cudaChooseDevice and
// named by its PCI bus id, as multi-GPU programs log it.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "check.h"
#ifndef __CUDACC__
#include "compat_ops.h"
#endif

#ifdef __CUDACC__
__global__ void scaleRows(float *base, size_t pitch, int width, int height, float alpha)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x < width && y < height) {
		float *row = (float *)((char *)base + y * pitch);
		row[x] *= alpha;
	}
}
#endif

int main()
{
	cudaDeviceProp want;
	std::memset(&want, 0, sizeof(want));
	want.major = 1;
	int dev = -1;
	CHECK(cudaChooseDevice(&dev, &want));
	CHECK(cudaSetDevice(dev));
	char busId[32];
	CHECK(cudaDeviceGetPCIBusId(busId, sizeof(busId), dev));
	int back = -1;
	CHECK(cudaDeviceGetByPCIBusId(&back, busId));
	EXPECT(back == dev);
	std::printf("device %d, bus id %s\n", dev, busId);

	const int width = 300, height = 200;
	const size_t rowBytes = width * sizeof(float);
	float *d = nullptr;
	size_t pitch = 0;
	CHECK(cudaMallocPitch(&d, &pitch, rowBytes, height));
	EXPECT(pitch >= rowBytes);
	std::printf("%d rows of %zu bytes, pitch %zu\n", height, rowBytes, pitch);
	CHECK(cudaMemset2D(d, pitch, 0, rowBytes, height));

	std::vector<float> h(width * height), out(width * height);
	CHECK(cudaMemcpy2D(out.data(), rowBytes, d, pitch, rowBytes, height,
	                   cudaMemcpyDeviceToHost));
	for (float v : out)
		EXPECT(v == 0.0f);
	for (int y = 0; y < height; y++)
		for (int x = 0; x < width; x++)
			h[y * width + x] = (float)(y * width + x);
	CHECK(cudaMemcpy2D(d, pitch, h.data(), rowBytes, rowBytes, height,
	                   cudaMemcpyHostToDevice));

	cudaStream_t s;
	CHECK(cudaStreamCreate(&s));
	dim3 block(32, 8), grid((width + 31) / 32, (height + 7) / 8);
	scaleRows<<<grid, block, 0, s>>>(d, pitch, width, height, 2.0f); // npurt: CHECK(opScale2D(d, pitch, 2.0f, width, height, s));
	// Clear the first 10 columns of rows 50 to 99.
	CHECK(cudaMemset2DAsync((char *)d + 50 * pitch, pitch, 0, 10 * sizeof(float), 50, s));
	CHECK(cudaMemcpy2DAsync(out.data(), rowBytes, d, pitch, rowBytes, height,
	                        cudaMemcpyDeviceToHost, s));
	CHECK(cudaStreamSynchronize(s));

	int errors = 0;
	for (int y = 0; y < height; y++)
		for (int x = 0; x < width; x++) {
			float expect = (y >= 50 && y < 100 && x < 10) ? 0.0f : 2.0f * h[y * width + x];
			if (out[y * width + x] != expect && errors++ < 5)
				std::fprintf(stderr, "(%d, %d): %f, expected %f\n", x, y,
				             out[y * width + x], expect);
		}
	EXPECT(errors == 0);

	// A volume of 64 x 16 x 8 floats: cudaMalloc3D, cleared by
	// cudaMemset3D, filled from a dense host volume by cudaMemcpy3D, and a
	// 4 x 4 x 4 box at (8, 2, 3) read back.
	const int vx = 64, vy = 16, vz = 8;
	cudaExtent ext = make_cudaExtent(vx * sizeof(float), vy, vz);
	cudaPitchedPtr vol;
	CHECK(cudaMalloc3D(&vol, ext));
	EXPECT(vol.pitch >= ext.width && vol.xsize == ext.width && vol.ysize == (size_t)vy);
	CHECK(cudaMemset3D(vol, 0, ext));
	std::vector<float> hv(vx * vy * vz), box(4 * 4 * 4, -1.0f);
	for (size_t i = 0; i < hv.size(); i++)
		hv[i] = (float)i;
	cudaMemcpy3DParms in = {};
	in.srcPtr = make_cudaPitchedPtr(hv.data(), vx * sizeof(float), vx, vy);
	in.dstPtr = vol;
	in.extent = ext;
	in.kind = cudaMemcpyHostToDevice;
	CHECK(cudaMemcpy3D(&in));
	cudaMemcpy3DParms boxOut = {};
	boxOut.srcPtr = vol;
	boxOut.srcPos = make_cudaPos(8 * sizeof(float), 2, 3);
	boxOut.dstPtr = make_cudaPitchedPtr(box.data(), 4 * sizeof(float), 4, 4);
	boxOut.extent = make_cudaExtent(4 * sizeof(float), 4, 4);
	boxOut.kind = cudaMemcpyDeviceToHost;
	CHECK(cudaMemcpy3DAsync(&boxOut, s));
	CHECK(cudaStreamSynchronize(s));
	for (int z = 0; z < 4; z++)
		for (int y = 0; y < 4; y++)
			for (int x = 0; x < 4; x++)
				EXPECT(box[(z * 4 + y) * 4 + x] ==
				       hv[((z + 3) * vy + (y + 2)) * vx + (x + 8)]);
	CHECK(cudaFree(vol.ptr));

	CHECK(cudaStreamDestroy(s));
	CHECK(cudaFree(d));
	std::printf("simplePitchLinear: PASSED\n");
	return 0;
}

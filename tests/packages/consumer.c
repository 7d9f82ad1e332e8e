/*
 * A program an installed libnpurt-dev builds (with pkg-config): it finds the
 * NPUs, round-trips a buffer through device memory and reports a device
 * fault as an error, as a user of the render group.
 */
#include <npurt/npurt.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                            \
	do {                                                                                   \
		npurtError_t err_ = (call);                                                    \
		if (err_ != npurtSuccess) {                                                    \
			fprintf(stderr, "%s failed: %s: %s\n", #call, npurtGetErrorName(err_), \
			        npurtGetLastErrorMessage());                                   \
			return 1;                                                              \
		}                                                                              \
	} while (0)

int main(void)
{
	int count = 0, version = 0;
	unsigned char in[4096], out[4096];
	void *d = NULL;
	size_t i;

	CHECK(npurtGetDeviceCount(&count));
	CHECK(npurtRuntimeGetVersion(&version));
	printf("consumer (pkg-config): %d NPU(s), libnpurt %d\n", count, version);
	for (i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 + 1);
	CHECK(npurtMalloc(&d, sizeof(in)));
	CHECK(npurtMemcpy(d, in, sizeof(in), npurtMemcpyHostToDevice));
	CHECK(npurtMemcpy(out, d, sizeof(out), npurtMemcpyDeviceToHost));
	CHECK(npurtFree(d));
	if (memcmp(in, out, sizeof(in)) != 0) {
		fprintf(stderr, "the bytes came back wrong\n");
		return 1;
	}
	printf("PASS\n");
	return 0;
}

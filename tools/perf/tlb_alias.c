// rep movsb between two buffers at several distances: under QEMU TCG a
// distance that is a multiple of the software TLB's reach (8 MiB here)
// makes every access miss.
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "probe.h"

int main(void)
{
	const size_t sz = 4 << 20;
	const long offs[] = {8 << 20, (8 << 20) + 4096, 16 << 20, (13 << 20),
	                     (8 << 20) + (1 << 18)};
	char *base =
	        mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (base == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(base, 1, 64 << 20);
	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		double t0 = now(), t;

		for (int r = 0; r < 16; r++)
			for (size_t o = 0; o < sz; o += 4096)
				movsb(base + offs[k] + o, base + o, 4096);
		t = now() - t0;
		printf("dst - src = %#lx: %.2f GB/s\n", offs[k], 16.0 * sz / t / 1e9);
	}
	return 0;
}

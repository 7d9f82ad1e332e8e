// Copy loops over 4 MiB in chunks of 4 KiB, 64 KiB and 1 MiB, best of 5:
// the measurement behind the copy engine's choice of rep movsq (under
// QEMU TCG rep movsb, the kernel's memcpy with ERMS, is the slowest).
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

static void sse(void *d, const void *s, size_t n)
{
	__m128i *dv = d;
	const __m128i *sv = s;

	for (size_t i = 0; i < n / 16; i += 4) {
		__m128i a = _mm_load_si128(sv + i), b = _mm_load_si128(sv + i + 1);
		__m128i c = _mm_load_si128(sv + i + 2), e = _mm_load_si128(sv + i + 3);

		_mm_store_si128(dv + i, a);
		_mm_store_si128(dv + i + 1, b);
		_mm_store_si128(dv + i + 2, c);
		_mm_store_si128(dv + i + 3, e);
	}
}

__attribute__((target("avx2"))) static void avx2(void *d, const void *s, size_t n)
{
	__m256i *dv = d;
	const __m256i *sv = s;

	for (size_t i = 0; i < n / 32; i += 4) {
		__m256i a = _mm256_load_si256(sv + i), b = _mm256_load_si256(sv + i + 1);
		__m256i c = _mm256_load_si256(sv + i + 2), e = _mm256_load_si256(sv + i + 3);

		_mm256_store_si256(dv + i, a);
		_mm256_store_si256(dv + i + 1, b);
		_mm256_store_si256(dv + i + 2, c);
		_mm256_store_si256(dv + i + 3, e);
	}
}

static void glibc(void *d, const void *s, size_t n)
{
	memcpy(d, s, n);
}

int main(void)
{
	const size_t size = 4u << 20, chunks[] = {4096, 65536, 1u << 20};
	const struct {
		const char *name;
		void (*copy)(void *, const void *, size_t);
	} movers[] = {{"rep movsq", movsq},
	              {"rep movsb", movsb},
	              {"sse", sse},
	              {"avx2", avx2},
	              {"glibc memcpy", glibc}};
	// 37 pages apart: no two pages collide in the emulator's TLB.
	char *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, size + 37 * 4096);

	if (!src || !dst)
		return 1;
	dst += 37 * 4096;
	memset(src, 1, size);
	memset(dst, 2, size);
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		for (size_t m = 0; m < sizeof(movers) / sizeof(movers[0]); m++) {
			double best = 1e9;

			if (movers[m].copy == avx2 && !__builtin_cpu_supports("avx2"))
				continue;
			for (int rep = 0; rep < 5; rep++) {
				double t = now();

				for (size_t off = 0; off < size; off += chunks[c])
					movers[m].copy(dst + off, src + off, chunks[c]);
				t = now() - t;
				if (t < best)
					best = t;
			}
			printf("%-12s chunk %7zu: %.2f GB/s\n", movers[m].name, chunks[c],
			       size / best * 1e-9);
		}
	}
	return 0;
}

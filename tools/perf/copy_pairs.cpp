// Asynchronous pinned host-to-device copies of SIZE bytes through six
// freshly allocated buffer pairs: a pair whose pages collide in an
// emulator's software TLB copies slower than the others.
//
//   copy_pairs SIZE COPIES
#include <npurt/npurt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

static double now()
{
	timespec t{};
	clock_gettime(CLOCK_MONOTONIC, &t);
	return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], nullptr, 0) : 4u << 20;
	int copies = argc > 2 ? atoi(argv[2]) : 8;
	npurtStream_t st = nullptr;
	if (!size || copies < 1 || npurtStreamCreate(&st))
		return 2;
	// Earlier pairs stay allocated, so each pair gets new pages.
	for (int a = 0; a < 6; a++) {
		void *pin = nullptr, *dev = nullptr;
		if (npurtMallocHost(&pin, size) || npurtMalloc(&dev, size))
			return 1;
		memset(pin, 1, size);
		double best = 0, worst = 1e30;
		for (int r = 0; r < 3; r++) {
			double t0 = now();
			for (int i = 0; i < copies; i++)
				npurtMemcpyAsync(dev, pin, size, npurtMemcpyHostToDevice, st);
			if (npurtStreamSynchronize(st))
				return 1;
			double g = static_cast<double>(size) * copies / (now() - t0) / 1e9;
			best = g > best ? g : best;
			worst = g < worst ? g : worst;
		}
		printf("pair %d: %.2f..%.2f GB/s\n", a, worst, best);
	}
	return 0;
}

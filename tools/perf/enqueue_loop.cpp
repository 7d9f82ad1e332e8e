// Enqueue cost of npurtMemsetAsync (256 B) in a loop: microseconds per call
// and per completed op, on 1..4 streams.
//
//   enqueue_loop N STREAMS REPS
#include <npurt/npurt.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

static double now()
{
	timespec t{};
	clock_gettime(CLOCK_MONOTONIC, &t);
	return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int ns = argc > 2 ? atoi(argv[2]) : 1;
	int reps = argc > 3 ? atoi(argv[3]) : 3;
	if (n < 1 || ns < 1 || ns > 4 || reps < 1) {
		fprintf(stderr, "usage: enqueue_loop N STREAMS(1-4) REPS\n");
		return 2;
	}
	npurtStream_t s[4] = {};
	void *d = nullptr;
	for (int i = 0; i < ns; i++)
		if (npurtStreamCreate(&s[i]))
			return 1;
	if (npurtMalloc(&d, 256))
		return 1;
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		for (int i = 0; i < n; i++)
			npurtMemsetAsync(d, 1, 256, s[i % ns]);
		double t1 = now();
		for (int i = 0; i < ns; i++)
			if (npurtStreamSynchronize(s[i]))
				return 1;
		double t2 = now();
		printf("streams %d n %d: enqueue %.3f us/op, total %.3f us/op\n", ns, n,
		       (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6);
	}
	return 0;
}

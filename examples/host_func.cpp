// host_func: host functions in stream order, with the C++ layer (npurt.hpp):
// RAII streams and buffers, failed calls as npurt::Error exceptions.
//
// The device fills a buffer and copies it to pinned memory; a host function
// then checks it and writes the next input into pinned memory; the copy
// enqueued after the host function sends exactly that input.
#include <npurt/npurt.hpp>

#include <cstdio>
#include <cstring>
#include <functional>

namespace {

// Host functions take a C function pointer; this one runs a std::function.
void runFunction(void *f)
{
	(*static_cast<std::function<void()> *>(f))();
}

}  // namespace

int main()
try {
	if (npurt::deviceCount() == 0) {
		std::puts("no NPU");
		return 1;
	}
	const size_t n = 4 << 20;
	npurt::Stream s(0);  // a new stream of normal priority
	npurt::DeviceBuffer<unsigned char> a(n), b(n);
	npurt::HostBuffer<unsigned char> result(n), nextInput(n);  // pinned

	bool sawResult = false;
	std::function<void()> step = [&] {
		// The fill and the copy before this are done: the data is here.
		sawResult = true;
		for (size_t i = 0; i < n; i++)
			sawResult = sawResult && result[i] == 0x2a;
		// What this writes, the copy enqueued after it sends.
		std::memset(nextInput.data(), 0x17, n);
	};

	npurt::fillAsync(a.data(), 0x2a, n, s);
	npurt::copyAsync(result.data(), a.data(), n, s);
	npurt::hostFunc(s, runFunction, &step);
	npurt::copyAsync(b.data(), nextInput.data(), n, s);
	s.synchronize();

	unsigned char last = 0;
	npurt::check(npurtMemcpy(&last, b.data() + n - 1, 1, npurtMemcpyDeviceToHost));
	std::printf("host function saw the device's result: %s\n", sawResult ? "yes" : "no");
	std::printf("the copy after it sent what it wrote: 0x%02x (want 0x17)\n", last);

	// Failed calls throw npurt::Error with the runtime's message.
	try {
		npurt::hostFunc(s, nullptr, nullptr);
		std::puts("a NULL host function was accepted");
		return 1;
	} catch (const npurt::Error &e) {
		std::printf("caught as expected: %s\n", e.what());
	}
	return sawResult && last == 0x17 ? 0 : 1;
} catch (const npurt::Error &e) {
	std::fprintf(stderr, "%s\n", e.what());
	return 1;
}

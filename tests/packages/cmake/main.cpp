// A program an installed libnpurt-dev builds with CMake (find_package(npurt),
// npurt::npurt), through the header-only C++ layer: a fill on a stream, read
// back; a bad copy is an npurt::Error with the runtime's message.
#include <npurt/npurt.hpp>

#include <cstdio>
#include <vector>

int main()
{
	try {
		npurt::Stream s(0);
		npurt::DeviceBuffer<unsigned char> d(1 << 20);
		npurt::fillAsync(d.data(), 0x5a, d.size(), s);
		std::vector<unsigned char> host(d.size());
		npurt::copyAsync(host.data(), d.data(), d.size(), s);
		s.synchronize();
		for (unsigned char c : host)
			if (c != 0x5a) {
				std::fprintf(stderr, "the fill came back wrong\n");
				return 1;
			}
		try {
			npurt::copyAsync(host.data(), d.data(), d.size() + 1, s);
			std::fprintf(stderr, "an overrunning copy was not refused\n");
			return 1;
		} catch (const npurt::Error &e) {
			std::printf("consumer (CMake): refused as expected: %s\n", e.what());
		}
	} catch (const npurt::Error &e) {
		std::fprintf(stderr, "consumer (CMake): %s\n", e.what());
		return 1;
	}
	std::printf("PASS\n");
	return 0;
}

// A minimal PNG writer: 8-bit RGB, no filtering, the image data in zlib
// "stored" (uncompressed) deflate blocks. Enough for a plot of a few
// hundred kilobytes; every reader accepts it.
#include <algorithm>
#include <cstddef>
#include <cstdio>

#include "bench.h"

namespace bench {
namespace {

uint32_t crcTable[256];

void initCrc()
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crcTable[n] = c;
	}
}

uint32_t crc32(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = crcTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

void put32(std::vector<uint8_t> &v, uint32_t x)
{
	v.push_back(static_cast<uint8_t>(x >> 24));
	v.push_back(static_cast<uint8_t>(x >> 16));
	v.push_back(static_cast<uint8_t>(x >> 8));
	v.push_back(static_cast<uint8_t>(x));
}

// Appends a chunk: length, type, data, CRC of type and data.
void chunk(std::vector<uint8_t> &file, const char type[4], const std::vector<uint8_t> &data)
{
	put32(file, static_cast<uint32_t>(data.size()));
	size_t start = file.size();
	file.insert(file.end(), type, type + 4);
	file.insert(file.end(), data.begin(), data.end());
	put32(file, crc32(0, file.data() + start, file.size() - start));
}

// zlib stream of stored blocks.
std::vector<uint8_t> zlibStored(const std::vector<uint8_t> &raw)
{
	std::vector<uint8_t> z;
	z.reserve(raw.size() + raw.size() / 65535 * 5 + 16);
	z.push_back(0x78);  // deflate, 32 KiB window
	z.push_back(0x01);  // no dictionary; (0x78 << 8 | 0x01) % 31 == 0
	size_t off = 0;
	do {
		size_t n = std::min<size_t>(raw.size() - off, 65535);
		bool last = off + n == raw.size();
		z.push_back(last ? 1 : 0);  // BFINAL, BTYPE 00 (stored), padding
		z.push_back(static_cast<uint8_t>(n));
		z.push_back(static_cast<uint8_t>(n >> 8));
		z.push_back(static_cast<uint8_t>(~n));
		z.push_back(static_cast<uint8_t>(~n >> 8));
		z.insert(z.end(), raw.begin() + static_cast<ptrdiff_t>(off),
		         raw.begin() + static_cast<ptrdiff_t>(off + n));
		off += n;
	} while (off < raw.size());
	// Adler-32 of the uncompressed data, big-endian.
	uint32_t a = 1, b = 0;
	for (uint8_t c : raw) {
		a = (a + c) % 65521;
		b = (b + a) % 65521;
	}
	put32(z, b << 16 | a);
	return z;
}

}  // namespace

bool writePng(const std::string &path, int width, int height, const std::vector<uint8_t> &rgb)
{
	initCrc();
	const auto w = static_cast<size_t>(width), h = static_cast<size_t>(height);
	if (rgb.size() != w * h * 3)
		return false;
	// Each row: filter type 0 (none), then its pixels.
	std::vector<uint8_t> raw;
	raw.reserve((w * 3 + 1) * h);
	for (size_t y = 0; y < h; y++) {
		raw.push_back(0);
		raw.insert(raw.end(), rgb.begin() + static_cast<ptrdiff_t>(y * w * 3),
		           rgb.begin() + static_cast<ptrdiff_t>((y + 1) * w * 3));
	}
	std::vector<uint8_t> file = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	std::vector<uint8_t> ihdr;
	put32(ihdr, static_cast<uint32_t>(width));
	put32(ihdr, static_cast<uint32_t>(height));
	ihdr.push_back(8);  // bit depth
	ihdr.push_back(2);  // colour type: RGB
	ihdr.push_back(0);  // compression: deflate
	ihdr.push_back(0);  // filter method 0
	ihdr.push_back(0);  // no interlace
	chunk(file, "IHDR", ihdr);
	chunk(file, "IDAT", zlibStored(raw));
	chunk(file, "IEND", {});

	FILE *f = std::fopen(path.c_str(), "wb");
	if (!f)
		return false;
	bool ok = std::fwrite(file.data(), 1, file.size(), f) == file.size();
	return std::fclose(f) == 0 && ok;
}

}  // namespace bench

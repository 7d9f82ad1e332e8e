// The bandwidth plot: GB/s against copy size, log-log, one panel per
// direction, a line per memory kind and mode with min..max bars, drawn
// into an RGB raster with a 5x7 bitmap font and written as PNG.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "bench.h"

namespace bench {
namespace {

struct Rgb {
	uint8_t r, g, b;
};

// 5x7 glyphs, '#' set; letters are drawn upper-case.
struct Glyph {
	char c;
	const char *rows[7];
};

const Glyph kFont[] = {
        {' ', {".....", ".....", ".....", ".....", ".....", ".....", "....."}},
        {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
        {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
        {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
        {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
        {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
        {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
        {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
        {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
        {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
        {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
        {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
        {'B', {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."}},
        {'C', {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."}},
        {'D', {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."}},
        {'E', {"#####", "#....", "#....", "####.", "#....", "#....", "#####"}},
        {'F', {"#####", "#....", "#....", "####.", "#....", "#....", "#...."}},
        {'G', {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"}},
        {'H', {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
        {'I', {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
        {'J', {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
        {'K', {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"}},
        {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
        {'M', {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"}},
        {'N', {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"}},
        {'O', {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
        {'P', {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."}},
        {'Q', {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"}},
        {'R', {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"}},
        {'S', {".####", "#....", "#....", ".###.", "....#", "....#", "####."}},
        {'T', {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
        {'U', {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
        {'V', {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
        {'W', {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."}},
        {'X', {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"}},
        {'Y', {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."}},
        {'Z', {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"}},
        {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
        {',', {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
        {'-', {".....", ".....", ".....", "#####", ".....", ".....", "....."}},
        {'/', {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."}},
        {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
        {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
        {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
        {'%', {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"}},
        {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
        {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
        {'^', {"..#..", ".#.#.", "#...#", ".....", ".....", ".....", "....."}},
        {'>', {".#...", "..#..", "...#.", "....#", "...#.", "..#..", ".#..."}},
        {'<', {"...#.", "..#..", ".#...", "#....", ".#...", "..#..", "...#."}},
        {'_', {".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
        {'?', {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."}},
};

const Glyph &glyph(char c)
{
	c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
	for (const auto &g : kFont)
		if (g.c == c)
			return g;
	return kFont[sizeof(kFont) / sizeof(kFont[0]) - 1];
}

class Canvas {
public:
	Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<size_t>(w) * h * 3, 255) {}

	void set(int x, int y, Rgb c)
	{
		if (x < 0 || y < 0 || x >= w_ || y >= h_)
			return;
		size_t i = (static_cast<size_t>(y) * w_ + x) * 3;
		px_[i] = c.r;
		px_[i + 1] = c.g;
		px_[i + 2] = c.b;
	}
	void rect(int x0, int y0, int x1, int y1, Rgb c)
	{
		for (int y = y0; y <= y1; y++)
			for (int x = x0; x <= x1; x++)
				set(x, y, c);
	}
	void frame(int x0, int y0, int x1, int y1, Rgb c)
	{
		line(x0, y0, x1, y0, c, 1, false);
		line(x1, y0, x1, y1, c, 1, false);
		line(x1, y1, x0, y1, c, 1, false);
		line(x0, y1, x0, y0, c, 1, false);
	}
	// Bresenham; `thick` pixels wide; dashed: 7 on, 5 off.
	void line(int x0, int y0, int x1, int y1, Rgb c, int thick, bool dashed)
	{
		int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
		int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
		int err = dx + dy;
		for (int step = 0;; step++) {
			if (!dashed || step % 12 < 7)
				rect(x0 - thick / 2, y0 - thick / 2, x0 + (thick - 1) / 2,
				     y0 + (thick - 1) / 2, c);
			if (x0 == x1 && y0 == y1)
				break;
			int e2 = 2 * err;
			if (e2 >= dy) {
				err += dy;
				x0 += sx;
			}
			if (e2 <= dx) {
				err += dx;
				y0 += sy;
			}
		}
	}
	// Text with its top-left corner at (x, y); returns the width drawn.
	int text(int x, int y, const std::string &s, Rgb c, int scale = 1)
	{
		int x0 = x;
		for (char ch : s) {
			const Glyph &g = glyph(ch);
			for (int r = 0; r < 7; r++)
				for (int k = 0; k < 5; k++)
					if (g.rows[r][k] == '#')
						rect(x + k * scale, y + r * scale,
						     x + (k + 1) * scale - 1,
						     y + (r + 1) * scale - 1, c);
			x += 6 * scale;
		}
		return x - x0;
	}
	static int textWidth(const std::string &s, int scale = 1)
	{
		return static_cast<int>(s.size()) * 6 * scale;
	}
	const std::vector<uint8_t> &pixels() const { return px_; }

private:
	int w_, h_;
	std::vector<uint8_t> px_;
};

const Rgb kBlack{0, 0, 0}, kGrid{225, 225, 225}, kMinorGrid{242, 242, 242}, kAxis{90, 90, 90};

Rgb colourOf(const std::string &series)
{
	if (series.rfind("pageable", 0) == 0)
		return {225, 110, 0};
	if (series.rfind("pinned", 0) == 0)
		return {20, 80, 200};
	if (series.rfind("registered", 0) == 0)
		return {0, 150, 70};
	return {40, 40, 40};
}

bool dashedOf(const std::string &series)
{
	return series.find("sync") != std::string::npos &&
	       series.find("async") == std::string::npos;
}

std::string shortSize(size_t bytes)
{
	char buf[16];
	if (bytes >= GiB)
		std::snprintf(buf, sizeof(buf), "%zuG", bytes / GiB);
	else if (bytes >= MiB)
		std::snprintf(buf, sizeof(buf), "%zuM", bytes / MiB);
	else
		std::snprintf(buf, sizeof(buf), "%zuK", bytes / KiB);
	return buf;
}

std::string decadeLabel(int e)
{
	char buf[32];
	if (e >= 0)
		std::snprintf(buf, sizeof(buf), "%.0f", std::pow(10.0, e));
	else
		std::snprintf(buf, sizeof(buf), "%.*f", -e, std::pow(10.0, e));
	return buf;
}

}  // namespace

bool writePlot(const std::string &path)
{
	const auto &pts = plotPoints();
	if (pts.empty())
		return true;
	const int width = 1280, height = 600;
	Canvas cv(width, height);

	size_t minSize = SIZE_MAX, maxSize = 0;
	double lo = 1e300, hi = 0;
	for (const auto &p : pts) {
		minSize = std::min(minSize, p.size);
		maxSize = std::max(maxSize, p.size);
		if (p.gbps.min > 0)
			lo = std::min(lo, p.gbps.min);
		hi = std::max(hi, p.gbps.max);
	}
	if (hi <= 0)
		return true;
	lo = std::min(lo, hi);
	double lx0 = std::log2(static_cast<double>(minSize)),
	       lx1 = std::log2(static_cast<double>(maxSize));
	if (lx1 - lx0 < 1) {
		lx0 -= 1;
		lx1 += 1;
	}
	int e0 = static_cast<int>(std::floor(std::log10(lo))),
	    e1 = static_cast<int>(std::ceil(std::log10(hi)));
	if (e1 <= e0)
		e1 = e0 + 1;

	cv.text(20, 12,
	        "NPURT-BENCH: COPY BANDWIDTH VS SIZE (GB/S, LOG-LOG). BARS: MIN-MAX OVER RUNS. "
	        "SOLID: ASYNC, DASHED: SYNC.",
	        kBlack, 1);
	cv.text(20, 26,
	        "EACH FIGURE IS MEASURED IN THE SAME RUN AS THE GUEST MEMCPY OF THE SAME SIZE.",
	        kAxis, 1);

	struct Panel {
		bool h2d;
		int x0, y0, x1, y1;
	};
	const Panel panels[2] = {{true, 80, 60, 620, 470}, {false, 720, 60, 1260, 470}};
	for (const auto &pn : panels) {
		auto X = [&](size_t s) {
			double t = (std::log2(static_cast<double>(s)) - lx0) / (lx1 - lx0);
			return pn.x0 + static_cast<int>(std::lround(t * (pn.x1 - pn.x0)));
		};
		auto Y = [&](double v) {
			double t = (std::log10(std::max(v, 1e-300)) - e0) /
			           static_cast<double>(e1 - e0);
			t = std::clamp(t, -0.02, 1.02);
			return pn.y1 - static_cast<int>(std::lround(t * (pn.y1 - pn.y0)));
		};
		// Grid: decades and their 2..9 multiples; every size measured.
		for (int e = e0; e <= e1; e++) {
			for (int m = 2; m <= 9 && e < e1; m++) {
				int y = Y(m * std::pow(10.0, e));
				cv.line(pn.x0, y, pn.x1, y, kMinorGrid, 1, false);
			}
		}
		for (int e = e0; e <= e1; e++) {
			int y = Y(std::pow(10.0, e));
			cv.line(pn.x0, y, pn.x1, y, kGrid, 1, false);
			std::string l = decadeLabel(e);
			cv.text(pn.x0 - 8 - Canvas::textWidth(l), y - 3, l, kAxis);
		}
		for (size_t s = minSize; s <= maxSize; s *= 4) {
			int x = X(s);
			cv.line(x, pn.y0, x, pn.y1, kGrid, 1, false);
			std::string l = shortSize(s);
			cv.text(x - Canvas::textWidth(l) / 2, pn.y1 + 8, l, kAxis);
		}
		cv.frame(pn.x0, pn.y0, pn.x1, pn.y1, kAxis);
		std::string title = pn.h2d ? "HOST TO DEVICE" : "DEVICE TO HOST";
		cv.text((pn.x0 + pn.x1) / 2 - Canvas::textWidth(title, 2) / 2, pn.y0 - 20, title,
		        kBlack, 2);
		std::string xl = "COPY SIZE (BYTES)";
		cv.text((pn.x0 + pn.x1) / 2 - Canvas::textWidth(xl) / 2, pn.y1 + 24, xl, kBlack);
		cv.text(pn.x0 - 70, pn.y0 - 14, "GB/S", kBlack);

		std::map<std::string, std::vector<PlotPoint>> series;
		for (const auto &p : pts)
			if (p.h2d == pn.h2d)
				series[p.series].push_back(p);
		for (auto &[name, v] : series) {
			std::sort(v.begin(), v.end(), [](const PlotPoint &a, const PlotPoint &b) {
				return a.size < b.size;
			});
			Rgb c = colourOf(name);
			bool dashed = dashedOf(name);
			for (size_t i = 0; i + 1 < v.size(); i++)
				cv.line(X(v[i].size), Y(v[i].gbps.median), X(v[i + 1].size),
				        Y(v[i + 1].gbps.median), c, 2, dashed);
			for (const auto &p : v) {
				int x = X(p.size), y = Y(p.gbps.median);
				int ya = Y(p.gbps.min), yb = Y(p.gbps.max);
				cv.line(x, ya, x, yb, c, 1, false);
				cv.line(x - 3, ya, x + 3, ya, c, 1, false);
				cv.line(x - 3, yb, x + 3, yb, c, 1, false);
				if (dashed) {
					cv.frame(x - 3, y - 3, x + 3, y + 3, c);
				} else {
					cv.rect(x - 3, y - 3, x + 3, y + 3, c);
				}
			}
		}
	}

	// Legend.
	const char *legend[] = {"memcpy",      "pageable async",   "pageable sync",  "pinned async",
	                        "pinned sync", "registered async", "registered sync"};
	int lx = 80, ly = 530;
	for (const char *name : legend) {
		std::string n = name;
		Rgb c = colourOf(n);
		bool dashed = dashedOf(n);
		std::string label = n == "memcpy" ? "guest memcpy (the limit)" : n;
		int need = 42 + Canvas::textWidth(label) + 24;
		if (lx + need > width - 20) {
			lx = 80;
			ly += 24;
		}
		cv.line(lx, ly + 3, lx + 34, ly + 3, c, 2, dashed);
		if (dashed)
			cv.frame(lx + 14, ly, lx + 20, ly + 6, c);
		else
			cv.rect(lx + 14, ly, lx + 20, ly + 6, c);
		cv.text(lx + 42, ly, label, kBlack);
		lx += need;
	}
	return writePng(path, width, height, cv.pixels());
}

}  // namespace bench

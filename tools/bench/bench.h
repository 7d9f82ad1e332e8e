// npurt-bench: what the sections share (options, timing, figures, output).
//
// Every figure is a series of samples, one per run; the table shows its
// median, min and max next to the limit it is measured against in the same
// run, and the ratio of the two (per run when both were sampled in the same
// runs, else median / median with the widest min..max).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "npurt/npurt.h"

namespace bench {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t GiB = 1024 * MiB;

struct Options {
	std::vector<std::string> only;  // empty: every section
	int runs = 5;
	size_t maxSize = 256 * MiB;
	std::string out;  // folder for JSON, CSV and PNG; empty: none
	bool quick = false;
	bool want(const char *section) const;
};

// Seconds on the monotonic clock, and process CPU time (user + system,
// every thread of the process) in seconds.
double now();
// Microseconds one read of the monotonic clock (now()) takes.
double clockUs();
double cpuSeconds();

// Prints the runtime's error and exits 1 unless err is npurtSuccess.
void check(npurtError_t err, const char *what);
// Prints "npurt-bench: MESSAGE" and exits 1.
[[noreturn]] void fail(const std::string &message);

struct Stats {
	double median = 0, min = 0, max = 0;
	bool valid = false;
};
Stats stats(std::vector<double> samples);
// a / b: per sample when both have the same number, else median / median
// with min = a.min / b.max and max = a.max / b.min.
Stats ratioStats(const std::vector<double> &a, const std::vector<double> &b);

// Runs sample() n times.
std::vector<double> repeat(int n, const std::function<double()> &sample);

struct Figure {
	std::string section, name, unit;
	Stats value;
	std::vector<double> samples;
	std::string limitName, limitUnit;  // empty: no limit
	Stats limit;
	Stats ratio;  // value / limit
	std::string note;
};

// Records a figure (and returns its index in figures()).
size_t addFigure(const std::string &section, const std::string &name, const std::string &unit,
                 const std::vector<double> &samples, const std::string &note = "");
// Records a figure with the limit it is measured against and their ratio.
size_t addFigure(const std::string &section, const std::string &name, const std::string &unit,
                 const std::vector<double> &samples, const std::string &limitName,
                 const std::string &limitUnit, const std::vector<double> &limit,
                 const std::string &note = "");
std::vector<Figure> &figures();
const Figure *findFigure(const std::string &section, const std::string &name);

// A point of the bandwidth plot: one series per (direction, memory, mode).
struct PlotPoint {
	bool h2d = true;
	std::string series;  // "memcpy", "pinned async", ...
	size_t size = 0;
	Stats gbps;
};
void addPlotPoint(const PlotPoint &p);
const std::vector<PlotPoint> &plotPoints();

// A goal: figure `value` compared with `target` (>= or <=).
struct Goal {
	std::string text, measured;
	Stats value;
	bool atLeast = true;
	double target = 0;
	std::string bound;  // for a miss: what bounds it, as measured
};
void addGoal(const Goal &g);
const std::vector<Goal> &goals();

// Lines printed after the table (the seed comparison, notes).
void addNote(const std::string &line);
const std::vector<std::string> &notes();

// The render node's null ioctl (DRM_IOCTL_NPU_QUERY with size 0), measured
// once per run set and shared by the launch, latency and graph sections:
// seconds per call, one sample per run.
const std::vector<double> &nullIoctl(const Options &o);

// The profiler's device time for one kind of task ("copy", "fill", "add",
// "gemm"...) since npurtProfilerStart, from npurtProfilerSummary.
struct EngineTime {
	uint64_t tasks = 0, bytes = 0;
	double seconds = 0;
};
EngineTime profiledKind(const char *kind);
// The device spans (start and duration, microseconds of the device clock)
// of the profiled tasks of one kind, in start order, from the profiler's
// trace export.
struct Span {
	double start = 0, dur = 0;
};
std::vector<Span> profiledSpans(const char *kind);
// Medians of the engine's idle gaps between consecutive spans.
double medianGap(const std::vector<Span> &spans);

// Guest CPU parallelism: a memcpy loop on two threads at once against the
// same work on one thread after the other (1 = none, 0.5 = two full CPUs).
double cpuParallelSample(double seconds);

// Sections.
void benchCopy(const Options &o);
void benchLaunch(const Options &o);
void benchLatency(const Options &o);
void benchGraph(const Options &o);
void benchAlloc(const Options &o);
void benchOverlap(const Options &o);
void benchOps(const Options &o);
void benchPeer(const Options &o);

// Output.
void printTable();
void printGoals();
bool writeJson(const std::string &path);
bool writeCsv(const std::string &path);
bool writePlot(const std::string &path);

// A PNG image (8-bit RGB) written with stored deflate blocks.
bool writePng(const std::string &path, int width, int height, const std::vector<uint8_t> &rgb);

std::string fmt(double v);
// The parts one after the other.
std::string join(std::initializer_list<std::string_view> parts);
std::string sizeName(size_t bytes);

}  // namespace bench

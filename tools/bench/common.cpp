// npurt-bench: timing, statistics and the record of figures and goals.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench.h"
#include "raw.h"

namespace bench {
namespace {

std::vector<Figure> gFigures;
std::vector<PlotPoint> gPlot;
std::vector<Goal> gGoals;
std::vector<std::string> gNotes;

}  // namespace

bool Options::want(const char *section) const
{
	return only.empty() || std::find(only.begin(), only.end(), section) != only.end();
}

double now()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double cpuSeconds()
{
	rusage ru{};
	getrusage(RUSAGE_SELF, &ru);
	auto tv = [](const timeval &t) {
		return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
	};
	return tv(ru.ru_utime) + tv(ru.ru_stime);
}

void check(npurtError_t err, const char *what)
{
	if (err == npurtSuccess)
		return;
	const char *msg = npurtGetLastErrorMessage();
	std::fprintf(stderr, "npurt-bench: %s: %s: %s\n", what, npurtGetErrorName(err),
	             msg && *msg ? msg : npurtGetErrorString(err));
	std::exit(1);
}

void fail(const std::string &message)
{
	std::fprintf(stderr, "npurt-bench: %s\n", message.c_str());
	std::exit(1);
}

Stats stats(std::vector<double> samples)
{
	Stats s;
	if (samples.empty())
		return s;
	std::sort(samples.begin(), samples.end());
	size_t n = samples.size();
	s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
	s.min = samples.front();
	s.max = samples.back();
	s.valid = true;
	return s;
}

Stats ratioStats(const std::vector<double> &a, const std::vector<double> &b)
{
	if (a.empty() || b.empty())
		return {};
	if (a.size() == b.size()) {
		std::vector<double> r(a.size());
		for (size_t i = 0; i < a.size(); i++)
			r[i] = a[i] / b[i];
		return stats(r);
	}
	Stats x = stats(a), y = stats(b);
	Stats r;
	r.median = x.median / y.median;
	r.min = x.min / y.max;
	r.max = x.max / y.min;
	r.valid = true;
	return r;
}

double clockUs()
{
	const int n = 2000;
	double t0 = now(), t = 0;
	for (int i = 0; i < n; i++)
		t += now();
	double dt = now() - t0;
	return t > 0 ? dt / n * 1e6 : 0;
}

std::vector<double> repeat(int n, const std::function<double()> &sample)
{
	std::vector<double> v;
	v.reserve(static_cast<size_t>(n));
	for (int i = 0; i < n; i++)
		v.push_back(sample());
	return v;
}

size_t addFigure(const std::string &section, const std::string &name, const std::string &unit,
                 const std::vector<double> &samples, const std::string &note)
{
	Figure f;
	f.section = section;
	f.name = name;
	f.unit = unit;
	f.samples = samples;
	f.value = stats(samples);
	f.note = note;
	gFigures.push_back(std::move(f));
	return gFigures.size() - 1;
}

size_t addFigure(const std::string &section, const std::string &name, const std::string &unit,
                 const std::vector<double> &samples, const std::string &limitName,
                 const std::string &limitUnit, const std::vector<double> &limit,
                 const std::string &note)
{
	size_t i = addFigure(section, name, unit, samples, note);
	Figure &f = gFigures[i];
	f.limitName = limitName;
	f.limitUnit = limitUnit;
	f.limit = stats(limit);
	f.ratio = ratioStats(samples, limit);
	return i;
}

std::vector<Figure> &figures()
{
	return gFigures;
}

const Figure *findFigure(const std::string &section, const std::string &name)
{
	for (const auto &f : gFigures)
		if (f.section == section && f.name == name)
			return &f;
	return nullptr;
}

void addPlotPoint(const PlotPoint &p)
{
	gPlot.push_back(p);
}

const std::vector<PlotPoint> &plotPoints()
{
	return gPlot;
}

void addGoal(const Goal &g)
{
	gGoals.push_back(g);
}

const std::vector<Goal> &goals()
{
	return gGoals;
}

void addNote(const std::string &line)
{
	gNotes.push_back(line);
}

const std::vector<std::string> &notes()
{
	return gNotes;
}

const std::vector<double> &nullIoctl(const Options &o)
{
	static std::vector<double> samples;
	if (!samples.empty())
		return samples;
	RawDevice dev;
	const int n = o.quick ? 5000 : 20000;
	for (int i = 0; i < 1000; i++)
		dev.nullIoctl();
	samples = repeat(o.runs, [&] {
		double t0 = now();
		for (int i = 0; i < n; i++)
			dev.nullIoctl();
		return (now() - t0) / n;
	});
	std::vector<double> us(samples.size());
	std::transform(samples.begin(), samples.end(), us.begin(),
	               [](double s) { return s * 1e6; });
	addFigure("limits", "null ioctl (DRM_IOCTL_NPU_QUERY, size 0)", "us", us,
	          "the unit of the launch and latency limits");
	return samples;
}

EngineTime profiledKind(const char *kind)
{
	size_t needed = 0;
	check(npurtProfilerSummary(nullptr, 0, &needed), "profiler summary");
	std::vector<char> buf(needed + 1);
	check(npurtProfilerSummary(buf.data(), buf.size(), &needed), "profiler summary");
	// "time per op kind:" then one line per kind until the next heading:
	//   KIND  N tasks  X ms  B bytes
	EngineTime t;
	std::string text(buf.data());
	size_t at = text.find("time per op kind:");
	if (at == std::string::npos)
		return t;
	size_t pos = text.find('\n', at);
	while (pos != std::string::npos && pos + 1 < text.size() && text[pos + 1] == ' ') {
		size_t end = text.find('\n', pos + 1);
		std::string line =
		        text.substr(pos + 1, end == std::string::npos ? end : end - pos - 1);
		char name[64] = "";
		unsigned long long tasks = 0, bytes = 0;
		double ms = 0;
		if (std::sscanf(line.c_str(), " %63s %llu tasks %lf ms %llu bytes", name, &tasks,
		                &ms, &bytes) == 4 &&
		    std::string(name) == kind) {
			t.tasks = tasks;
			t.bytes = bytes;
			t.seconds = ms * 1e-3;
		}
		pos = end;
	}
	return t;
}

std::vector<Span> profiledSpans(const char *kind)
{
	const char *dir = std::getenv("TMPDIR");
	std::string path = std::string(dir && *dir ? dir : "/tmp") + "/npurt-bench-XXXXXX";
	std::vector<char> name(path.begin(), path.end());
	name.push_back('\0');
	int fd = mkstemp(name.data());
	if (fd < 0)
		fail("temporary file " + path + ": " + std::strerror(errno));
	close(fd);
	check(npurtProfilerExportTrace(name.data()), "profiler trace");
	std::ifstream in(name.data());
	std::stringstream text;
	text << in.rdbuf();
	unlink(name.data());
	// One event per line: {"ph": "X", ..., "cat": "copy", ..., "ts": T, "dur": D, ...}
	std::vector<Span> spans;
	std::string line, cat = std::string("\"cat\": \"") + kind + "\"";
	while (std::getline(text, line)) {
		if (line.find("\"ph\": \"X\"") == std::string::npos ||
		    line.find(cat) == std::string::npos)
			continue;
		size_t ts = line.find("\"ts\": "), dur = line.find("\"dur\": ");
		if (ts == std::string::npos || dur == std::string::npos)
			continue;
		spans.push_back({std::strtod(line.c_str() + ts + 6, nullptr),
		                 std::strtod(line.c_str() + dur + 7, nullptr)});
	}
	std::sort(spans.begin(), spans.end(),
	          [](const Span &a, const Span &b) { return a.start < b.start; });
	return spans;
}

double medianGap(const std::vector<Span> &spans)
{
	std::vector<double> gaps;
	for (size_t i = 1; i < spans.size(); i++)
		gaps.push_back(spans[i].start - (spans[i - 1].start + spans[i - 1].dur));
	return gaps.empty() ? std::nan("") : stats(gaps).median;
}

double cpuParallelSample(double seconds)
{
	const size_t bytes = 1 << 20;
	std::vector<char> a(bytes * 4, 1), b(bytes * 4);
	auto work = [&](size_t at, int n) {
		for (int i = 0; i < n; i++) {
			std::memcpy(b.data() + at, a.data() + at, bytes);
			asm volatile("" ::: "memory");
		}
	};
	double t0 = now();
	work(0, 4);
	int n = std::max(1, static_cast<int>(seconds / 2 / std::max(now() - t0, 1e-6) * 4));
	t0 = now();
	work(0, n);
	work(2 * bytes, n);
	double serial = now() - t0;
	t0 = now();
	std::thread t([&] { work(2 * bytes, n); });
	work(0, n);
	t.join();
	return (now() - t0) / serial;
}

std::string fmt(double v)
{
	char buf[32];
	if (!std::isfinite(v))
		return "-";
	if (std::fabs(v) >= 1e4)
		std::snprintf(buf, sizeof(buf), "%.0f", v);
	else
		std::snprintf(buf, sizeof(buf), "%.4g", v);
	return buf;
}

std::string join(std::initializer_list<std::string_view> parts)
{
	std::string out;
	for (std::string_view p : parts)
		out += p;
	return out;
}

std::string sizeName(size_t bytes)
{
	char buf[32];
	if (bytes >= GiB && bytes % GiB == 0)
		std::snprintf(buf, sizeof(buf), "%zu GiB", bytes / GiB);
	else if (bytes >= MiB && bytes % MiB == 0)
		std::snprintf(buf, sizeof(buf), "%zu MiB", bytes / MiB);
	else if (bytes >= KiB && bytes % KiB == 0)
		std::snprintf(buf, sizeof(buf), "%zu KiB", bytes / KiB);
	else
		std::snprintf(buf, sizeof(buf), "%zu B", bytes);
	return buf;
}

}  // namespace bench

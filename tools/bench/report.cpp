// npurt-bench output: the table, the goals, JSON and CSV.
#include <cmath>
#include <cstdio>

#include "bench.h"

namespace bench {
namespace {

std::string jsonString(const std::string &s)
{
	std::string out = "\"";
	for (char c : s) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += c;
		} else if (static_cast<unsigned char>(c) < 0x20) {
			char buf[8];
			std::snprintf(buf, sizeof(buf), "\\u%04x", c);
			out += buf;
		} else {
			out += c;
		}
	}
	return out + "\"";
}

std::string jsonNumber(double v)
{
	if (!std::isfinite(v))
		return "null";
	char buf[32];
	std::snprintf(buf, sizeof(buf), "%.6g", v);
	return buf;
}

std::string jsonStats(const Stats &s)
{
	if (!s.valid)
		return "null";
	return "{\"median\": " + jsonNumber(s.median) + ", \"min\": " + jsonNumber(s.min) +
	       ", \"max\": " + jsonNumber(s.max) + "}";
}

std::string csvField(const std::string &s)
{
	std::string out = "\"";
	for (char c : s) {
		if (c == '"')
			out += '"';
		out += c;
	}
	return out + "\"";
}

std::string csvNumber(const Stats &s, double Stats::*field)
{
	return s.valid ? jsonNumber(s.*field) : "";
}

void printFigure(const Figure &f)
{
	std::string limitName = f.limitName.empty() ? "-" : f.limitName;
	std::printf("%-54s %9s %9s %9s %-5s | %-26s %9s %-5s | %7s %7s %7s  %s\n", f.name.c_str(),
	            fmt(f.value.median).c_str(), fmt(f.value.min).c_str(), fmt(f.value.max).c_str(),
	            f.unit.c_str(), limitName.c_str(),
	            f.limit.valid ? fmt(f.limit.median).c_str() : "",
	            f.limitName.empty() ? "" : f.limitUnit.c_str(),
	            f.ratio.valid ? fmt(f.ratio.median).c_str() : "",
	            f.ratio.valid ? fmt(f.ratio.min).c_str() : "",
	            f.ratio.valid ? fmt(f.ratio.max).c_str() : "", f.note.c_str());
}

bool passes(const Goal &g)
{
	return g.value.valid &&
	       (g.atLeast ? g.value.median >= g.target : g.value.median <= g.target);
}

}  // namespace

void printTable()
{
	for (const char *section :
	     {"limits", "copy", "launch", "latency", "graph", "alloc", "overlap", "ops", "peer"}) {
		bool header = false;
		for (const auto &f : figures()) {
			if (f.section != section)
				continue;
			if (!header) {
				header = true;
				std::printf("\n[%s]\n", section);
				std::printf("%-54s %9s %9s %9s %-5s | %-26s %9s %-5s | %7s %7s %7s "
				            " %s\n",
				            "figure", "median", "min", "max", "unit",
				            "limit (same run)", "median", "unit", "ratio", "min",
				            "max", "note");
			}
			printFigure(f);
		}
	}
}

void printGoals()
{
	if (goals().empty())
		return;
	std::printf("\n[goals] (medians over runs of ratios measured in this run; [min..max])\n");
	for (const auto &g : goals()) {
		std::printf("%-4s  %s\n", passes(g) ? "PASS" : "MISS", g.text.c_str());
		std::printf("      measured %s [%s..%s] (%s); target %s %s\n",
		            fmt(g.value.median).c_str(), fmt(g.value.min).c_str(),
		            fmt(g.value.max).c_str(), g.measured.c_str(),
		            g.atLeast ? ">=" : "<=", fmt(g.target).c_str());
		if (!passes(g) && !g.bound.empty())
			std::printf("      bound: %s\n", g.bound.c_str());
	}
}

bool writeJson(const std::string &path)
{
	FILE *f = std::fopen(path.c_str(), "w");
	if (!f)
		return false;
	std::fprintf(f, "{\n  \"figures\": [\n");
	const auto &figs = figures();
	for (size_t i = 0; i < figs.size(); i++) {
		const auto &g = figs[i];
		std::string samples;
		for (size_t k = 0; k < g.samples.size(); k++)
			samples += (k ? ", " : "") + jsonNumber(g.samples[k]);
		std::fprintf(
		        f,
		        "    {\"section\": %s, \"figure\": %s, \"unit\": %s, \"median\": %s, "
		        "\"min\": %s, \"max\": %s, \"samples\": [%s], \"limit\": %s, "
		        "\"limit_unit\": %s, \"limit_stats\": %s, \"ratio\": %s, \"note\": %s}%s\n",
		        jsonString(g.section).c_str(), jsonString(g.name).c_str(),
		        jsonString(g.unit).c_str(), jsonNumber(g.value.median).c_str(),
		        jsonNumber(g.value.min).c_str(), jsonNumber(g.value.max).c_str(),
		        samples.c_str(),
		        g.limitName.empty() ? "null" : jsonString(g.limitName).c_str(),
		        g.limitName.empty() ? "null" : jsonString(g.limitUnit).c_str(),
		        jsonStats(g.limit).c_str(), jsonStats(g.ratio).c_str(),
		        jsonString(g.note).c_str(), i + 1 < figs.size() ? "," : "");
	}
	std::fprintf(f, "  ],\n  \"goals\": [\n");
	const auto &gs = goals();
	for (size_t i = 0; i < gs.size(); i++) {
		const auto &g = gs[i];
		std::fprintf(f,
		             "    {\"goal\": %s, \"pass\": %s, \"measured\": %s, \"value\": %s, "
		             "\"target\": %s, \"at_least\": %s, \"bound\": %s}%s\n",
		             jsonString(g.text).c_str(), passes(g) ? "true" : "false",
		             jsonString(g.measured).c_str(), jsonStats(g.value).c_str(),
		             jsonNumber(g.target).c_str(), g.atLeast ? "true" : "false",
		             jsonString(g.bound).c_str(), i + 1 < gs.size() ? "," : "");
	}
	std::fprintf(f, "  ],\n  \"notes\": [\n");
	const auto &ns = notes();
	for (size_t i = 0; i < ns.size(); i++)
		std::fprintf(f, "    %s%s\n", jsonString(ns[i]).c_str(),
		             i + 1 < ns.size() ? "," : "");
	std::fprintf(f, "  ]\n}\n");
	return std::fclose(f) == 0;
}

bool writeCsv(const std::string &path)
{
	FILE *f = std::fopen(path.c_str(), "w");
	if (!f)
		return false;
	std::fprintf(f, "section,figure,unit,median,min,max,limit,limit_unit,limit_median,"
	                "limit_min,limit_max,ratio_median,ratio_min,ratio_max,note\n");
	for (const auto &g : figures())
		std::fprintf(f, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
		             csvField(g.section).c_str(), csvField(g.name).c_str(),
		             csvField(g.unit).c_str(), csvNumber(g.value, &Stats::median).c_str(),
		             csvNumber(g.value, &Stats::min).c_str(),
		             csvNumber(g.value, &Stats::max).c_str(), csvField(g.limitName).c_str(),
		             csvField(g.limitUnit).c_str(),
		             csvNumber(g.limit, &Stats::median).c_str(),
		             csvNumber(g.limit, &Stats::min).c_str(),
		             csvNumber(g.limit, &Stats::max).c_str(),
		             csvNumber(g.ratio, &Stats::median).c_str(),
		             csvNumber(g.ratio, &Stats::min).c_str(),
		             csvNumber(g.ratio, &Stats::max).c_str(), csvField(g.note).c_str());
	return std::fclose(f) == 0;
}

}  // namespace bench

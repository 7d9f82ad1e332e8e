#include "alloc_config.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <vector>

namespace npurt {

namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kMinBlock = 512;
// PyTorch's floor for max_split_size_mb: the large pool's shared segment.
constexpr uint64_t kMinMaxSplitMb = 20;

std::string trim(const std::string &s)
{
	size_t b = s.find_first_not_of(" \t");
	if (b == std::string::npos)
		return {};
	size_t e = s.find_last_not_of(" \t");
	return s.substr(b, e - b + 1);
}

// A whole decimal number, nothing else.
bool parseUnsigned(const std::string &s, uint64_t *out)
{
	if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
		return false;
	errno = 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(s.c_str(), &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool isPowerOfTwo(uint64_t v)
{
	return v && !(v & (v - 1));
}

// Splits at commas outside brackets.
std::vector<std::string> splitTop(const std::string &text)
{
	std::vector<std::string> parts;
	std::string cur;
	int depth = 0;
	for (char ch : text) {
		if (ch == '[')
			depth++;
		else if (ch == ']')
			depth--;
		if (ch == ',' && depth == 0) {
			parts.push_back(cur);
			cur.clear();
		} else {
			cur += ch;
		}
	}
	parts.push_back(cur);
	return parts;
}

// Sets *error to the parts joined and returns false (one string built, not
// a temporary per '+').
template <typename... Parts> bool fail(std::string *error, const Parts &...parts)
{
	error->clear();
	(error->append(parts), ...);
	return false;
}

bool parseDivisions(const std::string &value, AllocatorConfig *cfg, std::string *error)
{
	auto &div = cfg->divisions;
	const std::string what = "roundup_power2_divisions: ";
	if (value.empty() || value[0] != '[') {
		uint64_t n = 0;
		if (!parseUnsigned(value, &n) || !isPowerOfTwo(n) || n > (1u << 20)) {
			return fail(error, what, "'", value,
			            "' is not a power of two up to 1048576");
		}
		div.fill(static_cast<uint32_t>(n));
		return true;
	}
	if (value.back() != ']') {
		return fail(error, what, "the list '", value, "' does not end with ']'");
	}
	std::vector<std::string> items = splitTop(value.substr(1, value.size() - 2));
	if (items.size() == 1 && trim(items[0]).empty()) {
		return fail(error, what, "the list is empty");
	}
	int last = -1;  // the interval of the last size key
	bool sawRest = false;
	for (const std::string &raw : items) {
		std::string item = trim(raw);
		size_t colon = item.find(':');
		if (colon == std::string::npos) {
			return fail(error, what, "the list entry '", item,
			            "' is not SIZE_MB:DIVISIONS");
		}
		std::string key = trim(item.substr(0, colon));
		std::string val = trim(item.substr(colon + 1));
		uint64_t n = 0;
		if (!parseUnsigned(val, &n) || !isPowerOfTwo(n) || n > (1u << 20)) {
			return fail(error, what, "the divisions '", val, "' of '", key,
			            "' is not a power of two up to 1048576");
		}
		if (sawRest) {
			return fail(error, what, "'>' must be the list's last entry");
		}
		if (key == ">") {
			for (size_t i = last < 0 ? 0 : static_cast<size_t>(last) + 1;
			     i < div.size(); i++)
				div[i] = static_cast<uint32_t>(n);
			sawRest = true;
			continue;
		}
		uint64_t mb = 0;
		if (!parseUnsigned(key, &mb) || !isPowerOfTwo(mb)) {
			return fail(error, what, "the size '", key,
			            "' is not a power of two (MiB) or '>'");
		}
		int idx = std::min<int>(std::countr_zero(mb), AllocatorConfig::kIntervals - 1);
		if (idx <= last) {
			return fail(error, what, "the sizes must increase ('", key, "')");
		}
		// Sizes before the first key take its value; each key's value
		// holds up to the next key.
		for (size_t i = last < 0 ? 0 : static_cast<size_t>(idx); i < div.size(); i++)
			div[i] = static_cast<uint32_t>(n);
		last = idx;
	}
	return true;
}

bool parseBool(const std::string &value, bool *out)
{
	if (value == "True" || value == "true" || value == "1") {
		*out = true;
		return true;
	}
	if (value == "False" || value == "false" || value == "0") {
		*out = false;
		return true;
	}
	return false;
}

std::mutex gConfigMutex;
AllocatorConfig gConfig;
std::atomic<uint64_t> gConfigGeneration{1};

}  // namespace

size_t AllocatorConfig::roundSize(size_t size) const
{
	if (size < kMinBlock)
		return kMinBlock;
	int log = std::bit_width(size) - 1;
	int idx = std::clamp(log - 20, 0, static_cast<int>(kIntervals) - 1);
	uint64_t d = divisions[static_cast<size_t>(idx)];
	// Past half the range rounding up could overflow; no device has that.
	if (d > 1 && size > kMinBlock * d && size <= SIZE_MAX / 2 && !isPowerOfTwo(size)) {
		size_t floor2 = size_t{1} << log;
		size_t step = floor2 / d;
		if (step >= kMinBlock)
			return (size + step - 1) / step * step;
	}
	return (size + kMinBlock - 1) / kMinBlock * kMinBlock;
}

bool parseAllocatorConfig(const std::string &text, AllocatorConfig *out, std::string *error)
{
	AllocatorConfig cfg;
	bool seen[4] = {};
	for (const std::string &raw : splitTop(text)) {
		std::string item = trim(raw);
		if (item.empty()) {
			if (trim(text).empty())
				break;  // an empty setting: the defaults
			*error = "an empty entry in '" + text + "'";
			return false;
		}
		size_t colon = item.find(':');
		if (colon == std::string::npos) {
			*error = "'" + item + "' is not key:value";
			return false;
		}
		std::string key = trim(item.substr(0, colon));
		std::string value = trim(item.substr(colon + 1));
		int k = -1;
		if (key == "expandable_segments") {
			k = 0;
			if (!parseBool(value, &cfg.expandableSegments)) {
				*error =
				        "expandable_segments: '" + value + "' is not True or False";
				return false;
			}
		} else if (key == "max_split_size_mb") {
			k = 1;
			uint64_t mb = 0;
			if (!parseUnsigned(value, &mb) || mb <= kMinMaxSplitMb) {
				*error = "max_split_size_mb: '" + value +
				         "' is not a whole number of MiB above 20";
				return false;
			}
			cfg.maxSplitSize = mb > std::numeric_limits<size_t>::max() / kMiB
			                           ? std::numeric_limits<size_t>::max()
			                           : mb * kMiB;
		} else if (key == "garbage_collection_threshold") {
			k = 2;
			// strtod sets end; an empty value leaves it at the start.
			const char *start = value.c_str();
			char *end = nullptr;
			errno = 0;
			double v = std::strtod(start, &end);
			if (end == nullptr || end == start || errno || *end || !(v > 0 && v < 1)) {
				*error = "garbage_collection_threshold: '" + value +
				         "' is not a number between 0 and 1 (both excluded)";
				return false;
			}
			cfg.gcThreshold = v;
		} else if (key == "roundup_power2_divisions") {
			k = 3;
			if (!parseDivisions(value, &cfg, error))
				return false;
		} else {
			*error = "unknown key '" + key +
			         "' (known: expandable_segments, max_split_size_mb, "
			         "garbage_collection_threshold, roundup_power2_divisions)";
			return false;
		}
		if (seen[k]) {
			*error = "'" + key + "' is given twice";
			return false;
		}
		seen[k] = true;
	}
	*out = cfg;
	return true;
}

std::string formatAllocatorConfig(const AllocatorConfig &config)
{
	std::string out = std::string("expandable_segments:") +
	                  (config.expandableSegments ? "True" : "False") +
	                  ",max_split_size_mb:" + std::to_string(config.maxSplitSize / kMiB);
	if (config.gcThreshold > 0) {
		char buf[32];
		std::snprintf(buf, sizeof(buf), "%.17g", config.gcThreshold);
		out += std::string(",garbage_collection_threshold:") + buf;
	}
	const auto &div = config.divisions;
	auto on = [](uint32_t d) { return d > 1; };
	if (std::any_of(div.begin(), div.end(), on)) {
		out += ",roundup_power2_divisions:";
		if (std::all_of(div.begin(), div.end(), [&](uint32_t d) { return d == div[0]; })) {
			out += std::to_string(div[0]);
		} else {
			// A key where the value changes; each holds until the next.
			std::string list;
			for (size_t i = 0; i < div.size(); i++)
				if (i == 0 || div[i] != div[i - 1])
					list += (list.empty() ? "" : ",") +
					        std::to_string(1ull << i) + ":" +
					        std::to_string(std::max<uint32_t>(div[i], 1));
			out += "[" + list + "]";
		}
	}
	return out;
}

uint64_t allocatorConfigGeneration()
{
	return gConfigGeneration.load(std::memory_order_acquire);
}

AllocatorConfig allocatorConfig(uint64_t *generation)
{
	std::lock_guard<std::mutex> lock(gConfigMutex);
	if (generation)
		*generation = gConfigGeneration.load(std::memory_order_relaxed);
	return gConfig;
}

void setAllocatorConfig(const AllocatorConfig &config)
{
	std::lock_guard<std::mutex> lock(gConfigMutex);
	gConfig = config;
	gConfigGeneration.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace npurt

// The caching pool's settings, process-wide, from NPURT_ALLOC_CONF (read when
// the runtime starts) or npurtMemSetAllocatorConfig, in the syntax of
// PYTORCH_CUDA_ALLOC_CONF / PYTORCH_NPU_ALLOC_CONF: comma-separated
// key:value pairs.
//
//   expandable_segments:True|False   grow segments page by page (see
//                                    allocator.h); default False
//   max_split_size_mb:N              blocks of N MiB or more are never
//                                    split (N > 20); default 64
//   garbage_collection_threshold:F   0 < F < 1: when a new segment would
//                                    take the pool past F of what it may
//                                    hold (the per-process limit, else the
//                                    device's memory), cached segments go
//                                    back first, least recently freed first
//   roundup_power2_divisions:N       round requests up to one of N steps
//   roundup_power2_divisions:[256:1,512:2,>:4]
//                                    between powers of two (N a power of
//                                    two); the list form sets N per size in
//                                    MiB, each size a power of two, ">"
//                                    for the sizes past the last
//
// Unknown keys and bad values are errors that name them; a setting string
// is applied whole or not at all. Settings apply to the pools' next
// allocations; segments that exist keep the kind they were made with.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace npurt {

struct AllocatorConfig {
	// Sizes from 1 MiB << i (i = 0 .. kIntervals - 1) up to the next power
	// of two; smaller sizes use interval 0, larger the last.
	static constexpr size_t kIntervals = 16;

	bool expandableSegments = false;
	size_t maxSplitSize = 64ull << 20;
	double gcThreshold = 0;  // 0: off
	std::array<uint32_t, kIntervals> divisions{};  // 0 or 1: off

	// What a request of `size` bytes is rounded up to (to 512 bytes at
	// least; overflow-free for sizes the caller has bounded).
	size_t roundSize(size_t size) const;
};

// Parses `text` into *out (starting from the defaults). On failure returns
// false with *error saying which key or value is wrong and why.
bool parseAllocatorConfig(const std::string &text, AllocatorConfig *out, std::string *error);

// The settings as a string parseAllocatorConfig takes back:
// expandable_segments and max_split_size_mb always, the others when set.
std::string formatAllocatorConfig(const AllocatorConfig &config);

// The process's settings, and a generation that changes with them, so that
// a pool can keep its own copy and refresh it cheaply.
uint64_t allocatorConfigGeneration();
AllocatorConfig allocatorConfig(uint64_t *generation);
void setAllocatorConfig(const AllocatorConfig &config);

}  // namespace npurt

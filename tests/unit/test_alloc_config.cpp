// The pools' settings (NPURT_ALLOC_CONF): parsing, every error, rounding,
// and the string the settings are written back as.
#include <gtest/gtest.h>

#include <string>

#include "alloc_config.h"

using npurt::AllocatorConfig;

namespace {

constexpr size_t MiB = 1ull << 20;

AllocatorConfig parse(const std::string &text)
{
	AllocatorConfig cfg;
	std::string why;
	EXPECT_TRUE(npurt::parseAllocatorConfig(text, &cfg, &why)) << text << ": " << why;
	return cfg;
}

// The error of a string that must not parse; *out is left as it was.
std::string reject(const std::string &text)
{
	AllocatorConfig cfg;
	cfg.maxSplitSize = 12345;
	std::string why;
	EXPECT_FALSE(npurt::parseAllocatorConfig(text, &cfg, &why)) << text;
	EXPECT_EQ(cfg.maxSplitSize, 12345u) << "a rejected setting changed the output";
	return why;
}

TEST(AllocatorConfig, DefaultsAndTheEmptyString)
{
	AllocatorConfig cfg = parse("");
	EXPECT_FALSE(cfg.expandableSegments);
	EXPECT_EQ(cfg.maxSplitSize, 64 * MiB);
	EXPECT_EQ(cfg.gcThreshold, 0);
	for (uint32_t d : cfg.divisions)
		EXPECT_EQ(d, 0u);
	EXPECT_EQ(parse("  ").maxSplitSize, 64 * MiB);
}

TEST(AllocatorConfig, EveryKeyParses)
{
	AllocatorConfig cfg = parse("expandable_segments:True, max_split_size_mb:128,"
	                            "garbage_collection_threshold:0.6,"
	                            "roundup_power2_divisions:4");
	EXPECT_TRUE(cfg.expandableSegments);
	EXPECT_EQ(cfg.maxSplitSize, 128 * MiB);
	EXPECT_DOUBLE_EQ(cfg.gcThreshold, 0.6);
	for (uint32_t d : cfg.divisions)
		EXPECT_EQ(d, 4u);
	EXPECT_FALSE(parse("expandable_segments:False").expandableSegments);
	EXPECT_TRUE(parse("expandable_segments:true").expandableSegments);
}

TEST(AllocatorConfig, DivisionsListSetsEachSizeRange)
{
	// Up to 511 MiB: 1 (a key holds until the next), 512-1023 MiB: 4,
	// beyond: 8.
	AllocatorConfig cfg = parse("roundup_power2_divisions:[256:1,512:4,>:8]");
	EXPECT_EQ(cfg.divisions[0], 1u);
	EXPECT_EQ(cfg.divisions[7], 1u);
	EXPECT_EQ(cfg.divisions[8], 1u);
	EXPECT_EQ(cfg.divisions[9], 4u);
	EXPECT_EQ(cfg.divisions[10], 8u);
	EXPECT_EQ(cfg.divisions[15], 8u);
	cfg = parse("roundup_power2_divisions:[1:2,4:8]");
	EXPECT_EQ(cfg.divisions[0], 2u);
	EXPECT_EQ(cfg.divisions[1], 2u);
	EXPECT_EQ(cfg.divisions[2], 8u);
	EXPECT_EQ(cfg.divisions[15], 8u);
}

TEST(AllocatorConfig, BadKeysAndValuesAreNamed)
{
	auto has = [](const std::string &why, const std::string &part) {
		return why.find(part) != std::string::npos;
	};
	EXPECT_TRUE(has(reject("expandable_segment:True"), "unknown key 'expandable_segment'"));
	EXPECT_TRUE(has(reject("backend:cudaMallocAsync"), "unknown key 'backend'"));
	EXPECT_TRUE(has(reject("expandable_segments:yes"), "'yes' is not True or False"));
	EXPECT_TRUE(has(reject("expandable_segments"), "is not key:value"));
	EXPECT_TRUE(has(reject("max_split_size_mb:20"), "above 20"));
	EXPECT_TRUE(has(reject("max_split_size_mb:-5"), "above 20"));
	EXPECT_TRUE(has(reject("max_split_size_mb:1e3"), "above 20"));
	EXPECT_TRUE(has(reject("max_split_size_mb:"), "above 20"));
	EXPECT_TRUE(has(reject("garbage_collection_threshold:1"), "between 0 and 1"));
	EXPECT_TRUE(has(reject("garbage_collection_threshold:0"), "between 0 and 1"));
	EXPECT_TRUE(has(reject("garbage_collection_threshold:0.5x"), "between 0 and 1"));
	EXPECT_TRUE(has(reject("garbage_collection_threshold:nan"), "between 0 and 1"));
	EXPECT_TRUE(has(reject("garbage_collection_threshold:"), "between 0 and 1"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:3"), "not a power of two"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:0"), "not a power of two"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[100:2]"), "'100' is not a power"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[256:3]"), "'3' of '256'"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[512:2,256:4]"), "must increase"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[>:2,256:4]"), "last entry"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[256:2"), "does not end with ']'"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[]"), "empty"));
	EXPECT_TRUE(has(reject("roundup_power2_divisions:[256]"), "SIZE_MB:DIVISIONS"));
	EXPECT_TRUE(has(reject("max_split_size_mb:100,max_split_size_mb:200"), "given twice"));
	EXPECT_TRUE(has(reject("expandable_segments:True,,max_split_size_mb:100"), "empty entry"));
}

TEST(AllocatorConfig, RoundingFollowsTheDivisions)
{
	AllocatorConfig cfg;
	EXPECT_EQ(cfg.roundSize(1), 512u);
	EXPECT_EQ(cfg.roundSize(513), 1024u);
	EXPECT_EQ(cfg.roundSize(1200 * 1024), 1200u * 1024);
	cfg = parse("roundup_power2_divisions:4");
	// 1.2 MiB lies between 1 and 2 MiB: steps of 256 KiB.
	EXPECT_EQ(cfg.roundSize(1200 * 1024), 1280u * 1024);
	EXPECT_EQ(cfg.roundSize(2 * MiB), 2 * MiB);  // a power of two stays
	EXPECT_EQ(cfg.roundSize(5 * MiB + 1), 6 * MiB);
	EXPECT_EQ(cfg.roundSize(1000), 1024u);  // too small for steps: to 512
	cfg = parse("roundup_power2_divisions:[1:1,64:2]");
	EXPECT_EQ(cfg.roundSize(40 * MiB), 40 * MiB);  // 32-63 MiB: off
	EXPECT_EQ(cfg.roundSize(65 * MiB), 96 * MiB);  // 64-127 MiB: halves
}

TEST(AllocatorConfig, FormatParsesBackToTheSame)
{
	for (const char *text : {"", "expandable_segments:True,max_split_size_mb:200",
	                         "garbage_collection_threshold:0.75,roundup_power2_divisions:8",
	                         "roundup_power2_divisions:[256:1,512:4,>:8]"}) {
		AllocatorConfig a = parse(text);
		std::string out = npurt::formatAllocatorConfig(a);
		AllocatorConfig b = parse(out);
		EXPECT_EQ(a.expandableSegments, b.expandableSegments) << out;
		EXPECT_EQ(a.maxSplitSize, b.maxSplitSize) << out;
		EXPECT_EQ(a.gcThreshold, b.gcThreshold) << out;
		for (size_t i = 0; i < a.divisions.size(); i++)
			EXPECT_EQ(a.divisions[i] > 1 ? a.divisions[i] : 1,
			          b.divisions[i] > 1 ? b.divisions[i] : 1)
			        << out << " interval " << i;
	}
	EXPECT_EQ(npurt::formatAllocatorConfig(AllocatorConfig{}),
	          "expandable_segments:False,max_split_size_mb:64");
}

TEST(AllocatorConfig, TheProcessSettingsChangeTheGeneration)
{
	uint64_t g0 = 0;
	AllocatorConfig before = npurt::allocatorConfig(&g0);
	npurt::setAllocatorConfig(parse("expandable_segments:True"));
	uint64_t g1 = 0;
	EXPECT_TRUE(npurt::allocatorConfig(&g1).expandableSegments);
	EXPECT_NE(g0, g1);
	EXPECT_EQ(npurt::allocatorConfigGeneration(), g1);
	npurt::setAllocatorConfig(before);
}

}  // namespace

// The device address space's ranges: first-fit allocation, allocation at
// a given address (npurtMemAddressReserve's hint), release and merging.
#include <gtest/gtest.h>

#include "context.h"

namespace {

constexpr uint64_t kBase = 0x100000000ull, kSize = 64ull << 20, kM = 1ull << 20;

TEST(AddressSpace, AllocateAtTakesExactlyAFreeRange)
{
	npurt::AddressSpace s(kBase, kSize);
	EXPECT_TRUE(s.allocateAt(kBase + 8 * kM, 4 * kM));
	// Inside, overlapping either end, or past the space: refused.
	EXPECT_FALSE(s.allocateAt(kBase + 9 * kM, kM));
	EXPECT_FALSE(s.allocateAt(kBase + 6 * kM, 4 * kM));
	EXPECT_FALSE(s.allocateAt(kBase + 11 * kM, 2 * kM));
	EXPECT_FALSE(s.allocateAt(kBase + kSize - kM, 2 * kM));
	EXPECT_FALSE(s.allocateAt(kBase - kM, 2 * kM));
	EXPECT_FALSE(s.allocateAt(~0ull - kM, 4 * kM));  // wraps
	// The free parts on both sides are still there, and first-fit finds
	// the lower one first.
	EXPECT_TRUE(s.allocateAt(kBase + 12 * kM, kM));
	EXPECT_EQ(s.allocate(8 * kM, kM), kBase);
	EXPECT_EQ(s.allocate(kM, kM), kBase + 13 * kM);
}

TEST(AddressSpace, ReleasedRangesMergeAndAreTakenAgain)
{
	npurt::AddressSpace s(kBase, kSize);
	uint64_t a = s.allocate(4 * kM, kM), b = s.allocate(4 * kM, kM);
	ASSERT_EQ(a, kBase);
	ASSERT_EQ(b, kBase + 4 * kM);
	s.release(a, 4 * kM);
	s.release(b, 4 * kM);
	// Merged with each other and the rest: the whole space is one range.
	EXPECT_TRUE(s.allocateAt(kBase, kSize));
	EXPECT_EQ(s.allocate(kM, kM), 0u);
	s.release(kBase, kSize);
	EXPECT_EQ(s.allocate(kSize, kM), kBase);
}

}  // namespace

// Memory accounting for frameworks: the out-of-memory observer's call.
#pragma once

#include <cstddef>

namespace npurt {

// After an allocation from a pool failed with npurtErrorMemoryAllocation
// (its message set): calls the observer, if any, on this thread, not again
// from inside it.
void notifyOutOfMemory(int ordinal, size_t requested);

}  // namespace npurt

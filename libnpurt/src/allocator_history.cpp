// The caching allocator's history (npurtMemRecordHistory): a ring of the
// pool's last events, what torch.cuda.memory._record_memory_history keeps
// for https://pytorch.org/memory_viz. Off (one atomic load per event) until
// a limit is set.
#include <ctime>

#include "allocator.h"

namespace npurt {

namespace {

// The limit, published by bumping the generation after it: a pool that
// sees a new generation empties its history and takes the limit.
std::atomic<size_t> gHistoryLimit{0};
std::atomic<uint64_t> gHistoryGeneration{0};

int64_t realtimeNs()
{
	timespec ts{};
	clock_gettime(CLOCK_REALTIME, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

void setHistoryLimit(size_t maxEntries)
{
	gHistoryLimit.store(maxEntries, std::memory_order_relaxed);
	gHistoryGeneration.fetch_add(1, std::memory_order_acq_rel);
}

void CachingAllocator::refreshHistory()
{
	const uint64_t gen = gHistoryGeneration.load(std::memory_order_acquire);
	if (gen == historyGeneration_)
		return;
	historyGeneration_ = gen;
	historyLimit_ = gHistoryLimit.load(std::memory_order_relaxed);
	history_.clear();
	history_.shrink_to_fit();
	historyNext_ = 0;
}

void CachingAllocator::note(TraceEvent::Action action, uint64_t addr, uint64_t size,
                            StreamId stream, AllocSite site)
{
	refreshHistory();
	if (!historyLimit_)
		return;
	TraceEvent e{action, addr, size, stream, realtimeNs(), site};
	// The ring grows as events come, so a huge limit costs only what is
	// recorded.
	if (history_.size() < historyLimit_) {
		history_.push_back(e);
		return;
	}
	history_[historyNext_] = e;
	historyNext_ = (historyNext_ + 1) % historyLimit_;
}

void CachingAllocator::noteOom(size_t size)
{
	refreshHistory();
	if (!historyLimit_)
		return;
	size_t freeBytes = 0, totalBytes = 0;
	backend_.memInfo(&freeBytes, &totalBytes);
	note(TraceEvent::Action::Oom, freeBytes, size, 0);
}

std::vector<TraceEvent> CachingAllocator::history()
{
	std::lock_guard<std::mutex> lock(mutex_);
	refreshHistory();
	std::vector<TraceEvent> out(history_.begin() + static_cast<ptrdiff_t>(historyNext_),
	                            history_.end());
	out.insert(out.end(), history_.begin(),
	           history_.begin() + static_cast<ptrdiff_t>(historyNext_));
	return out;
}

}  // namespace npurt

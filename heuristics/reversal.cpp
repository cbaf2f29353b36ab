// The memory free at a deadline and the evicted region beside a storage (heuristics/reversal.h).
#include "heuristics/reversal.h"

#include <algorithm>

namespace dtr::heuristics {

void MemoryAtDeadline::reset(double available, FunctionRef<void(NeighbourVisitor)> candidates) {
  available_ = available;
  deadlines_.clear();
  candidates([this](StorageView& s) {
    if (const auto deadline = s.forecast_deadline()) deadlines_.emplace_back(*deadline, s.bytes());
  });
  std::sort(deadlines_.begin(), deadlines_.end());
  later_bytes_.assign(deadlines_.size() + 1, 0.0);
  for (std::size_t i = deadlines_.size(); i-- > 0;) {
    later_bytes_[i] = later_bytes_[i + 1] + static_cast<double>(deadlines_[i].second);
  }
}

double MemoryAtDeadline::free_at(std::uint64_t deadline) const {
  const auto after = std::upper_bound(deadlines_.begin(), deadlines_.end(), deadline,
                                      [](std::uint64_t d, const auto& entry) { return d < entry.first; });
  return available_ - later_bytes_[static_cast<std::size_t>(after - deadlines_.begin())];
}

EvictedRegion EvictedRegionSearch::operator()(StorageView& storage) {
  EvictedRegion region;
  region.bytes = static_cast<double>(storage.bytes());
  seen_.clear();
  stack_.clear();
  seen_.insert(&storage);
  stack_.push_back(&storage);
  while (!stack_.empty()) {
    StorageView* at = stack_.back();
    stack_.pop_back();
    // An ancestor joins whether held or not; a dependent only while the program holds it (one it released is
    // remade only for what is made from it, and charged there).
    const auto join = [&](StorageView& v, bool ancestor) {
      if (!v.evicted() || v.constant() || (!ancestor && v.released()) || seen_.contains(&v)) return;
      if (seen_.size() >= limit_) {
        region.complete = false;
        return;
      }
      seen_.insert(&v);
      stack_.push_back(&v);
      region.bytes += static_cast<double>(v.bytes());
      if (ancestor && (v.released() || !v.forecast_deadline())) region.unneeded_cost += v.cost();
    };
    at->for_each_input([&](StorageView& v) { join(v, true); });
    if (at == &storage || !at->released()) at->for_each_dependent([&](StorageView& v) { join(v, false); });
  }
  return region;
}

}  // namespace dtr::heuristics

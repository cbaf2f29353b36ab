// What `forecast+reversal` (heuristics/forecast.cpp) knows beyond `forecast`: the memory free when a storage
// is next needed, and the evicted region evicting it would join (docs/heuristics.md, "forecast+reversal").
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <utility>
#include <vector>

#include "heuristics/storage_view.h"

namespace dtr::heuristics {

// The bytes a budget leaves free when a forecast deadline comes, if nothing resident now is evicted: the
// available bytes less those of the resident candidates next needed after that deadline (they must still be
// there then). Built anew before each decision (Heuristic::begin_decision). Not thread-safe.
class MemoryAtDeadline {
 public:
  // `available`: the bytes the budget leaves to the candidates; `candidates`: visits each of them.
  void reset(double available, FunctionRef<void(NeighbourVisitor)> candidates);
  double free_at(std::uint64_t deadline) const;

 private:
  double available_ = 0;
  std::vector<std::pair<std::uint64_t, std::size_t>> deadlines_;  // (deadline, bytes), sorted
  std::vector<double> later_bytes_ = {0.0};  // [i]: the bytes of deadlines_[i..]; before a reset, nothing
};

// The evicted region evicting a resident storage would join: its evicted ancestors (through evicted inputs)
// and the evicted storages the program holds that are made from it or from them.
struct EvictedRegion {
  double bytes = 0;  // the storage's own included
  // The cost of the ancestors in it that nothing will read but a recomputation (released, or no forecast use
  // ahead): remade only to remake the storage.
  double unneeded_cost = 0;
  bool complete = true;  // false: the search stopped at its limit of storages
};

// Finds the region by a search of at most `limit` storages. Not thread-safe (keeps its visited set).
class EvictedRegionSearch {
 public:
  explicit EvictedRegionSearch(std::size_t limit) : limit_(limit) {}
  EvictedRegion operator()(StorageView& storage);

 private:
  std::size_t limit_;
  std::unordered_set<StorageView*> seen_;
  std::vector<StorageView*> stack_;
};

}  // namespace dtr::heuristics

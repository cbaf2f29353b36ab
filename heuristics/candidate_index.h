// What the runtime keeps its eviction candidates in, so that a decision takes a heap's time instead of a scan
// (design section 5): the eviction index (one clock, heuristics/eviction_index.h) or the forecast index (the
// program's clock and the ops clock, heuristics/forecast_index.h). Both are exact: the choice is the minimum a
// scan of every candidate would find (the heuristic's tier, then its score, then the later arrival).
//
// The runtime adds a storage when it becomes a candidate (resident, unpinned, with a producer), removes it
// when it stops being one, and says when it was used; the heuristic reports the other score changes through
// ScoreListener, which both indexes are.
//
// Thread safety: none; an index belongs to one runtime's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

// The clocks a score may read: the runtime's (DTR_CLOCK), every kernel run's, and the program's ops (calls
// and reads, no recomputations: the forecasts' clock). None runs backwards.
struct IndexClocks {
  std::uint64_t now = 0;
  std::uint64_t ops = 0;
  std::uint64_t program = 0;
};

class CandidateIndex : public ScoreListener {
 public:
  virtual ~CandidateIndex() = default;
  virtual std::size_t size() const = 0;
  // `s` became a candidate (it must not be one).
  virtual void add(StorageView& s, const IndexClocks& clocks) = 0;
  // `s` stopped being one (nothing happens if it was not).
  virtual void remove(StorageView& s, const IndexClocks& clocks) = 0;
  // `s` was used: its last access moved to the clocks' time.
  virtual void used(StorageView& s, const IndexClocks& clocks) = 0;
  // The candidate a scan would evict first at these clocks; nullptr when there is none.
  virtual StorageView* choose(const IndexClocks& clocks) = 0;
};

// The index `heuristic` can keep (forecast_indexable(): the forecast index; indexable(): the eviction index),
// listening to it until destroyed; nullptr when its scores need a scan (random).
std::unique_ptr<CandidateIndex> make_candidate_index(Heuristic& heuristic);

}  // namespace dtr::heuristics

// The eviction candidates of a runtime, kept in order of their heuristic's score, so that choosing what to
// evict takes a heap's time instead of rescoring every resident storage (design section 5, issue 4). Exact:
// the choice is a true minimum of the heuristic, as a scan over every candidate would find.
//
// The runtime adds a storage when it becomes a candidate (resident, unpinned, with a producer), removes it
// when it stops being one, and refreshes it when its last access changes; the heuristic reports the other
// score changes (an evicted neighbourhood that grew or shrank) through ScoreListener, which marks the candidate
// pending: the next decision re-keys each pending candidate once (a walking heuristic's key walks the lineage,
// and between two decisions one storage is reported by many events). Scores are a / (now - b) (kinetic heap)
// or a alone for timeless heuristics.
//
// Thread safety: none; an index belongs to one runtime's thread.
#pragma once

#include <cstdint>

#include "heuristics/candidate_index.h"
#include "heuristics/heuristic.h"
#include "heuristics/kinetic_heap.h"
#include "heuristics/pending_slots.h"

namespace dtr::heuristics {

class EvictionIndex final : public CandidateIndex {
 public:
  // `heuristic` must be indexable and outlive the index; the index listens to it until destroyed.
  explicit EvictionIndex(Heuristic& heuristic) : heuristic_(heuristic), heap_(heuristic.timeless()) {
    DTR_CHECK(heuristic.indexable(), InvalidArgument, "heuristic '", heuristic.name(), "' cannot be indexed");
    heuristic_.set_listener(this);
  }
  ~EvictionIndex() { heuristic_.set_listener(nullptr); }
  EvictionIndex(const EvictionIndex&) = delete;
  EvictionIndex& operator=(const EvictionIndex&) = delete;

  static bool contains(const StorageView& s) { return s.index_handle != StorageView::kNotIndexed; }
  std::size_t size() const override { return heap_.size(); }

  // CandidateIndex: on the runtime's clock.
  void add(StorageView& s, const IndexClocks& clocks) override { add(s, clocks.now); }
  void remove(StorageView& s, const IndexClocks& clocks) override { remove(s, clocks.now); }
  void used(StorageView& s, const IndexClocks& clocks) override { touched(s, clocks.now); }
  StorageView* choose(const IndexClocks& clocks) override { return choose(clocks.now); }

  void add(StorageView& s, std::uint64_t now) {
    DTR_CHECK(!contains(s), InvalidArgument, "eviction index: the storage is already a candidate");
    const ScoreKey k = heuristic_.key(s);
    s.index_handle = heap_.insert(&s, k.a, k.b, advance(now));
  }

  void remove(StorageView& s, std::uint64_t now) {
    if (!contains(s)) return;
    heap_.erase(s.index_handle, advance(now));
    s.index_handle = StorageView::kNotIndexed;
  }

  // Re-reads the storage's key, if it is a candidate.
  void refresh(StorageView& s, std::uint64_t now) {
    if (!contains(s)) return;
    const ScoreKey k = heuristic_.key(s);
    heap_.update(s.index_handle, k.a, k.b, advance(now));
  }

  // The storage was read at `now` (its last access moved): its staleness restarts, the rest of its score is
  // what the index already holds (the heuristic reports every other change), so no key is recomputed.
  void touched(StorageView& s, std::uint64_t now) {
    if (!contains(s)) return;
    heap_.update_b(s.index_handle, static_cast<double>(s.last_access()) - 1.0, advance(now));
  }

  // The candidate with the lowest score at `now`; nullptr when there is none.
  StorageView* choose(std::uint64_t now) {
    settle();
    if (heap_.empty()) return nullptr;
    return heap_.payload(heap_.top(advance(now)));
  }

  // Its score as the index knows it (tests compare it with a scan's; the heap may order it by a lower bound).
  double score(const StorageView& s, std::uint64_t now) {
    settle();
    return heap_.current_score(s.index_handle, advance(now));
  }

  // Whether the heap order holds at `now` once due changes are replayed (tests).
  bool valid(std::uint64_t now) {
    settle();
    heap_.advance(advance(now));
    return heap_.valid(static_cast<double>(clock_));
  }

  // ScoreListener: marks it pending, re-keyed at the next decision. It must not walk the lineage: a heuristic
  // reports in the middle of its own walks.
  void score_changed(StorageView& s) override {
    reported_ += 1;
    if (contains(s)) pending_.mark(s.index_handle);
  }
  // Handles waiting for the next decision (tests: at most one a handle).
  std::size_t pending_entries() const { return pending_.size(); }
  // Order changes replayed as the clock ran (kinetic events; benchmarks).
  std::uint64_t reorders() const { return heap_.swaps(); }
  // Score changes the heuristic reported so far (benchmarks: the upkeep an eviction costs).
  std::uint64_t reported_changes() const { return reported_; }

 private:
  double advance(std::uint64_t now) {
    if (now > clock_) clock_ = now;
    return static_cast<double>(clock_);
  }

  // Re-keys the pending candidates at the clock of the last call, each once. A handle whose storage left and
  // whose slot another took meanwhile re-keys that one: a key it already has.
  void settle() {
    pending_.drain([this](std::uint32_t h) {
      if (heap_.holds(h)) refresh(*heap_.payload(h), clock_);
    });
  }

  Heuristic& heuristic_;
  KineticHeap<StorageView*> heap_;
  PendingSlots pending_;  // heap handles reported since the last decision
  std::uint64_t clock_ = 0;
  std::uint64_t reported_ = 0;
};

}  // namespace dtr::heuristics

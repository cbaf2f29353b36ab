// The eviction candidates of a forecast heuristic (Heuristic::forecast_indexable: `forecast`), in the order a
// scan would evict them, so that a decision takes a heap's time instead of rescoring every candidate (issue
// 18: 5 µs at 10^5 candidates). Exact: the choice is the scan's (tier, then score, then the later arrival).
//
// A forecast score is a / d: while a forecast use is ahead, d is the program ops left until it (a deadline
// curve a / (deadline - p) on the program clock p, rising as p nears it); otherwise d is the staleness in ops
// (a / (o - b) on the ops clock o, which runs through recomputations, falling). Two clocks that advance apart
// cannot share one heap, so three heaps keep the candidates, each on its own clock: deadline curves (program
// clock), last resorts (deadline curves too: a value made and not read yet with a forecast use ahead), and
// staleness curves (ops clock). Deadline curves only rise, so their heaps read a key again only at the top
// (heuristics/rising_heap.h); staleness curves fall, and cross, so theirs is a kinetic heap. The decision
// compares the first and the third heaps' tops, and takes the last resorts' top only when both are empty. A
// candidate's curve changes when the program clock reaches its deadline (its next forecast use, or its
// staleness, takes over): a queue of deadlines moves it before any decision reads its score past that
// deadline. A new candidate, a use and a neighbourhood change mark it pending; the next decision keys each
// pending candidate once (a key walks the lineage, and between two decisions the same storage is reported tens
// of times), so the heaps hold a scan's keys, or lower bounds of them (below), whenever a decision reads them.
// An eviction reported beside a
// candidate whose key was floored, with a floor no lower than that key's a, can only have raised its score
// (ScoreListener::score_raised): it is noted, its heap keeping the old key as a lower bound, and keyed only
// where a decision would choose it (then the choice is made again), so that of the candidates an eviction
// reports, only those near the top are walked. Every other change (a new candidate, a rematerialization beside
// it, which may lower its score) is held the same way at a lower bound read without walking
// (Heuristic::forecast_a_floor), where the heuristic gives one; on the curve its heap holds where no use came
// since that curve was read (between deadlines only a use moves a curve), so that its forecast is not read again.
//
// Thread safety: none; an index belongs to one runtime's thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "heuristics/candidate_index.h"
#include "heuristics/handles.h"
#include "heuristics/kinetic_heap.h"
#include "heuristics/pending_slots.h"
#include "heuristics/rising_heap.h"
#include "heuristics/tick_queue.h"

namespace dtr::heuristics {

class ForecastIndex final : public CandidateIndex {
 public:
  // `heuristic` must be forecast_indexable and outlive the index; the index listens to it until destroyed.
  explicit ForecastIndex(Heuristic& heuristic);
  ~ForecastIndex() override;
  ForecastIndex(const ForecastIndex&) = delete;
  ForecastIndex& operator=(const ForecastIndex&) = delete;

  std::size_t size() const override { return size_; }
  void add(StorageView& s, const IndexClocks& clocks) override;
  void remove(StorageView& s, const IndexClocks& clocks) override;
  void used(StorageView& s, const IndexClocks& clocks) override;
  StorageView* choose(const IndexClocks& clocks) override;
  // ScoreListener: marks it pending (keyed at the next decision). It must not walk the lineage: a heuristic
  // reports in the middle of its own walks (dtr-eq's report loop reads marks the walks also write).
  void score_changed(StorageView& s) override;
  // Where its key was floored and `floor` is no lower than the a its heap holds, noted only: its key stays a
  // lower bound until a decision would choose it, and choose() keys it then; else as score_changed.
  void score_raised(StorageView& s, double floor) override;
  // Passed over where the candidate's key does not read the classes (ForecastKey::reads_classes); else as
  // score_changed.
  void classes_changed(StorageView& s) override;

  // Tests: the score and tier the index holds for a candidate at `clocks` (a scan's, if the index is right;
  // pending keys are settled first, as for a decision).
  double score(const StorageView& s, const IndexClocks& clocks);
  bool last_resort(const StorageView& s);
  // Whether every heap is in order at `clocks` (tests).
  bool valid(const IndexClocks& clocks);
  // Entries waiting for the next decision (tests: at most one a slot, however often candidates come and go).
  std::size_t pending_entries() const { return pending_.size(); }

 private:
  enum class Group : std::uint8_t { none, ahead, unread, stale };
  struct Record {
    StorageView* storage = nullptr;  // nullptr: a free slot
    Group group = Group::none;
    std::uint32_t handle = 0;   // in its group's heap
    std::uint64_t arrival = 0;  // when it became a candidate: ties go to the later one, as in a scan
    std::uint32_t stamp = 0;    // of its current deadline entry
    bool pending = false;       // its key may have changed since it was keyed (settle() keys it) ...
    bool cost_changed = false;  // ... and more than a use changed it: its a too (else its heap's a stands)
    bool raised = false;        // its a may have risen since it was keyed: the heap holds a lower bound
    bool used = false;          // used since its curve was last read: its deadline or staleness moved
    bool floored = false;       // its last walked key was ForecastKey::floored
    bool reads_classes = true;  // ... and ForecastKey::reads_classes
    // The curve its heap holds: a as last given to it (a raise the heap only noted included), and a deadline
    // curve's deadline, so that a use or a raise reads the record alone, not the heap's item and its slot.
    double a = 0;
    std::uint64_t deadline = 0;
  };
  using DeadlineHeap = RisingHeap<std::uint32_t>;

  static Group group_of(const ForecastKey& k);
  void sync(const IndexClocks& clocks);
  ForecastKey key_of(Record& r);
  void place(std::uint32_t slot);
  void insert(std::uint32_t slot, const ForecastKey& k);
  void take_out(Record& r);
  void push_deadline(std::uint32_t slot, std::uint64_t deadline);
  void rekey(StorageView& s);
  void apply(std::uint32_t slot, const ForecastKey& k);
  void hold_at_floor(std::uint32_t slot, double floor);
  ForecastKey held_curve(const Record& r, double a) const;
  void mark_pending(std::uint32_t slot, bool cost_changed);
  void settle();
  void settle_raised();  // keys every raised record (the accessors that read a key; a scan of the records)
  DeadlineHeap& deadline_heap(Group g) { return g == Group::unread ? unread_ : ahead_; }

  Heuristic& heuristic_;
  DeadlineHeap ahead_;                 // a forecast use ahead, read already (or not forecast to be read)
  DeadlineHeap unread_;                // last resorts
  KineticHeap<std::uint32_t> stale_;   // nothing forecast: staleness in ops
  TickQueue deadlines_;                // each deadline-curve candidate's deadline, by slot and stamp
  std::size_t live_deadlines_ = 0;
  std::vector<Record> records_;        // by StorageView::index_handle
  Handles slots_;                      // of records_
  PendingSlots pending_;               // slots marked pending since the last settle()
  std::vector<std::pair<std::uint32_t, ForecastKey>> due_;  // sync()'s: candidates whose deadline passed
  IndexClocks clocks_;
  std::uint64_t arrivals_ = 0;
  std::uint32_t stamps_ = 0;
  std::size_t size_ = 0;
};

}  // namespace dtr::heuristics

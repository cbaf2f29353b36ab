// The forecast index (heuristics/forecast_index.h) and the choice of a runtime's candidate index.
#include "heuristics/forecast_index.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "dtr/check.h"
#include "heuristics/eviction_index.h"

namespace dtr::heuristics {

std::unique_ptr<CandidateIndex> make_candidate_index(Heuristic& heuristic) {
  if (heuristic.forecast_indexable()) return std::make_unique<ForecastIndex>(heuristic);
  if (heuristic.indexable()) return std::make_unique<EvictionIndex>(heuristic);
  return nullptr;
}

ForecastIndex::ForecastIndex(Heuristic& heuristic) : heuristic_(heuristic) {
  DTR_CHECK(heuristic.forecast_indexable(), InvalidArgument, "heuristic '", heuristic.name(),
            "' has no forecast keys");
  heuristic_.set_listener(this);
}

ForecastIndex::~ForecastIndex() { heuristic_.set_listener(nullptr); }

void ForecastIndex::add(StorageView& s, const IndexClocks& clocks) {
  DTR_CHECK(s.index_handle == StorageView::kNotIndexed, InvalidArgument,
            "forecast index: the storage is already a candidate");
  sync(clocks);
  bool fresh = false;
  const std::uint32_t slot = slots_.take(fresh);
  if (fresh) records_.emplace_back();
  records_[slot] = Record{&s, Group::none, 0, ++arrivals_, 0};
  s.index_handle = slot;
  size_ += 1;
  mark_pending(slot, /*cost_changed=*/true);  // placed at the next decision, if still a candidate then
}

void ForecastIndex::remove(StorageView& s, const IndexClocks& clocks) {
  if (s.index_handle == StorageView::kNotIndexed) return;
  sync(clocks);
  Record& r = records_[s.index_handle];
  take_out(r);
  r.storage = nullptr;
  slots_.give_back(s.index_handle);
  s.index_handle = StorageView::kNotIndexed;
  size_ -= 1;
}

void ForecastIndex::used(StorageView& s, const IndexClocks& clocks) {
  if (s.index_handle == StorageView::kNotIndexed) return;
  sync(clocks);
  records_[s.index_handle].used = true;
  mark_pending(s.index_handle, /*cost_changed=*/false);
}

void ForecastIndex::score_changed(StorageView& s) {
  if (s.index_handle != StorageView::kNotIndexed) mark_pending(s.index_handle, /*cost_changed=*/true);
}

void ForecastIndex::score_raised(StorageView& s, double floor) {
  if (s.index_handle == StorageView::kNotIndexed) return;
  Record& r = records_[s.index_handle];
  // Not placed yet (placed with a walked key at the next decision anyway), or possibly lower than its heap's
  // key: keyed at the next decision.
  if (r.group == Group::none || !r.floored || floor < r.a) {
    mark_pending(s.index_handle, /*cost_changed=*/true);
    return;
  }
  r.raised = true;
}

void ForecastIndex::classes_changed(StorageView& s) {
  if (s.index_handle == StorageView::kNotIndexed) return;
  const Record& r = records_[s.index_handle];
  if (r.group != Group::none && !r.reads_classes) return;  // its key moves with the walks alone
  mark_pending(s.index_handle, /*cost_changed=*/true);
}

void ForecastIndex::settle_raised() {
  for (Record& r : records_) {
    if (r.storage != nullptr && r.raised) rekey(*r.storage);
  }
}

void ForecastIndex::mark_pending(std::uint32_t slot, bool cost_changed) {
  Record& r = records_[slot];
  r.cost_changed = r.cost_changed || cost_changed;
  r.pending = true;
  pending_.mark(slot);
}

// Re-keys (or places, if new) each candidate whose key may have changed since the last decision, once: between
// two decisions a storage is reported many times (every eviction, rematerialization and use near it), and a
// key walks the lineage. Keys read at a decision are what a scan would compute then.
void ForecastIndex::settle() {
  pending_.drain([this](std::uint32_t slot) {
    Record& r = records_[slot];
    if (r.storage == nullptr || !r.pending) return;  // gone, or placed anew by sync() since
    if (r.cost_changed || r.group == Group::none) {
      if (const auto floor = heuristic_.forecast_a_floor(*r.storage)) {
        hold_at_floor(slot, *floor);
        return;
      }
    }
    if (r.group == Group::none) {
      place(slot);
    } else {
      rekey(*r.storage);
    }
  });
}

StorageView* ForecastIndex::choose(const IndexClocks& clocks) {
  sync(clocks);
  settle();
  const auto program = static_cast<double>(clocks_.program);
  const auto ops = static_cast<double>(clocks_.ops);
  // A raised record's heap holds a lower bound of its score: where one would be chosen it is keyed, and the
  // choice made again (every other candidate's true score is at least what its heap holds).
  for (;;) {
    Record* best = nullptr;
    double best_score = 0;
    if (!ahead_.empty()) {
      const auto h = ahead_.top(program);
      best = &records_[ahead_.payload(h)];
      best_score = ahead_.score(h, program);
    }
    if (!stale_.empty()) {
      const auto h = stale_.top(ops);
      Record& r = records_[stale_.payload(h)];
      const double score = stale_.score(h, ops);
      if (best == nullptr || score < best_score || (score == best_score && r.arrival > best->arrival)) best = &r;
    }
    if (best == nullptr && !unread_.empty()) best = &records_[unread_.payload(unread_.top(program))];
    if (best == nullptr) return nullptr;
    if (!best->raised) return best->storage;
    rekey(*best->storage);
  }
}

double ForecastIndex::score(const StorageView& s, const IndexClocks& clocks) {
  DTR_CHECK(s.index_handle != StorageView::kNotIndexed, InvalidArgument, "forecast index: not a candidate");
  sync(clocks);
  settle();
  settle_raised();
  const Record& r = records_[s.index_handle];
  if (r.group == Group::stale) return stale_.current_score(r.handle, static_cast<double>(clocks_.ops));
  return deadline_heap(r.group).score(r.handle, static_cast<double>(clocks_.program));
}

bool ForecastIndex::last_resort(const StorageView& s) {
  DTR_CHECK(s.index_handle != StorageView::kNotIndexed, InvalidArgument, "forecast index: not a candidate");
  settle();
  settle_raised();
  return records_[s.index_handle].group == Group::unread;
}

bool ForecastIndex::valid(const IndexClocks& clocks) {
  sync(clocks);
  settle();
  settle_raised();
  const auto program = static_cast<double>(clocks_.program);
  const auto ops = static_cast<double>(clocks_.ops);
  stale_.advance(ops);
  return ahead_.valid(program) && unread_.valid(program) && stale_.valid(ops);
}

// Moves the clocks on. Candidates whose deadline the program clock reached leave their heap (no score of theirs
// is read past it) and come back keyed anew at the new clocks (their next forecast use, or their staleness).
void ForecastIndex::sync(const IndexClocks& clocks) {
  DTR_CHECK(clocks.program >= clocks_.program && clocks.ops >= clocks_.ops, InvalidArgument,
            "forecast index: a clock ran backwards");
  due_.clear();  // a member, so that its buffer outlives the call (a deadline falls due most rounds)
  TickQueue::Entry e{};
  while (deadlines_.pop_due(clocks.program, e)) {
    Record& r = records_[e.handle];
    if (r.storage == nullptr || r.stamp != e.stamp || (r.group != Group::ahead && r.group != Group::unread)) continue;
    const ForecastKey k = key_of(r);  // before take_out: a record in no heap would be walked anew
    take_out(r);
    due_.emplace_back(e.handle, k);
  }
  clocks_ = clocks;
  for (const auto& [slot, k] : due_) insert(slot, k);
}

// The heap a key belongs in.
ForecastIndex::Group ForecastIndex::group_of(const ForecastKey& k) {
  if (!k.deadline) {
    DTR_CHECK(!k.last_resort, InvalidArgument, "forecast index: a last resort without a forecast use");
    return Group::stale;
  }
  return k.last_resort ? Group::unread : Group::ahead;
}

// The record's key now: walked anew where its a may have changed (a new candidate, a reported change), else
// its a as last keyed with the timing a use moved. The record is keyed from then on.
ForecastKey ForecastIndex::key_of(Record& r) {
  // A record in no heap is new (marked with its cost changed): only a record in a heap keys without walking.
  const bool walk = r.cost_changed || r.raised || r.group == Group::none;
  const ForecastKey k = walk ? heuristic_.forecast_key(*r.storage)
                             : heuristic_.forecast_key_after_use(*r.storage, r.a);
  if (walk) {  // a use keeps the a, and what it was
    r.floored = k.floored;
    r.reads_classes = k.reads_classes;
  }
  r.pending = false;
  r.cost_changed = false;
  r.raised = false;
  r.used = false;
  return k;
}

// Puts the record's storage in the heap its key says, at the current clocks.
void ForecastIndex::place(std::uint32_t slot) { insert(slot, key_of(records_[slot])); }

void ForecastIndex::insert(std::uint32_t slot, const ForecastKey& k) {
  Record& r = records_[slot];
  r.group = group_of(k);
  r.a = k.a;
  if (r.group != Group::stale) {
    r.deadline = *k.deadline;
    DTR_CHECK(*k.deadline > clocks_.program, InvalidArgument, "forecast index: a deadline at or before the clock");
    r.handle = deadline_heap(r.group).insert(slot, k.a, static_cast<double>(*k.deadline),
                                             static_cast<double>(clocks_.program), r.arrival);
    live_deadlines_ += 1;
    push_deadline(slot, *k.deadline);
  } else {
    r.handle = stale_.insert(slot, k.a, k.stale_b, static_cast<double>(clocks_.ops), r.arrival);
  }
}

// The record's deadline entry, which makes any earlier one of it stale; stale entries are dropped once they
// outnumber the live ones four to one.
void ForecastIndex::push_deadline(std::uint32_t slot, std::uint64_t deadline) {
  Record& r = records_[slot];
  r.stamp = ++stamps_;
  deadlines_.push(deadline, slot, r.stamp);
  if (deadlines_.size() > 4 * live_deadlines_ + 4096) {
    deadlines_.compact([this](const TickQueue::Entry& entry) {
      const Record& held = records_[entry.handle];
      return held.storage != nullptr && held.stamp == entry.stamp &&
             (held.group == Group::ahead || held.group == Group::unread);
    });
  }
}

// Takes the record's storage out of its heap (the staleness heap at the clock it last ran to: an erasure does not
// move it on, see sync).
void ForecastIndex::take_out(Record& r) {
  if (r.group == Group::stale) {
    stale_.erase(r.handle, stale_.clock());
  } else if (r.group != Group::none) {
    deadline_heap(r.group).erase(r.handle);
    live_deadlines_ -= 1;
  }
  r.group = Group::none;
}

// A candidate whose key changed: moved within its heap where it stays in the same one (a read of a stale
// one is only noted there, see KineticHeap::update), else taken out and placed anew.
void ForecastIndex::rekey(StorageView& s) {
  const std::uint32_t slot = s.index_handle;
  apply(slot, key_of(records_[slot]));
}

// A changed candidate held at a lower bound of its a, on its current curve (no walk): its heap's key stays a
// lower bound of its score (as after a raise) until a decision would choose it, and choose() keys it then. A
// candidate in a heap and not used since its curve was read keeps that curve (only a use, or its deadline
// passing, which sync() handles, moves a curve): its a alone is lowered, without reading its forecast again.
void ForecastIndex::hold_at_floor(std::uint32_t slot, double floor) {
  Record& r = records_[slot];
  r.pending = false;
  r.cost_changed = false;
  if (r.group == Group::none) {
    insert(slot, heuristic_.forecast_key_after_use(*r.storage, floor));
  } else {
    apply(slot, r.used ? heuristic_.forecast_key_after_use(*r.storage, floor) : held_curve(r, floor));
  }
  r.used = false;
  r.raised = true;
}

// The curve the record's heap holds, with `a` for its a: its key while no use has moved it (a record in a heap).
ForecastKey ForecastIndex::held_curve(const Record& r, double a) const {
  if (r.group == Group::stale) return ForecastKey{a, std::nullopt, stale_.b(r.handle), false};
  return ForecastKey{a, r.deadline, 0, r.group == Group::unread};
}

// Moves the record to the key `k`: within its heap where it stays in the same one, else taken out and placed
// anew.
void ForecastIndex::apply(std::uint32_t slot, const ForecastKey& k) {
  Record& r = records_[slot];
  const Group group = group_of(k);
  if (group != r.group) {
    take_out(r);
    insert(slot, k);
  } else if (group == Group::stale) {
    stale_.update(r.handle, k.a, k.stale_b, static_cast<double>(clocks_.ops));
    r.a = k.a;
  } else {
    DeadlineHeap& heap = deadline_heap(group);
    const bool new_deadline = r.deadline != *k.deadline;
    if (!new_deadline && r.a == k.a) return;  // the same curve: the heap's order stands
    heap.update(r.handle, k.a, static_cast<double>(*k.deadline), static_cast<double>(clocks_.program));
    r.a = k.a;
    r.deadline = *k.deadline;
    if (new_deadline) push_deadline(slot, *k.deadline);  // the old entry is stale by its stamp
  }
}

}  // namespace dtr::heuristics

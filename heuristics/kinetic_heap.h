// A kinetic min-heap over scores that move with time the way DTR's do: item i scores
//     f_i(t) = a_i / (t - b_i)        (a_i > 0, t > b_i)
// i.e. a cost-per-byte a over a staleness t - b that grows with the clock t. Two such curves cross at most
// once, so the heap keeps, for every parent-child pair, the time its order fails (its certificate) in a
// second heap of events; advancing the clock replays the swaps due by then. The minimum at any time is the
// root, exact: no sampling, no rescoring of every item (Basch, Guibas and Hershberger's kinetic heap).
//
// Items with `timeless` set score a_i alone (h_size, h_MSPS): their order never changes by itself.
//
// Handles are small integers the heap hands out; `Payload` is what the caller gets back (a storage).
// Thread safety: none; one heap belongs to one runtime's thread.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "dtr/check.h"
#include "heuristics/tick_queue.h"

namespace dtr::heuristics {

template <typename Payload>
class KineticHeap {
 public:
  using Handle = std::uint32_t;
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // The score of a live item at clock `now` (the value the heap orders by).
  double score(Handle h, double now) const { return value(heap_[items_[h].position], now); }

  explicit KineticHeap(bool timeless = false) : timeless_(timeless) {}

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  Payload payload(Handle h) const { return items_[h].payload; }

  // Adds an item scoring a / (t - b) from clock `now` on; `now` must not run behind earlier calls, and
  // now - b must be > 0 (a staleness of at least one tick).
  Handle insert(Payload payload, double a, double b, double now) {
    advance(now);
    Handle h;
    if (!free_.empty()) {
      h = free_.back();
      free_.pop_back();
    } else {
      h = static_cast<Handle>(items_.size());
      items_.emplace_back();
    }
    Item& it = items_[h];
    const std::uint32_t stamp = it.stamp + 1;  // a reused handle must not match its old entries
    it = Item{payload, heap_.size(), kNever, stamp, false, 0, 0};
    heap_.push_back(Slot{a, b, h});
    sift_up(it.position, now);
    return h;
  }

  void erase(Handle h, double now) {
    advance(now);
    Item& it = items_[h];
    DTR_CHECK(it.position != kAbsent, InvalidArgument, "kinetic heap: erasing an item that is not in it");
    const std::size_t pos = it.position;
    drop_event(h);
    it.position = kAbsent;
    const Slot last = heap_.back();
    heap_.pop_back();
    free_.push_back(h);
    if (pos < heap_.size()) {
      place(pos, last);
      restore(pos, now);
    }
  }

  // The item's a and b changed (its neighbourhood or its last access). A change that raises the score at
  // every future time (a and b both grew: a costlier neighbourhood, a later access) is only noted: the old
  // curve stays in the heap as a lower bound and the item moves when it reaches the top. Accesses, the most
  // frequent change, thus cost no reordering. Any other change reorders at once.
  void update(Handle h, double a, double b, double now) {
    advance(now);
    Item& it = items_[h];
    DTR_CHECK(it.position != kAbsent, InvalidArgument, "kinetic heap: updating an item that is not in it");
    Slot& slot = heap_[it.position];
    if (a >= slot.a && (timeless_ || b >= slot.b)) {
      it.pending_a = a;
      it.pending_b = b;
      it.pending = true;
      return;
    }
    slot.a = a;
    slot.b = b;
    it.pending = false;
    restore(it.position, now);
  }

  // The item's b changed to `b` with its a as it stands (an access): the same as update(h, a, b, now).
  void update_b(Handle h, double b, double now) {
    const Item& it = items_[h];
    DTR_CHECK(it.position != kAbsent, InvalidArgument, "kinetic heap: updating an item that is not in it");
    update(h, it.pending ? it.pending_a : heap_[it.position].a, b, now);
  }

  // The item with the lowest score at `now` (advances the clock to `now` first). Exact: every other item's
  // curve in the heap is its own or a lower bound of it, and the top's is its own.
  Handle top(double now) {
    advance(now);
    DTR_CHECK(!heap_.empty(), InvalidArgument, "kinetic heap: top of an empty heap");
    while (items_[heap_[0].h].pending) {
      Item& it = items_[heap_[0].h];
      heap_[0].a = it.pending_a;
      heap_[0].b = it.pending_b;
      it.pending = false;
      sift_down(0, now);
      advance(now);
    }
    return heap_[0].h;
  }

  // The item's score with every noted change applied (the heap may still order it by a lower bound).
  double current_score(Handle h, double now) const {
    const Item& it = items_[h];
    if (!it.pending) return score(h, now);
    return timeless_ ? it.pending_a : it.pending_a / (now - it.pending_b);
  }

  // Replays every order change due by `now`.
  void advance(double now) {
    DTR_CHECK(now >= clock_, InvalidArgument, "kinetic heap: the clock ran backwards");
    DTR_CHECK(now >= 0, InvalidArgument, "kinetic heap: clock ticks are non-negative");
    clock_ = now;
    TickQueue::Entry e{};
    while (events_.pop_due(to_tick(now), e)) {
      Item& it = items_[e.handle];
      if (it.stamp != e.stamp || it.fails_at == kNever) continue;  // superseded
      it.fails_at = kNever;  // consumed: whatever is scheduled next is a new event
      --live_events_;
      const Handle child = e.handle;
      const std::size_t pos = it.position;
      const std::size_t parent = (pos - 1) / 2;
      if (less_at(pos, parent, now)) {
        swap_positions(pos, parent);
        reschedule_around(parent);
        reschedule_around(pos);
        ++swaps_;
      } else {
        // Scheduled early on purpose (rounding slack): look again a tick later.
        set_event(child, std::max(certificate_at(pos, now), now + 1));
      }
    }
  }

  // Checks the heap order at `now` (tests).
  bool valid(double now) const {
    for (std::size_t i = 1; i < heap_.size(); ++i) {
      if (less_at(i, (i - 1) / 2, now)) return false;
    }
    return true;
  }

  // Order changes replayed by advancing the clock so far (tests, benchmarks).
  std::uint64_t swaps() const { return swaps_; }

 private:
  static constexpr std::size_t kAbsent = static_cast<std::size_t>(-1);

  // What the heap orders, kept in its array so that comparisons touch nothing else.
  struct Slot {
    double a;
    double b;
    Handle h;
  };

  struct Item {
    Payload payload{};
    std::size_t position = kAbsent;   // in heap_
    double fails_at = kNever;         // when this item drops below its parent (kNever: no event queued)
    std::uint32_t stamp = 0;          // of its current event in events_ (older entries are stale)
    bool pending = false;             // a raise noted but not applied (see update)
    double pending_a = 0;
    double pending_b = 0;
  };

  double value(const Slot& s, double now) const { return timeless_ ? s.a : s.a / (now - s.b); }
  bool less_at(std::size_t i, std::size_t j, double now) const { return value(heap_[i], now) < value(heap_[j], now); }

  // When the item at `pos` (the child) scores below its parent: `now` if it already does (due at once), else the first clock tick
  // after `now` at which it will, or kNever. With f = a / (t - b): child < parent  <=>
  // t (a_c - a_p) < a_c b_p - a_p b_c, so as t grows the smaller a wins, and the curves cross once.
  double certificate_at(std::size_t pos, double now) const {
    const std::size_t parent = (pos - 1) / 2;
    if (less_at(pos, parent, now)) return now;
    if (timeless_) return kNever;
    const Slot& c = heap_[pos];
    const Slot& p = heap_[parent];
    if (!(c.a < p.a)) return kNever;  // the child never overtakes: its curve stays above
    // The crossing, in extended precision, scheduled a little early: a late event would leave the heap out of
    // order, an early one is only checked again a tick later (advance). The slack covers the rounding of
    // the crossing (large clocks make a_c b_p - a_p b_c cancel) and of the scores' own comparison.
    const long double ac = c.a, ap = p.a, bc = c.b, bp = p.b;
    const long double crossing = (ac * bp - ap * bc) / (ac - ap);
    const long double slack = 2 + 1e-12L * (std::fabs(ac * bp) + std::fabs(ap * bc)) / (ap - ac);
    const double tick = static_cast<double>(std::floor(crossing - slack)) + 1;
    return std::max(tick, now + 1);
  }

  void place(std::size_t pos, const Slot& s) {
    heap_[pos] = s;
    items_[s.h].position = pos;
  }

  void swap_positions(std::size_t i, std::size_t j) {
    std::swap(heap_[i], heap_[j]);
    items_[heap_[i].h].position = i;
    items_[heap_[j].h].position = j;
  }

  // Moves the item at `pos` up or down to where it belongs at `now`, then renews the certificates of every
  // item whose parent changed.
  void restore(std::size_t pos, double now) {
    if (pos > 0 && less_at(pos, (pos - 1) / 2, now)) {
      sift_up(pos, now);
    } else {
      sift_down(pos, now);
    }
  }

  // The sifts move items first and renew certificates once the path is settled: every item on the path got
  // a new parent or new children, so each path position is renewed with its children.
  void sift_up(std::size_t pos, double now) {
    const std::size_t start = pos;
    while (pos > 0) {
      const std::size_t parent = (pos - 1) / 2;
      if (!less_at(pos, parent, now)) break;
      swap_positions(pos, parent);
      pos = parent;
    }
    for (std::size_t p = start;; p = (p - 1) / 2) {  // from the start up to where the item settled
      reschedule_around(p);
      if (p == pos) break;
    }
  }

  void sift_down(std::size_t pos, double now) {
    const std::size_t start = pos;
    for (;;) {
      std::size_t smallest = pos;
      for (std::size_t c = 2 * pos + 1; c <= 2 * pos + 2 && c < heap_.size(); ++c) {
        if (less_at(c, smallest, now)) smallest = c;
      }
      if (smallest == pos) break;
      swap_positions(pos, smallest);
      pos = smallest;
    }
    reschedule(start);
    for (std::size_t p = pos;; p = (p - 1) / 2) {  // from where the item settled up to the start
      reschedule_children(p);
      if (p == start) break;
    }
  }

  // Renews the certificates of the item at `pos` (against its parent) and of its children (against it).
  void reschedule_around(std::size_t pos) {
    reschedule(pos);
    reschedule_children(pos);
  }

  void reschedule_children(std::size_t pos) {
    for (std::size_t c = 2 * pos + 1; c <= 2 * pos + 2 && c < heap_.size(); ++c) reschedule(c);
  }

  void reschedule(std::size_t pos) {
    set_event(heap_[pos].h, pos == 0 ? kNever : certificate_at(pos, clock_));
  }

  // ---- the event queue ----

  static std::uint64_t to_tick(double t) {
    return t >= 1.8e19 ? TickQueue::kNone - 1 : static_cast<std::uint64_t>(t);
  }

  void set_event(Handle h, double fails_at) {
    Item& it = items_[h];
    if (fails_at == it.fails_at) return;  // unchanged
    if (it.fails_at == kNever) ++live_events_;
    if (fails_at == kNever) --live_events_;
    it.fails_at = fails_at;
    ++it.stamp;
    if (fails_at == kNever) return;
    events_.push(to_tick(fails_at), h, it.stamp);
    if (events_.size() > 4 * live_events_ + 4096) {
      events_.compact([this](const TickQueue::Entry& e) {
        const Item& x = items_[e.handle];
        return x.stamp == e.stamp && x.fails_at != kNever;
      });
    }
  }

  void drop_event(Handle h) { set_event(h, kNever); }

  bool timeless_;
  double clock_ = -std::numeric_limits<double>::infinity();
  std::uint64_t swaps_ = 0;
  std::vector<Item> items_;
  std::vector<Handle> free_;
  std::vector<Slot> heap_;  // in heap order
  TickQueue events_;          // when each parent-child order fails
  std::size_t live_events_ = 0;
};

}  // namespace dtr::heuristics

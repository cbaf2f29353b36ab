// A kinetic min-heap over scores that move with time the way DTR's do: item i scores
//     f_i(t) = a_i / (t - b_i)        (a_i > 0, t > b_i)
// i.e. a cost-per-byte a over a staleness t - b that grows with the clock t. Two such curves cross at most
// once, so the heap keeps, for every parent-child pair, the time its order fails (its certificate) in a
// second heap of events; advancing the clock replays the swaps due by then. The minimum at any time is the
// root, exact: no sampling, no rescoring of every item (Basch, Guibas and Hershberger's kinetic heap).
//
// Items with `timeless` set score a_i alone (h_size, h_MSPS): their order never changes by itself.
//
// Scores that only rise (the forecast heuristic's deadline curves) need no certificates: heuristics/rising_heap.h.
//
// Handles are small integers the heap hands out; `Payload` is what the caller gets back (a storage).
// Thread safety: none; one heap belongs to one runtime's thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "dtr/check.h"
#include "heuristics/handles.h"
#include "heuristics/tick_queue.h"

namespace dtr::heuristics {

template <typename Payload>
class KineticHeap {
 public:
  using Handle = std::uint32_t;
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  static constexpr std::size_t kArity = 4;  // children a slot (see for_children)

  // The score of a live item at clock `now` (the value the heap orders by).
  double score(Handle h, double now) const { return value(heap_[items_[h].position], now); }

  explicit KineticHeap(bool timeless = false) : timeless_(timeless) {}

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  Payload payload(Handle h) const { return items_[h].payload; }
  // Whether `h` holds an item now (a handle is reused once its item is erased).
  bool holds(Handle h) const { return h < items_.size() && items_[h].position != kAbsent; }

  // Adds an item scoring a / (t - b) from clock `now` on; `now` must not run behind earlier calls, and
  // now - b must be > 0. Equal scores go to the later `arrival` (0: the next in insertion order).
  Handle insert(Payload payload, double a, double b, double now, std::uint64_t arrival = 0) {
    advance(now);
    bool fresh = false;
    const Handle h = handles_.take(fresh);
    if (fresh) {
      items_.emplace_back();
      event_stamps_.push_back(kNoEvent);
    }
    Item& it = items_[h];
    arrivals_ = std::max(arrivals_ + 1, arrival);
    it = Item{payload, static_cast<std::uint32_t>(heap_.size()), false, 0, 0, arrival != 0 ? arrival : arrivals_};
    heap_.push_back(Slot{a, b, kNever, h});
    sift_up(it.position, now);
    return h;
  }

  void erase(Handle h, double now) {
    advance(now);
    Item& it = items_[h];
    DTR_CHECK(it.position != kAbsent, InvalidArgument, "kinetic heap: erasing an item that is not in it");
    const std::size_t pos = it.position;
    if (heap_[pos].fails_at != kNever) --live_events_;
    event_stamps_[h] = kNoEvent;
    it.position = kAbsent;
    handles_.give_back(h);
    const Slot last = heap_.back();
    heap_.pop_back();
    if (pos < heap_.size()) refill(pos, last, now);
  }

  // The item's a and b changed (its neighbourhood or its last access). An access (b grew) that raises the
  // score at every future time (a did not fall) is only noted: the old curve stays in the heap as a lower
  // bound and the item moves when it reaches the top. Accesses, the most frequent change, thus cost no
  // reordering, and the old curve, older than the new one, falls slowly: it overtakes its parent less often.
  // Any other change reorders at once (a neighbourhood that grew: applied where the item is, it sinks a
  // few levels; noted, it would sink from the root when it got there).
  void update(Handle h, double a, double b, double now) {
    advance(now);
    Item& it = items_[h];
    DTR_CHECK(it.position != kAbsent, InvalidArgument, "kinetic heap: updating an item that is not in it");
    Slot& slot = heap_[it.position];
    if (!timeless_ && a >= slot.a && b > slot.b) {
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
    update(h, a(h), b, now);
  }

  // The item with the lowest score at `now` (advances the clock to `now` first). Exact: every other item's
  // curve in the heap is its own or a lower bound of it, and the top's is its own.
  Handle top(double now) {
    advance(now);
    DTR_CHECK(!heap_.empty(), InvalidArgument, "kinetic heap: top of an empty heap");
    while (items_[heap_[0].h].pending) {
      Item& it = items_[heap_[0].h];
      it.pending = false;
      refill(0, Slot{it.pending_a, it.pending_b, kNever, heap_[0].h}, now);  // the root has no event
    }
    return heap_[0].h;
  }

  // The item's score with every noted change applied (the heap may still order it by a lower bound).
  double current_score(Handle h, double now) const {
    const Item& it = items_[h];
    if (!it.pending) return score(h, now);
    return value(Slot{it.pending_a, it.pending_b, kNever, h}, now);
  }

  // The item's a as last set (a noted change included).
  double a(Handle h) const {
    const Item& it = items_[h];
    return it.pending ? it.pending_a : heap_[it.position].a;
  }
  // The item's b as last set (a noted change included).
  double b(Handle h) const {
    const Item& it = items_[h];
    return it.pending ? it.pending_b : heap_[it.position].b;
  }
  // The clock of the last call.
  double clock() const { return clock_; }

  // Replays every order change due by `now`.
  void advance(double now) {
    DTR_CHECK(now >= clock_, InvalidArgument, "kinetic heap: the clock ran backwards");
    DTR_CHECK(now >= 0, InvalidArgument, "kinetic heap: clock ticks are non-negative");
    clock_ = now;
    TickQueue::Entry e{};
    while (events_.pop_due(to_tick(now), e)) {
      // Superseded, consumed, or its item erased: told by the stamps alone, without the item and its slot.
      if (event_stamps_[e.handle] != e.stamp) continue;
      const std::size_t pos = items_[e.handle].position;
      Slot& slot = heap_[pos];
      slot.fails_at = kNever;  // consumed: whatever is scheduled next is a new event
      event_stamps_[e.handle] = kNoEvent;
      --live_events_;
      const std::size_t parent = parent_of(pos);
      if (less_at(pos, parent, now)) {
        swap_positions(pos, parent);
        // The risen item has a new parent and new children, the sunk one new children; other items moved
        // past each other, so any of these pairs may be out of order already (due at once).
        reschedule_checked(parent);
        for_children(parent, [&](std::size_t c) { reschedule_checked(c); });
        for_children(pos, [&](std::size_t c) { reschedule_checked(c); });
        ++swaps_;
      } else {
        // Scheduled early on purpose (rounding slack): look again a tick later.
        set_event(pos, std::max(certificate(pos), now + 1));
      }
    }
  }

  // Checks the heap order at `now` (tests).
  bool valid(double now) const {
    for (std::size_t i = 1; i < heap_.size(); ++i) {
      if (less_at(i, parent_of(i), now)) return false;
    }
    return true;
  }

  // Order changes replayed by advancing the clock so far (tests, benchmarks).
  std::uint64_t swaps() const { return swaps_; }

 private:
  static constexpr std::uint32_t kAbsent = static_cast<std::uint32_t>(-1);
  static constexpr std::uint32_t kNoEvent = 0;

  // What the heap orders and the item's certificate, kept in its array so that a sift touches nothing else
  // but the moved items' positions: comparing the children of a slot and renewing their certificates reads
  // and writes the same few cache lines.
  struct Slot {
    double a;
    double b;
    double fails_at;  // when this item drops below its parent (kNever: no event queued)
    Handle h;
  };

  struct Item {
    Payload payload{};
    std::uint32_t position = kAbsent;  // in heap_
    bool pending = false;              // a raise noted but not applied (see update)
    double pending_a = 0;
    double pending_b = 0;
    std::uint64_t arrival = 0;  // insertion order: equal scores go to the latest arrival
  };

  // A d-ary heap: fewer levels than a binary one for a sift to cross (log_4 n: 8 at 10^5 items), and the
  // children of a slot sit side by side in memory.
  static std::size_t parent_of(std::size_t pos) { return (pos - 1) / kArity; }
  static std::size_t first_child(std::size_t pos) { return kArity * pos + 1; }
  template <typename F>
  void for_children(std::size_t pos, F&& f) const {
    const std::size_t first = first_child(pos);
    const std::size_t end = std::min(first + kArity, heap_.size());
    for (std::size_t c = first; c < end; ++c) f(c);
  }

  double value(const Slot& s, double now) const {
    if (timeless_) return s.a;
    return s.a / (now - s.b);
  }
  // Heap order: the lower score, and between equal scores the later arrival (as the DTR authors' runtime
  // breaks ties: the last candidate in its list). Equal curves stay equal, so ties need no certificate.
  bool before(const Slot& x, double vx, const Slot& y, double vy) const {
    return vx < vy || (vx == vy && items_[x.h].arrival > items_[y.h].arrival);
  }
  bool less_at(std::size_t i, std::size_t j, double now) const {
    return before(heap_[i], value(heap_[i], now), heap_[j], value(heap_[j], now));
  }

  // When the item at `pos` (the child) drops below its parent, given that it does not at the clock: the
  // first clock tick after it at which it will, or kNever. With f = a / (t - b): child < parent  <=>
  // t (a_c - a_p) < a_c b_p - a_p b_c, so as t grows the smaller a wins, and the curves cross once.
  double certificate(std::size_t pos) const {
    const Slot& p = heap_[parent_of(pos)];
    return certificate(heap_[pos], p.a, p.b);
  }

  double certificate(const Slot& c, double parent_a, double parent_b) const {
    if (timeless_ || c.a >= parent_a) return kNever;  // the child never overtakes: its curve stays above
    return crossing_tick(c.a, c.b, parent_a, parent_b);
  }

  double crossing_tick(double ac, double bc, double ap, double bp) const {
    // The crossing, scheduled a little early: a late event would leave the heap out of order, an early one
    // is only checked again a tick later (advance). The slack covers the rounding of the crossing (large
    // clocks make a_c b_p - a_p b_c cancel: its error is within 2^-52 (|a_c b_p| + |a_p b_c|), the slack's
    // relative term 1e-12 is 4500 times that) and of the scores' own comparison.
    const double cross_terms = std::fabs(ac * bp) + std::fabs(ap * bc);
    const double crossing = (ac * bp - ap * bc) / (ac - ap);
    const double slack = 2 + 1e-12 * cross_terms / std::fabs(ap - ac);
    const double tick = std::floor(crossing - slack) + 1;
    return std::max(tick, clock_ + 1);
  }

  // The same where the pair may be out of order already (after a kinetic swap): then due at once.
  double certificate_checked(std::size_t pos) const {
    return less_at(pos, parent_of(pos), clock_) ? clock_ : certificate(pos);
  }

  void place(std::size_t pos, const Slot& s) {
    heap_[pos] = s;
    items_[s.h].position = static_cast<std::uint32_t>(pos);
  }

  void swap_positions(std::size_t i, std::size_t j) {
    std::swap(heap_[i], heap_[j]);
    items_[heap_[i].h].position = static_cast<std::uint32_t>(i);
    items_[heap_[j].h].position = static_cast<std::uint32_t>(j);
  }

  // Moves the item at `pos` up or down to where it belongs at `now`, then renews the certificates of every
  // item whose parent changed.
  void restore(std::size_t pos, double now) {
    if (pos > 0 && less_at(pos, parent_of(pos), now)) {
      sift_up(pos, now);
    } else {
      sift_down(pos, now);
    }
  }

  // The sifts move items first and renew certificates once the path is settled: every item on the path got
  // a new parent, so each path position's children are renewed, and the top of the path itself. The heap is
  // in order at the clock throughout (advance ran first), so no renewed pair is out of order.
  void sift_up(std::size_t pos, double now) {
    const std::size_t start = pos;
    const Slot moving = heap_[pos];
    const double v = value(moving, now);
    while (pos > 0) {
      const std::size_t parent = parent_of(pos);
      if (!before(moving, v, heap_[parent], value(heap_[parent], now))) break;
      place(pos, heap_[parent]);
      pos = parent;
    }
    place(pos, moving);
    renew_path(pos, start);
  }

  // The first in heap order of the children starting at `first` (which exists), and its score at `now`.
  std::size_t smallest_child(std::size_t first, double now, double& best) const {
    const std::size_t end = std::min(first + kArity, heap_.size());
    std::size_t smallest = first;
    best = value(heap_[first], now);
    for (std::size_t c = first + 1; c < end; ++c) {
      const double x = value(heap_[c], now);
      if (before(heap_[c], x, heap_[smallest], best)) {
        best = x;
        smallest = c;
      }
    }
    return smallest;
  }

  void sift_down(std::size_t pos, double now) {
    const std::size_t start = pos;
    const Slot moving = heap_[pos];
    double v = value(moving, now);
    for (;;) {
      const std::size_t first = first_child(pos);
      if (first >= heap_.size()) break;
      double best = 0;
      const std::size_t smallest = smallest_child(first, now, best);
      if (!before(heap_[smallest], best, moving, v)) break;
      place(pos, heap_[smallest]);
      pos = smallest;
    }
    place(pos, moving);
    renew_path(start, pos);
  }

  // Fills the slot at `pos` (its item gone) with `s`: the hole sinks to a leaf taking the smaller child each
  // level (one comparison a child, none against `s`, which mostly belongs near the leaves), then `s` rises
  // from there (Wegener's bottom-up heapsort; Floyd's trick).
  void refill(std::size_t pos, const Slot& s, double now) {
    std::size_t hole = pos;
    for (;;) {
      const std::size_t first = first_child(hole);
      if (first >= heap_.size()) break;
      double best = 0;
      const std::size_t smallest = smallest_child(first, now, best);
      place(hole, heap_[smallest]);
      hole = smallest;
    }
    const std::size_t leaf = hole;
    const double v = value(s, now);
    while (hole > 0) {
      const std::size_t parent = parent_of(hole);
      if (!before(s, v, heap_[parent], value(heap_[parent], now))) break;
      place(hole, heap_[parent]);
      hole = parent;
    }
    place(hole, s);
    // Every slot between the higher of `pos` and where `s` settled and the leaf holds a new item (one path).
    renew_path(std::min(hole, pos), leaf);
  }

  // Renews the certificates of the item at `top` and of the children of every slot on the path from `top`
  // down to `bottom` (its descendant).
  void renew_path(std::size_t top, std::size_t bottom) {
    reschedule(top);
    for (std::size_t p = bottom;; p = parent_of(p)) {
      renew_children(p);
      if (p == top) break;
    }
  }

  void renew_children(std::size_t pos) {
    const std::size_t first = first_child(pos);
    const std::size_t end = std::min(first + kArity, heap_.size());
    if (first >= end) return;
    const double a = heap_[pos].a, b = heap_[pos].b;
    for (std::size_t c = first; c < end; ++c) {
      Slot& child = heap_[c];
      const double fails_at = certificate(child, a, b);
      if (fails_at != child.fails_at) change_event(child, fails_at);
    }
  }

  void reschedule(std::size_t pos) { set_event(pos, pos == 0 ? kNever : certificate(pos)); }
  void reschedule_checked(std::size_t pos) { set_event(pos, pos == 0 ? kNever : certificate_checked(pos)); }

  // ---- the event queue ----

  static std::uint64_t to_tick(double t) {
    return t >= 1.8e19 ? TickQueue::kNone - 1 : static_cast<std::uint64_t>(t);
  }

  // Stamps come from one counter: an entry is stale once its item's stamp moved on, and a stale entry
  // leaves the queue at the next compaction, long before the 32-bit counter could come round to it again.
  void set_event(std::size_t pos, double fails_at) {
    Slot& s = heap_[pos];
    if (fails_at != s.fails_at) change_event(s, fails_at);  // mostly unchanged (kNever, as it was): inlined
  }

  void change_event(Slot& s, double fails_at) {
    if (s.fails_at == kNever) ++live_events_;
    if (fails_at == kNever) --live_events_;
    s.fails_at = fails_at;
    if (fails_at == kNever) {
      event_stamps_[s.h] = kNoEvent;
      return;
    }
    if (++stamps_ == kNoEvent) ++stamps_;  // the counter came round: kNoEvent stamps no event
    event_stamps_[s.h] = stamps_;
    events_.push(to_tick(fails_at), s.h, stamps_);
    if (events_.size() > 4 * live_events_ + 4096) {
      events_.compact([this](const TickQueue::Entry& e) { return event_stamps_[e.handle] == e.stamp; });
    }
  }

  bool timeless_;
  double clock_ = -std::numeric_limits<double>::infinity();
  std::uint64_t swaps_ = 0;
  std::uint32_t stamps_ = 0;
  std::uint64_t arrivals_ = 0;
  std::vector<Item> items_;
  // By handle: the stamp of its item's queued event, kNoEvent where there is none (or no item). Apart from the
  // items and slots, a tenth their size: the queue holds as many stale entries as live ones, and the advance
  // and the compactions tell them apart here without a cache miss into the item and another into its slot.
  std::vector<std::uint32_t> event_stamps_;
  Handles handles_;
  std::vector<Slot> heap_;  // in heap order
  TickQueue events_;          // when each parent-child order fails
  std::size_t live_events_ = 0;
};

}  // namespace dtr::heuristics

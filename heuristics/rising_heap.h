// A min-heap over scores that only rise with the clock: item i scores
//     f_i(t) = a_i / (b_i - t)        (a_i > 0, t < b_i)
// a cost-per-byte over the ticks left until a deadline b_i (the forecast heuristic's next use). The owner takes
// an item out before the clock reaches its deadline.
//
// A score read at one clock is a lower bound of the same item's score at every later one, so the heap orders
// items by the score each had when it was last read (its key) and reads again only at the top: the root is
// the minimum once its key is its score now (every other item's score is at least its key, which is at least
// the root's); else its key is brought up to date, it sinks, and the next root is checked (the lazy
// evaluation of CELF, whose gains only fall). Where a kinetic heap (heuristics/kinetic_heap.h) replays every
// crossing of two curves anywhere in the heap, with a certificate for each parent-child pair, this one does
// work only where the order is read: a removal or a change costs one sift and no certificate.
//
// Equal scores go to the later arrival, as in a scan. Handles are small integers the heap hands out, reused
// once their item is erased; `Payload` is what the caller gets back.
// Thread safety: none; one heap belongs to one runtime's thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtr/check.h"
#include "heuristics/handles.h"

namespace dtr::heuristics {

template <typename Payload>
class RisingHeap {
 public:
  using Handle = std::uint32_t;

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  Payload payload(Handle h) const { return items_[h].payload; }
  // Whether `h` holds an item now.
  bool holds(Handle h) const { return h < items_.size() && items_[h].position != kAbsent; }
  // The clock of the last call that read scores.
  double clock() const { return clock_; }
  // The item's score at `now` (exact, whatever its key).
  double score(Handle h, double now) const { return value(items_[h], now); }

  // Adds an item scoring a / (deadline - t) from clock `now` on (deadline > now). Equal scores go to the later
  // `arrival` (0: the next in insertion order).
  Handle insert(Payload payload, double a, double deadline, double now, std::uint64_t arrival = 0) {
    set_clock(now);
    DTR_CHECK(deadline > now, InvalidArgument, "rising heap: a deadline at or before the clock");
    bool fresh = false;
    const Handle h = handles_.take(fresh);
    if (fresh) {
      items_.emplace_back();
    }
    arrivals_ = std::max(arrivals_ + 1, arrival);
    items_[h] = Item{payload, static_cast<std::uint32_t>(heap_.size()), a, deadline};
    heap_.push_back(Slot{a / (deadline - now), arrival != 0 ? arrival : arrivals_, h});
    sift_up(heap_.size() - 1);
    return h;
  }

  void erase(Handle h) {
    DTR_CHECK(holds(h), InvalidArgument, "rising heap: erasing an item that is not in it");
    const std::size_t pos = items_[h].position;
    items_[h].position = kAbsent;
    handles_.give_back(h);
    const Slot last = heap_.back();
    heap_.pop_back();
    if (pos == heap_.size()) return;
    place(pos, last);
    restore(pos);
  }

  // The item's curve changed. Where its score now is no lower than its key, the key stays (still a lower
  // bound: the new curve rises from there too) and the item moves only if it reaches the top.
  void update(Handle h, double a, double deadline, double now) {
    set_clock(now);
    DTR_CHECK(holds(h), InvalidArgument, "rising heap: updating an item that is not in it");
    DTR_CHECK(deadline > now, InvalidArgument, "rising heap: a deadline at or before the clock");
    Item& it = items_[h];
    it.a = a;
    it.deadline = deadline;
    Slot& slot = heap_[it.position];
    const double v = value(it, now);
    if (v >= slot.key) return;
    slot.key = v;
    sift_up(it.position);
  }

  // The item with the lowest score at `now` (the latest arrival among equal ones). Exact: the root's key is
  // brought up to date until it is its score, and every other key is a lower bound.
  Handle top(double now) {
    set_clock(now);
    DTR_CHECK(!heap_.empty(), InvalidArgument, "rising heap: top of an empty heap");
    for (;;) {
      Slot& root = heap_[0];
      const double v = value(items_[root.h], now);
      if (v == root.key) return root.h;  // a key is never above its score (the clock runs forwards)
      root.key = v;
      ++refreshes_;
      sift_down(0);
    }
  }

  // Whether the keys are in heap order and each is a lower bound of its item's score at `now` (tests).
  bool valid(double now) const {
    for (std::size_t i = 0; i < heap_.size(); ++i) {
      if (heap_[i].key > value(items_[heap_[i].h], now)) return false;
      if (i > 0 && before(heap_[i], heap_[parent_of(i)])) return false;
    }
    return true;
  }

  // Keys brought up to date at the top so far (tests).
  std::uint64_t refreshes() const { return refreshes_; }

 private:
  static constexpr std::uint32_t kAbsent = static_cast<std::uint32_t>(-1);
  static constexpr std::size_t kArity = 4;  // children a slot, side by side: log_4 n levels to sift across

  // What a sift reads: the key and the tie-break, without the item.
  struct Slot {
    double key;             // the item's score when last read: a lower bound of its score from then on
    std::uint64_t arrival;  // equal keys: the later arrival first
    Handle h;
  };
  struct Item {
    Payload payload{};
    std::uint32_t position = kAbsent;  // in heap_
    double a = 0;
    double deadline = 0;
  };

  static double value(const Item& it, double now) { return it.a / (it.deadline - now); }
  static bool before(const Slot& x, const Slot& y) {
    return x.key < y.key || (x.key == y.key && x.arrival > y.arrival);
  }
  static std::size_t parent_of(std::size_t pos) { return (pos - 1) / kArity; }

  void set_clock(double now) {
    DTR_CHECK(now >= clock_, InvalidArgument, "rising heap: the clock ran backwards");
    clock_ = now;
  }

  void place(std::size_t pos, const Slot& s) {
    heap_[pos] = s;
    items_[s.h].position = static_cast<std::uint32_t>(pos);
  }

  void restore(std::size_t pos) {
    if (pos > 0 && before(heap_[pos], heap_[parent_of(pos)])) {
      sift_up(pos);
    } else {
      sift_down(pos);
    }
  }

  void sift_up(std::size_t pos) {
    const Slot moving = heap_[pos];
    while (pos > 0) {
      const std::size_t parent = parent_of(pos);
      if (!before(moving, heap_[parent])) break;
      place(pos, heap_[parent]);
      pos = parent;
    }
    place(pos, moving);
  }

  void sift_down(std::size_t pos) {
    const Slot moving = heap_[pos];
    for (;;) {
      const std::size_t first = kArity * pos + 1;
      if (first >= heap_.size()) break;
      const std::size_t end = std::min(first + kArity, heap_.size());
      std::size_t smallest = first;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (before(heap_[c], heap_[smallest])) smallest = c;
      }
      if (!before(heap_[smallest], moving)) break;
      place(pos, heap_[smallest]);
      pos = smallest;
    }
    place(pos, moving);
  }

  double clock_ = -std::numeric_limits<double>::infinity();
  std::uint64_t arrivals_ = 0;
  std::uint64_t refreshes_ = 0;
  std::vector<Item> items_;
  Handles handles_;
  std::vector<Slot> heap_;  // in heap order of (key, later arrival)
};

}  // namespace dtr::heuristics

// A monotone priority queue of events keyed by clock ticks (a radix heap): the kinetic heap's certificates
// fail at integer ticks no earlier than the current one, so pushing costs O(1) and popping is amortized by
// the ticks' bits, where a binary heap paid log n cache misses per certificate.
//
// Entries are never updated or removed in place: the owner stamps each entry and ignores those whose stamp
// is no longer current when they come out (lazy deletion), and compacts the queue when stale entries pile up.
//
// Thread safety: none.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtr/check.h"

namespace dtr::heuristics {

class TickQueue {
 public:
  struct Entry {
    std::uint64_t tick;
    std::uint32_t handle;
    std::uint32_t stamp;
  };
  static constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();

  std::size_t size() const { return size_; }

  // `tick` must not be earlier than the last tick popped.
  void push(std::uint64_t tick, std::uint32_t handle, std::uint32_t stamp) {
    DTR_CHECK(tick >= last_, InvalidArgument, "tick queue: an event before the current tick");
    buckets_[bucket(tick)].push_back(Entry{tick, handle, stamp});
    ++size_;
    next_due_ = std::min(next_due_, tick);
  }

  // Takes out the next entry due by `limit` (stale ones too: the owner checks stamps); false when none is.
  bool pop_due(std::uint64_t limit, Entry& out) {
    if (next_due_ > limit) return false;  // a lower bound on every tick in the queue
    if (buckets_[0].empty()) {
      std::size_t i = 1;
      while (i < buckets_.size() && buckets_[i].empty()) ++i;
      if (i == buckets_.size()) {
        next_due_ = kNone;
        return false;
      }
      // Bucket i holds the smallest ticks (they share more leading bits with last_ than any later bucket's).
      std::uint64_t smallest = kNone;
      for (const Entry& e : buckets_[i]) smallest = std::min(smallest, e.tick);
      next_due_ = smallest;
      if (smallest > limit) return false;
      last_ = smallest;
      std::vector<Entry> moving;
      moving.swap(buckets_[i]);
      for (const Entry& e : moving) buckets_[bucket(e.tick)].push_back(e);
      moving.clear();
      buckets_[i].swap(moving);  // keep the bucket's capacity
    }
    out = buckets_[0].back();
    buckets_[0].pop_back();
    --size_;
    // Bucket 0 held every entry of tick last_ (pushes of last_ go there too): the rest come later.
    if (buckets_[0].empty()) next_due_ = last_ + 1;
    return true;
  }

  // Drops the entries `keep` rejects (stale ones).
  template <typename Keep>
  void compact(Keep&& keep) {
    size_ = 0;
    for (auto& b : buckets_) {
      std::erase_if(b, [&](const Entry& e) { return !keep(e); });
      size_ += b.size();
    }
  }

 private:
  std::size_t bucket(std::uint64_t tick) const {
    return tick == last_ ? 0 : static_cast<std::size_t>(std::bit_width(tick ^ last_));
  }

  std::array<std::vector<Entry>, 65> buckets_;
  std::uint64_t last_ = 0;
  std::uint64_t next_due_ = kNone;
  std::size_t size_ = 0;
};

}  // namespace dtr::heuristics

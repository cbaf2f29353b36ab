// A monotone priority queue of events keyed by clock ticks (a radix heap): the kinetic heap's certificates
// fail at integer ticks no earlier than the current one, so pushing costs O(1) and popping is amortized by
// the ticks' digits, where a binary heap paid log n cache misses per certificate.
//
// Buckets by the highest base-16 digit in which a tick differs from the last tick popped, and by that digit's
// value: an entry moves to a lower digit each time its bucket is emptied out, so at most once a digit (five
// moves for ticks 10^5 apart), where buckets by the highest differing bit moved it once a bit (about four times
// as often in the eviction-search benchmark). A bitmap of the nonempty buckets finds the next one.
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
    put(Entry{tick, handle, stamp});
    ++size_;
    next_due_ = std::min(next_due_, tick);
  }

  // Takes out the next entry due by `limit` (stale ones too: the owner checks stamps); false when none is.
  bool pop_due(std::uint64_t limit, Entry& out) {
    if (next_due_ > limit) return false;  // a lower bound on every tick in the queue
    if (buckets_[0].empty()) {
      const std::size_t i = first_nonempty();
      if (i == kBuckets) {
        next_due_ = kNone;
        return false;
      }
      // Bucket i holds the smallest ticks: its digit is the lowest at which any entry differs from last_, and
      // its value there the least.
      std::uint64_t smallest = kNone;
      for (const Entry& e : buckets_[i]) smallest = std::min(smallest, e.tick);
      next_due_ = smallest;
      if (smallest > limit) return false;
      last_ = smallest;
      // Every entry of bucket i shares last_'s digits from i's up: each goes to a lower digit's bucket.
      std::vector<Entry> moving;
      moving.swap(buckets_[i]);
      mark_empty(i);
      for (const Entry& e : moving) put(e);
      moving.clear();
      buckets_[i].swap(moving);  // keep the bucket's capacity
    }
    out = buckets_[0].back();
    buckets_[0].pop_back();
    --size_;
    // Bucket 0 held every entry of tick last_ (pushes of last_ go there too): the rest come later.
    if (buckets_[0].empty()) {
      mark_empty(0);
      next_due_ = last_ + 1;
    }
    return true;
  }

  // Drops the entries `keep` rejects (stale ones).
  template <typename Keep>
  void compact(Keep&& keep) {
    size_ = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      std::erase_if(buckets_[i], [&](const Entry& e) { return !keep(e); });
      size_ += buckets_[i].size();
      if (buckets_[i].empty()) mark_empty(i);
    }
  }

 private:
  static constexpr int kDigitBits = 4;
  static constexpr std::size_t kDigits = (64 + kDigitBits - 1) / kDigitBits;
  static constexpr std::size_t kRadix = std::size_t{1} << kDigitBits;
  // Bucket 0: ticks equal to last_; then kRadix buckets a digit, lowest digit first, by the digit's value.
  static constexpr std::size_t kBuckets = 1 + kDigits * kRadix;

  std::size_t bucket(std::uint64_t tick) const {
    if (tick == last_) return 0;
    const auto digit = static_cast<std::size_t>(std::bit_width(tick ^ last_) - 1) / kDigitBits;
    const auto value = static_cast<std::size_t>(tick >> (digit * kDigitBits)) & (kRadix - 1);
    return 1 + digit * kRadix + value;
  }

  void put(const Entry& e) {
    const std::size_t i = bucket(e.tick);
    buckets_[i].push_back(e);
    nonempty_[i / 64] |= std::uint64_t{1} << (i % 64);
  }

  void mark_empty(std::size_t i) { nonempty_[i / 64] &= ~(std::uint64_t{1} << (i % 64)); }

  // The first nonempty bucket after bucket 0, or kBuckets.
  std::size_t first_nonempty() const {
    for (std::size_t w = 0; w < nonempty_.size(); ++w) {
      const std::uint64_t bits = w == 0 ? nonempty_[0] & ~std::uint64_t{1} : nonempty_[w];
      if (bits != 0) return w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
    }
    return kBuckets;
  }

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::array<std::uint64_t, (kBuckets + 63) / 64> nonempty_{};
  std::uint64_t last_ = 0;
  std::uint64_t next_due_ = kNone;
  std::size_t size_ = 0;
};

}  // namespace dtr::heuristics

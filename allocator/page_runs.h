// A set of pages kept as disjoint, non-adjacent runs [first, end): which pages of an expandable range are
// mapped, and which of those no block is on. Internal to allocator/ (caching_allocator_state.h); not
// thread-safe (the allocator's lock guards it). Runs, not pages, so that 4 KiB host pages under a block of
// megabytes cost a few tree operations, not thousands.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>

namespace dtr::detail {

class PageRuns {
 public:
  std::size_t pages() const { return pages_; }
  bool empty() const { return runs_.empty(); }

  // How many pages of [first, end) are in the set.
  std::size_t covered(std::size_t first, std::size_t end) const {
    std::size_t count = 0;
    for (auto it = first_touching(first); it != runs_.end() && it->first < end; ++it) {
      count += std::min(end, it->second) - std::max(first, it->first);
    }
    return count;
  }

  // Calls gap(a, b) for each run [a, b) of [first, end) not in the set, in address order.
  template <typename F>
  void for_each_gap(std::size_t first, std::size_t end, F&& gap) const {
    std::size_t at = first;
    for (auto it = first_touching(first); it != runs_.end() && it->first < end; ++it) {
      if (it->first > at) gap(at, it->first);
      at = std::max(at, it->second);
    }
    if (at < end) gap(at, end);
  }

  void insert(std::size_t first, std::size_t end) {
    if (first >= end) return;
    pages_ += (end - first) - covered(first, end);
    auto it = runs_.lower_bound(first);
    if (it != runs_.begin() && std::prev(it)->second >= first) --it;  // a run that touches or overlaps first
    while (it != runs_.end() && it->first <= end) {
      first = std::min(first, it->first);
      end = std::max(end, it->second);
      it = runs_.erase(it);
    }
    runs_.emplace(first, end);
  }

  void erase(std::size_t first, std::size_t end) {
    if (first >= end) return;
    auto it = first_touching(first);
    while (it != runs_.end() && it->first < end) {
      const std::size_t a = it->first;
      const std::size_t b = it->second;
      pages_ -= std::min(end, b) - std::max(first, a);
      it = runs_.erase(it);
      if (a < first) runs_.emplace(a, first);
      if (b > end) it = runs_.emplace(end, b).first;
    }
  }

  // The highest run that lies below `limit` or straddles it, clipped to [.., limit); false when none.
  bool highest_below(std::size_t limit, std::size_t& first, std::size_t& end) const {
    auto it = runs_.lower_bound(limit);
    if (it == runs_.begin()) return false;
    --it;
    first = it->first;
    end = std::min(it->second, limit);
    return true;
  }

  template <typename F>
  void for_each_run(F&& run) const {
    for (const auto& [first, end] : runs_) run(first, end);
  }

 private:
  // The first run whose end is past `page`.
  std::map<std::size_t, std::size_t>::const_iterator first_touching(std::size_t page) const {
    auto it = runs_.upper_bound(page);
    if (it != runs_.begin() && std::prev(it)->second > page) --it;
    return it;
  }
  std::map<std::size_t, std::size_t>::iterator first_touching(std::size_t page) {
    auto it = runs_.upper_bound(page);
    if (it != runs_.begin() && std::prev(it)->second > page) --it;
    return it;
  }

  std::map<std::size_t, std::size_t> runs_;  // first -> end
  std::size_t pages_ = 0;
};

}  // namespace dtr::detail

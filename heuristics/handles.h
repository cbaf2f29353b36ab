// The handles of a heap's items (or an index's records): small integers, each given again once its item is
// erased, so that the arrays kept by handle stay as long as the most items held at once.
//
// Thread safety: none; it belongs to its owner.
#pragma once

#include <cstdint>
#include <vector>

namespace dtr::heuristics {

class Handles {
 public:
  // A handle for a new item: the last one given back, else the next never given (`fresh`: the owner's arrays
  // by handle grow by one).
  std::uint32_t take(bool& fresh) {
    fresh = free_.empty();
    if (fresh) return next_++;
    const std::uint32_t h = free_.back();
    free_.pop_back();
    return h;
  }
  void give_back(std::uint32_t h) { free_.push_back(h); }

 private:
  std::vector<std::uint32_t> free_;
  std::uint32_t next_ = 0;
};

}  // namespace dtr::heuristics

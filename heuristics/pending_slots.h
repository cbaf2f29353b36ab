// The candidates whose key may have changed since an index's last decision, by slot (heap handle or record
// index), each listed once however often it is marked, and however often its slot changes hands before the
// decision: both candidate indexes re-key them at the next decision instead of at every report (a key may
// walk the lineage, and between two decisions one storage is reported by many events).
//
// Thread safety: none; it belongs to one index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtr::heuristics {

class PendingSlots {
 public:
  void mark(std::uint32_t slot) {
    if (slot >= listed_.size()) listed_.resize(slot + std::size_t{1}, 0);
    if (listed_[slot] != 0) return;
    listed_[slot] = 1;
    slots_.push_back(slot);
  }
  // Calls `settle(slot)` for each listed slot, in the order they were first marked, and empties the list.
  // `settle` must not mark.
  template <typename Settle>
  void drain(Settle&& settle) {
    for (const std::uint32_t slot : slots_) {
      listed_[slot] = 0;
      settle(slot);
    }
    slots_.clear();
  }
  std::size_t size() const { return slots_.size(); }

 private:
  std::vector<std::uint32_t> slots_;
  std::vector<std::uint8_t> listed_;  // by slot: in slots_
};

}  // namespace dtr::heuristics

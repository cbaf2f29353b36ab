// A hash map from block addresses to values, for the allocator's live blocks: open addressing with linear
// probing, Fibonacci hashing over a power-of-two table, and backward-shift deletion (no tombstones). Every
// operation is O(1) expected and none allocates except when the table grows. Not thread-safe: the allocator's
// lock guards it. Address 0 marks an empty slot and is never a key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtr::detail {

template <typename Value>
class AddressMap {
 public:
  AddressMap() { slots_.resize(kInitialSlots); }

  std::size_t size() const { return size_; }

  // Inserts a key that is not present.
  void insert(std::uintptr_t key, Value value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, value);
    ++size_;
  }

  // The value stored for `key`, or nullptr.
  Value* find(std::uintptr_t key) {
    for (std::size_t i = home(key);; i = next(i)) {
      Slot& slot = slots_[i];
      if (slot.key == key) return &slot.value;
      if (slot.key == 0) return nullptr;
    }
  }

  // Removes `key`, which must be present.
  void erase(std::uintptr_t key) {
    std::size_t hole = home(key);
    while (slots_[hole].key != key) hole = next(hole);
    // Shift back every later entry of the probe run that may not stay behind the hole.
    for (std::size_t i = next(hole);; i = next(i)) {
      Slot& slot = slots_[i];
      if (slot.key == 0) break;
      const std::size_t want = home(slot.key);
      // `slot` may move into the hole iff its home is not in the cyclic range (hole, i].
      const bool home_in_range = hole < i ? (want > hole && want <= i) : (want > hole || want <= i);
      if (!home_in_range) {
        slots_[hole] = slot;
        hole = i;
      }
    }
    slots_[hole] = Slot{};
    --size_;
  }

 private:
  struct Slot {
    std::uintptr_t key = 0;
    Value value{};
  };

  static constexpr std::size_t kInitialSlots = 1024;

  std::size_t home(std::uintptr_t key) const {
    // Blocks are 512-byte aligned: the low bits carry nothing. Fibonacci hashing spreads the rest.
    return static_cast<std::size_t>(((key >> 9) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::size_t next(std::size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void place(std::uintptr_t key, Value value) {
    std::size_t i = home(key);
    while (slots_[i].key != 0) i = next(i);
    slots_[i] = Slot{key, value};
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    --shift_;
    for (const Slot& slot : old) {
      if (slot.key != 0) place(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64 - 10;  // keeps log2(slots) bits of the hash
};

}  // namespace dtr::detail

// Free lists for the runtime's lineage objects (closures, storages, tensor handles), which every op creates and
// most ops soon destroy: recycling their blocks costs a few instructions where malloc and free cost hundreds
// (docs/results/runtime-overhead.md). Internal to runtime/.
//
// Ownership: blocks handed out must come back before the pool dies (the runtime's objects die before it).
// Thread safety: none; a pool belongs to one runtime, driven by one thread at a time.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <utility>

namespace dtr::detail {

class ObjectPool {
 public:
  static constexpr std::size_t kGranule = 16;
  static constexpr std::size_t kLargest = 2048;  // larger blocks go straight to operator new
  static constexpr std::size_t kKeptPerClass = 4096;  // beyond this many free blocks of a size, give them back

  ObjectPool() = default;
  ~ObjectPool() {
    for (FreeBlock*& head : free_) {
      while (head != nullptr) ::operator delete(std::exchange(head, head->next));
    }
  }
  ObjectPool(const ObjectPool&) = delete;
  ObjectPool& operator=(const ObjectPool&) = delete;

  void* allocate(std::size_t bytes) {
    outstanding_ += 1;
    const std::size_t cls = size_class(bytes);
    if (cls < kClasses && free_[cls] != nullptr) {
      FreeBlock* block = free_[cls];
      free_[cls] = block->next;
      kept_[cls] -= 1;
      return block;
    }
    return ::operator new(cls < kClasses ? (cls + 1) * kGranule : bytes);
  }

  void deallocate(void* p, std::size_t bytes) noexcept {
    outstanding_ -= 1;
    const std::size_t cls = size_class(bytes);
    if (cls >= kClasses || kept_[cls] >= kKeptPerClass) {
      ::operator delete(p);
      return;
    }
    free_[cls] = ::new (p) FreeBlock{free_[cls]};
    kept_[cls] += 1;
  }

  // Blocks handed out and not yet given back: the lineage objects alive (Runtime::footprint).
  std::size_t outstanding() const { return outstanding_; }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr std::size_t kClasses = kLargest / kGranule;
  static std::size_t size_class(std::size_t bytes) { return (std::max<std::size_t>(bytes, 1) - 1) / kGranule; }

  std::array<FreeBlock*, kClasses> free_{};
  std::array<std::size_t, kClasses> kept_{};
  std::size_t outstanding_ = 0;
};

// A standard allocator over an ObjectPool, for std::allocate_shared.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "the pool hands out default-aligned blocks");

  explicit PoolAllocator(ObjectPool& p) noexcept : pool(&p) {}
  template <typename U>
  PoolAllocator(const PoolAllocator<U>& other) noexcept : pool(other.pool) {}  // NOLINT: rebinding is implicit

  T* allocate(std::size_t n) { return static_cast<T*>(pool->allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { pool->deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PoolAllocator<U>& other) const noexcept {
    return pool == other.pool;
  }

  ObjectPool* pool;
};

}  // namespace dtr::detail

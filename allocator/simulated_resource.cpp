// Addresses from a virtual range, no memory behind them: lets the simulator replay a GPU's allocations on a
// machine with less memory than the GPU had. First fit over an address-ordered free list.
#include <bit>
#include <map>
#include <mutex>

#include "allocation_registry.h"
#include "reserved_ranges.h"
#include "dtr/check.h"
#include "dtr/memory_resource.h"

namespace dtr {
namespace {

// Far from anything the host maps at low addresses, and 2 MiB aligned like a GPU's segments.
constexpr std::uintptr_t kBaseAddress = std::uintptr_t{1} << 44;

class SimulatedResource final : public MemoryResource {
 public:
  explicit SimulatedResource(std::size_t capacity) : capacity_(capacity) {
    DTR_CHECK(capacity > 0, InvalidArgument, "simulated resource: capacity must be positive");
    DTR_CHECK(capacity <= (std::uintptr_t{1} << 46), InvalidArgument,
              "simulated resource: capacity ", capacity, " is beyond the simulated 64 TiB range");
    free_ranges_.emplace(kBaseAddress, capacity);
  }

  std::size_t capacity() const override { return capacity_; }
  std::string name() const override { return "simulated"; }
  bool host_accessible() const override { return false; }

  // Ranges come from a second address area above the allocations' (bump allocated, never reused); mapped
  // bytes count against the capacity like allocated ones.
  bool maps_pages() const override { return true; }
  // A GPU's mapping granularity (cuMemGetAllocationGranularity on current devices): the simulator replays GPUs.
  std::size_t page_bytes() const override { return std::size_t{2} << 20; }

  void* reserve_range(std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    constexpr std::uintptr_t kAlign = std::uintptr_t{2} << 20;
    const std::uintptr_t size = (bytes + kAlign - 1) & ~(kAlign - 1);
    DTR_CHECK(bytes > 0, InvalidArgument, "simulated: reserve_range(0)");
    if (size > kRangeAreaEnd - next_range_) {
      OutOfMemoryInfo info;
      info.requested_bytes = bytes;
      info.capacity_bytes = capacity_;
      throw OutOfMemory(detail::concat("simulated: no address range of ", format_bytes(bytes), " left to reserve"),
                        info, __FILE__, __LINE__);
    }
    const std::uintptr_t base = next_range_;
    next_range_ += size;
    ranges_.add(base, bytes);
    return reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr): never dereferenced
  }

  void release_range(void* base, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.remove(base, bytes);
  }

  bool map(void* ptr, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.check_pages(ptr, bytes, "map");
    if (bytes > capacity_ - used_) return false;
    ranges_.mapped(ptr, bytes);
    used_ += bytes;
    return true;
  }

  void unmap(void* ptr, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.unmapped(ptr, bytes);
    used_ -= bytes;
  }

  // As a GPU's physical handle unmapped and mapped again elsewhere (cuMemUnmap, cuMemMap): all of it at once.
  std::size_t move_pages(void* from, void* to, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.check_pages(to, bytes, "move_pages");
    ranges_.unmapped(from, bytes);
    ranges_.mapped(to, bytes);
    return bytes;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    std::lock_guard lock(mutex_);
    for (auto it = free_ranges_.begin(); bytes <= capacity_ - used_ && it != free_ranges_.end(); ++it) {
      const auto [start, length] = *it;
      const std::uintptr_t aligned = (start + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
      const std::size_t padding = aligned - start;
      if (length < padding || length - padding < bytes) continue;
      free_ranges_.erase(it);
      if (padding > 0) free_ranges_.emplace(start, padding);
      if (length - padding > bytes) free_ranges_.emplace(aligned + bytes, length - padding - bytes);
      used_ += bytes;
      void* ptr = reinterpret_cast<void*>(aligned);  // NOLINT(performance-no-int-to-ptr): never dereferenced
      registry_.add(ptr, bytes);
      return ptr;
    }
    OutOfMemoryInfo info;
    info.requested_bytes = bytes;
    info.capacity_bytes = capacity_;
    info.allocated_bytes = used_;
    throw OutOfMemory(detail::concat("simulated: out of memory allocating ", format_bytes(bytes), " (",
                                     format_bytes(used_), " in use of ", format_bytes(capacity_), ")"),
                      info, __FILE__, __LINE__);
  }

  void do_deallocate(void* ptr, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    registry_.remove(ptr, bytes, "simulated");
    used_ -= bytes;
    auto start = reinterpret_cast<std::uintptr_t>(ptr);
    std::size_t length = bytes;
    auto next = free_ranges_.lower_bound(start);
    if (next != free_ranges_.end() && start + length == next->first) {
      length += next->second;
      next = free_ranges_.erase(next);
    }
    if (next != free_ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        prev->second += length;
        return;
      }
    }
    free_ranges_.emplace(start, length);
  }

 private:
  static constexpr std::uintptr_t kRangeArea = kBaseAddress + (std::uintptr_t{1} << 46);
  static constexpr std::uintptr_t kRangeAreaEnd = kRangeArea + (std::uintptr_t{1} << 52);

  const std::size_t capacity_;
  std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> free_ranges_;  // start -> length, never adjacent
  std::size_t used_ = 0;  // allocated and mapped
  detail::ReservedRanges ranges_{"simulated", std::size_t{2} << 20};
  std::uintptr_t next_range_ = kRangeArea;
  detail::AllocationRegistry registry_;
};

}  // namespace

std::unique_ptr<MemoryResource> make_simulated_resource(std::size_t capacity) {
  return std::make_unique<SimulatedResource>(capacity);
}

}  // namespace dtr

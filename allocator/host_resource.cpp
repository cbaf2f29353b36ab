// Page-aligned host memory. The CPU backend's device memory, and the upstream of its caching allocator.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "allocation_registry.h"
#include "reserved_ranges.h"
#include "dtr/check.h"
#include "dtr/memory_resource.h"

namespace dtr {
namespace {

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

std::size_t physical_memory() {
  return static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * page_size();
}

class HostResource final : public MemoryResource {
 public:
  std::size_t capacity() const override { return capacity_; }
  std::string name() const override { return "host"; }
  bool host_accessible() const override { return true; }

  // Ranges are reserved with PROT_NONE and no swap reservation, pages mapped as fresh private memory (with the
  // same flags) and given back with MADV_DONTNEED: the host's counterpart of cuMemAddressReserve / cuMemMap /
  // cuMemUnmap. A stray access to an unmapped page faults instead of reading zeros (the mprotect calls cost no
  // measurable time).
  bool maps_pages() const override { return true; }
  std::size_t page_bytes() const override { return page_; }

  void* reserve_range(std::size_t bytes) override {
    DTR_CHECK(bytes > 0 && bytes % page_ == 0, InvalidArgument, "host: reserve_range(", bytes,
              "): the size must be a positive multiple of the page size ", page_);
    // 2 MiB alignment: reserve the slack and trim it.
    constexpr std::size_t kAlign = std::size_t{2} << 20;
    void* raw = ::mmap(nullptr, bytes + kAlign, PROT_NONE, kReserved, -1, 0);
    if (raw == MAP_FAILED) throw_oom(bytes, __FILE__, __LINE__);
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kAlign - 1) & ~(std::uintptr_t{kAlign} - 1);
    if (aligned > start) ::munmap(raw, aligned - start);
    if (const std::uintptr_t end = start + bytes + kAlign; end > aligned + bytes) {
      ::munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);  // NOLINT(performance-no-int-to-ptr)
    }
    std::lock_guard lock(mutex_);
    ranges_.add(aligned, bytes);
    return reinterpret_cast<void*>(aligned);  // NOLINT(performance-no-int-to-ptr)
  }

  void release_range(void* base, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.remove(base, bytes);
    ::munmap(base, bytes);
  }

  // A fresh mapping, not mprotect: then each mapped run lies inside one kernel mapping, which is what
  // move_pages() needs (mremap moves within one).
  bool map(void* ptr, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.check_pages(ptr, bytes, "map");
    DTR_CHECK(!extents_.overlaps(ptr, bytes), InvalidArgument, "host: map(", ptr, ", ", bytes,
              "): part of it is mapped already");
    if (mapped_ + bytes > capacity_) return false;
    // The reservation's flags (no swap reservation): the run merges with unmapped neighbours when unmapped.
    if (::mmap(ptr, bytes, PROT_READ | PROT_WRITE, kReserved | MAP_FIXED, -1, 0) == MAP_FAILED) {
      reserve_again(ptr, bytes);  // a failed MAP_FIXED may have dropped the reservation there
      return false;
    }
    ranges_.mapped(ptr, bytes);
    extents_.insert(ptr, bytes);
    mapped_ += bytes;
    return true;
  }

  void unmap(void* ptr, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.unmapped(ptr, bytes);
    extents_.erase(ptr, bytes);
    ::madvise(ptr, bytes, MADV_DONTNEED);  // the memory goes back now, not when the range does
    ::mprotect(ptr, bytes, PROT_NONE);
    mapped_ -= bytes;
  }

  // mremap moves the page tables: no copy, no zeroing, no fault at the next touch. MREMAP_DONTUNMAP (Linux 5.7)
  // leaves the old range mapped but empty, so the reservation has no hole another mapping could fall into.
  // Where mremap fails (an older kernel, the process's mapping limit) nothing moves: 0, and the caller unmaps
  // and maps.
  std::size_t move_pages(void* from, void* to, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ranges_.check_pages(to, bytes, "move_pages");
    const std::size_t moved = extents_.contiguous(from, bytes);
    DTR_CHECK(moved > 0 && !extents_.overlaps(to, moved), InvalidArgument, "host: move_pages(", from, ", ", to,
              ", ", bytes, "): expected ", from, " mapped and ", to, " not");
    if (::mremap(from, moved, moved, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to) == MAP_FAILED) {
      reserve_again(to, moved);  // a failed MREMAP_FIXED may have unmapped `to` first
      return 0;
    }
    ::mprotect(from, moved, PROT_NONE);
    ranges_.unmapped(from, moved);  // cannot throw: `from` lies in a mapped run, so in a range, mapped
    ranges_.mapped(to, moved);
    extents_.erase(from, moved);
    extents_.insert(to, moved);
    return moved;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes > capacity_) {
      throw_oom(bytes, __FILE__, __LINE__);
    }
    void* ptr = nullptr;
    if (::posix_memalign(&ptr, std::max(alignment, page_), bytes) != 0 || ptr == nullptr) {
      throw_oom(bytes, __FILE__, __LINE__);
    }
    registry_.add(ptr, bytes);
    return ptr;
  }

  void do_deallocate(void* ptr, std::size_t bytes) override {
    registry_.remove(ptr, bytes, "host");
    std::free(ptr);  // NOLINT(cppcoreguidelines-no-malloc): paired with posix_memalign
  }

 private:
  static constexpr int kReserved = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

  void reserve_again(void* ptr, std::size_t bytes) const {
    DTR_CHECK(::mmap(ptr, bytes, PROT_NONE, kReserved | MAP_FIXED, -1, 0) != MAP_FAILED, DeviceError, "host: ",
              format_bytes(bytes), " at ", ptr, " of a reserved range were lost (mmap failed twice)");
  }

  [[noreturn]] void throw_oom(std::size_t bytes, const char* file, int line) const {
    OutOfMemoryInfo info;
    info.requested_bytes = bytes;
    info.capacity_bytes = capacity_;
    info.allocated_bytes = registry_.live_bytes();
    throw OutOfMemory(detail::concat("host: out of memory allocating ", format_bytes(bytes), " (",
                                     format_bytes(info.allocated_bytes), " allocated of ",
                                     format_bytes(capacity_), ")"),
                      info, file, line);
  }

  const std::size_t page_ = page_size();
  const std::size_t capacity_ = physical_memory();
  detail::AllocationRegistry registry_;
  std::mutex mutex_;  // guards the ranges
  detail::ReservedRanges ranges_{"host", page_};
  detail::MappedExtents extents_;
  std::size_t mapped_ = 0;
};

}  // namespace

std::unique_ptr<MemoryResource> make_host_resource() { return std::make_unique<HostResource>(); }

}  // namespace dtr

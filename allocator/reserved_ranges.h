// The address ranges a page-mapping resource has reserved (MemoryResource::reserve_range) and how many bytes
// of each are mapped, so that misuse (pages outside a range or not whole, unmapping what is not mapped,
// releasing a range with pages mapped) is a dtr::InvalidArgument naming the resource, never undefined; and
// the host's mapped runs, which its page moves need. Internal to allocator/ (host and simulated resources);
// not thread-safe: the resource's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <iterator>
#include <map>

#include "dtr/check.h"

namespace dtr::detail {

class ReservedRanges {
 public:
  ReservedRanges(const char* resource, std::size_t page) : resource_(resource), page_(page) {}

  void add(std::uintptr_t base, std::size_t bytes) { ranges_.emplace(base, Range{bytes, 0}); }

  // Forgets the range at `base` after checking that it was reserved with `bytes` and has nothing mapped.
  void remove(void* base, std::size_t bytes) {
    const auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(base));
    DTR_CHECK(it != ranges_.end() && it->second.bytes == bytes, InvalidArgument, resource_, ": release_range(", base,
              ", ", bytes, "): no range of that size was reserved there");
    DTR_CHECK(it->second.mapped == 0, InvalidArgument, resource_, ": release_range(", base, "): ",
              format_bytes(it->second.mapped), " are still mapped");
    ranges_.erase(it);
  }

  // Counts [ptr, ptr + bytes) mapped (after the resource mapped it) or unmapped (before it unmaps it); both
  // check that it is whole pages inside a range, unmapped() also that as much is mapped there.
  void mapped(void* ptr, std::size_t bytes) { range_of(ptr, bytes, "map").mapped += bytes; }
  void unmapped(void* ptr, std::size_t bytes) {
    Range& range = range_of(ptr, bytes, "unmap");
    DTR_CHECK(range.mapped >= bytes, InvalidArgument, resource_, ": unmap(", ptr, ", ", bytes,
              "): more than is mapped");
    range.mapped -= bytes;
  }
  // The checks of mapped(), without counting: before a map that may fail.
  void check_pages(void* ptr, std::size_t bytes, const char* call) { range_of(ptr, bytes, call); }

 private:
  struct Range {
    std::size_t bytes = 0;
    std::size_t mapped = 0;
  };

  Range& range_of(void* ptr, std::size_t bytes, const char* call) {
    const auto start = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = ranges_.upper_bound(start);
    const bool inside = it != ranges_.begin() && bytes > 0 && start % page_ == 0 && bytes % page_ == 0 &&
                        start + bytes <= std::prev(it)->first + std::prev(it)->second.bytes;
    DTR_CHECK(inside, InvalidArgument, resource_, ": ", call, "(", ptr, ", ", bytes, "): not whole ",
              format_bytes(page_), " pages inside a range from reserve_range()");
    return std::prev(it)->second;
  }

  const char* resource_;
  std::size_t page_;
  std::map<std::uintptr_t, Range> ranges_;  // base -> size and mapped bytes
};

// The host resource's mapped runs, each created by one mapping (map() or a move) or left of one: each lies
// inside one kernel mapping, which is all mremap moves at once. Not thread-safe: the resource's lock guards it.
class MappedExtents {
 public:
  void insert(void* ptr, std::size_t bytes) { extents_.emplace(reinterpret_cast<std::uintptr_t>(ptr), bytes); }

  // Forgets [ptr, ptr + bytes), keeping the parts of the extents it cuts on either side.
  void erase(void* ptr, std::size_t bytes) {
    const auto start = reinterpret_cast<std::uintptr_t>(ptr);
    const std::uintptr_t end = start + bytes;
    auto it = extents_.upper_bound(start);
    if (it != extents_.begin() && std::prev(it)->first + std::prev(it)->second > start) --it;
    while (it != extents_.end() && it->first < end) {
      const std::uintptr_t a = it->first;
      const std::uintptr_t b = a + it->second;
      it = extents_.erase(it);
      if (a < start) extents_.emplace(a, start - a);
      if (b > end) it = extents_.emplace(end, b - end).first;
    }
  }

  // How many of [ptr, ptr + bytes) lie in the extent that holds ptr (0: none does).
  std::size_t contiguous(void* ptr, std::size_t bytes) const {
    const auto start = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = extents_.upper_bound(start);
    if (it == extents_.begin()) return 0;
    --it;
    const std::uintptr_t end = it->first + it->second;
    return end > start ? std::min<std::size_t>(bytes, end - start) : 0;
  }

  bool overlaps(void* ptr, std::size_t bytes) const {
    const auto start = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = extents_.lower_bound(start + bytes);
    return it != extents_.begin() && std::prev(it)->first + std::prev(it)->second > start;
  }

  std::size_t size() const { return extents_.size(); }

 private:
  std::map<std::uintptr_t, std::size_t> extents_;  // start -> bytes
};

}  // namespace dtr::detail

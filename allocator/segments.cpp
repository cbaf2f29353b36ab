// The caching allocator's segments: reserving one under the budget, and giving empty ones back to make room
// (docs/allocator.md, "The budget"). Every function expects the allocator's lock held.
#include <algorithm>
#include <vector>

#include "caching_allocator_state.h"

namespace dtr {

auto CachingAllocator::State::reserve_segment(const Request& r) -> Block* {
  const std::size_t nominal = nominal_segment_size(r);
  auto fitting_size = [&]() -> std::size_t {
    if (nominal <= headroom()) return nominal;
    if (r.rounded <= headroom()) return r.rounded;
    return 0;
  };
  std::size_t size = fitting_size();
  if (size == 0) {
    make_headroom(r.rounded);
    if ((size = fitting_size()) == 0) return nullptr;
  }
  void* ptr = upstream_allocate(size);
  if (ptr == nullptr) {
    // The upstream itself is full (memory outside the budget's view): give the cache back, then try the
    // smallest segment that serves.
    release_all_empty_segments();
    if (expandable) release_idle_pages(0);
    ptr = upstream_allocate(size);
    if (ptr == nullptr && size != r.rounded) ptr = upstream_allocate(size = r.rounded);
    if (ptr == nullptr) return nullptr;
  }
  Block* block = add_segment(reinterpret_cast<std::uintptr_t>(ptr), size, r.pool, /*expandable_range=*/false);
  raise(stats.reserved_bytes, size);
  stats.num_device_allocations += 1;
  detail::logger().debug("{}: reserved a {} segment of {} for a request of {}", upstream.name(),
                         to_string(r.pool), format_bytes(size), format_bytes(r.bytes));
  return block;
}

auto CachingAllocator::State::borrow_from_large_pool(const Request& r) -> Block* {
  if (r.pool != Pool::small || expandable) return nullptr;
  const auto it = best_fit(r, Pool::large);
  if (it == free_blocks[detail::index_of(Pool::large)].end()) return nullptr;
  return take_free(it, r, Pool::small);
}

void* CachingAllocator::State::upstream_allocate(std::size_t size) {
  try {
    return upstream.allocate(size, MemoryResource::kDefaultAlignment);
  } catch (const OutOfMemory&) {
    return nullptr;
  }
}

auto CachingAllocator::State::empty_segments() const -> std::vector<Segment*> {
  std::vector<Segment*> empty;
  for (const auto& [size, serial] : empty_by_size) empty.push_back(segments.at(serial).get());
  return empty;
}

bool CachingAllocator::State::make_headroom(std::uint64_t bytes, std::size_t keep_first, std::size_t keep_end) {
  if (bytes <= headroom()) return true;
  const std::uint64_t idle = std::uint64_t{range.idle.pages() - range.idle.covered(keep_first, keep_end)} * page_bytes;
  if (bytes > headroom() + idle + empty_segment_bytes) return false;
  if (idle > 0) release_idle_pages(*budget - bytes, keep_first, keep_end);  // bytes <= budget: checked above
  release_empty_segments_until_headroom(bytes);
  return bytes <= headroom();
}

void CachingAllocator::State::release_empty_segments_until_headroom(std::uint64_t target) {
  if (headroom() >= target) return;
  const std::uint64_t missing = target - headroom();
  if (empty_segment_bytes < missing) return;  // the common case under the cap: no scan
  std::vector<Segment*> empty = empty_segments();
  auto enough = std::lower_bound(empty.begin(), empty.end(), missing,
                                 [](const Segment* seg, std::uint64_t m) { return seg->size < m; });
  if (enough != empty.end()) {
    release_segment(*enough);
    return;
  }
  for (auto it = empty.rbegin(); it != empty.rend() && headroom() < target; ++it) release_segment(*it);
}

void CachingAllocator::State::release_all_empty_segments() {
  for (Segment* segment : empty_segments()) release_segment(segment);
}

void CachingAllocator::State::release_segment(Segment* segment) {
  const std::uintptr_t address = segment->address;
  const std::size_t size = segment->size;
  const std::uint64_t serial = segment->serial;
  empty_segment_bytes -= size;  // only empty segments are released
  empty_by_size.erase({size, serial});
  upstream.deallocate(detail::to_pointer(address), size);
  erase_free(segment->head);
  recycle(segment->head);
  segments.erase(serial);
  stats.reserved_bytes.current -= size;
  stats.segments.current -= 1;
  stats.num_device_frees += 1;
  update_free_stats();
  detail::logger().debug("{}: released a segment of {}", upstream.name(), format_bytes(size));
}

}  // namespace dtr

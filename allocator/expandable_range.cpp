// Expandable segments: the large pool's blocks carved from one address range whose pages are mapped under
// allocated blocks, kept mapped when freed (the cache), and unmapped when the budget needs room
// (docs/allocator.md, "Expandable segments"). Every function expects the allocator's lock held.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "caching_allocator_state.h"

namespace dtr {

auto CachingAllocator::State::carve_in_range(const Request& r) -> Block* {
  const auto it = best_fit(r, r.pool);
  if (it == free_blocks[detail::index_of(Pool::large)].end()) return nullptr;  // the whole range is carved up
  Block* free_block = *it;
  const bool split = should_split(Pool::large, free_block->size - r.rounded);
  const std::size_t size = split ? r.rounded : free_block->size;
  if (!enter_pages(free_block->address, size)) return nullptr;
  range_allocated += size;
  return take(it, r.rounded, split);
}

bool CachingAllocator::State::reserve_range() {
  // Address space is cheap: eight times the memory, so that holes between blocks leave a request without a
  // place only when they hold seven times the memory (then it is out of memory).
  const std::size_t size = upstream_capacity / page_bytes * page_bytes * 8;
  void* ptr = nullptr;
  try {
    if (size == 0) throw OutOfMemory("no page fits the upstream's capacity", {}, __FILE__, __LINE__);
    ptr = upstream.reserve_range(size);
  } catch (const OutOfMemory& e) {
    range_refused = true;
    detail::logger().warn("{}: could not reserve an address range for expandable segments ({}); classic segments "
                          "serve from now on", upstream.name(), e.what());
    return false;
  }
  Block* block = add_segment(reinterpret_cast<std::uintptr_t>(ptr), size, Pool::large, /*expandable_range=*/true);
  insert_free(block);
  range.segment = block->segment;
  return true;
}

bool CachingAllocator::State::enter_pages(std::uintptr_t address, std::size_t size) {
  const std::size_t first = page_of(address);
  const std::size_t end = page_of(address + size - 1) + 1;
  const std::uint64_t missing = std::uint64_t{(end - first) - range.mapped.covered(first, end)} * page_bytes;
  // The idle runs that making room releases wait as donors, to move under the request's pages; whatever is
  // left of them is unmapped on every way out (no room, an exception), as without moves.
  struct Donating {
    explicit Donating(State& s) : state(s) { state.collecting_donors = true; }
    ~Donating() {
      state.collecting_donors = false;
      try {
        state.unmap_donors();
      } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor; unmap() throws only on misuse
      }
    }
    State& state;
  } donating(*this);
  const bool room = make_headroom(missing, first, end);
  collecting_donors = false;
  if (!room) return false;
  const std::vector<std::pair<std::size_t, std::size_t>> moved = move_donors(first, end);
  unmap_donors();
  if (!map_gaps(first, end)) {
    // Memory outside the budget's view: give both caches back.
    release_idle_pages(0, first, end);
    release_all_empty_segments();
    if (!map_gaps(first, end)) {
      for (const auto& [a, b] : moved) unmap_run(a, b);  // unmapped, as an upstream that cannot move leaves them
      return false;
    }
  }
  const std::uint64_t added = std::uint64_t{(end - first) - range.mapped.covered(first, end)} * page_bytes;
  range.mapped.insert(first, end);
  range.idle.erase(first, end);
  raise(stats.reserved_bytes, added);
  return true;
}

auto CachingAllocator::State::move_donors(std::size_t first, std::size_t end)
    -> std::vector<std::pair<std::size_t, std::size_t>> {
  std::vector<std::pair<std::size_t, std::size_t>> moved;
  if (donors.empty()) return moved;
  std::vector<std::pair<std::size_t, std::size_t>> gaps;
  range.mapped.for_each_gap(first, end, [&](std::size_t a, std::size_t b) { gaps.emplace_back(a, b); });
  for (auto [a, b] : gaps) {
    while (a < b && !donors.empty()) {
      auto& [from, to] = donors.back();
      const std::size_t bytes =
          upstream.move_pages(page_address(from), page_address(a), std::min(b - a, to - from) * page_bytes);
      DTR_CHECK(bytes % page_bytes == 0, InvalidArgument, upstream.name(), ": move_pages moved ", bytes,
                " bytes, not whole ", format_bytes(page_bytes), " pages");
      if (bytes == 0) return moved;  // the upstream cannot move (these pages): the rest is unmapped
      const std::size_t pages = bytes / page_bytes;
      // Counted at once: mapped here (idle until the caller takes them), as if unmapped there and mapped here.
      range.mapped.insert(a, a + pages);
      range.idle.insert(a, a + pages);
      raise(stats.reserved_bytes, std::uint64_t{pages} * page_bytes);
      stats.num_device_frees += 1;
      stats.num_device_allocations += 1;
      moved.emplace_back(a, a + pages);
      a += pages;
      from += pages;
      if (from == to) donors.pop_back();
    }
  }
  return moved;
}

void CachingAllocator::State::unmap_donors() {
  while (!donors.empty()) {
    const auto [a, b] = donors.back();
    donors.pop_back();
    unmap_upstream(a, b);
  }
}

bool CachingAllocator::State::map_gaps(std::size_t first, std::size_t end) {
  std::size_t failed_at = end;
  range.mapped.for_each_gap(first, end, [&](std::size_t a, std::size_t b) {
    if (failed_at != end) return;
    if (upstream.map(page_address(a), (b - a) * page_bytes)) {
      stats.num_device_allocations += 1;
    } else {
      failed_at = a;
    }
  });
  if (failed_at == end) return true;
  range.mapped.for_each_gap(first, failed_at, [&](std::size_t a, std::size_t b) { unmap_upstream(a, b); });
  return false;
}

void CachingAllocator::State::leave_pages(const Block& block) {
  range_allocated -= block.size;
  std::size_t first = page_of(block.address);
  std::size_t end = page_of(block.address + block.size - 1) + 1;
  if (shares_page(block, first)) first += 1;
  if (first < end && shares_page(block, end - 1)) end -= 1;
  range.idle.insert(first, end);
}

bool CachingAllocator::State::shares_page(const Block& block, std::size_t page) const {
  const std::uintptr_t page_start = range.segment->address + page * page_bytes;
  const std::uintptr_t page_end = page_start + page_bytes;
  for (const Block* b = block.prev; b != nullptr && b->address + b->size > page_start; b = b->prev) {
    if (b->allocated) return true;
  }
  for (const Block* b = block.next; b != nullptr && b->address < page_end; b = b->next) {
    if (b->allocated) return true;
  }
  return false;
}

void CachingAllocator::State::unmap_upstream(std::size_t first, std::size_t end) {
  upstream.unmap(page_address(first), (end - first) * page_bytes);
  stats.num_device_frees += 1;
}

void CachingAllocator::State::unmap_run(std::size_t first, std::size_t end) {
  if (collecting_donors) {
    donors.emplace_back(first, end);
  } else {
    unmap_upstream(first, end);
  }
  range.mapped.erase(first, end);
  range.idle.erase(first, end);
  stats.reserved_bytes.current -= std::uint64_t{end - first} * page_bytes;
}

void CachingAllocator::State::release_idle_pages(std::uint64_t reserved_limit, std::size_t keep_first,
                                                 std::size_t keep_end) {
  std::size_t limit = std::numeric_limits<std::size_t>::max();
  std::size_t a = 0;
  std::size_t b = 0;
  while (stats.reserved_bytes.current > reserved_limit && range.idle.highest_below(limit, a, b)) {
    limit = a;
    if (a < keep_end && b > keep_first) {  // around the kept pages
      if (b > keep_end) unmap_some(keep_end, b, reserved_limit);
      if (a < keep_first && stats.reserved_bytes.current > reserved_limit) unmap_some(a, keep_first, reserved_limit);
      continue;
    }
    unmap_some(a, b, reserved_limit);
  }
  update_free_stats();
}

void CachingAllocator::State::unmap_some(std::size_t a, std::size_t b, std::uint64_t reserved_limit) {
  const std::uint64_t over = stats.reserved_bytes.current - reserved_limit;
  const auto pages = static_cast<std::size_t>(std::min<std::uint64_t>(b - a, (over + page_bytes - 1) / page_bytes));
  unmap_run(b - pages, b);
}

void CachingAllocator::State::release_range() {
  if (range.segment == nullptr) return;
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  range.mapped.for_each_run([&](std::size_t a, std::size_t b) { runs.emplace_back(a, b); });
  for (const auto& [a, b] : runs) unmap_run(a, b);
  upstream.release_range(detail::to_pointer(range.segment->address), range.segment->size);
  range.segment = nullptr;
}

}  // namespace dtr

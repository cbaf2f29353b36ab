// Fragmentation-aware eviction (Coop, Zhang et al., NeurIPS 2023; issue 4): under a device budget, freeing
// the cheapest storages one by one may leave the pending allocation without a hole big enough. Instead, over
// the allocator's blocks in address order, pick the contiguous run of free and evictable blocks that covers
// the request with the least summed eviction cost, and evict all of it. A block that cannot go (pinned by a
// running op, a constant, or not the runtime's) breaks a run, and so does a segment boundary.
//
// Thread safety: none needed; a pure function of its arguments.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <span>

namespace dtr::heuristics {

// One block of the allocator's map, as the window search sees it.
struct WindowBlock {
  std::size_t bytes = 0;
  // Free: costs nothing. Evictable: costs `cost` (>= 0). Neither: breaks every run through it.
  enum class Kind { free, evictable, fixed } kind = Kind::free;
  double cost = 0;
  bool segment_start = false;  // the first block of a segment: no run continues across it
  // An evictable block the heuristic evicts only after every other (Heuristic::last_resort): a window with
  // fewer of them is cheaper whatever the costs.
  bool last_resort = false;
};

// Blocks [first, last) of the span passed in.
struct Window {
  std::size_t first = 0;
  std::size_t last = 0;
  std::size_t bytes = 0;
  double cost = 0;
  std::size_t last_resorts = 0;
};

// The run of at least `needed` bytes with the fewest last-resort blocks, then the least summed cost (ties: the
// fewest bytes, then the lowest address), or nullopt when no run covers `needed`. Linear in the number of blocks: with non-negative costs,
// the best run ending at a block starts at the last block that still lets it cover `needed`, so a two-pointer
// sweep finds it. Costs are running sums, so a window's cost may differ from its sum in the last bits.
inline std::optional<Window> cheapest_window(std::span<const WindowBlock> blocks, std::size_t needed) {
  std::optional<Window> best;
  std::size_t first = 0;
  std::size_t bytes = 0;
  double cost = 0;
  std::size_t last_resorts = 0;  // counted apart from the costs, so that none swamps the running sum
  const auto better = [&](std::size_t l, double c, std::size_t b) {
    if (!best || l != best->last_resorts) return !best || l < best->last_resorts;
    return c < best->cost || (c == best->cost && b < best->bytes);
  };
  const auto counts = [](const WindowBlock& b) { return b.kind == WindowBlock::Kind::evictable && b.last_resort; };
  for (std::size_t last = 0; last < blocks.size(); ++last) {
    const WindowBlock& block = blocks[last];
    if (block.kind == WindowBlock::Kind::fixed || block.segment_start) {
      // A fresh run: after a fixed block, or at a segment's first block.
      first = block.kind == WindowBlock::Kind::fixed ? last + 1 : last;
      bytes = 0;
      cost = 0;
      last_resorts = 0;
      if (block.kind == WindowBlock::Kind::fixed) continue;
    }
    bytes += block.bytes;
    cost += block.kind == WindowBlock::Kind::evictable ? block.cost : 0.0;
    last_resorts += counts(block) ? 1 : 0;
    // Drop blocks from the front while the rest still covers the request (never raises the cost).
    while (first < last && bytes - blocks[first].bytes >= needed) {
      bytes -= blocks[first].bytes;
      cost -= blocks[first].kind == WindowBlock::Kind::evictable ? blocks[first].cost : 0.0;
      last_resorts -= counts(blocks[first]) ? 1 : 0;
      ++first;
    }
    if (bytes >= needed && better(last_resorts, cost, bytes)) best = Window{first, last + 1, bytes, cost, last_resorts};
  }
  return best;
}

}  // namespace dtr::heuristics

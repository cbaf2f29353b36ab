// The caching allocator's state behind its lock: blocks carved from segments, the free sets, the segments
// reserved from the upstream and the accounting (docs/allocator.md). Internal to allocator/: included by
// caching_allocator.cpp (the public class, its lock and reclaim loop) and caching_allocator_oom.cpp (the
// out-of-memory report). Its fast-path entries are forced inline into the one file that calls them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "address_map.h"
#include "page_runs.h"
#include "common/log.h"
#include "dtr/caching_allocator.h"
#include "dtr/check.h"
#include "fast_mutex.h"

namespace dtr::detail {


struct Segment;
struct Block;

// Best fit's order: size, then the segment's creation order, then address. Not the address alone: where the
// upstream puts segments is its choice (the host's allocator differs from run to run), and ties between
// blocks of one size would then place a program's tensors differently each run.
struct BySizeThenPlace {
  bool operator()(const Block* a, const Block* b) const;
};

using FreeSet = std::set<Block*, BySizeThenPlace>;

// A run of bytes inside a segment, allocated or free. Blocks of a segment form a doubly linked list in
// address order.
struct Block {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;
  Segment* segment = nullptr;
  std::uint64_t segment_serial = 0;  // its segment's, kept here so that ordering the free set reads no segment
  Block* prev = nullptr;
  Block* next = nullptr;
  bool allocated = false;
  OwnerTag owner = 0;
  FreeSet::iterator position;  // where the block sits in its pool's free set, while it is free
};

inline bool BySizeThenPlace::operator()(const Block* a, const Block* b) const {
  if (a->size != b->size) return a->size < b->size;
  return a->segment_serial != b->segment_serial ? a->segment_serial < b->segment_serial : a->address < b->address;
}

struct Segment {
  std::uint64_t serial = 0;  // creation order: the order of every walk over segments (see BySizeThenPlace)
  std::uintptr_t address = 0;
  std::size_t size = 0;
  Pool pool = Pool::small;
  Block* head = nullptr;
  bool expandable = false;  // the large pool's whole address range (expandable segments), not a segment

  bool empty() const { return !head->allocated && head->next == nullptr; }
};

inline std::size_t index_of(Pool pool) { return pool == Pool::small ? 0 : 1; }

inline void* to_pointer(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

// Compaction's plan (compaction.cpp): the runs of blocks to clear, and one move.
struct Clearing;
struct Move;

struct Request {
  std::size_t bytes = 0;    // as asked
  std::size_t rounded = 0;  // the block size that serves it
  Pool pool = Pool::small;
};

__extension__ using u128 = unsigned __int128;  // exact products of two byte counts

// `multiple` is a power of two.
inline std::size_t round_up(std::size_t bytes, std::size_t multiple) { return (bytes + multiple - 1) & ~(multiple - 1); }

}  // namespace dtr::detail

namespace dtr {

// Everything behind the lock; every member function expects `mutex` held. The containers recycle their nodes
// (node handles) and blocks are pooled, so a cache hit performs no heap allocation.
struct CachingAllocator::State {
  using Block = detail::Block;
  using Segment = detail::Segment;
  using FreeSet = detail::FreeSet;
  using Request = detail::Request;
  using BySizeThenPlace = detail::BySizeThenPlace;

  State(MemoryResource& upstream_resource, const CachingAllocatorOptions& opts)
      : upstream(upstream_resource),
        upstream_capacity(upstream_resource.capacity()),
        options(opts),
        expandable(opts.expandable_segments && upstream_resource.maps_pages()),
        page_bytes(expandable && opts.page_bytes == 0 ? upstream_resource.page_bytes() : opts.page_bytes) {}

  MemoryResource& upstream;
  const std::size_t upstream_capacity;  // fixed for a resource's lifetime; read once, off the hot path
  const CachingAllocatorOptions& options;
  const bool expandable;  // expandable segments asked for, and the upstream maps pages
  const std::size_t page_bytes;  // what expandable ranges map and unmap at a time

  mutable detail::FastMutex mutex;
  std::optional<std::uint64_t> budget;
  Reclaimer* reclaimer = nullptr;

  std::array<FreeSet, 2> free_blocks;  // by pool
  std::vector<FreeSet::node_type> spare_free_nodes;
  detail::AddressMap<Block*> live;  // address -> allocated block
  std::map<std::uint64_t, std::unique_ptr<Segment>> segments;  // by serial (creation order)
  std::uint64_t segments_made = 0;  // the last serial given
  std::deque<Block> block_storage;
  Block* spare_blocks = nullptr;  // recycled blocks, linked through `next`
  // The bytes of the segments that are one free block, kept as blocks change: a request under the budget's
  // cap asks whether releasing them could make room, and a scan of every segment per miss made each
  // rematerialization under a device budget cost as much as the rest of its replay.
  std::uint64_t empty_segment_bytes = 0;
  // The same segments by (size, serial), so that choosing which to release never scans every segment (with
  // one segment per large block, that scan made a long program quadratic).
  std::set<std::pair<std::size_t, std::uint64_t>> empty_by_size;

  AllocatorStats stats;
  std::uint64_t blocks_freed = 0;  // how the reclaim loop sees progress

  // Expandable segments: the large pool's range, reserved at its first request, and which of its pages are
  // mapped.
  struct PageRange {
    Segment* segment = nullptr;
    detail::PageRuns mapped;
    detail::PageRuns idle;  // mapped pages no allocated block is on: the cache
  };
  PageRange range;
  bool range_refused = false;  // the upstream could not reserve the range: classic segments serve
  // While enter_pages() makes headroom, the idle runs it releases wait here (counted unmapped) so that the
  // upstream can move their memory under the new block instead of unmapping it and mapping other memory.
  bool collecting_donors = false;
  std::vector<std::pair<std::size_t, std::size_t>> donors;
  std::uint64_t range_allocated = 0;  // bytes of blocks in the range, within allocated_bytes

  // ---- allocation and free ----

  // A free block's key (size, address) changes in place when a request is carved from its front or a freed
  // neighbour merges into it. The set holds pointers, so it stays valid as long as the block keeps its rank;
  // it is re-linked only when it does not, which keeps the steady state (allocate and free the same size
  // next to a large free block) free of tree rebalancing.
  // The fast path's two entries, each called from one place: inlined there, as they were when this state
  // lived in an anonymous namespace (a header's inline members are otherwise kept out of line).
  [[gnu::always_inline]] Block* try_allocate(const Request& r) {
    Block* block = nullptr;
    if (in_range(r) && (range.segment != nullptr || reserve_range())) {
      block = carve_in_range(r);
      if (block == nullptr) return nullptr;
    } else if (auto it = best_fit(r, r.pool); it != free_blocks[detail::index_of(r.pool)].end()) {
      block = take_free(it, r, r.pool);
    } else if ((block = carve_new_segment(r)) == nullptr) {
      if ((block = borrow_from_large_pool(r)) == nullptr) return nullptr;
    }
    enter_live(block, r.bytes);
    update_free_stats();
    return block;
  }

  // A block just taken from the free sets becomes a live allocation of `requested` bytes.
  [[gnu::always_inline]] void enter_live(Block* block, std::size_t requested) {
    block->allocated = true;
    block->requested = requested;
    live.insert(block->address, block);
    raise(stats.allocated_bytes, block->size);
    raise(stats.requested_bytes, requested);
    raise(stats.active_blocks, 1);
    stats.num_allocations += 1;
  }

  [[gnu::always_inline]] void free(Block* block) {
    if (expandable && block->segment->expandable) leave_pages(*block);
    live.erase(block->address);
    stats.allocated_bytes.current -= block->size;
    stats.requested_bytes.current -= block->requested;
    stats.active_blocks.current -= 1;
    stats.num_frees += 1;
    blocks_freed += 1;
    block->allocated = false;
    block->requested = 0;
    block->owner = 0;
    Block* prev = block->prev != nullptr && !block->prev->allocated ? block->prev : nullptr;
    Block* next = block->next != nullptr && !block->next->allocated ? block->next : nullptr;
    if (prev != nullptr) {
      // The previous free block grows over this one (and the next, if free too).
      absorb(prev, block);
      if (next != nullptr) {
        erase_free(next);
        absorb(prev, next);
      }
      rerank_if_grown(prev);
    } else if (next != nullptr) {
      // The next free block grows backwards over this one.
      next->address = block->address;
      next->size += block->size;
      next->prev = block->prev;
      if (block->prev != nullptr) {
        block->prev->next = next;
      } else {
        next->segment->head = next;
      }
      recycle(block);
      rerank_if_grown(next);
    } else {
      insert_free(block);
    }
    const Block* merged = prev != nullptr ? prev : next != nullptr ? next : block;
    if (merged->prev == nullptr && merged->next == nullptr && !merged->segment->expandable) {  // one free block
      empty_segment_bytes += merged->size;
      empty_by_size.emplace(merged->size, merged->segment->serial);
    }
    update_free_stats();
  }

  // The smallest free block of the request's pool that holds it (among equals, the oldest segment's, then the
  // lowest address), or end().
  FreeSet::iterator best_fit(const Request& r, Pool pool) {
    Block key;
    key.size = r.rounded;
    return free_blocks[detail::index_of(pool)].lower_bound(&key);
  }

  // Takes the free block at `it` for `r`, split as a block of `split_as`'s pool would be.
  Block* take_free(FreeSet::iterator it, const Request& r, Pool split_as) {
    Block* free_block = *it;
    if (free_block->prev == nullptr && free_block->next == nullptr) {
      empty_segment_bytes -= free_block->size;
      empty_by_size.erase({free_block->size, free_block->segment->serial});
    }
    return take(it, r.rounded, should_split(split_as, free_block->size - r.rounded));
  }

  // Takes the first `bytes` of the free block at `it`, splitting the rest off if `split` (it keeps its place in
  // the free set unless it lost its rank), else the whole block.
  [[gnu::always_inline]] Block* take(FreeSet::iterator it, std::size_t bytes, bool split) {
    Block* free_block = *it;
    if (!split) {
      erase_free(free_block);
      return free_block;
    }
    Block* front = carve_front(free_block, bytes);
    const FreeSet& set = free_blocks[detail::index_of(free_block->segment->pool)];
    if (it != set.begin() && !BySizeThenPlace{}(*std::prev(it), free_block)) rerank(free_block);
    return front;
  }

  bool should_split(Pool pool, std::size_t remaining) const {
    // A large block keeps a small tail rather than leave a sliver no large request could use.
    return pool == Pool::small ? remaining >= options.rounding : remaining > options.small_request_limit;
  }

  // Splits the first `bytes` of `free_block` off into a new block, which it returns; `free_block` keeps the
  // rest (and its place in the free set, if any).
  Block* carve_front(Block* free_block, std::size_t bytes) {
    Block* front = new_block();
    front->address = free_block->address;
    front->size = bytes;
    front->segment = free_block->segment;
    front->segment_serial = free_block->segment_serial;
    front->prev = free_block->prev;
    front->next = free_block;
    if (free_block->prev != nullptr) {
      free_block->prev->next = front;
    } else {
      free_block->segment->head = front;
    }
    free_block->prev = front;
    free_block->address += bytes;
    free_block->size -= bytes;
    return front;
  }

  // Re-links a free block whose key changed so that the set is ordered again.
  void rerank(Block* block) {
    FreeSet& set = free_blocks[detail::index_of(block->segment->pool)];
    auto node = set.extract(block->position);
    block->position = set.insert(std::move(node)).position;
  }

  void rerank_if_grown(Block* block) {
    const FreeSet& set = free_blocks[detail::index_of(block->segment->pool)];
    auto after = std::next(block->position);
    if (after != set.end() && !BySizeThenPlace{}(block, *after)) rerank(block);
  }

  // Folds `second`, the block right after `first`, into `first`; `second` must be in no free set.
  void absorb(Block* first, Block* second) {
    first->size += second->size;
    first->next = second->next;
    if (second->next != nullptr) second->next->prev = first;
    recycle(second);
  }

  // ---- segments (reserved and released in allocator/segments.cpp) ----

  std::size_t nominal_segment_size(const Request& r) const {
    if (r.pool == Pool::small) return options.small_segment_bytes;
    if (r.rounded < options.own_segment_threshold) return options.large_segment_bytes;
    return detail::round_up(r.rounded, options.own_segment_rounding);
  }

  // A new segment holding one free block (in no free set), or nullptr when neither the nominal segment nor one
  // of exactly the request fits under the budget (after releasing empty segments) and in the upstream.
  Block* reserve_segment(const Request& r);
  // A block of `r`'s size at the front of a new segment (reserve_segment; the rest of it free), or nullptr.
  Block* carve_new_segment(const Request& r) {
    Block* segment_block = reserve_segment(r);
    if (segment_block == nullptr || !should_split(r.pool, segment_block->size - r.rounded)) return segment_block;
    Block* block = carve_front(segment_block, r.rounded);
    insert_free(segment_block);
    return block;
  }

  // Records the segment of `size` bytes the upstream gave at `address`, with the next serial; returns its one
  // block (free, in no free set).
  Block* add_segment(std::uintptr_t address, std::size_t size, Pool pool, bool expandable_range) {
    auto segment = std::make_unique<Segment>();
    segment->serial = ++segments_made;
    segment->address = address;
    segment->size = size;
    segment->pool = pool;
    segment->expandable = expandable_range;
    Block* block = new_block();
    block->address = address;
    block->size = size;
    block->segment = segment.get();
    block->segment_serial = segment->serial;
    segment->head = block;
    segments.emplace(segment->serial, std::move(segment));
    raise(stats.segments, 1);
    return block;
  }

  // When no segment can be had (the cap): for a small request, the best-fitting free block of a large segment,
  // split as a small block would be, rather than wait for a whole segment to empty; else memory reserved by one
  // pool is lost to the other (docs/allocator.md, "Pools at the cap"). Not in an expandable range, whose free
  // blocks may have no pages. nullptr when there is none.
  Block* borrow_from_large_pool(const Request& r);

  void* upstream_allocate(std::size_t size);

  // By size, then address.
  std::vector<Segment*> empty_segments() const;

  // Gives back cached pages of the large range (sparing pages [keep_first, keep_end)), then empty segments,
  // until `bytes` fit under the budget, if together they can; else gives back nothing. Whether they fit.
  bool make_headroom(std::uint64_t bytes, std::size_t keep_first = 0, std::size_t keep_end = 0);

  // Releases empty segments until `target` bytes fit under the budget: the smallest one that makes room on its
  // own if there is one (it keeps the most of the cache), else the largest first. Releases nothing when all
  // of them together could not make the room.
  void release_empty_segments_until_headroom(std::uint64_t target);

  void release_all_empty_segments();

  void release_segment(Segment* segment);

  // ---- compaction (allocator/compaction.cpp) ----

  // Moves movable blocks out of the way of `r` (CachingAllocatorOptions::compaction) through `reclaimer`.
  // Unlike the other members, called without `mutex` held: it takes it itself, and releases it while the
  // reclaimer copies. Whether anything moved. Before the Reclaimer (Compaction::first, `last_resort` false) it
  // moves at most the request's bytes, into free blocks; once the Reclaimer frees nothing more, any bytes, and
  // where no clearing's blocks fit in free blocks, into new segments under the budget.
  bool compact(const Request& r, Reclaimer& reclaimer, bool last_resort);
  // Where compact() could open room for `r`, cheapest (fewest bytes to move) first: runs of free and movable
  // blocks in the request's pool that cover it, and, under a budget, segments of movable blocks whose release
  // (one alone, or several together) would let the request's segment fit.
  std::vector<detail::Clearing> clearings(const Request& r, const Reclaimer& reclaimer) const;
  // Takes a destination outside `clearing` for each live block in it, appending the moves; false, with nothing
  // taken and no segment it reserved left, when they do not all fit.
  bool take_destinations(const detail::Clearing& clearing, std::vector<detail::Move>& moves, bool reserve);
  // The best-fitting free block of `r`'s pool outside `clearing` and outside empty segments (which stay
  // releasable), taken for `r`; failing that, with `reserve`, a block of a new segment under the budget (its
  // segment appended to `reserved`); nullptr when none holds it.
  Block* take_outside(const Request& r, const detail::Clearing& clearing, bool reserve, std::vector<Segment*>& reserved);
  // Gives back a block take_outside() took, as if it had never been taken (counters included).
  void untake(Block* block);

  // ---- expandable segments (allocator/expandable_range.cpp) ----

  // The best-fitting free block of the large range with the pages under it mapped, or nullptr when the budget
  // (after unmapping cached pages and releasing empty small segments) or the upstream cannot map them.
  Block* carve_in_range(const Request& r);
  // Whether the request is served from the large range (else from classic segments: the small pool, or every
  // pool once the upstream refused to reserve the range).
  bool in_range(const Request& r) const { return expandable && r.pool == Pool::large && !range_refused; }
  // The least the budget must hold for the request: its block, or in the range its whole pages.
  std::uint64_t least_reservation(const Request& r) const {
    return in_range(r) ? (std::uint64_t{r.rounded} + page_bytes - 1) / page_bytes * page_bytes : r.rounded;
  }
  // Reserves the large pool's address range (eight times the upstream's capacity); false, and classic
  // segments from then on, if the upstream cannot.
  bool reserve_range();
  // Counts a new block on the pages of [address, address + size), mapping those not mapped; false when they do
  // not fit under the budget even with the caches given back (then the cache may be smaller), or the upstream
  // is full.
  bool enter_pages(std::uintptr_t address, std::size_t size);
  // Maps the unmapped runs of pages [first, end); on a failure unmaps what it mapped and returns false.
  bool map_gaps(std::size_t first, std::size_t end);
  // Moves the donors' memory under the unmapped pages of [first, end) as far as the upstream can (those pages
  // then mapped and idle until the caller takes them) and returns those runs; the rest stay donors.
  std::vector<std::pair<std::size_t, std::size_t>> move_donors(std::size_t first, std::size_t end);
  // Unmaps what is left of the donors.
  void unmap_donors();
  // A freed block leaves its pages: those no other allocated block is on stay mapped, as the cache.
  void leave_pages(const Block& block);
  // Whether an allocated block other than `block` lies on `page` (only neighbours can: blocks are contiguous).
  bool shares_page(const Block& block, std::size_t page) const;
  // Unmaps pages [first, end) (or, while collecting donors, keeps them for a move) and counts them unmapped.
  void unmap_run(std::size_t first, std::size_t end);
  // The upstream's unmap of pages [first, end), counted; the caller keeps range and reserved bytes.
  void unmap_upstream(std::size_t first, std::size_t end);
  // Unmaps cached pages, highest first, until at most `reserved_limit` bytes are reserved, sparing pages
  // [keep_first, keep_end) (those a request is about to use).
  void release_idle_pages(std::uint64_t reserved_limit, std::size_t keep_first = 0, std::size_t keep_end = 0);
  // Unmaps the top of the idle run [a, b): as many pages as bring reserved bytes to `reserved_limit`.
  void unmap_some(std::size_t a, std::size_t b, std::uint64_t reserved_limit);
  // Unmaps every page still mapped and gives the range back (the allocator's destruction).
  void release_range();

  std::size_t page_of(std::uintptr_t address) const { return (address - range.segment->address) / page_bytes; }
  void* page_address(std::size_t page) const { return detail::to_pointer(range.segment->address + page * page_bytes); }

  // ---- containers ----

  Block* new_block() {
    if (spare_blocks == nullptr) return &block_storage.emplace_back();
    Block* block = spare_blocks;
    spare_blocks = block->next;
    *block = Block{};
    return block;
  }

  void recycle(Block* block) {
    block->next = spare_blocks;
    spare_blocks = block;
  }

  void insert_free(Block* block) {
    FreeSet& set = free_blocks[detail::index_of(block->segment->pool)];
    if (spare_free_nodes.empty()) {
      block->position = set.insert(block).first;
      return;
    }
    auto node = std::move(spare_free_nodes.back());
    spare_free_nodes.pop_back();
    node.value() = block;
    block->position = set.insert(std::move(node)).position;
  }

  void erase_free(Block* block) {
    spare_free_nodes.push_back(free_blocks[detail::index_of(block->segment->pool)].extract(block->position));
  }

  Block* find_live(const void* ptr) {
    Block** found = live.find(reinterpret_cast<std::uintptr_t>(ptr));
    return found == nullptr ? nullptr : *found;
  }

  // ---- accounting ----

  std::uint64_t headroom() const {
    if (!budget) return std::numeric_limits<std::uint64_t>::max();
    return *budget > stats.reserved_bytes.current ? *budget - stats.reserved_bytes.current : 0;
  }

  std::uint64_t largest_free() const {
    std::uint64_t largest = 0;
    for (const FreeSet& set : free_blocks) {
      // The large pool's range: its free run is address space, not memory.
      if (expandable && &set == &free_blocks[detail::index_of(Pool::large)]) continue;
      if (!set.empty()) largest = std::max<std::uint64_t>(largest, (*set.rbegin())->size);
    }
    return largest;
  }

  // Reserved but free bytes outside expandable ranges: what fragmentation is measured against.
  std::uint64_t segment_free_bytes() const {
    return (stats.reserved_bytes.current - range_mapped_bytes()) - (stats.allocated_bytes.current - range_allocated);
  }
  std::uint64_t range_mapped_bytes() const { return std::uint64_t{range.mapped.pages()} * page_bytes;
  }

  enum class Cause { too_large, no_reclaimer, no_progress };

  // Counts the failure and says what happened and what to try (caching_allocator_oom.cpp). Off the hot path.
  [[gnu::cold, gnu::noinline]] OutOfMemory out_of_memory(const Request& r, Cause cause,
                                                         const std::string& resource_name);

  static void raise(StatValue& value, std::uint64_t by) {
    value.current += by;
    value.peak = std::max(value.peak, value.current);
  }

  // The fragmentation high-water mark, kept as the exact ratio largest_free / free at that moment (1/1: none
  // yet) and compared by cross-multiplication, so that the hot path does no floating-point division.
  std::uint64_t peak_fragmentation_largest = 1;
  std::uint64_t peak_fragmentation_free = 1;

  // The largest free block and the fragmentation high-water marks, after every change.
  void update_free_stats() {
    const std::uint64_t largest = largest_free();
    stats.largest_free_block.current = largest;
    stats.largest_free_block.peak = std::max(stats.largest_free_block.peak, largest);
    const std::uint64_t free_bytes = segment_free_bytes();
    if (free_bytes != 0 && detail::u128{largest} * peak_fragmentation_free < detail::u128{peak_fragmentation_largest} * free_bytes) {
      peak_fragmentation_largest = largest;
      peak_fragmentation_free = free_bytes;
    }
  }

  double fragmentation() const {
    const std::uint64_t free_bytes = segment_free_bytes();
    return free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(stats.largest_free_block.current) / static_cast<double>(free_bytes);
  }

  void reset_peaks() {
    for (StatValue* v : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.requested_bytes,
                         &stats.active_blocks, &stats.segments, &stats.largest_free_block}) {
      v->peak = v->current;
    }
    const std::uint64_t free_bytes = segment_free_bytes();
    peak_fragmentation_largest = free_bytes == 0 ? 1 : stats.largest_free_block.current;
    peak_fragmentation_free = free_bytes == 0 ? 1 : free_bytes;
  }

  // The stats with the values derived on demand.
  AllocatorStats current_stats() const {
    AllocatorStats copy = stats;
    copy.fragmentation = fragmentation();
    copy.peak_fragmentation = 1.0 - static_cast<double>(peak_fragmentation_largest) /
                                        static_cast<double>(peak_fragmentation_free);
    copy.budget_bytes = budget.value_or(0);
    return copy;
  }
};

}  // namespace dtr

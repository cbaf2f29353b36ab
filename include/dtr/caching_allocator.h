// The caching allocator: PyTorch's proven pooling policy over any MemoryResource, with a memory budget that is
// a hard cap on the bytes reserved from the upstream resource (never exceeded, at any instant), and a
// Reclaimer callback through which the runtime evicts tensors when the budget is reached.
//
// Policy (all sizes configurable in CachingAllocatorOptions):
// - requests are rounded up to 512 B;
// - requests of at most 1 MiB come from the small pool, carved out of 2 MiB segments; larger ones from the
//   large pool, carved out of 20 MiB segments, or, from 10 MiB up, out of a segment of their own rounded up
//   to 2 MiB;
// - a request takes the best-fitting free block of its pool (smallest size, then the oldest segment's, then the
//   lowest address: never the upstream's placement of segments, so that runs are reproducible); the rest of
//   the block is split off when it is at least 512 B (small pool) or larger than 1 MiB (large pool);
// - a freed block merges with free neighbours at once, so no two adjacent blocks are ever both free;
// - when a budget is set and the nominal segment does not fit under it, a segment of exactly the request
//   is tried.
// - with expandable segments (CachingAllocatorOptions::expandable_segments) large blocks come from one
//   address range whose pages are mapped on demand, and the budget counts its mapped pages instead.
// A request that cannot be served: (1) best fit in the cache; (2) empty cached segments are released to
// the upstream until a new segment fits the budget, and one is reserved; (3) the Reclaimer is asked for room
// without the allocator's lock held, then (1)-(2) again, for as long as it makes progress; (4) compaction,
// once per request (CachingAllocatorOptions::compaction): blocks the Reclaimer says may move are moved out of
// the way, into free blocks elsewhere (in the last resort, where none takes them, into new segments under the
// budget), so that the request's block or its new segment fits; (5)
// dtr::OutOfMemory. With Compaction::first, (3) is preceded by a compaction that moves at most the request's
// bytes, once per request.
//
// Thread safety: every member function is thread-safe. The Reclaimer runs on the allocating thread with no
// allocator lock held, so it may call free(); it must be thread-safe itself if several threads allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtr/memory_resource.h"

namespace dtr {

// An opaque tag a caller attaches to a live block (the runtime, when its heuristic is fragmentation-aware,
// stores a pointer to the block's Storage there), so that fragmentation-aware eviction can map the segment
// map's blocks back to what owns them.
using OwnerTag = std::uint64_t;

enum class Pool { small, large };
const char* to_string(Pool pool);

// What a pending allocation needs. It is served once a free block of at least `block_bytes` exists in a
// segment of `pool`, or once `block_bytes` more can be reserved without passing the budget (whole empty
// segments are released to make room, so freeing part of a segment only helps the first way).
struct ReclaimRequest {
  std::size_t requested_bytes = 0;  // as the caller asked
  std::size_t block_bytes = 0;      // rounded: the contiguous size that serves the request
  Pool pool = Pool::small;
  std::uint64_t budget_bytes = 0;    // 0: no budget
  std::uint64_t reserved_bytes = 0;  // at the time of the call
};

// Implemented by the runtime: frees memory by evicting what it owns.
class Reclaimer {
 public:
  virtual ~Reclaimer() = default;
  // Free memory (through CachingAllocator::free or deallocate) so that `request` can be served. Called
  // without the allocator's lock. Returns the bytes it freed; the allocator retries as long as blocks were
  // freed since the call began and gives up (dtr::OutOfMemory) once a call frees nothing.
  virtual std::size_t reclaim(const ReclaimRequest& request) = 0;
  // Compaction: whether the live block tagged `owner` (set_owner; 0 is never asked) may move now. Called with
  // the allocator's lock held, so it must not call back into the allocator. The default: no block moves.
  virtual bool movable(OwnerTag owner) const {
    (void)owner;
    return false;
  }
  // Compaction: copies `bytes` from the block at `from` to the block at `to`, both live and tagged `owner`, and
  // makes the owner use `to` from now on; the allocator frees `from` afterwards. Called without the lock, only
  // for blocks movable() allowed, before anything else happens in the allocator. May throw: then nothing it
  // was asked to move since the request began has moved, but for those moved before (which stay moved).
  virtual void move(OwnerTag owner, void* from, void* to, std::size_t bytes) {
    (void)owner, (void)from, (void)to, (void)bytes;
  }
};

// When the caching allocator moves blocks out of a request's way (CachingAllocatorOptions::compaction).
enum class Compaction {
  off,          // never
  last_resort,  // only once the Reclaimer frees nothing more
  first,        // also before asking the Reclaimer, where moving at most the request's bytes makes room
};
const char* to_string(Compaction compaction);

struct CachingAllocatorOptions {
  std::optional<std::uint64_t> budget_bytes;  // nullopt: no budget
  std::size_t rounding = 512;                 // every block size is a multiple of this (a power of two)
  std::size_t small_request_limit = std::size_t{1} << 20;
  std::size_t small_segment_bytes = std::size_t{2} << 20;
  std::size_t large_segment_bytes = std::size_t{20} << 20;
  std::size_t own_segment_threshold = std::size_t{10} << 20;  // from here a request gets its own segment
  std::size_t own_segment_rounding = std::size_t{2} << 20;
  // Expandable segments (as PyTorch's `expandable_segments:True`): the large pool carves its blocks, by the
  // same best fit, from one address range reserved once from the upstream; the `page_bytes` pages under
  // allocated blocks are mapped, a freed block's pages stay mapped as the cache, and cached pages are unmapped
  // when the budget needs room. reserved_bytes counts mapped pages, so a free run costs at most the partial
  // pages at its ends instead of whole segments. The small pool keeps its 2 MiB segments (a GPU's page each:
  // small blocks straddling pages would keep two mapped). Needs an upstream whose maps_pages() is true (host,
  // simulated); over any other, or if the upstream cannot reserve the range, the classic segments above are
  // used (logged once). A large request whose whole pages exceed the budget is too large at once.
  bool expandable_segments = false;
  // What expandable ranges map at a time: 0, the upstream's page_bytes() (4 KiB on the host, 2 MiB for the
  // simulated GPU), or a multiple of it and of the rounding.
  std::size_t page_bytes = 0;
  // Compaction (DTR_COMPACTION): move the fewest bytes of movable blocks (Reclaimer::movable) that open a free
  // run for the request in its pool, or empty segments whose release makes room for the request's new segment.
  // Moves go into free blocks of the same pool outside that run or those segments; only in the last resort,
  // where no clearing's blocks fit there, a run's blocks may take new segments under the budget (never those
  // of segments to release, whose headroom is the request's). Classic segments only. `first` tries it before the Reclaimer too (moving at most the request's bytes): not
  // the default, since it recomputed more on ResNet-32 at 30% of its peak (docs/results/compaction.md).
  Compaction compaction = Compaction::last_resort;
};

// A value with its high-water mark since construction or the last reset_peak_stats().
struct StatValue {
  std::uint64_t current = 0;
  std::uint64_t peak = 0;
};

struct AllocatorStats {
  StatValue allocated_bytes;     // sum of the sizes of used blocks (rounded, splits included)
  StatValue reserved_bytes;      // sum of the sizes of segments held from the upstream
  StatValue requested_bytes;     // sum of the sizes callers asked for, of live allocations
  StatValue active_blocks;       // live allocations
  StatValue segments;            // segments held from the upstream
  StatValue largest_free_block;  // bytes of the largest free block in any segment (expandable ranges excluded)
  double fragmentation = 0.0;    // 1 - largest_free_block / (reserved - allocated), both outside expandable
                                 // ranges; 0 when nothing is free there
  double peak_fragmentation = 0.0;
  std::uint64_t budget_bytes = 0;  // 0: no budget
  std::uint64_t num_allocations = 0;
  std::uint64_t num_frees = 0;
  std::uint64_t num_device_allocations = 0;  // segments reserved from the upstream (expandable: page runs mapped)
  std::uint64_t num_device_frees = 0;        // segments released to the upstream (expandable: page runs unmapped)
  std::uint64_t num_reclaim_calls = 0;
  std::uint64_t num_ooms = 0;
  std::uint64_t num_compactions = 0;  // times blocks were moved to make room for a request
  std::uint64_t num_moved_blocks = 0;
  std::uint64_t moved_bytes = 0;      // the moved blocks' requested bytes: what was copied
};

struct BlockInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested_bytes = 0;  // 0 for a free block
  bool allocated = false;
  OwnerTag owner = 0;
};

struct SegmentInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;  // an expandable range's whole address range, mapped or not
  Pool pool = Pool::small;
  bool expandable = false;
  std::size_t mapped_bytes = 0;  // what of it is mapped: all of a classic segment
  std::vector<BlockInfo> blocks;  // in address order, covering the segment exactly
};

// The segment map at one instant: segments in address order, and the stats that go with them.
struct MemorySnapshot {
  std::string resource;
  std::vector<SegmentInfo> segments;
  AllocatorStats stats;
};

class CachingAllocator final : public MemoryResource {
 public:
  // `upstream` is not owned and must outlive the allocator.
  explicit CachingAllocator(MemoryResource& upstream, CachingAllocatorOptions options = {});
  // Owns `upstream`.
  explicit CachingAllocator(std::unique_ptr<MemoryResource> upstream, CachingAllocatorOptions options = {});
  // Returns every segment to the upstream. Blocks still allocated are a caller's leak: they are logged and
  // their memory is returned too.
  ~CachingAllocator() override;

  // Frees a block without its size (the C API's dtr_free). nullptr does nothing; a foreign or already freed
  // pointer throws dtr::InvalidArgument.
  void free(void* ptr);

  // Attaches `owner` to the live block at `ptr` (dtr::InvalidArgument if there is none).
  void set_owner(void* ptr, OwnerTag owner);

  // Not owned; nullptr unregisters. The reclaimer must stay alive while registered.
  void set_reclaimer(Reclaimer* reclaimer);

  // nullopt: no budget. Releases empty cached segments if that is needed to get under the new budget; if the
  // reserved bytes still exceed it, throws dtr::InvalidArgument and keeps the old budget.
  void set_budget(std::optional<std::uint64_t> budget_bytes);
  std::optional<std::uint64_t> budget() const;

  // Returns every empty cached segment to the upstream, and unmaps every cached page of expandable ranges.
  void empty_cache();

  AllocatorStats stats() const;
  void reset_peak_stats();
  MemorySnapshot snapshot() const;

  // Visits the blocks of `pool`'s classic segments (not an expandable range's: its free run is unmapped),
  // segment by segment in creation order (as best fit breaks ties) and each segment's blocks in address order,
  // under the allocator's lock; `segment_start` is true for a segment's first block (blocks of two segments
  // are never contiguous). What fragmentation-aware eviction reads instead of a snapshot: it
  // copies nothing. `visit` must not call back into the allocator (it would deadlock).
  void for_each_block(Pool pool, const std::function<void(const BlockInfo& block, bool segment_start)>& visit) const;

  const CachingAllocatorOptions& options() const noexcept { return options_; }
  MemoryResource& upstream() const noexcept { return upstream_; }

  std::size_t capacity() const override;
  std::string name() const override;
  bool host_accessible() const override;

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes) override;

 private:
  struct State;
  std::unique_ptr<MemoryResource> owned_upstream_;
  MemoryResource& upstream_;
  CachingAllocatorOptions options_;
  std::unique_ptr<State> state_;
};

// JSON documents for inspection and for DTR_STATS.
std::string to_json(const AllocatorStats& stats);
std::string to_json(const MemorySnapshot& snapshot);

// The process-wide allocator of the default device (see default_device()), created on first use with the
// budget in DTR_MEMORY_BUDGET. The C API allocates from it. Throws dtr::ConfigError or dtr::DeviceError
// when the environment is malformed; it is then created again at the next call.
CachingAllocator& default_allocator();

}  // namespace dtr

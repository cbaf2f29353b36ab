#include "dtr/caching_allocator.h"

#include <bit>
#include <mutex>  // std::lock_guard

#include "caching_allocator_state.h"
#include "dtr/check.h"

namespace dtr {

using detail::Block;
using detail::Request;
using detail::Segment;
using detail::round_up;
using detail::to_pointer;

const char* to_string(Pool pool) { return pool == Pool::small ? "small" : "large"; }

const char* to_string(Compaction compaction) {
  switch (compaction) {
    case Compaction::off: return "off";
    case Compaction::last_resort: return "last-resort";
    case Compaction::first: return "first";
  }
  return "?";
}

CachingAllocator::CachingAllocator(MemoryResource& upstream, CachingAllocatorOptions options)
    : upstream_(upstream), options_(options), state_(std::make_unique<State>(upstream_, options_)) {
  const auto& o = options_;
  DTR_CHECK(std::has_single_bit(o.rounding) && o.rounding >= kDefaultAlignment, InvalidArgument,
            "CachingAllocatorOptions::rounding ", o.rounding, " must be a power of two of at least ",
            kDefaultAlignment);
  for (std::size_t size : {o.small_request_limit, o.small_segment_bytes, o.large_segment_bytes,
                           o.own_segment_threshold, o.own_segment_rounding}) {
    DTR_CHECK(size > 0 && size % o.rounding == 0, InvalidArgument, "CachingAllocatorOptions: size ", size,
              " must be a positive multiple of the rounding ", o.rounding);
  }
  DTR_CHECK(o.small_segment_bytes >= o.small_request_limit, InvalidArgument,
            "CachingAllocatorOptions: a small segment must hold the largest small request");
  DTR_CHECK(o.large_segment_bytes >= o.own_segment_threshold, InvalidArgument,
            "CachingAllocatorOptions: a large segment must hold every request below own_segment_threshold");
  const std::size_t granularity = upstream_.maps_pages() ? upstream_.page_bytes() : 1;
  DTR_CHECK(o.page_bytes % o.rounding == 0 && o.page_bytes % granularity == 0, InvalidArgument,
            "CachingAllocatorOptions::page_bytes ", o.page_bytes, " must be 0 (the upstream's pages) or a multiple of "
            "the rounding ", o.rounding, " and of the upstream's page size ", granularity);
  if (o.expandable_segments && !upstream_.maps_pages()) {
    detail::logger().warn("{}: expandable segments need an upstream that maps pages; {} does not, so classic "
                          "segments are used", name(), upstream_.name());
  }
  set_budget(o.budget_bytes);
}

CachingAllocator::CachingAllocator(std::unique_ptr<MemoryResource> upstream, CachingAllocatorOptions options)
    : CachingAllocator(*upstream, options) {
  owned_upstream_ = std::move(upstream);
}

CachingAllocator::~CachingAllocator() {
  auto& s = *state_;
  if (s.stats.active_blocks.current > 0) {
    detail::logger().warn("{}: destroyed with {} block(s) ({}) still allocated", name(),
                          s.stats.active_blocks.current, format_bytes(s.stats.allocated_bytes.current));
  }
  for (auto& [serial, segment] : s.segments) {
    if (segment->expandable) continue;
    try {
      upstream_.deallocate(to_pointer(segment->address), segment->size);
    } catch (const std::exception& e) {
      detail::logger().error("{}: returning a segment failed: {}", name(), e.what());
    }
  }
  try {
    s.release_range();
  } catch (const std::exception& e) {
    detail::logger().error("{}: returning an address range failed: {}", name(), e.what());
  }
}

std::size_t CachingAllocator::capacity() const { return upstream_.capacity(); }
std::string CachingAllocator::name() const { return "caching(" + upstream_.name() + ")"; }
bool CachingAllocator::host_accessible() const { return upstream_.host_accessible(); }

void* CachingAllocator::do_allocate(std::size_t bytes, std::size_t alignment) {
  (void)alignment;  // every block is aligned to options_.rounding >= kMaxAlignment
  State& s = *state_;
  Request r;
  r.bytes = bytes;
  const bool representable = bytes <= std::numeric_limits<std::size_t>::max() - options_.rounding;
  r.rounded = representable ? round_up(bytes, options_.rounding) : bytes;
  r.pool = r.rounded <= options_.small_request_limit ? Pool::small : Pool::large;

  // Compaction at most once before the Reclaimer (Compaction::first) and once after it (the last resort): moving
  // blocks back and forth must not loop.
  bool compacted_first = options_.compaction != Compaction::first;
  bool compacted = options_.compaction == Compaction::off;
  for (;;) {
    Reclaimer* reclaimer = nullptr;
    ReclaimRequest request;
    std::uint64_t freed_before = 0;
    {
      std::lock_guard lock(s.mutex);
      if (!representable || r.rounded > s.upstream_capacity || (s.budget && s.least_reservation(r) > *s.budget)) {
        throw s.out_of_memory(r, State::Cause::too_large, name());
      }
      if (Block* block = s.try_allocate(r)) return to_pointer(block->address);
      reclaimer = s.reclaimer;
      if (reclaimer == nullptr) throw s.out_of_memory(r, State::Cause::no_reclaimer, name());
      if (compacted_first) {
        s.stats.num_reclaim_calls += 1;
        freed_before = s.blocks_freed;
        request = ReclaimRequest{bytes, r.rounded, r.pool, s.budget.value_or(0), s.stats.reserved_bytes.current};
      }
    }
    if (!compacted_first) {
      // Fragmentation before eviction: moving no more bytes than the request is cheaper than a recomputation.
      compacted_first = true;
      s.compact(r, *reclaimer, /*last_resort=*/false);
      continue;
    }
    reclaimer->reclaim(request);
    {
      std::lock_guard lock(s.mutex);
      if (s.blocks_freed != freed_before) continue;
      if (compacted) throw s.out_of_memory(r, State::Cause::no_progress, name());
    }
    compacted = true;
    if (!s.compact(r, *reclaimer, /*last_resort=*/true)) {
      std::lock_guard lock(s.mutex);
      throw s.out_of_memory(r, State::Cause::no_progress, name());
    }
  }
}

void CachingAllocator::do_deallocate(void* ptr, std::size_t bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  Block* block = s.find_live(ptr);
  DTR_CHECK(block != nullptr, InvalidArgument, name(), ": deallocate(", ptr, ", ", bytes,
            "): the pointer was not allocated by this allocator or was already freed");
  DTR_CHECK(block->requested == bytes, InvalidArgument, name(), ": deallocate(", ptr, ", ", bytes,
            "): the block was allocated with ", block->requested, " bytes");
  s.free(block);
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  Block* block = s.find_live(ptr);
  DTR_CHECK(block != nullptr, InvalidArgument, name(), ": free(", ptr,
            "): the pointer was not allocated by this allocator or was already freed");
  s.free(block);
}

void CachingAllocator::set_owner(void* ptr, OwnerTag owner) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  Block* block = s.find_live(ptr);
  DTR_CHECK(block != nullptr, InvalidArgument, name(), ": set_owner(", ptr, "): no live block there");
  block->owner = owner;
}

void CachingAllocator::set_reclaimer(Reclaimer* reclaimer) {
  std::lock_guard lock(state_->mutex);
  state_->reclaimer = reclaimer;
}

void CachingAllocator::set_budget(std::optional<std::uint64_t> budget_bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (!budget_bytes) {
    s.budget.reset();
    return;
  }
  DTR_CHECK(*budget_bytes > 0, InvalidArgument, name(),
            ": a budget of 0 bytes could serve nothing; pass no budget (nullopt) to remove it");
  const std::uint64_t reserved = s.stats.reserved_bytes.current;
  if (reserved > *budget_bytes) {
    std::vector<Segment*> empty = s.empty_segments();
    std::sort(empty.begin(), empty.end(), [](const Segment* a, const Segment* b) { return a->size > b->size; });
    for (Segment* segment : empty) {
      if (s.stats.reserved_bytes.current <= *budget_bytes) break;
      s.release_segment(segment);
    }
    s.release_idle_pages(*budget_bytes);
  }
  DTR_CHECK(s.stats.reserved_bytes.current <= *budget_bytes, InvalidArgument, name(), ": cannot set a budget of ",
            format_bytes(*budget_bytes), " while ", format_bytes(s.stats.reserved_bytes.current),
            " is reserved in segments that are in use; free memory first");
  s.budget = budget_bytes;
}

std::optional<std::uint64_t> CachingAllocator::budget() const {
  std::lock_guard lock(state_->mutex);
  return state_->budget;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(state_->mutex);
  state_->release_all_empty_segments();
  state_->release_idle_pages(0);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->current_stats();
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(state_->mutex);
  state_->reset_peaks();
}

MemorySnapshot CachingAllocator::snapshot() const {
  MemorySnapshot snap;
  snap.resource = name();
  std::lock_guard lock(state_->mutex);
  snap.stats = state_->current_stats();
  snap.segments.reserve(state_->segments.size());
  for (const auto& [serial, segment] : state_->segments) {
    SegmentInfo info;
    info.address = segment->address;
    info.size = segment->size;
    info.pool = segment->pool;
    info.expandable = segment->expandable;
    info.mapped_bytes = segment->expandable
                            ? state_->range_mapped_bytes()
                            : segment->size;
    for (const Block* b = segment->head; b != nullptr; b = b->next) {
      info.blocks.push_back(BlockInfo{b->address, b->size, b->requested, b->allocated, b->owner});
    }
    snap.segments.push_back(std::move(info));
  }
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return snap;
}

void CachingAllocator::for_each_block(Pool pool,
                                      const std::function<void(const BlockInfo& block, bool segment_start)>& visit) const {
  std::lock_guard lock(state_->mutex);
  for (const auto& [serial, segment] : state_->segments) {
    if (segment->pool != pool || segment->expandable) continue;
    for (const Block* b = segment->head; b != nullptr; b = b->next) {
      visit(BlockInfo{b->address, b->size, b->requested, b->allocated, b->owner}, b == segment->head);
    }
  }
}

}  // namespace dtr

// Compaction: when a request does not fit, the blocks the Reclaimer says may move are copied out of its way
// (docs/allocator.md, "Compaction"): once the Reclaimer frees nothing more, and with Compaction::first also
// before asking it. Off the hot path: it runs only where a request needs the Reclaimer.
#include <algorithm>
#include <mutex>  // std::lock_guard

#include "caching_allocator_state.h"
#include "dtr/small_vector.h"

namespace dtr {

namespace detail {

// By addresses, not blocks: a clearing tried and given back leaves the same blocks at the same addresses, but
// not the same Block objects (merges recycle them).
struct Clearing {
  struct Run {
    std::uint64_t segment = 0;   // the segment's serial
    std::uintptr_t begin = 0;    // a block's address
    std::uintptr_t end = 0;      // the end of a block
  };
  SmallVector<Run, 1> runs;  // the blocks of one segment each
  std::uint64_t moved = 0;   // bytes of the live blocks in them
  // Whole segments to release so that the request's new segment fits: the headroom is the request's, so its
  // blocks never go to a new segment.
  bool releases_segments = false;

  bool overlaps(std::uintptr_t begin, std::uintptr_t end) const {
    return std::any_of(runs.begin(), runs.end(), [&](const Run& r) { return begin < r.end && r.begin < end; });
  }
};

struct Move {
  OwnerTag owner = 0;
  Block* from = nullptr;
  Block* to = nullptr;
};

}  // namespace detail

using detail::Block;
using detail::Clearing;
using detail::Move;

namespace {

// Each try takes and gives back destinations under the lock: a few cheapest clearings are enough, and a
// request that none of them serves fails as it did without compaction.
constexpr std::size_t kMaxTries = 8;

}  // namespace

std::vector<Clearing> CachingAllocator::State::clearings(const Request& r, const Reclaimer& reclaimer) const {
  const auto movable = [&](const Block* b) { return !b->allocated || (b->owner != 0 && reclaimer.movable(b->owner)); };
  std::vector<Clearing> found;
  // Segments that could be emptied, by the bytes to move per byte released: under a budget, enough of them
  // released make room for the request's new segment.
  struct Emptiable {
    const Segment* segment;
    std::uint64_t moved;
  };
  std::vector<Emptiable> emptiable;
  const auto whole = [](const Emptiable& e) {
    return Clearing::Run{e.segment->serial, e.segment->address, e.segment->address + e.segment->size};
  };
  for (const auto& [serial, segment] : segments) {
    if (segment->expandable) continue;
    // One walk per segment: in the request's pool, the runs that cover it, each as short as it can be; and
    // whether the whole segment could be emptied.
    const bool runs = segment->pool == r.pool;
    Emptiable e{segment.get(), 0};
    bool all_movable = true;
    Block* first = segment->head;
    std::uint64_t span = 0;
    std::uint64_t moved = 0;
    for (Block* b = segment->head; b != nullptr && (runs || all_movable); b = b->next) {
      const bool can_go = movable(b);
      all_movable = all_movable && can_go;
      e.moved += b->allocated ? b->size : 0;
      if (!runs) continue;
      if (!can_go) {
        first = b->next;
        span = moved = 0;
        continue;
      }
      span += b->size;
      moved += b->allocated ? b->size : 0;
      while (first != b && span - first->size >= r.rounded) {
        span -= first->size;
        moved -= first->allocated ? first->size : 0;
        first = first->next;
      }
      if (span >= r.rounded && moved > 0) {
        found.push_back(Clearing{{Clearing::Run{serial, first->address, b->address + b->size}}, moved});
      }
    }
    if (budget && all_movable && !segment->empty()) emptiable.push_back(e);
  }
  if (budget) {
    const std::uint64_t room = headroom() + empty_segment_bytes;
    const std::uint64_t needed = least_reservation(r);
    // One segment whose release is enough on its own, or else the fewest bytes moved per byte released.
    for (const Emptiable& e : emptiable) {
      if (room + e.segment->size >= needed) found.push_back(Clearing{{whole(e)}, e.moved, true});
    }
    std::sort(emptiable.begin(), emptiable.end(), [](const Emptiable& a, const Emptiable& b) {
      return detail::u128{a.moved} * b.segment->size < detail::u128{b.moved} * a.segment->size;
    });
    Clearing several;
    several.releases_segments = true;
    std::uint64_t released = 0;
    for (const Emptiable& e : emptiable) {
      if (room + released >= needed) break;
      several.runs.push_back(whole(e));
      several.moved += e.moved;
      released += e.segment->size;
    }
    if (several.runs.size() > 1 && room + released >= needed) found.push_back(std::move(several));
  }
  std::stable_sort(found.begin(), found.end(), [](const Clearing& a, const Clearing& b) { return a.moved < b.moved; });
  if (found.size() > kMaxTries) found.resize(kMaxTries);
  return found;
}

Block* CachingAllocator::State::take_outside(const Request& r, const Clearing& clearing, bool reserve,
                                             std::vector<Segment*>& reserved) {
  FreeSet& set = free_blocks[detail::index_of(r.pool)];
  for (auto it = best_fit(r, r.pool); it != set.end(); ++it) {
    Block* free_block = *it;
    const bool inside = clearing.overlaps(free_block->address, free_block->address + free_block->size);
    const bool whole_segment = free_block->prev == nullptr && free_block->next == nullptr;
    if (inside || whole_segment || free_block->segment->expandable) continue;
    Block* block = take(it, r.rounded, should_split(r.pool, free_block->size - r.rounded));
    enter_live(block, r.bytes);
    return block;
  }
  // A wide block beside a small hole (a layer's 6 MiB weight in a 20 MiB segment, with 14 MiB free after it
  // and 13 MiB of headroom, when 16 MiB are asked): nothing reserved has room for it, the budget has.
  if (!reserve || clearing.releases_segments || in_range(r)) return nullptr;
  Block* block = carve_new_segment(r);
  if (block == nullptr) return nullptr;
  reserved.push_back(block->segment);
  enter_live(block, r.bytes);
  return block;
}

void CachingAllocator::State::untake(Block* block) {
  free(block);
  stats.num_allocations -= 1;
  stats.num_frees -= 1;
  blocks_freed -= 1;  // not progress for the reclaim loop
}

bool CachingAllocator::State::take_destinations(const Clearing& clearing, std::vector<Move>& moves, bool reserve) {
  std::vector<Block*> sources;
  for (const Clearing::Run& run : clearing.runs) {
    for (Block* b = segments.at(run.segment)->head; b != nullptr && b->address < run.end; b = b->next) {
      if (b->allocated && b->address >= run.begin) sources.push_back(b);
    }
  }
  // The largest first: best fit then leaves the smaller holes to the smaller blocks. Equals in best fit's order.
  std::sort(sources.begin(), sources.end(), [](const Block* a, const Block* b) {
    return a->size != b->size ? a->size > b->size : detail::BySizeThenPlace{}(a, b);
  });
  const std::size_t first_move = moves.size();
  std::vector<detail::Segment*> reserved;
  for (Block* source : sources) {
    const Request r{source->requested, detail::round_up(source->requested, options.rounding), source->segment->pool};
    Block* destination = take_outside(r, clearing, reserve, reserved);
    if (destination == nullptr) {
      for (std::size_t i = first_move; i < moves.size(); ++i) untake(moves[i].to);
      moves.resize(first_move);
      for (detail::Segment* segment : reserved) release_segment(segment);  // empty again: as if never reserved
      return false;
    }
    destination->owner = source->owner;
    moves.push_back(Move{source->owner, source, destination});
  }
  return true;
}

bool CachingAllocator::State::compact(const Request& r, Reclaimer& reclaimer, bool last_resort) {
  std::vector<Move> moves;
  {
    std::lock_guard lock(mutex);
    const std::uint64_t max_moved = last_resort ? std::numeric_limits<std::uint64_t>::max() : r.rounded;
    const std::vector<Clearing> found = clearings(r, reclaimer);
    const auto plan = [&](bool into_new_segments) {
      for (const Clearing& clearing : found) {
        if (clearing.moved > max_moved) break;
        if (take_destinations(clearing, moves, into_new_segments)) return true;
      }
      return false;
    };
    // Into what is reserved first: a new segment only where no clearing's blocks fit there, so that a run
    // whose compaction worked without one makes the same moves.
    if (!plan(false) && !(last_resort && plan(true))) return false;
  }
  // The copies run without the lock, as the Reclaimer's evictions do; both blocks of each move stay live
  // (their owner holds them), so no other thread can merge them away meanwhile.
  std::size_t done = 0;
  try {
    for (; done < moves.size(); ++done) {
      reclaimer.move(moves[done].owner, detail::to_pointer(moves[done].from->address),
                     detail::to_pointer(moves[done].to->address), moves[done].from->requested);
    }
  } catch (...) {
    std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < moves.size(); ++i) i < done ? free(moves[i].from) : untake(moves[i].to);
    throw;
  }
  std::lock_guard lock(mutex);
  std::uint64_t bytes = 0;
  for (const Move& m : moves) {
    bytes += m.from->requested;
    free(m.from);
  }
  stats.num_compactions += 1;
  stats.num_moved_blocks += moves.size();
  stats.moved_bytes += bytes;
  detail::logger().debug("{}: moved {} block(s), {}, to make room for {} in the {} pool", upstream.name(),
                         moves.size(), format_bytes(bytes), format_bytes(r.bytes), to_string(r.pool));
  return true;
}

}  // namespace dtr

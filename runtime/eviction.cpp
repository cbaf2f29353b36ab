// Memory under the budget: which storages are candidates, buffers for storages, and eviction when the budget
// needs room (design section 4). Both budget modes reach eviction through make_room().
#include <algorithm>
#include <limits>

#include "dtr/check.h"
#include "runtime/runtime_impl.h"

namespace dtr {

using detail::Storage;

namespace {

// A list of storages each of which keeps its place in it (`Slot`, Storage::kNotResident while out): O(1) in
// and out, the last entry moved into the gap.
template <std::size_t Storage::*Slot>
void list_in(std::vector<Storage*>& list, Storage& s) {
  s.*Slot = list.size();
  list.push_back(&s);
}

template <std::size_t Storage::*Slot>
void unlist(std::vector<Storage*>& list, Storage& s) {
  if (s.*Slot == Storage::kNotResident) return;
  Storage* last = list.back();
  list[s.*Slot] = last;
  last->*Slot = s.*Slot;
  list.pop_back();
  s.*Slot = Storage::kNotResident;
}

}  // namespace

void Runtime::Impl::sync_candidate(Storage& s) {
  const bool is_candidate = candidate(s);
  if (is_candidate == (s.candidate_since != 0)) return;
  s.candidate_since = is_candidate ? ++candidate_arrivals : 0;
  if (!index) return;
  if (is_candidate) {
    heuristic_upkeep([&] { index->add(s, index_clocks()); });  // keyed now, or at the next decision (forecast)
  } else {
    index->remove(s, index_clocks());
  }
}

void Runtime::Impl::pin(Storage& s) {
  s.pins += 1;
  if (s.pins == 1) sync_candidate(s);
}

void Runtime::Impl::unpin(Storage& s) {
  s.pins -= 1;
  if (s.pins == 0) sync_candidate(s);
}

void Runtime::Impl::Pins::release_last(const Storage* s) {
  const auto it = std::find(pinned_.begin(), pinned_.end(), s);
  if (it != pinned_.end()) std::rotate(it, it + 1, pinned_.end());
}

void Runtime::Impl::add_resident(Storage& s) {
  if (!s.constant()) list_in<&Storage::resident_slot>(recomputable, s);
  resident_bytes += s.nbytes;
  stats.peak_resident_bytes = std::max(stats.peak_resident_bytes, resident_bytes);
}

void Runtime::Impl::remove_resident(Storage& s) {
  unlist<&Storage::resident_slot>(recomputable, s);
  resident_bytes -= s.nbytes;
}

void Runtime::Impl::allocate(Storage& s) {
  if (config.budget_mode == BudgetMode::bytes && config.memory_budget) {
    while (resident_bytes + s.nbytes > *config.memory_budget) {
      if (make_room(nullptr) == 0) throw out_of_memory(s.nbytes, nullptr);
    }
  }
  std::byte* data = nullptr;
  try {
    data = static_cast<std::byte*>(memory->allocate(std::max<std::size_t>(s.nbytes, 1)));
  } catch (const OutOfMemory& e) {
    throw out_of_memory(s.nbytes, &e);
  }
  attach_buffer(s, data);
}

void Runtime::Impl::attach_buffer(Storage& s, std::byte* data) {
  s.data = data;
  // Windows and compaction map the allocator's blocks back to storages through the owner tag.
  if (tags_owners()) allocator->set_owner(s.data, reinterpret_cast<OwnerTag>(&s));
  s.in_memory = true;
  s.residency += 1;
  add_resident(s);
}

void Runtime::Impl::release_buffer(Storage& s) {
  memory->deallocate(s.data, std::max<std::size_t>(s.nbytes, 1));
  detach_buffer(s);
}

void Runtime::Impl::detach_buffer(Storage& s) {
  s.data = nullptr;
  s.in_memory = false;
  remove_resident(s);
  sync_candidate(s);
}

void Runtime::Impl::evict(Storage& s) {
  release_buffer(s);
  if (!heuristic_started) list_in<&Storage::unreported_slot>(unreported_evictions, s);  // told when it starts
  // What the heuristic does to keep its scores (dtr's evicted neighbourhoods, dtr-eq's classes, the index's
  // refreshes) is search time.
  heuristic_upkeep([&] { heuristic->on_evict(s); });
}

void Runtime::Impl::drop_unreported(Storage& s) { unlist<&Storage::unreported_slot>(unreported_evictions, s); }

void Runtime::Impl::start_heuristic() {
  start_forecasts();
  if (heuristic_started) return;
  heuristic_started = true;
  std::vector<Storage*> evicted = std::move(unreported_evictions);
  unreported_evictions.clear();
  std::sort(evicted.begin(), evicted.end(), [](const Storage* a, const Storage* b) { return a->id < b->id; });
  for (Storage* s : evicted) {
    s->unreported_slot = Storage::kNotResident;
    heuristic_upkeep([&] { heuristic->on_evict(*s); });
  }
}

// Forecasts serve decisions, which only a budget asks for: without one the program's uses are not recorded,
// so an unbudgeted run pays nothing for a forecasting heuristic.
void Runtime::Impl::start_forecasts() {
  if (!forecaster && heuristic->reads_forecasts()) forecaster = std::make_unique<detail::Forecaster>(op_clock);
}

void Runtime::Impl::build_index() {
  if (config.search != EvictionSearch::index || config.size_floor != 0) return;  // a size floor filters: it scans
  index = heuristics::make_candidate_index(*heuristic);
  if (!index) return;  // scores that need a scan (random)
  std::vector<Storage*> candidates;
  for (Storage* s : recomputable) {
    if (candidate(*s)) candidates.push_back(s);
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Storage* a, const Storage* b) { return a->candidate_since < b->candidate_since; });
  for (Storage* s : candidates) index->add(*s, index_clocks());
}

// A smaller budget evicts what it must at once; a budget nothing evictable can reach is an OutOfMemory and
// leaves the old one (with what was evicted meanwhile evicted).
void Runtime::Impl::set_budget(std::optional<std::uint64_t> bytes) {
  DTR_CHECK(!bytes || *bytes > 0, InvalidArgument,
            "set_memory_budget: a budget of 0 bytes holds nothing; pass nullopt for no budget");
  const CurrentOp running(*this, "set_memory_budget");
  if (bytes) start_heuristic();  // without a budget no forecast was kept: they start with the ops from now on
  if (bytes && !index) build_index();
  if (config.budget_mode == BudgetMode::bytes || !allocator) {
    DTR_CHECK(config.budget_mode == BudgetMode::bytes || !bytes, ConfigError, "set_memory_budget: this runtime takes "
              "its buffers from ", memory_name(), " directly: only a bytes budget (Config::budget_mode) applies");
    while (bytes && resident_bytes > *bytes) {
      if (make_room(nullptr) == 0) throw out_of_memory(resident_bytes - *bytes, nullptr, *bytes);
    }
  } else {
    for (;;) {
      try {
        allocator->set_budget(bytes);  // releases empty cached segments if that is enough
        break;
      } catch (const InvalidArgument&) {
        const std::uint64_t reserved = allocator->stats().reserved_bytes.current;
        if (evict_one() == 0) throw out_of_memory(reserved - *bytes, nullptr, *bytes);
      }
    }
  }
  config.memory_budget = bytes;
}

std::size_t Runtime::Impl::reclaim(const ReclaimRequest& request) { return make_room(&request); }

bool Runtime::Impl::movable(OwnerTag owner) const {
  const auto* s = reinterpret_cast<const Storage*>(owner);  // NOLINT: the tag attach_buffer set
  return s->in_memory && s->captured == 0 && !s->restoring;
}

void Runtime::Impl::move(OwnerTag owner, void* from, void* to, std::size_t bytes) {
  auto* s = reinterpret_cast<Storage*>(owner);  // NOLINT: the tag attach_buffer set
  DTR_CHECK(s->data == from && movable(owner), InvalidArgument, "compaction: asked to move ", from,
            ", which is not the buffer of a resident storage whose pointer no kernel run holds");
  if (kernel_memory) backend->copy(to, from, bytes);
  s->data = static_cast<std::byte*>(to);
  stats.relocations += 1;
}

std::size_t Runtime::Impl::make_room(const ReclaimRequest* request) {
  if (windows && request != nullptr) {  // a request comes from the caching allocator
    // No window with something to evict covers it: the request needs a new segment, and the scores choose
    // one storage at a time.
    if (const std::size_t freed = evict_window(*request)) return freed;
  }
  return evict_one();
}

// Evicts the cheapest contiguous window of free and evictable blocks in the request's pool that covers it
// (heuristics/window.h); returns the bytes evicted, 0 when no window with something to evict covers it.
std::size_t Runtime::Impl::evict_window(const ReclaimRequest& request) {
  using heuristics::WindowBlock;
  const std::uint64_t search_start = detail::steady_ns();
  const std::uint64_t clock = now();
  window_blocks.clear();
  window_owners.clear();
  if (heuristic->reads_memory()) begin_memory_decision();
  allocator->for_each_block(request.pool, [&](const BlockInfo& block, bool segment_start) {
    WindowBlock w;
    w.bytes = block.size;
    w.segment_start = segment_start;
    Storage* owner = block.allocated ? reinterpret_cast<Storage*>(block.owner) : nullptr;  // NOLINT
    if (!block.allocated) {
      w.kind = WindowBlock::Kind::free;
    } else if (owner != nullptr && candidate(*owner)) {
      w.kind = WindowBlock::Kind::evictable;
      w.cost = heuristic->window_cost(*owner, clock);
      w.last_resort = heuristic->last_resort(*owner);
    } else {
      w.kind = WindowBlock::Kind::fixed;
    }
    window_blocks.push_back(w);
    window_owners.push_back(owner);
  });
  const auto window = heuristics::cheapest_window(window_blocks, request.block_bytes);
  stats.search_ns += detail::steady_ns() - search_start;
  if (!window) return 0;
  std::size_t freed = 0;
  for (std::size_t i = window->first; i < window->last; ++i) {
    if (window_blocks[i].kind != WindowBlock::Kind::evictable) continue;
    freed += window_blocks[i].bytes;
    evict(*window_owners[i]);
    stats.evictions += 1;
  }
  return freed;
}

// Candidates below this many bytes are passed over (Config::size_floor), unless every candidate is.
std::size_t Runtime::Impl::size_floor_bytes() const {
  if (config.size_floor == 0) return 0;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::size_t largest = 0;
  for (const Storage* s : recomputable) {
    if (s->pins > 0) continue;
    bytes += s->nbytes;
    count += 1;
    largest = std::max(largest, s->nbytes);
  }
  if (count == 0) return 0;
  const auto floor =
      static_cast<std::size_t>(config.size_floor * static_cast<double>(bytes) / static_cast<double>(count));
  return floor <= largest ? floor : 0;  // every candidate below the floor: all of them count
}

// Tells a heuristic that reads memory (Heuristic::reads_memory) what the budget leaves to the candidates: the
// budget less the resident bytes no candidate holds, and under a device budget less the reserved bytes no
// storage holds (what fragmentation keeps from them now).
void Runtime::Impl::begin_memory_decision() {
  double available = std::numeric_limits<double>::infinity();
  if (config.memory_budget) {
    std::uint64_t candidates = 0;
    for (const Storage* s : recomputable) candidates += s->nbytes;
    available = static_cast<double>(*config.memory_budget) - static_cast<double>(resident_bytes - candidates);
    if (config.budget_mode == BudgetMode::device && allocator) {
      const std::uint64_t reserved = allocator->stats().reserved_bytes.current;
      if (reserved > resident_bytes) available -= static_cast<double>(reserved - resident_bytes);
    }
  }
  heuristic->begin_decision(available, [this](heuristics::NeighbourVisitor visit) {
    for (Storage* s : recomputable) visit(*s);
  });
}

// Evicts the resident, unpinned storage with the lowest score; returns its bytes (0: nothing could go).
std::size_t Runtime::Impl::evict_one() {
  const std::uint64_t search_start = detail::steady_ns();
  const std::uint64_t clock = now();
  Storage* victim = nullptr;
  if (index) {
    victim = static_cast<Storage*>(index->choose(index_clocks(clock)));  // the index holds only this runtime's storages
  } else {
    const std::size_t floor = size_floor_bytes();
    if (heuristic->reads_memory()) begin_memory_decision();
    double best = std::numeric_limits<double>::infinity();
    bool best_last_resort = true;
    for (Storage* s : recomputable) {
      if (s->pins > 0 || s->nbytes < floor) continue;
      const bool last_resort = heuristic->last_resort(*s);
      if (victim != nullptr && last_resort && !best_last_resort) continue;
      if (victim != nullptr && last_resort == best_last_resort && heuristic->score_floor(*s, clock) > best) continue;
      const double score = heuristic->score(*s, clock);
      if (victim == nullptr || (best_last_resort && !last_resort) || score < best ||
          (score == best && s->candidate_since > victim->candidate_since)) {
        victim = s;
        best = score;
        best_last_resort = last_resort;
      }
    }
  }
  stats.search_ns += detail::steady_ns() - search_start;
  if (victim == nullptr) return 0;
  const std::size_t bytes = std::max<std::size_t>(victim->nbytes, 1);
  evict(*victim);
  stats.evictions += 1;
  return bytes;
}

OutOfMemory Runtime::Impl::out_of_memory(std::size_t bytes, const OutOfMemory* cause,
                                         std::optional<std::uint64_t> budget) const {
  if (!budget) budget = config.memory_budget;
  std::uint64_t pinned = 0;
  std::uint64_t evictable = 0;
  for (const Storage* s : recomputable) (s->pins > 0 ? pinned : evictable) += s->nbytes;
  const std::uint64_t constants = resident_bytes - pinned - evictable;
  OutOfMemoryInfo info = cause != nullptr ? cause->info() : OutOfMemoryInfo{};
  if (cause == nullptr) {  // a bytes budget: what the memory holds all the same (it read zero)
    if (allocator) {
      const AllocatorStats memory = allocator->stats();
      info.reserved_bytes = memory.reserved_bytes.current;
      info.allocated_bytes = memory.allocated_bytes.current;
      info.largest_free_block_bytes = memory.largest_free_block.current;
    } else {
      info.reserved_bytes = resident_bytes;
      info.allocated_bytes = resident_bytes;
    }
  }
  info.requested_bytes = bytes;
  info.budget_bytes = budget.value_or(0);
  std::string message = detail::concat(
      "dtr: out of memory running op '", current_op.empty() ? std::string_view("?") : current_op,
      "': it needs ", format_bytes(bytes), " more; budget ",
      budget ? format_bytes(*budget) : std::string("none"), " (",
      to_string(config.budget_mode), " mode); resident ", format_bytes(resident_bytes),
      ", of which pinned by running ops ", format_bytes(pinned), " and constants ", format_bytes(constants),
      " could not be evicted", evictable > 0 ? ", and the rest could not make room in one piece" : "",
      ". Try a larger DTR_MEMORY_BUDGET or smaller ops.");
  if (cause != nullptr) message += std::string(" Allocator: ") + cause->what();
  return OutOfMemory(std::move(message), info, __FILE__, __LINE__);
}

}  // namespace dtr

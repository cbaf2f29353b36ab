// The lineage's lifetime: storages, closures and user handles as they die. A storage whose last user handle
// dies is evicted at once (eager eviction) and stays in the lineage while closures still read it; it is freed
// when nothing references it (design section 4, "Release").
#include <algorithm>

#include "runtime/runtime_impl.h"

namespace dtr {

using detail::Storage;

void Runtime::Impl::bury(std::shared_ptr<Storage> storage) {
  graveyard.push_back(std::move(storage));
  if (draining) return;
  draining = true;
  while (!graveyard.empty()) {
    std::shared_ptr<Storage> last = std::move(graveyard.back());
    graveyard.pop_back();
    last.reset();  // may destroy a closure, which buries its inputs
  }
  draining = false;
}

// handle_id 0: a handle moved to another storage, which is not a release in traces. `last_reference`: nothing
// else holds the storage, so it is destroyed next and its buffer freed then; an eviction first would only be
// work for the heuristic.
void Runtime::Impl::release_handle(Storage& s, std::uint64_t handle_id, bool last_reference) {
  const bool evicting = s.handles == 1 && s.in_memory && s.pins == 0 && !s.constant() && !last_reference;
  s.handles -= 1;
  if (s.handles == 0) {
    s.handles_released = true;
    // An eviction tells the heuristic as much; otherwise the release is an event of its own.
    if (!evicting && !s.constant()) heuristic_upkeep([&] { heuristic->on_release(s); });
  }
  if (trace && handle_id != 0) trace->release(handle_id);
  if (evicting) {
    evict(s);
    stats.eager_evictions += 1;
  }
}

// `s` is dying, already detached from its producer's outputs (so no walk finds it from its inputs).
void Runtime::Impl::destroyed(Storage& s) {
  // A storage leaving the lineage changes the evicted regions next to it, which the heuristic's scores follow.
  drop_unreported(s);  // dead before the heuristic heard it went
  heuristic_upkeep([&] { heuristic->on_destroy(s); });
  if (s.in_memory) release_buffer(s);  // first: it leaves the index, which may still read its forecast
  if (forecaster) forecaster->destroyed(s);
  live_storages -= 1;
  if (orphaned && live_storages == 0 && allocator) allocator->empty_cache();  // the last of its memory
}

namespace detail {

Storage::~Storage() {
  if (producer != nullptr) producer->outputs[output_index] = nullptr;
  runtime.destroyed(*this);
}

double Storage::forecast_distance() {
  return runtime.forecaster ? runtime.forecaster->distance(*this, runtime.op_clock) : 1.0;
}

std::uint64_t Storage::ops_run_at_last_use() const {
  const std::uint64_t began = runtime.forecaster ? runtime.forecaster->began_ops() : 0;
  return last_touch_ops - std::min(last_touch_ops, began);
}

bool Storage::forecast_unread() { return runtime.forecaster && runtime.forecaster->unread_but_forecast(*this); }

std::optional<std::uint64_t> Storage::forecast_deadline() {
  return runtime.forecaster ? runtime.forecaster->next_use(*this) : std::nullopt;
}

void Storage::for_each_input(heuristics::NeighbourVisitor visit) {
  if (producer == nullptr) return;
  for (const auto& in : producer->inputs) visit(*in);
}

void Storage::for_each_dependent(heuristics::NeighbourVisitor visit) {
  for (const Dependent& d : dependents) {
    for (Storage* out : d.closure->outputs) {
      if (out != nullptr) visit(*out);
    }
  }
}

void Closure::register_dependent() {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto& deps = inputs[i]->dependents;
    dependent_at.push_back(static_cast<std::uint32_t>(deps.size()));
    deps.push_back({this, static_cast<std::uint32_t>(i)});
  }
}

Closure::~Closure() {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::shared_ptr<Storage>& in = inputs[i];
    if (i < dependent_at.size()) {  // swap-remove its entry; the entry moved into its place learns where it is
      auto& deps = in->dependents;
      const Storage::Dependent moved = deps.back();
      deps[dependent_at[i]] = moved;
      moved.closure->dependent_at[moved.input] = dependent_at[i];
      deps.pop_back();
    }
    Runtime::Impl& runtime = in->runtime;
    runtime.bury(std::move(in));
  }
}

TensorHandle::TensorHandle(std::shared_ptr<Storage> s)
    : storage(std::move(s)), id(storage->id), meta(storage->meta), offset(0), view(0) {
  storage->handles += 1;
}

TensorHandle::TensorHandle(std::shared_ptr<Storage> s, std::uint64_t view_id, TensorMeta view_meta,
                           std::size_t view_offset, std::uint32_t op_view)
    : storage(std::move(s)), id(view_id), meta(std::move(view_meta)), offset(view_offset), view(op_view) {
  storage->handles += 1;
}

TensorHandle::~TensorHandle() { storage->runtime.release_handle(*storage, id, storage.use_count() == 1); }

}  // namespace detail
}  // namespace dtr

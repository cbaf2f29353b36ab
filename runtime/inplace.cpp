// In-place updates (Runtime::assign): a tensor takes a new value without a recomputation of something computed
// before the update ever seeing it (design section 4, Config::inplace).
#include <algorithm>

#include "dtr/check.h"
#include "runtime/runtime_impl.h"

namespace dtr {

using detail::Closure;
using detail::Storage;
using detail::TensorHandle;

void Runtime::Impl::assign(Tensor& target, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  TensorHandle& h = handle_of(target, "assign: the target");
  DTR_CHECK(!target.is_view(), InvalidArgument, "assign: the target is a view; update the tensor it views instead");
  // The op's first run may write over the target's buffer (run() checks the inputs it was given); reset on the
  // way out, also by an exception.
  struct InPlaceScope {
    Impl& runtime;
    ~InPlaceScope() { runtime.in_place_target = nullptr; }
  } scope{*this};
  if (can_update_in_place(*h.storage, op)) in_place_target = h.storage.get();
  Results outputs = call(op, inputs, attrs);
  DTR_CHECK(outputs.size() == 1 && outputs[0].meta() == h.meta, ShapeError, "assign: op '", op.name, "' gives ",
            outputs.size() == 1 ? to_string(outputs[0].shape()) : std::to_string(outputs.size()) + " outputs",
            ", the target has shape ", to_string(h.meta.shape));
  DTR_CHECK(!outputs[0].is_view(), InvalidArgument, "assign: op '", op.name,
            "' makes a view of an input, not a new value");
  rebind(h, outputs[0].handle_->storage, outputs[0].handle_->id, op.name);
}

void Runtime::Impl::assign(Tensor& target, const Tensor& value) {
  TensorHandle& h = handle_of(target, "assign: the target");
  DTR_CHECK(!target.is_view(), InvalidArgument, "assign: the target is a view; update the tensor it views instead");
  const TensorHandle& v = handle_of(value, "assign: the value");
  DTR_CHECK(!value.is_view(), InvalidArgument, "assign: the value is a view; assign the tensor it views instead");
  DTR_CHECK(v.meta == h.meta, ShapeError, "assign: the value has shape ", to_string(v.meta.shape), " and dtype ",
            to_string(v.meta.dtype), ", the target ", to_string(h.meta.shape), " and ", to_string(h.meta.dtype));
  if (v.storage == h.storage) return;
  // An evicted value comes back first: a constant has no producer to remake it from.
  const CurrentOp running(*this, "assign");
  Pins pins(*this);
  materialize(*v.storage);
  pins.add(*v.storage);
  rebind(h, v.storage, v.id, "assign");
}

// `h` (every copy of it) takes the value `fresh`: the rules of copy-on-write and pin-dependents (docs/runtime.md).
// `fresh_id` names the value in a trace.
void Runtime::Impl::rebind(TensorHandle& h, std::shared_ptr<Storage> fresh, std::uint64_t fresh_id,
                           std::string_view op) {
  std::shared_ptr<Storage> old = h.storage;
  const bool reads_old =
      fresh->producer != nullptr &&
      std::any_of(fresh->producer->inputs.begin(), fresh->producer->inputs.end(),
                  [&](const std::shared_ptr<Storage>& in) { return in == old; });
  // Views of the old value must keep seeing it, so with other handles on the storage only copy-on-write fits.
  if (config.inplace == InplaceMode::pin_dependents && old->handles == 1) {
    const CurrentOp running(*this, op);
    pin_dependents(*old, *fresh);
    // The new value cannot be recomputed from an old value that is about to go.
    if (reads_old) (void)make_constant(*fresh);
  }
  // A new parameter value is not worth a lineage back to every old one: it becomes a constant.
  if (old->constant() && !fresh->constant()) (void)make_constant(*fresh);
  if (forecaster) detail::Forecaster::replaces(*fresh, *old);
  if (trace) trace->copy_from(h.id, fresh_id);
  h.storage = fresh;
  fresh->handles += 1;
  h.meta = fresh->meta;
  release_handle(*old, 0, old.use_count() == 1);
}

bool Runtime::Impl::can_update_in_place(const Storage& old, const OpDef& op) const {
  // An observer may read a kernel's inputs after it ran: it must find them as the kernel read them.
  return op.overwrites_first_input && !config.kernel_observer && old.constant() && old.in_memory &&
         old.handles == 1 && old.dependents.empty() && old.pins == 0;
}

bool Runtime::Impl::writes_over_target(const Closure& c, bool rematerializing) const {
  if (rematerializing || in_place_target == nullptr || c.inputs.empty() || c.outputs.size() != 1 ||
      c.outputs[0] == nullptr || c.inputs[0].get() != in_place_target) {
    return false;
  }
  const TensorMeta& meta = in_place_target->meta;
  const auto whole = [&](std::size_t i) {
    return c.input_offset[i] == 0 && c.input_view[i] == 0 && c.input_meta[i] == meta;
  };
  if (!whole(0) || c.output_meta[0] != meta) return false;
  // Another input reading the target must read the same elements, each before its index is written.
  for (std::size_t i = 1; i < c.inputs.size(); ++i) {
    if (c.inputs[i].get() == in_place_target && !whole(i)) return false;
  }
  return true;
}

void Runtime::Impl::hand_over_buffer(Storage& old, Storage& fresh) {
  std::byte* const data = old.data;
  detach_buffer(old);  // dies with the rebind that follows, with no buffer to free
  attach_buffer(fresh, data);
  stats.in_place_updates += 1;
}

// Materializes every storage whose recomputation reads `old` (the outputs of its dependent closures, but
// `fresh`) and cuts their lineage: they become constants, so `old` is needed by nothing and can be freed.
// All are materialized before any is cut, so an OutOfMemory leaves the lineage as it was.
void Runtime::Impl::pin_dependents(Storage& old, Storage& fresh) {
  // Cut producers are released after the pins: releasing one may release storages still in `needed`.
  std::vector<std::shared_ptr<Closure>> cut;
  Pins pins(*this);
  pins.add(fresh);
  std::vector<Storage*> needed;
  for (const Storage::Dependent& d : old.dependents) {
    for (Storage* out : d.closure->outputs) {
      if (out != nullptr && out != &fresh) needed.push_back(out);
    }
  }
  for (Storage* s : needed) {
    materialize(*s);
    pins.add(*s);
  }
  for (Storage* s : needed) {
    if (!s->constant()) cut.push_back(make_constant(*s));
  }
}

// Drops `s`'s producer, which it returns (releasing it may free the closure's inputs): `s` is never evicted
// again and is freed when nothing references it.
void Runtime::Impl::make_constant(const Tensor& value) {
  const TensorHandle& v = handle_of(value, "make_constant: the value");
  if (v.storage->constant()) return;
  const CurrentOp running(*this, "make_constant");
  Pins pins(*this);
  materialize_view(*v.storage, v.view);  // a view's storage is what becomes the constant
  pins.add(*v.storage);
  (void)make_constant(*v.storage);
  if (trace) trace->make_constant(v.id);
}

std::shared_ptr<Closure> Runtime::Impl::make_constant(Storage& s) {
  heuristic_upkeep([&] { heuristic->on_cut(s); });
  remove_resident(s);
  s.producer->outputs[s.output_index] = nullptr;
  std::shared_ptr<Closure> producer = std::move(s.producer);
  add_resident(s);
  sync_candidate(s);
  return producer;
}

}  // namespace dtr

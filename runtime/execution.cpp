// Running ops: call() records an op as a closure and runs it the first time; run() is one kernel run of a
// closure, first or recomputation, with its outputs' buffers, scratch memory, measured or modelled cost.
#include <algorithm>
#include <functional>

#include "dtr/check.h"
#include "runtime/op_computation.h"
#include "runtime/runtime_impl.h"
#include "runtime/steady_ns.h"

namespace dtr {

using detail::Closure;
using detail::Storage;
using detail::TensorHandle;

namespace {

const Attrs kNoAttrs;  // a computation carries its own arguments: KernelArgs::attrs is empty

// splitmix64: the seeds of random ops, from a counter, so that a program's random streams are reproducible.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Where the kernel reads each input of `c` (resident): its storage's buffer at the input's offset.
SmallVector<const void*, 4> input_buffers(const Closure& c) {
  SmallVector<const void*, 4> buffers;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    buffers.push_back(c.inputs[i]->data + c.input_offset[i] * element_size(c.input_meta[i].dtype));
  }
  return buffers;
}

}  // namespace

TensorMetas Computation::run_first(const KernelArgs& /*args*/) {
  DTR_THROW(InvalidArgument, "op '", name(), "' cannot size its outputs by running: call it with their shapes");
}

Runtime::Impl::Results Runtime::Impl::call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  DTR_CHECK(op.infer && op.cpu_kernel, InvalidArgument, "op '", op.name, "' has no shape rule or CPU kernel");
  backend->check_supported(op);
  SmallVector<TensorMeta, 4> in_meta;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    in_meta.push_back(input_handle(inputs[i], op.name, i).meta);
  }
  TensorMetas out_meta = op.infer(in_meta, attrs);  // ShapeError before anything is allocated
  for (const TensorMeta& m : out_meta) {
    try {
      (void)m.nbytes();
    } catch (const ShapeError& e) {
      DTR_THROW(ShapeError, "op '", op.name, "': output ", e.what());
    }
  }
  const OutputViews views = output_views(op, inputs, in_meta, attrs, out_meta);
  const std::uint64_t seed = op.random ? mix(++random_calls) : 0;
  auto closure = make<detail::ClosureWith<detail::OpComputation>>(op, attrs, seed, *backend);
  const detail::OpComputation& source = closure->body;
  return record(std::move(closure), inputs, out_meta, views, source.checks_values() ? &source : nullptr);
}

Runtime::Impl::Results Runtime::Impl::call(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs,
                                           std::span<const TensorMeta> outputs) {
  DTR_CHECK(computation != nullptr, InvalidArgument, "call: the computation is null");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    input_handle(inputs[i], computation->name(), i);
  }
  TensorMetas out_meta;
  for (const TensorMeta& m : outputs) {
    try {
      (void)m.nbytes();
    } catch (const ShapeError& e) {
      DTR_THROW(ShapeError, "op '", computation->name(), "': output ", e.what());
    }
    out_meta.push_back(m);
  }
  return record(make<detail::SharedClosure>(std::move(computation)), inputs, out_meta, {});
}

Runtime::Impl::Results Runtime::Impl::call_unsized(std::shared_ptr<Computation> computation,
                                                   std::span<const Tensor> inputs) {
  DTR_CHECK(computation != nullptr, InvalidArgument, "call: the computation is null");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    input_handle(inputs[i], computation->name(), i);
  }
  return record(make<detail::SharedClosure>(std::move(computation)), inputs, {}, {}, nullptr, /*sized=*/false);
}

Runtime::Impl::Results Runtime::Impl::record(std::shared_ptr<Closure> closure, std::span<const Tensor> inputs,
                                             TensorMetas out_meta, const OutputViews& views,
                                             const detail::OpComputation* check, bool sized) {
  Computation& computation = *closure->computation;
  DTR_CHECK(kernel_memory || !computation.touches_memory(), InvalidArgument, "op '", computation.name(),
            "' runs a kernel, but this runtime's memory (", memory_name(),
            ") is simulated: only replayed ops can run");
  stats.ops += 1;
  const CurrentOp running(*this, computation.name());
  for (const Tensor& t : inputs) {
    closure->inputs.push_back(t.handle_->storage);
    closure->input_meta.push_back(t.handle_->meta);
    closure->input_offset.push_back(t.handle_->offset);
    closure->input_view.push_back(t.handle_->view);
  }
  if (forecaster) forecaster->program_op(closure->inputs);
  Pins input_pins(*this);
  acquire_inputs(*closure, input_pins);
  if (check != nullptr && kernel_memory) check_values(*closure, *check);
  std::uint64_t first_run_ns = 0;
  if (!sized) {
    const SmallVector<const void*, 4> in_buffers = input_buffers(*closure);
    const std::uint64_t started = detail::steady_ns();
    out_meta = computation.run_first(KernelArgs{closure->input_meta, in_buffers, {}, {}, kNoAttrs, 0});
    first_run_ns = detail::steady_ns() - started;
    for (const TensorMeta& m : out_meta) {
      try {
        (void)m.nbytes();
      } catch (const ShapeError& e) {
        DTR_THROW(ShapeError, "op '", computation.name(), "': output ", e.what());
      }
    }
  }
  SmallVector<std::shared_ptr<Storage>, 2> outputs;  // per output; nullptr for a view
  for (std::size_t i = 0; i < out_meta.size(); ++i) {
    if (!views.empty() && views[i]) {
      outputs.emplace_back();
      continue;
    }
    auto s = make<Storage>(*this, next_id++, out_meta[i]);
    live_storages += 1;
    s->producer = closure;
    s->output_index = closure->outputs.size();
    closure->outputs.push_back(s.get());
    closure->output_meta.push_back(out_meta[i]);
    if (forecaster) {
      forecaster->made(*s, std::hash<std::string_view>{}(computation.name()));
      if (s->forecast != nullptr) stats.forecast_hits += 1;
    }
    outputs.push_back(std::move(s));
  }
  run(*closure, /*rematerializing=*/false, nullptr, first_run_ns);
  closure->register_dependent();
  Results result;
  for (std::size_t i = 0; i < out_meta.size(); ++i) {
    if (outputs[i]) {
      result.push_back(Tensor(make<TensorHandle>(std::move(outputs[i]))));
    } else {
      result.push_back(make_op_view(inputs, *views[i], out_meta[i], closure->cost));
    }
  }
  if (!views.empty()) charge_views(*closure, inputs, views);
  if (trace) {
    std::vector<std::uint64_t> args, results, result_bytes;
    std::vector<std::int64_t> aliases;
    for (const Tensor& t : inputs) args.push_back(t.handle_->id);
    for (std::size_t i = 0; i < result.size(); ++i) {
      results.push_back(result[i].handle_->id);
      result_bytes.push_back(result[i].handle_->meta.nbytes());
      aliases.push_back(!views.empty() && views[i] ? static_cast<std::int64_t>(views[i]->input) : -1);
    }
    trace->call(computation.name(), args, results, result_bytes, aliases, closure->cost);
  }
  return result;
}

double Runtime::Impl::cost_of(const Closure& c, std::optional<double> known, std::uint64_t elapsed_ns) const {
  if (known) return std::max(0.0, *known);
  switch (config.cost_model) {
    case CostModel::measured: return static_cast<double>(std::max<std::uint64_t>(elapsed_ns, 1));
    case CostModel::flops: return std::max(1.0, c.computation->flops(c.input_meta));
    case CostModel::bytes: {
      double bytes = 0;
      for (const auto& m : c.input_meta) bytes += static_cast<double>(m.nbytes());
      for (const auto& m : c.output_meta) bytes += static_cast<double>(m.nbytes());
      return std::max(1.0, bytes);
    }
  }
  return 1.0;
}

Storage& Runtime::Impl::new_scratch(const TensorMeta& meta, std::vector<std::unique_ptr<Storage>>& scratch) {
  scratch.push_back(std::make_unique<Storage>(*this, 0, meta));
  live_storages += 1;  // balanced by ~Storage
  allocate(*scratch.back());
  return *scratch.back();
}

namespace {

// The storages whose buffer pointers a kernel run holds (Storage::captured), released when the run ends.
class Captures {
 public:
  Captures() = default;
  Captures(const Captures&) = delete;
  Captures& operator=(const Captures&) = delete;
  ~Captures() {
    for (Storage* s : held_) s->captured -= 1;
  }
  void add(Storage& s) {
    held_.push_back(&s);
    s.captured += 1;
  }

 private:
  SmallVector<Storage*, 8> held_;
};

// KernelArgs::workspace for one kernel run: pinned scratch storages, under the budget like any other.
class ScratchWorkspace final : public Workspace {
 public:
  ScratchWorkspace(Runtime::Impl& runtime, Runtime::Impl::Pins& pins, Captures& captures,
                   std::vector<std::unique_ptr<Storage>>& scratch)
      : runtime_(runtime), pins_(pins), captures_(captures), scratch_(scratch) {}
  void* get(std::size_t bytes) override {
    Storage& s = runtime_.new_scratch(TensorMeta{Shape{static_cast<std::int64_t>(bytes)}, DType::uint8}, scratch_);
    pins_.add(s);
    captures_.add(s);
    return s.data;
  }

 private:
  Runtime::Impl& runtime_;
  Runtime::Impl::Pins& pins_;
  Captures& captures_;
  std::vector<std::unique_ptr<Storage>>& scratch_;
};

}  // namespace

namespace {

// Evicted outputs given buffers for a recomputation. The heuristics see them evicted until the kernel has run
// (Storage::restoring), and are then told they are back, before anything else can fail (a kernel observer
// that throws). A recomputation that fails first (out of memory for a sibling or scratch, a kernel's error)
// releases their buffers, which hold no value: to the heuristics nothing happened.
class UndoRestores {
 public:
  explicit UndoRestores(Runtime::Impl& runtime) : runtime_(runtime) {}
  ~UndoRestores() {
    if (done_) return;
    for (Storage* s : restored_) {
      s->restoring = false;
      if (s->in_memory) runtime_.release_buffer(*s);
    }
  }
  UndoRestores(const UndoRestores&) = delete;
  UndoRestores& operator=(const UndoRestores&) = delete;
  void restore(Storage& s) {
    restored_.push_back(&s);  // first: if this throws, the storage is not left restoring
    s.restoring = true;
  }
  void done() {
    done_ = true;
    for (Storage* s : restored_) s->restoring = false;
    if (restored_.empty()) return;
    for (Storage* s : restored_) runtime_.drop_unreported(*s);  // back before the heuristic heard they went
    runtime_.heuristic_upkeep([&] {
      for (Storage* s : restored_) runtime_.heuristic->on_rematerialize(*s);
    });
  }

 private:
  Runtime::Impl& runtime_;
  SmallVector<Storage*, 2> restored_;
  bool done_ = false;
};

}  // namespace

void Runtime::Impl::run(Closure& c, bool rematerializing, const Storage* requested, std::uint64_t first_run_ns) {
  // Declared before the pins, so destroyed after them: the pins release scratch storages too, and a failed
  // recomputation's outputs are released once unpinned.
  UndoRestores undo(*this);
  std::vector<std::unique_ptr<Storage>> scratch;  // stand-ins for outputs nobody holds any more
  Pins pins(*this);
  // Each buffer pointer taken below stays valid until the kernel is done: its storage must not move (an
  // allocation for a later output, or for the kernel's scratch, may compact). Destroyed before `scratch`.
  Captures captures;
  // An assign's update in place: the output shares its target's buffer until the kernel has run, and gives it
  // back if anything fails first.
  Storage* const target = writes_over_target(c, rematerializing) ? c.inputs[0].get() : nullptr;
  struct SharedBuffer {
    Storage* out = nullptr;
    ~SharedBuffer() {
      if (out == nullptr) return;
      out->data = nullptr;
      out->in_memory = false;
    }
  } shared;
  SmallVector<void*, 2> out_buffers(c.outputs.size(), nullptr);
  for (std::size_t i = 0; i < c.outputs.size(); ++i) {
    Storage* out = c.outputs[i];
    const bool restoring = rematerializing && out != nullptr && !out->in_memory;
    if (out == nullptr) {
      out = &new_scratch(c.output_meta[i], scratch);
    } else if (target != nullptr) {
      out->data = target->data;
      out->in_memory = true;
      shared.out = out;
      captures.add(*target);
    } else if (!out->in_memory) {
      allocate(*out);
    }
    pins.add(*out);
    if (restoring) undo.restore(*out);
    out_buffers[i] = out->data;
    captures.add(*out);
  }
  const SmallVector<const void*, 4> in_buffers = input_buffers(c);
  for (const auto& in : c.inputs) captures.add(*in);
  pins.release_last(requested != nullptr ? requested : c.outputs.empty() ? nullptr : c.outputs.front());
  ScratchWorkspace workspace(*this, pins, captures, scratch);
  const KernelArgs args{c.input_meta, in_buffers, c.output_meta, out_buffers, kNoAttrs, 0, &workspace};
  op_clock += 1;  // the ops clock counts every kernel run, recomputations included, as time would
  const std::optional<double> known = c.computation->known_cost(c.input_meta);
  // Measured costs: most runs of a kernel signature cost what its timed runs learnt, untimed
  // (runtime/kernel_times.h); a timed run on a GPU, which runs kernels asynchronously, waits for the work
  // before the kernel and for the kernel.
  const bool measured = config.cost_model == CostModel::measured && !known;
  const bool learning = measured && config.timed_runs;  // else every run is timed
  std::uint64_t signature = 0;
  std::optional<std::uint64_t> learnt_ns;
  if (learning) {
    signature = detail::kernel_signature(*c.computation, c.input_meta, c.output_meta);
    learnt_ns = kernel_times.untimed_cost(signature);
  }
  const bool timed = measured && !learnt_ns;
  if (timed) backend->synchronize();
  const std::uint64_t started = timed ? detail::steady_ns() : 0;
  c.computation->run(args);
  std::uint64_t elapsed_ns = learnt_ns.value_or(0);
  if (timed) {
    backend->synchronize();
    elapsed_ns = detail::steady_ns() - started + first_run_ns;
    if (learning) kernel_times.record(signature, elapsed_ns);
  }
  if (target != nullptr) {
    hand_over_buffer(*target, *shared.out);
    shared.out = nullptr;
  }
  const double cost = cost_of(c, known, elapsed_ns);
  compute_clock += cost;
  if (rematerializing) {
    stats.remat_compute += cost;
    stats.rematerializations += 1;
    count_recomputation(c.computation->name(), cost);
  } else {
    c.cost = cost;
    stats.base_compute += cost;
    if (program_reruns > 0) stats.rerun_compute += cost;
  }
  for (Storage* out : c.outputs) {
    if (out == nullptr) continue;
    out->producer_cost = c.cost + out->view_cost;
    // A first run's outputs are used now. A recomputed one keeps the access its consumer stamped when it
    // asked for it (before the recomputation began), as the DTR authors' runtime does.
    if (!rematerializing) touch(*out);
  }
  undo.done();
  if (config.kernel_observer) observe(c, args, rematerializing, cost);
  if (rematerializing) check_thrashing(c.computation->name());
}

// Config::kernel_observer, told of one kernel run: an op of the table shows its op, attributes and seed.
void Runtime::Impl::observe(const Closure& c, const KernelArgs& args, bool rematerializing, double cost) const {
  const auto* op = dynamic_cast<const detail::OpComputation*>(c.computation);
  const KernelArgs seen = op != nullptr ? op->with_attrs(args) : args;
  SmallVector<std::uint64_t, 4> inputs;
  for (const auto& s : c.inputs) inputs.push_back(s->id);
  SmallVector<std::uint64_t, 2> outputs;
  for (const Storage* s : c.outputs) outputs.push_back(s != nullptr ? s->id : 0);
  config.kernel_observer(KernelRun{c.computation->name(), op != nullptr ? &op->op() : nullptr, seen, inputs,
                                   c.input_offset, outputs, rematerializing, cost});
}

// Values the host cannot read are copied to it: the int64 inputs only, which are all a check reads (the others
// are passed as null).
void Runtime::Impl::check_values(const Closure& c, const detail::OpComputation& op) {
  SmallVector<const void*, 4> in_buffers = input_buffers(c);
  std::vector<std::vector<std::int64_t>> copies;
  if (!backend->host_readable()) {
    for (std::size_t i = 0; i < in_buffers.size(); ++i) {
      if (c.input_meta[i].dtype != DType::int64) {
        in_buffers[i] = nullptr;
        continue;
      }
      copies.emplace_back(static_cast<std::size_t>(c.input_meta[i].numel()));
      backend->copy_to_host(copies.back().data(), in_buffers[i], c.input_meta[i].nbytes());
      in_buffers[i] = copies.back().data();
    }
  }
  op.check_values(KernelArgs{c.input_meta, in_buffers, {}, {}, kNoAttrs, 0});
}

OutputViews Runtime::Impl::output_views(const OpDef& op, std::span<const Tensor> inputs,
                                        std::span<const TensorMeta> in_meta, const Attrs& attrs,
                                        const TensorMetas& out_meta) {
  if (!op.views) return {};  // empty: no output is a view (the common case, kept cheap)
  OutputViews views = op.views(in_meta, attrs);
  DTR_CHECK(views.size() == out_meta.size(), InvalidArgument, "op '", op.name, "' describes ", views.size(),
            " output views for ", out_meta.size(), " outputs");
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (!views[i]) continue;
    const ViewOf& v = *views[i];
    DTR_CHECK(v.input < inputs.size(), InvalidArgument, "op '", op.name, "': output ", i, " views input ", v.input,
              " of ", inputs.size());
    const TensorMeta& base = in_meta[v.input];
    DTR_CHECK(out_meta[i].dtype == base.dtype && v.offset >= 0 && v.offset + out_meta[i].numel() <= base.numel(),
              ShapeError, "op '", op.name, "': output ", i, " (", to_string(out_meta[i].dtype), " ",
              to_string(out_meta[i].shape), " at element offset ", v.offset, ") does not fit in input ", v.input,
              " (", to_string(base.dtype), " ", to_string(base.shape), ")");
  }
  return views;
}

Tensor Runtime::Impl::make_op_view(std::span<const Tensor> inputs, const ViewOf& v, TensorMeta meta, double cost) {
  const TensorHandle& base = *inputs[v.input].handle_;
  Storage& s = *base.storage;
  s.views.push_back(Storage::View{base.view, cost, s.residency});
  return Tensor(make<TensorHandle>(base.storage, next_id++, std::move(meta),
                                   base.offset + static_cast<std::size_t>(v.offset),
                                   static_cast<std::uint32_t>(s.views.size())));
}

// The viewed storages were used when the op ended. They are its inputs, still pinned: out of the index while
// their cost changes.
void Runtime::Impl::charge_views(const Closure& c, std::span<const Tensor> inputs, const OutputViews& views) {
  SmallVector<Storage*, 2> viewed;
  for (const auto& v : views) {
    if (!v) continue;
    Storage* s = inputs[v->input].handle_->storage.get();
    if (std::find(viewed.begin(), viewed.end(), s) == viewed.end()) viewed.push_back(s);
  }
  for (Storage* s : viewed) {
    s->view_cost += c.cost;
    if (!s->constant()) s->producer_cost += c.cost;
    touch(*s);
  }
}

}  // namespace dtr

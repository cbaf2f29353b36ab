// The runtime: ops as closures, eviction under the budget, rematerialization on access (design section 4).
// This file builds a runtime and holds the public API; runtime/runtime_impl.h says where each step lives.
#include "dtr/runtime.h"

#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/output_file.h"
#include "dtr/check.h"
#include "runtime/runtime_impl.h"
#include "runtime/steady_ns.h"

namespace dtr {

using detail::Storage;
using detail::TensorHandle;

Runtime::Impl::Impl(Config cfg, std::unique_ptr<MemoryResource> memory) : config(std::move(cfg)) {
  heuristic = heuristics::make_heuristic(config.heuristic, "Config::heuristic");
  windows = heuristic->fragmentation_aware();
  walking_scores = heuristic->scores_walk_lineage();
  if (config.memory_budget) start_heuristic();
  // One rule in both budget modes (the caching allocator refused 0 in device mode; bytes mode took it).
  DTR_CHECK(config.memory_budget != std::uint64_t{0}, ConfigError,
            "Config::memory_budget: a budget of 0 bytes holds nothing; leave it unset (nullopt) for no budget");
  DTR_CHECK(std::isfinite(config.size_floor) && config.size_floor >= 0, ConfigError, "Config::size_floor ",
            config.size_floor, " must be a non-negative fraction of the mean candidate size (0: no floor)");
  DTR_CHECK(!config.thrash_limit || (std::isfinite(*config.thrash_limit) && *config.thrash_limit >= 1), ConfigError,
            "Config::thrash_limit ", config.thrash_limit.value_or(0), " must be a finite overhead factor >= 1, or "
            "nullopt for none");
  DTR_CHECK(!config.timed_runs || *config.timed_runs >= 1, ConfigError, "Config::timed_runs 0 times no run; set "
            "at least 1, or nullopt to time every run");
  DTR_CHECK(!config.thrash_base_compute ||
                (std::isfinite(*config.thrash_base_compute) && *config.thrash_base_compute >= 0),
            ConfigError, "Config::thrash_base_compute ", config.thrash_base_compute.value_or(0),
            " must be a finite, non-negative cost");
  if (config.memory_budget) build_index();  // without a budget nothing is ever evicted: no index to keep
  CachingAllocatorOptions options = config.allocator;
  options.budget_bytes = config.budget_mode == BudgetMode::device ? config.memory_budget : std::nullopt;
  // Kernels run where the memory is; over simulated memory only replayed ops run, and they touch nothing.
  const std::optional<Device> memory_device = memory->device();
  kernel_memory = memory_device.has_value();
  if (memory_device) {
    DTR_CHECK(*memory_device == config.device, InvalidArgument, "Runtime: Config::device is ",
              config.device.to_string(), " but the memory resource (", memory->name(), ") is on ",
              memory_device->to_string());
  }
  backend = kernel_memory ? detail::make_backend(config.device) : detail::make_cpu_backend();
  if (config.buffers == BufferSource::caching_allocator) {
    allocator = std::make_unique<CachingAllocator>(std::move(memory), options);
    allocator->set_reclaimer(this);
    this->memory = allocator.get();
  } else {
    DTR_CHECK(config.budget_mode == BudgetMode::bytes || !config.memory_budget, ConfigError,
              "Config::buffers = memory_resource takes its buffers from ", memory->name(),
              " directly, whose reserved bytes the runtime cannot see: set Config::budget_mode to bytes");
    direct_memory = std::move(memory);
    this->memory = direct_memory.get();
  }
  if (!config.trace_path.empty()) trace = std::make_unique<detail::TraceWriter>(config.trace_path);
  start_ns = detail::steady_ns();
}

Runtime::Impl::~Impl() {
  if (allocator) allocator->set_reclaimer(nullptr);
}

void Runtime::Impl::close() {
  if (trace) {
    trace->close();  // a failure is logged, naming the file and the reason
    trace.reset();
  }
  if (!config.stats_path.empty()) {
    try {
      detail::OutputFile out("DTR_STATS", config.stats_path);
      out.write(to_json(current_stats()) + "\n");
      out.close();
    } catch (const IoError& e) {
      detail::logger().error("{}", e.what());
    }
  }
}

namespace {

// Runtimes destroyed while tensors still referenced their storages, a broken contract (warned about) that must
// not crash: kept, so that those tensors die later without touching freed memory. The list is never destroyed,
// as such tensors often die during static destruction.
void keep_orphan(std::unique_ptr<Runtime::Impl> impl) {
  static auto* const mutex = new std::mutex;                                       // NOLINT: immortal on purpose
  static auto* const orphans = new std::vector<std::unique_ptr<Runtime::Impl>>;  // NOLINT: immortal on purpose
  const std::lock_guard lock(*mutex);
  orphans->push_back(std::move(impl));
}

}  // namespace

void Runtime::Impl::orphan() {
  detail::logger().warn("runtime destroyed while {} storage(s) are still referenced by tensors; they must not "
                        "outlive it (its memory not held by them is released now, the rest when they die)",
                        live_storages);
  orphaned = true;
  for (std::size_t i = recomputable.size(); i-- > 0;) {
    if (i < recomputable.size() && candidate(*recomputable[i])) evict(*recomputable[i]);
  }
  if (allocator) allocator->empty_cache();
}

TensorHandle& Runtime::Impl::input_handle(const Tensor& tensor, std::string_view op, std::size_t index) const {
  if (tensor.defined() && &tensor.handle_->storage->runtime == this) return *tensor.handle_;
  return handle_of(tensor, detail::concat("op '", op, "': input ", index));  // throws
}

TensorHandle& Runtime::Impl::handle_of(const Tensor& tensor, std::string_view context) const {
  DTR_CHECK(tensor.defined(), InvalidArgument, context, " is undefined");
  DTR_CHECK(&tensor.handle_->storage->runtime == this, InvalidArgument, context, " belongs to another runtime");
  return *tensor.handle_;
}

heuristics::IndexClocks Runtime::Impl::index_clocks(std::uint64_t time) const {
  return {time, op_clock, forecaster ? forecaster->clock() : 0};
}

std::uint64_t Runtime::Impl::now() const {
  switch (config.clock) {
    case ClockKind::ops: return op_clock;
    case ClockKind::time: return detail::steady_ns() - start_ns;
    case ClockKind::compute: return static_cast<std::uint64_t>(compute_clock);
  }
  return op_clock;
}

void Runtime::Impl::touch(Storage& s) {
  s.last_used = now();
  s.last_touch_ops = op_clock;
  if (index) index->used(s, index_clocks(s.last_used));
}

std::string Runtime::Impl::memory_name() const {
  return allocator ? allocator->upstream().name() : direct_memory->name();
}

RuntimeStats Runtime::Impl::current_stats() const {
  RuntimeStats copy = stats;
  // Held from a memory resource directly, the buffers are what the runtime reserves.
  copy.peak_reserved_bytes = allocator ? allocator->stats().reserved_bytes.peak : stats.peak_resident_bytes;
  copy.budget_bytes = config.memory_budget.value_or(0);
  return copy;
}

template <typename T>
Tensor Runtime::Impl::constant(TensorMeta meta, std::span<const T> values) {
  DTR_CHECK(static_cast<std::int64_t>(values.size()) == meta.numel(), InvalidArgument, "constant of shape ",
            to_string(meta.shape), " needs ", meta.numel(), " values, got ", values.size());
  DTR_CHECK(meta.dtype == DTypeOf<T>::value, InvalidArgument, "constant: the values are ",
            to_string(DTypeOf<T>::value), ", the meta says ", to_string(meta.dtype));
  DTR_CHECK(kernel_memory, InvalidArgument, "constant: this runtime's memory (", memory_name(),
            ") is simulated and cannot hold values; use constant(meta)");
  Tensor t = constant(std::move(meta));
  backend->copy_from_host(t.handle_->storage->data, values.data(), values.size_bytes());
  return t;
}

Tensor Runtime::Impl::constant(TensorMeta meta) {
  try {
    (void)meta.nbytes();
  } catch (const ShapeError& e) {
    DTR_THROW(ShapeError, "constant: ", e.what());
  }
  const CurrentOp running(*this, "constant");  // an out-of-memory error names it
  auto s = make<Storage>(*this, next_id++, std::move(meta));
  live_storages += 1;
  allocate(*s);
  if (kernel_memory) backend->fill_zero(s->data, s->nbytes);
  touch(*s);
  if (forecaster) forecaster->made_constant(*s);
  if (trace) trace->constant(s->id, s->nbytes);
  return Tensor(make<TensorHandle>(std::move(s)));
}

Tensor Runtime::Impl::view(const Tensor& base, Shape shape, std::int64_t offset) {
  const TensorHandle& h = handle_of(base, "view: the tensor");
  TensorMeta meta{std::move(shape), h.meta.dtype};
  const std::int64_t numel = meta.numel();  // ShapeError on a negative dimension
  DTR_CHECK(offset >= 0 && offset + numel <= h.meta.numel(), ShapeError, "view ", to_string(meta.shape),
            " at element offset ", offset, " does not fit in a tensor of shape ", to_string(h.meta.shape));
  auto handle = make<TensorHandle>(h.storage, next_id++, meta, h.offset + static_cast<std::size_t>(offset), h.view);
  if (trace) trace->view(h.id, handle->id, meta.nbytes());
  touch(*h.storage);
  return Tensor(std::move(handle));
}

// ---- public API ----

Runtime::Runtime(Config config) {
  std::unique_ptr<MemoryResource> memory = make_device_resource(config.device);
  impl_ = std::make_unique<Impl>(std::move(config), std::move(memory));
}

Runtime::Runtime(Config config, std::unique_ptr<MemoryResource> memory) {
  DTR_CHECK(memory != nullptr, InvalidArgument, "Runtime: the memory resource is null");
  impl_ = std::make_unique<Impl>(std::move(config), std::move(memory));
}

Runtime::~Runtime() {
  if (impl_ == nullptr) return;
  impl_->close();
  if (impl_->live_storages > 0) {
    impl_->orphan();
    keep_orphan(std::move(impl_));
  }
}

Tensor Runtime::constant(TensorMeta meta, std::span<const float> values) {
  return impl_->constant(std::move(meta), values);
}
Tensor Runtime::constant(TensorMeta meta, std::span<const double> values) {
  return impl_->constant(std::move(meta), values);
}
Tensor Runtime::constant(TensorMeta meta, std::span<const std::int64_t> values) {
  return impl_->constant(std::move(meta), values);
}
Tensor Runtime::constant(TensorMeta meta, std::span<const std::uint8_t> values) {
  return impl_->constant(std::move(meta), values);
}
Tensor Runtime::constant(TensorMeta meta) { return impl_->constant(std::move(meta)); }

void Runtime::materialize(const Tensor& tensor) {
  const TensorHandle& h = impl_->handle_of(tensor, "materialize: the tensor");
  const Impl::CurrentOp running(*impl_, "materialize");
  if (impl_->forecaster) impl_->forecaster->program_read(*h.storage);
  impl_->materialize_view(*h.storage, h.view);
}

std::vector<Tensor> Runtime::call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  Impl::Results outputs = impl_->call(op, inputs, attrs);
  return std::vector<Tensor>(std::make_move_iterator(outputs.begin()), std::make_move_iterator(outputs.end()));
}

Tensor Runtime::call1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  Impl::Results outputs = impl_->call(op, inputs, attrs);
  DTR_CHECK(outputs.size() == 1, InvalidArgument, "op '", op.name, "' has ", outputs.size(), " outputs; use call()");
  return std::move(outputs.front());
}

std::vector<Tensor> Runtime::call(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs,
                                  std::span<const TensorMeta> outputs) {
  Impl::Results results = impl_->call(std::move(computation), inputs, outputs);
  return std::vector<Tensor>(std::make_move_iterator(results.begin()), std::make_move_iterator(results.end()));
}

std::vector<Tensor> Runtime::call(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs) {
  Impl::Results results = impl_->call_unsized(std::move(computation), inputs);
  return std::vector<Tensor>(std::make_move_iterator(results.begin()), std::make_move_iterator(results.end()));
}

Tensor Runtime::call1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  return call1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

void Runtime::assign(Tensor& target, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  impl_->assign(target, op, inputs, attrs);
}

void Runtime::assign(Tensor& target, const Tensor& value) { impl_->assign(target, value); }

void Runtime::assign(Tensor& target, const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  assign(target, op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

Tensor Runtime::view(const Tensor& base, Shape shape, std::int64_t offset) {
  return impl_->view(base, std::move(shape), offset);
}

bool Runtime::evict(const Tensor& tensor) {
  Storage& s = *impl_->handle_of(tensor, "evict: the tensor").storage;
  if (!Impl::candidate(s)) return false;
  impl_->evict(s);
  return true;
}

std::size_t Runtime::evict_all() {
  std::vector<Storage*> victims;
  for (Storage* s : impl_->recomputable) {
    if (Impl::candidate(*s)) victims.push_back(s);
  }
  for (Storage* s : victims) impl_->evict(*s);
  return victims.size();
}

void Runtime::set_memory_budget(std::optional<std::uint64_t> bytes) { impl_->set_budget(bytes); }

void Runtime::make_constant(const Tensor& value) { impl_->make_constant(value); }

void Runtime::reset_peak_stats() {
  impl_->stats.peak_resident_bytes = impl_->resident_bytes;
  if (impl_->allocator) impl_->allocator->reset_peak_stats();
}

void Runtime::begin_program_rerun() { impl_->program_reruns += 1; }

void Runtime::end_program_rerun() {
  DTR_CHECK(impl_->program_reruns > 0, InvalidArgument,
            "end_program_rerun: no program rerun was begun (begin_program_rerun and end_program_rerun pair up)");
  impl_->program_reruns -= 1;
}

RuntimeStats Runtime::stats() const { return impl_->current_stats(); }
std::vector<OpRecomputations> Runtime::recomputations_by_op() const { return impl_->recomputations_by_op(); }
std::uint64_t Runtime::random_state() const { return impl_->random_calls; }
void Runtime::set_random_state(std::uint64_t state) { impl_->random_calls = state; }
const Config& Runtime::config() const { return impl_->config; }
CachingAllocator& Runtime::allocator() {
  DTR_CHECK(impl_->allocator != nullptr, InvalidArgument, "allocator: this runtime takes its buffers from ",
            impl_->memory_name(), " directly (Config::buffers = memory_resource); it has no caching allocator");
  return *impl_->allocator;
}
std::uint64_t Runtime::resident_bytes() const { return impl_->resident_bytes; }
RuntimeFootprint Runtime::footprint() const {
  RuntimeFootprint f;
  f.storages = static_cast<std::uint64_t>(impl_->live_storages);
  f.lineage_objects = impl_->pool.outstanding();
  f.candidates = impl_->recomputable.size();
  f.heuristic_records =
      (impl_->heuristic != nullptr ? impl_->heuristic->live_slots() : 0) + impl_->unreported_evictions.size();
  f.forecast_records = impl_->forecaster != nullptr ? impl_->forecaster->records() : 0;
  f.indexed_candidates = impl_->index != nullptr ? impl_->index->size() : 0;
  f.segments = impl_->allocator != nullptr ? impl_->allocator->stats().segments.current : 0;
  return f;
}

}  // namespace dtr

// The runtime: ops as closures, eviction under the budget, rematerialization on access (design section 4).
#include "dtr/runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "common/log.h"
#include "dtr/check.h"
#include "heuristics/eviction_index.h"
#include "heuristics/heuristic.h"
#include "heuristics/window.h"
#include "runtime/backend.h"
#include "runtime/lineage.h"
#include "runtime/object_pool.h"
#include "runtime/trace_writer.h"

namespace dtr {

using detail::Closure;
using detail::Storage;
using detail::TensorHandle;

namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// splitmix64: the seeds of random ops, from a counter, so that a program's random streams are reproducible.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

struct Runtime::Impl final : Reclaimer {
  Impl(Config cfg, std::unique_ptr<MemoryResource> memory) : config(std::move(cfg)) {
    heuristic = heuristics::make_heuristic(config.heuristic, "Config::heuristic");
    windows = heuristic->fragmentation_aware();
    DTR_CHECK(std::isfinite(config.size_floor) && config.size_floor >= 0, ConfigError, "Config::size_floor ",
              config.size_floor, " must be a non-negative fraction of the mean candidate size (0: no floor)");
    // Without a budget nothing is ever evicted: no index to keep. A size floor filters candidates: it scans.
    if (config.memory_budget && config.search == EvictionSearch::index && heuristic->indexable() &&
        config.size_floor == 0) {
      index = std::make_unique<heuristics::EvictionIndex>(*heuristic);
    }
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
    allocator = std::make_unique<CachingAllocator>(std::move(memory), options);
    allocator->set_reclaimer(this);
    if (!config.trace_path.empty()) trace = std::make_unique<detail::TraceWriter>(config.trace_path);
    start_ns = now_ns();
  }

  ~Impl() override {
    allocator->set_reclaimer(nullptr);
    if (!config.stats_path.empty()) {
      std::ofstream out(config.stats_path);
      out << to_json(current_stats()) << '\n';
      if (!out) detail::logger().error("DTR_STATS: cannot write {}", config.stats_path);
    }
    if (live_storages > 0) {
      detail::logger().warn("runtime destroyed while {} storage(s) are still referenced by tensors", live_storages);
    }
  }

  // First, so destroyed last: every lineage object's block comes from it.
  detail::ObjectPool pool;
  Config config;
  std::unique_ptr<heuristics::Heuristic> heuristic;
  bool windows = false;  // heuristic->fragmentation_aware(), read once: allocate() asks on every allocation
  std::unique_ptr<heuristics::EvictionIndex> index;  // the candidates in score order; none: scan `resident`
  std::unique_ptr<CachingAllocator> allocator;
  std::unique_ptr<detail::TraceWriter> trace;  // DTR_TRACE, when set
  std::vector<Storage*> resident;  // resident storages that have a producer (evictable unless pinned)
  // evict_window's scratch, kept to reuse its capacity: the pool's blocks and their owners (nullptr: free).
  std::vector<heuristics::WindowBlock> window_blocks;
  std::vector<Storage*> window_owners;
  std::uint64_t resident_bytes = 0;
  std::uint64_t next_id = 1;
  std::uint64_t op_clock = 0;
  std::uint64_t candidate_arrivals = 0;  // Storage::candidate_since
  double compute_clock = 0;  // ClockKind::compute: the cost of every kernel run so far
  bool kernel_memory = true;  // whether kernels can touch the buffers (false over simulated memory)
  std::unique_ptr<detail::Backend> backend;  // where kernels run: the CPU, or the GPU that holds the memory
  std::uint64_t random_calls = 0;
  std::uint64_t start_ns = 0;
  std::int64_t live_storages = 0;
  RuntimeStats stats;
  const OpDef* current_op = nullptr;  // for error messages
  // Storages whose last owner was a dying closure. Released here, one at a time, instead of from inside the
  // closure's destructor, so that dropping the end of a 100 000-op chain does not recurse 100 000 deep.
  std::vector<std::shared_ptr<Storage>> graveyard;
  bool draining = false;

  void bury(std::shared_ptr<Storage> storage) {
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

  // A lineage object from the pool (one block for the object and its reference count).
  template <typename T, typename... Args>
  std::shared_ptr<T> make(Args&&... args) {
    return std::allocate_shared<T>(detail::PoolAllocator<T>(pool), std::forward<Args>(args)...);
  }

  std::uint64_t now() const {
    switch (config.clock) {
      case ClockKind::ops: return op_clock;
      case ClockKind::time: return now_ns() - start_ns;
      case ClockKind::compute: return static_cast<std::uint64_t>(compute_clock);
    }
    return op_clock;
  }

  void touch(Storage& s) {
    s.last_used = now();
    if (index) index->touched(s, s.last_used);
  }

  // A candidate for eviction: resident, unpinned, recomputable. The index holds exactly the candidates.
  static bool candidate(const Storage& s) { return s.in_memory && s.pins == 0 && !s.constant(); }
  void sync_candidate(Storage& s) {
    const bool is_candidate = candidate(s);
    if (is_candidate == (s.candidate_since != 0)) return;
    s.candidate_since = is_candidate ? ++candidate_arrivals : 0;
    if (!index) return;
    if (is_candidate) {
      index->add(s, now());
    } else {
      index->remove(s, now());
    }
  }

  void pin(Storage& s) {
    s.pins += 1;
    if (s.pins == 1) sync_candidate(s);
  }
  void unpin(Storage& s) {
    s.pins -= 1;
    if (s.pins == 0) sync_candidate(s);
  }

  // ---- memory ----

  void add_resident(Storage& s) {
    if (!s.constant()) {
      s.resident_slot = resident.size();
      resident.push_back(&s);
    }
    resident_bytes += s.nbytes;
    stats.peak_resident_bytes = std::max(stats.peak_resident_bytes, resident_bytes);
  }

  void remove_resident(Storage& s) {
    if (s.resident_slot != Storage::kNotResident) {
      Storage* last = resident.back();
      resident[s.resident_slot] = last;
      last->resident_slot = s.resident_slot;
      resident.pop_back();
      s.resident_slot = Storage::kNotResident;
    }
    resident_bytes -= s.nbytes;
  }

  // Gives `s` a buffer, evicting others if the budget needs room.
  void allocate(Storage& s) {
    if (config.budget_mode == BudgetMode::bytes && config.memory_budget) {
      while (resident_bytes + s.nbytes > *config.memory_budget) {
        if (evict_one() == 0) throw out_of_memory(s.nbytes, nullptr);
      }
    }
    try {
      s.data = static_cast<std::byte*>(allocator->allocate(std::max<std::size_t>(s.nbytes, 1)));
    } catch (const OutOfMemory& e) {
      throw out_of_memory(s.nbytes, &e);
    }
    // Windows map the allocator's blocks back to storages through the owner tag.
    if (windows) allocator->set_owner(s.data, reinterpret_cast<OwnerTag>(&s));
    s.in_memory = true;
    s.residency += 1;
    add_resident(s);
  }

  void release_buffer(Storage& s) {
    allocator->free(s.data);
    s.data = nullptr;
    s.in_memory = false;
    remove_resident(s);
    sync_candidate(s);
  }

  void evict(Storage& s) {
    release_buffer(s);
    heuristic->on_evict(s);
  }

  // Reclaimer: the allocator needs room.
  std::size_t reclaim(const ReclaimRequest& request) override {
    if (windows) {
      if (const std::size_t freed = evict_window(request)) return freed;
    }
    return evict_one();
  }

  // Evicts the cheapest contiguous window of free and evictable blocks in the request's pool that covers it
  // (heuristics/window.h); returns the bytes evicted, 0 when no window with something to evict covers it
  // (then the request needs a new segment, and the scores choose one storage at a time).
  std::size_t evict_window(const ReclaimRequest& request) {
    using heuristics::WindowBlock;
    const std::uint64_t search_start = now_ns();
    const std::uint64_t clock = now();
    window_blocks.clear();
    window_owners.clear();
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
      } else {
        w.kind = WindowBlock::Kind::fixed;
      }
      window_blocks.push_back(w);
      window_owners.push_back(owner);
    });
    const auto window = heuristics::cheapest_window(window_blocks, request.block_bytes);
    stats.search_ns += now_ns() - search_start;
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
  std::size_t size_floor_bytes() const {
    if (config.size_floor == 0) return 0;
    std::uint64_t bytes = 0;
    std::uint64_t count = 0;
    std::size_t largest = 0;
    for (const Storage* s : resident) {
      if (s->pins > 0) continue;
      bytes += s->nbytes;
      count += 1;
      largest = std::max(largest, s->nbytes);
    }
    if (count == 0) return 0;
    const auto floor = static_cast<std::size_t>(config.size_floor * static_cast<double>(bytes) / static_cast<double>(count));
    return floor <= largest ? floor : 0;  // every candidate below the floor: all of them count
  }

  // Evicts the resident, unpinned storage with the lowest score; returns its bytes (0: nothing could go).
  std::size_t evict_one() {
    const std::uint64_t search_start = now_ns();
    const std::uint64_t clock = now();
    Storage* victim = nullptr;
    if (index) {
      victim = static_cast<Storage*>(index->choose(clock));  // the index holds only this runtime's storages
    } else {
      const std::size_t floor = size_floor_bytes();
      double best = std::numeric_limits<double>::infinity();
      for (Storage* s : resident) {
        if (s->pins > 0 || s->nbytes < floor) continue;
        const double score = heuristic->score(*s, clock);
        if (victim == nullptr || score < best || (score == best && s->candidate_since > victim->candidate_since)) {
          victim = s;
          best = score;
        }
      }
    }
    stats.search_ns += now_ns() - search_start;
    if (victim == nullptr) return 0;
    const std::size_t bytes = std::max<std::size_t>(victim->nbytes, 1);
    evict(*victim);
    stats.evictions += 1;
    return bytes;
  }

  OutOfMemory out_of_memory(std::size_t bytes, const OutOfMemory* cause) {
    std::uint64_t pinned = 0;
    std::uint64_t constants = 0;
    std::uint64_t evictable = 0;
    for (Storage* s : resident) (s->pins > 0 ? pinned : evictable) += s->nbytes;
    constants = resident_bytes - pinned - evictable;
    OutOfMemoryInfo info = cause != nullptr ? cause->info() : OutOfMemoryInfo{};
    info.requested_bytes = bytes;
    info.budget_bytes = config.memory_budget.value_or(0);
    std::string message = detail::concat(
        "dtr: out of memory running op '", current_op != nullptr ? current_op->name : std::string("?"),
        "': it needs ", format_bytes(bytes), " more; budget ",
        config.memory_budget ? format_bytes(*config.memory_budget) : std::string("none"), " (", to_string(config.budget_mode),
        " mode); resident ", format_bytes(resident_bytes), ", of which pinned by running ops ", format_bytes(pinned),
        " and constants ", format_bytes(constants), " could not be evicted",
        evictable > 0 ? ", and the rest could not make room in one piece" : "",
        ". Try a larger DTR_MEMORY_BUDGET or smaller ops.");
    if (cause != nullptr) message += std::string(" Allocator: ") + cause->what();
    return OutOfMemory(std::move(message), info, __FILE__, __LINE__);
  }

  // ---- running closures ----

  // Holds pins for a scope so that an exception leaves no storage pinned.
  class Pins {
   public:
    explicit Pins(Impl& runtime) : runtime_(runtime) {}
    Pins(const Pins&) = delete;
    Pins& operator=(const Pins&) = delete;
    ~Pins() {
      for (Storage* s : pinned_) runtime_.unpin(*s);
    }
    void add(Storage& s) {
      runtime_.pin(s);
      pinned_.push_back(&s);
    }
    // Releases `s` last: the order in which storages become candidates again breaks ties between equal scores.
    void release_last(const Storage* s) {
      const auto it = std::find(pinned_.begin(), pinned_.end(), s);
      if (it != pinned_.end()) std::rotate(it, it + 1, pinned_.end());
    }

   private:
    Impl& runtime_;
    SmallVector<Storage*, 4> pinned_;
  };

  // Where the kernel reads each input of `c` (resident): its storage's buffer at the input's offset.
  static SmallVector<const void*, 4> input_buffers(const Closure& c) {
    SmallVector<const void*, 4> buffers;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      buffers.push_back(c.inputs[i]->data + c.input_offset[i] * element_size(c.input_meta[i].dtype));
    }
    return buffers;
  }

  double cost_of(const Closure& c, std::uint64_t elapsed_ns) const {
    if (c.op->known_cost) return std::max(0.0, c.op->known_cost(c.input_meta, c.attrs));
    switch (config.cost_model) {
      case CostModel::measured: return static_cast<double>(std::max<std::uint64_t>(elapsed_ns, 1));
      case CostModel::flops: {
        return std::max(1.0, c.op->flops ? c.op->flops(c.input_meta, c.attrs) : 1.0);
      }
      case CostModel::bytes: {
        double bytes = 0;
        for (const auto& m : c.input_meta) bytes += static_cast<double>(m.nbytes());
        for (const auto& m : c.output_meta) bytes += static_cast<double>(m.nbytes());
        return std::max(1.0, bytes);
      }
    }
    return 1.0;
  }

  // Runs `c` with its inputs resident and pinned: gives evicted (or first-time) outputs buffers, dead outputs
  // scratch memory, and records the cost.
  // `requested` is the output the caller needs (the first when it is a new call): the others become
  // candidates before it, as in the DTR authors' runtime.
  // A storage nobody holds, for the length of one kernel run: an output no tensor wants any more, or the
  // kernel's workspace. Kept in `scratch`, which frees it.
  Storage& new_scratch(const TensorMeta& meta, std::vector<std::unique_ptr<Storage>>& scratch) {
    scratch.push_back(std::make_unique<Storage>(*this, 0, meta));
    live_storages += 1;  // balanced by ~Storage
    allocate(*scratch.back());
    return *scratch.back();
  }

  // KernelArgs::workspace for one kernel run: pinned scratch storages, under the budget like any other.
  class ScratchWorkspace final : public Workspace {
   public:
    ScratchWorkspace(Impl& runtime, Pins& pins, std::vector<std::unique_ptr<Storage>>& scratch)
        : runtime_(runtime), pins_(pins), scratch_(scratch) {}
    void* get(std::size_t bytes) override {
      Storage& s = runtime_.new_scratch(TensorMeta{Shape{static_cast<std::int64_t>(bytes)}, DType::uint8}, scratch_);
      pins_.add(s);
      return s.data;
    }

   private:
    Impl& runtime_;
    Pins& pins_;
    std::vector<std::unique_ptr<Storage>>& scratch_;
  };

  void run(Closure& c, bool rematerializing, const Storage* requested = nullptr) {
    // Declared before the pins, so destroyed after them: the pins release scratch storages too.
    std::vector<std::unique_ptr<Storage>> scratch;  // stand-ins for outputs nobody holds any more
    Pins pins(*this);
    SmallVector<void*, 2> out_buffers(c.outputs.size(), nullptr);
    SmallVector<Storage*, 2> restored;
    for (std::size_t i = 0; i < c.outputs.size(); ++i) {
      Storage* out = c.outputs[i];
      if (out == nullptr) {
        out = &new_scratch(c.output_meta[i], scratch);
      } else if (!out->in_memory) {
        allocate(*out);
        if (rematerializing) restored.push_back(out);
      }
      pins.add(*out);
      out_buffers[i] = out->data;
    }
    const SmallVector<const void*, 4> in_buffers = input_buffers(c);
    pins.release_last(requested != nullptr ? requested : c.outputs.empty() ? nullptr : c.outputs.front());
    ScratchWorkspace workspace(*this, pins, scratch);
    const KernelArgs args{c.input_meta, in_buffers, c.output_meta, out_buffers, c.attrs, c.seed, &workspace};
    op_clock += 1;  // the ops clock counts every kernel run, recomputations included, as time would
    // A GPU runs kernels asynchronously: a measured time waits for the work before it and for the kernel.
    const bool measured = config.cost_model == CostModel::measured && !c.op->known_cost;
    if (measured) backend->synchronize();
    const std::uint64_t started = now_ns();
    backend->run(*c.op, args);
    if (measured) backend->synchronize();
    const double cost = cost_of(c, now_ns() - started);
    compute_clock += cost;
    if (rematerializing) {
      stats.remat_compute += cost;
      stats.rematerializations += 1;
    } else {
      c.cost = cost;
      stats.base_compute += cost;
    }
    for (Storage* out : c.outputs) {
      if (out == nullptr) continue;
      out->producer_cost = c.cost + out->view_cost;
      // A first run's outputs are used now. A recomputed one keeps the access its consumer stamped when it
      // asked for it (before the recomputation began), as the DTR authors' runtime does.
      if (!rematerializing) touch(*out);
    }
    for (Storage* out : restored) heuristic->on_rematerialize(*out);
  }

  // Whether `s` is resident with its op-made view `view` (0: the storage itself) made.
  static bool view_made(const Storage& s, std::uint32_t view) {
    return s.in_memory && (view == 0 || s.views[view - 1].made_in == s.residency);
  }

  // Makes the op-made view `view` of resident `s` again if an eviction undid it (and the views it was made
  // from, first): each costs its op's cost again, a recomputation that needs no memory. The caller stamped
  // `s` when it began to need the view (before recomputing `s`, if it was evicted).
  void make_view(Storage& s, std::uint32_t view) {
    SmallVector<std::uint32_t, 4> undone;  // innermost first
    for (std::uint32_t v = view; v != 0 && s.views[v - 1].made_in != s.residency; v = s.views[v - 1].base) {
      undone.push_back(v);
    }
    for (std::size_t i = undone.size(); i-- > 0;) {
      Storage::View& v = s.views[undone[i] - 1];
      pin(s);  // its op holds the storage while it runs
      op_clock += 1;
      compute_clock += v.cost;
      stats.remat_compute += v.cost;
      stats.rematerializations += 1;
      unpin(s);
      v.made_in = s.residency;
    }
  }

  // Makes `s` resident with its op-made view `view` made, as a program reading that view does: a view that
  // must be made again stamps its storage first, before the storage is recomputed.
  void materialize_view(Storage& s, std::uint32_t view) {
    if (view != 0 && !view_made(s, view)) touch(s);
    materialize(s);
    make_view(s, view);
  }

  // Whether each input of an op is resident, its view made: such inputs need no recomputation.
  using InputsReady = SmallVector<bool, 4>;

  // An op starts reading `inputs` (their op-made views `views`): it stamps them all, then pins the ready ones
  // before any other is recomputed, so that no recomputation evicts them meanwhile (as the DTR authors'
  // runtime locks them). Returns which were ready.
  InputsReady start_reading(std::span<const std::shared_ptr<Storage>> inputs, std::span<const std::uint32_t> views,
                            Pins& pins) {
    InputsReady ready;
    for (const auto& in : inputs) touch(*in);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      Storage& in = *inputs[i];
      ready.push_back(view_made(in, views[i]));
      if (ready.back()) pins.add(in);
    }
    return ready;
  }

  // Makes `target` resident, replaying evicted ancestors first. Iterative with an explicit stack: a chain of
  // any length rematerializes without growing the C stack.
  void materialize(Storage& target) {
    if (target.in_memory) {
      touch(target);
      return;
    }
    struct Frame {
      Frame(Impl& runtime, Closure* c, const Storage* wanted) : closure(c), requested(wanted), pins(runtime) {}
      Closure* closure = nullptr;
      const Storage* requested = nullptr;  // the output this recomputation is for
      std::size_t next_input = 0;
      Pins pins;
      InputsReady ready;
      bool reading = false;  // the input at next_input is being recomputed
    };
    std::vector<std::unique_ptr<Frame>> stack;
    auto push = [this, &stack](Storage& wanted) {
      Closure* closure = wanted.producer.get();
      stack.push_back(std::make_unique<Frame>(*this, closure, &wanted));
      Frame& frame = *stack.back();
      frame.ready = start_reading(closure->inputs, closure->input_view, frame.pins);
    };
    push(target);
    while (!stack.empty()) {
      Frame& frame = *stack.back();
      Closure& c = *frame.closure;
      bool descended = false;
      for (; frame.next_input < c.inputs.size(); frame.next_input += 1) {
        if (frame.ready[frame.next_input]) continue;
        Storage& in = *c.inputs[frame.next_input];
        const std::uint32_t view = c.input_view[frame.next_input];
        if (!frame.reading && view != 0) touch(in);  // remaking a view reads its storage, from now
        frame.reading = true;
        if (!in.in_memory) {
          push(in);
          descended = true;
          break;
        }
        make_view(in, view);
        frame.pins.add(in);
        frame.reading = false;
      }
      if (descended) continue;
      const bool needed = std::any_of(c.outputs.begin(), c.outputs.end(),
                                      [](const Storage* out) { return out != nullptr && !out->in_memory; });
      if (needed) run(c, /*rematerializing=*/true, frame.requested);
      stack.pop_back();
    }
  }

  using Results = SmallVector<Tensor, 2>;

  Results call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
    DTR_CHECK(op.infer && op.cpu_kernel, InvalidArgument, "op '", op.name, "' has no shape rule or CPU kernel");
    DTR_CHECK(kernel_memory || !op.touches_memory, InvalidArgument, "op '", op.name, "' runs a kernel, but this "
              "runtime's memory (", allocator->upstream().name(), ") is simulated: only replayed ops can run");
    backend->check_supported(op);
    SmallVector<TensorMeta, 4> in_meta;
    for (const Tensor& t : inputs) {
      DTR_CHECK(t.defined(), InvalidArgument, "op '", op.name, "': an input tensor is undefined");
      DTR_CHECK(&t.handle_->storage->runtime == this, InvalidArgument, "op '", op.name,
                "': an input tensor belongs to another runtime");
      in_meta.push_back(t.handle_->meta);
    }
    TensorMetas out_meta = op.infer(in_meta, attrs);  // ShapeError before anything is allocated
    const OutputViews views = output_views(op, inputs, in_meta, attrs, out_meta);
    stats.ops += 1;
    current_op = &op;

    auto closure = make<Closure>();
    closure->op = &op;
    closure->attrs = attrs;
    if (op.random) closure->seed = mix(++random_calls);
    for (const Tensor& t : inputs) {
      closure->inputs.push_back(t.handle_->storage);
      closure->input_meta.push_back(t.handle_->meta);
      closure->input_offset.push_back(t.handle_->offset);
      closure->input_view.push_back(t.handle_->view);
    }
    Pins input_pins(*this);
    const InputsReady ready = start_reading(closure->inputs, closure->input_view, input_pins);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (ready[i]) continue;
      Storage& s = *closure->inputs[i];
      if (closure->input_view[i] != 0) touch(s);  // remaking a view reads its storage, from now
      if (!s.in_memory) materialize(s);
      make_view(s, closure->input_view[i]);
      input_pins.add(s);
    }
    if (op.check_values && kernel_memory) check_values(*closure);
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
      outputs.push_back(std::move(s));
    }
    run(*closure, /*rematerializing=*/false);
    for (const auto& in : closure->inputs) in->dependents.push_back(closure.get());
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
      trace->call(op.name, args, results, result_bytes, aliases, closure->cost);
    }
    current_op = nullptr;
    return result;
  }

  // OpDef::check_values on the resident inputs of `c`, before its outputs exist. Values the host cannot read
  // are copied to it: the int64 inputs only, which are all a check reads (the others are passed as null).
  void check_values(const Closure& c) {
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
    c.op->check_values(KernelArgs{c.input_meta, in_buffers, {}, {}, c.attrs, c.seed});
  }

  // The op's output views, checked to fit in the inputs they view; empty when it makes none.
  static OutputViews output_views(const OpDef& op, std::span<const Tensor> inputs, std::span<const TensorMeta> in_meta,
                                  const Attrs& attrs, const TensorMetas& out_meta) {
    if (!op.views) return {};  // empty: no output is a view (the common case, kept cheap)
    OutputViews views = op.views(in_meta, attrs);
    DTR_CHECK(views.size() == out_meta.size(), InvalidArgument, "op '", op.name, "' describes ", views.size(),
              " output views for ", out_meta.size(), " outputs");
    for (std::size_t i = 0; i < views.size(); ++i) {
      if (!views[i]) continue;
      const ViewOf& v = *views[i];
      DTR_CHECK(v.input < inputs.size(), InvalidArgument, "op '", op.name, "': output ", i, " views input ",
                v.input, " of ", inputs.size());
      const TensorMeta& base = in_meta[v.input];
      DTR_CHECK(out_meta[i].dtype == base.dtype && v.offset >= 0 && v.offset + out_meta[i].numel() <= base.numel(),
                ShapeError, "op '", op.name, "': output ", i, " (", to_string(out_meta[i].dtype), " ",
                to_string(out_meta[i].shape), " at element offset ", v.offset, ") does not fit in input ", v.input,
                " (", to_string(base.dtype), " ", to_string(base.shape), ")");
    }
    return views;
  }

  // An output of the op that cost `cost`: a view of the input `v` names.
  Tensor make_op_view(std::span<const Tensor> inputs, const ViewOf& v, TensorMeta meta, double cost) {
    const TensorHandle& base = *inputs[v.input].handle_;
    Storage& s = *base.storage;
    s.views.push_back(Storage::View{base.view, cost, s.residency});
    return Tensor(make<TensorHandle>(base.storage, next_id++, std::move(meta),
                                     base.offset + static_cast<std::size_t>(v.offset),
                                     static_cast<std::uint32_t>(s.views.size())));
  }

  // The storages op `c` made views of cost it too from now on (once each, however many views it made of one),
  // and were used when it ended. They are its inputs, still pinned: out of the index while their cost changes.
  void charge_views(const Closure& c, std::span<const Tensor> inputs, const OutputViews& views) {
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

  template <typename T>
  Tensor constant(TensorMeta meta, std::span<const T> values) {
    DTR_CHECK(static_cast<std::int64_t>(values.size()) == meta.numel(), InvalidArgument, "constant of shape ",
              to_string(meta.shape), " needs ", meta.numel(), " values, got ", values.size());
    DTR_CHECK(meta.dtype == DTypeOf<T>::value, InvalidArgument, "constant: the values are ",
              to_string(DTypeOf<T>::value), ", the meta says ", to_string(meta.dtype));
    DTR_CHECK(kernel_memory, InvalidArgument, "constant: this runtime's memory (", allocator->upstream().name(),
              ") is simulated and cannot hold values; use constant(meta)");
    Tensor t = constant(std::move(meta));
    backend->copy_from_host(t.handle_->storage->data, values.data(), values.size_bytes());
    return t;
  }

  Tensor constant(TensorMeta meta) {
    auto s = make<Storage>(*this, next_id++, std::move(meta));
    live_storages += 1;
    allocate(*s);
    if (kernel_memory) backend->fill_zero(s->data, s->nbytes);
    touch(*s);
    if (trace) trace->constant(s->id, s->nbytes);
    return Tensor(make<TensorHandle>(std::move(s)));
  }

  Tensor view(const Tensor& base, Shape shape, std::int64_t offset) {
    DTR_CHECK(base.defined(), InvalidArgument, "view: the tensor is undefined");
    const TensorHandle& h = *base.handle_;
    DTR_CHECK(&h.storage->runtime == this, InvalidArgument, "view: the tensor belongs to another runtime");
    TensorMeta meta{std::move(shape), h.meta.dtype};
    const std::int64_t numel = meta.numel();  // ShapeError on a negative dimension
    DTR_CHECK(offset >= 0 && offset + numel <= h.meta.numel(), ShapeError, "view ", to_string(meta.shape),
              " at element offset ", offset, " does not fit in a tensor of shape ", to_string(h.meta.shape));
    auto handle = make<TensorHandle>(h.storage, next_id++, meta, h.offset + static_cast<std::size_t>(offset), h.view);
    if (trace) trace->view(h.id, handle->id, meta.nbytes());
    touch(*h.storage);
    return Tensor(std::move(handle));
  }

  void assign(Tensor& target, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
    DTR_CHECK(target.defined(), InvalidArgument, "assign: the target tensor is undefined");
    TensorHandle& h = *target.handle_;
    DTR_CHECK(&h.storage->runtime == this, InvalidArgument, "assign: the target belongs to another runtime");
    DTR_CHECK(!target.is_view(), InvalidArgument,
              "assign: the target is a view; update the tensor it views instead");
    Results outputs = call(op, inputs, attrs);
    DTR_CHECK(outputs.size() == 1 && outputs[0].meta() == h.meta, ShapeError, "assign: op '", op.name,
              "' gives ", outputs.size() == 1 ? to_string(outputs[0].shape()) : std::to_string(outputs.size()) + " outputs",
              ", the target has shape ", to_string(h.meta.shape));
    DTR_CHECK(!outputs[0].is_view(), InvalidArgument, "assign: op '", op.name,
              "' makes a view of an input, not a new value");
    std::shared_ptr<Storage> fresh = outputs[0].handle_->storage;
    std::shared_ptr<Storage> old = h.storage;
    const bool reads_old = std::any_of(fresh->producer->inputs.begin(), fresh->producer->inputs.end(),
                                       [&](const std::shared_ptr<Storage>& in) { return in == old; });
    // Views of the old value must keep seeing it, so with other handles on the storage only copy-on-write fits.
    if (config.inplace == InplaceMode::pin_dependents && old->handles == 1) {
      current_op = &op;
      pin_dependents(*old, *fresh);
      current_op = nullptr;
      // The new value cannot be recomputed from an old value that is about to go.
      if (reads_old) (void)make_constant(*fresh);
    }
    // A new parameter value is not worth a lineage back to every old one: it becomes a constant.
    if (old->constant() && !fresh->constant()) (void)make_constant(*fresh);
    if (trace) trace->copy_from(h.id, fresh->id);
    h.storage = fresh;
    fresh->handles += 1;
    h.meta = fresh->meta;
    release_handle(*old, 0, old.use_count() == 1);
  }

  // Materializes every storage whose recomputation reads `old` (the outputs of its dependent closures, but
  // `fresh`) and cuts their lineage: they become constants, so `old` is needed by nothing and can be freed.
  // All are materialized before any is cut, so an OutOfMemory leaves the lineage as it was.
  void pin_dependents(Storage& old, Storage& fresh) {
    // Cut producers are released after the pins: releasing one may release storages still in `needed`.
    std::vector<std::shared_ptr<Closure>> cut;
    Pins pins(*this);
    pins.add(fresh);
    std::vector<Storage*> needed;
    for (Closure* c : old.dependents) {
      for (Storage* out : c->outputs) {
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
  [[nodiscard]] std::shared_ptr<Closure> make_constant(Storage& s) {
    heuristic->on_cut(s);
    remove_resident(s);
    s.producer->outputs[s.output_index] = nullptr;
    std::shared_ptr<Closure> producer = std::move(s.producer);
    add_resident(s);
    sync_candidate(s);
    return producer;
  }

  // A user handle died (handle_id 0: a handle moved to another storage, which is not a release in traces).
  // `last_reference`: nothing else holds the storage, so it is destroyed next and its buffer freed then; an
  // eviction first would only be work for the heuristic.
  void release_handle(Storage& s, std::uint64_t handle_id, bool last_reference) {
    s.handles -= 1;
    if (trace && handle_id != 0) trace->release(handle_id);
    if (s.handles == 0 && s.in_memory && s.pins == 0 && !s.constant() && !last_reference) {
      evict(s);
      stats.eager_evictions += 1;
    }
  }

  // `s` is dying, already detached from its producer's outputs (so no walk finds it from its inputs).
  void destroyed(Storage& s) {
    heuristic->on_destroy(s);
    if (s.in_memory) release_buffer(s);
    live_storages -= 1;
  }

  RuntimeStats current_stats() const {
    RuntimeStats copy = stats;
    copy.peak_reserved_bytes = allocator->stats().reserved_bytes.peak;
    copy.budget_bytes = config.memory_budget.value_or(0);
    return copy;
  }
};

// ---- lineage ----

namespace detail {

Storage::~Storage() {
  if (producer != nullptr) producer->outputs[output_index] = nullptr;
  runtime.destroyed(*this);
}

void Storage::for_each_input(heuristics::NeighbourVisitor visit) {
  if (producer == nullptr) return;
  for (const auto& in : producer->inputs) visit(*in);
}

void Storage::for_each_dependent(heuristics::NeighbourVisitor visit) {
  for (Closure* c : dependents) {
    for (Storage* out : c->outputs) {
      if (out != nullptr) visit(*out);
    }
  }
}

Closure::~Closure() {
  for (auto& in : inputs) {
    auto& deps = in->dependents;
    auto it = std::find(deps.begin(), deps.end(), this);
    if (it != deps.end()) {
      *it = deps.back();
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

// ---- public API ----

Runtime::Runtime(Config config) {
  std::unique_ptr<MemoryResource> memory = make_device_resource(config.device);
  impl_ = std::make_unique<Impl>(std::move(config), std::move(memory));
}
Runtime::Runtime(Config config, std::unique_ptr<MemoryResource> memory) {
  DTR_CHECK(memory != nullptr, InvalidArgument, "Runtime: the memory resource is null");
  impl_ = std::make_unique<Impl>(std::move(config), std::move(memory));
}
Runtime::~Runtime() = default;

Tensor Runtime::constant(TensorMeta meta, std::span<const float> values) { return impl_->constant(std::move(meta), values); }
Tensor Runtime::constant(TensorMeta meta, std::span<const double> values) { return impl_->constant(std::move(meta), values); }
Tensor Runtime::constant(TensorMeta meta, std::span<const std::int64_t> values) {
  return impl_->constant(std::move(meta), values);
}
Tensor Runtime::constant(TensorMeta meta) { return impl_->constant(std::move(meta)); }

void Runtime::materialize(const Tensor& tensor) {
  DTR_CHECK(tensor.defined(), InvalidArgument, "materialize: the tensor is undefined");
  Storage& s = *tensor.handle_->storage;
  DTR_CHECK(&s.runtime == impl_.get(), InvalidArgument, "materialize: the tensor belongs to another runtime");
  impl_->materialize_view(s, tensor.handle_->view);
}

namespace {

Runtime::Impl::Results call_guarded(Runtime::Impl& impl, const OpDef& op, std::span<const Tensor> inputs,
                                    const Attrs& attrs) {
  try {
    return impl.call(op, inputs, attrs);
  } catch (...) {
    impl.current_op = nullptr;
    throw;
  }
}

}  // namespace

std::vector<Tensor> Runtime::call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  Impl::Results outputs = call_guarded(*impl_, op, inputs, attrs);
  return std::vector<Tensor>(std::make_move_iterator(outputs.begin()), std::make_move_iterator(outputs.end()));
}

Tensor Runtime::call1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  Impl::Results outputs = call_guarded(*impl_, op, inputs, attrs);
  DTR_CHECK(outputs.size() == 1, InvalidArgument, "op '", op.name, "' has ", outputs.size(), " outputs; use call()");
  return std::move(outputs.front());
}

Tensor Runtime::call1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  return call1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

void Runtime::assign(Tensor& target, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  try {
    impl_->assign(target, op, inputs, attrs);
  } catch (...) {
    impl_->current_op = nullptr;
    throw;
  }
}

void Runtime::assign(Tensor& target, const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  assign(target, op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

Tensor Runtime::view(const Tensor& base, Shape shape, std::int64_t offset) {
  return impl_->view(base, std::move(shape), offset);
}

bool Runtime::evict(const Tensor& tensor) {
  DTR_CHECK(tensor.defined(), InvalidArgument, "evict: the tensor is undefined");
  Storage& s = *tensor.handle_->storage;
  DTR_CHECK(&s.runtime == impl_.get(), InvalidArgument, "evict: the tensor belongs to another runtime");
  if (!s.in_memory || s.pins > 0 || s.constant()) return false;
  impl_->evict(s);
  return true;
}

RuntimeStats Runtime::stats() const { return impl_->current_stats(); }
const Config& Runtime::config() const { return impl_->config; }
CachingAllocator& Runtime::allocator() { return *impl_->allocator; }
std::uint64_t Runtime::resident_bytes() const { return impl_->resident_bytes; }

const TensorMeta& Tensor::meta() const {
  DTR_CHECK(defined(), InvalidArgument, "the tensor is undefined");
  return handle_->meta;
}

template <typename T>
std::vector<T> Tensor::to_host_as() const {
  DTR_CHECK(defined(), InvalidArgument, "the tensor is undefined");
  Storage& s = *handle_->storage;
  DTR_CHECK(s.runtime.kernel_memory, InvalidArgument, "to_host: the tensor lives in simulated memory");
  DTR_CHECK(handle_->meta.dtype == DTypeOf<T>::value, InvalidArgument, "to_host: the tensor is ",
            to_string(handle_->meta.dtype), ", not ", to_string(DTypeOf<T>::value));
  s.runtime.materialize_view(s, handle_->view);
  std::vector<T> values(static_cast<std::size_t>(handle_->meta.numel()));
  s.runtime.backend->copy_to_host(values.data(), s.data + handle_->offset * sizeof(T), handle_->meta.nbytes());
  return values;
}

template std::vector<float> Tensor::to_host_as<float>() const;
template std::vector<double> Tensor::to_host_as<double>() const;
template std::vector<std::int64_t> Tensor::to_host_as<std::int64_t>() const;
template std::vector<std::uint8_t> Tensor::to_host_as<std::uint8_t>() const;

std::size_t Tensor::storage_bytes() const {
  DTR_CHECK(defined(), InvalidArgument, "the tensor is undefined");
  return handle_->storage->nbytes;
}

bool Tensor::is_view() const {
  return defined() && (handle_->view != 0 || handle_->offset != 0 || !(handle_->meta == handle_->storage->meta));
}

bool Tensor::resident() const { return defined() && handle_->storage->in_memory; }

}  // namespace dtr

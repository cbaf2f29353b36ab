// Runtime::Impl: one runtime's state and the steps of an op's life. Internal to runtime/; each step is defined
// in the file of its concept (docs/contributing.md, "life of an op"):
//   runtime.cpp            construction and the public API: constants, views, stats
//   execution.cpp          call(): an op's first run; run(): one kernel run of a closure, its outputs and cost
//   rematerialization.cpp  materialize(): evicted storages recomputed from their closures, iteratively
//   eviction.cpp           candidates and pins; buffers under the budget; choosing and evicting victims
//   inplace.cpp            assign(): in-place updates (copy-on-write or pin-dependents)
//   lineage.cpp            storages, closures and handles as they die: eager eviction, the graveyard
//   tensor.cpp             the Tensor methods
//   forecast.cpp           structural signatures and the program's uses, for the forecast heuristic
//
// Thread safety: as the runtime (one thread at a time).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "dtr/caching_allocator.h"
#include "dtr/config.h"
#include "dtr/error.h"
#include "dtr/runtime.h"
#include "heuristics/candidate_index.h"
#include "heuristics/heuristic.h"
#include "heuristics/window.h"
#include "runtime/backend.h"
#include "runtime/forecast.h"
#include "runtime/kernel_times.h"
#include "runtime/lineage.h"
#include "runtime/object_pool.h"
#include "runtime/steady_ns.h"
#include "runtime/trace_writer.h"

namespace dtr {

namespace detail {
class OpComputation;
}

struct Runtime::Impl final : Reclaimer {
  using Closure = detail::Closure;
  using Storage = detail::Storage;
  using TensorHandle = detail::TensorHandle;
  using Results = SmallVector<Tensor, 2>;

  Impl(Config cfg, std::unique_ptr<MemoryResource> memory);
  ~Impl() override;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // What a runtime reports when it ends (Runtime's destructor): DTR_TRACE closed, DTR_STATS written; a failure
  // is logged with the file and the reason.
  void close();
  // The runtime is destroyed while tensors still reference storages: warns, releases the memory they do not
  // hold, and lets them die later (the memory they hold goes back when they do).
  void orphan();

  // ---- state ----

  // First, so destroyed last: every lineage object's block comes from it.
  detail::ObjectPool pool;
  Config config;
  std::unique_ptr<heuristics::Heuristic> heuristic;
  bool windows = false;  // heuristic->fragmentation_aware(), read once: allocate() asks on every allocation
  bool walking_scores = false;  // heuristic->scores_walk_lineage(), read once: timed as search
  std::unique_ptr<heuristics::CandidateIndex> index;  // the candidates in score order; none: scan `recomputable`
  std::unique_ptr<detail::Forecaster> forecaster;  // a heuristic that reads forecasts, under a budget
  // Whether the heuristic hears the lineage's events: from the first budget on (start_heuristic). Before it
  // nothing is decided, so an unbudgeted run pays nothing for its heuristic: the storages evicted meanwhile
  // (dead values kept for their lineage, Runtime::evict's) wait in `unreported_evictions` (their
  // Storage::unreported_slot) to be told at the start, and the other events are dropped, which changes
  // nothing: a heuristic that was told of no eviction keeps no state about any storage.
  bool heuristic_started = false;
  std::vector<Storage*> unreported_evictions;
  // Where buffers come from: the caching allocator, or (BufferSource::memory_resource) `direct_memory` itself;
  // `memory` is the one in use.
  std::unique_ptr<CachingAllocator> allocator;
  std::unique_ptr<MemoryResource> direct_memory;
  MemoryResource* memory = nullptr;
  std::unique_ptr<detail::TraceWriter> trace;  // DTR_TRACE, when set
  // The resident storages that have a producer: the eviction candidates, but for the pinned ones. Constants
  // are resident too (resident_bytes counts them) but never here.
  std::vector<Storage*> recomputable;
  // evict_window's scratch, kept to reuse its capacity: the pool's blocks and their owners (nullptr: free).
  std::vector<heuristics::WindowBlock> window_blocks;
  std::vector<Storage*> window_owners;
  std::uint64_t resident_bytes = 0;  // every storage in memory, constants included
  std::uint64_t next_id = 1;
  std::uint64_t op_clock = 0;
  std::uint64_t candidate_arrivals = 0;  // Storage::candidate_since
  double compute_clock = 0;  // ClockKind::compute: the cost of every kernel run so far
  int program_reruns = 0;    // open begin_program_rerun()s: program ops also count in stats.rerun_compute
  // DTR_COST_MODEL=measured with Config::timed_runs set: the costs learnt per kernel signature.
  detail::KernelTimes kernel_times{config.timed_runs.value_or(1)};
  bool kernel_memory = true;  // whether kernels can touch the buffers (false over simulated memory)
  std::unique_ptr<detail::Backend> backend;  // where kernels run: the CPU, or the GPU that holds the memory
  std::uint64_t random_calls = 0;
  std::uint64_t start_ns = 0;
  std::int64_t live_storages = 0;
  RuntimeStats stats;
  double forgiven_remat = 0;  // recomputation before the last Thrashing, which the thrash limit no longer counts
  bool rule_change_offered = false;  // Heuristic::change_rule was called (once a run)
  // Runtime::recomputations_by_op: per op name (bounded by Runtime::kMaxProfiledOps, then "(other ops)").
  struct RecomputedOp {
    std::uint64_t runs = 0;
    double cost = 0;
  };
  std::map<std::string, RecomputedOp, std::less<>> recomputed_ops;
  void count_recomputation(std::string_view op, double cost);
  std::vector<OpRecomputations> recomputations_by_op() const;
  static constexpr std::string_view kOtherOps = "(other ops)";
  std::string_view current_op;  // the program's op being run, for error messages (CurrentOp sets it)
  // An assign's target whose buffer its op's first run may write over (inplace.cpp); null otherwise.
  const Storage* in_place_target = nullptr;
  // Storages whose last owner was a dying closure. Released here, one at a time, instead of from inside the
  // closure's destructor, so that dropping the end of a 100 000-op chain does not recurse 100 000 deep.
  std::vector<std::shared_ptr<Storage>> graveyard;
  bool draining = false;
  bool orphaned = false;  // destroyed by its owner while tensors lived (orphan())

  // ---- helpers every step uses (runtime.cpp) ----

  // A lineage object from the pool (one block for the object and its reference count).
  template <typename T, typename... Args>
  std::shared_ptr<T> make(Args&&... args) {
    return std::allocate_shared<T>(detail::PoolAllocator<T>(pool), std::forward<Args>(args)...);
  }
  // The handle of `tensor`, which must be defined and this runtime's; otherwise dtr::InvalidArgument, the
  // message starting with `context` ("view: the tensor").
  TensorHandle& handle_of(const Tensor& tensor, std::string_view context) const;
  // The same for input `index` of op `op` ("op 'relu': input 1 ..."), the message made only on failure: every
  // op checks its inputs, and formatting the context each time cost more than the rest of the op.
  TensorHandle& input_handle(const Tensor& tensor, std::string_view op, std::size_t index) const;
  std::uint64_t now() const;  // the clock (Config::clock)
  // The clocks the index reads, at `time` on the runtime's clock (now() when the caller has not read it).
  heuristics::IndexClocks index_clocks(std::uint64_t time) const;
  heuristics::IndexClocks index_clocks() const { return index_clocks(now()); }
  void touch(Storage& s);     // s is used now
  RuntimeStats current_stats() const;
  // The memory resource the buffers come from in the end, for messages ("host", "simulated", ...).
  std::string memory_name() const;
  Tensor constant(TensorMeta meta);
  template <typename T>
  Tensor constant(TensorMeta meta, std::span<const T> values);
  Tensor view(const Tensor& base, Shape shape, std::int64_t offset);

  // Marks the program's op being run for the error messages of everything below it; restores the previous
  // one (an assign's op around the call it makes) when the scope ends, also by an exception.
  class CurrentOp {
   public:
    CurrentOp(Impl& runtime, std::string_view op) : runtime_(runtime), previous_(runtime.current_op) {
      runtime.current_op = op;
    }
    ~CurrentOp() { runtime_.current_op = previous_; }
    CurrentOp(const CurrentOp&) = delete;
    CurrentOp& operator=(const CurrentOp&) = delete;

   private:
    Impl& runtime_;
    std::string_view previous_;
  };

  // ---- candidates, pins and memory under the budget (eviction.cpp) ----

  // A candidate for eviction: resident, unpinned, recomputable. The index holds exactly the candidates.
  static bool candidate(const Storage& s) { return s.in_memory && s.pins == 0 && !s.constant(); }
  void sync_candidate(Storage& s);
  void pin(Storage& s);
  void unpin(Storage& s);

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
    void release_last(const Storage* s);
    std::size_t size() const { return pinned_.size(); }
    // Releases the pins added after the first `n`, latest first.
    void release_from(std::size_t n) {
      while (pinned_.size() > n) {
        runtime_.unpin(*pinned_.back());
        pinned_.pop_back();
      }
    }

   private:
    Impl& runtime_;
    SmallVector<Storage*, 4> pinned_;
  };

  void add_resident(Storage& s);
  void remove_resident(Storage& s);
  // Gives `s` a buffer, evicting others if the budget needs room; dtr::OutOfMemory naming the op when it cannot.
  void allocate(Storage& s);
  void release_buffer(Storage& s);
  // `s` becomes resident in `data` (allocate(), or a buffer handed over), or stops being resident with its
  // buffer freed or handed over: the residency bookkeeping both share.
  void attach_buffer(Storage& s, std::byte* data);
  void detach_buffer(Storage& s);
  void set_budget(std::optional<std::uint64_t> bytes);
  // Keeps the candidates in an index from now on, those there are already in the order they became
  // candidates; none where decisions scan (DTR_SEARCH=scan, a size floor, a heuristic whose scores need a
  // scan: random).
  void build_index();
  // Keeps forecasts from now on, if the heuristic reads them (once a budget is set).
  void start_forecasts();
  // Once a budget is set: starts the forecasts, tells the heuristic the evictions it has not heard of, in the
  // order their storages were made, and every event from now on (before build_index, whose keys read the
  // heuristic's state).
  void start_heuristic();
  // Takes `s` off the unreported evictions (it is back, or dies, before the heuristic heard of it).
  void drop_unreported(Storage& s);
  void evict(Storage& s);
  // Runs `upkeep` (the heuristic keeping its scores: a new candidate's, an eviction's, a rematerialization's, a
  // death's) once the heuristic has started (before, it hears nothing: `heuristic_started`), and counts its time
  // as search time (RuntimeStats::search_ns), under a budget only (without one nothing is chosen) and for the
  // heuristics whose scores walk the lineage: the others keep none of it, and an op should not pay two clock
  // reads for their empty hooks.
  template <class Upkeep>
  void heuristic_upkeep(Upkeep&& upkeep) {
    if (!heuristic_started) return;
    if (!walking_scores || !config.memory_budget) return upkeep();
    const std::uint64_t start = detail::steady_ns();
    upkeep();
    stats.search_ns += detail::steady_ns() - start;
  }
  // Reclaimer: the allocator needs room for `request` (device budgets).
  std::size_t reclaim(const ReclaimRequest& request) override;
  // Reclaimer, the allocator's compaction: a resident storage no running op pins may move (its buffer is read
  // through Storage::data only when an op runs); move() copies it and points the storage at its new block.
  bool movable(OwnerTag owner) const override;
  void move(OwnerTag owner, void* from, void* to, std::size_t bytes) override;
  // Whether buffers carry their storage as the allocator's owner tag: for the heuristics' windows, and for
  // compaction under a device budget (an untagged block never moves).
  bool tags_owners() const {
    return allocator && (windows || (config.allocator.compaction != Compaction::off && config.memory_budget &&
                                      config.budget_mode == BudgetMode::device));
  }
  // The one way to eviction, for both budget modes: evicts what the heuristic picks to make room (the window
  // covering a device request, when the heuristic chooses windows, else one storage); returns the bytes freed,
  // 0 when nothing could go. `request` is the allocator's (device budgets) or nullptr (bytes budgets).
  std::size_t make_room(const ReclaimRequest* request);
  std::size_t evict_window(const ReclaimRequest& request);
  std::size_t evict_one();
  std::size_t size_floor_bytes() const;
  void begin_memory_decision();
  // The error for `bytes` that would not fit: what is resident, pinned and constant, under `budget` (by default
  // the current one).
  OutOfMemory out_of_memory(std::size_t bytes, const OutOfMemory* cause,
                            std::optional<std::uint64_t> budget = std::nullopt) const;

  // ---- running closures (execution.cpp) ----

  // An op of the op table: shapes, views and support checked, then recorded.
  Results call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs);
  // A computation from another source, with its outputs' shapes.
  Results call(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs,
               std::span<const TensorMeta> outputs);
  // A computation from another source that sizes its outputs by running (Computation::run_first).
  Results call_unsized(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs);
  // Records `closure` (its computation set, nothing else) over `inputs` and runs it the first time: inputs made
  // ready and pinned, their values checked by `check` (an op with OpDef::check_values), outputs created (views
  // of inputs where `views` says), run, traced. `sized` false: the outputs' shapes come from
  // Computation::run_first, called once the inputs are resident (`out_meta` is then empty).
  Results record(std::shared_ptr<Closure> closure, std::span<const Tensor> inputs, TensorMetas out_meta,
                 const OutputViews& views, const detail::OpComputation* check = nullptr, bool sized = true);
  // Runs `c` with its inputs resident and pinned: gives evicted (or first-time) outputs buffers, dead outputs
  // scratch memory, and records the cost. `requested` is the output the caller needs (the first when it is a
  // new call): the others become candidates before it, as in the DTR authors' runtime.
  // `first_run_ns`: time run_first already spent on this first run, added to a measured cost.
  void run(Closure& c, bool rematerializing, const Storage* requested = nullptr, std::uint64_t first_run_ns = 0);
  // The cost of one run of `c`: `known` (Computation::known_cost) when set, else the cost model's.
  double cost_of(const Closure& c, std::optional<double> known, std::uint64_t elapsed_ns) const;
  // A storage nobody holds, for the length of one kernel run: an output no tensor wants any more, or the
  // kernel's workspace. Kept in `scratch`, which frees it.
  Storage& new_scratch(const TensorMeta& meta, std::vector<std::unique_ptr<Storage>>& scratch);
  // Config::kernel_observer on one kernel run of `c` (args: the buffers it ran with).
  void observe(const Closure& c, const KernelArgs& args, bool rematerializing, double cost) const;
  // OpDef::check_values on the resident inputs of `c`, before its outputs exist.
  void check_values(const Closure& c, const detail::OpComputation& op);
  // The op's output views, checked to fit in the inputs they view; empty when it makes none.
  static OutputViews output_views(const OpDef& op, std::span<const Tensor> inputs, std::span<const TensorMeta> in_meta,
                                  const Attrs& attrs, const TensorMetas& out_meta);
  // An output of the op that cost `cost`: a view of the input `v` names.
  Tensor make_op_view(std::span<const Tensor> inputs, const ViewOf& v, TensorMeta meta, double cost);
  // The storages op `c` made views of cost it too from now on (once each, however many views it made of one).
  void charge_views(const Closure& c, std::span<const Tensor> inputs, const OutputViews& views);

  // ---- rematerialization (rematerialization.cpp) ----

  // Makes `target` resident, replaying evicted ancestors first.
  void materialize(Storage& target);
  // Makes `s` resident with its op-made view `view` made, as a program reading that view does.
  void materialize_view(Storage& s, std::uint32_t view);
  // Makes every input of `c` (an op about to run for the first time) resident with its view made, pinned in
  // `pins`, recomputing the evicted ones.
  void acquire_inputs(Closure& c, Pins& pins);
  // Whether a walk that failed with `e` is tried again pinning less (docs/runtime.md, "Running an op").
  bool retry_pinning_less(const OutOfMemory& e) const;
  // Whether `s` is resident with its op-made view `view` (0: the storage itself) made.
  static bool view_made(const Storage& s, std::uint32_t view) {
    return s.in_memory && (view == 0 || s.views[view - 1].made_in == s.residency);
  }
  void make_view(Storage& s, std::uint32_t view);
  // After each recomputation (of `recomputing`): once the recomputation since the run began first passes the
  // base compute, lets the heuristic change its rule (Heuristic::change_rule; the thrash limit then counts from
  // there); throws dtr::Thrashing once the recomputation since the run began (or the last Thrashing, or the
  // rule's change) passes Config::thrash_limit.
  void check_thrashing(std::string_view recomputing);

  // ---- in-place updates (inplace.cpp) ----

  void assign(Tensor& target, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs);
  void assign(Tensor& target, const Tensor& value);
  void rebind(TensorHandle& h, std::shared_ptr<Storage> fresh, std::uint64_t fresh_id, std::string_view op);
  // Whether assign's op may write the target's new value over `old`, its buffer: nothing else reads the old
  // value (one handle, no dependent, a resident constant) and the op says its kernel can.
  bool can_update_in_place(const Storage& old, const OpDef& op) const;
  // Whether the first run of `c` writes its output over `in_place_target`, its first input (run() asks).
  bool writes_over_target(const Closure& c, bool rematerializing) const;
  // After that run's kernel: the output keeps the buffer, the old value's storage none (run() calls it).
  void hand_over_buffer(Storage& old, Storage& fresh);
  void pin_dependents(Storage& old, Storage& fresh);
  [[nodiscard]] std::shared_ptr<Closure> make_constant(Storage& s);
  // Runtime::make_constant.
  void make_constant(const Tensor& value);

  // ---- lineage lifetime (lineage.cpp) ----

  void bury(std::shared_ptr<Storage> storage);
  void release_handle(Storage& s, std::uint64_t handle_id, bool last_reference);
  void destroyed(Storage& s);
};

}  // namespace dtr

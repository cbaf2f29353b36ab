// dtr::Runtime: runs ops, records each as a closure, evicts when memory reaches the budget and recomputes
// evicted values when they are touched again (design section 4).
//
// Thread safety: a runtime and its tensors are driven by one thread at a time. Tensors must not outlive the
// runtime that made them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dtr/caching_allocator.h"
#include "dtr/computation.h"
#include "dtr/config.h"
#include "dtr/op.h"
#include "dtr/tensor.h"

namespace dtr {

struct RuntimeStats {
  double base_compute = 0;    // cost of the ops the program called (the cost model's unit)
  double remat_compute = 0;   // cost of recomputations
  double rerun_compute = 0;   // part of base_compute: ops the program called to recompute values itself (static
                              // checkpointing's forward reruns, begun by Runtime::begin_program_rerun)
  std::uint64_t ops = 0;      // ops the program called
  std::uint64_t rematerializations = 0;  // closures replayed
  std::uint64_t evictions = 0;           // chosen by the heuristic
  std::uint64_t eager_evictions = 0;     // last handle died, the lineage still needs it (else: freed)
  std::uint64_t in_place_updates = 0;    // assigns whose op wrote the new value over the old one's buffer
  std::uint64_t relocations = 0;         // resident storages the allocator's compaction moved to another block
  std::uint64_t forecast_hits = 0;       // values the program made whose uses a value made the same way before
                                         // forecasts (heuristics that read forecasts, under a budget; 0 in a
                                         // program's first step, and where no step repeats the last)
  std::uint64_t search_ns = 0;           // under a budget: time spent choosing what to evict and keeping the
                                         // scores (the heuristic's eviction, rematerialization, death and cut
                                         // events; new candidates' scores for dtr, msps
                                         // and dtr-eq)
  std::uint64_t peak_reserved_bytes = 0; // allocator's reserved high-water mark
  std::uint64_t peak_resident_bytes = 0; // high-water mark of the sum of resident storage bytes
  std::uint64_t budget_bytes = 0;        // 0: none
  double overhead() const { return base_compute > 0 ? (base_compute + remat_compute) / base_compute : 1.0; }
};

// What a runtime keeps besides tensor data, counted at one instant. A training loop that repeats the same step
// must keep every count flat from step to step, however long it runs (bench/soak_bench.cpp).
struct RuntimeFootprint {
  std::uint64_t storages = 0;           // live storages: resident, evicted and constants
  std::uint64_t lineage_objects = 0;    // storages, closures and tensor handles alive (the lineage's blocks)
  std::uint64_t candidates = 0;         // resident storages that could be evicted (pinned ones included)
  std::uint64_t heuristic_records = 0;  // the heuristic's own records (dtr-eq: its union-find nodes; dtr: its
                                        // lists of evicted readers), and before a first budget the evictions
                                        // it will be told of then
  std::uint64_t forecast_records = 0;   // signatures whose last uses the forecast heuristic keeps (at most 2^20)
  std::uint64_t indexed_candidates = 0;  // candidates in the eviction index (0 where decisions scan: no budget,
                                         // DTR_SEARCH=scan, a size floor, random, forecast+reversal)
  std::uint64_t segments = 0;           // the caching allocator's segments (0 without one)
};

// What recomputing one op (by name: an op of the table or a computation) has cost so far: how many times a
// recomputation ran it, and the summed cost (the cost model's unit, as RuntimeStats::remat_compute).
struct OpRecomputations {
  std::string op;
  std::uint64_t runs = 0;
  double cost = 0;
};

// The first `count` entries of a profile (Runtime::recomputations_by_op) as one line, each with its share of
// the whole profile's cost: "linear 98.7% (3706 runs), split 1.1% (2 runs)". A Thrashing message and
// dtr-train print them this way.
std::string describe_recomputations(std::span<const OpRecomputations> ops, std::size_t count);

// The runtime's counters under the name the API documents (dtr::Stats).
using Stats = RuntimeStats;

std::string to_json(const RuntimeStats& stats);

class Runtime {
 public:
  // A CPU runtime with its own host allocator, configured by `config` (budget, heuristic, cost model, ...).
  explicit Runtime(Config config = {});
  // The same over `memory` (owned; its caching allocator is the runtime's). Over memory the host cannot
  // touch (a SimulatedResource: dtr-sim), only ops with OpDef::touches_memory false can run, and tensors
  // cannot be read back.
  Runtime(Config config, std::unique_ptr<MemoryResource> memory);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // A value with no producer (parameters, inputs, labels): never evicted while anything needs it. `values`
  // are its elements, of its dtype's C++ type (float32: float, float64: double, int64: std::int64_t);
  // dtr::InvalidArgument when their type or count does not fit the meta.
  Tensor constant(TensorMeta meta, std::span<const float> values);
  Tensor constant(TensorMeta meta, std::span<const double> values);
  Tensor constant(TensorMeta meta, std::span<const std::int64_t> values);
  Tensor constant(TensorMeta meta, std::span<const std::uint8_t> values);
  // A constant of any dtype whose contents do not matter: zeros in host memory, untouched in simulated memory.
  Tensor constant(TensorMeta meta);
  // Makes `tensor` resident (recomputing it if it was evicted) without reading it.
  void materialize(const Tensor& tensor);

  // Runs `op` on `inputs` (recomputing any that were evicted) and returns its outputs. Throws dtr::ShapeError
  // before anything is allocated when the shapes do not fit, and dtr::OutOfMemory naming the op when the
  // budget cannot hold its inputs and outputs.
  std::vector<Tensor> call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {});
  Tensor call1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {});
  Tensor call1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});
  // The same for an op from another source than the op table (include/dtr/computation.h): outputs of the
  // shapes `outputs`, written by `computation`, which the runtime keeps (shared) to recompute them after an
  // eviction exactly as it does the op table's. Throws dtr::InvalidArgument for a null computation or an
  // input that is undefined or another runtime's.
  std::vector<Tensor> call(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs,
                           std::span<const TensorMeta> outputs);
  // The same for a computation that learns its outputs' shapes by running (Computation::run_first): the
  // inputs are made resident, run_first runs the op and sizes the outputs, the runtime allocates them and
  // run() writes them. Its measured cost is both calls' time. A computation may have no outputs at all (it
  // only reads its inputs).
  std::vector<Tensor> call(std::shared_ptr<Computation> computation, std::span<const Tensor> inputs);

  // In-place update, copy-on-write: `target` (every copy of its handle) takes the value op(inputs), which
  // must have target's shape; the old value stays, unchanged, for as long as earlier results need it for
  // their recomputation, so an update never leaks into a recomputation of something computed before it.
  // A constant target (a parameter) stays a constant. Views of the old value keep seeing the old value.
  // Throws dtr::InvalidArgument if `target` is a view, dtr::ShapeError if the result's shape differs.
  void assign(Tensor& target, const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {});
  void assign(Tensor& target, const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});
  // The same with a value already computed: `target` (every copy of its handle) takes `value`'s storage, under
  // the same rules (a constant target makes the value a constant, cutting its lineage). dtr-sim replays a
  // trace's COPY_FROM with it, so that a replay keeps the lineage the run kept. Throws dtr::InvalidArgument if
  // either is a view or undefined, dtr::ShapeError if their shapes or dtypes differ.
  void assign(Tensor& target, const Tensor& value);

  // Makes `value`'s storage a constant (recomputing it first if it was evicted): never evicted again, its
  // lineage cut (closures that read it keep it; nothing recomputes it). For state a program updates in place
  // from values it computed (an optimizer's step, gradient accumulation), which is not worth a lineage back
  // to every old value, and for autograd's waiting gradients. A view makes the storage it views a constant
  // (every view of it sees the same values). Traced as MAKE_CONSTANT. dtr::InvalidArgument for an undefined
  // tensor.
  void make_constant(const Tensor& value);

  // A contiguous view of `base`: `shape` over its elements from `offset` on (a reshape, or a run of rows).
  // Views share their storage: no copy, no kernel; they see a rematerialized storage like any handle.
  // Throws dtr::ShapeError if the view does not fit inside `base`.
  Tensor view(const Tensor& base, Shape shape, std::int64_t offset = 0);

  // Evicts `tensor`'s storage now if it can be (resident, not pinned, not a constant); returns whether it did.
  // The heuristic decides on its own under a budget; this is for tests and for programs that know better.
  bool evict(const Tensor& tensor);
  // Evicts every storage that can be evicted now; returns how many it evicted. For stress tests (dtr-torch
  // evicts after every op with it: each value then comes back by recomputation) and programs that know better.
  std::size_t evict_all();

  // Changes the budget (nullopt: none), in the runtime's budget mode. A smaller budget evicts what it must at
  // once; when what cannot be evicted (pinned, constants) does not fit, throws dtr::OutOfMemory and keeps the
  // old budget. dtr::InvalidArgument for 0 bytes.
  void set_memory_budget(std::optional<std::uint64_t> bytes);

  // The random state: random ops (dropout, uniform) draw their seeds from a counter of random calls, so a
  // program that sets the state back and calls the same random ops again draws the same numbers (static
  // checkpointing's rerun does). Recomputations replay their captured seeds and leave the state alone.
  std::uint64_t random_state() const;
  void set_random_state(std::uint64_t state);

  // Between begin_program_rerun() and the matching end_program_rerun() (pairs nest), the ops the program calls
  // recompute values it dropped itself (static checkpointing's forward reruns, nn::checkpoint): they run and
  // count in base_compute as any program op, and their cost also in RuntimeStats::rerun_compute, so that a run
  // prices its own recomputation in its own costs, as DTR's is (remat_compute). dtr::InvalidArgument for an
  // end without a begin.
  void begin_program_rerun();
  void end_program_rerun();

  RuntimeStats stats() const;
  // Starts the peaks of stats() over from what is held now (peak_resident_bytes, and the allocator's reserved
  // peak): the peak of one phase of a program, as torch.cuda.reset_peak_memory_stats does.
  void reset_peak_stats();
  // Where the recomputation went: one entry per op that was recomputed, costliest first (ties by name). At
  // most kMaxProfiledOps names are kept; the rest are summed under "(other ops)". Empty until something is
  // recomputed.
  std::vector<OpRecomputations> recomputations_by_op() const;
  static constexpr std::size_t kMaxProfiledOps = 1024;
  const Config& config() const;
  CachingAllocator& allocator();
  // Sum of the bytes of the storages in memory now.
  std::uint64_t resident_bytes() const;
  // The metadata it holds now (RuntimeFootprint); cheap (counters, no walk).
  RuntimeFootprint footprint() const;

  struct Impl;

 private:
  friend class Tensor;
  std::unique_ptr<Impl> impl_;
};

// The process-wide runtime, built on first use from the environment (Config::from_env, percentages of
// DTR_MEMORY_BUDGET are of host memory). A convenience: every runtime can also be built explicitly. A malformed
// variable throws dtr::ConfigError and the next call tries again. Destroyed at exit (writing DTR_STATS when
// set), so its tensors must be released before main returns. Thread safety: creating it is; using it is not
// (one thread at a time, as every runtime).
Runtime& default_runtime();

}  // namespace dtr

// Every knob of a dtr runtime. Config::from_env() reads the DTR_* variables (design section 8); every field
// can also be set in code. A malformed value throws dtr::ConfigError naming the variable and the accepted forms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/caching_allocator.h"
#include "dtr/device.h"
#include "dtr/kernel_observer.h"

namespace dtr {

// What an op costs, for the heuristics and the stats: measured kernel time, or counts that are the same on
// every machine (tests, cross-machine comparisons).
enum class CostModel { measured, flops, bytes };
// What "staleness" counts: ops run, nanoseconds of wall time, or the cost of the ops run so far (first runs
// and recomputations, in the cost model's unit: with a replay's logged times, the DTR authors' clock).
enum class ClockKind { ops, time, compute };
// What the budget caps: the allocator's reserved bytes (device memory, fragmentation included), or the sum of
// resident storage bytes (as the DTR paper counts).
enum class BudgetMode { device, bytes };
// How Runtime::assign keeps an in-place update out of recomputations of older values: keep the old value as
// long as anything needs it (copy-on-write), or recompute and pin everything that needs it, then free it.
enum class InplaceMode { copy_on_write, pin_dependents };
// Where storages' buffers come from: the runtime's caching allocator over the memory resource (the default;
// a device budget caps its reserved bytes), or the memory resource itself, for memory whose allocator is not
// ours and caches on its own (PyTorch's): the runtime then accounts the bytes of resident storages, so only
// bytes budgets apply.
enum class BufferSource { caching_allocator, memory_resource };
// How the runtime finds what to evict: an index kept in score order (exact, a heap's time per decision), or a
// scan that scores every candidate (exact, linear time; the reference the index is tested against).
enum class EvictionSearch { index, scan };
// In which order a recomputation remakes its closure's evicted inputs: the closure's own order (as the DTR
// authors' runtime does), or that order with the inputs that cannot grow by waiting moved last, deepest first
// (those remade from constants and pinned storages only: an RNN step's input slice is then not held through
// the state chain's remaking). docs/runtime.md, "Recomputation order".
enum class RecomputeOrder { inputs, stable_last };

struct Config {
  std::optional<std::uint64_t> memory_budget;  // DTR_MEMORY_BUDGET; nullopt: none; 0 is a ConfigError
  std::string heuristic = "forecast";          // DTR_HEURISTIC: see heuristics::make_heuristic
  CostModel cost_model = CostModel::measured;  // DTR_COST_MODEL: measured, flops, bytes
  ClockKind clock = ClockKind::ops;            // DTR_CLOCK: ops, time, compute
  // DTR_TIMED_RUNS: under the measured cost model, N: the first N runs of each kernel signature (its name,
  // attributes and shapes) are timed, then the 2N-th, 4N-th, ...; the others cost the least time seen, untimed
  // (on a GPU a timed kernel waits for the device). At least 1; nullopt ("all") times every run.
  // docs/runtime.md, "Cost model and clock".
  std::optional<std::uint32_t> timed_runs = 3;
  BudgetMode budget_mode = BudgetMode::device; // DTR_BUDGET_MODE: device, bytes
  InplaceMode inplace = InplaceMode::copy_on_write;  // DTR_INPLACE: copy-on-write, pin-dependents
  EvictionSearch search = EvictionSearch::index;     // DTR_SEARCH: index, scan (random, forecast+reversal scan)
  RecomputeOrder recompute_order = RecomputeOrder::stable_last;  // DTR_RECOMPUTE_ORDER: stable-last, inputs
  // DTR_SIZE_FLOOR: ignore candidates smaller than this fraction of the mean candidate size (unless every one
  // is), as the DTR prototype did to shorten its scans; 0 (the default) considers every candidate. Choosing
  // under a floor scans the candidates, and windows ignore it.
  double size_floor = 0;
  // DTR_THRASH_LIMIT: the compute overhead, (base + recomputation) / base, past which the runtime throws
  // dtr::Thrashing instead of recomputing on, checked at every recomputation under a budget; 2 (the DTR authors' limit) by
  // default, at least 1; nullopt ("off") never stops. After a Thrashing the recomputation counted starts again
  // from zero, so that a program that raised its budget goes on; so it does after the heuristic changed its
  // rule (Heuristic::change_rule, offered once a run when recomputation first passes the base compute).
  std::optional<double> thrash_limit = 2.0;
  // In code only: the base compute the limit multiplies when it is known ahead (a replay knows its trace's),
  // in the cost model's unit; nullopt: the base compute of the ops run so far.
  std::optional<double> thrash_base_compute;
  // DTR_DEVICE: cpu, cuda, cuda:N. from_env: when unset, the GPU if this build has CUDA and one is present,
  // else the CPU (logged); naming cuda without a usable GPU throws dtr::DeviceError. In code: cpu by default.
  Device device;
  std::string stats_path;                      // DTR_STATS: JSON stats written when the runtime is destroyed
  std::string trace_path;                      // DTR_TRACE: the run as the DTR prototype's JSON-lines log
  // In code only: where buffers come from (BufferSource); with memory_resource, budget_mode must be bytes.
  BufferSource buffers = BufferSource::caching_allocator;
  // The runtime's caching allocator: rounding and segment sizes (in code only), expandable segments
  // (DTR_EXPANDABLE_SEGMENTS: 1 or 0; off by default) and compaction (DTR_COMPACTION: first, last-resort or off;
  // last-resort by default: under a budget the runtime lets the allocator move any resident storage no running
  // op pins). Its budget_bytes is ignored: memory_budget and budget_mode decide the budget.
  CachingAllocatorOptions allocator;
  // In code only: called after every kernel run, first runs and recomputations (include/dtr/kernel_observer.h);
  // empty (the default): nothing is called.
  KernelObserver kernel_observer;

  // Reads the environment; percentages of DTR_MEMORY_BUDGET are of `capacity_bytes`.
  static Config from_env(std::uint64_t capacity_bytes);
};

CostModel parse_cost_model(std::string_view text, std::string_view variable = "DTR_COST_MODEL");
ClockKind parse_clock(std::string_view text, std::string_view variable = "DTR_CLOCK");
BudgetMode parse_budget_mode(std::string_view text, std::string_view variable = "DTR_BUDGET_MODE");
InplaceMode parse_inplace_mode(std::string_view text, std::string_view variable = "DTR_INPLACE");
EvictionSearch parse_search(std::string_view text, std::string_view variable = "DTR_SEARCH");
RecomputeOrder parse_recompute_order(std::string_view text, std::string_view variable = "DTR_RECOMPUTE_ORDER");
// 1 or true: on; 0 or false: off.
bool parse_expandable_segments(std::string_view text, std::string_view variable = "DTR_EXPANDABLE_SEGMENTS");
// first, last-resort or off.
Compaction parse_compaction(std::string_view text, std::string_view variable = "DTR_COMPACTION");
double parse_size_floor(std::string_view text, std::string_view variable = "DTR_SIZE_FLOOR");
// "all" gives nullopt; otherwise an integer from 1 to 1,000,000.
std::optional<std::uint32_t> parse_timed_runs(std::string_view text, std::string_view variable = "DTR_TIMED_RUNS");
// "off" gives nullopt; otherwise a finite number >= 1.
std::optional<double> parse_thrash_limit(std::string_view text, std::string_view variable = "DTR_THRASH_LIMIT");
// The eviction heuristics DTR_HEURISTIC accepts (docs/heuristics.md), in the order of the DTR paper, then the
// fragmentation-aware ones.
std::vector<std::string> heuristic_names();
// `text` if it names a heuristic; otherwise throws dtr::ConfigError naming `variable` and the accepted names.
std::string parse_heuristic(std::string_view text, std::string_view variable = "DTR_HEURISTIC");
// Whether the heuristic `name` (accepted by parse_heuristic) evicts contiguous windows of the allocator's blocks
// under a device budget (Coop) rather than one storage at a time.
bool fragmentation_aware(std::string_view name);

const char* to_string(CostModel model);
const char* to_string(ClockKind clock);
const char* to_string(BudgetMode mode);
const char* to_string(InplaceMode mode);
const char* to_string(EvictionSearch search);
const char* to_string(RecomputeOrder order);

}  // namespace dtr

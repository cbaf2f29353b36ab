// DTR side by side with static checkpointing (dtr-train --compare) and the largest batch each fits in a budget
// (dtr-train --max-batch): the same steps of one model, from the same parameters and data order, under
// several memory strategies, each in a fresh runtime in this process.
//
// Thread safety: one thread at a time. The datasets must outlive the calls.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dtr/train/trainer.h"

namespace dtr::train {

// One way to fit a run in memory.
struct Strategy {
  std::string name;                     // as the table shows it
  std::optional<std::uint64_t> budget;  // DTR's budget (in the runtime's budget mode); nullopt: none
  std::int64_t checkpoint_segments = -1;  // as TrainOptions
  std::string heuristic;                  // DTR's heuristic; empty: the one of CompareOptions::train's runtime
};

struct RowResult {
  Strategy strategy;
  bool completed = false;
  std::string failure;  // why it stopped, when it did not complete (out of memory, thrashing)
  std::vector<float> losses;  // per step (the paired rounds' steps included)
  std::vector<double> step_seconds;  // likewise
  // The row's steps in CompareOptions::paired_rounds, one a round (empty without them): the step times that
  // median_step_seconds and slowdown use when there are any.
  std::vector<double> paired_step_seconds;
  RuntimeStats stats;
  // The stats after the row's first step, when it completed more than one: what the steps after it computed
  // is the difference. A first step pays for cold caches, fresh pages and oneDNN's first primitives, and in the
  // first row of a process for more than the later rows' (measured costs see it).
  std::optional<RuntimeStats> after_first_step;
  std::vector<OpRecomputations> recomputed_by_op;  // where its recomputation went (Runtime::recomputations_by_op)
  double test_accuracy = -1;  // -1: not measured
  std::uint64_t parameters_hash = 0;  // FNV-1a of the final parameters' and buffers' bits

  // The median of paired_step_seconds when there are paired rounds, else of every step.
  double median_step_seconds() const;
  // This row's step time over the unbudgeted row's: with paired rounds, the median over the rounds of the
  // two rows' steps in the same round (the machine's drift over the run falls on both alike); without, the
  // ratio of their medians. 0 when `unbudgeted` has no steps.
  double slowdown(const RowResult& unbudgeted) const;
  // Recomputation over the program's own ops, in the row's own costs (the cost model's unit): a DTR row's
  // rematerializations (RuntimeStats: remat / base), a static checkpointing row's reruns of its segments (ops
  // of its own: rerun_compute over the rest of its base). Over the steps after the first where the row has
  // them (after_first_step), else over all. Search time over the steps' wall time.
  double extra_compute() const;
  double search_share() const;
};

// Called after each step of each row, the paired rounds' included (`step` from CompareOptions::steps on, of
// `steps` = steps + paired_rounds): for progress reports.
using StepCallback = std::function<void(const Strategy& strategy, std::int64_t step, std::int64_t steps,
                                        const StepResult& result, const RuntimeStats& stats)>;

struct CompareOptions {
  TrainOptions train;       // the model, batch, optimizer, seed; its runtime config is each row's base
  std::int64_t steps = 10;  // steps per row
  std::int64_t static_segments = 0;  // the static checkpointing row's segments (0: round(√N))
  std::vector<double> budget_fractions = {0.5, 0.3};  // DTR rows, of the unbudgeted row's peak
  // The DTR rows again under each of these heuristics ("DTR (forecast) at 50%"); one equal to the runtime's
  // own heuristic is skipped.
  std::vector<std::string> also_heuristics;
  bool evaluate = true;     // test accuracy (measured on the unbudgeted row; see run_compare)
  // After every row has run `steps`, the completed rows run this many more steps each in turns (one step of
  // every row, then the next round), their trainers alive side by side: the step times and slowdowns are then
  // those of the rounds (RowResult::slowdown). 0: none, each row's trainer is let go when its row ends.
  std::int64_t paired_rounds = 0;
};

// The rows of --compare, in order: (1) unbudgeted; (2) static checkpointing; (3) DTR at static
// checkpointing's measured peak; then DTR at each budget fraction of the unbudgeted peak; then the DTR rows
// again under each of CompareOptions::also_heuristics. The peaks and budgets are in the runtime's budget mode:
// reserved bytes (device) or resident bytes (bytes), each row's over all its steps. A budgeted row that runs
// out of memory or thrashes (in its steps or in a paired round) is reported as such (completed = false) and
// the others go on; the unbudgeted row's error (every other row is measured against it) is thrown as it is.
// The runtime's trace and stats files (Config::trace_path, stats_path) are the unbudgeted row's. Test accuracy
// is measured once, on the unbudgeted row after its last step; a row whose final parameters and buffers hash
// to the same bits computes the same predictions, so it is given the same accuracy, and a row whose
// parameters differ is evaluated itself.
// Called after each paired round (0-based) of `rounds`: for progress reports.
using RoundCallback = std::function<void(std::int64_t round, std::int64_t rounds)>;

std::vector<RowResult> run_compare(const CompareOptions& options, const TrainTest& data,
                                   const StepCallback& on_step = {}, const RoundCallback& on_round = {});

// Whether every completed row's losses are bitwise those of the first row.
bool losses_agree(const std::vector<RowResult>& rows);

struct MaxBatchResult {
  std::string strategy;
  std::int64_t batch = 0;         // the largest batch found to train a step within the budget (0: none)
  std::uint64_t peak_bytes = 0;   // that step's peak, in the budget mode
  std::int64_t probes = 0;        // steps tried
};

// The largest batch that trains one step within `budget` bytes (in options.runtime.budget_mode), for
// unbudgeted training (its peak must fit), static checkpointing (likewise) and DTR (the runtime under the
// budget must finish the step), searched by doubling from options.batch then bisecting to within 1/16; each
// probe one step in a fresh runtime. Batches are capped by the training set's size.
std::vector<MaxBatchResult> max_batch(const TrainOptions& options, std::uint64_t budget, const Dataset& train,
                                      std::int64_t static_segments = 0,
                                      const std::function<void(const std::string&, std::int64_t, bool)>& on_probe = {});

}  // namespace dtr::train

// --compare and --max-batch (include/dtr/train/compare.h).
#include "dtr/train/compare.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "dtr/check.h"
#include "dtr/nn/state_dict.h"

namespace dtr::train {

namespace {

std::uint64_t fnv(std::uint64_t h, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::uint64_t hash_parameters(nn::Module& model) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& [name, value] : nn::state_dict(model)) {
    h = fnv(h, name.data(), name.size());
    if (value.meta().dtype == DType::float64) {
      const std::vector<double> v = value.to_host_as<double>();
      h = fnv(h, v.data(), v.size() * sizeof(double));
    } else {
      const std::vector<float> v = value.to_host();
      h = fnv(h, v.data(), v.size() * sizeof(float));
    }
  }
  return h;
}

std::uint64_t peak_of(const RuntimeStats& stats, BudgetMode mode) {
  return mode == BudgetMode::device ? stats.peak_reserved_bytes : stats.peak_resident_bytes;
}

// One step of `row`'s trainer. A budgeted row that runs out of memory or thrashes is a result (the table says
// so): false, with the row's failure; `contain` false lets those errors through unchanged (the unbudgeted row:
// without it there is nothing to compare with).
bool step_row(RowResult& row, Trainer& trainer, bool contain, StepResult& result) {
  try {
    result = trainer.step();
  } catch (const OutOfMemory& e) {
    if (!contain) throw;
    row.failure = std::string("out of memory: ") + e.what();
    return false;
  } catch (const Thrashing& e) {
    if (!contain) throw;
    row.failure = std::string("thrashing: ") + e.what();
    return false;
  }
  row.losses.push_back(result.loss);
  row.step_seconds.push_back(result.seconds);
  return true;
}

// One row's `steps` steps in a fresh trainer, left in `trainer` for more (null when it could not be made:
// its parameters may not fit the budget either).
RowResult start_row(const CompareOptions& options, const Strategy& strategy, const TrainTest& data,
                    const StepCallback& on_step, bool contain, std::unique_ptr<Trainer>& trainer) {
  RowResult row;
  row.strategy = strategy;
  TrainOptions train = options.train;
  train.runtime.memory_budget = strategy.budget;
  train.checkpoint_segments = strategy.checkpoint_segments;
  if (!strategy.heuristic.empty()) train.runtime.heuristic = strategy.heuristic;
  if (strategy.budget || strategy.checkpoint_segments >= 0) {  // DTR_TRACE and DTR_STATS: the unbudgeted row's
    train.runtime.trace_path.clear();
    train.runtime.stats_path.clear();
  }
  try {
    trainer = std::make_unique<Trainer>(train, data.train);
  } catch (const OutOfMemory& e) {
    if (!contain) throw;
    row.failure = std::string("out of memory: ") + e.what();
    // Its runtime went with the trainer: the memory reserved when it failed (nothing was freed before then) is
    // its peak reserved, rather than none.
    row.stats.peak_reserved_bytes = e.info().reserved_bytes;
    return row;
  }
  for (std::int64_t s = 0; s < options.steps; ++s) {
    StepResult step;
    if (!step_row(row, *trainer, contain, step)) return row;
    if (s == 0 && options.steps > 1) row.after_first_step = trainer->runtime().stats();
    if (on_step) on_step(strategy, s, options.steps, step, trainer->runtime().stats());
  }
  row.completed = true;
  return row;
}

// What the row's runtime counted and, for a completed row, its parameters' hash and (when asked) its accuracy.
void finish_row(RowResult& row, Trainer* trainer, const TrainTest& data, bool evaluate) {
  if (trainer == nullptr) return;
  row.stats = trainer->runtime().stats();
  row.recomputed_by_op = trainer->runtime().recomputations_by_op();
  if (row.completed) {
    row.parameters_hash = hash_parameters(trainer->model());
    if (evaluate) row.test_accuracy = trainer->evaluate(data.test);
  }
}

// A row run alone from start to end (the accuracy of a row whose parameters differ).
RowResult run_row(const CompareOptions& options, const Strategy& strategy, const TrainTest& data, bool evaluate) {
  std::unique_ptr<Trainer> trainer;
  RowResult row = start_row(options, strategy, data, {}, true, trainer);
  finish_row(row, trainer.get(), data, evaluate);
  return row;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

double RowResult::median_step_seconds() const {
  return median(paired_step_seconds.empty() ? step_seconds : paired_step_seconds);
}

double RowResult::slowdown(const RowResult& unbudgeted) const {
  if (paired_step_seconds.empty() || paired_step_seconds.size() != unbudgeted.paired_step_seconds.size()) {
    const double base = unbudgeted.median_step_seconds();
    return base > 0 ? median_step_seconds() / base : 0;
  }
  std::vector<double> ratios;
  for (std::size_t r = 0; r < paired_step_seconds.size(); ++r) {
    if (unbudgeted.paired_step_seconds[r] > 0) ratios.push_back(paired_step_seconds[r] / unbudgeted.paired_step_seconds[r]);
  }
  return median(std::move(ratios));
}

double RowResult::extra_compute() const {
  const bool steady = completed && after_first_step;
  const auto since_first = [steady](const RowResult& row, double RuntimeStats::*field) {
    return row.stats.*field - (steady ? (*row.after_first_step).*field : 0.0);
  };
  const double own_base = since_first(*this, &RuntimeStats::base_compute);
  const double remat = since_first(*this, &RuntimeStats::remat_compute);
  // Static checkpointing's reruns are program ops (RuntimeStats::rerun_compute, part of its base): over the
  // rest, in the row's own costs, as DTR's recomputation is over its program's ops. (Against the unbudgeted
  // row's compute, measured costs compared two rows' timings of the same kernels, not what the reruns cost.)
  const double reruns = since_first(*this, &RuntimeStats::rerun_compute);
  const double program = own_base - reruns;
  return program > 0 ? (remat + reruns) / program : 0;
}

double RowResult::search_share() const {
  double total = 0;
  for (const double s : step_seconds) total += s;
  return total > 0 ? static_cast<double>(stats.search_ns) * 1e-9 / total : 0;
}

std::vector<RowResult> run_compare(const CompareOptions& options, const TrainTest& data, const StepCallback& on_step,
                                   const RoundCallback& on_round) {
  check(options.train);
  DTR_CHECK(options.steps > 0, InvalidArgument, "--compare needs at least one step, got ", options.steps);
  DTR_CHECK(options.paired_rounds >= 0, InvalidArgument, "--compare's paired rounds: ", options.paired_rounds,
            " (expected 0 or more)");
  const BudgetMode mode = options.train.runtime.budget_mode;
  const bool paired = options.paired_rounds > 0;
  std::vector<RowResult> rows;
  std::vector<std::unique_ptr<Trainer>> trainers;  // each row's, kept for the paired rounds
  // A row's trainer is let go when its row ends unless the paired rounds need it.
  const auto run = [&](const CompareOptions& o, const Strategy& strategy, bool contain) {
    std::unique_ptr<Trainer> trainer;
    rows.push_back(start_row(o, strategy, data, on_step, contain, trainer));
    if (!paired || !rows.back().completed) {
      finish_row(rows.back(), trainer.get(), data, rows.size() == 1 && options.evaluate);
      trainer.reset();
    }
    trainers.push_back(std::move(trainer));
  };
  run(options, {"unbudgeted", std::nullopt, -1, {}}, false);
  // The budgets: the unbudgeted row's peak over its steps (the paired rounds repeat steps it has taken).
  const std::uint64_t peak = peak_of(paired ? trainers[0]->runtime().stats() : rows[0].stats, mode);
  // The thrash limit's base for the budgeted rows: the unbudgeted row's compute over the same steps, known
  // ahead as a replay knows its trace's, rather than the compute so far, which early in a first backward is a
  // fraction of a step and stops rows whose whole run stays under the limit.
  CompareOptions budgeted = options;
  if (!budgeted.train.runtime.thrash_base_compute) {
    budgeted.train.runtime.thrash_base_compute =
        (paired ? trainers[0]->runtime().stats() : rows[0].stats).base_compute;
  }
  const std::int64_t segments = options.static_segments;
  const std::string static_name = segments == 0 ? "static, sqrt(N) segments" : "static, " + std::to_string(segments) + " segments";
  run(options, {static_name, std::nullopt, segments, {}}, true);
  std::vector<Strategy> dtr_rows;
  if (rows[1].completed) {
    const RuntimeStats stats = paired ? trainers[1]->runtime().stats() : rows[1].stats;
    dtr_rows.push_back({"DTR at static's peak", peak_of(stats, mode), -1, {}});
  }
  for (const double fraction : options.budget_fractions) {
    const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(peak));
    dtr_rows.push_back({"DTR at " + std::to_string(static_cast<int>(fraction * 100 + 0.5)) + "%", budget, -1, {}});
  }
  const std::size_t main_rows = dtr_rows.size();
  for (const std::string& heuristic : options.also_heuristics) {
    if (heuristic == options.train.runtime.heuristic) continue;
    for (std::size_t i = 0; i < main_rows; ++i) {
      Strategy s = dtr_rows[i];
      s.name = "DTR (" + heuristic + ")" + s.name.substr(3);  // "DTR at 50%" -> "DTR (forecast) at 50%"
      s.heuristic = heuristic;
      dtr_rows.push_back(std::move(s));
    }
  }
  for (const Strategy& s : dtr_rows) run(budgeted, s, true);
  if (paired) {
    // One step of every row still running, then the next round: what slows the machine during a round slows
    // every row in it.
    for (std::int64_t round = 0; round < options.paired_rounds; ++round) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (trainers[i] == nullptr) continue;
        StepResult step;
        if (step_row(rows[i], *trainers[i], i > 0, step)) {
          rows[i].paired_step_seconds.push_back(step.seconds);
          if (on_step) {
            on_step(rows[i].strategy, options.steps + round, options.steps + options.paired_rounds, step,
                    trainers[i]->runtime().stats());
          }
        } else {
          rows[i].completed = false;
          finish_row(rows[i], trainers[i].get(), data, false);
          trainers[i].reset();
        }
      }
      if (on_round) on_round(round, options.paired_rounds);
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (trainers[i] == nullptr) continue;
      finish_row(rows[i], trainers[i].get(), data, i == 0 && options.evaluate);
      trainers[i].reset();
    }
  }
  for (std::size_t i = 1; i < rows.size(); ++i) {
    RowResult& row = rows[i];
    if (!row.completed || !options.evaluate) continue;
    if (row.parameters_hash == rows[0].parameters_hash) {
      row.test_accuracy = rows[0].test_accuracy;
    } else {  // a bug: the table shows it, and this row's own accuracy
      CompareOptions alone = budgeted;
      alone.steps += options.paired_rounds;
      alone.paired_rounds = 0;
      row.test_accuracy = run_row(alone, row.strategy, data, true).test_accuracy;
    }
  }
  return rows;
}

bool losses_agree(const std::vector<RowResult>& rows) {
  for (const RowResult& row : rows) {
    if (!row.completed) continue;
    if (row.losses.size() != rows[0].losses.size() ||
        std::memcmp(row.losses.data(), rows[0].losses.data(), row.losses.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

std::vector<MaxBatchResult> max_batch(const TrainOptions& options, std::uint64_t budget, const Dataset& train,
                                      std::int64_t static_segments,
                                      const std::function<void(const std::string&, std::int64_t, bool)>& on_probe) {
  check(options);
  DTR_CHECK(budget > 0, InvalidArgument, "--max-batch needs a budget > 0 bytes");
  const BudgetMode mode = options.runtime.budget_mode;
  struct Search {
    std::string name;
    bool dtr;
    std::int64_t segments;
  };
  const std::vector<Search> searches = {{"unbudgeted", false, -1},
                                        {static_segments == 0 ? "static, sqrt(N) segments" : "static", false, static_segments},
                                        {"DTR", true, -1}};
  std::vector<MaxBatchResult> results;
  for (const Search& search : searches) {
    MaxBatchResult result;
    result.strategy = search.name;
    // Whether one step of `batch` fits; its peak when it does.
    const auto fits = [&](std::int64_t batch) {
      TrainOptions probe = options;
      probe.batch = batch;
      probe.checkpoint_segments = search.segments;
      probe.runtime.memory_budget = search.dtr ? std::optional<std::uint64_t>(budget) : std::nullopt;
      result.probes += 1;
      bool ok = false;
      std::uint64_t peak = 0;
      try {
        Trainer trainer(probe, train);
        trainer.step();
        peak = peak_of(trainer.runtime().stats(), mode);
        ok = peak <= budget;
      } catch (const OutOfMemory&) {
      } catch (const Thrashing&) {
      }
      if (on_probe) on_probe(search.name, batch, ok);
      if (ok && batch > result.batch) {
        result.batch = batch;
        result.peak_bytes = peak;
      }
      return ok;
    };
    // Doubling from options.batch (or halving, when that does not fit) brackets the largest batch between one
    // that fits (low) and one that does not (high); bisection narrows it to within 1/16.
    std::int64_t low = 0;
    std::int64_t high = 0;
    const std::int64_t first = std::min(options.batch, train.count);
    if (fits(first)) {
      low = first;
      while (high == 0 && low < train.count) {
        const std::int64_t next = std::min(2 * low, train.count);
        if (fits(next)) low = next;
        else high = next;
      }
    } else {
      high = first;
      while (low == 0 && high > 1) {
        const std::int64_t next = high / 2;
        if (fits(next)) low = next;
        else high = next;
      }
    }
    while (low > 0 && high > 0 && high - low > std::max<std::int64_t>(1, low / 16)) {
      const std::int64_t mid = low + (high - low) / 2;
      if (fits(mid)) low = mid;
      else high = mid;
    }
    results.push_back(result);
  }
  return results;
}

}  // namespace dtr::train

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

// One row: `steps` steps of a fresh trainer under `strategy`. A budgeted row that runs out of memory or
// thrashes is a result (the table says so); `contain` false lets those errors through unchanged (the
// unbudgeted row: without it there is nothing to compare with).
RowResult run_row(const CompareOptions& options, const Strategy& strategy, const TrainTest& data,
                  const StepCallback& on_step, bool evaluate, bool contain = true) {
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
  std::unique_ptr<Trainer> trainer;
  try {
    trainer = std::make_unique<Trainer>(train, data.train);  // its parameters may not fit the budget either
    for (std::int64_t s = 0; s < options.steps; ++s) {
      const StepResult step = trainer->step();
      row.losses.push_back(step.loss);
      row.step_seconds.push_back(step.seconds);
      if (s == 0 && options.steps > 1) row.after_first_step = trainer->runtime().stats();
      if (on_step) on_step(strategy, s, options.steps, step, trainer->runtime().stats());
    }
    row.completed = true;
  } catch (const OutOfMemory& e) {
    if (!contain) throw;
    row.failure = std::string("out of memory: ") + e.what();
  } catch (const Thrashing& e) {
    if (!contain) throw;
    row.failure = std::string("thrashing: ") + e.what();
  }
  if (trainer == nullptr) return row;
  row.stats = trainer->runtime().stats();
  row.recomputed_by_op = trainer->runtime().recomputations_by_op();
  if (row.completed) {
    row.parameters_hash = hash_parameters(trainer->model());
    if (evaluate) row.test_accuracy = trainer->evaluate(data.test);
  }
  return row;
}

}  // namespace

double RowResult::median_step_seconds() const {
  if (step_seconds.empty()) return 0;
  std::vector<double> sorted = step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
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

std::vector<RowResult> run_compare(const CompareOptions& options, const TrainTest& data, const StepCallback& on_step) {
  check(options.train);
  DTR_CHECK(options.steps > 0, InvalidArgument, "--compare needs at least one step, got ", options.steps);
  const BudgetMode mode = options.train.runtime.budget_mode;
  std::vector<RowResult> rows;
  rows.push_back(run_row(options, {"unbudgeted", std::nullopt, -1, {}}, data, on_step, options.evaluate, false));
  const std::uint64_t peak = peak_of(rows[0].stats, mode);
  // The thrash limit's base for the budgeted rows: the unbudgeted row's compute over the same steps, known
  // ahead as a replay knows its trace's, rather than the compute so far, which early in a first backward is a
  // fraction of a step and stops rows whose whole run stays under the limit.
  CompareOptions budgeted = options;
  if (!budgeted.train.runtime.thrash_base_compute) {
    budgeted.train.runtime.thrash_base_compute = rows[0].stats.base_compute;
  }
  const std::int64_t segments = options.static_segments;
  const std::string static_name = segments == 0 ? "static, sqrt(N) segments" : "static, " + std::to_string(segments) + " segments";
  rows.push_back(run_row(options, {static_name, std::nullopt, segments, {}}, data, on_step, false));
  std::vector<Strategy> dtr_rows;
  if (rows[1].completed) dtr_rows.push_back({"DTR at static's peak", peak_of(rows[1].stats, mode), -1, {}});
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
  for (const Strategy& s : dtr_rows) rows.push_back(run_row(budgeted, s, data, on_step, false));
  for (std::size_t i = 1; i < rows.size(); ++i) {
    RowResult& row = rows[i];
    if (!row.completed || !options.evaluate) continue;
    if (row.parameters_hash == rows[0].parameters_hash) {
      row.test_accuracy = rows[0].test_accuracy;
    } else {  // a bug: the table shows it, and this row's own accuracy
      row.test_accuracy = run_row(budgeted, row.strategy, data, {}, true).test_accuracy;
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

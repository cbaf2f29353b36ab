// dtr-bench-soak: a long training run under a tight budget (issue 16). Two trainers of the same zoo model
// step in lockstep from the same parameters and data: one without a budget, one at --ratio of the unbudgeted
// peak. At every step the budgeted run's loss must equal the unbudgeted run's bit for bit and its peak must
// stay within the budget; its metadata (Runtime::footprint: storages, lineage objects, candidates, the
// heuristic's records, allocator segments) is counted after step --check-at and after the last step and must
// not have grown. Exit status 0 when every check holds, 1 otherwise. CI runs 200 steps (ctest soak.*).
//
//   dtr-bench-soak [--model transformer] [--depth D] [--width W] [--batch 16] [--steps 10000] [--ratio 0.3]
//                  [--mode bytes|device] [--heuristic dtr-eq] [--check-at 100] [--dropout 0.1]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_main.h"  // dtr::bench::median
#include "dtr/dtr.h"
#include "dtr/train/trainer.h"

namespace {

using dtr::RuntimeFootprint;
using dtr::bench::median;

void print_footprint(const char* when, const RuntimeFootprint& f) {
  std::printf("  %-16s storages %6llu  lineage objects %6llu  candidates %5llu  heuristic records %5llu  "
              "forecast records %5llu  segments %4llu\n",
              when, static_cast<unsigned long long>(f.storages), static_cast<unsigned long long>(f.lineage_objects),
              static_cast<unsigned long long>(f.candidates), static_cast<unsigned long long>(f.heuristic_records),
              static_cast<unsigned long long>(f.forecast_records), static_cast<unsigned long long>(f.segments));
}

// Every count after the run at most what it was at the check point: flat, not growing with the steps.
bool not_grown(const RuntimeFootprint& at, const RuntimeFootprint& end) {
  return end.storages <= at.storages && end.lineage_objects <= at.lineage_objects &&
         end.candidates <= at.candidates && end.heuristic_records <= at.heuristic_records &&
         end.forecast_records <= at.forecast_records && end.segments <= at.segments;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"dtr-bench-soak: a long training run under a tight budget, checked step by step"};
  dtr::train::TrainOptions options;
  // The Transformer: at 30% of its peak the step fits in bytes mode; in device mode the allocator's 2 MiB
  // segments are too coarse for a peak of 16 MiB (fragmentation), so bytes mode is the default.
  options.model = "transformer";
  options.batch = 16;
  options.zoo.dropout = 0.1;
  std::int64_t steps = 10000;
  std::int64_t check_at = 100;
  double ratio = 0.3;
  std::string mode = "bytes";
  std::string heuristic = "dtr-eq";
  app.add_option("--model", options.model, "a zoo model");
  app.add_option("--depth", options.zoo.depth, "the model's depth (0: its default)");
  app.add_option("--width", options.zoo.width, "the model's width (0: its default)");
  app.add_option("--dropout", options.zoo.dropout, "dropout probability")->check(CLI::Range(0.0, 0.9));
  app.add_option("--batch", options.batch, "batch size")->check(CLI::Range(1, 4096));
  app.add_option("--steps", steps, "training steps")->check(CLI::Range(2, 100000000));
  app.add_option("--check-at", check_at, "the step whose metadata the last step's is checked against")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--ratio", ratio, "the budget, a fraction of the unbudgeted peak")->check(CLI::Range(0.01, 1.0));
  app.add_option("--mode", mode, "device (reserved bytes) or bytes (resident bytes)");
  app.add_option("--heuristic", heuristic, "the eviction heuristic");
  CLI11_PARSE(app, argc, argv);
  check_at = std::min(check_at, steps - 1);
  options.runtime.budget_mode = dtr::parse_budget_mode(mode, "--mode");
  options.runtime.heuristic = dtr::parse_heuristic(heuristic, "--heuristic");
  options.runtime.thrash_limit = std::nullopt;  // the run must go on whatever it costs; the table says the cost
  // Costs counted, not timed: the same decisions on every run and machine, so a failure at step k reproduces.
  options.runtime.cost_model = dtr::CostModel::flops;
  const auto data = dtr::train::synthetic_data(options.seed, std::max<std::int64_t>(4 * options.batch, 256), 1);

  // The unbudgeted peak, from a probe's first steps (the peak is reached by the second step: optimizer state).
  std::uint64_t peak = 0;
  {
    dtr::train::Trainer probe(options, data.train);
    for (int s = 0; s < 3; ++s) (void)probe.step();
    const dtr::RuntimeStats stats = probe.runtime().stats();
    peak = options.runtime.budget_mode == dtr::BudgetMode::device ? stats.peak_reserved_bytes
                                                                  : stats.peak_resident_bytes;
  }
  dtr::train::TrainOptions budgeted_options = options;
  const auto budget = static_cast<std::uint64_t>(ratio * static_cast<double>(peak));
  budgeted_options.runtime.memory_budget = budget;
  dtr::train::Trainer plain(options, data.train);
  dtr::train::Trainer budgeted(budgeted_options, data.train);
  std::printf("dtr-bench-soak: %s (depth %lld, width %lld), batch %lld, %lld steps; budget %.3f MiB = %.2f of the "
              "unbudgeted peak (%s mode), %s\n",
              options.model.c_str(), static_cast<long long>(options.zoo.depth),
              static_cast<long long>(options.zoo.width), static_cast<long long>(options.batch),
              static_cast<long long>(steps), static_cast<double>(budget) / (1 << 20), ratio, mode.c_str(),
              heuristic.c_str());

  bool ok = true;
  std::vector<double> plain_seconds;
  std::vector<double> budgeted_seconds;
  RuntimeFootprint at_check;
  RuntimeFootprint largest;
  for (std::int64_t s = 1; s <= steps; ++s) {
    const dtr::train::StepResult a = plain.step();
    dtr::train::StepResult b;
    try {
      b = budgeted.step();
    } catch (const std::exception& e) {
      std::printf("FAIL: step %lld under the budget: %s\n", static_cast<long long>(s), e.what());
      ok = false;
      break;
    }
    plain_seconds.push_back(a.seconds);
    budgeted_seconds.push_back(b.seconds);
    if (std::memcmp(&a.loss, &b.loss, sizeof(float)) != 0) {
      std::printf("FAIL: step %lld: loss %.9g under the budget, %.9g without\n", static_cast<long long>(s),
                  static_cast<double>(b.loss), static_cast<double>(a.loss));
      ok = false;
      break;
    }
    const dtr::RuntimeStats stats = budgeted.runtime().stats();
    const std::uint64_t used = options.runtime.budget_mode == dtr::BudgetMode::device ? stats.peak_reserved_bytes
                                                                                       : stats.peak_resident_bytes;
    if (used > budget) {
      std::printf("FAIL: step %lld: peak %llu bytes over the budget of %llu\n", static_cast<long long>(s),
                  static_cast<unsigned long long>(used), static_cast<unsigned long long>(budget));
      ok = false;
      break;
    }
    const RuntimeFootprint f = budgeted.runtime().footprint();
    if (s == check_at) at_check = f;
    largest.storages = std::max(largest.storages, f.storages);
    largest.lineage_objects = std::max(largest.lineage_objects, f.lineage_objects);
    largest.candidates = std::max(largest.candidates, f.candidates);
    largest.heuristic_records = std::max(largest.heuristic_records, f.heuristic_records);
    largest.forecast_records = std::max(largest.forecast_records, f.forecast_records);
    largest.segments = std::max(largest.segments, f.segments);
    if (s % 1000 == 0) {
      std::printf("  step %6lld: loss %.6f (equal), step %.2f ms vs %.2f ms unbudgeted\n", static_cast<long long>(s),
                  static_cast<double>(b.loss), median(budgeted_seconds) * 1e3, median(plain_seconds) * 1e3);
      std::fflush(stdout);
    }
  }
  const RuntimeFootprint end = budgeted.runtime().footprint();
  const dtr::RuntimeStats stats = budgeted.runtime().stats();
  std::printf("metadata after a step (the budgeted run):\n");
  print_footprint(("step " + std::to_string(check_at)).c_str(), at_check);
  print_footprint(("step " + std::to_string(steps)).c_str(), end);
  print_footprint("largest", largest);
  if (ok && !not_grown(at_check, end)) {
    std::printf("FAIL: the metadata grew between step %lld and step %lld\n", static_cast<long long>(check_at),
                static_cast<long long>(steps));
    ok = false;
  }
  std::printf("peak %.3f MiB of %.3f MiB; %llu evictions, %llu rematerializations, extra compute %.1f%%; median "
              "step %.2f ms vs %.2f ms unbudgeted (%.2fx)\n",
              static_cast<double>(options.runtime.budget_mode == dtr::BudgetMode::device ? stats.peak_reserved_bytes
                                                                                        : stats.peak_resident_bytes) /
                  (1 << 20),
              static_cast<double>(budget) / (1 << 20), static_cast<unsigned long long>(stats.evictions),
              static_cast<unsigned long long>(stats.rematerializations), (stats.overhead() - 1) * 100,
              median(budgeted_seconds) * 1e3, median(plain_seconds) * 1e3,
              median(budgeted_seconds) / median(plain_seconds));
  if (ok && stats.evictions == 0) {
    std::printf("FAIL: the budget never made the runtime evict: the run proves nothing\n");
    ok = false;
  }
  std::printf("%s\n", ok ? "PASS: every loss equal, every step within the budget, the metadata flat" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "dtr-bench-soak: %s\n", e.what());
  return 2;
}

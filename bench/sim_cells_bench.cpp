// dtr-bench-sim-cells: the wall time of each dtr-sim cell (one trace, heuristic, budget mode and ratio)
// against the same trace's replay without evictions, measured in the same run. The thrash limit stops a cell
// at the recomputation that passes it, so a cell's time should stay within the limit times the replay that
// evicts nothing (with the heuristic's index kept, as under any budget), plus the search time (choosing
// victims and updating the scores evictions change, RuntimeStats::search_ns, taken out of both sides): this
// program checks that on the DTR authors' traces (when present) and on generated ones (docs/simulator.md,
// "How long a cell takes").
//
//   dtr-bench-sim-cells [--traces DIR] [--repeat N] [--budget-mode bytes|device|both] [--ratios 0.1:0.9:0.1]
//                       [--only TRACE ...] [--heuristic H ...]
//
// Per trace it prints the unbudgeted replay's time; per heuristic and mode the time of a replay under a
// budget of twice the peak (the index kept, nothing evicted) and its search time, then the cells' worst ratio
// of (cell time - search time) to that time less its search (or to the unbudgeted replay's time, if more: the
// difference of two near-equal times is noise), the cell's search time in the same unit, the worst ratio of
// (cell time - search time) to the unbudgeted replay's time (the index's heap upkeep counted against the
// cell), and every cell past the bound with its details. Each reference is the replay of median work (time -
// search) among --repeat; a cell past the bound is measured the same way before it is reported.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "dtr/dtr.h"

namespace {

using Clock = std::chrono::steady_clock;

struct NamedTrace {
  std::string name;
  dtr::sim::Trace trace;
};

struct Timed {
  dtr::sim::ReplayResult result;
  double seconds = 0;
  double search() const { return static_cast<double>(result.search_ns) * 1e-9; }
  double work() const { return seconds - search(); }  // what the thrash limit bounds
};

Timed timed_replay(const dtr::sim::Trace& trace, const dtr::sim::ReplayOptions& options) {
  const auto start = Clock::now();
  Timed t{dtr::sim::replay(trace, options), 0};
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return t;
}

// The replay of median work (time - search) among `repeat`: its time and its result, search time included, so
// that the difference is one run's (a median time with another run's search time is off by their noise).
Timed median_replay(const dtr::sim::Trace& trace, const dtr::sim::ReplayOptions& options, int repeat) {
  std::vector<Timed> runs;
  for (int i = 0; i < repeat; ++i) runs.push_back(timed_replay(trace, options));
  const auto middle = runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2);
  std::nth_element(runs.begin(), middle, runs.end(), [](const Timed& a, const Timed& b) { return a.work() < b.work(); });
  return *middle;
}

std::vector<NamedTrace> traces(const std::string& shared_dir) {
  std::vector<NamedTrace> all;
  for (const char* name : {"resnet32-56", "unet-6"}) {
    const std::filesystem::path path = std::filesystem::path(shared_dir) / (std::string(name) + ".log");
    if (std::filesystem::exists(path)) {
      all.push_back({name, dtr::sim::read_trace(path.string())});
    } else {
      std::printf("(%s: not in %s, skipped)\n", name, shared_dir.c_str());
    }
  }
  // Generated: a long chain, a random DAG, an unrolled RNN, an unrolled GAN on which lru used to spin, a
  // ResNet. Sizes that the exact heuristics (dtr, msps), whose score upkeep walks evicted regions, replay in
  // seconds: on the 10,000-op GAN one of their replays takes minutes even when nothing is evicted.
  dtr::sim::ChainOptions chain;
  chain.layers = 500;
  all.push_back({"chain-500", dtr::sim::generate_chain(chain)});
  all.push_back({"dag-1000", dtr::sim::generate_dag(dtr::sim::DagOptions{})});
  all.push_back({"rnn-64", dtr::sim::generate_rnn(dtr::sim::RnnOptions{})});
  dtr::sim::GanOptions gan;
  gan.unroll = 8;
  all.push_back({"gan-unroll-8", dtr::sim::generate_gan(gan)});
  all.push_back({"resnet-32", dtr::sim::generate_resnet(dtr::sim::ResNetOptions{})});
  return all;
}

std::vector<double> parse_ratios(const std::string& text) {
  double from = 0;
  double to = 0;
  double step = 0;
  if (std::sscanf(text.c_str(), "%lf:%lf:%lf", &from, &to, &step) != 3 || !(from > 0) || !(to >= from) ||
      !(step > 0)) {
    throw CLI::ValidationError("--ratios", "expected FROM:TO:STEP with 0 < FROM <= TO and STEP > 0");
  }
  std::vector<double> ratios;
  for (int i = 0; from + i * step <= to + step * 1e-6; ++i) ratios.push_back(from + i * step);
  return ratios;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtr-bench-sim-cells: each dtr-sim cell's time against the unbudgeted replay's"};
  std::string shared_dir;
  if (const char* dir = std::getenv("DTR_TRACES_DIR")) shared_dir = dir;  // NOLINT(concurrency-mt-unsafe)
  if (shared_dir.empty()) shared_dir = "../shared/traces";
  int repeat = 3;
  std::string mode_text = "both";
  std::string ratio_text = "0.1:0.9:0.1";
  double limit = 2.0;
  app.add_option("--traces", shared_dir, "where the DTR authors' traces are (default $DTR_TRACES_DIR, else ../shared/traces)");
  app.add_option("--repeat", repeat, "replays per measurement whose median is kept (unbudgeted, and cells past the bound)")
      ->check(CLI::Range(1, 100));
  app.add_option("--budget-mode", mode_text, "bytes, device or both")->check(CLI::IsMember({"bytes", "device", "both"}));
  app.add_option("--ratios", ratio_text, "budgets FROM:TO:STEP as ratios of the unbudgeted peak");
  app.add_option("--thrash-limit", limit, "the thrash limit (overhead factor) the cells run under")->check(CLI::Range(1.0, 1e6));
  std::vector<std::string> only;
  std::vector<std::string> heuristics = dtr::heuristic_names();
  app.add_option("--only", only, "measure only these traces (by the names printed; default: all)");
  app.add_option("--heuristic", heuristics, "measure only these heuristics (default: all)")
      ->check(CLI::IsMember(dtr::heuristic_names()));
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time: a long run shows where it is
  const std::vector<double> ratios = parse_ratios(ratio_text);
  std::vector<dtr::BudgetMode> modes;
  if (mode_text != "device") modes.push_back(dtr::BudgetMode::bytes);
  if (mode_text != "bytes") modes.push_back(dtr::BudgetMode::device);

  std::printf("bound per cell: time - search <= %.1f x max(the time of a replay that evicts nothing - its search, the "
              "unbudgeted replay's time)\n",
              limit);
  int cells = 0;
  int past = 0;
  double worst_overall = 0;
  for (const NamedTrace& t : traces(shared_dir)) {
    if (!only.empty() && std::find(only.begin(), only.end(), t.name) == only.end()) continue;
    const dtr::sim::TraceSummary summary = dtr::sim::summarize(t.trace);
    dtr::sim::ReplayOptions unbudgeted;
    unbudgeted.budget_mode = dtr::BudgetMode::device;
    const Timed reference = median_replay(t.trace, unbudgeted, repeat);
    std::printf("\n%s: %llu ops, unbudgeted replay %.2f ms (median of %d)\n", t.name.c_str(),
                static_cast<unsigned long long>(t.trace.calls), reference.seconds * 1e3, repeat);
    std::printf("%-16s %-7s %9s %9s %7s %12s %12s %8s %8s %13s\n", "heuristic", "mode", "no-evict", "(search)",
                "cells", "thrash/OOM", "worst ratio", "at", "search", "vs unbudgeted");
    for (const std::string& heuristic : heuristics) {
      for (const dtr::BudgetMode mode : modes) {
        const double peak = static_cast<double>(mode == dtr::BudgetMode::bytes ? summary.peak_bytes
                                                                             : reference.result.peak_reserved_bytes);
        dtr::sim::ReplayOptions roomy;  // a budget, so the index is kept, that never needs an eviction
        roomy.budget_bytes = static_cast<std::uint64_t>(2 * peak) + (std::uint64_t{64} << 20);
        roomy.budget_mode = mode;
        roomy.heuristic = heuristic;
        const Timed baseline = median_replay(t.trace, roomy, repeat);
        double worst = 0;
        double worst_ratio = 0;
        double worst_search = 0;
        double worst_unbudgeted = 0;  // (time - search) / the unbudgeted replay's time: the index's upkeep counted
        int stopped = 0;
        // Search time out of both sides: what the limit bounds is the replay's own work. When search is nearly
        // all of it (dtr, msps), the difference is within the timers' noise: the unbudgeted replay, which does
        // less, bounds it from below.
        const double baseline_work = std::max(reference.seconds, baseline.work());
        for (const double r : ratios) {
          dtr::sim::ReplayOptions options;
          options.budget_bytes = static_cast<std::uint64_t>(peak * r);
          options.budget_mode = mode;
          options.heuristic = heuristic;
          options.thrash_limit = limit;
          Timed cell = timed_replay(t.trace, options);
          if (cell.work() / baseline_work > limit) cell = median_replay(t.trace, options, repeat);  // not noise?
          const double ratio = cell.work() / baseline_work;
          cells += 1;
          stopped += (cell.result.thrashed || !cell.result.feasible) ? 1 : 0;
          worst_unbudgeted = std::max(worst_unbudgeted, cell.work() / reference.seconds);
          if (ratio > worst) {
            worst = ratio;
            worst_ratio = r;
            worst_search = cell.search() / baseline_work;
          }
          if (ratio > limit) {
            past += 1;
            std::printf("  PAST THE BOUND: %s %s ratio %.2f: %.2f ms (%.2fx), search %.2f ms, overhead %.3f, %s, "
                        "%llu rematerializations\n",
                        heuristic.c_str(), dtr::to_string(mode), r, cell.seconds * 1e3, ratio,
                        static_cast<double>(cell.result.search_ns) * 1e-6, cell.result.overhead(),
                        cell.result.thrashed ? "thrash" : (cell.result.feasible ? "fits" : "OOM"),
                        static_cast<unsigned long long>(cell.result.rematerializations));
          }
        }
        worst_overall = std::max(worst_overall, worst);
        std::printf("%-16s %-7s %7.2fms %7.2fms %7zu %12d %11.2fx %8.2f %7.2fx %12.2fx\n", heuristic.c_str(),
                    dtr::to_string(mode), baseline.seconds * 1e3,
                    static_cast<double>(baseline.result.search_ns) * 1e-6, ratios.size(), stopped, worst, worst_ratio,
                    worst_search, worst_unbudgeted);
      }
    }
  }
  std::printf("\n%d cells; worst (time - search) / no-eviction time: %.2fx; %d past the bound of %.1fx\n", cells,
              worst_overall, past, limit);
  return past == 0 ? 0 : 1;
}

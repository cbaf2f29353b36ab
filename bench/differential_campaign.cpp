// dtr-bench-differential: the long differential campaign (issue 16). Random programs (fuzz/differential:
// views, in-place updates, random and multi-output ops, dropped handles, backward passes, optimizer steps)
// run under random budgets, heuristics, budget modes, in-place strategies, searches and recomputation orders;
// every run must read the unbudgeted run's bits, keep its budget and give back every byte, and (unless
// --no-search-twins) decide as the same configuration with the other search does. --steps N repeats each
// program's body as N training steps (forecasts hold from the second on); --max-chain grows deep evicted regions;
// --heuristics draws from a list. The first failure is minimized and printed (and written with --reproducer) as
// a program that --replay reruns.
//
//   dtr-bench-differential [--programs 10000] [--first-seed 1] [--configs 8] [--length 200] [--steps 1]
//                          [--max-chain 1] [--heuristics H,...] [--no-search-twins] [--jobs N]
//                          [--reproducer FILE]
//   dtr-bench-differential --replay FILE --budget BYTES [--mode bytes|device] [--heuristic H]
//                          [--inplace copy-on-write|pin-dependents] [--search index|scan]
//                          [--recompute-order stable-last|inputs] [--compaction last-resort|first|off]
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "differential.h"
#include "dtr/dtr.h"

namespace {

using namespace dtr::differential;

int replay(const std::string& path, const RunConfig& config) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "dtr-bench-differential: cannot read %s\n", path.c_str());
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  const Program program = parse_program(text.str(), path);
  const Observation oracle = run(program, RunConfig{});
  const Observation observed = run(program, config);
  std::printf("%s: %zu instructions; oracle: %zu observations, peak %llu resident / %llu reserved bytes\n",
              path.c_str(), program.instructions.size(), oracle.values.size(),
              static_cast<unsigned long long>(oracle.peak_resident_bytes),
              static_cast<unsigned long long>(oracle.peak_reserved_bytes));
  std::printf("under %s: %s, %llu evictions, %llu rematerializations\n", describe(config).c_str(),
              observed.feasible ? "fits" : "out of memory", static_cast<unsigned long long>(observed.evictions),
              static_cast<unsigned long long>(observed.rematerializations));
  const std::string what = oracle.error.empty() ? compare(oracle, observed, config) : "the oracle threw " + oracle.error;
  std::printf("%s\n", what.empty() ? "agrees with the oracle" : ("FAILS: " + what).c_str());
  return what.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"dtr-bench-differential: random programs under random budgets against the unbudgeted run"};
  int programs = 10000;
  std::uint64_t first_seed = 1;
  int configs = 8;
  int length = 200;
  int steps = 1;
  int max_chain = 1;
  bool no_search_twins = false;
  std::vector<std::string> heuristics;
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  std::string reproducer_path;
  std::string replay_path;
  std::uint64_t budget = 0;
  std::string mode = "bytes";
  std::string heuristic = "dtr-eq";
  std::string inplace = "copy-on-write";
  std::string search = "index";
  std::string recompute_order = "stable-last";
  app.add_option("--programs", programs, "programs to generate")->check(CLI::Range(1, 100000000));
  app.add_option("--first-seed", first_seed, "the first program's seed");
  app.add_option("--configs", configs, "random configurations per program")->check(CLI::Range(1, 1000));
  app.add_option("--length", length, "instructions per program (per step, with --steps)")->check(CLI::Range(1, 100000));
  app.add_option("--steps", steps, "training steps: each program's instructions run this many times over the same "
                 "parameters, as training repeats a step (so that forecasts hold)")->check(CLI::Range(1, 1000));
  app.add_option("--max-chain", max_chain, "unary ops run up to this many times in a row on their own result, the "
                 "inner values released (deep evicted regions)")->check(CLI::Range(1, 4096));
  app.add_option("--heuristics", heuristics, "the campaign draws each configuration's heuristic from these "
                 "(comma-separated; default: every heuristic)")->delimiter(',');
  app.add_flag("--no-search-twins", no_search_twins,
               "do not run each configuration again with the other search (whose decisions must be the same)");
  app.add_option("--jobs", jobs, "threads")->check(CLI::Range(1U, 256U));
  app.add_option("--reproducer", reproducer_path, "write the minimized failing program here");
  app.add_option("--replay", replay_path, "rerun a reproducer (a program's text) instead of a campaign");
  app.add_option("--budget", budget, "--replay: the budget in bytes")->check(CLI::Range(std::uint64_t{1}, ~std::uint64_t{0}));
  app.add_option("--mode", mode, "--replay: bytes or device");
  app.add_option("--heuristic", heuristic, "--replay: the heuristic");
  app.add_option("--inplace", inplace, "--replay: copy-on-write or pin-dependents");
  app.add_option("--search", search, "--replay: index or scan");
  app.add_option("--recompute-order", recompute_order, "--replay: stable-last or inputs");
  std::string compaction = "last-resort";
  app.add_option("--compaction", compaction, "--replay: last-resort, first or off");
  bool expandable = false;
  app.add_flag("--expandable-segments", expandable, "--replay: device budgets over expandable segments");
  CLI11_PARSE(app, argc, argv);
  for (std::string& h : heuristics) h = dtr::parse_heuristic(h, "--heuristics");

  if (!replay_path.empty()) {
    RunConfig config;
    if (budget > 0) config.budget = budget;
    config.mode = dtr::parse_budget_mode(mode, "--mode");
    config.heuristic = dtr::parse_heuristic(heuristic, "--heuristic");
    config.inplace = dtr::parse_inplace_mode(inplace, "--inplace");
    config.search = dtr::parse_search(search, "--search");
    config.recompute_order = dtr::parse_recompute_order(recompute_order, "--recompute-order");
    config.expandable_segments = expandable;
    config.compaction = dtr::parse_compaction(compaction, "--compaction");
    return replay(replay_path, config);
  }

  // Blocks of programs handed to the threads in order; the first failure stops every thread.
  constexpr int kBlock = 50;
  std::atomic<int> next_block{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  CampaignReport total;
  std::optional<CampaignReport> failure;
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    while (!failed.load()) {
      const int block = next_block.fetch_add(1);
      if (block * kBlock >= programs) return;
      CampaignOptions options;
      options.first_seed = first_seed + static_cast<std::uint64_t>(block) * kBlock;
      options.programs = std::min(kBlock, programs - block * kBlock);
      options.configs = configs;
      options.generator.length = length;
      options.generator.steps = steps;
      options.generator.max_chain = max_chain;
      options.searches_agree = !no_search_twins;
      options.heuristics = heuristics;
      const CampaignReport report = run_campaign(options);
      const std::lock_guard lock(mutex);
      total.add_counts(report);
      if (report.failure && (!failure || report.failing_seed < failure->failing_seed)) {
        failure = report;
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d programs of %d instructions x %d step(s) (seeds from %llu), %d budgeted runs: %d fit their "
              "budget, %d evicted, %d made values with a forecast; %llu evictions, %llu rematerializations, %llu "
              "values made with a forecast, %llu relocations; %.1f s (%.0f programs/s, %u threads)\n",
              total.programs, length, steps, static_cast<unsigned long long>(first_seed), total.runs,
              total.feasible_runs, total.runs_with_evictions, total.runs_with_forecasts,
              static_cast<unsigned long long>(total.evictions),
              static_cast<unsigned long long>(total.rematerializations),
              static_cast<unsigned long long>(total.forecast_hits),
              static_cast<unsigned long long>(total.relocations), seconds,
              static_cast<double>(total.programs) / seconds, jobs);
  if (!failure) {
    std::printf("every run read the unbudgeted run's bits, kept its budget and gave back every byte%s\n",
                no_search_twins ? "" : "; the index and the scan made the same decisions in every run");
    return 0;
  }
  const std::string text = reproducer_text(*failure);
  std::printf("FAILED: %s", text.c_str());
  if (!reproducer_path.empty()) {
    std::ofstream(reproducer_path) << to_text(failure->reproducer);
    std::printf("reproducer written to %s; rerun: dtr-bench-differential --replay %s --budget %llu --mode %s "
                "--heuristic %s --inplace %s --search %s --recompute-order %s --compaction %s%s\n",
                reproducer_path.c_str(), reproducer_path.c_str(),
                static_cast<unsigned long long>(failure->failure->config.budget.value_or(0)),
                dtr::to_string(failure->failure->config.mode), failure->failure->config.heuristic.c_str(),
                dtr::to_string(failure->failure->config.inplace), dtr::to_string(failure->failure->config.search),
                dtr::to_string(failure->failure->config.recompute_order),
                dtr::to_string(failure->failure->config.compaction),
                failure->failure->config.expandable_segments ? " --expandable-segments" : "");
  }
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "dtr-bench-differential: %s\n", e.what());
  return 2;
}

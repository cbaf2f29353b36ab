// The shared main of dtr's benchmark programs: Google Benchmark with our defaults (5 repetitions, aggregates
// only; flags on the command line win), the reporter that records medians, and a table printed after the run.
#pragma once

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace dtr::bench {

// The median of `values` (NaN when empty; the mean of the middle two for an even count).
inline double median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Wall-clock seconds one call of `fn` takes (steady clock), for the benches that time by hand.
template <typename Fn>
double seconds(const Fn& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Medians of two calls timed in turns (who goes first alternates each round, so the machine's drift falls on
// both): each one's median time and the median of the per-round ratios candidate / baseline.
struct Alternated {
  double baseline_s = 0;
  double candidate_s = 0;
  double ratio = 0;
};
template <typename Baseline, typename Candidate>
Alternated alternate(const Baseline& baseline, const Candidate& candidate, int rounds) {
  std::vector<double> base_s, candidate_s, ratios;
  for (int round = 0; round < rounds; ++round) {
    double tb = 0, tc = 0;
    if (round % 2 == 0) {
      tb = seconds(baseline);
      tc = seconds(candidate);
    } else {
      tc = seconds(candidate);
      tb = seconds(baseline);
    }
    base_s.push_back(tb);
    candidate_s.push_back(tc);
    ratios.push_back(tc / tb);
  }
  return {median(base_s), median(candidate_s), median(ratios)};
}

// The console report, plus each benchmark's median real time per iteration (ns) and counters: the "median"
// aggregate when there are repetitions, else the median of the runs seen. Keyed by the benchmark's name,
// followed by "/args" when it has arguments.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  using benchmark::ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.iterations == 0) continue;
      std::string key = run.run_name.function_name;
      if (!run.run_name.args.empty()) key += "/" + run.run_name.args;
      const double ns = run.real_accumulated_time / static_cast<double>(run.iterations) * 1e9;
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name != "median") continue;
        medians_[key] = ns;
        for (const auto& [name, counter] : run.counters) median_counters_[key][name] = counter.value;
      } else {
        runs_[key].push_back(ns);
        for (const auto& [name, counter] : run.counters) run_counters_[key][name].push_back(counter.value);
      }
    }
  }

  bool empty() const { return medians_.empty() && runs_.empty(); }

  // NaN when the benchmark did not run (filtered out, or failed).
  double median_ns(const std::string& key) const {
    if (auto it = medians_.find(key); it != medians_.end()) return it->second;
    if (auto it = runs_.find(key); it != runs_.end()) return median(it->second);
    return std::nan("");
  }

  double counter(const std::string& key, const std::string& name) const {
    if (auto it = median_counters_.find(key); it != median_counters_.end()) {
      if (auto c = it->second.find(name); c != it->second.end()) return c->second;
    }
    if (auto it = run_counters_.find(key); it != run_counters_.end()) {
      if (auto c = it->second.find(name); c != it->second.end()) return median(c->second);
    }
    return std::nan("");
  }

 private:
  std::map<std::string, double> medians_;
  std::map<std::string, std::vector<double>> runs_;
  std::map<std::string, std::map<std::string, double>> median_counters_;
  std::map<std::string, std::map<std::string, std::vector<double>>> run_counters_;
};

// Reporter: a benchmark::ConsoleReporter subclass with empty(). print_tables(const Reporter&) runs only when
// something ran (not for --benchmark_list_tests or a filter that matched nothing).
template <typename Reporter, typename Register, typename Print>
int run_benchmarks(int argc, char** argv, Register register_benchmarks, Print print_tables) {
  std::string repetitions = "--benchmark_repetitions=5";
  std::string aggregates_only = "--benchmark_report_aggregates_only=true";
  std::vector<char*> args;
  args.push_back(argv[0]);
  args.push_back(repetitions.data());
  args.push_back(aggregates_only.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);

  register_benchmarks();
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  Reporter reporter(::isatty(STDOUT_FILENO) != 0 ? benchmark::ConsoleReporter::OO_Color
                                                 : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::cout.flush();
  if (!reporter.empty()) print_tables(reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace dtr::bench

// The shared main of dtr's benchmark programs: Google Benchmark with our defaults (5 repetitions, aggregates
// only; flags on the command line win), a reporter that records medians, and a table printed after the run.
#pragma once

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

namespace dtr::bench {

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

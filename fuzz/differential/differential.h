// Differential testing of the runtime (issue 16): a program (program.h) run without a budget is the oracle;
// run under a budget, with any heuristic, budget mode, in-place strategy and search, it must observe the same
// bits (every read, loss, parameter, gradient and optimizer state), keep its budget, and give back every byte;
// and its decisions must not depend on the search (the index is exact: compare_searches).
// A failing program shrinks to a small reproducer (minimize). Used by tests/differential_test.cpp (a bounded
// campaign in CI), bench/differential_campaign.cpp (the long one) and fuzz/differential_fuzz.cpp (libFuzzer).
//
// Thread safety: every function builds its own runtime; separate calls may run on separate threads.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtr/config.h"
#include "program.h"

namespace dtr::differential {

struct RunConfig {
  std::optional<std::uint64_t> budget;  // nullopt: the oracle
  BudgetMode mode = BudgetMode::bytes;
  std::string heuristic = "dtr-eq";
  InplaceMode inplace = InplaceMode::copy_on_write;
  EvictionSearch search = EvictionSearch::index;
  RecomputeOrder recompute_order = RecomputeOrder::stable_last;
  bool expandable_segments = false;  // device mode: the allocator maps pages of one range for large blocks
  Compaction compaction = Compaction::last_resort;  // when the allocator moves blocks out of a request's way
};
std::string describe(const RunConfig& config);
// The runtime's configuration for `config`: op-count clock, flop costs, no thrash limit (a campaign explores
// budgets down to the smallest that fits), allocator segments of a few KiB so that device budgets fragment.
Config runtime_config(const RunConfig& config);

struct Observation {
  bool feasible = true;  // false: the program ran out of memory (dtr::OutOfMemory)
  std::string error;     // any other exception: "type: message"
  std::vector<std::pair<std::string, std::vector<float>>> values;  // what the program read, in order
  std::uint64_t peak_resident_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t allocated_at_end = 0;  // after every handle died: must be 0
  std::uint64_t evictions = 0;
  std::uint64_t rematerializations = 0;
  std::uint64_t forecast_hits = 0;  // values made with a forecast (RuntimeStats::forecast_hits)
  std::uint64_t relocations = 0;    // storages the allocator's compaction moved (RuntimeStats::relocations)
};

// Runs `program` in a fresh CPU runtime.
Observation run(const Program& program, const RunConfig& config);

// Empty when `observed` (run under `config`) agrees with `oracle`; else what differs, first difference first.
std::string compare(const Observation& oracle, const Observation& observed, const RunConfig& config);

// Empty when `observed` (run under `config`) and `other` (the same config with the other search: index for
// scan, scan for index) made the same decisions: the eviction index is exact, so the two must evict, recompute
// and peak alike; else what differs.
std::string compare_searches(const Observation& observed, const Observation& other, const RunConfig& config);
RunConfig with_other_search(RunConfig config);

struct Failure {
  RunConfig config;
  std::string what;
};
// Runs the oracle and then each config; the first that disagrees with the oracle, or, with `searches_agree`,
// whose decisions differ from the other search's (compare_searches). An oracle that fails (an error, a leak)
// is a failure of the oracle's config.
std::optional<Failure> check(const Program& program, std::span<const RunConfig> configs, bool searches_agree = false);

// `count` configurations drawn from `seed`: a heuristic (from `heuristics`; empty: every heuristic), budget mode,
// in-place strategy, search, recomputation order and compaction each, and a budget from 15% to 95% of the
// oracle's peak (resident bytes or reserved bytes, by mode).
std::vector<RunConfig> random_configs(std::uint64_t seed, const Observation& oracle, int count,
                                      const std::vector<std::string>& heuristics = {});

// The smallest program found (delta debugging over instructions: chunks, then single instructions) for which
// `fails` still holds; `fails(program)` must hold. Deleting an instruction leaves its values unmade, and the
// instructions that read them are skipped, so every sub-program runs.
Program minimize(const Program& program, const std::function<bool(const Program&)>& fails);

struct CampaignOptions {
  std::uint64_t first_seed = 1;  // programs first_seed, first_seed + 1, ...
  int programs = 100;
  int configs = 4;               // random configurations per program (random_configs)
  GeneratorOptions generator;
  bool minimize = true;          // shrink the first failing program
  bool searches_agree = true;    // each config also runs with the other search, which must decide the same
  std::vector<std::string> heuristics;  // drawn from (random_configs); empty: every heuristic
};

struct CampaignReport {
  int programs = 0;
  int runs = 0;                  // budgeted runs (not counting the other search's twins)
  int feasible_runs = 0;         // of which fit their budget
  int runs_with_evictions = 0;   // of which evicted something
  std::uint64_t evictions = 0;
  std::uint64_t rematerializations = 0;
  std::uint64_t forecast_hits = 0;  // values made with a forecast, over every run
  int runs_with_forecasts = 0;      // runs in which some value was made with a forecast
  std::uint64_t relocations = 0;    // storages compaction moved, over every run
  std::optional<Failure> failure;  // the first failure; the campaign stops there
  std::uint64_t failing_seed = 0;
  Program reproducer;            // the failing program, minimized when asked
  // Adds `other`'s counts (programs to relocations; not its failure) to these: campaigns run in blocks.
  void add_counts(const CampaignReport& other);
};

// Programs generated from consecutive seeds, each checked under its random configurations.
CampaignReport run_campaign(const CampaignOptions& options);

// What to print for a failure: the configuration, what differed and the program's text (parse_program reads
// it; dtr-bench-differential --replay FILE reruns it).
std::string reproducer_text(const CampaignReport& report);

}  // namespace dtr::differential

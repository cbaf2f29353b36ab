// libFuzzer over the differential generator (fuzz/differential/): the input's bytes choose a program (decode),
// its number of steps and longest chain, and two budgeted configurations; each run must read the unbudgeted run's bits, keep its budget and give back
// every byte (differential.h, compare), and decide as the other search does (compare_searches). A failure
// prints the program's text and the configuration, then aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "differential.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtr::differential;
  std::uint64_t seed = 0xCBF29CE484222325ULL;  // FNV-1a of the input: the configurations follow the bytes
  for (std::size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 0x100000001B3ULL;
  GeneratorOptions options;
  options.length = 80;  // short programs: more of them per second, and the minimizer's work is done already
  options.max_dim = 12;
  // One to three training steps (from the second on, `forecast` scores by forecasts) and chains of up to 16
  // unary ops (evicted regions deeper than an event's unmarked search), from the hash's top bits.
  options.steps = 1 + static_cast<int>((seed >> 59) % 3);
  options.max_chain = 1 + static_cast<int>((seed >> 40) % 16);
  const Program program = decode(std::span<const std::uint8_t>(data, size), options);
  const Observation oracle = run(program, RunConfig{});
  std::string what;
  RunConfig failing;
  if (!oracle.error.empty() || !oracle.feasible || oracle.allocated_at_end != 0) {
    what = "the oracle failed: " + (oracle.error.empty() ? std::string("out of memory or a leak") : oracle.error);
  } else {
    for (const RunConfig& config : random_configs(seed, oracle, 2)) {
      const Observation observed = run(program, config);
      what = compare(oracle, observed, config);
      if (what.empty()) what = compare_searches(observed, run(program, with_other_search(config)), config);
      if (!what.empty()) {
        failing = config;
        break;
      }
    }
  }
  if (!what.empty()) {
    std::fprintf(stderr, "\n==dtr-fuzz== differential failure under %s: %s\n%s", describe(failing).c_str(),
                 what.c_str(), to_text(program).c_str());
    std::fflush(stderr);
    std::abort();
  }
  return 0;
}

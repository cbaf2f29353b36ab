// DTR on a uniform chain (forward, then backward reading each activation in reverse) under a budget of
// 2*sqrt(N) tensors: the total ops executed stay O(N), next to Revolve's optimal schedule (design section 9).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "heuristics/revolve.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

using heuristics::revolve_recomputations;

TEST(RevolveFormula, MatchesThePublishedSchedules) {
  // design section 9: n = 100, t* = 845 (s = 2), 490 (3), 374 (4), 222 (10); recomputations = t* - 99.
  EXPECT_EQ(revolve_recomputations(100, 2), 845 - 99);
  EXPECT_EQ(revolve_recomputations(100, 3), 490 - 99);
  EXPECT_EQ(revolve_recomputations(100, 4), 374 - 99);
  EXPECT_EQ(revolve_recomputations(100, 10), 222 - 99);
}

struct ChainRun {
  std::uint64_t forward_ops = 0;
  std::uint64_t total_ops = 0;  // every op executed: first runs and recomputations
  std::uint64_t rematerializations = 0;
};

constexpr std::int64_t kElements = 1024;  // 4 KiB tensors

// One pass in `rt`: x_{i+1} = relu(x_i) for i < n; then g_{i} = add(g_{i+1}, x_i) for i = n-1 .. 0, dropping
// x_i once read. `forward_done` is told when the forward pass is over; returns g_0 (= n + 1 everywhere).
template <typename AfterForward>
Tensor chain_pass(Runtime& rt, int n, AfterForward&& forward_done) {
  std::vector<Tensor> x;
  x.push_back(rt.constant(TensorMeta{{kElements}}, std::vector<float>(kElements, 1.0f)));
  for (int i = 0; i < n; ++i) x.push_back(rt.call1(ops::relu(), {x.back()}));
  forward_done();
  Tensor g = x.back();
  x.pop_back();
  for (int i = n - 1; i >= 0; --i) {
    g = rt.call1(ops::add(), {g, x[static_cast<std::size_t>(i)]});
    x.pop_back();
  }
  return g;
}

Runtime chain_runtime(std::uint64_t budget_tensors, const char* heuristic) {
  return Runtime(deterministic_config(budget_tensors * kElements * sizeof(float), BudgetMode::bytes, heuristic));
}

ChainRun run_chain(int n, std::uint64_t budget_tensors, const char* heuristic) {
  Runtime rt = chain_runtime(budget_tensors, heuristic);
  ChainRun run;
  chain_pass(rt, n, [&] { run.forward_ops = rt.stats().ops; }).to_host();
  const RuntimeStats s = rt.stats();
  run.rematerializations = s.rematerializations;
  run.total_ops = s.ops + s.rematerializations;
  return run;
}

TEST(RuntimeChain, TwoSqrtNBudgetStaysLinear) {
  for (int n : {100, 400, 1600, 10000}) {
    const auto budget = static_cast<std::uint64_t>(2 * std::sqrt(n));
    const ChainRun run = run_chain(n, budget, "dtr-eq");
    const double optimum = revolve_recomputations(n, static_cast<int>(budget) - 3);
    std::printf("chain n=%5d budget %3llu tensors: %7llu ops executed (%.2f n), %7llu recomputations; "
                "Revolve with %llu slots: %7.0f recomputations (ratio %.2f)\n",
                n, static_cast<unsigned long long>(budget), static_cast<unsigned long long>(run.total_ops),
                static_cast<double>(run.total_ops) / n, static_cast<unsigned long long>(run.rematerializations),
                static_cast<unsigned long long>(budget - 3), optimum,
                static_cast<double>(run.rematerializations) / optimum);
    EXPECT_LE(run.total_ops, 4u * static_cast<std::uint64_t>(n)) << "n = " << n;  // 2n without any eviction
    EXPECT_GT(run.rematerializations, 0u);
  }
}

// The chain `passes` times in one runtime, each pass from a fresh input once the last pass's values are gone
// (as training repeats its step): the recomputations of each pass.
std::vector<std::uint64_t> recomputations_per_pass(int n, std::uint64_t budget_tensors, const char* heuristic,
                                                   int passes) {
  Runtime rt = chain_runtime(budget_tensors, heuristic);
  std::vector<std::uint64_t> per_pass;
  for (int pass = 0; pass < passes; ++pass) {
    const std::uint64_t before = rt.stats().rematerializations;
    const Tensor g = chain_pass(rt, n, [] {});
    EXPECT_EQ(g.to_host_as<float>().at(0), static_cast<float>(n + 1)) << heuristic << ", pass " << pass;
    per_pass.push_back(rt.stats().rematerializations - before);
  }
  return per_pass;
}

// `forecast` replaces staleness by the next use the pass before forecasts: from the second pass on it
// recomputes less than in the first, where nothing forecasts (the first step's rule: 1521 here; 1707, more
// than dtr-eq's 1596, with the dependents' half kept to the end: the pass passes its base compute, and
// forecast drops the half there), and less than dtr-eq, which learns nothing.
// docs/results/heuristic-quality.md has the full tables (dtr-bench-heuristic-quality --chain-passes).
TEST(RuntimeChain, ForecastRecomputesLessOnceAPassHasBeenSeen) {
  const std::vector<std::uint64_t> eq = recomputations_per_pass(400, 10, "dtr-eq", 3);
  const std::vector<std::uint64_t> forecast = recomputations_per_pass(400, 10, "forecast", 3);
  EXPECT_EQ(eq[1], eq[0]);
  EXPECT_EQ(eq[2], eq[0]);
  EXPECT_LT(forecast[1], forecast[0]);
  EXPECT_LT(forecast[1], eq[1]);
  EXPECT_EQ(forecast[2], forecast[1]);  // the steady state: pass 2 forecasts pass 3 as pass 1 did pass 2
  EXPECT_GE(static_cast<double>(forecast[1]), revolve_recomputations(400, 10 - 3));
  std::printf("chain n=400 budget 10 tensors, recomputations per pass: dtr-eq %llu %llu %llu, forecast %llu %llu "
              "%llu; Revolve %.0f\n",
              static_cast<unsigned long long>(eq[0]), static_cast<unsigned long long>(eq[1]),
              static_cast<unsigned long long>(eq[2]), static_cast<unsigned long long>(forecast[0]),
              static_cast<unsigned long long>(forecast[1]), static_cast<unsigned long long>(forecast[2]),
              revolve_recomputations(400, 10 - 3));
}

// The first pass, which has nothing to forecast, under the first step's rule: with the dependents' half, a
// chain's reversal at a small budget cascades (70 656 recomputations at 11 tensors of N = 1600, 11.8x Revolve);
// once its recomputation passes its base compute the runtime lets `forecast` drop the half (Heuristic::change_rule),
// and the pass finishes near the rule without it (docs/results/heuristics.md, "A second rule once a run cascades").
TEST(RuntimeChain, ForecastsFirstPassDropsTheDependentsHalfOnceItCascades) {
  const int n = 1600;
  for (const std::uint64_t budget : {10, 11, 20}) {
    const ChainRun run = run_chain(n, budget, "forecast");
    const double optimum = revolve_recomputations(n, static_cast<int>(budget) - 3);
    std::printf("chain n=%d budget %llu tensors, forecast's first pass: %llu recomputations (%.2fx Revolve)\n", n,
                static_cast<unsigned long long>(budget), static_cast<unsigned long long>(run.rematerializations),
                static_cast<double>(run.rematerializations) / optimum);
    EXPECT_LE(static_cast<double>(run.rematerializations), 2.5 * optimum) << budget << " tensors";
  }
}

// forecast+reversal charges a storage its own recomputation where the evicted run it would join fits the memory
// free when the backward comes back for it (heuristics/forecast.cpp): from the second pass on, the chain's runs
// are re-swept once each where they fit, nearer Revolve than forecast's sum over the run.
// docs/results/heuristics.md has the tables (dtr-bench-heuristic-quality --heuristic forecast+reversal).
TEST(RuntimeChain, ForecastReversalReversesTheChainNearerRevolve) {
  for (const std::uint64_t budget : {20, 30, 40}) {
    const std::vector<std::uint64_t> forecast = recomputations_per_pass(400, budget, "forecast", 3);
    const std::vector<std::uint64_t> reversal = recomputations_per_pass(400, budget, "forecast+reversal", 3);
    EXPECT_EQ(reversal[0], forecast[0]) << budget << " tensors: the first pass has nothing forecast";
    EXPECT_LT(reversal[1], forecast[1]) << budget << " tensors";
    EXPECT_EQ(reversal[2], reversal[1]) << budget << " tensors";
    EXPECT_GE(static_cast<double>(reversal[1]), revolve_recomputations(400, static_cast<int>(budget) - 3));
    std::printf("chain n=400 budget %llu tensors, recomputations per pass: forecast %llu %llu %llu, "
                "forecast+reversal %llu %llu %llu; Revolve %.0f\n",
                static_cast<unsigned long long>(budget), static_cast<unsigned long long>(forecast[0]),
                static_cast<unsigned long long>(forecast[1]), static_cast<unsigned long long>(forecast[2]),
                static_cast<unsigned long long>(reversal[0]), static_cast<unsigned long long>(reversal[1]),
                static_cast<unsigned long long>(reversal[2]), revolve_recomputations(400, static_cast<int>(budget) - 3));
  }
}

// Behind the fragmentation-aware windows, under a device budget, the windows' decisions also read the memory
// (Runtime::Impl::evict_window calls begin_decision): the chain stays exact and recomputes less than under
// forecast+window (346 against 350; without the call, as much).
TEST(RuntimeChain, ForecastReversalBehindWindowsUnderADeviceBudgetIsExact) {
  std::vector<std::uint64_t> remats;
  for (const char* heuristic : {"forecast+window", "forecast+reversal+window"}) {
    Runtime rt(deterministic_config(30 * kElements * sizeof(float), BudgetMode::device, heuristic));
    for (int pass = 0; pass < 2; ++pass) {
      const Tensor g = chain_pass(rt, 200, [] {});
      EXPECT_EQ(g.to_host_as<float>().at(0), 201.0f) << heuristic << ", pass " << pass;
    }
    EXPECT_GT(rt.stats().evictions, 0u) << heuristic;
    remats.push_back(rt.stats().rematerializations);
  }
  EXPECT_LT(remats[1], remats[0]);
  std::printf("chain n=200, device budget 30 tensors, two passes: forecast+window %llu recomputations, "
              "forecast+reversal+window %llu\n",
              static_cast<unsigned long long>(remats[0]), static_cast<unsigned long long>(remats[1]));
}

}  // namespace
}  // namespace dtr::test

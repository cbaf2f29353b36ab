// DTR on a uniform chain (forward, then backward reading each activation in reverse) under a budget of
// 2*sqrt(N) tensors: the total ops executed stay O(N), next to Revolve's optimal schedule (design section 9).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

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

// x_{i+1} = relu(x_i) for i < n; then g_{i} = add(g_{i+1}, x_i) for i = n-1 .. 0, dropping x_i once read.
ChainRun run_chain(int n, std::uint64_t budget_tensors, const char* heuristic) {
  constexpr std::int64_t kElements = 1024;  // 4 KiB tensors
  Runtime rt(deterministic_config(budget_tensors * kElements * sizeof(float), BudgetMode::bytes, heuristic));
  std::vector<Tensor> x;
  x.push_back(rt.constant(TensorMeta{{kElements}}, std::vector<float>(kElements, 1.0f)));
  for (int i = 0; i < n; ++i) x.push_back(rt.call1(ops::relu(), {x.back()}));
  ChainRun run;
  run.forward_ops = rt.stats().ops;
  Tensor g = x.back();
  x.pop_back();
  for (int i = n - 1; i >= 0; --i) {
    g = rt.call1(ops::add(), {g, x[static_cast<std::size_t>(i)]});
    x.pop_back();
  }
  g.to_host();
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

}  // namespace
}  // namespace dtr::test

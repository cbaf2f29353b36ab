// A budget set on a running runtime (runtime/eviction.cpp, start_heuristic): until then the heuristic hears no
// event, so an unbudgeted run pays nothing for it; at the first budget it is told what was evicted meanwhile
// (the dead values kept for their lineage, Runtime::evict's), and from then on it decides as a heuristic that
// had heard everything.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::int64_t kElements = 256;  // 1 KiB tensors

struct BudgetRun {
  std::uint64_t remats = 0;
  std::vector<std::vector<float>> values;
  std::uint64_t records_before_budget = 0;
};

// c1 ends a chain x -> a1 -> b1 -> c1 whose middle values the program dropped (dead, evicted at once, kept for
// c1's lineage); c2 is one op from y, made after c1. With a budget that holds x, y, c1 and c2 but not d too,
// one of c1 and c2 goes: c1 is staler, but evicting it would cost its dead lineage as well (three ops against
// one), which every heuristic here counts. Told nothing of a1 and b1, it would evict c1 and remake all three.
// `budget_first`: the budget is set at the start (the heuristic hears every event), else only before d.
BudgetRun run(const std::string& heuristic, bool budget_first) {
  Runtime rt(deterministic_config(budget_first ? std::optional<std::uint64_t>{std::uint64_t{1} << 30} : std::nullopt,
                                  BudgetMode::bytes, heuristic));
  BudgetRun r;
  const Tensor x = constant(rt, {kElements}, 0.5f);
  Tensor a1 = rt.call1(ops::tanh(), {x});
  Tensor b1 = rt.call1(ops::tanh(), {a1});
  const Tensor c1 = rt.call1(ops::tanh(), {b1});
  a1 = Tensor();
  b1 = Tensor();
  const Tensor y = constant(rt, {kElements}, -0.5f);
  const Tensor c2 = rt.call1(ops::tanh(), {y});
  r.records_before_budget = rt.footprint().heuristic_records;
  rt.set_memory_budget(4 * 1024 + 512);  // x, y, c1, c2 and not d
  const Tensor d = rt.call1(ops::sigmoid(), {x});
  r.values.push_back(d.to_host());
  r.values.push_back(c1.to_host());
  r.values.push_back(c2.to_host());
  r.remats = rt.stats().rematerializations;
  return r;
}

TEST(LateBudget, TheHeuristicHearsWhatWasEvictedBeforeTheBudget) {
  for (const char* heuristic : {"forecast", "dtr-eq", "dtr", "msps"}) {
    SCOPED_TRACE(heuristic);
    const BudgetRun first = run(heuristic, /*budget_first=*/true);
    const BudgetRun late = run(heuristic, /*budget_first=*/false);
    EXPECT_EQ(first.values, late.values);
    EXPECT_EQ(first.remats, 1u) << "c2 should have gone, remade by one op";
    EXPECT_EQ(late.remats, first.remats) << "told of a1 and b1 at the budget, it decides the same";
    EXPECT_EQ(late.records_before_budget, 2u) << "a1 and b1 wait to be told (the footprint counts them)";
  }
}

// Without a budget the heuristic keeps nothing, however long the program runs: the evicted values wait in a
// list that holds only those still alive (a dead value's lineage dies with the last value that needs it).
TEST(LateBudget, WithoutABudgetOnlyTheLiveEvictedValuesWait) {
  Runtime rt(deterministic_config(std::nullopt, BudgetMode::bytes, "forecast"));
  const Tensor x = constant(rt, {kElements}, 0.25f);
  for (int step = 0; step < 50; ++step) {
    Tensor a = rt.call1(ops::tanh(), {x});
    Tensor b = rt.call1(ops::tanh(), {a});
    a = Tensor();  // dead, kept (evicted) for b's lineage: one waiting
    EXPECT_EQ(rt.footprint().heuristic_records, 1u) << step;
    const std::vector<float> v = rt.call1(ops::sum(), {b}).to_host();
    EXPECT_EQ(v.size(), 1u);
  }  // b dies each step, and a's lineage with it
  EXPECT_EQ(rt.footprint().heuristic_records, 0u);
  // An evicted value brought back before any budget leaves the list too.
  Tensor c = rt.call1(ops::tanh(), {x});
  ASSERT_TRUE(rt.evict(c));
  EXPECT_EQ(rt.footprint().heuristic_records, 1u);
  (void)c.to_host();  // remade
  EXPECT_EQ(rt.footprint().heuristic_records, 0u);
  EXPECT_EQ(rt.stats().rematerializations, 1u);
}

}  // namespace
}  // namespace dtr::test

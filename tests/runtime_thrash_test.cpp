// The thrash limit (Config::thrash_limit, DTR_THRASH_LIMIT): a rematerialization cascade under a tight budget
// stops with dtr::Thrashing as soon as recomputation passes the limit, inside the op that cascades, and the
// runtime goes on after it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "env_guard.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::int64_t kWidth = 256;  // floats per tensor: every op costs kWidth flops

// A ladder: x[k+1] = x[k] + y[k] and y[k+1] = x[k] * y[k] (both rungs read both rails), every rung kept, then a
// backward-like pass from the top that reads x[k] and y[k] for k = n..0. Under LRU and room for a few tensors,
// each read recomputes its rung from far below, evicting what the next read needs: a cascade.
struct Ladder {
  std::vector<Tensor> x;
  std::vector<Tensor> y;
};

Ladder climb(Runtime& rt, int rungs) {
  Ladder l;
  std::vector<float> a(kWidth);
  std::vector<float> b(kWidth);
  for (std::int64_t i = 0; i < kWidth; ++i) {
    a[static_cast<std::size_t>(i)] = 0.5f + 0.001f * static_cast<float>(i);
    b[static_cast<std::size_t>(i)] = 0.9f - 0.001f * static_cast<float>(i);
  }
  l.x.push_back(rt.constant(TensorMeta{{kWidth}}, a));
  l.y.push_back(rt.constant(TensorMeta{{kWidth}}, b));
  for (int k = 0; k < rungs; ++k) {
    l.x.push_back(rt.call1(ops::add(), {l.x[k], l.y[k]}));
    l.y.push_back(rt.call1(ops::mul(), {l.x[k], l.y[k]}));
  }
  return l;
}

// The backward-like pass from rung `from` down: g accumulates x[k] * y[k]. Returns g's values.
std::vector<float> descend(Runtime& rt, const Ladder& l, Tensor& g, int from) {
  for (int k = from; k >= 0; --k) {
    const Tensor rung = rt.call1(ops::mul(), {l.x[static_cast<std::size_t>(k)], l.y[static_cast<std::size_t>(k)]});
    g = g.defined() ? rt.call1(ops::add(), {g, rung}) : rung;
  }
  return g.to_host();
}

constexpr int kRungs = 60;

Config ladder_config(std::optional<double> limit) {
  Config config = deterministic_config(std::uint64_t{12} * kWidth * sizeof(float), BudgetMode::bytes, "lru");
  config.thrash_limit = limit;
  return config;
}

std::vector<float> unbudgeted_result() {
  Runtime rt(deterministic_config());
  const Ladder l = climb(rt, kRungs);
  Tensor g;
  return descend(rt, l, g, kRungs);
}

TEST(RuntimeThrash, WithoutALimitTheCascadeRunsToAnExactButCostlyEnd) {
  Runtime rt(ladder_config(std::nullopt));
  const Ladder l = climb(rt, kRungs);
  Tensor g;
  EXPECT_TRUE(bitwise_equal(descend(rt, l, g, kRungs), unbudgeted_result()));
  // The cascade the limit exists for: recomputation dwarfs the program's own work.
  EXPECT_GT(rt.stats().overhead(), 8.0) << "the ladder no longer cascades; the tests below need one that does";
}

TEST(RuntimeThrash, TheLimitStopsTheCascadeWithinItsWorkAtTheRecomputationThatPassesIt) {
  for (const double limit : {2.0, 3.0}) {
    Runtime rt(ladder_config(limit));
    const Ladder l = climb(rt, kRungs);
    Tensor g;
    try {
      descend(rt, l, g, kRungs);
      ADD_FAILURE() << "no Thrashing at limit " << limit;
    } catch (const Thrashing& e) {
      const RuntimeStats s = rt.stats();
      // Checked at every recomputation: past the limit by one op's cost (every op costs kWidth flops), no more.
      EXPECT_GT(s.remat_compute, (limit - 1) * s.base_compute);
      EXPECT_LE(s.remat_compute, (limit - 1) * s.base_compute + kWidth);
      const std::string message = e.what();
      // ... and where the recomputation went: the costliest recomputed op first, with its share and runs.
      const OpRecomputations top = rt.recomputations_by_op().at(0);
      const std::string most = "; recomputed most: " + top.op + " ";
      EXPECT_NE(message.find(most), std::string::npos) << most << " in " << message;
      EXPECT_NE(message.find("(" + std::to_string(top.runs) + " runs)"), std::string::npos) << message;
      for (const char* part : {"thrashing running op 'mul'", "(recomputing '", "past the thrash limit",
                               "under a budget of 12.00 KiB", "bytes mode", "heuristic lru", "DTR_MEMORY_BUDGET",
                               "DTR_HEURISTIC", "DTR_THRASH_LIMIT"}) {
        EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
      }
    }
  }
}

TEST(RuntimeThrash, TheRuntimeGoesOnAfterAThrashing) {
  Runtime rt(ladder_config(2.0));
  const Ladder l = climb(rt, kRungs);
  Tensor g;
  int done = kRungs;
  try {
    descend(rt, l, g, kRungs);
    FAIL() << "no Thrashing";
  } catch (const Thrashing&) {
  }
  // No pin survives the exception: everything but the constants can be evicted, and is.
  for (const Tensor& t : l.x) rt.evict(t);
  for (const Tensor& t : l.y) rt.evict(t);
  if (g.defined()) rt.evict(g);
  EXPECT_EQ(rt.resident_bytes(), 2 * kWidth * sizeof(float));
  // A larger budget, and the program finishes with the unbudgeted bits: the backward pass is replayed from the
  // top (g was cut short), exactly.
  rt.set_memory_budget(std::nullopt);
  Tensor fresh;
  EXPECT_TRUE(bitwise_equal(descend(rt, l, fresh, done), unbudgeted_result()));
  // Releasing everything leaves nothing behind.
  g = Tensor();
  fresh = Tensor();
}

TEST(RuntimeThrash, AfterAThrashingTheCountStartsAgain) {
  Runtime rt(ladder_config(2.0));
  const Ladder l = climb(rt, kRungs);
  Tensor g;
  EXPECT_THROW(descend(rt, l, g, kRungs), Thrashing);
  const double thrown_at = rt.stats().remat_compute;
  // The same budget: the next op that cascades recomputes up to the limit again before it stops, not at once.
  Tensor again;
  EXPECT_THROW(descend(rt, l, again, kRungs), Thrashing);
  EXPECT_GT(rt.stats().remat_compute - thrown_at, rt.stats().base_compute * 0.5);
}

// A heuristic with a second rule (Heuristic::change_rule: forecast drops its first step's dependents' half) is
// offered it once, when recomputation first passes the base compute; the limit then counts from there, so the
// new rule is judged on its own. The ladder cascades under both of forecast's rules: the first crossing of the
// limit (2) changes the rule, the second throws, past twice the base compute. lru, with one rule, throws at the
// first (TheLimitStopsTheCascadeWithinItsWorkAtTheRecomputationThatPassesIt).
TEST(RuntimeThrash, AHeuristicThatChangesItsRuleIsJudgedFromTheChange) {
  const auto forecast_config = [](std::int64_t widths, std::optional<double> limit) {
    Config config = ladder_config(limit);
    config.memory_budget = static_cast<std::uint64_t>(widths) * kWidth * sizeof(float);
    config.heuristic = "forecast";
    return config;
  };
  // 12 widths: 2.48x the base compute in all. The rule changes at 2x and the run goes on to an exact end, as
  // without a limit, where lru stops at 2x.
  double unlimited = 0;
  {
    Runtime rt(forecast_config(12, std::nullopt));
    const Ladder l = climb(rt, kRungs);
    Tensor g;
    EXPECT_TRUE(bitwise_equal(descend(rt, l, g, kRungs), unbudgeted_result()));
    unlimited = rt.stats().remat_compute;
  }
  {
    Runtime rt(forecast_config(12, 2.0));
    const Ladder l = climb(rt, kRungs);
    Tensor g;
    EXPECT_TRUE(bitwise_equal(descend(rt, l, g, kRungs), unbudgeted_result()));
    EXPECT_GT(rt.stats().remat_compute, rt.stats().base_compute) << "the run must pass the first crossing";
    EXPECT_EQ(rt.stats().remat_compute, unlimited);  // the limit decides nothing before it stops a run
  }
  // 10 widths: 3.85x without a limit. Under the limit it stops at the second crossing: its recomputation then
  // is the base compute at the change plus the base compute now, well past the first crossing (where a
  // heuristic with one rule stops, within one op's cost).
  Runtime rt(forecast_config(10, 2.0));
  const Ladder l = climb(rt, kRungs);
  Tensor g;
  EXPECT_THROW(descend(rt, l, g, kRungs), Thrashing);
  EXPECT_GT(rt.stats().remat_compute, 1.5 * rt.stats().base_compute);
}

TEST(RuntimeThrash, WithoutABudgetThereIsNoLimit) {
  // Recomputations the program asks for itself (Runtime::evict) cannot cascade: no budget, no Thrashing.
  Config config = deterministic_config();
  config.thrash_limit = 1.0;
  Runtime rt(config);
  const Tensor x = constant(rt, {64}, 1.0f);
  const Tensor y = rt.call1(ops::relu(), {x});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(rt.evict(y));
    rt.materialize(y);
  }
  EXPECT_EQ(rt.stats().rematerializations, 5u);
}

TEST(RuntimeThrash, BadLimitsAreConfigErrors) {
  for (const double bad : {0.5, 0.0, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    Config config;
    config.thrash_limit = bad;
    expect_error<ConfigError>([&] { Runtime rt(config); }, {"Config::thrash_limit", ">= 1"});
  }
  Config config;
  config.thrash_base_compute = -1;
  expect_error<ConfigError>([&] { Runtime rt(config); }, {"Config::thrash_base_compute"});
}

TEST(RuntimeThrash, TheEnvironmentSetsTheLimit) {
  EXPECT_EQ(parse_thrash_limit("2"), 2.0);
  EXPECT_EQ(parse_thrash_limit("3.5"), 3.5);
  EXPECT_EQ(parse_thrash_limit("1"), 1.0);
  EXPECT_EQ(parse_thrash_limit("off"), std::nullopt);
  for (const char* bad : {"", "0.5", "-2", "abc", "2x", "nan", "inf", "OFF"}) {
    expect_error<ConfigError>([&] { parse_thrash_limit(bad); },
                              {"DTR_THRASH_LIMIT=\"", bad, "\" is not a thrash limit", ">= 1", "or off"});
  }
  {
    EnvGuard env("DTR_THRASH_LIMIT", "off");
    EXPECT_EQ(Config::from_env(0).thrash_limit, std::nullopt);
  }
  {
    EnvGuard env("DTR_THRASH_LIMIT", "4");
    EXPECT_EQ(Config::from_env(0).thrash_limit, 4.0);
  }
  EXPECT_EQ(Config{}.thrash_limit, 2.0);  // the DTR authors' limit by default
}

TEST(RuntimeThrash, SetMemoryBudgetEvictsToASmallerBudgetAndRefusesWhatCannotFit) {
  for (const BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
    Config config = small_segments(deterministic_config(std::nullopt, mode));
    Runtime rt(config);
    const Ladder l = climb(rt, 20);
    const std::uint64_t before =
        mode == BudgetMode::bytes ? rt.resident_bytes() : rt.allocator().stats().reserved_bytes.current;
    rt.set_memory_budget(before / 2);  // no budget before: the index is built now
    EXPECT_EQ(rt.config().memory_budget, before / 2);
    if (mode == BudgetMode::bytes) {
      EXPECT_LE(rt.resident_bytes(), before / 2);
    } else {
      EXPECT_LE(rt.allocator().stats().reserved_bytes.current, before / 2);
    }
    Tensor g;
    rt.set_memory_budget(std::nullopt);
    // Without a budget no score is kept and nothing is chosen: the recomputations and deaths of the descent
    // cost no search time.
    const std::uint64_t searched = rt.stats().search_ns;
    const std::vector<float> values = descend(rt, l, g, 20);
    EXPECT_GT(rt.stats().rematerializations, 0u);
    EXPECT_EQ(rt.stats().search_ns, searched);
    rt.set_memory_budget(before / 3);
    EXPECT_GT(rt.stats().evictions, 0u);
    // The two constants cannot go: a budget below them is refused and the old one kept.
    g = Tensor();
    expect_error<OutOfMemory>([&] { rt.set_memory_budget(64); }, {"set_memory_budget", "budget 64 B"});
    EXPECT_EQ(rt.config().memory_budget, before / 3);
    expect_error<InvalidArgument>([&] { rt.set_memory_budget(0); }, {"0 bytes"});
    Runtime reference(deterministic_config());
    const Ladder r = climb(reference, 20);
    Tensor h;
    EXPECT_TRUE(bitwise_equal(values, descend(reference, r, h, 20)));
  }
}

}  // namespace
}  // namespace dtr::test

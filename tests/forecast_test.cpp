// The forecast heuristic (heuristics/forecast.cpp, runtime/forecast.h): a step's uses forecast the next
// step's, Belady-style, and a value made and not read yet goes last; without a forecast it chooses by
// staleness (tests/forecast_first_step_test.cpp: what it charges where nothing was made the same way before).
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

struct StepRecord {
  std::vector<std::uint64_t> remats;  // rematerializations in each step
  std::vector<std::vector<float>> values;
  std::vector<std::uint64_t> forecast_records;  // after each step
  std::vector<std::uint64_t> forecast_hits;     // values made with a forecast, in each step
};

// Each step: a and b from the step's batches x and y; a is read (so b is the stale one) just before d needs
// room for one of them, then b and d are read, and a once more at the end, when there is room again.
// Staleness evicts b, which is read next, and then a to remake b: two recomputations. The last step's uses say
// a is read last: evicting it costs one.
StepRecord run_steps(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget) {
  Runtime rt(deterministic_config(budget, BudgetMode::bytes, heuristic));
  StepRecord record;
  std::uint64_t before = 0;
  std::uint64_t hits_before = 0;
  for (int step = 0; step < steps; ++step) {
    Tensor x = constant(rt, {kElements}, static_cast<float>(step));
    Tensor y = constant(rt, {kElements}, static_cast<float>(-step));
    Tensor a = rt.call1(ops::tanh(), {x});  // a and b cost the same: staleness alone parts them
    Tensor b = rt.call1(ops::tanh(), {y});
    record.values.push_back(rt.call1(ops::sum(), {x}).to_host());
    record.values.push_back(rt.call1(ops::sum(), {a}).to_host());  // a read: b is the stale one
    Tensor d = rt.call1(ops::sigmoid(), {x});                      // no room for a, b and d
    record.values.push_back(rt.call1(ops::sum(), {b}).to_host());  // b next
    record.values.push_back(rt.call1(ops::sum(), {d}).to_host());
    d = Tensor();
    b = Tensor();
    record.values.push_back(rt.call1(ops::sum(), {a}).to_host());  // a last
    const std::uint64_t remats = rt.stats().rematerializations;
    record.remats.push_back(remats - before);
    before = remats;
    record.forecast_records.push_back(rt.footprint().forecast_records);
    record.forecast_hits.push_back(rt.stats().forecast_hits - hits_before);
    hits_before = rt.stats().forecast_hits;
  }
  return record;
}

TEST(Forecast, TheLastStepsUsesChooseTheVictimWhereStalenessMisleads) {
  const int steps = 6;
  const StepRecord plain = run_steps("dtr-eq", steps, std::nullopt);
  const std::uint64_t budget = 4 * 1024 + 512;  // x, y and two of a, b, d (sums are 4 bytes)
  const StepRecord eq = run_steps("dtr-eq", steps, budget);
  const StepRecord forecast = run_steps("forecast", steps, budget);
  EXPECT_EQ(eq.values, plain.values);
  EXPECT_EQ(forecast.values, plain.values);
  // The first step has nothing to forecast from: staleness decides, as for dtr-eq.
  EXPECT_EQ(eq.remats[0], 2u);
  EXPECT_EQ(forecast.remats[0], 2u);
  for (int s = 1; s < steps; ++s) {
    EXPECT_EQ(eq.remats[s], 2u) << "step " << s;
    EXPECT_EQ(forecast.remats[s], 1u) << "step " << s << ": a, read last, should have gone";
  }
  // The forecasts kept are one per signature: flat from step to step; none for another heuristic, nor without
  // a budget (nothing is decided there).
  EXPECT_GT(forecast.forecast_records[1], 0u);
  EXPECT_EQ(forecast.forecast_records.back(), forecast.forecast_records[1]);
  EXPECT_EQ(eq.forecast_records.back(), 0u);
  const StepRecord unbudgeted = run_steps("forecast", steps, std::nullopt);
  EXPECT_EQ(unbudgeted.values, plain.values);
  EXPECT_EQ(unbudgeted.forecast_records.back(), 0u);
  // Every value a later step makes (a, b, d and the five sums) was made the same way the step before: all eight
  // are forecast. In the first step only a's second sum is, made as its first was; none for another heuristic
  // or without a budget.
  EXPECT_EQ(forecast.forecast_hits[0], 1u);
  for (int s = 1; s < steps; ++s) EXPECT_EQ(forecast.forecast_hits[s], 8u) << "step " << s;
  EXPECT_EQ(eq.forecast_hits, std::vector<std::uint64_t>(steps, 0));
  EXPECT_EQ(unbudgeted.forecast_hits, std::vector<std::uint64_t>(steps, 0));
}

// A budget set on a running runtime starts the forecasts: the steps after it forecast from the one before.
TEST(Forecast, ABudgetSetLaterStartsForecasting) {
  Runtime rt(deterministic_config(std::nullopt, BudgetMode::bytes, "forecast"));
  const auto step = [&](float v) {
    Tensor x = constant(rt, {kElements}, v);
    Tensor a = rt.call1(ops::tanh(), {x});
    return rt.call1(ops::sum(), {a}).to_host();
  };
  (void)step(1);
  EXPECT_EQ(rt.footprint().forecast_records, 0u);
  rt.set_memory_budget(std::uint64_t{1} << 30);
  (void)step(2);
  (void)step(3);
  EXPECT_GT(rt.footprint().forecast_records, 0u);
}

// Each step, as an LSTM's backward: v is made from g (one cheap op, its input resident), and d needs room while
// both are held; then g is released and v read. Evicting v then costs its lineage back through g's (three
// ops), which no score taken while g is resident sees; w, read already and read again last, costs one
// expensive op. The step's uses say that v, made and not read yet, is read: it goes after the others.
StepRecord run_fresh_value_steps(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget) {
  Runtime rt(deterministic_config(budget, BudgetMode::bytes, heuristic));
  StepRecord record;
  std::uint64_t before = 0;
  for (int step = 0; step < steps; ++step) {
    Tensor x = constant(rt, {kElements}, static_cast<float>(step) / 64.0f);
    Tensor y = constant(rt, {16, 16}, static_cast<float>(-step) / 64.0f);
    Tensor g = rt.call1(ops::tanh(), {rt.call1(ops::tanh(), {rt.call1(ops::tanh(), {x})})});
    Tensor w = rt.call1(ops::matmul(), {y, y});
    record.values.push_back(rt.call1(ops::sum(), {w}).to_host());
    Tensor v = rt.call1(ops::sigmoid(), {g});
    Tensor d = rt.call1(ops::sigmoid(), {x});  // no room for g, w, v and d
    g = Tensor();
    record.values.push_back(rt.call1(ops::sum(), {v}).to_host());
    record.values.push_back(rt.call1(ops::sum(), {d}).to_host());
    record.values.push_back(rt.call1(ops::sum(), {w}).to_host());
    const std::uint64_t remats = rt.stats().rematerializations;
    record.remats.push_back(remats - before);
    before = remats;
  }
  return record;
}

TEST(Forecast, AValueMadeAndNotReadYetGoesAfterTheOthers) {
  const int steps = 5;
  const StepRecord plain = run_fresh_value_steps("dtr-eq", steps, std::nullopt);
  const std::uint64_t budget = 5 * 1024 + 512;  // x, y and three of g, w, v, d (sums are 4 bytes)
  const StepRecord eq = run_fresh_value_steps("dtr-eq", steps, budget);
  const StepRecord forecast = run_fresh_value_steps("forecast", steps, budget);
  EXPECT_EQ(eq.values, plain.values);
  EXPECT_EQ(forecast.values, plain.values);
  // Every step under dtr-eq evicts v and remakes it through g's lineage (5 recomputations). Under forecast the
  // first step has nothing to forecast from: v, not read yet, keeps its bare staleness while g and w, read,
  // take the first step's prior, and g, the cheaper, goes; from the second the forecast says v is read, and it
  // goes after the others: g again, which the step then releases. Nothing is recomputed (5 per step with the
  // last-resort rule off, shown once).
  for (int s = 0; s < steps; ++s) EXPECT_EQ(eq.remats[s], 5u) << "step " << s;
  for (int s = 0; s < steps; ++s) EXPECT_EQ(forecast.remats[s], 0u) << "step " << s << ": v, not read yet, went";
}

// The recomputations by op since `before` (the runtime's totals then), which it updates to now.
std::vector<OpRecomputations> recomputed_since(const Runtime& rt, std::vector<OpRecomputations>& before) {
  std::vector<OpRecomputations> now = rt.recomputations_by_op();
  std::vector<OpRecomputations> since;
  for (const OpRecomputations& r : now) {
    std::uint64_t earlier = 0;
    for (const OpRecomputations& b : before) earlier += b.op == r.op ? b.runs : 0;
    if (r.runs > earlier) since.push_back({r.op, r.runs - earlier, 0});
  }
  before = std::move(now);
  return since;
}

using PerStep = std::vector<std::vector<OpRecomputations>>;

// Runs `steps` steps of `step(rt, x, y, values)` in one runtime, x and y the step's batches ([256] and
// [16, 16]); returns the recomputations by op of each step.
template <typename Step>
PerStep recomputations_per_step(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget,
                                Step&& step) {
  Runtime rt(deterministic_config(budget, BudgetMode::bytes, heuristic));
  PerStep per_step;
  std::vector<OpRecomputations> before;
  for (int s = 0; s < steps; ++s) {
    Tensor x = constant(rt, {kElements}, static_cast<float>(s) / 64.0f);
    Tensor y = constant(rt, {16, 16}, static_cast<float>(-s) / 64.0f);
    step(rt, x, y);
    per_step.push_back(recomputed_since(rt, before));
  }
  return per_step;
}

using StepProgram = PerStep (*)(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget,
                                std::vector<std::vector<float>>* values);

struct EqAndForecast {
  PerStep eq;
  PerStep forecast;
};

// `program` under `budget` with dtr-eq and with forecast; both must give the unbudgeted run's values.
EqAndForecast run_eq_and_forecast(StepProgram program, int steps, std::uint64_t budget) {
  std::vector<std::vector<float>> plain, eq, forecast;
  program("dtr-eq", steps, std::nullopt, &plain);
  EqAndForecast runs{program("dtr-eq", steps, budget, &eq), program("forecast", steps, budget, &forecast)};
  EXPECT_EQ(eq, plain);
  EXPECT_EQ(forecast, plain);
  return runs;
}

std::string recomputed(const std::vector<OpRecomputations>& runs) {
  std::string out;
  for (const OpRecomputations& r : runs) out += r.op + " x" + std::to_string(r.runs) + " ";
  return out;
}

// Each step: w (one expensive product) is made and read, v (one cheap op of x) is made, and d needs the room
// of one of them while both are held; then v is read, d, and w last. v is not read yet while its forecast says
// it will be, but x, its input, is read again (by d) and kept: remaking v later costs its tanh alone, as
// now, so v is no last resort and goes, as by its cost and distance (cheap, and w is read later). As a last
// resort (the rule before it asked about the inputs), w went from the second step and the matmul was remade.
PerStep run_unread_of_kept_input(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget,
                                 std::vector<std::vector<float>>* values) {
  return recomputations_per_step(heuristic, steps, budget, [&](Runtime& rt, const Tensor& x, const Tensor& y) {
    Tensor w = rt.call1(ops::matmul(), {y, y});
    values->push_back(rt.call1(ops::sum(), {w}).to_host());
    Tensor v = rt.call1(ops::tanh(), {x});
    Tensor d = rt.call1(ops::sigmoid(), {x});  // no room for w, v and d
    values->push_back(rt.call1(ops::sum(), {v}).to_host());
    values->push_back(rt.call1(ops::sum(), {d}).to_host());
    values->push_back(rt.call1(ops::sum(), {w}).to_host());
  });
}

// The fused attention's weights: an output made and not read until the backward, from qkv, which the backward
// reads too. Keeping such a value last kept each layer's largest value resident at 30% of the Transformer's
// peak (docs/results/heuristic-forecast.md, "Fifth version").
TEST(Forecast, AValueNotReadYetWhoseInputsTheProgramReadsAgainIsNoLastResort) {
  const int steps = 4;
  // x, y and two of w, v, d (sums are 4 bytes)
  const EqAndForecast runs = run_eq_and_forecast(run_unread_of_kept_input, steps, 4 * 1024 + 512);
  // Both evict v for d, then d to remake v, and remake d, at every step.
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(recomputed(runs.eq[s]), "sigmoid x1 tanh x1 ") << "step " << s;
    EXPECT_EQ(recomputed(runs.forecast[s]), "sigmoid x1 tanh x1 ") << "step " << s;
  }
}

// Each step, as an LSTM cell remade for its backward: g (one expensive product, which the program releases)
// and a (one cheap op of g, held) are remade when the program reads a; then d needs the room of one of them.
// Scored by its own cost g stays and a goes (nothing evicted beside a: its cost looks like one cheap op), to be
// remade; released, g goes first, costing nothing: the program never reads it, and a keeps what it needs.
PerStep run_remade_cell_steps(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget,
                              std::vector<std::vector<float>>* values) {
  return recomputations_per_step(heuristic, steps, budget, [&](Runtime& rt, const Tensor& x, const Tensor& y) {
    Tensor g = rt.call1(ops::matmul(), {y, y});
    Tensor a = rt.call1(ops::sigmoid(), {g});
    values->push_back(rt.call1(ops::sum(), {a}).to_host());
    g = Tensor();  // released: evicted at once, and remade only to remake a
    EXPECT_TRUE(rt.evict(a));
    values->push_back(rt.call1(ops::sum(), {a}).to_host());  // remakes g, then a
    Tensor d = rt.call1(ops::sigmoid(), {x});                // no room for g, a and d
    values->push_back(rt.call1(ops::sum(), {d}).to_host());
    values->push_back(rt.call1(ops::sum(), {a}).to_host());
  });
}

TEST(Forecast, AValueTheProgramReleasedGoesBeforeTheValuesItHolds) {
  const int steps = 4;
  // x, y and two of g, a, d (sums are 4 bytes)
  const EqAndForecast runs = run_eq_and_forecast(run_remade_cell_steps, steps, 4 * 1024 + 512);
  // dtr-eq (and forecast with released values scored by their own cost) evict a for d and remake it again.
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(recomputed(runs.eq[s]), "matmul x1 sigmoid x2 ") << "step " << s;
    EXPECT_EQ(recomputed(runs.forecast[s]), "matmul x1 sigmoid x1 ") << "step " << s << ": g should have gone";
  }
}

// As above, and b (another cheap op of g, held) was evicted too and is read after d: g is what b is remade
// from, and evicting it costs its product again. A released value goes first only while nothing the program
// holds waits on it evicted.
PerStep run_waiting_cell_steps(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget,
                               std::vector<std::vector<float>>* values) {
  return recomputations_per_step(heuristic, steps, budget, [&](Runtime& rt, const Tensor& x, const Tensor& y) {
    Tensor g = rt.call1(ops::matmul(), {y, y});
    Tensor a = rt.call1(ops::sigmoid(), {g});
    Tensor b = rt.call1(ops::tanh(), {g});
    Tensor w = rt.call1(ops::tanh(), {x});
    g = Tensor();
    (void)rt.evict(a);  // if making w did not evict them already
    (void)rt.evict(b);
    values->push_back(rt.call1(ops::sum(), {a}).to_host());  // remakes g, then a; b waits on g
    Tensor d = rt.call1(ops::sigmoid(), {x});
    values->push_back(rt.call1(ops::sum(), {b}).to_host());
    values->push_back(rt.call1(ops::sum(), {d}).to_host());
    d = Tensor();
    values->push_back(rt.call1(ops::sum(), {a}).to_host());
    values->push_back(rt.call1(ops::sum(), {w}).to_host());
  });
}

TEST(Forecast, AReleasedValueThatAnEvictedHeldValueWaitsOnKeepsItsCost) {
  const int steps = 4;
  for (const std::uint64_t budget : {4 * 1024 + 512, 5 * 1024 + 512}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    const EqAndForecast runs = run_eq_and_forecast(run_waiting_cell_steps, steps, budget);
    // The product once a step, to remake a and b (three times with every released value first).
    for (int s = 0; s < steps; ++s) {
      EXPECT_EQ(recomputed(runs.forecast[s]).substr(0, 10), "matmul x1 ") << "step " << s;
    }
  }
}

// A held value released while evicted stops waiting on what it would be remade from: b (made from g) is
// released while evicted, with c (made from b) resident and held, so g, released and remade since, now costs
// nothing to evict. The forecast index must hear of it (Heuristic::on_release): it keyed g at the decision
// before, while b was held. Whatever the search, g goes at the second decision, and nothing is remade after.
std::vector<OpRecomputations> run_release_while_evicted(EvictionSearch search,
                                                        std::vector<std::vector<float>>* values) {
  Config config = deterministic_config(7 * 1024 + 512, BudgetMode::bytes, "forecast");
  config.search = search;
  Runtime rt(config);
  Tensor x = constant(rt, {kElements}, 0.25f);
  Tensor y = constant(rt, {16, 16}, -0.125f);
  Tensor g = rt.call1(ops::matmul(), {y, y});
  Tensor b = rt.call1(ops::tanh(), {g});
  Tensor c = rt.call1(ops::sigmoid(), {b});
  Tensor a = rt.call1(ops::sigmoid(), {g});
  Tensor v = rt.call1(ops::sigmoid(), {x});  // the stalest when the first decision comes
  values->push_back(rt.call1(ops::sum(), {v}).to_host());  // read, as the others are when it comes
  g = Tensor();
  EXPECT_TRUE(rt.evict(b));
  EXPECT_TRUE(rt.evict(a));
  Tensor w = rt.call1(ops::tanh(), {x});
  for (const Tensor* t : {&a, &c, &w}) values->push_back(rt.call1(ops::sum(), {*t}).to_host());  // a remakes g
  Tensor e = rt.call1(ops::sigmoid(), {x});  // the first decision (v goes), g keyed while b is held
  b = Tensor();
  Tensor d = rt.call1(ops::sigmoid(), {x});  // the second, after b's release
  std::vector<OpRecomputations> before = rt.recomputations_by_op();
  for (const Tensor* t : {&a, &c, &w, &e, &d}) values->push_back(rt.call1(ops::sum(), {*t}).to_host());
  return recomputed_since(rt, before);
}

TEST(Forecast, AHeldValueReleasedWhileEvictedLetsWhatItWaitedOnGo) {
  std::vector<std::vector<float>> indexed, scanned;
  const auto index_runs = run_release_while_evicted(EvictionSearch::index, &indexed);
  const auto scan_runs = run_release_while_evicted(EvictionSearch::scan, &scanned);
  EXPECT_EQ(indexed, scanned);
  EXPECT_EQ(recomputed(scan_runs), "");
  EXPECT_EQ(recomputed(index_runs), "") << "the index kept g's cost from before b's release";
}

}  // namespace
}  // namespace dtr::test

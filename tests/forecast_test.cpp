// The forecast heuristic (heuristics/heuristics.cpp, runtime/forecast.h): a step's uses forecast the next
// step's, Belady-style; without a forecast it chooses as dtr-eq does.
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
};

// Each step: a and b from the step's batches x and y; a is read (so b is the stale one) just before d needs
// room for one of them, then b and d are read, and a once more at the end, when there is room again.
// Staleness evicts b, which is read next, and then a to remake b: two recomputations. The last step's uses say
// a is read last: evicting it costs one.
StepRecord run_steps(const std::string& heuristic, int steps, std::optional<std::uint64_t> budget) {
  Runtime rt(deterministic_config(budget, BudgetMode::bytes, heuristic));
  StepRecord record;
  std::uint64_t before = 0;
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
  // The forecasts kept are one per signature: flat from step to step; none for another heuristic.
  EXPECT_GT(forecast.forecast_records[1], 0u);
  EXPECT_EQ(forecast.forecast_records.back(), forecast.forecast_records[1]);
  EXPECT_EQ(eq.forecast_records.back(), 0u);
}

}  // namespace
}  // namespace dtr::test

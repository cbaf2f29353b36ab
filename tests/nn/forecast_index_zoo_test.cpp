// The forecast heuristic's index (heuristics/forecast_index.h) in real training: three steps of every zoo
// model under budgets make the same decisions with the index as with a scan of every candidate (as many
// evictions, the same values recomputed in the same order, or the same refusal), and the unbudgeted run's
// bits. (That the runtime keeps a forecast index at all: Runtime.FootprintSaysWhetherDecisionsUseAnIndex.)
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "dtr/dtr.h"
#include "zoo_training.h"

namespace dtr::nn::test {
namespace {

struct Outcome {
  std::string refusal;  // "thrashing", "out of memory", or empty: it finished
  TrainingRecord record;
};

Outcome run(const ZooCase& zoo, std::uint64_t budget, EvictionSearch search) {
  RunOptions options;
  options.heuristic = "forecast";
  options.search = search;
  options.budget_bytes = budget;
  options.record_recomputations = true;
  try {
    return {"", train_steps(zoo, options)};
  } catch (const Thrashing&) {
    return {"thrashing", {}};
  } catch (const OutOfMemory&) {
    return {"out of memory", {}};
  }
}

class ForecastIndexZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(ForecastIndexZoo, DecidesAsAScanDoes) {
  const ZooCase zoo = zoo_case(GetParam());
  const TrainingRecord reference = train_steps(zoo, RunOptions{});
  for (const double fraction : zoo.budgets) {
    SCOPED_TRACE(GetParam() + " at " + std::to_string(fraction));
    const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(reference.peak_resident_bytes));
    const Outcome indexed = run(zoo, budget, EvictionSearch::index);
    const Outcome scanned = run(zoo, budget, EvictionSearch::scan);
    ASSERT_EQ(indexed.refusal, scanned.refusal);
    std::printf("%s at %.2f: %s\n", GetParam().c_str(), fraction,
                indexed.refusal.empty() ? ("evictions " + std::to_string(indexed.record.evictions)).c_str()
                                        : indexed.refusal.c_str());
    if (!indexed.refusal.empty()) continue;
    EXPECT_GT(indexed.record.evictions, 0u) << "the budget never bit";
    EXPECT_EQ(indexed.record.evictions, scanned.record.evictions);
    EXPECT_EQ(indexed.record.rematerializations, scanned.record.rematerializations);
    EXPECT_TRUE(indexed.record.recomputed == scanned.record.recomputed) << "other values recomputed, or in another order";
    EXPECT_TRUE(indexed.record.values == reference.values) << "not the unbudgeted run's bits";
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ForecastIndexZoo, ::testing::ValuesIn(zoo_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace dtr::nn::test

// The runtime the dtr-torch tests train in: a bytes budget (or none), costs by bytes moved, no thrash limit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "dtr/config.h"
#include "dtr/torch.h"

namespace dtr::torch::test {

// Costs by bytes moved, not timings: the same eviction decisions on every run, so the budgets tested stay the
// budgets that train. Exactness, not the thrash limit, is under test.
inline std::shared_ptr<Runtime> bytes_runtime(std::optional<std::uint64_t> budget = std::nullopt) {
  Config config;
  config.budget_mode = BudgetMode::bytes;
  config.memory_budget = budget;
  config.cost_model = CostModel::bytes;
  config.thrash_limit = std::nullopt;
  return make_runtime(config);
}

}  // namespace dtr::torch::test

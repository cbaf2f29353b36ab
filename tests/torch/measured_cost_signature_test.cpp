// Measured costs are learnt per kernel signature (docs/runtime.md, "Cost model and clock"); for an aten op the
// signature holds its scalar arguments and its tensors' view layouts (the runtime itself sees whole storages).
// With one timed run per signature (then runs 2, 4, 8, ...), the third run of a shared signature costs the
// least of the first two exactly: each test runs one op twice, then a third op that must not share its cost.
#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtr/config.h"
#include "dtr/torch.h"

namespace {

using dtr::torch::checkpoint;

// A runtime under the measured cost model, one timed run per signature, that records each kernel run's
// name and cost in `runs`.
std::shared_ptr<dtr::Runtime> observed_runtime(std::vector<std::pair<std::string, double>>& runs) {
  dtr::Config config;
  config.budget_mode = dtr::BudgetMode::bytes;
  config.cost_model = dtr::CostModel::measured;
  config.timed_runs = 1;
  config.kernel_observer = [&runs](const dtr::KernelRun& run) { runs.emplace_back(run.name, run.cost); };
  return dtr::torch::make_runtime(config);
}

// The costs of the runs whose op name contains `op`, in order.
std::vector<double> costs_of(const std::vector<std::pair<std::string, double>>& runs, const std::string& op) {
  std::vector<double> costs;
  for (const auto& [name, cost] : runs) {
    if (name.find(op) != std::string::npos) costs.push_back(cost);
  }
  return costs;
}

// Two poolings of one overload and shapes but different windows.
TEST(MeasuredCostSignature, AnOpsScalarArgumentsArePartOfIt) {
  std::vector<std::pair<std::string, double>> runs;
  auto runtime = observed_runtime(runs);
  const at::Tensor x = checkpoint(at::randn({1, 4, 64, 64}), runtime);
  const at::Tensor small1 = at::avg_pool2d(x, 3, 1, 1);
  const at::Tensor small2 = at::avg_pool2d(x, 3, 1, 1);
  const at::Tensor large = at::avg_pool2d(x, 7, 1, 3);
  ASSERT_EQ(small1.sizes(), large.sizes());
  const std::vector<double> costs = costs_of(runs, "avg_pool2d");
  ASSERT_EQ(costs.size(), 3u) << "one kernel run per pooling";
  EXPECT_NE(costs[2], std::min(costs[0], costs[1])) << "the 7x7 pooling was priced as the 3x3 one";
}

// The sum of one row and the sum of the whole storage it views.
TEST(MeasuredCostSignature, AViewsLayoutIsPartOfIt) {
  std::vector<std::pair<std::string, double>> runs;
  auto runtime = observed_runtime(runs);
  const at::Tensor x = checkpoint(at::randn({512, 512}), runtime);
  const at::Tensor whole1 = x.sum();
  const at::Tensor whole2 = x.sum();
  const at::Tensor row = x.slice(0, 0, 1).sum();
  const std::vector<double> costs = costs_of(runs, "aten::sum");
  ASSERT_EQ(costs.size(), 3u) << "one kernel run per sum";
  EXPECT_NE(costs[2], std::min(costs[0], costs[1])) << "the row's sum was priced as the whole storage's";
}

}  // namespace

// Runtime::recomputations_by_op: where the recomputation went, per op name, costliest first; bounded.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

struct Tally {
  std::uint64_t runs = 0;
  double cost = 0;
};

// Every recomputation the kernel observer sees, per name: what the profile must say.
Config tallied(std::map<std::string, Tally>& tally, std::uint64_t budget) {
  Config config = deterministic_config(budget, BudgetMode::bytes, "lru");
  config.kernel_observer = [&tally](const KernelRun& run) {
    if (!run.rematerialization) return;
    Tally& t = tally[std::string(run.name)];
    t.runs += 1;
    t.cost += run.cost;
  };
  return config;
}

TEST(RecomputationsByOp, CountEveryRecomputationPerOpCostliestFirst) {
  std::map<std::string, Tally> tally;
  // 8x8 values: a matmul costs 1024 FLOPs, tanh and add 64 each.
  Runtime rt(tallied(tally, 6 * 64 * sizeof(float)));
  // A chain of three kinds of op, then read backwards: each read recomputes from below.
  std::vector<Tensor> chain{constant(rt, {8, 8}, 0.01F)};
  for (int k = 0; k < 24; ++k) {
    const Tensor last = chain.back();
    if (k % 3 == 0) chain.push_back(rt.call1(ops::tanh(), {last}));
    if (k % 3 == 1) chain.push_back(rt.call1(ops::add(), {last, last}));
    if (k % 3 == 2) chain.push_back(rt.call1(ops::matmul(), {last, last}));
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) (void)it->to_host();
  const std::vector<OpRecomputations> ops = rt.recomputations_by_op();
  ASSERT_GE(tally.size(), 2U) << "the program no longer recomputes several kinds of op";
  ASSERT_EQ(ops.size(), tally.size());
  std::uint64_t runs = 0;
  double cost = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ASSERT_TRUE(tally.count(ops[i].op)) << ops[i].op;
    EXPECT_EQ(ops[i].runs, tally[ops[i].op].runs) << ops[i].op;
    EXPECT_DOUBLE_EQ(ops[i].cost, tally[ops[i].op].cost) << ops[i].op;
    if (i > 0) {
      EXPECT_GE(ops[i - 1].cost, ops[i].cost) << "not costliest first";
    }
    runs += ops[i].runs;
    cost += ops[i].cost;
  }
  EXPECT_EQ(runs, rt.stats().rematerializations);
  EXPECT_DOUBLE_EQ(cost, rt.stats().remat_compute);
}

TEST(RecomputationsByOp, EmptyUntilSomethingIsRecomputed) {
  Runtime rt(deterministic_config());
  const Tensor x = constant(rt, {8}, 1.0F);
  const Tensor y = rt.call1(ops::relu(), {x});
  EXPECT_TRUE(rt.recomputations_by_op().empty());
  ASSERT_TRUE(rt.evict(y));
  (void)y.to_host();
  const std::vector<OpRecomputations> ops = rt.recomputations_by_op();
  ASSERT_EQ(ops.size(), 1U);
  EXPECT_EQ(ops[0].op, "relu");
  EXPECT_EQ(ops[0].runs, 1U);
  EXPECT_DOUBLE_EQ(ops[0].cost, rt.stats().remat_compute);
}

// A program with more op names than the profile keeps: the rest are summed under one entry, nothing is lost.
TEST(RecomputationsByOp, PastItsBoundTheRestAreSummedUnderOtherOps) {
  class Named final : public Computation {
   public:
    explicit Named(std::string name) : name_(std::move(name)) {}
    std::string_view name() const override { return name_; }
    void run(const KernelArgs& args) override { args.output<float>(0)[0] = args.input<float>(0)[0] + 1.0F; }

   private:
    std::string name_;
  };
  Runtime rt(deterministic_config());
  const Tensor x = constant(rt, {1}, 0.0F);
  const TensorMeta out{{1}, DType::float32};
  const std::size_t names = Runtime::kMaxProfiledOps + 10;
  for (std::size_t i = 0; i < names; ++i) {
    const std::vector<Tensor> y =
        rt.call(std::make_shared<Named>("op" + std::to_string(i)), std::span(&x, 1), std::span(&out, 1));
    ASSERT_TRUE(rt.evict(y[0]));
    EXPECT_EQ(y[0].to_host()[0], 1.0F);
  }
  const std::vector<OpRecomputations> ops = rt.recomputations_by_op();
  EXPECT_EQ(ops.size(), Runtime::kMaxProfiledOps);
  std::uint64_t runs = 0;
  std::uint64_t other = 0;
  for (const OpRecomputations& o : ops) {
    runs += o.runs;
    if (o.op == "(other ops)") other = o.runs;
  }
  EXPECT_EQ(runs, names);
  EXPECT_EQ(other, names - (Runtime::kMaxProfiledOps - 1));
}

// One line for messages: the first `count` entries, each with its share of the whole profile's cost.
TEST(RecomputationsByOp, DescribedWithTheirSharesOfTheWholeProfile) {
  const std::vector<OpRecomputations> ops{{"linear", 30, 600.0}, {"bmm", 1, 300.0}, {"add", 7, 100.0}};
  EXPECT_EQ(describe_recomputations(ops, 2), "linear 60% (30 runs), bmm 30% (1 run)");
  EXPECT_EQ(describe_recomputations(ops, 9), "linear 60% (30 runs), bmm 30% (1 run), add 10% (7 runs)");
  EXPECT_EQ(describe_recomputations({}, 3), "");
  const std::vector<OpRecomputations> free_ops{{"view", 2, 0.0}};
  EXPECT_EQ(describe_recomputations(free_ops, 1), "view 0% (2 runs)");
}

}  // namespace
}  // namespace dtr::test

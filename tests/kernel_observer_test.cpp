// Config::kernel_observer (include/dtr/kernel_observer.h): told of every kernel run, first runs and
// recomputations, with the op, its attributes and seed, and the buffers holding its results.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace dtr::test {
namespace {

struct Seen {
  std::string name;
  const OpDef* op = nullptr;
  std::vector<std::pair<std::string, Attrs::Value>> attrs;
  std::uint64_t seed = 0;
  bool rematerialization = false;
  double cost = 0;
  std::vector<float> first_output;  // the kernel's result, read from its buffer during the call
  std::vector<std::uint64_t> input_storages;
  std::vector<std::size_t> input_offsets;
  std::vector<std::uint64_t> output_storages;
};

Config observed(std::vector<Seen>& seen) {
  Config config;
  config.cost_model = CostModel::flops;
  config.kernel_observer = [&seen](const KernelRun& run) {
    Seen s{std::string(run.name),
           run.op,
           run.args.attrs.items(),
           run.args.seed,
           run.rematerialization,
           run.cost,
           {},
           {run.input_storages.begin(), run.input_storages.end()},
           {run.input_offsets.begin(), run.input_offsets.end()},
           {run.output_storages.begin(), run.output_storages.end()}};
    if (!run.args.outputs.empty() && run.args.output_meta[0].dtype == DType::float32) {
      s.first_output.resize(static_cast<std::size_t>(run.args.output_meta[0].numel()));
      std::memcpy(s.first_output.data(), run.args.outputs[0], run.args.output_meta[0].nbytes());
    }
    seen.push_back(std::move(s));
  };
  return config;
}

TEST(KernelObserver, SeesEachFirstRunWithItsOpAttributesSeedAndResult) {
  std::vector<Seen> seen;
  Runtime rt(observed(seen));
  const Tensor x = constant(rt, {4, 8}, 0.5F);
  const Tensor y = rt.call1(ops::scale(), {x}, {{"factor", 2.0}});
  const std::vector<Tensor> dropped = rt.call(ops::dropout(), std::span(&y, 1), {{"p", 0.5}});  // values, mask
  const Tensor& z = dropped[0];
  ASSERT_EQ(seen.size(), 2U);  // constants run no kernel
  EXPECT_EQ(seen[0].name, "scale");
  EXPECT_EQ(seen[0].op, &ops::scale());
  ASSERT_EQ(seen[0].attrs.size(), 1U);
  EXPECT_EQ(seen[0].attrs[0].first, "factor");
  EXPECT_EQ(seen[0].seed, 0U);
  EXPECT_FALSE(seen[0].rematerialization);
  EXPECT_EQ(seen[0].cost, rt.stats().base_compute - seen[1].cost);
  EXPECT_EQ(seen[0].first_output, y.to_host());
  EXPECT_EQ(seen[1].op, &ops::dropout());
  EXPECT_NE(seen[1].seed, 0U) << "a random op's captured seed";
  EXPECT_EQ(seen[1].first_output, z.to_host());
  // Storages: the constant x feeds scale, whose output feeds dropout; each storage has its own id.
  ASSERT_EQ(seen[0].input_storages.size(), 1U);
  ASSERT_EQ(seen[0].output_storages.size(), 1U);
  ASSERT_EQ(seen[1].output_storages.size(), 2U);
  EXPECT_NE(seen[0].input_storages[0], 0U);
  EXPECT_NE(seen[0].output_storages[0], seen[0].input_storages[0]);
  EXPECT_EQ(seen[1].input_storages, seen[0].output_storages);
  EXPECT_NE(seen[1].output_storages[0], seen[0].output_storages[0]);
  EXPECT_EQ(seen[1].input_offsets, std::vector<std::size_t>{0});
}

// An op reading a view sees the viewed storage and where the view starts in it.
TEST(KernelObserver, SeesViewsAsOffsetsIntoTheirStorage) {
  std::vector<Seen> seen;
  Runtime rt(observed(seen));
  const Tensor x = constant(rt, {4, 8}, 0.5F);
  const Tensor row = rt.view(x, {8}, 16);  // the third row: no kernel
  const Tensor y = rt.call1(ops::relu(), {row});
  ASSERT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0].input_offsets, std::vector<std::size_t>{16});
  EXPECT_EQ(seen[0].first_output, y.to_host());
}

TEST(KernelObserver, SeesRecomputationsAsSuch) {
  std::vector<Seen> seen;
  Runtime rt(observed(seen));
  const Tensor x = constant(rt, {16}, 1.0F);
  const Tensor y = rt.call1(ops::relu(), {x});
  const Tensor z = rt.call1(ops::tanh(), {y});
  ASSERT_TRUE(rt.evict(y));
  const std::vector<float> values = y.to_host();  // recomputes y
  ASSERT_EQ(seen.size(), 3U);
  EXPECT_EQ(seen[2].name, "relu");
  EXPECT_TRUE(seen[2].rematerialization);
  EXPECT_EQ(seen[2].first_output, values);
  EXPECT_EQ(seen[2].output_storages, seen[0].output_storages) << "the same storage, recomputed";
  EXPECT_EQ(rt.stats().rematerializations, 1U);
}

// A computation from another source has no op of the table: the observer sees its name and buffers.
TEST(KernelObserver, SeesComputationsFromOtherSourcesWithoutAnOp) {
  class Fill final : public Computation {
   public:
    std::string_view name() const override { return "fill"; }
    void run(const KernelArgs& args) override {
      for (std::int64_t i = 0; i < args.output_meta[0].numel(); ++i) args.output<float>(0)[i] = 3.0F;
    }
  };
  std::vector<Seen> seen;
  Runtime rt(observed(seen));
  const Tensor x = constant(rt, {4}, 0.0F);
  const TensorMeta out{{4}, DType::float32};
  const std::vector<Tensor> y = rt.call(std::make_shared<Fill>(), std::span(&x, 1), std::span(&out, 1));
  ASSERT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0].name, "fill");
  EXPECT_EQ(seen[0].op, nullptr);
  EXPECT_TRUE(seen[0].attrs.empty());
  EXPECT_EQ(seen[0].first_output, std::vector<float>(4, 3.0F));
}

}  // namespace
}  // namespace dtr::test

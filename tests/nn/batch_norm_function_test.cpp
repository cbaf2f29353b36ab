// nn::batch_norm in training (nn/batch_norm.cpp): two ops for the runtime (batch_norm_stats, then
// batch_norm_normalize), one function for autograd. Its gradients and running statistics are batch_norm's bit
// for bit; an evicted output is remade by the normalization alone; batch_norm_relu (and Sequential's
// BatchNorm2d + ReLU) is relu(batch_norm) bit for bit in one op; a freed graph and a one-value channel are
// clear errors. The finite-difference check through a network is AutogradTest.NormalizationsLossesAndConvolutions.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "../test_helpers.h"
#include "dtr/dtr.h"
#include "dtr/gradients.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/layers.h"
#include "dtr/nn/module.h"

namespace dtr::test {
namespace {

std::vector<float> values(std::int64_t count, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t e = 0; e < v.size(); ++e) v[e] = static_cast<float>((e * 7919 + seed * 104729) % 1009) / 211.0F - 2.0F;
  return v;
}

Tensor constant(Runtime& rt, const Shape& shape, std::uint64_t seed) {
  const TensorMeta meta{shape, DType::float32};
  return rt.constant(meta, values(meta.numel(), seed));
}

// x of `shape` (three channels), weight and bias requiring gradients (positive weights: both signs in y), and
// running statistics.
struct Inputs {
  nn::Variable x, weight, bias, running_mean, running_var;
};
Inputs inputs(Runtime& rt, const Shape& shape) {
  const TensorMeta channel{{3}, DType::float32};
  return {nn::Variable(rt, constant(rt, shape, 1), true),
          nn::Variable(rt, rt.constant(channel, std::vector<float>{1.0F, 1.5F, 0.5F}), true),
          nn::Variable(rt, rt.constant(channel, std::vector<float>{0.1F, -0.2F, 0.0F}), true),
          nn::Variable(rt, rt.constant(channel, std::vector<float>{0.25F, 0.0F, -0.5F})),
          nn::Variable(rt, rt.constant(channel, std::vector<float>{0.5F, 1.5F, 2.5F}))};
}

// x [5, 3, 7, 6], weight and bias [3] requiring gradients; the loss Σ y · r for a fixed r.
TEST(BatchNormFunction, GradientsAndRunningStatisticsAreBatchNormsBits) {
  Runtime rt;
  const Shape shape{5, 3, 7, 6};
  const Tensor x = constant(rt, shape, 1);
  const Tensor w = constant(rt, {3}, 2);
  const Tensor b = constant(rt, {3}, 3);
  const Tensor r = constant(rt, shape, 4);
  nn::Variable xv(rt, x, true), wv(rt, w, true), bv(rt, b, true);
  const std::vector<float> var_before{0.5F, 1.5F, 2.5F};
  const nn::Variable mean(rt, constant(rt, {3}, 5)), var(rt, rt.constant(TensorMeta{{3}, DType::float32}, var_before));
  const nn::Variable y = nn::batch_norm(xv, wv, bv, mean, var, true, 0.2, 1e-3);
  y.backward(r);

  const std::vector<Tensor> fused = rt.call(ops::batch_norm(), std::vector<Tensor>{x, w, b}, {{"eps", 1e-3}});
  EXPECT_EQ(y.data().to_host(), fused[0].to_host());
  const std::vector<Tensor> grads = vjp(rt, ops::batch_norm(), std::vector<Tensor>{x, w, b}, fused,
                                        std::vector<Tensor>{r, Tensor(), Tensor()}, {{"eps", 1e-3}});
  EXPECT_EQ(xv.grad().to_host(), grads[0].to_host());
  EXPECT_EQ(wv.grad().to_host(), grads[1].to_host());
  EXPECT_EQ(bv.grad().to_host(), grads[2].to_host());

  const Tensor mean_want = rt.call1(ops::running_stat_update(), {constant(rt, {3}, 5), fused[1]}, {{"momentum", 0.2}});
  const Tensor var_want = rt.call1(ops::running_stat_update(), {rt.constant(TensorMeta{{3}, DType::float32}, var_before), fused[2]},
                                   {{"momentum", 0.2}, {"invstd_eps", 1e-3}, {"unbiased_count", std::int64_t{5 * 7 * 6}}});
  EXPECT_EQ(mean.to_host(), mean_want.to_host());
  EXPECT_EQ(var.to_host(), var_want.to_host());
}

// The point of the split: an evicted y comes back by batch_norm_normalize alone, one pass over x, from the
// statistics the runtime keeps (with the fused op it was batch_norm again: three passes).
TEST(BatchNormFunction, AnEvictedOutputIsRemadeByTheNormalizationAlone) {
  std::vector<std::string> remade;
  Config config;
  config.kernel_observer = [&remade](const KernelRun& run) {
    if (run.rematerialization) remade.emplace_back(run.name);
  };
  Runtime rt(config);
  const nn::Variable x(rt, constant(rt, {4, 2, 5, 5}, 1), true);
  const nn::Variable w(rt, constant(rt, {2}, 2), true), b(rt, constant(rt, {2}, 3), true);
  const nn::Variable mean(rt, rt.constant(TensorMeta{{2}, DType::float32}));
  const nn::Variable var(rt, rt.constant(TensorMeta{{2}, DType::float32}, std::vector<float>{1, 1}));
  const nn::Variable y = nn::batch_norm(x, w, b, mean, var, true);
  const std::vector<float> bits = y.to_host();
  ASSERT_TRUE(rt.evict(y.data()));
  EXPECT_EQ(y.to_host(), bits);
  EXPECT_EQ(remade, std::vector<std::string>{"batch_norm_normalize"});
}

// batch_norm_relu against relu(batch_norm(...)): the output, the gradients of x, weight and bias and the running
// statistics bit for bit, in training (one op) and in evaluation (the two ops).
TEST(BatchNormFunction, WithReluGivesReluOfBatchNormsBits) {
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "evaluation");
    Runtime rt;
    const Shape shape{4, 3, 5, 6};
    const Tensor r = constant(rt, shape, 4);
    std::vector<std::vector<float>> results[2];
    for (const bool fused : {false, true}) {
      const Inputs in = inputs(rt, shape);
      const auto& [x, w, b, mean, var] = in;
      const nn::Variable y = fused ? nn::batch_norm_relu(x, w, b, mean, var, training, 0.2, 1e-3)
                                   : nn::relu(nn::batch_norm(x, w, b, mean, var, training, 0.2, 1e-3));
      y.backward(r);
      results[fused] = {y.to_host(), x.grad().to_host(), w.grad().to_host(), b.grad().to_host(), mean.to_host(),
                        var.to_host()};
    }
    ASSERT_EQ(results[1].size(), results[0].size());
    for (std::size_t k = 0; k < results[0].size(); ++k) EXPECT_EQ(results[1][k], results[0][k]) << "result " << k;
    // Some outputs are zeros and some are not: the relu mattered.
    const auto& y = results[1][0];
    EXPECT_GT(std::count(y.begin(), y.end(), 0.0F), 10);
    EXPECT_GT(std::count_if(y.begin(), y.end(), [](float v) { return v > 0; }), 10);
  }
}

// batch_norm_add_relu against relu(add(batch_norm(...), residual)): the output, the gradients of x, weight, bias and
// the residual and the running statistics bit for bit, in training (one op) and in evaluation (three ops); and in
// training an evicted output comes back by the normalization alone.
TEST(BatchNormFunction, WithAResidualGivesReluOfTheSumsBits) {
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "evaluation");
    std::vector<std::string> remade;
    Config config;
    config.kernel_observer = [&](const KernelRun& run) {
      if (run.rematerialization) remade.emplace_back(run.name);
    };
    Runtime rt(config);
    const Shape shape{4, 3, 5, 6};
    const Tensor g = constant(rt, shape, 4);
    std::vector<std::vector<float>> results[2];
    for (const bool fused : {false, true}) {
      const Inputs in = inputs(rt, shape);
      const auto& [x, w, b, mean, var] = in;
      const nn::Variable r(rt, constant(rt, shape, 7), true);
      const nn::Variable y =
          fused ? nn::batch_norm_add_relu(x, w, b, mean, var, r, training, 0.2, 1e-3)
                : nn::relu(nn::add(nn::batch_norm(x, w, b, mean, var, training, 0.2, 1e-3), r));
      if (fused && training) {  // while the graph holds the statistics
        remade.clear();
        const std::vector<float> bits = y.to_host();
        ASSERT_TRUE(rt.evict(y.data()));
        EXPECT_EQ(y.to_host(), bits);
        EXPECT_EQ(remade, std::vector<std::string>{"batch_norm_normalize"});
      }
      y.backward(g);
      results[fused] = {y.to_host(),        x.grad().to_host(), w.grad().to_host(), b.grad().to_host(),
                        r.grad().to_host(), mean.to_host(),     var.to_host()};
    }
    for (std::size_t k = 0; k < results[0].size(); ++k) EXPECT_EQ(results[1][k], results[0][k]) << "result " << k;
    const auto& y = results[1][0];
    EXPECT_GT(std::count(y.begin(), y.end(), 0.0F), 10);
    EXPECT_GT(std::count_if(y.begin(), y.end(), [](float v) { return v > 0; }), 10);
  }
  Runtime rt;
  const nn::Variable x(rt, constant(rt, {4, 3, 5, 6}, 1)), c(rt, constant(rt, {3}, 2));
  expect_error<ShapeError>([&] { nn::batch_norm_add_relu(x, c, c, c, c, nn::Variable(rt, constant(rt, {4, 3}, 3)), true); },
                           {"batch_norm_add_relu", "residual of x's shape [4, 3, 5, 6]", "[4, 3]"});
}

// In training one op makes the output, and it alone remakes it; Sequential runs a BatchNorm2d directly followed by
// a ReLU so.
TEST(BatchNormFunction, SequentialRunsBatchNormAndReluAsOneOpThatAloneRemakesTheOutput) {
  std::vector<std::string> ran, remade;
  Config config;
  config.kernel_observer = [&](const KernelRun& run) {
    (run.rematerialization ? remade : ran).emplace_back(run.name);
  };
  Runtime rt(config);
  nn::Sequential layers;
  layers.push_back(std::make_shared<nn::BatchNorm2d>(rt, 2));
  layers.push_back(std::make_shared<nn::ReLU>());
  const nn::Variable x(rt, constant(rt, {4, 2, 5, 5}, 1), true);
  ran.clear();
  const nn::Variable y = layers.forward(x);
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "relu"), 0);
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "batch_norm_normalize"), 1);
  const std::vector<float> bits = y.to_host();
  ASSERT_TRUE(rt.evict(y.data()));
  EXPECT_EQ(y.to_host(), bits);
  EXPECT_EQ(remade, std::vector<std::string>{"batch_norm_normalize"});
}

TEST(BatchNormFunction, ErrorsNameTheFunction) {
  std::size_t runs = 0;
  Config config;
  config.kernel_observer = [&runs](const KernelRun&) { ++runs; };
  Runtime rt(config);
  const nn::Variable mean(rt, rt.constant(TensorMeta{{2}, DType::float32}));
  const nn::Variable var(rt, rt.constant(TensorMeta{{2}, DType::float32}, std::vector<float>{1, 1}));
  const nn::Variable w(rt, constant(rt, {2}, 2), true), b(rt, constant(rt, {2}, 3), true);
  // One value per channel: refused before any kernel runs.
  const nn::Variable single(rt, constant(rt, {1, 2}, 1), true);
  const std::size_t before = runs;
  expect_error<InvalidArgument>([&] { nn::batch_norm(single, w, b, mean, var, true); },
                                {"batch_norm", "more than one value per channel", "[1, 2]"});
  EXPECT_EQ(runs, before);
  // A second backward through a freed graph.
  const nn::Variable x(rt, constant(rt, {3, 2}, 1), true);
  const nn::Variable y = nn::batch_norm(x, w, b, mean, var, true);
  const Tensor ones = rt.constant(y.meta(), std::vector<float>(6, 1.0F));
  y.backward(ones);
  expect_error<InvalidArgument>([&] { y.backward(ones); }, {"'batch_norm'", "retain_graph"});
  // Weight and bias of another runtime.
  Runtime other;
  const nn::Variable foreign(other, constant(other, {2}, 2), true);
  expect_error<InvalidArgument>([&] { nn::batch_norm(x, foreign, b, mean, var, true); }, {"another runtime"});
}

}  // namespace
}  // namespace dtr::test

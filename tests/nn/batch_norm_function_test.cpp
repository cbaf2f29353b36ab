// nn::batch_norm in training (nn/batch_norm.cpp): two ops for the runtime (batch_norm_stats, then
// batch_norm_normalize), one function for autograd. Its gradients and running statistics are batch_norm's bit
// for bit; an evicted output is remade by the normalization alone; a freed graph and a one-value channel are
// clear errors. The finite-difference check through a network is AutogradTest.NormalizationsLossesAndConvolutions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../test_helpers.h"
#include "dtr/dtr.h"
#include "dtr/gradients.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"

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

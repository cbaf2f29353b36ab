// Fused self-attention (ops::attention, nn::attention): its forward gives the bits of the unfused ops it
// replaced in MultiheadSelfAttention (split, reshape, permute, scale, bmm, softmax, bmm, permute), float32 and
// float64; its backward op the unfused chain's gradients; a known value by hand; the errors name the op. The
// finite-difference check of its gradient is in the op cases (gradcheck_test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "../test_helpers.h"
#include "dtr/dtr.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"

namespace dtr::test {
namespace {

// The ops MultiheadSelfAttention ran before the fused op.
nn::Variable unfused(const nn::Variable& projected, std::int64_t heads) {
  const std::int64_t n = projected.shape()[0];
  const std::int64_t t = projected.shape()[1];
  const std::int64_t e = projected.shape()[2] / 3;
  const std::int64_t d = e / heads;
  const std::vector<nn::Variable> qkv = nn::split(projected, {e, e, e}, 2);
  const auto heads_first = [&](const nn::Variable& v) {
    return nn::reshape(nn::permute(nn::reshape(v, {n, t, heads, d}), {0, 2, 1, 3}), {n * heads, t, d});
  };
  const nn::Variable q = nn::scale(heads_first(qkv[0]), 1.0 / std::sqrt(static_cast<double>(d)));
  const nn::Variable weights = nn::softmax(nn::bmm(q, heads_first(qkv[1]), false, true), -1);
  const nn::Variable context = nn::bmm(weights, heads_first(qkv[2]));
  return nn::reshape(nn::permute(nn::reshape(context, {n, heads, t, d}), {0, 2, 1, 3}), {n, t, e});
}

class Attention : public ::testing::TestWithParam<DType> {};

TEST_P(Attention, TheForwardGivesTheUnfusedOpsBits) {
  const DType dtype = GetParam();
  Runtime rt;
  // 35 samples: 35, 70 and 140 heads, one chunk of the CPU kernel's 64 and more than one, with a short tail.
  const nn::Variable qkv(rt,
                         floating_constant(rt, {35, 7, 3 * 8}, dtype, sine_values(35 * 7 * 24, 0.4, 2.0, 0.61)));
  for (const std::int64_t heads : {1, 2, 4}) {
    const nn::Variable fused = nn::attention(qkv, heads);
    const nn::Variable reference = unfused(qkv, heads);
    EXPECT_EQ(fused.meta(), reference.meta());
    EXPECT_EQ(floating_values(fused.data()), floating_values(reference.data())) << heads << " heads";
  }
}

TEST_P(Attention, TheBackwardGivesTheUnfusedChainsGradients) {
  const DType dtype = GetParam();
  const auto gradient = [&](bool fused) {
    Runtime rt;
    // 23 samples of 3 heads: 69 heads, two chunks.
    const nn::Variable qkv(
        rt, floating_constant(rt, {23, 5, 3 * 6}, dtype, sine_values(23 * 5 * 18, 0.9, 1.5, 0.61)), true);
    const nn::Variable w(rt, floating_constant(rt, {23, 5, 6}, dtype, sine_values(23 * 5 * 6, 2.2, 1.0, 0.61)));
    const nn::Variable out = fused ? nn::attention(qkv, 3) : unfused(qkv, 3);
    nn::sum(nn::mul(out, w)).backward();
    return floating_values(qkv.grad());
  };
  const std::vector<double> fused = gradient(true);
  const std::vector<double> reference = gradient(false);
  const double tolerance = GetParam() == DType::float64 ? 1e-14 : 1e-6;
  ASSERT_EQ(fused.size(), reference.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    EXPECT_NEAR(fused[i], reference[i], tolerance * (1 + std::abs(reference[i]))) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Attention, ::testing::Values(DType::float32, DType::float64),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// One head of width 1 over two tokens: q = (1, 0) scaled by 1, k = (0, 0) gives equal weights, so each
// output is the mean of v = (2, 4).
TEST(AttentionValues, EqualScoresAverageTheValues) {
  Runtime rt;
  const Tensor qkv = rt.constant(TensorMeta{{1, 2, 3}}, std::vector<float>{1, 0, 2, 0, 0, 4});
  const std::vector<Tensor> out = rt.call(ops::attention(), std::vector<Tensor>{qkv}, {{"heads", std::int64_t{1}}});
  EXPECT_EQ(out[0].to_host(), (std::vector<float>{3, 3}));
  EXPECT_EQ(out[1].to_host(), (std::vector<float>{0.5F, 0.5F, 0.5F, 0.5F}));  // the weights, [1, 2, 2]
}

TEST(AttentionErrors, ShapesAndHeadsThatDoNotFitNameTheOp) {
  Runtime rt;
  const Tensor bad = rt.constant(TensorMeta{{2, 3, 7}});
  expect_error<ShapeError>([&] { rt.call1(ops::attention(), {bad}, {{"heads", std::int64_t{1}}}); },
                           {"op 'attention'", "needs qkv [N, T, 3E]", "[2, 3, 7]"});
  const Tensor qkv = rt.constant(TensorMeta{{2, 3, 12}});
  expect_error<InvalidArgument>([&] { rt.call1(ops::attention(), {qkv}, {{"heads", std::int64_t{3}}}); },
                                {"op 'attention'", "'heads' is 3", "divisor of E = 4"});
  expect_error<InvalidArgument>([&] { rt.call1(ops::attention(), {qkv}); }, {"heads"});
  const Tensor grad = rt.constant(TensorMeta{{2, 3, 5}});
  const Tensor weights = rt.constant(TensorMeta{{4, 3, 3}});
  expect_error<ShapeError>(
      [&] { rt.call1(ops::attention_backward(), {grad, qkv, weights}, {{"heads", std::int64_t{2}}}); },
      {"op 'attention_backward'", "needs grad [N, T, E] and the weights [N · heads, T, T]", "for qkv [N, T, 3E]"});
  expect_error<ShapeError>([&] { rt.call1(ops::attention_backward(), {grad, qkv}, {{"heads", std::int64_t{2}}}); },
                           {"op 'attention_backward'", "takes grad, qkv, the weights and an optional gradient"});
}

}  // namespace
}  // namespace dtr::test

// The fused LSTM cell (ops::lstm_cell, nn::lstm_cell): its forward gives the bits of the ten unfused ops it
// replaced (split, three sigmoids, two tanhs, three products, a sum), in float32 (vector lanes) and float64,
// over rows longer than one chunk of the CPU kernel; its backward op gives the unfused chain's gradients; the
// shape errors name the op. Finite differences of its gradient: the op cases (gradcheck_test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"
#include "../test_helpers.h"

namespace dtr::test {
namespace {

// h and c' by the ops the LSTM layer ran before the fused cell.
std::vector<nn::Variable> unfused(const nn::Variable& gates, const nn::Variable& c, std::int64_t hidden) {
  const std::vector<nn::Variable> g = nn::split(gates, {hidden, hidden, hidden, hidden}, 1);
  const nn::Variable state = nn::add(nn::mul(nn::sigmoid(g[1]), c), nn::mul(nn::sigmoid(g[0]), nn::tanh(g[2])));
  return {nn::mul(nn::sigmoid(g[3]), nn::tanh(state)), state};
}

class LstmCell : public ::testing::TestWithParam<DType> {};

// 300 columns: a row is a chunk of 256 and a tail, and neither is a multiple of the vector width.
TEST_P(LstmCell, TheForwardGivesTheUnfusedOpsBits) {
  const DType dtype = GetParam();
  const std::int64_t rows = 3;
  const std::int64_t hidden = 301;
  Runtime rt;
  const nn::Variable gates(
      rt, floating_constant(rt, {rows, 4 * hidden}, dtype, sine_values(rows * 4 * hidden, 0.1, 6.0)));
  const nn::Variable c(rt, floating_constant(rt, {rows, hidden}, dtype, sine_values(rows * hidden, 0.7, 2.0)));
  const std::vector<nn::Variable> fused = nn::lstm_cell(gates, c);
  const std::vector<nn::Variable> reference = unfused(gates, c, hidden);
  ASSERT_EQ(fused.size(), 2U);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(fused[k].meta(), reference[k].meta());
    if (dtype == DType::float64) {
      EXPECT_EQ(fused[k].data().to_host_as<double>(), reference[k].data().to_host_as<double>()) << "output " << k;
    } else {
      EXPECT_TRUE(bitwise_equal(fused[k].to_host(), reference[k].to_host())) << "output " << k;
    }
  }
}

TEST_P(LstmCell, TheBackwardGivesTheUnfusedChainsGradients) {
  const DType dtype = GetParam();
  const std::int64_t rows = 4;
  const std::int64_t hidden = 9;
  const auto gradients = [&](bool fused) {
    Runtime rt;
    const nn::Variable gates(
        rt, floating_constant(rt, {rows, 4 * hidden}, dtype, sine_values(rows * 4 * hidden, 0.2, 3.0)), true);
    const nn::Variable c(rt, floating_constant(rt, {rows, hidden}, dtype, sine_values(rows * hidden, 1.1, 1.5)),
                         true);
    const nn::Variable wh(rt, floating_constant(rt, {rows, hidden}, dtype, sine_values(rows * hidden, 2.3, 1.0)));
    const nn::Variable wc(rt, floating_constant(rt, {rows, hidden}, dtype, sine_values(rows * hidden, 3.1, 1.0)));
    const std::vector<nn::Variable> out = fused ? nn::lstm_cell(gates, c) : unfused(gates, c, hidden);
    nn::add(nn::sum(nn::mul(out[0], wh)), nn::sum(nn::mul(out[1], wc))).backward();
    return std::vector<std::vector<double>>{floating_values(gates.grad()), floating_values(c.grad())};
  };
  const auto fused = gradients(true);
  const auto reference = gradients(false);
  const double tolerance = dtype == DType::float64 ? 1e-14 : 1e-6;
  for (std::size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(fused[k].size(), reference[k].size());
    for (std::size_t i = 0; i < fused[k].size(); ++i) {
      EXPECT_NEAR(fused[k][i], reference[k][i], tolerance * (1 + std::abs(reference[k][i])))
          << (k == 0 ? "gates" : "c") << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LstmCell, ::testing::Values(DType::float32, DType::float64),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// By hand: gates 0 make i = f = o = 1/2 and g = 0, so c' = c / 2 and h = tanh(c') / 2; a large forget gate
// keeps c, a large negative input gate drops g.
TEST(LstmCellValues, KnownCells) {
  Runtime rt;
  const Tensor gates = rt.constant(TensorMeta{{2, 4}}, std::vector<float>{0, 0, 0, 0, -30, 30, 5, 30});
  const Tensor c = rt.constant(TensorMeta{{2, 1}}, std::vector<float>{1, -2});
  const std::vector<Tensor> out = rt.call(ops::lstm_cell(), std::vector<Tensor>{gates, c});
  const std::vector<float> h = out[0].to_host();
  const std::vector<float> state = out[1].to_host();
  EXPECT_FLOAT_EQ(state[0], 0.5F);
  EXPECT_FLOAT_EQ(h[0], 0.5F * std::tanh(0.5F));
  EXPECT_NEAR(state[1], -2.0, 1e-6);
  EXPECT_NEAR(h[1], std::tanh(-2.0), 1e-6);
}

TEST(LstmCellErrors, ShapesThatAreNotGatesAndAStateAreShapeErrorsNamingTheOp) {
  Runtime rt;
  const Tensor gates = rt.constant(TensorMeta{{2, 9}});
  const Tensor c = rt.constant(TensorMeta{{2, 2}});
  expect_error<ShapeError>([&] { rt.call(ops::lstm_cell(), std::vector<Tensor>{gates, c}); },
                           {"op 'lstm_cell'", "needs gates [N, 4H] and c [N, H]", "[2, 9] and [2, 2]"});
  const Tensor gates8 = rt.constant(TensorMeta{{2, 8}});
  const Tensor wrong = rt.constant(TensorMeta{{3, 2}});
  expect_error<ShapeError>(
      [&] { rt.call(ops::lstm_cell_backward(), std::vector<Tensor>{wrong, c, gates8, c}); },
      {"op 'lstm_cell_backward'", "needs grad_h and grad_c' of c's shape"});
  expect_error<ShapeError>([&] { rt.call(ops::lstm_cell(), std::vector<Tensor>{gates8}); }, {"takes 2 inputs"});
}

}  // namespace
}  // namespace dtr::test

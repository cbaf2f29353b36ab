// Softmax, cross-entropy and layer norm: known values on small hand-computed cases, rows computed together and
// alone, shape, dtype and attribute errors, and the label check before any allocation. Batch norm:
// batch_norm_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dtr/gradients.h"
#include "dtr/ops.h"
#include "kernels/elementwise/vector_math.h"
#include "kernels/normalization/normalization_math.h"
#include "kernels/op_checks.h"
#include "norm_test_helpers.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

// ---- softmax ----------------------------------------------------------------------------------------------

TEST(Softmax, KnownValuesOverTheLastAxis) {
  Runtime rt(deterministic_config());
  const Tensor x = f64(rt, {3}, {0.0, std::log(2.0), std::log(3.0)});
  expect_values(rt.call1(ops::softmax(), {x}), {1.0 / 6, 1.0 / 3, 1.0 / 2});
  expect_values(rt.call1(ops::log_softmax(), {x}), {std::log(1.0 / 6), std::log(1.0 / 3), std::log(1.0 / 2)});
}

TEST(Softmax, KnownValuesOverAnotherAxis) {
  Runtime rt(deterministic_config());
  // Columns of [[0, 0], [ln 3, 0]]: [1/4, 3/4] and [1/2, 1/2].
  const Tensor x = f64(rt, {2, 2}, {0.0, 0.0, std::log(3.0), 0.0});
  for (const std::int64_t axis : {0, -2}) {
    expect_values(rt.call1(ops::softmax(), {x}, {{"axis", axis}}), {0.25, 0.5, 0.75, 0.5});
  }
  // A middle axis of three: [2, 2, 1] over axis 1 pairs elements (0, 1) and (2, 3).
  const Tensor cube = f64(rt, {2, 2, 1}, {0.0, std::log(3.0), std::log(2.0), std::log(2.0)});
  expect_values(rt.call1(ops::softmax(), {cube}, {{"axis", std::int64_t{1}}}), {0.25, 0.75, 0.5, 0.5});
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  Runtime rt(deterministic_config());
  const Tensor x = f32(rt, {2, 2}, {1000.0F, 1000.0F, 1000.0F, 0.0F});
  EXPECT_EQ(rt.call1(ops::softmax(), {x}).to_host(), (std::vector<float>{0.5F, 0.5F, 1.0F, 0.0F}));
  const std::vector<float> log = rt.call1(ops::log_softmax(), {x}).to_host();
  EXPECT_NEAR(log[0], -std::log(2.0F), 1e-7);
  EXPECT_EQ(log[2], 0.0F);
  EXPECT_EQ(log[3], -1000.0F);
}

TEST(Softmax, BackwardOpsKnownValues) {
  Runtime rt(deterministic_config());
  const Tensor g = f64(rt, {2}, {1.0, 0.0});
  // y (g - Σ g y) with y = [1/4, 3/4]: Σ g y = 1/4.
  expect_values(rt.call1(ops::softmax_backward(), {g, f64(rt, {2}, {0.25, 0.75})}), {0.1875, -0.1875});
  // g - exp(y) Σ g with exp(y) = [1/4, 3/4].
  expect_values(rt.call1(ops::log_softmax_backward(), {g, f64(rt, {2}, {std::log(0.25), std::log(0.75)})}),
                {0.75, -0.75});
  // Over axis 0 of [2, 1]: the same as above.
  expect_values(rt.call1(ops::softmax_backward(), {rt.view(g, {2, 1}), f64(rt, {2, 1}, {0.25, 0.75})},
                         {{"axis", std::int64_t{0}}}),
                {0.1875, -0.1875});
}

TEST(Softmax, GradientRulesReadTheOutput) {
  Runtime rt(deterministic_config());
  const std::vector<Tensor> x{f64(rt, {2}, {0.0, std::log(3.0)})};
  for (const OpDef* op : {&ops::softmax(), &ops::log_softmax()}) {
    const std::vector<Tensor> y = rt.call(*op, x);
    const std::vector<Tensor> g{f64(rt, {2}, {1.0, 0.0})};
    const std::vector<Tensor> dx = vjp(rt, *op, x, y, g);
    expect_values(dx[0],
                  op == &ops::softmax() ? std::vector<double>{0.1875, -0.1875} : std::vector<double>{0.75, -0.75});
  }
}

// Rows spread over the CPU kernels' threads (kernels/cpu_threads.h) in a large tensor: each row gets the bits it
// gets alone, in a tensor too small to be split. softmax, log_softmax and their backward ops, and layer norm,
// on x [512, 97] (rows of 97: no vector width divides them).
TEST(Softmax, RowsOfALargeTensorGetTheBitsTheyGetAlone) {
  Runtime rt(deterministic_config());
  const std::int64_t rows = 512, width = 97;
  std::vector<float> xs(static_cast<std::size_t>(rows * width)), gs(xs.size());
  for (std::size_t e = 0; e < xs.size(); ++e) {
    xs[e] = static_cast<float>((e * 7919) % 4001) / 400.0F - 5.0F;
    gs[e] = static_cast<float>((e * 104729) % 997) / 331.0F - 1.5F;
  }
  const std::vector<float> ws(static_cast<std::size_t>(width), 1.25F), bs(static_cast<std::size_t>(width), -0.5F);
  const Tensor w = f32(rt, {width}, ws);
  const Tensor b = f32(rt, {width}, bs);
  const auto whole = [&](const std::vector<float>& values) { return f32(rt, {rows, width}, values); };
  const auto row = [&](const std::vector<float>& values, std::int64_t r) {
    return f32(rt, {1, width}, std::vector<float>(values.begin() + r * width, values.begin() + (r + 1) * width));
  };
  const auto run_all = [&](const auto& make) {
    std::vector<std::vector<float>> out;
    for (const OpDef* op : {&ops::softmax(), &ops::log_softmax()}) {
      const Tensor y = rt.call1(*op, {make(xs)});
      out.push_back(y.to_host());
      const OpDef& back = op == &ops::softmax() ? ops::softmax_backward() : ops::log_softmax_backward();
      out.push_back(rt.call1(back, {make(gs), y}).to_host());
    }
    out.push_back(rt.call(ops::layer_norm(), std::vector<Tensor>{make(xs), w, b})[0].to_host());
    return out;
  };
  const std::vector<std::vector<float>> together = run_all(whole);
  std::vector<std::vector<float>> alone(together.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::vector<std::vector<float>> one = run_all([&](const std::vector<float>& v) { return row(v, r); });
    for (std::size_t k = 0; k < one.size(); ++k) alone[k].insert(alone[k].end(), one[k].begin(), one[k].end());
  }
  for (std::size_t k = 0; k < together.size(); ++k) EXPECT_EQ(together[k], alone[k]) << "result " << k;
}

// The CPU kernels keep each row's exps in scratch and take each exp once; a row too long for the scratch, and
// the CUDA kernels, take each twice, in runs. Both forms must give the same bits, with the CPU's exps in lanes
// and with one std::exp at a time: the op's CPU output against the two-exp row function.
template <typename T>
void expect_softmax_bits_of_the_two_exp_form() {
  Runtime rt(deterministic_config());
  const std::int64_t rows = 6, width = 41;
  std::vector<T> xs(static_cast<std::size_t>(rows * width));
  for (std::size_t e = 0; e < xs.size(); ++e) xs[e] = static_cast<T>(std::sin(0.37 * static_cast<double>(e)) * 30.0);
  xs[3] = std::numeric_limits<T>::quiet_NaN();                  // a NaN row
  xs[width + 5] = -std::numeric_limits<T>::infinity();           // exp(-inf - max) = 0
  xs[2 * width + 7] = static_cast<T>(1e30);                      // one huge logit
  const DType dtype = std::is_same_v<T, float> ? DType::float32 : DType::float64;
  const Tensor x = rt.constant(TensorMeta{{rows, width}, dtype}, xs);
  for (const bool log : {false, true}) {
    const std::vector<T> got = rt.call1(log ? ops::log_softmax() : ops::softmax(), {x}).template to_host_as<T>();
    std::vector<T> want(xs.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      kernels::softmax_row(xs.data() + r * width, want.data() + r * width, width, 1, log, nullptr,
                           kernels::ExpsInLanes{});
    }
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(T))) << (log ? "log_softmax" : "softmax");
  }
  // Along a strided axis, in place, as the attention's weights are made; 41 rows: runs of 16, 16 and 9.
  const auto once_and_twice = [&](auto exps_of) {
    std::vector<T> once = xs, twice = xs;
    std::vector<double> exps(static_cast<std::size_t>(width));
    for (std::int64_t r = 0; r < rows; ++r) {
      kernels::softmax_row(once.data() + r, once.data() + r, width, rows, false, exps.data(), exps_of);
      kernels::softmax_row(twice.data() + r, twice.data() + r, width, rows, false, nullptr, exps_of);
    }
    EXPECT_EQ(0, std::memcmp(once.data(), twice.data(), once.size() * sizeof(T)));
  };
  once_and_twice(kernels::ExpsInLanes{});
  once_and_twice(kernels::ExpsOneByOne{});
}

TEST(Softmax, TakingEachExpOnceGivesTheBitsOfTakingItTwice) {
  expect_softmax_bits_of_the_two_exp_form<float>();
  expect_softmax_bits_of_the_two_exp_form<double>();
  // The scratch is bounded: a longer row takes each exp twice.
  EXPECT_NE(kernels::exp_scratch(std::int64_t{1} << 16), nullptr);
  EXPECT_EQ(kernels::exp_scratch((std::int64_t{1} << 16) + 1), nullptr);
}

// The exps in lanes are libmvec's (a few ulps of a double): softmax's float32 results are those of one std::exp
// at a time to within an ulp of the result.
TEST(Softmax, ExpsInLanesAgreeWithOneStdExpAtATime) {
  const std::int64_t width = 1000;
  std::vector<float> xs(static_cast<std::size_t>(width));
  for (std::size_t e = 0; e < xs.size(); ++e) {
    xs[e] = static_cast<float>(std::sin(0.91 * static_cast<double>(e)) * 12.0);
  }
  for (const bool log : {false, true}) {
    std::vector<float> lanes(xs.size()), one_by_one(xs.size());
    kernels::softmax_row(xs.data(), lanes.data(), width, 1, log, nullptr, kernels::ExpsInLanes{});
    kernels::softmax_row(xs.data(), one_by_one.data(), width, 1, log, nullptr, kernels::ExpsOneByOne{});
    for (std::size_t e = 0; e < xs.size(); ++e) {
      EXPECT_LE(std::abs(lanes[e] - one_by_one[e]), std::abs(one_by_one[e]) * std::numeric_limits<float>::epsilon())
          << (log ? "log_softmax" : "softmax") << " element " << e;
    }
  }
}

TEST(Softmax, ShapeDtypeAndAttributeErrors) {
  for (const OpDef* op : {&ops::softmax(), &ops::log_softmax()}) {
    const std::string name = "op '" + op->name + "'";
    expect_shape_error(*op, {meta({})}, {name, "rank 1 or more", "[]"});
    expect_shape_error(*op, {meta({2, 3})}, {name, "axis 2 outside [-2, 2)", "[2, 3]"}, {{"axis", std::int64_t{2}}});
    expect_shape_error(*op, {meta({2, 3})}, {name, "axis -3"}, {{"axis", std::int64_t{-3}}});
    expect_shape_error(*op, {meta({2}, DType::int64)}, {name, "float32 or float64", "int64 [2]"});
    expect_error<InvalidArgument>([&] { op->infer(std::vector<TensorMeta>{meta({2})}, {{"axis", 1.0}}); }, {"'axis'"});
  }
  for (const OpDef* op : {&ops::softmax_backward(), &ops::log_softmax_backward()}) {
    const std::string name = "op '" + op->name + "'";
    expect_shape_error(*op, {meta({2, 3}), meta({3, 2})}, {name, "same shape", "[2, 3] and [3, 2]"});
    expect_shape_error(*op, {meta({2}), meta({2}, DType::float64)}, {name, "one dtype"});
    expect_shape_error(*op, {meta({2}), meta({2})}, {name, "axis 1"}, {{"axis", std::int64_t{1}}});
  }
}

// ---- cross-entropy ----------------------------------------------------------------------------------------

TEST(CrossEntropy, KnownValueAndGradient) {
  Runtime rt(deterministic_config());
  // Row probabilities [1/4, 3/4] and [3/4, 1/4]; both labels 1: losses -ln(3/4) and -ln(1/4).
  const Tensor logits = f64(rt, {2, 2}, {0.0, std::log(3.0), std::log(3.0), 0.0});
  const Tensor labels = i64(rt, {2}, {1, 1});
  const Tensor loss = rt.call1(ops::cross_entropy(), {logits, labels});
  EXPECT_EQ(loss.meta(), meta({}, DType::float64));
  expect_values(loss, {(std::log(4.0 / 3.0) + std::log(4.0)) / 2});
  // grad / N (p - onehot) with grad 2.
  const Tensor dx = rt.call1(ops::cross_entropy_backward(), {f64(rt, {}, {2.0}), logits, labels});
  expect_values(dx, {0.25, -0.25, 0.75, -0.75});
  // The rule: the same gradient, none for the labels.
  const std::vector<Tensor> inputs{logits, labels};
  const std::vector<Tensor> grads =
      vjp(rt, ops::cross_entropy(), inputs, std::vector<Tensor>{loss}, std::vector<Tensor>{f64(rt, {}, {2.0})});
  ASSERT_EQ(grads.size(), 2U);
  expect_values(grads[0], {0.25, -0.25, 0.75, -0.75});
  EXPECT_FALSE(grads[1].defined());
}

TEST(CrossEntropy, Float32MatchesAndIsStableForLargeLogits) {
  Runtime rt(deterministic_config());
  const Tensor logits = f32(rt, {1, 3}, {1000.0F, 0.0F, 1000.0F});
  const Tensor labels = i64(rt, {1}, {0});
  expect_values(rt.call1(ops::cross_entropy(), {logits, labels}), {std::log(2.0)}, 1e-6);
  expect_values(rt.call1(ops::cross_entropy(), {logits, i64(rt, {1}, {1})}), {1000.0 + std::log(2.0)}, 1e-4);
}

TEST(CrossEntropy, ShapeAndDtypeErrorsNameTheOpAndShapes) {
  const OpDef& ce = ops::cross_entropy();
  const TensorMeta labels = meta({2}, DType::int64);
  expect_shape_error(ce, {meta({6}), labels}, {"op 'cross_entropy'", "logits [N, C]", "[6] and int64 [2]"});
  expect_shape_error(ce, {meta({2, 3}), meta({3}, DType::int64)}, {"int64 labels [N]", "[2, 3] and int64 [3]"});
  expect_shape_error(ce, {meta({2, 3}), meta({2})}, {"int64 labels [N]", "[2, 3] and [2]"});
  expect_shape_error(ce, {meta({2, 3}), meta({2, 1}, DType::int64)}, {"int64 labels [N]"});
  expect_shape_error(ce, {meta({0, 3}), meta({0}, DType::int64)}, {"N, C >= 1", "[0, 3]"});
  expect_shape_error(ce, {meta({2, 0}), labels}, {"N, C >= 1", "[2, 0]"});
  expect_shape_error(ce, {meta({2, 3}, DType::int64), labels}, {"float32 or float64"});
  const OpDef& back = ops::cross_entropy_backward();
  expect_shape_error(back, {meta({1}), meta({2, 3}), labels}, {"op 'cross_entropy_backward'", "scalar grad"});
  expect_shape_error(back, {meta({}, DType::float64), meta({2, 3}), labels}, {"one dtype"});
  expect_shape_error(back, {meta({}), meta({2, 3}), meta({2})}, {"int64 labels [N]"});
}

TEST(CrossEntropy, ALabelOutOfRangeIsAShapeErrorBeforeAnyAllocation) {
  Runtime rt(deterministic_config());
  const Tensor logits = f32(rt, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor grad = f32(rt, {}, {1});
  for (const std::int64_t bad : {3, -1}) {
    const Tensor labels = i64(rt, {2}, {0, bad});
    const auto before = rt.allocator().stats().num_allocations;
    const std::string label = "label " + std::to_string(bad) + " at position 1 outside [0, 3)";
    expect_error<ShapeError>(
        [&] {
          rt.call1(ops::cross_entropy(), {logits, labels});
        },
        {"op 'cross_entropy'", label, "[2, 3] and int64 [2]"});
    expect_error<ShapeError>(
        [&] {
          rt.call1(ops::cross_entropy_backward(), {grad, logits, labels});
        },
        {"op 'cross_entropy_backward'", label, "[], [2, 3] and int64 [2]"});
    EXPECT_EQ(rt.allocator().stats().num_allocations, before) << "an output was allocated";
  }
  // The same call with labels in range runs.
  EXPECT_EQ(rt.call1(ops::cross_entropy(), {logits, i64(rt, {2}, {0, 2})}).numel(), 1);
}

// ---- layer norm -------------------------------------------------------------------------------------------

TEST(LayerNorm, KnownValues) {
  Runtime rt(deterministic_config());
  // Rows [1, 3] (mean 2, variance 1) and [0, 4] (mean 2, variance 4): x̂ = [-1, 1] for both.
  const Tensor x = f64(rt, {2, 2}, {1, 3, 0, 4});
  const std::vector<Tensor> out =
      rt.call(ops::layer_norm(), std::vector<Tensor>{x, f64(rt, {2}, {2, 1}), f64(rt, {2}, {0, 10})}, {{"eps", 0.0}});
  ASSERT_EQ(out.size(), 3U);
  EXPECT_EQ(out[1].shape(), Shape{2});
  expect_values(out[0], {-2, 11, -2, 11});
  expect_values(out[1], {2, 2});
  expect_values(out[2], {1, 0.5});
  // The default eps, 1e-5: invstd of a row of variance 1 is (1 + 1e-5)^-1/2.
  const std::vector<Tensor> defaulted =
      rt.call(ops::layer_norm(), std::vector<Tensor>{x, f64(rt, {2}, {1, 1}), f64(rt, {2}, {0, 0})});
  expect_values(defaulted[2], {1.0 / std::sqrt(1.0 + 1e-5), 1.0 / std::sqrt(4.0 + 1e-5)});
  // A 3-D input: statistics per row of the last dimension, of shape [1, 2].
  const std::vector<Tensor> cube =
      rt.call(ops::layer_norm(),
              std::vector<Tensor>{rt.view(x, {1, 2, 2}), f64(rt, {2}, {2, 1}), f64(rt, {2}, {0, 10})}, {{"eps", 0.0}});
  EXPECT_EQ(cube[1].shape(), (Shape{1, 2}));
  expect_values(cube[0], {-2, 11, -2, 11});
}

TEST(LayerNorm, KnownValuesOverTwoTrailingDimensions) {
  Runtime rt(deterministic_config());
  // normalized_rank 2 on [2, 2, 2]: rows [1, 3, 1, 3] (mean 2, variance 1) and [0, 4, 4, 0] (mean 2,
  // variance 4); weight and bias [2, 2].
  const Tensor x = f64(rt, {2, 2, 2}, {1, 3, 1, 3, 0, 4, 4, 0});
  const Tensor w = f64(rt, {2, 2}, {1, 2, 3, 4});
  const Tensor b = f64(rt, {2, 2}, {0, 0, 0, 10});
  const Attrs attrs{{"eps", 0.0}, {"normalized_rank", std::int64_t{2}}};
  const std::vector<Tensor> out = rt.call(ops::layer_norm(), std::vector<Tensor>{x, w, b}, attrs);
  EXPECT_EQ(out[1].shape(), Shape{2});
  expect_values(out[0], {-1, 2, -3, 14, -1, 2, 3, 6});
  expect_values(out[1], {2, 2});
  expect_values(out[2], {1, 0.5});
  // Backward with grad 1 on the first row only: dweight = x̂ of row 0, dbias = 1 + 0; row 1 gets dx = 0.
  // Row 0: h = weight, mean(h) = 5/2, mean(h x̂) = (-1 + 2 - 3 + 4) / 4 = 1/2, dx = h - 5/2 - x̂ / 2.
  const Tensor g = f64(rt, {2, 2, 2}, {1, 1, 1, 1, 0, 0, 0, 0});
  const std::vector<Tensor> grads =
      rt.call(ops::layer_norm_backward(), std::vector<Tensor>{g, x, w, out[1], out[2]}, attrs);
  expect_values(grads[0], {-1, -1, 1, 1, 0, 0, 0, 0});
  expect_values(grads[1], {-1, 1, -1, 1});
  expect_values(grads[2], {1, 1, 1, 1});
  // The rule passes the attributes on.
  const std::vector<Tensor> rule =
      vjp(rt, ops::layer_norm(), std::vector<Tensor>{x, w, b}, out, std::vector<Tensor>{g, Tensor(), Tensor()}, attrs);
  expect_values(rule[0], {-1, -1, 1, 1, 0, 0, 0, 0});
  expect_values(rule[2], {1, 1, 1, 1});
}

TEST(LayerNorm, BackwardKnownValues) {
  Runtime rt(deterministic_config());
  // x = [-1, 0, 1] with eps 1/3: mean 0, variance 2/3, invstd 1, x̂ = x. weight [1, 2, 3], grad 1: h = [1, 2, 3],
  // mean(h) = 2, mean(h x̂) = 2/3, dx = h - 2 - x̂ 2/3.
  const std::vector<Tensor> in{f64(rt, {1, 3}, {-1, 0, 1}), f64(rt, {3}, {1, 2, 3}), f64(rt, {3}, {0, 0, 0})};
  const std::vector<Tensor> out = rt.call(ops::layer_norm(), in, {{"eps", 1.0 / 3}});
  expect_values(out[0], {-1, 0, 3});
  expect_values(out[2], {1});
  const std::vector<Tensor> grads = rt.call(
      ops::layer_norm_backward(), std::vector<Tensor>{f64(rt, {1, 3}, {1, 1, 1}), in[0], in[1], out[1], out[2]});
  ASSERT_EQ(grads.size(), 3U);
  expect_values(grads[0], {-1.0 / 3, 0, 1.0 / 3});
  expect_values(grads[1], {-1, 0, 1});
  expect_values(grads[2], {1, 1, 1});
  // The rule calls the backward op; the statistics' output gradients are taken as zero.
  const std::vector<Tensor> output_grads{f64(rt, {1, 3}, {1, 1, 1}), f64(rt, {1}, {5}), Tensor()};
  const std::vector<Tensor> rule = vjp(rt, ops::layer_norm(), in, out, output_grads, {{"eps", 1.0 / 3}});
  expect_values(rule[0], {-1.0 / 3, 0, 1.0 / 3});
  expect_values(rule[1], {-1, 0, 1});
}

TEST(LayerNorm, ShapeDtypeAndAttributeErrors) {
  const OpDef& ln = ops::layer_norm();
  expect_shape_error(ln, {meta({2, 3}), meta({2}), meta({3})},
                     {"op 'layer_norm'", "weight and bias of the normalized shape [3]", "[2, 3], [2] and [3]"});
  expect_shape_error(ln, {meta({2, 3}), meta({3}), meta({3, 1})}, {"normalized shape [3]"});
  expect_shape_error(ln, {meta({2, 3}), meta({3}), meta({3})}, {"normalized shape [2, 3]"},
                     {{"normalized_rank", std::int64_t{2}}});
  expect_shape_error(ln, {meta({}), meta({1}), meta({1})}, {"rank >= normalized_rank 1 >= 1", "[]"});
  expect_shape_error(ln, {meta({2, 3}), meta({2, 3}), meta({2, 3})}, {"normalized_rank 3"},
                     {{"normalized_rank", std::int64_t{3}}});
  expect_shape_error(ln, {meta({2, 3}), meta({3}), meta({3})}, {"normalized_rank 0"},
                     {{"normalized_rank", std::int64_t{0}}});
  expect_shape_error(ln, {meta({2, 0}), meta({0}), meta({0})}, {"at least one element", "[2, 0]"});
  expect_error<InvalidArgument>(
      [&] {
        ln.infer(std::vector<TensorMeta>{meta({3}), meta({3}), meta({3})}, {{"normalized_rank", 1.0}});
      },
      {"'normalized_rank'"});
  expect_shape_error(ln, {meta({2, 3}), meta({3}, DType::float64), meta({3})}, {"one dtype"});
  expect_error<InvalidArgument>(
      [&] {
        ln.infer(std::vector<TensorMeta>{meta({3}), meta({3}), meta({3})}, {{"eps", -1.0}});
      },
      {"op 'layer_norm'", "'eps'", "-1"});
  expect_error<InvalidArgument>(
      [&] {
        ln.infer(std::vector<TensorMeta>{meta({3}), meta({3}), meta({3})}, {{"eps", std::int64_t{1}}});
      },
      {"'eps'"});
  const OpDef& back = ops::layer_norm_backward();
  const TensorMeta x = meta({2, 3});
  expect_shape_error(back, {x, x, meta({3}), meta({2}), meta({3})},
                     {"op 'layer_norm_backward'", "mean and invstd [...]"});
  expect_shape_error(back, {meta({3, 2}), x, meta({3}), meta({2}), meta({2})}, {"grad_y and x [..., D...]"});
  expect_shape_error(back, {x, x, meta({2}), meta({2}), meta({2})}, {"weight [D...]", "= [3]"});
  expect_shape_error(back, {x, x, meta({3}), meta({2}), meta({2})}, {"= [2, 3]"},
                     {{"normalized_rank", std::int64_t{2}}});
  expect_shape_error(back, {x, x, meta({3}), meta({2}), meta({2})}, {"normalized_rank 4"},
                     {{"normalized_rank", std::int64_t{4}}});
}

}  // namespace
}  // namespace dtr::test

// Softmax, cross-entropy, layer norm and batch norm: known values on small hand-computed cases, shape, dtype and
// attribute errors, the label check before any allocation, and batch norm's training step with its running
// statistics updated in place through the runtime.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/gradients.h"
#include "dtr/ops.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

Tensor f32(Runtime& rt, Shape shape, std::vector<float> values) {
  return rt.constant(TensorMeta{std::move(shape)}, values);
}
Tensor f64(Runtime& rt, Shape shape, std::vector<double> values) {
  return rt.constant(TensorMeta{std::move(shape), DType::float64}, values);
}
Tensor i64(Runtime& rt, Shape shape, std::vector<std::int64_t> values) {
  return rt.constant(TensorMeta{std::move(shape), DType::int64}, values);
}

void expect_values(const std::vector<double>& actual, const std::vector<double>& expected, double tolerance = 1e-12) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
}
void expect_values(const Tensor& actual, const std::vector<double>& expected, double tolerance = 1e-12) {
  if (actual.meta().dtype == DType::float64) return expect_values(actual.to_host_as<double>(), expected, tolerance);
  const std::vector<float> values = actual.to_host();
  expect_values(std::vector<double>(values.begin(), values.end()), expected, tolerance);
}

void expect_shape_error(const OpDef& op, std::vector<TensorMeta> inputs, std::initializer_list<std::string_view> parts,
                        const Attrs& attrs = {}) {
  expect_error<ShapeError>([&] { op.infer(inputs, attrs); }, parts);
}

TensorMeta meta(Shape shape, DType dtype = DType::float32) { return TensorMeta{std::move(shape), dtype}; }

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

// ---- batch norm -------------------------------------------------------------------------------------------

TEST(BatchNorm, KnownValuesInTraining) {
  Runtime rt(deterministic_config());
  const Tensor w = f64(rt, {2}, {1, 2});
  const Tensor b = f64(rt, {2}, {0, 1});
  // Channel 0: [1, 3] (mean 2, variance 1); channel 1: [10, 30] (mean 20, variance 100). x̂ = [-1, 1] for both.
  const Tensor flat = f64(rt, {2, 2}, {1, 10, 3, 30});
  const std::vector<Tensor> out = rt.call(ops::batch_norm(), std::vector<Tensor>{flat, w, b}, {{"eps", 0.0}});
  expect_values(out[0], {-1, -1, 1, 3});
  expect_values(out[1], {2, 20});
  expect_values(out[2], {1, 0.1});
  // With a spatial dimension: x [1, 2, 2], the channels' elements side by side.
  const Tensor spatial = f64(rt, {1, 2, 2}, {1, 3, 10, 30});
  const std::vector<Tensor> image = rt.call(ops::batch_norm(), std::vector<Tensor>{spatial, w, b}, {{"eps", 0.0}});
  expect_values(image[0], {-1, 1, -1, 3});
  expect_values(image[1], {2, 20});
  expect_values(image[2], {1, 0.1});
}

TEST(BatchNorm, BackwardKnownValues) {
  Runtime rt(deterministic_config());
  // One channel of [-1, 0, 1], eps 1/3: mean 0, invstd 1, x̂ = x. weight 2, grad [1, 2, 3]: dweight = Σ g x̂ = 2,
  // dbias = 6, dx = 2 (g - 6/3 - x̂ 2/3).
  const std::vector<Tensor> in{f64(rt, {3, 1}, {-1, 0, 1}), f64(rt, {1}, {2}), f64(rt, {1}, {0})};
  const std::vector<Tensor> out = rt.call(ops::batch_norm(), in, {{"eps", 1.0 / 3}});
  const Tensor g = f64(rt, {3, 1}, {1, 2, 3});
  const std::vector<Tensor> grads =
      rt.call(ops::batch_norm_backward(), std::vector<Tensor>{g, in[0], in[1], out[1], out[2]});
  expect_values(grads[0], {-2.0 / 3, 0, 2.0 / 3});
  expect_values(grads[1], {2});
  expect_values(grads[2], {6});
  const std::vector<Tensor> rule =
      vjp(rt, ops::batch_norm(), in, out, std::vector<Tensor>{g, Tensor(), Tensor()}, {{"eps", 1.0 / 3}});
  expect_values(rule[0], {-2.0 / 3, 0, 2.0 / 3});
  expect_values(rule[2], {6});
}

// Batch norm's training forward and backward on x [n, c, s], written out in double; each channel's sums are
// sum(ch, term): the sum of term(e) over the channel's elements e.
struct BatchNormReference {
  std::vector<double> y, mean, invstd, dx, dweight, dbias;
};
template <typename Sum>
BatchNormReference batch_norm_reference(std::int64_t n, std::int64_t c, std::int64_t s, const std::vector<double>& xs,
                                        const std::vector<double>& gs, const std::vector<double>& ws,
                                        const std::vector<double>& bs, double eps, const Sum& sum) {
  const auto each = [&](std::int64_t ch, const auto& fn) {
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < s; ++j) fn(static_cast<std::size_t>((i * c + ch) * s + j));
    }
  };
  const double m = static_cast<double>(n * s);
  BatchNormReference r{std::vector<double>(xs.size()), {}, {}, std::vector<double>(xs.size()), {}, {}};
  for (std::int64_t ch = 0; ch < c; ++ch) {
    const double w = ws[static_cast<std::size_t>(ch)];
    const double b = bs[static_cast<std::size_t>(ch)];
    const double mean = sum(ch, [&](std::size_t e) { return xs[e]; }) / m;
    const double invstd =
        1.0 / std::sqrt(sum(ch, [&](std::size_t e) { return (xs[e] - mean) * (xs[e] - mean); }) / m + eps);
    each(ch, [&](std::size_t e) { r.y[e] = (xs[e] - mean) * invstd * w + b; });
    const double dw = sum(ch, [&](std::size_t e) { return gs[e] * ((xs[e] - mean) * invstd); });
    const double db = sum(ch, [&](std::size_t e) { return gs[e]; });
    each(ch, [&](std::size_t e) { r.dx[e] = w * invstd * (gs[e] - db / m - (xs[e] - mean) * invstd * (dw / m)); });
    r.mean.push_back(mean);
    r.invstd.push_back(invstd);
    r.dweight.push_back(dw);
    r.dbias.push_back(db);
  }
  return r;
}

// The kernel's results for x, grad_y, weight and bias of that layout, float64: y, mean, invstd, then the
// gradients of x, weight and bias.
std::vector<std::vector<double>> batch_norm_results(std::int64_t n, std::int64_t c, std::int64_t s,
                                                    const std::vector<double>& xs, const std::vector<double>& gs,
                                                    const std::vector<double>& ws, const std::vector<double>& bs,
                                                    double eps) {
  Runtime rt(deterministic_config());
  const std::vector<Tensor> in{f64(rt, {n, c, s}, xs), f64(rt, {c}, ws), f64(rt, {c}, bs)};
  const std::vector<Tensor> out = rt.call(ops::batch_norm(), in, {{"eps", eps}});
  const std::vector<Tensor> grads = rt.call(
      ops::batch_norm_backward(), std::vector<Tensor>{f64(rt, {n, c, s}, gs), in[0], in[1], out[1], out[2]});
  std::vector<std::vector<double>> all;
  for (const Tensor& t : out) all.push_back(t.to_host_as<double>());
  for (const Tensor& t : grads) all.push_back(t.to_host_as<double>());
  return all;
}

// Channels longer than the kernel's eight partial sums, with a remainder: x [2, 3, 11] (per channel two runs of
// 11: one group of eight and three more each), against one running sum per channel.
TEST(BatchNorm, LongChannelsAreSummedWhole) {
  const std::int64_t n = 2, c = 3, s = 11;
  std::vector<double> xs(static_cast<std::size_t>(n * c * s));
  std::vector<double> gs(xs.size());
  for (std::size_t e = 0; e < xs.size(); ++e) {
    xs[e] = static_cast<double>((e * 37) % 23) - 11.0 + 0.25 * static_cast<double>(e % 3);
    gs[e] = static_cast<double>((e * 11) % 7) - 3.0;
  }
  const std::vector<double> ws{1.5, -0.5, 2.0};
  const std::vector<double> bs{0.25, 1.0, -2.0};
  const auto running_sum = [&](std::int64_t ch, const auto& term) {
    double total = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < s; ++j) total += term(static_cast<std::size_t>((i * c + ch) * s + j));
    }
    return total;
  };
  const BatchNormReference r = batch_norm_reference(n, c, s, xs, gs, ws, bs, 1e-3, running_sum);
  const auto got = batch_norm_results(n, c, s, xs, gs, ws, bs, 1e-3);
  const std::vector<std::vector<double>> want{r.y, r.mean, r.invstd, r.dx, r.dweight, r.dbias};
  for (std::size_t k = 0; k < want.size(); ++k) expect_values(got[k], want[k]);
}

// The CPU kernel's documented order, bit for bit (docs/kernels.md): per channel eight partial sums in double,
// element j of each contiguous run to partial j mod 8, folded in a fixed tree. x [16, 8, 65, 65] (float64, where
// a change of order shows in the bits) is large enough for the channels to be spread over threads
// (kernels/cpu_threads.h) where the build has OpenMP: each channel must still be one thread's, in this order,
// whatever the thread count.
TEST(BatchNorm, TheSumsFollowTheDocumentedOrderOnAnyThreadCount) {
  const std::int64_t n = 16, c = 8, s = 65 * 65;
  std::vector<double> xs(static_cast<std::size_t>(n * c * s));
  std::vector<double> gs(xs.size());
  for (std::size_t e = 0; e < xs.size(); ++e) {
    xs[e] = static_cast<double>((e * 7919) % 1009) / 97.0 - 5.0;
    gs[e] = static_cast<double>((e * 104729) % 997) / 331.0 - 1.5;
  }
  std::vector<double> ws(static_cast<std::size_t>(c)), bs(ws.size());
  for (std::size_t k = 0; k < ws.size(); ++k) {
    ws[k] = 0.5 + 0.25 * static_cast<double>(k);
    bs[k] = 0.125 * static_cast<double>(k) - 0.5;
  }
  const auto lane_sum = [&](std::int64_t ch, const auto& term) {
    double lane[8] = {};
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < s; ++j) lane[j % 8] += term(static_cast<std::size_t>((i * c + ch) * s + j));
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  };
  const BatchNormReference r = batch_norm_reference(n, c, s, xs, gs, ws, bs, 1e-5, lane_sum);
  const auto got = batch_norm_results(n, c, s, xs, gs, ws, bs, 1e-5);
  const std::vector<std::vector<double>> want{r.y, r.mean, r.invstd, r.dx, r.dweight, r.dbias};
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got[k], want[k]) << "output " << k;
}

TEST(BatchNorm, EvalAndItsBackwardKnownValues) {
  Runtime rt(deterministic_config());
  // x = [1, 3], running mean 1, variance 4 (s = 1/2), weight 2, bias 1: y = (x - 1) / 2 * 2 + 1.
  const std::vector<Tensor> in{f64(rt, {2, 1}, {1, 3}), f64(rt, {1}, {2}), f64(rt, {1}, {1}), f64(rt, {1}, {1}),
                               f64(rt, {1}, {4})};
  const Tensor y = rt.call1(ops::batch_norm_eval(), in, {{"eps", 0.0}});
  expect_values(y, {1, 3});
  // grad 1: dx = w s = 1, dweight = Σ x̂ = 1, dbias = 2, dmean = -w s Σ g = -2, dvar = -w s² dweight / 2.
  const std::vector<Tensor> grads = vjp(rt, ops::batch_norm_eval(), in, std::vector<Tensor>{y},
                                        std::vector<Tensor>{f64(rt, {2, 1}, {1, 1})}, {{"eps", 0.0}});
  ASSERT_EQ(grads.size(), 5U);
  expect_values(grads[0], {1, 1});
  expect_values(grads[1], {1});
  expect_values(grads[2], {2});
  expect_values(grads[3], {-2});
  expect_values(grads[4], {-0.25});
}

TEST(BatchNorm, ShapeDtypeAndAttributeErrors) {
  const TensorMeta c = meta({3});
  expect_shape_error(ops::batch_norm(), {meta({3}), c, c}, {"op 'batch_norm'", "x [N, C, ...]", "[3], [3] and [3]"});
  expect_shape_error(ops::batch_norm(), {meta({2, 3, 4}), meta({4}), c},
                     {"per-channel inputs of shape [3]", "[2, 3, 4], [4] and [3]"});
  expect_shape_error(ops::batch_norm(), {meta({0, 3}), c, c}, {"at least one element per channel", "[0, 3]"});
  expect_shape_error(ops::batch_norm(), {meta({2, 3}), c, meta({3}, DType::float64)}, {"one dtype"});
  expect_error<InvalidArgument>(
      [] {
        ops::batch_norm().infer(std::vector<TensorMeta>{meta({2, 3}), meta({3}), meta({3})}, {{"eps", -0.5}});
      },
      {"'eps'"});
  const TensorMeta x = meta({2, 3});
  expect_shape_error(ops::batch_norm_backward(), {meta({3, 2}), x, c, c, c},
                     {"op 'batch_norm_backward'", "grad_y of x's shape"});
  expect_shape_error(ops::batch_norm_backward(), {x, x, c, meta({2}), c}, {"per-channel inputs of shape [3]"});
  expect_shape_error(ops::batch_norm_eval(), {x, c, c, c, meta({1})}, {"op 'batch_norm_eval'", "per-channel", "[1]"});
  expect_shape_error(ops::batch_norm_eval(), {meta({3}), c, c, c, c}, {"x [N, C, ...]"});
  expect_shape_error(ops::batch_norm_eval_backward(), {x, x, c, c, meta({4})},
                     {"op 'batch_norm_eval_backward'", "[4]"});
  expect_shape_error(ops::batch_norm_eval_backward(), {meta({2, 4}), x, c, c, c}, {"grad_y of x's shape"});
  // Eval mode reads no batch statistics: an empty batch is fine.
  EXPECT_EQ(ops::batch_norm_eval().infer(std::vector<TensorMeta>{meta({0, 3}), c, c, c, c}, {})[0], meta({0, 3}));
}

// ---- running statistics -----------------------------------------------------------------------------------

TEST(RunningStatUpdate, KnownValues) {
  Runtime rt(deterministic_config());
  const Tensor running = f64(rt, {2}, {1, 2});
  const Tensor stat = f64(rt, {2}, {3, 4});
  expect_values(rt.call1(ops::running_stat_update(), {running, stat}), {0.9 * 1 + 0.3, 0.9 * 2 + 0.4});  // momentum 0.1
  expect_values(rt.call1(ops::running_stat_update(), {running, stat}, {{"momentum", 0.5}}), {2, 3});
  // unbiased_count 3: the stat times 3/2.
  expect_values(
      rt.call1(ops::running_stat_update(), {running, stat}, {{"momentum", 0.5}, {"unbiased_count", std::int64_t{3}}}),
      {2.75, 4});
  // invstd_eps: the stat is an invstd, the variance 1/invstd² - eps: [4 - 0, 1 - 0].
  const Tensor invstd = f64(rt, {2}, {0.5, 1});
  expect_values(rt.call1(ops::running_stat_update(), {running, invstd}, {{"momentum", 0.5}, {"invstd_eps", 0.0}}),
                {2.5, 1.5});
  expect_values(rt.call1(ops::running_stat_update(), {running, invstd},
                         {{"momentum", 1.0}, {"invstd_eps", 0.5}, {"unbiased_count", std::int64_t{2}}}),
                {7, 1});
}

TEST(RunningStatUpdate, ShapeAndAttributeErrors) {
  const OpDef& op = ops::running_stat_update();
  const std::vector<TensorMeta> two{meta({2}), meta({2})};
  expect_shape_error(op, {meta({2}), meta({3})}, {"op 'running_stat_update'", "same shape", "[2] and [3]"});
  expect_shape_error(op, {meta({2}), meta({2}, DType::int64)}, {"float32 or float64"});
  expect_error<InvalidArgument>([&] { op.infer(two, {{"momentum", 1.5}}); }, {"'momentum'", "1.5", "[0, 1]"});
  expect_error<InvalidArgument>([&] { op.infer(two, {{"momentum", std::int64_t{1}}}); }, {"'momentum'"});
  expect_error<InvalidArgument>(
      [&] {
        op.infer(two, {{"unbiased_count", std::int64_t{1}}});
      },
      {"'unbiased_count'", ">= 2"});
  expect_error<InvalidArgument>([&] { op.infer(two, {{"invstd_eps", -1.0}}); }, {"'invstd_eps'", "-1"});
}

// One training step of batch norm through the runtime: the batch statistics update the running ones in place
// (Runtime::assign), and a value computed from the old running statistics recomputes bitwise equal after the
// update, from the old values.
TEST(BatchNorm, TrainingStepUpdatesRunningStatisticsInPlace) {
  Runtime rt(deterministic_config());
  // Channel 0: [1, 3, 5, 7], channel 1: [2, 4, 6, 8]: means 4 and 5, biased variances 5 (unbiased 20/3).
  const Tensor x = f32(rt, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor w = f32(rt, {2}, {1, 1});
  const Tensor b = f32(rt, {2}, {0, 0});
  Tensor running_mean = f32(rt, {2}, {0.5F, -1.0F});                                       // a constant target
  Tensor running_var = rt.call1(ops::scale(), {f32(rt, {2}, {1, 2})}, {{"factor", 1.0}});  // a computed target
  const double eps = 1e-5;
  const Tensor eval_before = rt.call1(ops::batch_norm_eval(), {x, w, b, running_mean, running_var}, {{"eps", eps}});
  const std::vector<float> eval_bits = eval_before.to_host();

  const std::vector<Tensor> out = rt.call(ops::batch_norm(), std::vector<Tensor>{x, w, b}, {{"eps", eps}});
  rt.assign(running_mean, ops::running_stat_update(), {running_mean, out[1]}, {{"momentum", 0.1}});
  rt.assign(running_var, ops::running_stat_update(), {running_var, out[2]},
            {{"momentum", 0.1}, {"invstd_eps", eps}, {"unbiased_count", std::int64_t{4}}});
  expect_values(running_mean, {0.9 * 0.5 + 0.1 * 4, 0.9 * -1.0 + 0.1 * 5}, 1e-6);
  expect_values(running_var, {0.9 * 1 + 0.1 * 20.0 / 3, 0.9 * 2 + 0.1 * 20.0 / 3}, 1e-5);
  const std::vector<float> var_bits = running_var.to_host();

  // Evicted and recomputed: the old value for the earlier result, the new one for the updated statistic.
  ASSERT_TRUE(rt.evict(eval_before));
  const std::vector<float> recomputed = eval_before.to_host();
  ASSERT_EQ(recomputed.size(), eval_bits.size());
  EXPECT_EQ(std::memcmp(recomputed.data(), eval_bits.data(), eval_bits.size() * sizeof(float)), 0);
  ASSERT_TRUE(rt.evict(running_var));
  ASSERT_TRUE(rt.evict(out[2]));
  const std::vector<float> var_again = running_var.to_host();
  EXPECT_EQ(std::memcmp(var_again.data(), var_bits.data(), var_bits.size() * sizeof(float)), 0);
  // And eval mode now reads the new statistics.
  const Tensor eval_after = rt.call1(ops::batch_norm_eval(), {x, w, b, running_mean, running_var}, {{"eps", eps}});
  EXPECT_NE(eval_after.to_host(), eval_bits);
}

}  // namespace
}  // namespace dtr::test

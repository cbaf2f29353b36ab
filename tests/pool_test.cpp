// Pooling (kernels/dense/pool.cpp): max_pool2d and avg_pool2d on small hand-computed cases, their backward
// ops, and the errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <limits>
#include <vector>

#include "dense_op_test_helpers.h"

namespace dtr::test {
namespace {

const Input kImage{{1, 1, 3, 3}, iota(9)};  // [[1, 2, 3], [4, 5, 6], [7, 8, 9]]

// ---- max_pool2d -------------------------------------------------------------------------------------------

TEST(MaxPool2d, TiesGoToTheFirstMaximumInRowMajorOrder) {
  const Input x{{1, 1, 4, 4}, {1, 2, 5, 5, 3, 4, 5, 1, 0, 0, -1, -2, 0, 0, -3, -4}};
  const Attrs attrs{{"kernel", Ints{2, 2}}};  // stride defaults to the kernel
  const Output y = run(ops::max_pool2d(), {x}, attrs);
  EXPECT_EQ(y.shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.values, (std::vector<float>{4, 5, 0, -1}));
  const Output dx = run(ops::max_pool2d_backward(), {Input{{1, 1, 2, 2}, {1, 2, 3, 4}}, x}, attrs);
  EXPECT_EQ(dx.shape, x.shape);
  // The 5 at (0, 2) is the first of three; the 0 at (2, 0) the first of four.
  EXPECT_EQ(dx.values, (std::vector<float>{0, 0, 2, 0, 0, 1, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0}));
  EXPECT_EQ(ops::max_pool2d().flops(std::vector<TensorMeta>{TensorMeta{x.shape}}, attrs), 16.0);
}

TEST(MaxPool2d, PaddingNeverWins) {
  const Input x{{1, 1, 3, 3}, iota(9, -9.0F)};  // -9 .. -1: a zero pad would beat every cell
  const Attrs attrs{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
  const Output y = run(ops::max_pool2d(), {x}, attrs);
  EXPECT_EQ(y.shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.values, (std::vector<float>{-9, -7, -3, -1}));
  const Output dx = run(ops::max_pool2d_backward(), {Input{{1, 1, 2, 2}, {1, 2, 3, 4}}, x}, attrs);
  EXPECT_EQ(dx.values, (std::vector<float>{1, 0, 2, 0, 0, 0, 3, 0, 4}));
}

TEST(MaxPool2d, OverlappingWindowsAddTheirGradients) {
  const Attrs attrs{{"kernel", Ints{1, 2}}, {"stride", Ints{1, 1}}};
  const Input grad{{1, 1, 1, 2}, {1, 10}};
  // [2, 2, 1]: the first window's tie goes to cell 0; [1, 5, 2]: both windows pick cell 1.
  EXPECT_EQ(run(ops::max_pool2d_backward(), {grad, Input{{1, 1, 1, 3}, {2, 2, 1}}}, attrs).values,
            (std::vector<float>{1, 10, 0}));
  EXPECT_EQ(run(ops::max_pool2d_backward(), {grad, Input{{1, 1, 1, 3}, {1, 5, 2}}}, attrs).values,
            (std::vector<float>{0, 11, 0}));
}

TEST(MaxPool2d, NaNPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Output y = run(ops::max_pool2d(), {Input{{1, 1, 1, 4}, {1, nan, 3, 4}}}, Attrs{{"kernel", Ints{1, 2}}});
  EXPECT_TRUE(std::isnan(y.values[0]));
  EXPECT_EQ(y.values[1], 4.0F);
  const Output z = run(ops::max_pool2d(), {Input{{1, 1, 1, 2}, {nan, 5}}}, Attrs{{"kernel", Ints{1, 2}}});
  EXPECT_TRUE(std::isnan(z.values[0]));
}

TEST(MaxPool2d, PoolsEveryPlaneOnItsOwn) {
  const Input x{{2, 2, 1, 2}, {1, 2, 4, 3, -1, -2, 0, 7}};
  const Output y = run(ops::max_pool2d(), {x}, Attrs{{"kernel", Ints{1, 2}}});
  EXPECT_EQ(y.shape, (Shape{2, 2, 1, 1}));
  EXPECT_EQ(y.values, (std::vector<float>{2, 4, -1, 7}));
}

// Planes are spread over the threads (kernels/cpu_threads.h) once an input is large: each plane's results, and
// its gradient's scatter, must be the bits it gets pooled alone.
TEST(Pool2d, ALargeInputsPlanesGetTheBitsEachGetsAlone) {
  const std::int64_t planes = 512, side = 15;
  std::vector<float> values(static_cast<std::size_t>(planes * side * side));
  for (std::size_t e = 0; e < values.size(); ++e) values[e] = static_cast<float>((e * 7919) % 23) / 7.0F - 1.5F;
  const Input x{{64, 8, side, side}, values};
  const Attrs attrs{{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
  Attrs avg_backward = attrs;
  avg_backward.set("input_shape", Ints{64, 8, side, side});
  const Output max_y = run(ops::max_pool2d(), {x}, attrs);
  const std::int64_t out_plane = max_y.shape[2] * max_y.shape[3];
  std::vector<float> grads(static_cast<std::size_t>(planes * out_plane));
  for (std::size_t e = 0; e < grads.size(); ++e) grads[e] = static_cast<float>((e * 104729) % 31) / 3.0F - 5.0F;
  const Input g{max_y.shape, grads};
  const Output max_dx = run(ops::max_pool2d_backward(), {g, x}, attrs);
  const Output avg_y = run(ops::avg_pool2d(), {x}, attrs);
  const Output avg_dx = run(ops::avg_pool2d_backward(), {g}, avg_backward);
  Attrs one_backward = attrs;
  one_backward.set("input_shape", Ints{1, 1, side, side});
  const auto part = [](const std::vector<float>& all, std::int64_t p, std::int64_t size) {
    return std::vector<float>(all.begin() + p * size, all.begin() + (p + 1) * size);
  };
  for (const std::int64_t p : {std::int64_t{0}, std::int64_t{1}, std::int64_t{255}, planes - 1}) {
    const Input xp{{1, 1, side, side}, part(values, p, side * side)};
    const Input gp{{1, 1, max_y.shape[2], max_y.shape[3]}, part(grads, p, out_plane)};
    EXPECT_EQ(part(max_y.values, p, out_plane), run(ops::max_pool2d(), {xp}, attrs).values) << p;
    EXPECT_EQ(part(max_dx.values, p, side * side), run(ops::max_pool2d_backward(), {gp, xp}, attrs).values) << p;
    EXPECT_EQ(part(avg_y.values, p, out_plane), run(ops::avg_pool2d(), {xp}, attrs).values) << p;
    EXPECT_EQ(part(avg_dx.values, p, side * side), run(ops::avg_pool2d_backward(), {gp}, one_backward).values) << p;
  }
}

// 2x2 windows at stride 2 take a path of their own (kernels/dense/pool.cpp): against the rule every max pooling
// follows, computed here window by window (the first maximal cell in window order, the first NaN once one
// is met, the gradient 0 + g at that cell and zero elsewhere), bit for bit, on planes with ties, signed zeros,
// NaNs of two payloads, odd sides whose last row or column no window covers, and gradients of -0.
TEST(MaxPool2d, TwoByTwoWindowsFollowTheRuleBitForBit) {
  const float nan_a = std::bit_cast<float>(0x7FC00001U);
  const float nan_b = std::bit_cast<float>(0xFFC00002U);
  const std::vector<float> palette{-1.0F, 0.0F, -0.0F, 1.0F, 2.0F, 2.0F, 1.0F, nan_a, nan_b};
  const auto bits = [](const std::vector<float>& v) {
    std::vector<std::uint32_t> b;
    for (const float f : v) b.push_back(std::bit_cast<std::uint32_t>(f));
    return b;
  };
  const Attrs attrs{{"kernel", Ints{2, 2}}};
  std::uint64_t state = 7;
  const auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state >> 33);
  };
  for (const auto& [h, w] : {std::pair{2, 2}, {3, 5}, {6, 4}, {7, 7}, {28, 28}}) {
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w));
    const std::int64_t planes = 6;
    const std::int64_t oh = h / 2, ow = w / 2;
    std::vector<float> x(static_cast<std::size_t>(planes * h * w));
    for (float& v : x) v = palette[next() % palette.size()];
    std::vector<float> g(static_cast<std::size_t>(planes * oh * ow));
    for (float& v : g) v = next() % 4 == 0 ? -0.0F : static_cast<float>(next() % 9) - 4.0F;
    std::vector<float> y(g.size());
    std::vector<float> dx(x.size(), 0.0F);
    for (std::int64_t p = 0; p < planes; ++p) {
      for (std::int64_t i = 0; i < oh; ++i) {
        for (std::int64_t j = 0; j < ow; ++j) {
          std::int64_t best = (p * h + 2 * i) * w + 2 * j;
          for (const std::int64_t cell : {best + 1, best + w, best + w + 1}) {
            const float b = x[static_cast<std::size_t>(best)];
            const float c = x[static_cast<std::size_t>(cell)];
            if (!std::isnan(b) && (c > b || std::isnan(c))) best = cell;
          }
          const std::size_t out = static_cast<std::size_t>((p * oh + i) * ow + j);
          y[out] = x[static_cast<std::size_t>(best)];
          dx[static_cast<std::size_t>(best)] = 0.0F + g[out];
        }
      }
    }
    const Input xin{{2, 3, h, w}, x};
    EXPECT_EQ(bits(run(ops::max_pool2d(), {xin}, attrs).values), bits(y));
    EXPECT_EQ(bits(run(ops::max_pool2d_backward(), {Input{{2, 3, oh, ow}, g}, xin}, attrs).values), bits(dx));
  }
}

// ---- avg_pool2d -------------------------------------------------------------------------------------------

TEST(AvgPool2d, DividesByTheWholeWindowIncludingPadding) {
  const Attrs attrs{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}};
  const Output y = run(ops::avg_pool2d(), {kImage}, attrs);
  EXPECT_EQ(y.shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.values, (std::vector<float>{0.25F, 1.25F, 2.75F, 7.0F}));
  Attrs backward = attrs;
  backward.set("input_shape", Ints{1, 1, 3, 3});
  const Output dx = run(ops::avg_pool2d_backward(), {Input{{1, 1, 2, 2}, {4, 8, 12, 16}}}, backward);
  EXPECT_EQ(dx.shape, kImage.shape);
  EXPECT_EQ(dx.values, (std::vector<float>{1, 2, 2, 3, 4, 4, 3, 4, 4}));
  EXPECT_EQ(ops::avg_pool2d_backward().flops(std::vector<TensorMeta>{TensorMeta{{1, 1, 2, 2}}}, backward), 16.0);
}

TEST(AvgPool2d, OverlappingWindowsAddTheirGradients) {
  const Attrs attrs{{"kernel", Ints{1, 2}}, {"stride", Ints{1, 1}}};
  EXPECT_EQ(run(ops::avg_pool2d(), {Input{{1, 1, 1, 3}, {1, 2, 3}}}, attrs).values, (std::vector<float>{1.5F, 2.5F}));
  Attrs backward = attrs;
  backward.set("input_shape", Ints{1, 1, 1, 3});
  EXPECT_EQ(run(ops::avg_pool2d_backward(), {Input{{1, 1, 1, 2}, {2, 4}}}, backward).values,
            (std::vector<float>{1, 3, 2}));
}

// ---- pooling errors ---------------------------------------------------------------------------------------

TEST(Pool2d, ShapeErrorsNameTheOpAndTheShapes) {
  for (const OpDef* op : {&ops::max_pool2d(), &ops::avg_pool2d()}) {
    SCOPED_TRACE(op->name);
    const std::string name = "op '" + op->name + "'";
    const Shape x{1, 2, 4, 4};
    expect_error(*op, {{2, 4, 4}}, {{"kernel", Ints{2, 2}}}, {name, "[N, C, H, W]", "[2, 4, 4]"});
    expect_error(*op, {x}, {{"kernel", Ints{0, 2}}}, {name, "at least 1x1"});
    expect_error(*op, {x}, {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 0}}}, {name, "positive stride"});
    expect_error(*op, {x}, {{"kernel", Ints{2, 2}}, {"padding", Ints{2, 0}}}, {name, "bad padding [2, 0]", "half"});
    expect_error(*op, {x}, {{"kernel", Ints{2, 2}}, {"padding", Ints{-1, 0}}}, {name, "bad padding [-1, 0]"});
    expect_error(*op, {x}, {{"kernel", Ints{5, 2}}}, {name, "output would be empty", "[1, 2, 4, 4]"});
    expect_error(*op, {x}, {{"kernel", Ints{2, 2}}}, {name, "int64"}, DType::int64);
    expect_error<InvalidArgument>(*op, {x}, {}, {"'kernel'", "missing"});
    expect_error<InvalidArgument>(*op, {x}, {{"kernel", Ints{2}}}, {name, "'kernel'", "2 ints"});
  }
  const Attrs attrs{{"kernel", Ints{2, 2}}};
  expect_error(ops::max_pool2d_backward(), {{1, 1, 2, 1}, {1, 1, 4, 4}}, attrs,
               {"op 'max_pool2d_backward'", "output shape [1, 1, 2, 2]", "[1, 1, 2, 1] and [1, 1, 4, 4]"});
  Attrs backward = attrs;
  backward.set("input_shape", Ints{1, 1, 4, 4});
  expect_error(ops::avg_pool2d_backward(), {{1, 1, 3, 3}}, backward,
               {"op 'avg_pool2d_backward'", "output shape [1, 1, 2, 2]"});
  expect_error<InvalidArgument>(ops::avg_pool2d_backward(), {{1, 1, 2, 2}}, attrs, {"'input_shape'"});
  backward.set("input_shape", Ints{1, 1, -4, 4});
  expect_error(ops::avg_pool2d_backward(), {{1, 1, 2, 2}}, backward,
               {"op 'avg_pool2d_backward'", "negative input dimension [1, 1, -4, 4]"});
}

}  // namespace
}  // namespace dtr::test

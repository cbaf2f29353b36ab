// Layout ops (reshape, slice, slice_backward, split, concat, transpose, permute) through a Runtime: known
// values on small hand-worked cases, which calls are views (no allocation) and which copy, any dtype, the
// shape errors, and views recomputed bitwise after an eviction.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <string_view>

#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

using Ints = std::vector<std::int64_t>;

// 0, 1, 2, ... in a float32 tensor of `shape`.
Tensor iota(Runtime& rt, Shape shape) {
  TensorMeta meta{std::move(shape)};
  std::vector<float> values(static_cast<std::size_t>(meta.numel()));
  std::iota(values.begin(), values.end(), 0.0F);
  return rt.constant(meta, values);
}

// A ShapeError from calling `op` on inputs of `shapes` (float32), with nothing allocated.
void expect_shape_error(const OpDef& op, const std::vector<Shape>& shapes, const Attrs& attrs,
                        std::initializer_list<std::string_view> parts) {
  Runtime rt(deterministic_config());
  std::vector<Tensor> inputs;
  for (const Shape& shape : shapes) inputs.push_back(rt.constant(TensorMeta{shape}));
  const auto before = allocations(rt);
  expect_error<ShapeError>([&] { rt.call(op, inputs, attrs); }, parts);
  EXPECT_EQ(allocations(rt), before);
}

// ---- reshape ----

TEST(ShapeOps, ReshapeIsAViewAndInfersOneDimension) {
  Runtime rt(deterministic_config());
  const Tensor x = iota(rt, {2, 3});
  const auto before = allocations(rt);
  const Tensor y = rt.call1(ops::reshape(), {x}, {{"shape", Ints{3, -1}}});
  EXPECT_EQ(allocations(rt), before);
  EXPECT_TRUE(y.is_view());
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_host(), x.to_host());
  EXPECT_EQ(rt.call1(ops::reshape(), {x}, {{"shape", Ints{6}}}).shape(), (Shape{6}));
  EXPECT_EQ(rt.call1(ops::reshape(), {iota(rt, {1})}, {{"shape", Ints{}}}).shape(), Shape{});
  // Any dtype.
  const Tensor labels = rt.constant(TensorMeta{{4}, DType::int64}, std::vector<std::int64_t>{5, 6, 7, 8});
  const Tensor square = rt.call1(ops::reshape(), {labels}, {{"shape", Ints{2, 2}}});
  EXPECT_EQ(square.to_host_as<std::int64_t>(), (std::vector<std::int64_t>{5, 6, 7, 8}));
  EXPECT_EQ(ops::reshape().flops(std::vector<TensorMeta>{x.meta()}, {{"shape", Ints{6}}}), 1.0);
}

TEST(ShapeOps, ReshapeErrors) {
  expect_shape_error(ops::reshape(), {{2, 3}}, {{"shape", Ints{4, 2}}},
                     {"op 'reshape'", "[4, 2]", "6 elements", "[2, 3]"});
  expect_shape_error(ops::reshape(), {{2, 3}}, {{"shape", Ints{-1, -1}}}, {"op 'reshape'", "at most one -1", "[2, 3]"});
  expect_shape_error(ops::reshape(), {{2, 3}}, {{"shape", Ints{-2, -3}}}, {"op 'reshape'", "[-2, -3]"});
  expect_shape_error(ops::reshape(), {{2, 3}}, {{"shape", Ints{4, -1}}}, {"op 'reshape'", "infer the -1", "[2, 3]"});
  expect_shape_error(ops::reshape(), {{0, 3}}, {{"shape", Ints{0, -1}}}, {"op 'reshape'", "infer the -1"});
  Runtime rt(deterministic_config());
  expect_error<InvalidArgument>([&] { rt.call1(ops::reshape(), {iota(rt, {2})}); }, {"'shape'"});
}

// ---- slice ----

TEST(ShapeOps, SliceAlongDimensionZeroIsAView) {
  Runtime rt(deterministic_config());
  const Tensor x = iota(rt, {4, 3});
  const auto before = allocations(rt);
  // Rows 1 and 2, also with Python's negative indices and a clamped end.
  for (const auto& [start, end] : {std::pair<std::int64_t, std::int64_t>{1, 3}, {-3, -1}}) {
    const Tensor rows = rt.call1(ops::slice(), {x}, {{"dim", 0}, {"start", start}, {"end", end}});
    EXPECT_TRUE(rows.is_view());
    EXPECT_EQ(rows.shape(), (Shape{2, 3}));
    EXPECT_EQ(rows.to_host(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  }
  const Tensor tail = rt.call1(ops::slice(), {x}, {{"dim", -2}, {"start", 2}, {"end", 100}});
  EXPECT_EQ(tail.to_host(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  // One row of a step is still one range.
  const Tensor one = rt.call1(ops::slice(), {x}, {{"dim", 0}, {"start", 3}, {"end", 4}, {"step", 2}});
  EXPECT_TRUE(one.is_view());
  EXPECT_EQ(one.to_host(), (std::vector<float>{9, 10, 11}));
  EXPECT_EQ(allocations(rt), before);
}

TEST(ShapeOps, SliceOfAnInnerDimensionOrWithAStepCopies) {
  Runtime rt(deterministic_config());
  const Tensor x = iota(rt, {2, 4});
  const auto before = allocations(rt);
  const Tensor odd = rt.call1(ops::slice(), {x}, {{"dim", 1}, {"start", 1}, {"end", 4}, {"step", 2}});
  EXPECT_FALSE(odd.is_view());
  EXPECT_EQ(allocations(rt), before + 1);
  EXPECT_EQ(odd.shape(), (Shape{2, 2}));
  EXPECT_EQ(odd.to_host(), (std::vector<float>{1, 3, 5, 7}));
  const Tensor even_rows =
      rt.call1(ops::slice(), {iota(rt, {5, 1})}, {{"dim", 0}, {"start", 0}, {"end", 5}, {"step", 2}});
  EXPECT_FALSE(even_rows.is_view());
  EXPECT_EQ(even_rows.to_host(), (std::vector<float>{0, 2, 4}));
  // Outer dimensions all 1: one range, a view.
  const Tensor inner = rt.call1(ops::slice(), {iota(rt, {1, 1, 5})}, {{"dim", 2}, {"start", 1}, {"end", -1}});
  EXPECT_TRUE(inner.is_view());
  EXPECT_EQ(inner.to_host(), (std::vector<float>{1, 2, 3}));
  // An empty range, and int64 elements.
  EXPECT_EQ(rt.call1(ops::slice(), {x}, {{"dim", 1}, {"start", 3}, {"end", 1}}).shape(), (Shape{2, 0}));
  const Tensor ints = rt.constant(TensorMeta{{2, 2}, DType::int64}, std::vector<std::int64_t>{1, 2, 3, 4});
  EXPECT_EQ(rt.call1(ops::slice(), {ints}, {{"dim", 1}, {"start", 1}, {"end", 2}}).to_host_as<std::int64_t>(),
            (std::vector<std::int64_t>{2, 4}));
}

TEST(ShapeOps, SliceErrors) {
  const Attrs rows{{"dim", 2}, {"start", 0}, {"end", 1}};
  expect_shape_error(ops::slice(), {{2, 3}}, rows, {"op 'slice'", "dim 2", "rank 2", "[2, 3]"});
  expect_shape_error(ops::slice(), {{2, 3}}, {{"dim", -3}, {"start", 0}, {"end", 1}}, {"op 'slice'", "dim -3"});
  expect_shape_error(ops::slice(), {{2, 3}}, {{"dim", 0}, {"start", 0}, {"end", 1}, {"step", 0}},
                     {"op 'slice'", "step >= 1", "step 0", "[2, 3]"});
  expect_shape_error(ops::slice(), {{}}, {{"dim", 0}, {"start", 0}, {"end", 1}}, {"op 'slice'", "rank >= 1", "[]"});
  expect_shape_error(ops::slice(), {{2}, {2}}, rows, {"op 'slice' takes 1 input, got 2"});
  Runtime rt(deterministic_config());
  expect_error<InvalidArgument>([&] { rt.call1(ops::slice(), {iota(rt, {2})}, {{"dim", 0}, {"end", 1}}); },
                                {"'start'"});
}

TEST(ShapeOps, SliceBackwardScattersIntoZeros) {
  Runtime rt(deterministic_config());
  const Tensor grad = rt.constant(TensorMeta{{2, 2}}, std::vector<float>{1, 2, 3, 4});
  const Attrs attrs{{"dim", 1}, {"start", -4}, {"end", 4}, {"step", 2}, {"input_shape", Ints{2, 4}}};
  const Tensor full = rt.call1(ops::slice_backward(), {grad}, attrs);
  EXPECT_EQ(full.shape(), (Shape{2, 4}));
  EXPECT_EQ(full.to_host(), (std::vector<float>{1, 0, 2, 0, 3, 0, 4, 0}));
  expect_shape_error(ops::slice_backward(), {{2, 3}}, attrs, {"op 'slice_backward'", "[2, 2]", "[2, 4]", "got [2, 3]"});
  expect_shape_error(ops::slice_backward(), {{2, 2}},
                     {{"dim", 0}, {"start", 0}, {"end", 1}, {"input_shape", Ints{-2, 2}}},
                     {"op 'slice_backward'", "input_shape", "[-2, 2]"});
  expect_shape_error(ops::slice_backward(), {{2, 2}},
                     {{"dim", 3}, {"start", 0}, {"end", 1}, {"input_shape", Ints{2, 2}}},
                     {"op 'slice_backward'", "dim 3"});
}

// ---- split and concat ----

TEST(ShapeOps, SplitAlongDimensionZeroGivesViews) {
  Runtime rt(deterministic_config());
  const Tensor x = iota(rt, {5, 2});
  const auto before = allocations(rt);
  const std::vector<Tensor> parts =
      rt.call(ops::split(), std::vector<Tensor>{x}, {{"dim", 0}, {"sizes", Ints{1, 0, 4}}});
  EXPECT_EQ(allocations(rt), before);
  ASSERT_EQ(parts.size(), 3U);
  for (const Tensor& part : parts) EXPECT_TRUE(part.is_view());
  EXPECT_EQ(parts[0].to_host(), (std::vector<float>{0, 1}));
  EXPECT_EQ(parts[1].shape(), (Shape{0, 2}));
  EXPECT_EQ(parts[2].to_host(), (std::vector<float>{2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ShapeOps, SplitAlongAnInnerDimensionCopies) {
  Runtime rt(deterministic_config());
  const Tensor x = iota(rt, {2, 3});
  const std::vector<Tensor> parts = rt.call(ops::split(), std::vector<Tensor>{x}, {{"dim", -1}, {"sizes", Ints{2, 1}}});
  ASSERT_EQ(parts.size(), 2U);
  EXPECT_FALSE(parts[0].is_view());
  EXPECT_EQ(parts[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(parts[0].to_host(), (std::vector<float>{0, 1, 3, 4}));
  EXPECT_EQ(parts[1].to_host(), (std::vector<float>{2, 5}));
  const Tensor ints = rt.constant(TensorMeta{{2, 2}, DType::int64}, std::vector<std::int64_t>{1, 2, 3, 4});
  const std::vector<Tensor> columns =
      rt.call(ops::split(), std::vector<Tensor>{ints}, {{"dim", 1}, {"sizes", Ints{1, 1}}});
  EXPECT_EQ(columns[1].to_host_as<std::int64_t>(), (std::vector<std::int64_t>{2, 4}));
}

TEST(ShapeOps, SplitErrors) {
  expect_shape_error(ops::split(), {{2, 3}}, {{"dim", 1}, {"sizes", Ints{1, 1}}},
                     {"op 'split'", "adding up to dimension 1 (3)", "sizes [1, 1]", "[2, 3]"});
  expect_shape_error(ops::split(), {{2, 3}}, {{"dim", 0}, {"sizes", Ints{3, -1}}}, {"op 'split'", "sizes [3, -1]"});
  expect_shape_error(ops::split(), {{2, 3}}, {{"dim", 0}, {"sizes", Ints{}}}, {"op 'split'", "sizes []"});
  expect_shape_error(ops::split(), {{2, 3}}, {{"dim", 2}, {"sizes", Ints{2}}}, {"op 'split'", "dim 2"});
  expect_shape_error(ops::split(), {{}}, {{"dim", 0}, {"sizes", Ints{1}}}, {"op 'split'", "rank >= 1"});
}

TEST(ShapeOps, ConcatJoinsAnyNumberOfTensors) {
  Runtime rt(deterministic_config());
  const Tensor a = iota(rt, {2, 1});
  const Tensor b = rt.constant(TensorMeta{{2, 2}}, std::vector<float>{10, 11, 12, 13});
  const Tensor joined = rt.call1(ops::concat(), {a, b, a}, {{"dim", 1}});
  EXPECT_FALSE(joined.is_view());
  EXPECT_EQ(joined.shape(), (Shape{2, 4}));
  EXPECT_EQ(joined.to_host(), (std::vector<float>{0, 10, 11, 0, 1, 12, 13, 1}));
  const Tensor rows = rt.call1(ops::concat(), {b, a}, {{"dim", -1}});
  EXPECT_EQ(rows.to_host(), (std::vector<float>{10, 11, 0, 12, 13, 1}));
  EXPECT_EQ(rt.call1(ops::concat(), {a}, {{"dim", 0}}).to_host(), a.to_host());
  EXPECT_EQ(rt.call1(ops::concat(), {a, b}, {{"dim", 1}}).shape(), (Shape{2, 3}));
  EXPECT_EQ(ops::concat().flops(std::vector<TensorMeta>{a.meta(), b.meta()}, {{"dim", 1}}), 6.0);
}

// Large enough for the copies' outer blocks (here the images) to be spread over the threads: every element
// where the index formula puts it, and split undoing concat.
TEST(ShapeOps, ALargeConcatAndSplitPutEveryElementWhereItsIndexSays) {
  Runtime rt(deterministic_config());
  const std::int64_t n = 64, s = 30 * 30;
  const Ints channels{3, 1, 5};
  std::vector<Tensor> parts;
  for (std::size_t k = 0; k < channels.size(); ++k) {
    std::vector<float> v(static_cast<std::size_t>(n * channels[k] * s));
    for (std::size_t e = 0; e < v.size(); ++e) v[e] = static_cast<float>(k * 1000000 + e);
    parts.push_back(rt.constant(TensorMeta{{n, channels[k], s}}, v));
  }
  const Tensor joined = rt.call1(ops::concat(), parts, {{"dim", 1}});
  const std::vector<float> got = joined.to_host();
  const std::int64_t c = 9;
  ASSERT_EQ(joined.shape(), (Shape{n, c, s}));
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t ch = 0, k = 0, first = 0; ch < c; ++ch) {
      if (ch - first == channels[static_cast<std::size_t>(k)]) first += channels[static_cast<std::size_t>(k++)];
      for (const std::int64_t j : {std::int64_t{0}, s - 1}) {
        const auto want = static_cast<float>(k * 1000000 + (i * channels[static_cast<std::size_t>(k)] + ch - first) * s + j);
        ASSERT_EQ(got[static_cast<std::size_t>((i * c + ch) * s + j)], want) << i << " " << ch << " " << j;
      }
    }
  }
  const std::vector<Tensor> back = rt.call(ops::split(), std::vector<Tensor>{joined}, {{"dim", 1}, {"sizes", channels}});
  ASSERT_EQ(back.size(), parts.size());
  for (std::size_t k = 0; k < parts.size(); ++k) EXPECT_EQ(back[k].to_host(), parts[k].to_host()) << k;
}

TEST(ShapeOps, ConcatErrors) {
  expect_shape_error(ops::concat(), {{2, 1}, {3, 2}}, {{"dim", 1}},
                     {"op 'concat'", "differ only in dimension 1", "[2, 1] and [3, 2]"});
  expect_shape_error(ops::concat(), {{2, 1}, {2}}, {{"dim", 0}}, {"op 'concat'", "[2, 1] and [2]"});
  expect_shape_error(ops::concat(), {}, {{"dim", 0}}, {"op 'concat' takes at least 1 input, got 0"});
  expect_shape_error(ops::concat(), {{}, {}}, {{"dim", 0}}, {"op 'concat'", "rank >= 1"});
  expect_shape_error(ops::concat(), {{2}}, {{"dim", 1}}, {"op 'concat'", "dim 1"});
  Runtime rt(deterministic_config());
  const Tensor f = rt.constant(TensorMeta{{2}});
  const Tensor i = rt.constant(TensorMeta{{2}, DType::int64});
  expect_error<ShapeError>(
      [&] {
        rt.call1(ops::concat(), {f, i}, {{"dim", 0}});
      },
      {"op 'concat'", "[2] and int64 [2]"});
}

// ---- transpose and permute ----

TEST(ShapeOps, TransposeAndPermuteCopyInTheNewOrder) {
  Runtime rt(deterministic_config());
  const Tensor x = iota(rt, {2, 3});
  const Tensor t = rt.call1(ops::transpose(), {x}, {{"dim0", 1}, {"dim1", 0}});
  EXPECT_FALSE(t.is_view());
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_host(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // [2, 3, 4] with dims {2, 0, 1}: out[k][i][j] = in[i][j][k] = 12i + 4j + k.
  const Tensor cube = iota(rt, {2, 3, 4});
  const Tensor p = rt.call1(ops::permute(), {cube}, {{"dims", Ints{-1, 0, 1}}});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  const std::vector<float> values = p.to_host();
  for (std::int64_t k = 0; k < 4; ++k) {
    for (std::int64_t i = 0; i < 2; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(values[static_cast<std::size_t>(k * 6 + i * 3 + j)], static_cast<float>(12 * i + 4 * j + k));
      }
    }
  }
  // transpose(0, 2) of the cube: out[k][j][i] = 12i + 4j + k.
  const std::vector<float> swapped = rt.call1(ops::transpose(), {cube}, {{"dim0", 0}, {"dim1", 2}}).to_host();
  EXPECT_EQ(swapped[static_cast<std::size_t>(3 * 6 + 2 * 2 + 1)], 12.0F + 8.0F + 3.0F);
  // A scalar, an identity, int64.
  EXPECT_EQ(rt.call1(ops::permute(), {iota(rt, {})}, {{"dims", Ints{}}}).to_host(), (std::vector<float>{0}));
  EXPECT_EQ(rt.call1(ops::transpose(), {x}, {{"dim0", 1}, {"dim1", 1}}).to_host(), x.to_host());
  const Tensor ints = rt.constant(TensorMeta{{2, 2}, DType::int64}, std::vector<std::int64_t>{1, 2, 3, 4});
  EXPECT_EQ(rt.call1(ops::transpose(), {ints}, {{"dim0", 0}, {"dim1", 1}}).to_host_as<std::int64_t>(),
            (std::vector<std::int64_t>{1, 3, 2, 4}));
}

TEST(ShapeOps, TransposeAndPermuteErrors) {
  expect_shape_error(ops::transpose(), {{2, 3}}, {{"dim0", 0}, {"dim1", 2}}, {"op 'transpose'", "dim 2", "[2, 3]"});
  expect_shape_error(ops::transpose(), {{}}, {{"dim0", 0}, {"dim1", 0}}, {"op 'transpose'", "rank 0", "[]"});
  expect_shape_error(ops::permute(), {{2, 3}}, {{"dims", Ints{0}}}, {"op 'permute'", "dims [0]", "[2, 3]"});
  expect_shape_error(ops::permute(), {{2, 3}}, {{"dims", Ints{1, -1}}}, {"op 'permute'", "dims [1, -1]"});
  expect_shape_error(ops::permute(), {{2, 3}}, {{"dims", Ints{0, 2}}}, {"op 'permute'", "dim 2"});
}

// ---- views and recomputation ----

TEST(ShapeOps, ViewsAndCopiesRecomputeBitwiseAfterEviction) {
  Runtime rt(deterministic_config());
  const Tensor x =
      rt.constant(TensorMeta{{4, 3}}, std::vector<float>{-1.5F, 2, 0.25F, 3, -4, 5, 6.5F, -7, 8, 9, -10, 11});
  const Tensor y = rt.call1(ops::relu(), {x});
  const Tensor rows = rt.call1(ops::slice(), {y}, {{"dim", 0}, {"start", 1}, {"end", 3}});
  const Tensor columns = rt.call1(ops::slice(), {y}, {{"dim", 1}, {"start", 0}, {"end", 3}, {"step", 2}});
  const Tensor flat = rt.call1(ops::reshape(), {rows}, {{"shape", Ints{-1}}});
  const Tensor scaled = rt.call1(ops::scale(), {flat}, {{"factor", 2.0}});
  const Tensor moved = rt.call1(ops::permute(), {columns}, {{"dims", Ints{1, 0}}});
  const std::vector<float> expected_scaled = scaled.to_host();
  const std::vector<float> expected_moved = moved.to_host();
  EXPECT_EQ(expected_scaled, (std::vector<float>{6, 0, 10, 13, 0, 16}));
  EXPECT_EQ(expected_moved, (std::vector<float>{0, 3, 6.5F, 9, 0.25F, 5, 8, 11}));
  ASSERT_TRUE(rt.evict(y));
  ASSERT_TRUE(rt.evict(scaled));
  ASSERT_TRUE(rt.evict(columns));
  ASSERT_TRUE(rt.evict(moved));
  EXPECT_EQ(scaled.to_host(), expected_scaled);
  EXPECT_EQ(moved.to_host(), expected_moved);
  EXPECT_GE(rt.stats().rematerializations, 4U);
}

}  // namespace
}  // namespace dtr::test

// The built-in op table: known values, shape rules and their errors, determinism, and the name lookup.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "test_helpers.h"
#include "test_resources.h"
#include "dtr/check.h"
#include "dtr/ops.h"

namespace dtr::test {
namespace {

struct HostTensor {
  TensorMeta meta;
  std::vector<float> data;
  std::vector<std::int64_t> ints = {};  // the elements instead of `data` when meta.dtype is int64

  const void* buffer() const { return meta.dtype == DType::int64 ? static_cast<const void*>(ints.data()) : data.data(); }
};

HostTensor tensor(Shape shape, std::vector<float> data) {
  HostTensor t{TensorMeta{std::move(shape)}, std::move(data)};
  EXPECT_EQ(static_cast<std::int64_t>(t.data.size()), t.meta.numel()) << to_string(t.meta.shape);
  return t;
}

HostTensor int_tensor(Shape shape, std::vector<std::int64_t> values) {
  HostTensor t{TensorMeta{std::move(shape), DType::int64}, {}, std::move(values)};
  EXPECT_EQ(static_cast<std::int64_t>(t.ints.size()), t.meta.numel()) << to_string(t.meta.shape);
  return t;
}

std::vector<TensorMeta> metas_of(const std::vector<HostTensor>& tensors) {
  std::vector<TensorMeta> metas;
  for (const HostTensor& t : tensors) metas.push_back(t.meta);
  return metas;
}

// Runs `op` on the CPU as the runtime will: infer, check values, allocate the outputs that are not views
// (OpDef::views; a view's elements are copied here from the input it views), call the kernel. The kernel runs
// twice, into buffers filled beforehand with different garbage, and must give the same bits both times: that
// checks determinism and that it writes every output element.
std::vector<HostTensor> run(const OpDef& op, const std::vector<HostTensor>& inputs, const Attrs& attrs = {},
                            std::uint64_t seed = 0) {
  const std::vector<TensorMeta> input_meta = metas_of(inputs);
  std::vector<const void*> input_data;
  for (const HostTensor& t : inputs) input_data.push_back(t.buffer());
  const TensorMetas output_meta = op.infer(input_meta, attrs);
  const OutputViews views = op.views ? op.views(input_meta, attrs) : OutputViews(output_meta.size());
  if (op.check_values) op.check_values(KernelArgs{input_meta, input_data, {}, {}, attrs, seed});

  const auto run_once = [&](float fill) {
    std::vector<HostTensor> outputs;
    std::vector<void*> output_data;
    std::vector<TensorMeta> written_meta;
    for (std::size_t k = 0; k < output_meta.size(); ++k) {
      const TensorMeta& meta = output_meta[k];
      outputs.push_back({meta, std::vector<float>(static_cast<std::size_t>(meta.numel()), fill)});
      if (views[k]) {
        const std::vector<float>& base = inputs[views[k]->input].data;
        std::copy_n(base.begin() + views[k]->offset, meta.numel(), outputs.back().data.begin());
      } else {
        written_meta.push_back(meta);
      }
    }
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      if (!views[k]) output_data.push_back(outputs[k].data.data());
    }
    op.cpu_kernel(KernelArgs{.input_meta = input_meta,
                             .inputs = input_data,
                             .output_meta = written_meta,
                             .outputs = output_data,
                             .attrs = attrs,
                             .seed = seed});
    return outputs;
  };
  const std::vector<HostTensor> first = run_once(std::numeric_limits<float>::quiet_NaN());
  const std::vector<HostTensor> second = run_once(-7.0F);
  for (std::size_t k = 0; k < first.size(); ++k) {
    const std::size_t bytes = first[k].data.size() * sizeof(float);
    EXPECT_TRUE(bytes == 0 || std::memcmp(first[k].data.data(), second[k].data.data(), bytes) == 0)
        << op.name << " output " << k << " differs between two runs on the same inputs";
  }
  return first;
}

void expect_shape_error(const OpDef& op, const std::vector<HostTensor>& inputs,
                        std::initializer_list<std::string_view> parts, const Attrs& attrs = {}) {
  expect_error<ShapeError>([&] { op.infer(metas_of(inputs), attrs); }, parts);
}

// ---- types and attributes -------------------------------------------------------------------------------

TEST(OpMeta, SizesAndNames) {
  EXPECT_EQ(element_size(DType::float32), 4U);
  EXPECT_STREQ(to_string(DType::float32), "float32");
  EXPECT_EQ(to_string(Shape{2, 3}), "[2, 3]");
  EXPECT_EQ(to_string(Shape{7}), "[7]");
  EXPECT_EQ(to_string(Shape{}), "[]");
}

TEST(OpMeta, NumelAndBytes) {
  EXPECT_EQ((TensorMeta{{2, 3, 4}}.numel()), 24);
  EXPECT_EQ((TensorMeta{{2, 3, 4}}.nbytes()), 96U);
  EXPECT_EQ(TensorMeta{}.numel(), 1);  // a scalar
  EXPECT_EQ(TensorMeta{}.nbytes(), 4U);
  EXPECT_EQ((TensorMeta{{0, 5}}.numel()), 0);
  expect_error<ShapeError>([] { static_cast<void>(TensorMeta{{2, -1}}.numel()); }, {"[2, -1]", "negative"});
}

TEST(OpAttrs, SetHasAndGet) {
  Attrs attrs{{"axis", std::int64_t{-1}}, {"factor", 0.5}};
  attrs.set("dims", std::vector<std::int64_t>{1, 2});
  EXPECT_TRUE(attrs.has("axis"));
  EXPECT_FALSE(attrs.has("nope"));
  EXPECT_EQ(attrs.get_int("axis"), -1);
  EXPECT_EQ(attrs.get_real("factor"), 0.5);
  EXPECT_EQ(attrs.get_ints("dims"), (std::vector<std::int64_t>{1, 2}));
  ASSERT_EQ(attrs.items().size(), 3U);
  EXPECT_EQ(attrs.items()[2].first, "dims");
}

TEST(OpAttrs, SetReplacesAnExistingNameInPlace) {
  Attrs attrs{{"a", std::int64_t{1}}, {"b", std::int64_t{2}}};
  attrs.set("a", 3.0);
  ASSERT_EQ(attrs.items().size(), 2U);
  EXPECT_EQ(attrs.items()[0].first, "a");
  EXPECT_EQ(attrs.get_real("a"), 3.0);
  EXPECT_EQ((Attrs{{"x", std::int64_t{1}}, {"x", std::int64_t{2}}}.get_int("x")), 2);
}

TEST(OpAttrs, CopiesShareTheListUntilOneIsChanged) {
  Attrs original{{"dims", std::vector<std::int64_t>{1, 2}}};
  const Attrs copy = original;  // what the runtime's closure and autograd's node each keep
  EXPECT_EQ(&copy.items(), &original.items()) << "a copy allocates";
  original.set("dims", std::vector<std::int64_t>{3});
  original.set("extra", std::int64_t{4});
  EXPECT_EQ(copy.get_ints("dims"), (std::vector<std::int64_t>{1, 2})) << "a change reached another copy";
  EXPECT_FALSE(copy.has("extra"));
  EXPECT_EQ(original.get_ints("dims"), (std::vector<std::int64_t>{3}));
  Attrs unshared{{"a", std::int64_t{1}}};
  const std::vector<Attrs::Item>* before = &unshared.items();
  unshared.set("a", std::int64_t{2});
  EXPECT_EQ(&unshared.items(), before) << "a list no copy shares is changed in place";
  EXPECT_TRUE(Attrs{}.items().empty());
  EXPECT_FALSE(Attrs{}.has("a"));
}

TEST(OpAttrs, OptionalAttributesFallBackOnlyWhenAbsent) {
  const Attrs attrs{{"groups", std::int64_t{3}}, {"eps", 0.25}, {"transpose_a", std::int64_t{1}},
                    {"transpose_b", std::int64_t{0}}};
  EXPECT_EQ(attrs.get_int("groups", 1), 3);
  EXPECT_EQ(attrs.get_int("stride", 7), 7);
  EXPECT_EQ(attrs.get_real("eps", 1e-5), 0.25);
  EXPECT_EQ(attrs.get_real("momentum", 0.1), 0.1);
  EXPECT_TRUE(attrs.get_flag("transpose_a"));
  EXPECT_FALSE(attrs.get_flag("transpose_b"));
  EXPECT_FALSE(attrs.get_flag("keepdim"));
  // Present with another type: still an error, never the fallback.
  expect_error<InvalidArgument>([&] { attrs.get_int("eps", 1); }, {"'eps'", "not an int"});
  expect_error<InvalidArgument>([&] { attrs.get_real("groups", 1.0); }, {"'groups'", "not a real"});
}

TEST(OpAttrs, ErrorsNameTheAttribute) {
  const Attrs attrs{{"axis", 1.5}};
  expect_error<InvalidArgument>([&] { attrs.get_int("factor"); }, {"'factor'", "missing"});
  expect_error<InvalidArgument>([&] { attrs.get_int("axis"); }, {"'axis'", "a real", "not an int"});
  expect_error<InvalidArgument>([&] { attrs.get_ints("axis"); }, {"'axis'", "not an int list"});
  const Attrs ints{{"axis", std::int64_t{1}}};
  expect_error<InvalidArgument>([&] { ints.get_real("axis"); }, {"'axis'", "an int", "not a real"});
}

// ---- elementwise ------------------------------------------------------------------------------------------

TEST(Ops, AddAndMulAreElementwise) {
  const HostTensor a = tensor({2, 2}, {1, 2, 3, 4});
  const HostTensor b = tensor({2, 2}, {10, 20, 30, -40});
  const auto sum = run(ops::add(), {a, b});
  ASSERT_EQ(sum.size(), 1U);
  EXPECT_EQ(sum[0].meta, (TensorMeta{{2, 2}}));
  EXPECT_EQ(sum[0].data, (std::vector<float>{11, 22, 33, -36}));
  EXPECT_EQ(run(ops::mul(), {a, b})[0].data, (std::vector<float>{10, 40, 90, -160}));
  EXPECT_EQ(ops::add().flops(metas_of({a, b}), {}), 4.0);
}

// Large enough for the CPU kernels to split the elements over threads (kernels/cpu_threads.h: blocks of 16,384)
// with a last block cut short: every element still gets its own value, as the per-element expression gives it.
TEST(Ops, LargeElementwiseOpsGiveEveryElementItsOwnValue) {
  const std::size_t count = 5 * 16384 + 7;
  std::vector<float> xs(count);
  std::vector<float> ys(count);
  for (std::size_t i = 0; i < count; ++i) {
    xs[i] = static_cast<float>(static_cast<int>(i % 2003) - 1000) / 7.0F;
    ys[i] = static_cast<float>(static_cast<int>(i % 1009) - 500) / 3.0F;
  }
  const HostTensor x = tensor({static_cast<std::int64_t>(count)}, xs);
  const HostTensor y = tensor({static_cast<std::int64_t>(count)}, ys);
  const std::vector<float> sum = run(ops::add(), {x, y})[0].data;
  const std::vector<float> relu = run(ops::relu(), {x})[0].data;
  const std::vector<float> relu_grad = run(ops::relu_backward(), {y, x})[0].data;
  ASSERT_EQ(sum.size(), count);
  ASSERT_EQ(relu.size(), count);
  ASSERT_EQ(relu_grad.size(), count);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    wrong += sum[i] != xs[i] + ys[i];
    wrong += relu[i] != (xs[i] > 0.0F ? xs[i] : 0.0F);
    wrong += relu_grad[i] != (xs[i] > 0.0F ? ys[i] : 0.0F);  // relu_backward(grad, x): grad where x > 0
  }
  EXPECT_EQ(wrong, 0U);
}

TEST(Ops, ElementwiseShapeMismatchNamesOpAndShapes) {
  const HostTensor a = tensor({2, 3}, std::vector<float>(6));
  const HostTensor b = tensor({3, 2}, std::vector<float>(6));
  expect_shape_error(ops::add(), {a, b}, {"op 'add'", "[2, 3] and [3, 2]"});
  expect_shape_error(ops::mul(), {a, b}, {"op 'mul'", "[2, 3] and [3, 2]"});
}

TEST(Ops, ReluClampsNegativesAndKeepsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto out = run(ops::relu(), {tensor({4}, {-1.5F, 0.0F, 2.5F, nan})});
  EXPECT_EQ(out[0].data[0], 0.0F);
  EXPECT_EQ(out[0].data[1], 0.0F);
  EXPECT_EQ(out[0].data[2], 2.5F);
  EXPECT_TRUE(std::isnan(out[0].data[3]));
}

TEST(Ops, ScaleMultipliesByItsFactor) {
  const auto out = run(ops::scale(), {tensor({3}, {1, -2, 0.5F})}, {{"factor", -2.0}});
  EXPECT_EQ(out[0].data, (std::vector<float>{-2, 4, -1}));
  // The attribute is checked by the shape rule, before the runtime allocates anything.
  expect_error<InvalidArgument>([] { ops::scale().infer(std::vector<TensorMeta>{TensorMeta{{3}}}, {}); },
                                {"'factor'", "missing"});
}

// ---- matmul -----------------------------------------------------------------------------------------------

TEST(Ops, MatmulMultipliesMatrices) {
  const HostTensor a = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  const HostTensor b = tensor({3, 2}, {7, 8, 9, 10, 11, 12});
  const auto out = run(ops::matmul(), {a, b});
  EXPECT_EQ(out[0].meta, (TensorMeta{{2, 2}}));
  EXPECT_EQ(out[0].data, (std::vector<float>{58, 64, 139, 154}));
  EXPECT_EQ(ops::matmul().flops(metas_of({a, b}), {}), 2.0 * 2 * 3 * 2);
}

TEST(Ops, MatmulWithEmptyInnerDimensionGivesZeros) {
  const auto out = run(ops::matmul(), {tensor({2, 0}, {}), tensor({0, 3}, {})});
  EXPECT_EQ(out[0].data, std::vector<float>(6, 0.0F));
  EXPECT_GE(ops::matmul().flops(metas_of({tensor({2, 0}, {}), tensor({0, 3}, {})}), {}), 1.0);
}

TEST(Ops, MatmulShapeErrorsNameOpAndShapes) {
  const HostTensor a = tensor({2, 3}, std::vector<float>(6));
  const HostTensor b = tensor({4, 2}, std::vector<float>(8));
  expect_shape_error(ops::matmul(), {a, b}, {"op 'matmul'", "[2, 3] and [4, 2]"});
  expect_shape_error(ops::matmul(), {a, tensor({3}, std::vector<float>(3))}, {"op 'matmul'", "[2, 3] and [3]"});
  expect_shape_error(ops::matmul(), {a}, {"op 'matmul' takes 2 inputs, got 1"});
  expect_shape_error(ops::matmul(), {a, a, a}, {"op 'matmul' takes 2 inputs, got 3"});
}

// ---- sum --------------------------------------------------------------------------------------------------

TEST(Ops, SumOfEveryElementIsAScalar) {
  const auto out = run(ops::sum(), {tensor({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(out[0].meta, TensorMeta{});
  EXPECT_EQ(out[0].data, (std::vector<float>{21}));
  EXPECT_EQ(run(ops::sum(), {tensor({}, {4})})[0].data, (std::vector<float>{4}));
  EXPECT_EQ(run(ops::sum(), {tensor({0}, {})})[0].data, (std::vector<float>{0}));
}

TEST(Ops, SumOverAnAxisRemovesIt) {
  const HostTensor x = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto rows = run(ops::sum(), {x}, {{"axis", std::int64_t{0}}});
  EXPECT_EQ(rows[0].meta, (TensorMeta{{3}}));
  EXPECT_EQ(rows[0].data, (std::vector<float>{5, 7, 9}));
  for (const std::int64_t axis : {1, -1}) {
    const auto cols = run(ops::sum(), {x}, {{"axis", axis}});
    EXPECT_EQ(cols[0].meta, (TensorMeta{{2}}));
    EXPECT_EQ(cols[0].data, (std::vector<float>{6, 15}));
  }
  // The middle of three dimensions: outer and inner extents both above 1.
  const HostTensor cube = tensor({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const auto middle = run(ops::sum(), {cube}, {{"axis", std::int64_t{-2}}});
  EXPECT_EQ(middle[0].meta, (TensorMeta{{2, 2}}));
  EXPECT_EQ(middle[0].data, (std::vector<float>{4, 6, 12, 14}));
}

// The documented order, bit for bit (float64, where an order shows in the bits): each output adds its inputs in
// increasing input index. Random shapes of rank 1 to 4 and every subset of axes, against a walk of every input
// index in order; the kernel walks runs of trailing dimensions instead (kernels/elementwise/reduce.cpp).
TEST(Ops, SumsAddEachOutputsInputsInIndexOrder) {
  Runtime rt(deterministic_config());
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t rank = 1 + random() % 4;
    Shape shape;
    std::int64_t count = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      shape.push_back(static_cast<std::int64_t>(1 + random() % 5));
      count *= shape.back();
    }
    std::vector<double> xs(static_cast<std::size_t>(count));
    for (double& x : xs) {
      x = std::ldexp(static_cast<double>(random() % 2000001) - 1e6, -static_cast<int>(random() % 40));
    }
    const std::uint64_t subset = 1 + random() % ((std::uint64_t{1} << rank) - 1);
    std::vector<std::int64_t> axes;
    for (std::size_t d = 0; d < rank; ++d) {
      if ((subset >> d & 1U) != 0) axes.push_back(static_cast<std::int64_t>(d));
    }
    // The reference: every input index in order, each added into its output's running sum.
    Shape out_shape;
    for (std::size_t d = 0; d < rank; ++d) {
      if ((subset >> d & 1U) == 0) out_shape.push_back(shape[d]);
    }
    std::int64_t out_count = 1;
    for (const std::int64_t dim : out_shape) out_count *= dim;
    std::vector<double> want(static_cast<std::size_t>(out_count), 0.0);
    for (std::int64_t i = 0; i < count; ++i) {
      std::int64_t rest = i, o = 0, scale = 1;
      for (std::size_t d = rank; d-- > 0;) {
        const std::int64_t at = rest % shape[d];
        rest /= shape[d];
        if ((subset >> d & 1U) == 0) {
          o += at * scale;
          scale *= shape[d];
        }
      }
      want[static_cast<std::size_t>(o)] += xs[static_cast<std::size_t>(i)];
    }
    const Tensor x = rt.constant(TensorMeta{shape, DType::float64}, xs);
    const Tensor sum = rt.call1(ops::sum(), {x}, {{"axes", axes}});
    EXPECT_EQ(sum.to_host_as<double>(), want) << "shape " << to_string(shape) << ", " << axes.size() << " axes";
    // sum_to a target with 1 where the axes were (keepdim's shape): the same sums.
    std::vector<std::int64_t> target(shape.begin(), shape.end());
    for (const std::int64_t axis : axes) target[static_cast<std::size_t>(axis)] = 1;
    EXPECT_EQ(rt.call1(ops::sum_to(), {x}, {{"shape", target}}).to_host_as<double>(), want);
  }
}

TEST(Ops, SumRejectsAnAxisOutOfRange) {
  const HostTensor x = tensor({2, 3}, std::vector<float>(6));
  expect_shape_error(ops::sum(), {x}, {"op 'sum'", "axis 2", "[2, 3]"}, {{"axis", std::int64_t{2}}});
  expect_shape_error(ops::sum(), {x}, {"op 'sum'", "axis -3", "[2, 3]"}, {{"axis", std::int64_t{-3}}});
  expect_shape_error(ops::sum(), {tensor({}, {1})}, {"op 'sum'", "axis 0", "[]"}, {{"axis", std::int64_t{0}}});
  expect_error<InvalidArgument>([&] { ops::sum().infer(metas_of({x}), {{"axis", 1.0}}); }, {"'axis'"});
}

// ---- uniform ----------------------------------------------------------------------------------------------

TEST(Ops, UniformIsAFunctionOfTheSeed) {
  const HostTensor like = tensor({4, 16}, std::vector<float>(64));
  const auto a = run(ops::uniform(), {like}, {}, 42);
  const auto b = run(ops::uniform(), {like}, {}, 42);
  const auto c = run(ops::uniform(), {like}, {}, 43);
  EXPECT_EQ(a[0].meta, like.meta);
  EXPECT_EQ(std::memcmp(a[0].data.data(), b[0].data.data(), 64 * sizeof(float)), 0);
  std::size_t same = 0;
  for (std::size_t i = 0; i < 64; ++i) same += a[0].data[i] == c[0].data[i] ? 1 : 0;
  EXPECT_EQ(same, 0U) << "neighbouring seeds should give unrelated streams";
  std::size_t shifted = 0;
  for (std::size_t i = 0; i + 1 < 64; ++i) shifted += a[0].data[i + 1] == c[0].data[i] ? 1 : 0;
  EXPECT_EQ(shifted, 0U) << "seed + 1 should not give the same stream shifted by one element";
  EXPECT_TRUE(ops::uniform().random);
}

TEST(Ops, UniformValuesLieInTheUnitInterval) {
  const auto out = run(ops::uniform(), {tensor({10000}, std::vector<float>(10000))}, {}, 7);
  double total = 0.0;
  for (const float v : out[0].data) {
    ASSERT_GE(v, 0.0F);
    ASSERT_LT(v, 1.0F);
    total += v;
  }
  EXPECT_NEAR(total / 10000.0, 0.5, 0.02);
}

// ---- split2 and concat2 -----------------------------------------------------------------------------------

TEST(Ops, Split2HalvesDimensionZero) {
  const auto parts = run(ops::split2(), {tensor({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(parts.size(), 2U);
  EXPECT_EQ(parts[0].meta, (TensorMeta{{1, 2}}));
  EXPECT_EQ(parts[0].data, (std::vector<float>{1, 2}));
  EXPECT_EQ(parts[1].meta, (TensorMeta{{2, 2}}));
  EXPECT_EQ(parts[1].data, (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(ops::split2().flops(std::vector<TensorMeta>{TensorMeta{{3, 2}}}, {}), 6.0);
}

TEST(Ops, Split2ThenConcat2GivesBackTheInput) {
  const HostTensor x = tensor({5, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const auto parts = run(ops::split2(), {x});
  const auto joined = run(ops::concat2(), parts);
  EXPECT_EQ(joined[0].meta, x.meta);
  EXPECT_EQ(joined[0].data, x.data);
}

TEST(Ops, Split2AndConcat2ShapeErrors) {
  expect_shape_error(ops::split2(), {tensor({}, {1})}, {"op 'split2'", "[]"});
  expect_shape_error(ops::split2(), {tensor({1, 3}, {1, 2, 3})}, {"op 'split2'", "[1, 3]"});
  const HostTensor a = tensor({1, 2}, {1, 2});
  expect_shape_error(ops::concat2(), {a, tensor({1, 3}, {1, 2, 3})}, {"op 'concat2'", "[1, 2] and [1, 3]"});
  expect_shape_error(ops::concat2(), {a, tensor({2}, {1, 2})}, {"op 'concat2'", "[1, 2] and [2]"});
  expect_shape_error(ops::concat2(), {tensor({}, {1}), tensor({}, {2})}, {"op 'concat2'", "[] and []"});
}

// ---- every op ---------------------------------------------------------------------------------------------

struct Example {
  const OpDef& op;
  std::vector<HostTensor> inputs;
  Attrs attrs;
};

// One valid call of every built-in op.
std::vector<Example> examples() {
  const HostTensor x = tensor({2, 3}, {1, -2, 3, -4, 5, -6});
  const HostTensor y = tensor({2, 3}, {0.5F, 0.25F, -0.5F, 0.75F, 0.125F, 0.3F});
  const HostTensor row = tensor({3}, {1, 2, 4});
  const HostTensor row_matrix = tensor({1, 3}, {1, 2, 4});
  const HostTensor positive = tensor({2, 3}, {0.5F, 0.25F, 1, 2, 0.125F, 4});
  return {{ops::add(), {x, row}, {}},
          {ops::sub(), {x, x}, {}},
          {ops::mul(), {x, x}, {}},
          {ops::div(), {x, row}, {}},
          {ops::relu(), {x}, {}},
          {ops::relu_backward(), {y, x}, {}},
          {ops::gelu(), {x}, {}},
          {ops::gelu_backward(), {y, x}, {}},
          {ops::tanh(), {x}, {}},
          {ops::tanh_backward(), {x, y}, {}},
          {ops::sigmoid(), {x}, {}},
          {ops::sigmoid_backward(), {x, y}, {}},
          {ops::lstm_cell(), {tensor({2, 4}, {1, -2, 3, 0.5F, -1, 2, 0.25F, 4}), tensor({2, 1}, {0.5F, -1})}, {}},
          {ops::lstm_cell_backward(),
           {tensor({2, 1}, {1, 2}), tensor({2, 1}, {-1, 0.5F}), tensor({2, 4}, {1, -2, 3, 0.5F, -1, 2, 0.25F, 4}),
            tensor({2, 1}, {0.5F, -1})},
           {}},
          {ops::scale(), {x}, {{"factor", 3.0}}},
          {ops::matmul(), {x, tensor({3, 1}, {1, 2, 3})}, {}},
          {ops::bmm(), {tensor({1, 2, 3}, x.data), tensor({1, 3, 1}, {1, 2, 3})}, {}},
          {ops::linear(), {x, tensor({1, 3}, {1, 2, 3}), tensor({1}, {0.5F})}, {}},
          {ops::linear_add(), {x, tensor({1, 3}, {1, 2, 3}), tensor({2, 1}, {-1, 4}), tensor({1}, {0.5F})}, {}},
          {ops::attention(), {tensor({1, 2, 6}, {1, -2, 3, 0.5F, -1, 2, 0.25F, 4, 1, -3, 2, 0})},
           {{"heads", std::int64_t{2}}}},
          {ops::attention_backward(),
           {tensor({1, 2, 2}, {1, 2, -1, 0.5F}), tensor({1, 2, 6}, {1, -2, 3, 0.5F, -1, 2, 0.25F, 4, 1, -3, 2, 0}),
            tensor({2, 2, 2}, {0.25F, 0.75F, 0.5F, 0.5F, 0.875F, 0.125F, 0.375F, 0.625F}),
            tensor({2, 2, 2}, {1, -1, 0.5F, 2, 0, 1, -2, 0.25F})},
           {{"heads", std::int64_t{2}}}},
          {ops::sum(), {x}, {{"axis", std::int64_t{1}}}},
          {ops::mean(), {x}, {{"axes", std::vector<std::int64_t>{0}}}},
          {ops::sum_to(), {x}, {{"shape", std::vector<std::int64_t>{1, 3}}}},
          {ops::broadcast_to(), {row}, {{"shape", std::vector<std::int64_t>{2, 3}}}},
          {ops::uniform(), {x}, {}},
          {ops::split2(), {x}, {}},
          {ops::concat2(), {x, x}, {}},
          // convolution and pooling
          {ops::conv2d(),
           {tensor({1, 1, 2, 3}, x.data), tensor({2, 1, 1, 2}, {1, 2, 3, 4}), tensor({2}, {0.5F, -1})},
           {{"padding", std::vector<std::int64_t>{1, 0}}}},
          {ops::conv2d_backward_input(),
           {tensor({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), tensor({2, 1, 1, 2}, {1, 2, 3, 4})},
           {{"stride", std::vector<std::int64_t>{1, 1}}, {"input_shape", std::vector<std::int64_t>{1, 1, 2, 3}}}},
          {ops::conv2d_backward_weight(),
           {tensor({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), tensor({1, 1, 2, 3}, x.data)},
           {{"weight_shape", std::vector<std::int64_t>{2, 1, 1, 2}}}},
          {ops::max_pool2d(), {tensor({1, 1, 2, 3}, x.data)}, {{"kernel", std::vector<std::int64_t>{2, 2}},
                                                               {"stride", std::vector<std::int64_t>{1, 1}}}},
          {ops::max_pool2d_backward(),
           {tensor({1, 1, 1, 2}, {1, 2}), tensor({1, 1, 2, 3}, x.data)},
           {{"kernel", std::vector<std::int64_t>{2, 2}}, {"stride", std::vector<std::int64_t>{1, 1}}}},
          {ops::avg_pool2d(), {tensor({1, 1, 2, 3}, x.data)}, {{"kernel", std::vector<std::int64_t>{2, 2}},
                                                               {"padding", std::vector<std::int64_t>{1, 1}}}},
          {ops::avg_pool2d_backward(),
           {tensor({1, 1, 2, 2}, {1, 2, 3, 4})},
           {{"kernel", std::vector<std::int64_t>{2, 2}}, {"padding", std::vector<std::int64_t>{1, 1}},
            {"input_shape", std::vector<std::int64_t>{1, 1, 2, 3}}}},
          // layout, embedding, dropout, optimizer steps
          {ops::reshape(), {x}, {{"shape", std::vector<std::int64_t>{3, -1}}}},
          {ops::slice(), {x}, {{"dim", 1}, {"start", 0}, {"end", 3}, {"step", 2}}},
          {ops::slice_backward(), {tensor({2, 2}, {1, 2, 3, 4})},
           {{"dim", 1}, {"start", 0}, {"end", 3}, {"step", 2}, {"input_shape", std::vector<std::int64_t>{2, 3}}}},
          {ops::split(), {x}, {{"dim", 1}, {"sizes", std::vector<std::int64_t>{1, 2}}}},
          {ops::concat(), {x, row_matrix, x}, {{"dim", 0}}},
          {ops::transpose(), {x}, {{"dim0", 0}, {"dim1", -1}}},
          {ops::permute(), {x}, {{"dims", std::vector<std::int64_t>{1, 0}}}},
          {ops::embedding(), {tensor({3, 2}, {1, 2, 3, 4, 5, 6}), int_tensor({2}, {2, 0})}, {}},
          {ops::embedding_backward(), {tensor({2, 2}, {1, 2, 3, 4}), int_tensor({2}, {2, 0})}, {{"num_embeddings", 3}}},
          {ops::dropout(), {x}, {{"p", 0.5}}},
          {ops::sgd_momentum_buffer(), {x, y}, {{"momentum", 0.9}}},
          {ops::sgd_apply(), {x, y}, {{"lr", 0.1}}},
          {ops::adam_moment1(), {x, y}, {}},
          {ops::adam_moment2(), {x, y}, {}},
          {ops::adam_apply(), {x, y, positive}, {{"lr", 0.01}, {"step", 1}}},
          // softmax, losses and normalization
          {ops::softmax(), {x}, {{"axis", std::int64_t{0}}}},
          {ops::log_softmax(), {x}, {}},
          {ops::softmax_backward(), {x, y}, {}},
          {ops::log_softmax_backward(), {x, y}, {{"axis", std::int64_t{-2}}}},
          {ops::cross_entropy(), {x, int_tensor({2}, {2, 0})}, {}},
          {ops::cross_entropy_backward(), {tensor({}, {1}), x, int_tensor({2}, {2, 0})}, {}},
          {ops::layer_norm(), {x, row, row}, {}},
          {ops::layer_norm_backward(), {y, x, row, tensor({2}, {0, 1}), tensor({2}, {1, 2})}, {}},
          {ops::batch_norm(), {x, row, row}, {{"eps", 0.1}}},
          {ops::batch_norm_backward(), {y, x, row, row, row}, {}},
          {ops::batch_norm_stats(), {x}, {{"eps", 0.1}}},
          {ops::batch_norm_normalize(), {x, row, row, row, row}, {}},
          {ops::batch_norm_eval(), {x, row, row, row, row}, {}},
          {ops::batch_norm_eval_backward(), {y, x, row, row, row}, {}},
          {ops::running_stat_update(), {row, row}, {{"momentum", 0.5}}}};
}

TEST(Ops, EveryOpHasAnExampleHere) {
  std::vector<std::string> covered;
  for (const Example& example : examples()) covered.push_back(example.op.name);
  std::vector<std::string> all = op_names();
  std::sort(covered.begin(), covered.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(covered, all) << "a new op needs an example in ops_test.cpp";
}

TEST(Ops, EveryOpIsDeterministicAndCostsSomething) {
  for (const Example& example : examples()) {
    SCOPED_TRACE(example.op.name);
    run(example.op, example.inputs, example.attrs, 1234);  // runs the kernel twice and compares bits
    EXPECT_GE(example.op.flops(metas_of(example.inputs), example.attrs), 1.0);
    EXPECT_EQ(example.op.random, example.op.name == "uniform" || example.op.name == "dropout");
  }
}

TEST(Ops, EveryOpRejectsTheWrongNumberOfInputs) {
  for (const Example& example : examples()) {
    std::vector<HostTensor> one_more = example.inputs;
    one_more.push_back(example.inputs[0]);
    // linear takes 2 or 3 inputs, linear_add and attention_backward 3 or 4: their messages say which. concat
    // takes any number from 1: one more fits.
    const bool variadic = example.op.name == "linear" || example.op.name == "linear_add" ||
                          example.op.name == "attention_backward";
    const bool unbounded = example.op.name == "concat";
    // batch_norm_normalize takes 5 or 6 (a residual): two more.
    const bool optional_last = example.op.name == "batch_norm_normalize";
    if (optional_last) one_more.push_back(example.inputs[0]);
    const std::string expected = "op '" + example.op.name + "' takes " +
                                 (variadic        ? (example.op.name == "attention_backward" ? "grad, qkv" : "an input")
                                  : unbounded     ? "at least 1 input"
                                  : optional_last ? "5 or 6 inputs"
                                                  : std::to_string(example.inputs.size()));
    const std::string got = variadic ? "" : ", got " + std::to_string(one_more.size());
    if (!unbounded) expect_shape_error(example.op, one_more, {expected, got}, example.attrs);
    expect_shape_error(example.op, {}, {expected, variadic ? "" : ", got 0"}, example.attrs);
  }
}

TEST(Ops, EmptyTensorsStillCostSomething) {
  const std::vector<TensorMeta> empty{TensorMeta{{0, 3}}, TensorMeta{{0, 3}}};
  EXPECT_GE(ops::add().flops(empty, {}), 1.0);
  EXPECT_GE(ops::concat2().flops(empty, {}), 1.0);
  EXPECT_EQ(run(ops::add(), {tensor({0, 3}, {}), tensor({0, 3}, {})})[0].meta, empty[0]);
}

TEST(Ops, FindOpByName) {
  for (const std::string& name : op_names()) EXPECT_EQ(find_op(name).name, name);
  EXPECT_EQ(&find_op("matmul"), &ops::matmul());
  expect_error<InvalidArgument>([] { find_op("conv5d"); }, {"'conv5d'", "add", "matmul", "concat2"});
}

}  // namespace
}  // namespace dtr::test

// Convolution (kernels/dense/conv.cpp, conv_onednn.cpp): known values on small hand-computed cases, conv2d
// and its backward ops against a direct convolution in double on random shapes, float32 (oneDNN) bitwise repeatable and within float32's precision of float64 (im2col) on many geometries,
// the primitive cache, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dtr/check.h"
#include "dtr/ops.h"
#include "kernels/dense/conv_onednn.h"
#include "dense_op_test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

Attrs conv_attrs(Ints stride, Ints padding, std::int64_t groups = 1, Ints dilation = {1, 1}) {
  return Attrs{{"stride", stride}, {"padding", padding}, {"groups", groups}, {"dilation", dilation}};
}

// ---- conv2d known values ----------------------------------------------------------------------------------

const Input kImage{{1, 1, 3, 3}, iota(9)};             // [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
const Input kKernel{{1, 1, 2, 2}, {1, 2, 3, 4}};      // [[1, 2], [3, 4]]

TEST(Conv2d, OneChannelTwoByTwoKernel) {
  const Output out = run(ops::conv2d(), {kImage, kKernel});
  EXPECT_EQ(out.shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out.values, (std::vector<float>{37, 47, 67, 77}));
  const Output biased = run(ops::conv2d(), {kImage, kKernel, Input{{1}, {0.5F}}});
  EXPECT_EQ(biased.values, (std::vector<float>{37.5F, 47.5F, 67.5F, 77.5F}));
  const std::vector<TensorMeta> metas{TensorMeta{kImage.shape}, TensorMeta{kKernel.shape}, TensorMeta{{1}}};
  EXPECT_EQ(ops::conv2d().flops(std::span(metas).first(2), {}), 2.0 * 4 * 4);
  EXPECT_EQ(ops::conv2d().flops(metas, {}), 2.0 * 4 * 4 + 4);
}

TEST(Conv2d, StrideTwoAndPaddingOne) {
  // Windows start at -1 and 1 along each axis; padded cells read 0.
  const Output out = run(ops::conv2d(), {kImage, kKernel}, conv_attrs({2, 2}, {1, 1}));
  EXPECT_EQ(out.shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out.values, (std::vector<float>{4, 18, 36, 77}));
}

TEST(Conv2d, AsymmetricStrideAndPadding) {
  // Height: stride 1, no padding (2 rows); width: stride 2, padding 1 (2 columns).
  const Output out = run(ops::conv2d(), {kImage, kKernel}, conv_attrs({1, 2}, {0, 1}));
  EXPECT_EQ(out.shape, (Shape{1, 1, 2, 2}));
  // Columns start at -1 and 1: the left windows see the padding's zeros in their first column.
  EXPECT_EQ(out.values, (std::vector<float>{2 * 1 + 4 * 4, 47, 2 * 4 + 4 * 7, 77}));
}

TEST(Conv2d, GroupsConvolveTheirOwnChannels) {
  // Two channels, two groups, two outputs per group: outputs 0-1 read channel 0 only, outputs 2-3 channel 1.
  const Input x{{1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}};
  const Input w{{4, 1, 2, 2}, {1, 1, 1, 1, 1, 0, 0, -1, 1, 1, 1, 1, 0, 1, 0, 0}};
  const Output out = run(ops::conv2d(), {x, w}, conv_attrs({1, 1}, {0, 0}, 2));
  EXPECT_EQ(out.shape, (Shape{1, 4, 1, 1}));
  EXPECT_EQ(out.values, (std::vector<float>{10, -3, 26, 6}));
}

TEST(Conv2d, DilationSpreadsTheKernel) {
  const Output out = run(ops::conv2d(), {kImage, kKernel}, conv_attrs({1, 1}, {0, 0}, 1, {2, 2}));
  EXPECT_EQ(out.shape, (Shape{1, 1, 1, 1}));
  EXPECT_EQ(out.values, (std::vector<float>{1 * 1 + 2 * 3 + 3 * 7 + 4 * 9}));
}

TEST(Conv2d, PointwiseKernelMixesChannels) {
  // A 1x1 kernel, stride 1, no padding: the input plane is its own column matrix.
  const Input x{{1, 2, 1, 2}, {1, 2, 3, 4}};
  const Input w{{1, 2, 1, 1}, {10, 100}};
  EXPECT_EQ(run(ops::conv2d(), {x, w}).values, (std::vector<float>{310, 420}));
  const Output dx = run(ops::conv2d_backward_input(), {Input{{1, 1, 1, 2}, {1, 2}}, w},
                        Attrs{{"input_shape", Ints{1, 2, 1, 2}}});
  EXPECT_EQ(dx.values, (std::vector<float>{10, 20, 100, 200}));
  const Output dw = run(ops::conv2d_backward_weight(), {Input{{1, 1, 1, 2}, {1, 2}}, x},
                        Attrs{{"weight_shape", Ints{1, 2, 1, 1}}});
  EXPECT_EQ(dw.values, (std::vector<float>{5, 11}));
}

TEST(Conv2d, BackwardOpsOnTheOneChannelCase) {
  const Input ones{{1, 1, 2, 2}, {1, 1, 1, 1}};
  // Each input cell gets the kernel entries of the windows that cover it.
  const Output dx = run(ops::conv2d_backward_input(), {ones, kKernel}, Attrs{{"input_shape", Ints{1, 1, 3, 3}}});
  EXPECT_EQ(dx.shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ(dx.values, (std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
  // Each kernel entry gets the sum of the input cells it met.
  const Output dw = run(ops::conv2d_backward_weight(), {ones, kImage}, Attrs{{"weight_shape", Ints{1, 1, 2, 2}}});
  EXPECT_EQ(dw.shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(dw.values, (std::vector<float>{12, 16, 24, 28}));
  const std::vector<TensorMeta> metas{TensorMeta{{1, 1, 2, 2}}, TensorMeta{kKernel.shape}};
  EXPECT_EQ(ops::conv2d_backward_input().flops(metas, Attrs{{"input_shape", Ints{1, 1, 3, 3}}}), 2.0 * 4 * 4);
}

TEST(Conv2d, EmptyBatchGivesAnEmptyOutputAndAZeroWeightGradient) {
  EXPECT_EQ(run(ops::conv2d(), {Input{{0, 1, 3, 3}, {}}, kKernel}).shape, (Shape{0, 1, 2, 2}));
  const Output dw = run(ops::conv2d_backward_weight(), {Input{{0, 1, 2, 2}, {}}, Input{{0, 1, 3, 3}, {}}},
                        Attrs{{"weight_shape", Ints{1, 1, 2, 2}}});
  EXPECT_EQ(dw.values, (std::vector<float>{0, 0, 0, 0}));
  EXPECT_GE(ops::conv2d().flops(std::vector<TensorMeta>{TensorMeta{{0, 1, 3, 3}}, TensorMeta{kKernel.shape}}, {}),
            1.0);
}

// ---- conv2d against a direct convolution --------------------------------------------------------------------

struct ConvProblem {
  std::int64_t n, c, h, w, o, kh, kw, groups, sh, sw, ph, pw, dh, dw;
  std::int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  std::int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  Attrs attrs() const { return conv_attrs({sh, sw}, {ph, pw}, groups, {dh, dw}); }
};

ConvProblem random_problem(std::mt19937_64& rng) {
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  ConvProblem p{};
  p.groups = pick(1, 3);
  p.n = pick(1, 3);
  p.c = p.groups * pick(1, 3);
  p.o = p.groups * pick(1, 3);
  p.kh = pick(1, 4), p.kw = pick(1, 4);
  p.sh = pick(1, 3), p.sw = pick(1, 3);
  p.ph = pick(0, 2), p.pw = pick(0, 2);
  p.dh = pick(1, 2), p.dw = pick(1, 2);
  // Large enough for at least one output.
  p.h = std::max<std::int64_t>(1, p.dh * (p.kh - 1) + 1 - 2 * p.ph) + pick(0, 6);
  p.w = std::max<std::int64_t>(1, p.dw * (p.kw - 1) + 1 - 2 * p.pw) + pick(0, 6);
  return p;
}

// The input cell (or -1 in the padding) that output (y, x) reads through kernel entry (i, j).
std::int64_t source(std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t pad, std::int64_t dil,
                    std::int64_t size) {
  const std::int64_t at = out * stride - pad + k * dil;
  return at >= 0 && at < size ? at : -1;
}

// Calls fn(x index, w index, y index) for every multiply of the convolution, the seven loops written out.
template <typename Fn>
void for_each_term(const ConvProblem& p, Fn&& fn) {
  const std::int64_t cg = p.c / p.groups;
  const std::int64_t og = p.o / p.groups;
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t o = 0; o < p.o; ++o) {
      for (std::int64_t y = 0; y < p.oh(); ++y) {
        for (std::int64_t x = 0; x < p.ow(); ++x) {
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            for (std::int64_t i = 0; i < p.kh; ++i) {
              for (std::int64_t j = 0; j < p.kw; ++j) {
                const std::int64_t row = source(y, i, p.sh, p.ph, p.dh, p.h);
                const std::int64_t col = source(x, j, p.sw, p.pw, p.dw, p.w);
                if (row < 0 || col < 0) continue;
                const std::int64_t c = (o / og) * cg + ci;
                fn(((n * p.c + c) * p.h + row) * p.w + col, ((o * cg + ci) * p.kh + i) * p.kw + j,
                   ((n * p.o + o) * p.oh() + y) * p.ow() + x);
              }
            }
          }
        }
      }
    }
  }
}

std::vector<double> random_values(std::mt19937_64& rng, std::int64_t count) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(count));
  for (double& x : v) x = static_cast<double>(static_cast<float>(uniform(rng)));  // exact in float32 too
  return v;
}

template <typename T>
std::vector<double> run_as(const OpDef& op, const std::vector<std::pair<Shape, std::vector<double>>>& inputs,
                           const Attrs& attrs) {
  Runtime rt(deterministic_config());
  std::vector<Tensor> tensors;
  for (const auto& [shape, values] : inputs) {
    const TensorMeta meta{shape, DTypeOf<T>::value};
    tensors.push_back(rt.constant(meta, std::vector<T>(values.begin(), values.end())));
  }
  const std::vector<T> out = rt.call1(op, tensors, attrs).template to_host_as<T>();
  return {out.begin(), out.end()};
}

void expect_close(const std::vector<double>& actual, const std::vector<double>& expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t e = 0; e < actual.size(); ++e) {
    EXPECT_NEAR(actual[e], expected[e], tolerance * (1.0 + std::abs(expected[e]))) << "element " << e;
  }
}

TEST(Conv2d, ForwardAndBackwardEqualADirectConvolutionInDouble) {
  for (std::uint64_t trial = 0; trial < 40; ++trial) {
    std::mt19937_64 rng(trial);
    const ConvProblem p = random_problem(rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": N " << p.n << " C " << p.c << " H " << p.h
                                      << " W " << p.w << " O " << p.o << " K " << p.kh << "x" << p.kw
                                      << " groups " << p.groups << " stride " << p.sh << "," << p.sw
                                      << " padding " << p.ph << "," << p.pw << " dilation " << p.dh << ","
                                      << p.dw);
    const Shape x_shape{p.n, p.c, p.h, p.w};
    const Shape w_shape{p.o, p.c / p.groups, p.kh, p.kw};
    const Shape y_shape{p.n, p.o, p.oh(), p.ow()};
    const auto x = random_values(rng, TensorMeta{x_shape}.numel());
    const auto w = random_values(rng, TensorMeta{w_shape}.numel());
    const auto b = random_values(rng, p.o);
    const auto g = random_values(rng, TensorMeta{y_shape}.numel());

    std::vector<double> y(g.size(), 0.0);
    std::vector<double> dx(x.size(), 0.0);
    std::vector<double> dw(w.size(), 0.0);
    for_each_term(p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
      const auto xs = static_cast<std::size_t>(xi);
      const auto ws = static_cast<std::size_t>(wi);
      const auto ys = static_cast<std::size_t>(yi);
      y[ys] += x[xs] * w[ws];
      dx[xs] += g[ys] * w[ws];
      dw[ws] += g[ys] * x[xs];
    });
    const std::int64_t plane = p.oh() * p.ow();
    for (std::size_t e = 0; e < y.size(); ++e) y[e] += b[static_cast<std::size_t>(e / plane % p.o)];

    const Attrs attrs = p.attrs();
    Attrs input_attrs = attrs;
    input_attrs.set("input_shape", Ints(x_shape.begin(), x_shape.end()));
    Attrs weight_attrs = attrs;
    weight_attrs.set("weight_shape", Ints(w_shape.begin(), w_shape.end()));
    const auto check = [&]<typename T>(T /*zero*/, double tolerance) {
      SCOPED_TRACE(to_string(DTypeOf<T>::value));
      expect_close(run_as<T>(ops::conv2d(), {{x_shape, x}, {w_shape, w}, {Shape{p.o}, b}}, attrs), y, tolerance);
      expect_close(run_as<T>(ops::conv2d_backward_input(), {{y_shape, g}, {w_shape, w}}, input_attrs), dx, tolerance);
      expect_close(run_as<T>(ops::conv2d_backward_weight(), {{y_shape, g}, {x_shape, x}}, weight_attrs), dw,
                   tolerance);
    };
    check(double{}, 1e-12);
    check(float{}, 1e-5);
  }
}

TEST(Conv2d, ARecomputationGivesTheSameBits) {
  // Large enough for OpenBLAS to block and thread the products: the bits must still repeat.
  std::mt19937_64 rng(7);
  const Shape x_shape{2, 8, 17, 19};
  const Shape w_shape{16, 4, 3, 3};
  const Shape y_shape{2, 16, 9, 10};
  const Attrs attrs = conv_attrs({2, 2}, {1, 1}, 2);
  Attrs input_attrs = attrs;
  input_attrs.set("input_shape", Ints(x_shape.begin(), x_shape.end()));
  Attrs weight_attrs = attrs;
  weight_attrs.set("weight_shape", Ints(w_shape.begin(), w_shape.end()));
  const auto x = random_values(rng, TensorMeta{x_shape}.numel());
  const auto w = random_values(rng, TensorMeta{w_shape}.numel());
  const auto g = random_values(rng, TensorMeta{y_shape}.numel());
  const auto compute = [&] {
    return std::vector<std::vector<double>>{
        run_as<float>(ops::conv2d(), {{x_shape, x}, {w_shape, w}}, attrs),
        run_as<float>(ops::conv2d_backward_input(), {{y_shape, g}, {w_shape, w}}, input_attrs),
        run_as<float>(ops::conv2d_backward_weight(), {{y_shape, g}, {x_shape, x}}, weight_attrs)};
  };
  EXPECT_EQ(compute(), compute());  // bit-exact: the doubles hold float32 values
}

// ---- float32 through oneDNN: the same bits on every call, agreement with float64, the primitive cache -------

// A geometry of the three ops: input, weight and attributes (the output shape is the shape rule's).
struct Geometry {
  const char* name;
  Shape x, w;
  Ints stride, padding, dilation;
  std::int64_t groups;
  bool bias;
  Attrs attrs() const { return conv_attrs(stride, padding, groups, dilation); }
  Shape y() const { return ops::conv2d().infer(std::vector<TensorMeta>{{x}, {w}}, attrs())[0].shape; }
};

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> all = {
      // Through oneDNN: a 1x1 kernel, or a spatial kernel over at least 8 channels in and out per group.
      {"3x3 padded, bias", {2, 8, 17, 19}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {"stride 2, groups 2", {2, 16, 17, 19}, {32, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 2, false},
      {"dilation 2, padding 2", {3, 8, 11, 13}, {8, 8, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, false},
      {"1x5, stride [1, 2], padding [0, 2], bias", {2, 8, 6, 15}, {12, 8, 1, 5}, {1, 2}, {0, 2}, {1, 1}, 1, true},
      {"batch 1, 9 to 12 channels, bias", {1, 9, 9, 7}, {12, 9, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {"1x1", {4, 16, 7, 7}, {32, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},
      {"1x1 stride 2, bias", {4, 16, 14, 14}, {32, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, true},
      {"1x1 with groups and few channels", {2, 6, 5, 5}, {9, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 3, false},
      {"padding past the kernel", {1, 2, 1, 1}, {3, 2, 1, 1}, {1, 1}, {2, 2}, {1, 1}, 1, false},
      {"ResNet-32 stage 1, batch 128", {128, 16, 28, 28}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {"ResNet-32 into stage 3, batch 128", {128, 32, 14, 14}, {64, 32, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},
      // Through im2col: a spatial kernel over fewer channels.
      {"depthwise, bias", {2, 8, 10, 10}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8, true},
      {"3 to 5 channels, stride [2, 1]", {2, 3, 9, 7}, {5, 3, 3, 3}, {2, 1}, {1, 1}, {1, 1}, 1, true},
      {"ResNet-32's stem, batch 128", {128, 1, 28, 28}, {16, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
  };
  return all;
}

// conv2d (with the bias when the geometry has one), conv2d_backward_input, conv2d_backward_weight on random
// values (exact in float32): the op, its inputs and its attributes.
struct Call {
  const OpDef& op;
  std::vector<std::pair<Shape, std::vector<double>>> inputs;
  Attrs attrs;
};

std::vector<Call> three_calls(const Geometry& geo, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto x = random_values(rng, TensorMeta{geo.x}.numel());
  const auto w = random_values(rng, TensorMeta{geo.w}.numel());
  const auto g = random_values(rng, TensorMeta{geo.y()}.numel());
  std::vector<Call> calls{{ops::conv2d(), {{geo.x, x}, {geo.w, w}}, geo.attrs()},
                          {ops::conv2d_backward_input(), {{geo.y(), g}, {geo.w, w}}, geo.attrs()},
                          {ops::conv2d_backward_weight(), {{geo.y(), g}, {geo.x, x}}, geo.attrs()}};
  if (geo.bias) calls[0].inputs.emplace_back(Shape{geo.w[0]}, random_values(rng, geo.w[0]));
  calls[1].attrs.set("input_shape", Ints(geo.x.begin(), geo.x.end()));
  calls[2].attrs.set("weight_shape", Ints(geo.w.begin(), geo.w.end()));
  return calls;
}

// The three in dtype T, each through a runtime of its own.
template <typename T>
std::vector<std::vector<double>> three_ops(const Geometry& geo, std::uint64_t seed) {
  std::vector<std::vector<double>> out;
  for (const Call& c : three_calls(geo, seed)) out.push_back(run_as<T>(c.op, c.inputs, c.attrs));
  return out;
}

// The three in float32 through their CPU kernels called directly, with no workspace (the kernels' own buffers).
std::vector<std::vector<double>> three_kernels(const Geometry& geo, std::uint64_t seed) {
  std::vector<std::vector<double>> out;
  for (const Call& c : three_calls(geo, seed)) {
    std::vector<TensorMeta> metas;
    std::vector<std::vector<float>> values;
    std::vector<const void*> pointers;
    for (const auto& [shape, v] : c.inputs) {
      metas.push_back(TensorMeta{shape});
      values.emplace_back(v.begin(), v.end());
    }
    for (const auto& v : values) pointers.push_back(v.data());
    const TensorMetas out_meta = c.op.infer(metas, c.attrs);
    std::vector<float> result(static_cast<std::size_t>(out_meta[0].numel()), -7.0F);
    void* outputs[] = {result.data()};
    c.op.cpu_kernel(KernelArgs{metas, pointers, out_meta, outputs, c.attrs});
    out.emplace_back(result.begin(), result.end());
  }
  return out;
}

TEST(Conv2d, Float32RepeatsItsBitsAndAgreesWithFloat64OnEveryGeometry) {
  for (std::size_t i = 0; i < geometries().size(); ++i) {
    const Geometry& geo = geometries()[i];
    SCOPED_TRACE(geo.name);
    // A recomputation must reproduce the first run bit for bit: twice through runtimes (other buffers, other
    // alignments), once through the kernels with no workspace. The doubles hold float32 values.
    const auto first = three_ops<float>(geo, i);
    EXPECT_EQ(three_ops<float>(geo, i), first);
    EXPECT_EQ(three_kernels(geo, i), first);
    // float64 takes im2col + GEMM: float32 must agree with it to float32's precision, which scales with the
    // number of products each output sums (the values are in [-1, 1]).
    const auto reference = three_ops<double>(geo, i);
    const Shape y = geo.y();
    const double terms[] = {static_cast<double>(geo.w[1] * geo.w[2] * geo.w[3] + 1),
                            static_cast<double>(geo.w[0] / geo.groups * geo.w[2] * geo.w[3]),
                            static_cast<double>(y[0] * y[2] * y[3])};
    for (std::size_t op = 0; op < 3; ++op) {
      ASSERT_EQ(first[op].size(), reference[op].size());
      double worst = 0;
      for (std::size_t e = 0; e < first[op].size(); ++e) {
        worst = std::max(worst, std::abs(first[op][e] - reference[op][e]));
      }
      EXPECT_LE(worst, 4e-7 * std::sqrt(terms[op]) * (1.0 + std::sqrt(terms[op]))) << "op " << op;
    }
  }
}

TEST(Conv2d, PrimitivesAreBuiltOncePerOpAndGeometry) {
  const Geometry geo{"unique to this test", {3, 8, 13, 11}, {16, 8, 2, 3}, {1, 2}, {1, 0}, {2, 1}, 1, false};
  const std::size_t before = kernels::onednn_conv_cache_size();
  const auto first = three_ops<float>(geo, 1);
  EXPECT_EQ(kernels::onednn_conv_cache_size(), before + 3);
  EXPECT_EQ(three_ops<float>(geo, 1), first);
  EXPECT_EQ(kernels::onednn_conv_cache_size(), before + 3);
  Geometry biased = geo;  // with a bias, the forward is another primitive
  biased.bias = true;
  three_ops<float>(biased, 1);
  EXPECT_EQ(kernels::onednn_conv_cache_size(), before + 4);
  // float64, and a spatial kernel over fewer than 8 channels, take the im2col path: no primitive.
  three_ops<double>(geometries()[0], 2);
  three_ops<float>(Geometry{"few", {3, 4, 13, 11}, {16, 4, 2, 3}, {1, 2}, {1, 0}, {2, 1}, 1, false}, 3);
  EXPECT_EQ(kernels::onednn_conv_cache_size(), before + 4);
}

TEST(Conv2d, ThreadsShareThePrimitivesAndGetTheSameBits) {
  // Several runtimes on several threads, each building or finding the same primitives at once.
  const Geometry& geo = geometries()[1];
  const auto reference = three_ops<float>(geo, 3);
  std::vector<std::vector<std::vector<double>>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 3; ++repeat) result = three_ops<float>(geo, 3);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& result : results) EXPECT_EQ(result, reference);
}

TEST(Conv2d, AOneDnnFailureIsADeviceErrorNamingTheOpAndTheShapes) {
  const std::vector<TensorMeta> metas{TensorMeta{{2, 16, 9, 10}}, TensorMeta{{2, 8, 17, 19}}};
  Attrs attrs = conv_attrs({2, 2}, {1, 1}, 2);
  attrs.set("weight_shape", Ints{16, 4, 3, 3});
  const kernels::ConvGeometry g = kernels::conv2d_backward_weight_geometry(metas, attrs);
  try {
    kernels::throw_onednn_conv_error(kernels::ConvOp::backward_weight, metas, g, "could not create a primitive", 3);
  } catch (const DeviceError& e) {
    const std::string_view message = e.what();
    for (const std::string_view part : {"op 'conv2d_backward_weight'", "oneDNN", "could not create a primitive",
                                        "status 3", "[2, 16, 9, 10] and [2, 8, 17, 19]", "stride [2, 2]",
                                        "padding [1, 1]", "groups 2"}) {
      EXPECT_NE(message.find(part), std::string_view::npos) << message;
    }
  }
}

// ---- conv2d errors ----------------------------------------------------------------------------------------

TEST(Conv2d, ShapeErrorsNameTheOpAndTheShapes) {
  const Shape x{1, 4, 5, 5};
  expect_error(ops::conv2d(), {{1, 4, 5}, {2, 4, 3, 3}}, {}, {"op 'conv2d'", "[N, C, H, W]", "[1, 4, 5] and [2, 4, 3, 3]"});
  expect_error(ops::conv2d(), {x, {2, 4, 3}}, {}, {"op 'conv2d'", "[O, C/groups, KH, KW]"});
  expect_error(ops::conv2d(), {x, {2, 3, 3, 3}}, {}, {"op 'conv2d'", "C/groups = 4", "[1, 4, 5, 5] and [2, 3, 3, 3]"});
  expect_error(ops::conv2d(), {x, {2, 2, 3, 3}}, conv_attrs({1, 1}, {0, 0}, 3), {"op 'conv2d'", "3 groups", "divide"});
  expect_error(ops::conv2d(), {x, {3, 2, 3, 3}}, conv_attrs({1, 1}, {0, 0}, 2), {"op 'conv2d'", "output channels 3"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}}, conv_attrs({1, 1}, {0, 0}, 0), {"op 'conv2d'", "groups >= 1"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}}, conv_attrs({0, 1}, {0, 0}), {"op 'conv2d'", "positive stride", "[0, 1]"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}}, conv_attrs({1, 1}, {0, -1}),
               {"op 'conv2d'", "bad conv padding", "[0, -1]"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}}, conv_attrs({1, 1}, {0, 0}, 1, {1, 0}),
               {"op 'conv2d'", "positive dilation"});
  expect_error(ops::conv2d(), {x, {2, 4, 6, 3}}, {}, {"op 'conv2d'", "bad conv padding", "output would be empty"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}}, conv_attrs({1, 1}, {0, 0}, 1, {3, 1}),
               {"op 'conv2d'", "bad conv padding", "dilation [3, 1]"});
  expect_error(ops::conv2d(), {x, {2, 4, 0, 3}}, {}, {"op 'conv2d'", "at least 1x1"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}, {3}}, {}, {"op 'conv2d'", "bias [O]", "and [3]"});
  expect_error(ops::conv2d(), {x}, {}, {"op 'conv2d' takes 3 inputs", "got 1"});
  expect_error(ops::conv2d(), {x, {2, 4, 3, 3}}, {}, {"op 'conv2d'", "int64"}, DType::int64);
  expect_error<InvalidArgument>(ops::conv2d(), {x, {2, 4, 3, 3}}, {{"stride", Ints{1, 1, 1}}},
                                {"op 'conv2d'", "'stride'", "2 ints"});
  expect_error<InvalidArgument>(ops::conv2d(), {x, {2, 4, 3, 3}}, {{"groups", 1.0}}, {"'groups'"});
  // A padding that the kernel alone cannot fill is fine: the windows see zeros.
  const std::vector<TensorMeta> metas{TensorMeta{{1, 1, 1, 1}}, TensorMeta{{1, 1, 1, 1}}};
  EXPECT_EQ(ops::conv2d().infer(metas, conv_attrs({1, 1}, {2, 2}))[0].shape, (Shape{1, 1, 5, 5}));
}

TEST(Conv2d, BackwardShapeErrors) {
  const Attrs in{{"input_shape", Ints{1, 1, 3, 3}}};
  expect_error(ops::conv2d_backward_input(), {{1, 1, 3, 3}, {1, 1, 2, 2}}, in,
               {"op 'conv2d_backward_input'", "output shape [1, 1, 2, 2]", "[1, 1, 3, 3] and [1, 1, 2, 2]"});
  expect_error(ops::conv2d_backward_input(), {{1, 1, 2, 2}, {1, 2, 2, 2}}, in,
               {"op 'conv2d_backward_input'", "C/groups = 1"});
  expect_error(ops::conv2d_backward_input(), {{1, 1, 2, 2}}, in, {"op 'conv2d_backward_input' takes 2 inputs"});
  expect_error<InvalidArgument>(ops::conv2d_backward_input(), {{1, 1, 2, 2}, {1, 1, 2, 2}}, {}, {"'input_shape'"});
  expect_error(ops::conv2d_backward_input(), {{1, 1, 2, 2}, {1, 1, 2, 2}}, {{"input_shape", Ints{1, 3, 3}}},
               {"op 'conv2d_backward_input'", "[N, C, H, W]", "input [1, 3, 3]"});
  expect_error(ops::conv2d_backward_input(), {{1, 1, 2, 2}, {1, 1, 2, 2}}, {{"input_shape", Ints{1, 1, -3, 3}}},
               {"op 'conv2d_backward_input'", "negative input dimension [1, 1, -3, 3]"});
  const Attrs wt{{"weight_shape", Ints{1, 1, 2, 2}}};
  expect_error(ops::conv2d_backward_weight(), {{1, 1, 3, 3}, {1, 1, 3, 3}}, wt,
               {"op 'conv2d_backward_weight'", "output shape [1, 1, 2, 2]"});
  expect_error(ops::conv2d_backward_weight(), {{1, 1, 2, 2}, {1, 1, 3}}, wt,
               {"op 'conv2d_backward_weight'", "[N, C, H, W]"});
  expect_error<InvalidArgument>(ops::conv2d_backward_weight(), {{1, 1, 2, 2}, {1, 1, 3, 3}}, {}, {"'weight_shape'"});
}

TEST(Conv2d, TheRuntimeRejectsABadCallBeforeRunningIt) {
  Runtime rt(deterministic_config());
  const Tensor x = rt.constant(TensorMeta{{1, 1, 2, 2}}, std::vector<float>{1, 2, 3, 4});
  const Tensor w = rt.constant(TensorMeta{{1, 1, 3, 3}}, std::vector<float>(9, 1.0F));
  EXPECT_THROW(rt.call1(ops::conv2d(), {x, w}), ShapeError);
  // Padded by 1, every 3x3 window holds the whole input.
  EXPECT_EQ(rt.call1(ops::conv2d(), {x, w}, conv_attrs({1, 1}, {1, 1})).to_host(), (std::vector<float>(4, 10.0F)));
}

}  // namespace
}  // namespace dtr::test

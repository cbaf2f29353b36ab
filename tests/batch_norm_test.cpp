// Batch norm (training and eval) and the running-statistic update: known values on small hand-computed cases,
// the CPU kernel's channel sums against written-out references (the documented order bit for bit), shape,
// dtype and attribute errors, and the training step with its running statistics updated in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dtr/gradients.h"
#include "dtr/ops.h"
#include "norm_test_helpers.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

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

// batch_norm_stats then batch_norm_normalize, the pair nn::batch_norm runs (so that a remade y is one pass),
// give batch_norm's three outputs bit for bit, float32 and float64, with and without spatial dimensions and on
// channels large enough to be spread over threads; and y is made from the statistics rounded to x's type, as
// ops.h documents (in float32 that differs from y made from the double statistics in many elements).
TEST(BatchNorm, StatsThenNormalizeGiveBatchNormsBits) {
  for (const DType dtype : {DType::float32, DType::float64}) {
    for (const Shape& shape : {Shape{2, 3}, Shape{3, 5, 7}, Shape{16, 8, 33, 33}}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " " + to_string(shape));
      Runtime rt(deterministic_config());
      const std::int64_t c = shape[1];
      std::vector<double> xs(static_cast<std::size_t>(TensorMeta{shape}.numel()));
      for (std::size_t e = 0; e < xs.size(); ++e) xs[e] = static_cast<double>((e * 7919) % 1009) / 97.0 - 3.0;
      std::vector<double> ws(static_cast<std::size_t>(c)), bs(ws.size());
      for (std::size_t k = 0; k < ws.size(); ++k) {
        ws[k] = 0.75 + 0.125 * static_cast<double>(k);
        bs[k] = 0.1 * static_cast<double>(k) - 0.3;
      }
      // Values in the dtype, and ws, bs as the kernel reads them (rounded to it).
      const auto make = [&](const Shape& s, std::vector<double>& v) {
        if (dtype == DType::float64) return rt.constant(TensorMeta{s, dtype}, v);
        const std::vector<float> f(v.begin(), v.end());
        v.assign(f.begin(), f.end());
        return rt.constant(TensorMeta{s, dtype}, f);
      };
      const auto read = [](const Tensor& t) {
        if (t.meta().dtype == DType::float64) return t.to_host_as<double>();
        const std::vector<float> f = t.to_host();
        return std::vector<double>(f.begin(), f.end());
      };
      const Tensor x = make(shape, xs);
      const Tensor w = make({c}, ws);
      const Tensor b = make({c}, bs);
      const std::vector<Tensor> fused = rt.call(ops::batch_norm(), std::vector<Tensor>{x, w, b}, {{"eps", 1e-3}});
      const std::vector<Tensor> stats = rt.call(ops::batch_norm_stats(), std::vector<Tensor>{x}, {{"eps", 1e-3}});
      const Tensor y = rt.call1(ops::batch_norm_normalize(), {x, w, b, stats[0], stats[1]});
      EXPECT_EQ(read(stats[0]), read(fused[1]));
      EXPECT_EQ(read(stats[1]), read(fused[2]));
      const std::vector<double> got = read(y);
      EXPECT_EQ(got, read(fused[0]));
      // y from the rounded statistics, element by element.
      const std::vector<double> mean = read(stats[0]);
      const std::vector<double> invstd = read(stats[1]);
      const std::vector<double> xv = read(x);
      std::int64_t s = 1;
      for (std::size_t d = 2; d < shape.size(); ++d) s *= shape[d];
      std::size_t wrong = 0;
      for (std::size_t e = 0; e < got.size(); ++e) {
        const auto k = static_cast<std::size_t>((static_cast<std::int64_t>(e) / s) % c);
        const double want = (xv[e] - mean[k]) * invstd[k] * ws[k] + bs[k];
        const double rounded = dtype == DType::float32 ? static_cast<double>(static_cast<float>(want)) : want;
        wrong += got[e] != rounded ? 1 : 0;
      }
      EXPECT_EQ(wrong, 0U);
      // With "relu": relu's bits of y.
      const Tensor with_relu =
          rt.call1(ops::batch_norm_normalize(), {x, w, b, stats[0], stats[1]}, {{"relu", std::int64_t{1}}});
      EXPECT_EQ(read(with_relu), read(rt.call1(ops::relu(), {y})));
      // With a residual: add's bits, then relu's.
      std::vector<double> rs(xs.size());
      for (std::size_t e = 0; e < rs.size(); ++e) rs[e] = static_cast<double>((e * 104729) % 997) / 331.0 - 1.5;
      const Tensor r = make(shape, rs);
      const Tensor sum = rt.call1(ops::add(), {y, r});
      EXPECT_EQ(read(rt.call1(ops::batch_norm_normalize(), {x, w, b, stats[0], stats[1], r})), read(sum));
      EXPECT_EQ(read(rt.call1(ops::batch_norm_normalize(), {x, w, b, stats[0], stats[1], r}, {{"relu", std::int64_t{1}}})),
                read(rt.call1(ops::relu(), {sum})));
    }
  }
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

// Eval mode's channels are spread over the threads too (one channel's arithmetic in one): on an input large
// enough to use them, each channel's results are the bits it gets alone.
TEST(BatchNorm, EvalChannelsGetTheBitsEachGetsAlone) {
  Runtime rt(deterministic_config());
  const std::int64_t n = 16, c = 8, s = 33 * 33;
  const auto value = [](std::size_t e, std::size_t prime, std::size_t mod) {
    return static_cast<double>((e * prime) % mod) / 97.0 - 5.0;
  };
  std::vector<double> xs(static_cast<std::size_t>(n * c * s)), gs(xs.size());
  for (std::size_t e = 0; e < xs.size(); ++e) {
    xs[e] = value(e, 7919, 1009);
    gs[e] = value(e, 104729, 997);
  }
  const std::vector<double> ws{0.5, 1.5, -2, 3, 0.25, 1, 2, -1}, bs{0, 1, -1, 2, 0.5, -0.5, 3, 1};
  const std::vector<double> means{0.1, -0.2, 0.3, 0, 1, -1, 0.5, 2}, vars{1, 2, 0.5, 4, 1.5, 3, 0.25, 1};
  const auto run = [&](std::int64_t channels, const std::vector<double>& x, const std::vector<double>& g,
                       std::size_t first) {
    const auto slice = [&](const std::vector<double>& v) {
      return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(first),
                                 v.begin() + static_cast<std::ptrdiff_t>(first) + channels);
    };
    const Shape shape{n, channels, s};
    const std::vector<Tensor> in{f64(rt, shape, x), f64(rt, {channels}, slice(ws)), f64(rt, {channels}, slice(bs)),
                                 f64(rt, {channels}, slice(means)), f64(rt, {channels}, slice(vars))};
    const Tensor y = rt.call1(ops::batch_norm_eval(), in, {{"eps", 1e-5}});
    std::vector<std::vector<double>> out{y.to_host_as<double>()};
    for (const Tensor& t : vjp(rt, ops::batch_norm_eval(), in, std::vector<Tensor>{y},
                               std::vector<Tensor>{f64(rt, shape, g)}, {{"eps", 1e-5}})) {
      out.push_back(t.to_host_as<double>());
    }
    return out;
  };
  const std::vector<std::vector<double>> all = run(c, xs, gs, 0);
  for (const std::int64_t ch : {std::int64_t{0}, std::int64_t{3}, c - 1}) {
    std::vector<double> x1, g1;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto at = static_cast<std::ptrdiff_t>((i * c + ch) * s);
      x1.insert(x1.end(), xs.begin() + at, xs.begin() + at + s);
      g1.insert(g1.end(), gs.begin() + at, gs.begin() + at + s);
    }
    const std::vector<std::vector<double>> alone = run(1, x1, g1, static_cast<std::size_t>(ch));
    for (const std::size_t k : {std::size_t{0}, std::size_t{1}}) {  // y and dx: the channel's elements
      std::vector<double> mine;
      for (std::int64_t i = 0; i < n; ++i) {
        const auto at = static_cast<std::ptrdiff_t>((i * c + ch) * s);
        mine.insert(mine.end(), all[k].begin() + at, all[k].begin() + at + s);
      }
      EXPECT_EQ(mine, alone[k]) << "channel " << ch << ", output " << k;
    }
    for (std::size_t k = 2; k < all.size(); ++k) {  // per-channel gradients
      EXPECT_EQ(all[k][static_cast<std::size_t>(ch)], alone[k][0]) << "channel " << ch << ", output " << k;
    }
  }
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
  expect_shape_error(ops::batch_norm_stats(), {meta({3})}, {"op 'batch_norm_stats'", "x [N, C, ...]"});
  expect_shape_error(ops::batch_norm_stats(), {meta({0, 3})}, {"at least one element per channel"});
  expect_shape_error(ops::batch_norm_stats(), {x, c}, {"op 'batch_norm_stats'"});
  expect_error<InvalidArgument>(
      [] { ops::batch_norm_stats().infer(std::vector<TensorMeta>{meta({2, 3})}, {{"eps", -0.5}}); }, {"'eps'"});
  expect_shape_error(ops::batch_norm_normalize(), {x, c, c, c, meta({4})},
                     {"op 'batch_norm_normalize'", "per-channel inputs of shape [3]", "[4]"});
  expect_shape_error(ops::batch_norm_normalize(), {x, c, c, c, meta({3}, DType::float64)}, {"one dtype"});
  EXPECT_EQ(ops::batch_norm_normalize().infer(std::vector<TensorMeta>{meta({0, 3}), c, c, c, c}, {})[0], meta({0, 3}));
  expect_error<InvalidArgument>(
      [&] { ops::batch_norm_normalize().infer(std::vector<TensorMeta>{x, c, c, c, c}, {{"relu", std::int64_t{2}}}); },
      {"op 'batch_norm_normalize'", "attribute 'relu' is 2, not 0 or 1"});
  expect_shape_error(ops::batch_norm_normalize(), {x, c, c, c, c, meta({3, 2})},
                     {"op 'batch_norm_normalize'", "needs a residual of x's shape", "[3, 2]"});
  expect_shape_error(ops::batch_norm_normalize(), {x, c, c, c}, {"takes 5 or 6 inputs", "got 4"});
  expect_shape_error(ops::batch_norm_normalize(), {x, c, c, c, c, x, x}, {"takes 5 or 6 inputs", "got 7"});
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

// The shared op cases (op_cases.h): random problems per op.
#include "op_cases.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "test_helpers.h"

namespace dtr::test {
namespace {

Shape random_shape(Rng& rng, std::size_t min_rank = 0, std::size_t max_rank = 3) {
  Shape shape(static_cast<std::size_t>(dim(rng, static_cast<std::int64_t>(min_rank), static_cast<std::int64_t>(max_rank))), 0);
  for (auto& d : shape) d = dim(rng);
  return shape;
}

// A shape that broadcasts with `shape`: some leading dimensions dropped, some others set to 1.
Shape broadcast_partner(Rng& rng, const Shape& shape) {
  const auto drop = static_cast<std::size_t>(dim(rng, 0, static_cast<std::int64_t>(shape.size())));
  Shape partner(shape.begin() + static_cast<std::ptrdiff_t>(drop), shape.end());
  for (auto& d : partner) {
    if (rng() % 3 == 0) d = 1;
  }
  return partner;
}

std::vector<std::int64_t> ints(const Shape& shape) { return {shape.begin(), shape.end()}; }

double away_from_zero(double v, double margin) { return std::abs(v) < margin ? (v < 0 ? -margin : margin) + v : v; }

Problem same_shapes(Rng& rng, std::size_t count) {
  const Shape shape = random_shape(rng);
  return Problem{std::vector<Shape>(count, shape), {}};
}

Problem broadcast_pair(Rng& rng) {
  const Shape shape = random_shape(rng, 1, 4);
  Shape other = broadcast_partner(rng, shape);
  return rng() % 2 == 0 ? Problem{{shape, other}, {}} : Problem{{other, shape}, {}};
}

Problem product(Rng& rng, bool batched) {
  const bool ta = rng() % 2 == 0;
  const bool tb = rng() % 2 == 0;
  const std::int64_t m = dim(rng);
  const std::int64_t k = dim(rng);
  const std::int64_t n = dim(rng);
  Shape a = ta ? Shape{k, m} : Shape{m, k};
  Shape b = tb ? Shape{n, k} : Shape{k, n};
  if (batched) {
    const std::int64_t batch = dim(rng, 1, 3);
    a.insert(a.begin(), batch);
    b.insert(b.begin(), batch);
  }
  return Problem{{a, b}, {{"transpose_a", std::int64_t{ta}}, {"transpose_b", std::int64_t{tb}}}};
}

Problem reduction(Rng& rng) {
  const Shape shape = random_shape(rng, 1, 4);
  Attrs attrs;
  if (rng() % 4 != 0) {
    std::vector<std::int64_t> axes;
    const auto rank = static_cast<std::int64_t>(shape.size());
    for (std::int64_t d = 0; d < rank; ++d) {
      if (rng() % 2 == 0) axes.push_back(rng() % 2 == 0 ? d : d - rank);
    }
    attrs.set("axes", axes);
  }
  attrs.set("keepdim", std::int64_t(rng() % 2));
  return Problem{{shape}, attrs};
}

// ---- convolution and pooling ----

// conv2d on random odd sizes: groups 1-3, strides 1-3, padding 0-2, dilation 1-2, with or without a bias.
Problem convolution(Rng& rng) {
  const std::int64_t groups = dim(rng, 1, 3);
  const std::int64_t c = groups * dim(rng, 1, 2);
  const std::int64_t o = groups * dim(rng, 1, 2);
  const std::int64_t kh = dim(rng, 1, 3);
  const std::int64_t kw = dim(rng, 1, 3);
  const std::vector<std::int64_t> stride{dim(rng, 1, 3), dim(rng, 1, 3)};
  const std::vector<std::int64_t> padding{dim(rng, 0, 2), dim(rng, 0, 2)};
  const std::vector<std::int64_t> dilation{dim(rng, 1, 2), dim(rng, 1, 2)};
  const std::int64_t h = std::max<std::int64_t>(1, dilation[0] * (kh - 1) + 1 - 2 * padding[0]) + dim(rng, 0, 4);
  const std::int64_t w = std::max<std::int64_t>(1, dilation[1] * (kw - 1) + 1 - 2 * padding[1]) + dim(rng, 0, 4);
  Problem p{{Shape{dim(rng, 1, 2), c, h, w}, Shape{o, c / groups, kh, kw}},
            {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}}};
  if (rng() % 2 == 0) p.inputs.push_back(Shape{o});
  return p;
}

// Pooling on random odd sizes: kernels 1-3, strides 1-3, padding up to half the kernel.
Problem pooling(Rng& rng) {
  const std::vector<std::int64_t> kernel{dim(rng, 1, 3), dim(rng, 1, 3)};
  const std::vector<std::int64_t> padding{dim(rng, 0, kernel[0] / 2), dim(rng, 0, kernel[1] / 2)};
  Attrs attrs{{"kernel", kernel}, {"padding", padding}};
  if (rng() % 4 != 0) attrs.set("stride", std::vector<std::int64_t>{dim(rng, 1, 3), dim(rng, 1, 3)});
  return Problem{{Shape{dim(rng, 1, 2), dim(rng, 1, 3), kernel[0] + dim(rng, 0, 4), kernel[1] + dim(rng, 0, 4)}},
                 attrs};
}

// Max-pool's inputs as a permutation of 512 points spaced 1/256 apart in [-1, 1) (plus a sliver of the random
// value, under 1/4096): distinct by far more than the finite-difference step, so no window's argmax flips
// under it. Counts the elements it has spread; pooling() keeps an input below 512 of them (at most 2·3·7·7).
std::function<double(std::size_t, double)> distinct_values() {
  auto count = std::make_shared<std::int64_t>(0);
  return [count](std::size_t, double v) {
    const std::int64_t slot = ((*count)++ * 173) % 512;  // 173 is prime to 512: 512 consecutive slots differ
    return static_cast<double>(slot) / 256.0 - 1.0 + v / 4096.0;
  };
}

// softmax and log_softmax: any rank from 1, over a random axis (or the default, the last).
Problem softmax_problem(Rng& rng) {
  const Shape shape = random_shape(rng, 1, 4);
  Attrs attrs;
  const auto rank = static_cast<std::int64_t>(shape.size());
  if (rng() % 3 != 0) attrs.set("axis", dim(rng, -rank, rank - 1));
  return Problem{{shape}, attrs};
}

}  // namespace

std::int64_t dim(Rng& rng, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
}

Tensor make_input(Runtime& rt, const Problem& p, std::size_t i, const std::vector<double>& values, DType dtype) {
  const auto integer = p.integer_inputs.find(i);
  if (integer != p.integer_inputs.end()) return rt.constant(TensorMeta{p.inputs[i], DType::int64}, integer->second);
  return floating_constant(rt, p.inputs[i], dtype, values);
}

std::vector<GradCase> cases() {
  const auto unary = [](Rng& rng) { return same_shapes(rng, 1); };
  return {
      {ops::add(), broadcast_pair},
      {ops::sub(), broadcast_pair},
      {ops::mul(), broadcast_pair},
      {ops::div(), broadcast_pair, [](std::size_t i, double v) { return i == 1 ? away_from_zero(v, 0.5) : v; }},
      {ops::relu(), unary, [](std::size_t, double v) { return away_from_zero(v, 0.05); }},
      {ops::gelu(), unary},
      {ops::tanh(), unary},
      {ops::sigmoid(), unary},
      {ops::lstm_cell(),
       [](Rng& rng) {
         const std::int64_t rows = dim(rng);
         const std::int64_t hidden = dim(rng);
         return Problem{{Shape{rows, 4 * hidden}, Shape{rows, hidden}}, {}};
       }},
      {ops::scale(), [](Rng& rng) { return Problem{{random_shape(rng)}, {{"factor", -1.75}}}; }},
      {ops::matmul(), [](Rng& rng) { return product(rng, false); }},
      {ops::bmm(), [](Rng& rng) { return product(rng, true); }},
      {ops::linear(),
       [](Rng& rng) {
         const std::int64_t in = dim(rng);
         const std::int64_t out = dim(rng);
         Shape x = random_shape(rng, 0, 2);
         x.push_back(in);
         Problem p{{x, Shape{out, in}}, {}};
         if (rng() % 2 == 0) p.inputs.push_back(Shape{out});
         return p;
       }},
      {ops::linear_add(),
       [](Rng& rng) {
         const std::int64_t in = dim(rng);
         const std::int64_t out = dim(rng);
         Shape x = random_shape(rng, 0, 2);
         Shape y = x;
         x.push_back(in);
         y.push_back(out);
         Problem p{{x, Shape{out, in}, y}, {}};
         if (rng() % 2 == 0) p.inputs.push_back(Shape{out});
         return p;
       }},
      {ops::attention(),
       [](Rng& rng) {
         const std::int64_t heads = dim(rng, 1, 3);
         return Problem{{Shape{dim(rng), dim(rng), 3 * heads * dim(rng)}}, {{"heads", heads}}};
       }},
      {ops::sum(), reduction},
      {ops::mean(), reduction},
      {ops::sum_to(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 1, 4);
         return Problem{{shape}, {{"shape", ints(broadcast_partner(rng, shape))}}};
       }},
      {ops::broadcast_to(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 1, 4);
         return Problem{{broadcast_partner(rng, shape)}, {{"shape", ints(shape)}}};
       }},
      {ops::split2(),
       [](Rng& rng) {
         Shape shape = random_shape(rng, 1, 3);
         shape[0] = dim(rng, 2, 7);
         return Problem{{shape}, {}};
       }},
      {ops::concat2(),
       [](Rng& rng) {
         Shape a = random_shape(rng, 1, 3);
         Shape b = a;
         b[0] = dim(rng);
         return Problem{{a, b}, {}};
       }},
      // convolution and pooling
      {ops::conv2d(), convolution},
      {ops::max_pool2d(), pooling, distinct_values()},
      {ops::avg_pool2d(), pooling},
      // layout, embedding, dropout
      {ops::reshape(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng);
         std::vector<std::int64_t> target(shape.begin(), shape.end());
         std::reverse(target.begin(), target.end());
         target.insert(target.begin() + static_cast<std::ptrdiff_t>(rng() % (target.size() + 1)), 1);
         target[rng() % target.size()] = -1;
         return Problem{{shape}, {{"shape", target}}};
       }},
      {ops::slice(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 1, 3);
         const auto d = static_cast<std::int64_t>(rng() % shape.size());
         const std::int64_t size = shape[static_cast<std::size_t>(d)];
         const auto index = [&] { return dim(rng, -size, size); };
         const std::int64_t dim_attr = rng() % 2 == 0 ? d : d - static_cast<std::int64_t>(shape.size());
         return Problem{{shape}, {{"dim", dim_attr}, {"start", index()}, {"end", index()}, {"step", dim(rng, 1, 3)}}};
       }},
      {ops::split(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 1, 3);
         const std::size_t d = rng() % shape.size();
         std::vector<std::int64_t> sizes;
         for (std::int64_t left = shape[d]; left > 0;) left -= sizes.emplace_back(dim(rng, 0, left));
         return Problem{{shape}, {{"dim", static_cast<std::int64_t>(d)}, {"sizes", sizes}}};
       }},
      {ops::concat(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 1, 3);
         const std::size_t d = rng() % shape.size();
         Problem p{{shape}, {{"dim", static_cast<std::int64_t>(d)}}};
         for (std::int64_t more = dim(rng, 0, 2); more > 0; --more) {
           p.inputs.push_back(shape);
           p.inputs.back()[d] = dim(rng);
         }
         return p;
       }},
      {ops::transpose(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 2, 4);
         const auto rank = static_cast<std::int64_t>(shape.size());
         return Problem{{shape}, {{"dim0", dim(rng, -rank, rank - 1)}, {"dim1", dim(rng, 0, rank - 1)}}};
       }},
      {ops::permute(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng, 1, 4);
         std::vector<std::int64_t> dims(shape.size());
         for (std::size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<std::int64_t>(i);
         std::shuffle(dims.begin(), dims.end(), rng);
         return Problem{{shape}, {{"dims", dims}}};
       }},
      {ops::embedding(),
       [](Rng& rng) {
         const std::int64_t rows = dim(rng);
         const Shape indices = random_shape(rng, 0, 2);
         std::vector<std::int64_t> values(static_cast<std::size_t>(TensorMeta{indices}.numel()));
         for (std::int64_t& v : values) v = dim(rng, 0, rows - 1);  // repeats likely: the scatter adds
         Problem p{{Shape{rows, dim(rng)}, indices}, {}};
         p.integer_inputs[1] = values;
         return p;
       }},
      {ops::dropout(),
       [](Rng& rng) {
         const double p[] = {0.0, 0.3, 0.5};
         return Problem{{random_shape(rng)}, {{"p", p[rng() % 3]}}};
       }},
      // softmax, losses and normalization
      {ops::softmax(), softmax_problem},
      {ops::log_softmax(), softmax_problem},
      {ops::cross_entropy(),
       [](Rng& rng) {
         const std::int64_t n = dim(rng);
         const std::int64_t classes = dim(rng);
         Problem p{{Shape{n, classes}, Shape{n}}, {}};
         for (std::int64_t k = 0; k < n; ++k) p.integer_inputs[1].push_back(dim(rng, 0, classes - 1));
         return p;
       }},
      {ops::layer_norm(),
       [](Rng& rng) {
         const Shape x = random_shape(rng, 1, 4);
         const std::int64_t normalized_rank = dim(rng, 1, static_cast<std::int64_t>(x.size()));
         const Shape normalized(x.end() - normalized_rank, x.end());
         return Problem{{x, normalized, normalized}, {{"eps", 0.01}, {"normalized_rank", normalized_rank}}};
       },
       nullptr, 1},
      {ops::batch_norm(),
       [](Rng& rng) {
         const Shape x = random_shape(rng, 2, 4);
         return Problem{{x, Shape{x[1]}, Shape{x[1]}}, {{"eps", 0.01}}};
       },
       nullptr, 1},
      {ops::batch_norm_eval(),
       [](Rng& rng) {
         const Shape x = random_shape(rng, 2, 4);
         const Shape c{x[1]};
         return Problem{{x, c, c, c, c}, {{"eps", 0.01}}};
       },
       [](std::size_t i, double v) { return i == 4 ? std::abs(v) + 0.5 : v; }},  // a positive variance
      {ops::running_stat_update(),
       [](Rng& rng) {
         const Shape shape = random_shape(rng);
         Attrs attrs{{"momentum", 0.3}};
         if (rng() % 2 == 0) attrs.set("unbiased_count", dim(rng, 2, 9));
         if (rng() % 2 == 0) attrs.set("invstd_eps", 0.01);
         return Problem{{shape, shape}, attrs};
       },
       [](std::size_t i, double v) { return i == 1 ? away_from_zero(v, 0.5) : v; }},  // an invstd is not 0
  };
}

bool expected_without_rule(const std::string& name) {
  static const std::set<std::string> optimizer_steps = {"sgd_momentum_buffer", "sgd_apply", "adam_moment1",
                                                        "adam_moment2", "adam_apply"};
  return name == "uniform" || name.ends_with("_backward") || optimizer_steps.contains(name) ||
         // convolution and pooling: conv2d's backward ops, one per input
         name == "conv2d_backward_input" || name == "conv2d_backward_weight" ||
         // batch norm's halves: nn::batch_norm differentiates the pair as one function (batch_norm's rule)
         name == "batch_norm_stats" || name == "batch_norm_normalize";
}

std::vector<double> random_values(Rng& rng, std::int64_t count, const GradCase& c, std::size_t input) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<std::size_t>(count));
  for (double& v : values) v = c.adjust ? c.adjust(input, uniform(rng)) : uniform(rng);
  return values;
}

std::vector<std::vector<double>> outputs_and_gradients(Runtime& rt, const GradCase& c, const Problem& p,
                                                       const std::vector<std::vector<double>>& values, DType dtype) {
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < values.size(); ++i) inputs.push_back(make_input(rt, p, i, values[i], dtype));
  const std::vector<Tensor> outputs = rt.call(c.op, inputs, p.attrs);
  std::vector<Tensor> ones;
  for (const Tensor& out : outputs) {
    const TensorMeta meta{out.shape(), dtype};
    ones.push_back(dtype == DType::float64
                       ? rt.constant(meta, std::vector<double>(static_cast<std::size_t>(out.numel()), 1.0))
                       : rt.constant(meta, std::vector<float>(static_cast<std::size_t>(out.numel()), 1.0F)));
  }
  std::vector<std::vector<double>> results;
  for (const Tensor& out : outputs) results.push_back(floating_values(out));
  for (const Tensor& g : vjp(rt, c.op, inputs, outputs, ones, p.attrs)) {
    results.push_back(g.defined() ? floating_values(g) : std::vector<double>{});  // int64 inputs: no gradient
  }
  return results;
}

}  // namespace dtr::test

// Gradient checks: every differentiable op's gradient rule (include/dtr/gradients.h, with the backward ops it
// uses) against central finite differences in float64, on random shapes (odd sizes, broadcasting, transposes,
// axes); and every op's float32 kernels against the same computation in float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>

#include "dtr/gradients.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

using Rng = std::mt19937_64;

std::int64_t dim(Rng& rng, std::int64_t low = 1, std::int64_t high = 7) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
}

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

struct Problem {
  std::vector<Shape> inputs;
  Attrs attrs;
  // Inputs that are int64 (labels, indices): input index -> values are drawn in [0, bound). They get no
  // gradient and no finite differences.
  std::map<std::size_t, std::int64_t> int64_inputs = {};
};

struct GradCase {
  const OpDef& op;
  std::function<Problem(Rng&)> make;
  // Moves a random value of input `i` away from where the op is not differentiable (a kink, a pole).
  std::function<double(std::size_t i, double value)> adjust = nullptr;
  // Outputs after the first this many (saved statistics) are not differentiated: their gradients are
  // undefined and the loss ignores them.
  std::size_t outputs_with_gradient = static_cast<std::size_t>(-1);
};

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

// softmax and log_softmax: any rank from 1, over a random axis (or the default, the last).
Problem softmax_problem(Rng& rng) {
  const Shape shape = random_shape(rng, 1, 4);
  Attrs attrs;
  const auto rank = static_cast<std::int64_t>(shape.size());
  if (rng() % 3 != 0) attrs.set("axis", dim(rng, -rank, rank - 1));
  return Problem{{shape}, attrs};
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
      // softmax, losses and normalization
      {ops::softmax(), softmax_problem},
      {ops::log_softmax(), softmax_problem},
      {ops::cross_entropy(),
       [](Rng& rng) {
         const std::int64_t n = dim(rng);
         const std::int64_t classes = dim(rng);
         return Problem{{Shape{n, classes}, Shape{n}}, {}, {{1, classes}}};
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

// Ops without a gradient rule: random ones, and the backward ops (no second derivatives yet).
bool expected_without_rule(const std::string& name) {
  return name == "uniform" || name.ends_with("_backward");
}

std::vector<double> random_values(Rng& rng, std::int64_t count, const GradCase& c, std::size_t input) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<std::size_t>(count));
  for (double& v : values) v = c.adjust ? c.adjust(input, uniform(rng)) : uniform(rng);
  return values;
}

bool is_int64(const Problem& p, std::size_t input) { return p.int64_inputs.contains(input); }

// Input `input`'s random values: integers in range for an int64 input (held as doubles, exactly).
std::vector<double> input_values(Rng& rng, const Problem& p, const GradCase& c, std::size_t input) {
  const std::int64_t count = TensorMeta{p.inputs[input]}.numel();
  if (!is_int64(p, input)) return random_values(rng, count, c, input);
  std::uniform_int_distribution<std::int64_t> pick(0, p.int64_inputs.at(input) - 1);
  std::vector<double> values(static_cast<std::size_t>(count));
  for (double& v : values) v = static_cast<double>(pick(rng));
  return values;
}

// A constant for input `input`: int64 whatever `dtype` is when the problem says so.
Tensor make_input(Runtime& rt, const Problem& p, std::size_t input, const std::vector<double>& values, DType dtype) {
  if (is_int64(p, input)) {
    return rt.constant(TensorMeta{p.inputs[input], DType::int64}, std::vector<std::int64_t>(values.begin(), values.end()));
  }
  const TensorMeta meta{p.inputs[input], dtype};
  if (dtype == DType::float64) return rt.constant(meta, values);
  return rt.constant(meta, std::vector<float>(values.begin(), values.end()));
}

// Σ_o Σ_e weights[o][e] · op(inputs)[o][e], in float64 through the runtime.
double loss(Runtime& rt, const GradCase& c, const Problem& p, const std::vector<std::vector<double>>& values,
            const std::vector<std::vector<double>>& weights) {
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < values.size(); ++i) inputs.push_back(make_input(rt, p, i, values[i], DType::float64));
  const std::vector<Tensor> outputs = rt.call(c.op, inputs, p.attrs);
  double total = 0.0;
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const std::vector<double> out = outputs[o].to_host_as<double>();
    for (std::size_t e = 0; e < out.size(); ++e) total += weights[o][e] * out[e];
  }
  return total;
}

TEST(GradientCheck, EveryRuleMatchesFiniteDifferencesInFloat64) {
  const std::vector<GradCase> all = cases();
  for (std::size_t case_index = 0; case_index < all.size(); ++case_index) {
    const GradCase& c = all[case_index];
    for (std::uint64_t trial = 0; trial < 6; ++trial) {
      Rng rng(1000 * case_index + trial);
      const Problem p = c.make(rng);
      SCOPED_TRACE(::testing::Message() << c.op.name << " trial " << trial << ", inputs "
                                        << ::testing::PrintToString(std::vector<std::string>(
                                               [&] {
                                                 std::vector<std::string> s;
                                                 for (const Shape& shape : p.inputs) s.push_back(to_string(shape));
                                                 return s;
                                               }())));
      Runtime rt(deterministic_config());
      std::vector<std::vector<double>> values;
      std::vector<Tensor> inputs;
      for (std::size_t i = 0; i < p.inputs.size(); ++i) {
        values.push_back(input_values(rng, p, c, i));
        inputs.push_back(make_input(rt, p, i, values.back(), DType::float64));
      }
      const std::vector<Tensor> outputs = rt.call(c.op, inputs, p.attrs);
      std::vector<std::vector<double>> weights;
      std::vector<Tensor> output_grads;
      for (std::size_t o = 0; o < outputs.size(); ++o) {
        const Tensor& out = outputs[o];
        if (o >= c.outputs_with_gradient) {
          weights.emplace_back(static_cast<std::size_t>(out.numel()), 0.0);
          output_grads.emplace_back();
          continue;
        }
        weights.push_back(random_values(rng, out.numel(), GradCase{c.op, c.make}, 0));
        output_grads.push_back(rt.constant(out.meta(), weights.back()));
      }
      const std::vector<Tensor> grads = vjp(rt, c.op, inputs, outputs, output_grads, p.attrs);
      ASSERT_EQ(grads.size(), inputs.size());
      const double h = 1e-6;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        // Exactly the non-floating inputs get no gradient.
        ASSERT_EQ(grads[i].defined(), !is_int64(p, i)) << "input " << i;
        if (is_int64(p, i)) continue;
        ASSERT_EQ(grads[i].meta(), inputs[i].meta()) << "input " << i;
        const std::vector<double> analytic = grads[i].to_host_as<double>();
        // Every element of small inputs, a sample of larger ones.
        const std::size_t step = std::max<std::size_t>(1, analytic.size() / 48);
        for (std::size_t e = 0; e < analytic.size(); e += step) {
          auto plus = values;
          auto minus = values;
          plus[i][e] += h;
          minus[i][e] -= h;
          const double numeric = (loss(rt, c, p, plus, weights) - loss(rt, c, p, minus, weights)) / (2 * h);
          EXPECT_NEAR(analytic[e], numeric, 1e-6 + 1e-6 * std::abs(numeric)) << "input " << i << " element " << e;
        }
      }
    }
  }
}

TEST(GradientCheck, Float32KernelsAgreeWithTheFloat64Reference) {
  // Forward and gradient, in float32 from inputs exactly representable in both, against float64.
  const std::vector<GradCase> all = cases();
  for (std::size_t case_index = 0; case_index < all.size(); ++case_index) {
    const GradCase& c = all[case_index];
    for (std::uint64_t trial = 0; trial < 4; ++trial) {
      Rng rng(77 + 1000 * case_index + trial);
      const Problem p = c.make(rng);
      SCOPED_TRACE(::testing::Message() << c.op.name << " trial " << trial);
      std::vector<std::vector<double>> values;
      for (std::size_t i = 0; i < p.inputs.size(); ++i) {
        values.push_back(input_values(rng, p, c, i));
        for (double& v : values.back()) v = static_cast<double>(static_cast<float>(v));
      }
      const auto run = [&](DType dtype) {
        Runtime rt(deterministic_config());
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
        auto read = [&](const Tensor& t) {
          if (dtype == DType::float64) return t.to_host_as<double>();
          const std::vector<float> f = t.to_host();
          return std::vector<double>(f.begin(), f.end());
        };
        for (const Tensor& out : outputs) results.push_back(read(out));
        for (const Tensor& g : vjp(rt, c.op, inputs, outputs, ones, p.attrs)) {
          results.push_back(g.defined() ? read(g) : std::vector<double>{});  // int64 inputs: no gradient
        }
        return results;
      };
      const auto single = run(DType::float32);
      const auto reference = run(DType::float64);
      ASSERT_EQ(single.size(), reference.size());
      for (std::size_t r = 0; r < single.size(); ++r) {
        ASSERT_EQ(single[r].size(), reference[r].size());
        for (std::size_t e = 0; e < single[r].size(); ++e) {
          EXPECT_NEAR(single[r][e], reference[r][e], 1e-5 + 1e-5 * std::abs(reference[r][e])) << "result " << r << " element " << e;
        }
      }
    }
  }
}

TEST(GradientCheck, EveryOpHasARuleAndACheckOrIsListedWithout) {
  std::set<std::string> checked;
  for (const GradCase& c : cases()) checked.insert(c.op.name);
  for (const std::string& name : op_names()) {
    const OpDef& op = find_op(name);
    if (expected_without_rule(name)) {
      EXPECT_EQ(gradient_rule(op), nullptr) << name;
    } else {
      EXPECT_NE(gradient_rule(op), nullptr) << name << " needs a gradient rule (nn/)";
      EXPECT_TRUE(checked.contains(name)) << name << " needs a case in gradcheck_test.cpp";
    }
  }
}

TEST(GradientCheck, VjpRejectsWhatDoesNotFit) {
  Runtime rt(deterministic_config());
  Tensor x = rt.constant(TensorMeta{{3}}, std::vector<float>{1, 2, 3});
  Tensor y = rt.call1(ops::relu(), {x});
  Tensor wrong = rt.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
  EXPECT_THROW(vjp(rt, ops::uniform(), std::vector<Tensor>{x}, std::vector<Tensor>{y}, std::vector<Tensor>{y}),
               InvalidArgument);
  EXPECT_THROW(vjp(rt, ops::relu(), std::vector<Tensor>{x}, std::vector<Tensor>{y}, std::vector<Tensor>{}),
               InvalidArgument);
  EXPECT_THROW(vjp(rt, ops::relu(), std::vector<Tensor>{x}, std::vector<Tensor>{y}, std::vector<Tensor>{wrong}),
               ShapeError);
  // An undefined output gradient stands for zeros.
  const std::vector<Tensor> zero = vjp(rt, ops::relu(), std::vector<Tensor>{x}, std::vector<Tensor>{y},
                                       std::vector<Tensor>{Tensor()});
  EXPECT_EQ(zero[0].to_host(), (std::vector<float>{0, 0, 0}));
}

}  // namespace
}  // namespace dtr::test

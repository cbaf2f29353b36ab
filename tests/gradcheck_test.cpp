// Gradient checks: every differentiable op's gradient rule (include/dtr/gradients.h, with the backward ops it
// uses) against central finite differences in float64, on random shapes (odd sizes, broadcasting, transposes,
// axes); and every op's float32 kernels against the same computation in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "op_cases.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

// Σ_o Σ_e weights[o][e] · op(inputs)[o][e], in float64 through the runtime. A random op runs on a fresh
// runtime, whose first random call gets the seed the checked call got: the same draws every time.
double loss(Runtime& shared, const GradCase& c, const Problem& p, const std::vector<std::vector<double>>& values,
            const std::vector<std::vector<double>>& weights) {
  std::optional<Runtime> fresh;
  Runtime& rt = c.op.random ? fresh.emplace(deterministic_config()) : shared;
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
        values.push_back(random_values(rng, TensorMeta{p.inputs[i]}.numel(), c, i));
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
        // Exactly the integer inputs get no gradient.
        ASSERT_EQ(grads[i].defined(), !p.integer_inputs.contains(i)) << "input " << i;
        if (!grads[i].defined()) continue;
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

// Autograd keeps only what saved_for_backward names: each rule, given undefined tensors for the rest (and the
// metas for their shapes), gives the bits it gives with everything.
TEST(GradientCheck, EveryRuleReadsOnlyWhatItSaves) {
  const std::vector<GradCase> all = cases();
  for (std::size_t case_index = 0; case_index < all.size(); ++case_index) {
    const GradCase& c = all[case_index];
    for (std::uint64_t trial = 0; trial < 3; ++trial) {
      Rng rng(500 + 1000 * case_index + trial);
      const Problem p = c.make(rng);
      SCOPED_TRACE(::testing::Message() << c.op.name << " trial " << trial);
      Runtime rt(deterministic_config());
      std::vector<Tensor> inputs;
      for (std::size_t i = 0; i < p.inputs.size(); ++i) {
        inputs.push_back(make_input(rt, p, i, random_values(rng, TensorMeta{p.inputs[i]}.numel(), c, i), DType::float64));
      }
      const std::vector<Tensor> outputs = rt.call(c.op, inputs, p.attrs);
      std::vector<Tensor> output_grads;
      for (std::size_t o = 0; o < outputs.size(); ++o) {
        output_grads.push_back(o < c.outputs_with_gradient
                                   ? rt.constant(outputs[o].meta(), random_values(rng, outputs[o].numel(), c, 0))
                                   : Tensor());
      }
      const SavedForBackward saved = saved_for_backward(c.op);
      std::vector<Tensor> kept_inputs;
      std::vector<TensorMeta> input_meta;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        kept_inputs.push_back(saved.input(i) ? inputs[i] : Tensor());
        input_meta.push_back(inputs[i].meta());
      }
      std::vector<Tensor> kept_outputs;
      std::vector<TensorMeta> output_meta;
      for (std::size_t o = 0; o < outputs.size(); ++o) {
        kept_outputs.push_back(saved.output(o) ? outputs[o] : Tensor());
        output_meta.push_back(outputs[o].meta());
      }
      const std::vector<Tensor> full = vjp(rt, c.op, inputs, outputs, output_grads, p.attrs);
      std::vector<Tensor> lean;
      ASSERT_NO_THROW(lean = vjp(rt, c.op, kept_inputs, kept_outputs, output_grads, p.attrs, input_meta, output_meta));
      ASSERT_EQ(lean.size(), full.size());
      for (std::size_t i = 0; i < full.size(); ++i) {
        ASSERT_EQ(lean[i].defined(), full[i].defined()) << "input " << i;
        if (full[i].defined()) {
          EXPECT_EQ(lean[i].to_host_as<double>(), full[i].to_host_as<double>()) << "input " << i;
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
        values.push_back(random_values(rng, TensorMeta{p.inputs[i]}.numel(), c, i));
        for (double& v : values.back()) v = static_cast<double>(static_cast<float>(v));
      }
      const auto run = [&](DType dtype) {
        Runtime rt(deterministic_config());
        return outputs_and_gradients(rt, c, p, values, dtype);
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

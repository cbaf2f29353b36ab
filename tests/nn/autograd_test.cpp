// Autograd (include/dtr/nn/autograd.h): gradients of composite graphs against finite differences, the memory
// autograd keeps, deep graphs, the grad mode, and every error path.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"

namespace dtr::nn {
namespace {

Variable f64(Runtime& rt, Shape shape, std::vector<double> values, bool requires_grad) {
  return Variable(rt, rt.constant(TensorMeta{std::move(shape), DType::float64}, values), requires_grad);
}

std::vector<double> pseudo_random(std::size_t n, double seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(seed + 1.7 * static_cast<double>(i)) * 0.9;
  return v;
}

// A graph over float64 leaves: builds the loss from the leaves it is given.
using Graph = std::function<Variable(std::span<const Variable>)>;

// Checks autograd's gradient of every leaf element against central differences of the loss.
void expect_gradients_match_finite_differences(const std::vector<Shape>& shapes, const Graph& graph) {
  std::vector<std::vector<double>> values;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    values.push_back(pseudo_random(static_cast<std::size_t>(TensorMeta{shapes[i]}.numel()), 0.3 + i));
  }
  auto loss_at = [&](const std::vector<std::vector<double>>& at, bool track, std::vector<Variable>* leaves_out) {
    Runtime rt;
    std::vector<Variable> leaves;
    for (std::size_t i = 0; i < shapes.size(); ++i) leaves.push_back(f64(rt, shapes[i], at[i], track));
    Variable loss = graph(leaves);
    if (!track) return std::vector<std::vector<double>>{{loss.data().to_host_as<double>().at(0)}};
    loss.backward();
    std::vector<std::vector<double>> grads;
    for (const Variable& leaf : leaves) grads.push_back(leaf.grad().to_host_as<double>());
    if (leaves_out != nullptr) *leaves_out = leaves;
    return grads;
  };
  const std::vector<std::vector<double>> grads = loss_at(values, true, nullptr);
  const double h = 1e-6;
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::size_t k = 0; k < values[i].size(); ++k) {
      auto plus = values;
      auto minus = values;
      plus[i][k] += h;
      minus[i][k] -= h;
      const double numeric = (loss_at(plus, false, nullptr)[0][0] - loss_at(minus, false, nullptr)[0][0]) / (2 * h);
      EXPECT_NEAR(grads[i][k], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << "leaf " << i << " element " << k;
    }
  }
}

// The sum of the elements of `x` weighted by fixed pseudo-random coefficients: a loss whose gradient is not
// the same in every element.
Variable weighted_sum(const Variable& x) {
  const std::vector<double> w = pseudo_random(static_cast<std::size_t>(x.numel()), 9.1);
  return sum(mul(x, f64(x.runtime(), x.shape(), w, false)));
}

TEST(AutogradTest, SharedSubexpressionsAndValuesUsedByManyOps) {
  expect_gradients_match_finite_differences({{3, 4}, {4, 2}, {3, 2}}, [](std::span<const Variable> v) {
    const Variable h = matmul(v[0], v[1]);  // read by five ops below
    const Variable a = mul(h, h);
    const Variable b = add(tanh(h), a);
    const Variable c = sub(mul(b, v[2]), sigmoid(h));
    const Variable d = div(c, add(a, scale(mul(v[2], v[2]), 1.0)));
    return add(weighted_sum(d), weighted_sum(h));
  });
}

TEST(AutogradTest, ViewsSlicesAndBroadcasts) {
  expect_gradients_match_finite_differences({{2, 3, 4}, {4}, {1, 3, 1}}, [](std::span<const Variable> v) {
    const Variable flat = reshape(v[0], {6, 4});                 // a view
    const Variable rows = slice(flat, 0, 1, 5);                  // a view (dim 0)
    const Variable cols = slice(flat, 1, 0, 4, 2);               // a copy
    const Variable biased = add(rows, v[1]);                     // broadcast over rows
    const Variable scaled = mul(v[0], v[2]);                     // broadcast over dims 0 and 2
    const Variable t = permute(scaled, {2, 0, 1});
    const std::vector<Variable> parts = split(transpose(cols, 0, 1), {1, 1}, 0);
    return add(add(weighted_sum(gelu(biased)), weighted_sum(t)), weighted_sum(mul(parts[0], parts[1])));
  });
}

TEST(AutogradTest, InPlaceUpdatesRebindWithoutCorruptingSavedValues) {
  expect_gradients_match_finite_differences({{5}, {5}}, [](std::span<const Variable> v) {
    Variable x = mul(v[0], v[1]);  // not a leaf: may be updated in place
    const Variable saved_user = tanh(x);  // saves tanh(x) of the old x
    const Variable alias = x;             // a copy: sees the update
    x.rebind(mul(x, v[0]));               // x *= v0
    x.rebind(add(x, v[1]));               // x += v1
    EXPECT_EQ(alias.grad_fn(), x.grad_fn());
    return add(weighted_sum(mul(alias, saved_user)), weighted_sum(relu(x)));
  });
}

TEST(AutogradTest, NormalizationsLossesAndConvolutions) {
  expect_gradients_match_finite_differences({{2, 2, 5, 5}, {3, 2, 3, 3}, {3}, {3}}, [](std::span<const Variable> v) {
    Runtime& rt = v[0].runtime();
    const Variable y = conv2d(v[0], v[1], v[2], Conv2dOptions{{1, 1}, {1, 1}, {1, 1}, 1});
    const Variable mean = zeros(rt, TensorMeta{{3}, DType::float64});
    const Variable var = zeros(rt, TensorMeta{{3}, DType::float64});
    const Variable n = batch_norm(y, v[3], v[2], mean, var, true);
    const Variable pooled = max_pool2d(relu(n), {2, 2});
    const Variable logits = reshape(avg_pool2d(pooled, {2, 2}), {2, 3});
    const std::vector<std::int64_t> labels{2, 0};
    const Variable target(rt, rt.constant(TensorMeta{{2}, DType::int64}, labels));
    return add(cross_entropy(logits, target, 0.1), mse_loss(softmax(logits), log_softmax(logits)));
  });
}

}  // namespace
}  // namespace dtr::nn

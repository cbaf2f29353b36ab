// What autograd keeps in memory (only what the rules read, released as backward goes), deep graphs, the grad
// mode, and every error path of the autograd API.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/models.h"
#include "dtr/nn/optim.h"
#include "zoo_training.h"

namespace dtr::nn {
namespace {

std::uint64_t bytes_of(const std::vector<Variable>& vs) {
  std::uint64_t total = 0;
  for (const Variable& v : vs) total += v.meta().nbytes();
  return total;
}

std::vector<float> ramp(std::int64_t n, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37F * static_cast<float>(i));
  return v;
}

Variable labels(Runtime& rt, std::int64_t n) {
  std::vector<std::int64_t> l(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int64_t>(i % 10);
  return Variable(rt, rt.constant(TensorMeta{{n}, DType::int64}, l));
}

// After the forward, exactly what the backward nodes read is resident: the Linear layers' pre-activations are
// not (ReLU's rule reads its output), each ReLU's output is (the next Linear's saved input) once.
TEST(AutogradMemory, TheForwardKeepsOnlyWhatTheRulesRead) {
  Runtime rt;
  Generator gen(3);
  const auto model = make_mlp(rt, gen, MlpSpec{32, 4, 0.0});
  const std::int64_t batch = 16;
  const Variable x = constant(rt, {batch, 1, 28, 28}, ramp(batch * 784, 1.0F));
  const Variable y = labels(rt, batch);
  const std::uint64_t before = rt.resident_bytes();
  const Variable loss = cross_entropy(model->forward(x), y);
  const std::uint64_t relu_outputs = 4 * batch * 32 * sizeof(float);
  const std::uint64_t logits = batch * 10 * sizeof(float);
  EXPECT_EQ(rt.resident_bytes() - before, relu_outputs + logits + sizeof(float) /* the loss */);
}

// Issue 14: after backward() and zero_grad(), resident bytes are the parameters, the optimizer's state and the
// gradients, nothing more.
TEST(AutogradMemory, AfterBackwardAndZeroGradOnlyParametersStateAndGradientsRemain) {
  Runtime rt;
  Generator gen(5);
  const auto model = make_mlp(rt, gen, MlpSpec{32, 3, 0.0});
  const std::vector<Variable> params = model->parameters();
  SGD sgd(params, SGDOptions{0.1, 0.9, 0.0, false});
  for (int step = 0; step < 2; ++step) {
    const std::int64_t batch = 8;
    {
      const Variable x = constant(rt, {batch, 1, 28, 28}, ramp(batch * 784, 0.5F + static_cast<float>(step)));
      const Variable loss = cross_entropy(model->forward(x), labels(rt, batch));
      loss.backward();
    }
    sgd.step();
    sgd.zero_grad();  // zeros of each gradient's shape, as PyTorch 1.13's default
    const std::uint64_t params_bytes = bytes_of(params);
    EXPECT_EQ(rt.resident_bytes(), 3 * params_bytes) << "step " << step;  // parameters, momentum, gradients
  }
  sgd.zero_grad(true);
  EXPECT_EQ(rt.resident_bytes(), 2 * bytes_of(params));
}

// Backward frees every saved tensor and every intermediate gradient: what remains is the leaf, its gradient
// and the loss.
TEST(AutogradMemory, BackwardReleasesSavedTensorsAndIntermediateGradients) {
  Runtime rt;
  const std::int64_t n = 1024;
  Variable x = constant(rt, {n}, ramp(n, 1.0F), true);
  Variable h = x;
  for (int i = 0; i < 6; ++i) h = tanh(h);  // each saves its output: 6 activations
  const Variable loss = sum(h);
  const std::uint64_t activation = n * sizeof(float);
  const std::uint64_t with_graph = rt.resident_bytes();
  h = Variable();
  loss.backward();
  // Left: x, its gradient (a constant, without lineage) and the loss; every activation and every
  // intermediate gradient is gone.
  EXPECT_EQ(rt.resident_bytes(), 2 * activation + sizeof(float));
  EXPECT_GE(with_graph, 7 * activation);
}

// A gradient waiting for its node is a constant (nn/backward.cpp): under a budget only forward values are
// recomputed, never the backward pass. Shown to fail without it: the zoo's LSTM at 40% of its peak then remade
// waiting gradients from the dead ones behind them (sigmoid_backward, tanh_backward, ... back to the loss's).
TEST(AutogradMemory, UnderABudgetNoGradientIsRecomputed) {
  const test::ZooCase zoo = test::zoo_case("lstm");
  const test::TrainingRecord reference = test::train_steps(zoo, test::RunOptions{});
  for (const char* heuristic : {"forecast", "dtr"}) {
    SCOPED_TRACE(heuristic);
    test::RunOptions options;
    options.heuristic = heuristic;
    options.budget_bytes = static_cast<std::uint64_t>(0.4 * static_cast<double>(reference.peak_resident_bytes));
    options.record_recomputations = true;
    const test::TrainingRecord run = test::train_steps(zoo, options);
    EXPECT_GT(run.rematerializations, 0U);
    for (const std::string& op : run.recomputed_ops) EXPECT_EQ(op.find("backward"), std::string::npos) << op;
    EXPECT_TRUE(run.values == reference.values);
  }
}

// A layer's backward reads its saved input only for the weight's gradient: it makes that one first, so that
// while it makes the input's gradient the saved input is no longer needed and the budget can evict it for
// good. Made the other way round, the input's gradient and the saved input are both needed at once, and one
// of them is remade (a convolution's input gradient, the U-Net's costliest recomputation at 50% of its peak).
// Shown to fail with the input's gradient first: one rematerialization for each layer.
TEST(AutogradMemory, ALayersBackwardLetsItsSavedInputGoBeforeMakingTheInputsGradient) {
  const std::int64_t n = 64;
  struct Layer {
    const char* name;
    Shape input;
    Shape weight;
    Shape output;
    std::function<Variable(const Variable&, const Variable&)> apply;
  };
  const std::vector<Layer> layers = {
      {"linear", {n, 256}, {256, 256}, {n, 256}, [](const Variable& x, const Variable& w) { return linear(x, w); }},
      {"conv2d", {n, 4, 16, 16}, {4, 4, 3, 3}, {n, 4, 16, 16},
       [](const Variable& x, const Variable& w) { return conv2d(x, w, {}, Conv2dOptions{.padding = {1, 1}}); }},
  };
  const auto elements = [](const Shape& shape) { return TensorMeta{shape}.numel(); };
  const auto bytes = [](const Shape& shape) { return TensorMeta{shape}.nbytes(); };
  for (const Layer& layer : layers) {
    // x is made from the leaf a by an op whose rule does not read x: once the layer's rule has read it, nothing
    // will again. The budget holds what the weight's gradient needs (a, w, x, the output's gradient, dw) and
    // room for scalars and a convolution's scratch, not one more input-sized tensor.
    const auto run = [&](std::optional<std::uint64_t> budget, const char* heuristic) {
      Config config;
      config.cost_model = CostModel::flops;
      config.budget_mode = BudgetMode::bytes;
      config.heuristic = heuristic;
      config.memory_budget = budget;
      Runtime rt(config);
      const Variable a = constant(rt, layer.input, ramp(elements(layer.input), 1.0F), true);
      const Variable w = constant(rt, layer.weight, ramp(elements(layer.weight), 0.1F), true);
      const Variable loss = sum(layer.apply(scale(a, 2.0), w));
      rt.make_constant(loss.data());  // no lineage keeps the layer's output: it dies here
      loss.backward();
      return std::tuple{a.grad().to_host(), w.grad().to_host(), rt.stats()};
    };
    const std::uint64_t budget =
        2 * bytes(layer.input) + 2 * bytes(layer.weight) + bytes(layer.output) + bytes(layer.input) / 4;
    const auto [da, dw, unbudgeted] = run(std::nullopt, "forecast");
    for (const char* heuristic : {"forecast", "dtr-eq"}) {
      SCOPED_TRACE(std::string(layer.name) + ", " + heuristic);
      const auto [budgeted_da, budgeted_dw, stats] = run(budget, heuristic);
      EXPECT_GT(unbudgeted.peak_resident_bytes, budget) << "the budget bites";
      EXPECT_GT(stats.evictions, 0U);
      EXPECT_EQ(stats.rematerializations, 0U) << "the saved input went for good";
      EXPECT_EQ(budgeted_da, da);
      EXPECT_EQ(budgeted_dw, dw);
    }
  }
}

TEST(AutogradMemory, RetainGraphKeepsSavedTensorsAndAccumulates) {
  Runtime rt;
  const Variable x = constant(rt, {3}, std::vector<float>{1, 2, 3}, true);
  const Variable loss = sum(mul(x, x));
  loss.backward({}, /*retain_graph=*/true);
  const std::vector<float> once = x.grad().to_host();
  loss.backward();
  const std::vector<float> twice = x.grad().to_host();
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_EQ(twice[i], 2 * once[i]);
  EXPECT_THROW(loss.backward(), InvalidArgument);  // freed by the second
}

// A leaf's first gradient that nothing else holds becomes its .grad as it is (no copy); one a caller holds
// (here the gradient passed to backward) is copied, so accumulating into .grad never changes the caller's.
TEST(AutogradMemory, ALeafTakesOverItsFirstGradientOnlyWhenNothingElseHoldsIt) {
  Config config;
  int copies = 0;
  config.kernel_observer = [&](const KernelRun& run) { copies += run.name == "scale" ? 1 : 0; };
  Runtime rt(config);
  const Variable x = constant(rt, {3}, std::vector<float>{1, 2, 3}, true);
  const Variable w = constant(rt, {3}, std::vector<float>{4, 5, 6});
  sum(mul(x, w)).backward();
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(x.grad().to_host(), (std::vector<float>{4, 5, 6}));

  const Variable y = constant(rt, {3}, std::vector<float>{1, 2, 3}, true);
  const Tensor g = rt.constant(TensorMeta{{3}}, std::vector<float>{0.5F, 1.5F, 2.5F});
  y.backward(g);
  EXPECT_EQ(copies, 1);
  y.backward(g);  // accumulates into y's gradient
  EXPECT_EQ(y.grad().to_host(), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(g.to_host(), (std::vector<float>{0.5F, 1.5F, 2.5F}));
}

// Backward and the graph's destruction are iterative: 10,000 layers grow no C stack.
TEST(AutogradMemory, TenThousandLayerBackwardNeedsNoDeepStack) {
  Runtime rt;
  const Variable w = constant(rt, {4, 4}, ramp(16, 0.3F), true);
  const Variable b = constant(rt, {4}, ramp(4, 0.1F), true);
  Variable h = constant(rt, {2, 4}, ramp(8, 1.0F));
  for (int layer = 0; layer < 10000; ++layer) h = tanh(linear(h, w, b));
  const Variable loss = sum(h);
  h = Variable();
  loss.backward();
  EXPECT_TRUE(w.grad().defined());
  for (const float g : w.grad().to_host()) EXPECT_TRUE(std::isfinite(g));
}

TEST(AutogradMemory, NoGradDetachAndRequiresGrad) {
  Runtime rt;
  const Variable x = constant(rt, {2}, std::vector<float>{1, 2}, true);
  {
    const NoGrad no_grad;
    EXPECT_FALSE(grad_enabled());
    const Variable y = mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  EXPECT_TRUE(grad_enabled());
  const Variable y = mul(x, x);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  const Variable d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.to_host(), y.to_host());
  // Only the tracked branch contributes.
  sum(add(y, mul(d, d))).backward();
  EXPECT_EQ(x.grad().to_host(), (std::vector<float>{2, 4}));
}

TEST(AutogradMemory, BadUseIsAClearError) {
  Runtime rt;
  Runtime other;
  const Variable x = constant(rt, {2}, std::vector<float>{1, 2}, true);
  const Variable plain = constant(rt, {2}, std::vector<float>{1, 2});
  EXPECT_THROW(sum(plain).backward(), InvalidArgument);              // requires no gradient
  EXPECT_THROW(mul(x, x).backward(), InvalidArgument);               // 2 elements, no gradient given
  EXPECT_THROW(mul(x, x).backward(rt.constant(TensorMeta{{3}})), ShapeError);
  EXPECT_THROW(apply1(ops::uniform(), {x}), InvalidArgument);        // no rule, input requires a gradient
  EXPECT_NO_THROW(apply1(ops::uniform(), {x.detach()}));
  EXPECT_THROW(add(x, constant(other, {2}, std::vector<float>{1, 2})), InvalidArgument);
  Variable leaf = x;
  EXPECT_THROW(leaf.rebind(mul(x, x)), InvalidArgument);             // a leaf that requires a gradient
  EXPECT_THROW(leaf.rebind(constant(rt, {3}, std::vector<float>{1, 2, 3})), ShapeError);
  {
    const NoGrad no_grad;
    leaf.rebind(scale(x, 2.0));  // an optimizer-style update: still a leaf that requires a gradient
  }
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_EQ(x.to_host(), (std::vector<float>{2, 4}));
  Variable y = mul(x, x);
  try {  // not a leaf
    y.set_requires_grad(false);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("only a leaf's flag can be set, and this variable is computed"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(Variable(rt, rt.constant(TensorMeta{{2}, DType::int64}), true), InvalidArgument);
  EXPECT_THROW(leaf.set_grad(rt.constant(TensorMeta{{3}})), ShapeError);
  EXPECT_THROW(Variable().data(), InvalidArgument);
  EXPECT_THROW(Variable(rt, Tensor()), InvalidArgument);
  const std::vector<Variable> none;
  EXPECT_THROW(apply(ops::add(), std::span<const Variable>(none)), InvalidArgument);
}

}  // namespace
}  // namespace dtr::nn

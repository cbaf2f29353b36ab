// Optimizers, schedules and clipping (include/dtr/nn/optim.h, lr_scheduler.h): each optimizer against steps
// computed here on the host in double from the same float32 numbers, as PyTorch 1.13 writes them; lazy state
// and skipped parameters; the schedules' values; clipping; the state being constants; bitwise-repeatable
// training under a budget; every error path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/lr_scheduler.h"
#include "dtr/nn/module.h"
#include "dtr/nn/optim.h"

namespace dtr::nn {
namespace {

using Host = std::vector<double>;

Variable parameter(Runtime& rt, const std::vector<float>& values) {
  return constant(rt, Shape{static_cast<std::int64_t>(values.size())}, values, true);
}

void give_grad(Variable& p, const std::vector<float>& values) {
  p.set_grad(p.runtime().constant(p.meta(), std::span<const float>(values)));
}

Host widen(const std::vector<float>& values) { return Host(values.begin(), values.end()); }

// float32 against the double reference: 1e-6 relative (values here are at least 0.1 in magnitude, or the
// floor stands for that scale).
void expect_close(const std::vector<float>& actual, const Host& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6 * std::max(std::abs(expected[i]), 0.1)) << what << " element " << i;
  }
}

// Three steps of gradients for a parameter of 4 elements, of mixed signs and sizes.
const std::vector<float> kStart = {0.5f, -1.25f, 2.0f, 0.75f};
const std::vector<std::vector<float>> kGrads = {
    {0.3f, -0.2f, 1.5f, -0.7f}, {0.25f, 0.4f, -1.1f, -0.6f}, {-0.35f, 0.45f, 0.9f, 0.8f}};

// torch.optim.SGD's _single_tensor_sgd (dampening 0), in double.
struct HostSGD {
  double lr, momentum, decay;
  bool nesterov;
  Host buf;
  void step(Host& p, const Host& g) {
    Host d = g;
    for (std::size_t i = 0; i < p.size(); ++i) d[i] += decay * p[i];
    if (momentum != 0) {
      if (buf.empty()) {
        buf = d;  // torch.clone(d_p) at the first step
      } else {
        for (std::size_t i = 0; i < p.size(); ++i) buf[i] = momentum * buf[i] + d[i];
      }
      for (std::size_t i = 0; i < p.size(); ++i) d[i] = nesterov ? d[i] + momentum * buf[i] : buf[i];
    }
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= lr * d[i];
  }
};

// torch.optim.Adam / AdamW's _single_tensor_adam(w), in double.
struct HostAdam {
  double lr, beta1, beta2, eps, decay;
  bool decoupled;
  Host m, v;
  int t = 0;
  void step(Host& p, const Host& grad) {
    if (m.empty()) m = v = Host(p.size(), 0.0);
    ++t;
    const double bc1 = 1 - std::pow(beta1, t);
    const double bc2 = 1 - std::pow(beta2, t);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) {
        p[i] *= 1 - lr * decay;
      } else {
        g += decay * p[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      p[i] -= lr / bc1 * (m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps));
    }
  }
};

Tensor state_named(const Optimizer& optimizer, const std::string& name) {
  for (const auto& [key, tensor] : optimizer.named_state()) {
    if (key == name) return tensor;
  }
  ADD_FAILURE() << "no state " << name;
  return {};
}

std::vector<std::string> state_names(const Optimizer& optimizer) {
  std::vector<std::string> names;
  for (const auto& [key, tensor] : optimizer.named_state()) names.push_back(key);
  return names;
}

struct SGDCase {
  double momentum, decay;
  bool nesterov;
};
void PrintTo(const SGDCase& c, std::ostream* out) {
  *out << "momentum " << c.momentum << ", weight_decay " << c.decay << (c.nesterov ? ", nesterov" : "");
}

class SGDVariants : public ::testing::TestWithParam<SGDCase> {};

TEST_P(SGDVariants, ThreeStepsMatchTheHostReference) {
  const SGDCase c = GetParam();
  Runtime rt;
  Variable p = parameter(rt, kStart);
  SGD sgd({p}, {.lr = 0.1, .momentum = c.momentum, .weight_decay = c.decay, .nesterov = c.nesterov});
  HostSGD host{.lr = 0.1, .momentum = c.momentum, .decay = c.decay, .nesterov = c.nesterov, .buf = {}};
  Host expected = widen(kStart);
  for (std::size_t s = 0; s < kGrads.size(); ++s) {
    give_grad(p, kGrads[s]);
    sgd.step();
    host.step(expected, widen(kGrads[s]));
    expect_close(p.to_host(), expected, "parameter after step " + std::to_string(s + 1));
    if (c.momentum != 0) {
      expect_close(state_named(sgd, "0.momentum_buffer").to_host(), host.buf, "buffer");
    } else {
      EXPECT_TRUE(sgd.named_state().empty()) << "plain SGD keeps no state";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optim, SGDVariants,
                         ::testing::Values(SGDCase{0, 0, false}, SGDCase{0, 0.1, false}, SGDCase{0.9, 0, false},
                                           SGDCase{0.9, 0.05, false}, SGDCase{0.9, 0, true},
                                           SGDCase{0.5, 0.05, true}));

struct AdamCase {
  AdamOptions options;
  bool decoupled;
};
void PrintTo(const AdamCase& c, std::ostream* out) {
  const AdamOptions& o = c.options;
  *out << (c.decoupled ? "AdamW" : "Adam") << " lr " << o.lr << ", betas " << o.beta1 << " " << o.beta2 << ", eps "
       << o.eps << ", weight_decay " << o.weight_decay;
}

class AdamVariants : public ::testing::TestWithParam<AdamCase> {};

TEST_P(AdamVariants, ThreeStepsMatchTheHostReference) {
  const AdamCase c = GetParam();
  const AdamOptions& o = c.options;
  Runtime rt;
  Variable p = parameter(rt, kStart);
  std::unique_ptr<Adam> adam;
  if (c.decoupled) {
    adam = std::make_unique<AdamW>(
        std::vector<Variable>{p},
        AdamWOptions{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay});
  } else {
    adam = std::make_unique<Adam>(std::vector<Variable>{p}, o);
  }
  HostAdam host{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, c.decoupled, {}, {}};
  Host expected = widen(kStart);
  for (std::size_t s = 0; s < kGrads.size(); ++s) {
    give_grad(p, kGrads[s]);
    adam->step();
    host.step(expected, widen(kGrads[s]));
    expect_close(p.to_host(), expected, "parameter after step " + std::to_string(s + 1));
    // The moments: m is of the gradients' scale, v of their squares' (floors of 0.1 and 0.01 of relative 1e-6).
    expect_close(state_named(*adam, "0.exp_avg").to_host(), host.m, "exp_avg");
    const std::vector<float> v = state_named(*adam, "0.exp_avg_sq").to_host();
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], host.v[i], 1e-6 * std::max(host.v[i], 0.01));
    EXPECT_EQ(adam->step_count(0), static_cast<std::int64_t>(s + 1));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optim, AdamVariants,
    ::testing::Values(AdamCase{AdamOptions{}, false}, AdamCase{AdamOptions{.lr = 0.05, .weight_decay = 0.1}, false},
                      AdamCase{AdamOptions{.lr = 0.02, .beta1 = 0.5, .beta2 = 0.75, .eps = 1e-3}, false},
                      AdamCase{AdamOptions{.lr = 0.1, .weight_decay = 1e-2}, true},
                      AdamCase{AdamOptions{.lr = 0.05, .beta1 = 0.8, .weight_decay = 0.5}, true}));

TEST(OptimTest, AdamWDecayIsDecoupledFromTheMoments) {
  // With zero gradients the moments stay zero and Adam's step is 0 / (0 + eps) = 0: AdamW only decays, by
  // exactly one float32 multiplication, while Adam's L2 decay goes through the moments into a step of ~lr.
  Runtime rt;
  Variable a = parameter(rt, kStart);
  Variable b = parameter(rt, kStart);
  AdamW adamw({a}, {.lr = 0.1, .weight_decay = 0.2});
  Adam adam({b}, {.lr = 0.1, .weight_decay = 0.2});
  give_grad(a, {0, 0, 0, 0});
  give_grad(b, {0, 0, 0, 0});
  adamw.step();
  adam.step();
  const std::vector<float> decayed = a.to_host();
  const std::vector<float> l2 = b.to_host();
  const float factor = static_cast<float>(1.0 - 0.1 * 0.2);
  for (std::size_t i = 0; i < kStart.size(); ++i) {
    EXPECT_EQ(decayed[i], kStart[i] * factor) << i;
    // Adam: m̂/√v̂ = sign(wd·p) = sign(p), so p moves by lr toward 0.
    EXPECT_NEAR(l2[i], kStart[i] - 0.1 * (kStart[i] > 0 ? 1 : -1), 1e-6) << i;
  }
  for (const float x : state_named(adamw, "0.exp_avg").to_host()) EXPECT_EQ(x, 0.0f);
}

TEST(OptimTest, StateIsLazyAndParametersWithoutGradientsAreSkipped) {
  Runtime rt;
  std::vector<Variable> ps = {parameter(rt, kStart), parameter(rt, {1.0f, -2.0f}), parameter(rt, {0.25f})};
  Adam adam(ps, {.lr = 0.01});
  EXPECT_TRUE(adam.named_state().empty()) << "no state before the first step";
  give_grad(ps[0], kGrads[0]);
  give_grad(ps[2], {0.5f});
  adam.step();  // ps[1] has no gradient: skipped, no state, no step counted
  EXPECT_EQ(state_names(adam),
            (std::vector<std::string>{"0.exp_avg", "0.exp_avg_sq", "2.exp_avg", "2.exp_avg_sq"}));
  EXPECT_EQ(ps[1].to_host(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(adam.step_count(1), 0);

  give_grad(ps[1], {0.3f, -0.6f});
  adam.step();
  EXPECT_EQ(state_names(adam), (std::vector<std::string>{"0.exp_avg", "0.exp_avg_sq", "1.exp_avg", "1.exp_avg_sq",
                                                         "2.exp_avg", "2.exp_avg_sq"}));
  EXPECT_EQ(adam.step_count(0), 2);
  EXPECT_EQ(adam.step_count(1), 1);
  // Its first step, with its own bias correction (t = 1): m̂/√v̂ = sign(g), so p -= lr·sign(g) (up to eps).
  HostAdam host{0.01, 0.9, 0.999, 1e-8, 0, false, {}, {}};
  Host expected = {1.0, -2.0};
  host.step(expected, {0.3f, -0.6f});
  expect_close(ps[1].to_host(), expected, "the parameter skipped once");
  EXPECT_NEAR(expected[0], 1.0 - 0.01, 1e-9);

  // SGD with momentum: the buffer appears at a parameter's first step only.
  SGD sgd(ps, {.lr = 0.1, .momentum = 0.9});
  ps[1].set_grad({});
  sgd.step();
  EXPECT_EQ(state_names(sgd), (std::vector<std::string>{"0.momentum_buffer", "2.momentum_buffer"}));
}

TEST(OptimTest, StateAndParametersStayConstantsThatCannotBeEvicted) {
  Runtime rt;
  Variable p = parameter(rt, kStart);
  Variable q = parameter(rt, kStart);
  Adam adam({p}, {});
  SGD sgd({q}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true});
  for (const auto& g : kGrads) {
    give_grad(p, g);
    give_grad(q, g);
    adam.step();
    sgd.step();
  }
  ASSERT_EQ(adam.named_state().size(), 2u);
  ASSERT_EQ(sgd.named_state().size(), 1u);
  for (const Optimizer* o : {static_cast<const Optimizer*>(&adam), static_cast<const Optimizer*>(&sgd)}) {
    for (const auto& [name, tensor] : o->named_state()) {
      EXPECT_FALSE(rt.evict(tensor)) << name;
      EXPECT_TRUE(tensor.resident()) << name;
    }
  }
  EXPECT_FALSE(rt.evict(p.data()));
  EXPECT_FALSE(rt.evict(q.data()));
  // The check can tell: an op's result is evictable.
  const Tensor computed = rt.call1(ops::scale(), {p.data()}, {{"factor", 2.0}});
  EXPECT_TRUE(rt.evict(computed));
}

TEST(OptimTest, SetLrChangesTheNextStep) {
  Runtime rt;
  Variable p = parameter(rt, kStart);
  SGD sgd({p}, {.lr = 0.1});
  EXPECT_EQ(sgd.lr(), 0.1);
  give_grad(p, kGrads[0]);
  sgd.step();
  sgd.set_lr(0.5);
  EXPECT_EQ(sgd.lr(), 0.5);
  sgd.step();
  Host expected = widen(kStart);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] -= (0.1 + 0.5) * kGrads[0][i];
  expect_close(p.to_host(), expected, "after lr 0.1 then 0.5");
}

TEST(OptimTest, ZeroGradZeroesOrDropsAndLeavesSharedGradientsAlone) {
  Runtime rt;
  Variable p = parameter(rt, kStart);
  Variable other = parameter(rt, kStart);
  Variable without = parameter(rt, {1.0f});
  give_grad(p, kGrads[0]);
  other.set_grad(p.grad());  // shared with a variable the optimizer does not hold
  SGD sgd({p, without}, {.lr = 0.1});
  sgd.zero_grad();
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(p.grad().to_host(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(other.grad().to_host(), kGrads[0]);
  EXPECT_FALSE(without.grad().defined()) << "an undefined gradient stays undefined";
  sgd.zero_grad(true);
  EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(other.grad().to_host(), kGrads[0]);
}

TEST(LRSchedulerTest, StepLRFollowsItsClosedFormOverTenEpochs) {
  Runtime rt;
  SGD sgd({parameter(rt, kStart)}, {.lr = 0.1});
  StepLR schedule(sgd, 3, 0.5);
  EXPECT_EQ(schedule.last_lr(), 0.1);
  const std::vector<double> by_hand = {0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125};
  for (int epoch = 1; epoch <= 10; ++epoch) {
    schedule.step();
    EXPECT_EQ(schedule.last_epoch(), epoch);
    EXPECT_DOUBLE_EQ(schedule.last_lr(), 0.1 * std::pow(0.5, epoch / 3)) << epoch;
    EXPECT_DOUBLE_EQ(schedule.last_lr(), by_hand[static_cast<std::size_t>(epoch - 1)]) << epoch;
    EXPECT_EQ(sgd.lr(), schedule.last_lr()) << epoch;
  }
}

TEST(LRSchedulerTest, CosineAnnealingFollowsItsClosedFormOverTenEpochs) {
  Runtime rt;
  Adam adam({parameter(rt, kStart)}, {.lr = 0.01});
  CosineAnnealingLR schedule(adam, 8, 0.001);
  const double pi = std::acos(-1.0);
  for (int epoch = 1; epoch <= 10; ++epoch) {
    schedule.step();
    const double expected = 0.001 + (0.01 - 0.001) * (1 + std::cos(pi * epoch / 8)) / 2;
    EXPECT_DOUBLE_EQ(schedule.last_lr(), expected) << epoch;
    EXPECT_EQ(adam.lr(), schedule.last_lr()) << epoch;
    if (epoch == 4) {
      EXPECT_NEAR(schedule.last_lr(), 0.0055, 1e-15) << "half way: the mean of lr0 and eta_min";
    }
    if (epoch == 8) {
      EXPECT_NEAR(schedule.last_lr(), 0.001, 1e-15) << "eta_min at t_max";
    }
  }
  EXPECT_GT(schedule.last_lr(), 0.001) << "past t_max the cosine rises again";
}

TEST(ClipGradNormTest, ScalesEveryGradientAboveTheNormAndReturnsIt) {
  Runtime rt;
  Variable a = parameter(rt, {3.0f, 0.0f});
  Variable b = Variable(rt, rt.constant(TensorMeta{Shape{1}, DType::float64}, std::vector<double>{4.0}), true);
  Variable skipped = parameter(rt, {7.0f});
  Variable sharer = parameter(rt, {3.0f, 0.0f});
  give_grad(a, {3.0f, 0.0f});
  b.set_grad(rt.constant(b.meta(), std::vector<double>{4.0}));
  const Tensor original = a.grad();
  sharer.set_grad(original);  // shared: clipping must not change it in place
  const std::vector<Variable> ps = {a, b, skipped};
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 1.0), 5.0);
  const double coefficient = 1.0 / (5.0 + 1e-6);
  expect_close(a.grad().to_host(), {3 * coefficient, 0}, "a");
  EXPECT_NEAR(b.grad().to_host_as<double>()[0], 4 * coefficient, 1e-15);
  EXPECT_FALSE(skipped.grad().defined());
  EXPECT_EQ(original.to_host(), (std::vector<float>{3.0f, 0.0f}));
  EXPECT_EQ(sharer.grad().to_host(), (std::vector<float>{3.0f, 0.0f}));
  // Now below the norm: the same tensors, untouched.
  const Tensor before = a.grad();
  EXPECT_NEAR(clip_grad_norm(ps, 10.0), 1.0, 1e-6);
  EXPECT_EQ(a.grad().to_host(), before.to_host());
  EXPECT_EQ(clip_grad_norm(std::vector<Variable>{skipped}, 1.0), 0.0) << "no gradient: norm 0";
}

TEST(ClipGradNormTest, ANonFiniteNormIsReturnedAndNothingIsScaled) {
  Runtime rt;
  Variable a = parameter(rt, {3.0f, 4.0f});
  Variable b = parameter(rt, {1.0f});
  give_grad(a, {3.0f, 4.0f});
  for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    give_grad(b, {bad});
    const double norm = clip_grad_norm(std::vector<Variable>{a, b}, 1.0);
    EXPECT_FALSE(std::isfinite(norm));
    EXPECT_EQ(std::isnan(norm), std::isnan(bad));
    EXPECT_EQ(a.grad().to_host(), (std::vector<float>{3.0f, 4.0f}));
  }
}

// A module of the test's own: y = x · w + c, w and c broadcast over x's rows, so that a training loop runs
// through autograd with activations much larger than the parameters.
class Affine : public Module {
 public:
  Affine(Runtime& rt, std::int64_t n) {
    std::vector<float> w(static_cast<std::size_t>(n)), c(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = 0.5f + 0.01f * static_cast<float>(i % 17);
      c[i] = -0.2f + 0.02f * static_cast<float>(i % 11);
    }
    weight_ = register_parameter("weight", constant(rt, Shape{n}, w));
    bias_ = register_parameter("bias", constant(rt, Shape{n}, c));
  }
  Variable forward(const Variable& x) override { return add(mul(x, weight_), bias_); }

 private:
  Variable weight_, bias_;
};

// Five steps of a deep stack of Affine layers with AdamW, clipping and a schedule; the parameters' and the
// state's bits.
std::vector<std::vector<float>> train(Config config, RuntimeStats* stats) {
  Runtime rt(std::move(config));
  constexpr std::int64_t rows = 64;
  constexpr std::int64_t n = 256;
  Sequential model;
  for (int i = 0; i < 12; ++i) model.push_back(std::make_shared<Affine>(rt, n));
  std::vector<float> xs(rows * n), ys(rows * n);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    xs[i] = std::sin(0.37f * static_cast<float>(i));
    ys[i] = std::cos(0.11f * static_cast<float>(i));
  }
  const Variable x = constant(rt, Shape{rows, n}, xs);
  const Variable y = constant(rt, Shape{rows, n}, ys);
  AdamW optimizer(model.parameters(), {.lr = 0.01});
  CosineAnnealingLR schedule(optimizer, 5);
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad(true);
    Variable loss = mse_loss(tanh(model(x)), y);
    loss.backward();
    clip_grad_norm(optimizer.parameters(), 0.5);
    optimizer.step();
    schedule.step();
  }
  std::vector<std::vector<float>> result;
  for (const Variable& p : model.parameters()) result.push_back(p.to_host());
  for (const auto& [name, t] : optimizer.named_state()) result.push_back(t.to_host());
  if (stats != nullptr) *stats = rt.stats();
  return result;
}

TEST(OptimTest, TrainingIsBitwiseRepeatableUnderABudget) {
  RuntimeStats free_stats;
  const auto reference = train({}, &free_stats);
  Config tight;
  tight.memory_budget = free_stats.peak_resident_bytes * 3 / 5;
  tight.budget_mode = BudgetMode::bytes;
  tight.thrash_limit = std::nullopt;
  RuntimeStats tight_stats;
  const auto budgeted = train(tight, &tight_stats);
  EXPECT_GT(tight_stats.rematerializations, 0u) << "the budget must make the runtime recompute";
  RecordProperty("peak_resident_bytes_free", std::to_string(free_stats.peak_resident_bytes));
  RecordProperty("peak_resident_bytes_budgeted", std::to_string(tight_stats.peak_resident_bytes));
  RecordProperty("rematerializations", std::to_string(tight_stats.rematerializations));
  RecordProperty("evictions", std::to_string(tight_stats.evictions));
  ASSERT_EQ(reference.size(), budgeted.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    ASSERT_EQ(reference[i].size(), budgeted[i].size());
    EXPECT_EQ(std::memcmp(reference[i].data(), budgeted[i].data(), reference[i].size() * sizeof(float)), 0)
        << "tensor " << i;
  }
  EXPECT_EQ(reference, train({}, nullptr)) << "a second run without a budget";
}

// dtr::InvalidArgument whose message holds every one of `parts`.
template <typename F>
void expect_invalid(F&& f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no dtr::InvalidArgument; expected one mentioning " << parts.front();
  } catch (const InvalidArgument& e) {
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(OptimTest, EveryBadArgumentIsInvalidArgumentNamingIt) {
  Runtime rt;
  const Variable p = parameter(rt, kStart);
  const std::vector<Variable> ps = {p};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_invalid([&] { SGD(ps, {}); }, {"SGD", "'lr'", "given"});
  expect_invalid([&] { SGD(ps, {.lr = -0.1}); }, {"SGD", "'lr'", ">= 0", "-0.1"});
  expect_invalid([&] { SGD(ps, {.lr = 0.1, .momentum = -1}); }, {"'momentum'", ">= 0"});
  expect_invalid([&] { SGD(ps, {.lr = 0.1, .momentum = nan}); }, {"'momentum'", ">= 0", "nan"});
  expect_invalid([&] { SGD(ps, {.lr = 0.1, .weight_decay = -1e-4}); }, {"'weight_decay'", ">= 0"});
  expect_invalid([&] { SGD(ps, {.lr = 0.1, .nesterov = true}); }, {"'momentum'", "> 0 with nesterov"});
  expect_invalid([&] { Adam(ps, {.lr = -1}); }, {"Adam", "'lr'", ">= 0"});
  expect_invalid([&] { Adam(ps, {.beta1 = 1.0}); }, {"Adam", "'beta1'", "in [0, 1)"});
  expect_invalid([&] { Adam(ps, {.beta2 = -0.1}); }, {"'beta2'", "in [0, 1)"});
  expect_invalid([&] { Adam(ps, {.eps = -1e-8}); }, {"'eps'", ">= 0"});
  expect_invalid([&] { Adam(ps, {.weight_decay = -1}); }, {"'weight_decay'", ">= 0"});
  expect_invalid([&] { AdamW(ps, {.weight_decay = -1e-2}); }, {"AdamW", "'weight_decay'", ">= 0"});
  expect_invalid([&] { AdamW(ps, {.beta1 = nan}); }, {"AdamW", "'beta1'"});
  // The parameter list.
  expect_invalid([&] { Adam({}, {}); }, {"Adam", "empty"});
  expect_invalid([&] { Adam({p, parameter(rt, {1.0f}).detach()}, {}); }, {"parameter 1", "does not require"});
  expect_invalid([&] { SGD({Variable()}, {.lr = 0.1}); }, {"parameter 0", "undefined"});
  expect_invalid([&] { SGD({scale(p, 2.0)}, {.lr = 0.1}); }, {"parameter 0", "not a leaf"});
  expect_invalid([&] { SGD({p, p}, {.lr = 0.1}); }, {"parameter 1", "parameter 0 again"});
  const Variable view(rt, rt.view(parameter(rt, kStart).data(), Shape{2}), true);
  expect_invalid([&] { SGD({view}, {.lr = 0.1}); }, {"parameter 0", "view"});
  // Later calls.
  SGD sgd(ps, {.lr = 0.1});
  expect_invalid([&] { sgd.set_lr(-1); }, {"'lr'", ">= 0"});
  expect_invalid([&] { sgd.set_lr(nan); }, {"'lr'", ">= 0"});
  EXPECT_EQ(sgd.lr(), 0.1) << "a refused rate changes nothing";
  Adam adam(ps, {});
  expect_invalid([&] { (void)adam.step_count(1); }, {"step_count", "parameter 1"});
  // Schedules and clipping.
  expect_invalid([&] { StepLR(sgd, 0); }, {"StepLR", "step_size", ">= 1"});
  expect_invalid([&] { StepLR(sgd, 2, 0.0); }, {"StepLR", "gamma", "> 0"});
  expect_invalid([&] { StepLR(sgd, 2, std::numeric_limits<double>::infinity()); }, {"gamma", "finite"});
  expect_invalid([&] { CosineAnnealingLR(sgd, 0); }, {"CosineAnnealingLR", "t_max", ">= 1"});
  expect_invalid([&] { CosineAnnealingLR(sgd, 10, -0.1); }, {"CosineAnnealingLR", "eta_min", ">= 0"});
  expect_invalid([&] { clip_grad_norm(ps, 0.0); }, {"clip_grad_norm", "max_norm", "> 0"});
  expect_invalid([&] { clip_grad_norm(ps, -1.0); }, {"max_norm", "> 0"});
  expect_invalid([&] { clip_grad_norm(ps, nan); }, {"max_norm", "> 0", "nan"});
}

}  // namespace
}  // namespace dtr::nn

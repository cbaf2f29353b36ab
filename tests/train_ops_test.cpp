// Embedding, dropout and the optimizer steps through a Runtime: known values on small hand-worked cases, the
// errors (index ranges checked before anything is allocated, attribute values, arities), the random mask
// recomputed bitwise, and updates by Runtime::assign that leave earlier results recomputable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "dtr/gradients.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using Indices = std::vector<std::int64_t>;

Tensor floats(Runtime& rt, Shape shape, const Floats& values) {
  return rt.constant(TensorMeta{std::move(shape)}, values);
}
Tensor indices(Runtime& rt, Shape shape, const Indices& values) {
  return rt.constant(TensorMeta{std::move(shape), DType::int64}, values);
}

// Calling `op` throws an `E` with every one of `parts` and allocates nothing.
template <typename E>
void expect_rejected(Runtime& rt, const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                     std::initializer_list<std::string_view> parts) {
  const auto before = allocations(rt);
  expect_error<E>([&] { rt.call(op, inputs, attrs); }, parts);
  EXPECT_EQ(allocations(rt), before);
}

// ---- embedding ----

TEST(TrainOps, EmbeddingLooksUpRows) {
  Runtime rt(deterministic_config());
  const Tensor weight = floats(rt, {3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor out = rt.call1(ops::embedding(), {weight, indices(rt, {2, 2}, {2, 0, 0, 1})});
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(out.to_host(), (Floats{5, 6, 1, 2, 1, 2, 3, 4}));
  const Tensor weight64 = rt.constant(TensorMeta{{2, 1}, DType::float64}, Doubles{0.5, -0.25});
  EXPECT_EQ(rt.call1(ops::embedding(), {weight64, indices(rt, {}, {1})}).to_host_as<double>(), (Doubles{-0.25}));
}

TEST(TrainOps, EmbeddingRejectsAnIndexOutOfRangeBeforeAllocating) {
  Runtime rt(deterministic_config());
  const Tensor weight = floats(rt, {3, 2}, {1, 2, 3, 4, 5, 6});
  for (const std::int64_t bad : {3, -1}) {
    const Tensor ids = indices(rt, {2}, {0, bad});
    expect_rejected<ShapeError>(rt, ops::embedding(), {weight, ids}, {},
                                {"op 'embedding'", "[0, 3)", "index " + std::to_string(bad), "position 1",
                                 "[3, 2] and int64 [2]"});
  }
}

TEST(TrainOps, EmbeddingShapeErrors) {
  Runtime rt(deterministic_config());
  const Tensor weight = floats(rt, {3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor float_ids = floats(rt, {2}, {0, 1});
  expect_rejected<ShapeError>(rt, ops::embedding(), {weight, float_ids}, {},
                              {"op 'embedding'", "int64", "[3, 2] and [2]"});
  expect_rejected<ShapeError>(rt, ops::embedding(), {float_ids, indices(rt, {1}, {0})}, {},
                              {"op 'embedding'", "[V, D]", "[2] and int64 [1]"});
  const Tensor int_weight = rt.constant(TensorMeta{{3, 2}, DType::int64});
  expect_rejected<ShapeError>(rt, ops::embedding(), {int_weight, indices(rt, {1}, {0})}, {},
                              {"op 'embedding'", "float32 or float64"});
}

TEST(TrainOps, EmbeddingBackwardAddsRowsInPositionOrder) {
  Runtime rt(deterministic_config());
  const Tensor grad = floats(rt, {3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor ids = indices(rt, {3}, {1, 0, 1});
  const Tensor dw = rt.call1(ops::embedding_backward(), {grad, ids}, {{"num_embeddings", 3}});
  EXPECT_EQ(dw.shape(), (Shape{3, 2}));
  EXPECT_EQ(dw.to_host(), (Floats{3, 4, 6, 8, 0, 0}));
  // Positions in increasing order: (1 + 1e8) rounds to 1e8 in float, then - 1e8 gives 0 (another order, 1).
  const Tensor ordered =
      rt.call1(ops::embedding_backward(), {floats(rt, {3, 1}, {1, 1e8F, -1e8F}), indices(rt, {3}, {0, 0, 0})},
               {{"num_embeddings", 1}});
  EXPECT_EQ(ordered.to_host(), (Floats{0}));
  // The gradient rule: the weight's through embedding_backward, none for the indices.
  const Tensor weight = floats(rt, {2, 2}, {1, 2, 3, 4});
  const Tensor pick = indices(rt, {3}, {1, 1, 0});
  const Tensor out = rt.call1(ops::embedding(), {weight, pick});
  const std::vector<Tensor> grads =
      vjp(rt, ops::embedding(), std::vector<Tensor>{weight, pick}, std::vector<Tensor>{out},
          std::vector<Tensor>{floats(rt, {3, 2}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(grads[0].to_host(), (Floats{5, 6, 4, 6}));
  EXPECT_FALSE(grads[1].defined());
}

TEST(TrainOps, EmbeddingBackwardErrors) {
  Runtime rt(deterministic_config());
  const Tensor grad = floats(rt, {2, 2}, {1, 2, 3, 4});
  expect_rejected<ShapeError>(rt, ops::embedding_backward(), {grad, indices(rt, {2}, {0, 2})}, {{"num_embeddings", 2}},
                              {"op 'embedding_backward'", "[0, 2)", "index 2"});
  expect_rejected<ShapeError>(rt, ops::embedding_backward(), {grad, indices(rt, {3}, {0, 0, 0})},
                              {{"num_embeddings", 2}}, {"op 'embedding_backward'", "[2, 2] and int64 [3]"});
  expect_rejected<ShapeError>(rt, ops::embedding_backward(), {grad, floats(rt, {2}, {0, 1})}, {{"num_embeddings", 2}},
                              {"op 'embedding_backward'", "int64 indices"});
  expect_rejected<ShapeError>(rt, ops::embedding_backward(), {grad, indices(rt, {2}, {0, 0})}, {{"num_embeddings", -1}},
                              {"op 'embedding_backward'", "num_embeddings >= 0"});
  expect_rejected<InvalidArgument>(rt, ops::embedding_backward(), {grad, indices(rt, {2}, {0, 0})}, {},
                                   {"'num_embeddings'"});
}

// ---- dropout ----

TEST(TrainOps, DropoutWithPZeroKeepsEverything) {
  Runtime rt(deterministic_config());
  const Tensor x = floats(rt, {2, 3}, {1, -2, 3, -4, 5, -6});
  const std::vector<Tensor> out = rt.call(ops::dropout(), std::vector<Tensor>{x}, {{"p", 0.0}});
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].to_host(), x.to_host());
  EXPECT_EQ(out[1].to_host(), Floats(6, 1.0F));
}

TEST(TrainOps, DropoutDropsAboutPAndScalesTheRest) {
  Runtime rt(deterministic_config());
  const Tensor x = floats(rt, {10000}, Floats(10000, 0.75F));
  const std::vector<Tensor> out = rt.call(ops::dropout(), std::vector<Tensor>{x}, {{"p", 0.25}});
  const Floats y = out[0].to_host();
  const Floats mask = out[1].to_host();
  double kept = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(mask[i] == 0.0F || mask[i] == 1.0F);
    EXPECT_EQ(y[i], mask[i] * 1.0F);  // 0.75 / (1 - 0.25)
    kept += mask[i];
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.02);
  // Its gradient uses the saved mask: grad · mask / (1 - p).
  const std::vector<Tensor> grads = vjp(rt, ops::dropout(), std::vector<Tensor>{x}, out,
                                        std::vector<Tensor>{floats(rt, {10000}, Floats(10000, 3.0F)), Tensor()},
                                        {{"p", 0.25}});
  const Floats dx = grads[0].to_host();
  for (std::size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx[i], mask[i] * 4.0F);
  // Another call draws another mask.
  const Floats other = rt.call(ops::dropout(), std::vector<Tensor>{x}, {{"p", 0.25}})[1].to_host();
  EXPECT_FALSE(bitwise_equal(other, mask));
}

TEST(TrainOps, DropoutMaskIsTheSameInFloat32AndFloat64) {
  const auto mask_of = [](DType dtype) {
    Runtime rt(deterministic_config());
    const Tensor x = rt.constant(TensorMeta{{257}, dtype});
    const Tensor mask = rt.call(ops::dropout(), std::vector<Tensor>{x}, {{"p", 0.5}})[1];
    if (dtype == DType::float32) return mask.to_host_as<float>();
    const Doubles d = mask.to_host_as<double>();
    return Floats(d.begin(), d.end());
  };
  const Floats single = mask_of(DType::float32);
  EXPECT_EQ(single, mask_of(DType::float64));
  double kept = 0;
  for (const float m : single) kept += m;
  EXPECT_GT(kept, 0.0);
  EXPECT_LT(kept, 257.0);
}

TEST(TrainOps, DropoutRecomputesTheSameMaskAfterEviction) {
  Runtime rt(deterministic_config());
  Floats values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5F + static_cast<float>(i);
  const Tensor x = floats(rt, {8, 8}, values);
  const Tensor h = rt.call1(ops::tanh(), {x});
  const std::vector<Tensor> out = rt.call(ops::dropout(), std::vector<Tensor>{h}, {{"p", 0.5}});
  const Tensor z = rt.call1(ops::scale(), {out[0]}, {{"factor", 3.0}});
  const Floats y_first = out[0].to_host();
  const Floats mask_first = out[1].to_host();
  const Floats z_first = z.to_host();
  ASSERT_TRUE(rt.evict(out[0]));
  ASSERT_TRUE(rt.evict(out[1]));
  ASSERT_TRUE(rt.evict(z));
  ASSERT_TRUE(rt.evict(h));
  EXPECT_TRUE(bitwise_equal(z.to_host(), z_first));
  EXPECT_TRUE(bitwise_equal(out[1].to_host(), mask_first));
  EXPECT_TRUE(bitwise_equal(out[0].to_host(), y_first));
  EXPECT_GE(rt.stats().rematerializations, 3U);
}

TEST(TrainOps, DropoutErrors) {
  Runtime rt(deterministic_config());
  const Tensor x = floats(rt, {3}, {1, 2, 3});
  for (const double p : {1.0, -0.1, 1.5}) {
    expect_rejected<InvalidArgument>(rt, ops::dropout(), {x}, {{"p", p}}, {"op 'dropout'", "'p'", "[0, 1)"});
  }
  expect_rejected<InvalidArgument>(rt, ops::dropout(), {x}, {}, {"'p'", "missing"});
  expect_rejected<ShapeError>(rt, ops::dropout(), {indices(rt, {1}, {1})}, {{"p", 0.5}}, {"op 'dropout'", "int64 [1]"});
}

// ---- SGD ----

// One SGD step as a training loop applies it: the buffer, then the parameter, each in place.
void sgd_step(Runtime& rt, Tensor& param, Tensor& buf, const Tensor& grad, const Attrs& attrs) {
  const bool decay = attrs.has("weight_decay") && attrs.get_real("weight_decay") != 0.0;
  const bool nesterov = attrs.has("nesterov") && attrs.get_int("nesterov") != 0;
  rt.assign(buf, ops::sgd_momentum_buffer(),
            decay ? std::vector<Tensor>{buf, grad, param} : std::vector<Tensor>{buf, grad}, attrs);
  rt.assign(param, ops::sgd_apply(), nesterov ? std::vector<Tensor>{param, buf, grad} : std::vector<Tensor>{param, buf},
            attrs);
}

TEST(TrainOps, SgdWithMomentumTwoSteps) {
  Runtime rt(deterministic_config());
  Tensor param = floats(rt, {2}, {1, -2});
  Tensor buf = floats(rt, {2}, {0, 0});
  const Attrs attrs{{"lr", 0.5}, {"momentum", 0.5}};
  sgd_step(rt, param, buf, floats(rt, {2}, {0.5F, 0.25F}), attrs);
  EXPECT_EQ(buf.to_host(), (Floats{0.5F, 0.25F}));        // 0.5·0 + g
  EXPECT_EQ(param.to_host(), (Floats{0.75F, -2.125F}));   // p - 0.5·buf
  sgd_step(rt, param, buf, floats(rt, {2}, {1, -1}), attrs);
  EXPECT_EQ(buf.to_host(), (Floats{1.25F, -0.875F}));     // 0.5·buf + g
  EXPECT_EQ(param.to_host(), (Floats{0.125F, -1.6875F}));
}

TEST(TrainOps, SgdWeightDecayAndNesterov) {
  Runtime rt(deterministic_config());
  Tensor param = floats(rt, {2}, {1, -2});
  Tensor buf = floats(rt, {2}, {0, 0});
  sgd_step(rt, param, buf, floats(rt, {2}, {0.5F, 0.25F}), {{"lr", 0.5}, {"momentum", 0.5}, {"weight_decay", 0.5}});
  EXPECT_EQ(buf.to_host(), (Floats{1, -0.75F}));  // g + 0.5·p
  EXPECT_EQ(param.to_host(), (Floats{0.5F, -1.625F}));
  // Nesterov: p - lr·(g + wd·p + momentum·buf), buf = 0.5 + 0.5·1 = 1 here.
  Tensor p2 = rt.constant(TensorMeta{{1}, DType::float64}, Doubles{1});
  Tensor b2 = rt.constant(TensorMeta{{1}, DType::float64}, Doubles{0});
  const Tensor g2 = rt.constant(TensorMeta{{1}, DType::float64}, Doubles{0.5});
  sgd_step(rt, p2, b2, g2, {{"lr", 0.5}, {"momentum", 0.5}, {"weight_decay", 0.5}, {"nesterov", 1}});
  EXPECT_EQ(b2.to_host_as<double>(), (Doubles{1}));
  EXPECT_EQ(p2.to_host_as<double>(), (Doubles{1 - 0.5 * (0.5 + 0.5 + 0.5 * 1)}));
}

TEST(TrainOps, SgdErrors) {
  Runtime rt(deterministic_config());
  const Tensor a = floats(rt, {2}, {1, 2});
  const Tensor b = floats(rt, {3}, {1, 2, 3});
  const Attrs attrs{{"lr", 0.1}, {"momentum", 0.9}};
  expect_rejected<ShapeError>(rt, ops::sgd_momentum_buffer(), {a, b}, attrs,
                              {"op 'sgd_momentum_buffer'", "[2] and [3]"});
  expect_rejected<ShapeError>(
      rt, ops::sgd_momentum_buffer(), {a, a}, {{"momentum", 0.9}, {"weight_decay", 0.1}},
      {"op 'sgd_momentum_buffer' takes 3 inputs (buf, grad, param: when weight_decay is not 0), got 2"});
  expect_rejected<ShapeError>(rt, ops::sgd_apply(), {a, a}, {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", 1}},
                              {"op 'sgd_apply' takes 3 inputs (param, buf, grad: with nesterov), got 2"});
  expect_rejected<ShapeError>(rt, ops::sgd_apply(), {a, a, a}, attrs,
                              {"op 'sgd_apply' takes 2 inputs (param, buf; also grad with nesterov), got 3"});
  expect_rejected<InvalidArgument>(rt, ops::sgd_momentum_buffer(), {a, a}, {{"lr", 0.1}}, {"'momentum'", "missing"});
  expect_rejected<InvalidArgument>(rt, ops::sgd_apply(), {a, a}, {{"lr", -0.1}},
                                   {"op 'sgd_apply'", "'lr'", ">= 0", "-0.1"});
  expect_rejected<InvalidArgument>(rt, ops::sgd_apply(), {a, a, a}, {{"lr", 0.1}, {"momentum", 0.0}, {"nesterov", 1}},
                                   {"op 'sgd_apply'", "'momentum'", "> 0 with nesterov"});
  expect_rejected<InvalidArgument>(rt, ops::sgd_momentum_buffer(), {a, a}, {{"momentum", 0.9}, {"weight_decay", -1.0}},
                                   {"'weight_decay'", ">= 0"});
  expect_rejected<ShapeError>(rt, ops::sgd_apply(), {a, indices(rt, {2}, {1, 2})}, attrs,
                              {"op 'sgd_apply'", "float32 or float64"});
}

// ---- Adam ----

void adam_step(Runtime& rt, Tensor& param, Tensor& m, Tensor& v, const Tensor& grad, const Attrs& attrs) {
  const bool decay = attrs.has("weight_decay") && attrs.get_real("weight_decay") != 0.0;
  rt.assign(m, ops::adam_moment1(), decay ? std::vector<Tensor>{m, grad, param} : std::vector<Tensor>{m, grad}, attrs);
  rt.assign(v, ops::adam_moment2(), decay ? std::vector<Tensor>{v, grad, param} : std::vector<Tensor>{v, grad}, attrs);
  rt.assign(param, ops::adam_apply(), {param, m, v}, attrs);
}

TEST(TrainOps, AdamTwoStepsByHand) {
  Runtime rt(deterministic_config());
  const TensorMeta meta{{1}, DType::float64};
  Tensor param = rt.constant(meta, Doubles{1});
  Tensor m = rt.constant(meta, Doubles{0});
  Tensor v = rt.constant(meta, Doubles{0});
  Attrs attrs{{"lr", 0.25}, {"beta1", 0.5}, {"beta2", 0.75}, {"eps", 0.0}, {"step", 1}};
  adam_step(rt, param, m, v, rt.constant(meta, Doubles{0.5}), attrs);
  EXPECT_EQ(m.to_host_as<double>(), (Doubles{0.25}));    // 0.5·0 + 0.5·0.5
  EXPECT_EQ(v.to_host_as<double>(), (Doubles{0.0625}));  // 0.75·0 + 0.25·0.25
  // m̂ = 0.25 / 0.5, v̂ = 0.0625 / 0.25: the first step moves by lr against the gradient's sign.
  EXPECT_EQ(param.to_host_as<double>(), (Doubles{0.75}));
  attrs.set("step", std::int64_t{2});
  adam_step(rt, param, m, v, rt.constant(meta, Doubles{-0.5}), attrs);
  EXPECT_EQ(m.to_host_as<double>(), (Doubles{-0.125}));     // 0.5·0.25 + 0.5·(-0.5)
  EXPECT_EQ(v.to_host_as<double>(), (Doubles{0.109375}));   // 0.75·0.0625 + 0.25·0.25
  // m̂ = -0.125 / 0.75, √v̂ = √(0.109375 / 0.4375) = 0.5: p = 0.75 + 0.25 · (1/6) / 0.5.
  EXPECT_NEAR(param.to_host_as<double>()[0], 0.75 + 0.25 / 3.0, 1e-15);
}

TEST(TrainOps, AdamMatchesTheTextbookFormulasWithDefaultsAndWeightDecay) {
  Runtime rt(deterministic_config());
  const Floats p0{0.5F, -1.25F, 2, 0.125F, -0.75F};
  const Floats g0{0.1F, 0.2F, -0.3F, 0.0F, 1.5F};
  Tensor param = floats(rt, {5}, p0);
  Tensor m = floats(rt, {5}, Floats(5, 0.0F));
  Tensor v = floats(rt, {5}, Floats(5, 0.0F));
  const double lr = 0.01;
  const double wd = 0.1;
  // Defaults: beta1 0.9, beta2 0.999, eps 1e-8.
  std::vector<double> p(p0.begin(), p0.end()), mm(5, 0.0), vv(5, 0.0);
  for (std::int64_t step = 1; step <= 3; ++step) {
    adam_step(rt, param, m, v, floats(rt, {5}, g0), {{"lr", lr}, {"weight_decay", wd}, {"step", step}});
    for (std::size_t i = 0; i < 5; ++i) {
      const double g = g0[i] + wd * p[i];
      mm[i] = 0.9 * mm[i] + 0.1 * g;
      vv[i] = 0.999 * vv[i] + 0.001 * g * g;
      const double m_hat = mm[i] / (1 - std::pow(0.9, static_cast<double>(step)));
      const double v_hat = vv[i] / (1 - std::pow(0.999, static_cast<double>(step)));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + 1e-8);
    }
  }
  const Floats got = param.to_host();
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(got[i], p[i], 1e-6) << i;
}

TEST(TrainOps, AdamErrors) {
  Runtime rt(deterministic_config());
  const Tensor a = floats(rt, {2}, {1, 2});
  expect_rejected<InvalidArgument>(rt, ops::adam_apply(), {a, a, a}, {{"lr", 0.1}, {"step", 0}},
                                   {"op 'adam_apply'", "'step' >= 1"});
  expect_rejected<InvalidArgument>(rt, ops::adam_apply(), {a, a, a}, {{"lr", 0.1}}, {"'step'", "missing"});
  expect_rejected<InvalidArgument>(rt, ops::adam_apply(), {a, a, a}, {{"step", 1}}, {"'lr'", "missing"});
  expect_rejected<InvalidArgument>(rt, ops::adam_apply(), {a, a, a}, {{"lr", 0.1}, {"step", 1}, {"eps", -1.0}},
                                   {"'eps'"});
  expect_rejected<InvalidArgument>(rt, ops::adam_moment1(), {a, a}, {{"beta1", 1.0}},
                                   {"op 'adam_moment1'", "'beta1'", "[0, 1)"});
  expect_rejected<InvalidArgument>(rt, ops::adam_moment2(), {a, a}, {{"beta2", -0.5}},
                                   {"op 'adam_moment2'", "'beta2'"});
  expect_rejected<ShapeError>(rt, ops::adam_moment2(), {a, a}, {{"weight_decay", 0.5}},
                              {"op 'adam_moment2' takes 3 inputs (v, grad, param: when weight_decay is not 0), got 2"});
  expect_rejected<ShapeError>(rt, ops::adam_apply(), {a, a, floats(rt, {1}, {1})}, {{"lr", 0.1}, {"step", 1}},
                              {"op 'adam_apply'", "[2], [2] and [1]"});
}

// ---- updates in place, and recomputation ----

TEST(TrainOps, UpdatesInPlaceLeaveEarlierResultsRecomputableBitwise) {
  Runtime rt(deterministic_config());
  Tensor param = floats(rt, {4}, {0.5F, -1.5F, 2, 0.25F});
  Tensor w = floats(rt, {4}, {1, 2, 3, 4});
  Tensor buf = floats(rt, {4}, Floats(4, 0.0F));
  Tensor m = floats(rt, {4}, Floats(4, 0.0F));
  Tensor v = floats(rt, {4}, Floats(4, 0.0F));
  // Values computed from the old parameters, before the updates.
  const Tensor hidden = rt.call1(ops::tanh(), {param});
  const Tensor product = rt.call1(ops::mul(), {hidden, w});
  const Floats hidden_before = hidden.to_host();
  const Floats product_before = product.to_host();
  const Tensor grad = floats(rt, {4}, {0.5F, 0.25F, -1, 2});
  for (std::int64_t step = 1; step <= 2; ++step) {
    sgd_step(rt, param, buf, grad, {{"lr", 0.1}, {"momentum", 0.9}});
    adam_step(rt, w, m, v, grad, {{"lr", 0.01}, {"step", step}});
  }
  EXPECT_FALSE(bitwise_equal(param.to_host(), Floats{0.5F, -1.5F, 2, 0.25F}));
  EXPECT_FALSE(bitwise_equal(w.to_host(), Floats{1, 2, 3, 4}));
  ASSERT_TRUE(rt.evict(hidden));
  ASSERT_TRUE(rt.evict(product));
  EXPECT_TRUE(bitwise_equal(product.to_host(), product_before));
  EXPECT_TRUE(bitwise_equal(hidden.to_host(), hidden_before));
  // And a value computed from the new parameters sees them: the same bits as the op on a copy of their values.
  const Floats updated = param.to_host();
  const Floats now = rt.call1(ops::tanh(), {param}).to_host();
  EXPECT_TRUE(bitwise_equal(now, rt.call1(ops::tanh(), {floats(rt, {4}, updated)}).to_host()));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(now[i], std::tanh(double{updated[i]}), 1e-6);
}

}  // namespace
}  // namespace dtr::test

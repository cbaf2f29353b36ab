// Modules and layers (include/dtr/nn/module.h, layers.h, models.h): names, registration errors, training
// mode, PyTorch's initialisation bounds, output shapes of every layer and zoo model, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/layers.h"
#include "dtr/nn/models.h"

namespace dtr::nn {
namespace {

std::vector<float> ramp(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37F * static_cast<float>(i));
  return v;
}

class Pair : public Module {
 public:
  explicit Pair(Runtime& rt) {
    Generator g(1);
    first_ = register_module("first", std::make_shared<Linear>(rt, g, 3, 4));
    second_ = register_module("second", std::make_shared<BatchNorm2d>(rt, 4));
    scale_ = register_parameter("scale", full_variable(rt, {1}, 2.0F, false));
  }
  Variable forward(const Variable& x) override { return mul(first_->forward(x), scale_); }
  void try_register(const std::string& name) { register_parameter(name, scale_); }
  void try_register_buffer(const std::string& name, Variable v) { register_buffer(name, v); }

 private:
  std::shared_ptr<Linear> first_;
  std::shared_ptr<BatchNorm2d> second_;
  Variable scale_;
};

TEST(Module, NamesAreDottedPathsInRegistrationOrder) {
  Runtime rt;
  Pair m(rt);
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"scale", "first.weight", "first.bias", "second.weight", "second.bias"}));
  std::vector<std::string> buffers;
  for (const auto& [name, b] : m.named_buffers()) buffers.push_back(name);
  EXPECT_EQ(buffers, (std::vector<std::string>{"second.running_mean", "second.running_var"}));
  for (const Variable& p : m.parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  EXPECT_THROW(m.try_register("scale"), InvalidArgument);   // taken
  EXPECT_THROW(m.try_register("first"), InvalidArgument);   // a child's name
  EXPECT_THROW(m.try_register("a.b"), InvalidArgument);
  EXPECT_THROW(m.try_register(""), InvalidArgument);
  EXPECT_THROW(m.try_register_buffer("grad", full_variable(rt, {1}, 0.0F, true)), InvalidArgument);
}

TEST(Module, TrainAndEvalRecurseAndChangeWhatLayersDo) {
  Runtime rt;
  Generator g(4);
  auto model = make_mlp(rt, g, MlpSpec{16, 2, 0.5});
  const Variable x = constant(rt, {2, 1, 28, 28}, ramp(2 * 784));
  model->eval();
  for (const auto& [name, child] : model->children()) EXPECT_FALSE(child->is_training()) << name;
  const std::uint64_t draws_before = rt.random_state();
  const std::vector<float> a = model->forward(x).to_host();
  EXPECT_EQ(rt.random_state(), draws_before);  // no dropout in evaluation
  EXPECT_EQ(model->forward(x).to_host(), a);
  model->train();
  (void)model->forward(x);
  EXPECT_GT(rt.random_state(), draws_before);

  BatchNorm2d bn(rt, 2);
  const Variable images = constant(rt, {3, 2, 2, 2}, ramp(24));
  (void)bn.forward(images);
  EXPECT_NE(bn.running_mean().to_host(), (std::vector<float>{0, 0}));  // moved by the batch
  bn.eval();
  const std::vector<float> frozen = bn.running_mean().to_host();
  (void)bn.forward(images);
  EXPECT_EQ(bn.running_mean().to_host(), frozen);
}

TEST(Module, ZeroGradZeroesOrDrops) {
  Runtime rt;
  Generator g(2);
  Linear layer(rt, g, 3, 2);
  sum(layer.forward(constant(rt, {1, 3}, std::vector<float>{1, 2, 3}))).backward();
  ASSERT_TRUE(layer.weight().grad().defined());
  layer.zero_grad();
  EXPECT_EQ(layer.weight().grad().to_host(), std::vector<float>(6, 0.0F));
  layer.zero_grad(true);
  EXPECT_FALSE(layer.weight().grad().defined());
}

// PyTorch's rules: Linear and Conv2d weights and biases uniform in ±1/√fan_in.
TEST(Layers, InitialisationFollowsPyTorchsBounds) {
  Runtime rt;
  Generator g(9);
  Linear linear(rt, g, 50, 40);
  Conv2dSpec spec;
  spec.in_channels = 6;
  spec.out_channels = 8;
  spec.kernel = {3, 3};
  Conv2d conv(rt, g, spec);
  const auto check = [](const Variable& v, double bound) {
    double sum = 0, largest = 0;
    for (const float x : v.to_host()) {
      sum += x;
      largest = std::max(largest, std::abs(static_cast<double>(x)));
    }
    EXPECT_LE(largest, bound);
    EXPECT_GT(largest, 0.5 * bound);  // the range is used, not a narrower one
    EXPECT_LT(std::abs(sum / static_cast<double>(v.numel())), 0.2 * bound);
  };
  check(linear.weight(), 1 / std::sqrt(50.0));
  check(linear.bias(), 1 / std::sqrt(50.0));
  check(conv.weight(), 1 / std::sqrt(54.0));
  check(conv.bias(), 1 / std::sqrt(54.0));
  // The same seed gives the same parameters; another seed others.
  Generator same(9);
  Generator other(10);
  EXPECT_EQ(Linear(rt, same, 50, 40).weight().to_host(), linear.weight().to_host());
  EXPECT_NE(Linear(rt, other, 50, 40).weight().to_host(), linear.weight().to_host());
}

// With last_step_only the LSTM gives the last step of the sequence it would give, bit for bit, and the same
// parameters (two LSTMs from one seed).
TEST(Layers, AnLstmOfTheLastStepGivesTheSequencesLastStep) {
  Runtime rt;
  Generator g1(4);
  Generator g2(4);
  const Variable seq = constant(rt, {2, 5, 8}, ramp(80));
  LSTM full(rt, g1, 8, 6, 2);
  LSTM last(rt, g2, 8, 6, 2, /*last_step_only=*/true);
  const std::vector<float> sequence = full.forward(seq).to_host();
  const Variable h = last.forward(seq);
  ASSERT_EQ(h.shape(), (Shape{2, 6}));
  const std::vector<float> values = h.to_host();
  for (std::size_t n = 0; n < 2; ++n) {
    for (std::size_t k = 0; k < 6; ++k) EXPECT_EQ(values[n * 6 + k], sequence[n * 30 + 4 * 6 + k]) << n << ", " << k;
  }
}

TEST(Layers, OutputShapes) {
  Runtime rt;
  Generator g(3);
  const Variable seq = constant(rt, {2, 5, 8}, ramp(80));
  EXPECT_EQ(MultiheadSelfAttention(rt, g, 8, 2).forward(seq).shape(), (Shape{2, 5, 8}));
  EXPECT_EQ(LSTM(rt, g, 8, 6, 2).forward(seq).shape(), (Shape{2, 5, 6}));
  EXPECT_EQ(LayerNorm(rt, 8).forward(seq).shape(), (Shape{2, 5, 8}));
  const Variable img = constant(rt, {2, 3, 6, 6}, ramp(216));
  EXPECT_EQ(MaxPool2d({2, 2}).forward(img).shape(), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(AvgPool2d({3, 3}, std::array<std::int64_t, 2>{1, 1}, {1, 1}).forward(img).shape(), (Shape{2, 3, 6, 6}));
  EXPECT_EQ(GlobalAvgPool2d().forward(img).shape(), (Shape{2, 3}));
  EXPECT_EQ(Flatten().forward(img).shape(), (Shape{2, 108}));
  EXPECT_EQ(upsample_nearest2d(img, 2).shape(), (Shape{2, 3, 12, 12}));
  const std::vector<std::int64_t> ids{0, 3, 3, 1};
  const Variable idx(rt, rt.constant(TensorMeta{{2, 2}, DType::int64}, ids));
  EXPECT_EQ(Embedding(rt, g, 4, 5).forward(idx).shape(), (Shape{2, 2, 5}));
}

// U-Net's levels convolve by 1x1 before they upsample (nn/models_conv.cpp): the function of the other order,
// since a 1x1 convolution maps each pixel alone and the upsampling copies pixels. To float rounding: the
// kernel may sum the channels in a different order at another size.
TEST(Layers, AOneByOneConvolutionCommutesWithNearestUpsampling) {
  Runtime rt;
  Generator g(9);
  Conv2d conv(rt, g, Conv2dSpec{6, 4, {1, 1}});
  const Variable x = constant(rt, {2, 6, 5, 7}, ramp(2 * 6 * 5 * 7));
  const std::vector<float> upsampled_first = conv.forward(upsample_nearest2d(x, 2)).to_host();
  const std::vector<float> convolved_first = upsample_nearest2d(conv.forward(x), 2).to_host();
  ASSERT_EQ(convolved_first.size(), std::size_t{2 * 4 * 10 * 14});
  for (std::size_t i = 0; i < convolved_first.size(); ++i) {
    EXPECT_NEAR(convolved_first[i], upsampled_first[i], 1e-6F * (1.0F + std::abs(upsampled_first[i]))) << i;
  }
  // A 3x3 convolution does not commute with it: the check above can tell the orders apart.
  Conv2d wide(rt, g, Conv2dSpec{6, 4, {3, 3}, Conv2dOptions{{1, 1}, {1, 1}}});
  EXPECT_NE(wide.forward(upsample_nearest2d(x, 2)).to_host(), upsample_nearest2d(wide.forward(x), 2).to_host());
}

TEST(Models, EveryZooModelMapsImagesToTenLogits) {
  Runtime rt;
  Generator g(5);
  const Variable x = constant(rt, {2, 1, 28, 28}, ramp(2 * 784));
  const std::vector<std::shared_ptr<Sequential>> zoo{
      make_mlp(rt, g, MlpSpec{16, 2, 0.1}),           make_resnet(rt, g, ResNetSpec{8, 4, 0.1}),
      make_transformer(rt, g, TransformerSpec{1, 8, 2, 0, 0.1}), make_transformer(rt, g, TransformerSpec{1, 8, 2, 4, 0.0}),
      make_lstm(rt, g, LstmSpec{8, 2, 0.1}),          make_unet(rt, g, UNetSpec{2, 2, 0.1, 2}),
      make_unet(rt, g, UNetSpec{2, 1, 0.0, 1}),       make_densenet(rt, g, DenseNetSpec{2, 2, 3, 0.1})};
  for (const auto& model : zoo) {
    const Variable logits = model->forward(x);
    EXPECT_EQ(logits.shape(), (Shape{2, 10}));
    for (const float v : logits.to_host()) EXPECT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(model_names().size(), 6U);
}

TEST(Models, ResNetDepthsAreSixNPlusTwo) {
  Runtime rt;
  Generator g(5);
  // stem + 3n blocks + head.
  EXPECT_EQ(make_resnet(rt, g, ResNetSpec{20, 2, 0.0})->size(), 1U + 9U + 1U);
  EXPECT_EQ(make_resnet(rt, g, ResNetSpec{56, 2, 0.0})->size(), 1U + 27U + 1U);
  EXPECT_THROW(make_resnet(rt, g, ResNetSpec{21, 2, 0.0}), InvalidArgument);
  EXPECT_THROW(make_resnet(rt, g, ResNetSpec{2, 2, 0.0}), InvalidArgument);
}

TEST(Module, SequentialIndexPastTheEndIsAnInvalidArgumentNamingTheSize) {
  Runtime rt;
  Sequential model;
  model.push_back(std::make_shared<ReLU>());
  EXPECT_NE(model[0], nullptr);
  try {
    (void)model[1];
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Sequential[1]: it holds 1 modules"), std::string::npos) << e.what();
  }
}

TEST(Models, BadSpecsAreInvalidArguments) {
  Runtime rt;
  Generator g(5);
  EXPECT_THROW(make_mlp(rt, g, MlpSpec{0, 2, 0.0}), InvalidArgument);
  EXPECT_THROW(make_mlp(rt, g, MlpSpec{8, 2, 1.0}), InvalidArgument);
  EXPECT_THROW(make_transformer(rt, g, TransformerSpec{1, 8, 3, 0, 0.0}), InvalidArgument);  // 8 % 3
  EXPECT_THROW(make_transformer(rt, g, TransformerSpec{1, 8, 2, 5, 0.0}), InvalidArgument);  // 28 % 5
  EXPECT_THROW(make_lstm(rt, g, LstmSpec{8, 0, 0.0}), InvalidArgument);
  EXPECT_THROW(make_unet(rt, g, UNetSpec{4, 3, 0.0, 2}), InvalidArgument);
  EXPECT_THROW(make_densenet(rt, g, DenseNetSpec{4, 2, 4, 0.0}), InvalidArgument);
  EXPECT_THROW(Linear(rt, g, 0, 3), InvalidArgument);
  EXPECT_THROW(Dropout(1.0), InvalidArgument);
  EXPECT_THROW(BatchNorm2d(rt, 3, 1e-5, 2.0), InvalidArgument);
  EXPECT_THROW(MultiheadSelfAttention(rt, g, 6, 4), InvalidArgument);
  Conv2dSpec bad;
  bad.in_channels = 3;
  bad.out_channels = 4;
  bad.options.groups = 2;
  EXPECT_THROW(Conv2d(rt, g, bad), InvalidArgument);
  BatchNorm2d bn(rt, 2);
  EXPECT_THROW(bn.forward(constant(rt, {1, 2, 1, 1}, std::vector<float>{1, 2})), InvalidArgument);  // one value per channel
  EXPECT_THROW(bn.forward(constant(rt, {2, 2}, std::vector<float>{1, 2, 3, 4})), ShapeError);
}

}  // namespace
}  // namespace dtr::nn

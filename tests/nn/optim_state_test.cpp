// An optimizer's state saved and put back (Optimizer::state_dict, load_state_dict): a copy continues the same
// steps bit for bit; every bad entry is refused before anything changes. And the zoo by name (make_model).
#include <gtest/gtest.h>

#include <cstring>

#include "../test_helpers.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/models.h"
#include "dtr/nn/optim.h"

namespace dtr::nn::test {
namespace {

// Two parameters; a loss that gives each a gradient.
struct Problem {
  Runtime rt;
  Variable w = constant(rt, {4}, std::vector<float>{0.5F, -1.0F, 2.0F, 0.25F}, true);
  Variable b = constant(rt, {2}, std::vector<float>{0.1F, -0.2F}, true);
  void gradients() {
    w.set_grad({});
    b.set_grad({});
    const Variable loss = add(sum(mul(w, w)), sum(scale(b, 3.0)));
    loss.backward();
  }
  std::vector<float> values() const {
    std::vector<float> v = w.to_host();
    const std::vector<float> more = b.to_host();
    v.insert(v.end(), more.begin(), more.end());
    return v;
  }
};

template <typename Make>
void expect_resume_continues(Make make) {
  Problem straight;
  Problem copy;
  auto a = make(straight);
  auto c = make(copy);
  for (int s = 0; s < 2; ++s) {
    straight.gradients();
    a->step();
  }
  // The copy takes the parameters and the optimizer's state after two steps, then both take two more.
  {
    NoGrad no_grad;
    copy.w.rebind(Variable(copy.rt, copy.rt.constant(copy.w.meta(), straight.w.to_host())));
    copy.b.rebind(Variable(copy.rt, copy.rt.constant(copy.b.meta(), straight.b.to_host())));
  }
  c->load_state_dict(a->state_dict());
  for (int s = 0; s < 2; ++s) {
    straight.gradients();
    a->step();
    copy.gradients();
    c->step();
  }
  const std::vector<float> x = straight.values();
  const std::vector<float> y = copy.values();
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

TEST(OptimizerState, ALoadedCopyContinuesTheSameStepsBitForBit) {
  expect_resume_continues([](Problem& p) {
    return std::make_unique<SGD>(std::vector<Variable>{p.w, p.b}, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
  // Adam's bias correction reads each parameter's step count: it is saved too ("<index>.step").
  expect_resume_continues([](Problem& p) {
    return std::make_unique<Adam>(std::vector<Variable>{p.w, p.b}, AdamOptions{.lr = 0.1});
  });
  expect_resume_continues([](Problem& p) {
    return std::make_unique<AdamW>(std::vector<Variable>{p.w, p.b}, AdamWOptions{.lr = 0.1});
  });
}

TEST(OptimizerState, TheDictNamesEveryStateAndCounter) {
  Problem p;
  Adam adam({p.w, p.b}, AdamOptions{.lr = 0.1});
  p.gradients();
  adam.step();
  std::vector<std::string> names;
  for (const auto& [name, value] : adam.state_dict()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.exp_avg", "0.exp_avg_sq", "1.exp_avg", "1.exp_avg_sq", "0.step",
                                             "1.step"}));
  EXPECT_EQ(adam.state_dict().back().second.to_host_as<std::int64_t>(), std::vector<std::int64_t>{1});
}

TEST(OptimizerState, BadEntriesAreRefusedBeforeAnythingChanges) {
  Problem p;
  SGD sgd({p.w, p.b}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  p.gradients();
  sgd.step();
  const auto before = sgd.named_state()[0].second.to_host();
  const Tensor four = p.rt.constant(TensorMeta{{4}}, std::vector<float>{9, 9, 9, 9});
  const Tensor two = p.rt.constant(TensorMeta{{2}}, std::vector<float>{9, 9});
  using Dict = std::vector<std::pair<std::string, Tensor>>;
  const auto refused = [&](const Dict& dict, std::initializer_list<std::string_view> parts) {
    dtr::test::expect_error<InvalidArgument>([&] { sgd.load_state_dict(dict); }, parts);
    EXPECT_EQ(sgd.named_state()[0].second.to_host(), before) << "nothing changed";
  };
  // A good entry first: it must not be applied when a later one is refused.
  refused({{"0.momentum_buffer", four}, {"2.momentum_buffer", four}}, {"SGD", "'2.momentum_buffer'", "2 parameters"});
  refused({{"0.momentum_buffer", four}, {"0.exp_avg", four}}, {"'0.exp_avg'", "momentum_buffer"});
  refused({{"0.momentum_buffer", four}, {"x.momentum_buffer", four}}, {"'x.momentum_buffer'"});
  refused({{"0.momentum_buffer", four}, {"momentum_buffer", four}}, {"'momentum_buffer'"});
  refused({{"0.momentum_buffer", four}, {"1.step", two}}, {"'1.step'"});
  dtr::test::expect_error<ShapeError>([&] { sgd.load_state_dict({{"0.momentum_buffer", four}, {"1.momentum_buffer", four}}); },
                                      {"'1.momentum_buffer'", "[4]", "[2]"});
  EXPECT_EQ(sgd.named_state()[0].second.to_host(), before) << "nothing changed";
  // A good dict is taken.
  sgd.load_state_dict({{"1.momentum_buffer", two}});
  EXPECT_EQ(sgd.named_state()[1].second.to_host(), (std::vector<float>{9, 9}));
}

TEST(ZooByName, EveryNameBuildsItsModelSizedByDepthAndWidth) {
  Runtime rt;
  for (const std::string& name : model_names()) {
    Generator g(1);
    const auto model = make_model(rt, g, name);
    NoGrad no_grad;
    const Variable x = constant(rt, {2, 1, 28, 28}, std::vector<float>(2 * 784, 0.5F));
    EXPECT_EQ(model->forward(x).shape(), (Shape{2, 10})) << name;
  }
  Generator g(1);
  EXPECT_EQ(make_model(rt, g, "mlp", {.depth = 3, .width = 8})->parameters().size(), 8U);  // 4 Linear layers
  const auto resnet = make_model(rt, g, "resnet", {.depth = 8});
  EXPECT_EQ(resnet->children().size(), 5U);  // stem, 3 blocks, head
  dtr::test::expect_error<InvalidArgument>([&] { make_model(rt, g, "vgg"); }, {"'vgg'", "mlp, resnet, transformer"});
  dtr::test::expect_error<InvalidArgument>([&] { make_model(rt, g, "resnet", {.depth = 21}); }, {"depth 21"});
}

}  // namespace
}  // namespace dtr::nn::test

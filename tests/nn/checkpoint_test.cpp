// Static checkpointing (include/dtr/nn/checkpoint.h): the peak Chen et al. predict, exactly one extra forward of
// each checkpointed segment, the same bits as without it (dropout's masks, BatchNorm's statistics), and its
// errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/checkpoint.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/layers.h"
#include "dtr/nn/models.h"

namespace dtr::nn {
namespace {

std::vector<float> ramp(std::int64_t n, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37F * static_cast<float>(i) + 0.1F);
  return v;
}

Variable labels(Runtime& rt, std::int64_t n) {
  std::vector<std::int64_t> l(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int64_t>((i * 7) % 10);
  return Variable(rt, rt.constant(TensorMeta{{n}, DType::int64}, l));
}

struct Step {
  RuntimeStats stats;
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

// One forward and backward of `model` (built from seed 11 by `build`), checkpointed into `segments` (-1: not),
// by checkpoint_sequential or, with `whole_model`, checkpoint_model.
template <typename Build>
Step one_step(const Build& build, std::int64_t batch, std::int64_t segments, bool whole_model = false) {
  Runtime rt;
  Generator gen(11);
  const auto model = build(rt, gen);
  const Variable x = constant(rt, {batch, 1, 28, 28}, ramp(batch * 784, 1.0F));
  const Variable logits = segments < 0 ? model->forward(x)
                         : whole_model ? checkpoint_model(*model, segments, x)
                                       : checkpoint_sequential(*model, segments, x);
  const Variable loss = cross_entropy(logits, labels(rt, batch));
  loss.backward();
  Step step;
  step.loss = loss.to_host().at(0);
  for (const Variable& p : model->parameters()) step.grads.push_back(p.grad().to_host());
  step.stats = rt.stats();
  return step;
}

// The model's buffers (BatchNorm's running statistics) after one forward and backward of a batch of 4, through
// checkpoint_sequential in `segments` (-1: not), then with `grads` its parameters' gradients.
template <typename Build>
std::vector<std::vector<float>> after_one_step(const Build& build, std::int64_t segments, bool grads) {
  Runtime rt;
  Generator gen(11);
  const auto model = build(rt, gen);
  const Variable x = constant(rt, {4, 1, 28, 28}, ramp(4 * 784, 1.0F));
  const Variable logits = segments >= 0 ? checkpoint_sequential(*model, segments, x) : model->forward(x);
  cross_entropy(logits, labels(rt, 4)).backward();
  std::vector<std::vector<float>> values;
  for (const auto& [name, b] : model->named_buffers()) values.push_back(b.to_host());
  if (grads) {
    for (const Variable& p : model->parameters()) values.push_back(p.grad().to_host());
  }
  return values;
}

// The forward ops of modules [begin, end) of the model, counted on a runtime of their own.
template <typename Build>
std::uint64_t forward_ops(const Build& build, std::int64_t batch, std::size_t begin, std::size_t end) {
  Runtime rt;
  Generator gen(11);
  const auto model = build(rt, gen);
  Variable x = constant(rt, {batch, 1, 28, 28}, ramp(batch * 784, 1.0F));
  const NoGrad no_grad;
  for (std::size_t i = 0; i < begin; ++i) x = (*model)[i]->forward(x);
  const std::uint64_t before = rt.stats().ops;
  for (std::size_t i = begin; i < end; ++i) x = (*model)[i]->forward(x);
  return rt.stats().ops - before;
}

// Chen et al.: a 64-block MLP in 8 segments peaks below half of its unbudgeted peak, and reruns exactly one
// extra forward of each checkpointed segment (all but the last, as PyTorch's checkpoint_sequential).
TEST(Checkpoint, SqrtSegmentsHalveThePeakForOneExtraForwardPerSegment) {
  const auto build = [](Runtime& rt, Generator& gen) { return make_mlp(rt, gen, MlpSpec{64, 64, 0.0}); };
  // Activations must outweigh the constants (input, parameters) and the gradients for any schedule to halve the
  // peak: a block keeps batch x 64 floats, an image 784.
  const std::int64_t batch = 1024;
  const Step plain = one_step(build, batch, -1);
  const Step checkpointed = one_step(build, batch, 8);
  EXPECT_LT(2 * checkpointed.stats.peak_resident_bytes, plain.stats.peak_resident_bytes);
  // 66 modules (flatten, 64 blocks, the classifier) in segments of 8: seven checkpointed, 0 to 56.
  EXPECT_EQ(checkpointed.stats.ops - plain.stats.ops, forward_ops(build, batch, 0, 56));
  EXPECT_EQ(checkpointed.loss, plain.loss);
  EXPECT_EQ(checkpointed.grads, plain.grads);
}

// An LSTM's depth is its time steps: checkpoint_model cuts those, keeping the states at round(√28) = 5 segment
// starts, and reruns each checkpointed segment's steps once (4 segments of 5 steps; the last, 8 steps, is kept).
TEST(Checkpoint, AnLstmModelIsCheckpointedOverItsTimeSteps) {
  const auto build = [](Runtime& rt, Generator& gen) { return make_lstm(rt, gen, LstmSpec{64, 2, 0.0}); };
  const std::int64_t batch = 256;
  const Step plain = one_step(build, batch, -1);
  const Step checkpointed = one_step(build, batch, 0, /*whole_model=*/true);
  const Step by_modules = one_step(build, batch, 0);
  EXPECT_LT(2 * checkpointed.stats.peak_resident_bytes, plain.stats.peak_resident_bytes);
  // By modules ([rows as tokens, LSTM, Linear]) there is nothing to cut: the peak stays.
  EXPECT_GT(10 * by_modules.stats.peak_resident_bytes, 9 * plain.stats.peak_resident_bytes);
  // The ops of one time step's cells: an LSTM's forward over 2 steps less its forward over 1, on an input that
  // requires a gradient (split once, whatever the steps: the model's images are sliced per step instead, before
  // the segments, so a segment's rerun repeats the cells only).
  const auto ops_over = [](std::int64_t steps) {
    Runtime rt;
    Generator gen(11);
    LSTM lstm(rt, gen, 28, 64, 2, /*last_step_only=*/true);
    const NoGrad no_grad;
    Variable x = constant(rt, {4, steps, 28}, ramp(4 * steps * 28, 1.0F));
    x.set_requires_grad(true);
    const std::uint64_t before = rt.stats().ops;
    lstm.forward(x);
    return rt.stats().ops - before;
  };
  EXPECT_EQ(checkpointed.stats.ops - plain.stats.ops, 20 * (ops_over(2) - ops_over(1)));
  EXPECT_EQ(checkpointed.loss, plain.loss);
  EXPECT_EQ(checkpointed.grads, plain.grads);
}

// Every output step and the input's gradient too, for any number of segments; segments outside [0, T] are errors.
TEST(Checkpoint, AnLstmCheckpointedOverTimeGivesTheSameBits) {
  const auto run = [](std::int64_t segments) {
    Runtime rt;
    Generator gen(5);
    LSTM lstm(rt, gen, 3, 4, 2, /*last_step_only=*/false);
    const Variable x(rt, rt.constant(TensorMeta{{2, 7, 3}}, ramp(42, 0.5F)), true);
    const Variable y = segments < 0 ? lstm.forward(x) : lstm.forward_checkpointed(x, segments);
    const Variable loss = sum(mul(y, y));
    loss.backward();
    std::vector<std::vector<float>> result{y.to_host(), x.grad().to_host()};
    for (const Variable& p : lstm.parameters()) result.push_back(p.grad().to_host());
    return result;
  };
  const auto plain = run(-1);
  for (const std::int64_t segments : {0, 1, 2, 3, 7}) EXPECT_EQ(run(segments), plain) << segments << " segments";
  Runtime rt;
  Generator gen(5);
  LSTM lstm(rt, gen, 3, 4);
  const Variable x = constant(rt, {2, 7, 3}, ramp(42, 0.5F));
  EXPECT_THROW(lstm.forward_checkpointed(x, 8), InvalidArgument);
  EXPECT_THROW(lstm.forward_checkpointed(x, -1), InvalidArgument);
}

// Dropout draws the masks of the first forward again; BatchNorm's running statistics move once per forward.
TEST(Checkpoint, RerunsDrawTheSameMasksAndUpdateRunningStatisticsOnce) {
  const auto build = [](Runtime& rt, Generator& gen) { return make_resnet(rt, gen, ResNetSpec{8, 4, 0.5}); };
  const Step plain = one_step(build, 4, -1);
  const Step checkpointed = one_step(build, 4, 0);
  EXPECT_EQ(checkpointed.loss, plain.loss);
  EXPECT_EQ(checkpointed.grads, plain.grads);

  const auto once = after_one_step(build, -1, false);
  EXPECT_EQ(after_one_step(build, 0, false), once);
  EXPECT_EQ(after_one_step(build, 1, false), once);  // one segment: nothing checkpointed
  EXPECT_EQ(after_one_step(build, 5, false), once);  // every module its own segment
}

// A flat model whose BatchNorm2d + ReLU pairs run fused (forward_in_order) where a segment holds both and unfused
// where a segment boundary splits them: the same loss, gradients and running statistics either way.
TEST(Checkpoint, SegmentsSplittingABatchNormFromItsReluGiveTheFusedBits) {
  const auto build = [](Runtime& rt, Generator& gen) {
    auto model = std::make_shared<Sequential>();
    const Conv2dOptions same{{1, 1}, {1, 1}, {1, 1}, 1};
    model->push_back(std::make_shared<Conv2d>(rt, gen, Conv2dSpec{1, 4, {3, 3}, same, false}));
    model->push_back(std::make_shared<BatchNorm2d>(rt, 4));
    model->push_back(std::make_shared<ReLU>());
    model->push_back(std::make_shared<Conv2d>(rt, gen, Conv2dSpec{4, 4, {3, 3}, same, false}));
    model->push_back(std::make_shared<BatchNorm2d>(rt, 4));
    model->push_back(std::make_shared<ReLU>());
    model->push_back(std::make_shared<GlobalAvgPool2d>());
    model->push_back(std::make_shared<Flatten>());
    model->push_back(std::make_shared<Linear>(rt, gen, 4, 10));
    return model;
  };
  const Step plain = one_step(build, 4, -1);
  const auto fused = after_one_step(build, -1, true);
  for (const std::int64_t segments : {2, 3, 9}) {  // 3 segments of 3: each BN with its ReLU; 9: every pair split
    SCOPED_TRACE(segments);
    EXPECT_EQ(one_step(build, 4, segments).loss, plain.loss);
    EXPECT_EQ(after_one_step(build, segments, true), fused);
  }
}

// Unlike PyTorch's reentrant checkpoint, parameters inside a segment whose input needs no gradient get theirs.
TEST(Checkpoint, ParametersGetGradientsWhenTheInputNeedsNone) {
  Runtime rt;
  Generator gen(2);
  Linear layer(rt, gen, 4, 3);
  const Variable x = constant(rt, {2, 4}, ramp(8, 1.0F));
  const Variable y = checkpoint([&](const Variable& in) { return tanh(layer.forward(in)); }, x);
  sum(y).backward();
  ASSERT_TRUE(layer.weight().grad().defined());
  ASSERT_TRUE(layer.bias().grad().defined());

  Runtime rt2;
  Generator gen2(2);
  Linear same(rt2, gen2, 4, 3);
  const Variable x2 = constant(rt2, {2, 4}, ramp(8, 1.0F));
  sum(tanh(same.forward(x2))).backward();
  EXPECT_EQ(layer.weight().grad().to_host(), same.weight().grad().to_host());
  EXPECT_EQ(layer.bias().grad().to_host(), same.bias().grad().to_host());
}

TEST(Checkpoint, SeveralInputsAndOutputs) {
  Runtime rt;
  const Variable a = constant(rt, {3}, std::vector<float>{1, 2, 3}, true);
  const Variable b = constant(rt, {3}, std::vector<float>{-1, 0.5F, 2}, true);
  const CheckpointFunction fn = [](std::span<const Variable> in) {
    return std::vector<Variable>{mul(in[0], in[1]), tanh(in[0])};
  };
  const Variable ab[] = {a, b};
  const std::vector<Variable> out = checkpoint(fn, ab);
  sum(add(out[0], out[1])).backward();
  const std::vector<float> ga = a.grad().to_host();
  const std::vector<float> gb = b.grad().to_host();

  Runtime rt2;
  const Variable a2 = constant(rt2, {3}, std::vector<float>{1, 2, 3}, true);
  const Variable b2 = constant(rt2, {3}, std::vector<float>{-1, 0.5F, 2}, true);
  sum(add(mul(a2, b2), tanh(a2))).backward();
  EXPECT_EQ(ga, a2.grad().to_host());
  EXPECT_EQ(gb, b2.grad().to_host());
}

TEST(Checkpoint, Errors) {
  Runtime rt;
  Generator gen(1);
  const auto model = make_mlp(rt, gen, MlpSpec{8, 2, 0.0});
  const Variable x = constant(rt, {1, 1, 28, 28}, ramp(784, 1.0F));
  EXPECT_THROW(checkpoint_sequential(*model, -1, x), InvalidArgument);
  EXPECT_THROW(checkpoint_sequential(*model, static_cast<std::int64_t>(model->size()) + 1, x), InvalidArgument);
  EXPECT_THROW(checkpoint(std::function<Variable(const Variable&)>(), x), InvalidArgument);
  const std::vector<Variable> none;
  EXPECT_THROW(checkpoint([](std::span<const Variable> in) { return std::vector<Variable>(in.begin(), in.end()); }, none),
               InvalidArgument);
  const Variable loss = cross_entropy(checkpoint_sequential(*model, 2, x), labels(rt, 1));
  loss.backward();
  EXPECT_THROW(loss.backward(), InvalidArgument);  // the graph was freed
  EXPECT_EQ(sqrt_segments(64), 8);
  EXPECT_EQ(sqrt_segments(1), 1);
  EXPECT_EQ(sqrt_segments(66), 8);
}

}  // namespace
}  // namespace dtr::nn

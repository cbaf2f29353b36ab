// Faults in the middle of a program (issue 16): a kernel that throws while it is recomputed, deep inside
// another op's inputs, and a value check that fails in the middle of a training step. Each leaves the runtime
// consistent: the exception reaches the caller unchanged, nothing stays pinned (every computed resident tensor
// can be evicted, and a budget that holds only the constants can be set), nothing leaks, and the program goes
// on with the same bits as a run that never failed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "../test_helpers.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/layers.h"
#include "dtr/nn/module.h"
#include "dtr/nn/optim.h"

namespace dtr::nn::test {
namespace {

// out = tanh(2 x + 1) elementwise; throws while `fail` is set, as a user's kernel might (a device error, a
// bad value it checks itself).
class FlakyTanh final : public Computation {
 public:
  std::string_view name() const override { return "flaky_tanh"; }
  void run(const KernelArgs& args) override {
    ++runs;
    if (fail) throw std::runtime_error("flaky_tanh: the user's kernel failed");
    const float* in = args.input<float>(0);
    float* out = args.output<float>(0);
    for (std::int64_t i = 0; i < args.output_meta[0].numel(); ++i) out[i] = std::tanh(2.0F * in[i] + 1.0F);
  }
  bool fail = false;
  int runs = 0;
};

std::vector<float> ramp(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37F * static_cast<float>(i));
  return v;
}

TEST(KernelFault, AKernelThatThrowsWhileRecomputedDeepInAnOpsInputsLeavesNothingPinned) {
  for (const std::string& heuristic : heuristic_names()) {
    SCOPED_TRACE(heuristic);
    Config config;
    config.budget_mode = BudgetMode::bytes;
    config.heuristic = heuristic;
    config.thrash_limit = std::nullopt;
    Runtime rt(config);
    const TensorMeta meta{{64, 64}};
    const Tensor x = rt.constant(meta, ramp(64 * 64));
    auto flaky = std::make_shared<FlakyTanh>();
    // x -> a (flaky) -> b -> c -> d: reading d with everything evicted recomputes a first, three ops deep.
    const Tensor a = rt.call(flaky, std::vector<Tensor>{x}, std::span<const TensorMeta>(&meta, 1)).front();
    const Tensor b = rt.call1(ops::relu(), {a});
    const Tensor c = rt.call1(ops::mul(), {b, x});
    const Tensor d = rt.call1(ops::add(), {c, b});
    const Tensor other = rt.call1(ops::scale(), {x}, Attrs{{"factor", 3.0}});
    const std::vector<float> expected = d.to_host();
    for (const Tensor* t : {&a, &b, &c, &d}) ASSERT_TRUE(rt.evict(*t));
    const std::uint64_t resident_before = rt.resident_bytes();
    const std::uint64_t allocated_before = rt.allocator().stats().allocated_bytes.current;

    flaky->fail = true;
    try {
      (void)d.to_host();
      ADD_FAILURE() << "the kernel's exception did not reach the caller";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "flaky_tanh: the user's kernel failed");  // unchanged, its own type
    }
    // Nothing half-made: what was evicted is still evicted, no buffer stayed allocated.
    for (const Tensor* t : {&a, &b, &c, &d}) EXPECT_FALSE(t->resident());
    EXPECT_EQ(rt.resident_bytes(), resident_before);
    EXPECT_EQ(rt.allocator().stats().allocated_bytes.current, allocated_before);
    // Nothing pinned: the resident computed tensor can go, and a budget holding only the constant fits.
    EXPECT_TRUE(rt.evict(other));
    rt.set_memory_budget(x.storage_bytes() + 3 * meta.nbytes());
    // The same read once the kernel works: the same bits, under the small budget.
    flaky->fail = false;
    const std::vector<float> again = d.to_host();
    EXPECT_EQ(std::memcmp(again.data(), expected.data(), expected.size() * sizeof(float)), 0);
    EXPECT_LE(rt.stats().peak_resident_bytes, resident_before + 4 * meta.nbytes() + x.storage_bytes());
  }
}

// An eight-layer MLP trained with momentum SGD; one step's labels are out of range (cross_entropy's value check
// throws mid-forward, after the activations exist), and the step is redone with good labels.
struct Mlp {
  Runtime rt;
  Generator generator{7};
  Sequential model;
  std::unique_ptr<SGD> sgd;
  explicit Mlp(Config config) : rt(std::move(config)) {
    model.push_back(std::make_shared<Linear>(rt, generator, 32, 64));
    for (int layer = 0; layer < 6; ++layer) {
      model.push_back(std::make_shared<ReLU>());
      model.push_back(std::make_shared<Linear>(rt, generator, 64, 64));
    }
    model.push_back(std::make_shared<ReLU>());
    model.push_back(std::make_shared<Linear>(rt, generator, 64, 10));
    sgd = std::make_unique<SGD>(model.parameters(), SGDOptions{.lr = 0.05, .momentum = 0.9});
  }
  // One step; the loss's bits.
  std::vector<float> step(int index, bool bad_labels = false) {
    std::vector<float> images(128 * 32);
    for (std::size_t i = 0; i < images.size(); ++i) images[i] = std::cos(0.11F * static_cast<float>(i + index * 7));
    std::vector<std::int64_t> labels(128);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>((i * 3 + index) % 10);
    if (bad_labels) labels[5] = 10;
    const Variable x = constant(rt, {128, 32}, images);
    const Variable y(rt, rt.constant(TensorMeta{{128}, DType::int64}, labels));
    sgd->zero_grad();
    const Variable loss = cross_entropy(model.forward(x), y);
    loss.backward();
    sgd->step();
    return loss.to_host();
  }
  std::vector<float> parameters() const {
    std::vector<float> all;
    for (const Variable& p : model.parameters()) {
      const std::vector<float> v = p.to_host();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
};

TEST(KernelFault, AValueCheckFailingMidTrainingStepLeavesTheRunExact) {
  Config unbudgeted;
  unbudgeted.budget_mode = BudgetMode::bytes;
  Mlp reference(unbudgeted);
  std::vector<std::vector<float>> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(reference.step(s));
  const std::uint64_t peak = reference.rt.stats().peak_resident_bytes;
  std::uint64_t state = 0;  // parameters, gradients and momentum buffers
  for (const Variable& p : reference.model.parameters()) state += 3 * p.data().storage_bytes();

  for (const std::string& heuristic : heuristic_names()) {
    SCOPED_TRACE(heuristic);
    Config config = unbudgeted;
    config.heuristic = heuristic;
    config.memory_budget = state + (peak - state) * 3 / 4;  // the state and most of the activations
    config.thrash_limit = std::nullopt;
    Mlp run(config);
    EXPECT_EQ(run.step(0), losses[0]);
    dtr::test::expect_error<InvalidArgument>([&] { (void)run.step(1, true); }, {"cross_entropy", "has label 10 at position 5 outside [0, 10)"});
    // The failed step's graph died with its variables: what is resident is the parameters, their gradients
    // from step 0 and the momentum buffers.
    EXPECT_EQ(run.rt.resident_bytes(), state);
    EXPECT_EQ(run.step(1), losses[1]);
    EXPECT_EQ(run.step(2), losses[2]);
    EXPECT_EQ(run.parameters(), reference.parameters());
    EXPECT_GT(run.rt.stats().evictions, 0u) << "the budget never bit: the test would prove nothing";
  }
}

}  // namespace
}  // namespace dtr::nn::test

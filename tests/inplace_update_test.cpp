// Runtime::assign writing the new value over the old one's buffer (OpDef::overwrites_first_input): when it
// does, when it must not, and that either way every value is the bits the copying path gives. The fixture and
// its instantiation (both in-place strategies) are runtime_test.cpp's.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "inplace_fixture.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

// A config whose assigns never write in place: a kernel observer must find the inputs as the kernel read them.
Config copying(Config config) {
  config.kernel_observer = [](const KernelRun&) {};
  return config;
}

// A momentum step on (w, buf) `steps` times: the optimizer's pattern, one assign per new value.
std::vector<float> train(Runtime& rt, int steps) {
  Tensor w = constant(rt, {300}, 0.5f);
  Tensor buf = rt.constant(TensorMeta{{300}});
  const Tensor x = constant(rt, {300}, -1.0f);
  for (int i = 0; i < steps; ++i) {
    const Tensor g = rt.call1(ops::scale(), {x}, Attrs{{"factor", 0.01 * (i + 1)}});  // w's gradient
    rt.assign(buf, ops::sgd_momentum_buffer(), {buf, g}, Attrs{{"momentum", 0.9}});
    rt.assign(w, ops::sgd_apply(), {w, buf}, Attrs{{"lr", 0.1}});
  }
  std::vector<float> values = w.to_host();
  const std::vector<float> momentum = buf.to_host();
  values.insert(values.end(), momentum.begin(), momentum.end());
  return values;
}

TEST_P(InPlace, AnUpdateNothingElseReadsTakesNoNewBuffer) {
  Runtime rt(config());
  Runtime oracle(copying(config()));
  const std::uint64_t before = allocations(rt);
  const std::vector<float> values = train(rt, 20);
  EXPECT_TRUE(bitwise_equal(values, train(oracle, 20)));
  EXPECT_EQ(rt.stats().in_place_updates, 40u);
  EXPECT_EQ(oracle.stats().in_place_updates, 0u);
  // w, buf and x once each, and each step's gradient: no buffer for either new value.
  EXPECT_EQ(allocations(rt) - before, 3u + 20u);
  EXPECT_EQ(allocations(oracle) - before, 3u + 20u + 40u);
}

TEST_P(InPlace, AValueSomethingElseReadsIsCopiedOnWrite) {
  Runtime rt(config());
  Tensor x = constant(rt, {4}, 1.0f);
  Tensor w = constant(rt, {4}, 2.0f);
  Tensor alias = w;  // a copy of the handle: it sees the update whichever way it is made
  rt.assign(w, ops::add(), {w, w});
  EXPECT_EQ(rt.stats().in_place_updates, 1u);
  EXPECT_EQ(alias.to_host(), (std::vector<float>{4.0f, 4.5f, 5.0f, 5.5f}));

  Tensor view = rt.view(w, {2}, 2);  // another handle reads the old value
  rt.assign(w, ops::add(), {w, w});
  EXPECT_EQ(view.to_host(), (std::vector<float>{5.0f, 5.5f}));
  view = Tensor();

  Tensor y = rt.call1(ops::mul(), {x, w});  // a dependent: its recomputation reads the old value
  const std::vector<float> y_before = y.to_host();
  rt.assign(w, ops::add(), {w, w});
  EXPECT_EQ(rt.evict(y), copy_on_write());
  EXPECT_TRUE(bitwise_equal(y.to_host(), y_before));
  y = Tensor();

  rt.assign(w, ops::add(), {x, w});  // the target is not the first input
  Tensor z = rt.call1(ops::relu(), {x});
  rt.assign(z, ops::scale(), {z}, Attrs{{"factor", 2.0}});  // not a constant: it keeps a lineage
  rt.assign(w, ops::softmax(), {w});  // its kernel reads other elements
  EXPECT_EQ(rt.stats().in_place_updates, 1u);
  EXPECT_TRUE(bitwise_equal(z.to_host(), std::vector<float>{2.0f, 2.5f, 3.0f, 3.5f}));
}

TEST_P(InPlace, AnUpdateFitsWhereANewBufferWouldNot) {
  // The budget holds w, buf, x and one gradient (constants and an input: nothing can be evicted), not a fifth
  // buffer.
  const std::uint64_t budget = 4 * 1200 + 600;
  Runtime rt(config(budget));
  Runtime oracle(copying(config()));
  EXPECT_TRUE(bitwise_equal(train(rt, 3), train(oracle, 3)));
  Runtime copies(copying(config(budget)));
  EXPECT_THROW(train(copies, 3), OutOfMemory);
}

TEST_P(InPlace, AKernelThatFailsLeavesTheTargetAsItWas) {
  OpDef failing{.name = "fails_in_place",
                .infer = [](std::span<const TensorMeta> inputs, const Attrs&) { return TensorMetas{inputs[0]}; },
                .cpu_kernel = [](const KernelArgs&) { throw std::runtime_error("the kernel failed"); },
                .flops = [](std::span<const TensorMeta>, const Attrs&) { return 1.0; },
                .overwrites_first_input = true};
  Runtime rt(config());
  Tensor w = constant(rt, {64}, 1.0f);
  const std::vector<float> before = w.to_host();
  const std::uint64_t resident = rt.resident_bytes();
  EXPECT_THROW(rt.assign(w, failing, {w}), std::runtime_error);
  EXPECT_EQ(rt.stats().in_place_updates, 0u);
  EXPECT_EQ(rt.resident_bytes(), resident);
  EXPECT_TRUE(bitwise_equal(w.to_host(), before));
  rt.assign(w, ops::add(), {w, w});  // the buffer is still the target's own
  EXPECT_EQ(w.to_host()[1], 2.5f);
}

}  // namespace
}  // namespace dtr::test

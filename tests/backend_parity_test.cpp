// Backends against each other (ggml's test-backend-ops idea): every op on every backend this machine has,
// forward and through its gradient's backward ops, against the CPU reference on random shapes, to an explicit
// tolerance; and the same op twice on a GPU, which must give the same bits (rematerialization relies on it).
// Without a GPU the parity tests skip; what a CUDA build must hold without one is checked here too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "dtr/device.h"
#include "dtr/memory_resource.h"
#include "kernels/cuda/cuda_kernels.h"
#include "op_cases.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

Config on(Device device) {
  Config config = deterministic_config();
  config.device = device;
  return config;
}

constexpr Device cpu{DeviceKind::cpu, 0};
constexpr Device gpu{DeviceKind::cuda, 0};

// Ops without a gradient rule that the cases do not reach through a vjp: their outputs alone.
std::vector<GradCase> forward_only_cases() {
  const auto same = [](std::size_t count, Attrs attrs) {
    return [count, attrs](Rng& rng) {
      Shape shape{dim(rng), dim(rng)};
      return Problem{std::vector<Shape>(count, shape), attrs};
    };
  };
  const Attrs adam{{"lr", 0.01}, {"step", std::int64_t{3}}, {"weight_decay", 0.1}};
  return {
      {ops::uniform(), same(1, {})},
      {ops::sgd_momentum_buffer(), same(3, {{"momentum", 0.9}, {"weight_decay", 0.1}})},
      {ops::sgd_apply(), same(3, {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", std::int64_t{1}}})},
      {ops::adam_moment1(), same(3, adam)},
      {ops::adam_moment2(), same(3, adam)},
      {ops::adam_apply(), same(3, adam), [](std::size_t i, double v) { return i == 2 ? std::abs(v) : v; }},
      {ops::batch_norm_stats(),
       [](Rng& rng) {
         return Problem{{Shape{dim(rng), dim(rng), dim(rng), dim(rng)}}, {{"eps", 0.01}}};
       }},
      {ops::batch_norm_normalize(),
       [](Rng& rng) {
         const Shape x{dim(rng), dim(rng), dim(rng)};
         const Shape c{x[1]};
         std::vector<Shape> inputs{x, c, c, c, c};
         if (rng() % 2 == 0) inputs.push_back(x);  // a residual
         return Problem{inputs, {{"relu", std::int64_t(rng() % 2)}}};
       }},
  };
}

// The case's results on `device`: outputs and input gradients, or outputs alone for an op without a rule.
std::vector<std::vector<double>> results_on(Device device, const GradCase& c, const Problem& p,
                                            const std::vector<std::vector<double>>& values, DType dtype) {
  Runtime rt(on(device));
  if (gradient_rule(c.op) != nullptr) return outputs_and_gradients(rt, c, p, values, dtype);
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < values.size(); ++i) inputs.push_back(make_input(rt, p, i, values[i], dtype));
  std::vector<std::vector<double>> results;
  for (const Tensor& out : rt.call(c.op, inputs, p.attrs)) results.push_back(floating_values(out));
  return results;
}

TEST(BackendParity, EveryOpOnTheGpuMatchesTheCpuAndRepeatsItsBits) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  std::vector<GradCase> all = cases();
  for (GradCase& c : forward_only_cases()) all.push_back(std::move(c));
  for (std::size_t case_index = 0; case_index < all.size(); ++case_index) {
    const GradCase& c = all[case_index];
    for (const DType dtype : {DType::float32, DType::float64}) {
      // float32: summation orders differ between backends (cuBLAS, cuDNN, tree reductions), by a few ulps of
      // the terms; float64: the same, a billion times smaller.
      const double tolerance = dtype == DType::float32 ? 2e-5 : 1e-12;
      for (std::uint64_t trial = 0; trial < 4; ++trial) {
        Rng rng(4242 + 1000 * case_index + trial);
        const Problem p = c.make(rng);
        SCOPED_TRACE(::testing::Message() << c.op.name << " " << to_string(dtype) << " trial " << trial);
        std::vector<std::vector<double>> values;
        for (std::size_t i = 0; i < p.inputs.size(); ++i) {
          values.push_back(random_values(rng, TensorMeta{p.inputs[i]}.numel(), c, i));
        }
        const auto reference = results_on(cpu, c, p, values, dtype);
        const auto first = results_on(gpu, c, p, values, dtype);
        const auto second = results_on(gpu, c, p, values, dtype);
        ASSERT_EQ(first.size(), reference.size());
        for (std::size_t r = 0; r < first.size(); ++r) {
          ASSERT_EQ(first[r].size(), reference[r].size()) << "result " << r;
          EXPECT_EQ(std::memcmp(first[r].data(), second[r].data(), first[r].size() * sizeof(double)), 0)
              << "result " << r << " differs between two runs on the GPU";
          for (std::size_t e = 0; e < first[r].size(); ++e) {
            EXPECT_NEAR(first[r][e], reference[r][e], tolerance * (1 + std::abs(reference[r][e])))
                << "result " << r << " element " << e;
          }
        }
      }
    }
  }
}

TEST(BackendParity, ABudgetedGpuRunGivesTheUnbudgetedBits) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  // A chain whose intermediates must be evicted and recomputed under the budget: recomputation on the GPU
  // must reproduce the bits, as on the CPU.
  const auto run = [](std::optional<std::uint64_t> budget) {
    Config config = on(gpu);
    config.memory_budget = budget;
    config.budget_mode = BudgetMode::bytes;
    Runtime rt(config);
    std::vector<float> start(4096);
    for (std::size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(i % 97) / 97.0F - 0.5F;
    Tensor x = rt.constant(TensorMeta{{64, 64}}, start);
    std::vector<Tensor> chain{x};
    for (int i = 0; i < 24; ++i) chain.push_back(rt.call1(i % 2 == 0 ? ops::tanh() : ops::gelu(), {chain.back()}));
    Tensor total = chain.front();
    for (std::size_t i = 1; i < chain.size(); ++i) total = rt.call1(ops::add(), {total, chain[i]});
    return total.to_host();
  };
  const std::vector<float> unbudgeted = run(std::nullopt);
  const std::vector<float> budgeted = run(std::uint64_t{16} * 64 * 64 * 4);
  EXPECT_TRUE(bitwise_equal(budgeted, unbudgeted));
}

TEST(CudaKernels, EveryOpThatTouchesMemoryHasOneExactlyWhenBuiltWithCuda) {
  for (const std::string& name : op_names()) {
    const OpDef& op = find_op(name);
    if (DTR_TEST_EXPECT_CUDA != 0) {
      EXPECT_TRUE(op.cuda_kernel != nullptr) << name << " has no CUDA kernel (kernels/cuda/)";
    } else {
      EXPECT_TRUE(op.cuda_kernel == nullptr) << name;
    }
  }
}

TEST(OpTable, EveryOpHasOneDefinitionUnderAUniqueName) {
  std::set<std::string> seen;
  for (const std::string& name : op_names()) {
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
    EXPECT_EQ(find_op(name).name, name);
    EXPECT_EQ(&find_op(name), &find_op(name));  // define_op keeps one definition
  }
}

// The CUDA kernel table is keyed by op name: a misspelt key would leave an op without its kernel, silently.
TEST(CudaKernels, EveryKernelTableKeyNamesAnOp) {
  const std::vector<std::string> names = kernels::cuda_kernel_names();
  EXPECT_EQ(names.empty(), DTR_TEST_EXPECT_CUDA == 0);
  for (const std::string& name : names) EXPECT_NO_THROW(find_op(name)) << name << " is not an op of the table";
  EXPECT_EQ(names.size(), op_names().size());  // and every op has one
}

TEST(CudaKernels, ARuntimeOnAMissingGpuIsAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Runtime rt(on(gpu));
    FAIL() << "a runtime on cuda:0 was built without a GPU";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(cuda::unavailable_reason()), std::string::npos) << e.what();
  }
}

TEST(CudaKernels, TheMemoryMustBeOnTheRuntimesDevice) {
  // Host memory for a runtime configured for a GPU (or the other way round) is refused before any kernel runs.
  expect_error<InvalidArgument>([] { Runtime rt(on(gpu), make_host_resource()); },
                                {"Config::device is cuda:0", "is on cpu"});
  // Simulated memory runs no kernel: any device will do.
  Runtime simulated(on(gpu), make_simulated_resource(std::size_t{1} << 30));
  EXPECT_EQ(simulated.config().device, gpu);
}

}  // namespace
}  // namespace dtr::test

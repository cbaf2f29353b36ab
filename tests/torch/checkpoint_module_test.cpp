// dtr::torch::checkpoint_module for C++ modules: the module's parameters and buffers become runtime constants
// (mirrors) at the call, the module keeps its plain tensors, and training stays bitwise that of plain libtorch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtr/config.h"
#include "dtr/error.h"
#include "dtr/torch.h"

#include "bytes_runtime.h"

namespace {

using dtr::torch::checkpoint;
using dtr::torch::checkpoint_module;
using dtr::torch::decheckpoint;

using dtr::torch::test::bytes_runtime;

// Linear, BatchNorm (buffers, an int64 counter among them), Linear; fc1's weight tied under a second name, and
// a transposed view of fc2's weight as a buffer (another TensorImpl over the same storage).
struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    bn = register_module("bn", torch::nn::BatchNorm1d(16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 4));
    tied = register_parameter("tied", fc1->weight);
    register_buffer("fc2_weight_t", fc2->weight.detach().t());
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(torch::relu(bn->forward(fc1->forward(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  at::Tensor tied;
};

// fc1 (weight 16x8, bias 16), bn (weight, bias, running mean and variance: 16 each; the batch counter: one
// int64), fc2 (weight 4x16, bias 4); float32; the tied weight and the transposed view add no storage.
constexpr std::uint64_t kNetStateBytes = (16 * 8 + 16) * 4 + 4 * 16 * 4 + 8 + (4 * 16 + 4) * 4;
constexpr std::uint64_t kNetStorages = 9;

TEST(CheckpointModule, MirrorsEveryParameterAndBufferAtOnceTiedWeightsOnce) {
  Net net;
  auto runtime = bytes_runtime();
  ASSERT_EQ(runtime->resident_bytes(), 0u);
  EXPECT_EQ(checkpoint_module(net, runtime), kNetStateBytes);
  EXPECT_EQ(runtime->resident_bytes(), kNetStateBytes) << "the state is held before the first op";
  EXPECT_EQ(runtime->footprint().storages, kNetStorages);
  // The module's own tensors stay plain (its forward reads them from member fields).
  EXPECT_FALSE(dtr::torch::is_checkpointed(net.fc1->weight));
  // Again: the same mirrors serve (the bytes did not change), nothing more is held.
  EXPECT_EQ(checkpoint_module(net, runtime), kNetStateBytes);
  EXPECT_EQ(runtime->resident_bytes(), kNetStateBytes);
  EXPECT_EQ(runtime->footprint().storages, kNetStorages);
}

// Deep enough that a step's activations are most of its peak: Linear, then six Linear-BatchNorm-ReLU blocks.
struct Deep : torch::nn::Module {
  Deep() {
    layers = register_module("layers", torch::nn::Sequential(torch::nn::Linear(8, 32)));
    for (int i = 0; i < 6; ++i) {
      layers->push_back(torch::nn::Linear(32, 32));
      layers->push_back(torch::nn::BatchNorm1d(32));
      layers->push_back(torch::nn::ReLU());
    }
    layers->push_back(torch::nn::Linear(32, 4));
  }
  at::Tensor forward(const at::Tensor& x) { return layers->forward(x); }
  torch::nn::Sequential layers{nullptr};
};

// Trains a fresh Deep for 6 steps with SGD (momentum) built before checkpoint_module, in `runtime` (none:
// plain), and returns the losses followed by the parameters and buffers, flattened.
std::vector<at::Tensor> train(const std::shared_ptr<dtr::Runtime>& runtime) {
  torch::manual_seed(5);
  Deep net;
  torch::optim::SGD optimizer(net.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  if (runtime) {
    const std::uint64_t held = checkpoint_module(net, runtime);
    EXPECT_EQ(runtime->resident_bytes(), held) << "the state is held before the first step";
  }
  std::vector<at::Tensor> result;
  for (int step = 0; step < 6; ++step) {
    at::Tensor x = torch::randn({256, 8});
    at::Tensor y = torch::randint(0, 4, {256});
    if (runtime) x = checkpoint(x, runtime), y = checkpoint(y, runtime);
    optimizer.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(net.forward(x), y);
    loss.backward();
    optimizer.step();
    result.push_back(decheckpoint(loss).clone());
  }
  for (const auto& p : net.parameters()) result.push_back(decheckpoint(p).clone());
  for (const auto& b : net.buffers()) result.push_back(decheckpoint(b).clone());
  return result;
}

TEST(CheckpointModule, TrainingStaysBitwisePlainLibtorchsUnderBudgets) {
  const std::vector<at::Tensor> plain = train(nullptr);
  auto unbudgeted = bytes_runtime();
  std::vector<std::pair<std::string, std::shared_ptr<dtr::Runtime>>> runs{{"unbudgeted", unbudgeted}};
  const std::vector<at::Tensor> first = train(unbudgeted);
  const std::uint64_t peak = unbudgeted->stats().peak_resident_bytes;
  ASSERT_GT(peak, 0u);
  std::vector<std::vector<at::Tensor>> curves{first};
  std::vector<std::shared_ptr<dtr::Runtime>> budgeted;
  // 0.46: the lowest forecast holds since released values go first (0.40 before, 2026-11-29; dtr-torch does not
  // hold backward's gradients as nn/ does, and remaking one reruns the backward pass: docs/torch.md).
  for (double ratio : {0.5, 0.46}) {
    budgeted.push_back(bytes_runtime(static_cast<std::uint64_t>(ratio * static_cast<double>(peak))));
    runs.emplace_back("at " + std::to_string(ratio), budgeted.back());
    curves.push_back(train(budgeted.back()));
  }
  for (std::size_t r = 0; r < curves.size(); ++r) {
    ASSERT_EQ(curves[r].size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_TRUE(at::equal(plain[i], curves[r][i])) << runs[r].first << ": value " << i;
    }
  }
  for (const auto& runtime : budgeted) EXPECT_GT(runtime->stats().rematerializations, 0u);
}

// The first op that reads the module's tensors uses the mirrors the call made: it holds nothing more than
// its own result.
TEST(CheckpointModule, TheFirstOpReadsTheMirrorsTheCallMade) {
  Net net;
  auto runtime = bytes_runtime();
  ASSERT_EQ(checkpoint_module(net, runtime), kNetStateBytes);
  const at::Tensor x = checkpoint(torch::randn({32, 8}), runtime);
  const std::uint64_t before = runtime->resident_bytes();
  torch::NoGradGuard no_grad;
  const at::Tensor y = net.fc1->forward(x);
  EXPECT_EQ(runtime->resident_bytes() - before, 32u * 16 * sizeof(float)) << "the weights were mirrored again";
}

// A budget below the module's state: dtr::OutOfMemory, and what was mirrored before stays held (documented).
TEST(CheckpointModule, TheBudgetCountsTheModulesState) {
  Net net;
  auto runtime = bytes_runtime(kNetStateBytes / 2);
  EXPECT_THROW(checkpoint_module(net, runtime), dtr::OutOfMemory);
  EXPECT_GT(runtime->resident_bytes(), 0u);
  EXPECT_LE(runtime->resident_bytes(), kNetStateBytes / 2);
}

TEST(CheckpointModule, BadTensorsAndRuntimesAreClearErrorsThatMirrorNothing) {
  // The bad tensor comes after good ones (a module's own tensors are listed before its submodules'): a
  // version that mirrored while it checked would have mirrored fc's.
  struct Holder : torch::nn::Module {
    Holder() { register_parameter("ghost", torch::empty({4}, torch::device(torch::kMeta))); }
  };
  struct WithMeta : torch::nn::Module {
    WithMeta() {
      register_module("fc", torch::nn::Linear(4, 4));
      register_module("late", std::make_shared<Holder>());
    }
  };
  struct WithSparse : torch::nn::Module {
    WithSparse() {
      register_module("fc", torch::nn::Linear(4, 4));
      register_buffer("mask", torch::eye(3).to_sparse());
    }
  };
  auto runtime = bytes_runtime();
  WithMeta meta;
  WithSparse sparse;
  for (torch::nn::Module* module : {static_cast<torch::nn::Module*>(&meta), static_cast<torch::nn::Module*>(&sparse)}) {
    try {
      checkpoint_module(*module, runtime);
      ADD_FAILURE() << "no error";
    } catch (const dtr::InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(module == &meta ? "parameter 'late.ghost'" : "buffer 'mask'"), std::string::npos) << what;
      EXPECT_NE(what.find("dtr-torch holds strided CPU tensors only"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(runtime->resident_bytes(), 0u) << "fc's tensors were mirrored before the error";
  Net net;
  EXPECT_THROW(checkpoint_module(net, nullptr), dtr::InvalidArgument);
}

}  // namespace

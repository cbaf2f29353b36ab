// A reference no one here wrote: every zoo model, trained 20 steps here and in PyTorch (Debian's python3-torch
// 1.13, run by /usr/bin/python3, bench/torch/reference.py) from the same parameters on the same batches, gives
// the same loss curve, parameters and running statistics to float32 tolerance; and the paired epoch's data order
// (bench/torch/baseline.py --paired) is dtr-train's. Skipped when PyTorch is not installed (scripts/setup.sh
// does not install it: it is a benchmark's dependency, not the tests').
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../child_process.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/models.h"
#include "dtr/nn/optim.h"
#include "dtr/nn/state_dict.h"
#include "dtr/train/dataset.h"

namespace dtr::nn::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";  // Debian's own: the python3 first on PATH may lack torch
constexpr int kSteps = 20;
constexpr double kLabelSmoothing = 0.1;

struct TorchCase {
  std::string name;        // also the zoo model
  std::string model_json;  // the spec, as bench/torch/zoo.py builds it
  std::function<std::shared_ptr<Sequential>(Runtime&, Generator&)> build;
  std::int64_t batch;
  std::string optimizer;  // sgd, adam, adamw
  double lr;
  double clip_norm = 0;  // 0: none
};

std::vector<TorchCase> torch_cases() {
  return {
      {"mlp", R"({"width": 64, "depth": 3})",
       [](Runtime& rt, Generator& g) { return make_mlp(rt, g, MlpSpec{64, 3, 0.0}); }, 32, "adamw", 1e-3},
      {"resnet", R"({"depth": 8, "width": 4})",
       [](Runtime& rt, Generator& g) { return make_resnet(rt, g, ResNetSpec{8, 4, 0.0}); }, 16, "sgd", 0.05, 1.0},
      {"transformer", R"({"depth": 2, "dim": 16, "heads": 2, "patch": 7})",
       [](Runtime& rt, Generator& g) { return make_transformer(rt, g, TransformerSpec{2, 16, 2, 7, 0.0}); }, 16,
       "adam", 1e-3},
      {"lstm", R"({"hidden": 16, "layers": 2})",
       [](Runtime& rt, Generator& g) { return make_lstm(rt, g, LstmSpec{16, 2, 0.0}); }, 16, "sgd", 0.1},
      {"unet", R"({"width": 4, "levels": 2, "convs": 1})",
       [](Runtime& rt, Generator& g) { return make_unet(rt, g, UNetSpec{4, 2, 0.0, 1}); }, 8, "adam", 1e-3, 5.0},
      {"densenet", R"({"growth": 4, "layers": 2, "blocks": 2})",
       [](Runtime& rt, Generator& g) { return make_densenet(rt, g, DenseNetSpec{4, 2, 2, 0.0}); }, 8, "sgd", 0.05},
  };
}

// The optimizer of `c` here and its JSON for the script: SGD with Nesterov momentum and weight decay, Adam with
// L2 decay, AdamW with decoupled decay.
std::unique_ptr<Optimizer> make_optimizer(const TorchCase& c, std::vector<Variable> params) {
  if (c.optimizer == "sgd") {
    return std::make_unique<SGD>(std::move(params), SGDOptions{.lr = c.lr, .momentum = 0.9, .weight_decay = 5e-4,
                                                               .nesterov = true});
  }
  if (c.optimizer == "adam") return std::make_unique<Adam>(std::move(params), AdamOptions{.lr = c.lr, .weight_decay = 1e-4});
  return std::make_unique<AdamW>(std::move(params), AdamWOptions{.lr = c.lr, .weight_decay = 0.01});
}

std::string optimizer_json(const TorchCase& c) {
  if (c.optimizer == "sgd") {
    return R"("optimizer": "sgd", "momentum": 0.9, "weight_decay": 0.0005, "nesterov": true)";
  }
  if (c.optimizer == "adam") return R"("optimizer": "adam", "weight_decay": 0.0001)";
  return R"("optimizer": "adamw", "weight_decay": 0.01)";
}

bool torch_available() {
  static const bool available = [] {
    if (!fs::exists(kPython)) return false;
    return dtr::test::run_command(std::string(kPython) + " -c 'import torch'").status == 0;
  }();
  return available;
}

struct Trained {
  std::vector<double> losses;
  std::vector<std::pair<std::string, std::vector<float>>> state;  // parameters and buffers after the last step
};

// Trains `c` here for kSteps, writing the initial state and the batches to `in` on the way.
Trained train_here(const TorchCase& c, const fs::path& in) {
  Runtime rt;
  Generator init(7);
  const std::shared_ptr<Sequential> model = c.build(rt, init);
  model->train();
  StateDict file = state_dict(*model);
  // Copies of the initial values: the model's are updated in place by training.
  for (auto& [name, value] : file) value = rt.constant(value.meta(), value.to_host());
  Generator data(2024);
  std::vector<std::pair<Variable, Variable>> batches;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> pixels(static_cast<std::size_t>(c.batch * 28 * 28));
    for (float& v : pixels) v = static_cast<float>(2 * data.uniform() - 1);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(c.batch));
    for (std::int64_t& l : labels) l = static_cast<std::int64_t>(data.uniform() * 10);
    Variable x = constant(rt, {c.batch, 1, 28, 28}, pixels);
    Variable y(rt, rt.constant(TensorMeta{{c.batch}, DType::int64}, labels));
    file.emplace_back("data.x." + std::to_string(step), x.data());
    file.emplace_back("data.y." + std::to_string(step), y.data());
    batches.emplace_back(std::move(x), std::move(y));
  }
  save_state_dict(file, in);

  const std::unique_ptr<Optimizer> optimizer = make_optimizer(c, model->parameters());
  Trained here;
  for (const auto& [x, y] : batches) {
    optimizer->zero_grad();
    const Variable loss = cross_entropy(model->forward(x), y, kLabelSmoothing);
    loss.backward();
    if (c.clip_norm > 0) clip_grad_norm(model->parameters(), c.clip_norm);
    optimizer->step();
    here.losses.push_back(loss.to_host()[0]);
  }
  for (const auto& [name, value] : state_dict(*model)) here.state.emplace_back(name, value.to_host());
  return here;
}

void PrintTo(const TorchCase& c, std::ostream* out) { *out << c.name; }

class TorchReference : public ::testing::TestWithParam<TorchCase> {};

TEST_P(TorchReference, TwentyStepsGiveTheLossCurveAndParametersOfPyTorch) {
  if (!torch_available()) GTEST_SKIP() << kPython << " cannot import torch (apt install python3-torch to run this)";
  const TorchCase& c = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("dtr-torch-reference-" + std::to_string(::getpid()) + "-" + c.name);
  fs::create_directories(dir);
  const struct RemoveAtEnd {
    fs::path dir;
    ~RemoveAtEnd() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remove_at_end{dir};
  const fs::path in = dir / "in.dtr";
  const fs::path out = dir / "out.dtr";
  const Trained here = train_here(c, in);

  const std::string spec = "{\"model\": " + c.model_json + ", \"steps\": " + std::to_string(kSteps) +
                           ", \"lr\": " + std::to_string(c.lr) + ", \"label_smoothing\": " +
                           std::to_string(kLabelSmoothing) + ", \"clip_norm\": " + std::to_string(c.clip_norm) +
                           ", " + optimizer_json(c) + "}";
  // Relative to the checkout's root, where ctest runs this test.
  const std::string script = "bench/torch/reference.py";
  ASSERT_TRUE(fs::exists(script)) << script << " not found from " << fs::current_path()
                                  << ": run the test from the checkout's root (ctest does)";
  const dtr::test::Outcome run =
      dtr::test::run_command(std::string(kPython) + " " + dtr::test::shell_quote(script) + " " + c.name + " " +
                             dtr::test::shell_quote(spec) + " " + dtr::test::shell_quote(in.string()) + " " +
                             dtr::test::shell_quote(out.string()));
  ASSERT_EQ(run.status, 0) << run.output;

  Runtime rt;
  const StateDict theirs = read_state_dict(rt, out);
  ASSERT_FALSE(theirs.empty());
  ASSERT_EQ(theirs[0].first, "loss");
  const std::vector<double> losses = theirs[0].second.to_host_as<double>();
  ASSERT_EQ(losses.size(), here.losses.size());
  double worst_loss = 0;
  for (std::size_t step = 0; step < losses.size(); ++step) {
    worst_loss = std::max(worst_loss, std::abs(here.losses[step] - losses[step]) / (1 + std::abs(losses[step])));
    // float32 sums in other orders (PyTorch's kernels are not ours): measured at most 1.5e-7, compounded over the steps.
    EXPECT_NEAR(here.losses[step], losses[step], 2e-6 * (1 + std::abs(losses[step]))) << "step " << step;
  }
  // The training went somewhere: the curve is not flat, so equal curves say something.
  EXPECT_NE(losses.front(), losses.back());

  double worst_value = 0;
  ASSERT_EQ(theirs.size(), here.state.size() + 1) << "PyTorch's model lacks some of dtr's names";
  for (std::size_t i = 0; i < here.state.size(); ++i) {
    const auto& [name, values] = here.state[i];
    const auto found =
        std::find_if(theirs.begin(), theirs.end(), [&name = name](const auto& e) { return e.first == name; });
    ASSERT_NE(found, theirs.end()) << name;
    const std::vector<float> expected = found->second.to_host();
    ASSERT_EQ(expected.size(), values.size()) << name;
    double worst = 0;
    for (std::size_t k = 0; k < values.size(); ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(values[k]) - expected[k]) / (1 + std::abs(expected[k])));
    }
    // Measured at most 4.2e-4 (ResNet's first convolution) with PyTorch on the threaded OpenBLAS
    // (libopenblas0-pthread), whose sums run in other orders than the reference BLAS's.
    EXPECT_LE(worst, 1e-3) << name << ": the largest relative difference after " << kSteps << " steps";
    worst_value = std::max(worst_value, worst);
  }
  std::printf("%s: loss %.4f -> %.4f; largest relative difference from PyTorch: loss %.2e, values %.2e\n",
              c.name.c_str(), losses.front(), losses.back(), worst_loss, worst_value);
}

INSTANTIATE_TEST_SUITE_P(Zoo, TorchReference, ::testing::ValuesIn(torch_cases()),
                         [](const auto& info) { return info.param.name; });

// The paired epoch against PyTorch (bench/torch/baseline.py --paired) visits the images in dtr-train's order:
// the script's Python std::mt19937_64 and Fisher-Yates give train/dataset.cpp's epoch_order, element for element,
// for several seeds and epochs and Fashion-MNIST's 60,000 images.
TEST(TorchPairedEpoch, TheScriptsOrderIsDtrTrainsOrder) {
  if (!torch_available()) GTEST_SKIP() << kPython << " cannot import torch (apt install python3-torch to run this)";
  ASSERT_TRUE(fs::exists("bench/torch/baseline.py")) << "bench/torch/baseline.py not found from " << fs::current_path();
  for (const auto& [seed, epoch, count] : {std::tuple<std::uint64_t, std::int64_t, std::int64_t>{0, 0, 1000},
                                           {1, 0, 60000}, {7, 2, 60000}, {123456789, 1, 97}}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed << ", epoch " << epoch << ", count " << count);
    const std::string program = "import sys; sys.path.insert(0, 'bench/torch'); import baseline; "
                                "baseline.check_mt19937_64(); print(' '.join(str(i) for i in baseline.dtr_epoch_order(" +
                                std::to_string(seed) + ", " + std::to_string(epoch) + ", " + std::to_string(count) +
                                ").tolist()))";
    const auto result = dtr::test::run_command(std::string(kPython) + " -c " + dtr::test::shell_quote(program));
    ASSERT_EQ(result.status, 0) << result.output;
    std::vector<std::int64_t> script;
    std::istringstream words(result.output);
    for (std::int64_t i = 0; words >> i;) script.push_back(i);
    EXPECT_EQ(script, train::epoch_order(seed, epoch, count));
  }
}

}  // namespace
}  // namespace dtr::nn::test

// A training run (include/dtr/train/trainer.h).
#include "dtr/train/trainer.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "dtr/check.h"
#include "dtr/memory_resource.h"
#include "dtr/nn/checkpoint.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/state_dict.h"

namespace dtr::train {

namespace {

double default_lr(const std::string& optimizer) { return optimizer == "adam" ? 1e-3 : 0.05; }

std::int64_t optimizer_code(const std::string& optimizer) { return optimizer == "adam" ? 1 : 0; }

// The number of images of each class among `count` rows of `logits` [count, 10] whose argmax is the label.
std::int64_t count_correct(const std::vector<float>& logits, const std::int64_t* labels, std::int64_t count) {
  std::int64_t correct = 0;
  for (std::int64_t n = 0; n < count; ++n) {
    const float* row = logits.data() + n * kClasses;
    const auto best = std::max_element(row, row + kClasses) - row;
    correct += best == labels[n] ? 1 : 0;
  }
  return correct;
}

Tensor int64_scalar(Runtime& rt, std::int64_t value) {
  return rt.constant(TensorMeta{{}, DType::int64}, std::span(&value, 1));
}

}  // namespace

void check(const TrainOptions& o) {
  const std::vector<std::string> names = nn::model_names();
  if (std::find(names.begin(), names.end(), o.model) == names.end()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    DTR_THROW(InvalidArgument, "--model '", o.model, "' is not a zoo model (expected one of ", list, ")");
  }
  DTR_CHECK(o.batch > 0, InvalidArgument, "--batch ", o.batch, " (expected a positive number of images)");
  DTR_CHECK(o.optimizer == "sgd" || o.optimizer == "adam", InvalidArgument, "--optimizer '", o.optimizer,
            "' (expected sgd or adam)");
  DTR_CHECK(o.lr >= 0 && std::isfinite(o.lr), InvalidArgument, "--lr ", o.lr,
            " (expected a finite learning rate > 0, or 0 for the optimizer's default)");
  DTR_CHECK(o.checkpoint_segments >= -1, InvalidArgument, "checkpoint segments ", o.checkpoint_segments,
            " (expected none, or static[:SEGMENTS] with SEGMENTS > 0)");
  DTR_CHECK(o.zoo.depth >= 0 && o.zoo.width >= 0, InvalidArgument, "--depth ", o.zoo.depth, ", --width ",
            o.zoo.width, " (expected positive sizes, or 0 for the model's defaults)");
}

Trainer::Trainer(TrainOptions options, const Dataset& train) : options_(std::move(options)), train_(train) {
  check(options_);
  DTR_CHECK(train_.count >= options_.batch, InvalidArgument, "--batch ", options_.batch, " is more than the ",
            train_.count, " images of ", train_.name);
  // On the configured device (DTR_DEVICE): host memory on the CPU, the GPU's through its caching allocator.
  runtime_ = std::make_unique<Runtime>(options_.runtime, make_device_resource(options_.runtime.device));
  nn::Generator init(options_.seed);
  model_ = nn::make_model(*runtime_, init, options_.model, options_.zoo);
  model_->train();
  const double lr = options_.lr > 0 ? options_.lr : default_lr(options_.optimizer);
  if (options_.optimizer == "adam") {
    optimizer_ = std::make_unique<nn::Adam>(model_->parameters(), nn::AdamOptions{.lr = lr});
  } else {
    optimizer_ = std::make_unique<nn::SGD>(model_->parameters(),
                                           nn::SGDOptions{.lr = lr, .momentum = 0.9, .weight_decay = 5e-4});
  }
}

Trainer::~Trainer() {
  // The model's and the optimizer's tensors before their runtime.
  optimizer_.reset();
  model_.reset();
}

std::int64_t Trainer::steps_per_epoch() const { return train_.count / options_.batch; }

StepResult Trainer::step() {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.epoch = steps_done_ / steps_per_epoch();
  result.step_in_epoch = steps_done_ % steps_per_epoch();
  if (order_epoch_ != result.epoch) {
    order_ = epoch_order(options_.seed, result.epoch, train_.count);
    order_epoch_ = result.epoch;
  }
  const std::int64_t n = options_.batch;
  std::vector<float> pixels(static_cast<std::size_t>(n * kImagePixels));
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t image = order_[static_cast<std::size_t>(result.step_in_epoch * n + i)];
    std::memcpy(pixels.data() + i * kImagePixels, train_.images.data() + image * kImagePixels,
                sizeof(float) * kImagePixels);
    labels[static_cast<std::size_t>(i)] = train_.labels[static_cast<std::size_t>(image)];
  }
  Runtime& rt = *runtime_;
  optimizer_->zero_grad(/*set_to_none=*/true);
  {
    const nn::Variable x = nn::constant(rt, {n, 1, kImageSide, kImageSide}, pixels);
    const nn::Variable y(rt, rt.constant(TensorMeta{{n}, DType::int64}, labels));
    const nn::Variable logits = options_.checkpoint_segments >= 0
                                    ? nn::checkpoint_model(*model_, options_.checkpoint_segments, x)
                                    : model_->forward(x);
    result.correct = count_correct(logits.to_host(), labels.data(), n);  // before backward: still resident
    const nn::Variable loss = nn::cross_entropy(logits, y);
    result.loss = loss.to_host().at(0);
    loss.backward();
  }
  optimizer_->step();
  steps_done_ += 1;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

double Trainer::evaluate(const Dataset& data) {
  DTR_CHECK(data.count > 0, InvalidArgument, "evaluate: ", data.name, " holds no images");
  Runtime& rt = *runtime_;
  model_->eval();
  std::int64_t correct = 0;
  {
    const nn::NoGrad no_grad;
    for (std::int64_t first = 0; first < data.count; first += options_.batch) {
      const std::int64_t n = std::min(options_.batch, data.count - first);
      const std::span<const float> pixels(data.images.data() + first * kImagePixels,
                                          static_cast<std::size_t>(n * kImagePixels));
      const nn::Variable x = nn::constant(rt, {n, 1, kImageSide, kImageSide}, pixels);
      correct += count_correct(model_->forward(x).to_host(), data.labels.data() + first, n);
    }
  }
  model_->train();
  return static_cast<double>(correct) / static_cast<double>(data.count);
}

void Trainer::save(const std::filesystem::path& path) const {
  Runtime& rt = *runtime_;
  nn::StateDict dict;
  for (auto& [name, value] : nn::state_dict(*model_)) dict.emplace_back("model." + name, value);
  for (auto& [name, value] : optimizer_->state_dict()) dict.emplace_back("optimizer." + name, value);
  dict.emplace_back("trainer.steps", int64_scalar(rt, steps_done_));
  dict.emplace_back("trainer.random_state", int64_scalar(rt, std::bit_cast<std::int64_t>(rt.random_state())));
  dict.emplace_back("trainer.seed", int64_scalar(rt, std::bit_cast<std::int64_t>(options_.seed)));
  dict.emplace_back("trainer.batch", int64_scalar(rt, options_.batch));
  dict.emplace_back("trainer.optimizer", int64_scalar(rt, optimizer_code(options_.optimizer)));
  nn::save_state_dict(dict, path);
}

void Trainer::load(const std::filesystem::path& path) {
  Runtime& rt = *runtime_;
  const nn::StateDict dict = nn::read_state_dict(rt, path);
  nn::StateDict model;
  std::vector<std::pair<std::string, Tensor>> optimizer;
  std::map<std::string, std::int64_t> trainer;
  for (const auto& [name, value] : dict) {
    if (name.rfind("model.", 0) == 0) {
      model.emplace_back(name.substr(6), value);
    } else if (name.rfind("optimizer.", 0) == 0) {
      optimizer.emplace_back(name.substr(10), value);
    } else if (name.rfind("trainer.", 0) == 0 && value.meta() == TensorMeta{{}, DType::int64}) {
      trainer[name.substr(8)] = value.to_host_as<std::int64_t>().at(0);
    } else {
      DTR_THROW(InvalidArgument, "--load '", path.string(), "': entry '", name,
                "' is not one dtr-train saves (model.*, optimizer.*, trainer.* int64 scalars)");
    }
  }
  for (const char* key : {"steps", "random_state", "seed", "batch", "optimizer"}) {
    DTR_CHECK(trainer.count(key) == 1, InvalidArgument, "--load '", path.string(), "' has no trainer.", key,
              ": not a file dtr-train saved with --save");
  }
  const auto differs = [&](const char* option, std::int64_t saved, std::int64_t here, const std::string& shown_saved,
                           const std::string& shown_here) {
    DTR_CHECK(saved == here, InvalidArgument, "--load '", path.string(), "' was saved by a run with --", option, " ",
              shown_saved, ", this run has --", option, " ", shown_here,
              ": the next steps would not be the ones it stopped before; pass the same");
  };
  const auto seed = std::bit_cast<std::uint64_t>(trainer["seed"]);
  differs("seed", trainer["seed"], std::bit_cast<std::int64_t>(options_.seed), std::to_string(seed),
          std::to_string(options_.seed));
  differs("batch", trainer["batch"], options_.batch, std::to_string(trainer["batch"]), std::to_string(options_.batch));
  differs("optimizer", trainer["optimizer"], optimizer_code(options_.optimizer),
          trainer["optimizer"] == 1 ? "adam" : "sgd", options_.optimizer);
  DTR_CHECK(trainer["steps"] >= 0, InvalidArgument, "--load '", path.string(), "': trainer.steps is ",
            trainer["steps"]);
  optimizer_->load_state_dict(optimizer);  // each checks everything before it changes anything
  nn::load_state_dict(*model_, model, /*strict=*/true);
  steps_done_ = trainer["steps"];
  rt.set_random_state(std::bit_cast<std::uint64_t>(trainer["random_state"]));
  order_epoch_ = -1;
}

}  // namespace dtr::train

// A training run of a zoo model (include/dtr/nn/models.h) on a dataset: what dtr-train runs, one runtime per
// run. The model, its initial parameters, the data order and dropout's draws follow from the seed alone, so
// two runs of the same options compute the same steps: under any budget, heuristic or static checkpointing,
// every loss and parameter is bitwise the same.
//
// Ownership: a Trainer owns its runtime, model and optimizer, and reads the dataset it was given (which must
// outlive it). Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dtr/config.h"
#include "dtr/nn/models.h"
#include "dtr/nn/optim.h"
#include "dtr/runtime.h"
#include "dtr/train/dataset.h"

namespace dtr::train {

struct TrainOptions {
  std::string model = "resnet";  // a zoo name (nn::model_names())
  nn::ZooOptions zoo{};          // depth, width, dropout (0: the model's defaults)
  std::int64_t batch = 128;
  std::string optimizer = "sgd";  // "sgd": momentum 0.9, weight decay 5e-4; "adam"
  double lr = 0;                  // 0: 0.05 for sgd, 1e-3 for adam
  std::uint64_t seed = 0;         // initialisation, the data order, dropout's masks
  // -1: none; 0: nn::checkpoint_model with round(√N) segments (Chen et al.: of the modules, or of an LSTM's time
  // steps); K > 0: K segments.
  std::int64_t checkpoint_segments = -1;
  Config runtime;  // the runtime's configuration: budget, heuristic, cost model, DTR_TRACE, ...
};

// Checks the options that do not need a runtime (model name, batch, optimizer, lr, segments), throwing
// dtr::InvalidArgument naming the option and the accepted values.
void check(const TrainOptions& options);

struct StepResult {
  float loss = 0;
  double seconds = 0;     // wall time of the step: batch upload, forward, backward, optimizer
  std::int64_t epoch = 0;  // the epoch and step within it that this step was
  std::int64_t step_in_epoch = 0;
  std::int64_t correct = 0;  // training images of the batch classified right (the logits of this step)
};

class Trainer {
 public:
  // Builds the runtime, the model (from options.seed) and the optimizer. `train` is the training set, read at
  // each step; it must hold at least one batch. Throws what check() throws, and the runtime's errors.
  Trainer(TrainOptions options, const Dataset& train);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One step on the next `batch` images of the epoch's order (a partial batch at an epoch's end is dropped:
  // the next epoch starts). Throws dtr::OutOfMemory or dtr::Thrashing when the budget cannot hold a step;
  // the runtime and this trainer are then at an undefined point of the step, fit only to be destroyed.
  StepResult step();

  // Accuracy (0 to 1) of the model on `data`, in evaluation mode and without gradients, in batches of
  // options.batch; training mode again afterwards.
  double evaluate(const Dataset& data);

  // The training state, so that a run stopped after step k and resumed from the file computes the steps a run
  // that never stopped computes: parameters and buffers, the optimizer's state, the step count, and the
  // runtime's random state, in dtr's state-dict format (docs/state-dict.md), keys "model.*", "optimizer.*",
  // "trainer.*". load() checks the file's model, batch, seed and optimizer against this run's (they decide
  // what the next steps compute) and refuses another with dtr::InvalidArgument naming both; file errors are
  // dtr::IoError (state_dict.h).
  void save(const std::filesystem::path& path) const;
  void load(const std::filesystem::path& path);

  std::int64_t steps_done() const { return steps_done_; }
  std::int64_t steps_per_epoch() const;
  const TrainOptions& options() const { return options_; }
  Runtime& runtime() { return *runtime_; }
  nn::Sequential& model() { return *model_; }
  nn::Optimizer& optimizer() { return *optimizer_; }

 private:
  TrainOptions options_;
  const Dataset& train_;
  std::unique_ptr<Runtime> runtime_;
  std::shared_ptr<nn::Sequential> model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::int64_t steps_done_ = 0;
  std::int64_t order_epoch_ = -1;  // the epoch whose order is in order_
  std::vector<std::int64_t> order_;
};

}  // namespace dtr::train

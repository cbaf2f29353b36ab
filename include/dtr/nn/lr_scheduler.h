// Learning-rate schedules (PyTorch 1.13's torch.optim.lr_scheduler: StepLR, CosineAnnealingLR) in their closed
// forms: the rate at epoch e is a function of e and the optimizer's rate when the scheduler was made (lr0), so
// a schedule never drifts by accumulated rounding.
//
// Ownership: a scheduler refers to its optimizer, which must outlive it. Thread safety: one thread at a time,
// as the optimizer's runtime.
#pragma once

#include <cstdint>

#include "dtr/nn/optim.h"

namespace dtr::nn {

// The common part: the epoch counter and the optimizer whose rate it sets.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // Not copyable: two copies would both move the optimizer's rate.
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // One epoch on: called once per epoch, after optimizer.step() (as PyTorch); sets the optimizer's rate to
  // the rate of the new epoch.
  void step();
  // The rate this scheduler set last (lr0 before the first step()).
  double last_lr() const { return last_lr_; }
  // Epochs stepped so far (0 when made).
  std::int64_t last_epoch() const { return epoch_; }

 protected:
  // lr0 is the optimizer's rate now.
  explicit LRScheduler(Optimizer& optimizer);
  // The rate at `epoch` (>= 0); lr_at(0) is lr0.
  virtual double lr_at(std::int64_t epoch) const = 0;
  // lr0.
  double base_lr() const { return base_lr_; }

 private:
  Optimizer& optimizer_;
  double base_lr_;
  double last_lr_;
  std::int64_t epoch_ = 0;
};

// lr0 · gamma^⌊epoch / step_size⌋. dtr::InvalidArgument unless step_size >= 1 and gamma > 0 (finite).
class StepLR : public LRScheduler {
 public:
  // Refers to `optimizer` (which must outlive it); its rate now is lr0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);

 protected:
  // The closed form above.
  double lr_at(std::int64_t epoch) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

// eta_min + (lr0 - eta_min)(1 + cos(π · epoch / t_max)) / 2: lr0 at epoch 0, eta_min at t_max, rising again
// past it (as PyTorch without restarts). dtr::InvalidArgument unless t_max >= 1 and eta_min >= 0 (finite).
class CosineAnnealingLR : public LRScheduler {
 public:
  // Refers to `optimizer` (which must outlive it); its rate now is lr0.
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0.0);

 protected:
  // The closed form above.
  double lr_at(std::int64_t epoch) const override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

}  // namespace dtr::nn

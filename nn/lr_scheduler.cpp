// Learning-rate schedules (include/dtr/nn/lr_scheduler.h).
#include "dtr/nn/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "dtr/check.h"

namespace dtr::nn {

LRScheduler::LRScheduler(Optimizer& optimizer)
    : optimizer_(optimizer), base_lr_(optimizer.lr()), last_lr_(optimizer.lr()) {}

void LRScheduler::step() {
  const double lr = lr_at(epoch_ + 1);
  optimizer_.set_lr(lr);  // before the epoch moves on: a refused rate leaves the scheduler as it was
  ++epoch_;
  last_lr_ = lr;
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  DTR_CHECK(step_size >= 1, InvalidArgument, "StepLR: step_size must be >= 1, got ", step_size);
  DTR_CHECK(gamma > 0.0 && std::isfinite(gamma), InvalidArgument, "StepLR: gamma must be > 0 and finite, got ",
            gamma);
}

double StepLR::lr_at(std::int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  DTR_CHECK(t_max >= 1, InvalidArgument, "CosineAnnealingLR: t_max must be >= 1, got ", t_max);
  DTR_CHECK(eta_min >= 0.0 && std::isfinite(eta_min), InvalidArgument,
            "CosineAnnealingLR: eta_min must be >= 0 and finite, got ", eta_min);
}

double CosineAnnealingLR::lr_at(std::int64_t epoch) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr() - eta_min_) * (1.0 + std::cos(phase)) / 2.0;
}

}  // namespace dtr::nn

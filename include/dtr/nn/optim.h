// Optimizers (PyTorch 1.13's torch.optim: SGD, Adam, AdamW) and gradient clipping (torch.nn.utils.
// clip_grad_norm_). Every update is one op of the table (include/dtr/ops.h: sgd_momentum_buffer, sgd_apply,
// adam_moment1, adam_moment2, adam_apply, scale) applied with Runtime::assign: copy-on-write, so values computed
// from an old parameter still recompute from it, and deterministic kernels, so training is bitwise repeatable.
// Parameters and state stay runtime constants (assign keeps a constant target a constant): never evicted.
//
// Ownership: an optimizer shares its parameters (variables) with the model and owns its state tensors, which
// must not outlive the parameters' runtime. Thread safety: one thread at a time, as the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtr/nn/autograd.h"

namespace dtr::nn {

// The common part of every optimizer: the parameters, the learning rate, and the per-parameter state.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Not copyable: two copies would step the same parameters with separate state.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose gradient is defined (the others are skipped and keep their state,
  // as PyTorch). Reads the gradients, does not clear them. Throws what the runtime throws (OutOfMemory);
  // parameters updated before the throw stay updated.
  virtual void step() = 0;

  // Every defined gradient replaced by a fresh zero constant (a gradient another variable shares is left
  // alone), or dropped when `set_to_none`: Module::zero_grad over this optimizer's parameters.
  void zero_grad(bool set_to_none = false);

  // The learning rate the next step uses (a scheduler's set_lr changes it). set_lr: dtr::InvalidArgument
  // unless lr >= 0.
  double lr() const { return lr_; }
  void set_lr(double lr);

  // The state tensors made so far, named "<parameter index>.<name>" ("0.momentum_buffer", "3.exp_avg",
  // "3.exp_avg_sq"), by parameter index then creation order: for tests and checkpoints. The tensors are copies
  // of the optimizer's handles, so they see later steps' updates.
  std::vector<std::pair<std::string, Tensor>> named_state() const;

  // The parameters, in the order given (the index in state names).
  const std::vector<Variable>& parameters() const { return parameters_; }

  // Everything a later step reads, for a checkpoint (PyTorch's optimizer.state_dict()): named_state(), plus
  // counters as int64 scalars ("<index>.step": Adam's per-parameter step). load_state_dict puts such a list
  // back, each tensor copied into the parameters' runtime, after checking every entry: dtr::InvalidArgument
  // for a name that is not "<parameter index>.<a state this optimizer keeps>" or an index past the
  // parameters, dtr::ShapeError for a tensor of another shape or dtype than its parameter (an int64 scalar
  // for a counter). On a throw nothing has changed. The learning rate is not part of it (a schedule sets it).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& given);

 protected:
  // Checks the parameters (not empty; each defined, a leaf, requiring a gradient, not a view, given once)
  // and lr >= 0, throwing dtr::InvalidArgument naming `name` (the optimizer) and what is wrong.
  Optimizer(std::string name, std::vector<Variable> parameters, double lr);

  // Parameter `index`'s state tensor `name`, made a zero constant of the parameter's meta on first use (lazy,
  // as PyTorch's state: a parameter never stepped has none). The reference stays valid as long as the
  // optimizer (a deque per parameter), so a step may hold several.
  Tensor& state(std::size_t index, const std::string& name);

  // Throws dtr::InvalidArgument "<optimizer>: option '<option>' must be <range>, got <value>" unless `valid`.
  void check_option(bool valid, const char* option, const char* range, double value) const;

  // The names of the state tensors and of the counters this optimizer keeps per parameter (load_state_dict
  // accepts these), and a counter's value and its setter.
  virtual std::vector<std::string> state_names() const = 0;
  virtual std::vector<std::string> counter_names() const { return {}; }
  virtual std::int64_t counter(std::size_t /*index*/, const std::string& /*name*/) const { return 0; }
  virtual void set_counter(std::size_t /*index*/, const std::string& /*name*/, std::int64_t /*value*/) {}

 private:
  std::string name_;
  std::vector<Variable> parameters_;
  double lr_;
  std::vector<std::deque<std::pair<std::string, Tensor>>> state_;  // per parameter, in creation order
};

// torch.optim.SGD without dampening. lr has no default (as PyTorch 1.13): NaN until given, refused.
struct SGDOptions {
  double lr = std::numeric_limits<double>::quiet_NaN();
  double momentum = 0.0;      // >= 0
  double weight_decay = 0.0;  // >= 0, L2 (added to the gradient)
  bool nesterov = false;      // needs momentum > 0
};

// With momentum: per parameter, b = momentum·b + (g + wd·p) (sgd_momentum_buffer, b from zeros, which at the
// first step gives PyTorch's b = g + wd·p exactly), then p -= lr·b, or with Nesterov p -= lr·(g + wd·p +
// momentum·b) (sgd_apply). State: "momentum_buffer". Without momentum, no state, and the cheapest exact
// composition: p -= lr·g is one sgd_apply with the gradient as the buffer; with weight decay, d = 0·p + (g +
// wd·p) (sgd_momentum_buffer at momentum 0, p as its buffer) then p -= lr·d: one temporary, two ops.
class SGD : public Optimizer {
 public:
  // dtr::InvalidArgument for a negative (or NaN) lr, momentum or weight_decay, Nesterov without momentum, or
  // bad parameters (Optimizer's constructor).
  SGD(std::vector<Variable> parameters, SGDOptions options);
  // The update above for every parameter with a gradient.
  void step() override;
  // The options as given (lr as given too: the current rate is lr()).
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 private:
  SGDOptions options_;
};

// torch.optim.Adam (amsgrad off); weight_decay is L2, added to the gradient.
struct AdamOptions {
  double lr = 1e-3;           // >= 0
  double beta1 = 0.9;         // in [0, 1)
  double beta2 = 0.999;       // in [0, 1)
  double eps = 1e-8;          // >= 0
  double weight_decay = 0.0;  // >= 0
};

// Per parameter: m = beta1·m + (1 - beta1)·g, v = beta2·v + (1 - beta2)·g² (adam_moment1/2, g + wd·p for g
// with L2), p -= lr/(1 - beta1^t) · m / (√v/√(1 - beta2^t) + eps) (adam_apply). State: "exp_avg",
// "exp_avg_sq". The step t counts from 1 per parameter, as PyTorch's state["step"]: a parameter skipped (no
// gradient) does not advance it, so its bias correction starts at its own first step.
class Adam : public Optimizer {
 public:
  // dtr::InvalidArgument for lr, eps or weight_decay negative (or NaN), a beta outside [0, 1), or bad
  // parameters.
  Adam(std::vector<Variable> parameters, AdamOptions options = {});
  // The update above for every parameter with a gradient.
  void step() override;
  // The options as given (lr as given too: the current rate is lr()).
  const AdamOptions& options() const { return options_; }
  // The steps parameter `index` has taken (0 before its first); dtr::InvalidArgument past the parameters.
  std::int64_t step_count(std::size_t index) const;

 protected:
  // `decoupled`: AdamW's weight decay (p *= 1 - lr·wd before the step, no L2 in the moments).
  Adam(std::string name, std::vector<Variable> parameters, AdamOptions options, bool decoupled);

  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::vector<std::string> counter_names() const override { return {"step"}; }
  std::int64_t counter(std::size_t index, const std::string& name) const override;
  void set_counter(std::size_t index, const std::string& name, std::int64_t value) override;

 private:
  void check_options() const;

  AdamOptions options_;
  bool decoupled_;
  std::vector<std::int64_t> steps_;  // per parameter
};

// torch.optim.AdamW: Adam's options with weight_decay 1e-2 by default, decoupled.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// Per parameter with a gradient: p = p · (1 - lr·wd) (ops::scale through Runtime::assign; skipped when wd is
// 0, where it is the identity), then Adam's step without L2.
class AdamW : public Adam {
 public:
  // The same checks as Adam.
  AdamW(std::vector<Variable> parameters, AdamWOptions options = {});
};

// torch.nn.utils.clip_grad_norm_ with the 2-norm: total = sqrt(Σ over parameters of sum(g·g)) (ops::mul and
// ops::sum on the runtime, each parameter's sum read to the host and added in double). When max_norm / (total +
// 1e-6) < 1, every gradient is replaced (Variable::set_grad: a gradient may be shared between leaves, so it is
// not updated in place) by ops::scale(g, that coefficient). Returns the total. Parameters without a gradient
// are skipped. A non-finite total (an inf or NaN in a gradient) is returned and nothing is scaled, unlike
// PyTorch 1.13, which would multiply every gradient by NaN or 0: the caller sees it and can skip the step.
// dtr::InvalidArgument unless max_norm > 0.
double clip_grad_norm(std::span<const Variable> parameters, double max_norm);

}  // namespace dtr::nn

// Optimizers and gradient clipping (include/dtr/nn/optim.h).
#include "dtr/nn/optim.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "dtr/check.h"
#include "dtr/ops.h"

namespace dtr::nn {

// ---- Optimizer ----

Optimizer::Optimizer(std::string name, std::vector<Variable> parameters, double lr)
    : name_(std::move(name)), parameters_(std::move(parameters)), lr_(lr), state_(parameters_.size()) {
  DTR_CHECK(!parameters_.empty(), InvalidArgument, name_, ": the parameter list is empty");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Variable& p = parameters_[i];
    DTR_CHECK(p.defined(), InvalidArgument, name_, ": parameter ", i, " is undefined");
    DTR_CHECK(p.is_leaf(), InvalidArgument, name_, ": parameter ", i, " is not a leaf (detach() it first)");
    DTR_CHECK(p.requires_grad(), InvalidArgument, name_, ": parameter ", i, " does not require a gradient");
    // Runtime::assign cannot update a view in place; say so now rather than at the first step.
    DTR_CHECK(!p.data().is_view(), InvalidArgument, name_, ": parameter ", i, " is a view of another tensor");
    // Given twice, it would be stepped twice per step() (PyTorch 1.13 only warns).
    for (std::size_t j = 0; j < i; ++j) {
      DTR_CHECK(parameters_[j].impl() != p.impl(), InvalidArgument, name_, ": parameter ", i,
                " is parameter ", j, " again");
    }
  }
  check_option(lr >= 0.0, "lr", ">= 0", lr);
}

void Optimizer::check_option(bool valid, const char* option, const char* range, double value) const {
  DTR_CHECK(valid, InvalidArgument, name_, ": option '", option, "' must be ", range, ", got ", value);
}

void Optimizer::set_lr(double lr) {
  check_option(lr >= 0.0, "lr", ">= 0", lr);
  lr_ = lr;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Variable& p : parameters_) {
    if (!p.grad().defined()) continue;
    p.set_grad(set_to_none ? Tensor() : p.runtime().constant(p.meta()));
  }
}

std::vector<std::pair<std::string, Tensor>> Optimizer::named_state() const {
  std::vector<std::pair<std::string, Tensor>> result;
  for (std::size_t i = 0; i < state_.size(); ++i) {
    for (const auto& [name, tensor] : state_[i]) result.emplace_back(std::to_string(i) + "." + name, tensor);
  }
  return result;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> result = named_state();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    for (const std::string& name : counter_names()) {
      const std::int64_t value = counter(i, name);
      result.emplace_back(std::to_string(i) + "." + name,
                          parameters_[i].runtime().constant(TensorMeta{{}, DType::int64}, std::span(&value, 1)));
    }
  }
  return result;
}

void Optimizer::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& given) {
  const std::vector<std::string> tensors = state_names();
  const std::vector<std::string> counters = counter_names();
  std::string kept;
  for (const std::string& n : tensors) kept += (kept.empty() ? "" : ", ") + n;
  for (const std::string& n : counters) kept += (kept.empty() ? "" : ", ") + n;
  struct Entry {
    std::size_t index;
    std::string name;
    const Tensor* value;
    bool counter;
  };
  std::vector<Entry> entries;
  for (const auto& [key, value] : given) {
    const std::size_t dot = key.find('.');
    std::size_t index = 0;
    const char* digits_end = key.data() + std::min(dot, key.size());
    const auto [end, error] = std::from_chars(key.data(), digits_end, index);
    const std::string name = dot == std::string::npos ? "" : key.substr(dot + 1);
    const bool is_counter = std::find(counters.begin(), counters.end(), name) != counters.end();
    const bool known = is_counter || std::find(tensors.begin(), tensors.end(), name) != tensors.end();
    DTR_CHECK(error == std::errc() && end == digits_end && dot != std::string::npos && index < parameters_.size() &&
                  known && value.defined(),
              InvalidArgument, name_, ": load_state_dict: no state '", key, "' (expected '<parameter index>.<name>' with ",
              parameters_.size(), " parameters, names: ", kept, ")");
    const TensorMeta expected = is_counter ? TensorMeta{{}, DType::int64} : parameters_[index].meta();
    DTR_CHECK(value.meta() == expected, ShapeError, name_, ": load_state_dict: '", key, "' is ",
              to_string(value.meta().dtype), " ", to_string(value.shape()), ", expected ", to_string(expected.dtype),
              " ", to_string(expected.shape));
    entries.push_back({index, name, &value, is_counter});
  }
  for (const Entry& e : entries) {
    if (e.counter) {
      set_counter(e.index, e.name, e.value->to_host_as<std::int64_t>().at(0));
      continue;
    }
    Runtime& rt = parameters_[e.index].runtime();
    const TensorMeta& meta = e.value->meta();
    state(e.index, e.name) = meta.dtype == DType::float64 ? rt.constant(meta, e.value->to_host_as<double>())
                                                          : rt.constant(meta, e.value->to_host_as<float>());
  }
}

Tensor& Optimizer::state(std::size_t index, const std::string& name) {
  auto& entries = state_.at(index);
  for (auto& [existing, tensor] : entries) {
    if (existing == name) return tensor;
  }
  const Variable& p = parameters_[index];
  return entries.emplace_back(name, p.runtime().constant(p.meta())).second;
}

// ---- SGD ----

namespace {

// Checked before the base class's checks so that the missing lr gets its own message.
double sgd_lr(const SGDOptions& options) {
  DTR_CHECK(options.lr >= 0.0, InvalidArgument, "SGD: option 'lr' must be given (it has no default, as in ",
            "torch.optim.SGD) and >= 0, got ", options.lr);
  return options.lr;
}

}  // namespace

SGD::SGD(std::vector<Variable> parameters, SGDOptions options)
    : Optimizer("SGD", std::move(parameters), sgd_lr(options)), options_(options) {
  check_option(options.momentum >= 0.0, "momentum", ">= 0", options.momentum);
  check_option(options.weight_decay >= 0.0, "weight_decay", ">= 0", options.weight_decay);
  check_option(!options.nesterov || options.momentum > 0.0, "momentum", "> 0 with nesterov", options.momentum);
}

void SGD::step() {
  const double momentum = options_.momentum;
  const double decay = options_.weight_decay;
  // Built once a step, not once a parameter: every update of the step takes the same attributes.
  const Attrs apply_attrs{{"lr", lr()}};
  const Attrs buffer_attrs{{"momentum", momentum}, {"weight_decay", decay}};
  for (std::size_t i = 0; i < parameters().size(); ++i) {
    const Variable& p = parameters()[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    Runtime& rt = p.runtime();
    Tensor param = p.data();  // a copy of the handle: assign updates every copy, the variable's included
    if (momentum == 0.0) {
      if (decay == 0.0) {
        rt.assign(param, ops::sgd_apply(), {param, g}, apply_attrs);
      } else {
        // 0·p + (g + wd·p): the 0·p term is ±0 for a finite p (NaN for a non-finite one, where the update
        // gives NaN anyway), so d is g + wd·p exactly.
        const Tensor d =
            rt.call1(ops::sgd_momentum_buffer(), {param, g, param}, {{"momentum", 0.0}, {"weight_decay", decay}});
        rt.assign(param, ops::sgd_apply(), {param, d}, apply_attrs);
      }
      continue;
    }
    Tensor& buffer = state(i, "momentum_buffer");
    if (decay == 0.0) {
      rt.assign(buffer, ops::sgd_momentum_buffer(), {buffer, g}, buffer_attrs);
    } else {
      rt.assign(buffer, ops::sgd_momentum_buffer(), {buffer, g, param}, buffer_attrs);
    }
    if (options_.nesterov) {
      rt.assign(param, ops::sgd_apply(), {param, buffer, g},
                {{"lr", lr()}, {"nesterov", std::int64_t{1}}, {"momentum", momentum}, {"weight_decay", decay}});
    } else {
      rt.assign(param, ops::sgd_apply(), {param, buffer}, apply_attrs);
    }
  }
}

// ---- Adam, AdamW ----

Adam::Adam(std::vector<Variable> parameters, AdamOptions options)
    : Adam("Adam", std::move(parameters), options, false) {}

Adam::Adam(std::string name, std::vector<Variable> parameters, AdamOptions options, bool decoupled)
    : Optimizer(std::move(name), std::move(parameters), options.lr),
      options_(options),
      decoupled_(decoupled),
      steps_(this->parameters().size(), 0) {
  check_options();
}

void Adam::check_options() const {
  const auto unit = [](double v) { return v >= 0.0 && v < 1.0; };
  check_option(unit(options_.beta1), "beta1", "in [0, 1)", options_.beta1);
  check_option(unit(options_.beta2), "beta2", "in [0, 1)", options_.beta2);
  check_option(options_.eps >= 0.0, "eps", ">= 0", options_.eps);
  check_option(options_.weight_decay >= 0.0, "weight_decay", ">= 0", options_.weight_decay);
}

std::int64_t Adam::counter(std::size_t index, const std::string& /*name "step"*/) const { return steps_.at(index); }

void Adam::set_counter(std::size_t index, const std::string& /*name "step"*/, std::int64_t value) {
  steps_.at(index) = value;
}

std::int64_t Adam::step_count(std::size_t index) const {
  DTR_CHECK(index < steps_.size(), InvalidArgument, "step_count: parameter ", index, " of ", steps_.size());
  return steps_[index];
}

void Adam::step() {
  const double decay = options_.weight_decay;
  // L2 goes into the moments; AdamW's decoupled decay goes into the parameter before them.
  const double l2 = decoupled_ ? 0.0 : decay;
  const Attrs moment_attrs{{"beta1", options_.beta1}, {"beta2", options_.beta2}, {"weight_decay", l2}};
  for (std::size_t i = 0; i < parameters().size(); ++i) {
    const Variable& p = parameters()[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    Runtime& rt = p.runtime();
    Tensor param = p.data();  // a copy of the handle: assign updates every copy, the variable's included
    Tensor& m = state(i, "exp_avg");
    Tensor& v = state(i, "exp_avg_sq");
    const std::int64_t step = ++steps_[i];
    if (decoupled_ && decay != 0.0) rt.assign(param, ops::scale(), {param}, {{"factor", 1.0 - lr() * decay}});
    if (l2 == 0.0) {
      rt.assign(m, ops::adam_moment1(), {m, g}, moment_attrs);
      rt.assign(v, ops::adam_moment2(), {v, g}, moment_attrs);
    } else {
      rt.assign(m, ops::adam_moment1(), {m, g, param}, moment_attrs);
      rt.assign(v, ops::adam_moment2(), {v, g, param}, moment_attrs);
    }
    rt.assign(param, ops::adam_apply(), {param, m, v},
              {{"lr", lr()}, {"beta1", options_.beta1}, {"beta2", options_.beta2}, {"eps", options_.eps},
               {"step", step}});
  }
}

namespace {

AdamOptions adam_options(const AdamWOptions& o) {
  return {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

}  // namespace

AdamW::AdamW(std::vector<Variable> parameters, AdamWOptions options)
    : Adam("AdamW", std::move(parameters), adam_options(options), true) {}

// ---- clipping ----

double clip_grad_norm(std::span<const Variable> parameters, double max_norm) {
  DTR_CHECK(max_norm > 0.0, InvalidArgument, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  double squares = 0.0;
  for (const Variable& p : parameters) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    Runtime& rt = p.runtime();
    const Tensor s = rt.call1(ops::sum(), {rt.call1(ops::mul(), {g, g})});
    squares += s.meta().dtype == DType::float64 ? s.to_host_as<double>().at(0) : s.to_host_as<float>().at(0);
  }
  const double total = std::sqrt(squares);
  if (!std::isfinite(total)) return total;  // nothing scaled: see the header
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient >= 1.0) return total;  // PyTorch clamps it to 1: the identity
  for (const Variable& p : parameters) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    Variable target = p;  // a copy shares the variable: set_grad is seen by the caller's
    target.set_grad(p.runtime().call1(ops::scale(), {g}, {{"factor", coefficient}}));
  }
  return total;
}

}  // namespace dtr::nn

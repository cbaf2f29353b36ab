// The optimizer update steps, SGD with momentum and Adam as PyTorch defines them, split into one op per new
// value (a momentum buffer, a moment, a parameter) so that each is applied with Runtime::assign, the
// runtime's copy-on-write in-place update. Not differentiable. Each is elementwise over inputs of one shape
// and floating dtype; attributes are read and checked in double, then applied in the tensors' dtype.
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/elementwise_attrs.h"
#include "kernels/op_checks.h"

namespace dtr::kernels {
namespace {

// An attribute's value when it is valid; InvalidArgument naming the op, the attribute and the requirement.
double real(std::string_view op, const Attrs& attrs, const char* name, bool valid(double), const char* requirement,
            std::optional<double> fallback = std::nullopt) {
  const double value = !attrs.has(name) && fallback ? *fallback : attrs.get_real(name);
  DTR_CHECK(valid(value), InvalidArgument, "op '", op, "' needs attribute '", name, "' ", requirement, ", got ", value);
  return value;
}
bool non_negative(double v) { return v >= 0.0; }  // false for NaN too
bool unit_interval(double v) { return v >= 0.0 && v < 1.0; }
bool positive(double v) { return v > 0.0; }

double weight_decay(std::string_view op, const Attrs& attrs) {
  return real(op, attrs, "weight_decay", non_negative, ">= 0", 0.0);
}

bool nesterov(const Attrs& attrs) { return attrs.has("nesterov") && attrs.get_int("nesterov") != 0; }

}  // namespace

SgdMomentumBuffer sgd_momentum_buffer_step(const Attrs& attrs) {
  return {.momentum = real("sgd_momentum_buffer", attrs, "momentum", non_negative, ">= 0"),
          .decay = weight_decay("sgd_momentum_buffer", attrs)};
}

SgdApply sgd_apply_step(const Attrs& attrs) {
  SgdApply step{.lr = real("sgd_apply", attrs, "lr", non_negative, ">= 0"), .nesterov = nesterov(attrs)};
  if (step.nesterov) {
    step.momentum = real("sgd_apply", attrs, "momentum", positive, "> 0 with nesterov");
    step.decay = weight_decay("sgd_apply", attrs);
  }
  return step;
}

AdamMoment1 adam_moment1_step(const Attrs& attrs) {
  return {.beta1 = real("adam_moment1", attrs, "beta1", unit_interval, "in [0, 1)", 0.9),
          .decay = weight_decay("adam_moment1", attrs)};
}

AdamMoment2 adam_moment2_step(const Attrs& attrs) {
  return {.beta2 = real("adam_moment2", attrs, "beta2", unit_interval, "in [0, 1)", 0.999),
          .decay = weight_decay("adam_moment2", attrs)};
}

AdamApply adam_apply_step(const Attrs& attrs) {
  const double lr = real("adam_apply", attrs, "lr", non_negative, ">= 0");
  const double beta1 = real("adam_apply", attrs, "beta1", unit_interval, "in [0, 1)", 0.9);
  const double beta2 = real("adam_apply", attrs, "beta2", unit_interval, "in [0, 1)", 0.999);
  const double eps = real("adam_apply", attrs, "eps", non_negative, ">= 0", 1e-8);
  const std::int64_t step = attrs.get_int("step");
  DTR_CHECK(step >= 1, InvalidArgument, "op 'adam_apply' needs attribute 'step' >= 1, got ", step);
  // The bias corrections of the moments, which start at zero.
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  return {.step_size = lr / correction1, .sqrt_correction2 = std::sqrt(correction2), .eps = eps};
}

}  // namespace dtr::kernels

namespace dtr::ops {
namespace {

bool takes_param_for_decay(std::string_view op, const Attrs& attrs) { return kernels::weight_decay(op, attrs) != 0.0; }

// An update op: `base` inputs named `names`, and one more, `extra`, when `takes_extra(attrs)` (`extra_when`
// says when, for messages; 0 stands for it otherwise). `make(attrs)` checks the attributes and returns the per-element
// function f(a, b, c) generic in the element type; infer calls it too, so a bad attribute fails before anything is
// allocated.
template <typename Make>
OpDef update_op(const std::string& name, std::size_t base, const std::string& names, const std::string& extra,
                const std::string& extra_when, std::function<bool(const Attrs&)> takes_extra, double flops_per_element,
                Make make) {
  const auto arity = [=](const Attrs& attrs) { return base + (takes_extra && takes_extra(attrs) ? 1 : 0); };
  OpDef def;
  def.name = name;
  def.infer = [=](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    static_cast<void>(make(attrs));
    const std::size_t expected = arity(attrs);
    if (inputs.size() != expected) {  // the message's text only on the way out: every optimizer step infers
      const std::string which = extra.empty() ? names
                                : expected > base ? names + ", " + extra + ": " + extra_when
                                                  : names + "; also " + extra + " " + extra_when;
      DTR_THROW(ShapeError, "op '", name, "' takes ", expected, " inputs (", which, "), got ", inputs.size());
    }
    kernels::check_floating(name, inputs);
    for (const TensorMeta& input : inputs) {
      DTR_CHECK_SHAPES(input.shape == inputs[0].shape, name, inputs, "needs inputs of the same shape");
    }
    return TensorMetas{inputs[0]};
  };
  def.cpu_kernel = kernels::floating_kernel([=]<typename T>(T /*zero*/, const KernelArgs& args) {
    const auto f = make(args.attrs);
    const std::int64_t count = args.output_meta[0].numel();
    const T* a = args.input<T>(0);
    const T* b = args.input<T>(1);
    const T* c = args.inputs.size() > 2 ? args.input<T>(2) : nullptr;
    T* out = args.output<T>(0);
    for (std::int64_t i = 0; i < count; ++i) out[i] = f(a[i], b[i], c != nullptr ? c[i] : T(0));
  });
  def.flops = [flops_per_element](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    return kernels::at_least_one(flops_per_element * static_cast<double>(inputs[0].numel()));
  };
  def.overwrites_first_input = true;
  return def;
}

}  // namespace

const OpDef& sgd_momentum_buffer() {
  return kernels::define_op([] {
    return update_op(
        "sgd_momentum_buffer", 2, "buf, grad", "param", "when weight_decay is not 0",
        [](const Attrs& attrs) { return takes_param_for_decay("sgd_momentum_buffer", attrs); }, 4,
        kernels::sgd_momentum_buffer_step);
  });
}

const OpDef& sgd_apply() {
  return kernels::define_op([] {
    return update_op("sgd_apply", 2, "param, buf", "grad", "with nesterov", kernels::nesterov, 6,
                     kernels::sgd_apply_step);
  });
}

const OpDef& adam_moment1() {
  return kernels::define_op([] {
    return update_op(
        "adam_moment1", 2, "m, grad", "param", "when weight_decay is not 0",
        [](const Attrs& attrs) { return takes_param_for_decay("adam_moment1", attrs); }, 5, kernels::adam_moment1_step);
  });
}

const OpDef& adam_moment2() {
  return kernels::define_op([] {
    return update_op(
        "adam_moment2", 2, "v, grad", "param", "when weight_decay is not 0",
        [](const Attrs& attrs) { return takes_param_for_decay("adam_moment2", attrs); }, 6, kernels::adam_moment2_step);
  });
}

const OpDef& adam_apply() {
  return kernels::define_op(
      [] { return update_op("adam_apply", 3, "param, m, v", "", "", nullptr, 6, kernels::adam_apply_step); });
}

}  // namespace dtr::ops

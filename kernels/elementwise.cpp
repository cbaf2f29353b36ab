// Elementwise ops: one output of the inputs' common shape, element i a function of the inputs' elements i.
#include <cstdint>
#include <functional>
#include <utility>

#include "dtr/ops.h"
#include "op_checks.h"

namespace dtr::ops {
namespace {

// `make_fn(attrs)` returns the per-element function: attributes are read once per call rather than per
// element, and infer calls it too, so a missing attribute fails before anything is allocated.
template <std::size_t Arity, typename MakeFn>
OpDef elementwise(const std::string& name, MakeFn make_fn) {
  OpDef def;
  def.name = name;
  def.infer = [name, make_fn](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity(name, inputs, Arity);
    for (const TensorMeta& input : inputs) {
      DTR_CHECK_SHAPES(input.shape == inputs[0].shape, name, inputs, "needs inputs of the same shape");
    }
    static_cast<void>(make_fn(attrs));
    return TensorMetas{inputs[0]};
  };
  def.cpu_kernel = [make_fn](const KernelArgs& args) {
    const auto fn = make_fn(args.attrs);
    const std::int64_t count = args.output_meta[0].numel();
    float* out = args.outputs[0];
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      for (std::int64_t i = 0; i < count; ++i) out[i] = fn(args.inputs[I][i]...);
    }(std::make_index_sequence<Arity>{});
  };
  def.flops = kernels::numel_flops;
  return def;
}

template <typename Fn>
auto without_attrs(Fn fn) {
  return [fn](const Attrs& /*attrs*/) { return fn; };
}

}  // namespace

const OpDef& add() {
  static const OpDef def = elementwise<2>("add", without_attrs(std::plus<float>{}));
  return def;
}

const OpDef& mul() {
  static const OpDef def = elementwise<2>("mul", without_attrs(std::multiplies<float>{}));
  return def;
}

const OpDef& relu() {
  // Written as a comparison with 0 being false for NaN, so NaN passes through as in PyTorch.
  static const OpDef def = elementwise<1>("relu", without_attrs([](float x) { return x < 0.0F ? 0.0F : x; }));
  return def;
}

const OpDef& scale() {
  static const OpDef def = elementwise<1>("scale", [](const Attrs& attrs) {
    return [factor = static_cast<float>(attrs.get_real("factor"))](float x) { return x * factor; };
  });
  return def;
}

}  // namespace dtr::ops

// Elementwise ops: unary activations and their backward ops, and binary arithmetic with broadcasting. The
// per-element arithmetic is elementwise_math.h's, which the CUDA kernels share.
#include <cstdint>
#include <numbers>
#include <string>
#include <utility>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

// An op of `Arity` inputs of one shape and floating dtype, element i of the output a function of elements i
// of the inputs. `make_fn(attrs)` returns the per-element function (generic in the element type): attributes
// are read once per call rather than per element, and infer calls it too, so a missing attribute fails
// before anything is allocated.
template <std::size_t Arity, typename MakeFn>
OpDef same_shape(const std::string& name, MakeFn make_fn) {
  OpDef def;
  def.name = name;
  def.infer = [name, make_fn](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity(name, inputs, Arity);
    kernels::check_floating(name, inputs);
    for (const TensorMeta& input : inputs) {
      DTR_CHECK_SHAPES(input.shape == inputs[0].shape, name, inputs, "needs inputs of the same shape");
    }
    static_cast<void>(make_fn(attrs));
    return TensorMetas{inputs[0]};
  };
  def.cpu_kernel = kernels::floating_kernel([make_fn]<typename T>(T /*zero*/, const KernelArgs& args) {
    const auto fn = make_fn(args.attrs);
    const std::int64_t count = args.output_meta[0].numel();
    T* out = args.output<T>(0);
    kernels::parallel_for_ranges(count, [&](std::int64_t begin, std::int64_t end) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        for (std::int64_t i = begin; i < end; ++i) out[i] = static_cast<T>(fn(args.input<T>(I)[i]...));
      }(std::make_index_sequence<Arity>{});
    });
  });
  def.flops = kernels::numel_flops;
  def.overwrites_first_input = true;
  return def;
}

template <typename Fn>
auto without_attrs(Fn fn) {
  return [fn](const Attrs& /*attrs*/) { return fn; };
}

// A one-input op whose float32 kernel runs `lanes` (vector_math.h) over each block; other dtypes keep `def`'s
// element-by-element kernel.
OpDef float32_in_lanes(OpDef def, void (*lanes)(const float*, float*, std::int64_t)) {
  def.cpu_kernel = [elementwise = std::move(def.cpu_kernel), lanes](const KernelArgs& args) {
    if (args.output_meta[0].dtype != DType::float32) return elementwise(args);
    const float* in = args.input<float>(0);
    float* out = args.output<float>(0);
    kernels::parallel_for_ranges(args.output_meta[0].numel(), [&](std::int64_t begin, std::int64_t end) {
      lanes(in + begin, out + begin, end - begin);
    });
  };
  return def;
}

// elementwise_math.h's constants, written out for nvcc, are what <numbers> gives.
static_assert(kernels::kHalfSqrt2 == std::numbers::sqrt2 / 2);
static_assert(kernels::kInvSqrt2Pi == std::numbers::inv_sqrtpi / std::numbers::sqrt2);

// ---- broadcasting ----

// out[i] = fn(a[ia(i)], b[ib(i)]) over the broadcast shape: the last dimension is the inner loop, an odometer
// walks the others.
template <typename T, typename Fn>
void broadcast_binary(const KernelArgs& args, Fn fn) {
  const T* a = args.input<T>(0);
  const T* b = args.input<T>(1);
  T* out = args.output<T>(0);
  const Shape& shape = args.output_meta[0].shape;
  const std::int64_t count = args.output_meta[0].numel();
  if (args.input_meta[0].shape == shape && args.input_meta[1].shape == shape) {
    kernels::parallel_for_ranges(count, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) out[i] = fn(a[i], b[i]);
    });
    return;
  }
  if (count == 0) return;
  const Shape sa = kernels::broadcast_strides(args.input_meta[0].shape, shape);
  const Shape sb = kernels::broadcast_strides(args.input_meta[1].shape, shape);
  const std::size_t rank = shape.size();
  const std::int64_t inner = rank > 0 ? shape[rank - 1] : 1;
  const std::int64_t step_a = rank > 0 ? sa[rank - 1] : 0;
  const std::int64_t step_b = rank > 0 ? sb[rank - 1] : 0;
  Shape index(rank, 0);
  std::int64_t offset_a = 0;
  std::int64_t offset_b = 0;
  for (std::int64_t o = 0; o < count; o += inner) {
    for (std::int64_t j = 0; j < inner; ++j) out[o + j] = fn(a[offset_a + j * step_a], b[offset_b + j * step_b]);
    for (std::size_t d = rank - 1; d-- > 0;) {
      index[d] += 1;
      offset_a += sa[d];
      offset_b += sb[d];
      if (index[d] < shape[d]) break;
      offset_a -= sa[d] * shape[d];
      offset_b -= sb[d] * shape[d];
      index[d] = 0;
    }
  }
}

template <typename Fn>
OpDef broadcasting(const std::string& name, Fn fn) {
  OpDef def;
  def.name = name;
  def.infer = [name](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    kernels::check_arity(name, inputs, 2);
    kernels::check_floating(name, inputs);
    const auto shape = kernels::broadcast_shapes(inputs[0].shape, inputs[1].shape);
    DTR_CHECK_SHAPES(shape.has_value(), name, inputs, "needs shapes that broadcast (NumPy rules)");
    return TensorMetas{TensorMeta{*shape, inputs[0].dtype}};
  };
  def.cpu_kernel = kernels::floating_kernel(
      [fn]<typename T>(T /*zero*/, const KernelArgs& args) { broadcast_binary<T>(args, fn); });
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    const auto shape = kernels::broadcast_shapes(inputs[0].shape, inputs[1].shape);
    return kernels::at_least_one(static_cast<double>(TensorMeta{*shape}.numel()));
  };
  def.overwrites_first_input = true;  // an input of the output's shape is read at the output's index
  return def;
}

}  // namespace

const OpDef& add() {
  return kernels::define_op([] { return broadcasting("add", kernels::Add{}); });
}

const OpDef& sub() {
  return kernels::define_op([] { return broadcasting("sub", kernels::Sub{}); });
}

const OpDef& mul() {
  return kernels::define_op([] { return broadcasting("mul", kernels::Mul{}); });
}

const OpDef& div() {
  return kernels::define_op([] { return broadcasting("div", kernels::Div{}); });
}

const OpDef& relu() {
  return kernels::define_op([] { return same_shape<1>("relu", without_attrs(kernels::Relu{})); });
}

const OpDef& relu_backward() {
  return kernels::define_op([] { return same_shape<2>("relu_backward", without_attrs(kernels::ReluBackward{})); });
}

const OpDef& gelu() {
  return kernels::define_op([] { return same_shape<1>("gelu", without_attrs(kernels::Gelu{})); });
}

const OpDef& gelu_backward() {
  return kernels::define_op([] { return same_shape<2>("gelu_backward", without_attrs(kernels::GeluBackward{})); });
}

const OpDef& tanh() {
  return kernels::define_op(
      [] { return float32_in_lanes(same_shape<1>("tanh", without_attrs(kernels::Tanh{})), kernels::tanh_floats); });
}

const OpDef& tanh_backward() {
  return kernels::define_op([] { return same_shape<2>("tanh_backward", without_attrs(kernels::TanhBackward{})); });
}

const OpDef& sigmoid() {
  return kernels::define_op([] {
    return float32_in_lanes(same_shape<1>("sigmoid", without_attrs(kernels::Sigmoid{})), kernels::sigmoid_floats);
  });
}

const OpDef& sigmoid_backward() {
  return kernels::define_op(
      [] { return same_shape<2>("sigmoid_backward", without_attrs(kernels::SigmoidBackward{})); });
}

const OpDef& scale() {
  return kernels::define_op([] {
    return same_shape<1>("scale", [](const Attrs& attrs) { return kernels::Scale{attrs.get_real("factor")}; });
  });
}

}  // namespace dtr::ops

// Reductions: sum and mean over axes, and sum_to (the sum that undoes a broadcast, for gradients).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/axis_loops.h"
#include "kernels/elementwise/elementwise_attrs.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

using kernels::AxisMask;
using kernels::reduced_axes;
using kernels::sum_to_mask;

bool keepdim(const Attrs& attrs) { return attrs.has("keepdim") && attrs.get_int("keepdim") != 0; }

Shape reduced_shape(const Shape& shape, const AxisMask& mask, bool keep) {
  Shape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return out;
}

// sum and mean: one input, attributes "axis" or "axes" and "keepdim".
OpDef reduction(const std::string& name, bool mean) {
  OpDef def;
  def.name = name;
  def.infer = [name](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity(name, inputs, 1);
    kernels::check_floating(name, inputs);
    const AxisMask mask = reduced_axes(name, inputs, attrs);
    return TensorMetas{TensorMeta{reduced_shape(inputs[0].shape, mask, keepdim(attrs)), inputs[0].dtype}};
  };
  def.cpu_kernel = kernels::floating_kernel([name, mean]<typename T>(T /*zero*/, const KernelArgs& args) {
    const AxisMask mask = reduced_axes(name, args.input_meta, args.attrs);
    const std::int64_t out_count = args.output_meta[0].numel();
    const std::int64_t in_count = args.input_meta[0].numel();
    kernels::sum_over_axes(args.input<T>(0), args.input_meta[0].shape, mask, args.output<T>(0), out_count,
                           kernels::reduction_factor(mean, in_count, out_count));
  });
  def.flops = kernels::numel_flops;
  return def;
}

// sum_to: the input summed down to attribute "shape", which must broadcast to the input's shape.
TensorMetas infer_sum_to(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("sum_to", inputs, 1);
  kernels::check_floating("sum_to", inputs);
  static_cast<void>(sum_to_mask(inputs, attrs));
  const std::vector<std::int64_t>& target = attrs.get_ints("shape");
  return {TensorMeta{Shape(target.begin(), target.end()), inputs[0].dtype}};
}

void sum_to_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    kernels::sum_over_axes(args.input<T>(0), args.input_meta[0].shape, sum_to_mask(args.input_meta, args.attrs),
                           args.output<T>(0), args.output_meta[0].numel(), 1.0);
  });
}

// broadcast_to: the input repeated to attribute "shape" (NumPy rules): the gradient of a sum.
Shape broadcast_target(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::vector<std::int64_t>& target = attrs.get_ints("shape");
  Shape to(target.begin(), target.end());
  DTR_CHECK_SHAPES(inputs[0].shape.size() <= to.size() && kernels::broadcast_shapes(inputs[0].shape, to) == to,
                   "broadcast_to", inputs, "broadcasts to a shape ", to_string(to), " (NumPy rules)");
  return to;
}

TensorMetas infer_broadcast_to(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("broadcast_to", inputs, 1);
  kernels::check_floating("broadcast_to", inputs);
  return {TensorMeta{broadcast_target(inputs, attrs), inputs[0].dtype}};
}

void broadcast_to_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    kernels::broadcast_copy(args.input<T>(0), args.input_meta[0].shape, args.output<T>(0), args.output_meta[0].shape);
  });
}

double output_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return kernels::at_least_one(static_cast<double>(TensorMeta{broadcast_target(inputs, attrs)}.numel()));
}

}  // namespace

const OpDef& broadcast_to() {
  return kernels::define_op([] {
    return OpDef{
        .name = "broadcast_to", .infer = infer_broadcast_to, .cpu_kernel = broadcast_to_cpu, .flops = output_flops};
  });
}

const OpDef& sum() {
  return kernels::define_op([] { return reduction("sum", false); });
}

const OpDef& mean() {
  return kernels::define_op([] { return reduction("mean", true); });
}

const OpDef& sum_to() {
  return kernels::define_op([] {
    return OpDef{.name = "sum_to", .infer = infer_sum_to, .cpu_kernel = sum_to_cpu, .flops = kernels::numel_flops};
  });
}

}  // namespace dtr::ops

namespace dtr::kernels {

// The dimensions "axis" (one int) or "axes" (a list) name, as a mask over `rank` dimensions; every dimension
// when neither is given. Negative axes count from the end; an axis out of range or named twice is a ShapeError.
AxisMask reduced_axes(const std::string& op, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const auto rank = static_cast<std::int64_t>(inputs[0].shape.size());
  // A view of the attribute's axes, not a copy: every sum's infer and kernel come here.
  const bool listed = attrs.has("axes");
  const bool one = !listed && attrs.has("axis");
  const std::int64_t single = one ? attrs.get_int("axis") : 0;
  const std::span<const std::int64_t> axes = listed ? std::span<const std::int64_t>(attrs.get_ints("axes"))
                                             : one  ? std::span<const std::int64_t>(&single, 1)
                                                    : std::span<const std::int64_t>();
  AxisMask mask(static_cast<std::size_t>(rank), axes.empty() && !listed);
  for (const std::int64_t axis : axes) {
    DTR_CHECK_SHAPES(axis >= -rank && axis < rank, op, inputs, "has axis ", axis, " outside [", -rank, ", ", rank, ")");
    const auto d = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
    DTR_CHECK_SHAPES(!mask[d], op, inputs, "names axis ", axis, " twice");
    mask[d] = true;
  }
  return mask;
}

AxisMask sum_to_mask(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const Shape& in = inputs[0].shape;
  const std::vector<std::int64_t>& target = attrs.get_ints("shape");
  Shape to(target.begin(), target.end());
  DTR_CHECK_SHAPES(to.size() <= in.size() && kernels::broadcast_shapes(to, in) == in, "sum_to", inputs,
                   "sums down to a shape ", to_string(to), " that broadcasts to the input's");
  AxisMask mask(in.size(), false);
  const std::size_t lead = in.size() - to.size();
  for (std::size_t d = 0; d < in.size(); ++d) mask[d] = d < lead || (to[d - lead] == 1 && in[d] != 1);
  return mask;
}

double reduction_factor(bool mean, std::int64_t in_count, std::int64_t out_count) {
  if (!mean) return 1.0;
  const double length = out_count > 0 ? static_cast<double>(in_count) / static_cast<double>(out_count) : 0.0;
  return 1.0 / length;
}

}  // namespace dtr::kernels

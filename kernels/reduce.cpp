// Reductions.
#include <cstdint>
#include <optional>

#include "dtr/ops.h"
#include "op_checks.h"

namespace dtr::ops {
namespace {

// A reduction seen as a row-major [outer, length, inner] block summed over its middle dimension; summing every
// element is the case outer = inner = 1.
struct ReductionExtent {
  std::int64_t outer = 1;
  std::int64_t length = 1;
  std::int64_t inner = 1;
};

// The reduced dimension's index, when attribute "axis" is given; validated against the input's rank.
std::optional<std::size_t> sum_axis(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  if (!attrs.has("axis")) return std::nullopt;
  const std::int64_t axis = attrs.get_int("axis");
  const auto rank = static_cast<std::int64_t>(inputs[0].shape.size());
  DTR_CHECK_SHAPES(axis >= -rank && axis < rank, "sum", inputs, "has axis ", axis, " outside [", -rank, ", ", rank,
                   ")");
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

TensorMetas infer_sum(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("sum", inputs, 1);
  const std::optional<std::size_t> axis = sum_axis(inputs, attrs);
  TensorMeta out{{}, inputs[0].dtype};
  if (axis) {
    out.shape = inputs[0].shape;
    out.shape.erase(out.shape.begin() + static_cast<std::ptrdiff_t>(*axis));
  }
  return {out};
}

void sum_cpu(const KernelArgs& args) {
  const Shape& shape = args.input_meta[0].shape;
  ReductionExtent extent{1, args.input_meta[0].numel(), 1};
  if (const std::optional<std::size_t> axis = sum_axis(args.input_meta, args.attrs)) {
    extent = {1, shape[*axis], 1};
    for (std::size_t d = 0; d < *axis; ++d) extent.outer *= shape[d];
    for (std::size_t d = *axis + 1; d < shape.size(); ++d) extent.inner *= shape[d];
  }
  const float* in = args.inputs[0];
  float* out = args.outputs[0];
  // Each output sums its inputs in increasing index order into a double, then rounds once: reproducible, and
  // accurate for long sums.
  for (std::int64_t o = 0; o < extent.outer; ++o) {
    for (std::int64_t i = 0; i < extent.inner; ++i) {
      double total = 0.0;
      for (std::int64_t l = 0; l < extent.length; ++l) total += in[(o * extent.length + l) * extent.inner + i];
      out[o * extent.inner + i] = static_cast<float>(total);
    }
  }
}

}  // namespace

const OpDef& sum() {
  static const OpDef def{.name = "sum", .infer = infer_sum, .cpu_kernel = sum_cpu, .flops = kernels::numel_flops};
  return def;
}

}  // namespace dtr::ops

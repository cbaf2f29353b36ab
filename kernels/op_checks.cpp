#include "kernels/op_checks.h"

#include <algorithm>

namespace dtr::kernels {

std::string shapes_of(std::span<const TensorMeta> inputs) {
  std::string text;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) text += i + 1 == inputs.size() ? " and " : ", ";
    if (inputs[i].dtype != DType::float32) {
      text += to_string(inputs[i].dtype);
      text += ' ';
    }
    text += to_string(inputs[i].shape);
  }
  return inputs.empty() ? "no inputs" : text;
}

void check_arity(std::string_view op, std::span<const TensorMeta> inputs, std::size_t expected) {
  DTR_CHECK(inputs.size() == expected, ShapeError, "op '", op, "' takes ", expected,
            expected == 1 ? " input" : " inputs", ", got ", inputs.size());
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const std::int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < in.size(); ++k) {
    strides[out.size() - 1 - k] = in[in.size() - 1 - k] == 1 ? 0 : stride;
    stride *= in[in.size() - 1 - k];
  }
  return strides;
}

void check_floating(std::string_view op, std::span<const TensorMeta> inputs, std::size_t first, std::size_t last) {
  last = std::min(last, inputs.size());
  for (std::size_t i = first; i < last; ++i) {
    const DType dtype = inputs[i].dtype;
    DTR_CHECK((dtype == DType::float32 || dtype == DType::float64) && dtype == inputs[first].dtype, ShapeError,
              "op '", op, "' takes float32 or float64 inputs of one dtype, got ", shapes_of(inputs));
  }
}

double numel_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return at_least_one(static_cast<double>(inputs[0].numel()));
}

double at_least_one(double flops) { return std::max(flops, 1.0); }

}  // namespace dtr::kernels

#include "op_checks.h"

#include <algorithm>

namespace dtr::kernels {

std::string shapes_of(std::span<const TensorMeta> inputs) {
  std::string text;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) text += i + 1 == inputs.size() ? " and " : ", ";
    text += to_string(inputs[i].shape);
  }
  return inputs.empty() ? "no inputs" : text;
}

void check_arity(std::string_view op, std::span<const TensorMeta> inputs, std::size_t expected) {
  DTR_CHECK(inputs.size() == expected, ShapeError, "op '", op, "' takes ", expected,
            expected == 1 ? " input" : " inputs", ", got ", inputs.size());
}

double numel_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return at_least_one(static_cast<double>(inputs[0].numel()));
}

double at_least_one(double flops) { return std::max(flops, 1.0); }

}  // namespace dtr::kernels

// Seeded initialisation (include/dtr/nn/init.h).
#include "dtr/nn/init.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "dtr/check.h"

namespace dtr::nn {

double Generator::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: the logarithm is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

namespace {

template <typename Draw>
Variable filled(Runtime& runtime, Shape shape, bool requires_grad, Draw draw) {
  TensorMeta meta{std::move(shape), DType::float32};
  std::vector<float> values(static_cast<std::size_t>(meta.numel()));
  for (float& v : values) v = static_cast<float>(draw());
  return Variable(runtime, runtime.constant(std::move(meta), values), requires_grad);
}

}  // namespace

Variable uniform_variable(Runtime& runtime, Generator& generator, Shape shape, double bound, bool requires_grad) {
  DTR_CHECK(bound >= 0 && std::isfinite(bound), InvalidArgument, "uniform_variable: bound ", bound);
  return filled(runtime, std::move(shape), requires_grad, [&] { return (2.0 * generator.uniform() - 1.0) * bound; });
}

Variable normal_variable(Runtime& runtime, Generator& generator, Shape shape, double std, bool requires_grad) {
  DTR_CHECK(std >= 0 && std::isfinite(std), InvalidArgument, "normal_variable: std ", std);
  return filled(runtime, std::move(shape), requires_grad, [&] { return generator.normal() * std; });
}

Variable full_variable(Runtime& runtime, Shape shape, float value, bool requires_grad) {
  return filled(runtime, std::move(shape), requires_grad, [value] { return value; });
}

double kaiming_uniform_bound(std::int64_t fan_in, double a) {
  DTR_CHECK(fan_in > 0, InvalidArgument, "kaiming_uniform_bound: fan_in ", fan_in, " (expected > 0)");
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  return gain * std::sqrt(3.0 / static_cast<double>(fan_in));
}

double xavier_uniform_bound(std::int64_t fan_in, std::int64_t fan_out) {
  DTR_CHECK(fan_in + fan_out > 0, InvalidArgument, "xavier_uniform_bound: fan_in + fan_out = ", fan_in + fan_out);
  return std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
}

}  // namespace dtr::nn

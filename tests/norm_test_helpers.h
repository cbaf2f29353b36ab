// Helpers of the normalization ops' tests (norm_test.cpp, batch_norm_test.cpp): constants of each dtype, values
// compared to a tolerance, shape errors.
#pragma once

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "dtr/ops.h"
#include "test_helpers.h"

namespace dtr::test {

inline Tensor f32(Runtime& rt, Shape shape, std::vector<float> values) {
  return rt.constant(TensorMeta{std::move(shape)}, values);
}
inline Tensor f64(Runtime& rt, Shape shape, std::vector<double> values) {
  return rt.constant(TensorMeta{std::move(shape), DType::float64}, values);
}
inline Tensor i64(Runtime& rt, Shape shape, std::vector<std::int64_t> values) {
  return rt.constant(TensorMeta{std::move(shape), DType::int64}, values);
}

inline void expect_values(const std::vector<double>& actual, const std::vector<double>& expected,
                          double tolerance = 1e-12) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
}
inline void expect_values(const Tensor& actual, const std::vector<double>& expected, double tolerance = 1e-12) {
  if (actual.meta().dtype == DType::float64) return expect_values(actual.to_host_as<double>(), expected, tolerance);
  const std::vector<float> values = actual.to_host();
  expect_values(std::vector<double>(values.begin(), values.end()), expected, tolerance);
}

inline void expect_shape_error(const OpDef& op, std::vector<TensorMeta> inputs,
                               std::initializer_list<std::string_view> parts, const Attrs& attrs = {}) {
  expect_error<ShapeError>([&] { op.infer(inputs, attrs); }, parts);
}

inline TensorMeta meta(Shape shape, DType dtype = DType::float32) { return TensorMeta{std::move(shape), dtype}; }

}  // namespace dtr::test

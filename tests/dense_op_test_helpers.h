// Helpers of the dense-op tests (conv_test.cpp, pool_test.cpp): float32 inputs run through a runtime, and
// shape errors checked by the words of their messages.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/check.h"
#include "dtr/ops.h"
#include "test_resources.h"

namespace dtr::test {

using Ints = std::vector<std::int64_t>;

struct Input {
  Shape shape;
  std::vector<float> values;
};

// Runs `op` through a runtime on float32 inputs and returns its (one) output's shape and values.
struct Output {
  Shape shape;
  std::vector<float> values;
};

inline Output run(const OpDef& op, const std::vector<Input>& inputs, const Attrs& attrs = {}) {
  Runtime rt(deterministic_config());
  std::vector<Tensor> tensors;
  for (const Input& in : inputs) tensors.push_back(rt.constant(TensorMeta{in.shape}, in.values));
  const Tensor out = rt.call1(op, tensors, attrs);
  return {out.shape(), out.to_host()};
}

inline std::vector<float> iota(std::int64_t count, float first = 1.0F) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (auto& x : v) x = first++;
  return v;
}

// Expects op.infer on `shapes` to throw an `E` whose message contains every one of `parts`.
template <typename E = ShapeError>
void expect_error(const OpDef& op, const std::vector<Shape>& shapes, const Attrs& attrs,
                  std::initializer_list<std::string_view> parts, DType dtype = DType::float32) {
  std::vector<TensorMeta> metas;
  for (const Shape& s : shapes) metas.push_back(TensorMeta{s, dtype});
  try {
    op.infer(metas, attrs);
    ADD_FAILURE() << op.name << ": nothing was thrown";
  } catch (const E& e) {
    const std::string_view message = e.what();
    for (const std::string_view part : parts) EXPECT_NE(message.find(part), std::string_view::npos) << message;
  }
}

}  // namespace dtr::test

// The op cases the kernel tests share: for every differentiable op, a generator of random problems (shapes
// with odd sizes, broadcasting, transposes, axes, attributes) and how to draw its input values; the gradient
// checks and the backend parity tests run them.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dtr/gradients.h"
#include "dtr/ops.h"
#include "dtr/runtime.h"

namespace dtr::test {

using Rng = std::mt19937_64;

// A draw from [low, high].
std::int64_t dim(Rng& rng, std::int64_t low = 1, std::int64_t high = 7);

struct Problem {
  std::vector<Shape> inputs;
  Attrs attrs;
  // Input i -> its values, for the int64 inputs (indices, labels): they get no gradient (an undefined one).
  std::map<std::size_t, std::vector<std::int64_t>> integer_inputs = {};
};

// Input i of `p`: its int64 values, or `values` in the floating `dtype`.
Tensor make_input(Runtime& rt, const Problem& p, std::size_t i, const std::vector<double>& values, DType dtype);

struct GradCase {
  const OpDef& op;
  std::function<Problem(Rng&)> make;
  // Moves a random value of input `i` away from where the op is not differentiable (a kink, a pole).
  std::function<double(std::size_t i, double value)> adjust = nullptr;
  // Outputs after the first this many (saved statistics) are not differentiated: their gradients are
  // undefined and the loss ignores them.
  std::size_t outputs_with_gradient = static_cast<std::size_t>(-1);
};

// One case per differentiable op.
std::vector<GradCase> cases();
// Ops without a gradient rule: random ones, and the backward ops (no second derivatives yet).
bool expected_without_rule(const std::string& name);
// `count` values uniform in [-1, 1), moved by c.adjust for input `input`.
std::vector<double> random_values(Rng& rng, std::int64_t count, const GradCase& c, std::size_t input);

// The op's outputs on `values` in `dtype`, then the gradients of every input for output gradients of ones
// (empty for an int64 input), all read back as doubles: the forward kernels and the backward ops at once.
std::vector<std::vector<double>> outputs_and_gradients(Runtime& rt, const GradCase& c, const Problem& p,
                                                       const std::vector<std::vector<double>>& values, DType dtype);

}  // namespace dtr::test

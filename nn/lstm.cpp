// One LSTM layer (include/dtr/nn/layers.h), step by step as torch.nn.LSTM computes it, per step gates = x_t W_ihᵀ + b_ih + h W_hhᵀ + b_hh, split as i, f, g, o.
#include <cmath>

#include "dtr/check.h"
#include "dtr/nn/layers.h"

namespace dtr::nn {

LSTM::LSTM(Runtime& runtime, Generator& generator, std::int64_t input_size, std::int64_t hidden_size)
    : hidden_(hidden_size) {
  DTR_CHECK(input_size > 0 && hidden_size > 0, InvalidArgument, "LSTM: input ", input_size, ", hidden ",
            hidden_size, " (expected > 0)");
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  weight_ih_ = register_parameter("weight_ih", uniform_variable(runtime, generator, {4 * hidden_size, input_size}, bound, true));
  weight_hh_ = register_parameter("weight_hh", uniform_variable(runtime, generator, {4 * hidden_size, hidden_size}, bound, true));
  bias_ih_ = register_parameter("bias_ih", uniform_variable(runtime, generator, {4 * hidden_size}, bound, true));
  bias_hh_ = register_parameter("bias_hh", uniform_variable(runtime, generator, {4 * hidden_size}, bound, true));
}

Variable LSTM::forward(const Variable& x) {
  DTR_CHECK(x.shape().size() == 3 && x.shape()[2] == weight_ih_.shape()[1], ShapeError, "LSTM: expected [N, T, ",
            weight_ih_.shape()[1], "], got ", to_string(x.shape()));
  const std::int64_t n = x.shape()[0];
  const std::int64_t steps = x.shape()[1];
  Runtime& rt = x.runtime();
  // The input split into steps once (its gradient is one concat), each step's projection on its own: no
  // [N, T, 4H] tensor, whose per-step slices would keep it whole in every recomputation's working set.
  const std::vector<Variable> inputs = split(x, std::vector<std::int64_t>(static_cast<std::size_t>(steps), 1), 1);
  Variable h = zeros(rt, TensorMeta{{n, hidden_}, DType::float32});
  Variable c = h;
  std::vector<Variable> outputs;
  for (std::int64_t s = 0; s < steps; ++s) {
    const Variable x_t = reshape(inputs[static_cast<std::size_t>(s)], {n, x.shape()[2]});
    const Variable x_gates = linear(x_t, weight_ih_, bias_ih_);
    const Variable gates = add(x_gates, linear(h, weight_hh_, bias_hh_));
    const std::vector<Variable> g = split(gates, {hidden_, hidden_, hidden_, hidden_}, 1);
    c = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
    h = mul(sigmoid(g[3]), tanh(c));
    outputs.push_back(reshape(h, {n, 1, hidden_}));
  }
  return concat(outputs, 1);
}

}  // namespace dtr::nn

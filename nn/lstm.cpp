// A stack of LSTM layers (include/dtr/nn/layers.h), step by step as torch.nn.LSTM computes each cell:
// gates = x_t W_ihᵀ + b_ih + h W_hhᵀ + b_hh, split as i, f, g, o; c = σ(f) c + σ(i) tanh(g); h = σ(o) tanh(c).
#include <cmath>
#include <string>

#include "dtr/check.h"
#include "dtr/nn/layers.h"

namespace dtr::nn {

LSTM::LSTM(Runtime& runtime, Generator& generator, std::int64_t input_size, std::int64_t hidden_size,
           std::int64_t num_layers, bool last_step_only)
    : input_(input_size), hidden_(hidden_size), last_step_only_(last_step_only) {
  DTR_CHECK(input_size > 0 && hidden_size > 0 && num_layers >= 1, InvalidArgument, "LSTM: input ", input_size,
            ", hidden ", hidden_size, ", layers ", num_layers, " (expected > 0)");
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (std::int64_t k = 0; k < num_layers; ++k) {
    const std::string l = "_l" + std::to_string(k);
    const std::int64_t in = k == 0 ? input_size : hidden_size;
    Layer layer;
    layer.weight_ih = register_parameter("weight_ih" + l, uniform_variable(runtime, generator, {4 * hidden_size, in}, bound, true));
    layer.weight_hh =
        register_parameter("weight_hh" + l, uniform_variable(runtime, generator, {4 * hidden_size, hidden_size}, bound, true));
    layer.bias_ih = register_parameter("bias_ih" + l, uniform_variable(runtime, generator, {4 * hidden_size}, bound, true));
    layer.bias_hh = register_parameter("bias_hh" + l, uniform_variable(runtime, generator, {4 * hidden_size}, bound, true));
    layers_.push_back(std::move(layer));
  }
}

Variable LSTM::forward(const Variable& x) {
  DTR_CHECK(x.shape().size() == 3 && x.shape()[2] == input_, ShapeError, "LSTM: expected [N, T, ", input_, "], got ",
            to_string(x.shape()));
  const std::int64_t n = x.shape()[0];
  const std::int64_t steps = x.shape()[1];
  Runtime& rt = x.runtime();
  // The input split into steps once: its gradient is one concat of the steps' gradients, where a slice per
  // step would add up T gradients of the whole input.
  const std::vector<Variable> inputs = split(x, std::vector<std::int64_t>(static_cast<std::size_t>(steps), 1), 1);
  const Variable zero = zeros(rt, TensorMeta{{n, hidden_}, DType::float32});
  std::vector<Variable> h(layers_.size(), zero);
  std::vector<Variable> c(layers_.size(), zero);
  std::vector<Variable> outputs;
  for (std::int64_t s = 0; s < steps; ++s) {
    Variable below = reshape(inputs[static_cast<std::size_t>(s)], {n, input_});
    for (std::size_t k = 0; k < layers_.size(); ++k) {
      const Layer& layer = layers_[k];
      const Variable gates = add(linear(below, layer.weight_ih, layer.bias_ih), linear(h[k], layer.weight_hh, layer.bias_hh));
      const std::vector<Variable> g = split(gates, {hidden_, hidden_, hidden_, hidden_}, 1);
      c[k] = add(mul(sigmoid(g[1]), c[k]), mul(sigmoid(g[0]), tanh(g[2])));
      h[k] = mul(sigmoid(g[3]), tanh(c[k]));
      below = h[k];
    }
    if (last_step_only_) {
      if (s + 1 == steps) return below;
    } else {
      outputs.push_back(reshape(below, {n, 1, hidden_}));
    }
  }
  return concat(outputs, 1);
}

}  // namespace dtr::nn

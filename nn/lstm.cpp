// A stack of LSTM layers (include/dtr/nn/layers.h), step by step as torch.nn.LSTM computes each cell:
// gates = x_t W_ihᵀ + b_ih + h W_hhᵀ + b_hh, split as i, f, g, o; c = σ(f) c + σ(i) tanh(g); h = σ(o) tanh(c);
// the hidden state's map accumulates onto the input's (ops::linear_add), and everything after the gates is one
// fused op (ops::lstm_cell), as PyTorch fuses it.
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "dtr/check.h"
#include "dtr/nn/checkpoint.h"
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

Variable LSTM::forward(const Variable& x) { return run(x, -1); }

Variable LSTM::forward_checkpointed(const Variable& x, std::int64_t segments) {
  DTR_CHECK(segments >= 0, InvalidArgument, "LSTM: ", segments, " checkpoint segments (expected 0 for round(sqrt(T)), "
            "or 1 to T)");
  return run(x, segments);
}

std::vector<Variable> LSTM::run_steps(std::span<const Variable> in, std::int64_t count) const {
  const std::size_t layers = layers_.size();
  std::vector<Variable> h(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(layers));
  std::vector<Variable> c(in.begin() + static_cast<std::ptrdiff_t>(layers),
                          in.begin() + static_cast<std::ptrdiff_t>(2 * layers));
  std::vector<Variable> outputs;
  for (std::int64_t s = 0; s < count; ++s) {
    const Variable& step = in[2 * layers + static_cast<std::size_t>(s)];
    Variable below = reshape(step, {step.shape()[0], input_});
    for (std::size_t k = 0; k < layers; ++k) {
      const Layer& layer = layers_[k];
      // The hidden state's map accumulates onto the input's (one op: no add's pass, no second intermediate).
      const Variable gates =
          linear_add(h[k], layer.weight_hh, linear(below, layer.weight_ih, layer.bias_ih), layer.bias_hh);
      std::vector<Variable> cell = lstm_cell(gates, c[k]);
      h[k] = std::move(cell[0]);
      c[k] = std::move(cell[1]);
      below = h[k];
    }
    if (!last_step_only_) outputs.push_back(reshape(below, {below.shape()[0], 1, hidden_}));
  }
  std::vector<Variable> result = std::move(h);
  result.insert(result.end(), c.begin(), c.end());
  result.insert(result.end(), outputs.begin(), outputs.end());
  return result;
}

Variable LSTM::run(const Variable& x, std::int64_t segments) {
  DTR_CHECK(x.shape().size() == 3 && x.shape()[2] == input_, ShapeError, "LSTM: expected [N, T, ", input_, "], got ",
            to_string(x.shape()));
  const std::int64_t n = x.shape()[0];
  const std::int64_t steps = x.shape()[1];
  DTR_CHECK(segments <= steps, InvalidArgument, "LSTM: ", segments, " checkpoint segments for ", steps,
            " time steps (expected 0 for round(sqrt(T)), or 1 to T)");
  if (segments == 0) segments = sqrt_segments(steps);
  if (segments < 0) segments = 1;  // no checkpoint: the last (only) run is kept as usual
  // The input split into steps. An input that needs a gradient is split once: its gradient is one concat of
  // the steps' gradients, where a slice per step would add up T gradients of the whole input. Otherwise (the
  // images) one slice per step: each comes back alone when evicted, where a split's T rows all come back
  // together, T times the memory a step needs (the zoo LSTM under a budget recomputed its split ~1e5 times).
  std::vector<Variable> inputs;
  if (x.requires_grad()) {
    inputs = split(x, std::vector<std::int64_t>(static_cast<std::size_t>(steps), 1), 1);
  } else {
    for (std::int64_t t = 0; t < steps; ++t) inputs.push_back(slice(x, 1, t, t + 1));
  }
  const Variable zero = zeros(x.runtime(), TensorMeta{{n, hidden_}, DType::float32});
  const std::size_t layers = layers_.size();
  std::vector<Variable> state(2 * layers, zero);  // h of every layer, then c
  std::vector<Variable> outputs;
  const std::int64_t size = steps / segments;
  for (std::int64_t r = 0, begin = 0; r < segments; ++r, begin += size) {
    const std::int64_t count = r + 1 == segments ? steps - begin : size;
    std::vector<Variable> in = state;
    in.insert(in.end(), inputs.begin() + begin, inputs.begin() + begin + count);
    const auto steps_fn = [this, count](std::span<const Variable> from) { return run_steps(from, count); };
    std::vector<Variable> out = r + 1 == segments ? steps_fn(in) : checkpoint(steps_fn, in);
    state.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(2 * layers));
    outputs.insert(outputs.end(), out.begin() + static_cast<std::ptrdiff_t>(2 * layers), out.end());
  }
  if (last_step_only_) return state[layers - 1];  // the top layer's last h
  return concat(outputs, 1);
}

}  // namespace dtr::nn

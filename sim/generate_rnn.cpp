// An LSTM language model unrolled over time with shared weights: backpropagation through time, then Adam.
#include <fmt/format.h>

#include "dtr/trace_generator.h"
#include "sim/layers.h"

namespace dtr::sim {
namespace {

using generate::BackwardRule;

struct LstmLayer {
  std::uint32_t input_weight = 0;
  std::uint32_t hidden_weight = 0;
  std::uint32_t bias = 0;
  double inputs = 0;
};

// The weights every step shares and the Adam moments of each, created with the model as a program does.
struct Parameters {
  std::vector<std::uint32_t> all;
  std::vector<std::uint32_t> first_moments;
  std::vector<std::uint32_t> second_moments;

  std::uint32_t make(generate::Network& net, double elements) {
    all.push_back(net.parameter(elements));
    first_moments.push_back(net.parameter(elements));
    second_moments.push_back(net.parameter(elements));
    return all.back();
  }
};

}  // namespace

Trace generate_rnn(const RnnOptions& options) {
  generate::check_option("rnn", "steps", options.steps, 1U, 1'000'000U);
  generate::check_option("rnn", "layers", options.layers, 1U, 64U);
  generate::check_option("rnn", "hidden", options.hidden, 1U, 65536U);
  generate::check_option("rnn", "input", options.input, 1U, 65536U);
  generate::check_option("rnn", "vocabulary", options.vocabulary, 2U, 1U << 20);
  generate::check_option("rnn", "batch", options.batch, 1U, 65536U);
  generate::Random random(options.seed);
  generate::CostModel cost(random);
  generate::TraceBuilder builder(
      fmt::format("rnn(steps={}, layers={}, hidden={}, input={}, vocabulary={}, batch={}, seed={})", options.steps,
                  options.layers, options.hidden, options.input, options.vocabulary, options.batch, options.seed));
  generate::Tape tape(builder, random);
  generate::Network net{builder, tape, cost, random};
  const double batch = options.batch;
  const double hidden = options.hidden;
  const double vocabulary = options.vocabulary;

  Parameters parameters;
  std::vector<LstmLayer> layers(options.layers);
  for (std::uint32_t l = 0; l < options.layers; ++l) {
    layers[l].inputs = l == 0 ? options.input : hidden;
    layers[l].input_weight = parameters.make(net, layers[l].inputs * 4 * hidden);
    layers[l].hidden_weight = parameters.make(net, hidden * 4 * hidden);
    layers[l].bias = parameters.make(net, 4 * hidden);
  }
  const std::uint32_t output_weight = parameters.make(net, hidden * vocabulary);
  const std::uint32_t output_bias = parameters.make(net, vocabulary);

  // The initial state: zeros, one pair per layer.
  std::vector<std::uint32_t> h(options.layers);
  std::vector<std::uint32_t> c(options.layers);
  for (std::uint32_t l = 0; l < options.layers; ++l) {
    h[l] = builder.constant(generate::float_bytes(batch * hidden));
    c[l] = builder.constant(generate::float_bytes(batch * hidden));
  }
  const std::uint64_t gates_bytes = generate::float_bytes(batch * 4 * hidden);
  std::uint32_t total_loss = generate::kNoName;
  for (std::uint32_t t = 0; t < options.steps; ++t) {
    // The step's embedded tokens and next-token labels, as a data loader hands them over.
    std::uint32_t x = builder.constant(generate::float_bytes(batch * options.input));
    const std::uint32_t labels = builder.constant(static_cast<std::uint64_t>(batch) * 8);
    for (std::uint32_t l = 0; l < options.layers; ++l) {
      const LstmLayer& layer = layers[l];
      const BackwardRule matmul = generate::matmul_rule();
      const double input_flops = 2 * batch * layer.inputs * 4 * hidden;
      const std::uint32_t from_input =
          tape.op("mm", {x, layer.input_weight}, gates_bytes,
                  cost.time_ns(input_flops, 4 * (batch + 4 * hidden) * layer.inputs), matmul);
      const std::uint32_t from_hidden =
          tape.op("mm", {h[l], layer.hidden_weight}, gates_bytes,
                  cost.time_ns(2 * batch * hidden * 4 * hidden, 4 * (batch + 4 * hidden) * hidden), matmul);
      // The two products take the gradient as it is; the bias's is its sum over the batch.
      BackwardRule bias_add;
      bias_add.passes_gradient = {true, true, false};
      bias_add.per_input = {{}, {}, {"sum", 0, 0.1, &generate::reduction_rule}};
      const std::uint32_t gates = tape.op("add_bias", {from_input, from_hidden, layer.bias}, gates_bytes,
                                          cost.time_ns(0, 3.0 * static_cast<double>(gates_bytes)), bias_add);
      // PyTorch's fused cell: (h, c, workspace); its backward reads the old and new cell state and the workspace.
      BackwardRule cell;
      cell.saved_inputs = 0b10;
      cell.saved_outputs = 0b110;
      const std::uint64_t state_bytes = builder.bytes(h[l]);
      const std::vector<std::uint32_t> state =
          tape.op("_thnn_fused_lstm_cell", {gates, c[l]}, {{state_bytes, -1}, {state_bytes, -1}, {gates_bytes, -1}},
                  cost.time_ns(10 * batch * hidden, 2.0 * static_cast<double>(gates_bytes)), cell);
      h[l] = state[0];
      c[l] = state[1];
      x = h[l];
    }
    const std::uint32_t logits = net.linear(x, output_weight, output_bias, batch, hidden, vocabulary);
    const std::uint32_t loss = net.loss("cross_entropy", logits, labels);
    total_loss = total_loss == generate::kNoName ? loss : net.add(total_loss, loss);
  }

  builder.annotate("BACKWARD");
  const std::vector<std::uint32_t> gradients = tape.gradients(total_loss, parameters.all, /*create_graph=*/false);
  // Adam as a functional update: new values, bound to the old names with COPY_FROM.
  for (std::size_t i = 0; i < parameters.all.size(); ++i) {
    const std::uint64_t bytes = builder.bytes(parameters.all[i]);
    const std::vector<std::uint32_t> updated = builder.call(
        "adam_step", {parameters.all[i], gradients[i], parameters.first_moments[i], parameters.second_moments[i]},
        {{bytes, -1}, {bytes, -1}, {bytes, -1}}, cost.time_ns(0, 7.0 * static_cast<double>(bytes)));
    builder.copy_from(parameters.all[i], updated[0]);
    builder.copy_from(parameters.first_moments[i], updated[1]);
    builder.copy_from(parameters.second_moments[i], updated[2]);
  }
  return builder.finish();
}

RnnOptions sized_for_ops(const RnnOptions& options, std::uint64_t ops) {
  return generate::sized_for_ops(options, ops, &RnnOptions::steps, 4U, 1'000'000U, &generate_rnn);
}

}  // namespace dtr::sim

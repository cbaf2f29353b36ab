// The chain: N layers of similar cost, forward then backward, then in-place SGD steps.
#include <fmt/format.h>

#include "dtr/trace_generator.h"
#include "sim/autodiff_tape.h"

namespace dtr::sim {

Trace generate_chain(const ChainOptions& options) {
  generate::check_option("chain", "layers", options.layers, 1U, 1'000'000U);
  generate::check_option<std::uint64_t>("chain", "activation_bytes", options.activation_bytes, 64,
                                        std::uint64_t{1} << 36);
  generate::Random random(options.seed);
  generate::CostModel cost(random);
  generate::TraceBuilder builder(fmt::format("chain(layers={}, activation_bytes={}, seed={})", options.layers,
                                             options.activation_bytes, options.seed));
  generate::Tape tape(builder, random);
  auto activation = [&] {
    return generate::float_bytes(random.jitter(static_cast<double>(options.activation_bytes) / 4, 0.2));
  };

  // Parameters first, as a model is built before its first step; the program holds them throughout.
  std::vector<std::uint32_t> weights;
  for (std::uint32_t i = 0; i < options.layers; ++i) {
    weights.push_back(builder.constant(
        generate::float_bytes(random.jitter(static_cast<double>(options.activation_bytes) / 32, 0.2))));
    builder.keep(weights.back());
  }
  std::uint32_t x = builder.constant(activation());
  for (std::uint32_t i = 0; i < options.layers; ++i) {
    const std::uint64_t bytes = activation();
    // Memory-bound, like an elementwise-heavy layer: every layer costs about the same ("unit" costs).
    const double time = cost.time_ns(0, static_cast<double>(builder.bytes(x) + bytes));
    x = tape.op("linear_relu", {x, weights[i]}, bytes, time);  // its backward reads x and the weight
  }
  const std::uint32_t target = builder.constant(builder.bytes(x));
  const std::uint32_t loss =
      tape.op("mse_loss", {x, target}, 4, cost.time_ns(0, 2.0 * static_cast<double>(builder.bytes(x))));

  builder.annotate("BACKWARD");
  const std::vector<std::uint32_t> gradients = tape.gradients(loss, weights, /*create_graph=*/false);
  for (std::uint32_t i = 0; i < options.layers; ++i) {
    builder.mutate("sgd_step_", {weights[i], gradients[i]}, {0},
                   cost.time_ns(0, 3.0 * static_cast<double>(builder.bytes(weights[i]))));
  }
  return builder.finish();
}

ChainOptions sized_for_ops(const ChainOptions& options, std::uint64_t ops) {
  return generate::sized_for_ops(options, ops, &ChainOptions::layers, 4U, 1'000'000U, &generate_chain);
}

}  // namespace dtr::sim

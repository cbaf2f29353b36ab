// An unrolled GAN (Metz et al., 2017): the discriminator takes `unroll` SGD steps with their graphs kept; the
// generator's loss under the last of them backpropagates through all of them (second-order backward ops).
#include <fmt/format.h>

#include "dtr/trace_generator.h"
#include "sim/layers.h"

namespace dtr::sim {
namespace {

using generate::BackwardRule;

// An MLP's weights and biases, in order, and the widths between its layers.
struct Mlp {
  std::vector<std::uint32_t> parameters;  // weight, bias, weight, bias, ...
  std::vector<double> widths;             // layers + 1

  Mlp(generate::TraceBuilder& builder, double in, double hidden, double out, std::uint32_t layers) {
    widths.push_back(in);
    for (std::uint32_t l = 0; l + 1 < layers; ++l) widths.push_back(hidden);
    widths.push_back(out);
    for (std::uint32_t l = 0; l < layers; ++l) {
      parameters.push_back(generate::parameter(builder, widths[l] * widths[l + 1]));
      parameters.push_back(generate::parameter(builder, widths[l + 1]));
    }
  }
};

// The MLP on `x` with the given parameters (the discriminator's change with every unrolled step):
// linear layers with leaky ReLUs between them, then `last` (an activation, or nothing for logits).
std::uint32_t apply(generate::Network& net, const Mlp& mlp, const std::vector<std::uint32_t>& parameters,
                    std::uint32_t x, double batch, const char* last) {
  const std::size_t layers = mlp.widths.size() - 1;
  for (std::size_t l = 0; l < layers; ++l) {
    x = net.linear(x, parameters[2 * l], parameters[2 * l + 1], batch, mlp.widths[l], mlp.widths[l + 1]);
    if (l + 1 < layers) {
      x = net.elementwise("leaky_relu", x, /*backward_reads_output=*/false);
    } else if (last != nullptr) {
      x = net.elementwise(last, x, /*backward_reads_output=*/true);
    }
  }
  return x;
}

class UnrolledGan {
 public:
  UnrolledGan(const GanOptions& options, generate::TraceBuilder& builder, generate::CostModel& cost,
              generate::Random& random)
      : options_(options),
        builder_(builder),
        cost_(cost),
        random_(random),
        generator_(builder, options.latent, options.width, options.data, options.generator_layers),
        discriminator_(builder, options.data, options.width, 1, options.discriminator_layers) {
    for (std::uint32_t p : generator_.parameters) {
      first_moments_.push_back(generate::parameter(builder, static_cast<double>(builder.bytes(p)) / 4));
      second_moments_.push_back(generate::parameter(builder, static_cast<double>(builder.bytes(p)) / 4));
    }
  }

  // One training iteration, with a tape of its own: nothing of the last iteration's graph is differentiated.
  void iteration() {
    generate::Tape tape(builder_, random_);
    generate::Network net{builder_, tape, cost_, random_};
    generate::TraceBuilder& builder = builder_;
    const double batch = options_.batch;
    const std::uint32_t noise = builder.constant(generate::float_bytes(batch * options_.latent));
    const std::uint32_t real = builder.constant(generate::float_bytes(batch * options_.data));
    const std::uint32_t ones = builder.constant(generate::float_bytes(batch));
    const std::uint32_t zeros = builder.constant(generate::float_bytes(batch));
    const std::uint32_t fake = apply(net, generator_, generator_.parameters, noise, batch, "tanh");

    // The unrolled discriminator steps: each reads the samples, the weights the step before made, and keeps its
    // graph, so that its gradients and updated weights stay differentiable.
    std::vector<std::uint32_t> weights = discriminator_.parameters;
    std::vector<std::uint32_t> first_step;
    for (std::uint32_t step = 0; step < options_.unroll; ++step) {
      const std::uint32_t on_real = apply(net, discriminator_, weights, real, batch, nullptr);
      const std::uint32_t on_fake = apply(net, discriminator_, weights, fake, batch, nullptr);
      const std::uint32_t loss = net.add(net.loss("binary_cross_entropy_with_logits", on_real, ones),
                                         net.loss("binary_cross_entropy_with_logits", on_fake, zeros));
      const std::vector<std::uint32_t> gradients = net.tape.gradients(loss, weights, /*create_graph=*/true);
      for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = sgd_update(net, weights[i], gradients[i]);
      if (step == 0) first_step = weights;
    }

    const std::uint32_t judged = apply(net, discriminator_, weights, fake, batch, nullptr);
    const std::uint32_t generator_loss = net.loss("binary_cross_entropy_with_logits", judged, ones);
    builder.annotate("BACKWARD");
    const std::vector<std::uint32_t> gradients =
        net.tape.gradients(generator_loss, generator_.parameters, /*create_graph=*/false);
    adam(gradients);
    // The discriminator keeps its first unrolled step, as in Metz et al.; the rest existed for the generator.
    for (std::size_t i = 0; i < first_step.size(); ++i) builder.copy_from(discriminator_.parameters[i], first_step[i]);
  }

 private:
  // w - lr g, out of place so that it stays differentiable: w's gradient passes through, g's is scaled.
  static std::uint32_t sgd_update(generate::Network& net, std::uint32_t weight, std::uint32_t gradient) {
    BackwardRule rule;
    rule.saved_inputs = 0;
    rule.passes_gradient = {true, false};
    rule.time_factor = 1.0;
    const double bytes = static_cast<double>(net.builder.bytes(weight));
    return net.tape.op("sub", {weight, gradient}, net.builder.bytes(weight), net.cost.time_ns(0, 3 * bytes), rule);
  }

  // Adam on the generator: new values bound to the old names with COPY_FROM.
  void adam(const std::vector<std::uint32_t>& gradients) {
    generate::TraceBuilder& builder = builder_;
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      const std::uint32_t p = generator_.parameters[i];
      const std::uint64_t bytes = builder.bytes(p);
      const std::vector<std::uint32_t> updated =
          builder.call("adam_step", {p, gradients[i], first_moments_[i], second_moments_[i]},
                       {{bytes, -1}, {bytes, -1}, {bytes, -1}}, cost_.time_ns(0, 7.0 * static_cast<double>(bytes)));
      builder.copy_from(p, updated[0]);
      builder.copy_from(first_moments_[i], updated[1]);
      builder.copy_from(second_moments_[i], updated[2]);
    }
  }

  const GanOptions& options_;
  generate::TraceBuilder& builder_;
  generate::CostModel& cost_;
  generate::Random& random_;
  Mlp generator_;
  Mlp discriminator_;
  std::vector<std::uint32_t> first_moments_;
  std::vector<std::uint32_t> second_moments_;
};

}  // namespace

Trace generate_gan(const GanOptions& options) {
  generate::check_option("gan", "unroll", options.unroll, 1U, 10'000U);
  generate::check_option("gan", "generator_layers", options.generator_layers, 1U, 1000U);
  generate::check_option("gan", "discriminator_layers", options.discriminator_layers, 1U, 1000U);
  generate::check_option("gan", "width", options.width, 1U, 65536U);
  generate::check_option("gan", "latent", options.latent, 1U, 65536U);
  generate::check_option("gan", "data", options.data, 1U, 1U << 24);
  generate::check_option("gan", "batch", options.batch, 1U, 65536U);
  generate::check_option("gan", "iterations", options.iterations, 1U, 10'000U);
  generate::Random random(options.seed);
  generate::CostModel cost(random);
  generate::TraceBuilder builder(fmt::format(
      "gan(unroll={}, generator_layers={}, discriminator_layers={}, width={}, latent={}, data={}, batch={}, "
      "iterations={}, seed={})",
      options.unroll, options.generator_layers, options.discriminator_layers, options.width, options.latent,
      options.data, options.batch, options.iterations, options.seed));
  UnrolledGan gan(options, builder, cost, random);
  for (std::uint32_t i = 0; i < options.iterations; ++i) gan.iteration();
  return builder.finish();
}

GanOptions sized_for_ops(const GanOptions& options, std::uint64_t ops) {
  return generate::sized_for_ops(options, ops, &GanOptions::unroll, 2U, 10'000U, &generate_gan);
}

}  // namespace dtr::sim

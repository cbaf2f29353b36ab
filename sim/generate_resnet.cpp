// A CIFAR-style ResNet training step: stem, residual stages, pooling, classifier, backward, SGD with momentum.
#include <fmt/format.h>

#include "dtr/trace_generator.h"
#include "sim/layers.h"

namespace dtr::sim {
namespace {

using generate::BackwardRule;

class ResNet {
 public:
  ResNet(const ResNetOptions& options, generate::Network& net) : options_(options), net_(net) {}

  // The step's forward pass from `images`; returns the loss.
  std::uint32_t forward(std::uint32_t images, std::uint32_t labels) {
    double channels = options_.channels;
    double size = options_.image_size;
    std::uint32_t x = conv(images, 3, channels, size, 3, 1);
    x = net_.elementwise("relu", batch_norm(x, channels), /*backward_reads_output=*/true);
    for (std::uint32_t stage = 0; stage < options_.stages; ++stage) {
      for (std::uint32_t block = 0; block < options_.blocks_per_stage; ++block) {
        const bool downsample = stage > 0 && block == 0;
        x = residual_block(x, downsample ? channels / 2 : channels, channels, downsample ? size * 2 : size);
      }
      if (stage + 1 < options_.stages) {
        channels *= 2;
        size /= 2;
      }
    }
    const double batch = options_.batch;
    const double image_bytes = static_cast<double>(net_.builder.bytes(x));
    const std::uint32_t pooled = net_.tape.op("adaptive_avg_pool2d", {x}, generate::float_bytes(batch * channels),
                                              net_.cost.time_ns(0, image_bytes));
    const std::uint32_t flat = net_.view("view", pooled);
    const std::uint32_t logits =
        net_.linear(flat, parameter(channels * kClasses), parameter(kClasses), batch, channels, kClasses);
    BackwardRule reads_output;
    reads_output.saved_inputs = 0;
    reads_output.saved_outputs = 1;
    const std::uint32_t log_probabilities = net_.tape.op("log_softmax", {logits}, net_.builder.bytes(logits),
                                                         net_.cost.time_ns(0, 3 * batch * kClasses * 4), reads_output);
    return net_.loss("nll_loss", log_probabilities, labels);
  }

  const std::vector<std::uint32_t>& parameters() const { return parameters_; }
  const std::vector<std::uint32_t>& momenta() const { return momenta_; }

 private:
  static constexpr double kClasses = 10;

  // A parameter and its momentum buffer, which lives as long (SGD with momentum keeps one per parameter).
  std::uint32_t parameter(double elements) {
    parameters_.push_back(net_.parameter(elements));
    momenta_.push_back(net_.parameter(elements));
    return parameters_.back();
  }

  // A k x k convolution from `in` to `out` channels with output size `size`; its backward reads input and weight.
  std::uint32_t conv(std::uint32_t x, double in, double out, double size, double k, double stride) {
    const std::uint32_t weight = parameter(out * in * k * k);
    const double batch = options_.batch;
    const double flops = 2 * batch * out * size * size * in * k * k;
    const double bytes = 4 * (batch * in * size * size * stride * stride + batch * out * size * size);
    return net_.tape.op("cudnn_convolution", {x, weight}, generate::float_bytes(batch * out * size * size),
                        net_.cost.time_ns(flops, bytes));
  }

  // Training-mode batch norm: the output and the batch statistics, which its backward reads with x and gamma.
  std::uint32_t batch_norm(std::uint32_t x, double channels) {
    const std::uint32_t gamma = parameter(channels);
    const std::uint32_t beta = parameter(channels);
    BackwardRule rule;
    rule.saved_inputs = 0b011;
    rule.saved_outputs = 0b110;
    const std::uint64_t bytes = net_.builder.bytes(x);
    const std::uint64_t statistics = generate::float_bytes(channels);
    return net_.tape
        .op("cudnn_batch_norm", {x, gamma, beta}, {{bytes, -1}, {statistics, -1}, {statistics, -1}},
            net_.cost.time_ns(0, 3.0 * static_cast<double>(bytes)), rule)
        .front();
  }

  // conv-bn-relu-conv-bn, plus the skip connection (a strided 1x1 conv and bn where the shape changes), relu.
  std::uint32_t residual_block(std::uint32_t x, double in, double out, double in_size) {
    const double stride = in == out ? 1 : 2;
    const double size = in_size / stride;
    std::uint32_t h = conv(x, in, out, size, 3, stride);
    h = net_.elementwise("relu", batch_norm(h, out), true);
    h = batch_norm(conv(h, out, out, size, 3, 1), out);
    const std::uint32_t skip = in == out ? x : batch_norm(conv(x, in, out, size, 1, stride), out);
    return net_.elementwise("relu", net_.add(h, skip), true);
  }

  const ResNetOptions& options_;
  generate::Network& net_;
  std::vector<std::uint32_t> parameters_;
  std::vector<std::uint32_t> momenta_;
};

}  // namespace

Trace generate_resnet(const ResNetOptions& options) {
  generate::check_option("resnet", "blocks_per_stage", options.blocks_per_stage, 1U, 10'000U);
  generate::check_option("resnet", "stages", options.stages, 1U, 6U);
  generate::check_option("resnet", "channels", options.channels, 1U, 4096U);
  generate::check_option("resnet", "batch", options.batch, 1U, 65536U);
  // Each stage halves the image: it must stay at least one pixel wide.
  generate::check_option("resnet", "image_size", options.image_size, 1U << (options.stages - 1), 65536U);
  generate::Random random(options.seed);
  generate::CostModel cost(random);
  generate::TraceBuilder builder(fmt::format(
      "resnet(blocks_per_stage={}, stages={}, channels={}, batch={}, image_size={}, seed={})", options.blocks_per_stage,
      options.stages, options.channels, options.batch, options.image_size, options.seed));
  generate::Tape tape(builder, random);
  generate::Network net{builder, tape, cost, random};
  ResNet model(options, net);

  const double batch = options.batch;
  const std::uint32_t images =
      builder.constant(generate::float_bytes(batch * 3 * options.image_size * options.image_size));
  const std::uint32_t labels = builder.constant(static_cast<std::uint64_t>(batch) * 8);  // int64 class indices
  const std::uint32_t loss = model.forward(images, labels);

  builder.annotate("BACKWARD");
  const std::vector<std::uint32_t>& parameters = model.parameters();
  const std::vector<std::uint32_t> gradients = tape.gradients(loss, parameters, /*create_graph=*/false);
  // SGD with momentum, in place as torch.optim.SGD does it: buffer = 0.9 buffer + g; p -= lr buffer.
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const double bytes = static_cast<double>(builder.bytes(parameters[i]));
    const std::uint32_t momentum = model.momenta()[i];
    builder.mutate("mul_", {momentum}, {0}, cost.time_ns(0, 2 * bytes));
    builder.mutate("add_", {momentum, gradients[i]}, {0}, cost.time_ns(0, 3 * bytes));
    builder.mutate("add_", {parameters[i], momentum}, {0}, cost.time_ns(0, 3 * bytes));
  }
  return builder.finish();
}

ResNetOptions sized_for_ops(const ResNetOptions& options, std::uint64_t ops) {
  return generate::sized_for_ops(options, ops, &ResNetOptions::blocks_per_stage, 1U, 10'000U, &generate_resnet);
}

}  // namespace dtr::sim

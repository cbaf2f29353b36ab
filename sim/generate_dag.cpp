// A random DAG of ops with local connections, its backward pass, and in-place parameter updates: structure
// no hand-written model has, for tests that should not depend on a model's regularity.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dtr/trace_generator.h"
#include "sim/layers.h"

namespace dtr::sim {
namespace {

// Op names by input count, so that a trace reads like a model's.
constexpr const char* kUnary[] = {"relu", "gelu", "layer_norm", "conv2d", "softmax", "dropout"};
constexpr const char* kBinary[] = {"matmul", "mul", "conv2d", "bmm"};
constexpr const char* kTernary[] = {"addcmul", "attention", "addmm"};

class RandomDag {
 public:
  RandomDag(const DagOptions& options, generate::Network& net) : options_(options), net_(net) {}

  // The forward ops; returns the loss: the sum of every value no op reads, each added in once it has left the
  // window later ops read from (as a model adds an auxiliary loss term where the output is made).
  std::uint32_t forward() {
    for (std::uint32_t p = 0; p < options_.parameters; ++p) parameters_.push_back(net_.parameter(random_bytes() / 4.0));
    values_.push_back(net_.builder.constant(random_bytes()));
    read_.push_back(true);  // the input is data, not an output to train
    for (std::uint32_t i = 0; i < options_.forward_ops; ++i) {
      step();
      if (values_.size() > options_.locality) add_to_loss_if_unread(values_.size() - 1 - options_.locality);
    }
    const std::size_t window_start = values_.size() > options_.locality ? values_.size() - options_.locality : 0;
    for (std::size_t v = window_start; v < values_.size(); ++v) add_to_loss_if_unread(v);
    return loss_;
  }

  const std::vector<std::uint32_t>& parameters() const { return parameters_; }

 private:
  std::uint64_t random_bytes() {
    // Log-uniform between the bounds: many small tensors, a few large ones, as in real models.
    const double low = std::log(static_cast<double>(options_.min_bytes));
    const double high = std::log(static_cast<double>(options_.max_bytes));
    return generate::float_bytes(std::exp(net_.random.uniform(low, high)) / 4);
  }

  // A recent value, the most recent likeliest (locality), or now and then a parameter.
  std::uint32_t pick_input() {
    if (!parameters_.empty() && net_.random.uniform() < 0.15)
      return parameters_[net_.random.below(options_.parameters)];
    const double u = net_.random.uniform();
    const auto back = static_cast<std::size_t>(u * u * options_.locality);
    const std::size_t v = values_.size() - 1 - std::min(back, values_.size() - 1);
    read_[v] = true;
    return values_[v];
  }

  void step() {
    const std::uint32_t count = 1 + net_.random.below(options_.max_inputs);
    std::vector<std::uint32_t> inputs;
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::uint32_t input = pick_input();
      if (std::find(inputs.begin(), inputs.end(), input) == inputs.end()) inputs.push_back(input);
    }
    std::uint32_t output = 0;
    if (inputs.size() == 1 && net_.random.uniform() < 0.1) {
      output = net_.view("view", inputs.front());
    } else {
      const char* op = inputs.size() == 1   ? kUnary[net_.random.below(std::size(kUnary))]
                       : inputs.size() == 2 ? kBinary[net_.random.below(std::size(kBinary))]
                                            : kTernary[net_.random.below(std::size(kTernary))];
      double moved = 0;
      for (std::uint32_t in : inputs) moved += static_cast<double>(net_.builder.bytes(in));
      const std::uint64_t bytes = random_bytes();
      moved += static_cast<double>(bytes);
      // Between elementwise (a flop per element) and matmul-like (hundreds) arithmetic intensity.
      const double flops = static_cast<double>(bytes) / 4 * std::exp(net_.random.uniform(0, std::log(500.0)));
      output = net_.tape.op(op, inputs, bytes, net_.cost.time_ns(flops, moved));
    }
    values_.push_back(output);
    read_.push_back(false);
  }

  void add_to_loss_if_unread(std::size_t v) {
    if (read_[v]) return;
    read_[v] = true;
    const double bytes = static_cast<double>(net_.builder.bytes(values_[v]));
    const std::uint32_t sum =
        net_.tape.op("sum", {values_[v]}, 4, net_.cost.time_ns(bytes / 4, bytes), generate::reduction_rule());
    loss_ = loss_ == generate::kNoName ? sum : net_.add(loss_, sum);
  }

  const DagOptions& options_;
  generate::Network& net_;
  std::vector<std::uint32_t> parameters_;
  std::vector<std::uint32_t> values_;  // in the order made; [0] is the input
  std::vector<bool> read_;             // by index into values_
  std::uint32_t loss_ = generate::kNoName;
};

}  // namespace

Trace generate_dag(const DagOptions& options) {
  generate::check_option("dag", "forward_ops", options.forward_ops, 1U, 10'000'000U);
  generate::check_option("dag", "max_inputs", options.max_inputs, 1U, 3U);
  generate::check_option("dag", "locality", options.locality, 1U, 1'000'000U);
  generate::check_option("dag", "parameters", options.parameters, 0U, 1'000'000U);
  generate::check_option<std::uint64_t>("dag", "min_bytes", options.min_bytes, 4, std::uint64_t{1} << 36);
  generate::check_option<std::uint64_t>("dag", "max_bytes", options.max_bytes, options.min_bytes,
                                        std::uint64_t{1} << 36);
  generate::Random random(options.seed);
  generate::CostModel cost(random);
  generate::TraceBuilder builder(
      fmt::format("dag(forward_ops={}, max_inputs={}, locality={}, parameters={}, min_bytes={}, "
                  "max_bytes={}, seed={})",
                  options.forward_ops, options.max_inputs, options.locality, options.parameters, options.min_bytes,
                  options.max_bytes, options.seed));
  generate::Tape tape(builder, random);
  generate::Network net{builder, tape, cost, random};
  RandomDag dag(options, net);
  const std::uint32_t loss = dag.forward();

  builder.annotate("BACKWARD");
  const std::vector<std::uint32_t>& parameters = dag.parameters();
  const std::vector<std::uint32_t> gradients = tape.gradients(loss, parameters, /*create_graph=*/false);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (gradients[i] == generate::kNoName) continue;  // a parameter no op happened to read
    const double bytes = static_cast<double>(builder.bytes(parameters[i]));
    builder.mutate("sgd_step_", {parameters[i], gradients[i]}, {0}, cost.time_ns(0, 3 * bytes));
  }
  return builder.finish();
}

DagOptions sized_for_ops(const DagOptions& options, std::uint64_t ops) {
  return generate::sized_for_ops(options, ops, &DagOptions::forward_ops, 500U, 10'000'000U, &generate_dag);
}

}  // namespace dtr::sim

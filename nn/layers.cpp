// The layers of include/dtr/nn/layers.h but attention and the LSTM (nn/attention.cpp, nn/lstm.cpp).
#include "dtr/nn/layers.h"

#include <cmath>

#include "dtr/check.h"

namespace dtr::nn {

namespace {

// PyTorch's Linear/Conv2d rule: weights kaiming_uniform_(a = √5), that is ±1/√fan_in, biases ±1/√fan_in too.
double fan_in_bound(std::int64_t fan_in) { return kaiming_uniform_bound(fan_in, std::sqrt(5.0)); }

}  // namespace

Linear::Linear(Runtime& runtime, Generator& generator, std::int64_t in_features, std::int64_t out_features,
               bool bias) {
  DTR_CHECK(in_features > 0 && out_features > 0, InvalidArgument, "Linear: features ", in_features, " -> ",
            out_features, " (expected > 0)");
  weight_ = register_parameter(
      "weight", uniform_variable(runtime, generator, {out_features, in_features}, fan_in_bound(in_features), true));
  if (bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    bias_ = register_parameter("bias", uniform_variable(runtime, generator, {out_features}, bound, true));
  }
}

Variable Linear::forward(const Variable& x) { return linear(x, weight_, bias_); }

Conv2d::Conv2d(Runtime& runtime, Generator& generator, const Conv2dSpec& spec) : options_(spec.options) {
  DTR_CHECK(spec.in_channels > 0 && spec.out_channels > 0 && spec.options.groups > 0 &&
                spec.in_channels % spec.options.groups == 0 && spec.out_channels % spec.options.groups == 0,
            InvalidArgument, "Conv2d: channels ", spec.in_channels, " -> ", spec.out_channels, " in ",
            spec.options.groups, " groups (expected > 0, each divisible by groups)");
  DTR_CHECK(spec.kernel[0] > 0 && spec.kernel[1] > 0, InvalidArgument, "Conv2d: kernel ", spec.kernel[0], "x",
            spec.kernel[1]);
  const std::int64_t per_group = spec.in_channels / spec.options.groups;
  const std::int64_t fan_in = per_group * spec.kernel[0] * spec.kernel[1];
  weight_ = register_parameter(
      "weight", uniform_variable(runtime, generator, {spec.out_channels, per_group, spec.kernel[0], spec.kernel[1]},
                                 fan_in_bound(fan_in), true));
  if (spec.bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    bias_ = register_parameter("bias", uniform_variable(runtime, generator, {spec.out_channels}, bound, true));
  }
}

Variable Conv2d::forward(const Variable& x) { return conv2d(x, weight_, bias_, options_); }

BatchNorm2d::BatchNorm2d(Runtime& runtime, std::int64_t channels, double eps, double momentum)
    : eps_(eps), momentum_(momentum) {
  DTR_CHECK(channels > 0, InvalidArgument, "BatchNorm2d: channels ", channels, " (expected > 0)");
  DTR_CHECK(eps >= 0 && momentum >= 0 && momentum <= 1, InvalidArgument, "BatchNorm2d: eps ", eps, ", momentum ",
            momentum, " (expected eps >= 0, momentum in [0, 1])");
  weight_ = register_parameter("weight", full_variable(runtime, {channels}, 1.0F, true));
  bias_ = register_parameter("bias", full_variable(runtime, {channels}, 0.0F, true));
  running_mean_ = register_buffer("running_mean", full_variable(runtime, {channels}, 0.0F, false));
  running_var_ = register_buffer("running_var", full_variable(runtime, {channels}, 1.0F, false));
}

namespace {

void check_batch_norm_input(const Variable& x) {
  DTR_CHECK(x.shape().size() == 4, ShapeError, "BatchNorm2d: expected [N, C, H, W], got ", to_string(x.shape()));
}

}  // namespace

Variable BatchNorm2d::forward(const Variable& x) {
  check_batch_norm_input(x);
  return batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_);
}

Variable BatchNorm2d::forward_relu(const Variable& x) {
  check_batch_norm_input(x);
  return batch_norm_relu(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_);
}

Variable BatchNorm2d::forward_add_relu(const Variable& x, const Variable& residual) {
  check_batch_norm_input(x);
  return batch_norm_add_relu(x, weight_, bias_, running_mean_, running_var_, residual, is_training(), momentum_, eps_);
}

LayerNorm::LayerNorm(Runtime& runtime, std::int64_t features, double eps) : eps_(eps) {
  DTR_CHECK(features > 0, InvalidArgument, "LayerNorm: features ", features, " (expected > 0)");
  weight_ = register_parameter("weight", full_variable(runtime, {features}, 1.0F, true));
  bias_ = register_parameter("bias", full_variable(runtime, {features}, 0.0F, true));
}

Variable LayerNorm::forward(const Variable& x) { return layer_norm(x, weight_, bias_, eps_); }

Embedding::Embedding(Runtime& runtime, Generator& generator, std::int64_t num_embeddings, std::int64_t dim) {
  DTR_CHECK(num_embeddings > 0 && dim > 0, InvalidArgument, "Embedding: ", num_embeddings, " x ", dim,
            " (expected > 0)");
  weight_ = register_parameter("weight", normal_variable(runtime, generator, {num_embeddings, dim}, 1.0, true));
}

Variable Embedding::forward(const Variable& indices) { return embedding(weight_, indices); }

Dropout::Dropout(double p) : p_(p) {
  DTR_CHECK(p >= 0 && p < 1, InvalidArgument, "Dropout: p ", p, " (expected a real in [0, 1))");
}

Variable Dropout::forward(const Variable& x) { return dropout(x, p_, is_training()); }

}  // namespace dtr::nn

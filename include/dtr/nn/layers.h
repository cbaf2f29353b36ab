// The layers (PyTorch's torch.nn modules of the same names), each initialised as PyTorch initialises it, from
// the generator it is given (include/dtr/nn/init.h). Parameters are float32 constants of the runtime: never
// evicted, updated in place by optimizers.
//
// Ownership and thread safety: as Module (include/dtr/nn/module.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dtr/nn/functional.h"
#include "dtr/nn/init.h"
#include "dtr/nn/module.h"

namespace dtr::nn {

// y = x Wᵀ + b over the last dimension; W [out, in] and b [out] uniform in ±1/√in (kaiming_uniform_(√5)).
class Linear : public Module {
 public:
  Linear(Runtime& runtime, Generator& generator, std::int64_t in_features, std::int64_t out_features,
         bool bias = true);
  Variable forward(const Variable& x) override;
  // addend + forward(x), as one op (nn::linear_add): a residual connection's sum.
  Variable forward_add(const Variable& x, const Variable& addend) { return linear_add(x, weight_, addend, bias_); }
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without a bias

 private:
  Variable weight_;
  Variable bias_;
};

struct Conv2dSpec {
  std::int64_t in_channels = 1;
  std::int64_t out_channels = 1;
  std::array<std::int64_t, 2> kernel{3, 3};
  Conv2dOptions options{};
  bool bias = true;
};
// W [out, in/groups, KH, KW] and b uniform in ±1/√(in/groups · KH · KW).
class Conv2d : public Module {
 public:
  Conv2d(Runtime& runtime, Generator& generator, const Conv2dSpec& spec);
  Variable forward(const Variable& x) override;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  Conv2dOptions options_;
  Variable weight_;
  Variable bias_;
};

// Over the channels of [N, C, H, W]: weight 1, bias 0; buffers running_mean (0), running_var (1). In training,
// batch statistics and a running update per forward (none during a static checkpoint's rerun); in evaluation,
// the running statistics (nn::batch_norm).
class BatchNorm2d : public Module {
 public:
  BatchNorm2d(Runtime& runtime, std::int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Variable forward(const Variable& x) override;
  // relu(forward(x)), as one op in training (nn::batch_norm_relu). Sequential calls it for a BatchNorm2d
  // directly followed by a ReLU.
  Variable forward_relu(const Variable& x);
  // relu(forward(x) + residual), as one op in training (nn::batch_norm_add_relu): a residual block's end.
  Variable forward_add_relu(const Variable& x, const Variable& residual);
  const Variable& running_mean() const { return running_mean_; }
  const Variable& running_var() const { return running_var_; }

 private:
  double eps_;
  double momentum_;
  Variable weight_;
  Variable bias_;
  Variable running_mean_;
  Variable running_var_;
};

// Over the last dimension of size `features`: weight 1, bias 0.
class LayerNorm : public Module {
 public:
  LayerNorm(Runtime& runtime, std::int64_t features, double eps = 1e-5);
  Variable forward(const Variable& x) override;

 private:
  double eps_;
  Variable weight_;
  Variable bias_;
};

// Rows of a [num, dim] table, normal(0, 1), picked by int64 indices.
class Embedding : public Module {
 public:
  Embedding(Runtime& runtime, Generator& generator, std::int64_t num_embeddings, std::int64_t dim);
  Variable forward(const Variable& indices) override;
  const Variable& weight() const { return weight_; }

 private:
  Variable weight_;
};

// Zeroes elements with probability p in training (scaling the rest by 1/(1 - p)); the identity in evaluation.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Variable forward(const Variable& x) override;

 private:
  double p_;
};

class ReLU : public Module {
 public:
  Variable forward(const Variable& x) override { return relu(x); }
};
class GELU : public Module {
 public:
  Variable forward(const Variable& x) override { return gelu(x); }
};
class Tanh : public Module {
 public:
  Variable forward(const Variable& x) override { return tanh(x); }
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::array<std::int64_t, 2> kernel, std::optional<std::array<std::int64_t, 2>> stride = std::nullopt,
                     std::array<std::int64_t, 2> padding = {0, 0})
      : kernel_(kernel), stride_(stride), padding_(padding) {}
  Variable forward(const Variable& x) override { return max_pool2d(x, kernel_, stride_, padding_); }

 private:
  std::array<std::int64_t, 2> kernel_;
  std::optional<std::array<std::int64_t, 2>> stride_;
  std::array<std::int64_t, 2> padding_;
};
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::array<std::int64_t, 2> kernel, std::optional<std::array<std::int64_t, 2>> stride = std::nullopt,
                     std::array<std::int64_t, 2> padding = {0, 0})
      : kernel_(kernel), stride_(stride), padding_(padding) {}
  Variable forward(const Variable& x) override { return avg_pool2d(x, kernel_, stride_, padding_); }

 private:
  std::array<std::int64_t, 2> kernel_;
  std::optional<std::array<std::int64_t, 2>> stride_;
  std::array<std::int64_t, 2> padding_;
};
// [N, C, H, W] -> [N, C].
class GlobalAvgPool2d : public Module {
 public:
  Variable forward(const Variable& x) override { return global_avg_pool2d(x); }
};
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1) : start_dim_(start_dim) {}
  Variable forward(const Variable& x) override { return flatten(x, start_dim_); }

 private:
  std::int64_t start_dim_;
};

// Multi-head self-attention over [N, T, D] (batch first), as torch.nn.MultiheadAttention(D, heads,
// batch_first=True) called with the same tensor as query, key and value, no mask: in_proj [3D, D]
// xavier-uniform and its bias 0, out_proj Linear(D, D) with its bias 0; dropout on the attention weights.
class MultiheadSelfAttention : public Module {
 public:
  MultiheadSelfAttention(Runtime& runtime, Generator& generator, std::int64_t dim, std::int64_t heads,
                         double dropout = 0.0);
  Variable forward(const Variable& x) override;
  // addend + forward(x), the output projection accumulating onto the addend (one op, nn::linear_add) where no
  // dropout acts on the weights: a residual connection's sum.
  Variable forward_add(const Variable& x, const Variable& addend);

 private:
  std::int64_t dim_;
  std::int64_t heads_;
  double dropout_;
  Variable in_proj_weight_;
  Variable in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;

  Variable run(const Variable& x, const Variable* addend);
};

// A stack of `num_layers` LSTM layers over [N, T, in] (batch first), zero initial state, as
// torch.nn.LSTM(in, hidden, num_layers, batch_first=True): gates i, f, g, o; parameters weight_ih_l{k},
// weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, each uniform in ±1/√hidden. Returns the last layer's hidden
// states at every step, [N, T, hidden], or with `last_step_only` its last step's, [N, hidden] (h_n of the last
// layer: a program that reads only that step never makes the sequence, nor, in backward, the zero gradients of
// the steps it did not read). Step-major: layer k's step t feeds layer k + 1's step t directly, so no layer's
// whole output sequence is a value every later step depends on (a recomputation stays local).
class LSTM : public Module {
 public:
  LSTM(Runtime& runtime, Generator& generator, std::int64_t input_size, std::int64_t hidden_size,
       std::int64_t num_layers = 1, bool last_step_only = false);
  Variable forward(const Variable& x) override;
  // The same values, with static checkpointing over time (Chen et al. on an unrolled RNN): the T steps cut into
  // `segments` runs of ⌊T / segments⌋ steps (the last takes the rest), every run but the last checkpointed,
  // keeping only the states (h, c) it starts from; 0 chooses round(√T). dtr::InvalidArgument for segments
  // outside [0, T].
  Variable forward_checkpointed(const Variable& x, std::int64_t segments);
  std::int64_t hidden_size() const { return hidden_; }

 private:
  // forward (segments < 0) and forward_checkpointed.
  Variable run(const Variable& x, std::int64_t segments);
  // Steps from the states: `in` holds h and c of every layer, then `count` step inputs of [N, 1, input];
  // returns the new h and c, then (unless last_step_only) the top layer's output of each step.
  std::vector<Variable> run_steps(std::span<const Variable> in, std::int64_t count) const;
  struct Layer {
    Variable weight_ih;
    Variable weight_hh;
    Variable bias_ih;
    Variable bias_hh;
  };
  std::int64_t input_;
  std::int64_t hidden_;
  bool last_step_only_;
  std::vector<Layer> layers_;
};

}  // namespace dtr::nn

// The ops on variables (PyTorch's torch.nn.functional): each one op of the table (include/dtr/ops.h), or a few,
// called through nn::apply so that autograd records it. Shapes, dtypes and attributes are checked by the ops'
// shape rules (dtr::ShapeError / dtr::InvalidArgument naming the op).
//
// Thread safety: as the variables' runtime (one thread at a time).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "dtr/nn/autograd.h"

namespace dtr::nn {

// A constant of `runtime` from host values, shaped `shape` (float32).
Variable constant(Runtime& runtime, Shape shape, std::span<const float> values, bool requires_grad = false);
// Zeros of `meta`.
Variable zeros(Runtime& runtime, TensorMeta meta, bool requires_grad = false);

// ---- elementwise (NumPy broadcasting) ----
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable scale(const Variable& x, double factor);
Variable relu(const Variable& x);
Variable gelu(const Variable& x);
Variable tanh(const Variable& x);
Variable sigmoid(const Variable& x);
// torch.nn.LSTM's cell after its linear maps (ops::lstm_cell): gates [N, 4H] as i, f, g, o and the state c
// [N, H] -> {h, c'} with c' = σ(f) c + σ(i) tanh(g), h = σ(o) tanh(c'). Its backward saves only gates and c.
std::vector<Variable> lstm_cell(const Variable& gates, const Variable& c);
// Over `axes` (every element when empty).
Variable sum(const Variable& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
Variable mean(const Variable& x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
// Inverted dropout with probability p in training; the identity (no op, no random draw) otherwise or for p = 0.
Variable dropout(const Variable& x, double p, bool training);

// ---- dense ----
Variable matmul(const Variable& a, const Variable& b, bool transpose_a = false, bool transpose_b = false);
Variable bmm(const Variable& a, const Variable& b, bool transpose_a = false, bool transpose_b = false);
// Multi-head self-attention after the input projection (ops::attention): qkv [N, T, 3E] -> [N, T, E],
// softmax((q / √D) kᵀ) v per head of width D = E / heads. Its backward keeps qkv and the weights.
Variable attention(const Variable& qkv, std::int64_t heads);
// x [..., in] weight [out, in] (+ bias [out]) -> [..., out].
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = {});
// addend + linear(x, weight, bias) as one op (ops::linear_add): the sum of two linear maps, a residual
// connection. addend [..., out]; the gradient reaching the addend is the output's.
Variable linear_add(const Variable& x, const Variable& weight, const Variable& addend, const Variable& bias = {});
struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
};
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias = {}, const Conv2dOptions& options = {});
// Windows of `kernel`, stepping by `stride` (the kernel when not given), zero `padding`.
Variable max_pool2d(const Variable& x, std::array<std::int64_t, 2> kernel,
                    std::optional<std::array<std::int64_t, 2>> stride = std::nullopt,
                    std::array<std::int64_t, 2> padding = {0, 0});
Variable avg_pool2d(const Variable& x, std::array<std::int64_t, 2> kernel,
                    std::optional<std::array<std::int64_t, 2>> stride = std::nullopt,
                    std::array<std::int64_t, 2> padding = {0, 0});
// [N, C, H, W] -> [N, C]: the mean over each channel's cells.
Variable global_avg_pool2d(const Variable& x);
// [N, C, H, W] -> [N, C, f H, f W], each cell repeated f x f (nearest-neighbour upsampling).
Variable upsample_nearest2d(const Variable& x, std::int64_t factor);

// ---- normalization, losses, embedding ----
Variable softmax(const Variable& x, std::int64_t axis = -1);
Variable log_softmax(const Variable& x, std::int64_t axis = -1);
// The mean over rows of -log softmax(logits)[label], with label smoothing ε in [0, 1]: (1 - ε) of it plus ε
// times the mean over classes of -log softmax (PyTorch's cross_entropy(label_smoothing=ε)). logits [N, C],
// labels int64 [N].
Variable cross_entropy(const Variable& logits, const Variable& labels, double label_smoothing = 0.0);
// mean((a - b)²).
Variable mse_loss(const Variable& a, const Variable& b);
// Over the trailing `normalized_rank` dimensions; weight and bias of their shape.
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps = 1e-5,
                    std::int64_t normalized_rank = 1);
// x [N, C, ...]. In training, normalizes by the batch's statistics and, unless the forward is a static
// checkpoint's rerun (recomputing_forward()), updates the running statistics in place (Runtime::assign, so a
// recomputation of older values still sees the old ones) as PyTorch does: running = (1 - momentum) running +
// momentum stat, the variance unbiased. In evaluation, normalizes by the running statistics.
// The running statistics are buffers (variables without gradients) of shape [C]; dtr::InvalidArgument in
// training when a channel has a single value (its unbiased variance is undefined).
Variable batch_norm(const Variable& x, const Variable& weight, const Variable& bias, const Variable& running_mean,
                    const Variable& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(...)) with the same bits, the same gradients and the same running statistics; in training one
// op makes the output (no batch-norm output is ever stored, and the runtime remakes the output in one pass).
Variable batch_norm_relu(const Variable& x, const Variable& weight, const Variable& bias, const Variable& running_mean,
                         const Variable& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
// relu(add(batch_norm(...), residual)), a residual block's end, likewise: one op in training. dtr::ShapeError
// unless the residual has x's shape.
Variable batch_norm_add_relu(const Variable& x, const Variable& weight, const Variable& bias,
                             const Variable& running_mean, const Variable& running_var, const Variable& residual,
                             bool training, double momentum = 0.1, double eps = 1e-5);
// weight [V, D], int64 indices [...] -> [..., D].
Variable embedding(const Variable& weight, const Variable& indices);

// ---- layout ----
// A view (no copy): `shape` may hold one -1.
Variable reshape(const Variable& x, std::vector<std::int64_t> shape);
// Dimensions from `start_dim` on merged into one (a view).
Variable flatten(const Variable& x, std::int64_t start_dim = 1);
Variable transpose(const Variable& x, std::int64_t dim0, std::int64_t dim1);
Variable permute(const Variable& x, std::vector<std::int64_t> dims);
Variable concat(std::span<const Variable> parts, std::int64_t dim);
std::vector<Variable> split(const Variable& x, std::vector<std::int64_t> sizes, std::int64_t dim);
Variable slice(const Variable& x, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);

}  // namespace dtr::nn

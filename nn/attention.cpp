// Multi-head self-attention (include/dtr/nn/layers.h), computed as torch.nn.functional.multi_head_attention_forward
// does for one input: one projection to q, k, v; the query scaled by 1/√head_dim before the product. Without
// dropout on the weights (p = 0, or evaluation) everything between the two projections is one op,
// ops::attention (the same bits); with it, the unfused ops, whose dropout draws its mask as every dropout does.
#include <cmath>

#include "dtr/check.h"
#include "dtr/nn/layers.h"

namespace dtr::nn {

MultiheadSelfAttention::MultiheadSelfAttention(Runtime& runtime, Generator& generator, std::int64_t dim,
                                               std::int64_t heads, double dropout)
    : dim_(dim), heads_(heads), dropout_(dropout) {
  DTR_CHECK(dim > 0 && heads > 0 && dim % heads == 0, InvalidArgument, "MultiheadSelfAttention: dim ", dim,
            ", heads ", heads, " (expected > 0, dim divisible by heads)");
  DTR_CHECK(dropout >= 0 && dropout < 1, InvalidArgument, "MultiheadSelfAttention: dropout ", dropout,
            " (expected a real in [0, 1))");
  in_proj_weight_ = register_parameter(
      "in_proj_weight", uniform_variable(runtime, generator, {3 * dim, dim}, xavier_uniform_bound(dim, 3 * dim), true));
  in_proj_bias_ = register_parameter("in_proj_bias", full_variable(runtime, {3 * dim}, 0.0F, true));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(runtime, generator, dim, dim));
  // PyTorch zeroes out_proj's bias after Linear's own initialisation.
  NoGrad no_grad;
  Variable bias = out_proj_->bias();
  bias.rebind(full_variable(runtime, {dim}, 0.0F, false));
}

Variable MultiheadSelfAttention::forward(const Variable& x) { return run(x, nullptr); }

Variable MultiheadSelfAttention::forward_add(const Variable& x, const Variable& addend) { return run(x, &addend); }

Variable MultiheadSelfAttention::run(const Variable& x, const Variable* addend) {
  DTR_CHECK(x.shape().size() == 3 && x.shape()[2] == dim_, ShapeError, "MultiheadSelfAttention: expected [N, T, ",
            dim_, "], got ", to_string(x.shape()));
  const std::int64_t n = x.shape()[0];
  const std::int64_t t = x.shape()[1];
  const std::int64_t head_dim = dim_ / heads_;
  const Variable projected = linear(x, in_proj_weight_, in_proj_bias_);
  // Without dropout on the weights the rest is one op, whose backward keeps its input and the weights.
  const auto project_out = [&](const Variable& context) {
    return addend != nullptr ? out_proj_->forward_add(context, *addend) : out_proj_->forward(context);
  };
  if (dropout_ == 0.0 || !is_training()) return project_out(attention(projected, heads_));
  const std::vector<Variable> qkv = split(projected, {dim_, dim_, dim_}, 2);
  // [N, T, D] -> [N·heads, T, head_dim]
  const auto heads_first = [&](const Variable& v) {
    return reshape(permute(reshape(v, {n, t, heads_, head_dim}), {0, 2, 1, 3}), {n * heads_, t, head_dim});
  };
  const Variable q = scale(heads_first(qkv[0]), 1.0 / std::sqrt(static_cast<double>(head_dim)));
  const Variable k = heads_first(qkv[1]);
  const Variable v = heads_first(qkv[2]);
  const Variable weights = dropout(softmax(bmm(q, k, false, true), -1), dropout_, is_training());
  const Variable context = bmm(weights, v);  // [N·heads, T, head_dim]
  const Variable merged = reshape(permute(reshape(context, {n, heads_, t, head_dim}), {0, 2, 1, 3}), {n, t, dim_});
  return project_out(merged);
}

}  // namespace dtr::nn

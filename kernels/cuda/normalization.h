// Launchers of the normalization family's device kernels (kernels/cuda/normalization.cu; batch norm's in
// batch_norm.cu): plain pointers to device memory and int64 sizes, no CUDA or dtr type, so the host glue
// (normalization_ops.cpp) compiles as ordinary C++. Each enqueues its work on cuda::stream and launches nothing
// when there is nothing to write.
// Every kernel reproduces its CPU kernel's arithmetic (kernels/softmax.cpp, normalization.cpp, embedding.cpp):
// the same accumulation type (double) and, per output, the same summation order, except batch norm's sums and
// layer norm's weight and bias gradients, which a block splits in a fixed tree (block_reduce.cuh says how).
#pragma once

#include <cstdint>

#include "kernels/normalization/running_stat.h"

namespace dtr::kernels::cuda {

// softmax / log_softmax over rows of `length` elements, x seen as [outer, length, inner] (the row of (o, i)
// starts at o · length · inner + i, stride inner).
void launch_softmax(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const float* x, float* y);
void launch_softmax(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const double* x, double* y);
// softmax_backward / log_softmax_backward (log): dx from grad and the forward output y, same layout.
void launch_softmax_backward(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const float* grad,
                             const float* y, float* dx);
void launch_softmax_backward(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const double* grad,
                             const double* y, double* dx);

// cross_entropy: loss (one element) from logits x [n, c] and labels [n].
void launch_cross_entropy(std::int64_t n, std::int64_t c, const float* x, const std::int64_t* labels, float* loss);
void launch_cross_entropy(std::int64_t n, std::int64_t c, const double* x, const std::int64_t* labels, double* loss);
// cross_entropy_backward: dx [n, c] from the scalar grad (one element), logits x [n, c] and labels [n].
void launch_cross_entropy_backward(std::int64_t n, std::int64_t c, const float* grad, const float* x,
                                   const std::int64_t* labels, float* dx);
void launch_cross_entropy_backward(std::int64_t n, std::int64_t c, const double* grad, const double* x,
                                   const std::int64_t* labels, double* dx);

// layer_norm over `rows` rows of `d` elements: y [rows, d], mean [rows], invstd [rows].
void launch_layer_norm(std::int64_t rows, std::int64_t d, double eps, const float* x, const float* weight,
                       const float* bias, float* y, float* mean, float* invstd);
void launch_layer_norm(std::int64_t rows, std::int64_t d, double eps, const double* x, const double* weight,
                       const double* bias, double* y, double* mean, double* invstd);
// layer_norm_backward: dx [rows, d], dweight [d], dbias [d].
void launch_layer_norm_backward(std::int64_t rows, std::int64_t d, const float* grad, const float* x,
                                const float* weight, const float* mean, const float* invstd, float* dx, float* dweight,
                                float* dbias);
void launch_layer_norm_backward(std::int64_t rows, std::int64_t d, const double* grad, const double* x,
                                const double* weight, const double* mean, const double* invstd, double* dx,
                                double* dweight, double* dbias);

// x [N, C, ...] seen as [n, c, s]: element (i, channel, j) at (i c + channel) s + j.
struct ChannelShape {
  std::int64_t n = 1, c = 1, s = 1;
};

// batch_norm: y of x's shape, batch mean [c], invstd [c].
void launch_batch_norm(const ChannelShape& l, double eps, const float* x, const float* weight, const float* bias,
                       float* y, float* mean, float* invstd);
void launch_batch_norm(const ChannelShape& l, double eps, const double* x, const double* weight, const double* bias,
                       double* y, double* mean, double* invstd);
// batch_norm_stats: mean [c], invstd [c]; batch_norm_normalize: y of x's shape from them, plus `residual` (x's
// shape) unless null, relu'd with `relu` (batch_norm is the two, with neither).
void launch_batch_norm_stats(const ChannelShape& l, double eps, const float* x, float* mean, float* invstd);
void launch_batch_norm_stats(const ChannelShape& l, double eps, const double* x, double* mean, double* invstd);
void launch_batch_norm_normalize(const ChannelShape& l, bool relu, const float* x, const float* weight,
                                 const float* bias, const float* mean, const float* invstd, const float* residual,
                                 float* y);
void launch_batch_norm_normalize(const ChannelShape& l, bool relu, const double* x, const double* weight,
                                 const double* bias, const double* mean, const double* invstd,
                                 const double* residual, double* y);
// batch_norm_backward: dx of x's shape, dweight [c], dbias [c].
void launch_batch_norm_backward(const ChannelShape& l, const float* grad, const float* x, const float* weight,
                                const float* mean, const float* invstd, float* dx, float* dweight, float* dbias);
void launch_batch_norm_backward(const ChannelShape& l, const double* grad, const double* x, const double* weight,
                                const double* mean, const double* invstd, double* dx, double* dweight, double* dbias);
// batch_norm_eval: y of x's shape from the running statistics.
void launch_batch_norm_eval(const ChannelShape& l, double eps, const float* x, const float* weight, const float* bias,
                            const float* running_mean, const float* running_var, float* y);
void launch_batch_norm_eval(const ChannelShape& l, double eps, const double* x, const double* weight,
                            const double* bias, const double* running_mean, const double* running_var, double* y);
// batch_norm_eval_backward: dx of x's shape; dweight, dbias, dmean, dvar [c].
void launch_batch_norm_eval_backward(const ChannelShape& l, double eps, const float* grad, const float* x,
                                     const float* weight, const float* running_mean, const float* running_var,
                                     float* dx, float* dweight, float* dbias, float* dmean, float* dvar);
void launch_batch_norm_eval_backward(const ChannelShape& l, double eps, const double* grad, const double* x,
                                     const double* weight, const double* running_mean, const double* running_var,
                                     double* dx, double* dweight, double* dbias, double* dmean, double* dvar);

// running_stat_update: out[i] = (1 - momentum) running[i] + momentum stat(batch[i]), i in [0, count).
void launch_running_stat_update(std::int64_t count, const RunningStat& u, const float* running, const float* batch,
                                float* out);
void launch_running_stat_update(std::int64_t count, const RunningStat& u, const double* running, const double* batch,
                                double* out);

// embedding: out [count, dim] = rows indices[p] of weight [rows, dim].
void launch_embedding(std::int64_t count, std::int64_t dim, std::int64_t rows, const float* weight,
                      const std::int64_t* indices, float* out);
void launch_embedding(std::int64_t count, std::int64_t dim, std::int64_t rows, const double* weight,
                      const std::int64_t* indices, double* out);
// embedding_backward: out [rows, dim], row v the sum of grad rows p with indices[p] = v, p increasing.
void launch_embedding_backward(std::int64_t count, std::int64_t dim, std::int64_t rows, const float* grad,
                               const std::int64_t* indices, float* out);
void launch_embedding_backward(std::int64_t count, std::int64_t dim, std::int64_t rows, const double* grad,
                               const std::int64_t* indices, double* out);

}  // namespace dtr::kernels::cuda

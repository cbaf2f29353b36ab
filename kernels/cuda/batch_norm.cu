// Device code of batch norm (training and eval, forward and backward, its two halves batch_norm_stats and
// batch_norm_normalize) and of the running-statistic update. A channel's statistics and gradient sums (up to 10^5
// elements) are one block's (block_reduce.cuh), in double, rounded once per output; the elementwise passes are one
// thread per element, applying the CPU kernels' functors to the same double expressions
// (kernels/normalization/normalization.cpp): the same bits for the elementwise parts, and for the sums a fixed
// tree that differs from the CPU's order only in the last bits of a double.
#include <cstdint>

#include "block_reduce.cuh"
#include "cuda_support.h"
#include "grid_stride.cuh"
#include "kernels/elementwise/elementwise_math.h"
#include "normalization.h"

namespace dtr::kernels::cuda {
namespace {

// ---- batch norm ----

// The statistics and gradient sums of a channel are one block's (the blocks stride over the channels): the
// per-thread sums of for_thread_elements added by block_sum. The passes over the channel's elements in between
// read through these loaders: x alone, or the gradient and x, each in double.
template <typename T>
struct ChannelX {
  const T* x;
  __device__ double operator()(std::int64_t e) const { return static_cast<double>(x[e]); }
};

struct GradAndX {
  double g, x;
};
template <typename T>
struct ChannelGradAndX {
  const T* g;
  const T* x;
  __device__ GradAndX operator()(std::int64_t e) const {
    return {static_cast<double>(g[e]), static_cast<double>(x[e])};
  }
};

// Channel c's Σ g · (x - mean) · scale and Σ g, to every thread of the block: the weight and bias gradients of
// batch norm (scale = invstd) and of its eval form (scale = (running_var + eps)^-1/2).
template <typename T>
__device__ void channel_gradient_sums(const ChannelShape& l, std::int64_t c, const T* g, const T* x, double mean,
                                      double scale, double* partial, double& dw, double& db) {
  double w_part = 0.0;
  double b_part = 0.0;
  for_thread_elements(l, c, ChannelGradAndX<T>{g, x}, [&](std::int64_t, const GradAndX& v) {
    w_part += v.g * ((v.x - mean) * scale);
    b_part += v.g;
  });
  dw = block_sum(w_part, partial);
  db = block_sum(b_part, partial);
}

// Two-pass statistics in double (the mean, then Σ (x - mean)²), rounded to T: batch_norm_stats, and the
// first launch of batch_norm.
template <typename T>
__global__ void __launch_bounds__(reduce_block)
    batch_norm_stats_kernel(ChannelShape l, double eps, const T* x, T* mean_out, T* invstd_out) {
  __shared__ double partial[reduce_block];
  const double count = static_cast<double>(l.n * l.s);
  for (std::int64_t c = blockIdx.x; c < l.c; c += gridDim.x) {
    double sum = 0.0;
    for_thread_elements(l, c, ChannelX<T>{x}, [&](std::int64_t, double v) { sum += v; });
    const double mean = block_sum(sum, partial) / count;
    double squares = 0.0;
    for_thread_elements(l, c, ChannelX<T>{x}, [&](std::int64_t, double v) { squares += (v - mean) * (v - mean); });
    const double invstd = 1.0 / sqrt(block_sum(squares, partial) / count + eps);
    if (threadIdx.x == 0) {
      mean_out[c] = static_cast<T>(mean);
      invstd_out[c] = static_cast<T>(invstd);
    }
  }
}

// y = (x - mean) invstd weight + bias, one thread per element, in double from the rounded statistics, then
// add's functor with a residual and relu's when asked: batch_norm_normalize, and batch_norm's second launch.
template <typename T>
__global__ void batch_norm_normalize_kernel(ChannelShape l, bool relu, const T* x, const T* weight, const T* bias,
                                            const T* mean, const T* invstd, const T* residual, T* y) {
  const std::int64_t total = l.n * l.c * l.s;
  for (std::int64_t e = first_index(); e < total; e += grid_stride()) {
    const std::int64_t c = (e / l.s) % l.c;
    T v = static_cast<T>((x[e] - static_cast<double>(mean[c])) * static_cast<double>(invstd[c]) * weight[c] +
                         static_cast<double>(bias[c]));
    if (residual != nullptr) v = Add{}(v, residual[e]);
    y[e] = relu ? Relu{}(v) : v;
  }
}

// dweight = Σ g x̂, dbias = Σ g, then dx = weight invstd (g - dbias / M - x̂ dweight / M) over the channel.
template <typename T>
__global__ void __launch_bounds__(reduce_block)
    batch_norm_backward_kernel(ChannelShape l, const T* g, const T* x, const T* weight, const T* mean_in,
                               const T* invstd_in, T* dx, T* dweight, T* dbias) {
  __shared__ double partial[reduce_block];
  const double m = static_cast<double>(l.n * l.s);
  for (std::int64_t c = blockIdx.x; c < l.c; c += gridDim.x) {
    const double w = weight[c];
    const double mean = mean_in[c];
    const double invstd = invstd_in[c];
    double dw = 0.0;
    double db = 0.0;
    channel_gradient_sums(l, c, g, x, mean, invstd, partial, dw, db);
    for_thread_elements(l, c, ChannelGradAndX<T>{g, x}, [&](std::int64_t e, const GradAndX& v) {
      const double xhat = (v.x - mean) * invstd;
      dx[e] = static_cast<T>(w * invstd * (v.g - db / m - xhat * dw / m));
    });
    if (threadIdx.x == 0) {
      dweight[c] = static_cast<T>(dw);
      dbias[c] = static_cast<T>(db);
    }
  }
}

// One thread per element: no reduction, each element's channel statistics recomputed as the CPU computes them.
template <typename T>
__global__ void batch_norm_eval_kernel(ChannelShape l, double eps, const T* x, const T* weight, const T* bias,
                                       const T* running_mean, const T* running_var, T* y) {
  const std::int64_t total = l.n * l.c * l.s;
  for (std::int64_t e = first_index(); e < total; e += grid_stride()) {
    const std::int64_t c = (e / l.s) % l.c;
    const double w = weight[c];
    const double b = bias[c];
    const double mean = running_mean[c];
    const double invstd = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
    y[e] = static_cast<T>((x[e] - mean) * invstd * w + b);
  }
}

// dx = g weight s per element, s = (var + eps)^-1/2.
template <typename T>
__global__ void batch_norm_eval_backward_dx_kernel(ChannelShape l, double eps, const T* g, const T* weight,
                                                   const T* running_var, T* dx) {
  const std::int64_t total = l.n * l.c * l.s;
  for (std::int64_t e = first_index(); e < total; e += grid_stride()) {
    const std::int64_t c = (e / l.s) % l.c;
    const double w = weight[c];
    const double s = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
    dx[e] = static_cast<T>(g[e] * w * s);
  }
}

// One block per channel: dweight = Σ g x̂, dbias = Σ g, dmean = -weight s dbias, dvar = -weight s² dweight / 2.
template <typename T>
__global__ void __launch_bounds__(reduce_block)
    batch_norm_eval_backward_channels_kernel(ChannelShape l, double eps, const T* g, const T* x, const T* weight,
                                             const T* running_mean, const T* running_var, T* dweight, T* dbias,
                                             T* dmean, T* dvar) {
  __shared__ double partial[reduce_block];
  for (std::int64_t c = blockIdx.x; c < l.c; c += gridDim.x) {
    const double w = weight[c];
    const double mean = running_mean[c];
    const double s = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
    double dw = 0.0;
    double db = 0.0;
    channel_gradient_sums(l, c, g, x, mean, s, partial, dw, db);
    if (threadIdx.x == 0) {
      dweight[c] = static_cast<T>(dw);
      dbias[c] = static_cast<T>(db);
      dmean[c] = static_cast<T>(-w * s * db);
      dvar[c] = static_cast<T>(-0.5 * w * s * s * dw);
    }
  }
}

// (1 - momentum) running + momentum stat(batch); stat as RunningUpdate::stat (kernels/normalization_layout.h).
template <typename T>
__global__ void running_stat_update_kernel(std::int64_t count, RunningStat u, const T* running_in, const T* batch_in,
                                           T* out) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = static_cast<T>(u.updated(running_in[i], batch_in[i]));
  }
}

// ---- launches ----

template <typename T>
void batch_norm_stats(const ChannelShape& l, double eps, const T* x, T* mean, T* invstd) {
  if (l.c <= 0 || l.n * l.s <= 0) return;  // the shape rule requires an element per channel
  batch_norm_stats_kernel<T><<<reduce_blocks(l.c), reduce_block, 0, stream>>>(l, eps, x, mean, invstd);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_normalize(const ChannelShape& l, bool relu, const T* x, const T* w, const T* b, const T* mean,
                          const T* invstd, const T* residual, T* y) {
  const std::int64_t total = l.n * l.c * l.s;
  if (total <= 0) return;
  batch_norm_normalize_kernel<T><<<blocks_for(total), block_size, 0, stream>>>(l, relu, x, w, b, mean, invstd,
                                                                               residual, y);
  DTR_CUDA_CHECK_LAUNCH();
}

// The two launches of batch_norm_stats and batch_norm_normalize: the same bits as the two ops.
template <typename T>
void batch_norm(const ChannelShape& l, double eps, const T* x, const T* w, const T* b, T* y, T* mean, T* invstd) {
  batch_norm_stats(l, eps, x, mean, invstd);
  batch_norm_normalize(l, false, x, w, b, mean, invstd, static_cast<const T*>(nullptr), y);
}

template <typename T>
void batch_norm_backward(const ChannelShape& l, const T* g, const T* x, const T* w, const T* mean, const T* invstd,
                         T* dx, T* dw, T* db) {
  if (l.c <= 0 || l.n * l.s <= 0) return;
  batch_norm_backward_kernel<T><<<reduce_blocks(l.c), reduce_block, 0, stream>>>(l, g, x, w, mean, invstd, dx, dw,
                                                                                  db);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_eval(const ChannelShape& l, double eps, const T* x, const T* w, const T* b, const T* mean,
                     const T* var, T* y) {
  const std::int64_t total = l.n * l.c * l.s;
  if (total <= 0) return;
  batch_norm_eval_kernel<T><<<blocks_for(total), block_size, 0, stream>>>(l, eps, x, w, b, mean, var, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void batch_norm_eval_backward(const ChannelShape& l, double eps, const T* g, const T* x, const T* w, const T* mean,
                              const T* var, T* dx, T* dw, T* db, T* dmean, T* dvar) {
  const std::int64_t total = l.n * l.c * l.s;
  if (total > 0) {
    batch_norm_eval_backward_dx_kernel<T><<<blocks_for(total), block_size, 0, stream>>>(l, eps, g, w, var, dx);
    DTR_CUDA_CHECK_LAUNCH();
  }
  // Channels with no elements (N or S zero) still get their empty sums, as on the CPU.
  if (l.c <= 0) return;
  batch_norm_eval_backward_channels_kernel<T><<<reduce_blocks(l.c), reduce_block, 0, stream>>>(l, eps, g, x, w, mean,
                                                                                              var, dw, db, dmean, dvar);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void running_stat_update(std::int64_t count, const RunningStat& u, const T* running, const T* batch, T* out) {
  if (count <= 0) return;
  running_stat_update_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(count, u, running, batch, out);
  DTR_CUDA_CHECK_LAUNCH();
}

}  // namespace

// The float and double launchers of normalization.h's batch-norm part, each a call of the template above.
#define DTR_BATCH_NORM_LAUNCHERS(T) \
  void launch_batch_norm(const ChannelShape& l, double eps, const T* x, const T* weight, const T* bias, T* y,       \
                         T* mean, T* invstd) {                                                                      \
    batch_norm(l, eps, x, weight, bias, y, mean, invstd);                                                           \
  }                                                                                                                 \
  void launch_batch_norm_stats(const ChannelShape& l, double eps, const T* x, T* mean, T* invstd) {                  \
    batch_norm_stats(l, eps, x, mean, invstd);                                                                      \
  }                                                                                                                 \
  void launch_batch_norm_normalize(const ChannelShape& l, bool relu, const T* x, const T* weight, const T* bias,    \
                                   const T* mean, const T* invstd, const T* residual, T* y) {                       \
    batch_norm_normalize(l, relu, x, weight, bias, mean, invstd, residual, y);                                      \
  }                                                                                                                 \
  void launch_batch_norm_backward(const ChannelShape& l, const T* grad, const T* x, const T* weight, const T* mean,  \
                                  const T* invstd, T* dx, T* dweight, T* dbias) {                                   \
    batch_norm_backward(l, grad, x, weight, mean, invstd, dx, dweight, dbias);                                      \
  }                                                                                                                 \
  void launch_batch_norm_eval(const ChannelShape& l, double eps, const T* x, const T* weight, const T* bias,        \
                              const T* running_mean, const T* running_var, T* y) {                                  \
    batch_norm_eval(l, eps, x, weight, bias, running_mean, running_var, y);                                         \
  }                                                                                                                 \
  void launch_batch_norm_eval_backward(const ChannelShape& l, double eps, const T* grad, const T* x,                \
                                       const T* weight, const T* running_mean, const T* running_var, T* dx,         \
                                       T* dweight, T* dbias, T* dmean, T* dvar) {                                   \
    batch_norm_eval_backward(l, eps, grad, x, weight, running_mean, running_var, dx, dweight, dbias, dmean, dvar);  \
  }                                                                                                                 \
  void launch_running_stat_update(std::int64_t count, const RunningStat& u, const T* running, const T* batch,       \
                                  T* out) {                                                                         \
    running_stat_update(count, u, running, batch, out);                                                             \
  }

DTR_BATCH_NORM_LAUNCHERS(float)
DTR_BATCH_NORM_LAUNCHERS(double)

#undef DTR_BATCH_NORM_LAUNCHERS

}  // namespace dtr::kernels::cuda

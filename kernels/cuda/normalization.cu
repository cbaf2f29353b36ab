// Device code of the normalization ops (softmax, losses, layer and batch norm, embedding). Softmax,
// cross-entropy and layer norm run the CPU kernels' own row functions (kernels/normalization_math.h), one
// thread per row, in the CPU's order; embedding reproduces its CPU loops (embedding.cpp) one thread per output.
// Batch norm's statistics and gradient sums (up to 10^5 elements per channel) and layer norm's weight and bias
// gradients (a sum over all rows) are too long for one thread: a block of reduce_block threads shares each,
// every thread adding a fixed strided subset in order, then the block adding the partial sums in a fixed tree
// (kernels/normalization.cpp adds them in element order instead, which changes only the last bits of a sum
// in double). Every sum is in double, rounded once per output. No atomics, and the split of a sum depends on
// compile-time constants only: the same inputs give the same bits on every run.
//
// Labels and indices were checked by the ops' check_values before the kernel runs (the runtime copies them
// to the host for it); a device kernel cannot throw, so one out of range that reaches it anyway is never
// read through: a cross-entropy row with such a label is NaN, an embedding row with such an index is zero,
// and embedding_backward skips it.
#include <cmath>
#include <cstdint>

#include "cuda_support.h"
#include "grid_stride.cuh"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/normalization/normalization_math.h"
#include "normalization.h"

namespace dtr::kernels::cuda {
namespace {

// ---- softmax, cross-entropy ----

// One thread per row (o, i) of the [outer, length, inner] layout.
template <typename T>
__global__ void softmax_kernel(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const T* x,
                               T* y) {
  const std::int64_t rows = outer * inner;
  for (std::int64_t row = first_index(); row < rows; row += grid_stride()) {
    const std::int64_t base = (row / inner) * length * inner + row % inner;
    softmax_row(x + base, y + base, length, inner, log);
  }
}

template <typename T>
__global__ void softmax_backward_kernel(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log,
                                        const T* g, const T* y, T* dx) {
  const std::int64_t rows = outer * inner;
  for (std::int64_t row = first_index(); row < rows; row += grid_stride()) {
    const std::int64_t base = (row / inner) * length * inner + row % inner;
    softmax_backward_row(g + base, y + base, dx + base, length, inner, log);
  }
}

// One block: its threads compute the row terms log Σ exp(x) + max - x[label] of `block_size` rows at a time
// into shared memory, and thread 0 adds them in row order: the CPU's order, whatever the block's size.
template <typename T>
__global__ void cross_entropy_kernel(std::int64_t n, std::int64_t c, const T* x, const std::int64_t* labels,
                                     T* loss) {
  __shared__ double terms[block_size];
  double total = 0.0;  // meaningful in thread 0
  for (std::int64_t first = 0; first < n; first += block_size) {
    const std::int64_t r = first + threadIdx.x;
    if (r < n) {
      const std::int64_t label = labels[r];
      terms[threadIdx.x] = label >= 0 && label < c ? cross_entropy_term(x + r * c, c, label) : NAN;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const std::int64_t end = first + block_size < n ? first + block_size : n;
      for (std::int64_t i = 0; i < end - first; ++i) total += terms[i];
    }
    __syncthreads();  // terms is written again by the next chunk
  }
  if (threadIdx.x == 0) loss[0] = static_cast<T>(total / static_cast<double>(n));
}

// One thread per row: grad / N · (softmax(x) - onehot(label)).
template <typename T>
__global__ void cross_entropy_backward_kernel(std::int64_t n, std::int64_t c, const T* grad, const T* x,
                                              const std::int64_t* labels, T* dx) {
  const double g = static_cast<double>(grad[0]) / static_cast<double>(n);
  for (std::int64_t r = first_index(); r < n; r += grid_stride()) {
    cross_entropy_backward_row(x + r * c, c, labels[r], g, dx + r * c);
  }
}

// ---- block reductions: batch norm, layer norm's weight and bias gradients ----

// Threads of a block that reduces one batch-norm channel or one tile of layer-norm columns, and how many
// elements' loads each thread issues together. A sum's order depends on reduce_block, so it is a compile-time
// constant, the same on every launch. ResNet's batch norms have 16-64 channels of up to 10^5 elements, so
// only 16-64 SMs are busy: many loads in flight per SM is what speeds them up (on an H200, batch_norm of
// [128, 16, 32, 32] floats took 0.10 ms so, 68 ms with one thread per channel).
constexpr int reduce_block = 512;
constexpr int reduce_unroll = 8;
static_assert((reduce_block & (reduce_block - 1)) == 0, "block_sum's tree halves the block");

// The sum of the block's `value`s, to every thread: partial[t] += partial[t + half] for half = reduce_block / 2,
// ..., 1. A fixed pairwise tree and no atomics: the same inputs give the same bits on every run.
__device__ double block_sum(double value, double* partial) {
  const int t = static_cast<int>(threadIdx.x);
  partial[t] = value;
  __syncthreads();
  for (int half = reduce_block / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();  // every thread has read partial[0] before the next block_sum overwrites it
  return total;
}

// Thread t's share of channel `channel`, whose element j < n · s is at ((j / s) c + channel) s + j % s:
// j = t, t + reduce_block, t + 2 · reduce_block, ..., in increasing order, so that consecutive threads read
// consecutive addresses within a plane of s (coalesced). For each j, `load(e)` reads the element's inputs and
// `use(e, value)` consumes them; the loads of reduce_unroll consecutive j's are issued before their uses, so
// that they are in flight together, and the uses keep the order of j.
template <typename Load, typename Use>
__device__ void for_thread_elements(const ChannelShape& l, std::int64_t channel, Load load, Use use) {
  if (l.n <= 0 || l.s <= 0) return;
  using Value = decltype(load(std::int64_t{0}));
  // j = i s + k with k < s; j += reduce_block is (i, k) += (step_i, step_k) with a carry, no division.
  const std::int64_t step_i = reduce_block / l.s;
  const std::int64_t step_k = reduce_block % l.s;
  std::int64_t i = threadIdx.x / l.s;
  std::int64_t k = threadIdx.x % l.s;
  while (i < l.n) {
    std::int64_t e[reduce_unroll];  // -1 past the channel's end
    Value v[reduce_unroll]{};
#pragma unroll
    for (int u = 0; u < reduce_unroll; ++u) {
      e[u] = i < l.n ? (i * l.c + channel) * l.s + k : -1;
      if (e[u] >= 0) v[u] = load(e[u]);
      i += step_i;
      k += step_k;
      if (k >= l.s) {
        k -= l.s;
        ++i;
      }
    }
#pragma unroll
    for (int u = 0; u < reduce_unroll; ++u) {
      if (e[u] >= 0) use(e[u], v[u]);
    }
  }
}

// ---- layer norm ----

// One thread per row of d elements.
template <typename T>
__global__ void layer_norm_kernel(std::int64_t rows, std::int64_t d, double eps, const T* x, const T* w, const T* b,
                                  T* y, T* mean_out, T* invstd_out) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride()) {
    layer_norm_row(x + r * d, w, b, d, eps, y + r * d, mean_out[r], invstd_out[r]);
  }
}

// dx: one thread per row.
template <typename T>
__global__ void layer_norm_backward_rows_kernel(std::int64_t rows, std::int64_t d, const T* g, const T* x, const T* w,
                                                const T* mean_in, const T* invstd_in, T* dx) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride()) {
    layer_norm_backward_row(g + r * d, x + r * d, w, static_cast<double>(mean_in[r]),
                            static_cast<double>(invstd_in[r]), d, dx + r * d);
  }
}

// A tile of layer_norm_backward_columns_kernel: adjacent columns (8 floats, one 32-byte sector per row, so a
// warp reads 4 rows × 8 columns in whole sectors) times row_slices slices of the rows.
constexpr int tile_columns = 8;
constexpr int row_slices = reduce_block / tile_columns;
static_assert(row_slices * tile_columns == reduce_block && (row_slices & (row_slices - 1)) == 0,
              "the column tree halves the slices");

// dweight, dbias: one block per tile of columns (blocks stride over the tiles). Thread t takes column
// t % tile_columns of the tile and the rows t / tile_columns + m · row_slices, m = 0, 1, ... in increasing order
// (thousands of rows: one thread per column would add them all serially); then each column's row_slices
// partial sums are added pairwise in a fixed tree, as block_sum's: deterministic, not the CPU's order.
template <typename T>
__global__ void __launch_bounds__(reduce_block)
    layer_norm_backward_columns_kernel(std::int64_t rows, std::int64_t d, const T* g, const T* x, const T* mean_in,
                                       const T* invstd_in, T* dw, T* db) {
  __shared__ double w_part[reduce_block];
  __shared__ double b_part[reduce_block];
  const int t = static_cast<int>(threadIdx.x);
  const int slice = t / tile_columns;
  const std::int64_t tiles = (d + tile_columns - 1) / tile_columns;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t k = tile * tile_columns + t % tile_columns;
    double w_total = 0.0;
    double b_total = 0.0;
    if (k < d) {
#pragma unroll 4
      for (std::int64_t r = slice; r < rows; r += row_slices) {
        const double mean = mean_in[r];
        const double invstd = invstd_in[r];
        const std::int64_t e = r * d + k;
        const double xhat = (x[e] - mean) * invstd;
        w_total += g[e] * xhat;
        b_total += g[e];
      }
    }
    w_part[t] = w_total;
    b_part[t] = b_total;
    __syncthreads();
    for (int half = row_slices / 2; half > 0; half /= 2) {
      if (slice < half) {
        w_part[t] += w_part[t + half * tile_columns];
        b_part[t] += b_part[t + half * tile_columns];
      }
      __syncthreads();
    }
    if (slice == 0 && k < d) {
      dw[k] = static_cast<T>(w_part[t]);
      db[k] = static_cast<T>(b_part[t]);
    }
    __syncthreads();  // the sums are read before the next tile overwrites them
  }
}

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

// ---- embedding ----

// One thread per output element: a copy.
template <typename T>
__global__ void embedding_kernel(std::int64_t count, std::int64_t dim, std::int64_t rows, const T* weight,
                                 const std::int64_t* indices, T* out) {
  const std::int64_t total = count * dim;
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t index = indices[i / dim];
    out[i] = index >= 0 && index < rows ? weight[index * dim + i % dim] : T(0);
  }
}

// Thread (bucket, j) owns column j of the rows v with v % buckets == bucket: it zeroes them, then scans the
// positions p in increasing order and adds grad row p's element j to its row indices[p] when it owns it.
// Each output element thus sums its gradients in T in position order, as the CPU's scatter does, without
// atomics; the buckets only multiply the threads.
template <typename T>
__global__ void embedding_backward_kernel(std::int64_t count, std::int64_t dim, std::int64_t rows,
                                          std::int64_t buckets, const T* grad, const std::int64_t* indices, T* out) {
  const std::int64_t threads = buckets * dim;
  for (std::int64_t t = first_index(); t < threads; t += grid_stride()) {
    const std::int64_t j = t % dim;
    const std::int64_t bucket = t / dim;
    for (std::int64_t v = bucket; v < rows; v += buckets) out[v * dim + j] = T(0);
    for (std::int64_t p = 0; p < count; ++p) {
      const std::int64_t v = indices[p];
      if (v >= 0 && v < rows && v % buckets == bucket) out[v * dim + j] += grad[p * dim + j];
    }
  }
}

// ---- launches ----

// Blocks for `units` channels or column tiles of the block reductions, one each up to blocks_for's cap (the
// kernels stride over the rest). Which block reduces a unit does not change its sums.
inline unsigned int reduce_blocks(std::int64_t units) {
  return static_cast<unsigned int>(units < 1 ? 1 : units > 65535 ? 65535 : units);
}

template <typename T>
void softmax(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const T* x, T* y) {
  const std::int64_t rows = outer * inner;
  if (rows <= 0 || length <= 0) return;
  softmax_kernel<T><<<blocks_for(rows), block_size, 0, stream>>>(outer, length, inner, log, x, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void softmax_backward(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const T* g, const T* y,
                      T* dx) {
  const std::int64_t rows = outer * inner;
  if (rows <= 0 || length <= 0) return;
  softmax_backward_kernel<T><<<blocks_for(rows), block_size, 0, stream>>>(outer, length, inner, log, g, y, dx);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void cross_entropy(std::int64_t n, std::int64_t c, const T* x, const std::int64_t* labels, T* loss) {
  if (n <= 0 || c <= 0) return;  // the shape rule requires N, C >= 1
  cross_entropy_kernel<T><<<1, block_size, 0, stream>>>(n, c, x, labels, loss);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void cross_entropy_backward(std::int64_t n, std::int64_t c, const T* grad, const T* x, const std::int64_t* labels,
                            T* dx) {
  if (n <= 0 || c <= 0) return;
  cross_entropy_backward_kernel<T><<<blocks_for(n), block_size, 0, stream>>>(n, c, grad, x, labels, dx);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void layer_norm(std::int64_t rows, std::int64_t d, double eps, const T* x, const T* w, const T* b, T* y, T* mean,
                T* invstd) {
  if (rows <= 0 || d <= 0) return;
  layer_norm_kernel<T><<<blocks_for(rows), block_size, 0, stream>>>(rows, d, eps, x, w, b, y, mean, invstd);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void layer_norm_backward(std::int64_t rows, std::int64_t d, const T* g, const T* x, const T* w, const T* mean,
                         const T* invstd, T* dx, T* dw, T* db) {
  if (d <= 0) return;
  if (rows > 0) {
    layer_norm_backward_rows_kernel<T><<<blocks_for(rows), block_size, 0, stream>>>(rows, d, g, x, w, mean, invstd,
                                                                                     dx);
    DTR_CUDA_CHECK_LAUNCH();
  }
  // With no rows, dweight and dbias are empty sums: zeros, as the CPU writes.
  layer_norm_backward_columns_kernel<T><<<reduce_blocks((d + tile_columns - 1) / tile_columns), reduce_block, 0,
                                          stream>>>(rows, d, g, x, mean, invstd, dw, db);
  DTR_CUDA_CHECK_LAUNCH();
}

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

template <typename T>
void embedding(std::int64_t count, std::int64_t dim, std::int64_t rows, const T* weight, const std::int64_t* indices,
               T* out) {
  const std::int64_t total = count * dim;
  if (total <= 0) return;
  embedding_kernel<T><<<blocks_for(total), block_size, 0, stream>>>(count, dim, rows, weight, indices, out);
  DTR_CUDA_CHECK_LAUNCH();
}

// About this many threads for embedding_backward (enough to fill a GPU), as buckets of rows times columns.
constexpr std::int64_t embedding_backward_threads = 65536;

template <typename T>
void embedding_backward(std::int64_t count, std::int64_t dim, std::int64_t rows, const T* grad,
                        const std::int64_t* indices, T* out) {
  if (rows <= 0 || dim <= 0) return;
  std::int64_t buckets = (embedding_backward_threads + dim - 1) / dim;
  buckets = buckets < rows ? buckets : rows;
  embedding_backward_kernel<T><<<blocks_for(buckets * dim), block_size, 0, stream>>>(count, dim, rows, buckets, grad,
                                                                                     indices, out);
  DTR_CUDA_CHECK_LAUNCH();
}

}  // namespace

// The float and double launchers of normalization.h, each a call of the template above.
#define DTR_NORMALIZATION_LAUNCHERS(T)                                                                              \
  void launch_softmax(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const T* x, T* y) {    \
    softmax(outer, length, inner, log, x, y);                                                                       \
  }                                                                                                                 \
  void launch_softmax_backward(std::int64_t outer, std::int64_t length, std::int64_t inner, bool log, const T* grad, \
                               const T* y, T* dx) {                                                                 \
    softmax_backward(outer, length, inner, log, grad, y, dx);                                                       \
  }                                                                                                                 \
  void launch_cross_entropy(std::int64_t n, std::int64_t c, const T* x, const std::int64_t* labels, T* loss) {      \
    cross_entropy(n, c, x, labels, loss);                                                                           \
  }                                                                                                                 \
  void launch_cross_entropy_backward(std::int64_t n, std::int64_t c, const T* grad, const T* x,                     \
                                     const std::int64_t* labels, T* dx) {                                           \
    cross_entropy_backward(n, c, grad, x, labels, dx);                                                              \
  }                                                                                                                 \
  void launch_layer_norm(std::int64_t rows, std::int64_t d, double eps, const T* x, const T* weight, const T* bias, \
                         T* y, T* mean, T* invstd) {                                                                \
    layer_norm(rows, d, eps, x, weight, bias, y, mean, invstd);                                                     \
  }                                                                                                                 \
  void launch_layer_norm_backward(std::int64_t rows, std::int64_t d, const T* grad, const T* x, const T* weight,    \
                                  const T* mean, const T* invstd, T* dx, T* dweight, T* dbias) {                    \
    layer_norm_backward(rows, d, grad, x, weight, mean, invstd, dx, dweight, dbias);                                \
  }                                                                                                                 \
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
  }                                                                                                                 \
  void launch_embedding(std::int64_t count, std::int64_t dim, std::int64_t rows, const T* weight,                   \
                        const std::int64_t* indices, T* out) {                                                      \
    embedding(count, dim, rows, weight, indices, out);                                                              \
  }                                                                                                                 \
  void launch_embedding_backward(std::int64_t count, std::int64_t dim, std::int64_t rows, const T* grad,            \
                                 const std::int64_t* indices, T* out) {                                             \
    embedding_backward(count, dim, rows, grad, indices, out);                                                       \
  }

DTR_NORMALIZATION_LAUNCHERS(float)
DTR_NORMALIZATION_LAUNCHERS(double)

#undef DTR_NORMALIZATION_LAUNCHERS

}  // namespace dtr::kernels::cuda

// Device code of the normalization ops but batch norm's (batch_norm.cu): softmax, cross-entropy, layer norm,
// embedding. Softmax, cross-entropy and layer norm run the CPU kernels' own row functions
// (kernels/normalization_math.h), one thread per row, in the CPU's order; embedding reproduces its CPU loops
// (embedding.cpp) one thread per output. Layer norm's weight and bias gradients (a sum over all rows) are too long
// for one thread: a block shares each (block_reduce.cuh), which changes only the last bits of a sum in double
// against the CPU's element order. Every sum is in double, rounded once per output; the same inputs give the same
// bits on every run.
//
// Labels and indices were checked by the ops' check_values before the kernel runs (the runtime copies them
// to the host for it); a device kernel cannot throw, so one out of range that reaches it anyway is never
// read through: a cross-entropy row with such a label is NaN, an embedding row with such an index is zero,
// and embedding_backward skips it.
#include <cmath>
#include <cstdint>

#include "block_reduce.cuh"
#include "cuda_support.h"
#include "grid_stride.cuh"
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

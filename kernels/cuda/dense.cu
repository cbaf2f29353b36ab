// Device code of the dense ops (matmul, bmm, linear (cuBLAS); conv2d (cuDNN); pooling; attention): the bias
// fill the GEMMs and convolutions start from, the pooling kernels, and the attention ops' head copies. Pooling reproduces kernels/pool.cpp: the same
// windows, tie rule and summation order, so each output is the CPU kernel's bits. The backward kernels
// gather (one thread per input cell, its windows in output index order) instead of scattering with atomics.
#include <cstdint>

#include "cuda_support.h"
#include "grid_stride.cuh"
#include "dense.h"

namespace dtr::kernels::cuda {
namespace {

// One thread per element of the [count, t, d] side; `gather` picks the direction.
template <typename T>
__global__ void heads_kernel(HeadsLayout l, T factor, bool gather, const T* from, T* to) {
  const std::int64_t count = l.count * l.t * l.d;
  for (std::int64_t x = first_index(); x < count; x += grid_stride()) {
    const std::int64_t j = x % l.d;
    const std::int64_t i = (x / l.d) % l.t;
    const std::int64_t bh = l.first + x / (l.d * l.t);
    const std::int64_t head = bh % l.heads;
    const std::int64_t b = bh / l.heads;
    const std::int64_t y = (b * l.t + i) * l.row_width + l.part * l.e + head * l.d + j;
    if (gather) {
      to[x] = from[y] * factor;
    } else {
      to[y] = from[x] * factor;
    }
  }
}

template <typename T>
__global__ void fill_bias_kernel(const T* bias, std::int64_t count, std::int64_t channels, std::int64_t inner,
                                 T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) y[i] = bias[(i / inner) % channels];
}

template <typename T>
__global__ void fill_addend_kernel(const T* addend, const T* bias, std::int64_t count, std::int64_t channels, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    y[i] = bias != nullptr ? addend[i] + bias[i % channels] : addend[i];
  }
}

// The first row (or column) of outputs whose window, of `kernel` cells from o · stride - pad, holds input
// index `r`, and the last; first > last when none does.
__device__ inline std::int64_t first_window(std::int64_t r, std::int64_t kernel, std::int64_t stride,
                                            std::int64_t pad) {
  const std::int64_t num = r + pad - kernel + 1;  // o · stride >= num
  return num <= 0 ? 0 : (num + stride - 1) / stride;
}
__device__ inline std::int64_t last_window(std::int64_t r, std::int64_t stride, std::int64_t pad,
                                           std::int64_t outputs) {
  const std::int64_t last = (r + pad) / stride;  // o · stride <= r + pad; r + pad >= 0
  return last < outputs - 1 ? last : outputs - 1;
}

// The offset in `plane` of window (i, j)'s maximum, by pool.cpp's rule: the first maximal cell in row-major
// window order, or the first NaN. Padding never wins; every window holds an input cell.
template <typename T>
__device__ std::int64_t window_argmax(const PoolShape& s, const T* plane, std::int64_t i, std::int64_t j) {
  const std::int64_t top = i * s.stride_h - s.pad_h;
  const std::int64_t left = j * s.stride_w - s.pad_w;
  const std::int64_t row_end = top + s.kh < s.h ? top + s.kh : s.h;
  const std::int64_t column_end = left + s.kw < s.w ? left + s.kw : s.w;
  std::int64_t best = -1;
  T best_value = T(0);
  for (std::int64_t row = top > 0 ? top : 0; row < row_end; ++row) {
    for (std::int64_t column = left > 0 ? left : 0; column < column_end; ++column) {
      const T v = plane[row * s.w + column];
      // v != v: v is NaN (no fast math in this build).
      if (best < 0 || (!(best_value != best_value) && (v > best_value || v != v))) {
        best = row * s.w + column;
        best_value = v;
      }
    }
  }
  return best;
}

template <typename T>
__global__ void max_pool2d_kernel(PoolShape s, const T* x, T* y) {
  const std::int64_t count = s.planes * s.oh * s.ow;
  for (std::int64_t idx = first_index(); idx < count; idx += grid_stride()) {
    const std::int64_t j = idx % s.ow;
    const std::int64_t i = (idx / s.ow) % s.oh;
    const std::int64_t p = idx / (s.ow * s.oh);
    const T* plane = x + p * s.h * s.w;
    y[idx] = plane[window_argmax(s, plane, i, j)];
  }
}

// dx at cell (r, c): the gradients of the windows whose maximum it is, added in output index order from 0,
// as the CPU kernel's scatter adds them.
template <typename T>
__global__ void max_pool2d_backward_kernel(PoolShape s, const T* grad, const T* x, T* dx) {
  const std::int64_t count = s.planes * s.h * s.w;
  for (std::int64_t idx = first_index(); idx < count; idx += grid_stride()) {
    const std::int64_t c = idx % s.w;
    const std::int64_t r = (idx / s.w) % s.h;
    const std::int64_t p = idx / (s.w * s.h);
    const T* plane = x + p * s.h * s.w;
    const T* grad_plane = grad + p * s.oh * s.ow;
    const std::int64_t offset = r * s.w + c;
    const std::int64_t i_last = last_window(r, s.stride_h, s.pad_h, s.oh);
    const std::int64_t j_first = first_window(c, s.kw, s.stride_w, s.pad_w);
    const std::int64_t j_last = last_window(c, s.stride_w, s.pad_w, s.ow);
    T total = T(0);
    for (std::int64_t i = first_window(r, s.kh, s.stride_h, s.pad_h); i <= i_last; ++i) {
      for (std::int64_t j = j_first; j <= j_last; ++j) {
        if (window_argmax(s, plane, i, j) == offset) total += grad_plane[i * s.ow + j];
      }
    }
    dx[idx] = total;
  }
}

// The window's input cells summed in double in row-major order over the whole window's size (padding counts
// as zeros), as pool.cpp.
template <typename T>
__global__ void avg_pool2d_kernel(PoolShape s, const T* x, T* y) {
  const std::int64_t count = s.planes * s.oh * s.ow;
  const double window = static_cast<double>(s.kh * s.kw);
  for (std::int64_t idx = first_index(); idx < count; idx += grid_stride()) {
    const std::int64_t j = idx % s.ow;
    const std::int64_t i = (idx / s.ow) % s.oh;
    const std::int64_t p = idx / (s.ow * s.oh);
    const T* plane = x + p * s.h * s.w;
    const std::int64_t top = i * s.stride_h - s.pad_h;
    const std::int64_t left = j * s.stride_w - s.pad_w;
    const std::int64_t row_end = top + s.kh < s.h ? top + s.kh : s.h;
    const std::int64_t column_end = left + s.kw < s.w ? left + s.kw : s.w;
    double total = 0.0;
    for (std::int64_t row = top > 0 ? top : 0; row < row_end; ++row) {
      for (std::int64_t column = left > 0 ? left : 0; column < column_end; ++column) {
        total += static_cast<double>(plane[row * s.w + column]);
      }
    }
    y[idx] = static_cast<T>(total / window);
  }
}

// dx at cell (r, c): each containing window's share, grad / window rounded to T, added in T in output index
// order from 0, as the CPU kernel's scatter adds them.
template <typename T>
__global__ void avg_pool2d_backward_kernel(PoolShape s, const T* grad, T* dx) {
  const std::int64_t count = s.planes * s.h * s.w;
  const double window = static_cast<double>(s.kh * s.kw);
  for (std::int64_t idx = first_index(); idx < count; idx += grid_stride()) {
    const std::int64_t c = idx % s.w;
    const std::int64_t r = (idx / s.w) % s.h;
    const std::int64_t p = idx / (s.w * s.h);
    const T* grad_plane = grad + p * s.oh * s.ow;
    const std::int64_t i_last = last_window(r, s.stride_h, s.pad_h, s.oh);
    const std::int64_t j_first = first_window(c, s.kw, s.stride_w, s.pad_w);
    const std::int64_t j_last = last_window(c, s.stride_w, s.pad_w, s.ow);
    T total = T(0);
    for (std::int64_t i = first_window(r, s.kh, s.stride_h, s.pad_h); i <= i_last; ++i) {
      for (std::int64_t j = j_first; j <= j_last; ++j) {
        total += static_cast<T>(static_cast<double>(grad_plane[i * s.ow + j]) / window);
      }
    }
    dx[idx] = total;
  }
}

template <typename T>
void fill_bias(const T* bias, std::int64_t count, std::int64_t channels, std::int64_t inner, T* y) {
  if (count <= 0) return;
  fill_bias_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(bias, count, channels, inner, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void fill_addend(const T* addend, const T* bias, std::int64_t count, std::int64_t channels, T* y) {
  if (count <= 0) return;
  fill_addend_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(addend, bias, count, channels, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void max_pool2d(const PoolShape& s, const T* x, T* y) {
  const std::int64_t count = s.planes * s.oh * s.ow;
  if (count <= 0) return;
  max_pool2d_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(s, x, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void max_pool2d_backward(const PoolShape& s, const T* grad, const T* x, T* dx) {
  const std::int64_t count = s.planes * s.h * s.w;
  if (count <= 0) return;
  max_pool2d_backward_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(s, grad, x, dx);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void avg_pool2d(const PoolShape& s, const T* x, T* y) {
  const std::int64_t count = s.planes * s.oh * s.ow;
  if (count <= 0) return;
  avg_pool2d_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(s, x, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void avg_pool2d_backward(const PoolShape& s, const T* grad, T* dx) {
  const std::int64_t count = s.planes * s.h * s.w;
  if (count <= 0) return;
  avg_pool2d_backward_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(s, grad, dx);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void heads(const HeadsLayout& l, double factor, bool gather, const T* from, T* to) {
  const std::int64_t count = l.count * l.t * l.d;
  if (count <= 0) return;
  heads_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(l, static_cast<T>(factor), gather, from, to);
  DTR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_heads_gather(const HeadsLayout& l, double factor, const float* from, float* to) {
  heads(l, factor, true, from, to);
}
void launch_heads_gather(const HeadsLayout& l, double factor, const double* from, double* to) {
  heads(l, factor, true, from, to);
}
void launch_heads_scatter(const HeadsLayout& l, double factor, const float* from, float* to) {
  heads(l, factor, false, from, to);
}
void launch_heads_scatter(const HeadsLayout& l, double factor, const double* from, double* to) {
  heads(l, factor, false, from, to);
}

void launch_fill_bias(const float* bias, std::int64_t count, std::int64_t channels, std::int64_t inner, float* y) {
  fill_bias(bias, count, channels, inner, y);
}
void launch_fill_bias(const double* bias, std::int64_t count, std::int64_t channels, std::int64_t inner,
                      double* y) {
  fill_bias(bias, count, channels, inner, y);
}

void launch_fill_addend(const float* addend, const float* bias, std::int64_t count, std::int64_t channels, float* y) {
  fill_addend(addend, bias, count, channels, y);
}
void launch_fill_addend(const double* addend, const double* bias, std::int64_t count, std::int64_t channels,
                        double* y) {
  fill_addend(addend, bias, count, channels, y);
}

void launch_max_pool2d(const PoolShape& s, const float* x, float* y) { max_pool2d(s, x, y); }
void launch_max_pool2d(const PoolShape& s, const double* x, double* y) { max_pool2d(s, x, y); }

void launch_max_pool2d_backward(const PoolShape& s, const float* grad, const float* x, float* dx) {
  max_pool2d_backward(s, grad, x, dx);
}
void launch_max_pool2d_backward(const PoolShape& s, const double* grad, const double* x, double* dx) {
  max_pool2d_backward(s, grad, x, dx);
}

void launch_avg_pool2d(const PoolShape& s, const float* x, float* y) { avg_pool2d(s, x, y); }
void launch_avg_pool2d(const PoolShape& s, const double* x, double* y) { avg_pool2d(s, x, y); }

void launch_avg_pool2d_backward(const PoolShape& s, const float* grad, float* dx) {
  avg_pool2d_backward(s, grad, dx);
}
void launch_avg_pool2d_backward(const PoolShape& s, const double* grad, double* dx) {
  avg_pool2d_backward(s, grad, dx);
}

}  // namespace dtr::kernels::cuda

// Launchers of the dense family's own device kernels (kernels/cuda/dense.cu): plain pointers to device
// memory and int64 sizes, no CUDA type, so the host glue (dense_ops.cpp) compiles as ordinary C++. Each
// enqueues its work on cuda::stream and launches nothing when there is nothing to write.
#pragma once

#include <cstdint>

namespace dtr::kernels::cuda {

// y[i] = bias[(i / inner) % channels] for i in [0, count): a [..., channels, inner] tensor filled with a
// per-channel bias, which a GEMM or convolution with beta = 1 then adds its product to.
void launch_fill_bias(const float* bias, std::int64_t count, std::int64_t channels, std::int64_t inner, float* y);
void launch_fill_bias(const double* bias, std::int64_t count, std::int64_t channels, std::int64_t inner, double* y);

// A pooling call over `planes` (N · C) planes of [h, w] with [oh, ow] outputs; the attributes as kernels/pool.cpp
// reads them.
struct PoolShape {
  std::int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  std::int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// max_pool2d: y [planes, oh, ow] from x [planes, h, w].
void launch_max_pool2d(const PoolShape& s, const float* x, float* y);
void launch_max_pool2d(const PoolShape& s, const double* x, double* y);
// max_pool2d_backward: dx [planes, h, w] from grad [planes, oh, ow] and the forward's input x.
void launch_max_pool2d_backward(const PoolShape& s, const float* grad, const float* x, float* dx);
void launch_max_pool2d_backward(const PoolShape& s, const double* grad, const double* x, double* dx);
// avg_pool2d: y [planes, oh, ow] from x [planes, h, w].
void launch_avg_pool2d(const PoolShape& s, const float* x, float* y);
void launch_avg_pool2d(const PoolShape& s, const double* x, double* y);
// avg_pool2d_backward: dx [planes, h, w] from grad [planes, oh, ow].
void launch_avg_pool2d_backward(const PoolShape& s, const float* grad, float* dx);
void launch_avg_pool2d_backward(const PoolShape& s, const double* grad, double* dx);

}  // namespace dtr::kernels::cuda

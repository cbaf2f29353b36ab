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

// y[i] = addend[i] + bias[i % channels] (bias null: the addend alone) for i in [0, count): linear_add's output
// before its GEMM adds the product.
void launch_fill_addend(const float* addend, const float* bias, std::int64_t count, std::int64_t channels, float* y);
void launch_fill_addend(const double* addend, const double* bias, std::int64_t count, std::int64_t channels,
                        double* y);

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

// The heads of the attention ops: in a [n, t, row_width] tensor, head `head` of column block `part` is the
// columns part · e + head · d ... + d of every row. Heads [first, first + count) of the [n · heads] order are
// copied out as [count, t, d] by gather (to[(c · t + i) · d + j] = from[(b · t + i) · row_width + part · e +
// head · d + j] · factor, with b · heads + head = first + c), and back by scatter (the same map the other way,
// times factor): factor as the `scale` op multiplies.
struct HeadsLayout {
  std::int64_t n = 0, t = 0, e = 0, heads = 1, d = 0, row_width = 0, part = 0, first = 0, count = 0;
};
void launch_heads_gather(const HeadsLayout& l, double factor, const float* from, float* to);
void launch_heads_gather(const HeadsLayout& l, double factor, const double* from, double* to);
void launch_heads_scatter(const HeadsLayout& l, double factor, const float* from, float* to);
void launch_heads_scatter(const HeadsLayout& l, double factor, const double* from, double* to);

}  // namespace dtr::kernels::cuda

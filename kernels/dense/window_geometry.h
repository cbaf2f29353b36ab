// The window geometry of convolution and pooling: what each op derives from its shapes and attributes
// (stride, padding, dilation, groups, kernel), with every check of its shape rule. The CPU kernels, the shape
// rules and the CUDA kernels' argument unpacking all read it from here, so they cannot disagree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dtr/op.h"

namespace dtr::kernels {

// A pair attribute ("stride", "padding", "dilation", "kernel"): two ints (height, width); `fallback` when it
// is absent, InvalidArgument when it is absent without one or does not list 2 ints.
std::vector<std::int64_t> pair_attr(const std::string& op, const Attrs& attrs, const char* name,
                                    const std::optional<std::vector<std::int64_t>>& fallback);

// Everything the three conv ops derive from the input's and the weight's shapes and the attributes.
struct ConvGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input [N, C, H, W]
  std::int64_t o = 0, kh = 0, kw = 0;       // weight [O, C/groups, KH, KW]
  std::int64_t groups = 1;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  std::int64_t oh = 0, ow = 0;  // output [N, O, OH, OW]

  std::int64_t channels_per_group() const { return c / groups; }
  std::int64_t outputs_per_group() const { return o / groups; }
  std::int64_t patch() const { return channels_per_group() * kh * kw; }  // rows of a column matrix
  std::int64_t positions() const { return oh * ow; }                   // its columns
  Shape input_shape() const { return {n, c, h, w}; }
  Shape weight_shape() const { return {o, channels_per_group(), kh, kw}; }
  Shape output_shape() const { return {n, o, oh, ow}; }
  // A 1x1 kernel, stride 1, no padding: the input plane is already the column matrix.
  bool pointwise() const {
    return kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
  std::int64_t input_numel() const { return n * c * h * w; }
  std::int64_t weight_numel() const { return o * channels_per_group() * kh * kw; }
  std::int64_t output_numel() const { return n * o * oh * ow; }
  double gemm_flops() const {
    return 2.0 * static_cast<double>(n) * static_cast<double>(o) * static_cast<double>(positions()) *
           static_cast<double>(patch());
  }
};

// The geometry of each conv op's call: conv2d(x, weight[, bias]); conv2d_backward_input(grad_out, weight) with
// attribute input_shape; conv2d_backward_weight(grad_out, x) with attribute weight_shape. ShapeError naming
// the op and the input shapes unless they fit.
ConvGeometry conv2d_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs);
ConvGeometry conv2d_backward_input_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs);
ConvGeometry conv2d_backward_weight_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs);

// What the pooling ops derive from the input's shape and the attributes.
struct PoolGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t oh = 0, ow = 0;

  std::int64_t planes() const { return n * c; }
  Shape input_shape() const { return {n, c, h, w}; }
  Shape output_shape() const { return {n, c, oh, ow}; }
  std::int64_t window() const { return kh * kw; }
  // Calls fn(offset) for every input cell of window (y, x) inside the input (offset = row · W + column), in
  // row-major window order.
  template <typename Fn>
  void for_window(std::int64_t y, std::int64_t x, Fn&& fn) const {
    const std::int64_t top = y * stride_h - pad_h;
    const std::int64_t left = x * stride_w - pad_w;
    for (std::int64_t row = std::max<std::int64_t>(top, 0); row < std::min(top + kh, h); ++row) {
      for (std::int64_t column = std::max<std::int64_t>(left, 0); column < std::min(left + kw, w); ++column) {
        fn(row * w + column);
      }
    }
  }
};

// The geometry of a pooling call over input shape `x`: attributes "kernel" (2 ints, required), "stride"
// (default: the kernel), "padding" (default 0, at most half the kernel, so that every window holds an input
// cell); ShapeError naming `op` unless `x` fits.
PoolGeometry pool_geometry(const std::string& op, std::span<const TensorMeta> inputs, const Shape& x,
                           const Attrs& attrs);
// max_pool2d_backward(grad_out, x); avg_pool2d_backward(grad_out) with attribute input_shape.
PoolGeometry max_pool2d_backward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs);
PoolGeometry avg_pool2d_backward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs);

}  // namespace dtr::kernels

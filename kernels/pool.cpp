// 2-d max and average pooling over [N, C, H, W] and their backward ops, on the CPU. Every window is visited
// in row-major order, so ties, sums and the scatter of gradients are the same bits on every run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "dtr/ops.h"
#include "op_checks.h"

namespace dtr::ops {
namespace {

// A pair attribute: two ints; `fallback` when it is absent, InvalidArgument when it is absent without one.
std::vector<std::int64_t> pair_attr(const std::string& op, const Attrs& attrs, const char* name,
                                    const std::optional<std::vector<std::int64_t>>& fallback) {
  if (!attrs.has(name) && fallback) return *fallback;
  const std::vector<std::int64_t>& value = attrs.get_ints(name);
  DTR_CHECK(value.size() == 2, InvalidArgument, "op '", op, "': attribute '", name,
            "' must list 2 ints (height, width), got ", value.size());
  return value;
}

std::string pair_string(std::int64_t a, std::int64_t b) { return to_string(Shape{a, b}); }

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

// Attributes "kernel" (2 ints, required), "stride" (default: the kernel), "padding" (default 0, at most half
// the kernel, so that every window holds an input cell); ShapeError naming `op` unless `x` fits.
PoolGeometry pool_geometry(const std::string& op, std::span<const TensorMeta> inputs, const Shape& x,
                           const Attrs& attrs) {
  DTR_CHECK_SHAPES(x.size() == 4, op, inputs, "pools an input [N, C, H, W], got input ", to_string(x));
  const auto kernel = pair_attr(op, attrs, "kernel", std::nullopt);
  const auto stride = pair_attr(op, attrs, "stride", kernel);
  const auto padding = pair_attr(op, attrs, "padding", std::vector<std::int64_t>{0, 0});
  PoolGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.kh = kernel[0], g.kw = kernel[1];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  for (const std::int64_t d : x) DTR_CHECK_SHAPES(d >= 0, op, inputs, "has a negative input dimension ", to_string(x));
  DTR_CHECK_SHAPES(g.kh >= 1 && g.kw >= 1, op, inputs, "needs a kernel of at least 1x1, got kernel ",
                   pair_string(g.kh, g.kw));
  DTR_CHECK_SHAPES(g.stride_h >= 1 && g.stride_w >= 1, op, inputs, "needs a positive stride, got stride ",
                   pair_string(g.stride_h, g.stride_w));
  DTR_CHECK_SHAPES(g.pad_h >= 0 && g.pad_w >= 0 && 2 * g.pad_h <= g.kh && 2 * g.pad_w <= g.kw, op, inputs,
                   "has bad padding ", pair_string(g.pad_h, g.pad_w), ": from 0 to half the kernel ",
                   pair_string(g.kh, g.kw));
  const std::int64_t span_h = g.h + 2 * g.pad_h - g.kh;
  const std::int64_t span_w = g.w + 2 * g.pad_w - g.kw;
  DTR_CHECK_SHAPES(span_h >= 0 && span_w >= 0, op, inputs, "has bad padding: kernel ", pair_string(g.kh, g.kw),
                   " does not fit input ", pair_string(g.h, g.w), " padded by ", pair_string(g.pad_h, g.pad_w),
                   ", the output would be empty");
  g.oh = span_h / g.stride_h + 1;
  g.ow = span_w / g.stride_w + 1;
  return g;
}

// The offset in `plane` of window (y, x)'s maximum: the first maximal cell in row-major window order, or
// the first NaN (NaN propagates). Padding never wins; every window holds an input cell.
template <typename T>
std::int64_t window_argmax(const PoolGeometry& g, const T* plane, std::int64_t y, std::int64_t x) {
  std::int64_t best = -1;
  g.for_window(y, x, [&](std::int64_t offset) {
    const T v = plane[offset];
    if (best < 0 || (!std::isnan(plane[best]) && (v > plane[best] || std::isnan(v)))) best = offset;
  });
  return best;
}

// ---- max_pool2d -------------------------------------------------------------------------------------------

TensorMetas infer_max_pool2d(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("max_pool2d", inputs, 1);
  kernels::check_floating("max_pool2d", inputs);
  return {TensorMeta{pool_geometry("max_pool2d", inputs, inputs[0].shape, attrs).output_shape(), inputs[0].dtype}};
}

template <typename T>
void max_pool2d_cpu(T /*zero*/, const KernelArgs& args) {
  const PoolGeometry g = pool_geometry("max_pool2d", args.input_meta, args.input_meta[0].shape, args.attrs);
  const T* x = args.input<T>(0);
  T* y = args.output<T>(0);
  for (std::int64_t p = 0; p < g.planes(); ++p) {
    const T* plane = x + p * g.h * g.w;
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) *y++ = plane[window_argmax(g, plane, i, j)];
    }
  }
}

// Each output compares every cell of its window.
double pool_flops(const PoolGeometry& g) {
  return kernels::at_least_one(static_cast<double>(g.planes() * g.oh * g.ow * g.window()));
}

double max_pool2d_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(pool_geometry("max_pool2d", inputs, inputs[0].shape, attrs));
}

// ---- max_pool2d_backward(grad_out, x) ---------------------------------------------------------------------

PoolGeometry max_backward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_geometry("max_pool2d_backward", inputs, inputs[1].shape, attrs);
}

TensorMetas infer_max_pool2d_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("max_pool2d_backward", inputs, 2);
  kernels::check_floating("max_pool2d_backward", inputs);
  const PoolGeometry g = max_backward_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "max_pool2d_backward", inputs,
                   "needs grad_out of the pool's output shape ", to_string(g.output_shape()));
  return {inputs[1]};
}

template <typename T>
void max_pool2d_backward_cpu(T /*zero*/, const KernelArgs& args) {
  const PoolGeometry g = max_backward_geometry(args.input_meta, args.attrs);
  const T* grad = args.input<T>(0);
  const T* x = args.input<T>(1);
  T* dx = args.output<T>(0);
  std::fill(dx, dx + g.planes() * g.h * g.w, T{0});
  for (std::int64_t p = 0; p < g.planes(); ++p) {
    const T* plane = x + p * g.h * g.w;
    T* dplane = dx + p * g.h * g.w;
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) dplane[window_argmax(g, plane, i, j)] += *grad++;
    }
  }
}

double max_pool2d_backward_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(max_backward_geometry(inputs, attrs));
}

// ---- avg_pool2d -------------------------------------------------------------------------------------------

TensorMetas infer_avg_pool2d(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("avg_pool2d", inputs, 1);
  kernels::check_floating("avg_pool2d", inputs);
  return {TensorMeta{pool_geometry("avg_pool2d", inputs, inputs[0].shape, attrs).output_shape(), inputs[0].dtype}};
}

// The window's input cells summed in double in row-major order, divided by the whole window's size: padded
// cells count as zeros (PyTorch's default, count_include_pad).
template <typename T>
void avg_pool2d_cpu(T /*zero*/, const KernelArgs& args) {
  const PoolGeometry g = pool_geometry("avg_pool2d", args.input_meta, args.input_meta[0].shape, args.attrs);
  const T* x = args.input<T>(0);
  T* y = args.output<T>(0);
  const auto window = static_cast<double>(g.window());
  for (std::int64_t p = 0; p < g.planes(); ++p) {
    const T* plane = x + p * g.h * g.w;
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) {
        double total = 0.0;
        g.for_window(i, j, [&](std::int64_t offset) { total += static_cast<double>(plane[offset]); });
        *y++ = static_cast<T>(total / window);
      }
    }
  }
}

double avg_pool2d_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(pool_geometry("avg_pool2d", inputs, inputs[0].shape, attrs));
}

// ---- avg_pool2d_backward(grad_out), attribute input_shape ---------------------------------------------------

PoolGeometry avg_backward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::vector<std::int64_t>& shape = attrs.get_ints("input_shape");
  return pool_geometry("avg_pool2d_backward", inputs, Shape(shape.begin(), shape.end()), attrs);
}

TensorMetas infer_avg_pool2d_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("avg_pool2d_backward", inputs, 1);
  kernels::check_floating("avg_pool2d_backward", inputs);
  const PoolGeometry g = avg_backward_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "avg_pool2d_backward", inputs,
                   "needs grad_out of the pool's output shape ", to_string(g.output_shape()));
  return {TensorMeta{g.input_shape(), inputs[0].dtype}};
}

// Each output's gradient over the window size, added to the window's input cells, outputs in index order.
template <typename T>
void avg_pool2d_backward_cpu(T /*zero*/, const KernelArgs& args) {
  const PoolGeometry g = avg_backward_geometry(args.input_meta, args.attrs);
  const T* grad = args.input<T>(0);
  T* dx = args.output<T>(0);
  std::fill(dx, dx + g.planes() * g.h * g.w, T{0});
  const auto window = static_cast<double>(g.window());
  for (std::int64_t p = 0; p < g.planes(); ++p) {
    T* dplane = dx + p * g.h * g.w;
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) {
        const auto share = static_cast<T>(static_cast<double>(*grad++) / window);
        g.for_window(i, j, [&](std::int64_t offset) { dplane[offset] += share; });
      }
    }
  }
}

double avg_pool2d_backward_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(avg_backward_geometry(inputs, attrs));
}

}  // namespace

const OpDef& max_pool2d() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{
      .name = "max_pool2d",
      .infer = infer_max_pool2d,
      .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { max_pool2d_cpu(zero, args); }),
      .flops = max_pool2d_flops});
  return def;
}

const OpDef& max_pool2d_backward() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{.name = "max_pool2d_backward",
                         .infer = infer_max_pool2d_backward,
                         .cpu_kernel = kernels::floating_kernel(
                             [](auto zero, const KernelArgs& args) { max_pool2d_backward_cpu(zero, args); }),
                         .flops = max_pool2d_backward_flops});
  return def;
}

const OpDef& avg_pool2d() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{
      .name = "avg_pool2d",
      .infer = infer_avg_pool2d,
      .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { avg_pool2d_cpu(zero, args); }),
      .flops = avg_pool2d_flops});
  return def;
}

const OpDef& avg_pool2d_backward() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{.name = "avg_pool2d_backward",
                         .infer = infer_avg_pool2d_backward,
                         .cpu_kernel = kernels::floating_kernel(
                             [](auto zero, const KernelArgs& args) { avg_pool2d_backward_cpu(zero, args); }),
                         .flops = avg_pool2d_backward_flops});
  return def;
}

}  // namespace dtr::ops

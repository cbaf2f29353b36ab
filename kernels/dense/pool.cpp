// 2-d max and average pooling over [N, C, H, W] and their backward ops, on the CPU. Every window is visited
// in row-major order, so ties, sums and the scatter of gradients are the same bits on every run; the planes
// (one image's channel) are spread over the threads, each plane's arithmetic in one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/dense/window_geometry.h"
#include "kernels/dense/window_max.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

using kernels::replaces;
using kernels::window_argmax;

// 2x2 windows at stride 2 without padding (U-Net's and most CNNs' pooling): disjoint and inside the input, so
// each output compares its four cells in window order with no geometry to walk, and the gradient writes each
// cell once (no zeroing pass, no scatter): the same bits as window_argmax's loops, 2-4x faster
// (bench/pool_bench.cpp).
bool two_by_two(const kernels::PoolGeometry& g) {
  return g.kh == 2 && g.kw == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

// Which of a 2x2 window's cells, in window order (top left, top right, bottom left, bottom right), is its
// maximum by window_argmax's rule.
template <typename T>
int max_cell_2x2(const T* top, const T* bottom) {
  T best = top[0];
  int which = 0;
  if (replaces(best, top[1])) {
    best = top[1];
    which = 1;
  }
  if (replaces(best, bottom[0])) {
    best = bottom[0];
    which = 2;
  }
  if (replaces(best, bottom[1])) which = 3;
  return which;
}

// The maxima of one plane's 2x2 windows.
template <typename T>
void max_pool_plane_2x2(const kernels::PoolGeometry& g, const T* plane, T* y) {
  for (std::int64_t i = 0; i < g.oh; ++i) {
    const T* top = plane + 2 * i * g.w;
    const T* bottom = top + g.w;
    T* row = y + i * g.ow;
    for (std::int64_t j = 0; j < g.ow; ++j) {
      const int which = max_cell_2x2(top + 2 * j, bottom + 2 * j);
      row[j] = (which < 2 ? top : bottom)[2 * j + (which & 1)];
    }
  }
}

// One plane's input gradient through 2x2 windows: each window's gradient to its maximal cell (0 + g, as the
// general path's scatter into zeros gives), zero elsewhere, rows and columns no window covers included.
template <typename T>
void max_pool_backward_plane_2x2(const kernels::PoolGeometry& g, const T* plane, const T* grad, T* dplane) {
  for (std::int64_t i = 0; i < g.oh; ++i) {
    const T* top = plane + 2 * i * g.w;
    const T* bottom = top + g.w;
    T* dtop = dplane + 2 * i * g.w;
    T* dbottom = dtop + g.w;
    const T* grad_row = grad + i * g.ow;
    for (std::int64_t j = 0; j < g.ow; ++j) {
      const int which = max_cell_2x2(top + 2 * j, bottom + 2 * j);
      const T sum = T{0} + grad_row[j];
      dtop[2 * j] = which == 0 ? sum : T{0};
      dtop[2 * j + 1] = which == 1 ? sum : T{0};
      dbottom[2 * j] = which == 2 ? sum : T{0};
      dbottom[2 * j + 1] = which == 3 ? sum : T{0};
    }
    std::fill(dtop + 2 * g.ow, dtop + g.w, T{0});
    std::fill(dbottom + 2 * g.ow, dbottom + g.w, T{0});
  }
  std::fill(dplane + 2 * g.oh * g.w, dplane + g.h * g.w, T{0});
}

// ---- max_pool2d -------------------------------------------------------------------------------------------

TensorMetas infer_max_pool2d(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("max_pool2d", inputs, 1);
  kernels::check_floating("max_pool2d", inputs);
  return {TensorMeta{kernels::pool_geometry("max_pool2d", inputs, inputs[0].shape, attrs).output_shape(), inputs[0].dtype}};
}

template <typename T>
void max_pool2d_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::PoolGeometry g = kernels::pool_geometry("max_pool2d", args.input_meta, args.input_meta[0].shape, args.attrs);
  const T* x = args.input<T>(0);
  T* out = args.output<T>(0);
  const bool fast = two_by_two(g);
  kernels::parallel_for_items(g.planes(), g.planes() * g.h * g.w, [&](std::int64_t p) {
    const T* plane = x + p * g.h * g.w;
    T* y = out + p * g.oh * g.ow;
    if (fast) return max_pool_plane_2x2(g, plane, y);
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) *y++ = plane[window_argmax(g, plane, i, j)];
    }
  });
}

// Each output compares every cell of its window.
double pool_flops(const kernels::PoolGeometry& g) {
  return kernels::at_least_one(static_cast<double>(g.planes() * g.oh * g.ow * g.window()));
}

double max_pool2d_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(kernels::pool_geometry("max_pool2d", inputs, inputs[0].shape, attrs));
}

// ---- max_pool2d_backward(grad_out, x) ---------------------------------------------------------------------

TensorMetas infer_max_pool2d_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("max_pool2d_backward", inputs, 2);
  kernels::check_floating("max_pool2d_backward", inputs);
  const kernels::PoolGeometry g = kernels::max_pool2d_backward_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "max_pool2d_backward", inputs,
                   "needs grad_out of the pool's output shape ", to_string(g.output_shape()));
  return {inputs[1]};
}

template <typename T>
void max_pool2d_backward_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::PoolGeometry g = kernels::max_pool2d_backward_geometry(args.input_meta, args.attrs);
  const T* grads = args.input<T>(0);
  const T* x = args.input<T>(1);
  T* dx = args.output<T>(0);
  const bool fast = two_by_two(g);
  kernels::parallel_for_items(g.planes(), g.planes() * g.h * g.w, [&](std::int64_t p) {
    const T* plane = x + p * g.h * g.w;
    T* dplane = dx + p * g.h * g.w;
    const T* grad = grads + p * g.oh * g.ow;
    if (fast) return max_pool_backward_plane_2x2(g, plane, grad, dplane);
    std::fill(dplane, dplane + g.h * g.w, T{0});
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) dplane[window_argmax(g, plane, i, j)] += *grad++;
    }
  });
}

double max_pool2d_backward_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(kernels::max_pool2d_backward_geometry(inputs, attrs));
}

// ---- avg_pool2d -------------------------------------------------------------------------------------------

TensorMetas infer_avg_pool2d(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("avg_pool2d", inputs, 1);
  kernels::check_floating("avg_pool2d", inputs);
  return {TensorMeta{kernels::pool_geometry("avg_pool2d", inputs, inputs[0].shape, attrs).output_shape(), inputs[0].dtype}};
}

// The window's input cells summed in double in row-major order, divided by the whole window's size: padded
// cells count as zeros (PyTorch's default, count_include_pad).
template <typename T>
void avg_pool2d_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::PoolGeometry g = kernels::pool_geometry("avg_pool2d", args.input_meta, args.input_meta[0].shape, args.attrs);
  const T* x = args.input<T>(0);
  T* out = args.output<T>(0);
  const auto window = static_cast<double>(g.window());
  kernels::parallel_for_items(g.planes(), g.planes() * g.h * g.w, [&](std::int64_t p) {
    const T* plane = x + p * g.h * g.w;
    T* y = out + p * g.oh * g.ow;
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) {
        double total = 0.0;
        g.for_window(i, j, [&](std::int64_t offset) { total += static_cast<double>(plane[offset]); });
        *y++ = static_cast<T>(total / window);
      }
    }
  });
}

double avg_pool2d_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(kernels::pool_geometry("avg_pool2d", inputs, inputs[0].shape, attrs));
}

// ---- avg_pool2d_backward(grad_out), attribute input_shape ---------------------------------------------------

TensorMetas infer_avg_pool2d_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("avg_pool2d_backward", inputs, 1);
  kernels::check_floating("avg_pool2d_backward", inputs);
  const kernels::PoolGeometry g = kernels::avg_pool2d_backward_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "avg_pool2d_backward", inputs,
                   "needs grad_out of the pool's output shape ", to_string(g.output_shape()));
  return {TensorMeta{g.input_shape(), inputs[0].dtype}};
}

// Each output's gradient over the window size, added to the window's input cells, outputs in index order.
template <typename T>
void avg_pool2d_backward_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::PoolGeometry g = kernels::avg_pool2d_backward_geometry(args.input_meta, args.attrs);
  const T* grads = args.input<T>(0);
  T* dx = args.output<T>(0);
  const auto window = static_cast<double>(g.window());
  kernels::parallel_for_items(g.planes(), g.planes() * g.h * g.w, [&](std::int64_t p) {
    T* dplane = dx + p * g.h * g.w;
    const T* grad = grads + p * g.oh * g.ow;
    std::fill(dplane, dplane + g.h * g.w, T{0});
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) {
        const auto share = static_cast<T>(static_cast<double>(*grad++) / window);
        g.for_window(i, j, [&](std::int64_t offset) { dplane[offset] += share; });
      }
    }
  });
}

double avg_pool2d_backward_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_flops(kernels::avg_pool2d_backward_geometry(inputs, attrs));
}

}  // namespace

const OpDef& max_pool2d() {
  return kernels::define_op([] {
    return OpDef{
        .name = "max_pool2d",
        .infer = infer_max_pool2d,
        .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { max_pool2d_cpu(zero, args); }),
        .flops = max_pool2d_flops};
  });
}

const OpDef& max_pool2d_backward() {
  return kernels::define_op([] {
    return OpDef{.name = "max_pool2d_backward",
                 .infer = infer_max_pool2d_backward,
                 .cpu_kernel = kernels::floating_kernel(
                     [](auto zero, const KernelArgs& args) { max_pool2d_backward_cpu(zero, args); }),
                 .flops = max_pool2d_backward_flops};
  });
}

const OpDef& avg_pool2d() {
  return kernels::define_op([] {
    return OpDef{
        .name = "avg_pool2d",
        .infer = infer_avg_pool2d,
        .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { avg_pool2d_cpu(zero, args); }),
        .flops = avg_pool2d_flops};
  });
}

const OpDef& avg_pool2d_backward() {
  return kernels::define_op([] {
    return OpDef{.name = "avg_pool2d_backward",
                 .infer = infer_avg_pool2d_backward,
                 .cpu_kernel = kernels::floating_kernel(
                     [](auto zero, const KernelArgs& args) { avg_pool2d_backward_cpu(zero, args); }),
                 .flops = avg_pool2d_backward_flops};
  });
}

}  // namespace dtr::ops

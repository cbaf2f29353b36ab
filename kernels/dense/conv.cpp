// 2-d convolution with stride, padding, dilation and groups, and its two backward ops, on the CPU. float32 runs
// through oneDNN's convolution primitives (kernels/dense/conv_onednn.h). float64, which oneDNN does not
// convolve, empty tensors and a spatial kernel over few channels (onednn_conv_applies) take im2col of each
// image and group, then one GEMM (kernels/dense/gemm.h); the backward of the input scatters the columns
// back (col2im) in one fixed order, so overlapping windows accumulate the same bits on every run.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/dense/conv_onednn.h"
#include "kernels/dense/gemm.h"
#include "kernels/dense/window_geometry.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

// For kernel column j, the output columns x whose input column x · stride_w - pad_w + j · dil_w lies inside
// the image: [first, last). The columns before and after read padding.
struct ColumnRun {
  std::int64_t first = 0, last = 0;
  std::int64_t input_offset(std::int64_t x, const kernels::ConvGeometry& g, std::int64_t j) const {
    return x * g.stride_w - g.pad_w + j * g.dil_w;
  }
};

// ⌈a / b⌉ for b > 0 and any a.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

// The run of each kernel column j in [0, KW).
std::vector<ColumnRun> column_runs(const kernels::ConvGeometry& g) {
  std::vector<ColumnRun> runs(static_cast<std::size_t>(g.kw));
  for (std::int64_t j = 0; j < g.kw; ++j) {
    const std::int64_t shift = g.pad_w - j * g.dil_w;  // input column = x · stride_w - shift
    ColumnRun& run = runs[static_cast<std::size_t>(j)];
    run.first = std::clamp<std::int64_t>(ceil_div(shift, g.stride_w), 0, g.ow);
    run.last = std::clamp<std::int64_t>(ceil_div(g.w + shift, g.stride_w), run.first, g.ow);
  }
  return runs;
}

// Writes the column matrix [C/groups · KH · KW, OH · OW] of one image-group: `plane` points at its first
// channel; cells in the padding are 0. Each row of it is zeros, a run of the input row (contiguous when
// stride_w is 1), zeros: copied as such rather than bounds-checked cell by cell, with everything but the
// input row worked out once per kernel cell (i, j). `runs` is column_runs(g), worked out once per kernel call
// (two divisions each) rather than per image.
template <typename T>
void im2col(const kernels::ConvGeometry& g, std::span<const ColumnRun> runs, const T* plane, T* col) {
  const std::int64_t ow = g.ow;
  const std::int64_t stride_w = g.stride_w;
  for (std::int64_t c = 0; c < g.channels_per_group(); ++c) {
    const T* channel = plane + c * g.h * g.w;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const ColumnRun& run = runs[static_cast<std::size_t>(j)];
        const std::int64_t first = run.first;
        const std::int64_t length = run.last - run.first;
        const std::int64_t tail = ow - run.last;
        const std::int64_t source_column = run.input_offset(first, g, j);
        for (std::int64_t y = 0; y < g.oh; ++y, col += ow) {
          const std::int64_t row = y * g.stride_h - g.pad_h + i * g.dil_h;
          if (row < 0 || row >= g.h) {
            std::fill_n(col, ow, T{0});
            continue;
          }
          const T* source = channel + row * g.w + source_column;
          std::fill_n(col, first, T{0});
          if (stride_w == 1) {
            std::copy_n(source, length, col + first);
          } else {
            for (std::int64_t x = 0; x < length; ++x) col[first + x] = source[x * stride_w];
          }
          std::fill_n(col + first + length, tail, T{0});
        }
      }
    }
  }
}

// The adjoint of im2col: `plane` (zeroed here) receives the sum of the column entries that read each cell,
// added in im2col's order (skipping the entries that read padding does not reorder the others).
template <typename T>
void col2im(const kernels::ConvGeometry& g, std::span<const ColumnRun> runs, const T* col, T* plane) {
  std::fill(plane, plane + g.channels_per_group() * g.h * g.w, T{0});
  for (std::int64_t c = 0; c < g.channels_per_group(); ++c) {
    T* channel = plane + c * g.h * g.w;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const ColumnRun& run = runs[static_cast<std::size_t>(j)];
        for (std::int64_t y = 0; y < g.oh; ++y, col += g.ow) {
          const std::int64_t row = y * g.stride_h - g.pad_h + i * g.dil_h;
          if (row < 0 || row >= g.h) continue;
          T* target = channel + row * g.w;
          for (std::int64_t x = run.first; x < run.last; ++x) target[run.input_offset(x, g, j)] += col[x];
        }
      }
    }
  }
}

// The column matrix's storage (kernels::kernel_scratch: the kernel's workspace, else `fallback`); nullptr for a
// pointwise conv.
template <typename T>
T* column_scratch(const KernelArgs& args, const kernels::ConvGeometry& g, std::vector<T>& fallback) {
  if (g.pointwise()) return nullptr;
  return kernels::kernel_scratch(args, static_cast<std::size_t>(g.patch() * g.positions()), fallback);
}

// True when the call ran through oneDNN (float32 and a geometry onednn_conv_applies to): nothing more to do.
template <typename T>
bool ran_onednn(kernels::ConvOp op, const kernels::ConvGeometry& g, const KernelArgs& args) {
  if constexpr (std::is_same_v<T, float>) {
    if (kernels::onednn_conv_applies(g)) {
      kernels::onednn_conv(op, g, args);
      return true;
    }
  }
  return false;
}

// ---- conv2d ---------------------------------------------------------------------------------------------

TensorMetas infer_conv2d(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  DTR_CHECK(inputs.size() == 2 || inputs.size() == 3, ShapeError,  // worded as check_arity's
            "op 'conv2d' takes 3 inputs (input, weight, bias) or 2 (no bias), got ", inputs.size());
  kernels::check_floating("conv2d", inputs);
  const kernels::ConvGeometry g = kernels::conv2d_geometry(inputs, attrs);
  if (inputs.size() == 3) DTR_CHECK_SHAPES(inputs[2].shape == Shape{g.o}, "conv2d", inputs, "adds a bias [O]");
  return {TensorMeta{g.output_shape(), inputs[0].dtype}};
}

template <typename T>
void conv2d_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::ConvGeometry g = kernels::conv2d_geometry(args.input_meta, args.attrs);
  if (ran_onednn<T>(kernels::ConvOp::forward, g, args)) return;
  const T* x = args.input<T>(0);
  const T* weight = args.input<T>(1);
  T* y = args.output<T>(0);
  const std::int64_t og = g.outputs_per_group();
  std::vector<T> fallback;
  T* const col = column_scratch(args, g, fallback);
  const std::vector<ColumnRun> runs = column_runs(g);
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t k = 0; k < g.groups; ++k) {
      const T* plane = x + (n * g.c + k * g.channels_per_group()) * g.h * g.w;
      if (!g.pointwise()) im2col<T>(g, runs, plane, col);
      kernels::gemm(false, false, og, g.positions(), g.patch(), weight + k * og * g.patch(),
                    g.pointwise() ? plane : col, y + (n * g.o + k * og) * g.positions());
    }
  }
  if (args.inputs.size() == 3) {
    const T* bias = args.input<T>(2);
    for (std::int64_t n = 0; n < g.n; ++n) {
      for (std::int64_t o = 0; o < g.o; ++o) {
        T* row = y + (n * g.o + o) * g.positions();
        for (std::int64_t p = 0; p < g.positions(); ++p) row[p] += bias[o];
      }
    }
  }
}

double conv2d_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const kernels::ConvGeometry g = kernels::conv2d_geometry(inputs, attrs);
  const double bias = inputs.size() == 3 ? static_cast<double>(g.n * g.o * g.positions()) : 0.0;
  return kernels::at_least_one(g.gemm_flops() + bias);
}

// ---- conv2d_backward_input(grad_out, weight), attribute input_shape ----------------------------------------

TensorMetas infer_conv2d_backward_input(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("conv2d_backward_input", inputs, 2);
  kernels::check_floating("conv2d_backward_input", inputs);
  const kernels::ConvGeometry g = kernels::conv2d_backward_input_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "conv2d_backward_input", inputs,
                   "needs grad_out of the conv's output shape ", to_string(g.output_shape()));
  return {TensorMeta{g.input_shape(), inputs[0].dtype}};
}

template <typename T>
void conv2d_backward_input_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::ConvGeometry g = kernels::conv2d_backward_input_geometry(args.input_meta, args.attrs);
  if (ran_onednn<T>(kernels::ConvOp::backward_input, g, args)) return;
  const T* grad = args.input<T>(0);
  const T* weight = args.input<T>(1);
  T* dx = args.output<T>(0);
  const std::int64_t og = g.outputs_per_group();
  std::vector<T> fallback;
  T* const col = column_scratch(args, g, fallback);
  const std::vector<ColumnRun> runs = column_runs(g);
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t k = 0; k < g.groups; ++k) {
      T* plane = dx + (n * g.c + k * g.channels_per_group()) * g.h * g.w;
      // The columns' gradient: weightᵀ [patch, O/groups] · grad [O/groups, positions].
      kernels::gemm(true, false, g.patch(), g.positions(), og, weight + k * og * g.patch(),
                    grad + (n * g.o + k * og) * g.positions(), g.pointwise() ? plane : col);
      if (!g.pointwise()) col2im<T>(g, runs, col, plane);
    }
  }
}

double conv2d_backward_input_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return kernels::at_least_one(kernels::conv2d_backward_input_geometry(inputs, attrs).gemm_flops());
}

// ---- conv2d_backward_weight(grad_out, x), attribute weight_shape -------------------------------------------

TensorMetas infer_conv2d_backward_weight(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("conv2d_backward_weight", inputs, 2);
  kernels::check_floating("conv2d_backward_weight", inputs);
  const kernels::ConvGeometry g = kernels::conv2d_backward_weight_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "conv2d_backward_weight", inputs,
                   "needs grad_out of the conv's output shape ", to_string(g.output_shape()));
  return {TensorMeta{g.weight_shape(), inputs[0].dtype}};
}

template <typename T>
void conv2d_backward_weight_cpu(T /*zero*/, const KernelArgs& args) {
  const kernels::ConvGeometry g = kernels::conv2d_backward_weight_geometry(args.input_meta, args.attrs);
  if (ran_onednn<T>(kernels::ConvOp::backward_weight, g, args)) return;
  const T* grad = args.input<T>(0);
  const T* x = args.input<T>(1);
  T* dw = args.output<T>(0);
  const std::int64_t og = g.outputs_per_group();
  if (g.n == 0) std::fill(dw, dw + g.o * g.patch(), T{0});
  std::vector<T> fallback;
  T* const col = column_scratch(args, g, fallback);
  const std::vector<ColumnRun> runs = column_runs(g);
  for (std::int64_t k = 0; k < g.groups; ++k) {
    // Σ over images, in index order: grad [O/groups, positions] · columnsᵀ [positions, patch].
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* plane = x + (n * g.c + k * g.channels_per_group()) * g.h * g.w;
      if (!g.pointwise()) im2col<T>(g, runs, plane, col);
      kernels::gemm(false, true, og, g.patch(), g.positions(), grad + (n * g.o + k * og) * g.positions(),
                    g.pointwise() ? plane : col, dw + k * og * g.patch(), n > 0);
    }
  }
}

double conv2d_backward_weight_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return kernels::at_least_one(kernels::conv2d_backward_weight_geometry(inputs, attrs).gemm_flops());
}

}  // namespace

const OpDef& conv2d() {
  return kernels::define_op([] {
    return OpDef{
        .name = "conv2d",
        .infer = infer_conv2d,
        .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { conv2d_cpu(zero, args); }),
        .flops = conv2d_flops};
  });
}

const OpDef& conv2d_backward_input() {
  return kernels::define_op([] {
    return OpDef{.name = "conv2d_backward_input",
                 .infer = infer_conv2d_backward_input,
                 .cpu_kernel = kernels::floating_kernel(
                     [](auto zero, const KernelArgs& args) { conv2d_backward_input_cpu(zero, args); }),
                 .flops = conv2d_backward_input_flops};
  });
}

const OpDef& conv2d_backward_weight() {
  return kernels::define_op([] {
    return OpDef{.name = "conv2d_backward_weight",
                 .infer = infer_conv2d_backward_weight,
                 .cpu_kernel = kernels::floating_kernel(
                     [](auto zero, const KernelArgs& args) { conv2d_backward_weight_cpu(zero, args); }),
                 .flops = conv2d_backward_weight_flops};
  });
}

}  // namespace dtr::ops

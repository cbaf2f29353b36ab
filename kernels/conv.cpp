// 2-d convolution with stride, padding, dilation and groups, and its two backward ops, on the CPU: im2col of
// each image and group, then one OpenBLAS GEMM (kernels/gemm.h). The backward of the input scatters the
// columns back (col2im) in one fixed order, so overlapping windows accumulate the same bits on every run.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "dtr/ops.h"
#include "gemm.h"
#include "op_checks.h"

namespace dtr::ops {
namespace {

// A pair attribute ("stride", "padding", "dilation"): two ints, or `fallback` when it is absent.
std::vector<std::int64_t> pair_attr(const std::string& op, const Attrs& attrs, const char* name,
                                    std::int64_t fallback) {
  if (!attrs.has(name)) return {fallback, fallback};
  const std::vector<std::int64_t>& value = attrs.get_ints(name);
  DTR_CHECK(value.size() == 2, InvalidArgument, "op '", op, "': attribute '", name,
            "' must list 2 ints (height, width), got ", value.size());
  return value;
}

std::string pair_string(std::int64_t a, std::int64_t b) { return to_string(Shape{a, b}); }

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
  double gemm_flops() const {
    return 2.0 * static_cast<double>(n) * static_cast<double>(o) * static_cast<double>(positions()) *
           static_cast<double>(patch());
  }
};

// The geometry of `op`'s call, from an input shape `x` and a weight shape `weight` (an input's, or for the
// backward ops an attribute's); ShapeError naming `op` and `inputs` unless they fit.
ConvGeometry conv_geometry(const std::string& op, std::span<const TensorMeta> inputs, const Shape& x,
                           const Shape& weight, const Attrs& attrs) {
  DTR_CHECK_SHAPES(x.size() == 4 && weight.size() == 4, op, inputs,
                   "convolves an input [N, C, H, W] with a weight [O, C/groups, KH, KW] (input ", to_string(x),
                   ", weight ", to_string(weight), ")");
  ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = weight[0], g.kh = weight[2], g.kw = weight[3];
  g.groups = attrs.get_int("groups", 1);
  const auto stride = pair_attr(op, attrs, "stride", 1);
  const auto padding = pair_attr(op, attrs, "padding", 0);
  const auto dilation = pair_attr(op, attrs, "dilation", 1);
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  g.dil_h = dilation[0], g.dil_w = dilation[1];
  for (const std::int64_t d : x) DTR_CHECK_SHAPES(d >= 0, op, inputs, "has a negative input dimension ", to_string(x));
  DTR_CHECK_SHAPES(g.groups >= 1, op, inputs, "needs groups >= 1, got groups ", g.groups);
  DTR_CHECK_SHAPES(g.stride_h >= 1 && g.stride_w >= 1, op, inputs, "needs a positive stride, got stride ",
                   pair_string(g.stride_h, g.stride_w));
  DTR_CHECK_SHAPES(g.pad_h >= 0 && g.pad_w >= 0, op, inputs, "has bad conv padding: negative padding ",
                   pair_string(g.pad_h, g.pad_w));
  DTR_CHECK_SHAPES(g.dil_h >= 1 && g.dil_w >= 1, op, inputs, "needs a positive dilation, got dilation ",
                   pair_string(g.dil_h, g.dil_w));
  DTR_CHECK_SHAPES(g.o >= 0 && g.kh >= 1 && g.kw >= 1, op, inputs, "needs a kernel of at least 1x1, got weight ",
                   to_string(weight));
  DTR_CHECK_SHAPES(g.c % g.groups == 0 && g.o % g.groups == 0, op, inputs, "splits input channels ", g.c,
                   " and output channels ", g.o, " into ", g.groups, " groups, which must divide both");
  DTR_CHECK_SHAPES(weight[1] == g.c / g.groups, op, inputs, "needs weight [O, C/groups, KH, KW] with C/groups = ",
                   g.c / g.groups, " (input ", to_string(x), ", groups ", g.groups, "), got weight ",
                   to_string(weight));
  const std::int64_t span_h = g.h + 2 * g.pad_h - g.dil_h * (g.kh - 1) - 1;
  const std::int64_t span_w = g.w + 2 * g.pad_w - g.dil_w * (g.kw - 1) - 1;
  DTR_CHECK_SHAPES(span_h >= 0 && span_w >= 0, op, inputs, "has bad conv padding: kernel ",
                   pair_string(g.kh, g.kw), " (dilation ", pair_string(g.dil_h, g.dil_w), ") does not fit input ",
                   pair_string(g.h, g.w), " padded by ", pair_string(g.pad_h, g.pad_w),
                   ", the output would be empty");
  g.oh = span_h / g.stride_h + 1;
  g.ow = span_w / g.stride_w + 1;
  return g;
}

// The shape an attribute (input_shape, weight_shape) gives.
Shape shape_attr(const Attrs& attrs, const char* name) {
  const std::vector<std::int64_t>& value = attrs.get_ints(name);
  return Shape(value.begin(), value.end());
}

// Writes the column matrix [C/groups · KH · KW, OH · OW] of one image-group: `plane` points at its first
// channel; cells in the padding are 0.
template <typename T>
void im2col(const ConvGeometry& g, const T* plane, T* col) {
  for (std::int64_t c = 0; c < g.channels_per_group(); ++c) {
    const T* channel = plane + c * g.h * g.w;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      for (std::int64_t j = 0; j < g.kw; ++j) {
        for (std::int64_t y = 0; y < g.oh; ++y) {
          const std::int64_t row = y * g.stride_h - g.pad_h + i * g.dil_h;
          for (std::int64_t x = 0; x < g.ow; ++x) {
            const std::int64_t column = x * g.stride_w - g.pad_w + j * g.dil_w;
            const bool inside = row >= 0 && row < g.h && column >= 0 && column < g.w;
            *col++ = inside ? channel[row * g.w + column] : T{0};
          }
        }
      }
    }
  }
}

// The adjoint of im2col: `plane` (zeroed here) receives the sum of the column entries that read each cell,
// added in im2col's order.
template <typename T>
void col2im(const ConvGeometry& g, const T* col, T* plane) {
  std::fill(plane, plane + g.channels_per_group() * g.h * g.w, T{0});
  for (std::int64_t c = 0; c < g.channels_per_group(); ++c) {
    T* channel = plane + c * g.h * g.w;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      for (std::int64_t j = 0; j < g.kw; ++j) {
        for (std::int64_t y = 0; y < g.oh; ++y) {
          const std::int64_t row = y * g.stride_h - g.pad_h + i * g.dil_h;
          for (std::int64_t x = 0; x < g.ow; ++x, ++col) {
            const std::int64_t column = x * g.stride_w - g.pad_w + j * g.dil_w;
            if (row >= 0 && row < g.h && column >= 0 && column < g.w) channel[row * g.w + column] += *col;
          }
        }
      }
    }
  }
}

// ---- conv2d ---------------------------------------------------------------------------------------------

ConvGeometry forward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return conv_geometry("conv2d", inputs, inputs[0].shape, inputs[1].shape, attrs);
}

TensorMetas infer_conv2d(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  DTR_CHECK_SHAPES(inputs.size() == 2 || inputs.size() == 3, "conv2d", inputs,
                   "takes 3 inputs (input, weight, bias) or 2 (no bias), got ", inputs.size());
  kernels::check_floating("conv2d", inputs);
  const ConvGeometry g = forward_geometry(inputs, attrs);
  if (inputs.size() == 3) DTR_CHECK_SHAPES(inputs[2].shape == Shape{g.o}, "conv2d", inputs, "adds a bias [O]");
  return {TensorMeta{g.output_shape(), inputs[0].dtype}};
}

template <typename T>
void conv2d_cpu(T /*zero*/, const KernelArgs& args) {
  const ConvGeometry g = forward_geometry(args.input_meta, args.attrs);
  const T* x = args.input<T>(0);
  const T* weight = args.input<T>(1);
  T* y = args.output<T>(0);
  const std::int64_t og = g.outputs_per_group();
  std::vector<T> col(g.pointwise() ? 0 : static_cast<std::size_t>(g.patch() * g.positions()));
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t k = 0; k < g.groups; ++k) {
      const T* plane = x + (n * g.c + k * g.channels_per_group()) * g.h * g.w;
      if (!g.pointwise()) im2col(g, plane, col.data());
      kernels::gemm(false, false, og, g.positions(), g.patch(), weight + k * og * g.patch(),
                    g.pointwise() ? plane : col.data(), y + (n * g.o + k * og) * g.positions());
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
  const ConvGeometry g = forward_geometry(inputs, attrs);
  const double bias = inputs.size() == 3 ? static_cast<double>(g.n * g.o * g.positions()) : 0.0;
  return kernels::at_least_one(g.gemm_flops() + bias);
}

// ---- conv2d_backward_input(grad_out, weight), attribute input_shape ----------------------------------------

ConvGeometry backward_input_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return conv_geometry("conv2d_backward_input", inputs, shape_attr(attrs, "input_shape"), inputs[1].shape, attrs);
}

TensorMetas infer_conv2d_backward_input(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("conv2d_backward_input", inputs, 2);
  kernels::check_floating("conv2d_backward_input", inputs);
  const ConvGeometry g = backward_input_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "conv2d_backward_input", inputs,
                   "needs grad_out of the conv's output shape ", to_string(g.output_shape()));
  return {TensorMeta{g.input_shape(), inputs[0].dtype}};
}

template <typename T>
void conv2d_backward_input_cpu(T /*zero*/, const KernelArgs& args) {
  const ConvGeometry g = backward_input_geometry(args.input_meta, args.attrs);
  const T* grad = args.input<T>(0);
  const T* weight = args.input<T>(1);
  T* dx = args.output<T>(0);
  const std::int64_t og = g.outputs_per_group();
  std::vector<T> col(g.pointwise() ? 0 : static_cast<std::size_t>(g.patch() * g.positions()));
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t k = 0; k < g.groups; ++k) {
      T* plane = dx + (n * g.c + k * g.channels_per_group()) * g.h * g.w;
      // The columns' gradient: weightᵀ [patch, O/groups] · grad [O/groups, positions].
      kernels::gemm(true, false, g.patch(), g.positions(), og, weight + k * og * g.patch(),
                    grad + (n * g.o + k * og) * g.positions(), g.pointwise() ? plane : col.data());
      if (!g.pointwise()) col2im(g, col.data(), plane);
    }
  }
}

double conv2d_backward_input_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return kernels::at_least_one(backward_input_geometry(inputs, attrs).gemm_flops());
}

// ---- conv2d_backward_weight(grad_out, x), attribute weight_shape -------------------------------------------

ConvGeometry backward_weight_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return conv_geometry("conv2d_backward_weight", inputs, inputs[1].shape, shape_attr(attrs, "weight_shape"), attrs);
}

TensorMetas infer_conv2d_backward_weight(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("conv2d_backward_weight", inputs, 2);
  kernels::check_floating("conv2d_backward_weight", inputs);
  const ConvGeometry g = backward_weight_geometry(inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == g.output_shape(), "conv2d_backward_weight", inputs,
                   "needs grad_out of the conv's output shape ", to_string(g.output_shape()));
  return {TensorMeta{g.weight_shape(), inputs[0].dtype}};
}

template <typename T>
void conv2d_backward_weight_cpu(T /*zero*/, const KernelArgs& args) {
  const ConvGeometry g = backward_weight_geometry(args.input_meta, args.attrs);
  const T* grad = args.input<T>(0);
  const T* x = args.input<T>(1);
  T* dw = args.output<T>(0);
  const std::int64_t og = g.outputs_per_group();
  if (g.n == 0) std::fill(dw, dw + g.o * g.patch(), T{0});
  std::vector<T> col(g.pointwise() ? 0 : static_cast<std::size_t>(g.patch() * g.positions()));
  for (std::int64_t k = 0; k < g.groups; ++k) {
    // Σ over images, in index order: grad [O/groups, positions] · columnsᵀ [positions, patch].
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* plane = x + (n * g.c + k * g.channels_per_group()) * g.h * g.w;
      if (!g.pointwise()) im2col(g, plane, col.data());
      kernels::gemm(false, true, og, g.patch(), g.positions(), grad + (n * g.o + k * og) * g.positions(),
                    g.pointwise() ? plane : col.data(), dw + k * og * g.patch(), n > 0);
    }
  }
}

double conv2d_backward_weight_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return kernels::at_least_one(backward_weight_geometry(inputs, attrs).gemm_flops());
}

}  // namespace

const OpDef& conv2d() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{.name = "conv2d",
                         .infer = infer_conv2d,
                         .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { conv2d_cpu(zero, args); }),
                         .flops = conv2d_flops});
  return def;
}

const OpDef& conv2d_backward_input() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{
      .name = "conv2d_backward_input",
      .infer = infer_conv2d_backward_input,
      .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { conv2d_backward_input_cpu(zero, args); }),
      .flops = conv2d_backward_input_flops});
  return def;
}

const OpDef& conv2d_backward_weight() {
  static const OpDef def = kernels::with_cuda_kernel(OpDef{
      .name = "conv2d_backward_weight",
      .infer = infer_conv2d_backward_weight,
      .cpu_kernel = kernels::floating_kernel([](auto zero, const KernelArgs& args) { conv2d_backward_weight_cpu(zero, args); }),
      .flops = conv2d_backward_weight_flops});
  return def;
}

}  // namespace dtr::ops

// The window geometry of convolution and pooling (window_geometry.h).
#include "kernels/dense/window_geometry.h"

#include "kernels/op_checks.h"

namespace dtr::kernels {
namespace {

std::string pair_string(std::int64_t a, std::int64_t b) { return to_string(Shape{a, b}); }

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
  const auto stride = pair_attr(op, attrs, "stride", std::vector<std::int64_t>{1, 1});
  const auto padding = pair_attr(op, attrs, "padding", std::vector<std::int64_t>{0, 0});
  const auto dilation = pair_attr(op, attrs, "dilation", std::vector<std::int64_t>{1, 1});
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  g.dil_h = dilation[0], g.dil_w = dilation[1];
  for (const std::int64_t d : x) DTR_CHECK_SHAPES(d >= 0, op, inputs, "has a negative input dimension ", to_string(x));
  DTR_CHECK_SHAPES(g.groups >= 1, op, inputs, "needs groups >= 1, not groups ", g.groups);
  DTR_CHECK_SHAPES(g.stride_h >= 1 && g.stride_w >= 1, op, inputs, "needs a positive stride, not stride ",
                   pair_string(g.stride_h, g.stride_w));
  DTR_CHECK_SHAPES(g.pad_h >= 0 && g.pad_w >= 0, op, inputs, "has bad conv padding: negative padding ",
                   pair_string(g.pad_h, g.pad_w));
  DTR_CHECK_SHAPES(g.dil_h >= 1 && g.dil_w >= 1, op, inputs, "needs a positive dilation, not dilation ",
                   pair_string(g.dil_h, g.dil_w));
  DTR_CHECK_SHAPES(g.o >= 0 && g.kh >= 1 && g.kw >= 1, op, inputs, "needs a kernel of at least 1x1, not weight ",
                   to_string(weight));
  DTR_CHECK_SHAPES(g.c % g.groups == 0 && g.o % g.groups == 0, op, inputs, "splits input channels ", g.c,
                   " and output channels ", g.o, " into ", g.groups, " groups, which must divide both");
  DTR_CHECK_SHAPES(weight[1] == g.c / g.groups, op, inputs, "needs weight [O, C/groups, KH, KW] with C/groups = ",
                   g.c / g.groups, " (input ", to_string(x), ", groups ", g.groups, "), not weight ",
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

}  // namespace

std::vector<std::int64_t> pair_attr(const std::string& op, const Attrs& attrs, const char* name,
                                    const std::optional<std::vector<std::int64_t>>& fallback) {
  if (!attrs.has(name) && fallback) return *fallback;
  const std::vector<std::int64_t>& value = attrs.get_ints(name);
  DTR_CHECK(value.size() == 2, InvalidArgument, "op '", op, "': attribute '", name,
            "' must list 2 ints (height, width), got ", value.size());
  return value;
}

ConvGeometry conv2d_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return conv_geometry("conv2d", inputs, inputs[0].shape, inputs[1].shape, attrs);
}

ConvGeometry conv2d_backward_input_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return conv_geometry("conv2d_backward_input", inputs, shape_attr(attrs, "input_shape"), inputs[1].shape, attrs);
}

ConvGeometry conv2d_backward_weight_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return conv_geometry("conv2d_backward_weight", inputs, inputs[1].shape, shape_attr(attrs, "weight_shape"), attrs);
}

PoolGeometry pool_geometry(const std::string& op, std::span<const TensorMeta> inputs, const Shape& x,
                           const Attrs& attrs) {
  DTR_CHECK_SHAPES(x.size() == 4, op, inputs, "pools an input [N, C, H, W], not input ", to_string(x));
  const auto kernel = pair_attr(op, attrs, "kernel", std::nullopt);
  const auto stride = pair_attr(op, attrs, "stride", kernel);
  const auto padding = pair_attr(op, attrs, "padding", std::vector<std::int64_t>{0, 0});
  PoolGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.kh = kernel[0], g.kw = kernel[1];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  for (const std::int64_t d : x) DTR_CHECK_SHAPES(d >= 0, op, inputs, "has a negative input dimension ", to_string(x));
  DTR_CHECK_SHAPES(g.kh >= 1 && g.kw >= 1, op, inputs, "needs a kernel of at least 1x1, not kernel ",
                   pair_string(g.kh, g.kw));
  DTR_CHECK_SHAPES(g.stride_h >= 1 && g.stride_w >= 1, op, inputs, "needs a positive stride, not stride ",
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

PoolGeometry max_pool2d_backward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return pool_geometry("max_pool2d_backward", inputs, inputs[1].shape, attrs);
}

PoolGeometry avg_pool2d_backward_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::vector<std::int64_t>& shape = attrs.get_ints("input_shape");
  return pool_geometry("avg_pool2d_backward", inputs, Shape(shape.begin(), shape.end()), attrs);
}

}  // namespace dtr::kernels

// Gradient rules of convolution and pooling: each is a backward op called with the forward call's attributes
// plus the shape the backward op cannot see from its inputs (the input's or the weight's).
#include <vector>

#include "nn/gradient_table.h"

namespace dtr::nn {
namespace {

using Grads = std::vector<Tensor>;

// The forward call's attributes with `name` set to `shape`.
Attrs with_shape(const Attrs& attrs, const char* name, const Shape& shape) {
  Attrs more = attrs;
  more.set(name, to_ints(shape));
  return more;
}

}  // namespace

void add_conv_rules(GradientTable& table) {
  // y = conv2d(x, w) + b: dx = conv2d_backward_input(g, w), dw = conv2d_backward_weight(g, x), db = g summed
  // over images and positions.
  table[&ops::conv2d()] = [](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    const Tensor& x = c.inputs[0];
    const Tensor& w = c.inputs[1];
    Grads grads{call(c, ops::conv2d_backward_input(), {g, w}, with_shape(c.attrs, "input_shape", x.shape())),
                call(c, ops::conv2d_backward_weight(), {g, x}, with_shape(c.attrs, "weight_shape", w.shape()))};
    if (c.inputs.size() == 3) {
      grads.push_back(call(c, ops::sum(), {g}, {{"axes", std::vector<std::int64_t>{0, 2, 3}}}));
    }
    return grads;
  };
  table[&ops::max_pool2d()] = [](const GradientContext& c) {
    return Grads{call(c, ops::max_pool2d_backward(), {output_grad(c, 0), c.inputs[0]}, c.attrs)};
  };
  table[&ops::avg_pool2d()] = [](const GradientContext& c) {
    return Grads{call(c, ops::avg_pool2d_backward(), {output_grad(c, 0)},
                      with_shape(c.attrs, "input_shape", c.inputs[0].shape()))};
  };
}

}  // namespace dtr::nn

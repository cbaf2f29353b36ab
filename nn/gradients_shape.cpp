// Gradient rules of the ops that move elements without arithmetic.
#include "nn/gradient_table.h"

namespace dtr::nn {

void add_shape_rules(GradientTable& table) {
  using Grads = std::vector<Tensor>;
  table[&ops::split2()] = [](const GradientContext& c) {
    return Grads{call(c, ops::concat2(), {output_grad(c, 0), output_grad(c, 1)})};
  };
  // The two parts of the output gradient, as views: no copy.
  table[&ops::concat2()] = [](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    const Tensor& a = c.inputs[0];
    return Grads{c.runtime.view(g, a.shape()), c.runtime.view(g, c.inputs[1].shape(), a.numel())};
  };
}

}  // namespace dtr::nn

// Gradient rules of the elementwise ops.
#include "nn/gradient_table.h"

namespace dtr::nn {

void add_elementwise_rules(GradientTable& table) {
  using Grads = std::vector<Tensor>;
  const auto& in = [](const GradientContext& c, std::size_t i) -> const Tensor& { return c.inputs[i]; };
  table[&ops::add()] = [in](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    return Grads{reduce_to(c, g, in(c, 0)), reduce_to(c, g, in(c, 1))};
  };
  table[&ops::sub()] = [in](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    return Grads{reduce_to(c, g, in(c, 0)), reduce_to(c, call(c, ops::scale(), {g}, {{"factor", -1.0}}), in(c, 1))};
  };
  table[&ops::mul()] = [in](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    return Grads{reduce_to(c, call(c, ops::mul(), {g, in(c, 1)}), in(c, 0)),
                 reduce_to(c, call(c, ops::mul(), {g, in(c, 0)}), in(c, 1))};
  };
  // d(a/b) = g/b, and -g a/b² = -(g/b)(a/b) for b.
  table[&ops::div()] = [in](const GradientContext& c) {
    const Tensor g_over_b = call(c, ops::div(), {output_grad(c, 0), in(c, 1)});
    const Tensor quotient = call(c, ops::div(), {in(c, 0), in(c, 1)});
    const Tensor gb = call(c, ops::scale(), {call(c, ops::mul(), {g_over_b, quotient})}, {{"factor", -1.0}});
    return Grads{reduce_to(c, g_over_b, in(c, 0)), reduce_to(c, gb, in(c, 1))};
  };
  // Activations whose backward op reads the input, or the output (tanh, sigmoid: cheaper, and what PyTorch
  // saves).
  const auto from_input = [](const OpDef& backward) {
    return [&backward](const GradientContext& c) { return Grads{call(c, backward, {output_grad(c, 0), c.inputs[0]})}; };
  };
  const auto from_output = [](const OpDef& backward) {
    return [&backward](const GradientContext& c) { return Grads{call(c, backward, {output_grad(c, 0), c.outputs[0]})}; };
  };
  table[&ops::relu()] = from_input(ops::relu_backward());
  table[&ops::gelu()] = from_input(ops::gelu_backward());
  table[&ops::tanh()] = from_output(ops::tanh_backward());
  table[&ops::sigmoid()] = from_output(ops::sigmoid_backward());
  table[&ops::scale()] = [](const GradientContext& c) {
    return Grads{call(c, ops::scale(), {output_grad(c, 0)}, {{"factor", c.attrs.get_real("factor")}})};
  };
}

}  // namespace dtr::nn

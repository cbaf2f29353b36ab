// Gradient rules of the elementwise family (kernels/elementwise/): arithmetic and activations, reductions and
// broadcasts (each is the other's gradient), dropout.
#include <vector>

#include "nn/gradient_table.h"

namespace dtr::nn {

namespace {

using Grads = std::vector<Tensor>;

// The gradient of a sum or mean over the axes its attributes name: the output gradient, with the reduced
// dimensions put back as 1, broadcast to the input's shape (and divided by the count for a mean).
Tensor spread(const GradientContext& c, bool mean) {
  const Shape& in = input_shape(c, 0);
  const auto rank = static_cast<std::int64_t>(in.size());
  std::vector<bool> reduced(in.size(), !c.attrs.has("axis") && !c.attrs.has("axes"));
  std::vector<std::int64_t> axes;
  if (c.attrs.has("axis")) axes.push_back(c.attrs.get_int("axis"));
  if (c.attrs.has("axes")) axes = c.attrs.get_ints("axes");
  for (const std::int64_t axis : axes) reduced[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)] = true;
  Shape kept;
  std::int64_t count = 1;
  for (std::size_t d = 0; d < in.size(); ++d) {
    kept.push_back(reduced[d] ? 1 : in[d]);
    if (reduced[d]) count *= in[d];
  }
  Tensor g = c.runtime.view(output_grad(c, 0), kept);
  g = call(c, ops::broadcast_to(), {g}, {{"shape", to_ints(in)}});
  if (mean) g = call(c, ops::scale(), {g}, {{"factor", count > 0 ? 1.0 / static_cast<double>(count) : 0.0}});
  return g;
}

}  // namespace

void add_elementwise_rules(GradientTable& table) {
  const auto& in = [](const GradientContext& c, std::size_t i) -> const Tensor& { return c.inputs[i]; };
  table.add(ops::add(), {}, [](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    return Grads{reduce_to(c, g, input_shape(c, 0)), reduce_to(c, g, input_shape(c, 1))};
  });
  table.add(ops::sub(), {}, [](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    return Grads{reduce_to(c, g, input_shape(c, 0)),
                 reduce_to(c, call(c, ops::scale(), {g}, {{"factor", -1.0}}), input_shape(c, 1))};
  });
  table.add(ops::mul(), {bits(0, 1)}, [in](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    Grads grads(2);
    if (c.wants(0)) grads[0] = reduce_to(c, call(c, ops::mul(), {g, in(c, 1)}), input_shape(c, 0));
    if (c.wants(1)) grads[1] = reduce_to(c, call(c, ops::mul(), {g, in(c, 0)}), input_shape(c, 1));
    return grads;
  });
  // d(a/b) = g/b, and -g a/b² = -(g/b)(a/b) for b.
  table.add(ops::div(), {bits(0, 1)}, [in](const GradientContext& c) {
    const Tensor g_over_b = call(c, ops::div(), {output_grad(c, 0), in(c, 1)});
    const Tensor quotient = call(c, ops::div(), {in(c, 0), in(c, 1)});
    const Tensor gb = call(c, ops::scale(), {call(c, ops::mul(), {g_over_b, quotient})}, {{"factor", -1.0}});
    return Grads{reduce_to(c, g_over_b, input_shape(c, 0)), reduce_to(c, gb, input_shape(c, 1))};
  });
  // Activations whose backward op reads the input (gelu), or the output: cheaper where the output is saved
  // anyway as the next op's input, and what PyTorch saves. relu's backward tests x > 0, which holds exactly
  // where y = max(x, 0) > 0 (NaN: neither), so it reads y.
  const auto from_input = [](const OpDef& backward) {
    return [&backward](const GradientContext& c) { return Grads{call(c, backward, {output_grad(c, 0), c.inputs[0]})}; };
  };
  const auto from_output = [](const OpDef& backward) {
    return [&backward](const GradientContext& c) { return Grads{call(c, backward, {output_grad(c, 0), c.outputs[0]})}; };
  };
  table.add(ops::relu(), {0, bits(0)}, from_output(ops::relu_backward()));
  table.add(ops::gelu(), {bits(0)}, from_input(ops::gelu_backward()));
  table.add(ops::tanh(), {0, bits(0)}, from_output(ops::tanh_backward()));
  table.add(ops::sigmoid(), {0, bits(0)}, from_output(ops::sigmoid_backward()));
  // The fused LSTM cell: its backward op remakes the activations from the saved gates and c, so nothing of
  // the cell but its inputs is kept.
  table.add(ops::lstm_cell(), {bits(0, 1)}, [](const GradientContext& c) {
    return c.runtime.call(ops::lstm_cell_backward(),
                          std::vector<Tensor>{output_grad(c, 0), output_grad(c, 1), c.inputs[0], c.inputs[1]});
  });
  table.add(ops::scale(), {}, [](const GradientContext& c) {
    return Grads{call(c, ops::scale(), {output_grad(c, 0)}, {{"factor", c.attrs.get_real("factor")}})};
  });
  // Reductions and broadcasts.
  table.add(ops::sum(), {}, [](const GradientContext& c) { return Grads{spread(c, false)}; });
  table.add(ops::mean(), {}, [](const GradientContext& c) { return Grads{spread(c, true)}; });
  table.add(ops::sum_to(), {}, [](const GradientContext& c) {
    return Grads{call(c, ops::broadcast_to(), {output_grad(c, 0)}, {{"shape", to_ints(input_shape(c, 0))}})};
  });
  table.add(ops::broadcast_to(), {}, [](const GradientContext& c) {
    return Grads{reduce_to(c, output_grad(c, 0), input_shape(c, 0))};
  });
  // From the saved mask, no randomness: grad · mask / (1 - p). The mask output does not depend on x.
  table.add(ops::dropout(), {0, bits(1)}, [](const GradientContext& c) {
    const Tensor kept = call(c, ops::mul(), {output_grad(c, 0), c.outputs[1]});
    return Grads{call(c, ops::scale(), {kept}, {{"factor", 1.0 / (1.0 - c.attrs.get_real("p"))}})};
  });
}

}  // namespace dtr::nn

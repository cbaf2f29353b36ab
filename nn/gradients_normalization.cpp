// Gradient rules of the normalization family (kernels/normalization/): softmax, the losses, the
// normalizations and their running statistics, embedding. The forward statistics (mean, invstd) are saved
// outputs for the backward ops, not values a loss reads: their output gradients are taken as zero.
#include <vector>

#include "nn/gradient_table.h"

namespace dtr::nn {

namespace {

using Grads = std::vector<Tensor>;

// The backward op of a normalization, called on (grad_y, x, weight, saved mean, saved invstd): its outputs
// are the gradients of the forward inputs in order.
Grads from_saved_statistics(const GradientContext& c, const OpDef& backward) {
  const std::vector<Tensor> inputs{output_grad(c, 0), c.inputs[0], c.inputs[1], c.outputs[1], c.outputs[2]};
  return c.runtime.call(backward, inputs, c.attrs);
}

}  // namespace

void add_normalization_rules(GradientTable& table) {
  // Softmax and log-softmax read their output, not their input.
  table.add(ops::softmax(), {0, bits(0)}, [](const GradientContext& c) {
    return Grads{call(c, ops::softmax_backward(), {output_grad(c, 0), c.outputs[0]}, c.attrs)};
  });
  table.add(ops::log_softmax(), {0, bits(0)}, [](const GradientContext& c) {
    return Grads{call(c, ops::log_softmax_backward(), {output_grad(c, 0), c.outputs[0]}, c.attrs)};
  });
  // Integer labels get no gradient.
  table.add(ops::cross_entropy(), {bits(0, 1)}, [](const GradientContext& c) {
    return Grads{call(c, ops::cross_entropy_backward(), {output_grad(c, 0), c.inputs[0], c.inputs[1]}), Tensor()};
  });
  table.add(ops::layer_norm(), {bits(0, 1), bits(1, 2)}, [](const GradientContext& c) {
    return from_saved_statistics(c, ops::layer_norm_backward());
  });
  table.add(ops::batch_norm(), {bits(0, 1), bits(1, 2)}, [](const GradientContext& c) {
    return from_saved_statistics(c, ops::batch_norm_backward());
  });
  table.add(ops::batch_norm_eval(), {bits(0, 1, 3, 4)}, [](const GradientContext& c) {
    const std::vector<Tensor> inputs{output_grad(c, 0), c.inputs[0], c.inputs[1], c.inputs[3], c.inputs[4]};
    return c.runtime.call(ops::batch_norm_eval_backward(), inputs, c.attrs);
  });
  // out = (1 - m) running + m f(stat) with f(s) = k s, or k (1/s² - eps) for an invstd (f'(s) = -2k / s³).
  table.add(ops::running_stat_update(), {bits(1)}, [](const GradientContext& c) {
    const double momentum = c.attrs.get_real("momentum", 0.1);
    double factor = momentum;
    if (c.attrs.has("unbiased_count")) {
      const auto n = static_cast<double>(c.attrs.get_int("unbiased_count"));
      factor *= n / (n - 1.0);
    }
    const Tensor g = output_grad(c, 0);
    Tensor g_stat;
    if (c.attrs.has("invstd_eps")) {
      const Tensor& s = c.inputs[1];
      const Tensor cube = call(c, ops::mul(), {call(c, ops::mul(), {s, s}), s});
      g_stat = call(c, ops::scale(), {call(c, ops::div(), {g, cube})}, {{"factor", -2.0 * factor}});
    } else {
      g_stat = call(c, ops::scale(), {g}, {{"factor", factor}});
    }
    return Grads{call(c, ops::scale(), {g}, {{"factor", 1.0 - momentum}}), g_stat};
  });
  // The weight's gradient scatters the output gradient's rows back; integer indices get none.
  table.add(ops::embedding(), {bits(1)}, [](const GradientContext& c) {
    const Attrs attrs{{"num_embeddings", input_shape(c, 0)[0]}};
    return Grads{call(c, ops::embedding_backward(), {output_grad(c, 0), c.inputs[1]}, attrs), Tensor()};
  });
}

}  // namespace dtr::nn

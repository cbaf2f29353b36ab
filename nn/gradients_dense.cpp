// Gradient rules of the dense family (kernels/dense/): matrix products, convolution and pooling.
//
// Products: with C = op(A) op(B) and G = dC: dop(A) = G op(B)ᵀ and dop(B) = op(A)ᵀ G; a stored transpose takes
// the transpose of its gradient, which the transpose attributes express without a copy. Convolution and pooling:
// each is a backward op called with the forward call's attributes plus the shape the backward op cannot see
// from its inputs (the input's or the weight's).
#include <vector>

#include "nn/gradient_table.h"

namespace dtr::nn {
namespace {

using Grads = std::vector<Tensor>;

// The four products' attributes, built once: every backward of a product or a linear layer takes two.
const Attrs& transposes(bool a, bool b) {
  static const Attrs table[4] = {
      Attrs{{"transpose_a", std::int64_t{0}}, {"transpose_b", std::int64_t{0}}},
      Attrs{{"transpose_a", std::int64_t{0}}, {"transpose_b", std::int64_t{1}}},
      Attrs{{"transpose_a", std::int64_t{1}}, {"transpose_b", std::int64_t{0}}},
      Attrs{{"transpose_a", std::int64_t{1}}, {"transpose_b", std::int64_t{1}}},
  };
  return table[(a ? 2 : 0) + (b ? 1 : 0)];
}

// The gradients of a (batched) product `product` (matmul or bmm).
Grads product_grads(const GradientContext& c, const OpDef& product) {
  const bool ta = c.attrs.get_flag("transpose_a");
  const bool tb = c.attrs.get_flag("transpose_b");
  const Tensor g = output_grad(c, 0);
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  Tensor ga;
  Tensor gb;
  if (c.wants(0)) {
    ga = ta ? call(c, product, {b, g}, transposes(tb, true)) : call(c, product, {g, b}, transposes(false, !tb));
  }
  if (c.wants(1)) {
    gb = tb ? call(c, product, {g, a}, transposes(true, ta)) : call(c, product, {a, g}, transposes(!ta, false));
  }
  return {ga, gb};
}

// linear's and linear_add's gradients of x, w and the bias (input `bias`, when there is one): y = x wᵀ + ...
// over rows of x, dx = g w, dw = gᵀ x, dbias = the column sums of g. dx last (as a convolution's): dw is the
// last read of the saved x, so while dx is made a budget can let x go for good; made first, dx would wait,
// evictable, through dw's product, beside the x that product pins.
Grads linear_grads(const GradientContext& c, std::size_t bias) {
  Runtime& rt = c.runtime;
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const std::int64_t in = w.shape()[1];
  const std::int64_t out = w.shape()[0];
  const std::int64_t rows = in > 0 ? x.numel() / in : (out > 0 ? c.output_meta[0].numel() / out : 0);
  const Tensor g = output_grad(c, 0);
  const Tensor g2 = rt.view(g, {rows, out});
  const Tensor x2 = rt.view(x, {rows, in});
  Grads grads(c.inputs.size());
  if (c.wants(1)) grads[1] = call(c, ops::matmul(), {g2, x2}, transposes(true, false));
  static const Attrs over_rows{{"axis", std::int64_t{0}}};
  if (c.inputs.size() > bias && c.wants(bias)) grads[bias] = call(c, ops::sum(), {g2}, over_rows);
  if (c.wants(0)) grads[0] = rt.view(call(c, ops::matmul(), {g2, w}), x.shape());
  return grads;
}

// The forward call's attributes with `name` set to `shape`.
Attrs with_shape(const Attrs& attrs, const char* name, const Shape& shape) {
  Attrs more = attrs;
  more.set(name, to_ints(shape));
  return more;
}

}  // namespace

void add_dense_rules(GradientTable& table) {
  table.add(ops::matmul(), {bits(0, 1)}, [](const GradientContext& c) { return product_grads(c, ops::matmul()); });
  table.add(ops::bmm(), {bits(0, 1)}, [](const GradientContext& c) { return product_grads(c, ops::bmm()); });
  // Fused attention: from qkv and the weights (its second output), and the weights' own gradient when a
  // program used them.
  table.add(ops::attention(), {bits(0), bits(1)}, [](const GradientContext& c) {
    std::vector<Tensor> inputs{output_grad(c, 0), c.inputs[0], c.outputs[1]};
    if (c.output_grads[1].defined()) inputs.push_back(c.output_grads[1]);
    return Grads{c.runtime.call1(ops::attention_backward(), inputs, c.attrs)};
  });
  // y = x wᵀ + bias over rows of x: dx = g w, dw = gᵀ x, dbias = the column sums of g.
  table.add(ops::linear(), {bits(0, 1)}, [](const GradientContext& c) { return linear_grads(c, 2); });
  // y = addend + x wᵀ + bias: linear's gradients, and the addend's is g itself.
  table.add(ops::linear_add(), {bits(0, 1)}, [](const GradientContext& c) {
    Grads grads = linear_grads(c, 3);
    if (c.wants(2)) grads[2] = output_grad(c, 0);
    return grads;
  });
  // y = conv2d(x, w) + b: dx = conv2d_backward_input(g, w), dw = conv2d_backward_weight(g, x), db = g summed
  // over images and positions. dx last, as linear's: once dw has read the saved x, a budget may evict x for
  // good while dx is made, where dx made first was evicted during dw and remade (U-Net's costliest
  // recomputation at half its peak; AutogradMemory.ALayersBackwardLetsItsSavedInputGoBeforeMakingTheInputsGradient).
  table.add(ops::conv2d(), {bits(0, 1)}, [](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    const Tensor& x = c.inputs[0];
    const Tensor& w = c.inputs[1];
    Grads grads(c.inputs.size());
    if (c.wants(1)) {
      grads[1] = call(c, ops::conv2d_backward_weight(), {g, x}, with_shape(c.attrs, "weight_shape", w.shape()));
    }
    static const Attrs over_images_and_positions{{"axes", std::vector<std::int64_t>{0, 2, 3}}};
    if (c.inputs.size() == 3 && c.wants(2)) grads[2] = call(c, ops::sum(), {g}, over_images_and_positions);
    if (c.wants(0)) {
      grads[0] = call(c, ops::conv2d_backward_input(), {g, w}, with_shape(c.attrs, "input_shape", x.shape()));
    }
    return grads;
  });
  table.add(ops::max_pool2d(), {bits(0)}, [](const GradientContext& c) {
    return Grads{call(c, ops::max_pool2d_backward(), {output_grad(c, 0), c.inputs[0]}, c.attrs)};
  });
  table.add(ops::avg_pool2d(), {}, [](const GradientContext& c) {
    return Grads{call(c, ops::avg_pool2d_backward(), {output_grad(c, 0)},
                      with_shape(c.attrs, "input_shape", input_shape(c, 0)))};
  });
}

}  // namespace dtr::nn

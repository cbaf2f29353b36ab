// Gradient rules of the matrix products. With C = op(A) op(B) and G = dC: dop(A) = G op(B)ᵀ and
// dop(B) = op(A)ᵀ G; a stored transpose takes the transpose of its gradient, which the transpose attributes
// express without a copy.
#include "nn/gradient_table.h"

namespace dtr::nn {
namespace {

using Grads = std::vector<Tensor>;


Attrs transposes(bool a, bool b) {
  return Attrs{{"transpose_a", std::int64_t{a ? 1 : 0}}, {"transpose_b", std::int64_t{b ? 1 : 0}}};
}

// The gradients of a (batched) product `product` (matmul or bmm).
Grads product_grads(const GradientContext& c, const OpDef& product) {
  const bool ta = c.attrs.get_flag("transpose_a");
  const bool tb = c.attrs.get_flag("transpose_b");
  const Tensor g = output_grad(c, 0);
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  const Tensor ga = ta ? call(c, product, {b, g}, transposes(tb, true)) : call(c, product, {g, b}, transposes(false, !tb));
  const Tensor gb = tb ? call(c, product, {g, a}, transposes(true, ta)) : call(c, product, {a, g}, transposes(!ta, false));
  return {ga, gb};
}

}  // namespace

void add_matmul_rules(GradientTable& table) {
  table[&ops::matmul()] = [](const GradientContext& c) { return product_grads(c, ops::matmul()); };
  table[&ops::bmm()] = [](const GradientContext& c) { return product_grads(c, ops::bmm()); };
  // y = x wᵀ + bias over rows of x: dx = g w, dw = gᵀ x, dbias = the column sums of g.
  table[&ops::linear()] = [](const GradientContext& c) {
    Runtime& rt = c.runtime;
    const Tensor& x = c.inputs[0];
    const Tensor& w = c.inputs[1];
    const std::int64_t in = w.shape()[1];
    const std::int64_t out = w.shape()[0];
    const std::int64_t rows = in > 0 ? x.numel() / in : (out > 0 ? c.outputs[0].numel() / out : 0);
    const Tensor g = output_grad(c, 0);
    const Tensor g2 = rt.view(g, {rows, out});
    const Tensor x2 = rt.view(x, {rows, in});
    Grads grads{rt.view(call(c, ops::matmul(), {g2, w}), x.shape()),
                call(c, ops::matmul(), {g2, x2}, transposes(true, false))};
    if (c.inputs.size() == 3) grads.push_back(call(c, ops::sum(), {g2}, {{"axis", std::int64_t{0}}}));
    return grads;
  };
}

}  // namespace dtr::nn

// Gradient rules of the layout family (kernels/layout/): reshape, slice, split, concat, transpose, permute,
// split2 and concat2: the gradient moves back the way the elements came.
#include <vector>

#include "nn/gradient_table.h"

namespace dtr::nn {

void add_layout_rules(GradientTable& table) {
  using Grads = std::vector<Tensor>;
  table.add(ops::reshape(), {}, [](const GradientContext& c) {
    return Grads{call(c, ops::reshape(), {output_grad(c, 0)}, {{"shape", to_ints(input_shape(c, 0))}})};
  });
  table.add(ops::slice(), {}, [](const GradientContext& c) {
    Attrs attrs = c.attrs;
    attrs.set("input_shape", to_ints(input_shape(c, 0)));
    return Grads{call(c, ops::slice_backward(), {output_grad(c, 0)}, attrs)};
  });
  table.add(ops::split(), {}, [](const GradientContext& c) {
    std::vector<Tensor> parts;
    for (std::size_t k = 0; k < c.outputs.size(); ++k) parts.push_back(output_grad(c, k));
    return Grads{c.runtime.call1(ops::concat(), parts, {{"dim", c.attrs.get_int("dim")}})};
  });
  // The output gradient split at the inputs' extents: views when concat joined along the outermost extent.
  table.add(ops::concat(), {}, [](const GradientContext& c) {
    const std::int64_t dim = c.attrs.get_int("dim");
    const auto rank = static_cast<std::int64_t>(input_shape(c, 0).size());
    const auto d = static_cast<std::size_t>(dim < 0 ? dim + rank : dim);
    std::vector<std::int64_t> sizes;
    for (const TensorMeta& in : c.input_meta) sizes.push_back(in.shape[d]);
    return c.runtime.call(ops::split(), std::vector<Tensor>{output_grad(c, 0)}, {{"dim", dim}, {"sizes", sizes}});
  });
  table.add(ops::transpose(), {}, [](const GradientContext& c) {
    return Grads{call(c, ops::transpose(), {output_grad(c, 0)}, c.attrs)};
  });
  table.add(ops::permute(), {}, [](const GradientContext& c) {
    const std::vector<std::int64_t>& dims = c.attrs.get_ints("dims");
    const auto rank = static_cast<std::int64_t>(dims.size());
    std::vector<std::int64_t> inverse(dims.size());
    for (std::int64_t i = 0; i < rank; ++i) {
      const std::int64_t d = dims[static_cast<std::size_t>(i)];
      inverse[static_cast<std::size_t>(d < 0 ? d + rank : d)] = i;
    }
    return Grads{call(c, ops::permute(), {output_grad(c, 0)}, {{"dims", inverse}})};
  });
  table.add(ops::split2(), {}, [](const GradientContext& c) {
    return Grads{call(c, ops::concat2(), {output_grad(c, 0), output_grad(c, 1)})};
  });
  // The two parts of the output gradient, as views: no copy.
  table.add(ops::concat2(), {}, [](const GradientContext& c) {
    const Tensor g = output_grad(c, 0);
    return Grads{c.runtime.view(g, input_shape(c, 0)), c.runtime.view(g, input_shape(c, 1), c.input_meta[0].numel())};
  });
}

}  // namespace dtr::nn

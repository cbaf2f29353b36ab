// Gradient rules of the reductions and broadcasts: each is the other's gradient.
#include <vector>

#include "nn/gradient_table.h"

namespace dtr::nn {
namespace {

using Grads = std::vector<Tensor>;

// The gradient of a sum or mean over the axes its attributes name: the output gradient, with the reduced
// dimensions put back as 1, broadcast to the input's shape (and divided by the count for a mean).
Tensor spread(const GradientContext& c, bool mean) {
  const Shape& in = c.inputs[0].shape();
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

void add_reduce_rules(GradientTable& table) {
  table[&ops::sum()] = [](const GradientContext& c) { return Grads{spread(c, false)}; };
  table[&ops::mean()] = [](const GradientContext& c) { return Grads{spread(c, true)}; };
  table[&ops::sum_to()] = [](const GradientContext& c) {
    return Grads{call(c, ops::broadcast_to(), {output_grad(c, 0)}, {{"shape", to_ints(c.inputs[0].shape())}})};
  };
  table[&ops::broadcast_to()] = [](const GradientContext& c) {
    return Grads{reduce_to(c, output_grad(c, 0), c.inputs[0])};
  };
}

}  // namespace dtr::nn

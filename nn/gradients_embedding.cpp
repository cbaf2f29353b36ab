// Gradient rules of embedding and dropout.
#include "nn/gradient_table.h"

namespace dtr::nn {

void add_embedding_rules(GradientTable& table) {
  using Grads = std::vector<Tensor>;
  // The weight's gradient scatters the output gradient's rows back; integer indices get none.
  table[&ops::embedding()] = [](const GradientContext& c) {
    const Attrs attrs{{"num_embeddings", c.inputs[0].shape()[0]}};
    return Grads{call(c, ops::embedding_backward(), {output_grad(c, 0), c.inputs[1]}, attrs), Tensor()};
  };
  // From the saved mask, no randomness: grad · mask / (1 - p). The mask output does not depend on x.
  table[&ops::dropout()] = [](const GradientContext& c) {
    const Tensor kept = call(c, ops::mul(), {output_grad(c, 0), c.outputs[1]});
    return Grads{call(c, ops::scale(), {kept}, {{"factor", 1.0 / (1.0 - c.attrs.get_real("p"))}})};
  };
}

}  // namespace dtr::nn

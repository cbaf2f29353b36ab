// Gradient rules: for each differentiable built-in op, its vector-Jacobian product written with ops (the
// backward ops of include/dtr/ops.h among them), so that gradients are recorded, evicted and recomputed like
// any other value. Autograd composes them; the gradient checks test them against finite differences.
//
// Thread safety: the rule table is immutable once built (on first use, thread-safe). A rule runs ops on the
// runtime it is given, from that runtime's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dtr/op.h"
#include "dtr/runtime.h"
#include "dtr/tensor.h"

namespace dtr {

// One recorded call of an op, and the loss's gradients with respect to its outputs. Of the inputs and outputs,
// a rule reads only those its op's SavedForBackward names (the others may be undefined: autograd keeps no
// more), and the shapes of all from the metas.
struct GradientContext {
  Runtime& runtime;
  const OpDef& op;
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  const Attrs& attrs;
  std::span<const Tensor> output_grads;  // one per output; an undefined tensor stands for zeros
  std::span<const TensorMeta> input_meta;
  std::span<const TensorMeta> output_meta;
  // Bit k: input k's gradient is wanted (inputs past the 64th: always). A rule may skip an unwanted one (the
  // first layer's input gradient) and return an undefined tensor for it.
  std::uint64_t wanted = ~std::uint64_t{0};
  bool wants(std::size_t k) const { return k >= 64 || (wanted >> k & 1U) != 0; }
};

// Which of an op's inputs and outputs its gradient rule reads, as bit masks (bit k: input or output k; inputs
// past the 32nd are never read). What autograd keeps of a call until its backward has run.
struct SavedForBackward {
  std::uint32_t inputs = 0;
  std::uint32_t outputs = 0;
  bool input(std::size_t k) const { return k < 32 && (inputs >> k & 1U) != 0; }
  bool output(std::size_t k) const { return k < 32 && (outputs >> k & 1U) != 0; }
};

// Returns one gradient per input, of the input's shape and dtype; an undefined tensor where the input gets
// none (integer labels, the like-tensor of a random op).
using GradientRule = std::function<std::vector<Tensor>(const GradientContext& context)>;

// The rule for `op`, or nullptr when the op is not differentiable (or not a built-in op).
const GradientRule* gradient_rule(const OpDef& op);
// What op's rule reads (nothing for an op without a rule).
SavedForBackward saved_for_backward(const OpDef& op);

// The gradients of the loss with respect to `inputs`, by op's rule, given every input and output (those the
// rule does not read may be undefined tensors when `input_meta` and `output_meta` give their shapes); an input
// whose bit in `wanted` is clear may get an undefined gradient. Throws dtr::InvalidArgument when `op`
// has no rule or the counts do not match the op's call.
std::vector<Tensor> vjp(Runtime& runtime, const OpDef& op, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, std::span<const Tensor> output_grads, const Attrs& attrs = {},
                        std::span<const TensorMeta> input_meta = {}, std::span<const TensorMeta> output_meta = {},
                        std::uint64_t wanted = ~std::uint64_t{0});

}  // namespace dtr

// Gradient rules: for each differentiable built-in op, its vector-Jacobian product written with ops (the
// backward ops of include/dtr/ops.h among them), so that gradients are recorded, evicted and recomputed like
// any other value. Autograd composes them; the gradient checks test them against finite differences.
//
// Thread safety: the rule table is immutable once built (on first use, thread-safe). A rule runs ops on the
// runtime it is given, from that runtime's thread.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "dtr/op.h"
#include "dtr/runtime.h"
#include "dtr/tensor.h"

namespace dtr {

// One recorded call of an op, and the loss's gradients with respect to its outputs.
struct GradientContext {
  Runtime& runtime;
  const OpDef& op;
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  const Attrs& attrs;
  std::span<const Tensor> output_grads;  // one per output; an undefined tensor stands for zeros
};

// Returns one gradient per input, of the input's shape and dtype; an undefined tensor where the input gets
// none (integer labels, the like-tensor of a random op).
using GradientRule = std::function<std::vector<Tensor>(const GradientContext& context)>;

// The rule for `op`, or nullptr when the op is not differentiable (or not a built-in op).
const GradientRule* gradient_rule(const OpDef& op);

// The gradients of the loss with respect to `inputs`, by op's rule. Throws dtr::InvalidArgument when `op`
// has no rule or the counts do not match the op's call.
std::vector<Tensor> vjp(Runtime& runtime, const OpDef& op, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, std::span<const Tensor> output_grads, const Attrs& attrs = {});

}  // namespace dtr

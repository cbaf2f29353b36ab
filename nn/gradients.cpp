// The gradient rule table and vjp().
#include "dtr/gradients.h"

#include "dtr/check.h"
#include "nn/gradient_table.h"

namespace dtr {
namespace nn {

Tensor output_grad(const GradientContext& context, std::size_t i) {
  const Tensor& grad = context.output_grads[i];
  if (grad.defined()) return grad;
  const TensorMeta& meta = context.outputs[i].meta();
  return context.runtime.constant(TensorMeta{meta.shape, meta.dtype});  // zeros
}

Tensor call(const GradientContext& context, const OpDef& op, std::initializer_list<Tensor> inputs,
            const Attrs& attrs) {
  return context.runtime.call1(op, inputs, attrs);
}

Tensor reduce_to(const GradientContext& context, const Tensor& grad, const Tensor& like) {
  if (grad.shape() == like.shape()) return grad;
  return call(context, ops::sum_to(), {grad}, Attrs{{"shape", to_ints(like.shape())}});
}

std::vector<std::int64_t> to_ints(const Shape& shape) { return {shape.begin(), shape.end()}; }

namespace {

const GradientTable& table() {
  static const GradientTable rules = [] {
    GradientTable t;
    add_elementwise_rules(t);
    add_dense_rules(t);
    add_normalization_rules(t);
    add_layout_rules(t);
    return t;
  }();
  return rules;
}

}  // namespace
}  // namespace nn

const GradientRule* gradient_rule(const OpDef& op) {
  const auto& rules = nn::table();
  const auto found = rules.find(&op);
  return found == rules.end() ? nullptr : &found->second;
}

std::vector<Tensor> vjp(Runtime& runtime, const OpDef& op, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, std::span<const Tensor> output_grads, const Attrs& attrs) {
  const GradientRule* rule = gradient_rule(op);
  DTR_CHECK(rule != nullptr, InvalidArgument, "vjp: op '", op.name, "' has no gradient rule");
  DTR_CHECK(output_grads.size() == outputs.size(), InvalidArgument, "vjp: op '", op.name, "' has ", outputs.size(),
            " outputs, got ", output_grads.size(), " output gradients");
  for (std::size_t i = 0; i < output_grads.size(); ++i) {
    DTR_CHECK(!output_grads[i].defined() || output_grads[i].meta() == outputs[i].meta(), ShapeError, "vjp: op '",
              op.name, "': the gradient of output ", i, " is ", to_string(output_grads[i].meta().dtype), " ",
              to_string(output_grads[i].shape()), ", the output ", to_string(outputs[i].meta().dtype), " ",
              to_string(outputs[i].shape()));
  }
  std::vector<Tensor> grads = (*rule)(GradientContext{runtime, op, inputs, outputs, attrs, output_grads});
  DTR_CHECK(grads.size() == inputs.size(), InvalidArgument, "vjp: the rule of op '", op.name, "' gave ",
            grads.size(), " gradients for ", inputs.size(), " inputs");
  return grads;
}

}  // namespace dtr

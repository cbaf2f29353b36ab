// The gradient rule table and vjp().
#include "dtr/gradients.h"

#include "dtr/check.h"
#include "nn/gradient_table.h"

namespace dtr {
namespace nn {

Tensor output_grad(const GradientContext& context, std::size_t i) {
  const Tensor& grad = context.output_grads[i];
  if (grad.defined()) return grad;
  return context.runtime.constant(context.output_meta[i]);  // zeros
}

Tensor call(const GradientContext& context, const OpDef& op, std::initializer_list<Tensor> inputs,
            const Attrs& attrs) {
  return context.runtime.call1(op, inputs, attrs);
}

Tensor reduce_to(const GradientContext& context, const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  return call(context, ops::sum_to(), {grad}, Attrs{{"shape", to_ints(shape)}});
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
  const nn::GradientTable::Entry* entry = nn::table().find(op);
  return entry == nullptr ? nullptr : &entry->rule;
}

SavedForBackward saved_for_backward(const OpDef& op) {
  const nn::GradientTable::Entry* entry = nn::table().find(op);
  return entry == nullptr ? SavedForBackward{} : entry->saved;
}

namespace {

// The metas given, or those of the tensors (kept in `taken`) when none are given.
std::span<const TensorMeta> metas_of(std::span<const Tensor> tensors, std::span<const TensorMeta> given,
                                     const OpDef& op, const char* what, TensorMetas& taken) {
  if (!given.empty()) {
    DTR_CHECK(given.size() == tensors.size(), InvalidArgument, "vjp: op '", op.name, "': ", tensors.size(), " ", what,
              "s but ", given.size(), " metas");
    return given;
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    DTR_CHECK(tensors[i].defined(), InvalidArgument, "vjp: op '", op.name, "': ", what, " ", i,
              " is undefined and no metas were given");
    taken.push_back(tensors[i].meta());
  }
  return taken;
}

}  // namespace

std::vector<Tensor> vjp(Runtime& runtime, const OpDef& op, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, std::span<const Tensor> output_grads, const Attrs& attrs,
                        std::span<const TensorMeta> input_meta, std::span<const TensorMeta> output_meta,
                        std::uint64_t wanted) {
  const GradientRule* rule = gradient_rule(op);
  DTR_CHECK(rule != nullptr, InvalidArgument, "vjp: op '", op.name, "' has no gradient rule");
  DTR_CHECK(output_grads.size() == outputs.size(), InvalidArgument, "vjp: op '", op.name, "' has ", outputs.size(),
            " outputs, got ", output_grads.size(), " output gradients");
  TensorMetas taken_in;
  TensorMetas taken_out;
  const std::span<const TensorMeta> in_meta = metas_of(inputs, input_meta, op, "input", taken_in);
  const std::span<const TensorMeta> out_meta = metas_of(outputs, output_meta, op, "output", taken_out);
  for (std::size_t i = 0; i < output_grads.size(); ++i) {
    DTR_CHECK(!output_grads[i].defined() || output_grads[i].meta() == out_meta[i], ShapeError, "vjp: op '",
              op.name, "': the gradient of output ", i, " is ", to_string(output_grads[i].meta().dtype), " ",
              to_string(output_grads[i].shape()), ", the output ", to_string(out_meta[i].dtype), " ",
              to_string(out_meta[i].shape));
  }
  std::vector<Tensor> grads =
      (*rule)(GradientContext{runtime, op, inputs, outputs, attrs, output_grads, in_meta, out_meta, wanted});
  DTR_CHECK(grads.size() == inputs.size(), InvalidArgument, "vjp: the rule of op '", op.name, "' gave ",
            grads.size(), " gradients for ", inputs.size(), " inputs");
  return grads;
}

}  // namespace dtr

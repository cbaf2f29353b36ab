// Variables, backward nodes and the grad mode (include/dtr/nn/autograd.h). The engine is nn/backward.cpp.
#include "dtr/nn/autograd.h"

#include <atomic>

#include "dtr/check.h"
#include "dtr/gradients.h"
#include "nn/variable_impl.h"

namespace dtr::nn {

namespace {

thread_local bool grad_mode_enabled = true;
thread_local bool forward_rerun = false;

bool floating(DType dtype) { return dtype == DType::float32 || dtype == DType::float64; }

// An op's inputs or outputs as the node keeps them: inline up to four, so that a node is one allocation.
using Tensors = SmallVector<Tensor, 4>;

// An op's backward node: its rule, and the inputs and outputs the rule reads.
class OpNode final : public detail::Node {
 public:
  OpNode(Runtime& runtime, detail::Edges next, TensorMetas output_meta, const OpDef& op, const Attrs& attrs,
         Tensors inputs, Tensors outputs, TensorMetas input_meta)
      : Node(runtime, std::move(next), std::move(output_meta)),
        op_(op),
        attrs_(attrs),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        input_meta_(std::move(input_meta)) {
    for (std::size_t k = 0; k < 64 && k < this->next().size(); ++k) {
      if (!this->next()[k].defined()) wanted_ &= ~(std::uint64_t{1} << k);
    }
  }

  std::vector<Tensor> run_backward(std::vector<Tensor> output_grads) override {
    DTR_CHECK(!released_, InvalidArgument, "backward: the graph through '", op_.name,
              "' was already freed by an earlier backward; pass retain_graph = true to the first backward to "
              "run backward through it again");
    return vjp(runtime(), op_, inputs_, outputs_, output_grads, attrs_, input_meta_, output_meta(), wanted_);
  }

  void release() override {
    released_ = true;
    inputs_.clear();
    outputs_.clear();
  }

  std::string name() const override { return op_.name; }

 private:
  const OpDef& op_;
  const Attrs attrs_;
  Tensors inputs_;   // per input: saved when the rule reads it, else undefined
  Tensors outputs_;  // the same per output
  const TensorMetas input_meta_;
  std::uint64_t wanted_ = ~std::uint64_t{0};  // the inputs that need a gradient
  bool released_ = false;
};

std::atomic<std::uint64_t> next_sequence{0};

}  // namespace

// ---- Variable ----

Variable::Variable(Runtime& runtime, Tensor data, bool requires_grad) {
  DTR_CHECK(data.defined(), InvalidArgument, "Variable: the data tensor is undefined");
  DTR_CHECK(!requires_grad || floating(data.meta().dtype), InvalidArgument,
            "Variable: only floating tensors can require gradients, not ", to_string(data.meta().dtype));
  impl_ = std::make_shared<detail::VariableImpl>();
  impl_->runtime = &runtime;
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
}

const Tensor& Variable::data() const {
  DTR_CHECK(defined(), InvalidArgument, "the variable is undefined");
  return impl_->data;
}

Runtime& Variable::runtime() const {
  DTR_CHECK(defined(), InvalidArgument, "the variable is undefined");
  return *impl_->runtime;
}

bool Variable::requires_grad() const { return defined() && impl_->requires_grad; }
bool Variable::is_leaf() const { return !defined() || impl_->grad_fn == nullptr; }

void Variable::set_requires_grad(bool requires_grad) {
  DTR_CHECK(is_leaf(), InvalidArgument, "set_requires_grad: only a leaf's flag can be set, and this variable is computed; detach() it first");
  DTR_CHECK(!requires_grad || floating(meta().dtype), InvalidArgument,
            "set_requires_grad: only floating tensors can require gradients, not ", to_string(meta().dtype));
  impl_->requires_grad = requires_grad;
}

const Tensor& Variable::grad() const {
  DTR_CHECK(defined(), InvalidArgument, "the variable is undefined");
  return impl_->grad;
}

void Variable::set_grad(Tensor grad) {
  DTR_CHECK(defined(), InvalidArgument, "the variable is undefined");
  DTR_CHECK(!grad.defined() || grad.meta() == meta(), ShapeError, "set_grad: a gradient of ",
            to_string(grad.meta().dtype), " ", to_string(grad.shape()), " for a variable of ",
            to_string(meta().dtype), " ", to_string(shape()));
  impl_->grad = std::move(grad);
}

Variable Variable::detach() const { return Variable(runtime(), data(), false); }

void Variable::rebind(const Variable& value) {
  DTR_CHECK(defined() && value.defined(), InvalidArgument, "rebind: undefined variable");
  DTR_CHECK(value.meta() == meta(), ShapeError, "rebind: a value of ", to_string(value.meta().dtype), " ",
            to_string(value.shape()), " for a variable of ", to_string(meta().dtype), " ", to_string(shape()));
  DTR_CHECK(&value.runtime() == &runtime(), InvalidArgument, "rebind: the value is another runtime's");
  if (!grad_enabled()) {  // an update autograd does not see (an optimizer's, under no_grad)
    impl_->data = value.data();
    return;
  }
  DTR_CHECK(!(is_leaf() && requires_grad()), InvalidArgument,
            "rebind: a leaf that requires a gradient cannot be updated in place while grad mode is on; update "
            "it under nn::NoGrad");
  impl_->data = value.data();
  impl_->grad_fn = value.grad_fn();
  impl_->output_index = value.output_index();
  impl_->requires_grad = value.requires_grad();
}

const std::shared_ptr<detail::Node>& Variable::grad_fn() const {
  DTR_CHECK(defined(), InvalidArgument, "the variable is undefined");
  return impl_->grad_fn;
}

std::uint32_t Variable::output_index() const { return defined() ? impl_->output_index : 0; }

void Variable::backward(const Tensor& gradient, bool retain_graph) const {
  nn::backward(std::span<const Variable>(this, 1), std::span<const Tensor>(&gradient, 1), retain_graph);
}

// ---- modes ----

bool grad_enabled() { return grad_mode_enabled; }
GradMode::GradMode(bool enabled) : previous_(grad_mode_enabled) { grad_mode_enabled = enabled; }
GradMode::~GradMode() { grad_mode_enabled = previous_; }

bool recomputing_forward() { return forward_rerun; }
RecomputingForward::RecomputingForward() : previous_(forward_rerun) { forward_rerun = true; }
RecomputingForward::~RecomputingForward() { forward_rerun = previous_; }

// ---- nodes ----

namespace detail {

Node::Node(Runtime& runtime, Edges next, TensorMetas output_meta)
    : runtime_(runtime), next_(std::move(next)), output_meta_(std::move(output_meta)), sequence_(++next_sequence) {}

// Iterative: a chain of 10,000 nodes whose last owner goes must not recurse 10,000 destructors deep.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> orphans;
  for (Edge& e : next_) {
    if (e.node) orphans.push_back(std::move(e.node));
  }
  while (!orphans.empty()) {
    std::shared_ptr<Node> node = std::move(orphans.back());
    orphans.pop_back();
    if (node.use_count() == 1) {  // the last owner: take its edges before it goes
      for (Edge& e : node->next_) {
        if (e.node) orphans.push_back(std::move(e.node));
      }
    }
  }
}

Edge edge_of(const Variable& input) {
  if (!input.requires_grad()) return {};
  if (input.is_leaf()) return Edge{nullptr, 0, input.impl()};
  return Edge{input.grad_fn(), input.output_index(), nullptr};
}

Variable stand_in_leaf(Runtime& runtime, Tensor data, bool requires_grad) {
  Variable leaf(runtime, std::move(data), requires_grad);
  leaf.impl()->passes_grad_on = true;
  return leaf;
}

std::vector<Variable> attach(Runtime& runtime, std::vector<Tensor> outputs, const std::shared_ptr<Node>& node) {
  std::vector<Variable> result;
  result.reserve(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    auto impl = std::make_shared<VariableImpl>();
    impl->runtime = &runtime;
    impl->data = std::move(outputs[i]);
    impl->requires_grad = node != nullptr;
    impl->grad_fn = node;
    impl->output_index = static_cast<std::uint32_t>(i);
    result.emplace_back(std::move(impl));
  }
  return result;
}

}  // namespace detail

// ---- recording ----

std::vector<Variable> apply(const OpDef& op, std::span<const Variable> inputs, const Attrs& attrs) {
  DTR_CHECK(!inputs.empty(), InvalidArgument, "apply: op '", op.name, "' needs at least one input variable");
  Runtime& runtime = inputs[0].runtime();
  SmallVector<Tensor, 4> data;
  data.reserve(inputs.size());
  bool tracked = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    DTR_CHECK(inputs[i].defined(), InvalidArgument, "apply: op '", op.name, "': input ", i, " is undefined");
    DTR_CHECK(&inputs[i].runtime() == &runtime, InvalidArgument, "apply: op '", op.name, "': input ", i,
              " belongs to another runtime than input 0");
    data.push_back(inputs[i].data());
    tracked = tracked || inputs[i].requires_grad();
  }
  tracked = tracked && grad_enabled();
  if (tracked) {
    DTR_CHECK(gradient_rule(op) != nullptr, InvalidArgument, "apply: op '", op.name,
              "' has no gradient rule, but an input requires a gradient; detach() it or call under nn::NoGrad");
  }
  std::vector<Tensor> outputs = runtime.call(op, std::span<const Tensor>(data), attrs);
  if (!tracked) return detail::attach(runtime, std::move(outputs), nullptr);

  detail::Edges next;
  TensorMetas input_meta;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    next.push_back(detail::edge_of(inputs[i]));
    input_meta.push_back(data[i].meta());
  }
  TensorMetas output_meta;
  for (const Tensor& output : outputs) output_meta.push_back(output.meta());
  const std::shared_ptr<detail::Node> node = detail::op_node(runtime, op, attrs, std::move(next), data,
                                                             std::move(input_meta), outputs, std::move(output_meta));
  return detail::attach(runtime, std::move(outputs), node);
}

std::shared_ptr<detail::Node> detail::op_node(Runtime& runtime, const OpDef& op, const Attrs& attrs, Edges next,
                                              std::span<const Tensor> inputs, TensorMetas input_meta,
                                              std::span<const Tensor> outputs, TensorMetas output_meta) {
  DTR_CHECK(next.size() == input_meta.size() && inputs.size() == input_meta.size() &&
                outputs.size() == output_meta.size(),
            InvalidArgument, "op_node: '", op.name, "': ", next.size(), " edges, ", inputs.size(), " inputs, ",
            input_meta.size(), " input metas, ", outputs.size(), " outputs, ", output_meta.size(), " output metas");
  const SavedForBackward saved = saved_for_backward(op);
  Tensors saved_inputs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!saved.input(i)) continue;
    DTR_CHECK(inputs[i].defined(), InvalidArgument, "op_node: '", op.name, "' reads its input ", i, ", not given");
    saved_inputs[i] = inputs[i];
  }
  Tensors saved_outputs(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!saved.output(i)) continue;
    DTR_CHECK(outputs[i].defined(), InvalidArgument, "op_node: '", op.name, "' reads its output ", i, ", not given");
    saved_outputs[i] = outputs[i];
  }
  return std::make_shared<OpNode>(runtime, std::move(next), std::move(output_meta), op, attrs,
                                  std::move(saved_inputs), std::move(saved_outputs), std::move(input_meta));
}

Variable apply1(const OpDef& op, std::span<const Variable> inputs, const Attrs& attrs) {
  std::vector<Variable> outputs = apply(op, inputs, attrs);
  DTR_CHECK(outputs.size() == 1, InvalidArgument, "apply1: op '", op.name, "' has ", outputs.size(), " outputs");
  return std::move(outputs.front());
}

Variable apply1(const OpDef& op, std::initializer_list<Variable> inputs, const Attrs& attrs) {
  return apply1(op, std::span<const Variable>(inputs.begin(), inputs.size()), attrs);
}

}  // namespace dtr::nn

// Autograd: eager reverse mode over the gradient rules (include/dtr/gradients.h), design section 7. A Variable
// is a runtime tensor plus what reverse mode needs: whether it requires a gradient, the backward node that made
// it (or, for a leaf, its accumulated gradient). Every differentiable call (nn::apply, include/dtr/nn/functional.h)
// records a node holding only the tensors its rule reads (SavedForBackward): ordinary runtime tensors, which the
// runtime may evict and recompute under a budget like any other. backward() walks the graph iteratively, in
// reverse order of recording; each node's saved tensors are released as soon as it has run (unless the graph
// is retained), and the gradients of intermediate values die once consumed, so autograd keeps what PyTorch
// keeps, no more.
//
// Ownership: Variable copies share one value (rebinding a variable, as an in-place update or a state-dict load
// does, is seen by every copy). A non-leaf variable owns its backward node, which owns the nodes before it.
// Thread safety: a variable belongs to its runtime's thread; the grad mode is per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dtr/op.h"
#include "dtr/runtime.h"
#include "dtr/small_vector.h"
#include "dtr/tensor.h"

namespace dtr::nn {

namespace detail {
struct VariableImpl;
class Node;
}  // namespace detail

class Variable {
 public:
  Variable() = default;  // undefined
  // A leaf holding `data` (a tensor of `runtime`), tracked for gradients when `requires_grad`. Throws
  // dtr::InvalidArgument for undefined data, or when a gradient is asked of a non-floating dtype.
  Variable(Runtime& runtime, Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const;
  Runtime& runtime() const;
  const TensorMeta& meta() const { return data().meta(); }
  const Shape& shape() const { return data().shape(); }
  std::int64_t numel() const { return data().numel(); }
  std::vector<float> to_host() const { return data().to_host(); }

  bool requires_grad() const;
  // A leaf: made by the constructor or detach(), or by an op none of whose inputs required a gradient.
  bool is_leaf() const;
  // Turns tracking on or off for a leaf (dtr::InvalidArgument on a non-leaf).
  void set_requires_grad(bool requires_grad);

  // A leaf's accumulated gradient: undefined until a backward reaches it, or after zero_grad(true).
  const Tensor& grad() const;
  // Replaces it (clipping, zero_grad): undefined, or a tensor of the variable's meta (dtr::ShapeError otherwise).
  void set_grad(Tensor grad);

  // The same value, cut from the graph: a leaf that does not require a gradient.
  Variable detach() const;
  // Rebinds this variable (and every copy) to `value`'s data and history: an in-place update as autograd sees
  // it. Nodes recorded earlier keep the value they saved (the runtime's tensors are values), so the update can
  // never corrupt a gradient. dtr::InvalidArgument on a leaf that requires a gradient while grad mode is on
  // (as PyTorch), or for another meta.
  void rebind(const Variable& value);

  // Reverse mode from this variable: seeded with `gradient` (of this variable's meta), or with 1 when it is
  // a one-element tensor and no gradient is given. Gradients are accumulated into the leaves that require
  // them. Unless `retain_graph`, each node's saved tensors are released once it has run, and a second
  // backward through the same nodes throws dtr::InvalidArgument. dtr::InvalidArgument too when this variable
  // does not require a gradient, or when it has many elements and no gradient is given.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;

  // The node that computed it (null for a leaf), and which of that node's outputs it is.
  const std::shared_ptr<detail::Node>& grad_fn() const;
  std::uint32_t output_index() const;

  // Internal (nn/): the shared state.
  explicit Variable(std::shared_ptr<detail::VariableImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<detail::VariableImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::VariableImpl> impl_;
};

// Reverse mode from several roots at once (a sum of losses without the sum): one gradient per root (an
// undefined one stands for 1 on a one-element root).
void backward(std::span<const Variable> roots, std::span<const Tensor> gradients = {}, bool retain_graph = false);

// Calls `op` on the inputs' data and, when grad mode is on and an input requires a gradient, records a
// backward node by the op's gradient rule. Throws dtr::InvalidArgument when an input requiring a gradient
// meets an op with no rule (a random draw, an optimizer step): detach it, or call under no_grad. All inputs
// must be of one runtime.
std::vector<Variable> apply(const OpDef& op, std::span<const Variable> inputs, const Attrs& attrs = {});
Variable apply1(const OpDef& op, std::span<const Variable> inputs, const Attrs& attrs = {});
Variable apply1(const OpDef& op, std::initializer_list<Variable> inputs, const Attrs& attrs = {});

// Whether calls on this thread record backward nodes (on by default).
bool grad_enabled();
// Sets the grad mode of this thread for its lifetime, then restores the previous one.
class GradMode {
 public:
  explicit GradMode(bool enabled);
  ~GradMode();
  GradMode(const GradMode&) = delete;
  GradMode& operator=(const GradMode&) = delete;

 private:
  bool previous_;
};
// No gradients recorded in its scope (PyTorch's torch.no_grad()).
class NoGrad : public GradMode {
 public:
  NoGrad() : GradMode(false) {}
};

// Whether this thread is rerunning a forward for static checkpointing (include/dtr/nn/checkpoint.h): modules
// with side effects (BatchNorm's running statistics) skip them then, as the first forward made them.
bool recomputing_forward();
class RecomputingForward {
 public:
  RecomputingForward();
  ~RecomputingForward();
  RecomputingForward(const RecomputingForward&) = delete;
  RecomputingForward& operator=(const RecomputingForward&) = delete;

 private:
  bool previous_;
};

namespace detail {

// Where a gradient flows from a node's input: into the backward node that produced it, into a leaf's
// accumulated gradient, or nowhere (an input that does not require a gradient).
struct Edge {
  std::shared_ptr<Node> node;
  std::uint32_t output_index = 0;
  std::shared_ptr<VariableImpl> leaf;
  bool defined() const { return node != nullptr || leaf != nullptr; }
};
// A node's edges, one per input: inline up to four (most ops), so recording an op allocates the node alone.
using Edges = SmallVector<Edge, 4>;

// A backward node: from the gradients of its outputs, the gradients of its inputs. Subclasses: an op's node
// (by its rule) and static checkpointing's (a rerun).
class Node {
 public:
  Node(Runtime& runtime, Edges next, TensorMetas output_meta);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // One gradient per input (undefined: none), from one per output (undefined: zeros).
  virtual std::vector<Tensor> run_backward(std::vector<Tensor> output_grads) = 0;
  // Drops what the node saved for its backward; a later run_backward throws dtr::InvalidArgument.
  virtual void release() = 0;
  virtual std::string name() const = 0;

  Runtime& runtime() const { return runtime_; }
  std::span<const Edge> next() const { return next_; }
  std::span<const TensorMeta> output_meta() const { return output_meta_; }
  // Recording order: a node's inputs' nodes were recorded before it.
  std::uint64_t sequence() const { return sequence_; }

 private:
  Runtime& runtime_;
  Edges next_;
  TensorMetas output_meta_;
  std::uint64_t sequence_;
};

// The edge a gradient for `input` flows along (none when it does not require a gradient).
Edge edge_of(const Variable& input);
// A leaf standing in for a node's input while the node reruns its forward (static checkpointing): its gradient
// is handed back to the node, so it is kept as computed rather than copied into a constant.
Variable stand_in_leaf(Runtime& runtime, Tensor data, bool requires_grad);
// Variables for a node's outputs.
std::vector<Variable> attach(Runtime& runtime, std::vector<Tensor> outputs, const std::shared_ptr<Node>& node);
// The node apply() records for `op`: `next` one edge per input, of `input_meta`; of `inputs` and `outputs` (one
// entry per input and per output, of `output_meta`) it keeps what op's rule reads, and those must be defined.
// Also op's backward for a function that computed op's outputs some other way (batch_norm_relu's relu and
// residual sum, done inside the normalization, have relu's and add's nodes).
std::shared_ptr<Node> op_node(Runtime& runtime, const OpDef& op, const Attrs& attrs, Edges next,
                              std::span<const Tensor> inputs, TensorMetas input_meta, std::span<const Tensor> outputs,
                              TensorMetas output_meta);

}  // namespace detail
}  // namespace dtr::nn

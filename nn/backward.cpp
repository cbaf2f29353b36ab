// The backward engine: one pass over the nodes reachable from the roots, in reverse order of recording (a
// node's consumers were all recorded after it, so its output gradients are complete when it runs), with an
// explicit work list instead of recursion.
#include <algorithm>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "dtr/check.h"
#include "dtr/nn/autograd.h"
#include "dtr/ops.h"
#include "nn/variable_impl.h"

namespace dtr::nn {

namespace {

using detail::Node;

Tensor ones_like(Runtime& runtime, const TensorMeta& meta) {
  if (meta.dtype == DType::float64) {
    const std::vector<double> ones(static_cast<std::size_t>(meta.numel()), 1.0);
    return runtime.constant(meta, ones);
  }
  const std::vector<float> ones(static_cast<std::size_t>(meta.numel()), 1.0F);
  return runtime.constant(meta, ones);
}

// `sum` += `grad`, as a new value: the order of the additions is the order gradients arrive, fixed by the graph.
void add_into(Runtime& runtime, Tensor& sum, const Tensor& grad) {
  if (!sum.defined()) {
    sum = grad;
    return;
  }
  sum = runtime.call1(ops::add(), {sum, grad});
}

// A leaf's gradient is a constant, updated in place (Runtime::assign), as PyTorch accumulates into .grad: it
// keeps no lineage. A computed sum would chain every contribution (a weight shared by T steps of an RNN: T
// adds), and evicting it would recompute the whole backward behind it; it would also hold in memory every
// constant its lineage reads (the batch, the parameters before the optimizer's step).
void accumulate_into_leaf(detail::VariableImpl& leaf, const Tensor& grad) {
  DTR_CHECK(grad.meta() == leaf.data.meta(), ShapeError, "backward: a gradient of ", to_string(grad.meta().dtype),
            " ", to_string(grad.shape()), " for a leaf of ", to_string(leaf.data.meta().dtype), " ",
            to_string(leaf.data.shape()));
  Runtime& runtime = *leaf.runtime;
  if (leaf.passes_grad_on) {
    add_into(runtime, leaf.grad, grad);
    return;
  }
  if (!leaf.grad.defined()) {
    // Held by nobody else, the gradient becomes the leaf's as it is (PyTorch's AccumulateGrad steals it too).
    // Otherwise a copy of its own (x · 1 = x, bit for bit), since an accumulation into the leaf's must not
    // change what other holders see. Made a constant directly: no zero-filled buffer to replace.
    Tensor sum = grad.sole_reference() ? grad : runtime.call1(ops::scale(), {grad}, {{"factor", 1.0}});
    runtime.make_constant(sum);
    leaf.grad = std::move(sum);
    return;
  }
  runtime.assign(leaf.grad, ops::add(), {leaf.grad, grad});
}

// Every gradient a node computes becomes a constant as soon as the node's rule returns: never evicted, its
// lineage cut. Once the gradients it came from die (dead storages are evicted at once, kept for the lineage),
// recomputing one would rerun the backward pass behind it, and in a recurrence that chain reaches the loss: an
// LSTM under a budget recomputed its whole backward, forward included, for one evicted waiting gradient.
// PyTorch holds these gradients too. Cut before the node's output gradients die, so that nothing keeps those
// (constants now, which cannot be evicted) for a lineage; a view (a reshaped gradient) holds its storage.
void hold_gradients(Runtime& runtime, std::span<const Tensor> gradients) {
  for (const Tensor& g : gradients) {
    if (g.defined()) runtime.make_constant(g);
  }
}

// Every node reachable from the roots, latest recorded first.
std::vector<std::shared_ptr<Node>> reachable(std::span<const Variable> roots) {
  std::vector<std::shared_ptr<Node>> nodes;
  std::unordered_set<const Node*> seen;
  std::vector<std::shared_ptr<Node>> work;
  for (const Variable& root : roots) {
    if (root.grad_fn() && seen.insert(root.grad_fn().get()).second) work.push_back(root.grad_fn());
  }
  while (!work.empty()) {
    std::shared_ptr<Node> node = std::move(work.back());
    work.pop_back();
    for (const detail::Edge& e : node->next()) {
      if (e.node && seen.insert(e.node.get()).second) work.push_back(e.node);
    }
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& a, const auto& b) { return a->sequence() > b->sequence(); });
  return nodes;
}

}  // namespace

void backward(std::span<const Variable> roots, std::span<const Tensor> gradients, bool retain_graph) {
  DTR_CHECK(gradients.empty() || gradients.size() == roots.size(), InvalidArgument, "backward: ", roots.size(),
            " roots but ", gradients.size(), " gradients");
  // The gradients waiting for each node, one per output (constants: hold_gradients).
  std::unordered_map<const Node*, std::vector<Tensor>> pending;
  for (std::size_t r = 0; r < roots.size(); ++r) {
    const Variable& root = roots[r];
    DTR_CHECK(root.defined(), InvalidArgument, "backward: root ", r, " is undefined");
    DTR_CHECK(root.requires_grad(), InvalidArgument, "backward: root ", r, " (", to_string(root.meta().dtype), " ",
              to_string(root.shape()),
              ") does not require a gradient: no input of the ops that made it requires one, or it was computed "
              "under nn::NoGrad");
    Tensor seed = gradients.empty() ? Tensor() : gradients[r];
    if (seed.defined()) {
      DTR_CHECK(seed.meta() == root.meta(), ShapeError, "backward: the gradient of root ", r, " is ",
                to_string(seed.meta().dtype), " ", to_string(seed.shape()), ", the root ",
                to_string(root.meta().dtype), " ", to_string(root.shape()));
    } else {
      DTR_CHECK(root.numel() == 1, InvalidArgument, "backward: root ", r, " has ", root.numel(),
                " elements; a gradient is implied only for one-element roots (a scalar loss): pass one");
      seed = ones_like(root.runtime(), root.meta());
    }
    if (root.is_leaf()) {
      accumulate_into_leaf(*root.impl(), seed);
      continue;
    }
    std::vector<Tensor>& slot = pending[root.grad_fn().get()];
    slot.resize(root.grad_fn()->output_meta().size());
    add_into(root.runtime(), slot[root.output_index()], seed);
  }

  for (const std::shared_ptr<Node>& node : reachable(roots)) {
    const auto found = pending.find(node.get());
    if (found == pending.end()) {  // no gradient reached it (only through outputs no loss reads)
      if (!retain_graph) node->release();
      continue;
    }
    std::vector<Tensor> output_grads = std::move(found->second);
    pending.erase(found);
    std::vector<Tensor> input_grads = node->run_backward(output_grads);
    // Under a budget the runtime may have evicted a gradient the rule computed (to make room for its next op):
    // holding it remakes it, from the output gradients, alive until then.
    hold_gradients(node->runtime(), input_grads);
    output_grads.clear();
    if (!retain_graph) node->release();
    DTR_CHECK(input_grads.size() == node->next().size(), InvalidArgument, "backward: node '", node->name(),
              "' gave ", input_grads.size(), " gradients for ", node->next().size(), " inputs");
    for (std::size_t i = 0; i < input_grads.size(); ++i) {
      const detail::Edge& edge = node->next()[i];
      if (!edge.defined() || !input_grads[i].defined()) continue;
      if (edge.leaf) {
        accumulate_into_leaf(*edge.leaf, input_grads[i]);
        continue;
      }
      std::vector<Tensor>& slot = pending[edge.node.get()];
      slot.resize(edge.node->output_meta().size());
      DTR_CHECK(input_grads[i].meta() == edge.node->output_meta()[edge.output_index], ShapeError,
                "backward: node '", node->name(), "' gave input ", i, " a gradient of ",
                to_string(input_grads[i].shape()), " for a value of ",
                to_string(edge.node->output_meta()[edge.output_index].shape));
      add_into(node->runtime(), slot[edge.output_index], input_grads[i]);
      hold_gradients(node->runtime(), {&slot[edge.output_index], 1});  // a sum: a new value
    }
  }
}

}  // namespace dtr::nn

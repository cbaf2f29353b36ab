// nn::batch_norm (include/dtr/nn/functional.h): in training, two ops for the runtime and one node for autograd.
// The runtime sees batch_norm_stats and batch_norm_normalize, so an evicted y is remade in one pass over x
// from the statistics it keeps (three passes when one op made both); autograd sees batch norm as one function
// of (x, weight, bias), differentiated by batch_norm_backward, as PyTorch's SyncBatchNorm does with the same
// pair of ops. Neither op has a gradient rule of its own. batch_norm_relu asks the normalization for relu(y) in
// the same pass: one op and one stored output fewer than relu(batch_norm(x)), and a remade output in one pass;
// batch_norm_add_relu adds a residual first (a ResNet block's end), two ops fewer than relu(add(batch_norm(x), r)).
// Their backward is the unfused ops': relu's and add's nodes (detail::op_node) in front of batch norm's.
#include <memory>

#include "dtr/check.h"
#include "dtr/nn/functional.h"
#include "dtr/ops.h"

namespace dtr::nn {

namespace {

// Batch norm's backward node: batch_norm_backward(grad_y, x, weight, mean, invstd) -> dx, dweight, dbias.
class BatchNormNode final : public detail::Node {
 public:
  BatchNormNode(Runtime& runtime, detail::Edges next, TensorMetas output_meta, std::vector<Tensor> saved)
      : Node(runtime, std::move(next), std::move(output_meta)), saved_(std::move(saved)) {}

  std::vector<Tensor> run_backward(std::vector<Tensor> output_grads) override {
    DTR_CHECK(!saved_.empty(), InvalidArgument,
              "backward: the graph through 'batch_norm' was already freed by an earlier backward; pass "
              "retain_graph = true to the first backward to run backward through it again");
    Tensor grad = output_grads.empty() ? Tensor() : std::move(output_grads.front());
    if (!grad.defined()) grad = runtime().constant(output_meta().front());  // zeros
    const Tensor inputs[] = {grad, saved_[0], saved_[1], saved_[2], saved_[3]};
    return runtime().call(ops::batch_norm_backward(), inputs);
  }

  void release() override { saved_.clear(); }
  std::string name() const override { return "batch_norm"; }

 private:
  std::vector<Tensor> saved_;  // x, weight, mean, invstd; empty once released
};

// Training: statistics, then the normalization (+ residual when defined, relu'd when `relu`), the running
// statistics' updates, and the nodes: batch norm's, the residual sum's, the relu's, each feeding the one before.
Variable train_batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                          const Variable& running_mean, const Variable& running_var, double momentum, double eps,
                          bool relu, const Variable& residual) {
  const std::int64_t count = x.shape().size() >= 2 && x.shape()[1] > 0 ? x.numel() / x.shape()[1] : 0;
  DTR_CHECK(count >= 2, InvalidArgument, "batch_norm: training needs more than one value per channel, got input ",
            to_string(x.shape()));
  DTR_CHECK(&weight.runtime() == &x.runtime() && &bias.runtime() == &x.runtime() &&
                (!residual.defined() || &residual.runtime() == &x.runtime()),
            InvalidArgument, "batch_norm: weight, bias or residual belong to another runtime than x");
  Runtime& rt = x.runtime();
  const Tensor stats_input[] = {x.data()};
  const std::vector<Tensor> stats = rt.call(ops::batch_norm_stats(), stats_input, {{"eps", eps}});
  std::vector<Tensor> normalize_inputs{x.data(), weight.data(), bias.data(), stats[0], stats[1]};
  if (residual.defined()) normalize_inputs.push_back(residual.data());
  std::vector<Tensor> y = {rt.call1(ops::batch_norm_normalize(), normalize_inputs, {{"relu", std::int64_t{relu}}})};
  if (!recomputing_forward()) {
    Tensor mean_target = running_mean.data();  // a copy of the handle: assign updates every copy
    Tensor var_target = running_var.data();
    rt.assign(mean_target, ops::running_stat_update(), {mean_target, stats[0]}, {{"momentum", momentum}});
    rt.assign(var_target, ops::running_stat_update(), {var_target, stats[1]},
              {{"momentum", momentum}, {"invstd_eps", eps}, {"unbiased_count", count}});
  }
  const bool tracked = grad_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad() ||
                                          residual.requires_grad());
  if (!tracked) return detail::attach(rt, std::move(y), nullptr).front();
  detail::Edges next;
  next.push_back(detail::edge_of(x));
  next.push_back(detail::edge_of(weight));
  next.push_back(detail::edge_of(bias));
  TensorMetas output_meta;
  output_meta.push_back(y.front().meta());
  std::shared_ptr<detail::Node> node = std::make_shared<BatchNormNode>(
      rt, std::move(next), output_meta, std::vector<Tensor>{x.data(), weight.data(), stats[0], stats[1]});
  // The residual sum and the relu done inside the normalization get add's and relu's own nodes, each in
  // front of the one before: relu's keeps only the output and lets it go before batch_norm_backward runs, as
  // the unfused ops' nodes do (one node holding both kept it through that op: a larger peak).
  if (residual.defined()) {
    detail::Edges to_both;
    to_both.push_back(detail::Edge{node, 0, nullptr});
    to_both.push_back(detail::edge_of(residual));
    const Tensor unread[2];  // add's rule reads neither input nor the output
    node = detail::op_node(rt, ops::add(), {}, std::move(to_both), unread, {output_meta[0], residual.meta()},
                           std::span(unread, 1), output_meta);
  }
  if (relu) {
    detail::Edges to_below;
    to_below.push_back(detail::Edge{node, 0, nullptr});
    const Tensor unread[1];  // relu's rule reads its output alone
    node = detail::op_node(rt, ops::relu(), {}, std::move(to_below), unread, output_meta, y, output_meta);
  }
  return detail::attach(rt, std::move(y), node).front();
}

}  // namespace

Variable batch_norm(const Variable& x, const Variable& weight, const Variable& bias, const Variable& running_mean,
                    const Variable& running_var, bool training, double momentum, double eps) {
  if (!training) {
    const Variable inputs[] = {x, weight, bias, running_mean, running_var};
    return apply(ops::batch_norm_eval(), inputs, {{"eps", eps}}).front();
  }
  return train_batch_norm(x, weight, bias, running_mean, running_var, momentum, eps, false, Variable());
}

Variable batch_norm_relu(const Variable& x, const Variable& weight, const Variable& bias, const Variable& running_mean,
                         const Variable& running_var, bool training, double momentum, double eps) {
  if (!training) return relu(batch_norm(x, weight, bias, running_mean, running_var, false, momentum, eps));
  return train_batch_norm(x, weight, bias, running_mean, running_var, momentum, eps, true, Variable());
}

Variable batch_norm_add_relu(const Variable& x, const Variable& weight, const Variable& bias,
                             const Variable& running_mean, const Variable& running_var, const Variable& residual,
                             bool training, double momentum, double eps) {
  DTR_CHECK(residual.defined() && residual.shape() == x.shape(), ShapeError,
            "batch_norm_add_relu: needs a residual of x's shape ", to_string(x.shape()), ", got ",
            residual.defined() ? to_string(residual.shape()) : std::string("none"));
  if (!training) return relu(add(batch_norm(x, weight, bias, running_mean, running_var, false, momentum, eps), residual));
  return train_batch_norm(x, weight, bias, running_mean, running_var, momentum, eps, true, residual);
}

}  // namespace dtr::nn

#include "sim/autodiff_tape.h"

#include <algorithm>
#include <cmath>

namespace dtr::sim::generate {

BackwardRule matmul_rule() {
  BackwardRule rule;
  rule.per_input = {{"mm", 0b10, 1.0, &matmul_rule}, {"mm", 0b01, 1.0, &matmul_rule}};
  return rule;
}

BackwardRule reduction_rule() {
  BackwardRule rule;
  rule.per_input = {{"expand", 0, 0.5, nullptr}};
  return rule;
}

std::vector<std::uint32_t> Tape::op(std::string_view name, const std::vector<std::uint32_t>& inputs,
                                    const std::vector<Output>& outputs, double time_ns, BackwardRule rule) {
  DTR_CHECK(rule.passes_gradient.empty() || rule.passes_gradient.size() == inputs.size(), InvalidArgument, name,
            ": a pass-through flag per input expected");
  DTR_CHECK(rule.per_input.empty() || rule.per_input.size() == inputs.size(), InvalidArgument, name,
            ": a gradient op per input expected");
  std::vector<std::uint32_t> results = builder_.call(name, inputs, outputs, time_ns);
  nodes_.push_back(Node{std::string(name), inputs, results, time_ns, std::move(rule)});
  return results;
}

std::vector<std::uint32_t> Tape::emit(bool create_graph, std::string_view name,
                                      const std::vector<std::uint32_t>& inputs, const std::vector<Output>& outputs,
                                      double time_ns, BackwardRule rule) {
  if (create_graph) return op(name, inputs, outputs, time_ns, std::move(rule));
  return builder_.call(name, inputs, outputs, time_ns);
}

std::vector<std::uint32_t> Tape::gradients(std::uint32_t loss, const std::vector<std::uint32_t>& wrt,
                                           bool create_graph) {
  // Which values depend on any of `wrt`: only their producers' inputs get gradients.
  std::vector<bool> needs_gradient(builder_.name_count(), false);
  for (std::uint32_t w : wrt) needs_gradient[w] = true;
  for (const Node& node : nodes_) {
    const bool depends =
        std::any_of(node.inputs.begin(), node.inputs.end(), [&](std::uint32_t in) { return needs_gradient[in]; });
    if (depends) {
      for (std::uint32_t out : node.outputs) needs_gradient[out] = true;
    }
  }

  std::vector<std::uint32_t> gradient(builder_.name_count(), kNoName);
  const double seed_time = std::round(random_.jitter(3000, 0.15));
  gradient[loss] = builder_.call("ones_like", {loss}, builder_.bytes(loss), seed_time);
  // Reverse recording order is a reverse topological order: every consumer of a value runs its backward
  // before the value's producer does, so a gradient is complete when its producer's backward reads it.
  const std::size_t recorded = nodes_.size();  // backward ops recorded now are not walked in this pass
  for (std::size_t i = recorded; i-- > 0;) {
    const Node node = nodes_[i];  // a copy: recording may grow nodes_
    backward(node, needs_gradient, gradient, create_graph);
  }
  std::vector<std::uint32_t> result;
  for (std::uint32_t w : wrt) result.push_back(w < gradient.size() ? gradient[w] : kNoName);
  return result;
}

void Tape::backward(const Node& node, const std::vector<bool>& needs_gradient, std::vector<std::uint32_t>& gradient,
                    bool create_graph) {
  std::vector<std::uint32_t> output_gradients;
  for (std::uint32_t out : node.outputs) {
    if (out < gradient.size() && gradient[out] != kNoName) output_gradients.push_back(gradient[out]);
  }
  if (output_gradients.empty()) return;

  // Inputs that get a gradient, split into those that take the output's gradient as it is and those the
  // backward op computes.
  std::vector<std::size_t> computed;
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    if (!needs_gradient[node.inputs[k]]) continue;
    const bool passes = !node.rule.passes_gradient.empty() && node.rule.passes_gradient[k];
    if (passes) {
      accumulate(gradient, node.inputs[k], output_gradients.front(), create_graph);
    } else {
      computed.push_back(k);
    }
  }
  if (computed.empty()) return;

  if (!node.rule.per_input.empty()) {
    for (std::size_t k : computed) {
      const BackwardRule::PerInput& gradient_op = node.rule.per_input.at(k);
      std::vector<std::uint32_t> args = output_gradients;
      for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        if (i < 32 && (gradient_op.saved_inputs >> i & 1U) != 0) args.push_back(node.inputs[i]);
      }
      const double time = std::round(random_.jitter(node.time_ns * gradient_op.time_factor, 0.1));
      const std::uint32_t result =
          emit(create_graph, gradient_op.op, args, {Output{builder_.bytes(node.inputs[k]), -1}}, time,
               gradient_op.rule != nullptr ? gradient_op.rule() : BackwardRule{})
              .front();
      accumulate(gradient, node.inputs[k], result, create_graph);
    }
    return;
  }

  std::vector<std::uint32_t> args = output_gradients;
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    if (k < 32 && (node.rule.saved_inputs >> k & 1U) != 0) args.push_back(node.inputs[k]);
  }
  for (std::size_t k = 0; k < node.outputs.size(); ++k) {
    if (k < 32 && (node.rule.saved_outputs >> k & 1U) != 0) args.push_back(node.outputs[k]);
  }
  std::vector<Output> outputs;
  for (std::size_t k : computed) {
    outputs.push_back(Output{builder_.bytes(node.inputs[k]), node.rule.view ? 0 : -1});
  }
  const double time = std::round(random_.jitter(node.time_ns * node.rule.time_factor, 0.1));
  // A backward op is differentiable too: its own backward reads all it read (a view's, nothing).
  BackwardRule second_order;
  second_order.view = node.rule.view;
  if (node.rule.view) second_order.saved_inputs = 0;
  const std::vector<std::uint32_t> results =
      emit(create_graph, node.name + "_backward", args, outputs, time, std::move(second_order));
  for (std::size_t r = 0; r < computed.size(); ++r) {
    accumulate(gradient, node.inputs[computed[r]], results[r], create_graph);
  }
}

void Tape::accumulate(std::vector<std::uint32_t>& gradient, std::uint32_t value, std::uint32_t contribution,
                      bool create_graph) {
  if (gradient.size() < builder_.name_count()) gradient.resize(builder_.name_count(), kNoName);
  if (gradient[value] == kNoName) {
    gradient[value] = contribution;
    return;
  }
  const std::uint64_t bytes = builder_.bytes(value);
  const double time = std::round(random_.jitter(3000 + 3.0 * static_cast<double>(bytes) / 500, 0.15));
  BackwardRule sum;
  sum.saved_inputs = 0;
  sum.passes_gradient = {true, true};
  gradient[value] =
      emit(create_graph, "add", {gradient[value], contribution}, {Output{bytes, -1}}, time, std::move(sum)).front();
}

}  // namespace dtr::sim::generate

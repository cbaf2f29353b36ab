// Reverse-mode differentiation at the level of a trace: the generators record their forward ops here, and
// gradients() writes the backward pass a framework's autograd would run: one backward op per forward op on the
// path, in reverse order, reading the incoming gradient and the tensors the op saved, with gradients summed
// where a value fed several ops. With create_graph the backward ops are recorded too, so a later gradients()
// differentiates through them (an unrolled GAN's generator loss through its discriminator's updates).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace_builder.h"

namespace dtr::sim::generate {

// What an op's backward needs.
struct BackwardRule {
  static constexpr std::uint32_t kAll = ~0U;

  // One backward op for one input's gradient, as frameworks split a matmul's (each factor's gradient is a
  // product with the other factor) and a bias's (a sum of the incoming gradient).
  struct PerInput {
    std::string op;
    std::uint32_t saved_inputs = 0;    // bit k: the forward op's input k
    double time_factor = 1.0;          // over the forward op's time
    BackwardRule (*rule)() = nullptr;  // the backward op's own rule (null: the default one)
  };

  // Saved for the backward besides the output gradients, as bit masks: bit k is input (output) k.
  std::uint32_t saved_inputs = kAll;
  std::uint32_t saved_outputs = 0;
  // Per input (empty: none): the input's gradient is the output's gradient itself, no op (an elementwise add).
  std::vector<bool> passes_gradient;
  // Per input (empty: one backward op for all inputs, reading what the masks above say): its gradient's op.
  std::vector<PerInput> per_input;
  bool view = false;         // a view op: its backward is a view of the gradient, no memory of its own
  double time_factor = 2.0;  // backward time over forward time
};

// a @ b: a's gradient is g @ b^T (reads b), b's is a^T @ g (reads a); as is each of those products' own.
BackwardRule matmul_rule();
// A reduction (a bias's gradient): its backward expands the gradient back and reads nothing.
BackwardRule reduction_rule();

class Tape {
 public:
  Tape(TraceBuilder& builder, Random& random) : builder_(builder), random_(random) {}

  // A differentiable op: emitted through the builder and remembered for gradients().
  std::vector<std::uint32_t> op(std::string_view name, const std::vector<std::uint32_t>& inputs,
                                const std::vector<Output>& outputs, double time_ns, BackwardRule rule = {});
  std::uint32_t op(std::string_view name, const std::vector<std::uint32_t>& inputs, std::uint64_t bytes, double time_ns,
                   BackwardRule rule = {}) {
    return op(name, inputs, std::vector<Output>{{bytes, -1}}, time_ns, std::move(rule)).front();
  }

  // d loss / d w for each w in `wrt` (kNoName where the loss does not depend on w), seeded by ones_like(loss).
  std::vector<std::uint32_t> gradients(std::uint32_t loss, const std::vector<std::uint32_t>& wrt, bool create_graph);

 private:
  struct Node {
    std::string name;
    std::vector<std::uint32_t> inputs;
    std::vector<std::uint32_t> outputs;
    double time_ns = 0;
    BackwardRule rule;
  };

  void backward(const Node& node, const std::vector<bool>& needs_gradient, std::vector<std::uint32_t>& gradient,
                bool create_graph);
  void accumulate(std::vector<std::uint32_t>& gradient, std::uint32_t value, std::uint32_t contribution,
                  bool create_graph);
  // An op of the backward pass: recorded on the tape when the graph is kept, else only emitted.
  std::vector<std::uint32_t> emit(bool create_graph, std::string_view name, const std::vector<std::uint32_t>& inputs,
                                  const std::vector<Output>& outputs, double time_ns, BackwardRule rule);

  TraceBuilder& builder_;
  Random& random_;
  std::vector<Node> nodes_;
};

}  // namespace dtr::sim::generate

// Layers the generators have in common, as traced ops with the sizes, costs and saved tensors of their
// PyTorch counterparts.
#pragma once

#include <cmath>
#include <string_view>

#include "sim/autodiff_tape.h"

namespace dtr::sim::generate {

// A parameter of `elements` floats: the program holds it past the step.
inline std::uint32_t parameter(TraceBuilder& builder, double elements) {
  const std::uint32_t p = builder.constant(float_bytes(elements));
  builder.keep(p);
  return p;
}

// The ops of one differentiated program: its builder, its tape and where costs and jitter come from.
struct Network {
  TraceBuilder& builder;
  Tape& tape;
  CostModel& cost;
  Random& random;

  std::uint32_t parameter(double elements) { return generate::parameter(builder, elements); }

  // F.linear as PyTorch logs it: a transposed view of the weight, then addmm(b, x, W^T).
  std::uint32_t linear(std::uint32_t x, std::uint32_t weight, std::uint32_t bias, double batch, double in, double out) {
    const std::uint32_t transposed = view("t", weight);
    // The bias's gradient sums the incoming one; x's is g @ W (reads W^T), W^T's is x^T @ g (reads x).
    BackwardRule rule;
    rule.per_input = {
        {"sum", 0, 0.1, &reduction_rule}, {"mm", 0b100, 1.0, &matmul_rule}, {"mm", 0b010, 1.0, &matmul_rule}};
    const double flops = 2 * batch * in * out;
    const double bytes = 4 * (batch * in + in * out + batch * out);
    return tape.op("addmm", {bias, x, transposed}, float_bytes(batch * out), cost.time_ns(flops, bytes), rule);
  }

  // An elementwise op of one input; its backward reads the input (leaky_relu) or its output (relu, tanh).
  std::uint32_t elementwise(std::string_view op, std::uint32_t x, bool backward_reads_output) {
    BackwardRule rule;
    rule.saved_inputs = backward_reads_output ? 0 : 1;
    rule.saved_outputs = backward_reads_output ? 1 : 0;
    const std::uint64_t bytes = builder.bytes(x);
    return tape.op(op, {x}, bytes, cost.time_ns(0, 2.0 * static_cast<double>(bytes)), rule);
  }

  // a + b of one shape: each input's gradient is the incoming one, no backward op.
  std::uint32_t add(std::uint32_t a, std::uint32_t b) {
    BackwardRule rule;
    rule.saved_inputs = 0;
    rule.passes_gradient = {true, true};
    const std::uint64_t bytes = builder.bytes(a);
    return tape.op("add", {a, b}, bytes, cost.time_ns(0, 3.0 * static_cast<double>(bytes)), rule);
  }

  // A view (reshape, transpose): an alias of its input, whose backward is a view of the gradient.
  std::uint32_t view(std::string_view op, std::uint32_t x) {
    BackwardRule rule;
    rule.saved_inputs = 0;
    rule.view = true;
    rule.time_factor = 1.0;
    return tape.op(op, {x}, std::vector<Output>{{builder.bytes(x), 0}}, std::round(random.jitter(1800, 0.15)), rule)
        .front();
  }

  // A scalar loss of `x` against labels; its backward reads both.
  std::uint32_t loss(std::string_view op, std::uint32_t x, std::uint32_t labels) {
    const double bytes = static_cast<double>(builder.bytes(x));
    return tape.op(op, {x, labels}, 4, cost.time_ns(8 * bytes / 4, 2 * bytes));
  }
};

}  // namespace dtr::sim::generate

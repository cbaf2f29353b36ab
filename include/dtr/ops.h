// The built-in op table: float32 ops on contiguous row-major tensors, each with its shape rule, CPU kernel and
// FLOP count. The runtime records ops by OpDef, so one accessor per op, and find_op for names read from traces
// and configuration.
//
// Every infer checks the number of inputs, their shapes and the attributes, and throws dtr::ShapeError (bad
// shapes or arity) or dtr::InvalidArgument (a missing or mistyped attribute) naming the op. Kernels and flops
// assume inputs that infer accepted. Every flops is at least 1, so no recomputation is ever free for the cost
// model. Kernels are deterministic: the same inputs (and seed) give the same bits, so a rematerialized tensor
// equals the one it replaces.
//
// Thread safety: the OpDefs are immutable statics, built on first use (thread-safe), shared by every caller.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dtr/op.h"

namespace dtr::ops {

// "add", "mul": elementwise on two tensors of the same shape.
const OpDef& add();
const OpDef& mul();
// "relu": max(x, 0), propagating NaN.
const OpDef& relu();
// "scale": x * factor; attribute "factor" (real).
const OpDef& scale();
// "matmul": [m, k] x [k, n] -> [m, n]; 2mkn flops. Sums over k in increasing order.
const OpDef& matmul();
// "sum": over attribute "axis" (int, negative counts from the end; that dimension is removed), or without it
// over every element to a scalar (shape []). Sums in increasing index order.
const OpDef& sum();
// "uniform": floats in [0, 1) with the shape of its one input, whose values it does not read. Random: the bits
// are a function of KernelArgs::seed and the element index only.
const OpDef& uniform();
// "split2": [n, ...] (n >= 2) -> [n/2, ...] and [n - n/2, ...], along dimension 0.
const OpDef& split2();
// "concat2": [a, ...] and [b, ...] -> [a + b, ...], along dimension 0; the inverse of split2.
const OpDef& concat2();

}  // namespace dtr::ops

namespace dtr {

// The built-in op of that name; throws dtr::InvalidArgument listing the known names when there is none.
const OpDef& find_op(std::string_view name);
// The names of the built-in ops, in a fixed order.
std::vector<std::string> op_names();

}  // namespace dtr

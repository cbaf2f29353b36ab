// The built-in op table: ops on contiguous row-major tensors, each with its shape rule, CPU kernel and FLOP
// count. Floating ops take float32 or float64 (all inputs of one dtype; float64 is the gradient checks'
// reference precision). The runtime records ops by OpDef, so one accessor per op, and find_op for names read
// from traces and configuration.
//
// Every infer checks the number of inputs, their shapes, dtypes and the attributes, and throws
// dtr::ShapeError (bad shapes, dtypes or arity) or dtr::InvalidArgument (a missing or mistyped attribute)
// naming the op. Kernels and flops assume inputs that infer accepted. Every flops is at least 1, so no
// recomputation is ever free for the cost model. Kernels are deterministic: the same inputs (and seed) give
// the same bits, so a rematerialized tensor equals the one it replaces.
//
// Backward ops ("*_backward") compute what autograd needs for an op's gradient; nn/ composes them
// (include/dtr/gradients.h).
//
// Thread safety: the OpDefs are immutable statics, built on first use (thread-safe), shared by every caller.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dtr/op.h"

namespace dtr::ops {

// "add", "sub", "mul", "div": elementwise on two tensors whose shapes broadcast (NumPy rules).
const OpDef& add();
const OpDef& sub();
const OpDef& mul();
const OpDef& div();
// "relu": max(x, 0), propagating NaN. "relu_backward"(grad, x): grad where x > 0, else 0.
const OpDef& relu();
const OpDef& relu_backward();
// "gelu": x Φ(x), the exact (erf) form. "gelu_backward"(grad, x).
const OpDef& gelu();
const OpDef& gelu_backward();
// "tanh"; "tanh_backward"(grad, y) with y = tanh(x): grad (1 - y²).
const OpDef& tanh();
const OpDef& tanh_backward();
// "sigmoid"; "sigmoid_backward"(grad, y) with y = sigmoid(x): grad y (1 - y).
const OpDef& sigmoid();
const OpDef& sigmoid_backward();
// "scale": x * factor; attribute "factor" (real).
const OpDef& scale();
// "matmul": [m, k] x [k, n] -> [m, n] (OpenBLAS); attributes "transpose_a", "transpose_b" (0/1) read a
// stored [k, m] or [n, k] as its transpose. 2mkn flops.
const OpDef& matmul();
// "bmm": [b, m, k] x [b, k, n] -> [b, m, n], the same attributes per batch.
const OpDef& bmm();
// "linear": x [..., in], weight [out, in] and an optional bias [out] -> x weightᵀ + bias, [..., out].
const OpDef& linear();
// "sum", "mean": over attribute "axis" (int) or "axes" (int list; negative counts from the end), every
// element when neither is given; "keepdim" (0/1) keeps reduced dimensions as 1. Sums in increasing index
// order, in double.
const OpDef& sum();
const OpDef& mean();
// "sum_to": the input summed down to attribute "shape" (int list), a shape that broadcasts to the input's:
// the gradient of a broadcast.
const OpDef& sum_to();
// "broadcast_to": the input repeated to attribute "shape" (int list) by NumPy's broadcasting rules.
const OpDef& broadcast_to();
// "uniform": floats in [0, 1) with the shape and dtype of its one input, whose values it does not read.
// Random: the bits are a function of KernelArgs::seed and the element index only.
const OpDef& uniform();
// "split2": [n, ...] (n >= 2) -> [n/2, ...] and [n - n/2, ...], along dimension 0; any dtype.
const OpDef& split2();
// "concat2": [a, ...] and [b, ...] -> [a + b, ...], along dimension 0; the inverse of split2.
const OpDef& concat2();

// ---- softmax, losses and normalization (kernels/softmax.cpp, kernels/normalization.cpp) ----
// "softmax", "log_softmax": over attribute "axis" (int, default -1), numerically stable (the row max is
// subtracted; sums in double). "softmax_backward"(grad, y) and "log_softmax_backward"(grad, y), y the
// forward output, same "axis".
const OpDef& softmax();
const OpDef& log_softmax();
const OpDef& softmax_backward();
const OpDef& log_softmax_backward();
// "cross_entropy": logits [N, C] (floating, N, C >= 1) and int64 labels [N] -> the scalar mean over rows of
// -log_softmax(logits)[i, labels[i]]. A label outside [0, C) is a dtr::ShapeError naming the label and its
// position, raised before any output is allocated (OpDef::check_values). "cross_entropy_backward"(grad [],
// logits, labels) -> grad logits. Labels get no gradient.
const OpDef& cross_entropy();
const OpDef& cross_entropy_backward();
// "layer_norm": x [..., D...], weight [D...], bias [D...] -> y [..., D...], mean [...], invstd [...]: each row
// of the trailing "normalized_rank" dimensions (int >= 1, default 1) normalized by its mean and biased
// variance, invstd = (var + eps)^-1/2, then scaled by weight and shifted by bias; attribute "eps" (real >= 0,
// default 1e-5). "layer_norm_backward"(grad_y, x, weight, mean, invstd), same "normalized_rank" -> grad x,
// grad weight, grad bias.
const OpDef& layer_norm();
const OpDef& layer_norm_backward();
// "batch_norm" (training): x [N, C, ...], weight [C], bias [C] -> y, batch mean [C], invstd [C], statistics
// over every dimension but 1 (biased variance); attribute "eps" (default 1e-5). "batch_norm_backward"(grad_y,
// x, weight, mean, invstd) -> grad x, grad weight, grad bias.
const OpDef& batch_norm();
const OpDef& batch_norm_backward();
// "batch_norm_eval": x [N, C, ...], weight, bias, running_mean, running_var (all [C]) -> y, normalized by the
// running statistics; "eps" as batch_norm. "batch_norm_eval_backward"(grad_y, x, weight, running_mean,
// running_var) -> the gradients of all five inputs.
const OpDef& batch_norm_eval();
const OpDef& batch_norm_eval_backward();
// "running_stat_update"(running, batch_stat) -> (1 - momentum) running + momentum stat, to be applied with
// Runtime::assign (an in-place, copy-on-write update of the running statistic). Attributes: "momentum" (real
// in [0, 1], default 0.1); "invstd_eps" (real, optional): batch_stat is batch_norm's invstd output and
// stat = 1/invstd² - invstd_eps, the biased batch variance (pass batch_norm's eps); "unbiased_count" (int
// n >= 2, optional): stat is multiplied by n / (n - 1), turning a biased variance over n elements into the
// unbiased one.
const OpDef& running_stat_update();

}  // namespace dtr::ops

namespace dtr {

// The built-in op of that name; throws dtr::InvalidArgument listing the known names when there is none.
const OpDef& find_op(std::string_view name);
// The names of the built-in ops, in a fixed order.
std::vector<std::string> op_names();

}  // namespace dtr

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

// ---- elementwise (kernels/elementwise/): arithmetic, activations, reductions and broadcasts, random draws,
// dropout, optimizer steps ----
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
// "lstm_cell"(gates [N, 4H], c [N, H]) -> h [N, H], c' [N, H]: torch.nn.LSTM's cell after its two linear
// maps, the gates split as i, f, g, o: c' = σ(f) c + σ(i) tanh(g), h = σ(o) tanh(c'). One op where the
// unfused cell is ten (so a budgeted LSTM has fewer, larger values to evict); the same bits as those ten.
// "lstm_cell_backward"(grad_h, grad_c', gates, c) -> grad_gates [N, 4H], grad_c [N, H]: it recomputes the
// activations from the gates rather than saving them.
const OpDef& lstm_cell();
const OpDef& lstm_cell_backward();
// "scale": x * factor; attribute "factor" (real).
const OpDef& scale();
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
// "dropout": x and attribute "p" (real in [0, 1); InvalidArgument otherwise) -> y = x · mask / (1 - p) and
// the mask (1 keeps an element, with probability 1 - p; 0 drops it), of x's dtype. Random: the mask is a
// function of KernelArgs::seed and the element index only, the same for float32 and float64. p = 0 keeps all.
// Its gradient is grad · mask / (1 - p), from the saved mask.
const OpDef& dropout();
// Optimizer steps (not differentiable), each giving one new value of its first input's shape, meant for
// Runtime::assign (copy-on-write, so values computed from the old parameter still recompute from it). A
// training step, after the gradients g of parameters p are computed, for each parameter:
//   SGD (attributes lr, momentum, optional weight_decay (default 0) and nesterov (0/1), the same for both; the
//   buffer b starts as zeros):
//     rt.assign(b, sgd_momentum_buffer(), {b, g}, attrs)      b = momentum·b + g  (+ weight_decay·p)
//     rt.assign(p, sgd_apply(), {p, b}, attrs)                 p = p - lr·b
//   With weight_decay not 0, sgd_momentum_buffer takes p as a third input ({b, g, p}); with nesterov = 1,
//   sgd_apply takes g as a third input ({p, b, g}) and sets p = p - lr·(g + weight_decay·p + momentum·b).
//   Adam (attributes lr, step (>= 1, the number of this step, counted from 1), optional beta1 (0.9), beta2
//   (0.999), eps (1e-8), weight_decay (0), the same for all three; m and v start as zeros):
//     rt.assign(m, adam_moment1(), {m, g}, attrs)   m = beta1·m + (1 - beta1)·g
//     rt.assign(v, adam_moment2(), {v, g}, attrs)   v = beta2·v + (1 - beta2)·g²
//     rt.assign(p, adam_apply(), {p, m, v}, attrs)  p = p - lr/(1 - beta1^step) · m / (√v/√(1 - beta2^step) + eps)
//   With weight_decay not 0 (L2, added to the gradient), both moment ops take p as a third input and use
//   g + weight_decay·p for g.
// Bad attribute values (negative lr, a beta outside [0, 1), step < 1) are InvalidArgument; the wrong number of
// inputs for the attributes, or inputs of different shapes or dtypes, ShapeError.
const OpDef& sgd_momentum_buffer();
const OpDef& sgd_apply();
const OpDef& adam_moment1();
const OpDef& adam_moment2();
const OpDef& adam_apply();

// ---- dense (kernels/dense/): matrix products, convolution, pooling ----
// "matmul": [m, k] x [k, n] -> [m, n] (on the CPU oneDNN's GEMM for float32, OpenBLAS's for float64);
// attributes "transpose_a", "transpose_b" (0/1) read a stored [k, m] or [n, k] as its transpose. 2mkn flops.
const OpDef& matmul();
// "bmm": [b, m, k] x [b, k, n] -> [b, m, n], the same attributes per batch.
const OpDef& bmm();
// "linear": x [..., in], weight [out, in] and an optional bias [out] -> x weightᵀ + bias, [..., out].
const OpDef& linear();
// "linear_add": x [..., in], weight [out, in], an addend [..., out] and an optional bias [out] -> addend +
// x weightᵀ + bias, [..., out]: a linear map whose output something is added to (the LSTM's gates, the sum of
// two maps; a residual connection), its product accumulated onto the addend, with no separate add's pass over
// the output nor its intermediate.
const OpDef& linear_add();
// "attention": multi-head self-attention after the input projection, as one op: qkv [N, T, 3E] (q, k and v
// side by side, as torch.nn.MultiheadAttention's in_proj gives them) -> the context [N, T, E], heads merged,
// and the weights [N · heads, T, T]. Attribute "heads" (int dividing E); per head of width D = E / heads:
// P = softmax((q / √D) kᵀ), context = P v, with the bits of the unfused ops (reshape, permute, scale, bmm,
// softmax, bmm, permute). "attention_backward"(grad [N, T, E], qkv, P[, grad_P]) -> grad_qkv [N, T, 3E], same
// attribute (grad_P: the weights' own gradient, for a program that used them).
// Under a budget the runtime may evict P like any value and remake it with the op.
const OpDef& attention();
const OpDef& attention_backward();
// "conv2d": input [N, C, H, W], weight [O, C/groups, KH, KW] and an optional bias [O] -> [N, O, OH, OW] with
// OH = (H + 2 pad_h - dil_h (KH - 1) - 1) / stride_h + 1 (and OW alike). Attributes (int lists of 2, height
// then width): "stride" (default [1, 1]), "padding" (zeros, default [0, 0]), "dilation" (default [1, 1]);
// "groups" (int, default 1) splits C and O into that many independent convolutions. On the CPU oneDNN's
// convolution for float32 (docs/kernels.md), else im2col + one GEMM per image and group; 2 N O OH OW (C/groups)
// KH KW flops (+ N O OH OW for the bias).
const OpDef& conv2d();
// "conv2d_backward_input"(grad_out, weight): the gradient of conv2d's input; conv2d's attributes plus
// "input_shape" (int list). Overlapping windows add up in one fixed order (col2im).
const OpDef& conv2d_backward_input();
// "conv2d_backward_weight"(grad_out, input): the gradient of conv2d's weight; conv2d's attributes plus
// "weight_shape" (int list). Images are summed in index order. (The bias's gradient is a sum over [0, 2, 3].)
const OpDef& conv2d_backward_weight();
// "max_pool2d": [N, C, H, W] -> [N, C, OH, OW], each output the maximum of its window. Attributes (int lists
// of 2): "kernel" (required), "stride" (default: the kernel), "padding" (default [0, 0], at most half the
// kernel; padded cells never win). Ties go to the first maximal cell in row-major window order; a NaN in the
// window propagates (the first NaN wins).
const OpDef& max_pool2d();
// "max_pool2d_backward"(grad_out, input): each output's gradient added to its window's maximum, chosen by
// max_pool2d's rule; max_pool2d's attributes.
const OpDef& max_pool2d_backward();
// "avg_pool2d": as max_pool2d's shapes and attributes; each output the sum of its window's input cells
// divided by the full window size KH KW, padded cells counting as zeros (PyTorch's count_include_pad=True).
const OpDef& avg_pool2d();
// "avg_pool2d_backward"(grad_out): avg_pool2d's attributes plus "input_shape" (int list); each output's
// gradient over KH KW added to the input cells of its window.
const OpDef& avg_pool2d_backward();

// ---- normalization (kernels/normalization/): softmax, losses, layer and batch norm, embedding ----
// "embedding": weight [V, D] (floating) and int64 indices [...] -> weight's rows [..., D]. An index outside
// [0, V) is a ShapeError naming it, raised before any output is allocated (OpDef::check_values).
// "embedding_backward"(grad [..., D], indices [...]) with attribute "num_embeddings" V -> [V, D]: row i sums
// the gradient rows of the positions holding i, in increasing position order (deterministic).
const OpDef& embedding();
const OpDef& embedding_backward();
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
// over every dimension but 1 (biased variance), rounded to x's type before y = (x - mean) invstd weight + bias
// is made from them; attribute "eps" (default 1e-5). "batch_norm_backward"(grad_y, x, weight, mean, invstd) ->
// grad x, grad weight, grad bias.
const OpDef& batch_norm();
const OpDef& batch_norm_backward();
// batch_norm in two ops, so that remaking an evicted y is one pass over x, not three: "batch_norm_stats"(x)
// -> mean [C], invstd [C] ("eps" as batch_norm) and "batch_norm_normalize"(x, weight, bias, mean, invstd[,
// residual]) -> y, plus the residual (x's shape) when given, in add's bits; attribute "relu" (0 or 1, default 0):
// relu of that in the same pass, relu's bits. batch_norm_normalize(x, w, b,
// batch_norm_stats(x)) equals batch_norm(x, w, b)'s y bit for bit. Neither has a gradient rule: nn::batch_norm
// differentiates the pair as one function of (x, weight, bias), by batch_norm_backward.
const OpDef& batch_norm_stats();
const OpDef& batch_norm_normalize();
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

// ---- layout (kernels/layout/): reshape, slice, split, concat, transpose, permute ----
// "split2": [n, ...] (n >= 2) -> [n/2, ...] and [n - n/2, ...], along dimension 0; any dtype.
const OpDef& split2();
// "concat2": [a, ...] and [b, ...] -> [a + b, ...], along dimension 0; the inverse of split2.
const OpDef& concat2();
// "reshape": the input's elements under attribute "shape" (int list; one -1 stands for what the element count
// leaves). Always a view (OpDef::views): no buffer, no copy. Any dtype.
const OpDef& reshape();
// "slice": along attribute "dim", indices "start" to "end" (exclusive) by "step" (>= 1, default 1); negative
// indices count from the end and out-of-range ones clamp, as in Python. A view when the result is one
// contiguous range (the dimensions before "dim" all 1, e.g. dim 0, and step 1), a copy otherwise. Any dtype.
// "slice_backward"(grad): zeros of attribute "input_shape" with grad where the slice took its elements (the
// slice's attributes): the gradient of slice.
const OpDef& slice();
const OpDef& slice_backward();
// "split": along attribute "dim" into parts of attribute "sizes" (int list, >= 0, adding up to that
// dimension): one output per part. Views when the dimensions before "dim" are all 1 (e.g. dim 0), copies
// otherwise. Any dtype.
const OpDef& split();
// "concat": one or more tensors of one dtype and rank, equal but in attribute "dim", joined along it. A copy.
const OpDef& concat();
// "transpose": dimensions "dim0" and "dim1" swapped. "permute": output dimension i is input dimension
// "dims"[i] (a permutation; negative counts from the end). Copies (tensors are contiguous); any dtype.
const OpDef& transpose();
const OpDef& permute();

}  // namespace dtr::ops

namespace dtr {

// The built-in op of that name; throws dtr::InvalidArgument listing the known names when there is none.
const OpDef& find_op(std::string_view name);
// The names of the built-in ops, in a fixed order.
std::vector<std::string> op_names();

}  // namespace dtr

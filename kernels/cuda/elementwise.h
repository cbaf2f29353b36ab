// Launchers of the elementwise family's device kernels (kernels/cuda/elementwise.cu): plain pointers to device
// memory, int64 sizes and the per-element functors of kernels/elementwise_math.h, no CUDA type, so the host
// glue (elementwise_ops.cpp) compiles as ordinary C++. Each enqueues its work on cuda::stream and launches
// nothing when there is nothing to write. The templates are instantiated in elementwise.cu for float and
// double and the functors listed with each.
#pragma once

#include <cstdint>

#include "kernels/elementwise/elementwise_math.h"
#include "strided_walk.h"

namespace dtr::kernels::cuda {

// The output of a broadcast walked in row-major order, with the strides of its (up to) two inputs, a and b
// (0 along the dimensions they are broadcast along).
using BroadcastWalk = StridedWalk<2>;

// y[i] = fn(x[i]) for i in [0, count). Fn: Relu, Gelu, Tanh, Sigmoid, Scale.
template <typename T, typename Fn>
void launch_map(Fn fn, std::int64_t count, const T* x, T* y);

// y[i] = fn(a[i], b[i]). Fn: ReluBackward, GeluBackward, TanhBackward, SigmoidBackward.
template <typename T, typename Fn>
void launch_zip(Fn fn, std::int64_t count, const T* a, const T* b, T* y);

// y[i] = fn(a[i], b[i], c[i]), or fn(a[i], b[i], 0) when c is nullptr. Fn: the optimizer steps.
template <typename T, typename Fn>
void launch_update(Fn fn, std::int64_t count, const T* a, const T* b, const T* c, T* y);

// y[i] = fn(a[ia], b[ib]) over the walk's output, ia and ib from its strides. Fn: Add, Sub, Mul, Div.
template <typename T, typename Fn>
void launch_broadcast_binary(Fn fn, const BroadcastWalk& walk, const T* a, const T* b, T* y);

// y[i] = x[ix] over the walk's output, ix from its stride_a (broadcast_to).
template <typename T>
void launch_broadcast_copy(const BroadcastWalk& walk, const T* x, T* y);

// A reduction of a contiguous input: output o (row-major over the kept dimensions) sums the input elements at
// kept offset(o) + reduced offset(r) for every r of the reduced walk, in its row-major order. The reduced walk
// has at least one dimension (the sequential kernel's inner loop).
struct ReduceWalk {
  StridedWalk<1> kept;
  StridedWalk<1> reduced;
};

// y[o] = T(factor · Σ x) per output, summed in double (sum, mean, sum_to).
template <typename T>
void launch_reduce_sum(const ReduceWalk& walk, double factor, const T* x, T* y);

// The fused LSTM cell (lstm_cell), one thread per element of c [rows, hidden]: h and c' from gates
// [rows, 4 hidden] and c, the CPU kernel's expressions (elementwise_math.h).
template <typename T>
void launch_lstm_cell(std::int64_t rows, std::int64_t hidden, const T* gates, const T* c, T* h, T* c_next);

// Its backward (lstm_cell_backward): grad_gates [rows, 4 hidden] and grad_c from grad_h, grad_c', gates and c.
template <typename T>
void launch_lstm_cell_backward(std::int64_t rows, std::int64_t hidden, const T* grad_h, const T* grad_state,
                               const T* gates, const T* c, T* grad_gates, T* grad_c);

// y[i] = unit_uniform<T>(key, i) (uniform).
template <typename T>
void launch_uniform(std::int64_t count, std::uint64_t key, T* y);

// mask[i] = dropout_mask(key, i, p), y[i] = x[i] · mask[i] · keep_scale (dropout).
template <typename T>
void launch_dropout(std::int64_t count, std::uint64_t key, double p, T keep_scale, const T* x, T* y, T* mask);

}  // namespace dtr::kernels::cuda

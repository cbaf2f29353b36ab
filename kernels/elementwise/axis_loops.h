// The CPU loops of broadcast_to and of the sums over axes (sum, mean, sum_to): each on the tensor's dimensions
// merged where row-major order allows (neighbours both repeated or both copied, both summed or both kept), so
// that U-Net's nearest upsampling, [N, C, H, 1, W, 1] -> [N, C, H, 2, W, 2], runs as [N·C·H, 2, W, 2] with
// no per-element index arithmetic, and each spread over the CPU threads.
#pragma once

#include <cstdint>

#include "dtr/op.h"
#include "kernels/elementwise/elementwise_attrs.h"

namespace dtr::kernels {

// out (contiguous, `out_shape`) = x (contiguous, `in_shape`) repeated by NumPy's broadcasting rules; in_shape
// must broadcast to out_shape. A copy: the same bits on any number of threads.
template <typename T>
void broadcast_copy(const T* x, const Shape& in_shape, T* out, const Shape& out_shape);

// out = factor · (x summed over the dimensions `mask` marks), x contiguous of `shape`, out the kept dimensions
// in order (out_count elements). Each output adds its inputs in increasing index order in double and is
// rounded once: reproducible, accurate for long sums, and the same bits on any number of threads (the threads
// split the outputs, never one output's sum).
template <typename T>
void sum_over_axes(const T* x, const Shape& shape, const AxisMask& mask, T* out, std::int64_t out_count,
                   double factor);

}  // namespace dtr::kernels

// What the elementwise family's ops derive from their attributes and shapes, with the checks of their shape
// rules: the dimensions a reduction sums over, dropout's probability, the optimizer steps' functors. The CPU
// kernels, the shape rules and the CUDA kernels' argument unpacking (kernels/cuda/elementwise_ops.cpp) all read
// them from here, so they cannot disagree. Host code only (C++20).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "dtr/op.h"
#include "kernels/elementwise/elementwise_math.h"

namespace dtr::kernels {

// Per input dimension: whether a reduction sums over it.
using AxisMask = SmallVector<bool, 6>;

// sum and mean: the dimensions "axis" (one int) or "axes" (a list) name, every dimension when neither is
// given. Negative axes count from the end; an axis out of range or named twice is a ShapeError naming `op`.
AxisMask reduced_axes(const std::string& op, std::span<const TensorMeta> inputs, const Attrs& attrs);

// sum_to: the dimensions that summing the input down to attribute "shape" removes or makes 1; ShapeError
// unless that shape broadcasts to the input's.
AxisMask sum_to_mask(std::span<const TensorMeta> inputs, const Attrs& attrs);

// What a reduction's double total is multiplied by: 1 for a sum, 1 / (elements per output) for a mean.
double reduction_factor(bool mean, std::int64_t in_count, std::int64_t out_count);

// dropout's attribute "p", InvalidArgument unless in [0, 1).
double drop_probability(const Attrs& attrs);

// The optimizer steps' attributes, checked (InvalidArgument naming the op and the attribute), as functors.
SgdMomentumBuffer sgd_momentum_buffer_step(const Attrs& attrs);
SgdApply sgd_apply_step(const Attrs& attrs);
AdamMoment1 adam_moment1_step(const Attrs& attrs);
AdamMoment2 adam_moment2_step(const Attrs& attrs);
AdamApply adam_apply_step(const Attrs& attrs);

}  // namespace dtr::kernels

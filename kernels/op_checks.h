// What the built-in ops' shape rules and cost counts share. Every message names the op and the shapes it was
// given, so a ShapeError raised deep inside a model says which call was wrong.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "dtr/check.h"
#include "dtr/op.h"

namespace dtr::kernels {

// "[2, 3] and [3]": the shapes of an op's inputs, for error messages.
std::string shapes_of(std::span<const TensorMeta> inputs);

// Throws dtr::ShapeError "op 'matmul' takes 2 inputs, got 3" unless there are `expected` inputs.
void check_arity(std::string_view op, std::span<const TensorMeta> inputs, std::size_t expected);

// Throws dtr::ShapeError "op '<op>' <requirement>, got <shapes>" unless `condition` holds.
#define DTR_CHECK_SHAPES(condition, op, inputs, ...)                                \
  DTR_CHECK(condition, ::dtr::ShapeError, "op '", op, "' ", __VA_ARGS__, ", got ", \
            ::dtr::kernels::shapes_of(inputs))

// The cost of an op that touches each element of its first input once. At least 1: the runtime ranks tensors
// by cost, and a zero would make recomputing an empty tensor's producer look free.
double numel_flops(std::span<const TensorMeta> inputs, const Attrs& attrs);
double at_least_one(double flops);

}  // namespace dtr::kernels

// The boxed kernel dtr-torch registers under PrivateUse1 for every intercepted aten op.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "dtr/runtime.h"

namespace dtr::torch {
// The kernel registered for every intercepted op, and the backend fallback's (ops registered after
// dtr-torch was loaded): intercept().
void intercepted(const c10::OperatorHandle& op, ::torch::jit::Stack* stack);
}  // namespace dtr::torch

namespace dtr::torch::detail {

// Runs `op` on the arguments on `stack` (at least one a wrapper) and leaves its returns there.
void intercept(const c10::OperatorHandle& op, ::torch::jit::Stack* stack);

// A constant in `runtime` holding the bytes of a plain CPU tensor, from its first element on.
Tensor constant_of(const at::Tensor& plain, Runtime& runtime);

}  // namespace dtr::torch::detail

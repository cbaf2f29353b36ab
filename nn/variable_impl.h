// A variable's shared state. Internal to nn/.
#pragma once

#include <cstdint>
#include <memory>

#include "dtr/nn/autograd.h"

namespace dtr::nn::detail {

struct VariableImpl {
  Runtime* runtime = nullptr;
  Tensor data;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for a leaf
  std::uint32_t output_index = 0;
  Tensor grad;  // a leaf's accumulated gradient
  // A stand-in leaf (a checkpoint rerun's input) whose gradient is passed on at once: summed as values, not
  // into a constant.
  bool passes_grad_on = false;
};

}  // namespace dtr::nn::detail

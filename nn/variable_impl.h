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
};

}  // namespace dtr::nn::detail

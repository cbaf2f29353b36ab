// Plain tensors read by recorded ops (a C++ module's parameters and their views, labels) are mirrored in the
// runtime: one constant per plain storage holding all its bytes.
#pragma once

#include <ATen/Tensor.h>

#include <memory>

#include "dtr/runtime.h"

namespace dtr::torch::detail {

// The mirror of `plain`'s storage in `runtime` (made now, or the one made earlier while the storage holds the
// same bytes: compared on every use, not by version counter, which an update through `.data()` leaves as it
// was). An op reads it through `plain`'s own sizes, strides and offset. Thread safety: any thread.
Tensor mirror_of(const at::Tensor& plain, const std::shared_ptr<Runtime>& runtime);

}  // namespace dtr::torch::detail

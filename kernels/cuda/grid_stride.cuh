// The grid-stride loop of one-element-per-thread kernels, for device code only (.cu files):
//   for (std::int64_t i = first_index(); i < count; i += grid_stride()) ...
// with 64-bit indices, so that any element count is covered whatever blocks_for (cuda_support.h) capped the
// grid at.
#pragma once

#include <cstdint>

namespace dtr::kernels::cuda {

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

}  // namespace dtr::kernels::cuda

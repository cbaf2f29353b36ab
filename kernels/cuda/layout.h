// Launchers of the layout family's device kernel (kernels/cuda/layout.cu): plain pointers to device memory and
// int64 sizes, no CUDA type, so the host glue (layout_ops.cpp) compiles as ordinary C++. Layout ops move
// bytes whatever the dtype, so one strided copy serves them all.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtr::kernels::cuda {

// The most dimensions a strided copy walks, after merging the dimensions that are contiguous on both sides.
inline constexpr int max_copy_rank = 8;

// Element (i_0, ..., i_{rank-1}) of `shape` goes from element Σ i_d · from_strides[d] of the source to element
// Σ i_d · to_strides[d] of the destination (strides in elements, rank 0 being one element).
struct StridedCopy {
  int rank = 0;
  std::int64_t shape[max_copy_rank] = {};
  std::int64_t from_strides[max_copy_rank] = {};
  std::int64_t to_strides[max_copy_rank] = {};
};

// Enqueues the copy of `walk` on cuda::stream, elements of `element_bytes` (1, 2, 4 or 8) bytes, from `from` to
// `to` (device memory, aligned to the element size); launches nothing when the walk holds no element.
void launch_strided_copy(const StridedCopy& walk, std::size_t element_bytes, const void* from, void* to);

}  // namespace dtr::kernels::cuda

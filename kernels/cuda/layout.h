// Launchers of the layout family's device kernel (kernels/cuda/layout.cu): plain pointers to device memory and
// int64 sizes, no CUDA type, so the host glue (layout_ops.cpp) compiles as ordinary C++. Layout ops move
// bytes whatever the dtype, so one strided copy serves them all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strided_walk.h"

namespace dtr::kernels::cuda {

// A copy's walk: operand 0 the source, 1 the destination (strides in elements).
using StridedCopy = StridedWalk<2>;

// Enqueues the copy of `walk` on cuda::stream, elements of `element_bytes` (1, 2, 4 or 8) bytes, from `from` to
// `to` (device memory, aligned to the element size); launches nothing when the walk holds no element.
void launch_strided_copy(const StridedCopy& walk, std::size_t element_bytes, const void* from, void* to);

}  // namespace dtr::kernels::cuda

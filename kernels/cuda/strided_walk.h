// A row-major walk over a shape with each operand's stride along each dimension: how the elementwise
// family's broadcasts and reductions and the layout family's copies find an element's offsets. The host builds
// it (append merges what can be merged, so that a walk fits in a fixed array a kernel takes by value); device
// code calls offsets(). C++17 and no CUDA type: nvcc, the host glue and the CPU tests all compile it.
#pragma once

#include <cstdint>

#include "dtr/check.h"
#include "kernels/host_device.h"

namespace dtr::kernels::cuda {

// The most dimensions a walk keeps after merging; more is refused (InvalidArgument naming the op).
inline constexpr int max_walk_rank = 8;

// `Operands` tensors walked together over `shape`: element i (row-major) of the walk is at offset
// Σ_d index_d(i) · strides[k][d] of operand k (in elements; 0 along a broadcast dimension).
template <int Operands>
struct StridedWalk {
  int rank = 0;
  std::int64_t shape[max_walk_rank] = {};
  std::int64_t strides[Operands][max_walk_rank] = {};

  // The elements walked: the product of the shape, 1 for rank 0.
  DTR_HOST_DEVICE std::int64_t count() const {
    std::int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= shape[d];
    return n;
  }

  // Appends the next (inner) dimension, of `size`, along which operand k steps by steps[k]. A dimension of
  // size 1 moves no offset and is dropped; one that every operand steps through as through a continuation of
  // the last one (its stride there is steps[k] · size) is merged into it. InvalidArgument naming `op` when
  // neither applies and max_walk_rank dimensions are taken.
  void append(const char* op, std::int64_t size, const std::int64_t (&steps)[Operands]) {
    if (size == 1) return;
    bool merges = rank > 0;
    for (int k = 0; k < Operands && merges; ++k) merges = strides[k][rank - 1] == steps[k] * size;
    if (merges) {
      shape[rank - 1] *= size;
      for (int k = 0; k < Operands; ++k) strides[k][rank - 1] = steps[k];
      return;
    }
    DTR_CHECK(rank < max_walk_rank, InvalidArgument, "op '", op, "' on CUDA supports at most ", max_walk_rank,
              " dimensions after merging contiguous ones");
    shape[rank] = size;
    for (int k = 0; k < Operands; ++k) strides[k][rank] = steps[k];
    ++rank;
  }

  // The offsets of element `index` in each operand.
  DTR_HOST_DEVICE void offsets(std::int64_t index, std::int64_t (&out)[Operands]) const {
    for (int k = 0; k < Operands; ++k) out[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const std::int64_t coordinate = index % shape[d];
      index /= shape[d];
      for (int k = 0; k < Operands; ++k) out[k] += coordinate * strides[k][d];
    }
  }
};

}  // namespace dtr::kernels::cuda

// Device code of the layout ops (reshape, slice, split, concat, transpose, permute): one strided copy, over
// 1-, 2-, 4- or 8-byte words chosen by the element size, since these ops move bytes whatever the dtype. The host
// glue (layout_ops.cpp) computes each walk; every element is written by one thread, so the result is the
// source's bits.
#include <cstddef>
#include <cstdint>

#include "cuda_support.h"
#include "grid_stride.cuh"
#include "layout.h"

namespace dtr::kernels::cuda {
namespace {

// One thread per element, in the walk's row-major order.
template <typename Word>
__global__ void strided_copy_kernel(StridedCopy walk, std::int64_t count, const Word* from, Word* to) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    std::int64_t offsets[2];
    walk.offsets(i, offsets);
    to[offsets[1]] = from[offsets[0]];
  }
}

template <typename Word>
void launch(const StridedCopy& walk, std::int64_t count, const void* from, void* to) {
  strided_copy_kernel<Word><<<blocks_for(count), block_size, 0, stream>>>(walk, count, static_cast<const Word*>(from),
                                                                          static_cast<Word*>(to));
  DTR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_strided_copy(const StridedCopy& walk, std::size_t element_bytes, const void* from, void* to) {
  const std::int64_t count = walk.count();
  if (count == 0) return;
  switch (element_bytes) {
    case 1:
      launch<std::uint8_t>(walk, count, from, to);
      break;
    case 2:
      launch<std::uint16_t>(walk, count, from, to);
      break;
    case 4:
      launch<std::uint32_t>(walk, count, from, to);
      break;
    case 8:
      launch<std::uint64_t>(walk, count, from, to);
      break;
    default:
      DTR_THROW(::dtr::InvalidArgument, "strided copy of ", element_bytes, "-byte elements: only 1, 2, 4 or 8");
  }
}

}  // namespace dtr::kernels::cuda

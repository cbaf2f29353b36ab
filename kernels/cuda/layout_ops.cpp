// CUDA kernels of the layout ops (reshape, slice, split, concat, transpose, permute): argument unpacking and launches.
#include "cuda_kernels.h"

namespace dtr::kernels::cuda {

void add_layout_kernels(KernelTable& /*table*/) {}

}  // namespace dtr::kernels::cuda

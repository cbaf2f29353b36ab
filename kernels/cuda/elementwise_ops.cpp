// CUDA kernels of the elementwise ops (elementwise, reductions, broadcast, random, optimizers): argument unpacking and launches.
#include "cuda_kernels.h"

namespace dtr::kernels::cuda {

void add_elementwise_kernels(KernelTable& /*table*/) {}

}  // namespace dtr::kernels::cuda

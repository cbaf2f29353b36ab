// CUDA kernels of the dense ops (matmul, bmm, linear (cuBLAS); conv2d (cuDNN); pooling): argument unpacking and launches.
#include "cuda_kernels.h"

namespace dtr::kernels::cuda {

void add_dense_kernels(KernelTable& /*table*/) {}

}  // namespace dtr::kernels::cuda

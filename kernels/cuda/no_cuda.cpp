// The op table of a build without CUDA: no op has a CUDA kernel.
#include "cuda_kernels.h"

namespace dtr::kernels {

OpDef with_cuda_kernel(OpDef def) { return def; }

std::vector<std::string> cuda_kernel_names() { return {}; }

}  // namespace dtr::kernels

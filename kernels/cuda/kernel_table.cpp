// The op table of a CUDA build: every family's kernels, looked up by op name as each OpDef is built.
#include "cuda_kernels.h"

#include <algorithm>

namespace dtr::kernels {
namespace {

const cuda::KernelTable& table() {
  static const cuda::KernelTable kernels = [] {
    cuda::KernelTable t;
    cuda::add_elementwise_kernels(t);
    cuda::add_dense_kernels(t);
    cuda::add_normalization_kernels(t);
    cuda::add_layout_kernels(t);
    return t;
  }();
  return kernels;
}

}  // namespace

std::vector<std::string> cuda_kernel_names() {
  std::vector<std::string> names;
  for (const auto& [name, kernel] : table()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

OpDef with_cuda_kernel(OpDef def) {
  const auto found = table().find(def.name);
  if (found != table().end()) def.cuda_kernel = found->second;
  return def;
}

}  // namespace dtr::kernels

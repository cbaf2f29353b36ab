// The CUDA kernels of the built-in ops, found by op name when the op table is built. Each family of ops
// registers its kernels from its own file (kernels/cuda/<family>_ops.cpp); a build without CUDA registers
// none (no_cuda.cpp), and its ops have no cuda_kernel.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dtr/op.h"

namespace dtr::kernels {

// `def` with its cuda_kernel set from the table below when this build has one for def.name (define_op calls it).
OpDef with_cuda_kernel(OpDef def);
// The op names the table has kernels for, sorted; none in a build without CUDA. A test checks that each names
// an op of the table (dtr::find_op): a misspelt name would otherwise leave its op without its kernel.
std::vector<std::string> cuda_kernel_names();

namespace cuda {

using Kernel = std::function<void(const KernelArgs& args)>;
using KernelTable = std::unordered_map<std::string, Kernel>;

// One per family; each adds the kernels of its ops to `table`.
void add_elementwise_kernels(KernelTable& table);  // elementwise, reductions, broadcast, random, optimizers
void add_dense_kernels(KernelTable& table);        // matmul, bmm, linear (cuBLAS); conv2d (cuDNN); pooling
void add_normalization_kernels(KernelTable& table);  // softmax, losses, layer and batch norm, embedding
void add_layout_kernels(KernelTable& table);       // reshape, slice, split, concat, transpose, permute

}  // namespace cuda
}  // namespace dtr::kernels

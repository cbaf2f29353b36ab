// Scratch memory for a CUDA kernel of the op table (a cuDNN algorithm's workspace, a sort's temporary
// storage), from the runtime's allocator through KernelArgs::workspace. Host code only: dtr/op.h is C++20,
// which nvcc (C++17 here) does not compile, so .cu files never include this.
#pragma once

#include <cstddef>

#include "dtr/check.h"
#include "dtr/op.h"

namespace dtr::kernels::cuda {

// `bytes` of device scratch for the running kernel of `op` (nullptr for none), valid until the kernel
// returns; dtr::InvalidArgument when the kernel was called without a workspace (outside a runtime).
inline void* workspace(const KernelArgs& args, const char* op, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  DTR_CHECK(args.workspace != nullptr, InvalidArgument, "op '", op, "' on CUDA needs ", bytes,
            " bytes of workspace, and its kernel was called without one");
  return args.workspace->get(bytes);
}

}  // namespace dtr::kernels::cuda

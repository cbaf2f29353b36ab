// What every CUDA kernel file of the op table shares: checks that turn a failed CUDA, cuBLAS or cuDNN call
// into a dtr::DeviceError carrying file:line and the library's own words, this thread's library handles
// (RAII, one per device), and launch arithmetic. Internal to kernels/cuda: no CUDA type leaves it.
//
// Every kernel runs on the current device's legacy default stream (stream 0): the runtime's copies and
// frees are ordered on it too, so a buffer the caching allocator hands out again is never still in use.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "dtr/check.h"

#define DTR_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                               \
    const cublasStatus_t dtr_cublas_status = (call);                                                 \
    DTR_CHECK(dtr_cublas_status == CUBLAS_STATUS_SUCCESS, ::dtr::DeviceError, #call, " failed: ",    \
              cublasGetStatusName(dtr_cublas_status), ": ", cublasGetStatusString(dtr_cublas_status)); \
  } while (false)

#define DTR_CUDNN_CHECK(call)                                                                          \
  do {                                                                                                 \
    const cudnnStatus_t dtr_cudnn_status = (call);                                                     \
    DTR_CHECK(dtr_cudnn_status == CUDNN_STATUS_SUCCESS, ::dtr::DeviceError, #call, " failed: ",        \
              cudnnGetErrorString(dtr_cudnn_status));                                                  \
  } while (false)

// After a kernel launch: a bad configuration or a missing image for this GPU's architecture.
#define DTR_CUDA_CHECK_LAUNCH() DTR_CUDA_CHECK(cudaGetLastError())

namespace dtr::kernels::cuda {

// The stream every kernel, copy and library call of dtr runs on.
inline constexpr cudaStream_t stream = nullptr;

// This thread's handle for the current device, created on first use, bound to `stream`, destroyed when the
// thread exits. cuBLAS and cuDNN handles must not be shared between threads that use them at once.
cublasHandle_t cublas();
cudnnHandle_t cudnn();

// Threads per block for one-element-per-thread kernels, and the blocks that cover `count` elements with a
// grid-stride loop (capped: the loop covers the rest).
inline constexpr int block_size = 256;
inline unsigned int blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + block_size - 1) / block_size;
  return static_cast<unsigned int>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

}  // namespace dtr::kernels::cuda

// cuBLAS and cuDNN handles: one per thread and device, owned by RAII wrappers in thread-local storage.
#include <map>
#include <memory>

#include "cuda_support.h"

namespace dtr::kernels::cuda {
namespace {

struct CublasDeleter {
  void operator()(cublasHandle_t handle) const { cublasDestroy(handle); }
};
struct CudnnDeleter {
  void operator()(cudnnHandle_t handle) const { cudnnDestroy(handle); }
};
using CublasHandle = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter>;
using CudnnHandle = std::unique_ptr<std::remove_pointer_t<cudnnHandle_t>, CudnnDeleter>;

int current_device() {
  int device = 0;
  DTR_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

}  // namespace

cublasHandle_t cublas() {
  thread_local std::map<int, CublasHandle> handles;
  CublasHandle& handle = handles[current_device()];
  if (!handle) {
    cublasHandle_t raw = nullptr;
    DTR_CUBLAS_CHECK(cublasCreate(&raw));
    handle.reset(raw);
    DTR_CUBLAS_CHECK(cublasSetStream(raw, stream));
    // Reproducible results: no atomics-based split-K reductions, the same bits on every run.
    DTR_CUBLAS_CHECK(cublasSetAtomicsMode(raw, CUBLAS_ATOMICS_NOT_ALLOWED));
  }
  return handle.get();
}

cudnnHandle_t cudnn() {
  thread_local std::map<int, CudnnHandle> handles;
  CudnnHandle& handle = handles[current_device()];
  if (!handle) {
    cudnnHandle_t raw = nullptr;
    DTR_CUDNN_CHECK(cudnnCreate(&raw));
    handle.reset(raw);
    DTR_CUDNN_CHECK(cudnnSetStream(raw, stream));
  }
  return handle.get();
}

}  // namespace dtr::kernels::cuda

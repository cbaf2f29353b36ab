// DTR_CUDA_CHECK(call): throw dtr::DeviceError with file:line, the call and CUDA's own words when a CUDA
// runtime call fails. Internal to the CUDA backend: no CUDA type leaves it.
#pragma once

#include <cuda_runtime_api.h>

#include "dtr/check.h"

#define DTR_CUDA_CHECK(call)                                                                   \
  do {                                                                                         \
    const cudaError_t dtr_cuda_status = (call);                                                \
    DTR_CHECK(dtr_cuda_status == cudaSuccess, ::dtr::DeviceError, #call, " failed: ",          \
              cudaGetErrorName(dtr_cuda_status), ": ", cudaGetErrorString(dtr_cuda_status)); \
  } while (false)

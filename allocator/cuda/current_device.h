// CurrentDevice: makes a CUDA device current for a scope and restores the thread's own choice after, so
// dtr's allocations, kernels and copies reach the runtime's GPU whatever the calling thread had selected.
#pragma once

#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#include "dtr/device.h"

namespace dtr::detail {

// Throws dtr::DeviceError, saying why, unless cuda:`device` is a usable GPU.
inline void check_usable_device(int device) {
  const int count = cuda::device_count();
  DTR_CHECK(count > 0, DeviceError, "cuda:", device, " was requested but no CUDA device is usable (",
            cuda::unavailable_reason(), ")");
  DTR_CHECK(device >= 0 && device < count, DeviceError, "cuda:", device, " was requested but only ", count,
            " CUDA device(s) exist");
}

class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    DTR_CUDA_CHECK(cudaGetDevice(&previous_));
    restore_ = previous_ != device;
    if (restore_) DTR_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CurrentDevice() {
    if (restore_) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

}  // namespace dtr::detail

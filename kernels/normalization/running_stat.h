// running_stat_update's per-element arithmetic, one definition for the CPU kernel (kernels/normalization.cpp)
// and the CUDA kernel (kernels/cuda/batch_norm.cu), so the two cannot drift apart. C++17, no dtr/op.h:
// nvcc compiles it. The attributes are read and checked by running_stat_of (kernels/normalization_layout.h).
#pragma once

#include "kernels/host_device.h"

namespace dtr::kernels {

struct RunningStat {
  double momentum = 0.1;
  double correction = 1.0;   // n / (n - 1) with attribute unbiased_count n
  bool from_invstd = false;  // the batch statistic is an invstd: use 1/stat² - invstd_eps
  double invstd_eps = 0.0;

  // The batch statistic as a running one: unbiased, and a variance when it was an invstd.
  DTR_HOST_DEVICE double stat(double batch) const {
    return (from_invstd ? 1.0 / (batch * batch) - invstd_eps : batch) * correction;
  }
  // (1 - momentum) · running + momentum · stat(batch), in double.
  DTR_HOST_DEVICE double updated(double running, double batch) const {
    return (1.0 - momentum) * running + momentum * stat(batch);
  }
};

}  // namespace dtr::kernels

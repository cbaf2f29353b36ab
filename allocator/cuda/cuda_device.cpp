// Device queries of a CUDA build. "Compiled with CUDA" is always true here; "a GPU is present" is asked of
// the runtime, which answers with an error (no driver, no device) on machines without one.
#include <cuda_runtime_api.h>

#include "dtr/device.h"

namespace dtr::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

// The answer cannot change while the process runs, and asking the driver is slow.
const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    const cudaError_t status = cudaGetDeviceCount(&p.count);
    if (status != cudaSuccess) {
      p.count = 0;
      p.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": " +
                 cudaGetErrorString(status);
      cudaGetLastError();  // clear the sticky error so later CUDA calls start clean
    } else if (p.count == 0) {
      p.reason = "no CUDA device is present";
    }
    return p;
  }();
  return result;
}

}  // namespace

bool is_compiled() { return true; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

}  // namespace dtr::cuda

// The runtime of a build without CUDA: asking for a CUDA backend is a clear error.
#include "dtr/check.h"
#include "runtime/backend.h"

namespace dtr::detail {

std::unique_ptr<Backend> make_cuda_backend(int device) {
  DTR_THROW(DeviceError, "cuda:", device, " was requested but ", cuda::unavailable_reason());
}

}  // namespace dtr::detail

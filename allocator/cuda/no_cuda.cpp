// The CUDA backend of a build without CUDA: every question has the answer "no GPU", and asking for one is a
// clear error. Keeps #ifdefs out of the headers (MLX's backend/cuda/no_cuda.cpp pattern).
#include "dtr/check.h"
#include "dtr/device.h"
#include "dtr/memory_resource.h"

namespace dtr {

namespace cuda {
bool is_compiled() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "dtr was built without CUDA (DTR_WITH_CUDA=OFF or no toolkit found)"; }
}  // namespace cuda

std::unique_ptr<MemoryResource> make_cuda_resource(int device) {
  DTR_THROW(DeviceError, "cuda:", device, " was requested but ", cuda::unavailable_reason());
}

}  // namespace dtr

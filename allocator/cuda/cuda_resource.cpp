// cudaMalloc/cudaFree on one device: the only place in dtr that calls them.
#include <cuda_runtime_api.h>

#include "../allocation_registry.h"
#include "common/cuda_check.h"
#include "current_device.h"
#include "dtr/device.h"
#include "dtr/memory_resource.h"

namespace dtr {
namespace {

class CudaResource final : public MemoryResource {
 public:
  explicit CudaResource(int device) : device_(device) {
    detail::check_usable_device(device);
    detail::CurrentDevice guard(device_);
    std::size_t free_bytes = 0;
    DTR_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &capacity_));
  }

  std::size_t capacity() const override { return capacity_; }
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  bool host_accessible() const override { return false; }
  std::optional<Device> device() const override { return Device{DeviceKind::cuda, device_}; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    detail::CurrentDevice guard(device_);
    void* ptr = nullptr;
    const cudaError_t status = bytes > capacity_ ? cudaErrorMemoryAllocation : cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // an OOM is not sticky; clear it so the next call starts clean
      OutOfMemoryInfo info;
      info.requested_bytes = bytes;
      info.capacity_bytes = capacity_;
      info.allocated_bytes = registry_.live_bytes();
      throw OutOfMemory(detail::concat(name(), ": cudaMalloc of ", format_bytes(bytes), " failed (",
                                       format_bytes(info.allocated_bytes), " allocated by dtr of ",
                                       format_bytes(capacity_), ")"),
                        info, __FILE__, __LINE__);
    }
    DTR_CUDA_CHECK(status);
    if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0) {
      cudaFree(ptr);
      DTR_THROW(DeviceError, name(), ": cudaMalloc returned ", ptr, ", not aligned to ", alignment, " bytes");
    }
    registry_.add(ptr, bytes);
    return ptr;
  }

  void do_deallocate(void* ptr, std::size_t bytes) override {
    registry_.remove(ptr, bytes, name());
    detail::CurrentDevice guard(device_);
    DTR_CUDA_CHECK(cudaFree(ptr));
  }

 private:
  const int device_;
  std::size_t capacity_ = 0;
  detail::AllocationRegistry registry_;
};

}  // namespace

std::unique_ptr<MemoryResource> make_cuda_resource(int device) { return std::make_unique<CudaResource>(device); }

}  // namespace dtr

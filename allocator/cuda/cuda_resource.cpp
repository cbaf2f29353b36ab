// cudaMalloc/cudaFree on one device: the only place in dtr that calls them.
#include <cuda_runtime_api.h>

#include "../allocation_registry.h"
#include "cuda_check.h"
#include "dtr/device.h"
#include "dtr/memory_resource.h"

namespace dtr {
namespace {

// Makes `device` current for a scope and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    DTR_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) DTR_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

class CudaResource final : public MemoryResource {
 public:
  explicit CudaResource(int device) : device_(device) {
    const int count = cuda::device_count();
    DTR_CHECK(count > 0, DeviceError, "cuda:", device, " was requested but no CUDA device is usable (",
              cuda::unavailable_reason(), ")");
    DTR_CHECK(device >= 0 && device < count, DeviceError, "cuda:", device, " was requested but only ", count,
              " CUDA device(s) exist");
    DeviceGuard guard(device_);
    std::size_t free_bytes = 0;
    DTR_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &capacity_));
  }

  std::size_t capacity() const override { return capacity_; }
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  bool host_accessible() const override { return false; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    DeviceGuard guard(device_);
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
    DeviceGuard guard(device_);
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

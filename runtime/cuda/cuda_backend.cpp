// The CUDA backend: kernels are enqueued on the device's legacy default stream, where the copies below are
// ordered too; the host waits only where it needs values (copy_to_host) or a measured time (synchronize).
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#include "allocator/cuda/current_device.h"
#include "dtr/check.h"
#include "runtime/backend.h"

namespace dtr::detail {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    check_usable_device(device);
  }

  Device device() const override { return Device{DeviceKind::cuda, device_}; }
  bool host_readable() const override { return false; }

  void check_supported(const OpDef& op) const override {
    DTR_CHECK(!op.touches_memory || op.cuda_kernel, DeviceError, "op '", op.name, "' has no CUDA kernel, and ",
              "this runtime runs on cuda:", device_, "; run it on a CPU runtime (DTR_DEVICE=cpu)");
  }

  void run(const OpDef& op, const KernelArgs& args) override {
    // A replayed op touches no memory: its (host) kernel only accounts.
    if (!op.touches_memory) return op.cpu_kernel(args);
    CurrentDevice current(device_);
    op.cuda_kernel(args);
  }

  void synchronize() override {
    CurrentDevice current(device_);
    DTR_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    CurrentDevice current(device_);
    DTR_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }

  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    CurrentDevice current(device_);
    DTR_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    CurrentDevice current(device_);
    DTR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr));
  }

  void fill_zero(void* dst, std::size_t bytes) override {
    if (bytes == 0) return;
    CurrentDevice current(device_);
    DTR_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, nullptr));
  }

 private:
  const int device_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace dtr::detail

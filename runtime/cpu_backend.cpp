// The CPU backend: kernels run on the calling thread over host memory.
#include <cstring>

#include "runtime/backend.h"

namespace dtr::detail {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceKind::cpu, 0}; }
  bool host_readable() const override { return true; }
  void check_supported(const OpDef& /*op*/) const override {}  // every op has a CPU kernel
  void run(const OpDef& op, const KernelArgs& args) override { op.cpu_kernel(args); }
  void synchronize() override {}
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

std::unique_ptr<Backend> make_backend(const Device& device) {
  return device.kind == DeviceKind::cpu ? make_cpu_backend() : make_cuda_backend(device.index);
}

}  // namespace dtr::detail

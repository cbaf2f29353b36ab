// Where a runtime's kernels run, and how bytes cross between the host and the runtime's memory: the CPU, or
// one CUDA device. Internal to the runtime; a build without CUDA has the CPU backend only
// (runtime/cuda/no_cuda.cpp).
//
// Thread safety: as the runtime that owns it (one thread at a time).
#pragma once

#include <cstddef>
#include <memory>

#include "dtr/device.h"
#include "dtr/op.h"

namespace dtr::detail {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // Whether the host can read this backend's buffers directly (no copies needed).
  virtual bool host_readable() const = 0;
  // Throws dtr::DeviceError naming the op and the device when `op` has no kernel here. Called before
  // anything of the op is allocated.
  virtual void check_supported(const OpDef& op) const = 0;
  // Runs (or enqueues) the op's kernel here.
  virtual void run(const OpDef& op, const KernelArgs& args) = 0;
  // Waits for what run() enqueued: a measured kernel time is read after it.
  virtual void synchronize() = 0;
  virtual void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  // Between two buffers of this backend (the allocator's compaction moving a block), ordered after the work
  // enqueued before it.
  virtual void copy(void* device_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void fill_zero(void* device_dst, std::size_t bytes) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
// Throws dtr::DeviceError when this build has no CUDA or `device` is not a usable GPU.
std::unique_ptr<Backend> make_cuda_backend(int device);
// The backend for `device`.
std::unique_ptr<Backend> make_backend(const Device& device);

}  // namespace dtr::detail

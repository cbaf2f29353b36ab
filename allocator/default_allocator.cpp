// The process-wide allocator of the default device. A convenience for the C API and small programs; every
// piece of dtr also takes an explicit allocator.
#include <mutex>

#include "dtr/budget.h"
#include "dtr/caching_allocator.h"
#include "dtr/device.h"

namespace dtr {

CachingAllocator& default_allocator() {
  // Built under a mutex, not a function-local static, so that a malformed environment can be fixed and the
  // construction retried. Never destroyed: C callers may free blocks during static destruction.
  static std::mutex mutex;
  static CachingAllocator* instance = nullptr;
  std::lock_guard lock(mutex);
  if (instance == nullptr) {
    const Device device = default_device();
    auto upstream = device.kind == DeviceKind::cuda ? make_cuda_resource(device.index) : make_host_resource();
    CachingAllocatorOptions options;
    options.budget_bytes = memory_budget_from_env(upstream->capacity());
    instance = new CachingAllocator(std::move(upstream), options);  // NOLINT(cppcoreguidelines-owning-memory)
  }
  return *instance;
}

}  // namespace dtr

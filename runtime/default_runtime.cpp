// The process-wide runtime configured from the environment: a convenience for small programs and, later, for
// plug-ins that cannot pass a Runtime around. Everything else takes an explicit Runtime.
#include <memory>
#include <mutex>

#include "dtr/memory_resource.h"
#include "dtr/runtime.h"

namespace dtr {

Runtime& default_runtime() {
  // Built under a mutex rather than as a function-local static, so that a malformed environment can be
  // fixed and the construction retried. Destroyed at exit, which writes DTR_STATS.
  static std::mutex mutex;
  static std::unique_ptr<Runtime> instance;
  std::lock_guard lock(mutex);
  if (instance == nullptr) {
    // DTR_MEMORY_BUDGET=N% is of the memory of the device the runtime will use.
    const Device device = default_device();
    std::unique_ptr<MemoryResource> memory = make_device_resource(device);
    Config config = Config::from_env(memory->capacity());
    config.device = device;
    instance = std::make_unique<Runtime>(std::move(config), std::move(memory));
  }
  return *instance;
}

}  // namespace dtr

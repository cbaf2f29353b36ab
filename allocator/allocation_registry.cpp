#include "allocation_registry.h"

#include "dtr/check.h"

namespace dtr::detail {

void AllocationRegistry::add(void* ptr, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  sizes_.emplace(ptr, bytes);
  live_bytes_ += bytes;
}

void AllocationRegistry::remove(void* ptr, std::size_t bytes, std::string_view resource) {
  std::lock_guard lock(mutex_);
  auto it = sizes_.find(ptr);
  DTR_CHECK(it != sizes_.end(), InvalidArgument, resource, ": deallocate(", ptr, ", ", bytes,
            "): the pointer was not allocated by this resource or was already freed");
  DTR_CHECK(it->second == bytes, InvalidArgument, resource, ": deallocate(", ptr, ", ", bytes,
            "): the block was allocated with ", it->second, " bytes");
  live_bytes_ -= bytes;
  sizes_.erase(it);
}

std::size_t AllocationRegistry::live_bytes() const {
  std::lock_guard lock(mutex_);
  return live_bytes_;
}

}  // namespace dtr::detail

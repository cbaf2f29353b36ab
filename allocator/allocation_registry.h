// The live allocations of a backend resource, so that foreign pointers, double frees and size mismatches are
// reported as dtr::InvalidArgument instead of corrupting memory. Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace dtr::detail {

class AllocationRegistry {
 public:
  void add(void* ptr, std::size_t bytes);
  // Removes `ptr` after checking that it is live and was allocated with `bytes`; throws dtr::InvalidArgument
  // naming `resource` otherwise, changing nothing.
  void remove(void* ptr, std::size_t bytes, std::string_view resource);
  std::size_t live_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t live_bytes_ = 0;
};

}  // namespace dtr::detail

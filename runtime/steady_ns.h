// The monotonic clock in nanoseconds: kernel times (DTR_COST_MODEL=measured), DTR_CLOCK=time, search time.
// Internal to runtime/.
#pragma once

#include <chrono>
#include <cstdint>

namespace dtr::detail {

inline std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace dtr::detail

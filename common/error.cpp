#include "dtr/error.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace dtr {

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(fmt::format("{} [{}:{}]", message, file, line)), file_(file), line_(line) {}

OutOfMemory::OutOfMemory(std::string message, OutOfMemoryInfo info, const char* file, int line)
    : message_(fmt::format("{} [{}:{}]", message, file, line)), info_(info), file_(file), line_(line) {}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {} ({} bytes)", value, kUnits[unit], bytes);
}

}  // namespace dtr

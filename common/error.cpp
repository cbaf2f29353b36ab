#include "dtr/error.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "common/log.h"

namespace dtr {
namespace {

// Where an error was raised, for those debugging dtr (DTR_LOG_LEVEL=debug), not in what users read.
void log_origin(const char* type, const std::string& message, const char* file, int line) {
  if (detail::logger().should_log(spdlog::level::debug)) {
    detail::logger().debug("{} raised at {}:{}: {}", type, file, line, message);
  }
}

}  // namespace

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(message), file_(file), line_(line) {
  log_origin("error", message, file, line);
}

OutOfMemory::OutOfMemory(std::string message, OutOfMemoryInfo info, const char* file, int line)
    : message_(std::move(message)), info_(info), file_(file), line_(line) {
  log_origin("out of memory", message_, file, line);
}

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

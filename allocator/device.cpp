#include "dtr/device.h"

#include <charconv>
#include <cstdlib>
#include <mutex>

#include "dtr/check.h"
#include "common/log.h"

namespace dtr {

std::string Device::to_string() const {
  return kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(std::string_view text, std::string_view variable) {
  if (text == "cpu") return {DeviceKind::cpu, 0};
  if (text == "cuda") return {DeviceKind::cuda, 0};
  if (text.starts_with("cuda:") && text.size() > 5) {
    int index = -1;
    const auto digits = text.substr(5);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (error == std::errc() && end == digits.data() + digits.size() && index >= 0) {
      return {DeviceKind::cuda, index};
    }
  }
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not a device; expected cpu, cuda or cuda:N (N >= 0)");
}

Device default_device() {
  const char* text = std::getenv("DTR_DEVICE");  // NOLINT(concurrency-mt-unsafe): read-only use
  if (text != nullptr) {
    const Device device = parse_device(text);
    if (device.kind == DeviceKind::cuda) {
      const int count = cuda::device_count();
      DTR_CHECK(device.index < count, DeviceError, "DTR_DEVICE=", text, " but ",
                count == 0 ? cuda::unavailable_reason() : "only " + std::to_string(count) + " CUDA device(s) exist");
    }
    return device;
  }
  if (cuda::device_count() > 0) return {DeviceKind::cuda, 0};
  if (cuda::is_compiled()) {
    static std::once_flag logged;  // once a process: the answer cannot change
    std::call_once(logged, [] {
      detail::logger().warn("DTR_DEVICE is unset and no GPU is usable ({}); running on the CPU",
                            cuda::unavailable_reason());
    });
  }
  return {DeviceKind::cpu, 0};
}

}  // namespace dtr

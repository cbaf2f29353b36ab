// Which devices this build can use and which this machine has: two separate questions. A CUDA build runs on
// a machine with no GPU, where it uses the CPU.
//
// Thread safety: every function is thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace dtr {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  std::string to_string() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

// "cpu", "cuda", "cuda:N" (N a non-negative integer). Anything else throws dtr::ConfigError naming
// `variable` and the accepted forms.
Device parse_device(std::string_view text, std::string_view variable = "DTR_DEVICE");

// The device named by the environment variable DTR_DEVICE. When it is unset: cuda:0 if this build has CUDA
// and a GPU is present, else cpu (logged). Naming cuda explicitly without a usable GPU throws
// dtr::DeviceError.
Device default_device();

namespace cuda {
// True when dtr was compiled with CUDA support.
bool is_compiled();
// Number of usable CUDA devices; 0 when not compiled with CUDA, no driver, or no GPU. Never throws.
int device_count();
// Why device_count() is 0, in words, or "" when it is not.
std::string unavailable_reason();
}  // namespace cuda

}  // namespace dtr

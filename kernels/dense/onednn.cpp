// The CPU engine, the streams, scratch memory and errors of the oneDNN kernels (onednn.h).
#include "kernels/dense/onednn.h"

#include <cstdint>

#include "dtr/check.h"
#include "kernels/op_checks.h"

namespace dtr::kernels::onednn {

const dnnl::engine& engine() {
  // Leaked on purpose: oneDNN's objects must not outlive the library's own statics.
  static const dnnl::engine* const cpu = [] {
    try {
      return new dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      DTR_THROW(DeviceError, "oneDNN could not create its CPU engine: ", e.what(), " (status ",
                static_cast<int>(e.status), ")");
    }
  }();
  return *cpu;
}

dnnl::stream& stream() {
  thread_local dnnl::stream own = [] {
    try {
      return dnnl::stream(engine());
    } catch (const dnnl::error& e) {
      DTR_THROW(DeviceError, "oneDNN could not create a CPU stream: ", e.what(), " (status ",
                static_cast<int>(e.status), ")");
    }
  }();
  return own;
}

Scratch::Scratch(Workspace* workspace, std::size_t bytes) {
  if (bytes == 0) return;
  // Room to align the start: the runtime's blocks are aligned for any element type, not to a cache line.
  const std::size_t padded = bytes + kAlignment;
  void* raw = nullptr;
  if (workspace != nullptr) {
    raw = workspace->get(padded);
  } else {
    own_.reset(new std::byte[padded]);
    raw = own_.get();
  }
  const auto address = reinterpret_cast<std::uintptr_t>(raw);
  base_ = static_cast<std::byte*>(raw) + (aligned(address) - address);
}

void throw_error(std::string_view op, std::span<const TensorMeta> inputs, std::string_view geometry,
                 std::string_view what, int status) {
  DTR_THROW(DeviceError, "op '", op, "' on the CPU: oneDNN failed (", what, ", status ", status, ") on ",
            shapes_of(inputs), " (", geometry, ")");
}

}  // namespace dtr::kernels::onednn

// What the CPU kernels that call oneDNN (kernels/dense/conv_onednn.cpp) share: the CPU engine, a stream per
// thread, the scratch memory of one kernel call, and the typed error a oneDNN failure becomes. Internal to
// kernels/.
//
// Thread safety: engine() is one object for the process (oneDNN engines may be shared between threads);
// stream() is the calling thread's own; a Scratch belongs to one kernel call.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include <dnnl.hpp>

#include "dtr/op.h"

namespace dtr::kernels::onednn {

// oneDNN's preferred alignment for every buffer it reads or writes (a cache line; its own allocations use 64).
inline constexpr std::size_t kAlignment = 64;

// `bytes` rounded up to kAlignment.
constexpr std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// The CPU engine: created on first use and kept for the life of the process (never destroyed, so that no
// static destructor can run after oneDNN's own).
const dnnl::engine& engine();

// This thread's stream on engine(). Primitives are executed on it in the order the kernel calls them (a CPU
// stream runs each primitive to completion before returning: OpenMP's threads join at the primitive's end).
dnnl::stream& stream();

// The scratch memory of one kernel call: `bytes` (a sum of aligned() sizes), from KernelArgs::workspace when
// the runtime gives one (under its budget, freed when the kernel returns), else a buffer of its own, the
// contract of the im2col kernels (kernels/dense/conv.cpp). One Workspace::get per call; none for 0 bytes.
// at(offset) is aligned to kAlignment for an aligned() offset.
class Scratch {
 public:
  Scratch(Workspace* workspace, std::size_t bytes);
  std::byte* at(std::size_t offset) const { return base_ + offset; }

 private:
  std::unique_ptr<std::byte[]> own_;
  std::byte* base_ = nullptr;
};

// Throws dtr::DeviceError for a oneDNN failure in `op` ("op 'conv2d' on the CPU: oneDNN failed (<what>,
// status <n>) ..."), naming the inputs' shapes (`inputs`) and `geometry`, the attributes in words.
[[noreturn]] void throw_error(std::string_view op, std::span<const TensorMeta> inputs, std::string_view geometry,
                              std::string_view what, int status);

}  // namespace dtr::kernels::onednn

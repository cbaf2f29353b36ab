// conv2d and its two backward ops in float32 on the CPU through oneDNN's convolution primitives
// (kernels/dense/conv.cpp calls them; float64 stays on its im2col + GEMM path). Internal to kernels/.
//
// Thread safety: any thread may call these at any time; the primitives are built once per geometry and shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "dtr/op.h"
#include "kernels/dense/window_geometry.h"

namespace dtr::kernels {

enum class ConvOp : std::uint8_t { forward, backward_input, backward_weight };

// "conv2d", "conv2d_backward_input", "conv2d_backward_weight".
const char* conv_op_name(ConvOp op);

// Whether a float32 call of this geometry runs through oneDNN: every dimension positive (an empty batch, no
// channels, stay on the im2col path, which needs no work for them), and a 1x1 kernel or at least 8 channels in
// and out per group (a spatial kernel over fewer stays on im2col: conv_onednn.cpp says why).
bool onednn_conv_applies(const ConvGeometry& g);

// Runs `op` with oneDNN on args' buffers (contiguous NCHW / OIHW float32): forward (x, weight[, bias]) -> y;
// backward_input (grad_out, weight) -> dx; backward_weight (grad_out, x) -> dw. Its scratch (oneDNN's
// scratchpad, the buffers of the reorders to and from oneDNN's blocked layouts) is one request to
// args.workspace, or a buffer of its own when that is null. Deterministic: the same inputs give the same bits
// for the life of the process (a fixed OpenMP thread count; docs/kernels.md). A oneDNN failure is a
// dtr::DeviceError naming the op and the shapes.
void onednn_conv(ConvOp op, const ConvGeometry& g, const KernelArgs& args);

// The bytes that one call of `op` on `g` (with a bias or not: forward only) asks the workspace for; 0 when it
// needs none. Builds (and caches) the primitives.
std::size_t onednn_conv_scratch_bytes(ConvOp op, const ConvGeometry& g, bool bias);

// Throws the dtr::DeviceError a oneDNN failure (its message `what`, its status) in `op` becomes: "op 'conv2d' on
// the CPU: oneDNN failed (<what>, status <n>) on <input shapes> (stride .., padding .., dilation .., groups ..)".
[[noreturn]] void throw_onednn_conv_error(ConvOp op, std::span<const TensorMeta> inputs, const ConvGeometry& g,
                                          std::string_view what, int status);

// The primitives cached so far (one entry per op and geometry).
std::size_t onednn_conv_cache_size();

}  // namespace dtr::kernels

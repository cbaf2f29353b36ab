// Ops that move blocks of a tensor along dimension 0, where row-major layout makes each part one contiguous
// range: split2 (one input, two outputs, the runtime's multi-output case) and its inverse concat2.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

TensorMetas infer_split2(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("split2", inputs, 1);
  const Shape& shape = inputs[0].shape;
  DTR_CHECK_SHAPES(!shape.empty() && shape[0] >= 2, "split2", inputs, "needs at least 2 rows along dimension 0");
  TensorMetas outputs(2, inputs[0]);
  outputs[0].shape[0] = shape[0] / 2;
  outputs[1].shape[0] = shape[0] - shape[0] / 2;
  return outputs;
}

// Copies move bytes: any dtype.
void split2_cpu(const KernelArgs& args) {
  const auto* in = static_cast<const std::byte*>(args.inputs[0]);
  const std::size_t first = args.output_meta[0].nbytes();
  std::copy_n(in, first, static_cast<std::byte*>(args.outputs[0]));
  std::copy_n(in + first, args.output_meta[1].nbytes(), static_cast<std::byte*>(args.outputs[1]));
}

TensorMetas infer_concat2(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("concat2", inputs, 2);
  const Shape& a = inputs[0].shape;
  const Shape& b = inputs[1].shape;
  DTR_CHECK_SHAPES(!a.empty() && a.size() == b.size() && std::equal(a.begin() + 1, a.end(), b.begin() + 1) &&
                       inputs[0].dtype == inputs[1].dtype,
                   "concat2", inputs, "needs tensors of rank >= 1 and one dtype that differ only in dimension 0");
  TensorMeta out = inputs[0];
  out.shape[0] += b[0];
  return {out};
}

void concat2_cpu(const KernelArgs& args) {
  auto* out = static_cast<std::byte*>(args.outputs[0]);
  const std::size_t first = args.input_meta[0].nbytes();
  std::copy_n(static_cast<const std::byte*>(args.inputs[0]), first, out);
  std::copy_n(static_cast<const std::byte*>(args.inputs[1]), args.input_meta[1].nbytes(), out + first);
}

// Copies do no arithmetic, but a cost model must still see that redoing them takes time.
double concat2_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return kernels::at_least_one(static_cast<double>(inputs[0].numel() + inputs[1].numel()));
}

}  // namespace

const OpDef& split2() {
  return kernels::define_op([] {
    return OpDef{.name = "split2", .infer = infer_split2, .cpu_kernel = split2_cpu, .flops = kernels::numel_flops};
  });
}

const OpDef& concat2() {
  return kernels::define_op([] {
    return OpDef{.name = "concat2", .infer = infer_concat2, .cpu_kernel = concat2_cpu, .flops = concat2_flops};
  });
}

}  // namespace dtr::ops

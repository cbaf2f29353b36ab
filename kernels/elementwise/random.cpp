// Random ops. Each output element is a pure function of (seed, index) (counter_random.h): a rematerialization
// that replays the captured seed reproduces the first run's bits exactly.
#include <cstdint>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/counter_random.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

// The output copies the shape and dtype of the input: a runtime-managed "like" tensor, so the op has the usual
// lineage.
TensorMetas infer_uniform(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("uniform", inputs, 1);
  kernels::check_floating("uniform", inputs);
  return {inputs[0]};
}

void uniform_cpu(const KernelArgs& args) {
  const std::uint64_t key = kernels::stream_key(args.seed);
  const std::int64_t count = args.output_meta[0].numel();
  kernels::dispatch_floating(args.output_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    T* out = args.output<T>(0);
    for (std::int64_t i = 0; i < count; ++i) out[i] = kernels::unit_uniform<T>(key, i);
  });
}

}  // namespace

const OpDef& uniform() {
  return kernels::define_op([] {
    return OpDef{.name = "uniform",
                 .infer = infer_uniform,
                 .cpu_kernel = uniform_cpu,
                 .flops = kernels::numel_flops,
                 .random = true};
  });
}

}  // namespace dtr::ops

// Dropout: y = x · mask / (1 - p), mask[i] = 1 with probability 1 - p. Random: mask[i] is a function of the
// captured seed and i only (counter_random.h), drawn in double whatever x's dtype, so float32 and float64 runs
// of one seed drop the same elements and a recomputation drops the same ones as the first run. The mask is an
// output, so the backward needs no randomness.
#include <cstdint>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/counter_random.h"
#include "kernels/elementwise/elementwise_attrs.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/op_checks.h"

namespace dtr::kernels {

double drop_probability(const Attrs& attrs) {
  const double p = attrs.get_real("p");
  DTR_CHECK(p >= 0.0 && p < 1.0, InvalidArgument, "op 'dropout' needs attribute 'p' in [0, 1), got ", p);
  return p;
}

}  // namespace dtr::kernels

namespace dtr::ops {
namespace {

using kernels::drop_probability;

TensorMetas infer_dropout(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("dropout", inputs, 1);
  kernels::check_floating("dropout", inputs);
  static_cast<void>(drop_probability(attrs));
  return {inputs[0], inputs[0]};
}

void dropout_cpu(const KernelArgs& args) {
  const double p = drop_probability(args.attrs);
  const std::uint64_t key = kernels::stream_key(args.seed);
  const std::int64_t count = args.input_meta[0].numel();
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const T keep_scale = kernels::dropout_keep_scale<T>(p);
    const T* x = args.input<T>(0);
    T* y = args.output<T>(0);
    T* mask = args.output<T>(1);
    for (std::int64_t i = 0; i < count; ++i) {
      mask[i] = kernels::dropout_mask<T>(key, i, p);
      y[i] = x[i] * mask[i] * keep_scale;
    }
  });
}

}  // namespace

const OpDef& dropout() {
  return kernels::define_op([] {
    return OpDef{.name = "dropout",
                 .infer = infer_dropout,
                 .cpu_kernel = dropout_cpu,
                 .flops = kernels::numel_flops,
                 .random = true};
  });
}

}  // namespace dtr::ops

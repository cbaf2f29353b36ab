// Softmax and log-softmax over one axis, their backward ops, and cross-entropy with integer labels. The row
// arithmetic is normalization_math.h's, which the CUDA kernels share: each row reduced in increasing index
// order in double and rounded once per element, the max subtracted before exp; softmax's exps here in the
// CPU's vector lanes (vector_math.h), a few ulps of a double from the CUDA kernels' std::exp.
#include <cstdint>
#include <string>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/vector_math.h"
#include "kernels/normalization/normalization_layout.h"
#include "kernels/normalization/normalization_math.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

using kernels::axis_layout;
using kernels::AxisLayout;

// Calls fn(base, stride) for every row along the axis: the row's elements are base + k * stride. Rows are
// independent: the outer positions spread over the CPU kernels' threads, each row one thread's.
template <typename Fn>
void for_each_row(const AxisLayout& l, Fn fn) {
  kernels::parallel_for_items(l.outer, l.outer * l.length * l.inner, [&](std::int64_t o) {
    for (std::int64_t i = 0; i < l.inner; ++i) fn(o * l.length * l.inner + i, l.inner);
  });
}

// softmax / log_softmax: one input, attribute "axis".
OpDef softmax_op(const std::string& name, bool log) {
  OpDef def;
  def.name = name;
  def.infer = [name](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity(name, inputs, 1);
    kernels::check_floating(name, inputs);
    static_cast<void>(axis_layout(name, inputs, attrs));
    return TensorMetas{inputs[0]};
  };
  def.cpu_kernel = kernels::floating_kernel([name, log]<typename T>(T /*zero*/, const KernelArgs& args) {
    const AxisLayout l = axis_layout(name, args.input_meta, args.attrs);
    const T* x = args.input<T>(0);
    T* y = args.output<T>(0);
    for_each_row(l, [&](std::int64_t base, std::int64_t stride) {
      kernels::softmax_row(x + base, y + base, l.length, stride, log, kernels::exp_scratch(l.length),
                           kernels::ExpsInLanes{});
    });
  });
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    return kernels::at_least_one(4.0 * static_cast<double>(inputs[0].numel()));
  };
  return def;
}

// softmax_backward(grad, y): y (grad - Σ grad y); log_softmax_backward(grad, y): grad - exp(y) Σ grad. Both
// read the forward output y, so the forward input need not be kept.
OpDef softmax_backward_op(const std::string& name, bool log) {
  OpDef def;
  def.name = name;
  def.infer = [name](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity(name, inputs, 2);
    kernels::check_floating(name, inputs);
    DTR_CHECK_SHAPES(inputs[0].shape == inputs[1].shape, name, inputs, "needs grad and y of the same shape");
    static_cast<void>(axis_layout(name, inputs, attrs));
    return TensorMetas{inputs[0]};
  };
  def.cpu_kernel = kernels::floating_kernel([name, log]<typename T>(T /*zero*/, const KernelArgs& args) {
    const AxisLayout l = axis_layout(name, args.input_meta, args.attrs);
    const T* g = args.input<T>(0);
    const T* y = args.input<T>(1);
    T* dx = args.output<T>(0);
    for_each_row(l, [&](std::int64_t base, std::int64_t stride) {
      kernels::softmax_backward_row(g + base, y + base, dx + base, l.length, stride, log);
    });
  });
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    return kernels::at_least_one(4.0 * static_cast<double>(inputs[0].numel()));
  };
  return def;
}

// ---- cross-entropy ----

// Checks logits [N, C] (floating, N and C at least 1) and labels int64 [N] at `first`, `first + 1` of `inputs`.
void check_logits_and_labels(const std::string& op, std::span<const TensorMeta> inputs, std::size_t first) {
  const TensorMeta& logits = inputs[first];
  const TensorMeta& labels = inputs[first + 1];
  DTR_CHECK_SHAPES(logits.shape.size() == 2 && logits.shape[0] >= 1 && logits.shape[1] >= 1, op, inputs,
                   "needs logits [N, C] with N, C >= 1");
  DTR_CHECK_SHAPES(labels.dtype == DType::int64 && labels.shape == Shape{logits.shape[0]}, op, inputs,
                   "needs int64 labels [N] for logits [N, C]");
}

// Every label in [0, C): a label outside would read past a row, so it is an error naming its position.
void check_labels(const std::string& op, const KernelArgs& args, std::size_t first) {
  const std::int64_t classes = args.input_meta[first].shape[1];
  const std::int64_t* labels = args.input<std::int64_t>(first + 1);
  const std::int64_t n = args.input_meta[first + 1].numel();
  for (std::int64_t i = 0; i < n; ++i) {
    DTR_CHECK_SHAPES(labels[i] >= 0 && labels[i] < classes, op, args.input_meta, "has label ", labels[i],
                     " at position ", i, " outside [0, ", classes, ")");
  }
}

TensorMetas infer_cross_entropy(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("cross_entropy", inputs, 2);
  kernels::check_floating("cross_entropy", inputs, 0, 1);
  check_logits_and_labels("cross_entropy", inputs, 0);
  return {TensorMeta{{}, inputs[0].dtype}};
}

// The mean over rows of log Σ exp(x) - x[label], each row by the stable log-sum-exp.
void cross_entropy_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const std::int64_t n = args.input_meta[0].shape[0];
    const std::int64_t c = args.input_meta[0].shape[1];
    const T* x = args.input<T>(0);
    const std::int64_t* labels = args.input<std::int64_t>(1);
    double total = 0.0;
    for (std::int64_t r = 0; r < n; ++r) total += kernels::cross_entropy_term(x + r * c, c, labels[r]);
    args.output<T>(0)[0] = static_cast<T>(total / static_cast<double>(n));
  });
}

TensorMetas infer_cross_entropy_backward(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("cross_entropy_backward", inputs, 3);
  kernels::check_floating("cross_entropy_backward", inputs, 0, 2);
  DTR_CHECK_SHAPES(inputs[0].shape.empty(), "cross_entropy_backward", inputs, "needs a scalar grad");
  check_logits_and_labels("cross_entropy_backward", inputs, 1);
  return {inputs[1]};
}

// grad / N · (softmax(x) - onehot(label)), row by row.
void cross_entropy_backward_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const std::int64_t n = args.input_meta[1].shape[0];
    const std::int64_t c = args.input_meta[1].shape[1];
    const double g = static_cast<double>(args.input<T>(0)[0]) / static_cast<double>(n);
    const T* x = args.input<T>(1);
    const std::int64_t* labels = args.input<std::int64_t>(2);
    T* dx = args.output<T>(0);
    for (std::int64_t r = 0; r < n; ++r) kernels::cross_entropy_backward_row(x + r * c, c, labels[r], g, dx + r * c);
  });
}

double logits_flops(std::span<const TensorMeta> inputs, std::size_t logits) {
  return kernels::at_least_one(4.0 * static_cast<double>(inputs[logits].numel()));
}

}  // namespace

const OpDef& softmax() {
  return kernels::define_op([] { return softmax_op("softmax", false); });
}

const OpDef& log_softmax() {
  return kernels::define_op([] { return softmax_op("log_softmax", true); });
}

const OpDef& softmax_backward() {
  return kernels::define_op([] { return softmax_backward_op("softmax_backward", false); });
}

const OpDef& log_softmax_backward() {
  return kernels::define_op([] { return softmax_backward_op("log_softmax_backward", true); });
}

const OpDef& cross_entropy() {
  return kernels::define_op([] {
    return OpDef{
        .name = "cross_entropy",
        .infer = infer_cross_entropy,
        .cpu_kernel = cross_entropy_cpu,
        .flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) { return logits_flops(inputs, 0); },
        .check_values = [](const KernelArgs& args) { check_labels("cross_entropy", args, 0); },
    };
  });
}

const OpDef& cross_entropy_backward() {
  return kernels::define_op([] {
    return OpDef{
        .name = "cross_entropy_backward",
        .infer = infer_cross_entropy_backward,
        .cpu_kernel = cross_entropy_backward_cpu,
        .flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) { return logits_flops(inputs, 1); },
        .check_values = [](const KernelArgs& args) { check_labels("cross_entropy_backward", args, 1); },
    };
  });
}

}  // namespace dtr::ops

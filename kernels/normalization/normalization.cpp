// Layer norm, batch norm (training and eval) with their backward ops, and the running-statistic update.
// Statistics are two-pass (mean, then the mean of squared deviations: no cancellation), accumulated in double
// and rounded once, in an order fixed by the shape: reproducible. Variances are biased (divided by the count).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/normalization/normalization_layout.h"
#include "kernels/normalization/normalization_math.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

using kernels::channel_layout;
using kernels::ChannelLayout;
using kernels::eps_of;

double normalize_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return kernels::at_least_one(8.0 * static_cast<double>(inputs[0].numel()));
}

// The two halves of normalize_flops: the statistics (two passes, 5 per element) and y (3 per element).
double stats_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return kernels::at_least_one(5.0 * static_cast<double>(inputs[0].numel()));
}

double apply_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return kernels::at_least_one(3.0 * static_cast<double>(inputs[0].numel()));
}

double backward_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  return kernels::at_least_one(10.0 * static_cast<double>(inputs[1].numel()));
}

// ---- layer norm: rows of the trailing "normalized_rank" dimensions ----

// x [..., D...] split at its last `normalized_rank` dimensions (attribute, default 1): the statistics' shape
// [...] and the normalized shape [D...], of `size` >= 1 elements per row.
struct RowLayout {
  Shape rows;
  Shape normalized;
  std::int64_t size = 1;
};

// `x` is the input the layout is of; `all` the op's inputs, for messages.
RowLayout row_layout(const std::string& op, const TensorMeta& x, std::span<const TensorMeta> all, const Attrs& attrs) {
  const std::int64_t k = attrs.get_int("normalized_rank", 1);
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  DTR_CHECK_SHAPES(k >= 1 && k <= rank, op, all, "needs x of rank >= normalized_rank ", k, " >= 1");
  const auto split = static_cast<std::size_t>(rank - k);
  RowLayout l{Shape(x.shape.begin(), x.shape.begin() + split), Shape(x.shape.begin() + split, x.shape.end()), 1};
  for (const std::int64_t d : l.normalized) l.size *= d;
  DTR_CHECK_SHAPES(l.size >= 1, op, all, "needs normalized dimensions [D...] of at least one element");
  return l;
}

// layer_norm(x [..., D...], weight [D...], bias [D...]) -> y [..., D...], mean [...], invstd [...].
TensorMetas infer_layer_norm(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("layer_norm", inputs, 3);
  kernels::check_floating("layer_norm", inputs);
  const RowLayout l = row_layout("layer_norm", inputs[0], inputs, attrs);
  DTR_CHECK_SHAPES(inputs[1].shape == l.normalized && inputs[2].shape == l.normalized, "layer_norm", inputs,
                   "needs weight and bias of the normalized shape ", to_string(l.normalized));
  static_cast<void>(eps_of("layer_norm", attrs));
  const DType dtype = inputs[0].dtype;
  return {inputs[0], TensorMeta{l.rows, dtype}, TensorMeta{l.rows, dtype}};
}

void layer_norm_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("layer_norm", args.attrs);
    const std::int64_t d = args.input_meta[1].numel();
    const std::int64_t rows = args.output_meta[1].numel();
    const T* x = args.input<T>(0);
    const T* w = args.input<T>(1);
    const T* b = args.input<T>(2);
    kernels::parallel_for_items(rows, rows * d, [&](std::int64_t r) {  // rows are independent: one thread each
      kernels::layer_norm_row(x + r * d, w, b, d, eps, args.output<T>(0) + r * d, args.output<T>(1)[r],
                              args.output<T>(2)[r]);
    });
  });
}

// layer_norm_backward(grad_y, x, weight, mean, invstd) -> grad x, grad weight, grad bias; "normalized_rank" as
// the forward call's.
TensorMetas infer_layer_norm_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const char* op = "layer_norm_backward";
  kernels::check_arity(op, inputs, 5);
  kernels::check_floating(op, inputs);
  const RowLayout l = row_layout(op, inputs[1], inputs, attrs);
  DTR_CHECK_SHAPES(inputs[0].shape == inputs[1].shape && inputs[2].shape == l.normalized && inputs[3].shape == l.rows &&
                       inputs[4].shape == l.rows,
                   op, inputs, "needs grad_y and x [..., D...], weight [D...], mean and invstd [...] with [D...] = ",
                   to_string(l.normalized));
  return {inputs[1], inputs[2], inputs[2]};
}

// With x̂ = (x - mean) invstd and h = grad_y weight per row: dx = invstd (h - mean(h) - x̂ mean(h x̂)),
// dweight = Σ_rows grad_y x̂, dbias = Σ_rows grad_y.
void layer_norm_backward_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const std::int64_t d = args.input_meta[2].numel();
    const std::int64_t rows = args.input_meta[3].numel();
    const T* g = args.input<T>(0);
    const T* x = args.input<T>(1);
    const T* w = args.input<T>(2);
    std::vector<double> dw(static_cast<std::size_t>(d), 0.0);
    std::vector<double> db(static_cast<std::size_t>(d), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double mean = args.input<T>(3)[r];
      const double invstd = args.input<T>(4)[r];
      kernels::layer_norm_backward_row(g + r * d, x + r * d, w, mean, invstd, d, args.output<T>(0) + r * d);
      for (std::int64_t k = 0; k < d; ++k) {
        const std::int64_t e = r * d + k;
        dw[static_cast<std::size_t>(k)] += g[e] * ((x[e] - mean) * invstd);
        db[static_cast<std::size_t>(k)] += g[e];
      }
    }
    for (std::int64_t k = 0; k < d; ++k) {
      args.output<T>(1)[k] = static_cast<T>(dw[static_cast<std::size_t>(k)]);
      args.output<T>(2)[k] = static_cast<T>(db[static_cast<std::size_t>(k)]);
    }
  });
}

// ---- batch norm: channels of dimension 1 ----

// Batch norm sums a channel's N·S elements in double. One running sum is a chain of dependent additions, bound by
// their latency; eight partial sums (element j of each contiguous run of S goes to partial j mod 8), added at the
// end in a fixed tree, run at the adder's throughput instead and still give the same bits for the same shape.
// Channels are independent: they spread over the CPU kernels' threads, one thread per channel.
constexpr std::int64_t kLanes = 8;

struct LaneSums {
  double lane[kLanes] = {};
  double total() const {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
};

// Calls add(e, lane) for every element e of `channel`, with the partial sum it goes to.
template <typename Add>
void for_each_in_channel_by_lane(const ChannelLayout& l, std::int64_t channel, Add add) {
  for (std::int64_t i = 0; i < l.n; ++i) {
    const std::int64_t base = (i * l.c + channel) * l.s;
    std::int64_t j = 0;
    for (; j + kLanes <= l.s; j += kLanes) {
      for (std::int64_t k = 0; k < kLanes; ++k) add(base + j + k, k);
    }
    for (std::int64_t k = 0; j < l.s; ++j, ++k) add(base + j, k);
  }
}

// A channel's statistics, rounded to x's type: batch_norm's mean and invstd outputs, and what its y is made
// from, so that y = batch_norm_normalize(x, ..., batch_norm_stats(x)) bit for bit.
template <typename T>
struct RoundedStats {
  T mean;
  T invstd;
};

template <typename T>
RoundedStats<T> channel_stats(const ChannelLayout& l, std::int64_t c, const T* x, double eps) {
  LaneSums sum;
  for_each_in_channel_by_lane(l, c, [&](std::int64_t e, std::int64_t k) { sum.lane[k] += static_cast<double>(x[e]); });
  const double mean = sum.total() / static_cast<double>(l.count());
  LaneSums squares;
  for_each_in_channel_by_lane(l, c, [&](std::int64_t e, std::int64_t k) {
    const double d = x[e] - mean;
    squares.lane[k] += d * d;
  });
  const double invstd = 1.0 / std::sqrt(squares.total() / static_cast<double>(l.count()) + eps);
  return {static_cast<T>(mean), static_cast<T>(invstd)};
}

// y = (x - mean) invstd weight + bias over channel c, in double from the rounded statistics, rounded to T; then,
// with a residual r, y + r in T (add's functor), and with Relu, relu of that (relu's): the bits of
// relu(add(y, r)) made by the separate ops.
template <bool Relu, typename T>
void normalize_channel(const ChannelLayout& l, std::int64_t c, const T* x, RoundedStats<T> stats, double w, double b,
                       const T* r, T* y) {
  const double mean = stats.mean;
  const double invstd = stats.invstd;
  const auto finish = [](T v) { return Relu ? kernels::Relu{}(v) : v; };
  if (r == nullptr) {
    l.for_each_in_channel(c, [&](std::int64_t e) { y[e] = finish(static_cast<T>((x[e] - mean) * invstd * w + b)); });
  } else {
    l.for_each_in_channel(c, [&](std::int64_t e) {
      y[e] = finish(kernels::Add{}(static_cast<T>((x[e] - mean) * invstd * w + b), r[e]));
    });
  }
}

// batch_norm(x [N, C, ...], weight [C], bias [C]) -> y, batch mean [C], invstd [C].
TensorMetas infer_batch_norm(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("batch_norm", inputs, 3);
  kernels::check_floating("batch_norm", inputs);
  const ChannelLayout l = channel_layout("batch_norm", inputs, inputs, 1, true);
  static_cast<void>(eps_of("batch_norm", attrs));
  const TensorMeta channel{{l.c}, inputs[0].dtype};
  return {inputs[0], channel, channel};
}

void batch_norm_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm", args.attrs);
    const ChannelLayout l = channel_layout("batch_norm", args.input_meta, args.input_meta, 1, true);
    const T* x = args.input<T>(0);
    kernels::parallel_for_items(l.c, l.c * l.count(), [&](std::int64_t c) {
      const RoundedStats<T> stats = channel_stats(l, c, x, eps);
      normalize_channel<false>(l, c, x, stats, args.input<T>(1)[c], args.input<T>(2)[c], static_cast<const T*>(nullptr),
                               args.output<T>(0));
      args.output<T>(1)[c] = stats.mean;
      args.output<T>(2)[c] = stats.invstd;
    });
  });
}

// batch_norm_stats(x [N, C, ...]) -> batch mean [C], invstd [C].
TensorMetas infer_batch_norm_stats(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("batch_norm_stats", inputs, 1);
  kernels::check_floating("batch_norm_stats", inputs);
  const ChannelLayout l = channel_layout("batch_norm_stats", inputs, inputs, 1, true);
  static_cast<void>(eps_of("batch_norm_stats", attrs));
  const TensorMeta channel{{l.c}, inputs[0].dtype};
  return {channel, channel};
}

void batch_norm_stats_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm_stats", args.attrs);
    const ChannelLayout l = channel_layout("batch_norm_stats", args.input_meta, args.input_meta, 1, true);
    const T* x = args.input<T>(0);
    kernels::parallel_for_items(l.c, l.c * l.count(), [&](std::int64_t c) {
      const RoundedStats<T> stats = channel_stats(l, c, x, eps);
      args.output<T>(0)[c] = stats.mean;
      args.output<T>(1)[c] = stats.invstd;
    });
  });
}

// batch_norm_normalize(x [N, C, ...], weight, bias, mean, invstd [C][, residual of x's shape]) -> y (+ residual);
// attribute "relu" (0 or 1).
TensorMetas infer_batch_norm_normalize(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const char* op = "batch_norm_normalize";
  DTR_CHECK(inputs.size() == 5 || inputs.size() == 6, ShapeError, "op '", op,
            "' takes 5 or 6 inputs (x, weight, bias, mean, invstd[, residual]), got ", inputs.size());
  kernels::check_floating(op, inputs);
  static_cast<void>(channel_layout(op, inputs.first(5), inputs, 1, false));
  DTR_CHECK_SHAPES(inputs.size() == 5 || inputs[5].shape == inputs[0].shape, op, inputs,
                   "needs a residual of x's shape");
  static_cast<void>(kernels::relu_of(op, attrs));
  return {inputs[0]};
}

void batch_norm_normalize_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const ChannelLayout l =
        channel_layout("batch_norm_normalize", args.input_meta.first(5), args.input_meta, 1, false);
    const bool relu = kernels::relu_of("batch_norm_normalize", args.attrs);
    const T* x = args.input<T>(0);
    const T* residual = args.input_meta.size() == 6 ? args.input<T>(5) : nullptr;
    kernels::parallel_for_items(l.c, l.c * l.count(), [&](std::int64_t c) {
      const RoundedStats<T> stats{args.input<T>(3)[c], args.input<T>(4)[c]};
      const double w = args.input<T>(1)[c];
      const double b = args.input<T>(2)[c];
      if (relu) {
        normalize_channel<true>(l, c, x, stats, w, b, residual, args.output<T>(0));
      } else {
        normalize_channel<false>(l, c, x, stats, w, b, residual, args.output<T>(0));
      }
    });
  });
}

// batch_norm_backward(grad_y, x, weight, mean, invstd) -> grad x, grad weight, grad bias.
TensorMetas infer_batch_norm_backward(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  const char* op = "batch_norm_backward";
  kernels::check_arity(op, inputs, 5);
  kernels::check_floating(op, inputs);
  DTR_CHECK_SHAPES(inputs[0].shape == inputs[1].shape, op, inputs, "needs grad_y of x's shape");
  static_cast<void>(channel_layout(op, inputs.subspan(1), inputs, 1, true));
  return {inputs[1], inputs[2], inputs[2]};
}

// Per channel, with M elements, x̂ = (x - mean) invstd: dweight = Σ g x̂, dbias = Σ g and
// dx = weight invstd (g - dbias / M - x̂ (dweight / M)).
void batch_norm_backward_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const ChannelLayout l = channel_layout("batch_norm_backward", args.input_meta.subspan(1), args.input_meta, 1, true);
    const T* g = args.input<T>(0);
    const T* x = args.input<T>(1);
    const double m = static_cast<double>(l.count());
    kernels::parallel_for_items(l.c, 2 * l.c * l.count(), [&](std::int64_t c) {
      const double w = args.input<T>(2)[c];
      const double mean = args.input<T>(3)[c];
      const double invstd = args.input<T>(4)[c];
      LaneSums dw_sums;
      LaneSums db_sums;
      for_each_in_channel_by_lane(l, c, [&](std::int64_t e, std::int64_t k) {
        dw_sums.lane[k] += g[e] * ((x[e] - mean) * invstd);
        db_sums.lane[k] += g[e];
      });
      const double dw = dw_sums.total();
      const double db = db_sums.total();
      const double scale = w * invstd;
      const double db_mean = db / m;
      const double dw_mean = dw / m;
      T* dx = args.output<T>(0);
      l.for_each_in_channel(c, [&](std::int64_t e) {
        const double xhat = (x[e] - mean) * invstd;
        dx[e] = static_cast<T>(scale * (g[e] - db_mean - xhat * dw_mean));
      });
      args.output<T>(1)[c] = static_cast<T>(dw);
      args.output<T>(2)[c] = static_cast<T>(db);
    });
  });
}

// batch_norm_eval(x, weight, bias, running_mean, running_var) -> y.
TensorMetas infer_batch_norm_eval(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("batch_norm_eval", inputs, 5);
  kernels::check_floating("batch_norm_eval", inputs);
  static_cast<void>(channel_layout("batch_norm_eval", inputs, inputs, 1, false));
  static_cast<void>(eps_of("batch_norm_eval", attrs));
  return {inputs[0]};
}

void batch_norm_eval_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm_eval", args.attrs);
    const ChannelLayout l = channel_layout("batch_norm_eval", args.input_meta, args.input_meta, 1, false);
    const T* x = args.input<T>(0);
    T* y = args.output<T>(0);
    kernels::parallel_for_items(l.c, l.c * l.count(), [&](std::int64_t c) {
      const double w = args.input<T>(1)[c];
      const double b = args.input<T>(2)[c];
      const double mean = args.input<T>(3)[c];
      const double invstd = 1.0 / std::sqrt(static_cast<double>(args.input<T>(4)[c]) + eps);
      l.for_each_in_channel(c, [&](std::int64_t e) { y[e] = static_cast<T>((x[e] - mean) * invstd * w + b); });
    });
  });
}

// batch_norm_eval_backward(grad_y, x, weight, running_mean, running_var) -> the gradients of x, weight,
// bias, running_mean and running_var (all five inputs are differentiable in eval mode).
TensorMetas infer_batch_norm_eval_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const char* op = "batch_norm_eval_backward";
  kernels::check_arity(op, inputs, 5);
  kernels::check_floating(op, inputs);
  DTR_CHECK_SHAPES(inputs[0].shape == inputs[1].shape, op, inputs, "needs grad_y of x's shape");
  static_cast<void>(channel_layout(op, inputs.subspan(1), inputs, 1, false));
  static_cast<void>(eps_of(op, attrs));
  return {inputs[1], inputs[2], inputs[2], inputs[2], inputs[2]};
}

// With s = (var + eps)^-1/2 and x̂ = (x - mean) s: dx = g weight s, dweight = Σ g x̂, dbias = Σ g,
// dmean = -weight s Σ g, dvar = -weight s² dweight / 2.
void batch_norm_eval_backward_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm_eval_backward", args.attrs);
    const ChannelLayout l =
        channel_layout("batch_norm_eval_backward", args.input_meta.subspan(1), args.input_meta, 1, false);
    const T* g = args.input<T>(0);
    const T* x = args.input<T>(1);
    kernels::parallel_for_items(l.c, 2 * l.c * l.count(), [&](std::int64_t c) {
      const double w = args.input<T>(2)[c];
      const double mean = args.input<T>(3)[c];
      const double s = 1.0 / std::sqrt(static_cast<double>(args.input<T>(4)[c]) + eps);
      LaneSums dw_sums;
      LaneSums db_sums;
      for_each_in_channel_by_lane(l, c, [&](std::int64_t e, std::int64_t k) {
        dw_sums.lane[k] += g[e] * ((x[e] - mean) * s);
        db_sums.lane[k] += g[e];
        args.output<T>(0)[e] = static_cast<T>(g[e] * w * s);
      });
      const double dw = dw_sums.total();
      const double db = db_sums.total();
      args.output<T>(1)[c] = static_cast<T>(dw);
      args.output<T>(2)[c] = static_cast<T>(db);
      args.output<T>(3)[c] = static_cast<T>(-w * s * db);
      args.output<T>(4)[c] = static_cast<T>(-0.5 * w * s * s * dw);
    });
  });
}

// ---- running statistics ----

TensorMetas infer_running_stat_update(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("running_stat_update", inputs, 2);
  kernels::check_floating("running_stat_update", inputs);
  DTR_CHECK_SHAPES(inputs[0].shape == inputs[1].shape, "running_stat_update", inputs,
                   "needs running and batch statistics of the same shape");
  static_cast<void>(kernels::running_stat_of(attrs));
  return {inputs[0]};
}

void running_stat_update_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const kernels::RunningStat u = kernels::running_stat_of(args.attrs);
    const std::int64_t count = args.output_meta[0].numel();
    for (std::int64_t i = 0; i < count; ++i) {
      args.output<T>(0)[i] = static_cast<T>(u.updated(args.input<T>(0)[i], args.input<T>(1)[i]));
    }
  });
}

}  // namespace

const OpDef& layer_norm() {
  return kernels::define_op([] {
    return OpDef{
        .name = "layer_norm", .infer = infer_layer_norm, .cpu_kernel = layer_norm_cpu, .flops = normalize_flops};
  });
}

const OpDef& layer_norm_backward() {
  return kernels::define_op([] {
    return OpDef{.name = "layer_norm_backward",
                 .infer = infer_layer_norm_backward,
                 .cpu_kernel = layer_norm_backward_cpu,
                 .flops = backward_flops};
  });
}

const OpDef& batch_norm() {
  return kernels::define_op([] {
    return OpDef{
        .name = "batch_norm", .infer = infer_batch_norm, .cpu_kernel = batch_norm_cpu, .flops = normalize_flops};
  });
}

const OpDef& batch_norm_stats() {
  return kernels::define_op([] {
    return OpDef{.name = "batch_norm_stats",
                 .infer = infer_batch_norm_stats,
                 .cpu_kernel = batch_norm_stats_cpu,
                 .flops = stats_flops};
  });
}

const OpDef& batch_norm_normalize() {
  return kernels::define_op([] {
    return OpDef{.name = "batch_norm_normalize",
                 .infer = infer_batch_norm_normalize,
                 .cpu_kernel = batch_norm_normalize_cpu,
                 .flops = apply_flops};
  });
}

const OpDef& batch_norm_backward() {
  return kernels::define_op([] {
    return OpDef{.name = "batch_norm_backward",
                 .infer = infer_batch_norm_backward,
                 .cpu_kernel = batch_norm_backward_cpu,
                 .flops = backward_flops};
  });
}

const OpDef& batch_norm_eval() {
  return kernels::define_op([] {
    return OpDef{.name = "batch_norm_eval",
                 .infer = infer_batch_norm_eval,
                 .cpu_kernel = batch_norm_eval_cpu,
                 .flops = normalize_flops};
  });
}

const OpDef& batch_norm_eval_backward() {
  return kernels::define_op([] {
    return OpDef{.name = "batch_norm_eval_backward",
                 .infer = infer_batch_norm_eval_backward,
                 .cpu_kernel = batch_norm_eval_backward_cpu,
                 .flops = backward_flops};
  });
}

const OpDef& running_stat_update() {
  return kernels::define_op([] {
    return OpDef{.name = "running_stat_update",
                 .infer = infer_running_stat_update,
                 .cpu_kernel = running_stat_update_cpu,
                 .flops = kernels::numel_flops,
                 .overwrites_first_input = true};
  });
}

}  // namespace dtr::ops

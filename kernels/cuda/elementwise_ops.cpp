// CUDA kernels of the elementwise ops (binary arithmetic with broadcasting, activations and their backward
// ops, the fused LSTM cell, scale, broadcast_to, sum/mean/sum_to, uniform, dropout, the optimizer steps): argument unpacking and
// launches. The shapes were checked by each op's shape rule before a kernel runs; attributes are read by the
// same functions the CPU kernels use (kernels/elementwise_attrs.h), into the same functors.
#include <cstdint>
#include <string>

#include "cuda_kernels.h"
#include "elementwise.h"
#include "kernels/elementwise/counter_random.h"
#include "kernels/elementwise/elementwise_attrs.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/op_checks.h"

namespace dtr::kernels::cuda {
namespace {

// ---- strided walks --------------------------------------------------------------------------------------

// The walk over `out` of `a` and `b` broadcast to it (NumPy rules; b may be absent).
BroadcastWalk broadcast_walk(const char* op, const Shape& out, const Shape& a, const Shape& b) {
  const Shape sa = broadcast_strides(a, out);
  const Shape sb = broadcast_strides(b, out);
  BroadcastWalk walk;
  for (std::size_t d = 0; d < out.size(); ++d) walk.append(op, out[d], {sa[d], sb[d]});
  return walk;
}

// The walk of a reduction of the contiguous `shape` over the dimensions `mask` marks.
ReduceWalk reduce_walk(const char* op, const Shape& shape, const AxisMask& mask) {
  ReduceWalk walk;
  const Shape strides = contiguous_strides(shape);
  for (std::size_t d = 0; d < shape.size(); ++d) (mask[d] ? walk.reduced : walk.kept).append(op, shape[d], {strides[d]});
  // The sequential kernel's inner loop runs over the last reduced dimension: one of size 1 when none is left.
  if (walk.reduced.rank == 0) {
    walk.reduced.rank = 1;
    walk.reduced.shape[0] = 1;
    walk.reduced.strides[0][0] = 0;
  }
  return walk;
}

// ---- kernels --------------------------------------------------------------------------------------------

// add, sub, mul, div: the plain loop when neither input is broadcast, as the CPU kernel.
template <typename Fn>
Kernel broadcasting(const char* op, Fn fn) {
  return [op, fn](const KernelArgs& args) {
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      const Shape& out = args.output_meta[0].shape;
      const Shape& a = args.input_meta[0].shape;
      const Shape& b = args.input_meta[1].shape;
      if (a == out && b == out) {
        launch_zip(fn, args.output_meta[0].numel(), args.input<T>(0), args.input<T>(1), args.output<T>(0));
      } else {
        launch_broadcast_binary(fn, broadcast_walk(op, out, a, b), args.input<T>(0), args.input<T>(1),
                                args.output<T>(0));
      }
    });
  };
}

// An activation's forward op: y = fn(x).
template <typename Fn>
Kernel unary(Fn fn) {
  return [fn](const KernelArgs& args) {
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      launch_map(fn, args.output_meta[0].numel(), args.input<T>(0), args.output<T>(0));
    });
  };
}

// An activation's backward op: dx = fn(grad, x or y).
template <typename Fn>
Kernel binary(Fn fn) {
  return [fn](const KernelArgs& args) {
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      launch_zip(fn, args.output_meta[0].numel(), args.input<T>(0), args.input<T>(1), args.output<T>(0));
    });
  };
}

void scale_cuda(const KernelArgs& args) {
  const Scale fn{args.attrs.get_real("factor")};
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_map(fn, args.output_meta[0].numel(), args.input<T>(0), args.output<T>(0));
  });
}

// An optimizer step: out = step(a, b, c), c absent (0) when the op has two inputs. `make` reads and checks
// the attributes as the CPU kernel does.
template <typename Step>
Kernel update(Step (*make)(const Attrs&)) {
  return [make](const KernelArgs& args) {
    const Step step = make(args.attrs);
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      const T* c = args.inputs.size() > 2 ? args.input<T>(2) : nullptr;
      launch_update(step, args.output_meta[0].numel(), args.input<T>(0), args.input<T>(1), c, args.output<T>(0));
    });
  };
}

// sum and mean over attribute "axis" or "axes" (keepdim only changes the output's shape, not its order).
Kernel reduction(const char* op, bool mean) {
  return [op, mean](const KernelArgs& args) {
    const AxisMask mask = reduced_axes(op, args.input_meta, args.attrs);
    const std::int64_t out_count = args.output_meta[0].numel();
    const double factor = reduction_factor(mean, args.input_meta[0].numel(), out_count);
    const ReduceWalk walk = reduce_walk(op, args.input_meta[0].shape, mask);
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      launch_reduce_sum(walk, factor, args.input<T>(0), args.output<T>(0));
    });
  };
}

void sum_to_cuda(const KernelArgs& args) {
  const ReduceWalk walk = reduce_walk("sum_to", args.input_meta[0].shape, sum_to_mask(args.input_meta, args.attrs));
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_reduce_sum(walk, 1.0, args.input<T>(0), args.output<T>(0));
  });
}

void broadcast_to_cuda(const KernelArgs& args) {
  const BroadcastWalk walk = broadcast_walk("broadcast_to", args.output_meta[0].shape, args.input_meta[0].shape, {});
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_broadcast_copy(walk, args.input<T>(0), args.output<T>(0));
  });
}

// The output's dtype, as the CPU kernel: input 0 only lends its shape.
void uniform_cuda(const KernelArgs& args) {
  const std::uint64_t key = stream_key(args.seed);
  dispatch_floating(args.output_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_uniform(args.output_meta[0].numel(), key, args.output<T>(0));
  });
}

// Outputs y and mask.
void dropout_cuda(const KernelArgs& args) {
  const double p = drop_probability(args.attrs);
  const std::uint64_t key = stream_key(args.seed);
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_dropout(args.input_meta[0].numel(), key, p, dropout_keep_scale<T>(p), args.input<T>(0),
                   args.output<T>(0), args.output<T>(1));
  });
}

// lstm_cell(gates, c) -> h, c'; lstm_cell_backward(grad_h, grad_c', gates, c) -> grad_gates, grad_c.
void lstm_cell_cuda(const KernelArgs& args) {
  const Shape& c = args.input_meta[1].shape;
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_lstm_cell(c[0], c[1], args.input<T>(0), args.input<T>(1), args.output<T>(0), args.output<T>(1));
  });
}

void lstm_cell_backward_cuda(const KernelArgs& args) {
  const Shape& c = args.input_meta[3].shape;
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_lstm_cell_backward(c[0], c[1], args.input<T>(0), args.input<T>(1), args.input<T>(2), args.input<T>(3),
                              args.output<T>(0), args.output<T>(1));
  });
}

}  // namespace

void add_elementwise_kernels(KernelTable& table) {
  table["add"] = broadcasting("add", Add{});
  table["sub"] = broadcasting("sub", Sub{});
  table["mul"] = broadcasting("mul", Mul{});
  table["div"] = broadcasting("div", Div{});
  table["relu"] = unary(Relu{});
  table["relu_backward"] = binary(ReluBackward{});
  table["gelu"] = unary(Gelu{});
  table["gelu_backward"] = binary(GeluBackward{});
  table["tanh"] = unary(Tanh{});
  table["tanh_backward"] = binary(TanhBackward{});
  table["sigmoid"] = unary(Sigmoid{});
  table["sigmoid_backward"] = binary(SigmoidBackward{});
  table["lstm_cell"] = lstm_cell_cuda;
  table["lstm_cell_backward"] = lstm_cell_backward_cuda;
  table["scale"] = scale_cuda;
  table["sum"] = reduction("sum", false);
  table["mean"] = reduction("mean", true);
  table["sum_to"] = sum_to_cuda;
  table["broadcast_to"] = broadcast_to_cuda;
  table["uniform"] = uniform_cuda;
  table["dropout"] = dropout_cuda;
  table["sgd_momentum_buffer"] = update(sgd_momentum_buffer_step);
  table["sgd_apply"] = update(sgd_apply_step);
  table["adam_moment1"] = update(adam_moment1_step);
  table["adam_moment2"] = update(adam_moment2_step);
  table["adam_apply"] = update(adam_apply_step);
}

}  // namespace dtr::kernels::cuda

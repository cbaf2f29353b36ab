// CUDA kernels of the normalization ops (softmax, losses, layer and batch norm, embedding): argument unpacking
// and launches. The shapes were checked by each op's shape rule, and labels and indices by its check_values,
// before a kernel runs; here they are only read, with the layouts and attributes the CPU kernels read
// (kernels/normalization_layout.h).
#include <cstdint>
#include <span>
#include <string>

#include "cuda_kernels.h"
#include "kernels/normalization/normalization_layout.h"
#include "kernels/op_checks.h"
#include "normalization.h"

namespace dtr::kernels::cuda {
namespace {

// ---- softmax, cross-entropy ----

Kernel softmax_cuda(const std::string& name, bool log) {
  return [name, log](const KernelArgs& args) {
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      const AxisLayout l = axis_layout(name, args.input_meta, args.attrs);
      launch_softmax(l.outer, l.length, l.inner, log, args.input<T>(0), args.output<T>(0));
    });
  };
}

// (grad, y) -> dx.
Kernel softmax_backward_cuda(const std::string& name, bool log) {
  return [name, log](const KernelArgs& args) {
    dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
      const AxisLayout l = axis_layout(name, args.input_meta, args.attrs);
      launch_softmax_backward(l.outer, l.length, l.inner, log, args.input<T>(0), args.input<T>(1), args.output<T>(0));
    });
  };
}

// (logits [N, C], labels [N]) -> the scalar mean loss.
void cross_entropy_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_cross_entropy(args.input_meta[0].shape[0], args.input_meta[0].shape[1], args.input<T>(0),
                         args.input<std::int64_t>(1), args.output<T>(0));
  });
}

// (grad [], logits [N, C], labels [N]) -> dx [N, C].
void cross_entropy_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_cross_entropy_backward(args.input_meta[1].shape[0], args.input_meta[1].shape[1], args.input<T>(0),
                                  args.input<T>(1), args.input<std::int64_t>(2), args.output<T>(0));
  });
}

// ---- layer norm: rows of d = weight.numel() elements, as the CPU kernel counts them ----

// (x, weight, bias) -> y, mean, invstd.
void layer_norm_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("layer_norm", args.attrs);
    launch_layer_norm(args.output_meta[1].numel(), args.input_meta[1].numel(), eps, args.input<T>(0),
                      args.input<T>(1), args.input<T>(2), args.output<T>(0), args.output<T>(1), args.output<T>(2));
  });
}

// (grad_y, x, weight, mean, invstd) -> dx, dweight, dbias.
void layer_norm_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_layer_norm_backward(args.input_meta[3].numel(), args.input_meta[2].numel(), args.input<T>(0),
                               args.input<T>(1), args.input<T>(2), args.input<T>(3), args.input<T>(4),
                               args.output<T>(0), args.output<T>(1), args.output<T>(2));
  });
}

// ---- batch norm: channels of dimension 1 ----

// The device kernels' plain view of x [N, C, ...]; `x_input` is x's position among the inputs (after
// grad_y in the backward ops), and the `count` inputs from it on are x and its per-channel inputs (all the rest
// by default; batch_norm_normalize's optional residual follows them).
ChannelShape channel_shape(const char* op, const KernelArgs& args, std::size_t x_input, bool need_elements,
                           std::size_t count = std::dynamic_extent) {
  const ChannelLayout l =
      channel_layout(op, args.input_meta.subspan(x_input, count), args.input_meta, 1, need_elements);
  return ChannelShape{l.n, l.c, l.s};
}

// (x, weight, bias) -> y, mean, invstd.
void batch_norm_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm", args.attrs);
    launch_batch_norm(channel_shape("batch_norm", args, 0, true), eps, args.input<T>(0), args.input<T>(1),
                      args.input<T>(2), args.output<T>(0), args.output<T>(1), args.output<T>(2));
  });
}

// (x) -> mean, invstd.
void batch_norm_stats_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm_stats", args.attrs);
    launch_batch_norm_stats(channel_shape("batch_norm_stats", args, 0, true), eps, args.input<T>(0), args.output<T>(0),
                            args.output<T>(1));
  });
}

// (x, weight, bias, mean, invstd[, residual]) -> y (+ residual), relu'd with attribute "relu".
void batch_norm_normalize_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const T* residual = args.input_meta.size() == 6 ? args.input<T>(5) : nullptr;
    launch_batch_norm_normalize(channel_shape("batch_norm_normalize", args, 0, false, 5),
                                relu_of("batch_norm_normalize", args.attrs),
                                args.input<T>(0), args.input<T>(1), args.input<T>(2), args.input<T>(3),
                                args.input<T>(4), residual, args.output<T>(0));
  });
}

// (grad_y, x, weight, mean, invstd) -> dx, dweight, dbias.
void batch_norm_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_batch_norm_backward(channel_shape("batch_norm_backward", args, 1, true), args.input<T>(0),
                               args.input<T>(1), args.input<T>(2), args.input<T>(3), args.input<T>(4),
                               args.output<T>(0), args.output<T>(1), args.output<T>(2));
  });
}

// (x, weight, bias, running_mean, running_var) -> y.
void batch_norm_eval_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm_eval", args.attrs);
    launch_batch_norm_eval(channel_shape("batch_norm_eval", args, 0, false), eps, args.input<T>(0), args.input<T>(1),
                           args.input<T>(2), args.input<T>(3), args.input<T>(4), args.output<T>(0));
  });
}

// (grad_y, x, weight, running_mean, running_var) -> dx, dweight, dbias, dmean, dvar.
void batch_norm_eval_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const double eps = eps_of("batch_norm_eval_backward", args.attrs);
    launch_batch_norm_eval_backward(channel_shape("batch_norm_eval_backward", args, 1, false), eps, args.input<T>(0),
                                    args.input<T>(1), args.input<T>(2), args.input<T>(3), args.input<T>(4),
                                    args.output<T>(0), args.output<T>(1), args.output<T>(2), args.output<T>(3),
                                    args.output<T>(4));
  });
}

// (running, batch_stat) -> the updated running statistic.
void running_stat_update_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_running_stat_update(args.output_meta[0].numel(), running_stat_of(args.attrs), args.input<T>(0), args.input<T>(1),
                               args.output<T>(0));
  });
}

// ---- embedding ----

// (weight [V, D], indices [...]) -> [..., D].
void embedding_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    launch_embedding(args.input_meta[1].numel(), args.input_meta[0].shape[1], args.input_meta[0].shape[0],
                     args.input<T>(0), args.input<std::int64_t>(1), args.output<T>(0));
  });
}

// (grad [..., D], indices [...]) -> [V, D], V the attribute num_embeddings (the output's rows).
void embedding_backward_cuda(const KernelArgs& args) {
  const TensorMeta& out = args.output_meta[0];
  dispatch_floating(out.dtype, [&]<typename T>(T /*zero*/) {
    launch_embedding_backward(args.input_meta[1].numel(), out.shape[1], out.shape[0], args.input<T>(0),
                              args.input<std::int64_t>(1), args.output<T>(0));
  });
}

}  // namespace

void add_normalization_kernels(KernelTable& table) {
  table["softmax"] = softmax_cuda("softmax", false);
  table["log_softmax"] = softmax_cuda("log_softmax", true);
  table["softmax_backward"] = softmax_backward_cuda("softmax_backward", false);
  table["log_softmax_backward"] = softmax_backward_cuda("log_softmax_backward", true);
  table["cross_entropy"] = cross_entropy_cuda;
  table["cross_entropy_backward"] = cross_entropy_backward_cuda;
  table["layer_norm"] = layer_norm_cuda;
  table["layer_norm_backward"] = layer_norm_backward_cuda;
  table["batch_norm"] = batch_norm_cuda;
  table["batch_norm_backward"] = batch_norm_backward_cuda;
  table["batch_norm_stats"] = batch_norm_stats_cuda;
  table["batch_norm_normalize"] = batch_norm_normalize_cuda;
  table["batch_norm_eval"] = batch_norm_eval_cuda;
  table["batch_norm_eval_backward"] = batch_norm_eval_backward_cuda;
  table["running_stat_update"] = running_stat_update_cuda;
  table["embedding"] = embedding_cuda;
  table["embedding_backward"] = embedding_backward_cuda;
}

}  // namespace dtr::kernels::cuda

// CUDA kernels of the dense ops (matmul, bmm, linear (cuBLAS); conv2d (cuDNN); pooling; attention (cuBLAS and
// the softmax kernels)): argument unpacking and launches. The shapes were checked by each op's shape rule
// before a kernel runs; here they are only read.
//
// Reproducibility: cuBLAS runs with atomics off (cuda_handles.cpp) and the FP32/FP64 pedantic compute types
// (no TF32, no reduced-precision shortcuts); cuDNN runs with FMA math (no TF32) and only its deterministic
// algorithms. Both give the same bits for the same sizes on the same GPU model.
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_kernels.h"
#include "cuda_support.h"
#include "dense.h"
#include "kernels/dense/window_geometry.h"
#include "kernels/op_checks.h"
#include "normalization.h"
#include "workspace.h"

namespace dtr::kernels::cuda {
namespace {


// ---- GEMM (cuBLAS) ----------------------------------------------------------------------------------------

// c[batch][m, n] = op(a) · op(b) for each of `batch` row-major matrices laid end to end, or c += when
// `accumulate`; op(a) is stored [m, k] or, with `transpose_a`, [k, m]; op(b) [k, n] or [n, k]. cuBLAS is
// column-major, where the row-major c is cᵀ: it computes cᵀ = op(b)ᵀ · op(a)ᵀ, reading b's and a's buffers
// as the column-major matrices they already are.
template <typename T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
          const T* a, const T* b, T* c, bool accumulate) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {  // an empty sum: c is zero, or unchanged when accumulating
    if (!accumulate) {
      DTR_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<std::size_t>(batch * m * n) * sizeof(T), stream));
    }
    return;
  }
  constexpr bool is_double = std::is_same_v<T, double>;
  constexpr cudaDataType type = is_double ? CUDA_R_64F : CUDA_R_32F;
  // Pedantic: full FP32 (FP64) arithmetic whatever the handle's math mode, so float32 never rounds to TF32.
  constexpr cublasComputeType_t compute = is_double ? CUBLAS_COMPUTE_64F_PEDANTIC : CUBLAS_COMPUTE_32F_PEDANTIC;
  const T alpha = T(1);
  const T beta = accumulate ? T(1) : T(0);
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::int64_t ldb = transpose_b ? k : n;  // b's buffer read column-major: [n, k], or [k, n] transposed
  const std::int64_t lda = transpose_a ? m : k;  // a's buffer: [k, m], or [m, k] transposed
  DTR_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(cublas(), op_b, op_a, n, m, k, &alpha, b, type, ldb, k * n, a,
                                                 type, lda, m * k, &beta, c, type, n, m * n, batch, compute,
                                                 CUBLAS_GEMM_DEFAULT));
}

void matmul_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const bool ta = args.attrs.get_flag("transpose_a");
    const bool tb = args.attrs.get_flag("transpose_b");
    const Shape& a = args.input_meta[0].shape;
    const Shape& b = args.input_meta[1].shape;
    const std::int64_t m = ta ? a[1] : a[0];
    const std::int64_t k = ta ? a[0] : a[1];
    const std::int64_t n = tb ? b[0] : b[1];
    gemm(ta, tb, m, n, k, 1, args.input<T>(0), args.input<T>(1), args.output<T>(0), false);
  });
}

void bmm_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const bool ta = args.attrs.get_flag("transpose_a");
    const bool tb = args.attrs.get_flag("transpose_b");
    const Shape& a = args.input_meta[0].shape;
    const Shape& b = args.input_meta[1].shape;
    const std::int64_t m = ta ? a[2] : a[1];
    const std::int64_t k = ta ? a[1] : a[2];
    const std::int64_t n = tb ? b[1] : b[2];
    gemm(ta, tb, m, n, k, a[0], args.input<T>(0), args.input<T>(1), args.output<T>(0), false);
  });
}

// x [..., in] · weightᵀ (+ bias): the output starts as the broadcast bias, which the GEMM adds to.
void linear_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const std::int64_t in = args.input_meta[1].shape[1];
    const std::int64_t out = args.input_meta[1].shape[0];
    const std::int64_t rows = out == 0 ? 0 : args.output_meta[0].numel() / out;
    T* y = args.output<T>(0);
    const bool has_bias = args.inputs.size() == 3;
    if (has_bias) launch_fill_bias(args.input<T>(2), rows * out, out, 1, y);
    gemm(false, true, rows, out, in, 1, args.input<T>(0), args.input<T>(1), y, has_bias);
  });
}

// linear_add: the output starts as addend + bias, which the GEMM adds the product to.
void linear_add_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const std::int64_t in = args.input_meta[1].shape[1];
    const std::int64_t out = args.input_meta[1].shape[0];
    const std::int64_t count = args.output_meta[0].numel();
    const std::int64_t rows = out == 0 ? 0 : count / out;
    T* y = args.output<T>(0);
    const T* bias = args.inputs.size() == 4 ? args.input<T>(3) : nullptr;
    launch_fill_addend(args.input<T>(2), bias, count, out, y);
    gemm(false, true, rows, out, in, 1, args.input<T>(0), args.input<T>(1), y, true);
  });
}

// ---- convolution (cuDNN) ----------------------------------------------------------------------------------

// cuDNN's legacy API takes int dimensions and at most 2^31 - 1 elements a tensor.
int to_int(const char* op, std::int64_t value) {
  DTR_CHECK(value >= 0 && value <= INT_MAX, InvalidArgument, "op '", op, "' on CUDA: size ", value,
            " is beyond cuDNN's int range");
  return static_cast<int>(value);
}

struct TensorDescDeleter {
  void operator()(cudnnTensorDescriptor_t d) const { cudnnDestroyTensorDescriptor(d); }
};
struct FilterDescDeleter {
  void operator()(cudnnFilterDescriptor_t d) const { cudnnDestroyFilterDescriptor(d); }
};
struct ConvDescDeleter {
  void operator()(cudnnConvolutionDescriptor_t d) const { cudnnDestroyConvolutionDescriptor(d); }
};
using TensorDesc = std::unique_ptr<std::remove_pointer_t<cudnnTensorDescriptor_t>, TensorDescDeleter>;
using FilterDesc = std::unique_ptr<std::remove_pointer_t<cudnnFilterDescriptor_t>, FilterDescDeleter>;
using ConvDesc = std::unique_ptr<std::remove_pointer_t<cudnnConvolutionDescriptor_t>, ConvDescDeleter>;

TensorDesc tensor_desc(const char* op, cudnnDataType_t type, std::int64_t n, std::int64_t c, std::int64_t h,
                       std::int64_t w) {
  to_int(op, n * c * h * w);
  cudnnTensorDescriptor_t raw = nullptr;
  DTR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&raw));
  TensorDesc desc(raw);
  DTR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(raw, CUDNN_TENSOR_NCHW, type, to_int(op, n), to_int(op, c),
                                             to_int(op, h), to_int(op, w)));
  return desc;
}

// cuDNN's descriptors of one convolution: input x, weight, output y, and the convolution itself.
struct ConvDescs {
  TensorDesc x;
  FilterDesc weight;
  TensorDesc y;
  ConvDesc conv;
};

template <typename T>
ConvDescs conv_descs(const char* op, const ConvGeometry& g) {
  constexpr cudnnDataType_t type = std::is_same_v<T, double> ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  ConvDescs d;
  d.x = tensor_desc(op, type, g.n, g.c, g.h, g.w);
  d.y = tensor_desc(op, type, g.n, g.o, g.oh, g.ow);
  to_int(op, g.weight_numel());
  cudnnFilterDescriptor_t filter = nullptr;
  DTR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&filter));
  d.weight.reset(filter);
  DTR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(filter, type, CUDNN_TENSOR_NCHW, to_int(op, g.o),
                                             to_int(op, g.c / g.groups), to_int(op, g.kh), to_int(op, g.kw)));
  cudnnConvolutionDescriptor_t conv = nullptr;
  DTR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
  d.conv.reset(conv);
  // Cross-correlation (no kernel flip), as the CPU kernel's im2col computes; accumulation in T.
  DTR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      conv, to_int(op, g.pad_h), to_int(op, g.pad_w), to_int(op, g.stride_h), to_int(op, g.stride_w),
      to_int(op, g.dil_h), to_int(op, g.dil_w),
      CUDNN_CROSS_CORRELATION, type));
  DTR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, to_int(op, g.groups)));
  // FMA math for float32: plain FP32 kernels, where the default would allow TF32 tensor cores. float64 has
  // no reduced-precision path to exclude.
  DTR_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, std::is_same_v<T, double> ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  return d;
}

// The first of `algos` (deterministic ones, in order of preference) cuDNN supports for this convolution,
// with its workspace size: `query(algo, &bytes)` asks cuDNN for it. The choice depends on the sizes and the
// GPU only, so a recomputation runs the same algorithm.
template <typename Algo, typename Query>
std::pair<Algo, std::size_t> choose_algo(const char* op, std::initializer_list<Algo> algos, Query query) {
  for (const Algo algo : algos) {
    std::size_t bytes = 0;
    const cudnnStatus_t status = query(algo, &bytes);
    if (status == CUDNN_STATUS_SUCCESS) return {algo, bytes};
    if (CUDNN_STATUS_CATEGORY(status) != CUDNN_STATUS_NOT_SUPPORTED) DTR_CUDNN_CHECK(status);
  }
  DTR_THROW(DeviceError, "op '", op, "' on CUDA: cuDNN has no deterministic algorithm for this convolution");
}

template <typename T>
void zero(T* data, std::int64_t count) {
  if (count > 0) DTR_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<std::size_t>(count) * sizeof(T), stream));
}

// conv2d(x, weight, optional bias): the output starts as the broadcast bias (or zeros without one) when cuDNN
// is to add to it; cuDNN is not called for an empty input or weight, whose product is zero.
void conv2d_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const char* op = "conv2d";
    const ConvGeometry g = conv2d_geometry(args.input_meta, args.attrs);
    T* y = args.output<T>(0);
    if (g.output_numel() == 0) return;
    const bool has_bias = args.inputs.size() == 3;
    if (has_bias) launch_fill_bias(args.input<T>(2), g.output_numel(), g.o, g.oh * g.ow, y);
    if (g.input_numel() == 0 || g.weight_numel() == 0) {
      if (!has_bias) zero(y, g.output_numel());
      return;
    }
    const ConvDescs d = conv_descs<T>(op, g);
    const auto [algo, bytes] = choose_algo(
        op, {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM},
        [&](cudnnConvolutionFwdAlgo_t a, std::size_t* size) {
          return cudnnGetConvolutionForwardWorkspaceSize(cudnn(), d.x.get(), d.weight.get(), d.conv.get(),
                                                         d.y.get(), a, size);
        });
    void* scratch = workspace(args, op, bytes);
    const T alpha = T(1);
    const T beta = has_bias ? T(1) : T(0);
    DTR_CUDNN_CHECK(cudnnConvolutionForward(cudnn(), &alpha, d.x.get(), args.input<T>(0), d.weight.get(),
                                            args.input<T>(1), d.conv.get(), algo, scratch, bytes, &beta, d.y.get(),
                                            y));
  });
}

// conv2d_backward_input(grad_out, weight), attribute input_shape: the output's shape is the input's.
void conv2d_backward_input_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const char* op = "conv2d_backward_input";
    const ConvGeometry g = conv2d_backward_input_geometry(args.input_meta, args.attrs);
    T* dx = args.output<T>(0);
    if (g.input_numel() == 0) return;
    if (g.output_numel() == 0 || g.weight_numel() == 0) {
      zero(dx, g.input_numel());
      return;
    }
    const ConvDescs d = conv_descs<T>(op, g);
    const auto [algo, bytes] = choose_algo(
        op, {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1}, [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t* size) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn(), d.weight.get(), d.y.get(), d.conv.get(),
                                                              d.x.get(), a, size);
        });
    void* scratch = workspace(args, op, bytes);
    const T alpha = T(1);
    const T beta = T(0);
    DTR_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn(), &alpha, d.weight.get(), args.input<T>(1), d.y.get(),
                                                 args.input<T>(0), d.conv.get(), algo, scratch, bytes, &beta,
                                                 d.x.get(), dx));
  });
}

// conv2d_backward_weight(grad_out, x), attribute weight_shape: the output's shape is the weight's.
void conv2d_backward_weight_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const char* op = "conv2d_backward_weight";
    const ConvGeometry g = conv2d_backward_weight_geometry(args.input_meta, args.attrs);
    T* dw = args.output<T>(0);
    if (g.weight_numel() == 0) return;
    if (g.output_numel() == 0 || g.input_numel() == 0) {
      zero(dw, g.weight_numel());
      return;
    }
    const ConvDescs d = conv_descs<T>(op, g);
    const auto [algo, bytes] = choose_algo(
        op, {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1}, [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t* size) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn(), d.x.get(), d.y.get(), d.conv.get(),
                                                                d.weight.get(), a, size);
        });
    void* scratch = workspace(args, op, bytes);
    const T alpha = T(1);
    const T beta = T(0);
    DTR_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn(), &alpha, d.x.get(), args.input<T>(1), d.y.get(),
                                                   args.input<T>(0), d.conv.get(), algo, scratch, bytes, &beta,
                                                   d.weight.get(), dw));
  });
}

// ---- pooling (own kernels, dense.cu) ----------------------------------------------------------------------

// The device kernels' plain view of a pooling geometry.
PoolShape pool_shape(const PoolGeometry& g) {
  PoolShape s;
  s.planes = g.planes(), s.h = g.h, s.w = g.w, s.oh = g.oh, s.ow = g.ow;
  s.kh = g.kh, s.kw = g.kw, s.stride_h = g.stride_h, s.stride_w = g.stride_w, s.pad_h = g.pad_h, s.pad_w = g.pad_w;
  return s;
}

void max_pool2d_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const PoolShape s = pool_shape(pool_geometry("max_pool2d", args.input_meta, args.input_meta[0].shape, args.attrs));
    launch_max_pool2d(s, args.input<T>(0), args.output<T>(0));
  });
}

// (grad_out, x) -> dx of x's shape.
void max_pool2d_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const PoolShape s = pool_shape(max_pool2d_backward_geometry(args.input_meta, args.attrs));
    launch_max_pool2d_backward(s, args.input<T>(0), args.input<T>(1), args.output<T>(0));
  });
}

void avg_pool2d_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const PoolShape s = pool_shape(pool_geometry("avg_pool2d", args.input_meta, args.input_meta[0].shape, args.attrs));
    launch_avg_pool2d(s, args.input<T>(0), args.output<T>(0));
  });
}

// (grad_out), attribute input_shape -> dx of the output's shape (the attribute's).
void avg_pool2d_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const PoolShape s = pool_shape(avg_pool2d_backward_geometry(args.input_meta, args.attrs));
    launch_avg_pool2d_backward(s, args.input<T>(0), args.output<T>(0));
  });
}

// ---- attention -------------------------------------------------------------------------------------------

// The CPU kernel's steps, in the same chunks of heads: q (scaled), k and v copied out as [count, T, D] into
// workspace, cuBLAS's batched products, the softmax kernels over rows of the weights [N · heads, T, T].
constexpr std::int64_t kChunkHeads = 1024;

struct AttentionPlan {
  HeadsLayout qkv;  // the q block of qkv [N, T, 3E]; part 1 is k, part 2 v
  std::int64_t total = 0, chunk = 0, head_elements = 0, weight_elements = 0;  // per chunk
  double scale = 1.0;
};

AttentionPlan attention_plan(const Shape& qkv, const Attrs& attrs) {
  AttentionPlan plan;
  const std::int64_t e = qkv[2] / 3;
  const std::int64_t heads = attrs.get_int("heads");
  plan.qkv = HeadsLayout{qkv[0], qkv[1], e, heads, e / heads, 3 * e, 0, 0, 0};
  plan.total = qkv[0] * heads;
  plan.chunk = plan.total < kChunkHeads ? plan.total : kChunkHeads;
  plan.head_elements = plan.chunk * qkv[1] * plan.qkv.d;
  plan.weight_elements = plan.chunk * qkv[1] * qkv[1];
  plan.scale = plan.qkv.d > 0 ? 1.0 / std::sqrt(static_cast<double>(plan.qkv.d)) : 1.0;
  return plan;
}

// Heads [first, first + count) of block `part` of rows `row_width` wide.
HeadsLayout heads_of(const AttentionPlan& plan, std::int64_t row_width, std::int64_t part, std::int64_t first,
                     std::int64_t count) {
  HeadsLayout l = plan.qkv;
  l.row_width = row_width;
  l.part = part;
  l.first = first;
  l.count = count;
  return l;
}

template <typename T>
void gather_qkv(const AttentionPlan& plan, const T* qkv, std::int64_t first, std::int64_t count, T* q, T* k, T* v) {
  const std::int64_t width = 3 * plan.qkv.e;
  launch_heads_gather(heads_of(plan, width, 0, first, count), plan.scale, qkv, q);
  launch_heads_gather(heads_of(plan, width, 1, first, count), 1.0, qkv, k);
  launch_heads_gather(heads_of(plan, width, 2, first, count), 1.0, qkv, v);
}

// qkv -> context, weights.
void attention_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const AttentionPlan plan = attention_plan(args.input_meta[0].shape, args.attrs);
    const std::int64_t h = plan.head_elements;
    const std::int64_t t = plan.qkv.t;
    const std::int64_t d = plan.qkv.d;
    T* q = static_cast<T*>(workspace(args, "attention", static_cast<std::size_t>(4 * h) * sizeof(T)));
    T* k = q + h;
    T* v = k + h;
    T* o = v + h;
    for (std::int64_t first = 0; first < plan.total; first += plan.chunk) {
      const std::int64_t count = plan.total - first < plan.chunk ? plan.total - first : plan.chunk;
      T* p = args.output<T>(1) + first * t * t;  // the scores, then the weights in place
      gather_qkv(plan, args.input<T>(0), first, count, q, k, v);
      gemm(false, true, t, t, d, count, q, k, p, false);
      launch_softmax(count * t, t, 1, false, p, p);
      gemm(false, false, t, d, t, count, p, v, o, false);
      launch_heads_scatter(heads_of(plan, plan.qkv.e, 0, first, count), 1.0, o, args.output<T>(0));
    }
  });
}

// (grad [N, T, E], qkv, weights[, grad_weights]) -> grad_qkv: bmm's and softmax's gradients per head.
void attention_backward_cuda(const KernelArgs& args) {
  dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const AttentionPlan plan = attention_plan(args.input_meta[1].shape, args.attrs);
    const std::int64_t h = plan.head_elements;
    const std::int64_t w = plan.weight_elements;
    const std::int64_t t = plan.qkv.t;
    const std::int64_t d = plan.qkv.d;
    const std::int64_t width = 3 * plan.qkv.e;
    T* q = static_cast<T*>(
        workspace(args, "attention_backward", static_cast<std::size_t>(7 * h + w) * sizeof(T)));
    T* k = q + h;
    T* v = k + h;
    T* g = v + h;
    T* dq = g + h;
    T* dk = dq + h;
    T* dv = dk + h;
    T* dp = dv + h;  // then dS, in place
    const bool weights_grad = args.inputs.size() == 4;  // the weights' own gradient, added to dP
    for (std::int64_t first = 0; first < plan.total; first += plan.chunk) {
      const std::int64_t count = plan.total - first < plan.chunk ? plan.total - first : plan.chunk;
      const T* p = args.input<T>(2) + first * t * t;
      gather_qkv(plan, args.input<T>(1), first, count, q, k, v);
      launch_heads_gather(heads_of(plan, plan.qkv.e, 0, first, count), 1.0, args.input<T>(0), g);
      if (weights_grad) {
        DTR_CUDA_CHECK(cudaMemcpyAsync(dp, args.input<T>(3) + first * t * t,
                                       static_cast<std::size_t>(count * t * t) * sizeof(T),
                                       cudaMemcpyDeviceToDevice, stream));
      }
      gemm(false, true, t, t, d, count, g, v, dp, weights_grad);
      gemm(true, false, t, d, t, count, p, g, dv, false);
      launch_softmax_backward(count * t, t, 1, false, dp, p, dp);
      gemm(false, false, t, d, t, count, dp, k, dq, false);
      gemm(true, false, t, d, t, count, dp, q, dk, false);
      launch_heads_scatter(heads_of(plan, width, 0, first, count), plan.scale, dq, args.output<T>(0));
      launch_heads_scatter(heads_of(plan, width, 1, first, count), 1.0, dk, args.output<T>(0));
      launch_heads_scatter(heads_of(plan, width, 2, first, count), 1.0, dv, args.output<T>(0));
    }
  });
}

}  // namespace

void add_dense_kernels(KernelTable& table) {
  table["matmul"] = matmul_cuda;
  table["bmm"] = bmm_cuda;
  table["linear"] = linear_cuda;
  table["linear_add"] = linear_add_cuda;
  table["attention"] = attention_cuda;
  table["attention_backward"] = attention_backward_cuda;
  table["conv2d"] = conv2d_cuda;
  table["conv2d_backward_input"] = conv2d_backward_input_cuda;
  table["conv2d_backward_weight"] = conv2d_backward_weight_cuda;
  table["max_pool2d"] = max_pool2d_cuda;
  table["max_pool2d_backward"] = max_pool2d_backward_cuda;
  table["avg_pool2d"] = avg_pool2d_cuda;
  table["avg_pool2d_backward"] = avg_pool2d_backward_cuda;
}

}  // namespace dtr::kernels::cuda

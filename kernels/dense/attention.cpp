// Multi-head self-attention as one op and its backward op (include/dtr/ops.h), run as the unfused ops ran:
// q scaled as `scale` does; S = q kᵀ and context = P v on kernels::gemm with the sizes bmm gives it, one head
// after another as bmm runs its batch; each row of P = softmax(S) and of its gradient by normalization_math.h's
// row functions, rows over the threads as the softmax ops spread them. So both outputs have the unfused ops'
// bits. The weights are an output, as the unfused softmax's was: the runtime keeps them for the backward, or
// evicts them under a budget and remakes them with the op.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/dense/gemm.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"
#include "kernels/normalization/normalization_math.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

struct Heads {
  std::int64_t n = 0, t = 0, e = 0, heads = 1, d = 0;
  double scale = 1.0;  // 1/√d, as the unfused path scales q
};

// qkv [N, T, 3E] with E divisible by the attribute "heads".
Heads heads_of(const char* name, std::span<const TensorMeta> inputs, std::size_t qkv, const Attrs& attrs) {
  const Shape& s = inputs[qkv].shape;
  DTR_CHECK_SHAPES(s.size() == 3 && s[2] % 3 == 0, name, inputs, "needs qkv [N, T, 3E]");
  Heads h{.n = s[0], .t = s[1], .e = s[2] / 3, .heads = attrs.get_int("heads")};
  DTR_CHECK(h.heads > 0 && h.e % h.heads == 0, InvalidArgument, "op '", name, "': attribute 'heads' is ", h.heads,
            ", expected a positive divisor of E = ", h.e);
  h.d = h.e / h.heads;
  h.scale = h.d > 0 ? 1.0 / std::sqrt(static_cast<double>(h.d)) : 1.0;
  return h;
}

// Heads are taken in chunks of this many ([N · heads] counts every sample's): a chunk's scratch is a few
// hundred KiB where all heads at once took the budget of a small model, and its softmax rows still fill the
// threads. A chunk runs every head as the unfused ops ran it, so the chunking changes no bit.
constexpr std::int64_t kChunkHeads = 64;

// A chunk's heads side by side, as the unfused ops had them: [count, T, D] matrices (q, k, v, context and their
// gradients) and [count, T, T] (the weights' gradient), in one block of kernels::kernel_scratch.
template <typename T>
class Scratch {
 public:
  Scratch(const KernelArgs& args, const Heads& h, std::int64_t head_matrices, std::int64_t weight_matrices)
      : head_(std::min(kChunkHeads, h.n * h.heads) * h.t * h.d),
        weights_(std::min(kChunkHeads, h.n * h.heads) * h.t * h.t),
        head_matrices_(head_matrices),
        base_(kernels::kernel_scratch(
            args, static_cast<std::size_t>(head_matrices * head_ + weight_matrices * weights_), own_)) {}
  // Head matrix block i; weight block j, after every head block.
  T* heads(std::int64_t i) const { return base_ + i * head_; }
  T* weights(std::int64_t j) const { return base_ + head_matrices_ * head_ + j * weights_; }

 private:
  std::int64_t head_ = 0;
  std::int64_t weights_ = 0;
  std::int64_t head_matrices_ = 0;
  std::vector<T> own_;  // declared before base_, which the constructor points into it
  T* base_ = nullptr;
};

// Heads [first, first + count) of the [N · heads] order, in block `part` (0 q, 1 k, 2 v) of rows `row_width`
// wide, and the same heads as [count, T, D]: copied out of the rows (`gather`), or back into them, each element
// times `factor` as the `scale` op multiplies.
template <typename T>
void copy_heads(bool gather, const Heads& h, std::int64_t first, std::int64_t count, std::int64_t row_width,
                std::int64_t part, double factor, const T* from, T* to) {
  const kernels::Scale scale{factor};
  for (std::int64_t c = 0; c < count; ++c) {
    const std::int64_t b = (first + c) / h.heads;
    const std::int64_t head = (first + c) % h.heads;
    for (std::int64_t i = 0; i < h.t; ++i) {
      const std::int64_t in_rows = (b * h.t + i) * row_width + part * h.e + head * h.d;
      const std::int64_t in_heads = (c * h.t + i) * h.d;
      const std::int64_t read = gather ? in_rows : in_heads;
      const std::int64_t write = gather ? in_heads : in_rows;
      for (std::int64_t j = 0; j < h.d; ++j) to[write + j] = scale(from[read + j]);
    }
  }
}

// bmm's loop over `count` heads: one GEMM per head, one after another (each with the threads bmm's has).
template <typename T>
void each_head(std::int64_t count, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
               const T* b, T* c, bool accumulate = false) {
  for (std::int64_t i = 0; i < count; ++i) {
    kernels::gemm(ta, tb, m, n, k, a + i * m * k, b + i * k * n, c + i * m * n, accumulate);
  }
}

// The softmax op's rows of `count` heads (over the threads, each row one thread's).
template <typename Row>
void each_row(const Heads& h, std::int64_t count, Row row) {
  const std::int64_t rows = count * h.t;
  kernels::parallel_for_items(rows, rows * h.t, [&](std::int64_t r) { row(r * h.t); });
}

// Calls fn(first, count) over the chunks of heads.
template <typename Fn>
void each_chunk(const Heads& h, Fn fn) {
  const std::int64_t total = h.n * h.heads;
  for (std::int64_t first = 0; first < total; first += kChunkHeads) fn(first, std::min(kChunkHeads, total - first));
}

// q (scaled), k and v of a chunk's heads.
template <typename T>
void gather_qkv(const T* qkv, const Heads& h, std::int64_t first, std::int64_t count, T* q, T* k, T* v) {
  copy_heads(true, h, first, count, 3 * h.e, 0, h.scale, qkv, q);
  copy_heads(true, h, first, count, 3 * h.e, 1, 1.0, qkv, k);
  copy_heads(true, h, first, count, 3 * h.e, 2, 1.0, qkv, v);
}

OpDef attention_op() {
  OpDef def;
  def.name = "attention";
  def.infer = [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity("attention", inputs, 1);
    kernels::check_floating("attention", inputs);
    const Heads h = heads_of("attention", inputs, 0, attrs);
    return TensorMetas{TensorMeta{{h.n, h.t, h.e}, inputs[0].dtype},
                       TensorMeta{{h.n * h.heads, h.t, h.t}, inputs[0].dtype}};
  };
  def.cpu_kernel = kernels::floating_kernel([]<typename T>(T /*zero*/, const KernelArgs& args) {
    const Heads h = heads_of("attention", args.input_meta, 0, args.attrs);
    const Scratch<T> scratch(args, h, 4, 0);
    T* q = scratch.heads(0);
    T* k = scratch.heads(1);
    T* v = scratch.heads(2);
    T* o = scratch.heads(3);
    each_chunk(h, [&](std::int64_t first, std::int64_t count) {
      T* p = args.output<T>(1) + first * h.t * h.t;  // the scores, then the weights in place
      gather_qkv(args.input<T>(0), h, first, count, q, k, v);
      each_head(count, false, true, h.t, h.t, h.d, q, k, p);
      each_row(h, count, [&](std::int64_t at) {
        kernels::softmax_row(p + at, p + at, h.t, 1, false, kernels::exp_scratch(h.t), kernels::ExpsInLanes{});
      });
      each_head(count, false, false, h.t, h.d, h.t, p, v, o);
      copy_heads(false, h, first, count, h.e, 0, 1.0, o, args.output<T>(0));
    });
  });
  // The two products, 2 T² D each per head, and the softmax's few per weight.
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    const Heads h = heads_of("attention", inputs, 0, attrs);
    const double per_head = 4.0 * static_cast<double>(h.t * h.t * h.d) + 4.0 * static_cast<double>(h.t * h.t);
    return kernels::at_least_one(static_cast<double>(h.n * h.heads) * per_head);
  };
  return def;
}

OpDef attention_backward_op() {
  OpDef def;
  def.name = "attention_backward";
  def.infer = [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    DTR_CHECK_SHAPES(inputs.size() == 3 || inputs.size() == 4, "attention_backward", inputs,
                     "takes grad, qkv, the weights and an optional gradient of the weights");
    kernels::check_floating("attention_backward", inputs);
    const Heads h = heads_of("attention_backward", inputs, 1, attrs);
    const Shape weights{h.n * h.heads, h.t, h.t};
    DTR_CHECK_SHAPES(inputs[0].shape == (Shape{h.n, h.t, h.e}) && inputs[2].shape == weights &&
                         (inputs.size() == 3 || inputs[3].shape == weights),
                     "attention_backward", inputs,
                     "needs grad [N, T, E] and the weights [N · heads, T, T] (and their gradient) for qkv [N, T, 3E]");
    return TensorMetas{inputs[1]};
  };
  def.cpu_kernel = kernels::floating_kernel([]<typename T>(T /*zero*/, const KernelArgs& args) {
    const Heads h = heads_of("attention_backward", args.input_meta, 1, args.attrs);
    const Scratch<T> scratch(args, h, 7, 1);
    T* q = scratch.heads(0);
    T* k = scratch.heads(1);
    T* v = scratch.heads(2);
    T* g = scratch.heads(3);
    T* dq = scratch.heads(4);
    T* dk = scratch.heads(5);
    T* dv = scratch.heads(6);
    T* dp = scratch.weights(0);  // then dS, in place
    T* out = args.output<T>(0);
    const bool weights_grad = args.inputs.size() == 4;
    each_chunk(h, [&](std::int64_t first, std::int64_t count) {
      const T* p = args.input<T>(2) + first * h.t * h.t;
      gather_qkv(args.input<T>(1), h, first, count, q, k, v);
      copy_heads(true, h, first, count, h.e, 0, 1.0, args.input<T>(0), g);
      // context = P v: dP = grad vᵀ (plus the weights' own gradient, when given), dv = Pᵀ grad (bmm's
      // gradients); then softmax's, row by row.
      if (weights_grad) std::copy_n(args.input<T>(3) + first * h.t * h.t, count * h.t * h.t, dp);
      each_head(count, false, true, h.t, h.t, h.d, g, v, dp, weights_grad);
      each_head(count, true, false, h.t, h.d, h.t, p, g, dv);
      each_row(h, count, [&](std::int64_t at) {
        kernels::softmax_backward_row(dp + at, p + at, dp + at, h.t, 1, false);
      });
      // S = q kᵀ with q scaled: dq = scale · (dS k), dk = dSᵀ q.
      each_head(count, false, false, h.t, h.d, h.t, dp, k, dq);
      each_head(count, true, false, h.t, h.d, h.t, dp, q, dk);
      copy_heads(false, h, first, count, 3 * h.e, 0, h.scale, dq, out);
      copy_heads(false, h, first, count, 3 * h.e, 1, 1.0, dk, out);
      copy_heads(false, h, first, count, 3 * h.e, 2, 1.0, dv, out);
    });
  });
  // Four products, 2 T² D each per head, and the softmax gradient's few per weight.
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    const Heads h = heads_of("attention_backward", inputs, 1, attrs);
    const double per_head = 8.0 * static_cast<double>(h.t * h.t * h.d) + 4.0 * static_cast<double>(h.t * h.t);
    return kernels::at_least_one(static_cast<double>(h.n * h.heads) * per_head);
  };
  return def;
}

}  // namespace

// A lambda each: define_op keeps one definition per callable type.
const OpDef& attention() {
  return kernels::define_op([] { return attention_op(); });
}
const OpDef& attention_backward() {
  return kernels::define_op([] { return attention_backward_op(); });
}

}  // namespace dtr::ops

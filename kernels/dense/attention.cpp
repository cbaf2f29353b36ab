// Multi-head self-attention as one op and its backward op (include/dtr/ops.h). Each head of each sample is the
// unfused ops' arithmetic in their order: q scaled as `scale` does, S = q kᵀ and context = P v on
// kernels::gemm with the sizes bmm gives it, each row of P = softmax(S) and of its gradient by
// normalization_math.h's row functions; heads one after the other, as bmm runs its batch. So the forward has
// the unfused ops' bits, and the backward remakes P with the forward's bits.
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/dense/gemm.h"
#include "kernels/elementwise/elementwise_math.h"
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

// One head's matrices, contiguous [T, D] (q, k, v, context and their gradients) and [T, T] (S, P and theirs).
template <typename T>
struct HeadBuffers {
  std::vector<T> q, k, v, o, s, p;
  explicit HeadBuffers(const Heads& h)
      : q(static_cast<std::size_t>(h.t * h.d)), k(q.size()), v(q.size()), o(q.size()),
        s(static_cast<std::size_t>(h.t * h.t)), p(s.size()) {}
};

// Column block `part` (0 q, 1 k, 2 v) of head `head` of sample `b`: rows of `row_width`, head columns at
// part · E + head · D.
template <typename T>
const T* head_block(const T* base, const Heads& h, std::int64_t b, std::int64_t head, std::int64_t part,
                    std::int64_t row_width) {
  return base + b * h.t * row_width + part * h.e + head * h.d;
}

template <typename T, typename Fn>
void gather(const T* from, std::int64_t row_width, const Heads& h, T* to, Fn fn) {
  for (std::int64_t i = 0; i < h.t; ++i) {
    for (std::int64_t j = 0; j < h.d; ++j) to[i * h.d + j] = fn(from[i * row_width + j]);
  }
}

template <typename T>
void scatter(const T* from, const Heads& h, T* to, std::int64_t row_width) {
  for (std::int64_t i = 0; i < h.t; ++i) {
    for (std::int64_t j = 0; j < h.d; ++j) to[i * row_width + j] = from[i * h.d + j];
  }
}

// q (scaled), k, v of one head, and P = softmax(q kᵀ) row by row.
template <typename T>
void attention_weights(const T* qkv, const Heads& h, std::int64_t b, std::int64_t head, HeadBuffers<T>& buf) {
  const std::int64_t width = 3 * h.e;
  const kernels::Scale scale{h.scale};
  gather(head_block(qkv, h, b, head, 0, width), width, h, buf.q.data(), [&](T x) { return scale(x); });
  gather(head_block(qkv, h, b, head, 1, width), width, h, buf.k.data(), [](T x) { return x; });
  gather(head_block(qkv, h, b, head, 2, width), width, h, buf.v.data(), [](T x) { return x; });
  kernels::gemm(false, true, h.t, h.t, h.d, buf.q.data(), buf.k.data(), buf.s.data());
  for (std::int64_t i = 0; i < h.t; ++i) {
    kernels::softmax_row(buf.s.data() + i * h.t, buf.p.data() + i * h.t, h.t, 1, false);
  }
}

OpDef attention_op() {
  OpDef def;
  def.name = "attention";
  def.infer = [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity("attention", inputs, 1);
    kernels::check_floating("attention", inputs);
    const Heads h = heads_of("attention", inputs, 0, attrs);
    return TensorMetas{TensorMeta{{h.n, h.t, h.e}, inputs[0].dtype}};
  };
  def.cpu_kernel = kernels::floating_kernel([]<typename T>(T /*zero*/, const KernelArgs& args) {
    const Heads h = heads_of("attention", args.input_meta, 0, args.attrs);
    HeadBuffers<T> buf(h);
    for (std::int64_t b = 0; b < h.n; ++b) {
      for (std::int64_t head = 0; head < h.heads; ++head) {
        attention_weights(args.input<T>(0), h, b, head, buf);
        kernels::gemm(false, false, h.t, h.d, h.t, buf.p.data(), buf.v.data(), buf.o.data());
        scatter(buf.o.data(), h, args.output<T>(0) + b * h.t * h.e + head * h.d, h.e);
      }
    }
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
    kernels::check_arity("attention_backward", inputs, 2);
    kernels::check_floating("attention_backward", inputs);
    const Heads h = heads_of("attention_backward", inputs, 1, attrs);
    DTR_CHECK_SHAPES(inputs[0].shape == (Shape{h.n, h.t, h.e}), "attention_backward", inputs,
                     "needs grad [N, T, E] for qkv [N, T, 3E]");
    return TensorMetas{inputs[1]};
  };
  def.cpu_kernel = kernels::floating_kernel([]<typename T>(T /*zero*/, const KernelArgs& args) {
    const Heads h = heads_of("attention_backward", args.input_meta, 1, args.attrs);
    HeadBuffers<T> buf(h);
    std::vector<T> grad(buf.q.size()), dp(buf.s.size()), ds(buf.s.size()), dq(buf.q.size()), dk(buf.q.size()),
        dv(buf.q.size());
    const kernels::Scale scale{h.scale};
    const std::int64_t width = 3 * h.e;
    for (std::int64_t b = 0; b < h.n; ++b) {
      for (std::int64_t head = 0; head < h.heads; ++head) {
        attention_weights(args.input<T>(1), h, b, head, buf);
        gather(args.input<T>(0) + b * h.t * h.e + head * h.d, h.e, h, grad.data(), [](T x) { return x; });
        // context = P v: dP = grad vᵀ, dv = Pᵀ grad (bmm's gradients).
        kernels::gemm(false, true, h.t, h.t, h.d, grad.data(), buf.v.data(), dp.data());
        kernels::gemm(true, false, h.t, h.d, h.t, buf.p.data(), grad.data(), dv.data());
        for (std::int64_t i = 0; i < h.t; ++i) {
          kernels::softmax_backward_row(dp.data() + i * h.t, buf.p.data() + i * h.t, ds.data() + i * h.t, h.t, 1,
                                        false);
        }
        // S = q kᵀ with q scaled: dq = scale · (dS k), dk = dSᵀ q.
        kernels::gemm(false, false, h.t, h.d, h.t, ds.data(), buf.k.data(), dq.data());
        kernels::gemm(true, false, h.t, h.d, h.t, ds.data(), buf.q.data(), dk.data());
        for (T& x : dq) x = scale(x);
        T* out = args.output<T>(0);
        scatter(dq.data(), h, out + b * h.t * width + head * h.d, width);
        scatter(dk.data(), h, out + b * h.t * width + h.e + head * h.d, width);
        scatter(dv.data(), h, out + b * h.t * width + 2 * h.e + head * h.d, width);
      }
    }
  });
  // The forward's products again and four more, 2 T² D each per head.
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    const Heads h = heads_of("attention_backward", inputs, 1, attrs);
    const double per_head = 12.0 * static_cast<double>(h.t * h.t * h.d) + 8.0 * static_cast<double>(h.t * h.t);
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

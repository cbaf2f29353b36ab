// Matrix products: matmul, batched matmul, linear and linear_add, on kernels::gemm (oneDNN for float32, OpenBLAS
// for float64).
#include <algorithm>
#include <cstdint>
#include <string>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/dense/gemm.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {


// The number of rows of a [..., d] tensor seen as a matrix.
std::int64_t leading_rows(const Shape& shape) {
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  return rows;
}

// The [m, k] × [k, n] problem of two stored matrices (the last two dimensions of `a` and `b`), after the
// transposes the attributes ask for; ShapeError naming `op` unless the inner dimensions agree.
struct Product {
  bool transpose_a = false;
  bool transpose_b = false;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
};

Product product(const std::string& op, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  Product p{attrs.get_flag("transpose_a"), attrs.get_flag("transpose_b")};
  const Shape& a = inputs[0].shape;
  const Shape& b = inputs[1].shape;
  const std::size_t ra = a.size();
  const std::size_t rb = b.size();
  p.m = p.transpose_a ? a[ra - 1] : a[ra - 2];
  p.k = p.transpose_a ? a[ra - 2] : a[ra - 1];
  const std::int64_t kb = p.transpose_b ? b[rb - 1] : b[rb - 2];
  p.n = p.transpose_b ? b[rb - 2] : b[rb - 1];
  DTR_CHECK_SHAPES(p.k == kb, op, inputs, "multiplies [m, k] by [k, n] (transpose_a ", p.transpose_a,
                   ", transpose_b ", p.transpose_b, ")");
  return p;
}

TensorMetas infer_matmul(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("matmul", inputs, 2);
  kernels::check_floating("matmul", inputs);
  DTR_CHECK_SHAPES(inputs[0].shape.size() == 2 && inputs[1].shape.size() == 2, "matmul", inputs,
                   "multiplies two matrices");
  const Product p = product("matmul", inputs, attrs);
  return {TensorMeta{{p.m, p.n}, inputs[0].dtype}};
}

void matmul_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const Product p = product("matmul", args.input_meta, args.attrs);
    kernels::gemm(p.transpose_a, p.transpose_b, p.m, p.n, p.k, args.input<T>(0), args.input<T>(1), args.output<T>(0));
  });
}

double matmul_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const Product p = product("matmul", inputs, attrs);
  return kernels::at_least_one(2.0 * static_cast<double>(p.m) * static_cast<double>(p.k) * static_cast<double>(p.n));
}

TensorMetas infer_bmm(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("bmm", inputs, 2);
  kernels::check_floating("bmm", inputs);
  DTR_CHECK_SHAPES(inputs[0].shape.size() == 3 && inputs[1].shape.size() == 3 &&
                       inputs[0].shape[0] == inputs[1].shape[0],
                   "bmm", inputs, "multiplies two batches of matrices of the same batch size");
  const Product p = product("bmm", inputs, attrs);
  return {TensorMeta{{inputs[0].shape[0], p.m, p.n}, inputs[0].dtype}};
}

void bmm_cpu(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const Product p = product("bmm", args.input_meta, args.attrs);
    const std::int64_t batch = args.input_meta[0].shape[0];
    for (std::int64_t i = 0; i < batch; ++i) {
      kernels::gemm(p.transpose_a, p.transpose_b, p.m, p.n, p.k, args.input<T>(0) + i * p.m * p.k,
                    args.input<T>(1) + i * p.k * p.n, args.output<T>(0) + i * p.m * p.n);
    }
  });
}

double bmm_flops(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return kernels::at_least_one(static_cast<double>(inputs[0].shape[0]) * matmul_flops(inputs, attrs));
}

// x [..., in] mapped by w [out, in], the output [..., out], for op `name` (linear, linear_add), with a bias
// [out] at input `bias` when there is one.
TensorMeta mapped_output(const char* name, std::span<const TensorMeta> inputs, std::size_t bias) {
  kernels::check_floating(name, inputs);
  const Shape& x = inputs[0].shape;
  const Shape& w = inputs[1].shape;
  DTR_CHECK_SHAPES(!x.empty() && w.size() == 2 && x.back() == w[1], name, inputs,
                   "maps an input [..., in] by a weight [out, in]");
  if (inputs.size() > bias) DTR_CHECK_SHAPES(inputs[bias].shape == Shape{w[0]}, name, inputs, "adds a bias [out]");
  TensorMeta out = inputs[0];
  out.shape.back() = w[0];
  return out;
}

// linear(x [..., in], w [out, in], optional bias [out]) = x wᵀ + bias, as PyTorch's.
TensorMetas infer_linear(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  DTR_CHECK_SHAPES(inputs.size() == 2 || inputs.size() == 3, "linear", inputs,
                   "takes an input, a weight and an optional bias");
  return {mapped_output("linear", inputs, 2)};
}

// linear_add(x [..., in], w [out, in], addend [..., out], optional bias [out]) = addend + x wᵀ + bias.
TensorMetas infer_linear_add(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  DTR_CHECK_SHAPES(inputs.size() == 3 || inputs.size() == 4, "linear_add", inputs,
                   "takes an input, a weight, an addend and an optional bias");
  const TensorMeta out = mapped_output("linear_add", inputs, 3);
  DTR_CHECK_SHAPES(inputs[2].shape == out.shape, "linear_add", inputs, "adds an addend of the output's shape ",
                   to_string(out.shape));
  return {out};
}

// y = x wᵀ (+ bias) for linear; for linear_add y starts as addend (+ bias), onto which the GEMM accumulates.
template <bool kAddend>
void linear_kernel(const KernelArgs& args) {
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const std::int64_t in = args.input_meta[1].shape[1];
    const std::int64_t out = args.input_meta[1].shape[0];
    const std::int64_t rows = leading_rows(args.input_meta[0].shape);
    const std::size_t bias_input = kAddend ? 3 : 2;
    const T* bias = args.inputs.size() > bias_input ? args.input<T>(bias_input) : nullptr;
    T* y = args.output<T>(0);
    // Rows over the threads (each row's elements are its own: the same bits at any thread count).
    const auto each_row = [&](auto&& row) { kernels::parallel_for_items(rows, rows * out, row); };
    if constexpr (kAddend) {
      const T* addend = args.input<T>(2);
      if (bias != nullptr) {
        each_row([&](std::int64_t r) {
          for (std::int64_t j = 0; j < out; ++j) y[r * out + j] = addend[r * out + j] + bias[j];
        });
      } else {
        std::copy(addend, addend + rows * out, y);
      }
    }
    kernels::gemm(false, true, rows, out, in, args.input<T>(0), args.input<T>(1), y, /*accumulate=*/kAddend);
    if (!kAddend && bias != nullptr) {
      each_row([&](std::int64_t r) {
        for (std::int64_t j = 0; j < out; ++j) y[r * out + j] += bias[j];
      });
    }
  });
}

double linear_add_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  const double in = static_cast<double>(inputs[1].shape[1]);
  const double out = static_cast<double>(inputs[1].shape[0]);
  const double rows = static_cast<double>(leading_rows(inputs[0].shape));
  return kernels::at_least_one(2.0 * rows * in * out + rows * out + (inputs.size() == 4 ? rows * out : 0.0));
}

double linear_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  const double in = static_cast<double>(inputs[1].shape[1]);
  const double out = static_cast<double>(inputs[1].shape[0]);
  const double rows = static_cast<double>(leading_rows(inputs[0].shape));
  return kernels::at_least_one(2.0 * rows * in * out + (inputs.size() == 3 ? rows * out : 0.0));
}

}  // namespace

const OpDef& matmul() {
  return kernels::define_op(
      [] { return OpDef{.name = "matmul", .infer = infer_matmul, .cpu_kernel = matmul_cpu, .flops = matmul_flops}; });
}

const OpDef& bmm() {
  return kernels::define_op(
      [] { return OpDef{.name = "bmm", .infer = infer_bmm, .cpu_kernel = bmm_cpu, .flops = bmm_flops}; });
}

const OpDef& linear() {
  return kernels::define_op(
      [] { return OpDef{.name = "linear", .infer = infer_linear, .cpu_kernel = linear_kernel<false>,
                        .flops = linear_flops}; });
}

const OpDef& linear_add() {
  return kernels::define_op([] {
    return OpDef{.name = "linear_add", .infer = infer_linear_add, .cpu_kernel = linear_kernel<true>,
                 .flops = linear_add_flops};
  });
}

}  // namespace dtr::ops

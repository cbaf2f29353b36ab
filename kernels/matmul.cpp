// Matrix product, a naive CPU reference: correctness and bitwise reproducibility, not speed.
#include <algorithm>
#include <cstdint>

#include "dtr/ops.h"
#include "op_checks.h"

namespace dtr::ops {
namespace {

TensorMetas infer_matmul(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("matmul", inputs, 2);
  const Shape& a = inputs[0].shape;
  const Shape& b = inputs[1].shape;
  DTR_CHECK_SHAPES(a.size() == 2 && b.size() == 2 && a[1] == b[0], "matmul", inputs,
                   "multiplies [m, k] by [k, n]");
  return {TensorMeta{{a[0], b[1]}, inputs[0].dtype}};
}

void matmul_cpu(const KernelArgs& args) {
  const std::int64_t m = args.input_meta[0].shape[0];
  const std::int64_t k = args.input_meta[0].shape[1];
  const std::int64_t n = args.input_meta[1].shape[1];
  const float* a = args.inputs[0];
  const float* b = args.inputs[1];
  float* c = args.outputs[0];
  std::fill_n(c, m * n, 0.0F);
  // i-k-j order: the inner loop walks rows of b and c contiguously, and each c[i, j] still sums over p in
  // increasing order, so the result does not depend on vectorization.
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p = 0; p < k; ++p) {
      const float a_ip = a[i * k + p];
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += a_ip * b[p * n + j];
    }
  }
}

double matmul_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  const double m = static_cast<double>(inputs[0].shape[0]);
  const double k = static_cast<double>(inputs[0].shape[1]);
  const double n = static_cast<double>(inputs[1].shape[1]);
  return kernels::at_least_one(2.0 * m * k * n);
}

}  // namespace

const OpDef& matmul() {
  static const OpDef def{
      .name = "matmul", .infer = infer_matmul, .cpu_kernel = matmul_cpu, .flops = matmul_flops};
  return def;
}

}  // namespace dtr::ops

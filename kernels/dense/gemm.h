// Row-major matrix products on the CPU, the one place kernels call a BLAS: float32 through oneDNN's dnnl_sgemm,
// on OpenMP's threads like every other threaded CPU kernel (one pool: docs/kernels.md, "Threads"); float64
// through OpenBLAS (oneDNN has no float64 GEMM).
#pragma once

#include <cstdint>

namespace dtr::kernels {

// c[m, n] = op(a) · op(b), or c += op(a) · op(b) when `accumulate`. op(a) is a [m, k] matrix stored as
// [m, k], or as [k, m] when `transpose_a`; op(b) is [k, n], stored as [k, n] or [n, k]. Any dimension may be
// 0 (k = 0: c is zero, or unchanged when accumulating). For given sizes and thread count the result's bits
// do not depend on the buffers' addresses: a recomputation gives the first run's bits.
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          const float* b, float* c, bool accumulate = false);
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const double* a,
          const double* b, double* c, bool accumulate = false);

}  // namespace dtr::kernels

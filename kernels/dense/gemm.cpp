#include "kernels/dense/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "dtr/check.h"

namespace dtr::kernels {
namespace {

// BLAS takes int dimensions; larger matrices are an error, not an overflow.
blasint blas_int(std::int64_t value) {
  DTR_CHECK(value >= 0 && value <= std::numeric_limits<blasint>::max(), InvalidArgument, "gemm: dimension ", value,
            " does not fit the BLAS integer type");
  return static_cast<blasint>(value);
}

template <typename T, typename Gemm>
void gemm_with(Gemm blas_gemm, bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
               const T* a, const T* b, T* c, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) std::fill_n(c, m * n, T(0));
    return;
  }
  // Leading dimensions of the stored (row-major) matrices.
  const std::int64_t lda = transpose_a ? m : k;
  const std::int64_t ldb = transpose_b ? k : n;
  blas_gemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
            blas_int(m), blas_int(n), blas_int(k), T(1), a, blas_int(lda), b, blas_int(ldb), accumulate ? T(1) : T(0),
            c, blas_int(n));
}

}  // namespace

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          const float* b, float* c, bool accumulate) {
  gemm_with<float>(cblas_sgemm, transpose_a, transpose_b, m, n, k, a, b, c, accumulate);
}

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const double* a,
          const double* b, double* c, bool accumulate) {
  gemm_with<double>(cblas_dgemm, transpose_a, transpose_b, m, n, k, a, b, c, accumulate);
}

}  // namespace dtr::kernels

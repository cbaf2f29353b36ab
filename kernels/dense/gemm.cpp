#include "kernels/dense/gemm.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

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

// The empty cases, which BLAS libraries treat unevenly; then product(lda, ldb, beta), the leading dimensions of
// the stored (row-major) matrices and 0 or 1.
template <typename T, typename Product>
void gemm_with(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T* c,
               bool accumulate, Product product) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) std::fill_n(c, m * n, T(0));
    return;
  }
  product(transpose_a ? m : k, transpose_b ? k : n, accumulate ? T(1) : T(0));
}

}  // namespace

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          const float* b, float* c, bool accumulate) {
  const auto product = [&](std::int64_t lda, std::int64_t ldb, float beta) {
    const dnnl_status_t status =
        dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, 1.0F, a, lda, b, ldb, beta, c, n);
    DTR_CHECK(status == dnnl_success, DeviceError, "gemm: oneDNN's sgemm failed (status ", static_cast<int>(status),
              ") on [", m, ", ", k, "] x [", k, ", ", n, "]");
  };
  gemm_with<float>(transpose_a, transpose_b, m, n, k, c, accumulate, product);
}

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, const double* a,
          const double* b, double* c, bool accumulate) {
  const auto product = [&](std::int64_t lda, std::int64_t ldb, double beta) {
    cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
                blas_int(m), blas_int(n), blas_int(k), 1.0, a, blas_int(lda), b, blas_int(ldb), beta, c, blas_int(n));
  };
  gemm_with<double>(transpose_a, transpose_b, m, n, k, c, accumulate, product);
}

}  // namespace dtr::kernels

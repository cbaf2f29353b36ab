// vector_math.h's routines in AVX2's 256-bit lanes (8 floats, 4 doubles). Compiled with -mavx2 -mfma
// (kernels/CMakeLists.txt); called only where the CPU runs them (vector_math_libmvec.cpp).
#include <immintrin.h>

#include "kernels/elementwise/vector_math.h"
#include "kernels/elementwise/vector_lanes.h"

extern "C" {
__m256 _ZGVdN8v_expf(__m256 x);   // NOLINT(bugprone-reserved-identifier): libmvec's symbol
__m256 _ZGVdN8v_tanhf(__m256 x);  // NOLINT(bugprone-reserved-identifier)
__m256d _ZGVdN4v_exp(__m256d x);  // NOLINT(bugprone-reserved-identifier)
}

namespace dtr::kernels {
namespace {

struct Avx2 {
  using Floats = __m256;
  using Doubles = __m256d;
  static Floats set(float v) { return _mm256_set1_ps(v); }
  static Floats add(Floats a, Floats b) { return _mm256_add_ps(a, b); }
  static Floats div(Floats a, Floats b) { return _mm256_div_ps(a, b); }
  static Floats negative_abs(Floats x) { return _mm256_or_ps(x, _mm256_set1_ps(-0.0F)); }
  static Floats select_non_negative(Floats x, Floats if_so, Floats if_not) {
    const Floats non_negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
    return _mm256_blendv_ps(if_not, if_so, non_negative);
  }
  static Floats expf(Floats x) { return _ZGVdN8v_expf(x); }
  static Floats tanhf(Floats x) { return _ZGVdN8v_tanhf(x); }
  static Doubles exp(Doubles x) { return _ZGVdN4v_exp(x); }
};

}  // namespace

VectorRoutines avx2_vector_routines() { return routines_of<Avx2>(256); }

}  // namespace dtr::kernels

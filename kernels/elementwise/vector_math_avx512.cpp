// vector_math.h's routines in AVX-512's 512-bit lanes (16 floats, 8 doubles). Compiled with -mavx512f
// (kernels/CMakeLists.txt); called only where the CPU runs them (vector_math_libmvec.cpp).
#include <immintrin.h>

#include "kernels/elementwise/vector_math.h"
#include "kernels/elementwise/vector_lanes.h"

extern "C" {
__m512 _ZGVeN16v_expf(__m512 x);   // NOLINT(bugprone-reserved-identifier): libmvec's symbol
__m512 _ZGVeN16v_tanhf(__m512 x);  // NOLINT(bugprone-reserved-identifier)
__m512d _ZGVeN8v_exp(__m512d x);   // NOLINT(bugprone-reserved-identifier)
}

namespace dtr::kernels {
namespace {

struct Avx512 {
  using Floats = __m512;
  using Doubles = __m512d;
  static Floats set(float v) { return _mm512_set1_ps(v); }
  static Floats add(Floats a, Floats b) { return _mm512_add_ps(a, b); }
  static Floats div(Floats a, Floats b) { return _mm512_div_ps(a, b); }
  // The sign bit set through the integer lanes (AVX-512F has no float OR; that is AVX-512DQ's).
  static Floats negative_abs(Floats x) {
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
  }
  static Floats select_non_negative(Floats x, Floats if_so, Floats if_not) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), if_not, if_so);
  }
  static Floats expf(Floats x) { return _ZGVeN16v_expf(x); }
  static Floats tanhf(Floats x) { return _ZGVeN16v_tanhf(x); }
  static Doubles exp(Doubles x) { return _ZGVeN8v_exp(x); }
};

}  // namespace

VectorRoutines avx512_vector_routines() { return routines_of<Avx512>(512); }

}  // namespace dtr::kernels

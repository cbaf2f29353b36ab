// vector_math.h's routines in SSE's 128-bit lanes (4 floats, 2 doubles), which every x86-64 CPU runs: glibc's
// libmvec picks the best implementation of its functions for the CPU when it loads them.
#include <immintrin.h>

#include "kernels/elementwise/vector_math.h"
#include "kernels/elementwise/vector_lanes.h"

// The x86-64 vector function ABI's names (libmvec.so.1).
extern "C" {
__m128 _ZGVbN4v_expf(__m128 x);   // NOLINT(bugprone-reserved-identifier): libmvec's symbol
__m128 _ZGVbN4v_tanhf(__m128 x);  // NOLINT(bugprone-reserved-identifier)
__m128d _ZGVbN2v_exp(__m128d x);  // NOLINT(bugprone-reserved-identifier)
}

namespace dtr::kernels {
namespace {

struct Sse {
  using Floats = __m128;
  using Doubles = __m128d;
  static Floats set(float v) { return _mm_set1_ps(v); }
  static Floats add(Floats a, Floats b) { return _mm_add_ps(a, b); }
  static Floats div(Floats a, Floats b) { return _mm_div_ps(a, b); }
  static Floats negative_abs(Floats x) { return _mm_or_ps(x, _mm_set1_ps(-0.0F)); }
  static Floats select_non_negative(Floats x, Floats if_so, Floats if_not) {
    const Floats non_negative = _mm_cmpge_ps(x, _mm_setzero_ps());
    return _mm_or_ps(_mm_and_ps(non_negative, if_so), _mm_andnot_ps(non_negative, if_not));
  }
  static Floats expf(Floats x) { return _ZGVbN4v_expf(x); }
  static Floats tanhf(Floats x) { return _ZGVbN4v_tanhf(x); }
  static Doubles exp(Doubles x) { return _ZGVbN2v_exp(x); }
};

}  // namespace

VectorRoutines sse_vector_routines() { return routines_of<Sse>(128); }

}  // namespace dtr::kernels

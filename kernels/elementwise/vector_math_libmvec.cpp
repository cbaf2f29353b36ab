// vector_math.h on glibc's libmvec (x86-64, glibc >= 2.35): its four-lane SSE variants, which any x86-64 CPU
// runs (glibc picks their best implementation for the CPU when it loads them).
#include <immintrin.h>

#include <cstring>

#include "kernels/elementwise/vector_math.h"

// The x86-64 vector function ABI's names for expf and tanhf on four floats (libmvec.so.1).
extern "C" {
__m128 _ZGVbN4v_expf(__m128 x);   // NOLINT(bugprone-reserved-identifier): libmvec's symbol
__m128 _ZGVbN4v_tanhf(__m128 x);  // NOLINT(bugprone-reserved-identifier)
}

namespace dtr::kernels {
namespace {

constexpr std::int64_t kLanes = 4;

template <typename Lanes>
void over_lanes(const float* in, float* out, std::int64_t count, Lanes lanes) {
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) _mm_storeu_ps(out + i, lanes(_mm_loadu_ps(in + i)));
  if (i == count) return;
  // The tail through the same routine as the rest, padded with zeros whose results are dropped.
  alignas(16) float tail[kLanes] = {0.0F, 0.0F, 0.0F, 0.0F};
  const std::size_t bytes = static_cast<std::size_t>(count - i) * sizeof(float);
  std::memcpy(tail, in + i, bytes);
  _mm_store_ps(tail, lanes(_mm_load_ps(tail)));
  std::memcpy(out + i, tail, bytes);
}

// elementwise_math.h's Sigmoid in lanes: both branches exponentiate -|x| (no overflow), 1 / (1 + e) where
// x >= 0 and e / (1 + e) elsewhere (NaN included, which stays NaN).
__m128 sigmoid_lanes(__m128 x) {
  const __m128 one = _mm_set1_ps(1.0F);
  const __m128 e = _ZGVbN4v_expf(_mm_or_ps(x, _mm_set1_ps(-0.0F)));
  const __m128 denominator = _mm_add_ps(one, e);
  const __m128 non_negative = _mm_cmpge_ps(x, _mm_setzero_ps());
  return _mm_or_ps(_mm_and_ps(non_negative, _mm_div_ps(one, denominator)),
                   _mm_andnot_ps(non_negative, _mm_div_ps(e, denominator)));
}

}  // namespace

void sigmoid_floats(const float* in, float* out, std::int64_t count) { over_lanes(in, out, count, sigmoid_lanes); }

void tanh_floats(const float* in, float* out, std::int64_t count) {
  over_lanes(in, out, count, [](__m128 x) { return _ZGVbN4v_tanhf(x); });
}

}  // namespace dtr::kernels

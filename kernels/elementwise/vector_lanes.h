// The array routines of vector_math.h written once over a width's operations (`V`: its float and double
// vectors, loads, stores, arithmetic and libmvec's functions at that width). Each instruction set's source
// (vector_math_sse.cpp, _avx2.cpp, _avx512.cpp) is compiled with its own flags and includes this header, so
// these templates stay internal to it: nothing compiled for a wider set can be linked into a narrower path.
#pragma once

#include <cstdint>
#include <cstring>

namespace dtr::kernels {
namespace {  // NOLINT(cert-dcl59-cpp,google-build-namespaces): one private copy per instruction set's source

// `lanes` over count values of Scalar, V::lanes<Scalar> at a time; the tail through the same routine, padded
// with zeros whose results are dropped.
template <class Vector, class Scalar, class Lanes>
inline void over_lanes(const Scalar* in, Scalar* out, std::int64_t count, Lanes lanes) {
  constexpr std::int64_t kLanes = sizeof(Vector) / sizeof(Scalar);
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    Vector v;
    std::memcpy(&v, in + i, sizeof v);  // an unaligned load
    v = lanes(v);
    std::memcpy(out + i, &v, sizeof v);
  }
  if (i == count) return;
  Vector tail;
  std::memset(&tail, 0, sizeof tail);
  const std::size_t bytes = static_cast<std::size_t>(count - i) * sizeof(Scalar);
  std::memcpy(&tail, in + i, bytes);
  tail = lanes(tail);
  std::memcpy(out + i, &tail, bytes);
}

// elementwise_math.h's Sigmoid in lanes: both branches exponentiate -|x| (no overflow), 1 / (1 + e) where
// x >= 0 and e / (1 + e) elsewhere (NaN included, which stays NaN).
template <class V>
inline typename V::Floats sigmoid_lanes(typename V::Floats x) {
  const typename V::Floats one = V::set(1.0F);
  const typename V::Floats e = V::expf(V::negative_abs(x));
  const typename V::Floats denominator = V::add(one, e);
  return V::select_non_negative(x, V::div(one, denominator), V::div(e, denominator));
}

// The routines at V's width. Aggregate-initialised: no inline function of a shared header (such as a
// constructor) is compiled here with V's instruction set, where the linker could pick it for other callers.
template <class V>
VectorRoutines routines_of(int bits) {
  return VectorRoutines{
      bits,
      [](const float* in, float* out, std::int64_t count) {
        over_lanes<typename V::Floats>(in, out, count, sigmoid_lanes<V>);
      },
      [](const float* in, float* out, std::int64_t count) {
        over_lanes<typename V::Floats>(in, out, count, [](typename V::Floats x) { return V::tanhf(x); });
      },
      [](const double* in, double* out, std::int64_t count) {
        over_lanes<typename V::Doubles>(in, out, count, [](typename V::Doubles x) { return V::exp(x); });
      }};
}

}  // namespace
}  // namespace dtr::kernels

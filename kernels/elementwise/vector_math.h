// Float32 sigmoid and tanh over arrays on the CPU, several lanes at a time: the LSTM's gates spend most of
// their time in them, element by element in libm. Which implementation is built is the build's choice
// (kernels/CMakeLists.txt): glibc's vector math library (libmvec) where it has these functions, else
// elementwise_math.h's scalar functors.
//
// Every element goes through the same routine wherever it sits (a short tail is padded to a full vector), so
// an element's result depends on its value only, not on how parallel_for_ranges cuts the array: a
// rematerialization gives the bits the first run gave. `in` and `out` may be the same array (an in-place
// update); otherwise they must not overlap. Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace dtr::kernels {

void sigmoid_floats(const float* in, float* out, std::int64_t count);
void tanh_floats(const float* in, float* out, std::int64_t count);

}  // namespace dtr::kernels

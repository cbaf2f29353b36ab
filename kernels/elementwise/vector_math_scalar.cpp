// vector_math.h where the build has no vector math library: elementwise_math.h's functors and std::exp, one
// element at a time.
#include <cmath>

#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"

namespace dtr::kernels {

void sigmoid_floats(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = Sigmoid{}(in[i]);
}

void tanh_floats(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = Tanh{}(in[i]);
}

void exp_doubles(const double* in, double* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = std::exp(in[i]);
}

std::vector<VectorRoutines> runnable_vector_routines() {
  return {VectorRoutines{0, sigmoid_floats, tanh_floats, exp_doubles}};
}

}  // namespace dtr::kernels

// vector_math.h where the build has no vector math library: elementwise_math.h's functors, one element at a time.
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"

namespace dtr::kernels {

void sigmoid_floats(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = Sigmoid{}(in[i]);
}

void tanh_floats(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = Tanh{}(in[i]);
}

}  // namespace dtr::kernels

// vector_math.h on glibc's libmvec (x86-64, glibc >= 2.35): the widest lanes this CPU runs, chosen at the first
// call (the instruction sets' routines: vector_math_sse.cpp, _avx2.cpp, _avx512.cpp).
#include "kernels/elementwise/vector_math.h"

namespace dtr::kernels {

VectorRoutines sse_vector_routines();
VectorRoutines avx2_vector_routines();
VectorRoutines avx512_vector_routines();

std::vector<VectorRoutines> runnable_vector_routines() {
  __builtin_cpu_init();
  std::vector<VectorRoutines> routines{sse_vector_routines()};
  // libmvec's 256-bit variants are AVX2's (FMA beside it), its 512-bit ones AVX-512F's; the CPU model checks
  // that the operating system saves those registers too.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) routines.push_back(avx2_vector_routines());
  if (__builtin_cpu_supports("avx512f")) routines.push_back(avx512_vector_routines());
  return routines;
}

namespace {
const VectorRoutines& chosen() {
  static const VectorRoutines widest = runnable_vector_routines().back();
  return widest;
}
}  // namespace

void sigmoid_floats(const float* in, float* out, std::int64_t count) { chosen().sigmoid(in, out, count); }
void tanh_floats(const float* in, float* out, std::int64_t count) { chosen().tanh(in, out, count); }
void exp_doubles(const double* in, double* out, std::int64_t count) { chosen().exp(in, out, count); }

}  // namespace dtr::kernels

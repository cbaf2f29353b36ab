// Float32 sigmoid and tanh and float64 exp over arrays on the CPU, many lanes at a time: the LSTM's gates and
// the softmax rows (the attention's among them) spend much of their time in them, element by element in libm.
// Which implementation is built is the build's choice (kernels/CMakeLists.txt): glibc's vector math library
// (libmvec) where it has these functions, else elementwise_math.h's scalar functors.
//
// With libmvec the widest lanes the CPU runs are taken (AVX-512: 16 floats, AVX2: 8, else SSE's 4), chosen
// once per process, so that every run of an op in a process gives the same bits. Every element goes through
// the same routine wherever it sits (a short tail is padded to a full vector), so an element's result depends
// on its value only, not on how a kernel cuts the array: a rematerialization gives the bits the first run gave.
// `in` and `out` may be the same array (an in-place update); otherwise they must not overlap.
// Thread safety: pure functions (the choice of lanes is made once, thread-safely, at the first call).
#pragma once

#include <cstdint>
#include <vector>

namespace dtr::kernels {

void sigmoid_floats(const float* in, float* out, std::int64_t count);
void tanh_floats(const float* in, float* out, std::int64_t count);
void exp_doubles(const double* in, double* out, std::int64_t count);

// The three routines at one width of lanes.
struct VectorRoutines {
  int bits = 0;  // 128 (SSE), 256 (AVX2), 512 (AVX-512); 0: the scalar functors
  void (*sigmoid)(const float*, float*, std::int64_t) = nullptr;
  void (*tanh)(const float*, float*, std::int64_t) = nullptr;
  void (*exp)(const double*, double*, std::int64_t) = nullptr;
};
// Every width this build and CPU can run, narrowest first; the last is the one the functions above use
// (tests check each).
std::vector<VectorRoutines> runnable_vector_routines();

// Exps of a run of values in place, in lanes (normalization_math.h's softmax rows on the CPU).
struct ExpsInLanes {
  void operator()(double* values, std::int64_t count) const { exp_doubles(values, values, count); }
};

}  // namespace dtr::kernels

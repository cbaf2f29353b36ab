// Float32 sigmoid and tanh and float64 exp on the CPU (kernels/elementwise/vector_math.h, libmvec's lanes where
// the build has them) at every width of lanes this CPU runs, against the element-by-element functions the
// kernels ran before (elementwise_math.h's functors, std::exp), on the same buffers in one run, one thread.
// Sizes: an LSTM gate of the zoo's default (batch 128 x hidden 128), a tenth of it, and a million elements.
// Rounds alternate the variants; each figure is the median over rounds of one call's time, and each ratio
// the median of the per-round ratios to the scalar call. Also the largest difference from the scalar result
// in ulps of that result (float32 or float64), over the values timed. The kernels use the widest lanes.
//
// dtr-bench-activations [--rounds N] (default 101).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "bench_main.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"

namespace {

using Clock = std::chrono::steady_clock;

void sigmoid_scalar(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = dtr::kernels::Sigmoid{}(in[i]);
}
void tanh_scalar(const float* in, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = dtr::kernels::Tanh{}(in[i]);
}
void exp_scalar(const double* in, double* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = std::exp(in[i]);
}

template <typename T>
using Routine = void (*)(const T*, T*, std::int64_t);

template <typename T>
double seconds(Routine<T> fn, const std::vector<T>& in, std::vector<T>& out) {
  const auto start = Clock::now();
  fn(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <typename T>
double max_ulps(const std::vector<T>& got, const std::vector<T>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ulp = std::max(std::abs(double{want[i]}) * std::numeric_limits<T>::epsilon(),
                                double{std::numeric_limits<T>::denorm_min()});
    worst = std::max(worst, std::abs(double{got[i]} - double{want[i]}) / ulp);
  }
  return worst;
}

// One op at one size: the scalar routine and every width, rotated through each round.
template <typename T>
void compare(const char* name, std::int64_t count, Routine<T> scalar, const std::vector<Routine<T>>& widths,
             const std::vector<int>& bits, int rounds) {
  std::vector<T> in(static_cast<std::size_t>(count));
  std::mt19937 gen(1);
  // Sigmoid and tanh: pre-activations of an initialised layer, spread; exp: softmax's x - max, all <= 0.
  std::normal_distribution<double> spread(0.0, 2.0);
  for (T& v : in) v = static_cast<T>(std::is_same_v<T, double> ? -std::abs(3.0 * spread(gen)) : spread(gen));
  std::vector<T> scalar_out(in.size());
  std::vector<std::vector<T>> outs(widths.size(), std::vector<T>(in.size()));
  std::vector<double> scalar_s;
  std::vector<std::vector<double>> width_s(widths.size()), ratios(widths.size());
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> t(widths.size() + 1);
    for (std::size_t k = 0; k <= widths.size(); ++k) {
      const std::size_t v = (k + static_cast<std::size_t>(r)) % (widths.size() + 1);  // who goes first rotates
      t[v] = v == 0 ? seconds(scalar, in, scalar_out) : seconds(widths[v - 1], in, outs[v - 1]);
    }
    scalar_s.push_back(t[0]);
    for (std::size_t w = 0; w < widths.size(); ++w) {
      width_s[w].push_back(t[w + 1]);
      ratios[w].push_back(t[w + 1] / t[0]);
    }
  }
  for (std::size_t w = 0; w < widths.size(); ++w) {
    std::printf("| %s | %lld | %.1f us | %d | %.1f us | %.3f | %.1f |\n", name, static_cast<long long>(count),
                dtr::bench::median(scalar_s) * 1e6, bits[w], dtr::bench::median(width_s[w]) * 1e6,
                dtr::bench::median(ratios[w]), max_ulps(outs[w], scalar_out));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"float32 sigmoid and tanh, float64 exp: vector_math.h's lanes at every width against the scalar "
               "functions"};
  int rounds = 101;
  app.add_option("--rounds", rounds, "rounds per case, the variants rotated in each")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::vector<dtr::kernels::VectorRoutines> routines = dtr::kernels::runnable_vector_routines();
  std::vector<Routine<float>> sigmoid, tanh;
  std::vector<Routine<double>> exp;
  std::vector<int> bits;
  for (const dtr::kernels::VectorRoutines& r : routines) {
    sigmoid.push_back(r.sigmoid);
    tanh.push_back(r.tanh);
    exp.push_back(r.exp);
    bits.push_back(r.bits);
  }
  std::printf("| op | elements | scalar (median) | lanes (bits; 0: scalar build) | lanes (median) | lanes / scalar | "
              "max difference (ulps) |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const std::int64_t count : {std::int64_t{1638}, std::int64_t{16384}, std::int64_t{1} << 20}) {
    compare<float>("sigmoid", count, sigmoid_scalar, sigmoid, bits, rounds);
    compare<float>("tanh", count, tanh_scalar, tanh, bits, rounds);
    compare<double>("exp (float64)", count, exp_scalar, exp, bits, rounds);
  }
  return 0;
}

// Float32 sigmoid and tanh on the CPU (kernels/elementwise/vector_math.h, libmvec's lanes where the build has
// them) against the element-by-element functors the kernels ran before (elementwise_math.h, libm), on the
// same buffers in one run, one thread. Sizes: an LSTM gate of the zoo's default (batch 128 x hidden 128), a
// tenth of it, and a million elements. Rounds alternate the two; each figure is the median over rounds of
// one call's time, and the ratio the median of the per-round ratios. Also the largest difference between
// the two in float32 ulps of the scalar result, over the values timed.
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
#include <vector>

#include "bench_main.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"

namespace {

using Clock = std::chrono::steady_clock;
using Lanes = void (*)(const float*, float*, std::int64_t);

template <typename Fn>
void elementwise(const float* in, float* out, std::int64_t count, Fn fn) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = fn(in[i]);
}

void sigmoid_scalar(const float* in, float* out, std::int64_t count) {
  elementwise(in, out, count, dtr::kernels::Sigmoid{});
}
void tanh_scalar(const float* in, float* out, std::int64_t count) { elementwise(in, out, count, dtr::kernels::Tanh{}); }

double seconds(Lanes fn, const std::vector<float>& in, std::vector<float>& out) {
  const auto start = Clock::now();
  fn(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double max_ulps(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ulp = std::max(std::abs(double{want[i]}) * std::numeric_limits<float>::epsilon(),
                                double{std::numeric_limits<float>::denorm_min()});
    worst = std::max(worst, std::abs(double{got[i]} - double{want[i]}) / ulp);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"float32 sigmoid and tanh: vector_math.h's lanes against the scalar functors"};
  int rounds = 101;
  app.add_option("--rounds", rounds, "alternating rounds per case")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  struct Case {
    const char* name;
    Lanes lanes;
    Lanes scalar;
  };
  const Case cases[] = {{"sigmoid", dtr::kernels::sigmoid_floats, sigmoid_scalar},
                        {"tanh", dtr::kernels::tanh_floats, tanh_scalar}};
  std::printf("| op | elements | scalar (median) | lanes (median) | lanes / scalar | max difference (ulps) |\n"
              "|---|---:|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    for (const std::int64_t count : {std::int64_t{1638}, std::int64_t{16384}, std::int64_t{1} << 20}) {
      std::vector<float> in(static_cast<std::size_t>(count));
      std::mt19937 gen(1);
      std::normal_distribution<float> gate(0.0F, 2.0F);  // pre-activations of an initialised layer, spread
      for (float& v : in) v = gate(gen);
      std::vector<float> lanes_out(in.size()), scalar_out(in.size());
      std::vector<double> lanes_s, scalar_s, ratios;
      for (int r = 0; r < rounds; ++r) {
        double l = 0, s = 0;
        if (r % 2 == 0) {
          l = seconds(c.lanes, in, lanes_out);
          s = seconds(c.scalar, in, scalar_out);
        } else {
          s = seconds(c.scalar, in, scalar_out);
          l = seconds(c.lanes, in, lanes_out);
        }
        lanes_s.push_back(l);
        scalar_s.push_back(s);
        ratios.push_back(l / s);
      }
      std::printf("| %s | %lld | %.1f us | %.1f us | %.3f | %.1f |\n", c.name, static_cast<long long>(count),
                  dtr::bench::median(scalar_s) * 1e6, dtr::bench::median(lanes_s) * 1e6,
                  dtr::bench::median(ratios), max_ulps(lanes_out, scalar_out));
    }
  }
  return 0;
}

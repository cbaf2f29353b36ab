// broadcast_to and the sums over axes on the CPU (kernels/elementwise/axis_loops.h: merged dimensions, spread
// over the threads) against the loops the kernels ran before (one thread walking every element's index,
// dimension by dimension), kept here as the baseline, on the same buffers in one run. Shapes: U-Net's nearest
// upsampling at both levels of the zoo's default (batch 128, width 16) as it was until 2026-11-30, of 2c
// channels (it now upsamples c, after its 1x1 convolution; the shapes stay, for the results' sake), and its
// gradient, a global average pool's gradient (ResNet-32's last stage), a bias's row sums (a linear layer's
// gradient), a mean over the last axis. Rounds alternate the two; each figure is the median over rounds of one
// call's time, and each ratio the median of the per-round ratios. The outputs are checked equal (bitwise)
// before timing.
//
// dtr-bench-axis-loops [--rounds N] (default 31).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_main.h"
#include "kernels/elementwise/axis_loops.h"
#include "kernels/op_checks.h"

namespace {

using dtr::Shape;
using dtr::kernels::AxisMask;

std::int64_t numel_of(const Shape& shape) { return dtr::TensorMeta{shape}.numel(); }

// The baseline's index walk: one step in row-major order over dimensions [0, dims), `offset` kept current.
void advance(Shape& index, std::int64_t& offset, const Shape& strides, const Shape& shape, std::size_t dims) {
  for (std::size_t d = dims; d-- > 0;) {
    index[d] += 1;
    offset += strides[d];
    if (index[d] < shape[d]) return;
    offset -= strides[d] * shape[d];
    index[d] = 0;
  }
}

void broadcast_baseline(const float* x, const Shape& in, float* out, const Shape& shape) {
  const Shape strides = dtr::kernels::broadcast_strides(in, shape);
  Shape index(shape.size(), 0);
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < numel_of(shape); ++i) {
    out[i] = x[offset];
    advance(index, offset, strides, shape, shape.size());
  }
}

// Runs of the trailing dimensions that share the last one's mask, each added in index order in double.
void sum_baseline(const float* in, const Shape& shape, const AxisMask& mask, float* out, std::int64_t out_count) {
  std::vector<double> totals(static_cast<std::size_t>(out_count), 0.0);
  const std::size_t rank = shape.size();
  Shape strides(rank, 0);
  std::int64_t stride = 1;
  for (std::size_t d = rank; d-- > 0;) {
    if (mask[d]) continue;
    strides[d] = stride;
    stride *= shape[d];
  }
  std::size_t outer = rank - 1;
  while (outer > 0 && mask[outer - 1] == mask[rank - 1]) --outer;
  std::int64_t run = 1;
  for (std::size_t d = outer; d < rank; ++d) run *= shape[d];
  Shape index(outer, 0);
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < numel_of(shape); i += run) {
    const float* x = in + i;
    if (!mask[rank - 1]) {
      for (std::int64_t j = 0; j < run; ++j) totals[static_cast<std::size_t>(offset + j)] += static_cast<double>(x[j]);
    } else {
      double t = totals[static_cast<std::size_t>(offset)];
      for (std::int64_t j = 0; j < run; ++j) t += static_cast<double>(x[j]);
      totals[static_cast<std::size_t>(offset)] = t;
    }
    advance(index, offset, strides, shape, outer);
  }
  for (std::int64_t o = 0; o < out_count; ++o) out[o] = static_cast<float>(totals[static_cast<std::size_t>(o)]);
}

// Times `baseline` and `loops` alternately (who goes first alternates), after checking they write the same bits.
template <typename Baseline, typename Loops>
void compare(const std::string& what, const std::string& shapes, std::int64_t elements, std::vector<float>& a,
             std::vector<float>& b, const Baseline& baseline, const Loops& loops, int rounds) {
  baseline();
  loops();
  if (a != b) {
    std::fprintf(stderr, "dtr-bench-axis-loops: %s %s: the loops' output differs from the baseline's\n",
                 what.c_str(), shapes.c_str());
    std::exit(1);
  }
  const dtr::bench::Alternated t = dtr::bench::alternate(baseline, loops, rounds);
  std::printf("| %s | %s | %lld | %.0f us | %.0f us | %.3f |\n", what.c_str(), shapes.c_str(),
              static_cast<long long>(elements), t.baseline_s * 1e6, t.candidate_s * 1e6, t.ratio);
}

std::vector<float> values(std::int64_t count) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1009) / 97.0F - 5.0F;
  return v;
}

void broadcast_case(const Shape& in, const Shape& out, int rounds) {
  const std::vector<float> x = values(numel_of(in));
  std::vector<float> a(static_cast<std::size_t>(numel_of(out))), b(a.size());
  compare("broadcast_to", dtr::to_string(in) + " -> " + dtr::to_string(out), numel_of(out), a, b,
          [&] { broadcast_baseline(x.data(), in, a.data(), out); },
          [&] { dtr::kernels::broadcast_copy(x.data(), in, b.data(), out); }, rounds);
}

void sum_case(const Shape& shape, const AxisMask& mask, int rounds) {
  const std::vector<float> x = values(numel_of(shape));
  std::int64_t out_count = 1;
  Shape kept;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) out_count *= shape[d];
    kept.push_back(mask[d] ? 1 : shape[d]);
  }
  std::vector<float> a(static_cast<std::size_t>(out_count)), b(a.size());
  compare("sum", dtr::to_string(shape) + " -> " + dtr::to_string(kept), numel_of(shape), a, b,
          [&] { sum_baseline(x.data(), shape, mask, a.data(), out_count); },
          [&] { dtr::kernels::sum_over_axes(x.data(), shape, mask, b.data(), out_count, 1.0); }, rounds);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"broadcast_to and sums over axes: kernels/elementwise/axis_loops.h against the index walk before"};
  int rounds = 31;
  app.add_option("--rounds", rounds, "rounds per case, the two alternated")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  std::printf("| op | shapes | elements | index walk, one thread (median) | axis loops (median) | loops / walk |\n"
              "|---|---|---:|---:|---:|---:|\n");
  broadcast_case({128, 32, 14, 1, 14, 1}, {128, 32, 14, 2, 14, 2}, rounds);  // U-Net's upper one (to 2026-11-30)
  broadcast_case({128, 64, 7, 1, 7, 1}, {128, 64, 7, 2, 7, 2}, rounds);      // its lower one
  broadcast_case({128, 64, 1, 1}, {128, 64, 7, 7}, rounds);                  // a global average pool's gradient
  broadcast_case({512}, {1024, 512}, rounds);                                // a bias repeated over rows
  sum_case({128, 32, 14, 2, 14, 2}, {false, false, false, true, false, true}, rounds);  // the upsampling's gradient
  sum_case({128, 64, 7, 2, 7, 2}, {false, false, false, true, false, true}, rounds);
  sum_case({128, 64, 7, 7}, {false, false, true, true}, rounds);  // the global average pool
  sum_case({1024, 512}, {true, false}, rounds);                   // a bias's gradient: rows summed
  sum_case({1024, 512}, {false, true}, rounds);                   // a sum over the last axis
  return 0;
}

// max_pool2d and its backward op on the CPU (kernels/dense/pool.cpp): the kernels the op table runs now, whose 2x2
// windows at stride 2 take a loop of their own, against the loop every window took before and every other geometry
// still takes (each output's window searched cell by cell by kernels::window_argmax, the gradient scattered into a
// zeroed plane), as the baseline with the same spread of planes over the threads, on the same buffers in one run.
// Shapes: the zoo U-Net's two pools (batch 128, width 16), and a 3x3 window at stride 2 with padding 1
// (ResNet-style stems), which takes the general loop in both (a control: its ratio should be 1). Rounds alternate
// the two; each figure is the median over rounds of one call's time, and each ratio the median of the per-round
// ratios. The outputs are checked equal (bitwise) before timing.
//
// dtr-bench-pool [--rounds N] (default 31).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_main.h"
#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/dense/window_geometry.h"
#include "kernels/dense/window_max.h"

namespace {

using dtr::Shape;
using Ints = std::vector<std::int64_t>;

void baseline_forward(const dtr::kernels::PoolGeometry& g, const float* x, float* out) {
  dtr::kernels::parallel_for_items(g.planes(), g.planes() * g.h * g.w, [&](std::int64_t p) {
    const float* plane = x + p * g.h * g.w;
    float* y = out + p * g.oh * g.ow;
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) *y++ = plane[dtr::kernels::window_argmax(g, plane, i, j)];
    }
  });
}

void baseline_backward(const dtr::kernels::PoolGeometry& g, const float* grads, const float* x, float* dx) {
  dtr::kernels::parallel_for_items(g.planes(), g.planes() * g.h * g.w, [&](std::int64_t p) {
    const float* plane = x + p * g.h * g.w;
    float* dplane = dx + p * g.h * g.w;
    const float* grad = grads + p * g.oh * g.ow;
    std::fill(dplane, dplane + g.h * g.w, 0.0F);
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) dplane[dtr::kernels::window_argmax(g, plane, i, j)] += *grad++;
    }
  });
}

std::vector<float> values(std::int64_t count, std::uint64_t salt) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919 + salt) % 1009) / 97.0F - 5.0F;
  return v;
}

std::int64_t count(const Shape& shape) { return dtr::TensorMeta{shape}.numel(); }

template <typename Baseline, typename Kernel>
void compare(const char* what, const std::string& shapes, std::vector<float>& a, std::vector<float>& b,
             Baseline&& baseline, Kernel&& kernel, int rounds) {
  baseline();
  kernel();
  if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) {
    std::fprintf(stderr, "dtr-bench-pool: %s %s: the kernel's output differs from the baseline's\n", what,
                 shapes.c_str());
    std::exit(1);
  }
  const dtr::bench::Alternated t = dtr::bench::alternate(baseline, kernel, rounds);
  std::printf("| %s | %s | %.0f us | %.0f us | %.3f |\n", what, shapes.c_str(), t.baseline_s * 1e6,
              t.candidate_s * 1e6, t.ratio);
}

void pool_case(const Shape& in, const Ints& kernel, const Ints& stride, const Ints& padding, int rounds) {
  const dtr::Attrs attrs{{"kernel", kernel}, {"stride", stride}, {"padding", padding}};
  const std::vector<dtr::TensorMeta> in_meta{dtr::TensorMeta{in}};
  const dtr::kernels::PoolGeometry g = dtr::kernels::pool_geometry("max_pool2d", in_meta, in, attrs);
  const Shape out = g.output_shape();
  const std::vector<float> x = values(count(in), 1);
  const std::vector<float> grad = values(count(out), 2);
  const std::string shapes = dtr::to_string(in) + " -> " + dtr::to_string(out) + ", kernel " +
                             dtr::to_string(Shape(kernel.begin(), kernel.end())) + " stride " +
                             dtr::to_string(Shape(stride.begin(), stride.end())) + " padding " +
                             dtr::to_string(Shape(padding.begin(), padding.end()));

  std::vector<float> ya(static_cast<std::size_t>(count(out))), yb(ya.size());
  const std::vector<dtr::TensorMeta> out_meta{dtr::TensorMeta{out}};
  const void* const forward_in[] = {x.data()};
  void* const forward_out[] = {yb.data()};
  compare("max_pool2d", shapes, ya, yb, [&] { baseline_forward(g, x.data(), ya.data()); },
          [&] { dtr::ops::max_pool2d().cpu_kernel(dtr::KernelArgs{in_meta, forward_in, out_meta, forward_out, attrs}); },
          rounds);

  std::vector<float> dxa(x.size()), dxb(x.size());
  const std::vector<dtr::TensorMeta> backward_meta{dtr::TensorMeta{out}, dtr::TensorMeta{in}};
  const void* const backward_in[] = {grad.data(), x.data()};
  void* const backward_out[] = {dxb.data()};
  compare("max_pool2d_backward", shapes, dxa, dxb, [&] { baseline_backward(g, grad.data(), x.data(), dxa.data()); },
          [&] {
            dtr::ops::max_pool2d_backward().cpu_kernel(
                dtr::KernelArgs{backward_meta, backward_in, in_meta, backward_out, attrs});
          },
          rounds);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"max_pool2d and its backward: the op table's kernels against the window-by-window loop before"};
  int rounds = 31;
  app.add_option("--rounds", rounds, "rounds per case, the two alternated")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  std::printf("| op | shapes | window by window (median) | op table (median) | op table / window by window |\n"
              "|---|---|---:|---:|---:|\n");
  pool_case({128, 16, 28, 28}, {2, 2}, {2, 2}, {0, 0}, rounds);  // U-Net's upper pool
  pool_case({128, 32, 14, 14}, {2, 2}, {2, 2}, {0, 0}, rounds);  // its lower one
  pool_case({128, 16, 28, 28}, {3, 3}, {2, 2}, {1, 1}, rounds);  // the general loop in both: a control
  return 0;
}

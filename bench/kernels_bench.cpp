// CPU kernel throughput against OpenBLAS called directly, in the same run (issue 6: "GEMM and conv throughput
// on CPU vs OpenBLAS called directly; the op table must add nothing measurable"), and the float32 convolutions
// (oneDNN since issue 15) against the im2col + OpenBLAS GEMM they replaced.
//
// Problem sets, float32, each computed three ways on the same buffers:
// - GEMM, row-major C = A·B on shapes training uses (square, and the tall-skinny products of a linear layer
//   and its gradients); conv2d, NCHW without bias, on the convolutions of small CNNs (3x3 with padding, with
//   stride 2, and 1x1) and on every layer shape of ResNet-32 (width 16, 28x28 inputs) at batch 128, whose
//   conv2d_backward_input and conv2d_backward_weight are measured too;
// - blas: the baseline: cblas_sgemm called directly; for a convolution, the textbook im2col written here (each
//   row of the column matrix as zeros, a run of an input row, zeros) and one cblas_sgemm per image: the
//   algorithm of dtr's float32 convolutions before oneDNN (the backward of the input: one cblas_sgemm per image
//   into the column matrix, then col2im; of the weight: im2col and one accumulating cblas_sgemm per image);
// - op_table: ops::matmul() / ops::conv2d() .cpu_kernel(KernelArgs{...}), what the runtime calls, with a
//   workspace reused across calls;
// - runtime: Runtime::call1(op, inputs) with no budget, the output a temporary (allocation from the caching
//   allocator, the closure, the free included).
// - paired: the three interleaved in rounds (one call of each, in an order that rotates), each call timed; the
//   ratios are the medians over rounds of op_table/blas and runtime/blas. This VM's speed drifts by up to 2x
//   between repetitions, far more than what the op table could add; interleaving makes the drift hit all three
//   alike.
// After Google Benchmark's report, a table of medians: GFLOP/s of each (separate benchmarks) and the paired
// ratios (time ratios: 1.00 is "adds nothing").
//
// Defaults: --benchmark_repetitions=5 --benchmark_report_aggregates_only=true (command-line flags override).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_main.h"
#include "dtr/ops.h"
#include "dtr/runtime.h"

namespace {

constexpr double kMinTime = 0.3;  // seconds per repetition

struct Gemm {
  std::int64_t m, k, n;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  }
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
};

const std::vector<Gemm>& gemms() {
  static const std::vector<Gemm> all = {
      {64, 64, 64},     {128, 128, 128},   {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024},
      {256, 784, 128},  // a batch of 256 Fashion-MNIST images through a 784 -> 128 linear layer
      {128, 256, 784},  // and the weight gradient of that layer: [out, batch] x [batch, in]
  };
  return all;
}

// A square-kernel convolution x [n, c, h, w] * weight [o, c, k, k] with equal stride and padding.
struct Conv {
  std::int64_t n, c, h, w, o, k, stride, pad;
  std::int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  std::int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  std::string name() const {
    return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + "_" +
           std::to_string(o) + "k" + std::to_string(k) + "s" + std::to_string(stride) + "p" + std::to_string(pad);
  }
  double flops() const {
    return 2.0 * static_cast<double>(n * o * oh() * ow()) * static_cast<double>(c * k * k);
  }
};

const std::vector<Conv>& convs() {
  static const std::vector<Conv> all = {
      {64, 1, 28, 28, 32, 3, 1, 1},    // the first layer of a Fashion-MNIST CNN
      {64, 32, 14, 14, 64, 3, 1, 1},   // its second, after a 2x2 pool
      {16, 64, 28, 28, 128, 3, 2, 1},  // a strided downsampling layer
      {8, 64, 56, 56, 64, 3, 1, 1},    // a ResNet stage-1 layer
      {32, 128, 14, 14, 256, 1, 1, 0},  // a 1x1 projection: the input plane is the column matrix
  };
  return all;
}

// Every convolution of ResNet-32 (width 16) on 28x28 Fashion-MNIST batches of 128, as the zoo builds it
// (nn/models_conv.cpp): the stem, the 3x3 layers of the three stages, the stride-2 3x3 and 1x1 (shortcut)
// convolutions that enter stages 2 and 3.
const std::vector<Conv>& resnet32_convs() {
  static const std::vector<Conv> all = {
      {128, 1, 28, 28, 16, 3, 1, 1},    // the stem
      {128, 16, 28, 28, 16, 3, 1, 1},   // stage 1 (10 per step)
      {128, 16, 28, 28, 32, 3, 2, 1},   // into stage 2
      {128, 16, 28, 28, 32, 1, 2, 0},   // its shortcut
      {128, 32, 14, 14, 32, 3, 1, 1},   // stage 2 (9 per step)
      {128, 32, 14, 14, 64, 3, 2, 1},   // into stage 3
      {128, 32, 14, 14, 64, 1, 2, 0},   // its shortcut
      {128, 64, 7, 7, 64, 3, 1, 1},     // stage 3 (9 per step)
  };
  return all;
}

std::vector<float> values(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

std::size_t size(std::int64_t count) { return static_cast<std::size_t>(count); }

// KernelArgs::workspace for the op table called directly: one buffer, grown on demand and reused, as the
// runtime's scratch comes from its caching allocator (conv2d's column matrix).
class ReusedScratch final : public dtr::Workspace {
 public:
  void* get(std::size_t bytes) override {
    const std::size_t words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
    if (buffer_.size() < words) buffer_.resize(words);
    return buffer_.data();
  }

 private:
  std::vector<std::max_align_t> buffer_;
};

// One problem set up the three ways on the same values: the op, its inputs and attributes, and the baseline.
// Each method runs the computation once.
class Problem {
 public:
  Problem(const dtr::OpDef& op, std::vector<dtr::TensorMeta> in_meta, dtr::Attrs attrs)
      : op_(op), attrs_(std::move(attrs)), in_meta_(std::move(in_meta)), out_meta_(op.infer(in_meta_, attrs_)) {
    for (std::size_t i = 0; i < in_meta_.size(); ++i) {
      in_values_.push_back(values(size(in_meta_[i].numel()), i + 1));
      inputs_.push_back(in_values_.back().data());
      tensors_.push_back(rt_.constant(in_meta_[i], in_values_.back()));
    }
    out_values_.resize(size(out_meta_[0].numel()));
    outputs_.push_back(out_values_.data());
  }
  virtual ~Problem() = default;
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  void blas() {
    baseline(in_values_, out_values_.data());
    benchmark::DoNotOptimize(out_values_.data());
    benchmark::ClobberMemory();
  }

  void op_table() {
    op_.cpu_kernel(dtr::KernelArgs{in_meta_, inputs_, out_meta_, outputs_, attrs_, 0, &scratch_});
    benchmark::DoNotOptimize(out_values_.data());
    benchmark::ClobberMemory();
  }

  // The output is a temporary: allocated, recorded and freed.
  void runtime() {
    const dtr::Tensor out = rt_.call1(op_, tensors_, attrs_);
    benchmark::DoNotOptimize(&out);
  }

 protected:
  virtual void baseline(const std::vector<std::vector<float>>& in, float* out) = 0;

 private:
  const dtr::OpDef& op_;
  const dtr::Attrs attrs_;
  const std::vector<dtr::TensorMeta> in_meta_;
  const dtr::TensorMetas out_meta_;
  std::vector<std::vector<float>> in_values_;
  std::vector<float> out_values_;
  std::vector<const void*> inputs_;
  std::vector<void*> outputs_;
  ReusedScratch scratch_;
  dtr::Runtime rt_{dtr::Config{}};  // no budget
  std::vector<dtr::Tensor> tensors_;
};

class GemmProblem final : public Problem {
 public:
  explicit GemmProblem(const Gemm& g)
      : Problem(dtr::ops::matmul(), {dtr::TensorMeta{{g.m, g.k}}, dtr::TensorMeta{{g.k, g.n}}}, {}), g_(g) {}

 private:
  void baseline(const std::vector<std::vector<float>>& in, float* out) override {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g_.m), static_cast<int>(g_.n),
                static_cast<int>(g_.k), 1.0F, in[0].data(), static_cast<int>(g_.k), in[1].data(),
                static_cast<int>(g_.n), 0.0F, out, static_cast<int>(g_.n));
  }
  const Gemm g_;
};

dtr::Attrs conv_attrs(const Conv& g) {
  return dtr::Attrs{{"stride", std::vector<std::int64_t>{g.stride, g.stride}},
                    {"padding", std::vector<std::int64_t>{g.pad, g.pad}}};
}

// The baseline's pieces: one image's column matrix [c·k·k, oh·ow] (im2col) and its adjoint (col2im).
class Columns {
 public:
  explicit Columns(const Conv& g) : g_(g), columns_(size(g.c * g.k * g.k * g.oh() * g.ow())) {}

  float* data() { return columns_.data(); }
  bool pointwise() const { return g_.k == 1 && g_.stride == 1 && g_.pad == 0; }
  int positions() const { return static_cast<int>(g_.oh() * g_.ow()); }
  int patch() const { return static_cast<int>(g_.c * g_.k * g_.k); }

  // Row (channel, i, j), output row y reads input row y·stride - pad + i at columns x·stride - pad + j: zero
  // before `first` and from `last` on.
  void im2col(const float* image) {
    const std::int64_t oh = g_.oh();
    const std::int64_t ow = g_.ow();
    const std::int64_t stride = g_.stride;
    float* col = columns_.data();
    for (std::int64_t channel = 0; channel < g_.c; ++channel) {
      for (std::int64_t i = 0; i < g_.k; ++i) {
        for (std::int64_t j = 0; j < g_.k; ++j) {
          const auto [first, last] = run(j);
          for (std::int64_t y = 0; y < oh; ++y, col += ow) {
            const std::int64_t row = y * g_.stride - g_.pad + i;
            if (row < 0 || row >= g_.h) {
              std::fill(col, col + ow, 0.0F);
              continue;
            }
            const float* source = image + (channel * g_.h + row) * g_.w - g_.pad + j;
            std::fill(col, col + first, 0.0F);
            if (stride == 1) {
              std::copy(source + first, source + last, col + first);
            } else {
              for (std::int64_t x = first; x < last; ++x) col[x] = source[x * stride];
            }
            std::fill(col + last, col + ow, 0.0F);
          }
        }
      }
    }
  }

  // image = the sum of the column entries that read each of its cells.
  void col2im(float* image) {
    std::fill(image, image + g_.c * g_.h * g_.w, 0.0F);
    const std::int64_t ow = g_.ow();
    const float* col = columns_.data();
    for (std::int64_t channel = 0; channel < g_.c; ++channel) {
      for (std::int64_t i = 0; i < g_.k; ++i) {
        for (std::int64_t j = 0; j < g_.k; ++j) {
          const auto [first, last] = run(j);
          for (std::int64_t y = 0; y < g_.oh(); ++y, col += ow) {
            const std::int64_t row = y * g_.stride - g_.pad + i;
            if (row < 0 || row >= g_.h) continue;
            float* target = image + (channel * g_.h + row) * g_.w - g_.pad + j;
            for (std::int64_t x = first; x < last; ++x) target[x * g_.stride] += col[x];
          }
        }
      }
    }
  }

 private:
  // The output columns [first, last) whose kernel column j lies inside the image.
  std::pair<std::int64_t, std::int64_t> run(std::int64_t j) const {
    std::int64_t first = 0;
    while (first < g_.ow() && first * g_.stride - g_.pad + j < 0) ++first;
    std::int64_t last = g_.ow();
    while (last > first && (last - 1) * g_.stride - g_.pad + j >= g_.w) --last;
    return {first, last};
  }

  const Conv g_;
  std::vector<float> columns_;
};

// conv2d(x, weight): im2col and one GEMM per image.
class ConvProblem final : public Problem {
 public:
  explicit ConvProblem(const Conv& g)
      : Problem(dtr::ops::conv2d(), {dtr::TensorMeta{{g.n, g.c, g.h, g.w}}, dtr::TensorMeta{{g.o, g.c, g.k, g.k}}},
                conv_attrs(g)),
        g_(g),
        columns_(g) {}

 private:
  void baseline(const std::vector<std::vector<float>>& in, float* out) override {
    const int positions = columns_.positions();
    const int patch = columns_.patch();
    for (std::int64_t image = 0; image < g_.n; ++image) {
      const float* x = in[0].data() + image * g_.c * g_.h * g_.w;
      if (!columns_.pointwise()) columns_.im2col(x);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g_.o), positions, patch, 1.0F,
                  in[1].data(), patch, columns_.pointwise() ? x : columns_.data(), positions, 0.0F,
                  out + image * g_.o * positions, positions);
    }
  }

  const Conv g_;
  Columns columns_;
};

// conv2d_backward_input(grad_out, weight): per image, the columns' gradient weightᵀ · grad_out (one GEMM),
// folded back by col2im.
class ConvBackwardInputProblem final : public Problem {
 public:
  explicit ConvBackwardInputProblem(const Conv& g)
      : Problem(dtr::ops::conv2d_backward_input(),
                {dtr::TensorMeta{{g.n, g.o, g.oh(), g.ow()}}, dtr::TensorMeta{{g.o, g.c, g.k, g.k}}},
                conv_attrs(g).set("input_shape", std::vector<std::int64_t>{g.n, g.c, g.h, g.w})),
        g_(g),
        columns_(g) {}

 private:
  void baseline(const std::vector<std::vector<float>>& in, float* out) override {
    const int positions = columns_.positions();
    const int patch = columns_.patch();
    for (std::int64_t image = 0; image < g_.n; ++image) {
      float* dx = out + image * g_.c * g_.h * g_.w;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch, positions, static_cast<int>(g_.o), 1.0F,
                  in[1].data(), patch, in[0].data() + image * g_.o * positions, positions, 0.0F,
                  columns_.pointwise() ? dx : columns_.data(), positions);
      if (!columns_.pointwise()) columns_.col2im(dx);
    }
  }

  const Conv g_;
  Columns columns_;
};

// conv2d_backward_weight(grad_out, x): per image, im2col and grad_out · columnsᵀ added into the gradient.
class ConvBackwardWeightProblem final : public Problem {
 public:
  explicit ConvBackwardWeightProblem(const Conv& g)
      : Problem(dtr::ops::conv2d_backward_weight(),
                {dtr::TensorMeta{{g.n, g.o, g.oh(), g.ow()}}, dtr::TensorMeta{{g.n, g.c, g.h, g.w}}},
                conv_attrs(g).set("weight_shape", std::vector<std::int64_t>{g.o, g.c, g.k, g.k})),
        g_(g),
        columns_(g) {}

 private:
  void baseline(const std::vector<std::vector<float>>& in, float* out) override {
    const int positions = columns_.positions();
    const int patch = columns_.patch();
    for (std::int64_t image = 0; image < g_.n; ++image) {
      const float* x = in[1].data() + image * g_.c * g_.h * g_.w;
      if (!columns_.pointwise()) columns_.im2col(x);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(g_.o), patch, positions, 1.0F,
                  in[0].data() + image * g_.o * positions, positions, columns_.pointwise() ? x : columns_.data(),
                  positions, image > 0 ? 1.0F : 0.0F, out, patch);
    }
  }

  const Conv g_;
  Columns columns_;
};

void BM_blas(benchmark::State& state, Problem* problem) {
  for (auto _ : state) problem->blas();
}

void BM_op_table(benchmark::State& state, Problem* problem) {
  for (auto _ : state) problem->op_table();
}

void BM_runtime(benchmark::State& state, Problem* problem) {
  for (auto _ : state) problem->runtime();
}

// One round: blas, op table, runtime, each timed, in an order that rotates from round to round (each call
// warms the caches for the next: a fixed order would favour whichever follows the baseline). Counters: the
// medians over rounds of the two ratios.
void BM_paired(benchmark::State& state, Problem* problem) {
  using Clock = std::chrono::steady_clock;
  void (Problem::*const ways[3])() = {&Problem::blas, &Problem::op_table, &Problem::runtime};
  std::vector<double> table_ratio;
  std::vector<double> runtime_ratio;
  std::size_t round = 0;
  for (auto _ : state) {
    double seconds[3] = {};
    for (std::size_t step = 0; step < 3; ++step) {
      const std::size_t way = (round + step) % 3;
      const Clock::time_point start = Clock::now();
      (problem->*ways[way])();
      seconds[way] = std::chrono::duration<double>(Clock::now() - start).count();
    }
    ++round;
    table_ratio.push_back(seconds[1] / seconds[0]);
    runtime_ratio.push_back(seconds[2] / seconds[0]);
  }
  state.counters["op_table_ratio"] = dtr::bench::median(table_ratio);
  state.counters["runtime_ratio"] = dtr::bench::median(runtime_ratio);
}

// Every problem, built once before the benchmarks run and kept for the program's life.
std::vector<std::unique_ptr<Problem>>& problems() {
  static std::vector<std::unique_ptr<Problem>> all;
  return all;
}

void register_problem(const std::string& family, const std::string& name, std::unique_ptr<Problem> problem) {
  Problem* p = problem.get();
  problems().push_back(std::move(problem));
  benchmark::RegisterBenchmark((family + "_blas/" + name).c_str(), BM_blas, p)->MinTime(kMinTime)->UseRealTime();
  benchmark::RegisterBenchmark((family + "_op_table/" + name).c_str(), BM_op_table, p)
      ->MinTime(kMinTime)
      ->UseRealTime();
  benchmark::RegisterBenchmark((family + "_runtime/" + name).c_str(), BM_runtime, p)
      ->MinTime(kMinTime)
      ->UseRealTime();
  benchmark::RegisterBenchmark((family + "_paired/" + name).c_str(), BM_paired, p)
      ->MinTime(2 * kMinTime)
      ->UseRealTime();
}

void register_benchmarks() {
  for (const Gemm& g : gemms()) register_problem("gemm", g.name(), std::make_unique<GemmProblem>(g));
  for (const Conv& g : convs()) register_problem("conv", g.name(), std::make_unique<ConvProblem>(g));
  for (const Conv& g : resnet32_convs()) {
    register_problem("conv", g.name(), std::make_unique<ConvProblem>(g));
    register_problem("conv_bwd_input", g.name(), std::make_unique<ConvBackwardInputProblem>(g));
    register_problem("conv_bwd_weight", g.name(), std::make_unique<ConvBackwardWeightProblem>(g));
  }
}

// One table per family: GFLOP/s of each way (separate benchmarks) and the paired time ratios.
template <typename Shape>
void print_table(const dtr::bench::MedianReporter& report, const std::string& family, const char* heading,
                 const std::vector<Shape>& shapes) {
  std::printf("\n| %s | blas GFLOP/s | op table GFLOP/s | runtime GFLOP/s | paired: op table / blas | "
              "paired: runtime / blas |\n",
              heading);
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Shape& g : shapes) {
    const double blas = report.median_ns(family + "_blas/" + g.name());
    const double table = report.median_ns(family + "_op_table/" + g.name());
    const double runtime = report.median_ns(family + "_runtime/" + g.name());
    if (std::isnan(blas)) continue;  // filtered out
    const std::string paired = family + "_paired/" + g.name();
    std::printf("| %s | %.1f | %.1f | %.1f | %.3f | %.3f |\n", g.name().c_str(), g.flops() / blas,
                g.flops() / table, g.flops() / runtime, report.counter(paired, "op_table_ratio"),
                report.counter(paired, "runtime_ratio"));
  }
}

void print_tables(const dtr::bench::MedianReporter& report) {
  print_table(report, "gemm", "GEMM m x k x n", gemms());
  print_table(report, "conv", "conv2d NxCxHxW_O k s p", convs());
  print_table(report, "conv", "ResNet-32 conv2d NxCxHxW_O k s p", resnet32_convs());
  print_table(report, "conv_bwd_input", "ResNet-32 conv2d_backward_input NxCxHxW_O k s p", resnet32_convs());
  print_table(report, "conv_bwd_weight", "ResNet-32 conv2d_backward_weight NxCxHxW_O k s p", resnet32_convs());
}

}  // namespace

int main(int argc, char** argv) {
  return dtr::bench::run_benchmarks<dtr::bench::MedianReporter>(argc, argv, register_benchmarks, print_tables);
}

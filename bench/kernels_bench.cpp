// CPU kernel throughput against OpenBLAS called directly, in the same run (issue 6: "the op table must add
// nothing measurable").
//
// GEMM, float32, row-major C = A·B on shapes training uses (square, and the tall-skinny products of a linear
// layer and its gradients), three ways on the same buffers:
// - blas: cblas_sgemm called directly (the baseline);
// - op_table: ops::matmul().cpu_kernel(KernelArgs{...}), what the runtime calls;
// - runtime: Runtime::call1(ops::matmul(), {a, b}) with no budget, the output a temporary (allocation from the
//   caching allocator, the closure, the free included).
// - paired: the three interleaved in rounds (one call of each, in turn), each call timed; the ratios are the
//   medians over rounds of op_table/blas and runtime/blas. This VM's speed drifts by up to 2x between
//   repetitions, far more than what the op table could add; interleaving makes the drift hit all three alike.
// After Google Benchmark's report, a table of medians: GFLOP/s of each (separate benchmarks) and the paired
// ratios (time ratios: 1.00 is "adds nothing").
//
// Defaults: --benchmark_repetitions=5 --benchmark_report_aggregates_only=true (command-line flags override).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
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

std::vector<float> values(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

// One GEMM problem set up the three ways, on the same values: each method runs one product.
class Product {
 public:
  explicit Product(const Gemm& g)
      : g_(g),
        a_(values(static_cast<std::size_t>(g.m * g.k), 1)),
        b_(values(static_cast<std::size_t>(g.k * g.n), 2)),
        c_(static_cast<std::size_t>(g.m * g.n)),
        in_meta_{dtr::TensorMeta{{g.m, g.k}}, dtr::TensorMeta{{g.k, g.n}}},
        out_meta_(op().infer(in_meta_, attrs_)),
        inputs_{a_.data(), b_.data()},
        outputs_{c_.data()},
        a_tensor_(rt_.constant(in_meta_[0], a_)),
        b_tensor_(rt_.constant(in_meta_[1], b_)) {}

  void blas() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g_.m), static_cast<int>(g_.n),
                static_cast<int>(g_.k), 1.0F, a_.data(), static_cast<int>(g_.k), b_.data(), static_cast<int>(g_.n),
                0.0F, c_.data(), static_cast<int>(g_.n));
    benchmark::DoNotOptimize(c_.data());
    benchmark::ClobberMemory();
  }

  void op_table() {
    op().cpu_kernel(dtr::KernelArgs{in_meta_, inputs_, out_meta_, outputs_, attrs_, 0});
    benchmark::DoNotOptimize(c_.data());
    benchmark::ClobberMemory();
  }

  // The output is a temporary: allocated, recorded and freed.
  void runtime() {
    const dtr::Tensor c = rt_.call1(op(), {a_tensor_, b_tensor_});
    benchmark::DoNotOptimize(&c);
  }

 private:
  static const dtr::OpDef& op() { return dtr::ops::matmul(); }

  const Gemm g_;
  std::vector<float> a_, b_, c_;
  const dtr::Attrs attrs_;
  const std::vector<dtr::TensorMeta> in_meta_;
  const dtr::TensorMetas out_meta_;
  const std::vector<const void*> inputs_;
  const std::vector<void*> outputs_;
  dtr::Runtime rt_{dtr::Config{}};  // no budget
  const dtr::Tensor a_tensor_;
  const dtr::Tensor b_tensor_;
};

void BM_blas(benchmark::State& state, const Gemm* g) {
  Product product(*g);
  for (auto _ : state) product.blas();
}

void BM_op_table(benchmark::State& state, const Gemm* g) {
  Product product(*g);
  for (auto _ : state) product.op_table();
}

void BM_runtime(benchmark::State& state, const Gemm* g) {
  Product product(*g);
  for (auto _ : state) product.runtime();
}

// One round: blas, op table, runtime, each timed. Counters: the medians over rounds of the two ratios.
void BM_paired(benchmark::State& state, const Gemm* g) {
  using Clock = std::chrono::steady_clock;
  Product product(*g);
  std::vector<double> table_ratio;
  std::vector<double> runtime_ratio;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    product.blas();
    const Clock::time_point t1 = Clock::now();
    product.op_table();
    const Clock::time_point t2 = Clock::now();
    product.runtime();
    const Clock::time_point t3 = Clock::now();
    const double blas = std::chrono::duration<double>(t1 - t0).count();
    table_ratio.push_back(std::chrono::duration<double>(t2 - t1).count() / blas);
    runtime_ratio.push_back(std::chrono::duration<double>(t3 - t2).count() / blas);
  }
  state.counters["op_table_ratio"] = dtr::bench::median(table_ratio);
  state.counters["runtime_ratio"] = dtr::bench::median(runtime_ratio);
}

void register_benchmarks() {
  for (const Gemm& g : gemms()) {
    benchmark::RegisterBenchmark(("gemm_blas/" + g.name()).c_str(), BM_blas, &g)->MinTime(kMinTime)->UseRealTime();
    benchmark::RegisterBenchmark(("gemm_op_table/" + g.name()).c_str(), BM_op_table, &g)
        ->MinTime(kMinTime)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("gemm_runtime/" + g.name()).c_str(), BM_runtime, &g)
        ->MinTime(kMinTime)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("gemm_paired/" + g.name()).c_str(), BM_paired, &g)
        ->MinTime(2 * kMinTime)
        ->UseRealTime();
  }
}

void print_tables(const dtr::bench::MedianReporter& report) {
  std::printf("\n| GEMM m x k x n | blas GFLOP/s | op table GFLOP/s | runtime GFLOP/s | paired: op table / blas | "
              "paired: runtime / blas |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Gemm& g : gemms()) {
    const double blas = report.median_ns("gemm_blas/" + g.name());
    const double table = report.median_ns("gemm_op_table/" + g.name());
    const double runtime = report.median_ns("gemm_runtime/" + g.name());
    if (std::isnan(blas)) continue;  // filtered out
    const std::string paired = "gemm_paired/" + g.name();
    std::printf("| %s | %.1f | %.1f | %.1f | %.3f | %.3f |\n", g.name().c_str(), g.flops() / blas,
                g.flops() / table, g.flops() / runtime, report.counter(paired, "op_table_ratio"),
                report.counter(paired, "runtime_ratio"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dtr::bench::run_benchmarks<dtr::bench::MedianReporter>(argc, argv, register_benchmarks, print_tables);
}

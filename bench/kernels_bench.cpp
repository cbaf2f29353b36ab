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

struct Buffers {
  explicit Buffers(const Gemm& g)
      : a(values(static_cast<std::size_t>(g.m * g.k), 1)),
        b(values(static_cast<std::size_t>(g.k * g.n), 2)),
        c(static_cast<std::size_t>(g.m * g.n)) {}
  std::vector<float> a, b, c;
};

void BM_blas(benchmark::State& state, const Gemm* g) {
  Buffers buf(*g);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g->m), static_cast<int>(g->n),
                static_cast<int>(g->k), 1.0F, buf.a.data(), static_cast<int>(g->k), buf.b.data(),
                static_cast<int>(g->n), 0.0F, buf.c.data(), static_cast<int>(g->n));
    benchmark::DoNotOptimize(buf.c.data());
    benchmark::ClobberMemory();
  }
}

void BM_op_table(benchmark::State& state, const Gemm* g) {
  Buffers buf(*g);
  const dtr::OpDef& op = dtr::ops::matmul();
  const std::vector<dtr::TensorMeta> in_meta{dtr::TensorMeta{{g->m, g->k}}, dtr::TensorMeta{{g->k, g->n}}};
  const dtr::Attrs attrs;
  const dtr::TensorMetas out_meta = op.infer(in_meta, attrs);
  const std::vector<const void*> inputs{buf.a.data(), buf.b.data()};
  const std::vector<void*> outputs{buf.c.data()};
  for (auto _ : state) {
    op.cpu_kernel(dtr::KernelArgs{in_meta, inputs, out_meta, outputs, attrs, 0});
    benchmark::DoNotOptimize(buf.c.data());
    benchmark::ClobberMemory();
  }
}

void BM_runtime(benchmark::State& state, const Gemm* g) {
  dtr::Runtime rt{dtr::Config{}};  // no budget
  const dtr::Tensor a = rt.constant(dtr::TensorMeta{{g->m, g->k}}, values(static_cast<std::size_t>(g->m * g->k), 1));
  const dtr::Tensor b = rt.constant(dtr::TensorMeta{{g->k, g->n}}, values(static_cast<std::size_t>(g->k * g->n), 2));
  for (auto _ : state) {
    const dtr::Tensor c = rt.call1(dtr::ops::matmul(), {a, b});
    benchmark::DoNotOptimize(&c);
  }
}

// One round: blas, op table, runtime, each timed. Counters: the medians over rounds of the two ratios.
void BM_paired(benchmark::State& state, const Gemm* g) {
  using Clock = std::chrono::steady_clock;
  Buffers buf(*g);
  const dtr::OpDef& op = dtr::ops::matmul();
  const std::vector<dtr::TensorMeta> in_meta{dtr::TensorMeta{{g->m, g->k}}, dtr::TensorMeta{{g->k, g->n}}};
  const dtr::Attrs attrs;
  const dtr::TensorMetas out_meta = op.infer(in_meta, attrs);
  const std::vector<const void*> inputs{buf.a.data(), buf.b.data()};
  const std::vector<void*> outputs{buf.c.data()};
  dtr::Runtime rt{dtr::Config{}};
  const dtr::Tensor a = rt.constant(in_meta[0], buf.a);
  const dtr::Tensor b = rt.constant(in_meta[1], buf.b);
  std::vector<double> table_ratio;
  std::vector<double> runtime_ratio;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g->m), static_cast<int>(g->n),
                static_cast<int>(g->k), 1.0F, buf.a.data(), static_cast<int>(g->k), buf.b.data(),
                static_cast<int>(g->n), 0.0F, buf.c.data(), static_cast<int>(g->n));
    const Clock::time_point t1 = Clock::now();
    op.cpu_kernel(dtr::KernelArgs{in_meta, inputs, out_meta, outputs, attrs, 0});
    const Clock::time_point t2 = Clock::now();
    {
      const dtr::Tensor c = rt.call1(op, {a, b});
      benchmark::DoNotOptimize(&c);
    }
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

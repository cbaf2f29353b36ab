// The runtime's per-op bookkeeping: the same ops run through dtr::Runtime with no budget, and by calling their
// CPU kernels directly (issue 3: "target <= 1 us per op and <= 2% on 1 ms ops").
//
// Measured in one run (docs/benchmarks.md has the command, docs/results/runtime-overhead.md the numbers):
// - small ops: `relu` and `add` on float32 vectors sized so that the kernel alone takes about 1 us here, and
//   `relu` on one element, where the kernel is next to nothing: the bookkeeping alone;
// - a large op: `matmul` (OpenBLAS) of two square matrices sized so that it takes about 1 ms here.
// Each op runs as
// - direct: op.infer once, buffers allocated once (512-byte aligned, as the caching allocator's blocks), then
//   op.cpu_kernel(KernelArgs{...}) per iteration on the same buffers;
// - runtime: dtr::Runtime without a budget (cost model `measured`, the default, and `flops`; the default
//   heuristic, `forecast`, whose forecasts are not kept without a budget), inputs made constants once, then
//   `Tensor y = rt.call1(op, {x, ...})` per iteration. The handle dies at the end of the iteration, so every op
//   also pays for freeing its output's buffer, storage and closure (nothing else needs them, so there is no
//   eviction): the pattern of a temporary.
// The small ops also run as a chain: y = op(y[, x]) for 16 steps, then the chain is dropped and starts again
// from x (direct: ping-pong between two buffers). Through the runtime the chain keeps its lineage alive
// (each dropped intermediate is evicted eagerly but stays in the graph for the next one's recomputation),
// and dropping it frees 16 closures at once: the pattern of a forward pass.
// One iteration is one op in all of these, so times are per op.
//
// paired: direct and runtime interleaved in one loop, in rounds of K direct calls then K runtime calls, each
// block timed; the overhead is the median over rounds of (runtime block - direct block) / K. Slow drift of
// the machine's speed (a shared VM) then hits both sides alike, which separate benchmarks cannot ensure: on a
// 1 ms op the 2% target is 20 us, below the drift between repetitions here. K = 4 for the large op, 64 for
// the small ones; each side finds the caches as the other left them, symmetrically.
//
// After Google Benchmark's report, two tables: the separate benchmarks' medians (overhead = runtime - direct)
// and the paired overheads, each against the targets. Defaults: --benchmark_repetitions=5
// --benchmark_report_aggregates_only=true; flags given on the command line override them.
//
// `dtr-bench-runtime --call-loop <op> <calls> [direct|measured|flops]` runs a plain loop instead, for
// `valgrind --tool=callgrind` (see call_loop below).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "bench_main.h"
#include "dtr/config.h"
#include "dtr/op.h"
#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "dtr/tensor.h"

namespace {

using dtr::bench::median;

constexpr double kMinTime = 0.2;         // seconds per repetition
constexpr double kPairedMinTime = 0.5;   // seconds per repetition of a paired benchmark
constexpr int kChainLength = 16;
constexpr int kPairedBlockSmall = 64;    // ops per block in a paired round, small ops
constexpr int kPairedBlockLarge = 4;     // ... and the large op

// Sizes chosen by measuring the direct kernels on the machine of docs/results/runtime-overhead.md: ~1 us and ~1 ms.
constexpr std::int64_t kReluElements = 4096;  // 16 KiB per tensor
constexpr std::int64_t kAddElements = 2048;   // 8 KiB per tensor
constexpr std::int64_t kMatmulSize = 384;     // [n, n] x [n, n]

constexpr std::size_t kAlignment = 512;  // the caching allocator's block alignment

// ---- cases -----------------------------------------------------------------------------------------------

// An op and the shapes of its inputs. Chains feed output 0 back as input 0.
struct Case {
  const char* label;
  const dtr::OpDef& (*op)();
  std::vector<dtr::TensorMeta> inputs;
  bool large;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // One element: the kernel is next to nothing and its data placement cannot matter, so the difference
      // is the bookkeeping alone.
      {"relu", dtr::ops::relu, {dtr::TensorMeta{{1}}}, false},
      {"relu", dtr::ops::relu, {dtr::TensorMeta{{kReluElements}}}, false},
      {"add", dtr::ops::add, {dtr::TensorMeta{{kAddElements}}, dtr::TensorMeta{{kAddElements}}}, false},
      {"matmul", dtr::ops::matmul,
       {dtr::TensorMeta{{kMatmulSize, kMatmulSize}}, dtr::TensorMeta{{kMatmulSize, kMatmulSize}}}, true},
  };
  return all;
}

// "relu/4096", "matmul/384x384": the op and the shape of its first input.
std::string case_name(const Case& c) {
  std::string name = c.label;
  const char* separator = "/";
  for (std::int64_t d : c.inputs[0].shape) {
    name += separator;
    name += std::to_string(d);
    separator = "x";
  }
  return name;
}

// Deterministic values in [-1, 1): no denormals, no overflow over a 16-step chain.
std::vector<float> make_values(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0);
  return values;
}

// ---- direct ----------------------------------------------------------------------------------------------

struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
};
using Buffer = std::unique_ptr<float[], AlignedDelete>;

Buffer make_buffer(std::size_t count) {
  return Buffer(static_cast<float*>(::operator new[](std::max<std::size_t>(count, 1) * sizeof(float),
                                                     std::align_val_t{kAlignment})));
}

// The op's kernel on buffers of its own: infer once, then run() per op. Two output buffers: a chain
// ping-pongs between them (step 0 reads the original input, step s > 0 the output of step s - 1); a single
// op always writes the first.
class Direct {
 public:
  explicit Direct(const Case& c) : case_(c), op_(c.op()), out_meta_(op_.infer(c.inputs, attrs_)) {
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      const std::vector<float> values = make_values(static_cast<std::size_t>(c.inputs[i].numel()), 1 + i);
      inputs_.push_back(make_buffer(values.size()));
      std::copy(values.begin(), values.end(), inputs_.back().get());
      in_ptrs_.push_back(inputs_.back().get());
    }
    const auto out_count = static_cast<std::size_t>(out_meta_[0].numel());
    outs_[0] = make_buffer(out_count);
    outs_[1] = make_buffer(out_count);
    out_ptr_[0] = outs_[0].get();
  }

  void run() {
    op_.cpu_kernel(dtr::KernelArgs{case_.inputs, in_ptrs_, out_meta_, out_ptr_, attrs_, 0});
    benchmark::DoNotOptimize(out_ptr_[0]);
    benchmark::ClobberMemory();
  }

  void run_chain_step() {
    in_ptrs_[0] = step_ == 0 ? inputs_[0].get() : outs_[(step_ + 1) % 2].get();
    out_ptr_[0] = outs_[step_ % 2].get();
    step_ = step_ + 1 == kChainLength ? 0 : step_ + 1;
    run();
  }

 private:
  const Case& case_;
  const dtr::OpDef& op_;
  const dtr::Attrs attrs_;
  const dtr::TensorMetas out_meta_;
  std::vector<Buffer> inputs_;
  std::vector<const void*> in_ptrs_;
  Buffer outs_[2];
  void* out_ptr_[1] = {nullptr};
  int step_ = 0;
};

void BM_direct(benchmark::State& state, const Case* c, bool chain) {
  Direct direct(*c);
  for (auto _ : state) {
    if (chain) {
      direct.run_chain_step();
    } else {
      direct.run();
    }
  }
}

// ---- through the runtime ---------------------------------------------------------------------------------

// The op through a runtime with no budget, on constants holding the same values as Direct's inputs.
class ThroughRuntime {
 public:
  ThroughRuntime(const Case& c, dtr::CostModel cost_model) : op_(c.op()), rt_(make_config(cost_model)) {
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      const std::vector<float> values = make_values(static_cast<std::size_t>(c.inputs[i].numel()), 1 + i);
      inputs_.push_back(rt_.constant(c.inputs[i], values));
    }
    chain_ = inputs_;
    // Warm-up: the allocator's segments are reserved, the lineage code paths are hot.
    for (int i = 0; i < 2 * kChainLength; ++i) run();
  }

  // As a program calls it: an initializer list of handles (which copies them, as `rt.call1(op, {x, w})`
  // does). The result dies at once: freed with its closure.
  void run() {
    const dtr::Tensor y = call(inputs_);
    benchmark::DoNotOptimize(&y);
  }

  // chain_[0] is the chain's end: the previous end's handle dies, so it is evicted eagerly but stays in the
  // lineage; after kChainLength steps the chain is dropped and its closures and storages are freed.
  void run_chain_step() {
    chain_[0] = call(chain_);
    benchmark::DoNotOptimize(&chain_[0]);
    if (++step_ == kChainLength) {
      chain_[0] = inputs_[0];
      step_ = 0;
    }
  }

  dtr::RuntimeStats stats() const { return rt_.stats(); }

 private:
  static dtr::Config make_config(dtr::CostModel cost_model) {
    dtr::Config config;  // no budget
    config.cost_model = cost_model;
    return config;
  }

  dtr::Tensor call(const std::vector<dtr::Tensor>& args) {
    if (args.size() == 1) return rt_.call1(op_, {args[0]});
    return rt_.call1(op_, {args[0], args[1]});
  }

  const dtr::OpDef& op_;
  dtr::Runtime rt_;
  std::vector<dtr::Tensor> inputs_;
  std::vector<dtr::Tensor> chain_;
  int step_ = 0;
};

void BM_runtime(benchmark::State& state, const Case* c, dtr::CostModel cost_model, bool chain) {
  ThroughRuntime through(*c, cost_model);
  const dtr::RuntimeStats before = through.stats();
  for (auto _ : state) {
    if (chain) {
      through.run_chain_step();
    } else {
      through.run();
    }
  }
  const dtr::RuntimeStats after = through.stats();
  // 0 for temporaries (freed, not evicted); 15/16 for chains (each intermediate evicted, kept in the lineage).
  state.counters["eager_evictions_per_op"] =
      static_cast<double>(after.eager_evictions - before.eager_evictions) /
      static_cast<double>(std::max<std::uint64_t>(after.ops - before.ops, 1));
}

// ---- paired ----------------------------------------------------------------------------------------------

// One iteration is one round: K direct ops, then K runtime ops. Counters (ns per op, medians over the
// rounds of this repetition): direct_ns, runtime_ns, overhead_ns (of the per-round differences).
void BM_paired(benchmark::State& state, const Case* c, dtr::CostModel cost_model) {
  using Clock = std::chrono::steady_clock;
  const int block = c->large ? kPairedBlockLarge : kPairedBlockSmall;
  Direct direct(*c);
  ThroughRuntime through(*c, cost_model);
  for (int i = 0; i < block; ++i) direct.run();
  std::vector<double> direct_ns;
  std::vector<double> runtime_ns;
  std::vector<double> overhead_ns;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < block; ++i) direct.run();
    const Clock::time_point t1 = Clock::now();
    for (int i = 0; i < block; ++i) through.run();
    const Clock::time_point t2 = Clock::now();
    const double d = std::chrono::duration<double, std::nano>(t1 - t0).count() / block;
    const double r = std::chrono::duration<double, std::nano>(t2 - t1).count() / block;
    direct_ns.push_back(d);
    runtime_ns.push_back(r);
    overhead_ns.push_back(r - d);
  }
  state.counters["direct_ns"] = median(direct_ns);
  state.counters["runtime_ns"] = median(runtime_ns);
  state.counters["overhead_ns"] = median(overhead_ns);
  state.counters["rounds"] = static_cast<double>(overhead_ns.size());
}

// ---- registration ----------------------------------------------------------------------------------------

struct Variant {
  const char* name;  // benchmark name prefix
  bool runtime;
  dtr::CostModel cost_model;
  bool chain;
};

const Variant kVariants[] = {
    {"direct", false, dtr::CostModel::measured, false},
    {"runtime_measured", true, dtr::CostModel::measured, false},
    {"runtime_flops", true, dtr::CostModel::flops, false},
    {"direct_chain16", false, dtr::CostModel::measured, true},
    {"runtime_measured_chain16", true, dtr::CostModel::measured, true},
};

const dtr::CostModel kPairedModels[] = {dtr::CostModel::measured, dtr::CostModel::flops};

std::string benchmark_name(const char* prefix, const Case& c) {
  std::string name = "BM_";
  name += prefix;
  name += "/";
  name += case_name(c);
  return name;
}

std::string paired_name(const Case& c, dtr::CostModel model) {
  std::string prefix = "paired_";
  prefix += dtr::to_string(model);
  return benchmark_name(prefix.c_str(), c);
}

bool runs(const Variant& v, const Case& c) { return !(v.chain && c.large); }

// Case-major order: the variants of one op run back to back, so that each difference compares measurements
// taken close together in time (on a shared VM the speed drifts over a run).
void register_benchmarks() {
  for (const Case& c : cases()) {
    const benchmark::TimeUnit unit = c.large ? benchmark::kMicrosecond : benchmark::kNanosecond;
    for (const Variant& v : kVariants) {
      if (!runs(v, c)) continue;
      const std::string name = benchmark_name(v.name, c);
      benchmark::internal::Benchmark* b =
          v.runtime ? benchmark::RegisterBenchmark(name.c_str(), BM_runtime, &c, v.cost_model, v.chain)
                    : benchmark::RegisterBenchmark(name.c_str(), BM_direct, &c, v.chain);
      b->MinTime(kMinTime)->UseRealTime()->Unit(unit);
    }
    for (dtr::CostModel model : kPairedModels) {
      benchmark::RegisterBenchmark(paired_name(c, model).c_str(), BM_paired, &c, model)
          ->MinTime(kPairedMinTime)
          ->UseRealTime()
          ->Unit(unit);
    }
  }
}

// ---- the overhead tables ---------------------------------------------------------------------------------

// Small ops: at most 1 us of bookkeeping per op; large (1 ms) ops: at most 2% of the op.
bool target_met(const Case& c, double direct_ns, double overhead_ns) {
  return c.large ? overhead_ns / direct_ns * 100.0 <= 2.0 : overhead_ns <= 1000.0;
}

const char* model_name(dtr::CostModel model) { return model == dtr::CostModel::measured ? "measured" : "flops"; }

void print_header() {
  std::printf("%-20s %-9s %13s %13s %11s %10s  %s\n", "op", "cost", "direct", "runtime", "overhead",
              "overhead%", "target");
}

// Returns whether the target was met; prints nothing and returns true when a side did not run.
bool print_row(const Case& c, const std::string& label, dtr::CostModel model, double direct_ns,
               double runtime_ns, double overhead_ns, bool* any) {
  if (std::isnan(direct_ns) || std::isnan(runtime_ns) || std::isnan(overhead_ns)) return true;
  *any = true;
  const bool met = target_met(c, direct_ns, overhead_ns);
  std::printf("%-20s %-9s %13.1f %13.1f %11.1f %9.2f%%  %s %s\n", label.c_str(), model_name(model), direct_ns,
              runtime_ns, overhead_ns, overhead_ns / direct_ns * 100.0, c.large ? "<= 2%:" : "<= 1000 ns:",
              met ? "met" : "NOT met");
  return met;
}

void print_overhead_tables(const dtr::bench::MedianReporter& r) {
  std::printf("\nSeparate benchmarks: median real time per op (ns) over the repetitions; overhead = runtime - "
              "direct\n");
  print_header();
  bool all_met = true;
  bool any = false;
  for (const Case& c : cases()) {
    for (const Variant& v : kVariants) {
      if (!v.runtime || !runs(v, c)) continue;
      const char* direct = v.chain ? "direct_chain16" : "direct";
      const double direct_ns = r.median_ns(benchmark_name(direct, c));
      const double runtime_ns = r.median_ns(benchmark_name(v.name, c));
      std::string label = case_name(c);
      if (v.chain) label += " chain";
      all_met &= print_row(c, label, v.cost_model, direct_ns, runtime_ns, runtime_ns - direct_ns, &any);
    }
  }
  if (any) std::printf("All targets (separate): %s\n", all_met ? "met" : "NOT met");

  std::printf("\nPaired (direct and runtime interleaved in rounds of %d small / %d large ops): ns per op, "
              "median over rounds, then over the repetitions; overhead = median of per-round differences\n",
              kPairedBlockSmall, kPairedBlockLarge);
  print_header();
  all_met = true;
  any = false;
  for (const Case& c : cases()) {
    for (dtr::CostModel model : kPairedModels) {
      const std::string key = paired_name(c, model);
      all_met &= print_row(c, case_name(c), model, r.counter(key, "direct_ns"), r.counter(key, "runtime_ns"),
                           r.counter(key, "overhead_ns"), &any);
    }
  }
  if (any) std::printf("All targets (paired): %s\n", all_met ? "met" : "NOT met");
}

// ---- a plain loop, for callgrind -------------------------------------------------------------------------

// `dtr-bench-runtime --call-loop <op> <calls> [direct|measured|flops]`: sets up as the benchmarks do (the
// runtime warmed up), then makes <calls> calls of the op with nothing else around them, so that
// `valgrind --tool=callgrind` counts instructions per op: (total(N + 1 calls) - total(1 call)) / N.
int call_loop(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s --call-loop relu|add|matmul|relu/1 <calls> [direct|measured|flops]\n",
                 argv[0]);
    return 2;
  }
  const std::string label = argv[2];
  const long calls = std::strtol(argv[3], nullptr, 10);
  const std::string mode = argc > 4 ? argv[4] : "measured";
  const Case* c = nullptr;  // a case name ("relu/1"), or an op's label for its last (largest) case
  for (const Case& candidate : cases()) {
    if (label == candidate.label) c = &candidate;
  }
  for (const Case& candidate : cases()) {
    if (label == case_name(candidate)) c = &candidate;
  }
  if (c == nullptr || calls <= 0 || (mode != "direct" && mode != "measured" && mode != "flops")) {
    std::fprintf(stderr, "--call-loop: unknown op, count or mode\n");
    return 2;
  }
  if (mode == "direct") {
    Direct direct(*c);
    for (long i = 0; i < calls; ++i) direct.run();
  } else {
    ThroughRuntime through(*c, mode == "flops" ? dtr::CostModel::flops : dtr::CostModel::measured);
    for (long i = 0; i < calls; ++i) through.run();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--call-loop") return call_loop(argc, argv);
  return dtr::bench::run_benchmarks<dtr::bench::MedianReporter>(argc, argv, register_benchmarks, print_overhead_tables);
}

// The caching allocator's cost against malloc/free and against the uncached upstream resource it sits on.
//
// Measured in one run (docs/benchmarks.md has the command, docs/results/allocator.md the numbers):
// - pair/<bytes>: one allocate + deallocate of the same size, repeated; the allocator is warmed up, so the
//   cached pair is a cache hit that never reaches the upstream. Sizes 512 B .. 64 MiB.
// - trace: a deterministic synthetic trace shaped like training steps (forward activations with short-lived
//   temporaries, then a backward pass that frees activations in reverse while gradients come and go),
//   replayed op by op; reported per op.
// Each is run through dtr::CachingAllocator over dtr::make_host_resource() (no budget), std::malloc/std::free,
// and the host resource itself; the trace also through the caching allocator with expandable segments. Memory is never touched: this measures allocator bookkeeping only, as a GPU
// allocator never touches device memory.
//
// After Google Benchmark's report, a table of the median times and the ratios cached/malloc and
// cached/upstream is printed. Defaults: --benchmark_repetitions=5 --benchmark_report_aggregates_only=true;
// flags given on the command line override them.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_main.h"
#include "dtr/caching_allocator.h"
#include "dtr/memory_resource.h"

namespace {

using dtr::bench::median;

constexpr double kMinTime = 0.2;  // seconds per repetition; keeps the whole run well under 2 minutes

constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * kKiB;
const std::vector<std::int64_t> kPairSizes = {512, 4 * kKiB, 64 * kKiB, 1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};

// ---- pair benchmarks -------------------------------------------------------------------------------------

void BM_pair_cached(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  dtr::CachingAllocator alloc(dtr::make_host_resource());
  alloc.deallocate(alloc.allocate(size), size);  // warm up: the segment is now cached
  const std::uint64_t upstream_before = alloc.stats().num_device_allocations;
  for (auto _ : state) {
    void* p = alloc.allocate(size);
    benchmark::DoNotOptimize(p);
    alloc.deallocate(p, size);
  }
  // 0 when every pair was a cache hit.
  state.counters["upstream_allocs"] =
      static_cast<double>(alloc.stats().num_device_allocations - upstream_before);
}

void BM_pair_malloc(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  std::free(std::malloc(size));  // warm up, as for the others
  for (auto _ : state) {
    void* p = std::malloc(size);  // NOLINT(cppcoreguidelines-no-malloc)
    benchmark::DoNotOptimize(p);
    std::free(p);  // NOLINT(cppcoreguidelines-no-malloc)
    benchmark::ClobberMemory();
  }
}

void BM_pair_upstream(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const std::unique_ptr<dtr::MemoryResource> host = dtr::make_host_resource();
  host->deallocate(host->allocate(size), size);  // warm up
  for (auto _ : state) {
    void* p = host->allocate(size);
    benchmark::DoNotOptimize(p);
    host->deallocate(p, size);
  }
}

// ---- trace replay ----------------------------------------------------------------------------------------

struct TraceOp {
  std::uint32_t slot = 0;
  bool allocate = false;
  std::size_t bytes = 0;
};

struct Trace {
  std::vector<TraceOp> ops;
  std::size_t slots = 0;
  std::size_t allocations = 0;
  std::uint64_t peak_live_bytes = 0;
};

constexpr int kLayers = 200;
constexpr int kSteps = 4;
constexpr std::uint64_t kSeed = 0x5eed'd7a1'2024ULL;

// A deterministic trace: only std::mt19937_64's output is used (its sequence is fixed by the standard), not
// the implementation-defined std:: distributions.
Trace make_trace() {
  std::mt19937_64 rng(kSeed);
  auto unit = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };  // [0, 1)
  auto log_uniform = [&](double lo, double hi) {
    const double bytes = std::exp(std::log(lo) + unit() * (std::log(hi) - std::log(lo)));
    return std::max<std::size_t>(4, static_cast<std::size_t>(bytes) / 4 * 4);  // whole float32 elements
  };
  auto below = [&rng](std::uint64_t n) { return static_cast<int>(rng() % n); };

  Trace t;
  std::vector<std::uint32_t> free_slots;
  std::uint64_t live = 0;
  auto alloc = [&](std::size_t bytes) {
    std::uint32_t slot = 0;
    if (free_slots.empty()) {
      slot = static_cast<std::uint32_t>(t.slots++);
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    t.ops.push_back({slot, true, bytes});
    t.allocations += 1;
    live += bytes;
    t.peak_live_bytes = std::max(t.peak_live_bytes, live);
    return slot;
  };
  auto release = [&](std::uint32_t slot, std::size_t bytes) {
    t.ops.push_back({slot, false, bytes});
    free_slots.push_back(slot);
    live -= bytes;
  };
  auto temporaries = [&](int count) {  // small workspaces, freed right away
    for (int i = 0; i < count; ++i) {
      const std::size_t bytes = log_uniform(512.0, 1024.0 * 1024.0 - 1);
      release(alloc(bytes), bytes);
    }
  };

  // The network: one activation size per layer, the same every step.
  std::vector<std::size_t> activation_bytes(kLayers);
  for (std::size_t& bytes : activation_bytes) bytes = log_uniform(4.0 * 1024, 32.0 * 1024 * 1024);

  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::uint32_t> activation(kLayers);
    for (int layer = 0; layer < kLayers; ++layer) {  // forward
      activation[layer] = alloc(activation_bytes[layer]);
      temporaries(below(4));  // 0..3
    }
    bool have_grad = false;
    std::uint32_t grad = 0;
    std::size_t grad_bytes = 0;
    for (int layer = kLayers - 1; layer >= 0; --layer) {  // backward
      const std::uint32_t next_grad = alloc(activation_bytes[layer]);
      temporaries(below(3));  // 0..2
      if (have_grad) release(grad, grad_bytes);
      release(activation[layer], activation_bytes[layer]);
      grad = next_grad;
      grad_bytes = activation_bytes[layer];
      have_grad = true;
    }
    release(grad, grad_bytes);
  }
  return t;
}

const Trace& trace() {
  static const Trace t = make_trace();
  return t;
}

template <typename Allocate, typename Deallocate>
void replay(const Trace& t, std::vector<void*>& slots, Allocate&& allocate, Deallocate&& deallocate) {
  for (const TraceOp& op : t.ops) {
    if (op.allocate) {
      void* p = allocate(op.bytes);
      benchmark::DoNotOptimize(p);
      slots[op.slot] = p;
    } else {
      deallocate(slots[op.slot], op.bytes);
    }
  }
  benchmark::ClobberMemory();
}

template <typename Allocate, typename Deallocate, typename OnWarm>
void run_trace(benchmark::State& state, Allocate&& allocate, Deallocate&& deallocate, OnWarm&& on_warm) {
  const Trace& t = trace();
  std::vector<void*> slots(t.slots, nullptr);
  replay(t, slots, allocate, deallocate);  // warm up
  on_warm();
  for (auto _ : state) replay(t, slots, allocate, deallocate);
  state.counters["ops"] = static_cast<double>(t.ops.size());
  state.counters["per_op"] = benchmark::Counter(static_cast<double>(t.ops.size()),
                                                benchmark::Counter::kIsIterationInvariantRate |
                                                    benchmark::Counter::kInvert);
}

// The trace through a caching allocator over the host resource, no budget.
void trace_through_caching(benchmark::State& state, const dtr::CachingAllocatorOptions& options) {
  dtr::CachingAllocator alloc(dtr::make_host_resource(), options);
  std::uint64_t warm = 0;
  run_trace(
      state, [&](std::size_t bytes) { return alloc.allocate(bytes); },
      [&](void* p, std::size_t bytes) { alloc.deallocate(p, bytes); },
      [&] { warm = alloc.stats().num_device_allocations; });
  const dtr::AllocatorStats stats = alloc.stats();
  // Segments (or page runs) reserved by the warm-up replay, and after it (0 when the timed replays were all
  // cache hits).
  state.counters["warmup_upstream_allocs"] = static_cast<double>(warm);
  state.counters["upstream_allocs"] = static_cast<double>(stats.num_device_allocations - warm);
  state.counters["reserved_MiB"] = static_cast<double>(stats.reserved_bytes.peak) / (1024.0 * 1024.0);
}

void BM_trace_cached(benchmark::State& state) { trace_through_caching(state, {}); }

// With expandable segments (pages of one range for large blocks): the page runs' bookkeeping.
void BM_trace_expandable(benchmark::State& state) {
  dtr::CachingAllocatorOptions options;
  options.expandable_segments = true;
  trace_through_caching(state, options);
}

void BM_trace_malloc(benchmark::State& state) {
  run_trace(
      state, [](std::size_t bytes) { return std::malloc(bytes); },  // NOLINT(cppcoreguidelines-no-malloc)
      [](void* p, std::size_t) { std::free(p); },                   // NOLINT(cppcoreguidelines-no-malloc)
      [] {});
}

void BM_trace_upstream(benchmark::State& state) {
  const std::unique_ptr<dtr::MemoryResource> host = dtr::make_host_resource();
  run_trace(
      state, [&](std::size_t bytes) { return host->allocate(bytes); },
      [&](void* p, std::size_t bytes) { host->deallocate(p, bytes); }, [] {});
}

// Size-major order: the three variants of one size run back to back, so that each ratio compares
// measurements taken close together in time (on a shared VM the speed drifts over a run).
void register_benchmarks() {
  using Fn = void(benchmark::State&);
  const std::pair<const char*, Fn*> pairs[] = {
      {"BM_pair_cached", BM_pair_cached}, {"BM_pair_malloc", BM_pair_malloc}, {"BM_pair_upstream", BM_pair_upstream}};
  for (std::int64_t size : kPairSizes) {
    for (const auto& [name, fn] : pairs) {
      benchmark::RegisterBenchmark(name, fn)->Arg(size)->MinTime(kMinTime)->UseRealTime()->Unit(
          benchmark::kNanosecond);
    }
  }
  const std::pair<const char*, Fn*> traces[] = {{"BM_trace_cached", BM_trace_cached},
                                                {"BM_trace_expandable", BM_trace_expandable},
                                                {"BM_trace_malloc", BM_trace_malloc},
                                                {"BM_trace_upstream", BM_trace_upstream}};
  for (const auto& [name, fn] : traces) {
    benchmark::RegisterBenchmark(name, fn)->MinTime(kMinTime)->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
}

// ---- the ratio table -------------------------------------------------------------------------------------

std::string size_label(std::int64_t bytes) {
  if (bytes >= kMiB) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

void print_ratio_table(const dtr::bench::MedianReporter& r) {
  auto row = [](const char* label, double cached, double malloc_ns, double upstream) {
    std::printf("%-12s %12.1f %12.1f %12.1f %14.2f %16.2f\n", label, cached, malloc_ns, upstream,
                cached / malloc_ns, cached / upstream);
  };
  std::printf("\nMedian real time per alloc+free pair (ns), over the repetitions; ratio < 1 means the cached "
              "allocator is faster\n");
  std::printf("%-12s %12s %12s %12s %14s %16s\n", "size", "cached", "malloc", "upstream", "cached/malloc",
              "cached/upstream");
  std::vector<double> vs_malloc;
  std::vector<double> vs_upstream;
  for (std::int64_t size : kPairSizes) {
    // Appended rather than `"/" + std::to_string(size)`, which trips GCC 12's -Wrestrict false positive at -O3.
    std::string arg = "/";
    arg += std::to_string(size);
    const double cached = r.median_ns("BM_pair_cached" + arg);
    const double malloc_ns = r.median_ns("BM_pair_malloc" + arg);
    const double upstream = r.median_ns("BM_pair_upstream" + arg);
    row(size_label(size).c_str(), cached, malloc_ns, upstream);
    if (!std::isnan(cached / malloc_ns)) vs_malloc.push_back(cached / malloc_ns);
    if (!std::isnan(cached / upstream)) vs_upstream.push_back(cached / upstream);
  }

  const Trace& t = trace();
  const double ops = static_cast<double>(t.ops.size());
  std::printf("\nTrace replay: %d steps x %d layers, %zu ops (%zu allocations), peak live %.1f MiB; median ns "
              "per op\n",
              kSteps, kLayers, t.ops.size(), t.allocations, static_cast<double>(t.peak_live_bytes) / kMiB);
  std::printf("%-12s %12s %12s %12s %14s %16s\n", "", "cached", "malloc", "upstream", "cached/malloc",
              "cached/upstream");
  row("trace", r.median_ns("BM_trace_cached") / ops, r.median_ns("BM_trace_malloc") / ops,
      r.median_ns("BM_trace_upstream") / ops);
  const double expandable = r.median_ns("BM_trace_expandable") / ops;
  std::printf("%-12s %12.1f ns per op with expandable segments: %.2fx the classic segments'\n", "trace",
              expandable, expandable / (r.median_ns("BM_trace_cached") / ops));

  const double median_vs_malloc = median(vs_malloc);
  std::printf("\nMedian over the %zu pair sizes: cached/malloc %.2f, cached/upstream %.2f\n", vs_malloc.size(),
              median_vs_malloc, median(vs_upstream));
  std::printf("Target (a cached pair within 2x of malloc+free, median): %s\n",
              std::isnan(median_vs_malloc) ? "not measured"
              : median_vs_malloc <= 2.0    ? "met"
                                           : "NOT met");
  std::printf("ratio < 1 means the cached allocator is faster\n");
}

}  // namespace

int main(int argc, char** argv) {
  return dtr::bench::run_benchmarks<dtr::bench::MedianReporter>(argc, argv, register_benchmarks, print_ratio_table);
}

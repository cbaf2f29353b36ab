// Factories for every MemoryResource, so that one contract suite runs against each (RMM's pattern).
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "dtr/dtr.h"

namespace dtr::test {

// A resource and whatever keeps it alive.
struct ResourceUnderTest {
  std::unique_ptr<MemoryResource> upstream;  // may be null
  std::unique_ptr<MemoryResource> resource;
};

struct HostFactory {
  static ResourceUnderTest make() { return {nullptr, make_host_resource()}; }
};

struct SimulatedFactory {
  static ResourceUnderTest make() { return {nullptr, make_simulated_resource(std::size_t{1} << 32)}; }
};

struct CachingHostFactory {
  static ResourceUnderTest make() {
    auto upstream = make_host_resource();
    auto caching = std::make_unique<CachingAllocator>(*upstream);
    return {std::move(upstream), std::move(caching)};
  }
};

struct CachingSimulatedBudgetFactory {
  static ResourceUnderTest make() {
    auto upstream = make_simulated_resource(std::size_t{1} << 32);
    CachingAllocatorOptions options;
    options.budget_bytes = std::uint64_t{1} << 30;
    auto caching = std::make_unique<CachingAllocator>(*upstream, options);
    return {std::move(upstream), std::move(caching)};
  }
};

// Skips the calling test when this machine has no GPU.
// Expandable segments: large blocks from one address range, pages mapped on demand (host: 4 KiB pages).
struct CachingHostExpandableFactory {
  static ResourceUnderTest make() {
    auto upstream = make_host_resource();
    CachingAllocatorOptions options;
    options.expandable_segments = true;
    auto caching = std::make_unique<CachingAllocator>(*upstream, options);
    return {std::move(upstream), std::move(caching)};
  }
};

// Simulated: 2 MiB pages, as a GPU maps them.
struct CachingSimulatedExpandableBudgetFactory {
  static ResourceUnderTest make() {
    auto upstream = make_simulated_resource(std::size_t{1} << 32);
    CachingAllocatorOptions options;
    options.budget_bytes = std::uint64_t{1} << 30;
    options.expandable_segments = true;
    auto caching = std::make_unique<CachingAllocator>(*upstream, options);
    return {std::move(upstream), std::move(caching)};
  }
};

struct CudaFactory {
  static ResourceUnderTest make() { return {nullptr, make_cuda_resource(0)}; }
};

inline bool gpu_present() { return cuda::device_count() > 0; }

#define DTR_SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                         \
    if (!::dtr::test::gpu_present()) GTEST_SKIP() << "no GPU: " << ::dtr::cuda::unavailable_reason(); \
  } while (false)

// `config` with caching-allocator segments of a few KiB, so that the small tensors of a test program span many
// segments under a device budget and fragmentation (windows included) is exercised.
inline Config small_segments(Config config) {
  config.allocator.small_request_limit = 4 * 1024;
  config.allocator.small_segment_bytes = 16 * 1024;
  config.allocator.large_segment_bytes = 32 * 1024;
  config.allocator.own_segment_threshold = 32 * 1024;
  config.allocator.own_segment_rounding = 16 * 1024;
  return config;
}

}  // namespace dtr::test

namespace dtr::test {

// Forwards to an upstream and counts what passes through, so tests see the allocator's device traffic.
class CountingResource final : public MemoryResource {
 public:
  explicit CountingResource(MemoryResource& upstream) : upstream_(upstream) {}
  std::size_t capacity() const override { return upstream_.capacity(); }
  std::string name() const override { return "counting(" + upstream_.name() + ")"; }
  bool host_accessible() const override { return upstream_.host_accessible(); }
  std::optional<Device> device() const override { return upstream_.device(); }

  int allocations = 0;
  int deallocations = 0;
  std::size_t live_bytes = 0;
  // Requests above this many bytes throw OutOfMemory, as a device with little room left would.
  std::size_t fail_above = std::numeric_limits<std::size_t>::max();

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes > fail_above) {
      throw OutOfMemory("counting: injected failure", {}, __FILE__, __LINE__);
    }
    void* p = upstream_.allocate(bytes, alignment);
    ++allocations;
    live_bytes += bytes;
    return p;
  }
  void do_deallocate(void* ptr, std::size_t bytes) override {
    upstream_.deallocate(ptr, bytes);
    ++deallocations;
    live_bytes -= bytes;
  }

 private:
  MemoryResource& upstream_;
};

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

// A runtime configuration whose every decision is reproducible: FLOP costs and an op-counting clock.
inline Config deterministic_config(std::optional<std::uint64_t> budget = std::nullopt,
                                   BudgetMode mode = BudgetMode::bytes, const std::string& heuristic = "dtr-eq") {
  Config config;
  config.memory_budget = budget;
  config.budget_mode = mode;
  config.heuristic = heuristic;
  config.cost_model = CostModel::flops;
  config.clock = ClockKind::ops;
  // The tests explore budgets down to the smallest that fits, whatever the overhead: the thrash limit has tests
  // of its own (runtime_thrash_test.cpp).
  config.thrash_limit = std::nullopt;
  return config;
}

// deterministic_config under a device budget whose small segments are `segment_bytes` and hold requests of
// up to their whole size, so that a test lays out one segment block by block (small_segments, above, keeps
// requests to a quarter of a segment, for random programs that spread over many).
inline Config small_segment_config(std::optional<std::uint64_t> budget, const std::string& heuristic,
                                   Compaction compaction, std::size_t segment_bytes = 8 * KiB) {
  Config config = deterministic_config(budget, BudgetMode::device, heuristic);
  config.allocator.small_request_limit = segment_bytes;
  config.allocator.small_segment_bytes = segment_bytes;
  config.allocator.compaction = compaction;
  return config;
}

}  // namespace dtr::test

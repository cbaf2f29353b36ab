// Several threads allocate and free under one budget while a shared reclaimer evicts other threads' blocks.
// Run under TSan with -DDTR_SANITIZE=thread (see docs/allocator.md).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

#include "test_resources.h"

namespace dtr::test {
namespace {

// Blocks any thread may evict, guarded by its own lock (never held while calling the allocator's allocate).
class SharedReclaimer final : public Reclaimer {
 public:
  explicit SharedReclaimer(CachingAllocator& alloc) : alloc_(alloc) {}

  void add(void* p) {
    std::lock_guard lock(mutex_);
    evictable_.insert(p);
  }
  // True if the caller still owned `p` (it was not evicted) and has now freed it.
  bool free_if_owned(void* p) {
    std::lock_guard lock(mutex_);
    if (evictable_.erase(p) == 0) return false;
    alloc_.free(p);
    return true;
  }
  std::size_t reclaim(const ReclaimRequest&) override {
    std::lock_guard lock(mutex_);
    if (evictable_.empty()) return 0;
    void* victim = *evictable_.begin();
    evictable_.erase(evictable_.begin());
    alloc_.free(victim);
    evictions.fetch_add(1);
    return 1;
  }
  std::atomic<int> evictions{0};

 private:
  CachingAllocator& alloc_;
  std::mutex mutex_;
  std::unordered_set<void*> evictable_;
};

TEST(CachingAllocatorConcurrency, ThreadsShareABudgetAndAReclaimer) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  CachingAllocatorOptions options;
  options.budget_bytes = 48 * MiB;
  CachingAllocator alloc(*device, options);
  SharedReclaimer reclaimer(alloc);
  alloc.set_reclaimer(&reclaimer);

  constexpr int kThreads = 4;
  constexpr int kSteps = 4000;
  std::atomic<int> ooms{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 100);
      std::vector<void*> mine;
      for (int i = 0; i < kSteps; ++i) {
        if (!mine.empty() && rng() % 2 == 0) {
          const std::size_t k = rng() % mine.size();
          reclaimer.free_if_owned(mine[k]);
          mine[k] = mine.back();
          mine.pop_back();
        } else {
          const std::size_t bytes = std::uniform_int_distribution<std::size_t>(1, 6 * MiB)(rng);
          try {
            void* p = alloc.allocate(bytes);
            mine.push_back(p);
            reclaimer.add(p);
          } catch (const OutOfMemory&) {
            ooms.fetch_add(1);
          }
        }
        ASSERT_LE(alloc.stats().reserved_bytes.current, 48 * MiB);
      }
      for (void* p : mine) reclaimer.free_if_owned(p);
    });
  }
  for (auto& thread : threads) thread.join();
  alloc.set_reclaimer(nullptr);

  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes.current, 0u);
  EXPECT_EQ(s.active_blocks.current, 0u);
  EXPECT_LE(s.reserved_bytes.peak, 48 * MiB);
  EXPECT_GT(reclaimer.evictions.load(), 0);
  EXPECT_EQ(s.num_ooms, static_cast<std::uint64_t>(ooms.load()));
  EXPECT_EQ(s.num_allocations, s.num_frees);
}

}  // namespace
}  // namespace dtr::test

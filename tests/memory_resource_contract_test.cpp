// The MemoryResource contract (include/dtr/memory_resource.h), checked for every resource.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "test_resources.h"

namespace dtr::test {
namespace {

template <typename Factory>
class MemoryResourceContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (std::is_same_v<Factory, CudaFactory>) {
      DTR_SKIP_WITHOUT_GPU();
    }
    under_test_ = Factory::make();
  }
  MemoryResource& resource() { return *under_test_.resource; }

 private:
  ResourceUnderTest under_test_;
};

TYPED_TEST_SUITE_P(MemoryResourceContract);

TYPED_TEST_P(MemoryResourceContract, DescribesItself) {
  EXPECT_FALSE(this->resource().name().empty());
  EXPECT_GT(this->resource().capacity(), 0u);
}

TYPED_TEST_P(MemoryResourceContract, ZeroBytesGiveNullAndNullFreesNothing) {
  EXPECT_EQ(this->resource().allocate(0), nullptr);
  EXPECT_NO_THROW(this->resource().deallocate(nullptr, 0));
  EXPECT_THROW(this->resource().deallocate(nullptr, 16), InvalidArgument);
}

TYPED_TEST_P(MemoryResourceContract, HonoursEveryAlignment) {
  for (std::size_t alignment = 1; alignment <= MemoryResource::kMaxAlignment; alignment *= 2) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{3}, std::size_t{700}, std::size_t{5000}}) {
      void* p = this->resource().allocate(bytes, alignment);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u) << bytes << " bytes, alignment " << alignment;
      this->resource().deallocate(p, bytes);
    }
  }
}

TYPED_TEST_P(MemoryResourceContract, RejectsBadAlignment) {
  EXPECT_THROW(this->resource().allocate(64, 3), InvalidArgument);
  EXPECT_THROW(this->resource().allocate(64, 0), InvalidArgument);
  EXPECT_THROW(this->resource().allocate(64, MemoryResource::kMaxAlignment * 2), InvalidArgument);
}

TYPED_TEST_P(MemoryResourceContract, LiveAllocationsNeverOverlap) {
  std::mt19937_64 rng(7);
  std::vector<std::pair<std::uintptr_t, std::size_t>> live;
  for (int i = 0; i < 200; ++i) {
    const std::size_t bytes = std::size_t{1} << std::uniform_int_distribution<int>(0, 22)(rng);
    void* p = this->resource().allocate(bytes);
    live.emplace_back(reinterpret_cast<std::uintptr_t>(p), bytes);
    if (this->resource().host_accessible()) std::memset(p, 0xAB, bytes);  // the memory is really usable
  }
  auto sorted = live;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    EXPECT_LE(sorted[i - 1].first + sorted[i - 1].second, sorted[i].first);
  }
  for (auto [address, bytes] : live) this->resource().deallocate(reinterpret_cast<void*>(address), bytes);
}

TYPED_TEST_P(MemoryResourceContract, ForeignPointerIsRejected) {
  int on_the_stack = 0;
  EXPECT_THROW(this->resource().deallocate(&on_the_stack, sizeof on_the_stack), InvalidArgument);
  void* p = this->resource().allocate(1024);
  EXPECT_THROW(this->resource().deallocate(static_cast<char*>(p) + 512, 512), InvalidArgument);
  this->resource().deallocate(p, 1024);
}

TYPED_TEST_P(MemoryResourceContract, DoubleFreeIsRejectedAndHarmless) {
  void* p = this->resource().allocate(4096);
  this->resource().deallocate(p, 4096);
  EXPECT_THROW(this->resource().deallocate(p, 4096), InvalidArgument);
  // The resource still works, and may hand the same address out again.
  void* q = this->resource().allocate(4096);
  EXPECT_NE(q, nullptr);
  this->resource().deallocate(q, 4096);
}

TYPED_TEST_P(MemoryResourceContract, WrongSizeIsRejectedAndTheBlockStaysLive) {
  void* p = this->resource().allocate(4096);
  EXPECT_THROW(this->resource().deallocate(p, 4095), InvalidArgument);
  EXPECT_NO_THROW(this->resource().deallocate(p, 4096));
}

TYPED_TEST_P(MemoryResourceContract, RequestBeyondCapacityThrowsOutOfMemory) {
  const std::size_t huge = this->resource().capacity() + (std::size_t{1} << 30);
  EXPECT_THROW(this->resource().allocate(huge), OutOfMemory);
  EXPECT_THROW(this->resource().allocate(std::numeric_limits<std::size_t>::max()), std::bad_alloc);
  void* p = this->resource().allocate(512);  // and it is still usable
  this->resource().deallocate(p, 512);
}

TYPED_TEST_P(MemoryResourceContract, ThreadsAllocateAndFreeConcurrently) {
  constexpr int kThreads = 4;
  constexpr int kIterations = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      std::vector<std::pair<void*, std::size_t>> mine;
      for (int i = 0; i < kIterations; ++i) {
        if (mine.empty() || rng() % 3 != 0) {
          const std::size_t bytes = std::uniform_int_distribution<std::size_t>(1, 1 << 16)(rng);
          mine.emplace_back(this->resource().allocate(bytes), bytes);
        } else {
          const std::size_t k = rng() % mine.size();
          this->resource().deallocate(mine[k].first, mine[k].second);
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (auto [p, bytes] : mine) this->resource().deallocate(p, bytes);
    });
  }
  for (auto& thread : threads) thread.join();
}

REGISTER_TYPED_TEST_SUITE_P(MemoryResourceContract, DescribesItself, ZeroBytesGiveNullAndNullFreesNothing,
                            HonoursEveryAlignment, RejectsBadAlignment, LiveAllocationsNeverOverlap,
                            ForeignPointerIsRejected, DoubleFreeIsRejectedAndHarmless,
                            WrongSizeIsRejectedAndTheBlockStaysLive, RequestBeyondCapacityThrowsOutOfMemory,
                            ThreadsAllocateAndFreeConcurrently);

using Resources = ::testing::Types<HostFactory, SimulatedFactory, CachingHostFactory,
                                   CachingSimulatedBudgetFactory, CachingHostExpandableFactory,
                                   CachingSimulatedExpandableBudgetFactory, CudaFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(AllResources, MemoryResourceContract, Resources);

}  // namespace
}  // namespace dtr::test

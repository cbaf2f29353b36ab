// The Reclaimer contract: the allocator asks for room without its lock held, retries while the reclaimer makes
// progress, and throws dtr::OutOfMemory once it makes none.
#include <gtest/gtest.h>

#include <deque>
#include <functional>

#include "test_resources.h"

namespace dtr::test {
namespace {

// Owns blocks it may free, oldest first, like a runtime evicting tensors.
class FakeReclaimer final : public Reclaimer {
 public:
  explicit FakeReclaimer(CachingAllocator& alloc) : alloc_(alloc) {}

  void own(void* ptr) { owned_.push_back(ptr); }

  std::size_t reclaim(const ReclaimRequest& request) override {
    requests.push_back(request);
    if (during_reclaim) during_reclaim();
    if (owned_.empty()) return 0;
    void* victim = owned_.front();
    owned_.pop_front();
    alloc_.free(victim);
    return 1;
  }

  // Frees whatever it still owns (the end of a test).
  void free_all() {
    for (void* ptr : owned_) alloc_.free(ptr);
    owned_.clear();
  }

  std::vector<ReclaimRequest> requests;
  std::function<void()> during_reclaim;

 private:
  CachingAllocator& alloc_;
  std::deque<void*> owned_;
};

class ReclaimerTest : public ::testing::Test {
 protected:
  std::unique_ptr<MemoryResource> device_ = make_simulated_resource(std::size_t{1} << 30);
  CachingAllocator alloc_{*device_, [] {
                            CachingAllocatorOptions o;
                            o.budget_bytes = 4 * MiB;
                            return o;
                          }()};
  FakeReclaimer reclaimer_{alloc_};

  void SetUp() override { alloc_.set_reclaimer(&reclaimer_); }
  void TearDown() override {
    alloc_.set_reclaimer(nullptr);
    reclaimer_.free_all();
    EXPECT_EQ(alloc_.stats().allocated_bytes.current, 0u) << "a test leaked blocks";
  }

  // Fills the 4 MiB budget with four 1 MiB blocks in two small segments, all owned by the reclaimer.
  std::vector<void*> fill() {
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) {
      blocks.push_back(alloc_.allocate(MiB));
      reclaimer_.own(blocks.back());
    }
    EXPECT_EQ(alloc_.stats().reserved_bytes.current, 4 * MiB);
    return blocks;
  }
};

TEST_F(ReclaimerTest, OneEvictionServesASameSizedRequest) {
  fill();
  void* p = alloc_.allocate(MiB);
  EXPECT_EQ(alloc_.stats().reserved_bytes.current, 4 * MiB);
  ASSERT_EQ(reclaimer_.requests.size(), 1u);
  const ReclaimRequest& r = reclaimer_.requests[0];
  EXPECT_EQ(r.requested_bytes, MiB);
  EXPECT_EQ(r.block_bytes, MiB);
  EXPECT_EQ(r.pool, Pool::small);
  EXPECT_EQ(r.budget_bytes, 4 * MiB);
  EXPECT_EQ(r.reserved_bytes, 4 * MiB);
  EXPECT_EQ(alloc_.stats().num_reclaim_calls, 1u);
  EXPECT_EQ(alloc_.stats().num_ooms, 0u);
  alloc_.free(p);
}

TEST_F(ReclaimerTest, RetriesUntilWholeSegmentsMakeRoomForAnotherPool) {
  fill();
  // 3 MiB is a large-pool request: only releasing both small segments makes room under the budget.
  void* p = alloc_.allocate(3 * MiB);
  EXPECT_EQ(reclaimer_.requests.size(), 4u);
  EXPECT_EQ(reclaimer_.requests[0].pool, Pool::large);
  const AllocatorStats s = alloc_.stats();
  EXPECT_EQ(s.num_device_frees, 2u);
  EXPECT_EQ(s.reserved_bytes.current, 3 * MiB);
  EXPECT_LE(s.reserved_bytes.peak, 4 * MiB);
  alloc_.free(p);
}

TEST_F(ReclaimerTest, ThrowsOnceTheReclaimerMakesNoProgress) {
  std::vector<void*> pinned;
  for (int i = 0; i < 4; ++i) pinned.push_back(alloc_.allocate(MiB));  // not owned: cannot be evicted
  try {
    alloc_.allocate(MiB);
    FAIL() << "expected dtr::OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("could free nothing more"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reclaimer_.requests.size(), 1u);
  EXPECT_EQ(alloc_.stats().num_ooms, 1u);
  for (void* p : pinned) alloc_.free(p);
}

TEST_F(ReclaimerTest, AReclaimerThatOnlyClaimsProgressDoesNotLoopForever) {
  class Liar final : public Reclaimer {
   public:
    std::size_t reclaim(const ReclaimRequest&) override {
      ++calls;
      return 1 << 20;
    }
    int calls = 0;
  } liar;
  alloc_.set_reclaimer(&liar);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(alloc_.allocate(MiB));
  EXPECT_THROW(alloc_.allocate(MiB), OutOfMemory);
  EXPECT_EQ(liar.calls, 1);
  for (void* p : blocks) alloc_.free(p);
}

TEST_F(ReclaimerTest, RunsWithoutTheAllocatorLock) {
  fill();
  bool inspected = false;
  reclaimer_.during_reclaim = [&] {
    // Each of these takes the allocator's lock: a deadlock here would mean the lock is held.
    EXPECT_EQ(alloc_.stats().reserved_bytes.current, 4 * MiB);
    EXPECT_EQ(alloc_.snapshot().segments.size(), 2u);
    inspected = true;
  };
  alloc_.free(alloc_.allocate(MiB));
  EXPECT_TRUE(inspected);
}

TEST_F(ReclaimerTest, RequestsLargerThanTheBudgetNeverReachTheReclaimer) {
  fill();
  EXPECT_THROW(alloc_.allocate(5 * MiB), OutOfMemory);
  EXPECT_TRUE(reclaimer_.requests.empty());
}

TEST_F(ReclaimerTest, UnregisteredReclaimerIsNotCalled) {
  fill();
  alloc_.set_reclaimer(nullptr);
  EXPECT_THROW(alloc_.allocate(MiB), OutOfMemory);
  EXPECT_TRUE(reclaimer_.requests.empty());
}

}  // namespace
}  // namespace dtr::test

// The caching allocator's policy, budget, stats, snapshot and error messages, on a simulated device.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "test_resources.h"

namespace dtr::test {
namespace {

class CachingAllocatorTest : public ::testing::Test {
 protected:
  std::unique_ptr<MemoryResource> device_ = make_simulated_resource(std::size_t{8} << 30);
  CountingResource counting_{*device_};

  std::unique_ptr<CachingAllocator> make(std::optional<std::uint64_t> budget = std::nullopt) {
    CachingAllocatorOptions options;
    options.budget_bytes = budget;
    return std::make_unique<CachingAllocator>(counting_, options);
  }

  static std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }
};

TEST_F(CachingAllocatorTest, RoundsRequestsTo512Bytes) {
  auto alloc = make();
  void* p = alloc->allocate(1);
  AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.allocated_bytes.current, 512u);
  EXPECT_EQ(s.requested_bytes.current, 1u);
  EXPECT_EQ(s.active_blocks.current, 1u);
  void* q = alloc->allocate(513);
  EXPECT_EQ(alloc->stats().allocated_bytes.current, 512u + 1024u);
  EXPECT_EQ(addr(q), addr(p) + 512);
  alloc->deallocate(p, 1);
  alloc->deallocate(q, 513);
  EXPECT_EQ(alloc->stats().allocated_bytes.current, 0u);
}

TEST_F(CachingAllocatorTest, SmallRequestsShareTwoMiBSegments) {
  auto alloc = make();
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(alloc->allocate(512 * KiB));  // fills one 2 MiB segment
  EXPECT_EQ(alloc->stats().segments.current, 1u);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 2 * MiB);
  blocks.push_back(alloc->allocate(MiB));  // the largest small request: a second segment
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 2u);
  for (const auto& segment : snap.segments) {
    EXPECT_EQ(segment.pool, Pool::small);
    EXPECT_EQ(segment.size, 2 * MiB);
  }
  for (void* p : blocks) alloc->free(p);
}

TEST_F(CachingAllocatorTest, LargeRequestsComeFromTwentyMiBSegments) {
  auto alloc = make();
  void* p = alloc->allocate(MiB + 1);
  void* q = alloc->allocate(3 * MiB);
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].pool, Pool::large);
  EXPECT_EQ(snap.segments[0].size, 20 * MiB);
  alloc->free(p);
  alloc->free(q);
}

TEST_F(CachingAllocatorTest, RequestsFromTenMiBGetOwnSegmentRoundedToTwoMiB) {
  auto alloc = make();
  void* p = alloc->allocate(10 * MiB + 1);
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].size, 12 * MiB);
  // The tail (2 MiB - 512 B) is larger than 1 MiB: split off and cached.
  ASSERT_EQ(snap.segments[0].blocks.size(), 2u);
  EXPECT_EQ(snap.segments[0].blocks[0].size, 10 * MiB + 512);
  EXPECT_FALSE(snap.segments[0].blocks[1].allocated);
  alloc->free(p);
}

TEST_F(CachingAllocatorTest, LargeBlocksKeepTailsOfAtMostOneMiB) {
  auto alloc = make();
  void* p = alloc->allocate(19 * MiB + 512 * KiB);  // 512 KiB left of a 20 MiB segment: not split
  EXPECT_EQ(alloc->stats().allocated_bytes.current, 20 * MiB);
  EXPECT_EQ(alloc->stats().requested_bytes.current, 19 * MiB + 512 * KiB);
  alloc->free(p);
}

TEST_F(CachingAllocatorTest, BestFitTakesTheSmallestThenLowestFreeBlock) {
  auto alloc = make();
  // Segment layout: [a 4K][b 1K][c 2K][d 1K][e 4K][f 1K][rest]; free a, c, e: holes of 4K, 2K, 4K.
  void* a = alloc->allocate(4 * KiB);
  void* b = alloc->allocate(KiB);
  void* c = alloc->allocate(2 * KiB);
  void* d = alloc->allocate(KiB);
  void* e = alloc->allocate(4 * KiB);
  void* f = alloc->allocate(KiB);
  const auto a_addr = addr(a), c_addr = addr(c);
  alloc->free(a);
  alloc->free(c);
  alloc->free(e);
  void* x = alloc->allocate(2 * KiB);  // exactly the 2K hole
  EXPECT_EQ(addr(x), c_addr);
  void* y = alloc->allocate(3 * KiB);  // the two 4K holes tie on size: the lower address wins
  EXPECT_EQ(addr(y), a_addr);
  for (void* p : {b, d, f, x, y}) alloc->free(p);
}

TEST_F(CachingAllocatorTest, FreedBlocksMergeWithFreeNeighbours) {
  auto alloc = make();
  void* a = alloc->allocate(KiB);
  void* b = alloc->allocate(KiB);
  void* c = alloc->allocate(KiB);
  alloc->free(a);
  alloc->free(c);  // merges with the segment's free tail
  EXPECT_EQ(alloc->snapshot().segments[0].blocks.size(), 3u);
  alloc->free(b);  // merges both ways: the whole segment is one free block again
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments[0].blocks.size(), 1u);
  EXPECT_EQ(snap.segments[0].blocks[0].size, 2 * MiB);
  EXPECT_EQ(snap.stats.largest_free_block.current, 2 * MiB);
  EXPECT_EQ(snap.stats.fragmentation, 0.0);
}

TEST_F(CachingAllocatorTest, CachedBlocksAreReusedWithoutTheDevice) {
  auto alloc = make();
  for (int i = 0; i < 100; ++i) alloc->free(alloc->allocate(5 * MiB));
  EXPECT_EQ(counting_.allocations, 1);
  EXPECT_EQ(alloc->stats().num_device_allocations, 1u);
  EXPECT_EQ(alloc->stats().num_allocations, 100u);
  EXPECT_EQ(alloc->stats().num_frees, 100u);
}

TEST_F(CachingAllocatorTest, EmptyCacheReturnsOnlyWhollyFreeSegments) {
  auto alloc = make();
  void* keep = alloc->allocate(KiB);       // small segment, stays in use
  alloc->free(alloc->allocate(3 * MiB));   // large segment, becomes empty
  EXPECT_EQ(alloc->stats().segments.current, 2u);
  alloc->empty_cache();
  EXPECT_EQ(alloc->stats().segments.current, 1u);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 2 * MiB);
  EXPECT_EQ(counting_.deallocations, 1);
  alloc->free(keep);
  alloc->empty_cache();
  EXPECT_EQ(counting_.live_bytes, 0u);
}

TEST_F(CachingAllocatorTest, UnderATightBudgetASegmentOfExactlyTheRequestIsTried) {
  auto alloc = make(5 * MiB);
  void* p = alloc->allocate(3 * MiB);  // a 20 MiB segment would break the budget
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].size, 3 * MiB);
  EXPECT_LE(snap.stats.reserved_bytes.peak, 5 * MiB);
  alloc->free(p);
}

TEST_F(CachingAllocatorTest, EmptySegmentsAreReleasedWhenTheBudgetNeedsRoom) {
  auto alloc = make(20 * MiB);
  alloc->free(alloc->allocate(3 * MiB));  // a cached, empty 20 MiB large segment fills the budget
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 20 * MiB);
  void* p = alloc->allocate(512);  // the small pool needs a segment: the empty one goes back
  AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.num_device_frees, 1u);
  EXPECT_EQ(s.segments.current, 1u);
  EXPECT_EQ(s.reserved_bytes.current, 2 * MiB);
  EXPECT_LE(s.reserved_bytes.peak, 20 * MiB);
  alloc->free(p);
}

// At the cap, a small request takes free room in a large segment that is not empty (none can be released),
// and the block goes back to the large pool when freed.
TEST_F(CachingAllocatorTest, AtTheCapASmallRequestTakesRoomInALargeSegment) {
  auto alloc = make(20 * MiB);
  void* large = alloc->allocate(3 * MiB);  // a 20 MiB large segment fills the budget; 17 MiB of it free
  void* small = alloc->allocate(512 * 1024);
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].pool, Pool::large);
  EXPECT_EQ(addr(small), addr(large) + 3 * MiB) << "the best fit in the large segment, right after the 3 MiB";
  EXPECT_EQ(alloc->stats().reserved_bytes.peak, 20 * MiB);
  alloc->free(small);
  snap = alloc->snapshot();
  ASSERT_EQ(snap.segments[0].blocks.size(), 2u) << "the freed block merged back into the large pool's free room";
  void* large_again = alloc->allocate(4 * MiB);  // a large request can use that room
  EXPECT_EQ(addr(large_again), addr(large) + 3 * MiB);
  alloc->free(large_again);
  alloc->free(large);
}

TEST_F(CachingAllocatorTest, ReleasesTheSmallestEmptySegmentThatMakesRoom) {
  auto alloc = make(26 * MiB);
  void* a = alloc->allocate(3 * MiB);       // 20 MiB large segment
  void* b = alloc->allocate(10 * KiB);      // 2 MiB small segment
  void* c = alloc->allocate(10 * KiB);
  alloc->free(a);
  alloc->free(b);
  alloc->free(c);                            // both empty now; 22 MiB reserved, 4 MiB headroom
  void* d = alloc->allocate(5 * MiB);       // needs 5 MiB: releasing the 2 MiB one is not enough... but the
  EXPECT_EQ(alloc->stats().num_device_frees, 0u);  // large segment's cached block serves it directly
  alloc->free(d);
  void* e = alloc->allocate(24 * MiB);      // its own segment: must release the 20 MiB one, keeps the 2 MiB one
  AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.num_device_frees, 1u);
  EXPECT_EQ(s.segments.current, 2u);
  EXPECT_EQ(s.reserved_bytes.current, 26 * MiB);
  alloc->free(e);
}

// The allocator keeps the bytes of its empty segments as blocks are freed and reused, instead of scanning every
// segment on each request under the cap: segments emptied through each way a freed block merges, one of them
// reused and emptied again, must all be found when a request needs their room.
TEST_F(CachingAllocatorTest, SegmentsEmptiedByEveryKindOfMergeAreReleasedForRoom) {
  auto alloc = make(14 * MiB);
  void* p1 = alloc->allocate(MiB);  // each group fills one 2 MiB small segment
  void* p2 = alloc->allocate(MiB);
  void* q1 = alloc->allocate(MiB);
  void* q2 = alloc->allocate(MiB);
  void* r1 = alloc->allocate(512 * KiB);
  void* r2 = alloc->allocate(512 * KiB);
  void* r3 = alloc->allocate(MiB);
  void* t = alloc->allocate(MiB);  // a fourth segment, its free tail after it
  ASSERT_EQ(alloc->stats().segments.current, 4u);
  alloc->free(p1);
  alloc->free(p2);  // merges into the free block before it
  alloc->free(q2);
  alloc->free(q1);  // merges into the free block after it
  alloc->free(r1);
  alloc->free(r3);
  alloc->free(r2);  // merges with both
  alloc->free(t);   // merges with its free tail
  alloc->free(alloc->allocate(MiB));  // an empty segment used, then empty again
  EXPECT_EQ(alloc->stats().num_device_frees, 0u);
  void* big = alloc->allocate(12 * MiB);  // its own segment: 8 MiB cached, 6 MiB headroom, 3 must go
  const AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.num_device_frees, 3u);
  EXPECT_EQ(s.reserved_bytes.current, 14 * MiB);
  alloc->free(big);
}

TEST_F(CachingAllocatorTest, ReservedNeverExceedsTheBudget) {
  auto alloc = make(7 * MiB);
  std::vector<std::pair<void*, std::size_t>> live;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    if (!live.empty() && rng() % 2 == 0) {
      const std::size_t k = rng() % live.size();
      alloc->deallocate(live[k].first, live[k].second);
      live[k] = live.back();
      live.pop_back();
    } else {
      const std::size_t bytes = std::uniform_int_distribution<std::size_t>(1, 3 * MiB)(rng);
      try {
        live.emplace_back(alloc->allocate(bytes), bytes);
      } catch (const OutOfMemory&) {
      }
    }
    ASSERT_LE(alloc->stats().reserved_bytes.current, 7 * MiB);
  }
  EXPECT_LE(alloc->stats().reserved_bytes.peak, 7 * MiB);
  EXPECT_GT(alloc->stats().num_ooms, 0u);
  for (auto [p, bytes] : live) alloc->deallocate(p, bytes);
}

TEST_F(CachingAllocatorTest, OutOfMemoryExplainsTheState) {
  auto alloc = make(4 * MiB);
  void* a = alloc->allocate(MiB);
  void* b = alloc->allocate(MiB);
  void* c = alloc->allocate(MiB);
  alloc->free(b);  // 1 MiB free in the middle of a full small segment
  try {
    alloc->allocate(3 * MiB);
    FAIL() << "expected dtr::OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string message = e.what();
    for (const char* part : {"3.00 MiB (3145728 bytes)", "Budget: 4.00 MiB", "reserved 4.00 MiB", "allocated 2.00 MiB",
                             "reserved but free 2.00 MiB", "largest free block 1.00 MiB", "fragmentation 50%",
                             "No Reclaimer is registered", "Try:", "DTR_MEMORY_BUDGET"}) {
      EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message;
    }
    EXPECT_EQ(e.info().requested_bytes, 3 * MiB);
    EXPECT_EQ(e.info().budget_bytes, 4 * MiB);
    EXPECT_EQ(e.info().reserved_bytes, 4 * MiB);
    EXPECT_EQ(e.info().allocated_bytes, 2 * MiB);
    EXPECT_EQ(e.info().largest_free_block_bytes, MiB);
    EXPECT_STRNE(e.file(), "");
  }
  EXPECT_EQ(alloc->stats().num_ooms, 1u);
  // The allocator is unchanged and usable after the failure.
  void* d = alloc->allocate(MiB);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 4 * MiB);
  for (void* p : {a, c, d}) alloc->free(p);
}

TEST_F(CachingAllocatorTest, RequestLargerThanTheBudgetSaysSo) {
  auto alloc = make(8 * MiB);
  try {
    alloc->allocate(9 * MiB);
    FAIL() << "expected dtr::OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the budget"), std::string::npos) << e.what();
  }
  EXPECT_EQ(counting_.allocations, 0);
}

TEST_F(CachingAllocatorTest, UpstreamFailureFallsBackToTheSmallestSegment) {
  auto alloc = make();
  alloc->free(alloc->allocate(KiB));  // an empty cached segment, given back when the device is full
  counting_.fail_above = 4 * MiB;      // a 20 MiB segment fails, as on a nearly full device
  void* p = alloc->allocate(3 * MiB);
  MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].size, 3 * MiB);
  EXPECT_EQ(snap.stats.num_device_frees, 1u);
  alloc->free(p);
}

TEST_F(CachingAllocatorTest, UpstreamExhaustedGivesOutOfMemory) {
  auto small_device = make_simulated_resource(24 * MiB);
  CachingAllocator alloc(*small_device);
  void* a = alloc.allocate(12 * MiB);
  void* b = alloc.allocate(11 * MiB);  // its own segment, rounded to 12 MiB: the device is full
  EXPECT_THROW(alloc.allocate(4 * MiB), OutOfMemory);
  alloc.free(a);
  alloc.free(b);
}

TEST_F(CachingAllocatorTest, SetBudgetReleasesCacheOrRefuses) {
  auto alloc = make();
  void* keep = alloc->allocate(KiB);
  alloc->free(alloc->allocate(3 * MiB));
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 22 * MiB);
  alloc->set_budget(4 * MiB);  // the empty 20 MiB segment goes back
  EXPECT_EQ(alloc->budget(), std::optional<std::uint64_t>(4 * MiB));
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 2 * MiB);
  EXPECT_EQ(alloc->stats().budget_bytes, 4 * MiB);
  EXPECT_THROW(alloc->set_budget(MiB), InvalidArgument);  // 2 MiB are in use
  EXPECT_EQ(alloc->budget(), std::optional<std::uint64_t>(4 * MiB));
  EXPECT_THROW(alloc->set_budget(0), InvalidArgument);
  alloc->set_budget(std::nullopt);
  EXPECT_EQ(alloc->budget(), std::nullopt);
  EXPECT_EQ(alloc->stats().budget_bytes, 0u);
  alloc->free(keep);
}

TEST_F(CachingAllocatorTest, StatsTrackPeaksUntilReset) {
  auto alloc = make();
  void* a = alloc->allocate(5 * MiB);
  void* b = alloc->allocate(5 * MiB);
  alloc->free(a);
  AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.allocated_bytes.current, 5 * MiB);
  EXPECT_EQ(s.allocated_bytes.peak, 10 * MiB);
  EXPECT_EQ(s.active_blocks.peak, 2u);
  EXPECT_EQ(s.requested_bytes.peak, 10 * MiB);
  alloc->reset_peak_stats();
  s = alloc->stats();
  EXPECT_EQ(s.allocated_bytes.peak, 5 * MiB);
  EXPECT_EQ(s.active_blocks.peak, 1u);
  alloc->free(b);
}

TEST_F(CachingAllocatorTest, FragmentationIsOneMinusLargestFreeOverFree) {
  auto alloc = make();
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(alloc->allocate(512 * KiB));  // one full small segment
  alloc->free(blocks[0]);
  alloc->free(blocks[2]);  // two separate 512 KiB holes
  AllocatorStats s = alloc->stats();
  EXPECT_EQ(s.largest_free_block.current, 512 * KiB);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.5);
  EXPECT_DOUBLE_EQ(s.peak_fragmentation, 0.5);
  alloc->free(blocks[1]);
  EXPECT_DOUBLE_EQ(alloc->stats().fragmentation, 0.0);  // one 1.5 MiB hole
  alloc->free(blocks[3]);
}

TEST_F(CachingAllocatorTest, SnapshotListsBlocksInAddressOrderWithOwners) {
  auto alloc = make();
  void* a = alloc->allocate(KiB);
  void* b = alloc->allocate(3 * MiB);
  alloc->set_owner(a, 41);
  alloc->set_owner(b, 42);
  MemorySnapshot snap = alloc->snapshot();
  EXPECT_EQ(snap.resource, alloc->name());
  ASSERT_EQ(snap.segments.size(), 2u);
  EXPECT_LT(snap.segments[0].address, snap.segments[1].address);
  for (const SegmentInfo& segment : snap.segments) {
    std::uintptr_t next = segment.address;
    for (const BlockInfo& block : segment.blocks) {
      EXPECT_EQ(block.address, next);
      next += block.size;
    }
    EXPECT_EQ(next, segment.address + segment.size);
  }
  const auto owner_of = [&](void* p) {
    for (const auto& segment : snap.segments)
      for (const auto& block : segment.blocks)
        if (block.address == addr(p)) return block.owner;
    return OwnerTag{0};
  };
  EXPECT_EQ(owner_of(a), 41u);
  EXPECT_EQ(owner_of(b), 42u);
  EXPECT_THROW(alloc->set_owner(reinterpret_cast<void*>(addr(a) + 512), 1), InvalidArgument);

  const auto json = nlohmann::json::parse(to_json(snap));
  EXPECT_EQ(json["resource"], alloc->name());
  ASSERT_EQ(json["segments"].size(), 2u);
  EXPECT_EQ(json["segments"][0]["blocks"][0]["owner"], 41);
  EXPECT_EQ(json["segments"][0]["blocks"][0]["allocated"], true);
  EXPECT_EQ(json["stats"]["allocated_bytes"]["current"], KiB + 3 * MiB);
  const auto stats_json = nlohmann::json::parse(to_json(alloc->stats()));
  EXPECT_EQ(stats_json["segments"]["current"], 2);
  EXPECT_EQ(stats_json["num_ooms"], 0);
  alloc->free(a);
  alloc->free(b);
}

TEST_F(CachingAllocatorTest, ForEachBlockVisitsOnePoolInAddressOrderAsTheSnapshotDoes) {
  auto alloc = make();
  void* small_a = alloc->allocate(KiB);
  void* small_b = alloc->allocate(MiB);
  void* small_c = alloc->allocate(MiB);  // does not fit next to the other two: a second small segment
  void* large = alloc->allocate(3 * MiB);
  alloc->set_owner(small_a, 7);
  alloc->set_owner(large, 9);
  for (Pool pool : {Pool::small, Pool::large}) {
    std::vector<BlockInfo> expected;
    std::vector<bool> expected_starts;
    for (const SegmentInfo& segment : alloc->snapshot().segments) {
      if (segment.pool != pool) continue;
      for (std::size_t i = 0; i < segment.blocks.size(); ++i) {
        expected.push_back(segment.blocks[i]);
        expected_starts.push_back(i == 0);
      }
    }
    std::vector<BlockInfo> seen;
    std::vector<bool> starts;
    alloc->for_each_block(pool, [&](const BlockInfo& block, bool segment_start) {
      seen.push_back(block);
      starts.push_back(segment_start);
    });
    ASSERT_EQ(seen.size(), expected.size()) << to_string(pool);
    for (std::size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].address, expected[i].address);
      EXPECT_EQ(seen[i].size, expected[i].size);
      EXPECT_EQ(seen[i].allocated, expected[i].allocated);
      EXPECT_EQ(seen[i].owner, expected[i].owner);
      if (i > 0) {
        EXPECT_LT(seen[i - 1].address, seen[i].address);
      }
    }
    EXPECT_EQ(starts, expected_starts);
  }
  std::size_t small_segments = 0;
  alloc->for_each_block(Pool::small, [&](const BlockInfo&, bool segment_start) { small_segments += segment_start; });
  EXPECT_EQ(small_segments, 2u);
  alloc->free(small_a);
  alloc->free(small_b);
  alloc->free(small_c);
  alloc->free(large);
}

TEST_F(CachingAllocatorTest, FreeOfForeignOrFreedPointerIsRejected) {
  auto alloc = make();
  void* a = alloc->allocate(KiB);
  alloc->free(a);
  EXPECT_THROW(alloc->free(a), InvalidArgument);
  int local = 0;
  EXPECT_THROW(alloc->free(&local), InvalidArgument);
  EXPECT_NO_THROW(alloc->free(nullptr));
  EXPECT_EQ(alloc->stats().num_frees, 1u);
}

TEST_F(CachingAllocatorTest, DestructorReturnsEverySegmentEvenLeakedOnes) {
  {
    auto alloc = make();
    alloc->allocate(KiB);       // leaked on purpose
    alloc->allocate(30 * MiB);  // leaked on purpose
    EXPECT_GT(counting_.live_bytes, 0u);
  }
  EXPECT_EQ(counting_.live_bytes, 0u);
  EXPECT_EQ(counting_.allocations, counting_.deallocations);
}

TEST_F(CachingAllocatorTest, OwnsItsUpstreamWhenGivenOne) {
  CachingAllocator alloc(make_simulated_resource(64 * MiB));
  EXPECT_EQ(alloc.name(), "caching(simulated)");
  EXPECT_EQ(alloc.capacity(), 64 * MiB);
  EXPECT_FALSE(alloc.host_accessible());
  alloc.free(alloc.allocate(KiB));
}

TEST_F(CachingAllocatorTest, RejectsInconsistentOptions) {
  CachingAllocatorOptions bad_rounding;
  bad_rounding.rounding = 768;
  EXPECT_THROW(CachingAllocator(counting_, bad_rounding), InvalidArgument);
  CachingAllocatorOptions small_segment_too_small;
  small_segment_too_small.small_segment_bytes = 512 * KiB;
  EXPECT_THROW(CachingAllocator(counting_, small_segment_too_small), InvalidArgument);
  CachingAllocatorOptions zero_budget;
  zero_budget.budget_bytes = 0;
  EXPECT_THROW(CachingAllocator(counting_, zero_budget), InvalidArgument);
}

}  // namespace
}  // namespace dtr::test

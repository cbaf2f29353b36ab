// 10^5 random allocations and frees under random budgets, checked after every step against a reference model:
// the live allocations the caller holds, and what the policy allows. Invariants: no two live blocks overlap,
// alignment holds, stats equal the model's and the segment map's, reserved <= budget, no two adjacent free
// blocks, and an OutOfMemory only when the policy truly could not serve the request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::size_t kRounding = 512;

std::size_t round_up(std::size_t n) { return (n + kRounding - 1) / kRounding * kRounding; }

struct Model {
  std::map<std::uintptr_t, std::size_t> live;  // address -> requested bytes
  std::uint64_t requested = 0;
};

// Checks every invariant between the allocator's snapshot and the model.
void check_invariants(const MemorySnapshot& snap, const Model& model, std::optional<std::uint64_t> budget) {
  const AllocatorStats& s = snap.stats;
  std::uint64_t reserved = 0, allocated = 0, largest_free = 0, blocks_in_use = 0;
  std::uintptr_t previous_end = 0;
  for (const SegmentInfo& segment : snap.segments) {
    ASSERT_GE(segment.address, previous_end) << "segments overlap";
    previous_end = segment.address + segment.size;
    reserved += segment.size;
    std::uintptr_t next = segment.address;
    bool previous_free = false;
    for (const BlockInfo& block : segment.blocks) {
      ASSERT_EQ(block.address, next) << "blocks do not tile their segment";
      ASSERT_EQ(block.size % kRounding, 0u);
      next += block.size;
      if (block.allocated) {
        allocated += block.size;
        ++blocks_in_use;
        auto it = model.live.find(block.address);
        ASSERT_NE(it, model.live.end()) << "an allocated block the caller does not hold";
        ASSERT_EQ(block.requested_bytes, it->second);
        ASSERT_GE(block.size, round_up(it->second));
        // A small request may take room in a large segment (at the cap); a large one never a small segment.
        const bool small = round_up(it->second) <= (std::size_t{1} << 20);
        if (!small) {
          ASSERT_EQ(segment.pool, Pool::large) << "a large block in a small segment";
        }
      } else {
        ASSERT_FALSE(previous_free) << "two adjacent free blocks were not merged";
        largest_free = std::max<std::uint64_t>(largest_free, block.size);
      }
      previous_free = !block.allocated;
    }
    ASSERT_EQ(next, segment.address + segment.size);
  }
  ASSERT_EQ(blocks_in_use, model.live.size()) << "a live allocation is missing from the segment map";
  ASSERT_EQ(s.reserved_bytes.current, reserved);
  ASSERT_EQ(s.allocated_bytes.current, allocated);
  ASSERT_EQ(s.requested_bytes.current, model.requested);
  ASSERT_EQ(s.active_blocks.current, model.live.size());
  ASSERT_EQ(s.segments.current, snap.segments.size());
  ASSERT_EQ(s.largest_free_block.current, largest_free);
  const std::uint64_t free_bytes = reserved - allocated;
  const double fragmentation = free_bytes == 0 ? 0.0 : 1.0 - double(largest_free) / double(free_bytes);
  ASSERT_DOUBLE_EQ(s.fragmentation, fragmentation);
  for (const StatValue* v : {&s.allocated_bytes, &s.reserved_bytes, &s.requested_bytes, &s.active_blocks,
                             &s.segments, &s.largest_free_block}) {
    ASSERT_GE(v->peak, v->current);
  }
  if (budget) {
    ASSERT_LE(s.reserved_bytes.current, *budget);
    ASSERT_LE(s.reserved_bytes.peak, *budget);
  }
}

// Whether the policy must serve a request of `bytes` in the state `snap`: a free block of its pool is large
// enough, or a segment of exactly the request fits under the budget once every empty segment is released, or
// (a small request) a free block of a large segment is large enough.
bool servable(const MemorySnapshot& snap, std::size_t bytes, std::optional<std::uint64_t> budget) {
  const std::size_t rounded = round_up(bytes);
  const Pool pool = rounded <= (std::size_t{1} << 20) ? Pool::small : Pool::large;
  std::uint64_t empty = 0;
  for (const SegmentInfo& segment : snap.segments) {
    if (segment.blocks.size() == 1 && !segment.blocks[0].allocated) empty += segment.size;
    if (segment.pool != pool && pool == Pool::large) continue;
    for (const BlockInfo& block : segment.blocks) {
      if (!block.allocated && block.size >= rounded) return true;
    }
  }
  if (!budget) return true;  // the simulated device is far larger than anything this test holds
  return snap.stats.reserved_bytes.current - empty + rounded <= *budget;
}

std::size_t random_size(std::mt19937_64& rng) {
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
  auto log_uniform = [&](double lo, double hi) {
    return static_cast<std::size_t>(std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng)));
  };
  if (kind < 70) return log_uniform(1, 1 << 20);                 // small pool
  if (kind < 95) return log_uniform(1 << 20, 10 << 20) + 1;       // large pool, shared segments
  return log_uniform(10 << 20, 40 << 20);                        // own segments
}

void run_random_program(std::uint64_t seed, int steps) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  auto device = make_simulated_resource(std::size_t{64} << 30);
  std::optional<std::uint64_t> budget;
  if (seed % 4 != 0) budget = std::uniform_int_distribution<std::uint64_t>(4 << 20, 256 << 20)(rng);
  CachingAllocatorOptions options;
  options.budget_bytes = budget;
  CachingAllocator alloc(*device, options);
  Model model;
  std::vector<std::uintptr_t> handles;  // live addresses, for random picks
  int ooms = 0;

  for (int step = 0; step < steps; ++step) {
    const int action = std::uniform_int_distribution<int>(0, 999)(rng);
    const bool want_free = !handles.empty() && (action < 420 || model.live.size() > 400);
    if (want_free) {
      const std::size_t k = rng() % handles.size();
      const std::uintptr_t address = handles[k];
      handles[k] = handles.back();
      handles.pop_back();
      const std::size_t bytes = model.live.at(address);
      if (action % 2 == 0) {
        alloc.deallocate(reinterpret_cast<void*>(address), bytes);
      } else {
        alloc.free(reinterpret_cast<void*>(address));
      }
      model.requested -= bytes;
      model.live.erase(address);
    } else if (action < 990) {
      const std::size_t bytes = random_size(rng);
      const MemorySnapshot before = alloc.snapshot();
      const bool must_serve = servable(before, bytes, budget);
      try {
        void* p = alloc.allocate(bytes);
        ASSERT_TRUE(must_serve) << "served a request the policy could not at step " << step;
        const auto address = reinterpret_cast<std::uintptr_t>(p);
        ASSERT_EQ(address % kRounding, 0u);
        ASSERT_TRUE(model.live.emplace(address, bytes).second) << "address handed out twice";
        handles.push_back(address);
        model.requested += bytes;
      } catch (const OutOfMemory& e) {
        ASSERT_FALSE(must_serve) << "false OutOfMemory at step " << step << ": " << e.what();
        ++ooms;
      }
    } else if (action < 995) {
      alloc.empty_cache();
      for (const SegmentInfo& segment : alloc.snapshot().segments) {
        ASSERT_FALSE(segment.blocks.size() == 1 && !segment.blocks[0].allocated) << "empty_cache left one";
      }
    } else {
      // A new budget: accepted iff the segments in use fit under it.
      const std::uint64_t proposed = std::uniform_int_distribution<std::uint64_t>(2 << 20, 256 << 20)(rng);
      std::uint64_t in_use = 0;
      for (const SegmentInfo& segment : alloc.snapshot().segments) {
        if (!(segment.blocks.size() == 1 && !segment.blocks[0].allocated)) in_use += segment.size;
      }
      try {
        alloc.set_budget(proposed);
        ASSERT_LE(in_use, proposed);
        budget = proposed;
        alloc.reset_peak_stats();  // so that the peak is checked against the new budget from here on
      } catch (const InvalidArgument&) {
        ASSERT_GT(in_use, proposed);
      }
    }
    check_invariants(alloc.snapshot(), model, budget);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (const auto& [address, bytes] : model.live) alloc.deallocate(reinterpret_cast<void*>(address), bytes);
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes.current, 0u);
  EXPECT_EQ(s.requested_bytes.current, 0u);
  EXPECT_EQ(s.num_ooms, static_cast<std::uint64_t>(ooms));
  // The program must have pressed against its budget, or it tested nothing of it.
  if (seed % 4 != 0) {
    EXPECT_GT(ooms, 100);
  }
  std::printf("seed %llu: %d OOMs, peak reserved %llu, %llu device allocations\n", (unsigned long long)seed, ooms,
              (unsigned long long)s.reserved_bytes.peak, (unsigned long long)s.num_device_allocations);
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes.current, 0u);
}

TEST(CachingAllocatorProperty, RandomProgramsAgainstTheReferenceModel) {
  // 4 programs of 25 000 steps: 10^5 operations, budgeted and not.
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    run_random_program(seed, 25'000);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace dtr::test

// Fragmentation-aware eviction through the runtime: under a device budget a window heuristic evicts one
// contiguous run of blocks that serves the allocation, where one-at-a-time eviction frees blocks that do not
// touch; values stay bitwise equal to the unbudgeted run.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::int64_t kFloatsPerKiB = 256;

struct Outcome {
  std::uint64_t evictions = 0;
  std::vector<std::vector<float>> values;  // a1 .. a5, then the concatenation
};

// Lays the segment out as [x][a1][a2][d1][a3][a4][d2][a5] (each 1 KiB; x a constant, the a's a chain, the d's
// temporaries), frees the d's (two 1 KiB holes), then asks for 2 KiB: concat2(a5, a5), which pins a5.
// Least recently used first, a1 goes, then a2 (a1's hole alone is too small): two evictions. The cheapest
// window is a2 with d1's hole (or a3/a4 with one): one eviction.
Outcome run_fragmented(std::optional<std::uint64_t> budget, const std::string& heuristic,
                       Compaction compaction = Compaction::last_resort) {
  // One 8 KiB small segment is the whole budget; 1 KiB tensors fill it exactly. Compaction only as the last
  // resort by default: the eviction choices are under test (compaction first would move a block instead).
  Runtime rt(small_segment_config(budget, heuristic, compaction));
  const std::vector<float> ones(static_cast<std::size_t>(kFloatsPerKiB), 0.5f);
  Tensor x = rt.constant(TensorMeta{{kFloatsPerKiB}}, ones);
  Tensor a1 = rt.call1(ops::add(), {x, x});
  Tensor a2 = rt.call1(ops::add(), {a1, x});
  Tensor d1 = rt.call1(ops::relu(), {a2});
  Tensor a3 = rt.call1(ops::add(), {a2, x});
  Tensor a4 = rt.call1(ops::add(), {a3, x});
  Tensor d2 = rt.call1(ops::relu(), {a4});
  Tensor a5 = rt.call1(ops::add(), {a4, x});
  d1 = Tensor();
  d2 = Tensor();
  EXPECT_EQ(rt.stats().evictions, 0u);
  Tensor both = rt.call1(ops::concat2(), {a5, a5});
  Outcome out;
  out.evictions = rt.stats().evictions;
  for (const Tensor* t : {&a1, &a2, &a3, &a4, &a5, &both}) out.values.push_back(t->to_host());
  return out;
}

TEST(RuntimeWindow, OneContiguousWindowServesWhatOneAtATimeNeedsTwoEvictionsFor) {
  const Outcome reference = run_fragmented(std::nullopt, "lru");
  EXPECT_EQ(reference.evictions, 0u);
  const Outcome lru = run_fragmented(8 * kKiB, "lru");
  EXPECT_EQ(lru.evictions, 2u);
  // Compaction first moves a 1 KiB block into a hole instead (a move of at most the 2 KiB asked for).
  const Outcome moved = run_fragmented(8 * kKiB, "lru", Compaction::first);
  EXPECT_EQ(moved.evictions, 0u);
  EXPECT_EQ(moved.values, reference.values);
  for (const char* heuristic : {"lru+window", "window", "dtr-eq+window"}) {
    const Outcome windowed = run_fragmented(8 * kKiB, heuristic);
    EXPECT_EQ(windowed.evictions, 1u) << heuristic;
    ASSERT_EQ(windowed.values.size(), reference.values.size());
    for (std::size_t i = 0; i < reference.values.size(); ++i) {
      ASSERT_EQ(windowed.values[i].size(), reference.values[i].size());
      EXPECT_EQ(std::memcmp(windowed.values[i].data(), reference.values[i].data(),
                            reference.values[i].size() * sizeof(float)),
                0)
          << heuristic << ", value " << i;
    }
  }
}

// Small segments of 4 KiB (1 KiB requests at most), large ones of 4 KiB; 12 KiB of budget.
Config fallback_config(std::optional<std::uint64_t> budget) {
  Config config = deterministic_config(budget, BudgetMode::device, "dtr-eq+window");
  config.allocator.small_request_limit = kKiB;
  config.allocator.small_segment_bytes = 4 * kKiB;
  config.allocator.large_segment_bytes = 4 * kKiB;
  config.allocator.own_segment_threshold = 4 * kKiB;
  config.allocator.own_segment_rounding = 4 * kKiB;
  return config;
}

// x, then an 11-step chain: three full small segments, the whole budget. Then 2 KiB: a large-pool request,
// and there is no large segment, so no window can serve it; a small segment must be emptied and released.
std::vector<std::vector<float>> run_fallback(std::optional<std::uint64_t> budget, std::uint64_t* evictions,
                                             std::size_t* untagged, std::size_t* large_segments) {
  Runtime rt(fallback_config(budget));
  const std::vector<float> ones(static_cast<std::size_t>(kFloatsPerKiB), 0.25f);
  Tensor x = rt.constant(TensorMeta{{kFloatsPerKiB}}, ones);
  std::vector<Tensor> chain{rt.call1(ops::relu(), {x})};
  for (int i = 0; i < 10; ++i) chain.push_back(rt.call1(ops::add(), {chain.back(), x}));
  // Every block the runtime holds is tagged with its storage (the window search maps blocks back to them).
  *untagged = 0;
  for (const SegmentInfo& segment : rt.allocator().snapshot().segments) {
    for (const BlockInfo& block : segment.blocks) *untagged += block.allocated && block.owner == 0;
  }
  chain.push_back(rt.call1(ops::concat2(), {chain.back(), chain.back()}));
  *evictions = rt.stats().evictions;
  *large_segments = 0;
  for (const SegmentInfo& segment : rt.allocator().snapshot().segments) *large_segments += segment.pool == Pool::large;
  std::vector<std::vector<float>> values;
  for (const Tensor& t : chain) values.push_back(t.to_host());
  return values;
}

TEST(RuntimeWindow, BlocksAreTaggedAndTheScoresDecideWhenNoWindowCanServe) {
  std::uint64_t evictions = 0;
  std::size_t untagged = 0;
  std::size_t large_segments = 0;
  const auto reference = run_fallback(std::nullopt, &evictions, &untagged, &large_segments);
  EXPECT_EQ(evictions, 0u);
  const auto budgeted = run_fallback(12 * kKiB, &evictions, &untagged, &large_segments);
  EXPECT_EQ(untagged, 0u);
  EXPECT_GE(evictions, 1u);
  EXPECT_EQ(large_segments, 1u);
  EXPECT_EQ(budgeted, reference);
}

}  // namespace
}  // namespace dtr::test

// The fragmentation-aware window search (heuristics/window.h) on hand-built block maps and against a
// brute-force search over random ones; and the window heuristics' delegation to their base.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "fake_storage.h"
#include "heuristics/heuristic.h"
#include "heuristics/window.h"

namespace dtr::test {
namespace {

using heuristics::cheapest_window;
using heuristics::Window;
using heuristics::WindowBlock;
using Kind = WindowBlock::Kind;

WindowBlock free_block(std::size_t bytes, bool start = false) { return {bytes, Kind::free, 0, start}; }
WindowBlock evictable(std::size_t bytes, double cost, bool start = false) { return {bytes, Kind::evictable, cost, start}; }
WindowBlock fixed(std::size_t bytes, bool start = false) { return {bytes, Kind::fixed, 0, start}; }

TEST(CheapestWindow, TakesTheCheapestCoveringRunNotTheCheapestBlocks) {
  // The two cheapest blocks (cost 1) are apart; the covering pair is the middle run [2, 4).
  const std::vector<WindowBlock> blocks = {evictable(1, 1, true), evictable(1, 5), evictable(1, 2), evictable(1, 2),
                                           evictable(1, 5), evictable(1, 1)};
  const auto w = cheapest_window(blocks, 2);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 2u);
  EXPECT_EQ(w->last, 4u);
  EXPECT_EQ(w->bytes, 2u);
  EXPECT_DOUBLE_EQ(w->cost, 4);
}

TEST(CheapestWindow, FreeBlocksCountTheirBytesAndCostNothing) {
  const std::vector<WindowBlock> blocks = {evictable(4, 1, true), free_block(3), evictable(1, 3), evictable(4, 2)};
  const auto w = cheapest_window(blocks, 5);  // [0, 2): 4 + 3 bytes for cost 1
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 0u);
  EXPECT_EQ(w->last, 2u);
  EXPECT_DOUBLE_EQ(w->cost, 1);
}

TEST(CheapestWindow, FixedBlocksAndSegmentBoundariesBreakRuns) {
  // Without the fixed block, [1, 4) would cover 3 bytes for 0.3; with it, only the far run can.
  std::vector<WindowBlock> blocks = {evictable(1, 9, true), evictable(1, 0.1), fixed(1), evictable(1, 0.1),
                                     evictable(1, 0.1), evictable(1, 5), evictable(1, 5)};
  auto w = cheapest_window(blocks, 3);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 3u);
  EXPECT_EQ(w->last, 6u);
  // A segment boundary at block 4 cuts that run to [3, 4): the cheapest covering run is now [4, 7).
  blocks[4].segment_start = true;
  w = cheapest_window(blocks, 3);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 4u);
  EXPECT_EQ(w->last, 7u);
  EXPECT_DOUBLE_EQ(w->cost, 10.1);
}

TEST(CheapestWindow, NoWindowWhenNothingCoversTheRequest) {
  EXPECT_FALSE(cheapest_window(std::vector<WindowBlock>{}, 1));
  EXPECT_FALSE(cheapest_window(std::vector<WindowBlock>{fixed(8, true)}, 1));
  EXPECT_FALSE(cheapest_window(std::vector<WindowBlock>{evictable(2, 1, true), evictable(2, 1, true)}, 3));
  EXPECT_FALSE(cheapest_window(std::vector<WindowBlock>{evictable(2, 1, true), fixed(1), evictable(2, 1)}, 3));
}

TEST(CheapestWindow, TiesGoToTheFewestBytesThenTheLowestAddress) {
  const std::vector<WindowBlock> blocks = {evictable(3, 1, true), evictable(2, 1), free_block(1), evictable(2, 1)};
  const auto w = cheapest_window(blocks, 2);  // [1, 2) and [3, 4) cost 1 with 2 bytes; [1, 2) comes first
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 1u);
  EXPECT_EQ(w->last, 2u);
}

TEST(CheapestWindow, TakesTheRunWithTheFewestLastResortsWhateverTheCosts) {
  // [0, 2) holds a last resort of cost 1: dearer than [3, 5) at 70, whose blocks are ordinary. A last resort
  // priced by a huge cost instead would swamp the running sum (2^100 + 50 - 2^100 = 0: the run after it would
  // look free).
  std::vector<WindowBlock> blocks = {evictable(1, 1, true), evictable(1, 2), fixed(1), evictable(1, 30),
                                     evictable(1, 40)};
  blocks[0].last_resort = true;
  auto w = cheapest_window(blocks, 2);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 3u);
  EXPECT_EQ(w->last_resorts, 0u);
  EXPECT_DOUBLE_EQ(w->cost, 70);
  // Where every covering run holds one, the fewest win, then the costs.
  blocks[3].last_resort = true;
  blocks[4].last_resort = true;
  w = cheapest_window(blocks, 2);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 0u);
  EXPECT_EQ(w->last_resorts, 1u);
}

// Every run, summed from scratch: the reference.
std::optional<Window> brute_force(const std::vector<WindowBlock>& blocks, std::size_t needed) {
  std::optional<Window> best;
  for (std::size_t first = 0; first < blocks.size(); ++first) {
    std::size_t bytes = 0;
    double cost = 0;
    std::size_t last_resorts = 0;
    for (std::size_t last = first; last < blocks.size(); ++last) {
      if (blocks[last].kind == Kind::fixed || (last > first && blocks[last].segment_start)) break;
      bytes += blocks[last].bytes;
      if (blocks[last].kind == Kind::evictable) {
        cost += blocks[last].cost;
        last_resorts += blocks[last].last_resort ? 1 : 0;
      }
      if (bytes >= needed) {
        if (!best || last_resorts < best->last_resorts || (last_resorts == best->last_resorts && cost < best->cost)) {
          best = Window{first, last + 1, bytes, cost, last_resorts};
        }
        break;  // longer runs from `first` only add cost
      }
    }
  }
  return best;
}

TEST(CheapestWindow, FindsTheMinimumOnRandomBlockMaps) {
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 3000; ++round) {
    std::vector<WindowBlock> blocks(rng() % 40);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      WindowBlock& b = blocks[i];
      b.bytes = 512 * (1 + rng() % 8);
      const auto pick = rng() % 10;
      b.kind = pick < 2 ? Kind::free : pick < 3 ? Kind::fixed : Kind::evictable;
      // Coarse costs make ties common; fine ones test the sums.
      b.cost = round % 2 == 0 ? static_cast<double>(rng() % 4) : std::ldexp(static_cast<double>(rng() % 1000), -7);
      b.segment_start = i == 0 || rng() % 12 == 0;
      b.last_resort = round % 3 == 0 && rng() % 4 == 0;  // in a third of the maps, a quarter of the blocks
    }
    const std::size_t needed = 512 * (1 + rng() % 16);
    const auto expected = brute_force(blocks, needed);
    const auto found = cheapest_window(blocks, needed);
    ASSERT_EQ(found.has_value(), expected.has_value()) << "round " << round;
    if (!found) continue;
    // The window it returns is a valid covering run of the minimal cost.
    double cost = 0;
    std::size_t bytes = 0;
    std::size_t last_resorts = 0;
    for (std::size_t i = found->first; i < found->last; ++i) {
      ASSERT_NE(blocks[i].kind, Kind::fixed);
      ASSERT_TRUE(i == found->first || !blocks[i].segment_start);
      bytes += blocks[i].bytes;
      if (blocks[i].kind == Kind::evictable) {
        cost += blocks[i].cost;
        last_resorts += blocks[i].last_resort ? 1 : 0;
      }
    }
    EXPECT_EQ(last_resorts, found->last_resorts) << "round " << round;
    EXPECT_EQ(last_resorts, expected->last_resorts) << "round " << round;
    EXPECT_EQ(bytes, found->bytes);
    EXPECT_GE(bytes, needed);
    EXPECT_NEAR(cost, expected->cost, 1e-9 * (1 + expected->cost)) << "round " << round;
    EXPECT_NEAR(found->cost, cost, 1e-9 * (1 + cost));
  }
}

TEST(WindowHeuristics, ScoreAsTheirBaseAndAskForWindows) {
  FakeStorage a;
  a.size = 4096;
  a.c0 = 3;
  a.last = 10;
  for (const auto& [windowed, base] : {std::pair{"window", "dtr-local"}, std::pair{"dtr-eq+window", "dtr-eq"},
                                       std::pair{"lru+window", "lru"}, std::pair{"msps+window", "msps"}}) {
    auto w = heuristics::make_heuristic(windowed);
    auto b = heuristics::make_heuristic(base);
    EXPECT_TRUE(w->fragmentation_aware()) << windowed;
    EXPECT_FALSE(b->fragmentation_aware()) << base;
    EXPECT_EQ(w->indexable(), b->indexable());
    EXPECT_EQ(w->timeless(), b->timeless());
    EXPECT_EQ(w->score(a, 20), b->score(a, 20)) << windowed;
    // A block's cost in a window is the score without the division by size.
    EXPECT_DOUBLE_EQ(w->window_cost(a, 20), b->score(a, 20) * 4096) << windowed;
  }
}

TEST(WindowHeuristics, DtrEqWindowKeepsTheUnionFindState) {
  // t0 -> t1 -> t2: evicting t1 raises t0's and t2's dtr-eq cost through the wrapper as through the base.
  FakeStorage t0, t1, t2;
  t1.inputs = {&t0};
  t0.dependents = {&t1};
  t2.inputs = {&t1};
  t1.dependents = {&t2};
  t0.c0 = 1;
  t1.c0 = 2;
  t2.c0 = 4;
  auto w = heuristics::make_heuristic("dtr-eq+window");
  const double before = w->key(t2).a;
  t1.is_evicted = true;
  w->on_evict(t1);
  EXPECT_DOUBLE_EQ(w->key(t2).a, before + 2.0 / static_cast<double>(t2.size));
  EXPECT_GT(w->live_slots(), 0u);
  t1.is_evicted = false;
  w->on_rematerialize(t1);
  EXPECT_DOUBLE_EQ(w->key(t2).a, before);
  w->on_destroy(t2);
  w->on_destroy(t1);
  w->on_destroy(t0);
  EXPECT_EQ(w->live_slots(), 0u);
}

}  // namespace
}  // namespace dtr::test

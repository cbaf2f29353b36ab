// The rising heap (the forecast index's deadline curves) against a brute-force minimum over the same items, on
// random operations and clocks, and the laziness it rests on.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>

#include "heuristics/rising_heap.h"
#include "test_helpers.h"

namespace dtr::test {
namespace {

using Heap = heuristics::RisingHeap<int>;

struct Entry {
  double a, deadline;
  std::uint64_t arrival;
};

// The item a scan would take: the lowest a / (deadline - now), the later arrival among equal scores.
Heap::Handle brute_top(const std::map<Heap::Handle, Entry>& items, double now) {
  Heap::Handle best = 0;
  double best_score = 0;
  std::uint64_t best_arrival = 0;
  bool first = true;
  for (const auto& [h, e] : items) {
    const double score = e.a / (e.deadline - now);
    if (first || score < best_score || (score == best_score && e.arrival > best_arrival)) {
      best = h;
      best_score = score;
      best_arrival = e.arrival;
      first = false;
    }
  }
  return best;
}

// As the forecast index does, an item leaves before the clock reaches its deadline, so every score is finite.
void run_random(std::uint64_t seed, double start) {
  std::mt19937_64 rng(seed);
  Heap heap;
  std::map<Heap::Handle, Entry> items;
  double now = start;
  std::uint64_t arrivals = 0;
  // Costs per byte: arbitrary reals, or ratios of small integers (many ties, as real graphs have).
  auto random_a = [&] {
    return rng() % 2 == 0 ? std::uniform_real_distribution<double>(0.01, 10.0)(rng)
                          : static_cast<double>(1 + rng() % 9) / static_cast<double>(1 + rng() % 4);
  };
  auto random_deadline = [&] { return now + static_cast<double>(1 + rng() % 300); };  // integer ticks ahead
  auto pick = [&] {
    auto it = items.begin();
    std::advance(it, static_cast<long>(rng() % items.size()));
    return it;
  };
  for (int step = 0; step < 8000; ++step) {
    const unsigned action = rng() % 10;
    if (action < 4 || items.size() < 2) {
      const double a = random_a(), deadline = random_deadline();
      const Heap::Handle h = heap.insert(step, a, deadline, now, ++arrivals);
      ASSERT_FALSE(items.contains(h)) << "handle reused while live";
      items[h] = {a, deadline, arrivals};
    } else if (action < 6) {
      const auto it = pick();
      heap.erase(it->first);
      items.erase(it);
    } else if (action < 8) {
      const auto it = pick();
      it->second.a = random_a();
      it->second.deadline = random_deadline();
      heap.update(it->first, it->second.a, it->second.deadline, now);
    } else {
      const double next = now + static_cast<double>(rng() % 3 == 0 ? rng() % 100 : rng() % 4);
      for (auto it = items.begin(); it != items.end();) {  // deadlines reached leave first
        if (it->second.deadline <= next) {
          heap.erase(it->first);
          it = items.erase(it);
        } else {
          ++it;
        }
      }
      now = next;
    }
    if (items.empty()) continue;
    for (const auto& [h, e] : items) ASSERT_EQ(heap.score(h, now), e.a / (e.deadline - now)) << "step " << step;
    const Heap::Handle top = heap.top(now);
    ASSERT_EQ(top, brute_top(items, now)) << "step " << step;
    ASSERT_EQ(heap.payload(top), heap.payload(brute_top(items, now)));
    ASSERT_TRUE(heap.valid(now)) << "step " << step;
    ASSERT_EQ(heap.size(), items.size());
  }
}

TEST(RisingHeap, AgreesWithBruteForceAsTheClockRuns) {
  for (const double start : {1000.0, 3e12}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(seed);
      SCOPED_TRACE(start);
      run_random(seed, start);
    }
  }
}

// The root's key was read earlier: by now the other item scores lower, and top() must read the root again
// (a heap that trusted its keys would answer x here: shown once).
TEST(RisingHeap, ReadsTheRootAgainBeforeAnsweringAndOnlyThere) {
  Heap heap;
  const Heap::Handle x = heap.insert(1, 1.0, 20, 10);   // 0.1 at 10, 0.2 at 15
  const Heap::Handle y = heap.insert(2, 15.0, 110, 10);  // 0.15 at 10, 0.158 at 15
  for (int k = 0; k < 100; ++k) heap.insert(3 + k, 1000.0, 1000, 10);  // far above both throughout
  EXPECT_EQ(heap.top(10), x);
  EXPECT_EQ(heap.refreshes(), 0u);
  EXPECT_EQ(heap.top(15), y);
  EXPECT_EQ(heap.refreshes(), 2u);  // x read again (it sinks), then y (risen a little, still the lowest)
  EXPECT_DOUBLE_EQ(heap.score(y, 15), 15.0 / 95.0);
  EXPECT_TRUE(heap.valid(15));
}

TEST(RisingHeap, EqualScoresGoToTheLatestArrival) {
  Heap heap;
  const Heap::Handle early = heap.insert(1, 1.0, 20, 10, 5);
  const Heap::Handle late = heap.insert(2, 2.0, 30, 10, 9);  // 0.1 as well
  heap.insert(3, 2.0, 30, 10, 7);
  EXPECT_EQ(heap.top(10), late);
  heap.erase(late);
  EXPECT_EQ(heap.payload(heap.top(10)), 3);
  EXPECT_NE(heap.top(10), early);
  // Arrival 0: the next in insertion order, after every arrival given so far.
  const Heap::Handle next = heap.insert(4, 3.0, 40, 10);
  EXPECT_EQ(heap.top(10), next);
}

// An update that raises the score keeps the old key as a lower bound (no sift); one that lowers it moves the
// item up at once. Either way the top is exact.
TEST(RisingHeap, UpdatesKeepALowerBoundOrMoveUp) {
  Heap heap;
  const Heap::Handle x = heap.insert(1, 1.0, 110, 10);  // 0.01
  const Heap::Handle y = heap.insert(2, 3.0, 110, 10);  // 0.03
  heap.update(x, 5.0, 110, 10);                         // 0.05: the key 0.01 stays
  EXPECT_TRUE(heap.valid(10));
  EXPECT_EQ(heap.top(10), y);
  EXPECT_EQ(heap.refreshes(), 1u);
  heap.update(x, 1.0, 210, 10);  // 0.005: up at once
  EXPECT_EQ(heap.top(10), x);
  EXPECT_EQ(heap.refreshes(), 1u);
  EXPECT_TRUE(heap.holds(x));
  heap.erase(x);
  EXPECT_FALSE(heap.holds(x));
  EXPECT_EQ(heap.size(), 1u);
}

TEST(RisingHeap, MisuseIsAnError) {
  Heap heap;
  expect_error<InvalidArgument>([&] { heap.top(0); }, {"rising heap: top of an empty heap"});
  expect_error<InvalidArgument>([&] { heap.insert(1, 1.0, 5, 5); }, {"rising heap: a deadline at or before the clock"});
  const Heap::Handle h = heap.insert(1, 1.0, 10, 5);
  EXPECT_EQ(heap.clock(), 5);
  expect_error<InvalidArgument>([&] { heap.top(4); }, {"rising heap: the clock ran backwards"});
  expect_error<InvalidArgument>([&] { heap.update(h, 1.0, 5, 5); }, {"rising heap: a deadline at or before the clock"});
  heap.erase(h);
  expect_error<InvalidArgument>([&] { heap.erase(h); }, {"rising heap: erasing an item that is not in it"});
  expect_error<InvalidArgument>([&] { heap.update(h, 1.0, 20, 5); },
                                {"rising heap: updating an item that is not in it"});
  EXPECT_TRUE(heap.empty());
}

}  // namespace
}  // namespace dtr::test

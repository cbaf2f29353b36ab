// Heuristics on hand-built graphs, through the narrow StorageView they see.
#include <gtest/gtest.h>

#include <vector>

#include "heuristics/heuristic.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

struct FakeStorage final : heuristics::StorageView {
  std::size_t size = 1;
  double c0 = 1;
  std::uint64_t last = 0;
  bool is_evicted = false;
  std::vector<FakeStorage*> inputs;
  std::vector<FakeStorage*> dependents;  // storages whose producer reads this one

  std::size_t bytes() const override { return size; }
  double cost() const override { return c0; }
  std::uint64_t last_access() const override { return last; }
  bool evicted() const override { return is_evicted; }
  void for_each_input(const std::function<void(StorageView&)>& visit) override {
    for (FakeStorage* s : inputs) visit(*s);
  }
  void for_each_dependent(const std::function<void(StorageView&)>& visit) override {
    for (FakeStorage* s : dependents) visit(*s);
  }
};

// t0 a constant; t1 = f(t0), t2 = f(t1), t3 = f(t1), t4 = f(t2, t3), t5 = f(t3), t6 = f(t4, t5).
struct Graph {
  std::vector<FakeStorage> t = std::vector<FakeStorage>(7);
  Graph() {
    auto edge = [&](int from, int to) {
      t[to].inputs.push_back(&t[from]);
      t[from].dependents.push_back(&t[to]);
    };
    edge(0, 1);
    edge(1, 2);
    edge(1, 3);
    edge(2, 4);
    edge(3, 4);
    edge(3, 5);
    edge(4, 6);
    edge(5, 6);
  }
  void evict(heuristics::Heuristic& h, int i) {
    t[i].is_evicted = true;
    h.on_evict(t[i]);
  }
};

TEST(DtrEqHeuristic, CountsEachConnectedEvictedClassOnce) {
  auto h = heuristics::make_heuristic("dtr-eq");
  Graph g;
  for (int i : {1, 3, 4}) g.evict(*h, i);  // resident: t0, t2, t5, t6
  // All costs and sizes 1, staleness 1 (now == last access). The exact e*(t2) is {t1, t4}; the union-find puts
  // t1, t3 and t4 in one class, so t2 is charged t3's cost as well: (1 + 3) / 1.
  EXPECT_DOUBLE_EQ(h->score(g.t[2], 0), 4.0);
  EXPECT_DOUBLE_EQ(h->score(g.t[5], 0), 4.0);  // e*(t5) = {t1, t3}; the class adds t4
  EXPECT_DOUBLE_EQ(h->score(g.t[6], 0), 4.0);  // e*(t6) = {t1, t3, t4}: exact here
  // Staleness and size divide the score.
  g.t[2].size = 4;
  EXPECT_DOUBLE_EQ(h->score(g.t[2], 1), 4.0 / (4 * 2));
}

TEST(DtrEqHeuristic, RematerializingSubtractsFromTheClass) {
  auto h = heuristics::make_heuristic("dtr-eq");
  Graph g;
  for (int i : {1, 3, 4}) g.evict(*h, i);
  g.t[3].is_evicted = false;
  h->on_rematerialize(g.t[3]);
  EXPECT_DOUBLE_EQ(h->score(g.t[5], 0), 1.0);  // its input t3 is back; t6 is resident
  EXPECT_DOUBLE_EQ(h->score(g.t[2], 0), 1.0 + 2.0);  // the class now costs t1 + t4
  g.evict(*h, 3);  // evicted again: it rejoins its class
  EXPECT_DOUBLE_EQ(h->score(g.t[2], 0), 4.0);
  for (auto& s : g.t) h->on_destroy(s);
}

TEST(LruHeuristic, PrefersTheLeastRecentlyUsed) {
  auto h = heuristics::make_heuristic("lru");
  FakeStorage old_one, recent;
  old_one.last = 1;
  recent.last = 9;
  EXPECT_LT(h->score(old_one, 10), h->score(recent, 10));
}

TEST(Heuristics, UnknownNamesAreConfigErrors) {
  EXPECT_EQ(heuristics::heuristic_names(), (std::vector<std::string>{"dtr-eq", "lru"}));
  try {
    heuristics::make_heuristic("dtr-exact", "DTR_HEURISTIC");
    FAIL() << "expected dtr::ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("DTR_HEURISTIC=\"dtr-exact\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtr::test

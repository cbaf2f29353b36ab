// Heuristics on hand-built graphs, through the narrow StorageView they see (h_DTR^eq's classes:
// dtr_eq_heuristic_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "fake_storage.h"
#include "heuristics/heuristic.h"
#include "heuristics/walking.h"
#include "small_lineage.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(LruHeuristic, PrefersTheLeastRecentlyUsed) {
  auto h = heuristics::make_heuristic("lru");
  FakeStorage old_one, recent;
  old_one.last = 1;
  recent.last = 9;
  EXPECT_LT(h->score(old_one, 10), h->score(recent, 10));
}

TEST(DtrHeuristic, UsesTheExactEvictedNeighbourhood) {
  auto h = heuristics::make_heuristic("dtr");
  SmallLineage g;
  for (int i : {1, 3, 4}) g.evict(*h, i);
  EXPECT_DOUBLE_EQ(h->score(g.t[2], 0), 1.0 + 2.0);  // e*(t2) = {t1, t4}
  EXPECT_DOUBLE_EQ(h->score(g.t[5], 0), 1.0 + 2.0);  // e*(t5) = {t1, t3}
  EXPECT_DOUBLE_EQ(h->score(g.t[6], 0), 1.0 + 3.0);  // e*(t6) = {t1, t3, t4}
  EXPECT_DOUBLE_EQ(h->score(g.t[0], 0), 1.0 + 3.0);  // t0's dependents t1 -> t3 -> t4 (t2, t5 resident: stop)
  // Costs are summed, each storage once, divided by size and staleness.
  g.t[1].c0 = 10;
  g.t[6].size = 2;
  EXPECT_DOUBLE_EQ(h->score(g.t[6], 3), (1.0 + 10.0 + 1.0 + 1.0) / (2 * 4));
  // A rematerialized storage stops the walk.
  g.t[3].is_evicted = false;
  EXPECT_DOUBLE_EQ(h->score(g.t[5], 0), 1.0);
}

// A run of `evicted` evicted storages between two resident ones (all costs 1): head -> run... -> tail.
struct EvictedRun {
  std::vector<FakeStorage> t;
  explicit EvictedRun(int evicted, heuristics::Heuristic& h) : t(static_cast<std::size_t>(evicted) + 2) {
    for (std::size_t i = 1; i < t.size(); ++i) {
      t[i].inputs.push_back(&t[i - 1]);
      t[i - 1].dependents.push_back(&t[i]);
    }
    for (std::size_t i = 1; i + 1 < t.size(); ++i) {
      t[i].is_evicted = true;
      h.on_evict(t[i]);
    }
  }
  FakeStorage& head() { return t.front(); }
  FakeStorage& tail() { return t.back(); }
};

// Two evicted runs of `length` side by side, each rung also reading the other run's previous rung, between a
// resident head and a resident tail reading both ends: two evicted storages a level.
struct EvictedLadder {
  std::vector<FakeStorage> a, b;
  FakeStorage head, tail;
  EvictedLadder(int length, heuristics::Heuristic& h)
      : a(static_cast<std::size_t>(length)), b(static_cast<std::size_t>(length)) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      link(i == 0 ? head : a[i - 1], a[i]);
      link(i == 0 ? head : b[i - 1], a[i]);
      link(i == 0 ? head : b[i - 1], b[i]);
    }
    link(a.back(), tail);
    link(b.back(), tail);
    for (std::vector<FakeStorage>* run : {&a, &b}) {
      for (FakeStorage& s : *run) {
        s.is_evicted = true;
        h.on_evict(s);
      }
    }
  }
};

// The walks count kWalkDepth hops a side: complete while nothing evicted lies one hop further.
TEST(DtrNeighbourhood, SaysWhetherItsWalksCountedTheWholeEvictedRegion) {
  for (const int run : {heuristics::kWalkDepth, heuristics::kWalkDepth + 1}) {
    SCOPED_TRACE("an evicted run of " + std::to_string(run));
    auto walks = heuristics::make_dtr_neighbourhood();
    EvictedRun r(run, *walks);
    for (FakeStorage* end : {&r.head(), &r.tail()}) {
      const heuristics::EvictedReach reach = walks->reach(*end, true);
      EXPECT_EQ(reach.cost, static_cast<double>(heuristics::kWalkDepth));
      EXPECT_EQ(reach.complete, run == heuristics::kWalkDepth);
      EXPECT_TRUE(reach.chain_cut);  // complete, or one evicted storage a level past the depth: a chain
      EXPECT_FALSE(reach.count_cut);
    }
  }
  // Two evicted storages a level past the depth: cut, and no chain.
  for (const int length : {heuristics::kWalkDepth / 2, 2 * heuristics::kWalkDepth}) {
    SCOPED_TRACE("a ladder of " + std::to_string(length));
    auto ladder_walks = heuristics::make_dtr_neighbourhood();
    EvictedLadder ladder(length, *ladder_walks);
    const heuristics::EvictedReach reach = ladder_walks->reach(ladder.tail, true);
    const int counted = 2 * std::min(length, heuristics::kWalkDepth);
    EXPECT_EQ(reach.cost, static_cast<double>(counted));
    EXPECT_EQ(reach.complete, length <= heuristics::kWalkDepth);
    EXPECT_EQ(reach.chain_cut, reach.complete);
    EXPECT_FALSE(reach.count_cut);
  }
  // kWalkCount storages on one side: the count ends the walk, whatever lies beyond.
  auto walks = heuristics::make_dtr_neighbourhood();
  FakeStorage hub;
  std::vector<FakeStorage> readers(heuristics::kWalkCount + 1);
  for (FakeStorage& r : readers) {
    r.inputs.push_back(&hub);
    hub.dependents.push_back(&r);
    r.is_evicted = true;
    walks->on_evict(r);
  }
  EXPECT_FALSE(walks->reach(hub, true).complete);
  EXPECT_TRUE(walks->reach(hub, true).count_cut);
  EXPECT_FALSE(walks->reach(hub, true).chain_cut);
  EXPECT_TRUE(walks->reach(hub, /*dependents=*/false).complete);  // its inputs' side alone: nothing evicted
  readers.back().is_evicted = false;
  walks->on_rematerialize(readers.back());
  EXPECT_FALSE(walks->reach(hub, true).complete);  // exactly kWalkCount: counted to the bound
  readers.front().is_evicted = false;
  walks->on_rematerialize(readers.front());
  const heuristics::EvictedReach reach = walks->reach(hub, true);
  EXPECT_TRUE(reach.complete);
  EXPECT_EQ(reach.cost, static_cast<double>(heuristics::kWalkCount - 1));
}

// forecast charges h_DTR's exact e* where the walks count all of it: beside classes that merged through a
// storage since rematerialized, h_DTR^eq charges the whole class. Beyond the walks' bounds it charges the
// class where the region past them is a chain, which the class counts in full, and the walks' count where it
// is wider (a random DAG's runs joined by skips, which a class that never splits overcounts).
TEST(ForecastHeuristic, ChargesTheWalkedNeighbourhoodWhereItIsCompleteElseTheClass) {
  auto forecast = heuristics::make_heuristic("forecast");
  auto dtr_eq = heuristics::make_heuristic("dtr-eq");
  SmallLineage g;
  SmallLineage g_eq;
  for (int i : {1, 3, 4}) {
    g.evict(*forecast, i);
    g_eq.evict(*dtr_eq, i);
  }
  // No forecasts (no clocks): d is 1, the score its cost per byte.
  EXPECT_DOUBLE_EQ(forecast->score(g.t[2], 0), 1.0 + 2.0);  // e*(t2) = {t1, t4}
  EXPECT_DOUBLE_EQ(dtr_eq->score(g_eq.t[2], 0), 1.0 + 3.0);  // t1, t3, t4's class
  EXPECT_DOUBLE_EQ(forecast->score(g.t[6], 0), 1.0 + 3.0);  // e*(t6) = {t1, t3, t4}
  for (const int run : {heuristics::kWalkDepth, 3 * heuristics::kWalkDepth}) {
    SCOPED_TRACE("an evicted run of " + std::to_string(run));
    auto h = heuristics::make_heuristic("forecast");
    EvictedRun r(run, *h);
    EXPECT_DOUBLE_EQ(h->score(r.head(), 0), 1.0 + run);
    EXPECT_DOUBLE_EQ(h->score(r.tail(), 0), 1.0 + run);
  }
  const int length = 3 * heuristics::kWalkDepth;
  auto h = heuristics::make_heuristic("forecast");
  auto eq = heuristics::make_heuristic("dtr-eq");
  EvictedLadder ladder(length, *h);
  EvictedLadder ladder_eq(length, *eq);
  EXPECT_DOUBLE_EQ(h->score(ladder.tail, 0), 1.0 + 2 * heuristics::kWalkDepth);  // the walk's count
  EXPECT_DOUBLE_EQ(eq->score(ladder_eq.tail, 0), 1.0 + 2 * length);                // the class
}

// forecast lets a released storage go first while no evicted storage the program holds would be remade from
// it (through evicted storages) and no resident held one larger than it is made from it, and charges it as
// usual otherwise; it is never a last resort.
TEST(ForecastHeuristic, ScoresAReleasedStorageZeroUntilAHeldEvictedStorageWaitsOnIt) {
  auto forecast = heuristics::make_heuristic("forecast");
  SmallLineage g;
  std::uint64_t program = 0;
  for (FakeStorage& t : g.t) {
    t.program_clock = &program;
    t.forecast_uses = {5};  // a use ahead, not read yet: a last resort unless released
  }
  g.t[1].is_released = true;
  EXPECT_EQ(forecast->score(g.t[1], 0), 0.0);
  EXPECT_FALSE(forecast->last_resort(g.t[1]));
  EXPECT_TRUE(forecast->last_resort(g.t[2]));
  g.evict(*forecast, 3);  // held: it would be remade from t1
  EXPECT_DOUBLE_EQ(forecast->score(g.t[1], 0), (1.0 + 1.0) / 5.0);  // e*(t1) = {t3}, d = 5
  g.t[3].is_released = true;
  forecast->on_release(g.t[3]);
  EXPECT_EQ(forecast->score(g.t[1], 0), 0.0);
  g.evict(*forecast, 4);  // held, remade from t3, which is remade from t1
  EXPECT_DOUBLE_EQ(forecast->score(g.t[1], 0), (1.0 + 2.0) / 5.0);
  // A resident held value larger than it made from it: cheap per byte, it would go and need t1 again.
  auto again = heuristics::make_heuristic("forecast");
  SmallLineage h;
  h.t[1].is_released = true;
  h.t[2].size = 2;
  EXPECT_DOUBLE_EQ(again->score(h.t[1], 0), 1.0);  // d = 1 without forecasts
  h.t[2].is_released = true;
  EXPECT_EQ(again->score(h.t[1], 0), 0.0);
}

// An event of dtr's reports each storage whose score it changed once: the eviction index re-keys at each
// report, which walks. (dtr's two walks from the event's storage, down and up, cannot both reach one storage
// in a DAG.) forecast's two bases report many of the same storages; its index keys each once a decision
// (ForecastIndex.KeysACandidateOnceADecisionHoweverOftenReported).
TEST(HeuristicEvents, ReportEachChangedStorageOncePerEvent) {
  struct Reports final : heuristics::ScoreListener {
    std::vector<heuristics::StorageView*> seen;
    void score_changed(heuristics::StorageView& s) override { seen.push_back(&s); }
  };
  for (const char* name : {"dtr"}) {
    SCOPED_TRACE(name);
    auto h = heuristics::make_heuristic(name);
    Reports reports;
    h->set_listener(&reports);
    SmallLineage g;  // t2 is read by t4, which t3 also feeds: evicting t1, t3, t4 reaches t2, t5, t6 both ways
    std::size_t told = 0;
    for (int i : {1, 3, 4, 2}) {
      reports.seen.clear();
      g.evict(*h, i);
      auto sorted = reports.seen;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "evicting t" << i;
      told += reports.seen.size();
    }
    EXPECT_GT(told, 0u);
    h->set_listener(nullptr);
  }
}

TEST(MspsHeuristic, CountsEvictedAncestorsOnlyAndNoStaleness) {
  auto h = heuristics::make_heuristic("msps");
  SmallLineage g;
  for (int i : {1, 3, 4}) g.evict(*h, i);
  EXPECT_DOUBLE_EQ(h->score(g.t[2], 0), 1.0 + 1.0);        // t1
  EXPECT_DOUBLE_EQ(h->score(g.t[5], 7), 1.0 + 2.0);        // t3, t1; staleness does not matter
  EXPECT_DOUBLE_EQ(h->score(g.t[6], 0), 1.0 + 3.0);        // t4, t3, t1 (t2 resident)
  g.t[6].size = 4;
  EXPECT_DOUBLE_EQ(h->score(g.t[6], 0), (1.0 + 3.0) / 4);
}

TEST(SimpleHeuristics, ScoreByTheirFormulas) {
  FakeStorage s;
  s.size = 8;
  s.c0 = 6;
  s.last = 2;
  // Staleness at clock 5 is 5 - 2 + 1 = 4.
  EXPECT_DOUBLE_EQ(heuristics::make_heuristic("dtr-local")->score(s, 5), 6.0 / (8 * 4));
  EXPECT_DOUBLE_EQ(heuristics::make_heuristic("lru")->score(s, 5), 1.0 / 4);
  EXPECT_DOUBLE_EQ(heuristics::make_heuristic("size")->score(s, 5), 1.0 / 8);
  EXPECT_DOUBLE_EQ(heuristics::make_heuristic("dtr-eq")->score(s, 5), 6.0 / (8 * 4));  // no evicted neighbour
  EXPECT_DOUBLE_EQ(heuristics::make_heuristic("dtr")->score(s, 5), 6.0 / (8 * 4));
  // A storage used this instant still has a finite score; the clock never runs behind, but is clamped.
  EXPECT_DOUBLE_EQ(heuristics::make_heuristic("lru")->score(s, 1), 1.0);
}

TEST(RandomHeuristic, IsReproducibleForASeed) {
  FakeStorage s;
  auto draws = [&](const char* name) {
    auto h = heuristics::make_heuristic(name);
    std::vector<double> values;
    for (int i = 0; i < 16; ++i) values.push_back(h->score(s, 0));
    return values;
  };
  EXPECT_EQ(draws("random"), draws("random"));
  EXPECT_EQ(draws("random:7"), draws("random:7"));
  EXPECT_NE(draws("random"), draws("random:7"));
  for (double v : draws("random")) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
  }
  EXPECT_EQ(heuristics::make_heuristic("random")->name(), "random");
  EXPECT_EQ(heuristics::make_heuristic("random:7")->name(), "random:7");
}

TEST(Heuristics, EveryNameBuildsAndUnknownNamesAreConfigErrors) {
  EXPECT_EQ(heuristics::heuristic_names(),
            (std::vector<std::string>{"dtr", "dtr-eq", "dtr-local", "lru", "size", "msps", "random", "window",
                                      "dtr-eq+window", "forecast", "forecast+reversal"}));
  for (const std::string& name : heuristics::heuristic_names()) {
    EXPECT_EQ(heuristics::make_heuristic(name)->name(), name);
  }
  for (const char* name : {"dtr+window", "lru+window", "msps+window", "random:7+window", "forecast+window"}) {
    EXPECT_EQ(heuristics::make_heuristic(name)->name(), name);
  }
  for (const char* bad : {"dtr-exact", "random:", "random:x", "random:-1", "Lru", "window+window", "+window",
                          "dtr-eq+Window", "dtr-eq+window+window", "foo+window"}) {
    try {
      heuristics::make_heuristic(bad, "DTR_HEURISTIC");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("DTR_HEURISTIC=\"") + bad + "\""), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("expected dtr, dtr-eq"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dtr::test

namespace dtr::test {
namespace {

// The runtime times the score computations of the heuristics that walk the evicted lineage as search.
TEST(HeuristicNames, ExactlyTheWalkingHeuristicsSayTheirScoresWalkTheLineage) {
  for (const std::string& name : heuristics::heuristic_names()) {
    const bool walks =
        name == "dtr" || name == "msps" || name == "dtr-eq" || name == "dtr-eq+window" || name == "forecast" ||
                       name == "forecast+reversal";
    EXPECT_EQ(heuristics::make_heuristic(name)->scores_walk_lineage(), walks) << name;
  }
  EXPECT_TRUE(heuristics::make_heuristic("dtr+window")->scores_walk_lineage());
  EXPECT_FALSE(heuristics::make_heuristic("dtr-local+window")->scores_walk_lineage());
}

}  // namespace
}  // namespace dtr::test

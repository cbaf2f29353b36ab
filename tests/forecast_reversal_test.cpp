// forecast+reversal (heuristics/forecast.cpp, heuristics/reversal.h) on hand-built lineage: the memory free at
// a deadline, the evicted region evicting a storage would join, and the score that charges a storage its own
// recomputation where that region fits the memory free at its next use (`forecast`'s score elsewhere).
// tests/runtime_chain_test.cpp runs it on a chain through the runtime.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fake_storage.h"
#include "heuristics/heuristic.h"
#include "heuristics/reversal.h"

namespace dtr::test {
namespace {

using heuristics::EvictedRegion;
using heuristics::EvictedRegionSearch;
using heuristics::MemoryAtDeadline;
using heuristics::NeighbourVisitor;

TEST(MemoryAtDeadline, SubtractsTheCandidatesNeededAfterTheDeadline) {
  std::uint64_t clock = 0;
  FakeStorage a, b, c;
  for (FakeStorage* s : {&a, &b, &c}) s->program_clock = &clock;
  a.size = 100;
  a.forecast_uses = {10};
  b.size = 50;
  b.forecast_uses = {20};
  c.size = 30;  // no use ahead: it need not be there at any deadline
  MemoryAtDeadline memory;
  memory.reset(1000, [&](NeighbourVisitor visit) {
    for (FakeStorage* s : {&a, &b, &c}) visit(*s);
  });
  EXPECT_EQ(memory.free_at(5), 1000 - 150);
  EXPECT_EQ(memory.free_at(10), 1000 - 50);  // a's use is the deadline's own: its bytes are not held past it
  EXPECT_EQ(memory.free_at(19), 1000 - 50);
  EXPECT_EQ(memory.free_at(20), 1000);
  EXPECT_EQ(memory.free_at(1000), 1000);
  memory.reset(7, [](NeighbourVisitor) {});  // a new decision forgets the last one's candidates
  EXPECT_EQ(memory.free_at(5), 7);
}

// The lineage around s (bytes, cost): a constant k feeds e0 (released), e1 (held, no use ahead) and e2 (held,
// a use at 30), all evicted, then s (resident, use at 20); s's evicted dependent d1 (held) feeds d2 (evicted,
// released); e2 also feeds f (evicted, held) and e0 feeds g (evicted, held); r (resident, use at 50) reads s.
struct ReversalLineage {
  std::uint64_t clock = 10;
  FakeStorage k, e0, e1, e2, s, d1, d2, f, g, r;
  ReversalLineage() {
    for (FakeStorage* t : all()) t->program_clock = &clock;
    k.is_constant = true;
    link(k, e0);
    link(e0, e1);
    link(e1, e2);
    link(e2, s);
    link(s, d1);
    link(d1, d2);
    link(e2, f);
    link(e0, g);
    link(s, r);
    const auto set = [](FakeStorage& t, std::size_t bytes, double cost) {
      t.size = bytes;
      t.c0 = cost;
    };
    set(e0, 1, 10);
    set(e1, 2, 20);
    set(e2, 3, 40);
    set(s, 4, 2);
    set(d1, 5, 80);
    set(d2, 6, 160);
    set(f, 7, 320);
    set(g, 8, 640);
    set(r, 8, 1);
    e0.forecast_uses = {40};  // released: remade only for what is made from it, whatever its forecast says
    e2.forecast_uses = {30};
    s.forecast_uses = {20};
    r.forecast_uses = {50};
    for (FakeStorage* t : {&e0, &e1, &e2, &d1, &d2, &f, &g}) t->is_evicted = true;
    for (FakeStorage* t : {&e0, &d2}) t->is_released = true;
  }
  std::vector<FakeStorage*> all() { return {&k, &e0, &e1, &e2, &s, &d1, &d2, &f, &g, &r}; }
};

TEST(EvictedRegionSearch, JoinsEvictedAncestorsAndTheEvictedStoragesHeldBesideThem) {
  ReversalLineage l;
  EvictedRegionSearch search(1024);
  const EvictedRegion region = search(l.s);
  // s, e0, e1, e2, d1 and f: not k (constant), r (resident), d2 (a released dependent), g (made from e0, which
  // is released: remade only for g's own sake).
  EXPECT_TRUE(region.complete);
  EXPECT_EQ(region.bytes, 4 + 1 + 2 + 3 + 5 + 7);
  // The ancestors nothing else will read: e0 (released) and e1 (no use ahead); e2 has its own use at 30.
  EXPECT_EQ(region.unneeded_cost, 10 + 20);

  EXPECT_TRUE(EvictedRegionSearch(6)(l.s).complete);  // exactly the region's six storages
  const EvictedRegion cut = EvictedRegionSearch(5)(l.s);
  EXPECT_FALSE(cut.complete);
  EXPECT_LT(cut.bytes, region.bytes);

  // Searches are independent: the second forgets the first's visits.
  l.s.is_evicted = true;  // now r's region holds all of s's
  const EvictedRegion from_r = search(l.r);
  EXPECT_EQ(from_r.bytes, 8 + 4 + 1 + 2 + 3 + 5 + 7);
  EXPECT_EQ(from_r.unneeded_cost, 10 + 20);  // s is forecast at 20: needed for itself
  l.s.forecast_uses = {};
  EXPECT_EQ(search(l.r).unneeded_cost, 10 + 20 + 2);
}

// The lineage scored by the heuristic `name`, after the lineage events a runtime would send (each heuristic on
// its own lineage: the classes keep their state on the storages).
struct ScoredLineage {
  ReversalLineage l;
  FakeStorage q;  // a resident candidate used at 15, before s's deadline: its bytes are free by then
  std::unique_ptr<heuristics::Heuristic> h;
  explicit ScoredLineage(const char* name) : h(heuristics::make_heuristic(name)) {
    q.size = 100;
    q.forecast_uses = {15};
    q.program_clock = &l.clock;
    for (FakeStorage* t : {&l.e0, &l.e1, &l.e2, &l.d1, &l.d2, &l.f, &l.g}) h->on_evict(*t);
    for (FakeStorage* t : {&l.e0, &l.d2}) h->on_release(*t);
  }
  // A decision whose candidates are s, r and q.
  void begin_decision(double available) {
    h->begin_decision(available, [&](NeighbourVisitor visit) {
      for (FakeStorage* t : {&l.s, &l.r, &q}) visit(*t);
    });
  }
  double score_s() { return h->score(l.s, 0); }
};

TEST(ForecastReversal, ChargesItsOwnCostWhereTheRegionFitsTheMemoryFreeAtTheNextUse) {
  ScoredLineage reversal("forecast+reversal");
  ScoredLineage forecast("forecast");
  // The region is 22 bytes; at s's use (20) r (8 bytes, used at 50) is still held, and the op reading s needs
  // room for its output and one more operand of s's size (2 x 4 bytes): 38 bytes fit it, 37 do not.
  reversal.begin_decision(38);
  const double distance = 20 - 10;
  EXPECT_DOUBLE_EQ(reversal.score_s(), (2.0 + 10 + 20) / 4 / distance);
  EXPECT_LT(reversal.score_s(), forecast.score_s());  // forecast also charges e2 and d1, remade once anyway
  reversal.begin_decision(37);
  EXPECT_EQ(reversal.score_s(), forecast.score_s());
  reversal.begin_decision(std::numeric_limits<double>::infinity());  // no budget
  EXPECT_DOUBLE_EQ(reversal.score_s(), (2.0 + 10 + 20) / 4 / distance);
  // Where the program did not make s before, nothing forecasts the region's remaking: forecast's score.
  for (ScoredLineage* x : {&reversal, &forecast}) x->l.s.seen_before = false;
  EXPECT_EQ(reversal.score_s(), forecast.score_s());
  // Nor where no use is forecast for s.
  for (ScoredLineage* x : {&reversal, &forecast}) {
    x->l.s.seen_before = true;
    x->l.s.forecast_uses = {};
  }
  EXPECT_EQ(reversal.score_s(), forecast.score_s());
}

// The scan passes over a candidate whose floor, its own cost over its distance, is above the best score found
// (runtime/eviction.cpp); the floor never exceeds the score, region fitting or not, and is 0 where the
// program released the storage (forecast may score it 0). tests/forecast_index_test.cpp checks forecast's on
// random lineage.
TEST(ForecastReversal, TheScoreFloorIsTheOwnCostOverTheDistanceAndNeverAboveTheScore) {
  ScoredLineage reversal("forecast+reversal");
  const double own = 2.0 / 4 / (20 - 10);
  for (const double available : {38.0, 37.0}) {
    reversal.begin_decision(available);
    EXPECT_DOUBLE_EQ(reversal.h->score_floor(reversal.l.s, 0), own);
    EXPECT_LE(reversal.h->score_floor(reversal.l.s, 0), reversal.score_s());
  }
  reversal.l.e0.c0 = 0;  // the region's unneeded ancestors cost nothing
  reversal.l.e1.c0 = 0;
  reversal.begin_decision(38);
  EXPECT_DOUBLE_EQ(reversal.score_s(), own);  // nothing to remake but s: the score is the floor
  EXPECT_DOUBLE_EQ(reversal.h->score_floor(reversal.l.s, 0), own);
  reversal.l.s.is_released = true;
  reversal.h->on_release(reversal.l.s);
  EXPECT_EQ(reversal.h->score_floor(reversal.l.s, 0), 0.0);
  EXPECT_LE(reversal.h->score_floor(reversal.l.s, 0), reversal.score_s());
  // Heuristics without a floor never pass over a candidate.
  EXPECT_EQ(heuristics::make_heuristic("dtr-eq")->score_floor(reversal.l.s, 0), 0.0);
}

TEST(ForecastReversal, WithoutADecisionsMemoryScoresAsForecast) {
  ScoredLineage reversal("forecast+reversal");
  ScoredLineage forecast("forecast");
  EXPECT_EQ(reversal.score_s(), forecast.score_s());  // nothing free is known: nothing fits
  const std::vector<FakeStorage*> a = reversal.l.all();
  const std::vector<FakeStorage*> b = forecast.l.all();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i]->is_constant) continue;
    EXPECT_EQ(reversal.h->last_resort(*a[i]), forecast.h->last_resort(*b[i])) << i;
  }
}

TEST(ForecastReversal, IsScannedAndReadsMemoryAlsoBehindAWindow) {
  for (const char* name : {"forecast+reversal", "forecast+reversal+window"}) {
    auto h = heuristics::make_heuristic(name);
    EXPECT_TRUE(h->reads_memory()) << name;
    EXPECT_TRUE(h->reads_forecasts()) << name;
    EXPECT_FALSE(h->indexable()) << name;
    EXPECT_FALSE(h->forecast_indexable()) << name;
  }
  for (const std::string& name : heuristics::heuristic_names()) {
    EXPECT_EQ(heuristics::make_heuristic(name)->reads_memory(), name == "forecast+reversal") << name;
  }
  // The window forwards the decision's memory: behind it the score is the plain heuristic's.
  ScoredLineage plain("forecast+reversal");
  ScoredLineage windowed("forecast+reversal+window");
  for (ScoredLineage* x : {&plain, &windowed}) x->begin_decision(38);
  EXPECT_DOUBLE_EQ(windowed.score_s(), (2.0 + 10 + 20) / 4 / (20 - 10));
  EXPECT_EQ(windowed.score_s(), plain.score_s());
}

}  // namespace
}  // namespace dtr::test

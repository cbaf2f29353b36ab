// The forecast heuristic where nothing the program made before forecasts a storage (its first step, a program
// that never repeats: StorageView::made_before): the cost of its evicted ancestors, plus half its dependents'
// side where that side holds an evicted value the program keeps, over its staleness plus, once the program has
// read it, a prior of a quarter of the ops run by its last use; the index keeps that score.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "fake_storage.h"
#include "heuristics/forecast_index.h"
#include "heuristics/heuristic.h"

namespace dtr::test {
namespace {

using heuristics::IndexClocks;

// in -> s -> out, `in` and `out` evicted: s's ancestors cost 3, its dependents 5 (`out`, which the program
// holds).
struct Line {
  std::uint64_t program = 10;
  std::uint64_t ops = 100;
  FakeStorage root, in, s, out;
  std::unique_ptr<heuristics::Heuristic> heuristic = heuristics::make_heuristic("forecast");

  Line() {
    root.is_constant = true;
    link(root, in);
    link(in, s);
    link(s, out);
    in.c0 = 3;
    s.c0 = 2;
    out.c0 = 5;
    for (FakeStorage* t : {&in, &s, &out}) {
      t->program_clock = &program;
      t->ops_clock = &ops;
    }
    s.last_op = 60;  // a staleness of 41 ops
    for (FakeStorage* t : {&in, &out}) {
      t->is_evicted = true;
      heuristic->on_evict(*t);
    }
  }

  // Makes `t` a resident storage made from s that the program made before and has read.
  void add_made_before_dependent(FakeStorage& t) {
    link(s, t);
    t.program_clock = &program;
    t.ops_clock = &ops;
    t.last_op = 90;
    t.read = true;
  }
};

TEST(ForecastFirstStep, AStorageMadeBeforeIsChargedBothSidesOverItsStaleness) {
  Line l;
  l.s.read = true;
  EXPECT_DOUBLE_EQ(l.heuristic->score(l.s, l.ops), (2.0 + 3.0 + 5.0) / 41.0);
}

TEST(ForecastFirstStep, AStorageNotMadeBeforeIsChargedItsAncestorsAndHalfAHeldDependentsSide) {
  Line l;
  l.s.seen_before = false;  // not read yet: its bare staleness
  EXPECT_DOUBLE_EQ(l.heuristic->score(l.s, l.ops), (2.0 + 3.0 + 5.0 / 2) / 41.0);
}

// Where no evicted value the program keeps is made from it, its ancestors alone: what depends on it may never be
// remade (a released intermediate is remade only for a held value made from it).
TEST(ForecastFirstStep, AReleasedDependentsSideIsNotCharged) {
  Line l;
  l.s.seen_before = false;
  l.out.is_released = true;
  l.heuristic->on_release(l.out);
  EXPECT_DOUBLE_EQ(l.heuristic->score(l.s, l.ops), (2.0 + 3.0) / 41.0);
}

TEST(ForecastFirstStep, OnceReadAQuarterOfTheOpsRunByItsLastUseIsAddedToItsStaleness) {
  Line l;
  l.s.seen_before = false;
  l.s.read = true;
  EXPECT_DOUBLE_EQ(l.heuristic->score(l.s, l.ops), (2.0 + 3.0 + 2.5) / (41.0 + 15.0));  // 60 / 4
  l.s.last_op = 63;  // 63 / 4 rounds down: index and scan add the same integer
  EXPECT_DOUBLE_EQ(l.heuristic->score(l.s, l.ops), (2.0 + 3.0 + 2.5) / (38.0 + 15.0));
}

// The index holds the same score, and follows a read (no walk: only the prior changes) and an eviction among
// the dependents (which raises its a by half the evicted value's cost: never floored, so keyed again, not noted
// as raised).
TEST(ForecastFirstStep, TheIndexKeepsTheScanScoreThroughAReadAndAnEvictionBeside) {
  Line l;
  l.s.seen_before = false;
  FakeStorage other;  // a storage made before, to compare against
  l.add_made_before_dependent(other);
  heuristics::ForecastIndex index(*l.heuristic);
  const IndexClocks clocks{l.ops, l.ops, l.program};
  index.add(l.s, clocks);
  index.add(other, clocks);
  EXPECT_DOUBLE_EQ(index.score(l.s, clocks), l.heuristic->score(l.s, l.ops));
  l.s.read = true;
  l.s.last_op = 100;
  index.used(l.s, clocks);
  EXPECT_DOUBLE_EQ(index.score(l.s, clocks), (2.0 + 3.0 + 2.5) / (1.0 + 25.0));
  index.remove(other, clocks);
  other.is_evicted = true;
  other.c0 = 4;
  l.heuristic->on_evict(other);  // a second held dependent evicted: half its cost more
  EXPECT_DOUBLE_EQ(index.score(l.s, clocks), l.heuristic->score(l.s, l.ops));
  EXPECT_DOUBLE_EQ(index.score(l.s, clocks), (2.0 + 3.0 + 4.5) / (1.0 + 25.0));
  EXPECT_TRUE(index.valid(clocks));
  index.remove(l.s, clocks);
}

// Heuristic::change_rule (the runtime offers it once a run, when recomputation first passes the base compute):
// `forecast` drops the dependents' half for good, and says so once; a storage made before keeps its score. The
// index, told that every candidate changed (as the runtime tells it), holds the scan's score again.
TEST(ForecastFirstStep, ChangingTheRuleDropsTheDependentsHalfOnce) {
  Line l;
  l.s.seen_before = false;
  FakeStorage before;  // made before: both sides, whatever the rule
  l.add_made_before_dependent(before);
  heuristics::ForecastIndex index(*l.heuristic);
  const IndexClocks clocks{l.ops, l.ops, l.program};
  index.add(l.s, clocks);
  index.add(before, clocks);
  const double before_score = l.heuristic->score(before, l.ops);
  EXPECT_DOUBLE_EQ(index.score(l.s, clocks), (2.0 + 3.0 + 5.0 / 2) / 41.0);
  EXPECT_TRUE(l.heuristic->change_rule());
  EXPECT_FALSE(l.heuristic->change_rule());
  EXPECT_DOUBLE_EQ(l.heuristic->score(l.s, l.ops), (2.0 + 3.0) / 41.0);
  EXPECT_DOUBLE_EQ(l.heuristic->score(before, l.ops), before_score);
  for (FakeStorage* t : {&l.s, &before}) index.score_changed(*t);
  EXPECT_DOUBLE_EQ(index.score(l.s, clocks), (2.0 + 3.0) / 41.0);
  EXPECT_TRUE(index.valid(clocks));
  index.remove(l.s, clocks);
  index.remove(before, clocks);
  // Heuristics with one rule keep it.
  for (const char* name : {"dtr-eq", "dtr", "msps", "lru"}) {
    EXPECT_FALSE(heuristics::make_heuristic(name)->change_rule()) << name;
  }
  EXPECT_TRUE(heuristics::make_heuristic("forecast+window")->change_rule());  // windows pass it to their base
}

}  // namespace
}  // namespace dtr::test

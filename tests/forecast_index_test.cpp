// The forecast index's mechanisms one at a time, on small lineages built for each: what it keys and walks and
// when, the floors and lower bounds it holds, ties between its heaps, and which heuristic gets it. Its
// agreement with a scan on random programs: tests/forecast_index_random_test.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fake_storage.h"
#include "heuristics/candidate_index.h"
#include "heuristics/forecast_index.h"
#include "heuristics/heuristic.h"

namespace dtr::test {
namespace {

using heuristics::IndexClocks;

// A key walks the lineage: a candidate reported changed by many events between two decisions (both bases
// report it, at every eviction beside it) is keyed once, at the decision; one only used is keyed without
// walking. `visits` counts the neighbours walks from a storage visit: a key of s visits its one input.
TEST(ForecastIndex, KeysACandidateOnceADecisionHoweverOftenReported) {
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{1, 1, 1};
  FakeStorage p;  // p -> s -> d1, d2, d3
  FakeStorage s;
  std::vector<std::unique_ptr<FakeStorage>> readers;
  s.inputs = {&p};
  p.dependents = {&s};
  index.add(s, clocks);
  for (int k = 0; k < 3; ++k) {
    auto& d = *readers.emplace_back(std::make_unique<FakeStorage>());
    d.inputs = {&s};
    d.c0 = 100;  // dear: s goes first
    s.dependents.push_back(&d);
    index.add(d, clocks);
  }
  EXPECT_EQ(index.choose(clocks), &s);
  EXPECT_EQ(s.visits, 1u) << "keyed once when added";
  for (auto& d : readers) {  // each eviction tells s (its walks reach d now)
    index.remove(*d, clocks);
    d->is_evicted = true;
    heuristic->on_evict(*d);
  }
  EXPECT_EQ(s.visits, 1u) << "reports key nothing before a decision";
  EXPECT_EQ(index.choose(clocks), &s);
  EXPECT_EQ(s.visits, 2u) << "three evictions beside it, one key";
  s.last = 2;
  s.last_op = 2;
  index.used(s, IndexClocks{2, 2, 2});
  EXPECT_EQ(index.choose(IndexClocks{2, 2, 2}), &s);
  EXPECT_EQ(s.visits, 2u) << "a use keys without walking";
  for (auto& d : readers) heuristic->on_destroy(*d);
  heuristic->on_destroy(s);
  index.remove(s, IndexClocks{2, 2, 2});
}

// An eviction only raises its neighbours' scores (their e* gains it), so the index keys a neighbour it reports
// only when the neighbour would be chosen: s, cheapest, is keyed and found dearer than t, which goes; u, raised
// too but never the cheapest, is not keyed at that decision, and still scores as a scan does when asked.
TEST(ForecastIndex, AnEvictionKeysANeighbourOnlyWhereItWouldBeChosen) {
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{1, 1, 1};
  FakeStorage p;  // p -> s -> d, p -> t, p -> u -> e
  FakeStorage s;
  FakeStorage t;
  FakeStorage u;
  FakeStorage d;
  FakeStorage e;
  const std::uint64_t tick = 1;  // both clocks, as `clocks`: no forecast use, scores by staleness
  for (FakeStorage* c : {&s, &t, &u, &d, &e}) {
    c->program_clock = &tick;
    c->ops_clock = &tick;
  }
  for (FakeStorage* c : {&s, &t, &u}) {
    c->inputs = {&p};
    p.dependents.push_back(c);
  }
  s.c0 = 1;
  t.c0 = 5;
  u.c0 = 50;
  d.c0 = 100;
  e.c0 = 100;
  d.inputs = {&s};
  s.dependents = {&d};
  e.inputs = {&u};
  u.dependents = {&e};
  for (FakeStorage* c : {&s, &t, &u, &d, &e}) index.add(*c, clocks);
  EXPECT_EQ(index.choose(clocks), &s);
  for (FakeStorage* gone : {&d, &e}) {  // s's and u's e* gain 100 each
    index.remove(*gone, clocks);
    gone->is_evicted = true;
    heuristic->on_evict(*gone);
  }
  const std::size_t s_visits = s.visits;
  const std::size_t u_visits = u.visits;
  EXPECT_EQ(index.choose(clocks), &t) << "s keyed at the top, and found dearer than t";
  EXPECT_GT(s.visits, s_visits);
  EXPECT_EQ(u.visits, u_visits) << "u, never the cheapest, keyed at no decision";
  EXPECT_EQ(index.score(u, clocks), heuristic->score(u, 1));
  EXPECT_EQ(index.score(s, clocks), heuristic->score(s, 1));
  for (FakeStorage* c : {&d, &e, &s, &t, &u}) heuristic->on_destroy(*c);
}

// A new or changed candidate is held at a lower bound of its score (its own cost over its distance, as a scan's
// floor), read without walking, and walked only where a decision would choose it: u, dear, is added beside s,
// cheap, and then told of a rematerialization beside it (which can lower its score), and no decision walks it;
// asked, it scores as a scan does. `visits` counts the neighbours walks from a storage visit.
TEST(ForecastIndex, HoldsAChangedCandidateAtItsFloorUntilADecisionWouldChooseIt) {
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{1, 1, 1};
  const std::uint64_t tick = 1;
  FakeStorage p;  // p -> s, p -> u -> e
  FakeStorage s;
  FakeStorage u;
  FakeStorage e;
  for (FakeStorage* c : {&s, &u, &e}) {
    c->program_clock = &tick;
    c->ops_clock = &tick;
  }
  for (FakeStorage* c : {&s, &u}) {
    c->inputs = {&p};
    p.dependents.push_back(c);
  }
  s.c0 = 1;
  u.c0 = 50;
  e.c0 = 100;
  e.inputs = {&u};
  u.dependents = {&e};
  e.is_evicted = true;
  heuristic->on_evict(e);
  for (FakeStorage* c : {&s, &u}) index.add(*c, clocks);
  EXPECT_EQ(index.choose(clocks), &s);
  EXPECT_GT(s.visits, 0u) << "s, at the top, walked";
  EXPECT_EQ(u.visits, 0u) << "u, never the cheapest, walked at no decision";
  e.is_evicted = false;  // remade: u's e* loses it, which lowers u's score
  heuristic->on_rematerialize(e);
  index.add(e, clocks);
  EXPECT_EQ(index.choose(clocks), &s);
  EXPECT_EQ(u.visits, 0u) << "reported changed, still not walked";
  EXPECT_EQ(index.score(u, clocks), heuristic->score(u, 1));
  EXPECT_GT(u.visits, 0u) << "asked for its score, walked";
  for (FakeStorage* c : {&e, &s, &u}) heuristic->on_destroy(*c);
}

// A candidate reported changed and not used since its curve was read keeps that curve: its a alone is lowered to
// its floor, without reading its forecast again (in the runtime, a storage's forecast is a memory miss of its
// own). A use moves the curve, and can move the tier: u, made and not read yet with a use forecast ahead, is a
// last resort; read, then reported changed by a rematerialization beside it, it is chosen before t, dearer.
TEST(ForecastIndex, ReadsACandidatesCurveAgainOnlyAfterAUse) {
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{1, 1, 1};
  const std::uint64_t tick = 1;
  FakeStorage p;  // p -> t, p -> u -> e, u -> f
  FakeStorage t;
  FakeStorage u;
  FakeStorage e;
  FakeStorage f;
  for (FakeStorage* c : {&t, &u, &e, &f}) {
    c->program_clock = &tick;
    c->ops_clock = &tick;
  }
  link(p, t);
  link(p, u);
  link(u, e);
  link(u, f);
  t.c0 = 100;
  t.forecast_uses = {5};
  t.read = true;
  u.forecast_uses = {5};  // not read yet: a last resort
  for (FakeStorage* c : {&e, &f}) {
    c->c0 = 1000;
    c->is_evicted = true;
    heuristic->on_evict(*c);
  }
  index.add(t, clocks);
  index.add(u, clocks);
  EXPECT_EQ(index.choose(clocks), &t) << "u, a last resort, goes last";
  const std::size_t reads = u.forecast_reads;
  e.is_evicted = false;  // remade: u's a falls
  heuristic->on_rematerialize(e);
  index.add(e, clocks);
  EXPECT_EQ(index.choose(clocks), &t);
  EXPECT_EQ(u.forecast_reads, reads) << "reported changed, not used: its curve kept, its forecast not read";
  u.read = true;  // no longer a last resort
  index.used(u, clocks);
  f.is_evicted = false;
  heuristic->on_rematerialize(f);
  index.add(f, clocks);
  EXPECT_EQ(index.choose(clocks), &u) << "used, then reported changed: its tier read again";
  EXPECT_EQ(index.score(u, clocks), heuristic->score(u, 1));
  for (FakeStorage* c : {&e, &f, &t, &u}) heuristic->on_destroy(*c);
}

// An eviction can also lower a score: where the walks stopped at their depth (the classes' a, which counts an
// evicted reader of the chain the walks never see), a shorter way past the depth bound completes them, and the
// walked a is lower. s reads a chain of 33 evicted storages (one past the depth) beside which w, dear, is
// evicted; evicting v, which s reads and which reads the chain's end, completes s's walk: a 1034 -> 35, below
// t's 500.
TEST(ForecastIndex, AnEvictionThatCompletesAWalkLowersTheScoreAtOnce) {
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{1, 1, 1};
  const std::uint64_t tick = 1;
  std::vector<std::unique_ptr<FakeStorage>> chain;
  FakeStorage p;  // a constant: t's input
  p.is_constant = true;
  FakeStorage s;
  FakeStorage t;
  FakeStorage v;
  FakeStorage w;
  const auto link = [](FakeStorage& reader, FakeStorage& in) {
    reader.inputs.push_back(&in);
    in.dependents.push_back(&reader);
  };
  for (int k = 0; k < heuristics::kWalkDepth + 1; ++k) {
    chain.push_back(std::make_unique<FakeStorage>());
    if (k > 0) link(*chain[static_cast<std::size_t>(k) - 1], *chain.back());
  }
  link(s, *chain.front());
  link(s, v);
  link(v, *chain.back());
  link(w, *chain[4]);
  link(t, p);
  t.c0 = 500;
  w.c0 = 1000;
  v.forecast_uses = {5};  // made and not read yet, read later: a last resort, not chosen before s or t
  for (FakeStorage* c : {&s, &t, &v, &w}) {
    c->program_clock = &tick;
    c->ops_clock = &tick;
  }
  for (auto& c : chain) {
    c->program_clock = &tick;
    c->ops_clock = &tick;
  }
  for (FakeStorage* c : {&s, &t, &v}) index.add(*c, clocks);
  std::vector<FakeStorage*> evicted;
  for (auto& c : chain) evicted.push_back(c.get());
  evicted.push_back(&w);
  for (FakeStorage* gone : evicted) {
    gone->is_evicted = true;
    heuristic->on_evict(*gone);
  }
  EXPECT_EQ(index.choose(clocks), &t) << "s's walk stops at the depth: the class, with w, is dearer than t";
  index.remove(v, clocks);
  v.is_evicted = true;
  heuristic->on_evict(v);
  EXPECT_LT(heuristic->score(s, 1), heuristic->score(t, 1));
  EXPECT_EQ(index.choose(clocks), &s) << "the walk now complete, s is cheaper than t";
  for (FakeStorage* c : {&s, &t}) index.remove(*c, clocks);
  const auto destroy = [&](FakeStorage& dying) {  // readers first, as storages die
    for (FakeStorage* in : dying.inputs) std::erase(in->dependents, &dying);
    heuristic->on_destroy(dying);
  };
  for (FakeStorage* c : {&s, &t, &w, &v}) destroy(*c);
  for (auto& c : chain) destroy(*c);
  EXPECT_EQ(heuristic->live_slots(), 0u);
}

// The runtime removes and re-adds an op's inputs at every op (pinned while it runs): with no decision for a
// long time (a budget never reached), the pending list must stay one entry a slot.
TEST(ForecastIndex, PendingCandidatesStayOneEntryASlotWithoutDecisions) {
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  FakeStorage p;
  FakeStorage a;
  FakeStorage b;
  a.inputs = {&p};
  b.inputs = {&p};
  p.dependents = {&a, &b};
  index.add(b, IndexClocks{1, 1, 1});
  for (std::uint64_t k = 0; k < 10000; ++k) {
    const IndexClocks clocks{k + 1, k + 1, k + 1};
    index.add(a, clocks);
    index.used(b, clocks);
    index.remove(a, clocks);
  }
  EXPECT_LE(index.pending_entries(), 2u);
  EXPECT_EQ(index.choose(IndexClocks{20000, 20000, 20000}), &b);
  EXPECT_EQ(index.pending_entries(), 0u);
  index.remove(b, IndexClocks{20000, 20000, 20000});
}

// A forecast score and a staleness score live in two heaps on two clocks; when they are equal, the later
// candidate goes, as in a scan, whichever heap it is in.
TEST(ForecastIndex, EqualScoresInTwoHeapsGoToTheLaterCandidate) {
  for (const bool forecast_first : {true, false}) {
    SCOPED_TRACE(forecast_first ? "the forecast one first" : "the stale one first");
    auto heuristic = heuristics::make_heuristic("forecast");
    heuristics::ForecastIndex index(*heuristic);
    std::uint64_t program = 10, ops = 50;
    FakeStorage root, ahead, stale;
    for (FakeStorage* s : {&ahead, &stale}) {
      s->inputs.push_back(&root);
      root.dependents.push_back(s);
      s->program_clock = &program;
      s->ops_clock = &ops;
      s->read = true;
    }
    ahead.forecast_uses = {12};  // 2 program ops away
    stale.last_op = 49;          // a staleness of 2 ops
    FakeStorage& first = forecast_first ? ahead : stale;
    FakeStorage& second = forecast_first ? stale : ahead;
    index.add(first, {ops, ops, program});
    index.add(second, {ops, ops, program});
    ASSERT_EQ(heuristic->score(ahead, ops), heuristic->score(stale, ops));
    EXPECT_EQ(index.choose({ops, ops, program}), &second);
    index.remove(ahead, {ops, ops, program});
    index.remove(stale, {ops, ops, program});
  }
}

// A run longer than the walks is charged its class's cost only while the class is a chain's (on its boundary,
// the run's two ends): a resident reader of the run's middle widens it, and the ends are charged the walks'
// count. When that reader dies the class is a chain's again, which no walk from the ends sees (the reader is
// past their depth) and which changes no class cost: dtr-eq tells the index of the boundary, and the ends'
// keys follow.
TEST(ForecastIndex, ReKeysAnEvictedChainsEndsWhenItsClassStartsOrStopsBeingAChains) {
  const int length = 4 * heuristics::kWalkDepth;
  std::vector<FakeStorage> t(static_cast<std::size_t>(length) + 2);  // head, the run, tail (costs 1)
  for (std::size_t i = 1; i < t.size(); ++i) link(t[i - 1], t[i]);
  const std::uint64_t ops = 1;
  const std::uint64_t program = 1;
  FakeStorage reader;
  for (FakeStorage* s : {&reader, &t.front(), &t.back(), &t[t.size() / 2]}) {
    s->ops_clock = &ops;  // used last now, no forecast: d is a staleness of 1
    s->program_clock = &program;
    s->last_op = ops;
  }
  FakeStorage& head = t.front();
  FakeStorage& tail = t.back();
  FakeStorage& middle = t[t.size() / 2];
  link(middle, reader);
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{ops, ops, program};
  for (FakeStorage* s : {&head, &tail, &reader}) index.add(*s, clocks);
  for (std::size_t i = 1; i + 1 < t.size(); ++i) {
    t[i].is_evicted = true;
    heuristic->on_evict(t[i]);
  }
  const double walked = 1.0 + heuristics::kWalkDepth;  // d is 1: a score is its cost per byte
  const double whole = 1.0 + length;
  auto expect_ends = [&](double cost) {  // by a scan and by the index
    for (FakeStorage* end : {&head, &tail}) {
      EXPECT_DOUBLE_EQ(heuristic->score(*end, ops), cost);
      EXPECT_DOUBLE_EQ(index.score(*end, clocks), cost);
    }
  };
  expect_ends(walked);
  // The reader dies: the class's boundary is the run's two ends.
  reader.is_released = true;
  heuristic->on_release(reader);
  index.remove(reader, clocks);
  std::erase(middle.dependents, &reader);
  heuristic->on_destroy(reader);
  expect_ends(whole);
  // The middle remade: resident beside the class (which never splits), it widens the boundary again.
  middle.is_evicted = false;
  heuristic->on_rematerialize(middle);
  index.add(middle, clocks);
  expect_ends(walked);
  EXPECT_EQ(index.choose(clocks), &tail);  // the ends score lowest, equal: the later candidate
}

// A report from the classes alone changes only a key whose walks stopped short (ForecastKey::reads_classes):
// s, beside one evicted storage, is walked whole and passed over; h, at the head of an evicted run longer than
// the walks, reads the classes and is keyed again at the next decision.
TEST(ForecastIndex, PassesOverAClassReportWhereTheWalksCountedAll) {
  std::vector<FakeStorage> run(static_cast<std::size_t>(heuristics::kWalkDepth) + 3);  // h, the run, its end
  for (std::size_t i = 1; i < run.size(); ++i) link(run[i - 1], run[i]);
  FakeStorage s;
  FakeStorage d;  // s -> d
  link(s, d);
  auto heuristic = heuristics::make_heuristic("forecast");
  heuristics::ForecastIndex index(*heuristic);
  const IndexClocks clocks{1, 1, 1};
  FakeStorage& h = run.front();
  for (FakeStorage* c : {&h, &run.back(), &s}) index.add(*c, clocks);
  for (std::size_t i = 1; i + 1 < run.size(); ++i) {
    run[i].is_evicted = true;
    heuristic->on_evict(run[i]);
  }
  d.is_evicted = true;
  heuristic->on_evict(d);
  EXPECT_FALSE(heuristic->forecast_key(s).reads_classes);
  EXPECT_TRUE(heuristic->forecast_key(h).reads_classes);
  (void)index.choose(clocks);  // every candidate keyed
  EXPECT_EQ(index.pending_entries(), 0u);
  const std::size_t s_visits = s.visits;
  const std::size_t h_visits = h.visits;
  index.classes_changed(s);
  EXPECT_EQ(index.pending_entries(), 0u) << "s's walks count all there is: passed over";
  index.classes_changed(h);
  EXPECT_EQ(index.pending_entries(), 1u);
  (void)index.choose(clocks);
  EXPECT_EQ(s.visits, s_visits);
  EXPECT_GT(h.visits, h_visits) << "h keyed again";
  // Nothing made before forecasts a storage: its charge never reads the classes.
  h.seen_before = false;
  EXPECT_FALSE(heuristic->forecast_key(h).reads_classes);
  for (FakeStorage* c : {&d, &s}) heuristic->on_destroy(*c);
  for (auto c = run.rbegin(); c != run.rend(); ++c) heuristic->on_destroy(*c);  // readers first
}

TEST(ForecastIndex, IsTheIndexOfTheForecastHeuristicOnly) {
  auto forecast = heuristics::make_heuristic("forecast");
  EXPECT_NE(dynamic_cast<heuristics::ForecastIndex*>(heuristics::make_candidate_index(*forecast).get()), nullptr);
  auto dtr_eq = heuristics::make_heuristic("dtr-eq");
  EXPECT_THROW(heuristics::ForecastIndex{*dtr_eq}, InvalidArgument);
  EXPECT_EQ(dynamic_cast<heuristics::ForecastIndex*>(heuristics::make_candidate_index(*dtr_eq).get()), nullptr);
  auto random = heuristics::make_heuristic("random");
  EXPECT_EQ(heuristics::make_candidate_index(*random), nullptr);
}

}  // namespace
}  // namespace dtr::test

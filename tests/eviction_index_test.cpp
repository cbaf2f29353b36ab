// The eviction index against a scan: on random lineage (storages created, evicted by the index's choice or
// at random, rematerialized, touched, destroyed) every candidate's indexed score must equal its fresh score,
// so the choice is a true minimum. This checks that each heuristic reports every score its events change.
#include <gtest/gtest.h>

#include <algorithm>
#include <iomanip>
#include <memory>
#include <random>
#include <vector>

#include "fake_storage.h"
#include "heuristics/eviction_index.h"
#include "heuristics/heuristic.h"

namespace dtr::test {
namespace {

// Checked against a scan every `check_every` steps: the index re-keys reported candidates at a decision, so
// between two checks reports pile up (some for storages gone since, whose handle another may hold).
void run_random_lineage(const std::string& name, std::uint64_t seed, int check_every = 1) {
  std::mt19937_64 rng(seed);
  auto heuristic = heuristics::make_heuristic(name);
  heuristics::EvictionIndex index(*heuristic);
  std::vector<std::unique_ptr<FakeStorage>> live;
  std::uint64_t now = 1;
  auto candidates = [&] {
    std::vector<FakeStorage*> out;
    for (auto& s : live) {
      if (!s->is_evicted && !s->inputs.empty()) out.push_back(s.get());  // roots are constants
    }
    return out;
  };
  auto pick = [&](auto&& accept) { return pick_random(live, rng, accept); };
  auto evict = [&](FakeStorage& s) {
    index.remove(s, now);
    s.is_evicted = true;
    heuristic->on_evict(s);
  };
  for (int step = 0; step < 1500; ++step) {
    now += rng() % 3;
    const unsigned action = static_cast<unsigned>(rng() % 13);
    if (action < 3 || live.size() < 4) {
      // A new storage reading one or two resident ones (an op's inputs are in memory when it runs), or a root.
      auto s = std::make_unique<FakeStorage>();
      s->c0 = static_cast<double>(1 + rng() % 8);
      s->size = 1 + rng() % 4;
      s->last = now;
      read_random_residents(*s, live, rng);
      FakeStorage& added = *live.emplace_back(std::move(s));
      if (!added.inputs.empty()) index.add(added, now);
    } else if (action < 5) {  // the index's choice, as the runtime evicts
      if (heuristics::StorageView* chosen = index.choose(now)) evict(static_cast<FakeStorage&>(*chosen));
    } else if (action < 6) {  // an eager eviction
      if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_evicted && !t.inputs.empty(); })) evict(*s);
    } else if (action < 8) {  // a rematerialization
      if (FakeStorage* s = pick([](const FakeStorage& t) { return t.is_evicted; })) {
        s->is_evicted = false;
        s->last = now;
        heuristic->on_rematerialize(*s);
        index.add(*s, now);
      }
    } else if (action < 10) {  // an access (as the runtime reports it: no key recomputed)
      if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_evicted; })) {
        s->last = now;
        if (rng() % 2 == 0) {
          index.touched(*s, now);
        } else {
          index.refresh(*s, now);
        }
      }
    } else if (action == 10) {  // made a constant (an in-place update cut its lineage): its inputs go
      if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_evicted && !t.inputs.empty(); })) {
        heuristic->on_cut(*s);
        index.remove(*s, now);
        for (FakeStorage* in : s->inputs) std::erase(in->dependents, s);
        s->inputs.clear();
      }
    } else if (FakeStorage* s = pick([](const FakeStorage& t) { return t.dependents.empty(); })) {
      // Dies: detached from its inputs first, as the runtime detaches it from its producer.
      for (FakeStorage* in : s->inputs) std::erase(in->dependents, s);
      heuristic->on_destroy(*s);
      index.remove(*s, now);
      std::erase_if(live, [&](const auto& p) { return p.get() == s; });
    }
    if (step % check_every != 0) continue;
    const std::vector<FakeStorage*> all = candidates();
    ASSERT_EQ(index.size(), all.size()) << "step " << step;
    double best = heuristics::KineticHeap<int>::kNever;
    for (FakeStorage* c : all) best = std::min(best, heuristic->score(*c, now));
    if (!all.empty()) {  // the choice first, as the runtime asks (the accessors below settle pending keys too)
      ASSERT_EQ(heuristic->score(*index.choose(now), now), best) << "step " << step;
    }
    for (FakeStorage* c : all) {
      const double fresh = heuristic->score(*c, now);
      ASSERT_EQ(index.score(*c, now), fresh) << name << ": a stale score at step " << step << std::setprecision(17) << " index " << index.score(*c, now) << " fresh " << fresh << " action " << action;
    }
    ASSERT_TRUE(index.valid(now)) << "step " << step << " action " << action;
    EXPECT_EQ(index.pending_entries(), 0u);
  }
  while (!live.empty()) {  // everything dies, the index empties
    FakeStorage* s = pick([](const FakeStorage& t) { return t.dependents.empty(); });
    ASSERT_NE(s, nullptr);
    for (FakeStorage* in : s->inputs) std::erase(in->dependents, s);
    heuristic->on_destroy(*s);
    index.remove(*s, now);
    std::erase_if(live, [&](const auto& p) { return p.get() == s; });
  }
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(heuristic->live_slots(), 0u);
}

TEST(EvictionIndex, ChoosesTheTrueMinimumOfEveryIndexableHeuristic) {
  for (const std::string& name : heuristics::heuristic_names()) {
    if (!heuristics::make_heuristic(name)->indexable()) continue;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(name + ", seed " + std::to_string(seed));
      run_random_lineage(name, seed);
      if (HasFatalFailure()) return;
    }
  }
}

// Decisions far apart: many events between two, each reported candidate re-keyed once at the decision.
TEST(EvictionIndex, ChoosesTheTrueMinimumWhenDecisionsAreFarApart) {
  for (const std::string& name : heuristics::heuristic_names()) {
    if (!heuristics::make_heuristic(name)->indexable()) continue;
    for (std::uint64_t seed = 5; seed <= 8; ++seed) {
      SCOPED_TRACE(name + ", seed " + std::to_string(seed));
      run_random_lineage(name, seed, /*check_every=*/16);
      if (HasFatalFailure()) return;
    }
  }
}

// dtr and msps sum the evicted storages within kWalkDepth hops: on a chain whose evicted run is longer, a
// score counts exactly kWalkDepth of them, and each event re-scores what it changed, so the index still equals
// a fresh score everywhere while runs grow past the depth and are cut by rematerializations.
TEST(EvictionIndex, WalkingHeuristicsStopAtTheirDepthAndStayEqualToAScan) {
  for (const std::string name : {"dtr", "msps"}) {
    SCOPED_TRACE(name);
    auto heuristic = heuristics::make_heuristic(name);
    heuristics::EvictionIndex index(*heuristic);
    constexpr int kLength = 700;
    std::vector<std::unique_ptr<FakeStorage>> chain;
    const std::uint64_t now = 10;
    for (int i = 0; i <= kLength; ++i) {
      auto s = std::make_unique<FakeStorage>();
      s->last = 5;
      if (i > 0) {
        s->inputs.push_back(chain.back().get());
        chain.back()->dependents.push_back(s.get());
      }
      chain.push_back(std::move(s));
      if (i > 0) index.add(*chain.back(), now);
    }
    auto check_all = [&](int event) {
      for (int i = 1; i <= kLength; ++i) {
        FakeStorage& c = *chain[static_cast<std::size_t>(i)];
        if (c.is_evicted) continue;
        ASSERT_EQ(index.score(c, now), heuristic->score(c, now)) << "storage " << i << " after event " << event;
      }
    };
    // Evict 600 down to 301 (storage 601 sees its run grow one by one, past the depth), then 1..300 in a
    // shuffled order (runs merge): one run of 600 lies behind storage 601.
    std::vector<int> order;
    for (int i = 600; i > 300; --i) order.push_back(i);
    std::vector<int> rest(300);
    for (int i = 0; i < 300; ++i) rest[static_cast<std::size_t>(i)] = i + 1;
    std::shuffle(rest.begin(), rest.end(), std::mt19937_64(3));
    order.insert(order.end(), rest.begin(), rest.end());
    int event = 0;
    for (int i : order) {
      FakeStorage& s = *chain[static_cast<std::size_t>(i)];
      index.remove(s, now);
      s.is_evicted = true;
      heuristic->on_evict(s);
      check_all(++event);
      if (HasFatalFailure()) return;
    }
    check_all(event);
    // Storage 601 reads the run 600, 599, ...: it counts itself and the kWalkDepth nearest (dtr: nothing after
    // it is evicted; msps: inputs only). Every cost is 1 and every size 1.
    EXPECT_EQ(heuristic->key(*chain[601]).a, 1.0 + heuristics::kWalkDepth);
    // Rematerializations cut the run; the scores around each cut follow.
    for (int i : {300, 450, 599, 100, 520}) {
      FakeStorage& s = *chain[static_cast<std::size_t>(i)];
      s.is_evicted = false;
      heuristic->on_rematerialize(s);
      index.add(s, now);
      check_all(++event);
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(heuristic->key(*chain[601]).a, 1.0 + 1.0);  // only 600 is evicted next to it now
    // 521 ... 598 behind it (520 is back), as far as the walk goes, and (dtr counts dependents) 600 after it.
    EXPECT_EQ(heuristic->key(*chain[599]).a,
              1.0 + std::min(78, heuristics::kWalkDepth) + (name == std::string("dtr") ? 1.0 : 0.0));
  }
}

// A storage read from `inputs` (last accessed at 5), kept in `all`; a candidate of `index` unless it is a root.
FakeStorage* add_storage(std::vector<std::unique_ptr<FakeStorage>>& all, heuristics::EvictionIndex& index,
                         const std::vector<FakeStorage*>& inputs, std::uint64_t now) {
  auto s = std::make_unique<FakeStorage>();
  s->last = 5;
  for (FakeStorage* in : inputs) {
    s->inputs.push_back(in);
    in->dependents.push_back(s.get());
  }
  FakeStorage* made = all.emplace_back(std::move(s)).get();
  if (!inputs.empty()) index.add(*made, now);
  return made;
}

// A walk counts up to kWalkCount storages: a hub H read by 400 storages r_i (each read by one d_i, and all
// read by one gather G) counts its evicted readers on dtr's dependents' side, kWalkCount of them once there
// are more (a walk that dropped the level passing the count made H cheaper the more readers were evicted);
// G's inputs' side likewise. Readers evicted and brought
// back in a shuffled order (H's list of evicted readers is reshuffled by every removal) leave every indexed
// score equal to a fresh one.
TEST(EvictionIndex, WalkingHeuristicsCountUpToTheirCountNeverLessAndStayEqualToAScan) {
  for (const std::string name : {"dtr", "msps"}) {
    SCOPED_TRACE(name);
    const bool dtr = name == "dtr";
    auto heuristic = heuristics::make_heuristic(name);
    heuristics::EvictionIndex index(*heuristic);
    const std::uint64_t now = 10;
    std::vector<std::unique_ptr<FakeStorage>> all;
    auto make = [&](const std::vector<FakeStorage*>& inputs) { return add_storage(all, index, inputs, now); };
    constexpr int kReaders = 400;
    FakeStorage* root = make({});
    FakeStorage* hub = make({root});
    std::vector<FakeStorage*> readers;
    for (int i = 0; i < kReaders; ++i) {
      readers.push_back(make({hub}));
      make({readers.back()});
    }
    FakeStorage* gather = make(readers);
    auto check_all = [&](const std::string& when) {
      for (auto& s : all) {
        if (s->is_evicted || s->inputs.empty()) continue;
        ASSERT_EQ(index.score(*s, now), heuristic->score(*s, now)) << when;
      }
    };
    std::vector<FakeStorage*> order = readers;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
    int evicted = 0;
    for (FakeStorage* r : order) {
      index.remove(*r, now);
      r->is_evicted = true;
      heuristic->on_evict(*r);
      evicted += 1;
      check_all("after eviction " + std::to_string(evicted));
      if (HasFatalFailure()) return;
      // Past the count a side stays at the count: more of a hub's readers evicted never make it look cheaper.
      const double counted = std::min<double>(evicted, heuristics::kWalkCount);
      ASSERT_EQ(heuristic->key(*hub).a, 1.0 + (dtr ? counted : 0.0)) << evicted << " readers evicted";
      ASSERT_EQ(heuristic->key(*gather).a, 1.0 + counted) << evicted << " inputs evicted";
    }
    std::shuffle(order.begin(), order.end(), std::mt19937_64(8));
    for (int i = 0; i < kReaders; i += 2) {  // every other one back
      FakeStorage* r = order[static_cast<std::size_t>(i)];
      r->is_evicted = false;
      heuristic->on_rematerialize(*r);
      index.add(*r, now);
      check_all("after rematerialization " + std::to_string(i));
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(heuristic->key(*hub).a, 1.0 + (dtr ? kReaders / 2 : 0));
    // The hub evicted too: each d_i whose r_i is evicted reaches it at depth 2 (its only path).
    index.remove(*hub, now);
    hub->is_evicted = true;
    heuristic->on_evict(*hub);
    check_all("after the hub's eviction");
    for (FakeStorage* r : readers) {
      if (r->is_evicted) {
        EXPECT_EQ(heuristic->key(*r->dependents[0]).a, 1.0 + 2.0);
      }
    }
    while (!all.empty()) {  // everything dies, leaves first; the heuristic keeps no record
      FakeStorage* s = all.back().get();
      for (FakeStorage* in : s->inputs) std::erase(in->dependents, s);
      heuristic->on_destroy(*s);
      index.remove(*s, now);
      all.pop_back();
    }
    EXPECT_EQ(heuristic->live_slots(), 0u);
  }
}

// A lineage under a walking heuristic and its index, for the tests of what an event costs.
struct WalkedLineage {
  explicit WalkedLineage(const std::string& name) : heuristic(heuristics::make_heuristic(name)), index(*heuristic) {}
  FakeStorage* add(const std::vector<FakeStorage*>& inputs) { return add_storage(all, index, inputs, now); }
  void evict(FakeStorage& s) {
    index.remove(s, now);
    s.is_evicted = true;
    heuristic->on_evict(s);
  }
  // Neighbours visited by the heuristic's walks and searches so far.
  std::size_t visits() const {
    std::size_t total = 0;
    for (const auto& s : all) total += s->visits;
    return total;
  }
  void expect_index_equals_scan() {
    for (const auto& s : all) {
      if (!s->is_evicted && !s->inputs.empty()) {
        ASSERT_EQ(index.score(*s, now), heuristic->score(*s, now));
      }
    }
  }

  std::unique_ptr<heuristics::Heuristic> heuristic;
  heuristics::EvictionIndex index;
  std::vector<std::unique_ptr<FakeStorage>> all;
  std::uint64_t now = 10;
};

// An event tells only the storages whose walks reach it, and h_DTR's dependents' side reads only a storage's
// evicted readers: a hub read by every op of a 4,000-op chain is not walked over on each eviction in the
// chain. (Walking every reader of the hub once per eviction, as an earlier h_DTR did, visits 10 million
// neighbours here.)
TEST(EvictionIndex, AnEvictionNextToAHubDoesNotWalkItsReaders) {
  for (const std::string name : {"dtr", "msps"}) {
    SCOPED_TRACE(name);
    WalkedLineage lineage(name);
    constexpr int kLength = 4000;
    FakeStorage* root = lineage.add({});
    FakeStorage* hub = lineage.add({root});
    std::vector<FakeStorage*> chain{lineage.add({hub})};
    for (int i = 1; i < kLength; ++i) chain.push_back(lineage.add({chain.back(), hub}));
    const std::size_t visits_before = lineage.visits();
    for (int i = 0; i < kLength; i += 2) lineage.evict(*chain[static_cast<std::size_t>(i)]);
    EXPECT_LT(lineage.visits() - visits_before, 20u * kLength) << "neighbours visited by the walks of 2,000 evictions";
    EXPECT_LT(hub->visits, 2u * kLength);
    lineage.expect_index_equals_scan();
  }
}

// An event tells the walkers that may read it without searching every storage their walks could have passed:
// in a wide evicted region (a grid 64 wide and 48 deep, each storage reading its three nearest in the layer
// above) a rematerialization in the middle visits a few hops around it, and the walks deeper than that are
// found by the marks they left: 150 neighbours for h_DTR, 75 for h_MSPS. (A search as deep as the walks, as
// before, visited 3,315 and 1,587.)
TEST(EvictionIndex, AnEventInAWideEvictedRegionSearchesOnlyNearIt) {
  for (const std::string name : {"dtr", "msps"}) {
    SCOPED_TRACE(name);
    WalkedLineage lineage(name);
    constexpr int kWidth = 64;
    constexpr int kLayers = 48;
    FakeStorage* root = lineage.add({});
    std::vector<std::vector<FakeStorage*>> grid(kLayers);
    for (int i = 0; i < kWidth; ++i) grid[0].push_back(lineage.add({root}));
    for (int k = 1; k < kLayers; ++k) {
      for (int i = 0; i < kWidth; ++i) {
        const auto& above = grid[static_cast<std::size_t>(k - 1)];
        auto at = [&](int j) { return above[static_cast<std::size_t>((j + kWidth) % kWidth)]; };
        grid[static_cast<std::size_t>(k)].push_back(lineage.add({at(i - 1), at(i), at(i + 1)}));
      }
    }
    for (int k = 1; k + 1 < kLayers; ++k) {  // the first and last layers stay resident
      for (FakeStorage* s : grid[static_cast<std::size_t>(k)]) lineage.evict(*s);
    }
    // Every candidate keyed: the walks have marked what they counted.
    ASSERT_NE(lineage.index.choose(lineage.now), nullptr);
    const std::size_t visits_before = lineage.visits();
    FakeStorage& middle = *grid[kLayers / 2][0];
    middle.is_evicted = false;
    lineage.heuristic->on_rematerialize(middle);
    EXPECT_LT(lineage.visits() - visits_before, 400u) << "neighbours visited to tell one rematerialization's walkers";
    lineage.index.add(middle, lineage.now);
    lineage.expect_index_equals_scan();
  }
}

TEST(EvictionIndex, RefusesHeuristicsItCannotOrder) {
  auto random = heuristics::make_heuristic("random");
  EXPECT_FALSE(random->indexable());
  EXPECT_THROW(heuristics::EvictionIndex{*random}, InvalidArgument);
}

}  // namespace
}  // namespace dtr::test

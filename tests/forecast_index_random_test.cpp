// The forecast index against a scan: on random lineage with random forecasts, as two clocks run apart (the
// program's, which forecasts count in, and every op's, which staleness counts in), every candidate's indexed
// score and tier must equal its fresh ones, and the choice must be the scan's: the lowest score among the
// candidates that are not last resorts (the last resorts' lowest when all are), equal scores going to the
// later candidate.
#include <gtest/gtest.h>

#include <algorithm>
#include <iomanip>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "fake_storage.h"
#include "heuristics/candidate_index.h"
#include "heuristics/forecast_index.h"
#include "heuristics/heuristic.h"

namespace dtr::test {
namespace {

using heuristics::IndexClocks;

class ForecastLineage {
 public:
  explicit ForecastLineage(std::uint64_t seed) : rng_(seed), heuristic_(heuristics::make_heuristic("forecast")) {}

  // `chain`: first a chain of `chain` storages whose middle is evicted (runs longer than the walks' bounds,
  // where the scores fall back to classes), then the random steps, checked against a scan every
  // `check_every` steps (the index keys what changed at a decision: between two, changes pile up).
  void run(int steps, int chain = 0, int check_every = 1) {
    heuristics::ForecastIndex index(*heuristic_);
    index_ = &index;
    for (int k = 0; k < chain; ++k) {
      FakeStorage* last = live_.empty() ? nullptr : live_.back().get();
      FakeStorage& s = *live_.emplace_back(make());
      if (last != nullptr) {
        s.inputs.push_back(last);
        last->dependents.push_back(&s);
        add(s);
      }
    }
    std::vector<FakeStorage*> middle;
    for (int k = chain / 8; k < chain - chain / 8; ++k) middle.push_back(live_[static_cast<std::size_t>(k)].get());
    std::shuffle(middle.begin(), middle.end(), rng_);
    for (FakeStorage* s : middle) {
      evict(*s);
      check(-1);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (int step = 0; step < steps; ++step) {
      act();
      if (step % check_every != 0) continue;
      check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (!live_.empty()) {  // everything dies, the index empties
      FakeStorage* s = pick([](const FakeStorage& t) { return t.dependents.empty(); });
      ASSERT_NE(s, nullptr);
      destroy(*s);
    }
    EXPECT_EQ(index.size(), 0u);
    EXPECT_EQ(heuristic_->live_slots(), 0u);
  }

 private:
  IndexClocks clocks() const { return {ops_, ops_, program_}; }

  template <typename Accept>
  FakeStorage* pick(Accept&& accept) {
    std::vector<FakeStorage*> found;
    for (auto& s : live_) {
      if (accept(*s)) found.push_back(s.get());
    }
    return found.empty() ? nullptr : found[rng_() % found.size()];
  }

  void add(FakeStorage& s) {
    index_->add(s, clocks());
    arrival_[&s] = ++arrivals_;
  }

  void evict(FakeStorage& s) {
    index_->remove(s, clocks());
    arrival_.erase(&s);
    s.is_evicted = true;
    heuristic_->on_evict(s);
  }

  void destroy(FakeStorage& s) {
    if (!s.is_released) {  // the program releases it first
      s.is_released = true;
      heuristic_->on_release(s);
    }
    for (FakeStorage* in : s.inputs) std::erase(in->dependents, &s);
    heuristic_->on_destroy(s);
    index_->remove(s, clocks());
    arrival_.erase(&s);
    std::erase_if(live_, [&](const auto& p) { return p.get() == &s; });
  }

  // A new storage, read by nobody yet, with none to three forecast uses ahead (none: its staleness decides,
  // and half of those were never made before: the first step's rule), close together or far apart.
  std::unique_ptr<FakeStorage> make() {
    auto s = std::make_unique<FakeStorage>();
    s->c0 = static_cast<double>(1 + rng_() % 8);
    s->size = 1 + rng_() % 4;
    s->last = ops_;
    s->last_op = ops_;
    s->program_clock = &program_;
    s->ops_clock = &ops_;
    const unsigned uses = static_cast<unsigned>(rng_() % 4);
    for (std::uint64_t t = program_, k = 0; k < uses; ++k) s->forecast_uses.push_back(t += 1 + rng_() % 30);
    s->seen_before = uses > 0 || rng_() % 2 == 0;
    return s;
  }

  void act() {
    // The ops clock runs through recomputations, the program clock only through the program's own ops.
    const std::uint64_t ticks = rng_() % 3;
    ops_ += ticks;
    if (rng_() % 2 == 0) program_ += rng_() % 3 == 0 ? rng_() % 40 : ticks;  // sometimes past many deadlines
    const unsigned action = static_cast<unsigned>(rng_() % 13);
    if (action < 3 || live_.size() < 4) {
      std::unique_ptr<FakeStorage> made = make();
      read_random_residents(*made, live_, rng_);
      FakeStorage& added = *live_.emplace_back(std::move(made));
      if (!added.inputs.empty()) add(added);
    } else if (action < 5) {  // the index's choice, as the runtime evicts
      if (heuristics::StorageView* chosen = index_->choose(clocks())) evict(static_cast<FakeStorage&>(*chosen));
    } else if (action < 6) {  // the program releases a storage (evicted at once if resident), or evicts one
      if (rng_() % 2 == 0) {
        if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_released && !t.inputs.empty(); })) {
          s->is_released = true;  // remade later, it comes back released
          if (s->is_evicted) {
            heuristic_->on_release(*s);
          } else if (rng_() % 2 == 0) {
            evict(*s);  // eagerly
          } else {  // pinned by a running op: out of the index until unpinned
            index_->remove(*s, clocks());
            arrival_.erase(s);
            heuristic_->on_release(*s);
            add(*s);
          }
        }
      } else if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_evicted && !t.inputs.empty(); })) {
        evict(*s);
      }
    } else if (action < 8) {  // a rematerialization: used now by the op that asked for it
      if (FakeStorage* s = pick([](const FakeStorage& t) { return t.is_evicted; })) {
        s->is_evicted = false;
        s->last = ops_;
        s->last_op = ops_;
        heuristic_->on_rematerialize(*s);
        add(*s);
      }
    } else if (action < 10) {  // a use: by the program (it is read now) or by a recomputation
      if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_evicted; })) {
        if (rng_() % 2 == 0) s->read = true;
        s->last = ops_;
        s->last_op = ops_;
        index_->used(*s, clocks());
      }
    } else if (action == 10) {  // made a constant: its inputs go
      if (FakeStorage* s = pick([](const FakeStorage& t) { return !t.is_evicted && !t.inputs.empty(); })) {
        heuristic_->on_cut(*s);
        index_->remove(*s, clocks());
        arrival_.erase(s);
        for (FakeStorage* in : s->inputs) std::erase(in->dependents, s);
        s->inputs.clear();
      }
    } else if (FakeStorage* s = pick([](const FakeStorage& t) { return t.dependents.empty(); })) {
      destroy(*s);
    }
  }

  // The choice first, as the runtime asks for it (the per-candidate accessors below settle pending keys too).
  void check(int step) {
    std::vector<FakeStorage*> all;
    for (auto& s : live_) {
      if (!s->is_evicted && !s->inputs.empty()) all.push_back(s.get());
    }
    ASSERT_EQ(index_->size(), all.size()) << "step " << step;
    FakeStorage* best = nullptr;
    double best_score = 0;
    bool best_last_resort = true;
    for (FakeStorage* c : all) {
      const double fresh = heuristic_->score(*c, ops_);
      const bool last_resort = heuristic_->last_resort(*c);
      if (best != nullptr && last_resort && !best_last_resort) continue;
      if (best == nullptr || (best_last_resort && !last_resort) || fresh < best_score ||
          (fresh == best_score && arrival_.at(c) > arrival_.at(best))) {
        best = c;
        best_score = fresh;
        best_last_resort = last_resort;
      }
    }
    ASSERT_EQ(index_->choose(clocks()), best) << "step " << step;
    ASSERT_TRUE(index_->valid(clocks())) << "step " << step;
    for (FakeStorage* c : all) {
      const double fresh = heuristic_->score(*c, ops_);
      ASSERT_EQ(index_->score(*c, clocks()), fresh)
          << "a stale score at step " << step << std::setprecision(17) << " index " << index_->score(*c, clocks());
      ASSERT_EQ(index_->last_resort(*c), heuristic_->last_resort(*c)) << "a stale tier at step " << step;
      // A scan passes over a candidate whose floor is above its best score: the floor must never exceed it.
      ASSERT_LE(heuristic_->score_floor(*c, ops_), fresh) << "a floor above the score at step " << step;
    }
  }

  std::mt19937_64 rng_;
  std::unique_ptr<heuristics::Heuristic> heuristic_;
  heuristics::ForecastIndex* index_ = nullptr;
  std::vector<std::unique_ptr<FakeStorage>> live_;
  std::map<const FakeStorage*, std::uint64_t> arrival_;  // when each candidate became one
  std::uint64_t arrivals_ = 0;
  std::uint64_t ops_ = 1;
  std::uint64_t program_ = 1;
};

TEST(ForecastIndex, ChoosesWhatAScanChoosesAsBothClocksRun) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ForecastLineage(seed).run(2000);
    if (HasFatalFailure()) return;
  }
}

// Evicted runs longer than the walks' bounds (kWalkDepth hops): a score falls back to h_DTR^eq's classes
// there, and an event one hop past a walk's last level changes which it uses.
TEST(ForecastIndex, ChoosesWhatAScanChoosesBesideEvictedRunsLongerThanTheWalks) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ForecastLineage(seed).run(1500, /*chain=*/4 * heuristics::kWalkDepth);
    if (HasFatalFailure()) return;
  }
}

// Decisions far apart: many events (uses, evictions, rematerializations, deaths, deadlines passing, slots
// reused) between two, so each decision keys a pile of pending candidates, some several times reported, some
// gone since.
TEST(ForecastIndex, ChoosesWhatAScanChoosesWhenDecisionsAreFarApart) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ForecastLineage(seed).run(4000, /*chain=*/seed % 2 == 0 ? 2 * heuristics::kWalkDepth : 0, /*check_every=*/16);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace dtr::test

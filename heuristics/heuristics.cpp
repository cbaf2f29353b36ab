// The DTR family of eviction heuristics (design section 5): h_DTR with the exact evicted neighbourhood, the
// simpler ones the DTR paper compares it with, and the names that make them; its union-find approximation
// h_DTR^eq is in dtr_eq.cpp.
#include <algorithm>
#include <charconv>
#include <limits>
#include <random>
#include <vector>

#include "dtr/check.h"
#include "heuristics/dtr_eq.h"
#include "heuristics/heuristic.h"

namespace dtr::heuristics {
namespace {

class LruHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "lru"; }
  ScoreKey key(StorageView& s) override { return {1.0, stale_base(s)}; }
};

// h_size = 1/m: the largest goes first.
class SizeHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "size"; }
  bool timeless() const override { return true; }
  ScoreKey key(StorageView& s) override { return {1.0 / bytes_of(s), 0.0}; }
};

// h_DTR^local = c0/(m·s): the DTR score without the neighbourhood.
class DtrLocalHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "dtr-local"; }
  ScoreKey key(StorageView& s) override { return {s.cost() / bytes_of(s), stale_base(s)}; }
};

// A seeded uniform draw per decision: the floor every other heuristic should beat. No index: every decision
// draws anew.
class RandomHeuristic final : public Heuristic {
 public:
  explicit RandomHeuristic(std::uint64_t seed) : seed_(seed), rng_(seed) {}
  std::string name() const override { return seed_ == kDefaultRandomSeed ? "random" : "random:" + std::to_string(seed_); }
  bool indexable() const override { return false; }
  ScoreKey key(StorageView& /*s*/) override { return {0.5, 0.0}; }
  double score(StorageView& /*s*/, std::uint64_t /*now*/) override {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }

 private:
  std::uint64_t seed_;
  std::mt19937_64 rng_;
};

// Base of the heuristics that walk the evicted lineage: one walk counter for every walk, so that marks never
// collide, and the notification of the resident storages next to a changed evicted region.
//
// Walks are breadth-first and stop kWalkDepth (heuristic.h) hops from where they start: a score counts the
// evicted storages within that many hops. An event re-scores the resident storages within kWalkDepth hops,
// each with a walk of as many: O(kWalkDepth^2) per event on a chain, rather than O(the evicted region) per
// score, which made a 100 000-op chain take minutes (issue 16; at 256 hops a 20k-op chain still took 220 s,
// at 32 it takes 3.5 s). Exact while every evicted region around a candidate is shallower than that; deeper,
// the score leaves out the region's far end. A change at s can only move the scores of resident storages
// within kWalkDepth hops of s, and notify_region reaches all of them, so the eviction index stays equal to a
// scan.
class WalkingHeuristic : public Heuristic {
 public:
  bool scores_walk_lineage() const override { return true; }

 protected:
  std::uint64_t next_mark() { return ++marks_; }

  // Sums c0 over the evicted storages within kWalkDepth hops of `s` through evicted storages only: its inputs'
  // side (what recomputing `s` would recompute) and, when `dependents` is set, its dependents' side too (what
  // could no longer be recomputed without it). Each storage counts once.
  double evicted_reach_cost(StorageView& s, bool dependents) {
    const std::uint64_t mark = next_mark();
    s.heuristic_mark = mark;
    double cost = 0;
    auto walk = [&](bool inputs) {
      level_.clear();
      auto visit = [&](StorageView& n) {
        if (!n.evicted() || n.heuristic_mark == mark) return;
        n.heuristic_mark = mark;
        cost += n.cost();
        level_.push_back(&n);
      };
      if (inputs) {
        s.for_each_input(visit);
      } else {
        s.for_each_dependent(visit);
      }
      for (int depth = 1; depth < kWalkDepth && !level_.empty(); ++depth) {
        next_level_.clear();
        std::swap(level_, next_level_);  // visit() fills level_ with the next depth
        for (StorageView* n : next_level_) {
          if (inputs) {
            n->for_each_input(visit);
          } else {
            n->for_each_dependent(visit);
          }
        }
      }
    };
    walk(true);
    if (dependents) walk(false);
    return cost;
  }

  // Tells the listener about every resident storage within kWalkDepth hops of `s` through evicted storages
  // (both ways): those whose scores may have changed when `s` did.
  void notify_region(StorageView& s) {
    if (listener() == nullptr) return;
    const std::uint64_t mark = next_mark();
    std::vector<StorageView*> dirty;
    s.heuristic_mark = mark;
    level_.assign(1, &s);
    auto visit = [&](StorageView& n) {
      if (n.heuristic_mark == mark) return;
      n.heuristic_mark = mark;
      (n.evicted() ? level_ : dirty).push_back(&n);
    };
    // Depth d expands the storages d hops away: resident ones up to kWalkDepth hops are reached.
    for (int depth = 0; depth < kWalkDepth && !level_.empty(); ++depth) {
      next_level_.clear();
      std::swap(level_, next_level_);
      for (StorageView* n : next_level_) {
        n->for_each_input(visit);
        n->for_each_dependent(visit);
      }
    }
    for (StorageView* r : dirty) listener()->score_changed(*r);  // after the walk: listeners walk too
  }

 private:
  std::uint64_t marks_ = 0;
  std::vector<StorageView*> level_;
  std::vector<StorageView*> next_level_;
};

// h_DTR = (c0 + Σ_{e*(t)} c0) / (m·s) with the exact e*: evicted ancestors reached through evicted storages,
// plus evicted descendants likewise, within kWalkDepth hops. A graph walk per score.
class DtrHeuristic final : public WalkingHeuristic {
 public:
  std::string name() const override { return "dtr"; }
  ScoreKey key(StorageView& s) override {
    return {(s.cost() + evicted_reach_cost(s, /*dependents=*/true)) / bytes_of(s), stale_base(s)};
  }
  void on_evict(StorageView& s) override { notify_region(s); }
  void on_rematerialize(StorageView& s) override { notify_region(s); }
  void on_destroy(StorageView& s) override {
    if (s.evicted()) notify_region(s);
  }
};

// h_MSPS = (c0 + Σ evicted ancestors' c0) / m (Peng et al., Capuchin): the cost of bringing it back per byte
// freed, with no staleness.
class MspsHeuristic final : public WalkingHeuristic {
 public:
  std::string name() const override { return "msps"; }
  bool timeless() const override { return true; }
  ScoreKey key(StorageView& s) override {
    return {(s.cost() + evicted_reach_cost(s, /*dependents=*/false)) / bytes_of(s), 0.0};
  }
  void on_evict(StorageView& s) override { notify_region(s); }
  void on_rematerialize(StorageView& s) override { notify_region(s); }
  void on_destroy(StorageView& s) override {
    if (s.evicted()) notify_region(s);
  }
};

// Fragmentation-aware: `base`'s scores, and windows of blocks under a device budget (the runtime asks
// fragmentation_aware()). Every event and listener goes to `base`, which keeps the state.
class WindowHeuristic final : public Heuristic {
 public:
  WindowHeuristic(std::string name, std::unique_ptr<Heuristic> base) : name_(std::move(name)), base_(std::move(base)) {}
  std::string name() const override { return name_; }
  bool indexable() const override { return base_->indexable(); }
  bool timeless() const override { return base_->timeless(); }
  bool scores_walk_lineage() const override { return base_->scores_walk_lineage(); }
  bool fragmentation_aware() const override { return true; }
  ScoreKey key(StorageView& s) override { return base_->key(s); }
  double score(StorageView& s, std::uint64_t now) override { return base_->score(s, now); }
  void on_evict(StorageView& s) override { base_->on_evict(s); }
  void on_rematerialize(StorageView& s) override { base_->on_rematerialize(s); }
  void on_destroy(StorageView& s) override { base_->on_destroy(s); }
  void on_cut(StorageView& s) override { base_->on_cut(s); }
  std::size_t live_slots() const override { return base_->live_slots(); }
  void set_listener(ScoreListener* listener) override { base_->set_listener(listener); }

 private:
  std::string name_;
  std::unique_ptr<Heuristic> base_;
};

constexpr std::string_view kWindowSuffix = "+window";

std::unique_ptr<Heuristic> make_plain_heuristic(std::string_view name) {
  if (name == "dtr") return std::make_unique<DtrHeuristic>();
  if (name == "dtr-eq") return make_dtr_eq_heuristic();
  if (name == "dtr-local") return std::make_unique<DtrLocalHeuristic>();
  if (name == "lru") return std::make_unique<LruHeuristic>();
  if (name == "size") return std::make_unique<SizeHeuristic>();
  if (name == "msps") return std::make_unique<MspsHeuristic>();
  if (name == "random") return std::make_unique<RandomHeuristic>(kDefaultRandomSeed);
  if (name.starts_with("random:")) {
    const std::string_view digits = name.substr(7);
    std::uint64_t seed = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
    if (error == std::errc{} && end == digits.data() + digits.size() && !digits.empty()) {
      return std::make_unique<RandomHeuristic>(seed);
    }
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> heuristic_names() {
  return {"dtr", "dtr-eq", "dtr-local", "lru", "size", "msps", "random", "window", "dtr-eq+window"};
}

std::unique_ptr<Heuristic> make_heuristic(std::string_view name, std::string_view variable) {
  std::unique_ptr<Heuristic> heuristic;
  if (name == "window") {
    heuristic = std::make_unique<WindowHeuristic>("window", make_plain_heuristic("dtr-local"));
  } else if (name.ends_with(kWindowSuffix)) {
    if (auto base = make_plain_heuristic(name.substr(0, name.size() - kWindowSuffix.size()))) {
      heuristic = std::make_unique<WindowHeuristic>(std::string(name), std::move(base));
    }
  } else {
    heuristic = make_plain_heuristic(name);
  }
  DTR_CHECK(heuristic != nullptr, ConfigError, variable, "=\"", shown_value(name),
            "\" is not a heuristic; expected dtr, dtr-eq, dtr-local, lru, size, msps, random, random:SEED, window, "
            "or any of these but window followed by +window (dtr-eq+window)");
  return heuristic;
}

}  // namespace dtr::heuristics

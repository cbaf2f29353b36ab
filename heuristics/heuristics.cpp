// The DTR family of eviction heuristics (design section 5): the simpler ones the DTR paper compares h_DTR
// with, and the names that make them all. h_DTR with the exact evicted neighbourhood and h_MSPS are in
// walking.cpp, the union-find approximation h_DTR^eq in dtr_eq.cpp, h_forecast in forecast.cpp.
#include <algorithm>
#include <charconv>
#include <limits>
#include <random>
#include <vector>

#include "dtr/check.h"
#include "heuristics/dtr_eq.h"
#include "heuristics/forecast.h"
#include "heuristics/heuristic.h"
#include "heuristics/walking.h"

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

// A heuristic built on another, `base`, which keeps the state: every query, event and listener goes to it
// unless the derived class says otherwise.
class DelegatingHeuristic : public Heuristic {
 public:
  bool indexable() const override { return base_->indexable(); }
  bool timeless() const override { return base_->timeless(); }
  bool scores_walk_lineage() const override { return base_->scores_walk_lineage(); }
  bool reads_forecasts() const override { return base_->reads_forecasts(); }
  bool reads_memory() const override { return base_->reads_memory(); }
  bool fragmentation_aware() const override { return base_->fragmentation_aware(); }
  ScoreKey key(StorageView& s) override { return base_->key(s); }
  double score(StorageView& s, std::uint64_t now) override { return base_->score(s, now); }
  double score_floor(StorageView& s, std::uint64_t now) override { return base_->score_floor(s, now); }
  bool last_resort(StorageView& s) override { return base_->last_resort(s); }
  void begin_decision(double available_bytes, FunctionRef<void(NeighbourVisitor)> candidates) override {
    base_->begin_decision(available_bytes, candidates);
  }
  void on_evict(StorageView& s) override { base_->on_evict(s); }
  void on_rematerialize(StorageView& s) override { base_->on_rematerialize(s); }
  void on_destroy(StorageView& s) override { base_->on_destroy(s); }
  void on_cut(StorageView& s) override { base_->on_cut(s); }
  void on_release(StorageView& s) override { base_->on_release(s); }
  std::size_t live_slots() const override { return base_->live_slots(); }
  bool change_rule() override { return base_->change_rule(); }
  void set_listener(ScoreListener* listener) override { base_->set_listener(listener); }

 protected:
  explicit DelegatingHeuristic(std::unique_ptr<Heuristic> base) : base_(std::move(base)) {}
  Heuristic& base() { return *base_; }

 private:
  std::unique_ptr<Heuristic> base_;
};

// Fragmentation-aware: `base`'s scores, and windows of blocks under a device budget (the runtime asks
// fragmentation_aware()).
class WindowHeuristic final : public DelegatingHeuristic {
 public:
  WindowHeuristic(std::string name, std::unique_ptr<Heuristic> base)
      : DelegatingHeuristic(std::move(base)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  bool fragmentation_aware() const override { return true; }

 private:
  std::string name_;
};

constexpr std::string_view kWindowSuffix = "+window";

std::unique_ptr<Heuristic> make_plain_heuristic(std::string_view name) {
  if (name == "dtr") return make_dtr_heuristic();
  if (name == "dtr-eq") return make_dtr_eq_heuristic();
  if (name == "dtr-local") return std::make_unique<DtrLocalHeuristic>();
  if (name == "lru") return std::make_unique<LruHeuristic>();
  if (name == "size") return std::make_unique<SizeHeuristic>();
  if (name == "msps") return make_msps_heuristic();
  if (name == "forecast") return make_forecast_heuristic();
  if (name == "forecast+reversal") return make_forecast_reversal_heuristic();
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
  return {"dtr",           "dtr-eq",   "dtr-local",        "lru", "size", "msps", "random", "window",
          "dtr-eq+window", "forecast", "forecast+reversal"};
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
            "\" is not a heuristic; expected dtr, dtr-eq, dtr-local, lru, size, msps, random, random:SEED, forecast, "
            "forecast+reversal, window, or any of these but window followed by +window (dtr-eq+window)");
  return heuristic;
}

}  // namespace dtr::heuristics

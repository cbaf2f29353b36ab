// The time of one eviction decision against the number of candidates, for each heuristic, with the eviction
// index and with a scan of every candidate, in the same run (issue 4: "dtr-eq median <= 5 us at 10^5
// candidates").
//
//   dtr-bench-eviction-search [--candidates N]... [--heuristic H]... [--decisions D]
//
// The lineage: storages in a long forward pass, each reading the one before it and, with probability 0.3,
// one of the 64 before that (skip connections); sizes 1-4 units, costs 1-8. About 30% are evicted at the
// start (at random), the rest are the candidates. Each round then:
//   1. advances the clock one tick and touches two random candidates (their last access changes);
//   2. decides: finds the lowest-scoring candidate (index: its root; scan: every candidate scored) and evicts
//      it (the index drops it and updates the candidates whose evicted neighbourhood changed);
//   3. rematerializes a random evicted storage, so that the number of candidates stays put.
// Step 2 is the decision timed (steady_clock around it, per round); steps 1 and 3 are the index's upkeep,
// timed apart. Reported: median and p99 over the rounds. The scan runs fewer rounds at large sizes (its
// decisions take milliseconds there), at least 20.
//
// Instructions per decision, independent of the machine's load: under callgrind, only the decisions are
// collected (`valgrind --tool=callgrind --collect-atstart=no dtr-bench-eviction-search --index-only ...`;
// the total over D decisions, divided by D).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "heuristics/eviction_index.h"
#include "heuristics/forecast_index.h"
#include "heuristics/heuristic.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define DTR_DECISION_COLLECT() CALLGRIND_TOGGLE_COLLECT
#else
#define DTR_DECISION_COLLECT() ((void)0)
#endif

namespace {

using dtr::heuristics::StorageView;

struct Node final : StorageView {
  std::size_t size = 1;
  double c0 = 1;
  std::uint64_t last = 0;
  bool is_evicted = false;
  std::size_t candidate_slot = static_cast<std::size_t>(-1);  // in the candidate list, while resident
  std::vector<Node*> inputs;
  std::vector<Node*> dependents;

  std::size_t bytes() const override { return size; }
  double cost() const override { return c0; }
  std::uint64_t last_access() const override { return last; }
  bool evicted() const override { return is_evicted; }
  // Forecasts (the forecast heuristic): program ticks of its forecast uses, read yet or not, the ops tick of
  // its last use; the clocks are the bench's (one program op and one op a round).
  std::vector<std::uint64_t> uses;
  bool read = true;
  const std::uint64_t* clock = nullptr;
  std::optional<std::uint64_t> forecast_deadline() override {
    const auto next = std::upper_bound(uses.begin(), uses.end(), *clock);
    return next == uses.end() ? std::nullopt : std::optional<std::uint64_t>(*next);
  }
  double forecast_distance() override {
    if (const auto d = forecast_deadline()) return static_cast<double>(*d - *clock);
    return static_cast<double>(*clock - last + 1);
  }
  bool forecast_unread() override { return !read && forecast_deadline().has_value(); }
  std::uint64_t last_use_op() const override { return last; }
  // A training step's steady state: every storage was made the same way the step before (those without a
  // forecast use ahead have theirs behind them), so none takes the first step's rule.
  bool made_before() const override { return true; }
  void for_each_input(dtr::heuristics::NeighbourVisitor visit) override {
    for (Node* n : inputs) visit(*n);
  }
  void for_each_dependent(dtr::heuristics::NeighbourVisitor visit) override {
    for (Node* n : dependents) visit(*n);
  }
};

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[i];
}

struct Result {
  double decision_median_us = 0;
  double decision_p99_us = 0;
  double upkeep_median_us = 0;
  double round_median_us = 0;     // decision and upkeep of one round together (where an index keys lazily,
                                  // as the forecast index does, the upkeep's keying happens in the decision)
  double round_mean_us = 0;       // ... and their mean: what a run spends, rare costly rounds included
  double changes_median = 0;      // candidates whose score an eviction changed
  double reorders_per_round = 0;  // kinetic swaps as the clock ran, per round
  int rounds = 0;
};

Result run(const std::string& heuristic_name, std::size_t candidates, bool use_index, int rounds) {
  std::mt19937_64 rng(42);
  const std::size_t total = candidates * 10 / 7 + 1;
  std::vector<std::unique_ptr<Node>> nodes;
  nodes.reserve(total);
  for (std::size_t i = 0; i < total; ++i) {
    auto n = std::make_unique<Node>();
    n->size = 1 + rng() % 4;
    n->c0 = static_cast<double>(1 + rng() % 8);
    n->last = rng() % 1000;
    if (i > 0) {
      n->inputs.push_back(nodes[i - 1].get());
      if (i > 1 && rng() % 10 < 3) {
        const std::size_t back = 2 + rng() % std::min<std::size_t>(64, i - 1);
        n->inputs.push_back(nodes[i - back].get());
      }
      for (Node* in : n->inputs) in->dependents.push_back(n.get());
    }
    nodes.push_back(std::move(n));
  }
  auto heuristic = dtr::heuristics::make_heuristic(heuristic_name);
  std::unique_ptr<dtr::heuristics::EvictionIndex> index;
  std::unique_ptr<dtr::heuristics::ForecastIndex> forecast_index;  // `forecast`: both clocks are `now` here
  if (use_index && heuristic->forecast_indexable()) {
    forecast_index = std::make_unique<dtr::heuristics::ForecastIndex>(*heuristic);
  } else if (use_index) {
    index = std::make_unique<dtr::heuristics::EvictionIndex>(*heuristic);
  }
  std::uint64_t now = 1000;
  // Forecasts, as a training step's: two thirds of the storages have one to three uses ahead, spread over
  // as many program ops as there are storages (a step makes about one storage per op, and a storage's uses
  // fall within a step or two), so that about as many forecast uses come due each round as the program makes
  // in an op; a fifth of those storages not read yet (last resorts); the others fall back to their staleness.
  for (auto& n : nodes) {
    n->clock = &now;
    if (rng() % 3 == 0) continue;
    for (std::uint64_t t = now, k = 1 + rng() % 3; k > 0; --k) n->uses.push_back(t += 1 + rng() % total);
    n->read = rng() % 5 != 0;
  }
  const auto clocks = [&] { return dtr::heuristics::IndexClocks{now, now, now}; };
  std::vector<Node*> resident;  // candidates (node 0 is a constant: never one)
  std::vector<Node*> evicted;
  auto make_candidate = [&](Node& n) {
    n.candidate_slot = resident.size();
    resident.push_back(&n);
    if (index) index->add(n, now);
    if (forecast_index) forecast_index->add(n, clocks());
  };
  auto drop_candidate = [&](Node& n) {
    Node* last = resident.back();
    resident[n.candidate_slot] = last;
    last->candidate_slot = n.candidate_slot;
    resident.pop_back();
    n.candidate_slot = static_cast<std::size_t>(-1);
    if (index) index->remove(n, now);
    if (forecast_index) forecast_index->remove(n, clocks());
  };
  auto evict = [&](Node& n) {
    drop_candidate(n);
    n.is_evicted = true;
    heuristic->on_evict(n);
    evicted.push_back(&n);
  };
  for (std::size_t i = 1; i < total; ++i) make_candidate(*nodes[i]);
  while (resident.size() > candidates) evict(*resident[rng() % resident.size()]);
  // An index that keys lazily keys every candidate at its first decision: done here, outside the rounds, so
  // that callgrind's count over the rounds is the steady state's.
  if (forecast_index) (void)forecast_index->valid(clocks());

  std::vector<double> decisions, upkeep, rounds_total, changes;
  for (int round = 0; round < rounds; ++round) {
    // 1. Time passes; two candidates are read.
    const std::uint64_t u0 = now_ns();
    now += 1;
    for (int k = 0; k < 2; ++k) {
      Node& n = *resident[rng() % resident.size()];
      n.last = now;
      n.read = true;
      if (index) index->refresh(n, now);
      if (forecast_index) forecast_index->used(n, clocks());
    }
    const std::uint64_t u1 = now_ns();
    // 2. The decision.
    const std::uint64_t reported_before = index ? index->reported_changes() : 0;
    DTR_DECISION_COLLECT();
    const std::uint64_t d0 = now_ns();
    Node* victim = nullptr;
    if (index) {
      victim = static_cast<Node*>(index->choose(now));
    } else if (forecast_index) {
      victim = static_cast<Node*>(forecast_index->choose(clocks()));
    } else {
      if (heuristic->reads_memory()) {
        // The memory is full: the budget leaves the candidates exactly their bytes (as the runtime's decision,
        // a pass over them).
        double available = 0;
        for (const Node* n : resident) available += static_cast<double>(n->size);
        heuristic->begin_decision(available, [&](dtr::heuristics::NeighbourVisitor visit) {
          for (Node* n : resident) visit(*n);
        });
      }
      double best = 0;
      bool best_last_resort = true;
      for (Node* n : resident) {
        const bool last_resort = heuristic->last_resort(*n);
        if (victim != nullptr && last_resort && !best_last_resort) continue;
        // As the runtime's scan: a candidate whose floor is above the best found cannot be chosen.
        if (victim != nullptr && last_resort == best_last_resort && heuristic->score_floor(*n, now) > best) continue;
        const double score = heuristic->score(*n, now);
        if (victim == nullptr || (best_last_resort && !last_resort) || score < best) {
          victim = n;
          best = score;
          best_last_resort = last_resort;
        }
      }
    }
    evict(*victim);
    const std::uint64_t d1 = now_ns();
    DTR_DECISION_COLLECT();
    if (index) changes.push_back(static_cast<double>(index->reported_changes() - reported_before));

    // 3. Something evicted comes back.
    const std::uint64_t r0 = now_ns();
    const std::size_t k = rng() % evicted.size();
    Node& back = *evicted[k];
    evicted[k] = evicted.back();
    evicted.pop_back();
    back.is_evicted = false;
    back.last = now;
    heuristic->on_rematerialize(back);
    make_candidate(back);
    const std::uint64_t r1 = now_ns();
    decisions.push_back(static_cast<double>(d1 - d0) / 1000.0);
    upkeep.push_back(static_cast<double>((u1 - u0) + (r1 - r0)) / 1000.0);
    rounds_total.push_back(decisions.back() + upkeep.back());
  }
  Result r;
  r.decision_median_us = percentile(decisions, 0.5);
  r.decision_p99_us = percentile(decisions, 0.99);
  r.upkeep_median_us = percentile(upkeep, 0.5);
  r.round_median_us = percentile(rounds_total, 0.5);
  for (const double t : rounds_total) r.round_mean_us += t / static_cast<double>(rounds_total.size());
  r.rounds = rounds;
  if (!changes.empty()) r.changes_median = percentile(changes, 0.5);
  if (index) r.reorders_per_round = static_cast<double>(index->reorders()) / rounds;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time of one eviction decision vs candidates: the eviction index against a scan"};
  std::vector<std::size_t> sizes = {1000, 10000, 100000, 1000000};
  std::vector<std::string> heuristics = dtr::heuristics::heuristic_names();
  int decisions = 2000;
  bool index_only = false;
  app.add_option("--candidates", sizes, "numbers of candidates");
  app.add_flag("--index-only", index_only, "skip the scan (for profiling the index)");
  app.add_option("--heuristic", heuristics, "heuristics");
  app.add_option("--decisions", decisions, "rounds with the index (the scan runs fewer at large sizes)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::printf("| heuristic | candidates | index: median µs | p99 µs | scores changed | reorders | upkeep median µs "
              "| decision + upkeep median µs | mean µs | scan: median µs | p99 µs | scan / index (median) |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& name : heuristics) {
    const auto heuristic = dtr::heuristics::make_heuristic(name);
    const bool indexable = heuristic->indexable() || heuristic->forecast_indexable();
    for (std::size_t n : sizes) {
      const int scan_rounds = std::max(20, static_cast<int>(std::min<std::size_t>(
                                               static_cast<std::size_t>(decisions), 20'000'000 / n)));
      const Result scan = index_only ? Result{} : run(name, n, false, scan_rounds);
      if (indexable) {
        const Result idx = run(name, n, true, decisions);
        // The forecast index counts neither (its scores change by re-keying, its heaps' swaps are its own).
        const std::string changed = heuristic->forecast_indexable() ? "—" : std::to_string(static_cast<long>(idx.changes_median));
        const std::string reorders = heuristic->forecast_indexable() ? "—" : std::to_string(idx.reorders_per_round).substr(0, 5);
        std::printf("| %s | %zu | %.2f | %.2f | %s | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.0f× |\n", name.c_str(),
                    n, idx.decision_median_us, idx.decision_p99_us, changed.c_str(), reorders.c_str(),
                    idx.upkeep_median_us, idx.round_median_us, idx.round_mean_us,
                    scan.decision_median_us, scan.decision_p99_us, scan.decision_median_us / idx.decision_median_us);
      } else {
        std::printf("| %s | %zu | — | — | — | — | — | — | — | %.1f | %.1f | — |\n", name.c_str(), n, scan.decision_median_us,
                    scan.decision_p99_us);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

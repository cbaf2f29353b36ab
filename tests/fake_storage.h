// A storage for heuristic tests: the fields StorageView exposes, and explicit neighbour lists.
#pragma once

#include <cstdint>
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "heuristics/storage_view.h"

namespace dtr::test {

struct FakeStorage final : heuristics::StorageView {
  std::size_t size = 1;
  double c0 = 1;
  std::uint64_t last = 0;
  bool is_evicted = false;
  bool is_constant = false;
  bool is_released = false;  // the program released every handle to it
  std::vector<FakeStorage*> inputs;
  std::vector<FakeStorage*> dependents;  // storages whose producer reads this one
  std::size_t visits = 0;                 // neighbours visited by walks from it (tests of a walk's cost)
  std::size_t forecast_reads = 0;         // reads of its forecast (tests of what an index reads again)
  // Forecasts, for the forecast heuristic: the program ticks of its forecast uses, whether the program has
  // read it, the ops clock at its last use, and the clocks they are read against (set both or neither).
  std::vector<std::uint64_t> forecast_uses;
  bool read = false;
  bool seen_before = true;  // the program made a storage the same way before (false: nothing forecasts it)
  std::uint64_t last_op = 0;
  const std::uint64_t* program_clock = nullptr;
  const std::uint64_t* ops_clock = nullptr;

  std::size_t bytes() const override { return size; }
  double cost() const override { return c0; }
  std::uint64_t last_access() const override { return last; }
  bool evicted() const override { return is_evicted; }
  bool constant() const override { return is_constant; }
  bool released() const override { return is_released; }
  std::optional<std::uint64_t> forecast_deadline() override {
    forecast_reads += 1;
    if (program_clock == nullptr) return std::nullopt;
    for (const std::uint64_t use : forecast_uses) {
      if (use > *program_clock) return use;
    }
    return std::nullopt;
  }
  double forecast_distance() override {
    if (const auto deadline = forecast_deadline()) return static_cast<double>(*deadline - *program_clock);
    return ops_clock != nullptr ? static_cast<double>(*ops_clock - last_op + 1) : 1.0;
  }
  bool forecast_unread() override { return !read && forecast_deadline().has_value(); }
  std::uint64_t last_use_op() const override { return last_op; }
  bool made_before() const override { return seen_before; }
  bool read_by_program() const override { return read; }
  std::uint64_t ops_run_at_last_use() const override { return last_op; }  // the forecasts began at ops 0
  void for_each_input(heuristics::NeighbourVisitor visit) override {
    visits += inputs.size();
    for (FakeStorage* s : inputs) visit(*s);
  }
  void for_each_dependent(heuristics::NeighbourVisitor visit) override {
    visits += dependents.size();
    for (FakeStorage* s : dependents) visit(*s);
  }
};

// `to` reads `from`: the edge both ways.
inline void link(FakeStorage& from, FakeStorage& to) {
  to.inputs.push_back(&from);
  from.dependents.push_back(&to);
}

// One storage of `live` that `accept` takes, drawn by `rng`; nullptr where it takes none.
template <typename Rng, typename Accept>
FakeStorage* pick_random(const std::vector<std::unique_ptr<FakeStorage>>& live, Rng& rng, Accept&& accept) {
  std::vector<FakeStorage*> found;
  for (const auto& s : live) {
    if (accept(*s)) found.push_back(s.get());
  }
  return found.empty() ? nullptr : found[rng() % found.size()];
}

// Makes `s` read one or two resident storages of `live`, drawn by `rng` (none while fewer than two live): an
// op's inputs are in memory when it runs, and the program holds them (a released one has no handle to pass).
// Random lineage for the index tests.
template <typename Rng>
void read_random_residents(FakeStorage& s, const std::vector<std::unique_ptr<FakeStorage>>& live, Rng& rng) {
  const int inputs = live.size() < 2 ? 0 : 1 + static_cast<int>(rng() % 2);
  for (int k = 0; k < inputs; ++k) {
    std::vector<FakeStorage*> resident;
    for (const auto& t : live) {
      if (!t->is_evicted && !t->is_released) resident.push_back(t.get());
    }
    if (resident.empty()) break;
    FakeStorage* in = resident[rng() % resident.size()];
    if (std::find(s.inputs.begin(), s.inputs.end(), in) != s.inputs.end()) continue;
    link(*in, s);
  }
}

}  // namespace dtr::test

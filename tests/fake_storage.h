// A storage for heuristic tests: the fields StorageView exposes, and explicit neighbour lists.
#pragma once

#include <functional>
#include <vector>

#include "heuristics/storage_view.h"

namespace dtr::test {

struct FakeStorage final : heuristics::StorageView {
  std::size_t size = 1;
  double c0 = 1;
  std::uint64_t last = 0;
  bool is_evicted = false;
  bool is_constant = false;
  std::vector<FakeStorage*> inputs;
  std::vector<FakeStorage*> dependents;  // storages whose producer reads this one
  std::size_t visits = 0;                 // neighbours visited by walks from it (tests of a walk's cost)

  std::size_t bytes() const override { return size; }
  double cost() const override { return c0; }
  std::uint64_t last_access() const override { return last; }
  bool evicted() const override { return is_evicted; }
  bool constant() const override { return is_constant; }
  void for_each_input(heuristics::NeighbourVisitor visit) override {
    visits += inputs.size();
    for (FakeStorage* s : inputs) visit(*s);
  }
  void for_each_dependent(heuristics::NeighbourVisitor visit) override {
    visits += dependents.size();
    for (FakeStorage* s : dependents) visit(*s);
  }
};

}  // namespace dtr::test

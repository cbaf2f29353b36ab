// h_DTR (the exact evicted neighbourhood) and h_MSPS, the heuristics that walk the evicted lineage
// (heuristics/walking.cpp); make_heuristic("dtr") and make_heuristic("msps") are the public way to them.
#pragma once

#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

// What the bounded walks from a storage find (h_DTR's e*): the summed c0 of the evicted storages they count,
// and whether they counted all there are (neither side stopped at kWalkDepth hops with evicted storages one
// hop further, nor at kWalkCount storages).
struct EvictedReach {
  double cost = 0;
  bool complete = true;
  // Where it is not complete: whether a side stopped at kWalkCount storages, and whether every side that
  // stopped short is one evicted storage a level for kWalkDepth levels (a chain longer than the walk).
  bool count_cut = false;
  bool chain_cut = true;
  // The dependents' side counted an evicted storage the program has not released: it would be remade from
  // the storage.
  bool holds_dependent = false;
  // Of `cost`, what the inputs' side counted (h_MSPS's share: what remaking the storage itself would remake).
  double inputs_cost = 0;
};

// A heuristic whose events keep the walks' state (h_DTR's), and that answers the walks for another heuristic
// built on it (`forecast`): its listener is told of every resident storage whose reach() an event changes.
class EvictedNeighbourhood : public Heuristic {
 public:
  // `dependents`: false walks the inputs' side alone (its flags and cost are that side's).
  virtual EvictedReach reach(StorageView& storage, bool dependents) = 0;
  // Tells the listener of the resident storages whose dependents' walks reach `storage`, its resident inputs
  // among them: those whose scores may read what changed in it, when it is released (Heuristic::on_release:
  // EvictedReach::holds_dependent) or made a constant (Heuristic::on_cut: no longer a dependent).
  virtual void report_neighbours(StorageView& storage) = 0;
};

std::unique_ptr<Heuristic> make_dtr_heuristic();
std::unique_ptr<EvictedNeighbourhood> make_dtr_neighbourhood();
std::unique_ptr<Heuristic> make_msps_heuristic();

}  // namespace dtr::heuristics

// h_DTR^eq, the DTR paper's reference heuristic (heuristics/dtr_eq.cpp; the default is forecast);
// make_heuristic("dtr-eq") is the public way to it.
#pragma once

#include <cstddef>
#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

// A class whose boundary holds at most this many resident storages is a chain's (a run between its two ends).
inline constexpr std::size_t kChainBoundary = 2;

// h_DTR^eq's classes for a heuristic built on them (`forecast`), which also asks what shape they are.
class EvictedClasses : public Heuristic {
 public:
  // Whether every evicted class next to `storage` (resident) is a chain's: at most kChainBoundary resident
  // storages on its boundary. Such a class's cost is one evicted run's; a class with a wide boundary may be
  // runs that a DAG's skips joined once and that no longer connect (classes never split). The listener is told
  // of a class's boundary whenever its class stops or starts being a chain's.
  virtual bool only_chain_classes_beside(StorageView& storage) = 0;
};

std::unique_ptr<Heuristic> make_dtr_eq_heuristic();
std::unique_ptr<EvictedClasses> make_dtr_eq_classes();

}  // namespace dtr::heuristics

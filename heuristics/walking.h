// h_DTR (the exact evicted neighbourhood) and h_MSPS, the heuristics that walk the evicted lineage
// (heuristics/walking.cpp); make_heuristic("dtr") and make_heuristic("msps") are the public way to them.
#pragma once

#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

std::unique_ptr<Heuristic> make_dtr_heuristic();
std::unique_ptr<Heuristic> make_msps_heuristic();

}  // namespace dtr::heuristics

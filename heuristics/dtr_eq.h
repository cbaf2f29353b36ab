// h_DTR^eq, the DTR paper's reference heuristic (heuristics/dtr_eq.cpp; the default is forecast);
// make_heuristic("dtr-eq") is the public way to it.
#pragma once

#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

std::unique_ptr<Heuristic> make_dtr_eq_heuristic();

}  // namespace dtr::heuristics

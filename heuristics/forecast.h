// h_forecast and forecast+reversal (heuristics/forecast.cpp); make_heuristic("forecast") and
// make_heuristic("forecast+reversal") are the public way to them.
#pragma once

#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

std::unique_ptr<Heuristic> make_forecast_heuristic();
// forecast+reversal: `forecast` with a storage whose evicted region fits the memory free at its next use scored
// by its own recomputation (heuristics/forecast.cpp); scanned, never indexed.
std::unique_ptr<Heuristic> make_forecast_reversal_heuristic();

}  // namespace dtr::heuristics

// h_forecast (heuristics/forecast.cpp); make_heuristic("forecast") is the public way to it.
#pragma once

#include <memory>

#include "heuristics/heuristic.h"

namespace dtr::heuristics {

std::unique_ptr<Heuristic> make_forecast_heuristic();

}  // namespace dtr::heuristics

#include <nlohmann/json.hpp>

#include "dtr/runtime.h"

namespace dtr {

std::string to_json(const RuntimeStats& s) {
  return nlohmann::json{{"base_compute", s.base_compute},
                        {"remat_compute", s.remat_compute},
                        {"rerun_compute", s.rerun_compute},
                        {"overhead", s.overhead()},
                        {"ops", s.ops},
                        {"rematerializations", s.rematerializations},
                        {"evictions", s.evictions},
                        {"eager_evictions", s.eager_evictions},
                        {"in_place_updates", s.in_place_updates},
                        {"relocations", s.relocations},
                        {"forecast_hits", s.forecast_hits},
                        {"search_ns", s.search_ns},
                        {"peak_reserved_bytes", s.peak_reserved_bytes},
                        {"peak_resident_bytes", s.peak_resident_bytes},
                        {"budget_bytes", s.budget_bytes}}
      .dump(2);
}

}  // namespace dtr

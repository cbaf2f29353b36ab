// JSON forms of the allocator's stats and segment map, for DTR_STATS and for inspection.
#include <nlohmann/json.hpp>

#include "dtr/caching_allocator.h"

namespace dtr {
namespace {

nlohmann::json stat(const StatValue& v) { return {{"current", v.current}, {"peak", v.peak}}; }

nlohmann::json stats_json(const AllocatorStats& s) {
  return {
      {"allocated_bytes", stat(s.allocated_bytes)},
      {"reserved_bytes", stat(s.reserved_bytes)},
      {"requested_bytes", stat(s.requested_bytes)},
      {"active_blocks", stat(s.active_blocks)},
      {"segments", stat(s.segments)},
      {"largest_free_block_bytes", stat(s.largest_free_block)},
      {"fragmentation", {{"current", s.fragmentation}, {"peak", s.peak_fragmentation}}},
      {"budget_bytes", s.budget_bytes},
      {"num_allocations", s.num_allocations},
      {"num_frees", s.num_frees},
      {"num_device_allocations", s.num_device_allocations},
      {"num_device_frees", s.num_device_frees},
      {"num_reclaim_calls", s.num_reclaim_calls},
      {"num_ooms", s.num_ooms},
      {"num_compactions", s.num_compactions},
      {"num_moved_blocks", s.num_moved_blocks},
      {"moved_bytes", s.moved_bytes},
  };
}

}  // namespace

std::string to_json(const AllocatorStats& stats) { return stats_json(stats).dump(2); }

std::string to_json(const MemorySnapshot& snapshot) {
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentInfo& segment : snapshot.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const BlockInfo& b : segment.blocks) {
      blocks.push_back({{"address", b.address},
                        {"size", b.size},
                        {"requested_bytes", b.requested_bytes},
                        {"allocated", b.allocated},
                        {"owner", b.owner}});
    }
    segments.push_back({{"address", segment.address},
                        {"size", segment.size},
                        {"pool", to_string(segment.pool)},
                        {"expandable", segment.expandable},
                        {"mapped_bytes", segment.mapped_bytes},
                        {"blocks", std::move(blocks)}});
  }
  return nlohmann::json{{"resource", snapshot.resource},
                        {"stats", stats_json(snapshot.stats)},
                        {"segments", std::move(segments)}}
      .dump(2);
}

}  // namespace dtr

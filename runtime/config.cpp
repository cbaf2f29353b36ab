#include "dtr/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "dtr/budget.h"
#include "dtr/check.h"
#include "heuristics/heuristic.h"

namespace dtr {

namespace {
constexpr std::uint32_t kMaxTimedRuns = 1'000'000;
}  // namespace

CostModel parse_cost_model(std::string_view text, std::string_view variable) {
  if (text == "measured") return CostModel::measured;
  if (text == "flops") return CostModel::flops;
  if (text == "bytes") return CostModel::bytes;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not a cost model; expected measured, flops or bytes");
}

ClockKind parse_clock(std::string_view text, std::string_view variable) {
  if (text == "ops") return ClockKind::ops;
  if (text == "time") return ClockKind::time;
  if (text == "compute") return ClockKind::compute;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not a clock; expected ops, time or compute");
}

BudgetMode parse_budget_mode(std::string_view text, std::string_view variable) {
  if (text == "device") return BudgetMode::device;
  if (text == "bytes") return BudgetMode::bytes;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not a budget mode; expected device or bytes");
}

InplaceMode parse_inplace_mode(std::string_view text, std::string_view variable) {
  if (text == "copy-on-write") return InplaceMode::copy_on_write;
  if (text == "pin-dependents") return InplaceMode::pin_dependents;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not an in-place mode; expected copy-on-write or pin-dependents");
}

bool parse_expandable_segments(std::string_view text, std::string_view variable) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not a switch; expected 1 or true (expandable "
            "segments), 0 or false (classic segments)");
}

Compaction parse_compaction(std::string_view text, std::string_view variable) {
  if (text == "first") return Compaction::first;
  if (text == "last-resort") return Compaction::last_resort;
  if (text == "off") return Compaction::off;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not a compaction mode; expected first (move "
            "blocks before evicting when that moves at most the request's bytes, and when nothing more can be "
            "evicted), last-resort (only when nothing more can be evicted) or off");
}

EvictionSearch parse_search(std::string_view text, std::string_view variable) {
  if (text == "index") return EvictionSearch::index;
  if (text == "scan") return EvictionSearch::scan;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text), "\" is not an eviction search; expected index or scan");
}

RecomputeOrder parse_recompute_order(std::string_view text, std::string_view variable) {
  if (text == "stable-last") return RecomputeOrder::stable_last;
  if (text == "inputs") return RecomputeOrder::inputs;
  DTR_THROW(ConfigError, variable, "=\"", shown_value(text),
            "\" is not a recomputation order; expected stable-last or inputs");
}

double parse_size_floor(std::string_view text, std::string_view variable) {
  double fraction = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), fraction);
  DTR_CHECK(error == std::errc{} && end == text.data() + text.size() && !text.empty() && std::isfinite(fraction) &&
                fraction >= 0,
            ConfigError, variable, "=\"", shown_value(text),
            "\" is not a size floor; expected a non-negative number, a fraction of the mean candidate size "
            "(0.01 ignores candidates under 1% of it; 0 turns the floor off)");
  return fraction;
}

std::optional<std::uint32_t> parse_timed_runs(std::string_view text, std::string_view variable) {
  if (text == "all") return std::nullopt;
  std::uint32_t runs = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), runs);
  DTR_CHECK(error == std::errc{} && end == text.data() + text.size() && !text.empty() && runs >= 1 &&
                runs <= kMaxTimedRuns,
            ConfigError, variable, "=\"", shown_value(text),
            "\" is not a count of timed runs; expected an integer from 1 to 1000000 (the first runs of each "
            "kernel signature that DTR_COST_MODEL=measured times, 3 by default), or all");
  return runs;
}

std::vector<std::string> heuristic_names() { return heuristics::heuristic_names(); }

std::string parse_heuristic(std::string_view text, std::string_view variable) {
  heuristics::make_heuristic(text, variable);  // throws ConfigError naming the accepted names
  return std::string(text);
}

bool fragmentation_aware(std::string_view name) {
  return heuristics::make_heuristic(name, "heuristic")->fragmentation_aware();
}

std::optional<double> parse_thrash_limit(std::string_view text, std::string_view variable) {
  if (text == "off") return std::nullopt;
  double limit = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), limit);
  DTR_CHECK(error == std::errc{} && end == text.data() + text.size() && !text.empty() && std::isfinite(limit) &&
                limit >= 1,
            ConfigError, variable, "=\"", shown_value(text),
            "\" is not a thrash limit; expected a compute overhead factor >= 1 ((base + recomputation) / base, "
            "e.g. 2 or 3.5), or off");
  return limit;
}

const char* to_string(CostModel model) {
  switch (model) {
    case CostModel::measured: return "measured";
    case CostModel::flops: return "flops";
    case CostModel::bytes: return "bytes";
  }
  return "?";
}

const char* to_string(ClockKind clock) {
  switch (clock) {
    case ClockKind::ops: return "ops";
    case ClockKind::time: return "time";
    case ClockKind::compute: return "compute";
  }
  return "?";
}
const char* to_string(BudgetMode mode) { return mode == BudgetMode::device ? "device" : "bytes"; }
const char* to_string(EvictionSearch search) { return search == EvictionSearch::index ? "index" : "scan"; }
const char* to_string(RecomputeOrder order) {
  return order == RecomputeOrder::stable_last ? "stable-last" : "inputs";
}
const char* to_string(InplaceMode mode) {
  return mode == InplaceMode::copy_on_write ? "copy-on-write" : "pin-dependents";
}

Config Config::from_env(std::uint64_t capacity_bytes) {
  auto env = [](const char* name) -> const char* { return std::getenv(name); };  // NOLINT(concurrency-mt-unsafe)
  Config config;
  config.memory_budget = memory_budget_from_env(capacity_bytes);
  if (const char* v = env("DTR_HEURISTIC")) config.heuristic = parse_heuristic(v);
  if (const char* v = env("DTR_COST_MODEL")) config.cost_model = parse_cost_model(v);
  if (const char* v = env("DTR_CLOCK")) config.clock = parse_clock(v);
  if (const char* v = env("DTR_TIMED_RUNS")) config.timed_runs = parse_timed_runs(v);
  if (const char* v = env("DTR_BUDGET_MODE")) config.budget_mode = parse_budget_mode(v);
  if (const char* v = env("DTR_INPLACE")) config.inplace = parse_inplace_mode(v);
  if (const char* v = env("DTR_SEARCH")) config.search = parse_search(v);
  if (const char* v = env("DTR_RECOMPUTE_ORDER")) config.recompute_order = parse_recompute_order(v);
  if (const char* v = env("DTR_EXPANDABLE_SEGMENTS")) config.allocator.expandable_segments = parse_expandable_segments(v);
  if (const char* v = env("DTR_COMPACTION")) config.allocator.compaction = parse_compaction(v);
  if (const char* v = env("DTR_SIZE_FLOOR")) config.size_floor = parse_size_floor(v);
  if (const char* v = env("DTR_THRASH_LIMIT")) config.thrash_limit = parse_thrash_limit(v);
  config.device = default_device();  // DTR_DEVICE, or the GPU when there is one (else the CPU, logged)
  if (const char* v = env("DTR_STATS")) config.stats_path = v;
  if (const char* v = env("DTR_TRACE")) config.trace_path = v;
  return config;
}

}  // namespace dtr

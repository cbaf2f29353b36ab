#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>

#include "env_guard.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(Config, DefaultsWithoutEnvironment) {
  EnvGuard budget("DTR_MEMORY_BUDGET", nullptr), heuristic("DTR_HEURISTIC", nullptr),
      cost("DTR_COST_MODEL", nullptr), clock("DTR_CLOCK", nullptr), mode("DTR_BUDGET_MODE", nullptr),
      device("DTR_DEVICE", nullptr), stats("DTR_STATS", nullptr), trace("DTR_TRACE", nullptr),
      inplace("DTR_INPLACE", nullptr), search("DTR_SEARCH", nullptr), floor("DTR_SIZE_FLOOR", nullptr),
      timed("DTR_TIMED_RUNS", nullptr), order("DTR_RECOMPUTE_ORDER", nullptr),
      expandable("DTR_EXPANDABLE_SEGMENTS", nullptr), compaction("DTR_COMPACTION", nullptr);
  const Config c = Config::from_env(1 << 30);
  EXPECT_FALSE(c.allocator.expandable_segments);
  EXPECT_EQ(c.allocator.compaction, Compaction::last_resort);
  EXPECT_EQ(c.size_floor, 0.0);
  EXPECT_EQ(c.timed_runs, std::uint32_t{3});
  EXPECT_EQ(c.memory_budget, std::nullopt);
  EXPECT_EQ(c.heuristic, "forecast");
  EXPECT_EQ(c.cost_model, CostModel::measured);
  EXPECT_EQ(c.clock, ClockKind::ops);
  EXPECT_EQ(c.budget_mode, BudgetMode::device);
  EXPECT_EQ(c.inplace, InplaceMode::copy_on_write);
  EXPECT_EQ(c.search, EvictionSearch::index);
  EXPECT_EQ(c.recompute_order, RecomputeOrder::stable_last);
  // The GPU when there is one, else the CPU.
  EXPECT_EQ(c.device, cuda::device_count() > 0 ? (Device{DeviceKind::cuda, 0}) : (Device{DeviceKind::cpu, 0}));
  EXPECT_TRUE(c.stats_path.empty());
  EXPECT_TRUE(c.trace_path.empty());
}

TEST(Config, ReadsEveryVariable) {
  EnvGuard budget("DTR_MEMORY_BUDGET", "25%"), heuristic("DTR_HEURISTIC", "lru"), cost("DTR_COST_MODEL", "bytes"),
      clock("DTR_CLOCK", "time"), mode("DTR_BUDGET_MODE", "bytes"), device("DTR_DEVICE", "cpu"),
      stats("DTR_STATS", "/tmp/stats.json"), trace("DTR_TRACE", "/tmp/trace.jsonl"),
      inplace("DTR_INPLACE", "pin-dependents"), search("DTR_SEARCH", "scan"), floor("DTR_SIZE_FLOOR", "0.01"),
      timed("DTR_TIMED_RUNS", "7"), order("DTR_RECOMPUTE_ORDER", "inputs"), expandable("DTR_EXPANDABLE_SEGMENTS", "1"),
      compaction("DTR_COMPACTION", "first");
  const Config c = Config::from_env(std::uint64_t{4} << 30);
  EXPECT_TRUE(c.allocator.expandable_segments);
  EXPECT_EQ(c.allocator.compaction, Compaction::first);
  EXPECT_EQ(c.size_floor, 0.01);
  EXPECT_EQ(c.timed_runs, std::uint32_t{7});
  EXPECT_EQ(c.memory_budget, std::uint64_t{1} << 30);
  EXPECT_EQ(c.heuristic, "lru");
  EXPECT_EQ(c.cost_model, CostModel::bytes);
  EXPECT_EQ(c.clock, ClockKind::time);
  EXPECT_EQ(c.budget_mode, BudgetMode::bytes);
  EXPECT_EQ(c.inplace, InplaceMode::pin_dependents);
  EXPECT_EQ(c.search, EvictionSearch::scan);
  EXPECT_EQ(c.recompute_order, RecomputeOrder::inputs);
  EXPECT_EQ(c.stats_path, "/tmp/stats.json");
  EXPECT_EQ(c.trace_path, "/tmp/trace.jsonl");
}

TEST(Config, MalformedValuesNameTheVariableAndTheForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"DTR_HEURISTIC", "fastest"},  {"DTR_COST_MODEL", "FLOPS"}, {"DTR_CLOCK", "wall"},
      {"DTR_BUDGET_MODE", "tensor"}, {"DTR_DEVICE", "tpu"},        {"DTR_MEMORY_BUDGET", "8 gigs"},
      {"DTR_INPLACE", "cow"}, {"DTR_SEARCH", "sampled"}, {"DTR_SIZE_FLOOR", "-0.5"},
      {"DTR_SIZE_FLOOR", "1%"}, {"DTR_SIZE_FLOOR", ""}, {"DTR_SIZE_FLOOR", "nan"}, {"DTR_SIZE_FLOOR", "inf"},
      {"DTR_TIMED_RUNS", "0"}, {"DTR_TIMED_RUNS", "-1"}, {"DTR_TIMED_RUNS", ""}, {"DTR_TIMED_RUNS", "three"},
      {"DTR_TIMED_RUNS", "2.5"}, {"DTR_TIMED_RUNS", "1000001"}, {"DTR_TIMED_RUNS", "99999999999"},
      {"DTR_TIMED_RUNS", "ALL"}, {"DTR_RECOMPUTE_ORDER", "deepest"}, {"DTR_RECOMPUTE_ORDER", ""},
      {"DTR_EXPANDABLE_SEGMENTS", "yes"}, {"DTR_EXPANDABLE_SEGMENTS", "True"}, {"DTR_EXPANDABLE_SEGMENTS", ""},
      {"DTR_COMPACTION", "on"}, {"DTR_COMPACTION", "1"}, {"DTR_COMPACTION", ""}};
  for (const auto& [name, value] : cases) {
    EnvGuard env(name, value);
    try {
      Config::from_env(1 << 30);
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + "=\"" + value + "\""), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(to_string(parse_cost_model("flops")), std::string("flops"));
  EXPECT_EQ(to_string(parse_clock("ops")), std::string("ops"));
  EXPECT_EQ(to_string(parse_budget_mode("device")), std::string("device"));
  EXPECT_EQ(to_string(parse_inplace_mode("copy-on-write")), std::string("copy-on-write"));
  EXPECT_EQ(to_string(parse_inplace_mode("pin-dependents")), std::string("pin-dependents"));
  EXPECT_EQ(to_string(parse_search("index")), std::string("index"));
  EXPECT_EQ(to_string(parse_search("scan")), std::string("scan"));
  EXPECT_EQ(to_string(parse_recompute_order("stable-last")), std::string("stable-last"));
  EXPECT_EQ(to_string(parse_recompute_order("inputs")), std::string("inputs"));
  EXPECT_TRUE(parse_expandable_segments("true"));
  EXPECT_FALSE(parse_expandable_segments("0"));
  EXPECT_FALSE(parse_expandable_segments("false"));
  for (const Compaction mode : {Compaction::off, Compaction::last_resort, Compaction::first}) {
    EXPECT_EQ(parse_compaction(to_string(mode)), mode);
  }
  EXPECT_EQ(parse_size_floor("0"), 0.0);
  EXPECT_EQ(parse_size_floor("2.5"), 2.5);
  EXPECT_EQ(parse_timed_runs("all"), std::nullopt);
  EXPECT_EQ(parse_timed_runs("1"), std::uint32_t{1});
  EXPECT_EQ(parse_timed_runs("1000000"), std::uint32_t{1000000});
}

TEST(Config, RuntimeRejectsZeroTimedRunsSetInCode) {
  Config config = deterministic_config(4096);
  config.timed_runs = 0;
  expect_error<ConfigError>([&] { Runtime rt(config); }, {"Config::timed_runs 0 times no run", "nullopt to time every run"});
}

TEST(Config, RuntimeRejectsAMalformedSizeFloorSetInCode) {
  for (double bad : {-0.1, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    Config config = deterministic_config(4096);
    config.size_floor = bad;
    try {
      Runtime rt(config);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("Config::size_floor"), std::string::npos) << e.what();
    }
  }
}

// A zero budget set in code is refused in both budget modes alike (bytes mode took it, device mode did not).
TEST(Config, RuntimeRejectsAZeroBudgetInEveryMode) {
  for (BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
    Config config = deterministic_config(4096);
    config.memory_budget = 0;
    config.budget_mode = mode;
    expect_error<ConfigError>([&] { Runtime rt(config); }, {"Config::memory_budget", "0 bytes", "nullopt"});
    config.memory_budget = 1;  // the smallest budget is a budget
    Runtime rt(config);
    EXPECT_EQ(rt.config().memory_budget, std::uint64_t{1});
  }
}

TEST(Config, DefaultRuntimeIsBuiltOnceFromTheEnvironment) {
  EnvGuard budget("DTR_MEMORY_BUDGET", nullptr), cost("DTR_COST_MODEL", nullptr), stats("DTR_STATS", nullptr),
      trace("DTR_TRACE", nullptr), device("DTR_DEVICE", nullptr);
  {
    EnvGuard heuristic("DTR_HEURISTIC", "fastest");
    EXPECT_THROW(default_runtime(), ConfigError);  // nothing built: the next call tries again
  }
  EnvGuard heuristic("DTR_HEURISTIC", "lru");
  Runtime& rt = default_runtime();
  EXPECT_EQ(rt.config().heuristic, "lru");
  EXPECT_EQ(&default_runtime(), &rt);
  Tensor a = rt.constant(TensorMeta{{2}}, std::vector<float>{-1, 2});
  EXPECT_EQ(rt.call1(ops::relu(), {a}).to_host(), (std::vector<float>{0, 2}));
  const Stats counted = rt.stats();
  EXPECT_GE(counted.ops, 1u);
}

TEST(Config, AskingForAMissingGpuIsAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EnvGuard device("DTR_DEVICE", "cuda");
  expect_error<DeviceError>([] { Config::from_env(1 << 30); }, {"DTR_DEVICE=cuda", cuda::unavailable_reason()});
  EnvGuard other("DTR_DEVICE", "cuda:3");
  expect_error<DeviceError>([] { Config::from_env(1 << 30); }, {"DTR_DEVICE=cuda:3"});
}

TEST(Config, RuntimeRejectsDevicesItCannotRunOn) {
  Config c = deterministic_config();
  // One past the last GPU: cuda:0 on a machine without one, cuda:1 beside one H100.
  c.device = Device{DeviceKind::cuda, cuda::device_count()};
  EXPECT_THROW(Runtime{c}, DeviceError);
  c = deterministic_config();
  c.heuristic = "nope";
  EXPECT_THROW(Runtime{c}, ConfigError);
}

TEST(Config, StatsFileIsWrittenWhenTheRuntimeEnds) {
  const std::string path = ::testing::TempDir() + "dtr_stats_test.json";
  std::remove(path.c_str());
  {
    Config c = deterministic_config();
    c.stats_path = path;
    Runtime rt(c);
    Tensor a = rt.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
    Tensor b = rt.call1(ops::relu(), {a});
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const auto json = nlohmann::json::parse(in);
  EXPECT_EQ(json["ops"], 1);
  EXPECT_EQ(json["base_compute"], 4.0);
  EXPECT_EQ(json["overhead"], 1.0);
  for (const char* key : {"remat_compute", "rerun_compute", "rematerializations", "evictions", "eager_evictions",
                          "in_place_updates", "relocations", "forecast_hits", "search_ns", "peak_reserved_bytes",
                          "peak_resident_bytes", "budget_bytes"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

}  // namespace
}  // namespace dtr::test

namespace dtr::test {
namespace {

TEST(Config, TraceFollowsTheDtrPrototypeFormat) {
  const std::string path = ::testing::TempDir() + "dtr_trace_test.jsonl";
  {
    Config c = deterministic_config();
    c.trace_path = path;
    Runtime rt(c);
    Tensor a = rt.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
    Tensor b = rt.call1(ops::relu(), {a});
    std::vector<Tensor> halves = rt.call(ops::split2(), std::vector<Tensor>{b});
    b = Tensor();
    Tensor v = rt.view(halves[0], {2, 1});
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  const std::vector<nlohmann::json> expected = {
      {{"INSTRUCTION", "ANNOTATE"}, {"ANNOTATION", "START"}},
      {{"INSTRUCTION", "CONSTANT"}, {"NAME", "x1"}},
      {{"INSTRUCTION", "MEMORY"}, {"NAME", "x1"}, {"MEMORY", "16"}},
      {{"INSTRUCTION", "CALL"}, {"NAME", "relu"}, {"ARGS", {"x1"}}, {"RESULT", {"x2"}}, {"TIME", "4"}},
      {{"INSTRUCTION", "MEMORY"}, {"NAME", "x2"}, {"MEMORY", "16"}},
      {{"INSTRUCTION", "ALIAS"}, {"NAME", "x2"}, {"ALIAS", "-1"}},
      {{"INSTRUCTION", "CALL"}, {"NAME", "split2"}, {"ARGS", {"x2"}}, {"RESULT", {"x3", "x4"}}, {"TIME", "4"}},
      {{"INSTRUCTION", "MEMORY"}, {"NAME", "x3"}, {"MEMORY", "8"}},
      {{"INSTRUCTION", "ALIAS"}, {"NAME", "x3"}, {"ALIAS", "-1"}},
      {{"INSTRUCTION", "MEMORY"}, {"NAME", "x4"}, {"MEMORY", "8"}},
      {{"INSTRUCTION", "ALIAS"}, {"NAME", "x4"}, {"ALIAS", "-1"}},
      {{"INSTRUCTION", "RELEASE"}, {"NAME", "x2"}},
      {{"INSTRUCTION", "CALL"}, {"NAME", "view"}, {"ARGS", {"x3"}}, {"RESULT", {"x5"}}, {"TIME", "0"}},
      {{"INSTRUCTION", "MEMORY"}, {"NAME", "x5"}, {"MEMORY", "8"}},
      {{"INSTRUCTION", "ALIAS"}, {"NAME", "x5"}, {"ALIAS", "0"}},
  };
  ASSERT_GE(lines.size(), expected.size() + 4);  // then x5 (v), x3, x4 (halves) and x1 (a) are released
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(lines[i], expected[i]) << "line " << i + 1;
  std::vector<std::string> released;
  for (std::size_t i = expected.size(); i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["INSTRUCTION"], "RELEASE");
    released.push_back(lines[i]["NAME"]);
  }
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<std::string>{"x1", "x3", "x4", "x5"}));
}

TEST(Config, UnwritableTracePathIsAClearError) {
  Config c = deterministic_config();
  c.trace_path = "/nonexistent-dir/trace.jsonl";
  expect_error<IoError>([&] { Runtime rt(c); },
                        {"DTR_TRACE: cannot write '/nonexistent-dir/trace.jsonl': No such file or directory"});
}

}  // namespace
}  // namespace dtr::test

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "env_guard.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(Config, DefaultsWithoutEnvironment) {
  EnvGuard budget("DTR_MEMORY_BUDGET", nullptr), heuristic("DTR_HEURISTIC", nullptr),
      cost("DTR_COST_MODEL", nullptr), clock("DTR_CLOCK", nullptr), mode("DTR_BUDGET_MODE", nullptr),
      device("DTR_DEVICE", nullptr), stats("DTR_STATS", nullptr);
  const Config c = Config::from_env(1 << 30);
  EXPECT_EQ(c.memory_budget, std::nullopt);
  EXPECT_EQ(c.heuristic, "dtr-eq");
  EXPECT_EQ(c.cost_model, CostModel::measured);
  EXPECT_EQ(c.clock, ClockKind::ops);
  EXPECT_EQ(c.budget_mode, BudgetMode::device);
  EXPECT_EQ(c.device, (Device{DeviceKind::cpu, 0}));
  EXPECT_TRUE(c.stats_path.empty());
}

TEST(Config, ReadsEveryVariable) {
  EnvGuard budget("DTR_MEMORY_BUDGET", "25%"), heuristic("DTR_HEURISTIC", "lru"), cost("DTR_COST_MODEL", "bytes"),
      clock("DTR_CLOCK", "time"), mode("DTR_BUDGET_MODE", "bytes"), device("DTR_DEVICE", "cpu"),
      stats("DTR_STATS", "/tmp/stats.json");
  const Config c = Config::from_env(std::uint64_t{4} << 30);
  EXPECT_EQ(c.memory_budget, std::uint64_t{1} << 30);
  EXPECT_EQ(c.heuristic, "lru");
  EXPECT_EQ(c.cost_model, CostModel::bytes);
  EXPECT_EQ(c.clock, ClockKind::time);
  EXPECT_EQ(c.budget_mode, BudgetMode::bytes);
  EXPECT_EQ(c.stats_path, "/tmp/stats.json");
}

TEST(Config, MalformedValuesNameTheVariableAndTheForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"DTR_HEURISTIC", "fastest"},  {"DTR_COST_MODEL", "FLOPS"}, {"DTR_CLOCK", "wall"},
      {"DTR_BUDGET_MODE", "tensor"}, {"DTR_DEVICE", "tpu"},        {"DTR_MEMORY_BUDGET", "8 gigs"}};
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
}

TEST(Config, RuntimeRejectsDevicesItCannotRunOn) {
  Config c = deterministic_config();
  c.device = Device{DeviceKind::cuda, 0};
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
  for (const char* key : {"remat_compute", "rematerializations", "evictions", "eager_evictions", "search_ns",
                          "peak_reserved_bytes", "peak_resident_bytes", "budget_bytes"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

}  // namespace
}  // namespace dtr::test

#include <gtest/gtest.h>

#include <string>

#include "env_guard.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::uint64_t GiB = std::uint64_t{1} << 30;

TEST(MemoryBudget, AcceptsEveryDocumentedForm) {
  EXPECT_EQ(parse_memory_budget("1500000000", 0), 1500000000u);
  EXPECT_EQ(parse_memory_budget("8GiB", 0), 8 * GiB);
  EXPECT_EQ(parse_memory_budget("512MiB", 0), 512 * MiB);
  EXPECT_EQ(parse_memory_budget("512 MiB", 0), 512 * MiB);
  EXPECT_EQ(parse_memory_budget("  512mib\n", 0), 512 * MiB);
  EXPECT_EQ(parse_memory_budget("1.5GiB", 0), 3 * GiB / 2);
  EXPECT_EQ(parse_memory_budget("4KiB", 0), 4096u);
  EXPECT_EQ(parse_memory_budget("2TiB", 0), 2048 * GiB);
  EXPECT_EQ(parse_memory_budget("100B", 0), 100u);
  EXPECT_EQ(parse_memory_budget("1.5GB", 0), 1500000000u);
  EXPECT_EQ(parse_memory_budget("3kb", 0), 3000u);
  EXPECT_EQ(parse_memory_budget("2MB", 0), 2000000u);
  EXPECT_EQ(parse_memory_budget("1TB", 0), 1000000000000u);
  EXPECT_EQ(parse_memory_budget("60%", 10 * GiB), 6 * GiB);
  EXPECT_EQ(parse_memory_budget("12.5%", 8 * GiB), GiB);
  EXPECT_EQ(parse_memory_budget("100%", 8 * GiB), 8 * GiB);
  EXPECT_EQ(parse_memory_budget("18446744073709551615", 0), UINT64_MAX);
}

TEST(MemoryBudget, RejectsMalformedValuesNamingTheVariableAndTheForms) {
  for (const char* bad : {"8 gigs", "-1", "150%", "", "   ", "0", "0%", "0.0001B", "1.5", "GiB", "8GiBs", "8  GiB",
                          "1.2.3GiB", "5.MiB", ".5GiB", "99999999999999999999", "20000000TiB", "60 %%", "0x100",
                          "1e9", "+5"}) {
    try {
      parse_memory_budget(bad, 16 * GiB, "DTR_MEMORY_BUDGET");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("DTR_MEMORY_BUDGET=\"" + std::string(bad) + "\""), std::string::npos) << message;
      EXPECT_NE(message.find("expected a byte count"), std::string::npos) << message;
      EXPECT_NE(message.find("60%"), std::string::npos) << message;
    }
  }
}

// Found by fuzz/env_values_fuzz.cpp: the products of many digits with a capacity or a unit wrapped around 128
// bits, giving a wrong budget silently.
TEST(MemoryBudget, ManyDigitsGiveTheRightBudgetOrAnErrorNeverAWrappedOne) {
  EXPECT_EQ(parse_memory_budget("50.00000000000000000000000000%", 80 * GiB), 40 * GiB);
  EXPECT_EQ(parse_memory_budget("1.000000000000000000000000000GiB", 0), GiB);
  EXPECT_EQ(parse_memory_budget("12.50000000000000000000000000%", 8 * GiB), GiB);
  for (const char* bad : {"309485009821345068724781057TiB", "12.3456789012345678901234%", "99999999999999999999KiB"}) {
    try {
      parse_memory_budget(bad, 80 * GiB, "DTR_MEMORY_BUDGET");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("more than 19 significant digits"), std::string::npos) << e.what();
    }
  }
}

// A runaway value is shown cut, in every variable's message: no message grows with the input.
TEST(MemoryBudget, ALongValueIsShownCutInTheMessage) {
  const std::string value(3000, '7');
  for (const std::string& bad : {value + "x", "8" + std::string(3000, 'G')}) {
    try {
      parse_memory_budget(bad, 80 * GiB, "DTR_MEMORY_BUDGET");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_LT(std::string(e.what()).size(), 600u) << e.what();
      EXPECT_NE(std::string(e.what()).find("(3001 characters)"), std::string::npos) << e.what();
    }
  }
  const std::string long_word(3000, 'z');
  for (auto parse : {+[](std::string_view t) { (void)parse_cost_model(t); }, +[](std::string_view t) { (void)parse_clock(t); },
                     +[](std::string_view t) { (void)parse_budget_mode(t); },
                     +[](std::string_view t) { (void)parse_inplace_mode(t); },
                     +[](std::string_view t) { (void)parse_search(t); }, +[](std::string_view t) { (void)parse_size_floor(t); },
                     +[](std::string_view t) { (void)parse_thrash_limit(t); },
                     +[](std::string_view t) { (void)parse_heuristic(t); }, +[](std::string_view t) { (void)parse_device(t); }}) {
    try {
      parse(long_word);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_LT(std::string(e.what()).size(), 600u) << e.what();
      EXPECT_NE(std::string(e.what()).find("(3000 characters)"), std::string::npos) << e.what();
    }
  }
}

TEST(MemoryBudget, PercentageNeedsAKnownCapacity) {
  EXPECT_THROW(parse_memory_budget("50%", 0), ConfigError);
}

TEST(MemoryBudget, ReadsTheEnvironment) {
  {
    EnvGuard env("DTR_MEMORY_BUDGET", nullptr);
    EXPECT_EQ(memory_budget_from_env(GiB), std::nullopt);
  }
  {
    EnvGuard env("DTR_MEMORY_BUDGET", "25%");
    EXPECT_EQ(memory_budget_from_env(4 * GiB), GiB);
  }
  {
    EnvGuard env("DTR_MEMORY_BUDGET", "");
    EXPECT_THROW(memory_budget_from_env(GiB), ConfigError);
  }
  {
    EnvGuard env("DTR_MEMORY_BUDGET", "8 gigs");
    EXPECT_THROW(memory_budget_from_env(GiB), ConfigError);
  }
}

}  // namespace
}  // namespace dtr::test

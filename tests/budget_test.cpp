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

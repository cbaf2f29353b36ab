// The in-place update tests' fixture (runtime_test.cpp, inplace_update_test.cpp), run under both strategies
// (Config::inplace); runtime_test.cpp instantiates it once for the whole binary.
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "test_resources.h"

namespace dtr::test {

// Both in-place strategies give the same values; they differ in what stays recomputable and what is freed.
class InPlace : public ::testing::TestWithParam<InplaceMode> {
 protected:
  Config config(std::optional<std::uint64_t> budget = std::nullopt) const {
    Config c = deterministic_config(budget);
    c.inplace = GetParam();
    return c;
  }
  bool copy_on_write() const { return GetParam() == InplaceMode::copy_on_write; }
};

}  // namespace dtr::test

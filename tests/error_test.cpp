#include <gtest/gtest.h>

#include <string>

#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(Errors, CheckThrowsTheNamedTypeWithItsLocation) {
  try {
    DTR_CHECK(1 + 1 == 3, InvalidArgument, "arithmetic is broken: ", 2, " != ", 3);
    FAIL() << "DTR_CHECK did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("arithmetic is broken: 2 != 3"), std::string::npos);
    // The location is for debugging, not in the message, and names the source relative to the project.
    EXPECT_EQ(std::string(e.what()).find("error_test.cpp"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.file()), "tests/error_test.cpp");
    EXPECT_GT(e.line(), 0);
  }
  EXPECT_NO_THROW(DTR_CHECK(true, InvalidArgument, "never"));
}

TEST(Errors, HierarchyLetsCallersCatchBroadly) {
  EXPECT_THROW(DTR_THROW(ConfigError, "x"), InvalidArgument);
  EXPECT_THROW(DTR_THROW(DeviceError, "x"), Error);
  EXPECT_THROW(DTR_THROW(InvalidArgument, "x"), std::runtime_error);
  EXPECT_THROW(throw OutOfMemory("oom", {}, __FILE__, __LINE__), std::bad_alloc);
}

TEST(Errors, FormatsByteCounts) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB (1024 bytes)");
  EXPECT_EQ(format_bytes(3 * MiB / 2), "1.50 MiB (1572864 bytes)");
  EXPECT_EQ(format_bytes(std::uint64_t{5} << 40), "5.00 TiB (5497558138880 bytes)");
}

}  // namespace
}  // namespace dtr::test

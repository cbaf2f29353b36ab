// Runs the C translation unit's checks of the C API.
#include <gtest/gtest.h>

extern "C" {
const char* dtr_c_test_malloc_free(void);
const char* dtr_c_test_budget_and_oom(void);
const char* dtr_c_test_bad_input(void);
}

namespace {

void expect_passes(const char* failure) { EXPECT_EQ(failure, nullptr) << (failure ? failure : ""); }

TEST(CApi, MallocAndFreeUpdateTheStats) { expect_passes(dtr_c_test_malloc_free()); }
TEST(CApi, BudgetCapsAllocationAndOutOfMemoryIsExplained) { expect_passes(dtr_c_test_budget_and_oom()); }
TEST(CApi, BadInputIsReportedNeverFatal) { expect_passes(dtr_c_test_bad_input()); }

}  // namespace

// A recomputation that fails part way (its kernel's scratch does not fit the budget) leaves the runtime as it
// was: the outputs it had given buffers go back to evicted, so nothing reads their garbage, the heuristic's
// view stays consistent (dtr-eq used to see the storage evicted twice and abort), and once memory allows, the
// same read gives the right values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_helpers.h"

namespace dtr::test {
namespace {

TEST(RuntimeFailure, ARecomputationThatRunsOutOfScratchPutsItsOutputsBackToEvicted) {
  for (const std::string& heuristic : heuristic_names()) {
    SCOPED_TRACE(heuristic);
    Config config;
    config.budget_mode = BudgetMode::bytes;
    config.heuristic = heuristic;
    Runtime rt(config);
    std::vector<float> image(4 * 28 * 28);
    for (std::size_t i = 0; i < image.size(); ++i) image[i] = std::sin(0.1F * static_cast<float>(i));
    std::vector<float> weights(4 * 4 * 3 * 3);
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.05F * static_cast<float>(i % 7) - 0.1F;
    const Tensor x = rt.constant(TensorMeta{{1, 4, 28, 28}}, image);
    const Tensor w = rt.constant(TensorMeta{{4, 4, 3, 3}}, weights);
    const Attrs padded{{"padding", std::vector<std::int64_t>{1, 1}}};
    Tensor y = rt.call1(ops::conv2d(), {x, w}, padded);
    const std::vector<float> expected = y.to_host();
    ASSERT_TRUE(rt.evict(y));
    // Room for the inputs and the output, not for the column matrix (4 x 9 x 784 floats) the kernel asks for.
    rt.set_memory_budget(x.storage_bytes() + w.storage_bytes() + y.storage_bytes() + 4096);
    EXPECT_THROW((void)y.to_host(), OutOfMemory);
    EXPECT_FALSE(y.resident());
    EXPECT_THROW((void)y.to_host(), OutOfMemory);  // again: still evicted, not a half-made value
    rt.set_memory_budget(std::nullopt);
    EXPECT_EQ(y.to_host(), expected);
    y = Tensor();  // its last handle: the heuristic must not see it evicted twice
    const Tensor z = rt.call1(ops::relu(), {x});
    EXPECT_TRUE(z.resident());
  }
}

}  // namespace
}  // namespace dtr::test

// kernels/cuda/strided_walk.h, the walk the CUDA broadcasts, reductions and layout copies index with: its
// host side (dimension dropping and merging, the rank limit) and offsets(), the same code the device runs,
// against a direct row-major walk. Plain C++: runs in every build, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/strided_walk.h"
#include "test_helpers.h"

namespace dtr::test {
namespace {

using kernels::cuda::max_walk_rank;
using kernels::cuda::StridedWalk;
using Ints = std::vector<std::int64_t>;

StridedWalk<2> walk_of(const Ints& shape, const Ints& a, const Ints& b) {
  StridedWalk<2> walk;
  for (std::size_t d = 0; d < shape.size(); ++d) walk.append("test_op", shape[d], {a[d], b[d]});
  return walk;
}

Ints contiguous(const Ints& shape) {
  Ints strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

TEST(StridedWalk, MergesWhatIsContiguousOnEverySideAndDropsUnitDimensions) {
  // A contiguous copy is one dimension.
  const StridedWalk<2> copy = walk_of({2, 1, 3, 4}, contiguous({2, 1, 3, 4}), contiguous({2, 1, 3, 4}));
  ASSERT_EQ(copy.rank, 1);
  EXPECT_EQ(copy.shape[0], 24);
  EXPECT_EQ(copy.strides[0][0], 1);
  EXPECT_EQ(copy.strides[1][0], 1);
  EXPECT_EQ(copy.count(), 24);

  // A transpose [3, 4] -> [4, 3] merges nothing.
  const StridedWalk<2> transpose = walk_of({4, 3}, {1, 4}, {3, 1});
  ASSERT_EQ(transpose.rank, 2);
  EXPECT_EQ(transpose.shape[0], 4);
  EXPECT_EQ(transpose.shape[1], 3);

  // b [1, 3, 4] broadcast along dimension 0 of [5, 3, 4]: its last two dimensions merge, the broadcast one stays.
  const StridedWalk<2> broadcast = walk_of({5, 3, 4}, contiguous({5, 3, 4}), {0, 4, 1});
  ASSERT_EQ(broadcast.rank, 2);
  EXPECT_EQ(broadcast.shape[0], 5);
  EXPECT_EQ(broadcast.shape[1], 12);
  EXPECT_EQ(broadcast.strides[1][0], 0);

  // Rank 0 is one element; a dimension of 0 none.
  EXPECT_EQ(StridedWalk<1>{}.count(), 1);
  EXPECT_EQ(walk_of({3, 0, 2}, {0, 2, 1}, {0, 2, 1}).count(), 0);
}

TEST(StridedWalk, OffsetsAreThoseOfTheUnmergedRowMajorWalk) {
  std::mt19937_64 rng(7);
  const auto draw = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 300; ++trial) {
    const auto rank = static_cast<std::size_t>(draw(0, 6));
    Ints shape(rank);
    for (std::int64_t& s : shape) s = draw(1, 4);
    // Operand a: a permutation of a contiguous layout; b: contiguous with random broadcast dimensions.
    std::vector<std::size_t> perm(rank);
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    Ints permuted_shape(rank);
    for (std::size_t d = 0; d < rank; ++d) permuted_shape[d] = shape[perm[d]];
    const Ints permuted_strides = contiguous(permuted_shape);
    Ints a(rank);
    for (std::size_t d = 0; d < rank; ++d) a[perm[d]] = permuted_strides[d];
    Ints b = contiguous(shape);
    for (std::int64_t& s : b) s = draw(0, 2) == 0 ? 0 : s;

    const StridedWalk<2> walk = walk_of(shape, a, b);
    ASSERT_LE(walk.rank, static_cast<int>(rank));
    std::int64_t count = 1;
    for (const std::int64_t s : shape) count *= s;
    ASSERT_EQ(walk.count(), count);
    Ints index(rank, 0);
    for (std::int64_t i = 0; i < count; ++i) {
      std::int64_t expected[2] = {0, 0};
      for (std::size_t d = 0; d < rank; ++d) {
        expected[0] += index[d] * a[d];
        expected[1] += index[d] * b[d];
      }
      std::int64_t got[2];
      walk.offsets(i, got);
      ASSERT_EQ(got[0], expected[0]) << "trial " << trial << " element " << i;
      ASSERT_EQ(got[1], expected[1]) << "trial " << trial << " element " << i;
      for (std::size_t d = rank; d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
  }
}

TEST(StridedWalk, MoreDimensionsThanTheKernelTakesIsAClearError) {
  // Reversing 9 dimensions of 2 leaves nothing to merge.
  const Ints shape(max_walk_rank + 1, 2);
  Ints reversed = contiguous(shape);
  std::reverse(reversed.begin(), reversed.end());
  expect_error<InvalidArgument>([&] { walk_of(shape, reversed, contiguous(shape)); },
                                {"op 'test_op'", "at most 8 dimensions"});
  // The same rank contiguous merges to one dimension and is fine.
  EXPECT_EQ(walk_of(shape, contiguous(shape), contiguous(shape)).rank, 1);
}

}  // namespace
}  // namespace dtr::test

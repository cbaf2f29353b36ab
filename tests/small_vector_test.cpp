// dtr::SmallVector against std::vector: inline and heap states, every way in and out of each, and element
// lifetimes (a shared_ptr element counts its copies, so a leak or a double destruction shows).
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "dtr/small_vector.h"

namespace dtr::test {
namespace {

using Ints = SmallVector<int, 3>;
using Shared = SmallVector<std::shared_ptr<int>, 2>;

std::vector<int> as_vector(const Ints& v) { return std::vector<int>(v.begin(), v.end()); }

TEST(SmallVector, StaysInlineUpToItsCapacityThenMovesToTheHeap) {
  Ints v;
  EXPECT_TRUE(v.empty());
  EXPECT_TRUE(v.is_inline());
  EXPECT_EQ(v.capacity(), 3u);
  for (int i = 0; i < 3; ++i) v.push_back(i);
  EXPECT_TRUE(v.is_inline());
  v.push_back(3);
  EXPECT_FALSE(v.is_inline());
  EXPECT_GE(v.capacity(), 4u);
  EXPECT_EQ(as_vector(v), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(v.front(), 0);
  EXPECT_EQ(v.back(), 3);
  v.pop_back();
  EXPECT_EQ(v.size(), 3u);
}

TEST(SmallVector, ConstructorsAndComparison) {
  const Ints list{4, 5};
  const std::vector<int> source{1, 2, 3, 4, 5};
  const Ints range(source.begin(), source.end());
  const Ints filled(4, 7);
  EXPECT_EQ(as_vector(list), (std::vector<int>{4, 5}));
  EXPECT_EQ(as_vector(range), source);
  EXPECT_EQ(as_vector(filled), (std::vector<int>{7, 7, 7, 7}));
  EXPECT_EQ(list, (Ints{4, 5}));
  EXPECT_FALSE(list == (Ints{4, 5, 6}));
  EXPECT_FALSE(list == (Ints{4, 6}));
  const std::span<const int> view(range);
  EXPECT_EQ(view.size(), 5u);
  EXPECT_EQ(view[4], 5);
}

TEST(SmallVector, CopiesAndMovesFromEitherState) {
  for (int size : {0, 2, 3, 4, 9}) {
    SCOPED_TRACE(size);
    Ints original;
    for (int i = 0; i < size; ++i) original.push_back(i * 10);
    const std::vector<int> expected = as_vector(original);
    Ints copy(original);
    EXPECT_EQ(as_vector(copy), expected);
    Ints assigned{99};
    assigned = original;
    EXPECT_EQ(as_vector(assigned), expected);
    Ints moved(std::move(copy));
    EXPECT_EQ(as_vector(moved), expected);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty and inline, by contract
    EXPECT_TRUE(copy.is_inline());
    Ints move_assigned{1, 2, 3, 4, 5};  // on the heap before
    move_assigned = std::move(moved);
    EXPECT_EQ(as_vector(move_assigned), expected);
    EXPECT_TRUE(moved.empty());  // NOLINT(bugprone-use-after-move)
    copy.push_back(1);  // usable again
    EXPECT_EQ(copy.size(), 1u);
    Ints& self = assigned;
    assigned = self;
    EXPECT_EQ(as_vector(assigned), expected);
  }
}

TEST(SmallVector, EraseInsertResizeMatchStdVector) {
  std::mt19937 rng(7);
  Ints v;
  std::vector<int> model;
  for (int step = 0; step < 2000; ++step) {
    const unsigned action = rng() % 5;
    if (action == 0 && !model.empty()) {
      const auto at = static_cast<std::ptrdiff_t>(rng() % model.size());
      model.erase(model.begin() + at);
      v.erase(v.begin() + at);
    } else if (action == 1) {
      const auto at = static_cast<std::ptrdiff_t>(rng() % (model.size() + 1));
      const int value = static_cast<int>(rng() % 100);
      model.insert(model.begin() + at, value);
      EXPECT_EQ(*v.insert(v.begin() + at, value), value);
    } else if (action == 2) {
      const std::size_t size = rng() % 8;
      model.resize(size, -1);
      v.resize(size, -1);
    } else if (action == 3 && model.size() > 12) {
      model.clear();
      v.clear();
    } else {
      model.push_back(step);
      v.push_back(step);
    }
    ASSERT_EQ(as_vector(v), model) << "step " << step;
  }
}

TEST(SmallVector, ElementsAreDestroyedExactlyOnce) {
  auto token = std::make_shared<int>(42);
  {
    Shared v;
    for (int i = 0; i < 5; ++i) v.push_back(token);  // spills to the heap with live elements
    EXPECT_EQ(token.use_count(), 6);
    Shared copy = v;
    EXPECT_EQ(token.use_count(), 11);
    Shared moved = std::move(copy);
    EXPECT_EQ(token.use_count(), 11);
    Shared small{token};
    Shared small_moved = std::move(small);  // inline move: elements moved, not copied
    EXPECT_EQ(token.use_count(), 12);
    v.erase(v.begin() + 1);
    v.resize(1);
    EXPECT_EQ(token.use_count(), 8);
    moved = small_moved;
    EXPECT_EQ(token.use_count(), 4);
  }
  EXPECT_EQ(token.use_count(), 1);
}

}  // namespace
}  // namespace dtr::test

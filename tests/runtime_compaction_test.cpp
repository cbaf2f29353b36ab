// Compaction through the runtime: under a device budget, when nothing is left to evict and the free bytes are
// split, the allocator moves resident storages no op pins (the runtime copies them and points them at their
// new blocks); the program's values stay bitwise what they were, and without compaction it runs out of memory.
#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::int64_t kFloats = 512;  // 2 KiB

struct Outcome {
  std::uint64_t relocations = 0;
  std::vector<std::vector<float>> values;  // the six constants left, then the sums made after the move
};

// Fills both segments with eight 2 KiB constants, drops one in each (two 2 KiB holes, one per segment), asks
// for a 4 KiB constant (then drops it), and adds constants that may have moved.
Outcome run_fragmented(std::optional<std::uint64_t> budget, Compaction compaction) {
  Runtime rt(small_segment_config(budget, "dtr-eq", compaction));  // two 8 KiB segments: the whole budget
  std::vector<Tensor> c;
  for (int i = 0; i < 8; ++i) c.push_back(constant(rt, {kFloats}, static_cast<float>(i)));
  c[1] = Tensor();
  c[6] = Tensor();
  Tensor wide = rt.constant(TensorMeta{{2 * kFloats}});
  Outcome out;
  out.relocations = rt.stats().relocations;
  wide = Tensor();  // room for the sums
  for (int i : {0, 2, 3, 4, 5, 7}) out.values.push_back(c[static_cast<std::size_t>(i)].to_host());
  c[1] = rt.call1(ops::add(), {c[0], c[7]});
  out.values.push_back(c[1].to_host());
  out.values.push_back(rt.call1(ops::add(), {c[2], c[5]}).to_host());
  return out;
}

TEST(RuntimeCompaction, MovedConstantsKeepTheirValuesBitForBit) {
  const Outcome reference = run_fragmented(std::nullopt, Compaction::first);
  EXPECT_EQ(reference.relocations, 0u);
  const Outcome compacted = run_fragmented(16 * kKiB, Compaction::first);
  EXPECT_EQ(compacted.relocations, 1u);  // one 2 KiB constant beside a hole, into the other hole
  EXPECT_EQ(compacted.values, reference.values);
}

TEST(RuntimeCompaction, WithoutItTheSameProgramRunsOutOfMemory) {
  EXPECT_THROW(run_fragmented(16 * kKiB, Compaction::off), OutOfMemory);
}

// The values of `tensors`, one after another.
std::vector<float> values_of(std::initializer_list<const Tensor*> tensors) {
  std::vector<float> values;
  for (const Tensor* t : tensors) {
    const std::vector<float> v = t->to_host();
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

// An op's own inputs may move to make room for its output: segment A holds a, a hole, b and c; segment B a
// hole and a 6 KiB constant. concat(a, b) needs 4 KiB in one piece; only moving a or b (both pinned as its
// inputs, their addresses not yet taken) into B's hole opens it. Nothing can be evicted (all constants).
std::vector<float> concat_beside_its_inputs(std::optional<std::uint64_t> budget, std::uint64_t* relocations) {
  Runtime rt(small_segment_config(budget, "dtr-eq", Compaction::last_resort));
  const Tensor a = constant(rt, {kFloats}, 1.0F);
  Tensor hole_a = constant(rt, {kFloats}, 2.0F);
  const Tensor b = constant(rt, {kFloats}, 3.0F);
  const Tensor c = constant(rt, {kFloats}, 4.0F);
  Tensor hole_b = constant(rt, {kFloats}, 5.0F);
  const Tensor wide = constant(rt, {3 * kFloats}, 6.0F);
  hole_a = Tensor();
  hole_b = Tensor();
  const Tensor joined = rt.call1(ops::concat2(), {a, b});
  *relocations = rt.stats().relocations;
  return values_of({&joined, &a, &b, &c, &wide});
}

// A program run unbudgeted and under `budget`: under the budget it moves one storage, and its values are the
// unbudgeted run's, bit for bit.
using Program = std::vector<float> (*)(std::optional<std::uint64_t> budget, std::uint64_t* relocations);
void expect_one_move_and_the_same_values(Program program, std::uint64_t budget) {
  std::uint64_t relocations = 0;
  const std::vector<float> reference = program(std::nullopt, &relocations);
  EXPECT_EQ(relocations, 0u);
  const std::vector<float> compacted = program(budget, &relocations);
  EXPECT_EQ(relocations, 1u);
  EXPECT_EQ(compacted, reference);
}

TEST(RuntimeCompaction, AnOpsPinnedInputsMoveToMakeRoomForItsOutput) {
  expect_one_move_and_the_same_values(concat_beside_its_inputs, 16 * kKiB);
}

// A 2 KiB constant alone in an 8 KiB segment, an 8 KiB constant in a second, and 6 KiB of headroom: an 8 KiB
// constant finds 6 KiB free in one piece and 6 KiB to reserve, and nothing can be evicted. The last resort
// moves the small constant into a segment of its own size under the budget and the new one takes the first
// segment (docs/allocator.md, "Compaction"); every value stays what it was.
std::vector<float> wide_beside_a_small_one(std::optional<std::uint64_t> budget, std::uint64_t* relocations) {
  Runtime rt(small_segment_config(budget, "dtr-eq", Compaction::last_resort));
  const Tensor a = constant(rt, {kFloats}, 1.0F);
  const Tensor b = constant(rt, {4 * kFloats}, 2.0F);
  const Tensor wide = constant(rt, {4 * kFloats}, 3.0F);
  *relocations = rt.stats().relocations;
  return values_of({&a, &b, &wide});
}

TEST(RuntimeCompaction, TheLastResortMovesAStorageIntoANewSegmentUnderTheBudget) {
  expect_one_move_and_the_same_values(wide_beside_a_small_one, 22 * kKiB);
}

}  // namespace
}  // namespace dtr::test

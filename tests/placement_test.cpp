// Where the caching allocator places blocks does not depend on where its upstream put the segments: ties
// between free blocks of one size go to the older segment, and walks over segments go in creation order. So a
// run under a device budget makes the same decisions whatever addresses the host hands out (docs/allocator.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "test_resources.h"

namespace dtr::test {
namespace {

// Host memory carved from one arena, segments from its bottom up or from its top down: the same program sees
// the same memory in two address orders. Never reuses a range (the tests' programs reserve a few megabytes).
class ArenaResource final : public MemoryResource {
 public:
  ArenaResource(std::size_t bytes, bool top_down) : bytes_(bytes), top_down_(top_down) {
    if (::posix_memalign(&base_, kAlign, bytes) != 0) throw std::bad_alloc();
    next_ = top_down ? bytes : 0;
  }
  ~ArenaResource() override { std::free(base_); }  // NOLINT(cppcoreguidelines-no-malloc)
  ArenaResource(const ArenaResource&) = delete;
  ArenaResource& operator=(const ArenaResource&) = delete;

  std::size_t capacity() const override { return bytes_; }
  std::string name() const override { return top_down_ ? "arena(top down)" : "arena(bottom up)"; }
  bool host_accessible() const override { return true; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t /*alignment*/) override {
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    if (top_down_ ? size > next_ : size > bytes_ - next_) {
      throw OutOfMemory("arena: exhausted", {}, __FILE__, __LINE__);
    }
    if (top_down_) next_ -= size;
    void* p = static_cast<std::byte*>(base_) + next_;
    if (!top_down_) next_ += size;
    return p;
  }
  void do_deallocate(void* /*ptr*/, std::size_t /*bytes*/) override {}

 private:
  static constexpr std::size_t kAlign = 4096;
  std::size_t bytes_;
  bool top_down_;
  void* base_ = nullptr;
  std::size_t next_ = 0;
};

TEST(Placement, AmongFreeBlocksOfOneSizeTheOlderSegmentsBlockIsTaken) {
  for (bool top_down : {false, true}) {
    SCOPED_TRACE(top_down ? "segments top down" : "segments bottom up");
    ArenaResource arena(64 * MiB, top_down);
    CachingAllocator alloc(arena);
    // Two blocks of 12 MiB, each in a segment of its own (from 10 MiB up); then both free, of one size.
    void* first = alloc.allocate(12 * MiB);
    void* second = alloc.allocate(12 * MiB);
    EXPECT_EQ(first < second, !top_down);
    alloc.deallocate(second, 12 * MiB);
    alloc.deallocate(first, 12 * MiB);
    void* again = alloc.allocate(12 * MiB);
    EXPECT_EQ(again, first) << "the lower address won the tie";
    alloc.deallocate(again, 12 * MiB);
  }
}

TEST(Placement, ForEachBlockWalksSegmentsInCreationOrderAndTheSnapshotInAddressOrder) {
  ArenaResource arena(64 * MiB, /*top_down=*/true);
  CachingAllocator alloc(arena);
  std::vector<void*> made;
  // Two 1 MiB blocks fill a 2 MiB small segment: two segments.
  for (int i = 0; i < 4; ++i) made.push_back(alloc.allocate(MiB));
  std::vector<std::uintptr_t> starts;
  alloc.for_each_block(Pool::small, [&](const BlockInfo& block, bool segment_start) {
    if (segment_start) starts.push_back(block.address);
  });
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_GT(starts[0], starts[1]) << "top down: the first segment made lies higher, and is walked first";
  const MemorySnapshot snap = alloc.snapshot();
  ASSERT_EQ(snap.segments.size(), 2u);
  EXPECT_LT(snap.segments[0].address, snap.segments[1].address);
  for (void* p : made) alloc.deallocate(p, MiB);
}

struct ProgramRun {
  std::vector<std::vector<float>> reads;
  RuntimeStats stats;
  AllocatorStats allocator;
};

// A random program of fresh values and reads of old ones, under a device budget over `arena`.
ProgramRun run_program(std::uint64_t seed, std::optional<std::uint64_t> budget, bool top_down) {
  Config config = small_segments(deterministic_config(budget, BudgetMode::device, "forecast"));
  Runtime rt(config, std::make_unique<ArenaResource>(256 * MiB, top_down));
  std::mt19937_64 rng(seed);
  ProgramRun run;
  std::vector<Tensor> live;
  auto dim = [&] { return static_cast<std::int64_t>(std::uniform_int_distribution<int>(4, 24)(rng)); };
  const std::int64_t width = 16;
  std::vector<float> values(static_cast<std::size_t>(24 * width));
  for (float& v : values) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  Tensor x = rt.constant(TensorMeta{{24, width}}, values);
  for (int step = 0; step < 160; ++step) {
    const Tensor& a = live.empty() ? x : live[rng() % live.size()];
    const std::int64_t rows = std::min<std::int64_t>(dim(), a.shape()[0]);
    Tensor head = rt.view(a, {rows, width}, 0);
    switch (rng() % 3) {
      case 0: live.push_back(rt.call1(ops::relu(), {head})); break;
      case 1: live.push_back(rt.call1(ops::scale(), {head}, Attrs{{"factor", 0.75}})); break;
      default: live.push_back(rt.call1(ops::add(), {head, head})); break;
    }
    if (rng() % 5 == 0) run.reads.push_back(live[rng() % live.size()].to_host());
  }
  for (const Tensor& t : live) run.reads.push_back(t.to_host());
  run.stats = rt.stats();
  run.allocator = rt.allocator().stats();
  return run;
}

TEST(Placement, ARunUnderADeviceBudgetDecidesTheSameWhereverTheSegmentsLie) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(::testing::Message() << "program " << seed);
    const ProgramRun unbudgeted = run_program(seed, std::nullopt, false);
    const std::uint64_t budget = unbudgeted.allocator.reserved_bytes.peak * 2 / 5;
    const ProgramRun up = run_program(seed, budget, false);
    const ProgramRun down = run_program(seed, budget, true);
    ASSERT_GT(up.stats.evictions, 0u) << "the budget must make the runtime evict";
    EXPECT_EQ(up.stats.evictions, down.stats.evictions);
    EXPECT_EQ(up.stats.rematerializations, down.stats.rematerializations);
    EXPECT_EQ(up.stats.remat_compute, down.stats.remat_compute);
    EXPECT_EQ(up.allocator.reserved_bytes.peak, down.allocator.reserved_bytes.peak);
    EXPECT_EQ(up.allocator.num_device_allocations, down.allocator.num_device_allocations);
    ASSERT_EQ(up.reads.size(), unbudgeted.reads.size());
    for (std::size_t i = 0; i < up.reads.size(); ++i) {
      EXPECT_EQ(std::memcmp(up.reads[i].data(), unbudgeted.reads[i].data(), up.reads[i].size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(down.reads[i].data(), unbudgeted.reads[i].data(), up.reads[i].size() * sizeof(float)), 0);
    }
  }
}

}  // namespace
}  // namespace dtr::test

// Page moves (MemoryResource::move_pages): an expandable range's cached pages moved under a new block instead of
// unmapped and mapped again. The host moves the memory itself (no fault, no zeroing); the simulated GPU counts
// it; the allocator reaches the same reservations either way.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>

#include "test_resources.h"

namespace dtr::test {
namespace {

std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Whether this kernel moves pages (mremap with MREMAP_DONTUNMAP: Linux 5.7 and later); where it does not, the
// host's move_pages() moves nothing and the allocator unmaps and maps.
bool host_moves_pages() {
  auto host = make_host_resource();
  const std::size_t page = host->page_bytes();
  auto* base = static_cast<char*>(host->reserve_range(4 * page));
  const bool mapped = host->map(base, page);
  const std::size_t moved = mapped ? host->move_pages(base, base + 2 * page, page) : 0;
  if (mapped) host->unmap(moved > 0 ? base + 2 * page : base, page);
  host->release_range(base, 4 * page);
  return moved > 0;
}

TEST(PageMoves, TheHostMovesTheMemoryWithItsContents) {
  if (!host_moves_pages()) GTEST_SKIP() << "this kernel has no mremap(MREMAP_DONTUNMAP) (Linux 5.7)";
  auto host = make_host_resource();
  const std::size_t page = host->page_bytes();
  void* base = host->reserve_range(16 * page);
  auto* bytes = static_cast<unsigned char*>(base);
  ASSERT_TRUE(host->map(bytes + page, 2 * page));
  std::memset(bytes + page, 0xab, 2 * page);
  EXPECT_EQ(host->move_pages(bytes + page, bytes + 8 * page, 2 * page), 2 * page);
  EXPECT_EQ(bytes[8 * page], 0xab);          // the same memory, not a fresh page
  EXPECT_EQ(bytes[10 * page - 1], 0xab);
  ASSERT_TRUE(host->map(bytes + page, 2 * page));  // the old place is unmapped: it maps again, fresh
  EXPECT_EQ(bytes[page], 0);
  host->unmap(bytes + page, 2 * page);
  host->unmap(bytes + 8 * page, 2 * page);
  host->release_range(base, 16 * page);  // nothing left mapped
}

// mremap moves within one kernel mapping: a run mapped by two calls moves in two steps, each a prefix.
TEST(PageMoves, TheHostMovesOneMappedRunAtATime) {
  if (!host_moves_pages()) GTEST_SKIP() << "this kernel has no mremap(MREMAP_DONTUNMAP) (Linux 5.7)";
  auto host = make_host_resource();
  const std::size_t page = host->page_bytes();
  void* base = host->reserve_range(16 * page);
  auto* bytes = static_cast<unsigned char*>(base);
  ASSERT_TRUE(host->map(bytes, 2 * page));
  ASSERT_TRUE(host->map(bytes + 2 * page, 2 * page));
  bytes[0] = 1;
  bytes[2 * page] = 2;
  EXPECT_EQ(host->move_pages(bytes, bytes + 8 * page, 4 * page), 2 * page);
  EXPECT_EQ(host->move_pages(bytes + 2 * page, bytes + 10 * page, 2 * page), 2 * page);
  EXPECT_EQ(bytes[8 * page], 1);
  EXPECT_EQ(bytes[10 * page], 2);
  host->unmap(bytes + 8 * page, 4 * page);
  host->release_range(base, 16 * page);
}

TEST(PageMoves, MisuseIsAnInvalidArgument) {
  auto host = make_host_resource();
  const std::size_t page = host->page_bytes();
  void* base = host->reserve_range(8 * page);
  auto* bytes = static_cast<unsigned char*>(base);
  ASSERT_TRUE(host->map(bytes, 2 * page));
  ASSERT_TRUE(host->map(bytes + 4 * page, page));
  EXPECT_THROW(host->move_pages(bytes + 2 * page, bytes + 6 * page, page), InvalidArgument);  // from: unmapped
  EXPECT_THROW(host->move_pages(bytes, bytes + 4 * page, page), InvalidArgument);            // to: mapped
  EXPECT_THROW(host->move_pages(bytes, bytes + 7 * page, 2 * page), InvalidArgument);        // to: past the range
  EXPECT_THROW(host->move_pages(bytes, bytes + 6 * page + 1, page), InvalidArgument);        // to: not on a page
  EXPECT_THROW(host->map(bytes + page, 2 * page), InvalidArgument);  // over a mapped page
  EXPECT_EQ(bytes[0], 0);  // nothing moved
  host->unmap(bytes, 2 * page);
  host->unmap(bytes + 4 * page, page);
  host->release_range(base, 8 * page);

  auto device = make_simulated_resource(std::size_t{1} << 32);
  CountingResource counting(*device);  // maps no pages
  EXPECT_THROW(counting.move_pages(base, base, page), InvalidArgument);
}

TEST(PageMoves, TheSimulatedGpuMovesWithinItsCapacity) {
  auto device = make_simulated_resource(8 * MiB);
  void* base = device->reserve_range(64 * MiB);
  auto* at = static_cast<char*>(base);
  ASSERT_TRUE(device->map(at, 6 * MiB));
  EXPECT_EQ(device->move_pages(at, at + 32 * MiB, 6 * MiB), 6 * MiB);
  EXPECT_FALSE(device->map(at, 4 * MiB));  // still 6 of the 8 MiB mapped
  device->unmap(at + 32 * MiB, 6 * MiB);
  device->release_range(base, 64 * MiB);
}

// Forwards page mapping to an upstream, and its moves too unless `moves` is false (then it moves nothing, as
// the default: the allocator unmaps and maps); counts the pages moved.
class PageForwarder final : public MemoryResource {
 public:
  PageForwarder(MemoryResource& upstream, bool moves) : upstream_(upstream), moves_(moves) {}
  std::size_t capacity() const override { return upstream_.capacity(); }
  std::string name() const override { return "forwarder(" + upstream_.name() + ")"; }
  bool host_accessible() const override { return upstream_.host_accessible(); }
  bool maps_pages() const override { return true; }
  std::size_t page_bytes() const override { return upstream_.page_bytes(); }
  void* reserve_range(std::size_t bytes) override { return upstream_.reserve_range(bytes); }
  void release_range(void* base, std::size_t bytes) override { upstream_.release_range(base, bytes); }
  bool map(void* ptr, std::size_t bytes) override { return upstream_.map(ptr, bytes); }
  void unmap(void* ptr, std::size_t bytes) override { upstream_.unmap(ptr, bytes); }
  std::size_t move_pages(void* from, void* to, std::size_t bytes) override {
    const std::size_t moved = moves_ ? upstream_.move_pages(from, to, bytes) : 0;
    moved_bytes += moved;
    return moved;
  }
  std::size_t moved_bytes = 0;

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override { return upstream_.allocate(bytes, alignment); }
  void do_deallocate(void* ptr, std::size_t bytes) override { upstream_.deallocate(ptr, bytes); }

 private:
  MemoryResource& upstream_;
  bool moves_;
};

std::unique_ptr<CachingAllocator> expandable(MemoryResource& upstream, std::optional<std::uint64_t> budget) {
  CachingAllocatorOptions options;
  options.expandable_segments = true;
  options.budget_bytes = budget;
  return std::make_unique<CachingAllocator>(upstream, options);
}

// Under a 5 MiB budget, a 3 MiB block after two 2 MiB ones (the first freed) needs the first's cached pages:
// on the host they move under the new block, contents and all; unmapped and mapped again, they would be zeros.
TEST(PageMoves, TheAllocatorMovesCachedPagesUnderANewBlock) {
  if (!host_moves_pages()) GTEST_SKIP() << "this kernel has no mremap(MREMAP_DONTUNMAP) (Linux 5.7)";
  auto host = make_host_resource();
  for (const bool moves : {true, false}) {
    SCOPED_TRACE(moves ? "moving" : "not moving");
    PageForwarder upstream(*host, moves);
    auto alloc = expandable(upstream, 5 * MiB);
    void* a = alloc->allocate(2 * MiB);
    void* b = alloc->allocate(2 * MiB);
    std::memset(a, 0x5a, 2 * MiB);
    alloc->free(a);
    const std::uint64_t unmapped_before = alloc->stats().num_device_frees;
    void* c = alloc->allocate(3 * MiB);
    EXPECT_EQ(addr(c), addr(b) + 2 * MiB);  // a's hole is too small
    EXPECT_EQ(alloc->stats().reserved_bytes.current, 5 * MiB);
    EXPECT_EQ(alloc->stats().num_device_frees, unmapped_before + 1);  // a's run left its place either way
    const auto* first = static_cast<const unsigned char*>(c);
    EXPECT_EQ(first[0], moves ? 0x5a : 0);
    EXPECT_EQ(first[2 * MiB - 1], moves ? 0x5a : 0);
    EXPECT_EQ(first[2 * MiB], 0);  // past what moved: fresh memory
    EXPECT_EQ(upstream.moved_bytes, moves ? 2 * MiB : 0);
    alloc->free(b);
    alloc->free(c);
    alloc->empty_cache();
    EXPECT_EQ(alloc->stats().reserved_bytes.current, 0u);
  }
}

// The same random program through an allocator whose upstream moves pages and one whose upstream cannot: every
// request lands at the same address or fails in both, with the same reservations after every step. Half the
// seeds have a device a little smaller than the budget, so that mapping can fail after pages moved.
TEST(PageMoves, MovingChangesNoReservation) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    const std::size_t capacity = seed % 2 == 0 ? std::uniform_int_distribution<std::size_t>(12, 40)(rng) * MiB
                                               : std::size_t{64} << 30;
    auto moving_device = make_simulated_resource(capacity);
    auto still_device = make_simulated_resource(capacity);
    PageForwarder mover(*moving_device, true);
    PageForwarder still(*still_device, false);
    // A small device gets a budget a little above it: a request then makes room (moving pages) and finds the
    // device full for the rest.
    const std::uint64_t budget = capacity < (std::size_t{1} << 30)
                                     ? capacity + std::uniform_int_distribution<std::uint64_t>(2, 6)(rng) * MiB
                                     : std::uniform_int_distribution<std::uint64_t>(16, 96)(rng) * MiB;
    auto moving = expandable(mover, budget);
    auto unmapping = expandable(still, budget);
    std::map<std::uintptr_t, std::size_t> live;
    int failures = 0;
    for (int step = 0; step < 6000; ++step) {
      const int action = std::uniform_int_distribution<int>(0, 99)(rng);
      if (!live.empty() && action < 45) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        moving->deallocate(reinterpret_cast<void*>(it->first), it->second);
        unmapping->deallocate(reinterpret_cast<void*>(it->first), it->second);
        live.erase(it);
      } else if (action < 99) {
        const std::size_t bytes = action % 4 == 0 ? 1 + rng() % MiB : MiB + 1 + rng() % (12 * MiB);
        void* p = nullptr;
        void* q = nullptr;
        try {
          p = moving->allocate(bytes);
        } catch (const OutOfMemory&) {
        }
        try {
          q = unmapping->allocate(bytes);
        } catch (const OutOfMemory&) {
        }
        ASSERT_EQ(p, q) << "step " << step;
        if (p != nullptr) live.emplace(addr(p), bytes);
        failures += p == nullptr ? 1 : 0;
      } else {
        moving->empty_cache();
        unmapping->empty_cache();
      }
      const AllocatorStats a = moving->stats();
      const AllocatorStats b = unmapping->stats();
      ASSERT_EQ(a.reserved_bytes.current, b.reserved_bytes.current) << "step " << step;
      ASSERT_EQ(a.reserved_bytes.peak, b.reserved_bytes.peak) << "step " << step;
    }
    EXPECT_GT(failures, 50) << "the budget was never pressed";
    EXPECT_GT(mover.moved_bytes, 0u) << "no page ever moved";
    for (const auto& [p, bytes] : live) {
      moving->deallocate(reinterpret_cast<void*>(p), bytes);
      unmapping->deallocate(reinterpret_cast<void*>(p), bytes);
    }
  }
}

}  // namespace
}  // namespace dtr::test

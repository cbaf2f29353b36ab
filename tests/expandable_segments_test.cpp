// Expandable segments (CachingAllocatorOptions::expandable_segments): the pages behind blocks, what the budget
// counts, the cache of idle pages, the upstream's page mapping, and random programs against an exact model.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <set>

#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::size_t kPage = std::size_t{2} << 20;  // the simulated GPU's

std::unique_ptr<CachingAllocator> expandable(MemoryResource& upstream, std::optional<std::uint64_t> budget = {}) {
  CachingAllocatorOptions options;
  options.expandable_segments = true;
  options.budget_bytes = budget;
  return std::make_unique<CachingAllocator>(upstream, options);
}

std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(ExpandableSegments, ReservedCountsThePagesUnderBlocks) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  auto alloc = expandable(*device);
  void* a = alloc->allocate(3 * MiB);  // pages 0-1
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 4 * MiB);
  void* b = alloc->allocate(3 * MiB);  // right after a: pages 1-2
  EXPECT_EQ(addr(b), addr(a) + 3 * MiB);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 6 * MiB);
  EXPECT_EQ(alloc->stats().segments.current, 1u);  // the large pool's range
  const MemorySnapshot snap = alloc->snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_TRUE(snap.segments[0].expandable);
  EXPECT_EQ(snap.segments[0].mapped_bytes, 6 * MiB);
  alloc->free(a);  // page 0 is a's alone: idle, still mapped (the cache); page 1 is b's too
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 6 * MiB);
  alloc->empty_cache();
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 4 * MiB);
  alloc->free(b);
  alloc->empty_cache();
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 0u);
}

// Four 5 MiB blocks fill a 20 MiB budget; freeing the first and third leaves two 5 MiB holes. Classic segments
// cannot serve 8 MiB (no hole fits, no room for a segment); expandable ones unmap the holes' whole pages and
// map the request's.
TEST(ExpandableSegments, ServeWhatHolesInOneSegmentCannot) {
  for (const bool expand : {false, true}) {
    SCOPED_TRACE(expand ? "expandable" : "classic");
    auto device = make_simulated_resource(std::size_t{1} << 32);
    CachingAllocatorOptions options;
    options.expandable_segments = expand;
    options.budget_bytes = 20 * MiB;
    CachingAllocator alloc(*device, options);
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(alloc.allocate(5 * MiB));
    alloc.free(blocks[0]);
    alloc.free(blocks[2]);
    if (!expand) {
      EXPECT_THROW(alloc.allocate(8 * MiB), OutOfMemory);
    } else {
      void* p = alloc.allocate(8 * MiB);
      EXPECT_LE(alloc.stats().reserved_bytes.peak, 20 * MiB);
      EXPECT_EQ(alloc.stats().reserved_bytes.current, 20 * MiB);  // pages 2-4, 7-9 and the request's four
      alloc.free(p);
    }
    alloc.free(blocks[1]);
    alloc.free(blocks[3]);
  }
}

TEST(ExpandableSegments, ANewBudgetUnmapsIdlePagesAndRefusesWhatBlocksHold) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  auto alloc = expandable(*device);
  void* a = alloc->allocate(8 * MiB);
  void* b = alloc->allocate(4 * MiB);
  alloc->free(a);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 12 * MiB);
  alloc->set_budget(6 * MiB);  // three of a's pages go: as many as the budget needs
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 6 * MiB);
  EXPECT_THROW(alloc->set_budget(2 * MiB), InvalidArgument);  // b's pages are in use
  EXPECT_EQ(alloc->budget(), std::optional<std::uint64_t>(6 * MiB));
  alloc->free(b);
}

class FreeOne final : public Reclaimer {
 public:
  FreeOne(CachingAllocator& alloc, std::vector<void*>& victims) : alloc_(alloc), victims_(victims) {}
  std::size_t reclaim(const ReclaimRequest&) override {
    if (victims_.empty()) return 0;
    alloc_.free(victims_.back());
    victims_.pop_back();
    calls += 1;
    return 1;
  }
  int calls = 0;

 private:
  CachingAllocator& alloc_;
  std::vector<void*>& victims_;
};

// Under a budget the reclaimer frees blocks until the request's pages fit; each freed 2 MiB-aligned block gives
// its pages back, so as many are freed as the bytes need, wherever they lie.
TEST(ExpandableSegments, TheReclaimerFreesUntilThePagesFit) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  auto alloc = expandable(*device, 16 * MiB);
  std::vector<void*> held;
  for (int i = 0; i < 8; ++i) held.push_back(alloc->allocate(2 * MiB));
  std::vector<void*> victims{held[1], held[3], held[5]};  // scattered: no two adjacent
  FreeOne reclaimer(*alloc, victims);
  alloc->set_reclaimer(&reclaimer);
  void* p = alloc->allocate(5 * MiB);  // three pages at the end of the range
  EXPECT_EQ(reclaimer.calls, 3);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 16 * MiB);
  alloc->set_reclaimer(nullptr);
  alloc->free(p);
  for (int i : {0, 2, 4, 6, 7}) alloc->free(held[i]);
}

TEST(ExpandableSegments, AnUpstreamThatMapsNoPagesGetsClassicSegments) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  CountingResource counting(*device);  // does not override maps_pages()
  auto alloc = expandable(counting);
  void* p = alloc->allocate(3 * MiB);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 20 * MiB);  // a classic large segment
  EXPECT_FALSE(alloc->snapshot().segments.at(0).expandable);
  EXPECT_THROW(counting.reserve_range(kPage), InvalidArgument);
  EXPECT_THROW(counting.map(p, kPage), InvalidArgument);
  alloc->free(p);
}

TEST(ExpandableSegments, PageSizeMustMatchTheUpstreams) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  CachingAllocatorOptions options;
  options.expandable_segments = true;
  options.page_bytes = 64 * KiB;  // below the simulated GPU's 2 MiB
  try {
    CachingAllocator alloc(*device, options);
    FAIL() << "accepted 64 KiB pages over 2 MiB ones";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("page_bytes"), std::string::npos) << e.what();
  }
  options.page_bytes = 4 * MiB;  // a multiple: accepted
  CachingAllocator alloc(*device, options);
  alloc.free(alloc.allocate(3 * MiB));  // one 4 MiB page, cached
  EXPECT_EQ(alloc.stats().reserved_bytes.current, 4 * MiB);
}

TEST(ExpandableSegments, HostPagesAreMemoryWhileMappedAndZeroAfterAMapAgain) {
  auto host = make_host_resource();
  ASSERT_TRUE(host->maps_pages());
  const std::size_t page = host->page_bytes();
  void* base = host->reserve_range(16 * page);
  EXPECT_EQ(addr(base) % (2 * MiB), 0u);
  auto* bytes = static_cast<unsigned char*>(base);
  ASSERT_TRUE(host->map(bytes + page, 2 * page));
  std::memset(bytes + page, 0xab, 2 * page);
  EXPECT_EQ(bytes[2 * page + 1], 0xab);
  EXPECT_THROW(host->release_range(base, 16 * page), InvalidArgument);  // pages still mapped
  host->unmap(bytes + page, 2 * page);
  ASSERT_TRUE(host->map(bytes + page, 2 * page));
  EXPECT_EQ(bytes[page], 0);  // the old contents went back with the pages
  host->unmap(bytes + page, 2 * page);
  EXPECT_THROW(host->map(bytes + 1, page), InvalidArgument);              // not on a page
  EXPECT_THROW(host->map(bytes + 16 * page, page), InvalidArgument);      // past the range
  EXPECT_THROW(host->release_range(bytes + page, 15 * page), InvalidArgument);  // not a range's start
  host->release_range(base, 16 * page);
}

TEST(ExpandableSegments, SimulatedMappingCountsAgainstCapacity) {
  auto device = make_simulated_resource(8 * MiB);
  void* base = device->reserve_range(64 * MiB);  // address space: not capacity
  auto* at = static_cast<char*>(base);
  ASSERT_TRUE(device->map(at, 6 * MiB));
  EXPECT_FALSE(device->map(at + 6 * MiB, 4 * MiB));  // 10 MiB would pass the 8 MiB device
  EXPECT_THROW(device->allocate(4 * MiB), OutOfMemory);  // allocations share the capacity with mapped pages
  EXPECT_THROW(device->unmap(at, 8 * MiB), InvalidArgument);  // more than is mapped
  device->unmap(at, 6 * MiB);
  device->release_range(base, 64 * MiB);
}

TEST(ExpandableSegments, TheUpstreamFullAfterTheBudgetGivesTheCacheBack) {
  auto device = make_simulated_resource(12 * MiB);  // the device is smaller than the budget
  auto alloc = expandable(*device, 64 * MiB);
  void* a = alloc->allocate(8 * MiB);  // pages 0-3
  void* c = alloc->allocate(2 * MiB);  // page 4
  alloc->free(a);                      // pages 0-3 idle
  void* b = alloc->allocate(9 * MiB);  // a's hole is too small: pages 5-9, which the device has room for only
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 12 * MiB);  // once the idle pages went back
  EXPECT_THROW(alloc->allocate(4 * MiB), OutOfMemory);  // the device is full, whatever the budget
  alloc->free(b);
  alloc->free(c);
}

// Under a 5 MiB budget 4.5 MiB needs three 2 MiB pages wherever it lands: too large at once, no eviction tried.
TEST(ExpandableSegments, ARequestWhosePagesPassTheBudgetIsTooLargeAtOnce) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  auto alloc = expandable(*device, 5 * MiB);
  std::vector<void*> victims{alloc->allocate(MiB / 2)};
  FreeOne reclaimer(*alloc, victims);
  alloc->set_reclaimer(&reclaimer);
  try {
    alloc->allocate(4 * MiB + MiB / 2);
    FAIL() << "served 6 MiB of pages under a 5 MiB budget";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the budget"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reclaimer.calls, 0);
  alloc->set_reclaimer(nullptr);
  alloc->free(victims.at(0));          // its small segment stays cached
  void* p = alloc->allocate(4 * MiB);  // two pages: fit once the empty small segment goes
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 4 * MiB);
  alloc->free(p);
}

// A request that cannot fit even with every cached page unmapped leaves the cache alone.
TEST(ExpandableSegments, NothingIsGivenBackForNothing) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  auto alloc = expandable(*device, 10 * MiB);
  void* a = alloc->allocate(4 * MiB);  // pages 0-1
  void* b = alloc->allocate(2 * MiB);  // page 2
  alloc->free(a);                      // pages 0-1 idle: 6 MiB mapped
  EXPECT_THROW(alloc->allocate(9 * MiB), OutOfMemory);  // pages 3-7: 10 MiB more, 8 MiB could be had
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 6 * MiB);
  void* c = alloc->allocate(3 * MiB);  // a's pages serve it, still mapped
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 6 * MiB);
  alloc->free(c);
  alloc->free(b);
}

// The device itself full (no budget): a request of either pool gives back both caches, cached pages and empty
// small segments.
TEST(ExpandableSegments, AFullDeviceTakesBackBothCaches) {
  {
    auto device = make_simulated_resource(12 * MiB);
    auto alloc = expandable(*device);
    alloc->free(alloc->allocate(12 * MiB));  // six cached pages fill the device
    void* p = alloc->allocate(KiB);          // a small segment: the pages must go
    EXPECT_EQ(alloc->stats().reserved_bytes.current, 2 * MiB);
    alloc->free(p);
  }
  {
    auto device = make_simulated_resource(12 * MiB);
    auto alloc = expandable(*device);
    alloc->free(alloc->allocate(KiB));    // an empty small segment
    void* p = alloc->allocate(12 * MiB);  // six pages: the segment must go
    EXPECT_EQ(alloc->stats().reserved_bytes.current, 12 * MiB);
    alloc->free(p);
  }
}

// Maps pages but has no address space to give: the allocator falls back to classic segments.
class NoRanges final : public MemoryResource {
 public:
  explicit NoRanges(MemoryResource& upstream) : upstream_(upstream) {}
  std::size_t capacity() const override { return upstream_.capacity(); }
  std::string name() const override { return "no-ranges"; }
  bool host_accessible() const override { return false; }
  bool maps_pages() const override { return true; }
  std::size_t page_bytes() const override { return kPage; }
  void* reserve_range(std::size_t bytes) override {
    reserve_calls += 1;
    throw OutOfMemory("no-ranges: no address space for " + std::to_string(bytes) + " bytes", {}, __FILE__, __LINE__);
  }
  int reserve_calls = 0;

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override { return upstream_.allocate(bytes, alignment); }
  void do_deallocate(void* ptr, std::size_t bytes) override { upstream_.deallocate(ptr, bytes); }

 private:
  MemoryResource& upstream_;
};

TEST(ExpandableSegments, AnUpstreamThatCannotReserveARangeGetsClassicSegments) {
  auto device = make_simulated_resource(std::size_t{1} << 32);
  NoRanges upstream(*device);
  auto alloc = expandable(upstream);
  void* p = alloc->allocate(3 * MiB);
  void* q = alloc->allocate(3 * MiB);
  EXPECT_EQ(alloc->stats().reserved_bytes.current, 20 * MiB);  // one classic large segment holds both
  EXPECT_FALSE(alloc->snapshot().segments.at(0).expandable);
  EXPECT_EQ(upstream.reserve_calls, 1);  // asked once, not at every request
  alloc->free(p);
  alloc->free(q);
}

// ---- random programs against an exact model ----

// The pages [first, end) a block touches, in pages from the range's start.
void add_pages(std::set<std::size_t>& pages, std::uintptr_t start, std::uintptr_t base, std::size_t size) {
  for (std::size_t p = (start - base) / kPage; p <= (start + size - 1 - base) / kPage; ++p) pages.insert(p);
}

// Whether the request must be served: then, and only then, is it. Large: where best fit puts it in the range,
// and whether the pages under allocated large blocks and under that place, with the small segments in use,
// fit the budget. Small (classic segments): a free block that fits, or room for a segment of exactly the
// request beside the pages in use and the small segments in use (cached pages and empty segments go first).
bool servable(const MemorySnapshot& snap, std::size_t rounded, std::optional<std::uint64_t> budget) {
  const Pool pool = rounded <= MiB ? Pool::small : Pool::large;
  std::set<std::size_t> used;  // pages of the large range
  std::uint64_t small_in_use = 0;
  const BlockInfo* best = nullptr;
  std::uintptr_t best_base = 0;
  for (const SegmentInfo& segment : snap.segments) {
    if (!segment.expandable) {
      const bool empty = segment.blocks.size() == 1 && !segment.blocks[0].allocated;
      if (!empty) small_in_use += segment.size;
    }
    for (const BlockInfo& b : segment.blocks) {
      if (b.allocated && segment.expandable) add_pages(used, b.address, segment.address, b.size);
      if (segment.pool == pool && !b.allocated && b.size >= rounded &&
          (best == nullptr || b.size < best->size || (b.size == best->size && b.address < best->address))) {
        best = &b;
        best_base = segment.address;
      }
    }
  }
  if (pool == Pool::small) {
    if (best != nullptr) return true;
    return !budget || used.size() * kPage + small_in_use + rounded <= *budget;
  }
  if (best == nullptr) return false;  // the range does not exist yet: the first request makes it
  const bool split = best->size - rounded > MiB;
  add_pages(used, best->address, best_base, split ? rounded : best->size);
  return !budget || used.size() * kPage + small_in_use <= *budget;
}

TEST(ExpandableSegments, RandomProgramsAgainstTheExactModel) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto device = make_simulated_resource(std::size_t{64} << 30);
    std::optional<std::uint64_t> budget = std::uniform_int_distribution<std::uint64_t>(16, 128)(rng) * MiB;
    auto alloc = expandable(*device, budget);
    alloc->free(alloc->allocate(2 * MiB));  // the range exists from here on
    std::map<std::uintptr_t, std::size_t> live;
    int ooms = 0;
    for (int step = 0; step < 8000; ++step) {
      const int action = std::uniform_int_distribution<int>(0, 99)(rng);
      if (!live.empty() && action < 45) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        alloc->deallocate(reinterpret_cast<void*>(it->first), it->second);
        live.erase(it);
      } else if (action < 97) {
        const bool small = action % 3 != 0;
        const std::size_t bytes = small ? 1 + rng() % MiB : MiB + 1 + rng() % (12 * MiB);
        const bool must = servable(alloc->snapshot(), (bytes + 511) / 512 * 512, budget);
        try {
          void* p = alloc->allocate(bytes);
          ASSERT_TRUE(must) << "served what the pages could not hold, step " << step;
          live.emplace(addr(p), bytes);
        } catch (const OutOfMemory& e) {
          ASSERT_FALSE(must) << "false OutOfMemory at step " << step << ": " << e.what();
          ++ooms;
        }
      } else if (action < 99) {
        alloc->empty_cache();
      } else {
        const std::uint64_t proposed = std::uniform_int_distribution<std::uint64_t>(8, 128)(rng) * MiB;
        try {
          alloc->set_budget(proposed);
          budget = proposed;
          alloc->reset_peak_stats();
        } catch (const InvalidArgument&) {
          ASSERT_GT(alloc->stats().reserved_bytes.current, proposed);
        }
      }
      const MemorySnapshot snap = alloc->snapshot();
      std::uint64_t mapped = 0;
      std::uint64_t allocated = 0;
      std::uint64_t under_blocks = 0;
      for (const SegmentInfo& segment : snap.segments) {
        ASSERT_EQ(segment.expandable, segment.pool == Pool::large);
        mapped += segment.mapped_bytes;
        std::set<std::size_t> pages;
        for (const BlockInfo& b : segment.blocks) {
          if (!b.allocated) continue;
          allocated += b.size;
          if (segment.expandable) add_pages(pages, b.address, segment.address, b.size);
        }
        under_blocks += segment.expandable ? pages.size() * kPage : segment.size;
      }
      ASSERT_EQ(snap.stats.reserved_bytes.current, mapped);
      ASSERT_GE(mapped, under_blocks);
      ASSERT_EQ(snap.stats.allocated_bytes.current, allocated);
      ASSERT_LE(snap.stats.reserved_bytes.current, *budget);
      ASSERT_LE(snap.stats.reserved_bytes.peak, *budget);
      if (action >= 97 && action < 99) {
        ASSERT_EQ(mapped, under_blocks) << "empty_cache kept idle pages";
      }
    }
    EXPECT_GT(ooms, 50) << "the budget was never pressed";
    for (const auto& [p, bytes] : live) alloc->deallocate(reinterpret_cast<void*>(p), bytes);
    alloc->empty_cache();
    EXPECT_EQ(alloc->stats().reserved_bytes.current, 0u);
  }
}

}  // namespace
}  // namespace dtr::test

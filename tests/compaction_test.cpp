// The caching allocator's compaction: when the Reclaimer frees nothing more, blocks it allows to move are
// copied out of a request's way, the cheapest clearing first; blocks it does not allow never move.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <string>

#include "test_resources.h"

namespace dtr::test {
namespace {

// Owns tagged host blocks filled with a byte pattern; evicts nothing, moves what it is told (copying the
// bytes, as the runtime does), and can be told to refuse moves or to fail the n-th one.
class MovingReclaimer final : public Reclaimer {
 public:
  struct Object {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    unsigned char pattern = 0;
  };

  explicit MovingReclaimer(CachingAllocator& alloc) : alloc_(alloc) { alloc_.set_reclaimer(this); }
  ~MovingReclaimer() override {
    alloc_.set_reclaimer(nullptr);
    for (auto& [tag, o] : objects) alloc_.free(o.ptr);
  }

  OwnerTag make(std::size_t bytes) {
    const OwnerTag tag = next_tag_++;
    Object o{alloc_.allocate(bytes), bytes, static_cast<unsigned char>(tag)};
    std::memset(o.ptr, o.pattern, bytes);
    alloc_.set_owner(o.ptr, tag);
    objects[tag] = o;
    return tag;
  }
  void drop(OwnerTag tag) {
    alloc_.free(objects.at(tag).ptr);
    objects.erase(tag);
  }
  bool intact(OwnerTag tag) const {
    const Object& o = objects.at(tag);
    const auto* bytes = static_cast<const unsigned char*>(o.ptr);
    for (std::size_t i = 0; i < o.bytes; ++i) {
      if (bytes[i] != o.pattern) return false;
    }
    return true;
  }

  // Frees the objects marked evictable, one per call, oldest first.
  std::size_t reclaim(const ReclaimRequest&) override {
    reclaims += 1;
    if (evictable.empty()) return 0;
    const OwnerTag victim = evictable.front();
    evictable.erase(evictable.begin());
    drop(victim);
    return 1;
  }
  bool movable(OwnerTag owner) const override {
    EXPECT_NE(owner, 0u);
    return allow_moves;
  }
  void move(OwnerTag owner, void* from, void* to, std::size_t bytes) override {
    moves += 1;
    if (moves == fail_at_move) throw DeviceError("the copy failed", __FILE__, __LINE__);
    Object& o = objects.at(owner);
    EXPECT_EQ(o.ptr, from);
    EXPECT_EQ(o.bytes, bytes);
    std::memcpy(to, from, bytes);
    std::memset(from, 0xEE, bytes);  // the old block is garbage from now on
    o.ptr = to;
  }

  std::map<OwnerTag, Object> objects;
  std::vector<OwnerTag> evictable;
  bool allow_moves = true;
  int moves = 0;
  int reclaims = 0;
  int fail_at_move = -1;

 private:
  CachingAllocator& alloc_;
  OwnerTag next_tag_ = 1;
};

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

CachingAllocatorOptions budget_of(std::uint64_t bytes, Compaction compaction = Compaction::last_resort) {
  CachingAllocatorOptions o;
  o.budget_bytes = bytes;
  o.compaction = compaction;
  return o;
}

// A caching allocator over host memory under `options`, with a MovingReclaimer registered.
struct Host {
  explicit Host(const CachingAllocatorOptions& options) : alloc(*host, options), reclaimer(alloc) {}
  // Every object still holds its own bytes.
  void expect_intact() const {
    for (const auto& [tag, o] : reclaimer.objects) EXPECT_TRUE(reclaimer.intact(tag)) << "object " << tag;
  }
  std::unique_ptr<MemoryResource> host = make_host_resource();
  CachingAllocator alloc;
  MovingReclaimer reclaimer;
};

// Two full 2 MiB small segments with a 512 KiB hole in each: no 1 MiB block is free, and the budget holds no
// third segment.
struct TwoHoles {
  OwnerTag a0, a1, a2, a3, b0, b1, b2, b3;
  explicit TwoHoles(MovingReclaimer& r)
      : a0(r.make(512 * KiB)), a1(r.make(512 * KiB)), a2(r.make(512 * KiB)), a3(r.make(512 * KiB)),
        b0(r.make(512 * KiB)), b1(r.make(512 * KiB)), b2(r.make(512 * KiB)), b3(r.make(512 * KiB)) {
    r.drop(a1);
    r.drop(b2);
  }
};

TEST(Compaction, MovesTheFewestBytesThatOpenARunForTheRequest) {
  Host h(budget_of(4 * MiB));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  TwoHoles layout(reclaimer);
  std::map<OwnerTag, void*> before;
  for (const auto& [tag, o] : reclaimer.objects) before[tag] = o.ptr;
  const std::uintptr_t holes[] = {addr(before[layout.a0]) + 512 * KiB, addr(before[layout.b1]) + 512 * KiB};

  void* p = alloc.allocate(MiB);

  // One 512 KiB block moved, from beside one hole into the other, and the request took the run it opened.
  EXPECT_EQ(reclaimer.moves, 1);
  int moved = 0;
  for (const auto& [tag, o] : reclaimer.objects) {
    EXPECT_TRUE(reclaimer.intact(tag)) << "object " << tag;
    EXPECT_TRUE(addr(o.ptr) + o.bytes <= addr(p) || addr(p) + MiB <= addr(o.ptr)) << "object " << tag;
    if (o.ptr == before[tag]) continue;
    moved += 1;
    EXPECT_TRUE(addr(o.ptr) == holes[0] || addr(o.ptr) == holes[1]);
    EXPECT_TRUE(addr(p) == addr(before[tag]) || addr(p) + 512 * KiB == addr(before[tag]));
  }
  EXPECT_EQ(moved, 1);
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.num_compactions, 1u);
  EXPECT_EQ(s.num_moved_blocks, 1u);
  EXPECT_EQ(s.moved_bytes, 512 * KiB);
  EXPECT_EQ(s.reserved_bytes.current, 4 * MiB);
  EXPECT_EQ(s.allocated_bytes.current, 4 * MiB);
  const auto json = nlohmann::json::parse(to_json(s));
  EXPECT_EQ(json["num_compactions"], 1);
  EXPECT_EQ(json["moved_bytes"], 512 * KiB);
  alloc.free(p);
}

// With Compaction::first a move of at most the request's bytes comes before any eviction; as a last resort,
// the Reclaimer evicts first and nothing moves while it can.
TEST(Compaction, FirstMovesBeforeEvictingLastResortEvictsFirst) {
  for (const Compaction mode : {Compaction::first, Compaction::last_resort}) {
    SCOPED_TRACE(to_string(mode));
    Host h(budget_of(4 * MiB, mode));
    CachingAllocator& alloc = h.alloc;
    MovingReclaimer& reclaimer = h.reclaimer;
    TwoHoles layout(reclaimer);
    reclaimer.evictable = {layout.a2, layout.a3, layout.b0, layout.b1};
    void* p = alloc.allocate(MiB);
    if (mode == Compaction::first) {
      EXPECT_EQ(reclaimer.moves, 1);
      EXPECT_EQ(reclaimer.reclaims, 0);
      EXPECT_EQ(reclaimer.objects.size(), 6u);
    } else {
      EXPECT_EQ(reclaimer.moves, 0);
      EXPECT_GE(reclaimer.reclaims, 1);
      EXPECT_LT(reclaimer.objects.size(), 6u);
    }
    h.expect_intact();
    alloc.free(p);
  }
}

// Before the Reclaimer, a clearing that would move more than the request is left to eviction; once nothing
// more can be evicted, the last resort moves what it must.
TEST(Compaction, FirstMovesNoMoreThanTheRequest) {
  Host h(budget_of(4 * MiB, Compaction::first));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  // [b1 300K][b2 300K][64K hole][b3 300K][fixed] and [fixed][320K hole][fixed][320K hole]: every run that
  // covers 512 KiB moves two 300 KiB blocks (600 KiB), which the two 320 KiB holes could take.
  const OwnerTag b1 = reclaimer.make(300 * KiB);
  reclaimer.make(300 * KiB);
  const OwnerTag hole = reclaimer.make(64 * KiB);
  reclaimer.make(300 * KiB);
  const OwnerTag f1 = reclaimer.make(542 * KiB);
  const OwnerTag f1b = reclaimer.make(542 * KiB);
  const OwnerTag f2 = reclaimer.make(704 * KiB);
  const OwnerTag t1 = reclaimer.make(320 * KiB);
  const OwnerTag f3 = reclaimer.make(704 * KiB);
  const OwnerTag t2 = reclaimer.make(320 * KiB);
  ASSERT_EQ(alloc.stats().reserved_bytes.current, 4 * MiB);
  for (OwnerTag t : {hole, t1, t2}) reclaimer.drop(t);
  for (OwnerTag t : {f1, f1b, f2, f3}) alloc.set_owner(reclaimer.objects[t].ptr, 0);
  reclaimer.evictable = {b1};

  void* p = alloc.allocate(512 * KiB);

  // b1 evicted first (the first reclaim), then the Reclaimer had nothing (the second): b2 moved into a hole.
  EXPECT_EQ(reclaimer.reclaims, 2);
  EXPECT_EQ(reclaimer.moves, 1);
  h.expect_intact();
  alloc.free(p);
}

TEST(Compaction, BlocksTheReclaimerDoesNotAllowNeverMove) {
  Host h(budget_of(4 * MiB));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  TwoHoles layout(reclaimer);
  reclaimer.allow_moves = false;
  try {
    alloc.allocate(MiB);
    FAIL() << "expected dtr::OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("(compaction) could not make room"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reclaimer.moves, 0);
  EXPECT_EQ(alloc.stats().num_compactions, 0u);
  h.expect_intact();
}

TEST(Compaction, SwitchedOffTheRequestFailsAsBefore) {
  Host h(budget_of(4 * MiB, Compaction::off));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  TwoHoles layout(reclaimer);
  try {
    alloc.allocate(MiB);
    FAIL() << "expected dtr::OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()).find("compaction"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reclaimer.moves, 0);
}

TEST(Compaction, UntaggedBlocksStayWhereTheyAre) {
  Host h(budget_of(4 * MiB));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  TwoHoles layout(reclaimer);
  for (OwnerTag t : {layout.a0, layout.a2, layout.b1, layout.b3}) {
    alloc.set_owner(reclaimer.objects[t].ptr, 0);  // the blocks next to the holes: nothing opens a 1 MiB run
  }
  EXPECT_THROW(alloc.allocate(MiB), OutOfMemory);
  EXPECT_EQ(reclaimer.moves, 0);
}

// Three small segments, two holding one movable 512 KiB block each: releasing both (their blocks moved into
// the third) makes room under the budget for a 2.5 MiB segment, which no single release would.
struct ThreeSegments {
  OwnerTag a, b, fixed;
  explicit ThreeSegments(MovingReclaimer& r) {
    const OwnerTag a_front = r.make(MiB);
    const OwnerTag a_mid = r.make(512 * KiB);
    a = r.make(512 * KiB);
    const OwnerTag b_front = r.make(MiB);
    const OwnerTag b_mid = r.make(512 * KiB);
    b = r.make(512 * KiB);
    fixed = r.make(512 * KiB);
    for (OwnerTag t : {a_front, a_mid, b_front, b_mid}) r.drop(t);
  }
};

TEST(Compaction, EmptiesSeveralSegmentsWhenTheRequestNeedsANewOne) {
  Host h(budget_of(6 * MiB));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  ThreeSegments layout(reclaimer);
  const std::uintptr_t fixed_at = addr(reclaimer.objects[layout.fixed].ptr);
  alloc.set_owner(reclaimer.objects[layout.fixed].ptr, 0);
  ASSERT_EQ(alloc.stats().segments.current, 3u);

  void* p = alloc.allocate(MiB * 5 / 2);

  EXPECT_EQ(reclaimer.moves, 2);
  for (OwnerTag t : {layout.a, layout.b}) {  // both now in the third segment, after the fixed block
    const std::uintptr_t at = addr(reclaimer.objects[t].ptr);
    EXPECT_TRUE(at > fixed_at && at < fixed_at + 2 * MiB) << "object " << t;
    EXPECT_TRUE(reclaimer.intact(t));
  }
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.segments.current, 2u);
  EXPECT_LE(s.reserved_bytes.peak, 6 * MiB);
  EXPECT_EQ(s.moved_bytes, MiB);
  alloc.free(p);
}

TEST(Compaction, AFailedMoveLeavesEveryBlockOwnedOnceAndTheRestInPlace) {
  Host h(budget_of(6 * MiB));
  CachingAllocator& alloc = h.alloc;
  MovingReclaimer& reclaimer = h.reclaimer;
  ThreeSegments layout(reclaimer);
  alloc.set_owner(reclaimer.objects[layout.fixed].ptr, 0);
  reclaimer.fail_at_move = 2;
  const std::uint64_t allocated_before = alloc.stats().allocated_bytes.current;

  EXPECT_THROW(alloc.allocate(MiB * 5 / 2), DeviceError);

  // The first block moved (its old block freed), the second did not (its destination given back).
  EXPECT_EQ(alloc.stats().allocated_bytes.current, allocated_before);
  EXPECT_EQ(alloc.stats().active_blocks.current, reclaimer.objects.size());
  h.expect_intact();
  // Usable afterwards: with moves working again the request is served.
  reclaimer.fail_at_move = -1;
  void* p = alloc.allocate(MiB * 5 / 2);
  alloc.free(p);
}

// A 6 MiB block alone in a 20 MiB large segment, a 16 MiB block in a segment of its own, and a budget with 14
// MiB of headroom: a 16 MiB request finds 14 MiB free in one piece and 14 MiB to reserve, and no free block
// outside the first segment could take the 6 MiB one. In the last resort it moves into a new segment of its
// size, under the budget, and the request takes the first segment (a wide MLP's third weight at 30% of its
// peak ran out of memory so, with 29.5 MiB of the budget unused).
struct WideBlocks {
  OwnerTag small, large;
  explicit WideBlocks(MovingReclaimer& r) : small(r.make(6 * MiB)), large(r.make(16 * MiB)) {}
};

TEST(Compaction, TheLastResortMovesABlockIntoANewSegmentWhereTheBudgetHasRoom) {
  Host h(budget_of(50 * MiB));
  WideBlocks layout(h.reclaimer);
  const void* small_was = h.reclaimer.objects[layout.small].ptr;
  ASSERT_EQ(h.alloc.stats().reserved_bytes.current, 36 * MiB);

  void* p = h.alloc.allocate(16 * MiB);

  EXPECT_EQ(h.reclaimer.moves, 1);
  EXPECT_NE(h.reclaimer.objects[layout.small].ptr, small_was);
  EXPECT_EQ(p, small_was);  // the run the move opened
  h.expect_intact();
  const AllocatorStats s = h.alloc.stats();
  EXPECT_EQ(s.reserved_bytes.current, 42 * MiB);
  EXPECT_LE(s.reserved_bytes.peak, 50 * MiB);
  EXPECT_EQ(s.segments.current, 3u);
  EXPECT_EQ(s.num_compactions, 1u);
  h.alloc.free(p);
}

// Compaction::first's move, before the Reclaimer, takes only what is reserved: here the Reclaimer evicts
// first, and the last resort then moves the one block left into a new segment.
TEST(Compaction, OnlyTheLastResortReservesForTheBlocksItMoves) {
  Host h(budget_of(50 * MiB, Compaction::first));
  const OwnerTag small = h.reclaimer.make(6 * MiB);
  const OwnerTag middle = h.reclaimer.make(8 * MiB);  // the same 20 MiB segment: 6 MiB free after it
  h.reclaimer.make(16 * MiB);
  ASSERT_EQ(h.alloc.stats().reserved_bytes.current, 36 * MiB);
  h.reclaimer.evictable = {middle};

  void* p = h.alloc.allocate(16 * MiB);

  // The first compaction moved nothing (with new segments it would have moved both blocks, 14 MiB, and asked
  // the Reclaimer nothing): `middle` was evicted, then the Reclaimer had nothing more.
  EXPECT_EQ(h.reclaimer.reclaims, 2);
  EXPECT_EQ(h.reclaimer.objects.count(middle), 0u);
  EXPECT_EQ(h.reclaimer.moves, 1);  // then `small`, into a new segment
  EXPECT_TRUE(h.reclaimer.intact(small));
  EXPECT_EQ(h.alloc.stats().reserved_bytes.current, 42 * MiB);
  h.alloc.free(p);
}

// Where the new segments a clearing's blocks would need do not all fit under the budget, the plan is given
// back whole: the segment reserved for the first of them is released, and the request fails as before.
TEST(Compaction, APlanThatCannotReserveForEveryBlockReleasesWhatItReserved) {
  Host h(budget_of(45 * MiB));
  h.reclaimer.make(6 * MiB);
  h.reclaimer.make(8 * MiB);
  h.reclaimer.make(16 * MiB);
  std::map<OwnerTag, void*> before;
  for (const auto& [tag, o] : h.reclaimer.objects) before[tag] = o.ptr;
  const AllocatorStats start = h.alloc.stats();
  ASSERT_EQ(start.reserved_bytes.current, 36 * MiB);

  // 9 MiB of headroom: the 8 MiB block's segment fits, then the 6 MiB block's does not.
  EXPECT_THROW(h.alloc.allocate(16 * MiB), OutOfMemory);

  const AllocatorStats s = h.alloc.stats();
  EXPECT_EQ(s.reserved_bytes.current, 36 * MiB);
  EXPECT_EQ(s.segments.current, 2u);
  EXPECT_EQ(s.num_device_allocations, start.num_device_allocations + 1);
  EXPECT_EQ(s.num_device_frees, start.num_device_frees + 1);
  EXPECT_EQ(s.allocated_bytes.current, start.allocated_bytes.current);
  EXPECT_EQ(h.reclaimer.moves, 0);
  for (const auto& [tag, o] : h.reclaimer.objects) EXPECT_EQ(o.ptr, before[tag]) << "object " << tag;
  h.expect_intact();
}

}  // namespace
}  // namespace dtr::test

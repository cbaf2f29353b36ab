// h_DTR with the exact evicted neighbourhood e*, and h_MSPS: scores that walk the evicted lineage around a
// storage (design section 5). Walks are bounded (kWalkDepth hops, kWalkCount storages a side) and events tell
// only the storages whose walks reach them, so that an event costs the same however long the program is and
// however many ops read one storage (issue 16; docs/heuristics.md).
#include "heuristics/walking.h"

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "dtr/small_vector.h"

namespace dtr::heuristics {
namespace {

struct Marks;

// A walk's mark on a storage it counted: the walker's Marks, which of its walks made the mark (Marks::walks
// then), and on which side (its inputs' walk looks at the storage's inputs, its dependents' walk at the storage's
// evicted readers). It lapses once the walker marks again or dies.
struct Watch {
  Marks* walker;
  std::uint64_t walk : 63;
  std::uint64_t inputs_side : 1;
};

// A storage's part in the marks, apart from its Readers (most storages never mark nor are marked): the current
// marks on it, and, for a walker, which walk marks now.
struct Marks {
  std::vector<Watch> watchers;
  StorageView* owner = nullptr;  // the walker, while `walks` is current
  std::uint64_t walks = 0;       // bumped at each marking walk from `owner` and when it dies: older Watches lapse
};

bool lapsed(const Watch& w) { return w.walker->walks != w.walk; }

// Drops the lapsed marks from a storage's list.
void shed_lapsed(std::vector<Watch>& watchers) {
  std::size_t kept = 0;
  for (const Watch& w : watchers) {
    if (!lapsed(w)) watchers[kept++] = w;
  }
  watchers.resize(kept);
}

// What the walks keep about a storage (in its walk_slot). For h_DTR: the evicted storages whose producer reads
// it, so that a dependents' side walks those alone rather than every reader (a weight read by each step of an
// unrolled RNN has thousands, nearly all resident); and, while the storage is evicted itself, where it is
// listed in its inputs' records, so that it leaves them in O(1) when it comes back or dies.
// Both lists are mostly one or two long (an op reads one or two values; a value has a reader or two evicted):
// kept inline, a walk reads them with the record, not a cache miss beyond it, and listing allocates nothing.
struct Readers {
  SmallVector<StorageView*, 2> evicted;
  SmallVector<std::pair<StorageView*, std::uint32_t>, 2> listed_in;  // (input, position in its `evicted`)
  Marks* marks = nullptr;  // once a walk marks the storage, or the storage's walk marks
};

// Objects at stable addresses, each given again once given back: the walks' records and marks, one a storage.
template <typename T>
class StablePool {
 public:
  T& take() {
    if (free_.empty()) return all_.emplace_back();
    T* t = free_.back();
    free_.pop_back();
    return *t;
  }
  void give_back(T& t) { free_.push_back(&t); }  // the caller clears what it no longer needs
  std::size_t live() const { return all_.size() - free_.size(); }

 private:
  std::deque<T> all_;  // a deque: addresses stay put as it grows
  std::vector<T*> free_;
};

// The storage a walk is from, and its Marks once the walk marks something.
struct Walker {
  StorageView* storage;
  Marks* marks = nullptr;
};

// Base of h_DTR and h_MSPS. A score sums c0 over the evicted storages near the storage, reached through
// evicted storages only, breadth-first: on its inputs' side (what recomputing it would recompute) and, for
// h_DTR, on its dependents' side (what could no longer be recomputed without it). Each side counts at most
// kWalkDepth levels and kWalkCount storages, the first in breadth-first order (the last level counted in the
// lineage's order up to the count), so a score is exact while the evicted regions are that small, and stays
// at the count's worth beyond: more of a hub's readers evicted never makes the hub look cheaper.
// A walk's result reads only the storages it looks at: those beside the storages it expands (the walker and
// the storages it counts). An event at s tells the walkers that count a storage beside s, or are beside it:
// those within kUnmarkedDepth + 1 hops, found by searching the other way (each walk keeps one direction), and
// the deeper ones by the marks (Watch) each walk leaves on the storages it counts at every (kUnmarkedDepth +
// 1)-th hop: any kUnmarkedDepth + 1 levels in a row hold one, so the search meets a mark of every deeper walk
// that looks at s (marking one level in five, a walk along an RNN's evicted chains writes a fifth as much).
// So an event costs its neighbourhood however wide the evicted region around it (a search as deep as the
// walks visited about 1,200 storages an event on a wide DAG; docs/results/scaling.md). The eviction index
// stays equal to a scan: a told key is walked anew (marking anew) before it is read, and one the forecast
// index keeps as a lower bound after an eviction stays one until an event beside what its last walk counted.
class WalkingHeuristic : public EvictedNeighbourhood {
 public:
  explicit WalkingHeuristic(bool dependents) : dependents_(dependents) {}
  bool scores_walk_lineage() const override { return true; }

  void on_evict(StorageView& s) override {
    if (dependents_) list_in_inputs(s);
    notify_region(s);
  }
  void on_rematerialize(StorageView& s) override {
    if (dependents_) unlist(s);
    notify_region(s);
  }
  // For a heuristic built on the walks (forecast): h_DTR's own scores read neither event. What changed at `s`
  // (released, or no longer a dependent) is read only by walks that reach it from above (the dependents'
  // side) and by its inputs: its inputs' side of the neighbourhood, not notify_region's two.
  void report_neighbours(StorageView& s) override {
    if (dependents_) notify_reaching(s, /*down=*/false, /*up=*/true);
  }
  void on_destroy(StorageView& s) override {
    if (dependents_) unlist(s);  // only an evicted storage is listed; a resident one's list is empty
    if (s.evicted()) notify_region(s);
    if (s.walk_slot != nullptr) {  // nothing reads a dying storage: its list of evicted readers is empty
      Readers* record = static_cast<Readers*>(s.walk_slot);
      record->evicted.clear();
      if (record->marks != nullptr) {
        record->marks->watchers.clear();
        record->marks->owner = nullptr;
        record->marks->walks += 1;  // its walks' marks lapse (the Marks are reused)
        marks_.give_back(*record->marks);
        record->marks = nullptr;
      }
      records_.give_back(*record);
      s.walk_slot = nullptr;
    }
  }
  std::size_t live_slots() const override { return records_.live() + marks_.live(); }

 protected:
  // c0 summed over the evicted storages the walks from `s` count (not `s`'s own).
  double evicted_reach_cost(StorageView& s) { return reach(s, /*dependents=*/true).cost; }

 public:
  EvictedReach reach(StorageView& s, bool dependents) override {
    const std::uint64_t mark = next_mark();
    s.heuristic_mark = mark;
    Walker walker{&s};
    EvictedReach result;
    reach_one_way(s, /*inputs=*/true, mark, walker, result);
    result.inputs_cost = result.cost;
    if (dependents_ && dependents) reach_one_way(s, /*inputs=*/false, mark, walker, result);
    return result;
  }

 private:
  std::uint64_t next_mark() { return ++last_mark_; }

  Readers& record(StorageView& s) {
    if (s.walk_slot == nullptr) s.walk_slot = &records_.take();
    return *static_cast<Readers*>(s.walk_slot);
  }

  // `s` was evicted: each distinct input lists it among its evicted readers (an op may read one storage
  // twice; marks find the repeats in O(1), however many inputs the op has).
  void list_in_inputs(StorageView& s) {
    Readers& mine = record(s);
    const std::uint64_t mark = next_mark();
    s.for_each_input([&](StorageView& in) {
      if (in.constant() || in.heuristic_mark == mark) return;  // a constant is never scored nor walked through
      in.heuristic_mark = mark;
      auto& list = record(in).evicted;
      mine.listed_in.emplace_back(&in, static_cast<std::uint32_t>(list.size()));
      list.push_back(&s);
    });
  }

  // `s` is resident again, or dying: its inputs stop listing it (swap-remove; the moved entry learns where).
  void unlist(StorageView& s) {
    if (s.walk_slot == nullptr) return;
    Readers& mine = *static_cast<Readers*>(s.walk_slot);
    for (const auto& [in, at] : mine.listed_in) {
      auto& list = static_cast<Readers*>(in->walk_slot)->evicted;
      StorageView* moved = list.back();
      list[at] = moved;
      list.pop_back();
      if (moved == &s) continue;
      for (auto& [listed, position] : static_cast<Readers*>(moved->walk_slot)->listed_in) {
        if (listed == in) position = at;
      }
    }
    mine.listed_in.clear();
  }

  // Adds one side's walk to `result`: its cost, and whether it stopped at a bound with evicted storages beyond
  // (the count reached, or evicted storages one hop past the last level).
  void reach_one_way(StorageView& s, bool inputs, std::uint64_t mark, Walker& walker, EvictedReach& result) {
    double total = 0;
    std::size_t counted = 0;
    double level_cost = 0;
    bool full = false;  // kWalkCount storages gathered: the walk ends with the level being gathered
    level_.clear();
    std::size_t gathering = 1;  // the depth visit() gathers
    auto visit = [&](StorageView& n) {
      if (full || !n.evicted() || n.heuristic_mark == mark) return;
      n.heuristic_mark = mark;
      level_cost += n.cost();
      level_.push_back(&n);
      if (gathering % (kUnmarkedDepth + 1) == 0) mark_counted(n, walker, inputs);
      if (!inputs && !n.released()) result.holds_dependent = true;
      full = counted + level_.size() == kWalkCount;
    };
    auto expand = [&](StorageView& n, auto& f) {
      if (inputs) {
        n.for_each_input(f);
      } else if (n.walk_slot != nullptr) {
        for (StorageView* reader : static_cast<Readers*>(n.walk_slot)->evicted) {
          if (full) break;  // a hub's thousands of evicted readers end the walk after kWalkCount
          f(*reader);
        }
      }
    };
    expand(s, visit);
    for (int depth = 1; !level_.empty(); ++depth) {
      total += level_cost;
      counted += level_.size();
      if (full || depth == kWalkDepth) break;
      level_cost = 0;
      gathering = static_cast<std::size_t>(depth) + 1;
      next_level_.clear();
      std::swap(level_, next_level_);  // visit() fills level_ with the next depth
      for (StorageView* n : next_level_) {
        if (full) break;
        expand(*n, visit);
      }
    }
    // At the last depth, whether anything evicted lies beyond: asked only where the answer can change a flag.
    bool cut = full;
    if (!full && !level_.empty() && (result.complete || result.chain_cut)) {
      auto probe = [&](StorageView& n) { cut = cut || (n.evicted() && n.heuristic_mark != mark); };
      for (StorageView* n : level_) {
        if (!cut) expand(*n, probe);
      }
    }
    if (cut) {
      result.complete = false;
      result.count_cut = result.count_cut || full;
      if (full || counted != static_cast<std::size_t>(kWalkDepth)) result.chain_cut = false;
    }
    result.cost += total;
  }

  // The walk from `walker.storage` counted `n` on its inputs' side or its dependents'. Its first mark lapses its
  // last marking walk's marks (a walk that marks nothing leaves them: they only tell it more than it needs). A
  // storage's list sheds lapsed marks when it is full, and grows if that freed less than half: it stays within
  // about four times the walks now marking it, at O(1) a mark.
  void mark_counted(StorageView& n, Walker& walker, bool inputs) {
    if (walker.marks == nullptr) {
      walker.marks = &marks(*walker.storage);
      walker.marks->owner = walker.storage;
      walker.marks->walks += 1;
    }
    std::vector<Watch>& watchers = marks(n).watchers;
    if (watchers.size() == watchers.capacity() && watchers.size() >= 8) {
      shed_lapsed(watchers);
      if (watchers.size() > watchers.capacity() / 2) watchers.reserve(2 * watchers.capacity());  // amortized
    }
    watchers.push_back(Watch{walker.marks, walker.marks->walks, inputs ? 1u : 0u});
  }

  Marks& marks(StorageView& s) {
    Readers& r = record(s);
    if (r.marks == nullptr) r.marks = &marks_.take();
    return *r.marks;
  }

  // Tells the listener about every resident storage whose score walk may read `s`: those that reach it through
  // evicted storages from below (their inputs' side looks up at it) and, for h_DTR, from above (their dependents'
  // side looks down at it); walks do not turn around. A walk that reads `s` from a storage it counted within
  // kUnmarkedDepth hops is within kUnmarkedDepth + 1 hops of it, found by searching; from one deeper, it marked
  // a storage on its way there within kUnmarkedDepth + 1 hops of `s`, whose marks the search reads.
  void notify_region(StorageView& s) { notify_reaching(s, /*down=*/true, /*up=*/dependents_); }

  // Tells the listener of the walkers that reach `s` going up to it (`down`: found below it), down to it (`up`),
  // or both.
  void notify_reaching(StorageView& s, bool down, bool up) {
    if (listener() == nullptr) return;
    dirty_.clear();
    const std::uint64_t mark = next_mark();
    s.heuristic_mark = mark;
    if (down) collect_reaching(s, /*down=*/true, mark);
    if (up) collect_reaching(s, /*down=*/false, mark);
    for (StorageView* r : dirty_) listener()->score_changed(*r);  // after the search: listeners walk too
  }

  // Adds to dirty_ the resident storages within kUnmarkedDepth + 1 hops of `s` going one way through evicted
  // storages, and the walkers whose marks on that side are on the evicted storages within those hops.
  void collect_reaching(StorageView& s, bool down, std::uint64_t mark) {
    level_.assign(1, &s);
    auto tell = [&](StorageView& n) {
      if (n.heuristic_mark == mark) return;
      n.heuristic_mark = mark;
      dirty_.push_back(&n);
    };
    auto visit = [&](StorageView& n) {
      if (n.heuristic_mark == mark) return;
      if (!n.evicted()) {
        tell(n);
        return;
      }
      n.heuristic_mark = mark;
      level_.push_back(&n);
    };
    // A walker below `s` reaches it with its inputs' walk; one above, with its dependents' walk.
    auto told_by_marks = [&](StorageView& n) {
      if (n.walk_slot == nullptr || static_cast<Readers*>(n.walk_slot)->marks == nullptr) return;
      std::vector<Watch>& watchers = static_cast<Readers*>(n.walk_slot)->marks->watchers;
      shed_lapsed(watchers);  // read in full anyway
      for (const Watch& w : watchers) {
        if (w.inputs_side == down && !w.walker->owner->evicted()) tell(*w.walker->owner);
      }
    };
    // Depth d expands the storages d hops away: resident ones up to kUnmarkedDepth + 1 hops are reached.
    for (std::size_t depth = 0; depth <= kUnmarkedDepth && !level_.empty(); ++depth) {
      next_level_.clear();
      std::swap(level_, next_level_);
      for (StorageView* n : next_level_) {
        if (depth >= 1) told_by_marks(*n);
        if (down) {
          n->for_each_dependent(visit);
        } else {
          n->for_each_input(visit);
        }
      }
    }
    for (StorageView* n : level_) told_by_marks(*n);  // kUnmarkedDepth + 1 hops away: read, not expanded
  }

  // Events search one hop further than this; walks mark every storage they count (this + 1) hops deep, twice
  // that, ... (docs/results/scaling.md).
  static constexpr std::size_t kUnmarkedDepth = 4;

  const bool dependents_;
  std::uint64_t last_mark_ = std::uint64_t{1} << 63;  // apart from h_DTR^eq's marks (forecast holds both)
  StablePool<Readers> records_;
  StablePool<Marks> marks_;
  std::vector<StorageView*> dirty_;
  std::vector<StorageView*> level_;
  std::vector<StorageView*> next_level_;
};

// h_DTR = (c0 + Σ_{e*(t)} c0) / (m·s), e* the evicted ancestors and descendants reached through evicted
// storages (within the walks' bounds).
class DtrHeuristic final : public WalkingHeuristic {
 public:
  DtrHeuristic() : WalkingHeuristic(/*dependents=*/true) {}
  std::string name() const override { return "dtr"; }
  ScoreKey key(StorageView& s) override { return {(s.cost() + evicted_reach_cost(s)) / bytes_of(s), stale_base(s)}; }
};

// h_MSPS = (c0 + Σ evicted ancestors' c0) / m (Peng et al., Capuchin): the cost of bringing it back per byte
// freed, with no staleness.
class MspsHeuristic final : public WalkingHeuristic {
 public:
  MspsHeuristic() : WalkingHeuristic(/*dependents=*/false) {}
  std::string name() const override { return "msps"; }
  bool timeless() const override { return true; }
  ScoreKey key(StorageView& s) override { return {(s.cost() + evicted_reach_cost(s)) / bytes_of(s), 0.0}; }
};

}  // namespace

std::unique_ptr<Heuristic> make_dtr_heuristic() { return std::make_unique<DtrHeuristic>(); }
std::unique_ptr<EvictedNeighbourhood> make_dtr_neighbourhood() { return std::make_unique<DtrHeuristic>(); }
std::unique_ptr<Heuristic> make_msps_heuristic() { return std::make_unique<MspsHeuristic>(); }

}  // namespace dtr::heuristics

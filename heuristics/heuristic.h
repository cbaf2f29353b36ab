// Eviction heuristics: the lowest score is evicted first. Design section 5.
//
// Thread safety: a heuristic belongs to one runtime and is driven by its thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heuristics/storage_view.h"

namespace dtr::heuristics {

// A score as the eviction index keeps it: a / (now - b), where b = last access - 1 (so that the staleness
// now - b is at least 1), or a alone for a timeless heuristic.
struct ScoreKey {
  double a = 0;
  double b = 0;
};

// A score as the forecast index keeps it (Heuristic::forecast_key): a / (deadline - p) while a forecast use is
// ahead (p the program clock, deadline that use's program tick), else a / (o - stale_b) (o the ops clock,
// stale_b its last use's tick - 1); last resorts go after every other candidate.
struct ForecastKey {
  double a = 0;
  std::optional<std::uint64_t> deadline;
  double stale_b = 0;
  bool last_resort = false;
  // Whether an eviction beside the storage leaves a no lower than it is, or no lower than the floor the
  // heuristic reports with it (ScoreListener::score_raised): forecast's a complete walk's cost, not a fallback.
  bool floored = false;
  // Whether its a may read the classes' sums (forecast: a key whose walks stopped short). One that does not
  // moves only with the walks, whose reports cover every change to it: a report from the classes alone
  // (ScoreListener::classes_changed) leaves it as it is.
  bool reads_classes = true;
};

// m in the scores: a storage's bytes, at least 1 (so that an empty storage divides by one byte).
inline double bytes_of(const StorageView& s) { return static_cast<double>(std::max<std::size_t>(s.bytes(), 1)); }
// b of a ScoreKey: the staleness now - b is now - last access + 1.
inline double stale_base(const StorageView& s) { return static_cast<double>(s.last_access()) - 1.0; }

// Told when a lineage event changes the score of a storage other than the one the event is about (an evicted
// neighbourhood grew or shrank). The eviction index listens; it ignores storages it does not hold.
class ScoreListener {
 public:
  virtual void score_changed(StorageView& storage) = 0;
  // An eviction beside the storage changed its score. Where its last key was ForecastKey::floored, its a is
  // now at least the smaller of that key's a and `floor`: where `floor` is no lower, the score can only have
  // risen, and a listener may key it lazily.
  virtual void score_raised(StorageView& storage, double floor) {
    (void)floor;
    score_changed(storage);
  }
  // The change a heuristic built on h_DTR^eq's classes reports from the classes alone: it changes only a key
  // with ForecastKey::reads_classes, and a listener may pass over the others.
  virtual void classes_changed(StorageView& storage) { score_changed(storage); }

 protected:
  ~ScoreListener() = default;
};

class Heuristic {
 public:
  virtual ~Heuristic() = default;
  virtual std::string name() const = 0;

  // Whether key() gives every score (then the runtime keeps its candidates in an index); false for random.
  virtual bool indexable() const { return true; }
  // Whether scores ignore the clock (h_size, h_MSPS).
  virtual bool timeless() const { return false; }
  // Whether key() walks the lineage around the storage (h_DTR and h_MSPS the evicted regions, h_DTR^eq its
  // neighbours' classes), so that a score costs more than arithmetic, and more as evictions grow: the runtime
  // then counts the time it spends computing new candidates' scores as search time.
  virtual bool scores_walk_lineage() const { return false; }
  // Whether scores read StorageView::forecast_distance(): the runtime then keeps forecasts (runtime/forecast.h).
  virtual bool reads_forecasts() const { return false; }
  // Whether scores read the memory the budget leaves when each storage is next needed (begin_decision): the
  // runtime then scans, as for a heuristic that is not indexable().
  virtual bool reads_memory() const { return false; }
  // Before each decision of a reads_memory() heuristic (a scan's or a window's): the bytes the budget leaves to
  // the candidates (the budget less what none of them holds: constants, and under a device budget the reserved
  // bytes no storage holds), and a way to visit the candidates (the resident storages the runtime may evict,
  // pinned ones included), valid during the call only.
  virtual void begin_decision(double /*available_bytes*/, FunctionRef<void(NeighbourVisitor)> /*candidates*/) {}
  // Whether, under a device budget, the runtime evicts the cheapest contiguous window of blocks that covers
  // the pending allocation (heuristics/window.h) instead of one storage at a time. A block's cost in a window
  // is window_cost(); elsewhere (bytes budgets, requests no window covers) the scores decide as usual.
  virtual bool fragmentation_aware() const { return false; }
  // What evicting the storage costs, for window sums: its score times its bytes, i.e. the score's
  // (staleness-discounted) recompute cost without the division by size, which a window's fixed extent replaces.
  double window_cost(StorageView& storage, std::uint64_t now) {
    return score(storage, now) * static_cast<double>(std::max<std::size_t>(storage.bytes(), 1));
  }
  // Whether the storage goes only after every candidate that is not, whatever the scores (a tier above them):
  // honoured by the runtime's scan and by windows, not by the eviction index, so a heuristic that can answer
  // true must not be indexable(). Among last resorts the scores decide as usual.
  virtual bool last_resort(StorageView& /*storage*/) { return false; }
  // The storage's score parameters in the current lineage state.
  virtual ScoreKey key(StorageView& storage) = 0;
  // Whether forecast_key() gives every score and tier (then the runtime keeps a forecast index,
  // heuristics/forecast_index.h, instead of scanning), though indexable() is false.
  virtual bool forecast_indexable() const { return false; }
  // The score and tier of forecast_indexable() heuristics: score() and last_resort() in the index's terms.
  virtual ForecastKey forecast_key(StorageView& /*storage*/) { return {}; }
  // The same where only a use changed the storage since its key was `a`'s (the listener hears of every other
  // change to a): a heuristic whose a walks the lineage answers without walking.
  virtual ForecastKey forecast_key_after_use(StorageView& storage, double /*a*/) { return forecast_key(storage); }
  // A lower bound of the a forecast_key() would give, read without walking (nullopt: none): the forecast index
  // holds a changed candidate at it, with the curve forecast_key_after_use() gives for it, and walks only where
  // a decision would choose it.
  virtual std::optional<double> forecast_a_floor(StorageView& /*storage*/) { return std::nullopt; }
  // Score of a resident, evictable storage at clock `now`; lower is evicted first. The default is key()'s.
  virtual double score(StorageView& storage, std::uint64_t now) {
    const ScoreKey k = key(storage);
    return timeless() ? k.a : k.a / std::max(static_cast<double>(now) - k.b, 1.0);
  }
  // A bound no higher than score(storage, now), cheaper to compute: a scan passes over a candidate whose floor
  // is above the best score it has found (the choice stays exact). The default, 0, never passes over one.
  virtual double score_floor(StorageView& /*storage*/, std::uint64_t /*now*/) { return 0.0; }

  // Lineage events, for heuristics that keep state about evicted storages. The runtime calls on_evict after
  // the storage left memory, on_rematerialize after it is back, on_destroy before its buffer (if any) goes.
  virtual void on_evict(StorageView& /*storage*/) {}
  virtual void on_rematerialize(StorageView& /*storage*/) {}
  virtual void on_destroy(StorageView& /*storage*/) {}
  // The storage (resident) is about to lose its producer and become a constant: its inputs stop being its
  // neighbours.
  virtual void on_cut(StorageView& /*storage*/) {}
  // The program released the last handle to the storage (StorageView::released) and the runtime does not evict
  // it for that (it is evicted already, pinned, or dying): only storages made from it need it now.
  virtual void on_release(StorageView& /*storage*/) {}
  // Bookkeeping objects the heuristic holds (dtr-eq's union-find nodes, dtr's lists of evicted readers): those
  // of live storages (and, for dtr-eq, the ancestors they still need); zero once every storage is destroyed.
  virtual std::size_t live_slots() const { return 0; }
  // Called once a run, when its recomputation first passes its base compute (where the default thrash limit
  // stops a run): a heuristic that has a second rule for a guess its first one made may switch to it for the
  // rest of the run. True if it did: every score may have moved (the runtime keys every candidate anew).
  virtual bool change_rule() { return false; }

  // Who to tell when scores change by lineage events (nullptr: nobody, and no work is done to find them).
  virtual void set_listener(ScoreListener* listener) { listener_ = listener; }

 protected:
  ScoreListener* listener() const { return listener_; }

 private:
  ScoreListener* listener_ = nullptr;
};

// How far dtr and msps walk the evicted lineage from a storage, in hops (docs/heuristics.md): their scores
// count the evicted storages within this many, exact while evicted regions are shallower.
inline constexpr int kWalkDepth = 32;
// ... and how many evicted storages a walk counts on each side at most, the first in breadth-first order
// (docs/heuristics.md), so that a score's walk is bounded on wide graphs.
inline constexpr std::size_t kWalkCount = 256;

// The seed of "random" (a seeded heuristic is reproducible; "random:SEED" picks another).
inline constexpr std::uint64_t kDefaultRandomSeed = 0x5eed;

// The accepted names: dtr, dtr-eq, dtr-local, lru, size, msps, random, window, dtr-eq+window, forecast,
// forecast+reversal.
std::vector<std::string> heuristic_names();

// By name (design section 5; lowest score evicted first):
//   dtr        (c0 + Σ c0 over e*(t)) / (m·s), e* exact: evicted ancestors and descendants through evicted ones
//   dtr-eq     the same with e* approximated by union-find classes (the DTR paper's reference)
//   dtr-local  c0 / (m·s)          lru   1 / s          size   1 / m
//   msps       (c0 + Σ c0 over evicted ancestors) / m
//   random     a seeded uniform draw ("random:SEED" for another seed)
//   forecast   dtr-eq's cost over m·d, d the program ops until the storage's forecast next use (the uses of
//              the storage the program made the same way last: StorageView::forecast_distance), its staleness
//              where nothing is forecast; kept in the forecast index (heuristics/forecast_index.h)
//   forecast+reversal  forecast, but a storage the program made before whose evicted region fits the memory
//              free at its next use costs its own c0 (and its region's unneeded ancestors'); scanned
//   window     fragmentation-aware (Coop): under a device budget, the contiguous window of free and evictable
//              blocks covering the request with the least summed c0/s; otherwise dtr-local
//   H+window   the same windows with H's costs (score times bytes), for any H above but window
// where c0 is the storage's own recompute cost, m its bytes and s its staleness (clock - last access + 1).
// Throws dtr::ConfigError naming `variable` and the accepted names otherwise.
std::unique_ptr<Heuristic> make_heuristic(std::string_view name, std::string_view variable = "DTR_HEURISTIC");

}  // namespace dtr::heuristics

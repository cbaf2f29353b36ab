// h_forecast: the cost of what evicting a storage recomputes over the program ops until it is next needed
// (docs/heuristics.md).
#include "heuristics/forecast.h"

#include <algorithm>
#include <cstdint>

#include "heuristics/dtr_eq.h"
#include "heuristics/reversal.h"
#include "heuristics/walking.h"

namespace dtr::heuristics {
namespace {

// The most storages forecast+reversal's region search visits; a larger region is scored as `forecast` scores.
constexpr std::size_t kRegionLimit = 1024;

// h_forecast = (c0 + Σ c0 over e*(t)) / (m·d), d the program ops until the storage is next needed.
// e*(t) is h_DTR's: the evicted ancestors and descendants the bounded walks reach (heuristics/walking.h),
// where the walks count all there are; where a region is a chain longer than the walks' depth, the union-find
// class costs h_DTR^eq charges instead, which follow a region however long it grows (so a long evicted chain
// is never undercounted), and so where a side stopped at the walks' count. Where what the walks leave out is
// wider than a chain, or the walks found a chain but a class beside the storage is bounded by more resident
// storages than a chain's two ends, their count stands, as h_DTR's does: h_DTR^eq's classes, which never
// split, join the runs a DAG's skips connected once and charge a storage for all of them
// (docs/results/heuristics.md: random DAGs fitted 0.05-0.20 of their peak higher with the classes there).
// d: the program ops until its next forecast use (StorageView::forecast_deadline); its staleness where it
// has none ahead (as h_DTR's). A value the program has not read yet though its forecast says it will is a
// last resort: it was made to be read, and its cost now misses what its lineage will cost once its inputs
// are released. A storage the program released (StorageView::released: a recomputation's intermediate, kept
// only for what is made from it) is never a last resort, and scores 0 while no evicted storage the program
// still holds waits on it (the walks of its dependents' side count none, and all there are) and no resident
// one larger than it is made from it: the program never reads it, and what losing it would cost later is
// charged to the held storages made from it, in their e*, once it is evicted. Scored by its own cost instead,
// a recomputed LSTM cell's released gate projections shielded the cell's held values (their e* saw nothing
// evicted): those went first, and the cell was remade again for its backward. Scores move with the clock in
// both directions (a use comes nearer) and run on two clocks (program ops, and all ops for staleness): the
// forecast index keeps them (heuristics/forecast_index.h).
// Where the program has made nothing the same way before (StorageView::made_before: its first step, or a
// program that never repeats), no forecast says what will be needed, and staleness alone misleads: a value read
// already may be needed next in the backward pass, a long way off, or by a skip connection, and what depends on
// it may never be remade. Such a storage is scored by what remaking it costs, its evicted ancestors (h_MSPS's
// numerator), plus half its dependents' side where that side holds an evicted value the program keeps (remade
// only if the program comes back for it, which nothing forecasts: even odds), over its staleness plus, once the
// program has read it, a prior of a quarter of the ops the program had run under the budget by its last use (so
// recency still orders values, but no longer by orders of magnitude); a value not read yet keeps its bare
// staleness (it was made to be read, soon). Its a is never floored (its walks stop at their count).
// docs/results/heuristics.md: the authors' logs, the random DAGs and a generated RNN fitted 0.01-0.26 of
// their peak lower; the zoo's first steps much as before. Without the dependents' half, a stacked LSTM's first
// step cascaded: each cheap cell state went as if nothing evicted were made from it, and the chain of them was
// remade again and again (0.43 of its peak where dtr-eq fits 0.20). With the half, a chain's first reversal
// cascades instead (its runs want to grow from their left end): once a run's recomputation passes its base
// compute, the half is dropped for the rest of the run (change_rule).
//
// forecast+reversal (`reversal` true): where the program made the storage before and a use is forecast, and the
// evicted region evicting it would join (heuristics/reversal.h) fits, with room for the op that reads it, in
// the memory free when that use comes (nothing resident now evicted meanwhile), its a is its own cost plus that
// of the ancestors in the region nothing else needs: the region is remade once then, for its own uses, and
// stays until they come, so evicting the storage adds its own recomputation only. Otherwise a is `forecast`'s.
// On a chain this is Revolve's one-sweep reversal: each run between checkpoints no longer than the memory free
// when the backward reaches it. The free memory moves with every storage's next use, so no index keeps these
// scores: the runtime scans (docs/heuristics.md).
class ForecastHeuristic final : public Heuristic {
 public:
  explicit ForecastHeuristic(bool reversal)
      : classes_(make_dtr_eq_classes()), walks_(make_dtr_neighbourhood()), reversal_(reversal) {}
  std::string name() const override { return reversal_ ? "forecast+reversal" : "forecast"; }
  bool indexable() const override { return false; }
  bool forecast_indexable() const override { return !reversal_; }
  bool reads_forecasts() const override { return true; }
  bool reads_memory() const override { return reversal_; }
  bool scores_walk_lineage() const override { return true; }

  ScoreKey key(StorageView& s) override { return {cost_per_byte(s), stale_base(s)}; }
  double score(StorageView& s, std::uint64_t /*now*/) override {
    const double a = reversal_ ? reversal_cost_per_byte(s) : cost_per_byte(s);
    return a / distance(s);
  }
  // Every a but a released storage's is c0/m plus a sum of costs: its own cost over the same d bounds it.
  double score_floor(StorageView& s, std::uint64_t /*now*/) override {
    if (s.released()) return 0.0;
    return s.cost() / bytes_of(s) / distance(s);
  }
  void begin_decision(double available_bytes, FunctionRef<void(NeighbourVisitor)> candidates) override {
    memory_.reset(available_bytes, candidates);
  }
  bool last_resort(StorageView& s) override { return !s.released() && s.forecast_unread(); }
  ForecastKey forecast_key(StorageView& s) override {
    bool walked = false;
    bool reads_classes = false;
    ForecastKey k = forecast_key_after_use(s, cost_per_byte(s, &walked, &reads_classes));
    k.floored = walked;
    k.reads_classes = reads_classes;
    return k;
  }
  // Every a is c0/m plus a sum of costs (cost_per_byte), but a released storage's, which can be 0.
  std::optional<double> forecast_a_floor(StorageView& s) override {
    return s.released() ? 0.0 : s.cost() / bytes_of(s);
  }
  ForecastKey forecast_key_after_use(StorageView& s, double a) override {
    // The prior moves the staleness curve's base back: a / (o - b + prior) is a / (o - (b - prior)), exactly
    // (integers), as the scan computes it.
    return ForecastKey{a, s.forecast_deadline(), static_cast<double>(s.last_use_op()) - 1.0 - first_step_prior(s),
                       last_resort(s)};
  }

  void on_evict(StorageView& s) override {
    relay_.raising = true;
    both(&Heuristic::on_evict, s);
    relay_.raising = false;
  }
  void on_rematerialize(StorageView& s) override { both(&Heuristic::on_rematerialize, s); }
  void on_destroy(StorageView& s) override { both(&Heuristic::on_destroy, s); }
  void on_cut(StorageView& s) override {
    walks_->report_neighbours(s);  // while it is still a dependent of its inputs (feeds_larger_held)
    both(&Heuristic::on_cut, s);
  }
  void on_release(StorageView& s) override { walks_->report_neighbours(s); }
  std::size_t live_slots() const override { return classes_->live_slots() + walks_->live_slots(); }
  // The first step's rule without the dependents' half, once recomputation has passed the base compute: each
  // rule cascades where the other does not (a chain's reversal with the half, a stacked LSTM without it), and
  // a cascade is what reaches that point.
  bool change_rule() override {
    if (!charge_dependents_) return false;
    charge_dependents_ = false;
    return true;
  }
  // Both bases report to the listener, many of the same storages: the forecast index marks a reported
  // candidate pending and keys it once at the next decision, so a repeat costs a flag test (gathering and
  // sorting the reports to drop repeats cost more than that).
  void set_listener(ScoreListener* listener) override {
    Heuristic::set_listener(listener);
    relay_.to = listener;
    relay_.classes = classes_.get();
    classes_relay_.to = listener;
    classes_->set_listener(listener != nullptr ? &classes_relay_ : nullptr);
    walks_->set_listener(listener != nullptr ? &relay_ : nullptr);
  }

 private:
  // (c0 + Σ c0 over e*) / m: h_DTR^eq's where the walks stopped at their count, or at their depth along a
  // chain with only chains' classes beside the storage; else the walks' e*; 0 for a released storage nothing
  // held waits on or is made from while larger; for a storage nothing made before forecasts, (c0 + Σ c0 over the
  // evicted ancestors the inputs' walk counts + half the dependents' walk's where it holds a kept value) / m.
  // `reads_classes`, if given: set where the a may read the classes (the walks stopped short of a storage the
  // program made before): elsewhere a report from the classes alone cannot change it (ForecastKey::reads_classes).
  // `walked`, if given: set where the a is a complete walk's cost for a storage the program holds, which an
  // eviction beside it only raises (the walks then reach more: at their depth they still count all they
  // counted) unless they stop at their count, and then it is the classes' a (ForecastKey::floored). Not a
  // fallback's: an eviction can complete a walk (a shorter way past the depth bound), and a walk's cost may be
  // below the classes'; nor a released storage's, whose 0 depends on what is held.
  double cost_per_byte(StorageView& s, bool* walked = nullptr, bool* reads_classes = nullptr) {
    const EvictedReach reach = walks_->reach(s, /*dependents=*/true);
    if (s.released() && reach.complete && !reach.holds_dependent && !feeds_larger_held(s)) return 0.0;
    if (!s.made_before()) {  // nothing forecast: its ancestors, half a held dependents' side; never floored
      const double dependents =
          charge_dependents_ && reach.holds_dependent ? (reach.cost - reach.inputs_cost) / 2.0 : 0.0;
      return (s.cost() + reach.inputs_cost + dependents) / bytes_of(s);
    }
    if (walked != nullptr) *walked = reach.complete && !s.released();
    if (reads_classes != nullptr) *reads_classes = !reach.complete;
    const bool class_cost =
        !reach.complete && (reach.count_cut || (reach.chain_cut && classes_->only_chain_classes_beside(s)));
    return class_cost ? classes_->key(s).a : (s.cost() + reach.cost) / bytes_of(s);
  }

  // forecast+reversal's a (above): the storage's own cost, and its region's unneeded ancestors', where the
  // region fits beside room for the reading op (its output and one more operand of the storage's size) in the
  // memory free at its next forecast use; cost_per_byte's elsewhere.
  double reversal_cost_per_byte(StorageView& s) {
    const auto deadline = s.made_before() ? s.forecast_deadline() : std::nullopt;
    if (!deadline) return cost_per_byte(s);
    const EvictedRegion region = region_(s);
    const double room = memory_.free_at(*deadline) - 2.0 * bytes_of(s);
    if (!region.complete || region.bytes > room) return cost_per_byte(s);
    return (s.cost() + region.unneeded_cost) / bytes_of(s);
  }

  // The score's denominator: the program ops until the forecast use (at least 1), or the staleness with the
  // first step's prior; score and score_floor divide by the same value.
  static double distance(StorageView& s) { return std::max(s.forecast_distance(), 1.0) + first_step_prior(s); }

  // The ops added to the staleness of a storage nothing made before forecasts, once the program has read it: a
  // quarter of the ops run under the budget by its last use (an integer, so that index and scan agree exactly).
  static double first_step_prior(const StorageView& s) {
    if (s.made_before() || !s.read_by_program()) return 0.0;
    return static_cast<double>(s.ops_run_at_last_use() / 4);
  }

  // Whether a resident value the program holds, larger than `s`, is made from it: cheaper per byte to evict
  // than `s`'s own size would say, it is likely to go and need `s` again (DenseNet's concatenations, each made
  // from a layer's new features, which the program releases once concatenated).
  static bool feeds_larger_held(StorageView& s) {
    bool found = false;
    s.for_each_dependent([&](StorageView& d) {
      found = found || (!d.evicted() && !d.released() && d.bytes() > s.bytes());
    });
    return found;
  }

  // One lineage event: both bases keep their state and report the scores it changes.
  void both(void (Heuristic::*event)(StorageView&), StorageView& s) {
    (classes_.get()->*event)(s);
    (walks_.get()->*event)(s);
  }

  // The classes' reports, passed on as what only a key that reads them sees: a storage whose walks count all
  // there is moves with the walks alone, and the walks report every change to it (h_DTR's index rests on that).
  struct ClassesRelay final : ScoreListener {
    ScoreListener* to = nullptr;
    void score_changed(StorageView& s) override { to->classes_changed(s); }
  };

  // The walks' reports, passed on; during an eviction with the classes' a now as the floor (sums kept up to
  // date: no walk), what a floored key's a can fall to (cost_per_byte).
  struct Relay final : ScoreListener {
    ScoreListener* to = nullptr;
    Heuristic* classes = nullptr;
    bool raising = false;
    void score_changed(StorageView& s) override {
      if (raising && !s.released() && !s.evicted() && s.index_handle != StorageView::kNotIndexed) {
        to->score_raised(s, classes->key(s).a);
      } else {
        to->score_changed(s);
      }
    }
  };

  std::unique_ptr<EvictedClasses> classes_;
  std::unique_ptr<EvictedNeighbourhood> walks_;
  const bool reversal_;
  bool charge_dependents_ = true;  // the first step's half of a held dependents' side (change_rule drops it)
  MemoryAtDeadline memory_;
  EvictedRegionSearch region_{kRegionLimit};
  Relay relay_;
  ClassesRelay classes_relay_;
};

}  // namespace

std::unique_ptr<Heuristic> make_forecast_heuristic() { return std::make_unique<ForecastHeuristic>(false); }
std::unique_ptr<Heuristic> make_forecast_reversal_heuristic() { return std::make_unique<ForecastHeuristic>(true); }

}  // namespace dtr::heuristics

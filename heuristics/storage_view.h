// What a heuristic may know of a storage: a narrow view, so that heuristics are unit-tested on hand-built
// graphs and know nothing of tensors, closures or kernels. Its virtual accessors only read; its public
// scratch fields are written: heuristic_slot, walk_slot, heuristic_mark and heuristic_sum by the heuristics,
// index_handle by the eviction index. The runtime's Storage implements it; tests implement it with a few fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>

#include "dtr/function_ref.h"

namespace dtr::heuristics {

class StorageView;

// What the graph walks pass to for_each_input/for_each_dependent: a callable taking a StorageView&, not owned
// (the walks' lambdas capture several references), that must not outlive the call it is passed to.
using NeighbourVisitor = FunctionRef<void(StorageView&)>;

class StorageView {
 public:
  virtual ~StorageView() = default;

  virtual std::size_t bytes() const = 0;
  // c0: the cost of recomputing it alone (its producer's cost).
  virtual double cost() const = 0;
  // The clock value of its last use (DTR_CLOCK: op counter or nanoseconds).
  virtual std::uint64_t last_access() const = 0;
  virtual bool evicted() const = 0;
  // A constant has no producer: never evicted nor recomputed, so no score of its is ever asked for.
  virtual bool constant() const { return false; }
  // Whether the program has released every handle to it: no handle is left to read it through or to make a
  // new one from, so only recomputations (of storages made from it) can read it again. Permanent once true.
  virtual bool released() const { return false; }
  // Program ops (calls and reads, not recomputations) until its next use, as forecast from the last storage
  // the program made the same way (runtime/forecast.h); its staleness in ops (recomputations included) where
  // nothing is forecast. Only for a heuristic whose reads_forecasts() is true (else the runtime keeps no
  // forecasts and this is 1).
  virtual double forecast_distance() { return 1.0; }
  // Whether the program made it and has not read it yet, while its forecast says the program will, and some
  // input it was made from (constants aside) had no forecast use ahead then: a value made to be read (a
  // gradient the backward engine reads next) whose remaking later would run back through inputs the program
  // drops. Only for a heuristic whose reads_forecasts() is true (else false).
  virtual bool forecast_unread() { return false; }
  // The program tick (program ops so far, as the forecast counts them) of its next forecast use, while one is
  // ahead; nullopt where its staleness stands in (forecast_distance() is this minus the program clock, or
  // its staleness). Only for a heuristic whose reads_forecasts() is true.
  virtual std::optional<std::uint64_t> forecast_deadline() { return std::nullopt; }
  // The ops clock (every kernel run, recomputations included) at its last use: forecast_distance() is
  // ops clock - this + 1 where nothing is forecast.
  virtual std::uint64_t last_use_op() const { return 0; }
  // Whether the program made a storage the same way before (the forecasts hold that one's uses, whether or not
  // one is still ahead of this one): false throughout the first step, and for a program that never repeats.
  virtual bool made_before() const { return false; }
  // Whether the program has read it since it was made (calls and reads; recomputations do not count).
  virtual bool read_by_program() const { return false; }
  // The ops clock's ticks from when the forecasts began (the first budget) to its last use: how long the
  // program had run under a budget by then. The three are only for a heuristic whose reads_forecasts() is true.
  virtual std::uint64_t ops_run_at_last_use() const { return 0; }
  // Visits the storages its recomputation reads (its producer's inputs) ...
  virtual void for_each_input(NeighbourVisitor visit) = 0;
  // ... and those whose recomputation reads it (the outputs of the closures that take it as input).
  virtual void for_each_dependent(NeighbourVisitor visit) = 0;

  // Scratch for the heuristics that own the runtime's decisions: h_DTR^eq's union-find node ...
  void* heuristic_slot = nullptr;
  // ... h_DTR's and h_MSPS's list of evicted readers (apart, as `forecast` keeps both h_DTR^eq's classes and
  // h_DTR's walks) ...
  void* walk_slot = nullptr;
  // ... and for their graph walks (the walk that last reached this storage; h_DTR^eq counts its marks up from
  // 1, the walks from 2^63, so that one storage can carry both) ...
  std::uint64_t heuristic_mark = 0;
  // ... and, while resident, the summed cost of the evicted classes next to it (h_DTR^eq keeps it current on
  // every lineage event, so that a score never walks the storage's dependents).
  double heuristic_sum = 0.0;
  // Owned by the eviction index: the storage's handle in it, while it is a candidate.
  static constexpr std::uint32_t kNotIndexed = static_cast<std::uint32_t>(-1);
  std::uint32_t index_handle = kNotIndexed;
};

}  // namespace dtr::heuristics

// Forecast next uses (the "forecast" heuristic, docs/heuristics.md): training repeats the same step, so the
// program's uses of a storage made the same way in the last step forecast the uses of the one made now.
// "The same way" is a structural signature: the op's name, the output's place and size, and its inputs'
// signatures (a constant's is its shape and dtype with how many of that shape are alive; an assigned value
// keeps the signature of the value it replaces, so that a parameter is the same input at every step). Nothing
// is planned ahead: a storage whose signature has not been seen falls back to its staleness.
// Internal to runtime/; driven by the runtime's thread. Kept only when the heuristic reads forecasts, and from
// when a budget is set (without one nothing is decided: an unbudgeted run records nothing).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/lineage.h"

namespace dtr::detail {

class Forecaster {
 public:
  // `ops_clock`: the runtime's ops clock now, when the forecasts begin.
  explicit Forecaster(std::uint64_t ops_clock) : began_ops_(ops_clock) {}
  // The ops clock when the forecasts began.
  std::uint64_t began_ops() const { return began_ops_; }
  // Program ops (calls, reads), not recomputations: the clock forecasts are counted in.
  std::uint64_t clock() const { return clock_; }
  // A program op starts: its inputs are used now.
  void program_op(std::span<const std::shared_ptr<Storage>> inputs);
  // A program read of `s` (to_host, materialize).
  void program_read(Storage& s);
  // `s` was just made by the program op that began last (its inputs are its producer's).
  void made(Storage& s, std::uint64_t op_hash);
  void made_constant(Storage& s);
  // `fresh` replaces `old` (Runtime::assign): it is the same value for the program's structure.
  static void replaces(Storage& fresh, const Storage& old) { fresh.signature = old.signature; }
  // Signatures whose last uses are kept (RuntimeFootprint::forecast_records).
  std::size_t records() const { return last_uses_.size(); }
  // `s` dies: its uses become the forecast for the next storage of its signature.
  void destroyed(Storage& s);
  // Program ops until `s`'s forecast next use; where nothing is forecast (no storage of its signature died
  // yet, or the forecast uses are all past: the program may still read it, and recomputations read it, which
  // no forecast sees), its staleness in ops, recomputations included (`ops_clock`), as h_DTR^eq has it.
  double distance(Storage& s, std::uint64_t ops_clock) const;
  // The program clock of `s`'s next forecast use (distance() is this minus clock() then); nullopt where none
  // is ahead.
  std::optional<std::uint64_t> next_use(Storage& s) const;
  // Whether the program has not used `s` since its birth while a forecast use of it is still ahead, and an
  // input it was made from (constants aside) had no forecast use ahead when it was made.
  bool unread_but_forecast(Storage& s) const;

 private:
  void use(Storage& s);
  // Moves `s`'s forecast cursor past the uses its age has passed; whether one is still ahead.
  bool forecast_ahead(Storage& s) const;
  std::uint64_t clock_ = 0;
  std::uint64_t began_ops_ = 0;
  // By signature: the program uses (offsets from its birth) of the last storage of that signature that died.
  std::unordered_map<std::uint64_t, std::shared_ptr<const std::vector<std::uint32_t>>> last_uses_;
  // By shape and dtype: how many constants that made_constant() signed are alive.
  std::unordered_map<std::uint64_t, std::uint64_t> live_constants_;
};

}  // namespace dtr::detail

// Structural signatures and the program's uses (runtime/forecast.h).
#include "runtime/forecast.h"

#include <algorithm>
#include <limits>

namespace dtr::detail {
namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

std::uint64_t meta_hash(const TensorMeta& meta) {
  std::uint64_t h = mix(0x5eed, static_cast<std::uint64_t>(meta.dtype));
  for (const std::int64_t d : meta.shape) h = mix(h, static_cast<std::uint64_t>(d));
  return h;
}

// A bound on the table, so that a program that never repeats (whose signatures never recur) does not grow it
// without end: past it, the table starts again (forecasts are lost; choices may worsen, results never change).
constexpr std::size_t kMaxSignatures = std::size_t{1} << 20;
// A bound on the uses recorded per storage, so that a long-lived computed value read at every step does not
// grow its list without end: the uses past it are not forecast (staleness decides there).
constexpr std::size_t kMaxUses = 4096;

}  // namespace

void Forecaster::program_op(std::span<const std::shared_ptr<Storage>> inputs) {
  clock_ += 1;
  for (const auto& s : inputs) use(*s);
}

void Forecaster::program_read(Storage& s) {
  clock_ += 1;
  use(s);
}

void Forecaster::use(Storage& s) {
  if (s.constant()) return;
  const std::uint64_t age = clock_ - s.born;
  if (s.uses.size() < kMaxUses && age <= std::numeric_limits<std::uint32_t>::max()) {
    s.uses.push_back(static_cast<std::uint32_t>(age));
  }
}

void Forecaster::made(Storage& s, std::uint64_t op_hash) {
  std::uint64_t h = mix(op_hash, s.output_index);
  h = mix(h, s.nbytes);
  for (std::size_t i = 0; i < s.producer->inputs.size(); ++i) {
    h = mix(h, s.producer->inputs[i]->signature);
    h = mix(h, s.producer->input_offset[i]);
    h = mix(h, static_cast<std::uint64_t>(s.producer->input_meta[i].numel()));
  }
  s.signature = h;
  s.born = clock_;
  const auto found = last_uses_.find(h);
  if (found != last_uses_.end()) s.forecast = found->second;
  s.inputs_read_again = !s.producer->inputs.empty();
  for (const std::shared_ptr<Storage>& input : s.producer->inputs) {
    if (!input->constant() && !forecast_ahead(*input)) s.inputs_read_again = false;
  }
}

void Forecaster::made_constant(Storage& s) {
  // Constants of one shape (a layer's weights, the query, key and value projections) differ by how many of
  // that shape the program holds when it makes one, which a repeating program repeats.
  s.constant_key = meta_hash(s.meta);
  const std::uint64_t ordinal = live_constants_[s.constant_key]++;
  s.signature = mix(s.constant_key, ordinal);
}

void Forecaster::destroyed(Storage& s) {
  if (s.constant_key != 0) {
    const auto found = live_constants_.find(s.constant_key);
    if (found != live_constants_.end() && --found->second == 0) live_constants_.erase(found);
  }
  // No uses forecast nothing (staleness decides either way): an output of an op that failed, or one never
  // read, does not replace what an earlier storage of its signature taught.
  if (s.signature == 0 || s.constant() || s.uses.empty()) return;
  if (last_uses_.size() >= kMaxSignatures) last_uses_.clear();
  last_uses_[s.signature] = std::make_shared<const std::vector<std::uint32_t>>(std::move(s.uses));
}

bool Forecaster::forecast_ahead(Storage& s) const {
  if (s.forecast == nullptr) return false;
  const std::uint64_t age = clock_ - s.born;
  const std::vector<std::uint32_t>& uses = *s.forecast;
  while (s.forecast_cursor < uses.size() && uses[s.forecast_cursor] <= age) s.forecast_cursor += 1;
  return s.forecast_cursor < uses.size();
}

double Forecaster::distance(Storage& s, std::uint64_t ops_clock) const {
  if (const std::optional<std::uint64_t> use = next_use(s)) return static_cast<double>(*use - clock_);
  return static_cast<double>(ops_clock - std::min(ops_clock, s.last_touch_ops) + 1);
}

std::optional<std::uint64_t> Forecaster::next_use(Storage& s) const {
  if (!forecast_ahead(s)) return std::nullopt;
  return s.born + (*s.forecast)[s.forecast_cursor];
}

bool Forecaster::unread_but_forecast(Storage& s) const {
  return s.uses.empty() && !s.inputs_read_again && forecast_ahead(s);
}

}  // namespace dtr::detail

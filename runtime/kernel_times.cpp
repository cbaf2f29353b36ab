#include "runtime/kernel_times.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <type_traits>
#include <variant>

namespace dtr::detail {

namespace {

std::uint64_t mix_metas(std::uint64_t h, std::span<const TensorMeta> metas) {
  h = mix_signature(h, metas.size());
  for (const TensorMeta& m : metas) {
    h = mix_signature(h, static_cast<std::uint64_t>(m.dtype));
    h = mix_signature(h, m.shape.size());
    for (const std::int64_t d : m.shape) h = mix_signature(h, static_cast<std::uint64_t>(d));
  }
  return h;
}

}  // namespace

bool KernelTimes::timed(std::uint64_t run) const {
  if (run <= timed_runs_) return true;
  if (run % timed_runs_ != 0) return false;
  const std::uint64_t multiple = run / timed_runs_;
  return (multiple & (multiple - 1)) == 0;  // N times a power of two
}

std::optional<std::uint64_t> KernelTimes::untimed_cost(std::uint64_t signature) {
  auto it = entries_.find(signature);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxSignatures) entries_.clear();
    it = entries_.emplace(signature, Entry{}).first;
  }
  Entry& e = it->second;
  e.runs += 1;
  // A signature none of whose timed runs finished (its kernel threw) is timed until one does.
  if (timed(e.runs) || e.least_ns == kNone) return std::nullopt;
  return e.least_ns;
}

// The least time of a signature's timed runs is its cost: noise (preemption, a cold cache) only ever adds.
void KernelTimes::record(std::uint64_t signature, std::uint64_t elapsed_ns) {
  const auto it = entries_.find(signature);
  if (it == entries_.end()) return;  // not counted by untimed_cost: nothing to learn from
  it->second.least_ns = std::min(it->second.least_ns, elapsed_ns);
}

std::uint64_t kernel_signature(const Computation& computation, std::span<const TensorMeta> inputs,
                               std::span<const TensorMeta> outputs) {
  std::uint64_t h = mix_signature(std::hash<std::string_view>{}(computation.name()), computation.cost_signature());
  return mix_metas(mix_metas(h, inputs), outputs);
}

std::uint64_t hash_attrs(const Attrs& attrs) {
  std::uint64_t h = 0;
  for (const auto& [name, value] : attrs.items()) {
    h = mix_signature(h, std::hash<std::string_view>{}(name));
    h = mix_signature(h, value.index());
    std::visit(
        [&h](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::int64_t>) {
            h = mix_signature(h, static_cast<std::uint64_t>(v));
          } else if constexpr (std::is_same_v<V, double>) {
            h = mix_signature(h, signature_bits(v));
          } else {
            h = mix_signature(h, v.size());
            for (const std::int64_t x : v) h = mix_signature(h, static_cast<std::uint64_t>(x));
          }
        },
        value);
  }
  return h;
}

}  // namespace dtr::detail

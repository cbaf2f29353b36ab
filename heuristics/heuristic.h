// Eviction heuristics: the lowest score is evicted first. Design section 5.
//
// Thread safety: a heuristic belongs to one runtime and is driven by its thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "heuristics/storage_view.h"

namespace dtr::heuristics {

class Heuristic {
 public:
  virtual ~Heuristic() = default;
  virtual std::string name() const = 0;
  // Score of a resident, evictable storage at clock `now`; lower is evicted first.
  virtual double score(StorageView& storage, std::uint64_t now) = 0;
  // Lineage events, for heuristics that keep state about evicted storages.
  virtual void on_evict(StorageView& /*storage*/) {}
  virtual void on_rematerialize(StorageView& /*storage*/) {}
  // The storage is gone for good; its slot must be released.
  virtual void on_destroy(StorageView& /*storage*/) {}
  // Bookkeeping objects the heuristic holds (union-find nodes): those of live storages and the ancestors they
  // still need; zero once every storage is destroyed.
  virtual std::size_t live_slots() const { return 0; }
};

// The seed of "random" (a seeded heuristic is reproducible; "random:SEED" picks another).
inline constexpr std::uint64_t kDefaultRandomSeed = 0x5eed;

// The accepted names: dtr, dtr-eq, dtr-local, lru, size, msps, random.
std::vector<std::string> heuristic_names();

// By name (design section 5; lowest score evicted first):
//   dtr        (c0 + Σ c0 over e*(t)) / (m·s), e* exact: evicted ancestors and descendants through evicted ones
//   dtr-eq     the same with e* approximated by union-find classes (the default)
//   dtr-local  c0 / (m·s)          lru   1 / s          size   1 / m
//   msps       (c0 + Σ c0 over evicted ancestors) / m
//   random     a seeded uniform draw ("random:SEED" for another seed)
// where c0 is the storage's own recompute cost, m its bytes and s its staleness (clock - last access + 1).
// Throws dtr::ConfigError naming `variable` and the accepted names otherwise.
std::unique_ptr<Heuristic> make_heuristic(std::string_view name, std::string_view variable = "DTR_HEURISTIC");

}  // namespace dtr::heuristics

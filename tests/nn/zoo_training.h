// Small training runs of the zoo's models, recorded bit for bit, for the exactness tests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dtr/nn/models.h"

namespace dtr::nn::test {

struct ZooCase {
  std::string name;
  std::function<std::shared_ptr<Sequential>(Runtime&, Generator&)> build;
  std::int64_t batch = 8;
  // The budgets tried, as fractions of the unbudgeted peak.
  std::vector<double> budgets = {0.5, 0.25};
};
// Small instances of every zoo model, dropout on (and the Transformer once more without it, where its
// attention is the fused op).
std::vector<std::string> zoo_case_names();
ZooCase zoo_case(const std::string& name);

struct RunOptions {
  std::optional<std::uint64_t> budget_bytes;  // bytes budget (resident storage bytes)
  std::string heuristic = "dtr-eq";
  EvictionSearch search = EvictionSearch::index;
  bool record_recomputations = false;  // fill TrainingRecord::recomputed
  std::int64_t checkpoint_segments = -1;  // -1: none; 0: round(√N)
  int steps = 3;
};

struct TrainingRecord {
  std::map<std::string, std::vector<std::uint8_t>> values;  // name -> the bits
  std::uint64_t peak_resident_bytes = 0;
  std::uint64_t evictions = 0;
  std::uint64_t rematerializations = 0;
  std::vector<std::uint64_t> recomputed;  // with record_recomputations: each recomputation's output storages
  std::set<std::string> recomputed_ops;   // with record_recomputations: the ops recomputed
  std::uint64_t ops = 0;
};

// `steps` steps of momentum SGD on cross-entropy (label smoothing 0.1) over fixed pseudo-random batches: the
// losses and gradients of every step, then the parameters, buffers and optimizer state.
TrainingRecord train_steps(const ZooCase& zoo, const RunOptions& options);

}  // namespace dtr::nn::test
